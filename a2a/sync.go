package a2a

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// SetTimeout sets the bound on every barrier wait of later operations.
func (c *Comm) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("a2a: timeout %v must be positive: %w", d, ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.cfg.Timeout = d
	c.args.TimeoutNs = uint64(d.Nanoseconds())
	return nil
}

// Sync waits for every queued operation and reports a barrier that timed
// out (*TimeoutError, matched by ErrTimeout) or a CUDA error; either leaves
// the Comm broken.
func (c *Comm) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.failure != nil {
		return c.usable(false) // already broken: say so, not what the driver says now
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		return c.fail(wrapDriver("running the collective", err))
	}
	return c.usable(false)
}

// usable returns nil when an operation may be enqueued: not closed, not
// broken (a timeout recorded by the device counts), and connected if
// needConnect. The first failure is returned as itself once, then wrapped
// in ErrBroken.
func (c *Comm) usable(needConnect bool) error {
	if c.closed {
		return ErrClosed
	}
	if c.failure == nil {
		if t := c.timeoutFromDevice(); t != nil {
			c.failure = t
		}
	}
	if c.failure != nil {
		if !c.reported {
			c.reported = true
			return c.failure
		}
		return fmt.Errorf("%w: %w", ErrBroken, c.failure)
	}
	if needConnect && !c.connected {
		return ErrNotConnected
	}
	return nil
}

// fail records err as the Comm's failure (if it is the first) and returns
// it for the caller to report: later calls get ErrBroken.
func (c *Comm) fail(err error) error {
	if c.failure == nil {
		c.failure = err
		c.reported = true
	}
	return err
}

func (c *Comm) timeoutFromDevice() *TimeoutError {
	st := (*statusWord)(c.statusHost)
	if atomic.LoadUint32(&st.Code) == 0 {
		return nil
	}
	return &TimeoutError{
		Rank: int(atomic.LoadUint32(&st.Rank)), Peer: int(atomic.LoadUint32(&st.Peer)),
		Phase: Phase(atomic.LoadUint32(&st.Phase)), Epoch: atomic.LoadUint32(&st.Epoch),
		Block: int(atomic.LoadUint32(&st.Block)), Timeout: time.Duration(c.args.TimeoutNs),
	}
}

// Close waits for queued operations, meets every peer at a barrier (bounded
// by the timeout) so that no peer is still signalling into this buffer,
// then unmaps the peers and frees everything. It is idempotent; the Comm
// is unusable afterwards. It returns what went wrong on the way (a timed-out
// close barrier included), having released everything regardless.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var errs []error
	if c.connected && c.usable(true) == nil {
		c.args.Active = uint32(c.blocks)
		if err := c.launch(c.barrier); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		errs = append(errs, wrapDriver("waiting for queued operations", err))
	}
	if c.failure == nil {
		if t := c.timeoutFromDevice(); t != nil {
			errs = append(errs, t)
		}
	}
	c.closed = true
	errs = append(errs, c.unmapPeers(), c.release())
	return errors.Join(errs...)
}

// release frees what init acquired; safe on a partly initialised Comm.
func (c *Comm) release() error {
	ctx := c.dev.ctx
	var errs []error
	keep := func(what string, err error) {
		if err != nil {
			errs = append(errs, wrapDriver(what, err))
		}
	}
	if c.buf != 0 {
		keep("freeing the buffer", ctx.MemFree(c.buf))
		c.buf = 0
	}
	if c.statusHost != nil {
		keep("freeing the status word", ctx.HostFree(c.statusHost))
		c.statusHost = nil
	}
	if c.stream != 0 {
		keep("destroying the stream", ctx.StreamDestroy(c.stream))
		c.stream = 0
	}
	if c.module != 0 {
		keep("unloading kernels", ctx.UnloadModule(c.module))
		c.module = 0
	}
	errs = append(errs, c.dev.Close())
	return errors.Join(errs...)
}

// launch enqueues one kernel with the current args.
func (c *Comm) launch(f driver.Function) error {
	err := c.dev.ctx.Launch(f, [3]uint32{uint32(c.blocks), 1, 1}, [3]uint32{uint32(c.threads), 1, 1}, 0, c.stream, c.params[:])
	if err != nil {
		return c.fail(wrapDriver("launching kernel", err))
	}
	c.launches++
	return nil
}

// halfOffset is where operation number epoch writes its output.
func (c *Comm) halfOffset(epoch uint64) int64 {
	return int64(epoch&1) * c.layout.halfBytes
}

// driverError is a driver failure seen from this package: its text says
// what a2a was doing and keeps the driver's own words, and errors.Is
// matches both the driver error and this package's sentinel for it.
type driverError struct {
	what     string
	sentinel error // ErrNoDriver, ErrNoDevice or nil
	err      error
}

func (e *driverError) Error() string { return "a2a: " + e.what + ": " + e.err.Error() }

func (e *driverError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.err}
	}
	return []error{e.sentinel, e.err}
}

// wrapDriver gives a driver error this package's prefix and sentinels.
func wrapDriver(what string, err error) error {
	e := &driverError{what: what, err: err}
	switch {
	case errors.Is(err, driver.ErrNoDriver):
		e.sentinel = ErrNoDriver
	case errors.Is(err, driver.ErrNoDevice):
		e.sentinel = ErrNoDevice
	}
	return e
}
