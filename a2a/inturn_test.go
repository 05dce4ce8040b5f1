package a2a_test

import (
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
)

// inTurnRank is one rank's data for checkInTurn: tensor k made from
// seed+k, its dense inputs x (SendRecvHeads, AllGather) and y (GatherHeads,
// HeadAllGather), and, for the packed operations, the inputs as given
// (views into one fused tensor when the case is strided).
type inTurnRank struct {
	data     []check.Data
	xs, ys   []a2a.Tensor // dense, one per tensor
	pxs, pys []a2a.Tensor // the packed operations' inputs
	allocs   []a2a.Tensor
	dev      *a2a.Device
}

// inTurnOp is one operation of checkInTurn on one rank: it fills views
// and returns what each should hold.
type inTurnOp struct {
	name string
	run  func(c *a2a.Comm, rd *inTurnRank, views []a2a.Tensor) ([][]byte, error)
}

// checkInTurn enqueues each operation on every rank of g from this
// goroutine, then reads and compares every rank's views with the
// reference, then poisons the half it read (the one the operation after
// next writes): SendRecvHeads, GatherHeads (the packed form of one
// tensor, which takes the head count), AllGather, HeadAllGather, and
// with cs.Tensors > 1 the packed forms. No rank waits for another before
// all have enqueued, which is what a group in one goroutine needs.
func checkInTurn(g *a2a.Group, cs check.Case, seed uint64) error {
	n := max(cs.Tensors, 1)
	ranks := make([]*inTurnRank, g.Size())
	for r := range ranks {
		rd, err := newInTurnRank(g.Comm(r), cs, seed, n)
		if rd != nil {
			defer rd.free()
		}
		if err != nil {
			return err
		}
		ranks[r] = rd
	}
	for _, op := range inTurnOps(cs, n) {
		views := make([][]a2a.Tensor, g.Size())
		wants := make([][][]byte, g.Size())
		for r, rd := range ranks {
			views[r] = make([]a2a.Tensor, n)
			w, err := op.run(g.Comm(r), rd, views[r])
			if err != nil {
				return fmt.Errorf("%s on rank %d: %w", op.name, r, err)
			}
			wants[r] = w
		}
		for r, rd := range ranks {
			c := g.Comm(r)
			if err := c.Sync(); err != nil {
				return fmt.Errorf("%s on rank %d: %w", op.name, r, err)
			}
			for k, want := range wants[r] {
				got, err := rd.dev.Download(views[r][k])
				if err == nil {
					err = check.Compare(fmt.Sprintf("%s (in turn) tensor %d on rank %d", op.name, k, r), got, want)
				}
				if err != nil {
					return err
				}
			}
			if err := rd.dev.Fill(c.Buffer(), 0xA5); err != nil {
				return err
			}
		}
	}
	return nil
}

// inTurnOps are checkInTurn's operations for cs: two warm-ups that only
// poison both halves, then the checked ones.
func inTurnOps(cs check.Case, n int) []inTurnOp {
	one := func(f func(c *a2a.Comm, rd *inTurnRank) (a2a.Tensor, []byte, error)) func(*a2a.Comm, *inTurnRank, []a2a.Tensor) ([][]byte, error) {
		return func(c *a2a.Comm, rd *inTurnRank, views []a2a.Tensor) ([][]byte, error) {
			v, want, err := f(c, rd)
			views[0] = v
			return [][]byte{want}, err
		}
	}
	warm := one(func(c *a2a.Comm, rd *inTurnRank) (a2a.Tensor, []byte, error) {
		v, err := c.AllGather(rd.xs[0])
		return v, rd.data[0].Gathered, err
	})
	ops := []inTurnOp{
		{"warm-up", warm}, {"warm-up", warm},
		{"SendRecvHeads", one(func(c *a2a.Comm, rd *inTurnRank) (a2a.Tensor, []byte, error) {
			v, err := c.SendRecvHeads(rd.xs[0])
			return v, rd.data[0].Shard, err
		})},
		{"GatherHeads", one(func(c *a2a.Comm, rd *inTurnRank) (a2a.Tensor, []byte, error) {
			v, err := gatherHeadsOf(c, cs.Heads, rd.ys[0])
			return v, rd.data[0].X, err
		})},
		{"AllGather", warm},
		{"HeadAllGather", one(func(c *a2a.Comm, rd *inTurnRank) (a2a.Tensor, []byte, error) {
			v, err := c.HeadAllGather(cs.Heads, rd.ys[0])
			return v, rd.data[0].Gathered, err
		})},
	}
	if n < 2 {
		return ops
	}
	packed := func(name string, f func(c *a2a.Comm, rd *inTurnRank, views []a2a.Tensor) error, want func(d check.Data) []byte) inTurnOp {
		return inTurnOp{name, func(c *a2a.Comm, rd *inTurnRank, views []a2a.Tensor) ([][]byte, error) {
			wants := make([][]byte, n)
			for k := range wants {
				wants[k] = want(rd.data[k])
			}
			return wants, f(c, rd, views)
		}}
	}
	return append(ops,
		packed("SendRecvHeadsPacked", func(c *a2a.Comm, rd *inTurnRank, v []a2a.Tensor) error { return c.SendRecvHeadsPacked(v, rd.pxs) },
			func(d check.Data) []byte { return d.Shard }),
		packed("GatherHeadsPacked", func(c *a2a.Comm, rd *inTurnRank, v []a2a.Tensor) error {
			return c.GatherHeadsPacked(cs.Heads, v, rd.pys)
		},
			func(d check.Data) []byte { return d.X }))
}

