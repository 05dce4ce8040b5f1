package cuinterop_test

import (
	"fmt"
	"testing"

	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/cuinterop"
	"github.com/ulysses-go/ulysses/internal/check"
)

// placements are the device lists of the 2-rank groups the round trip
// runs on: two ranks on GPU 0, and on GPUs 0 and 1 where there are two.
func placements(tb testing.TB) [][]int {
	n, err := cu.NumDevices()
	if err != nil {
		tb.Fatalf("cu.NumDevices: %v", err)
	}
	ps := [][]int{{0, 0}}
	if n >= 2 {
		ps = append(ps, []int{0, 1})
	}
	return ps
}

// TestGorgoniaRoundTrip moves memory allocated and filled through
// gorgonia.org/cu through SendRecvHeads and GatherHeads on gorgonia
// streams in a 2-rank group (uneven tokens), and compares every output,
// copied back through gorgonia, with a2a/ref byte for byte. Outputs are
// poisoned before: one never written cannot pass. bf16 and fp8 (both
// element widths).
func TestGorgoniaRoundTrip(t *testing.T) {
	for _, devices := range placements(t) {
		for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
			t.Run(fmt.Sprintf("devices%v/%v", devices, dt), func(t *testing.T) { roundTrip(t, devices, dt) })
		}
	}
}

// poison fills every output before the operations.
const poison = 0xA5

// rankMem is one rank's memory of the round trip.
type rankMem struct {
	d                   *device
	x, shard, y, copied cu.DevicePtr // input, SendRecvHeadsInto's, GatherHeadsInto's, the view's copy
	stream              a2a.Stream
}

func roundTrip(t *testing.T, devices []int, dt a2a.DType) {
	lockThread()
	s := ref.Shape{Batch: 2, Heads: 8, HeadDim: 64, ElemSize: dt.Size(), Tokens: []int{24, 40}}
	in := make([][]byte, s.World())
	for r := range in {
		in[r] = make([]byte, s.RankInputBytes(r))
		ref.FillRandom(in[r], 18, r)
	}
	want, err := ref.SendRecvHeads(s, in)
	if err != nil {
		t.Fatal(err)
	}
	ranks := make([]rankMem, s.World())
	for r := range ranks {
		ranks[r] = newRankMem(t, devices[r], s, r, in[r])
	}
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: s.Batch * s.TotalTokens(), HiddenDim: s.Heads * s.HeadDim, DType: dt}, devices)
	if err != nil {
		t.Fatalf("a2a.NewGroup(%v): %v", devices, err)
	}
	defer g.Close()
	enqueueRoundTrip(t, g, s, dt, ranks)
	if err := g.Sync(); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	for r, m := range ranks {
		n := s.HeadShardBytesFor(r)
		for _, err := range []error{
			check.Compare(fmt.Sprintf("rank %d SendRecvHeadsInto", r), m.d.download(t, m.shard, n), want[r]),
			check.Compare(fmt.Sprintf("rank %d GatherHeadsInto", r), m.d.download(t, m.y, len(in[r])), in[r]),
			check.Compare(fmt.Sprintf("rank %d SendRecvHeads view", r), m.d.download(t, m.copied, n), want[r]),
		} {
			if err != nil {
				t.Error(err)
			}
		}
	}
}

// newRankMem uploads rank r's input on ordinal and allocates its
// poisoned outputs, all through gorgonia.
func newRankMem(t *testing.T, ordinal int, s ref.Shape, r int, in []byte) rankMem {
	d := openDevice(t, ordinal)
	st, err := cuinterop.Stream(d.stream)
	if err != nil {
		t.Fatalf("cuinterop.Stream: %v", err)
	}
	n := s.HeadShardBytesFor(r)
	return rankMem{d: d, x: d.upload(t, in), shard: d.alloc(t, n, poison), y: d.alloc(t, len(in), poison),
		copied: d.alloc(t, n, poison), stream: st}
}

// enqueueRoundTrip enqueues, on each rank's gorgonia stream and every rank
// before the next step: SendRecvHeadsInto a gorgonia buffer, GatherHeadsInto
// another from it, then SendRecvHeads into a view that a gorgonia copy on
// the same stream reads (cuinterop.DevicePtr). No host wait between.
func enqueueRoundTrip(t *testing.T, g *a2a.Group, s ref.Shape, dt a2a.DType, ranks []rankMem) {
	tensor := func(ptr cu.DevicePtr, shape [4]int) a2a.Tensor {
		x, err := cuinterop.Tensor(ptr, shape, dt)
		if err != nil {
			t.Fatalf("cuinterop.Tensor: %v", err)
		}
		return x
	}
	local := func(r int) [4]int { return [4]int{s.Batch, s.Tokens[r], s.Heads, s.HeadDim} }
	shard := func(r int) [4]int { _, h := s.HeadRange(r); return [4]int{s.Batch, s.TotalTokens(), h, s.HeadDim} }
	steps := []func(r int, ops a2a.StreamOps) error{
		func(r int, ops a2a.StreamOps) error {
			return ops.SendRecvHeadsInto(tensor(ranks[r].shard, shard(r)), tensor(ranks[r].x, local(r)))
		},
		func(r int, ops a2a.StreamOps) error {
			return ops.GatherHeadsInto(tensor(ranks[r].y, local(r)), tensor(ranks[r].shard, shard(r)))
		},
		func(r int, ops a2a.StreamOps) error {
			v, err := ops.SendRecvHeads(tensor(ranks[r].x, local(r)))
			if err != nil {
				return err
			}
			ranks[r].d.use(t)
			return cu.MemcpyDtoDAsync(ranks[r].copied, cuinterop.DevicePtr(v), v.Bytes(), ranks[r].d.stream)
		},
	}
	for r := range ranks {
		if err := g.Comm(r).SetRankTokens(s.Tokens); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range steps {
		for r := range ranks {
			if err := step(r, g.Comm(r).On(ranks[r].stream)); err != nil {
				t.Fatalf("step %d on rank %d: %v", i, r, err)
			}
		}
	}
}
