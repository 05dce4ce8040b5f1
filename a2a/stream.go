package a2a

import (
	"fmt"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// Stream is a CUDA stream handle (a CUstream) of the caller's, made by any
// binding or the runtime API of this process in the primary context of the
// Comm's device; 0 is the legacy default stream.
type Stream uintptr

// StreamOps enqueues a Comm's operations on a stream of the caller's; see
// Comm.On. Its operations are the Comm's, on that stream. It is a small
// value: make one per call or keep it.
type StreamOps struct {
	ops
}

// On returns the Comm's operations enqueued on s instead of the Comm's own
// stream, so that they run between the caller's kernels with no host
// synchronisation: an operation on s reads its input after the work
// queued on s before it, and work queued on s after it sees its complete
// output (view or Into destination). The Comm keeps its operations in
// order across streams: an operation on another stream than the previous
// one waits for it (one cuEventRecord and one cuStreamWaitEvent on the
// switch; on a caller's stream, a cuStreamIsCapturing before and one
// cuEventRecord after each operation). No allocation, no host wait. On a
// stream being captured the operations are captured instead (see Graph).
//
// A view stays valid, and Comm.Buffer the caller's, until the next
// operation of the Comm starts on the device. The ranks' operations of one
// collective run concurrently, so two Comms of one group (NewGroup) must
// not use the same stream for it. Sync and Close wait for the operations
// on every stream used.
func (c *Comm) On(s Stream) StreamOps { return StreamOps{ops{c: c, s: driver.Stream(s)}} }

// runPacked runs op on the tensors xs: into dsts, or with views filled.
func (o ops) runPacked(op ptx.Op, heads int, dsts, views, xs []Tensor) error {
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
	_, err := o.c.run(r, dsts, views, o.s)
	return err
}

// orderBefore makes s wait for the Comm's previous operation when that one
// went to another stream. c.tail marks the end of the previous operation
// when it ran on a caller's stream; on the Comm's own stream it is
// recorded here. Called with the lock held; a failure enqueued nothing
// that matters, so it does not break the Comm.
func (c *Comm) orderBefore(s driver.Stream) error {
	if s == c.lastStream {
		return nil
	}
	if s != c.stream {
		own, err := c.dev.ctx.OwnsStream(s)
		if err != nil {
			return fmt.Errorf("a2a: stream %#x: %w: %w", uintptr(s), ErrStream, err)
		}
		if !own {
			return fmt.Errorf("a2a: stream %#x is not a stream of device %d's primary context: %w", uintptr(s), c.dev.info.Ordinal, ErrStream)
		}
	}
	if c.lastStream == c.stream {
		if err := c.dev.ctx.EventRecord(c.tail, c.stream); err != nil {
			return api.WrapDriver("marking the Comm's stream", err)
		}
	}
	if err := c.dev.ctx.StreamWaitEvent(s, c.tail); err != nil {
		return fmt.Errorf("a2a: ordering stream %#x after the previous operation: %w: %w", uintptr(s), ErrStream, err)
	}
	return nil
}

// orderAfter marks the end of an operation enqueued on a caller's stream
// (c.tail), which the next operation elsewhere, Sync, Close and the
// share's idleness check go by.
func (c *Comm) orderAfter(s driver.Stream) error {
	c.lastStream = s
	if s == c.stream {
		return nil
	}
	if err := c.dev.ctx.EventRecord(c.tail, s); err != nil {
		return api.WrapDriver("marking the end of the operation", err)
	}
	return nil
}

// waitDevice waits, without the lock, for the Comm's operations: on its own
// stream, or through c.tail when the last one ran on a caller's stream
// (the earlier ones are ordered before it). onCaller is lastStream !=
// stream as read under the lock, and t the transport, read there too: one
// without a timeout of its own (NCCL) polls.
func (c *Comm) waitDevice(onCaller bool, t tp.Transport) error {
	if t == nil {
		return nil // not connected: nothing was enqueued
	}
	return t.Wait(onCaller, c.tail)
}

// joinOwnStream orders the Comm's own stream after an operation on a
// caller's stream, so that what Close enqueues there comes after it.
func (c *Comm) joinOwnStream() error {
	if c.lastStream == c.stream {
		return nil
	}
	if err := c.dev.ctx.StreamWaitEvent(c.stream, c.tail); err != nil {
		return api.WrapDriver("ordering Close after the last operation", err)
	}
	c.lastStream = c.stream
	return nil
}