// gatherHeadsOf is GatherHeads of heads in all: the packed form of one
// tensor, which takes the count (and the plain kernels when the world
// size divides it).
func gatherHeadsOf(c *a2a.Comm, heads int, y a2a.Tensor) (a2a.Tensor, error) {
	var v [1]a2a.Tensor
	err := c.GatherHeadsPacked(heads, v[:], []a2a.Tensor{y})
	return v[0], err
}

// newInTurnRank makes rank c's inputs of cs and sets its token counts.
func newInTurnRank(c *a2a.Comm, cs check.Case, seed uint64, n int) (*inTurnRank, error) {
	rank := c.Rank()
	_, heads := a2a.HeadRange(cs.Heads, len(cs.Tokens), rank)
	rd := &inTurnRank{dev: c.Device()}
	xShape := [4]int{cs.Batch, cs.Tokens[rank], cs.Heads, cs.HeadDim}
	yShape := [4]int{cs.Batch, cs.Shape().TotalTokens(), heads, cs.HeadDim}
	for k := range n {
		d, err := check.MakeData(cs, seed+uint64(k), rank)
		if err != nil {
			return rd, err
		}
		rd.data = append(rd.data, d)
		x, err := rd.upload(xShape, cs.DType, d.X)
		if err != nil {
			return rd, err
		}
		y, err := rd.upload(yShape, cs.DType, d.Shard)
		if err != nil {
			return rd, err
		}
		rd.xs, rd.ys = append(rd.xs, x), append(rd.ys, y)
	}
	rd.pxs, rd.pys = rd.xs, rd.ys
	if cs.Strided {
		var err error
		if rd.pxs, err = rd.fused(xShape, cs.DType, func(d check.Data) []byte { return d.X }); err != nil {
			return rd, err
		}
		if rd.pys, err = rd.fused(yShape, cs.DType, func(d check.Data) []byte { return d.Shard }); err != nil {
			return rd, err
		}
	}
	return rd, c.SetRankTokens(cs.Tokens)
}

func (rd *inTurnRank) upload(shape [4]int, dt a2a.DType, b []byte) (a2a.Tensor, error) {
	t, err := uploadNew(rd.dev, shape, dt, b)
	if err == nil {
		rd.allocs = append(rd.allocs, t)
	}
	return t, err
}

// fused uploads part of every tensor's data interleaved token by token
// into one [B, T, n*H', D] tensor and returns the n views into it.
func (rd *inTurnRank) fused(shape [4]int, dt a2a.DType, part func(check.Data) []byte) ([]a2a.Tensor, error) {
	n := len(rd.data)
	parts := make([][]byte, n)
	for k, d := range rd.data {
		parts[k] = part(d)
	}
	base, err := rd.upload(check.FusedShape(shape, n), dt, check.Fuse(parts, shape[2]*shape[3]*dt.Size()))
	if err != nil {
		return nil, err
	}
	return check.FusedViews(base.Ptr, shape, dt, n), nil
}

func (rd *inTurnRank) free() {
	for _, t := range rd.allocs {
		rd.dev.Free(t)
	}
}
