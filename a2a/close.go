package a2a

import "errors"

// Close waits for queued operations, then tells every peer that this rank
// is leaving and, unless the Comm broke on a timeout (its peer is likely
// dead), waits until every peer has said the same (bounded by the
// timeout), so that no peer is still writing into this buffer. A peer
// still inside an operation with this rank gets ErrPeerClosed instead of a
// result. Close then releases everything: what could wait for other Comms'
// kernels is deferred until none runs (see deviceShare). It is
// idempotent; the Comm is unusable afterwards. It returns what went wrong
// on the way (a peer that never said goodbye included), having released
// everything regardless.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var errs []error
	onDevice := c.failureFromDevice()
	brokenBefore := c.failure != nil || onDevice != nil
	if c.connected {
		// After a timeout, say goodbye but do not wait for a peer that may
		// be gone.
		var te *TimeoutError
		wait := !errors.As(c.failure, &te) && !errors.As(onDevice, &te)
		if err := c.t.goodbye(wait); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		errs = append(errs, wrapDriver("waiting for queued operations", err))
	}
	if !brokenBefore {
		if f := c.failureFromDevice(); f != nil {
			errs = append(errs, f)
		}
	}
	c.closed = true
	c.share.remove(c)
	errs = append(errs, c.release())
	return errors.Join(errs...)
}

// release frees what init and Connect acquired; safe on a partly
// initialised Comm. Calls that may wait for the device (freeing, unmapping)
// go to the share's graveyard.
func (c *Comm) release() error {
	var errs []error
	keep := func(what string, err error) {
		if err != nil {
			errs = append(errs, wrapDriver(what, err))
		}
	}
	if c.share == nil {
		keep("releasing the device", c.dev.Close())
		return errors.Join(errs...)
	}
	if c.t != nil {
		c.t.release()
	}
	if buf := c.buf; buf != 0 {
		ctx := c.share.ctx
		c.share.bury(release{"freeing the buffer", func() error { return ctx.MemFree(buf) }})
		c.buf = 0
	}
	if c.stream != 0 {
		keep("destroying the stream", c.dev.ctx.StreamDestroy(c.stream))
		c.stream = 0
	}
	keep("releasing the device", c.dev.Close())
	if err := c.share.put(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
