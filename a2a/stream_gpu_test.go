package a2a_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
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
// and three token layouts (one with a rank holding none), single-process
// groups of 2 on every pairPlacements placement, both element widths.
func TestCallerStream(t *testing.T) {
	info := requireGPU(t)
	iters := iterations()
	eachPairGroup(t, info, "", streamCases, func(t *testing.T, g *a2a.Group, cases []check.Case, _ a2a.DType) {
		require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return streamIterations(t, c, cases, iters) }))
	})
}

// streamCases are the token layouts the stream tests cycle through (one
// with a rank holding none), a group of 2.
func streamCases(_ int, dt a2a.DType) []check.Case {
	var cases []check.Case
	for _, tokens := range [][]int{{24, 40}, {17, 0}, {0, 9}} {
		cases = append(cases, check.Case{Name: "stream", Batch: 2, Tokens: tokens, Heads: 8, HeadDim: 64, DType: dt})
	}
	return cases
}

// layoutAt is the case of iteration i: the token layout changes every 50
// iterations, and at a change layoutAt sets the Comm's counts.
func layoutAt(c *a2a.Comm, cases []check.Case, i int) (check.Case, error) {
	cs := cases[(i/50)%len(cases)]
	if i%50 != 0 {
		return cs, nil
	}
	return cs, c.SetRankTokens(cs.Tokens)
}

// streamSlot is one iteration's pinned input and output and what it expects.
type streamSlot struct {
	in, out, want []byte
	what          string
}

// allocCapacity allocates on dev a [1, maxTokens, 1, hidden] tensor of the
// cases' type, with check.Capacity's counts: room for any case's output.
func allocCapacity(dev *a2a.Device, cases []check.Case) (a2a.Tensor, error) {
	maxTokens, hidden := check.Capacity(cases...)
	return dev.Alloc([4]int{1, maxTokens, 1, hidden}, cases[0].DType)
}

// streamIterations is one rank's part of TestCallerStream.
func streamIterations(t *testing.T, c *a2a.Comm, cases []check.Case, iters int) error {
	dev, rank := c.Device(), c.Rank()
	ts := a2a.NewTestStream(t, dev)
	x, err := allocCapacity(dev, cases)
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
		cs, err := layoutAt(c, cases, i)
		if err != nil {
			return err
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

// TestCallerStreamKernels is TestCallerStream with kernels of the test on
// each rank's stream instead of copies: one writes the input right before
// each operation, another copies the view out right after, with no host
// wait between; every streamSlots iterations the host waits and compares
// the copies with the reference, then poisons them again.
func TestCallerStreamKernels(t *testing.T) {
	info := requireGPU(t)
	iters := iterations()
	eachPairGroup(t, info, "", streamCases, func(t *testing.T, g *a2a.Group, cases []check.Case, _ a2a.DType) {
		kernels := make([]*a2a.TestKernels, g.Size())
		for r := range kernels { // before any operation: a module load waits for the device
			tk, err := a2a.LoadTestKernels(g.Comm(r).Device())
			require.NoError(t, err)
			kernels[r] = tk
		}
		require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return kernelIterations(t, c, kernels[c.Rank()], cases, iters) }))
		require.NoError(t, g.Sync())
		for _, tk := range kernels {
			require.NoError(t, tk.Close())
		}
	})
}

// patternInputs are every rank's inputs of one iteration, as the fill
// kernel writes them: x (SendRecvHeads, AllGather) and the head shard
// (GatherHeads).
func patternInputs(cs check.Case, iter int) (xs, shards [][]byte) {
	s := cs.Shape()
	for r := range s.World() {
		x, y := make([]byte, s.RankInputBytes(r)), make([]byte, s.HeadShardBytesFor(r))
		for i := range x {
			x[i] = a2a.Pattern(uint64(2*iter*8+r), i)
		}
		for i := range y {
			y[i] = a2a.Pattern(uint64((2*iter+1)*8+r), i)
		}
		xs, shards = append(xs, x), append(shards, y)
	}
	return xs, shards
}

// kernelIterations is one rank's part of TestCallerStreamKernels.
func kernelIterations(t *testing.T, c *a2a.Comm, tk *a2a.TestKernels, cases []check.Case, iters int) error {
	dev, rank := c.Device(), c.Rank()
	ts := a2a.NewTestStream(t, dev)
	x, err := allocCapacity(dev, cases)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	var slots [streamSlots]a2a.Tensor
	for i := range slots {
		if slots[i], err = allocCapacity(dev, cases); err != nil {
			return err
		}
		defer dev.Free(slots[i])
		if err := dev.Fill(slots[i], 0xA5); err != nil {
			return err
		}
	}
	type queued struct {
		want []byte
		what string
	}
	var pending []queued
	for i := range iters {
		cs, err := layoutAt(c, cases, i)
		if err != nil {
			return err
		}
		s := cs.Shape()
		xs, shards := patternInputs(cs, i)
		local := [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}
		shard := [4]int{cs.Batch, s.TotalTokens(), cs.Heads / s.World(), cs.HeadDim}
		ops := c.On(ts.Stream())
		var op func(a2a.Tensor) (a2a.Tensor, error)
		var inShape [4]int
		var seed uint64
		var want []byte
		switch i % 3 {
		case 0:
			op, inShape, seed = ops.SendRecvHeads, local, uint64(2*i*8+rank)
			want = make([]byte, s.HeadShardBytesFor(rank))
			err = ref.SendRecvHeadsFor(s, rank, xs, want)
		case 1:
			op, inShape, seed = ops.GatherHeads, shard, uint64((2*i+1)*8+rank)
			want = make([]byte, s.RankInputBytes(rank))
			err = ref.GatherHeadsFor(s, rank, shards, want)
		case 2:
			op, inShape, seed = ops.AllGather, local, uint64(2*i*8+rank)
			want = make([]byte, s.GatheredBytes())
			err = ref.AllGatherFor(s, rank, xs, want)
		}
		if err != nil {
			return err
		}
		xi := a2a.Tensor{Ptr: x.Ptr, Shape: inShape, DType: cs.DType}
		what := fmt.Sprintf("iteration %d (op %d, %v) on rank %d", i, i%3, cs.Tokens, rank)
		if err := tk.Fill(ts, xi, seed); err != nil {
			return err
		}
		view, err := op(xi)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := tk.Copy(ts, slots[i%streamSlots], view, int64(len(want))); err != nil {
			return err
		}
		if pending = append(pending, queued{want, what}); len(pending) == streamSlots || i == iters-1 {
			if err := errors.Join(ts.Sync(), c.Sync()); err != nil {
				return err
			}
			for k, q := range pending {
				got, err := dev.Download(slots[k])
				if err != nil {
					return err
				}
				if err := check.Compare(q.what, got[:len(q.want)], q.want); err != nil {
					return err
				}
				if err := dev.Fill(slots[k], 0xA5); err != nil {
					return err
				}
			}
			pending = pending[:0]
		}
	}
	return nil
}
