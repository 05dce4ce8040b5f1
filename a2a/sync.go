package a2a

import (
	"fmt"
	"time"
)

// SetTimeout sets the bound on every barrier wait of later operations.
func (c *Comm) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("a2a: timeout %v must be positive: %w", d, ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return prefixed(ErrClosed)
	}
	c.cfg.Timeout = d
	c.t.setTimeout(d)
	return nil
}

// Sync waits for every queued operation and reports a barrier that timed
// out (*TimeoutError, matched by ErrTimeout) or a CUDA error; either leaves
// the Comm broken.
func (c *Comm) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return prefixed(ErrClosed)
	}
	if err := c.waitLocked(); err != nil {
		return err
	}
	// This Comm is idle now; others may be too: a moment to release what
	// closed Comms left behind.
	c.share.tryDrainLater()
	return nil
}

// waitQueued waits for the operations queued on the Comm (a memory helper
// touching its buffer depends on them) and reports a failure as Sync does.
// A closed Comm has nothing queued.
func (c *Comm) waitQueued() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	return c.waitLocked()
}

// waitLocked waits for the Comm's stream, with the lock held, and reports a
// failure. A broken Comm does not wait: it says so, not what the driver
// says now.
func (c *Comm) waitLocked() error {
	if c.failure == nil {
		if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
			return c.fail(wrapDriver("running the collective", err))
		}
	}
	return c.usable(false)
}
