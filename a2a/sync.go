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
	if c.closing {
		return prefixed(ErrClosed)
	}
	c.cfg.Timeout = d
	c.t.setTimeout(d)
	return nil
}

// Sync waits for every queued operation and reports a barrier that timed
// out (*TimeoutError, matched by ErrTimeout) or a CUDA error; either leaves
// the Comm broken. It waits without holding the Comm: other methods go on
// meanwhile, and a Close made while it waits ends the device's waits for
// peers, so that Sync returns within about 1 ms with an error matching
// ErrClosed (or nil, if the operations had completed).
func (c *Comm) Sync() error { return c.wait(true) }

// waitQueued waits for the operations queued on the Comm (a memory helper
// touching its buffer depends on them) and reports a failure as Sync does.
// A closed Comm has nothing queued.
func (c *Comm) waitQueued() error { return c.wait(false) }

// wait waits for the Comm's stream without the lock and reports a failure.
// A broken Comm does not wait: it says so, not what the driver says now.
// While it waits, Close waits for it (see Close). forSync: a closed Comm
// is an error, and an idle one is a moment to release what closed Comms
// left behind.
func (c *Comm) wait(forSync bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		if forSync {
			return prefixed(ErrClosed)
		}
		return nil
	}
	if c.failure == nil {
		c.waiting++
		c.mu.Unlock()
		err := c.dev.ctx.StreamSynchronize(c.stream)
		c.mu.Lock()
		if c.waiting--; c.waiting == 0 {
			c.changed.Broadcast()
		}
		if err != nil {
			return c.fail(wrapDriver("running the collective", err))
		}
	}
	if err := c.broken(); err != nil {
		return err
	}
	if forSync && !c.closing {
		c.share.tryDrainLater()
	}
	return nil
}
