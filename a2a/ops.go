package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// SendRecvHeads scatters heads and gathers the sequence: x is this rank's
// [B, T_r, H, D]; the result is [B, T, H_rank, D] holding the heads
// HeadRange(H, P, rank) gives this rank (H/P each when P divides H; else
// the first H mod P ranks hold one more) of every token, in rank order. x
// may have a token stride (Tensor.RowStride). It is enqueued on the
// Comm's stream and returns a view into the Comm's buffer, valid until the
// next operation on this Comm. One kernel launch; no allocation. Uneven
// heads and strided inputs take the general kernels, which do a little
// more arithmetic per vector.
func (c *Comm) SendRecvHeads(x Tensor) (Tensor, error) {
	return c.one(ownStream, ptx.OpSendRecvHeads, 0, x, nil)
}

// SendRecvHeadsInto is SendRecvHeads writing into dst ([B, T, H/P, D]), at
// the cost of one device-local copy out of the Comm's buffer.
func (c *Comm) SendRecvHeadsInto(dst, x Tensor) error {
	_, err := c.one(ownStream, ptx.OpSendRecvHeads, 0, x, []Tensor{dst})
	return err
}

// GatherHeads is the inverse of SendRecvHeads: x is [B, T, H/P, D] holding
// this rank's heads of every token; the result is this rank's
// [B, T_r, H, D] with H = P times x's heads (for heads P does not divide,
// see GatherHeadsPacked). x may have a token stride. Asynchronous,
// returning a view valid until the next operation, like SendRecvHeads. x
// may be the view of the previous operation (the default double buffer
// keeps the two apart); with Config.SingleBuffer it must not lie in the
// Comm's buffer.
func (c *Comm) GatherHeads(x Tensor) (Tensor, error) {
	return c.one(ownStream, ptx.OpGatherHeads, 0, x, nil)
}

// GatherHeadsInto is GatherHeads writing into dst ([B, T_r, H, D]), at the
// cost of one device-local copy.
func (c *Comm) GatherHeadsInto(dst, x Tensor) error {
	_, err := c.one(ownStream, ptx.OpGatherHeads, 0, x, []Tensor{dst})
	return err
}

// AllGather gathers the sequence: x is this rank's [B, T_r, H, D]; the
// result is [B, T, H, D], the same on every rank. Asynchronous, returning a
// view valid until the next operation.
func (c *Comm) AllGather(x Tensor) (Tensor, error) {
	return c.one(ownStream, ptx.OpAllGather, 0, x, nil)
}

// AllGatherInto is AllGather writing into dst ([B, T, H, D]), at the cost of
// one device-local copy.
func (c *Comm) AllGatherInto(dst, x Tensor) error {
	_, err := c.one(ownStream, ptx.OpAllGather, 0, x, []Tensor{dst})
	return err
}

// SendRecvHeadsPacked is SendRecvHeads of 1 to 4 tensors of one shape and
// token stride (q, k and v; k and v) in one launch and one barrier, each
// into its own region of the Comm's buffer: views[k] (len(views) ==
// len(xs)) receives xs[k]'s result, valid until the next operation. The
// buffer must hold all outputs: see Config.MaxTensors. The results equal
// separate calls bit for bit. No allocation.
func (c *Comm) SendRecvHeadsPacked(views, xs []Tensor) error {
	return c.packed(ownStream, ptx.OpSendRecvHeads, 0, nil, views, xs)
}

// SendRecvHeadsPackedInto is SendRecvHeadsPacked writing xs[k]'s result
// into dsts[k], at the cost of one device-local copy per tensor.
func (c *Comm) SendRecvHeadsPackedInto(dsts, xs []Tensor) error {
	return c.packed(ownStream, ptx.OpSendRecvHeads, 0, dsts, nil, xs)
}

// GatherHeadsPacked is GatherHeads of 1 to 4 tensors of one shape in one
// launch, the inverse of SendRecvHeadsPacked: each xs[k] is
// [B, T, H_rank, D], this rank's heads of heads H in all (0: H_rank times
// the world size, which needs heads the world size divides), and views[k]
// receives its [B, T_r, H, D] result.
func (c *Comm) GatherHeadsPacked(heads int, views, xs []Tensor) error {
	return c.packed(ownStream, ptx.OpGatherHeads, heads, nil, views, xs)
}

// GatherHeadsPackedInto is GatherHeadsPacked writing into dsts, at the
// cost of one device-local copy per tensor.
func (c *Comm) GatherHeadsPackedInto(heads int, dsts, xs []Tensor) error {
	return c.packed(ownStream, ptx.OpGatherHeads, heads, dsts, nil, xs)
}

// HeadAllGather gathers heads: x is [B, T, H_rank, D], this rank's heads
// (HeadRange) of every token out of heads H in all (0: H_rank times the
// world size); the result, the same on every rank, is [B, T, H, D]. One
// launch, a view valid until the next operation, like AllGather.
func (c *Comm) HeadAllGather(heads int, x Tensor) (Tensor, error) {
	return c.one(ownStream, ptx.OpHeadAllGather, heads, x, nil)
}

// HeadAllGatherInto is HeadAllGather writing into dst, at the cost of one
// device-local copy.
func (c *Comm) HeadAllGatherInto(heads int, dst, x Tensor) error {
	_, err := c.one(ownStream, ptx.OpHeadAllGather, heads, x, []Tensor{dst})
	return err
}

// one runs op of heads (0 where the operation takes none) on the one
// input x on stream s: into dsts (one output) when given, else returning
// the view. Every single-tensor operation of Comm and StreamOps is one.
func (c *Comm) one(s driver.Stream, op ptx.Op, heads int, x Tensor, dsts []Tensor) (Tensor, error) {
	return c.run(s, op, heads, []Tensor{x}, dsts, nil)
}

// packed runs op of heads on the tensors xs on stream s: into dsts, or
// with views filled. Every packed operation of Comm and StreamOps is one.
func (c *Comm) packed(s driver.Stream, op ptx.Op, heads int, dsts, views, xs []Tensor) error {
	if len(xs) < 1 || len(xs) > plan.MaxTensors {
		return fmt.Errorf("a2a: %s of %d tensors: 1 to %d: %w", op, len(xs), plan.MaxTensors, ErrShape)
	}
	if dsts == nil && views == nil {
		return fmt.Errorf("a2a: %s: no views or outputs to fill: %w", op, ErrShape)
	}
	_, err := c.run(s, op, heads, xs, dsts, views)
	return err
}
