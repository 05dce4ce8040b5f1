package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// SendRecvHeads scatters heads and gathers the sequence: x is this rank's
// [B, T_r, H, D]; the result is [B, T, H/P, D] holding heads
// rank*H/P..(rank+1)*H/P-1 of every token, in rank order. It is enqueued on
// the Comm's stream and returns a view into the Comm's buffer, valid until
// the next operation on this Comm. One kernel launch; no allocation.
func (c *Comm) SendRecvHeads(x Tensor) (Tensor, error) {
	return c.own().SendRecvHeads(x)
}

// SendRecvHeadsInto is SendRecvHeads writing into dst ([B, T, H/P, D]), at
// the cost of one device-local copy out of the Comm's buffer.
func (c *Comm) SendRecvHeadsInto(dst, x Tensor) error {
	return c.own().SendRecvHeadsInto(dst, x)
}

// GatherHeads is the inverse of SendRecvHeads: x is [B, T, H/P, D] holding
// this rank's heads of every token; the result is this rank's
// [B, T_r, H, D]. Asynchronous, returning a view valid until the next
// operation, like SendRecvHeads. x may be the view of the previous
// operation (the default double buffer keeps the two apart); with
// Config.SingleBuffer it must not lie in the Comm's buffer.
func (c *Comm) GatherHeads(x Tensor) (Tensor, error) {
	return c.own().GatherHeads(x)
}

// GatherHeadsInto is GatherHeads writing into dst ([B, T_r, H, D]), at the
// cost of one device-local copy.
func (c *Comm) GatherHeadsInto(dst, x Tensor) error {
	return c.own().GatherHeadsInto(dst, x)
}

// AllGather gathers the sequence: x is this rank's [B, T_r, H, D]; the
// result is [B, T, H, D], the same on every rank. Asynchronous, returning a
// view valid until the next operation.
func (c *Comm) AllGather(x Tensor) (Tensor, error) {
	return c.own().AllGather(x)
}

// AllGatherInto is AllGather writing into dst ([B, T, H, D]), at the cost of
// one device-local copy.
func (c *Comm) AllGatherInto(dst, x Tensor) error {
	return c.own().AllGatherInto(dst, x)
}

// ownStream stands for the Comm's own stream in run's argument, which is
// read under the lock (Close clears it).
const ownStream = driver.Stream(^uintptr(0))

// own returns the operations on the Comm's own stream.
func (c *Comm) own() StreamOps { return StreamOps{c: c, s: ownStream} }

// run validates, then enqueues op on stream s (ownStream or the caller's);
// nothing is enqueued on any error.
func (c *Comm) run(op ptx.Op, x Tensor, dst *Tensor, s driver.Stream) (Tensor, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(true); err != nil {
		return Tensor{}, err
	}
	if s == ownStream {
		s = c.stream
	}
	if c.tokens.counts == nil {
		return Tensor{}, prefixed(ErrTokensNotSet)
	}
	captured, err := c.capturing(s)
	if err != nil {
		return Tensor{}, err
	}
	if c.inCapture && !captured {
		return Tensor{}, fmt.Errorf("a2a: %s on stream %#x while CaptureGraph records this Comm: %w", op, uintptr(s), ErrConfig)
	}
	planned := x
	if captured {
		if dst != nil {
			return Tensor{}, fmt.Errorf("a2a: %s: the Into forms cannot be captured (their copy would keep the capture's size): read the view: %w", op, ErrNotSupported)
		}
		if planned, err = c.capturedInput(op, x); err != nil {
			return Tensor{}, err
		}
	}
	p, err := planOp(op, planned, c.cfg.DType, c.cfg.Rank, c.cfg.WorldSize, c.tokens, c.layout.dataBytes, c.t.widths())
	if err != nil {
		return Tensor{}, err
	}
	half := c.halfOf(c.launches + 1)
	out := c.buf + driver.DevicePtr(c.halfOffset(c.launches+1))
	if err := c.checkPlacement(op, x, dst, p, out); err != nil {
		return Tensor{}, err
	}
	if captured {
		return c.enqueueCaptured(op, p, planned, x, launchSpec{stream: s, half: half, captured: true}, out)
	}
	if err := c.orderBefore(s); err != nil {
		return Tensor{}, err // nothing enqueued: the Comm is not broken
	}
	if err := c.t.enqueue(op, p, planned, launchSpec{stream: s, half: half}); err != nil {
		return Tensor{}, c.fail(err)
	}
	c.launches++
	if dst != nil && p.outBytes > 0 {
		if err := c.dev.ctx.MemcpyDtoDAsync(driver.DevicePtr(dst.Ptr), out, uint64(p.outBytes), s); err != nil {
			return Tensor{}, c.fail(wrapDriver("copying the output", err))
		}
	}
	if err := c.orderAfter(s); err != nil {
		return Tensor{}, c.fail(err)
	}
	return Tensor{Ptr: uintptr(out), Shape: p.out, DType: c.cfg.DType}, nil
}

// checkPlacement refuses an input in the half the operation writes (or in
// the signals and state after the data) and an Into output anywhere in
// the Comm's buffer.
func (c *Comm) checkPlacement(op ptx.Op, x Tensor, dst *Tensor, p opPlan, out driver.DevicePtr) error {
	if overlaps(x.Ptr, x.Bytes(), uintptr(out), c.layout.dataBytes) ||
		overlaps(x.Ptr, x.Bytes(), uintptr(c.buf)+uintptr(c.layout.signalOff), c.layout.total-c.layout.signalOff) {
		return fmt.Errorf("a2a: %s input %v lies in the part of the Comm's buffer that peers write during the operation: %w", op, x, ErrAliased)
	}
	if dst == nil {
		return nil
	}
	if err := checkTensor("output", *dst, c.cfg.DType, p.out); err != nil {
		return err
	}
	if overlaps(dst.Ptr, dst.Bytes(), uintptr(c.buf), c.layout.total) {
		return fmt.Errorf("a2a: %s output %v lies in the Comm's buffer: %w", op, *dst, ErrAliased)
	}
	return nil
}

// overlaps reports whether [ptr, ptr+n) meets [lo, lo+size).
func overlaps(ptr uintptr, n int64, lo uintptr, size int64) bool {
	if n <= 0 || size <= 0 {
		return false
	}
	return uint64(ptr) < uint64(lo)+uint64(size) && uint64(ptr)+uint64(n) > uint64(lo)
}

// halfOf is the data half operation number epoch writes: halves
// alternate; with a single half it is always 0.
func (c *Comm) halfOf(epoch uint64) uint32 {
	if c.layout.halfBytes == 0 {
		return 0
	}
	return uint32(epoch & 1)
}

// halfOffset is where operation number epoch writes its output.
func (c *Comm) halfOffset(epoch uint64) int64 {
	return int64(c.halfOf(epoch)) * c.layout.halfBytes
}
