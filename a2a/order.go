package a2a

import (
	"fmt"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

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
