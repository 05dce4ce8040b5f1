package a2a

import (
	"errors"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
)

// Close waits for queued operations, then tells every peer that this rank
// is leaving and, unless the Comm broke on a timeout (its peer is likely
// dead), waits until every peer has said the same (bounded by the
// timeout), so that no peer is still writing into this buffer. A peer
// still inside an operation with this rank gets ErrPeerClosed instead of a
// result. If a Sync is blocked when Close begins, Close ends the device's
// waits for peers instead (within about 1 ms): that Sync returns an error
// matching ErrClosed, and Close does not wait for the peers' goodbyes.
// Close then releases everything: what could wait for other Comms'
// kernels is deferred until none runs (docs/DESIGN.md, "What waits for
// what"). Its waits do not hold the Comm: Config and the like answer
// meanwhile, and everything else returns ErrClosed. It is idempotent (a
// second Close returns once the first is done); the Comm is unusable
// afterwards. It returns what went wrong on the way (a peer that never
// said goodbye included), having released everything regardless. On a
// Comm that New did not make (the nil Comm a failed New or Join returns,
// or the zero Comm) there is nothing to release: it returns nil, so that
// a deferred Close before checking Join's error is harmless.
func (c *Comm) Close() error {
	if !c.made() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		for !c.closed {
			c.changed.Wait()
		}
		return nil
	}
	c.closing = true
	aborted := c.waiting > 0 && c.t != nil
	if aborted {
		c.t.Abort(true)
	}
	for c.waiting > 0 {
		c.changed.Wait()
	}
	// Nothing else touches the stream or the transport from here on.
	c.mu.Unlock()
	errs := c.farewell(aborted)
	c.mu.Lock()
	c.closed = true
	c.changed.Broadcast()
	c.share.Remove(&c.member)
	errs = append(errs, c.release())
	return errors.Join(errs...)
}

// farewell says goodbye to the peers and waits for the stream, without the
// lock (Close has made the Comm closing, so nothing else enqueues). It
// returns the failures it saw, but not an abort Close itself asked for.
func (c *Comm) farewell(aborted bool) []error {
	var errs []error
	onDevice := c.failureFromDevice()
	brokenBefore := c.failure != nil || onDevice != nil
	if err := c.joinOwnStream(); err != nil {
		errs = append(errs, err)
	}
	if c.t != nil {
		// After a timeout or an abort, say goodbye but do not wait for a
		// peer that may be gone.
		var te *TimeoutError
		wait := !aborted && !errors.As(c.failure, &te) && !errors.As(onDevice, &te)
		if err := c.t.Goodbye(wait); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		errs = append(errs, api.WrapDriver("waiting for queued operations", err))
	}
	if !brokenBefore && !aborted {
		if f := c.failureFromDevice(); f != nil {
			errs = append(errs, f)
		}
	}
	return errs
}

// release frees what init and Connect acquired; safe on a partly
// initialised Comm. Calls that may wait for the device (freeing, unmapping)
// go to the share's graveyard.
func (c *Comm) release() error {
	var errs []error
	keep := func(what string, err error) {
		if err != nil {
			errs = append(errs, api.WrapDriver(what, err))
		}
	}
	if c.share == nil {
		keep("releasing the device", c.dev.Close())
		return errors.Join(errs...)
	}
	if c.t != nil {
		c.t.Release()
	}
	if c.fdServer != nil {
		if err := c.fdServer.Close(); err != nil {
			errs = append(errs, api.Wrap(err, "closing the buffer's socket"))
		}
		c.fdServer = nil
	}
	if c.buf != 0 {
		// Freed once no Comm of this process maps it any more (internal/device/buffers.go).
		if err := device.ReleaseBuffer(c.buf, true); err != nil {
			errs = append(errs, err)
		}
		c.buf = 0
	}
	if c.tail != 0 {
		keep("destroying the event", c.dev.ctx.EventDestroy(c.tail))
		c.tail = 0
	}
	if c.stream != 0 {
		keep("destroying the stream", c.dev.ctx.StreamDestroy(c.stream))
		c.stream = 0
	}
	keep("releasing the device", c.dev.Close())
	if err := c.share.Put(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
