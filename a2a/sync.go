package a2a

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// SetTimeout sets the bound on every barrier wait of later operations.
func (c *Comm) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("a2a: timeout %v must be positive: %w", d, ErrConfig)
	}
	if !c.made() {
		return unmade("SetTimeout")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return api.Prefixed(ErrClosed)
	}
	c.cfg.Timeout = d
	if c.t != nil {
		c.t.SetTimeout(d)
	}
	return nil
}

// Sync waits for every queued operation and reports a barrier that timed
// out (*TimeoutError, matched by ErrTimeout) or a CUDA error; either leaves
// the Comm broken. It waits without holding the Comm: other methods go on
// meanwhile, and a Close made while it waits ends the device's waits for
// peers, so that Sync returns within about 1 ms with an error matching
// ErrClosed (or nil, if the operations had completed).
func (c *Comm) Sync() error {
	if !c.made() {
		return unmade("Sync")
	}
	return c.wait(true)
}

// SyncContext is Sync bounded by ctx. If ctx ends first, it ends the
// device's waits for peers as Close does (within about 1 ms) and returns
// ctx's error once the wait has ended (work of the caller's queued before
// the Comm's last operation on its stream is still waited for). The Comm
// is then broken: the operations that were waiting failed (ErrAborted),
// and so does every later one; Close it. Peers in the middle of those
// operations with this rank fail too, once this rank closes or their
// timeout passes. It costs a goroutine per call.
func (c *Comm) SyncContext(ctx context.Context) error {
	if !c.made() {
		return unmade("SyncContext")
	}
	done := make(chan error, 1)
	go func() { done <- c.Sync() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !c.closing && c.t != nil {
		c.t.Abort(false)
	}
	c.mu.Unlock()
	err := <-done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failure == nil && !c.closing {
		// The operations had completed before the abort took effect, but
		// the abort word stays set: later waits would end at once.
		c.fail(api.Wrap(ErrAborted, "rank %d's Sync context ended, which aborts the Comm's waits for good", c.cfg.Rank))
	}
	if err == nil || errors.Is(err, ErrAborted) {
		return api.Wrap(ctx.Err(), "Sync")
	}
	return errors.Join(api.Wrap(ctx.Err(), "Sync"), err)
}

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
			return api.Prefixed(ErrClosed)
		}
		return nil
	}
	if c.failure == nil {
		c.waiting++
		onCaller, t := c.lastStream != c.stream, c.t
		c.mu.Unlock()
		err := c.waitDevice(onCaller, t)
		c.mu.Lock()
		if c.waiting--; c.waiting == 0 {
			c.changed.Broadcast()
		}
		if err != nil {
			return c.fail(api.WrapDriver("running the collective", err))
		}
	}
	if err := c.broken(); err != nil {
		return err
	}
	if forSync && !c.closing {
		c.share.TryDrainLater()
	}
	return nil
}
