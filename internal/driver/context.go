package driver

import (
	"runtime"
	"strconv"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Context is the retained primary context of one device. Its methods lock
// the calling goroutine to its OS thread and make the context current for
// the duration of the call, so they may be called from any goroutine.
type Context struct {
	d        *Driver
	ordinal  int
	dev      int32
	ctx      uintptr // CUcontext
	released atomic.Bool
}

// RetainPrimaryContext retains the primary context of device ordinal
// (cuDevicePrimaryCtxRetain); pair it with Release.
func (d *Driver) RetainPrimaryContext(ordinal int) (*Context, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return nil, err
	}
	var ctx uintptr
	r, _, _ := purego.SyscallN(d.fn.primaryCtxRetain, uintptr(unsafe.Pointer(&ctx)), uintptr(uint32(dev)))
	if err := d.check("cuDevicePrimaryCtxRetain", r); err != nil {
		return nil, err
	}
	return &Context{d: d, ordinal: ordinal, dev: dev, ctx: ctx}, nil
}

// Release drops the retain taken by RetainPrimaryContext
// (cuDevicePrimaryCtxRelease_v2). Only the first call does anything; the
// context must not be used afterwards.
func (c *Context) Release() error {
	if !c.released.CompareAndSwap(false, true) {
		return nil
	}
	r, _, _ := purego.SyscallN(c.d.fn.primaryCtxRelease, uintptr(uint32(c.dev)))
	return c.d.check("cuDevicePrimaryCtxRelease_v2", r)
}

// Ordinal returns the device ordinal the context belongs to.
func (c *Context) Ordinal() int { return c.ordinal }

// Driver returns the driver the context was retained from.
func (c *Context) Driver() *Driver { return c.d }

// enter locks the OS thread and makes c current on it, above whatever
// context the caller had current there (cuCtxPushCurrent): leave puts the
// caller's back, so that code of the caller's that relies on the thread's
// current context (another binding's) finds it unchanged after any call
// here. On success the caller must call leave. It does not allocate
// unless it fails.
func (c *Context) enter() error {
	if c.released.Load() {
		return c.errReleased()
	}
	runtime.LockOSThread()
	r := c.d.call(c.d.fn.ctxPushCurrent, c.ctx)
	if resultOf(r) != Success {
		runtime.UnlockOSThread()
		return c.d.check("cuCtxPushCurrent", r)
	}
	return nil
}

// leave pops c (the thread's previous context is current again) and
// undoes the thread lock taken by enter. A pop cannot fail after a
// push on the same thread; its result is not looked at.
func (c *Context) leave() {
	c.d.callOut(c.d.fn.ctxPopCurrent)
	runtime.UnlockOSThread()
}

// errReleased is returned by calls on a released context.
func (c *Context) errReleased() error {
	return &Error{Call: "cuCtxPushCurrent", Code: ErrorContextIsDestroyed, Name: ErrorContextIsDestroyed.String(),
		Description: "primary context of device " + strconv.Itoa(c.ordinal) + " was released by this process"}
}

// Do runs f with the OS thread locked and c current on it, and returns f's
// error. Driver calls made directly inside f see c as the current context.
func (c *Context) Do(f func() error) error {
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	return f()
}

// Synchronize blocks until all work in the context is done
// (cuCtxSynchronize).
func (c *Context) Synchronize() error {
	if c.d.fn.ctxSynchronize == 0 {
		return c.d.missing("cuCtxSynchronize")
	}
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.ctxSynchronize)
	c.leave()
	return c.d.check("cuCtxSynchronize", r)
}

// EnablePeerAccess lets kernels and copies in c access memory of peer's
// device (cuCtxEnablePeerAccess). Enabling it twice is not an error.
func (c *Context) EnablePeerAccess(peer *Context) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.ctxEnablePeerAccess, peer.ctx, 0)
	c.leave()
	if resultOf(r) == ErrorPeerAccessAlreadyEnabled {
		return nil
	}
	return c.d.check("cuCtxEnablePeerAccess", r)
}

// current returns the context current on the calling thread
// (cuCtxGetCurrent); only meaningful with the thread locked.
func (d *Driver) current() (uintptr, error) {
	if d.fn.ctxGetCurrent == 0 {
		return 0, d.missing("cuCtxGetCurrent")
	}
	var ctx uintptr
	r, _, _ := purego.SyscallN(d.fn.ctxGetCurrent, uintptr(unsafe.Pointer(&ctx)))
	return ctx, d.check("cuCtxGetCurrent", r)
}
