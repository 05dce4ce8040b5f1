package transport

import (
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// SetArgsTokens puts the counts ts into a kernel argument: T_r of every
// rank and their prefix sums, zero past the world.
func SetArgsTokens(a *kernelabi.Args, ts plan.Tokens) {
	a.Tokens = [kernelabi.MaxRanks]int32{}
	a.Prefix = [kernelabi.MaxRanks + 1]int32{}
	for i, n := range ts.Counts {
		a.Tokens[i] = int32(n)
	}
	for i, n := range ts.Prefix {
		a.Prefix[i] = int32(n)
	}
}

// SetGeneralArgs puts the general entries' part of p into a kernel
// argument (the fp8 wire's entries read it too).
func SetGeneralArgs(a *kernelabi.Args, p plan.Plan) {
	a.Units = uint32(p.Units)
	a.Inputs = p.Inputs
	a.Region = uint64(p.Region)
	a.Heads = p.Heads
	a.Tensors = uint32(p.Tensors)
	a.HeadUnits = uint32(p.HeadUnits)
	a.InRow = uint32(p.InRow)
	a.WalkTotal = 0
	if p.WalkTotal {
		a.WalkTotal = 1
	}
}

// SetWireStaging puts where p's rows land in a data half over the fp8
// wire (codes and scale bytes after the outputs) and what the decode walks
// into a kernel argument: whether the output holds this rank's tokens
// (its operation's row, plan.Operation.Out) among them.
func SetWireStaging(a *kernelabi.Args, p plan.Plan) {
	a.Stage, a.StageRegion = uint64(p.StageOff), uint64(p.StageRegion)
	a.Scales, a.ScaleRegion = uint64(p.ScaleOff), uint64(p.ScaleRegion)
	a.WireRows = uint32(p.WireRows)
	a.OutHeads = uint32(p.Out[2])
	a.OutRankTokens = 0
	if plan.Lookup(p.Op).Out&plan.RankTokens != 0 {
		a.OutRankTokens = 1
	}
}

// wireBytesPerBlock is how many bytes one block of the fp8 wire's local
// launches (the IPC decode, NCCL's pack and unpack) takes at least: four
// passes of a block of 512 threads writing 8 bytes each. (Not measured
// yet: a first guess between one block per pass, which small operations
// would wait on to launch, and a long serial loop per thread.)
const wireBytesPerBlock = 16 << 10

// WireBlocks is the grid of such a launch over bytes: one block per
// wireBytesPerBlock, at least one, at most most.
func WireBlocks(bytes int64, most int) int {
	return int(min(max(bytes/wireBytesPerBlock, 1), int64(max(most, 1))))
}
