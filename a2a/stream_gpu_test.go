package a2a_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
)

// streamSlots is how many iterations a rank queues on its stream between
// two host waits.
const streamSlots = 4

// TestCallerStream runs operations on streams the test made, as a caller
// with its own CUDA binding would: on each rank's stream an async copy
// writes fresh input right before each operation and another reads its
// view right after, with no host wait between; the host waits once every
// streamSlots iterations, then compares each output with the reference.
// 1000 iterations (200 with -short) cycling through the three operations
// and three token layouts (one with a rank holding none), a single-process
// group of 2, both element widths.
func TestCallerStream(t *testing.T) {
	info := requireGPU(t)
	devices := []int{0, 0}
	if len(info.Devices) >= 2 {
		devices = []int{0, 1}
	}
	iters := 1000
	if testing.Short() {
		iters = 200
	}
	for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
		t.Run(dt.String(), func(t *testing.T) {
			layouts := [][]int{{24, 40}, {17, 0}, {0, 9}}
			cases := make([]check.Case, len(layouts))
			for i, tokens := range layouts {
				cases[i] = check.Case{Name: "stream", Batch: 2, Tokens: tokens, Heads: 8, HeadDim: 64, DType: dt}
			}
			g := newTestGroup(t, devices, dt, cases)
			require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return streamIterations(t, c, cases, iters) }))
		})
	}
}

// streamSlot is one iteration's pinned input and output and what it expects.
type streamSlot struct {
	in, out, want []byte
	what          string
}

// streamIterations is one rank's part of TestCallerStream.
func streamIterations(t *testing.T, c *a2a.Comm, cases []check.Case, iters int) error {
	dev, rank := c.Device(), c.Rank()
	ts := a2a.NewTestStream(t, dev)
	maxTokens, hidden := check.Capacity(cases...)
	x, err := dev.Alloc([4]int{1, maxTokens, 1, hidden}, cases[0].DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	maxBytes := int(x.Bytes())
	var slots [streamSlots]struct{ in, out []byte }
	for i := range slots {
		if slots[i].in, err = ts.Pinned(maxBytes); err != nil {
			return err
		}
		if slots[i].out, err = ts.Pinned(maxBytes); err != nil {
			return err
		}
	}
	var queued []streamSlot
	for i := range iters {
		cs := cases[(i/50)%len(cases)]
		if i%50 == 0 {
			if err := c.SetRankTokens(cs.Tokens); err != nil {
				return err
			}
		}
		d, err := check.MakeData(cs, uint64(i), rank)
		if err != nil {
			return err
		}
		shape := cs.Shape()
		local := [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}
		shard := [4]int{cs.Batch, shape.TotalTokens(), cs.Heads / shape.World(), cs.HeadDim}
		slot := slots[i%streamSlots]
		var in, want []byte
		var op func(a2a.Tensor) (a2a.Tensor, error)
		var inShape [4]int
		ops := c.On(ts.Stream())
		switch i % 3 {
		case 0:
			in, want, op, inShape = d.X, d.Shard, ops.SendRecvHeads, local
		case 1:
			in, want, op, inShape = d.Shard, d.X, ops.GatherHeads, shard
		case 2:
			in, want, op, inShape = d.X, d.Gathered, ops.AllGather, local
		}
		xi := a2a.Tensor{Ptr: x.Ptr, Shape: inShape, DType: cs.DType}
		s := streamSlot{in: slot.in[:len(in)], out: slot.out[:len(want)], want: want, what: fmt.Sprintf("iteration %d (op %d, %v) on rank %d", i, i%3, cs.Tokens, rank)}
		copy(s.in, in)
		for j := range s.out {
			s.out[j] = 0xA5 // poison: an output never written cannot pass
		}
		if err := ts.Upload(xi, s.in); err != nil {
			return err
		}
		view, err := op(xi)
		if err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		if err := ts.Download(s.out, view); err != nil {
			return err
		}
		if queued = append(queued, s); len(queued) == streamSlots || i == iters-1 {
			if err := ts.Sync(); err != nil {
				return err
			}
			if err := c.Sync(); err != nil {
				return err
			}
			for _, q := range queued {
				if err := check.Compare(q.what, q.out, q.want); err != nil {
					return err
				}
			}
			queued = queued[:0]
		}
	}
	return nil
}
