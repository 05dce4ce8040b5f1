package a2a

import "errors"

// farewellThreads is the block size of the one-block kernels (start
// barrier, farewell): one thread per peer is enough.
const farewellThreads = 32

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
	brokenBefore := c.failure != nil || c.failureFromDevice() != nil
	if c.connected {
		var te *TimeoutError
		c.args.Active = 1
		if errors.As(c.failure, &te) || errors.As(c.failureFromDevice(), &te) {
			c.args.Active = 0 // say goodbye, but do not wait for a peer that may be gone
		}
		if err := c.launch(c.k.close, 1, farewellThreads); err != nil {
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
	ctx := c.share.ctx
	c.buryPeers()
	var graves []release
	if buf := c.buf; buf != 0 {
		graves = append(graves, release{"freeing the buffer", func() error { return ctx.MemFree(buf) }})
		c.buf = 0
	}
	if host := c.statusHost; host != nil {
		graves = append(graves, release{"freeing the status word", func() error { return ctx.HostFree(host) }})
		c.statusHost = nil
	}
	c.share.bury(graves...)
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

// buryPeers forgets the peer mappings, handing what unmaps them to the
// share's graveyard.
func (c *Comm) buryPeers() {
	ctx := c.share.ctx
	var graves []release
	for i := range c.peers {
		m := c.peers[i]
		if m.ipcOpened {
			graves = append(graves, release{"closing an IPC mapping", func() error { return ctx.IpcCloseMemHandle(m.ptr) }})
		}
		if m.peerCtx != nil {
			graves = append(graves, release{"releasing a peer context", m.peerCtx.Release})
		}
		c.peers[i] = peerMapping{}
	}
	c.share.bury(graves...)
}
