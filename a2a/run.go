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

// ownStream stands for the Comm's own stream in run's argument, which is
// read under the lock (Close clears it).
const ownStream = driver.Stream(timing.Own)

// run enqueues op of heads on the inputs xs on stream s (ownStream or the
// caller's); nothing is enqueued on any error. It checks the call once
// into a plan.Request (request), which flows one way: plan.Make plans it,
// the transport adds its part and enqueues it. With dsts (one per input)
// it copies each output there, else it stores each output's view in
// views (when given) and returns the first.
func (c *Comm) run(s driver.Stream, op ptx.Op, heads int, xs, dsts, views []Tensor) (Tensor, error) {
	if c == nil { // a nil or zero Comm, or a StreamOps that On did not make
		return Tensor{}, fmt.Errorf("a2a: %s on a Comm that New did not make: %w", op, ErrNotConnected)
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
		return Tensor{}, fmt.Errorf("a2a: %s on stream %#x while CaptureGraph records this Comm: %w", op, uintptr(s), ErrConfig)
	}
	r, err := c.request(op, heads, xs, dsts, views)
	if err != nil {
		return Tensor{}, err
	}
	r.Captured = captured
	half := c.halfOf(c.launches + 1)
	p, err := plan.Make(r, c.env, c.tokens, half)
	if err != nil {
		return Tensor{}, err
	}
	if p, err = c.t.PlanMover(p, r, c.tokens); err != nil {
		return Tensor{}, err // nothing enqueued: the Comm is not broken
	}
	out := c.buf + driver.DevicePtr(c.layout.HalfOff(half))
	ls := tp.LaunchSpec{Stream: s, Half: half, Captured: captured}
	if captured {
		return c.enqueueCaptured(r, p, views, ls, out)
	}
	// Busy for the share's idleness check until orderAfter has marked
	// the operation's end (device.Member.Enqueuing says why), and inside
	// the enqueue gate that a load of PTX may close (device.BeginEnqueue).
	c.share.BeginEnqueue()
	defer c.share.EndEnqueue()
	c.member.Enqueuing.Store(true)
	defer c.member.Enqueuing.Store(false)
	if err := c.orderBefore(s); err != nil {
		return Tensor{}, err // nothing enqueued: the Comm is not broken
	}
	if err := c.t.Enqueue(p, ls); err != nil {
		return Tensor{}, c.fail(err)
	}
	c.launches++
	if r.Into {
		for k := range r.N {
			if err := c.copyOut(r.Dsts[k], out+driver.DevicePtr(int64(k)*p.Region), p, s); err != nil {
				return Tensor{}, c.fail(api.WrapDriver("copying the output", err))
			}
		}
	}
	if err := c.orderAfter(s); err != nil {
		return Tensor{}, c.fail(err)
	}
	return outputViews(p, out, c.cfg.DType, views), nil
}

// request checks the call's tensors once, each into a plan.Input
// (Tensor.input), and builds the one plan.Request of op that everything
// after reads: the inputs xs (1 to plan.MaxTensors), the outputs dsts
// when given (one per input), and the views to fill (one per input, when
// given).
func (c *Comm) request(op ptx.Op, heads int, xs, dsts, views []Tensor) (plan.Request, error) {
	r := plan.Request{Op: op, N: len(xs), Heads: heads, Into: dsts != nil}
	if views != nil && len(views) != r.N {
		return r, fmt.Errorf("a2a: %s of %d tensors given %d views to fill: %w", op, r.N, len(views), ErrShape)
	}
	if r.Into && len(dsts) != r.N {
		return r, fmt.Errorf("a2a: %s of %d tensors given %d outputs: %w", op, r.N, len(dsts), ErrShape)
	}
	var err error
	for k, x := range xs {
		if r.Xs[k], err = x.input(c.cfg.DType); err != nil {
			return r, api.Wrap(err, "%s input %d", op, k)
		}
	}
	for k, dst := range dsts {
		if r.Dsts[k], err = dst.input(c.cfg.DType); err != nil {
			return r, api.Wrap(err, "%s output %d", op, k)
		}
	}
	return r, nil
}

// copyOut copies the output at from (p.Out, contiguous) into dst on s: one
// copy, row by row when dst has a token stride.
func (c *Comm) copyOut(dst plan.Input, from driver.DevicePtr, p plan.Plan, s driver.Stream) error {
	if p.OutBytes == 0 {
		return nil
	}
	if !dst.Strided() {
		return c.dev.ctx.MemcpyDtoDAsync(driver.DevicePtr(dst.Ptr), from, uint64(p.OutBytes), s)
	}
	es := int64(c.cfg.DType.Size())
	row := int64(p.Out[2]) * int64(p.Out[3]) * es
	rows := int64(p.Out[0]) * int64(p.Out[1])
	return c.dev.ctx.MemcpyRowsAsync(driver.DevicePtr(dst.Ptr), uint64(dst.RowElems*es), from, uint64(row), uint64(row), uint64(rows), s)
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
	return c.layout.HalfOff(c.halfOf(epoch))
}
