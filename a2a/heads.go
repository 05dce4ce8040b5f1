package a2a

import "github.com/ulysses-go/ulysses/internal/plan"

// HeadRange returns the heads rank holds when heads are split over world
// ranks (SendRecvHeads' output, GatherHeads' and HeadAllGather's input):
// count heads from first. Each rank gets heads/world and the first
// heads%world ranks one more, so counts differ by at most one and the
// ranges tile [0, heads) in rank order. It costs nothing; with heads
// divisible by world it is rank*heads/world, heads/world. A rank outside
// [0, world) or negative heads give 0, 0.
func HeadRange(heads, world, rank int) (first, count int) { return plan.HeadRange(heads, world, rank) }
