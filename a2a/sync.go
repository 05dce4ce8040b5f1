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
	if err := c.usable(false); err != nil {
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
	if c.failure == nil {
		if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
			return c.fail(wrapDriver("running the collective", err))
		}
	}
	return c.usable(false)
}

// usable returns nil when an operation may be enqueued: not closed, not
// broken (a failure recorded by the device counts), and connected if
// needConnect. The first failure is returned as itself once, then wrapped
// in ErrBroken.
func (c *Comm) usable(needConnect bool) error {
	if c.closed {
		return ErrClosed
	}
	if c.failure == nil {
		if f := c.failureFromDevice(); f != nil {
			c.failure = f
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

// failureFromDevice decodes the status word a failed kernel wrote, or nil.
func (c *Comm) failureFromDevice() error {
	st := (*statusWord)(c.statusHost)
	code := atomic.LoadUint32(&st.Code)
	if code == statusOK {
		return nil
	}
	rank, peer := int(atomic.LoadUint32(&st.Rank)), int(atomic.LoadUint32(&st.Peer))
	phase, epoch := Phase(atomic.LoadUint32(&st.Phase)), atomic.LoadUint32(&st.Epoch)
	block := int(atomic.LoadUint32(&st.Block))
	switch code {
	case statusPeerClosed:
		return &PeerClosedError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch}
	case statusMismatch:
		return &MismatchError{Rank: rank, Peer: peer, Epoch: epoch, Block: block,
			Signature: atomic.LoadUint32(&st.Sig), PeerSignature: atomic.LoadUint32(&st.PeerSig)}
	}
	return &TimeoutError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch, Block: block, Timeout: time.Duration(c.args.TimeoutNs)}
}

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

// launch enqueues one kernel with the current args, holding the share's
// launch gate so that no graveyard release starts while it may run.
func (c *Comm) launch(f driver.Function, grid, threads int) error {
	c.share.gate.RLock()
	err := c.dev.ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, c.stream, c.params[:])
	c.share.gate.RUnlock()
	if err != nil {
		return c.fail(wrapDriver("launching kernel", err))
	}
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
