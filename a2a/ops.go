package a2a

import (
	"fmt"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/timing"
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
	r := plan.Single(op, x.internal())
	r.Heads = heads
	return c.run(r, dsts, nil, s)
}

// packed runs op of heads on the tensors xs on stream s: into dsts, or
// with views filled. Every packed operation of Comm and StreamOps is one.
func (c *Comm) packed(s driver.Stream, op ptx.Op, heads int, dsts, views, xs []Tensor) error {
	if len(xs) < 1 || len(xs) > plan.MaxTensors {
		return fmt.Errorf("a2a: %s of %d tensors: 1 to %d: %w", op, len(xs), plan.MaxTensors, ErrShape)
	}
	r := plan.Request{Op: op, N: len(xs), Heads: heads}
	for k, x := range xs {
		r.Xs[k] = x.internal()
	}
	if dsts == nil && views == nil {
		return fmt.Errorf("a2a: %s: no views or outputs to fill: %w", op, ErrShape)
	}
	_, err := c.run(r, dsts, views, s)
	return err
}

// ownStream stands for the Comm's own stream in run's argument, which is
// read under the lock (Close clears it).
const ownStream = driver.Stream(timing.Own)

// run validates, then enqueues r on stream s (ownStream or the caller's);
// nothing is enqueued on any error. With dsts (one per input) it copies
// each output there, else it stores each output's view in views (when
// given) and returns the first.
func (c *Comm) run(r plan.Request, dsts, views []Tensor, s driver.Stream) (Tensor, error) {
	if c == nil { // a zero Comm or StreamOps, not made by New or On
		return Tensor{}, fmt.Errorf("a2a: %s on a Comm that New did not make: %w", r.Op, ErrNotConnected)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(true); err != nil {
		return Tensor{}, err
	}
	if s == ownStream {
		s = c.stream
	}
	if c.tokens.Counts == nil {
		return Tensor{}, api.Prefixed(ErrTokensNotSet)
	}
	captured, err := c.capturing(s)
	if err != nil {
		return Tensor{}, err
	}
	if c.inCapture && !captured {
		return Tensor{}, fmt.Errorf("a2a: %s on stream %#x while CaptureGraph records this Comm: %w", r.Op, uintptr(s), ErrConfig)
	}
	planned := r
	if captured {
		if dsts != nil {
			return Tensor{}, fmt.Errorf("a2a: %s: the Into forms cannot be captured (their copy would keep the capture's size): read the view: %w", r.Op, ErrNotSupported)
		}
		if planned, err = c.withTokens(r, c.tokens); err != nil {
			return Tensor{}, err
		}
	}
	p, err := c.plan(planned, c.tokens)
	if err != nil {
		return Tensor{}, err
	}
	if p, err = c.t.PlanMover(p, planned, c.tokens, captured); err != nil {
		return Tensor{}, err // nothing enqueued: the Comm is not broken
	}
	half := c.halfOf(c.launches + 1)
	out := c.buf + driver.DevicePtr(c.halfOffset(c.launches+1))
	if err := c.checkPlacement(r, dsts, views, p, out); err != nil {
		return Tensor{}, err
	}
	if captured {
		return c.enqueueCaptured(r, p, planned, views, tp.LaunchSpec{Stream: s, Half: half, Captured: true}, out)
	}
	if err := c.orderBefore(s); err != nil {
		return Tensor{}, err // nothing enqueued: the Comm is not broken
	}
	if err := c.t.Enqueue(r.Op, p, planned.Xs[0], tp.LaunchSpec{Stream: s, Half: half}); err != nil {
		return Tensor{}, c.fail(err)
	}
	c.launches++
	for k := range dsts {
		if err := c.copyOut(dsts[k], out+driver.DevicePtr(int64(k)*p.Region), p, s); err != nil {
			return Tensor{}, c.fail(api.WrapDriver("copying the output", err))
		}
	}
	if err := c.orderAfter(s); err != nil {
		return Tensor{}, c.fail(err)
	}
	return outputViews(p, out, c.cfg.DType, views), nil
}

// copyOut copies the output at from (p.out, contiguous) into dst on s: one
// copy, row by row when dst has a token stride.
func (c *Comm) copyOut(out Tensor, from driver.DevicePtr, p plan.Plan, s driver.Stream) error {
	if p.OutBytes == 0 {
		return nil
	}
	dst := out.internal()
	if !api.Strided(dst) {
		return c.dev.ctx.MemcpyDtoDAsync(driver.DevicePtr(dst.Ptr), from, uint64(p.OutBytes), s)
	}
	es := int64(c.cfg.DType.Size())
	row := int64(p.Out[2]) * int64(p.Out[3]) * es
	rows := int64(p.Out[0]) * int64(p.Out[1])
	return c.dev.ctx.MemcpyRowsAsync(driver.DevicePtr(dst.Ptr), uint64(api.RowElems(dst)*es), from, uint64(row), uint64(row), uint64(rows), s)
}

// plan plans r under the token counts ts: the fp8 wire's entries when
// the Config asks for them, else the plain entries when they can run it,
// else the general ones.
func (c *Comm) plan(r plan.Request, ts plan.Tokens) (plan.Plan, error) {
	if c.cfg.Wire.Lossy() {
		return plan.Wire(r, api.DType(c.cfg.DType), api.Wire(c.cfg.Wire), c.cfg.Rank, c.cfg.WorldSize, ts, c.layout.DataBytes)
	}
	if r.NeedsGeneral(c.cfg.WorldSize) {
		return plan.General(r, api.DType(c.cfg.DType), c.cfg.Rank, c.cfg.WorldSize, ts, c.layout.DataBytes, c.t.Widths())
	}
	return plan.Plain(r.Op, r.Xs[0], api.DType(c.cfg.DType), c.cfg.Rank, c.cfg.WorldSize, ts, c.layout.DataBytes, c.t.Widths())
}

// outputViews stores the view of each tensor's output (at out, region
// bytes apart) in views, when given, and returns the first.
func outputViews(p plan.Plan, out driver.DevicePtr, dt DType, views []Tensor) Tensor {
	first := Tensor{Ptr: uintptr(out), Shape: p.Out, DType: dt}
	for k := range min(len(views), max(p.Tensors, 1)) {
		views[k] = first
		views[k].Ptr += uintptr(int64(k) * p.Region)
	}
	return first
}

// checkPlacement refuses an input in the half the operation writes (or in
// the signals and state after the data), output slices of the wrong
// length, and an Into output that is not a tensor of the output's shape
// (a token stride allowed) outside the Comm's buffer.
func (c *Comm) checkPlacement(r plan.Request, dsts, views []Tensor, p plan.Plan, out driver.DevicePtr) error {
	for k := range r.N {
		x := r.Xs[k]
		if plan.Overlaps(x.Ptr, api.Span(x), uintptr(out), c.layout.DataBytes) ||
			plan.Overlaps(x.Ptr, api.Span(x), uintptr(c.buf)+uintptr(c.layout.SignalOff), c.layout.Total-c.layout.SignalOff) {
			return fmt.Errorf("a2a: %s input %v lies in the part of the Comm's buffer that peers write during the operation: %w", r.Op, x, ErrAliased)
		}
	}
	if views != nil && len(views) != r.N {
		return fmt.Errorf("a2a: %s of %d tensors given %d views to fill: %w", r.Op, r.N, len(views), ErrShape)
	}
	if dsts == nil {
		return nil
	}
	if len(dsts) != r.N {
		return fmt.Errorf("a2a: %s of %d tensors given %d outputs: %w", r.Op, r.N, len(dsts), ErrShape)
	}
	for k := range dsts {
		dst := dsts[k].internal()
		if err := api.CheckTensor("output", dst, api.DType(c.cfg.DType), p.Out); err != nil {
			return api.Wrap(err, "%s output %d", r.Op, k)
		}
		if api.Strided(dst) && api.RowElems(dst)*int64(c.cfg.DType.Size()) > plan.MaxPitch {
			return fmt.Errorf("a2a: %s output %v: token stride over the %d-byte copy pitch: %w", r.Op, dst, int64(plan.MaxPitch), ErrNotSupported)
		}
		if plan.Overlaps(dst.Ptr, api.Span(dst), uintptr(c.buf), c.layout.Total) {
			return fmt.Errorf("a2a: %s output %v lies in the Comm's buffer: %w", r.Op, dst, ErrAliased)
		}
	}
	return nil
}

// halfOf is the data half operation number epoch writes: halves
// alternate; with a single half it is always 0.
func (c *Comm) halfOf(epoch uint64) uint32 {
	if c.layout.HalfBytes == 0 {
		return 0
	}
	return uint32(epoch & 1)
}

// halfOffset is where operation number epoch writes its output.
func (c *Comm) halfOffset(epoch uint64) int64 {
	return int64(c.halfOf(epoch)) * c.layout.HalfBytes
}
