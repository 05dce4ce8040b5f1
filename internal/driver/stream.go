package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// Stream is a CUstream; 0 is the legacy default stream.
type Stream uintptr

// streamNonBlocking is CU_STREAM_NON_BLOCKING.
const streamNonBlocking = 0x1

// StreamCreate creates a stream in c (cuStreamCreate). A non-blocking stream
// does not synchronise with the legacy default stream.
func (c *Context) StreamCreate(nonBlocking bool) (Stream, error) {
	var flags uintptr
	if nonBlocking {
		flags = streamNonBlocking
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var s Stream
	r, _, _ := purego.SyscallN(c.d.fn.streamCreate, uintptr(unsafe.Pointer(&s)), flags)
	c.leave()
	return s, c.d.check("cuStreamCreate", r)
}

// StreamDestroy destroys s once its pending work is done
// (cuStreamDestroy_v2); it does not wait.
func (c *Context) StreamDestroy(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.streamDestroy, uintptr(s))
	c.leave()
	return c.d.check("cuStreamDestroy_v2", r)
}

// StreamSynchronize blocks until all work on s is done
// (cuStreamSynchronize).
func (c *Context) StreamSynchronize(s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.streamSynchronize, uintptr(s))
	c.leave()
	return c.d.check("cuStreamSynchronize", r)
}

// OwnsStream reports whether s, a stream handle from anywhere in the
// process, belongs to c (cuStreamGetCtx); the legacy and per-thread
// default streams (0, 1, 2) belong to every context. Allocation-free.
func (c *Context) OwnsStream(s Stream) (bool, error) {
	if err := c.enter(); err != nil {
		return false, err
	}
	var owner uintptr
	r, _, _ := purego.SyscallN(c.d.fn.streamGetCtx, uintptr(s), uintptr(unsafe.Pointer(&owner)))
	c.leave()
	if err := c.d.check("cuStreamGetCtx", r); err != nil {
		return false, err
	}
	return owner == c.ctx, nil
}

// StreamDone reports, without blocking, whether all work on s is done
// (cuStreamQuery: CUDA_SUCCESS is true, CUDA_ERROR_NOT_READY is false).
func (c *Context) StreamDone(s Stream) (bool, error) {
	if err := c.enter(); err != nil {
		return false, err
	}
	r := c.d.call(c.d.fn.streamQuery, uintptr(s))
	c.leave()
	if resultOf(r) == ErrorNotReady {
		return false, nil
	}
	if err := c.d.check("cuStreamQuery", r); err != nil {
		return false, err
	}
	return true, nil
}
