package nccl

import (
	"fmt"
	"unsafe"
)

// The calls of the optional features (features.go). Each returns an error
// matching ErrUnsupported where the loaded NCCL lacks its feature.

// MemAlloc allocates n bytes of device memory the way NCCL prefers for
// registration (ncclMemAlloc: cuMem memory, possibly rounded up) with the
// calling thread's current context. Free it with MemFree.
func (l *Library) MemAlloc(n uint64) (uintptr, error) {
	if err := l.need(FeatureMemAlloc); err != nil {
		return 0, err
	}
	var p uintptr
	err := l.check("ncclMemAlloc", 0, l.call(l.fn.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n)))
	return p, err
}

// MemFree frees memory of MemAlloc (ncclMemFree).
func (l *Library) MemFree(p uintptr) error {
	if err := l.need(FeatureMemAlloc); err != nil {
		return err
	}
	return l.check("ncclMemFree", 0, l.call(l.fn.memFree, p))
}

// Window is a registered window of device memory (an ncclWindow_t).
type Window uintptr

// WindowRegister registers n bytes at buf with the communicator
// (ncclCommWindowRegister, a collective: every rank registers its own);
// flags are NCCL_WIN_* (0: the default). Deregister it with
// WindowDeregister before freeing the memory. It needs a blocking
// communicator (ErrNeedsBlocking): on a non-blocking one NCCL writes the
// window from its own thread after the call has returned.
func (c *Comm) WindowRegister(buf uintptr, n uint64, flags int) (Window, error) {
	if err := c.l.need(FeatureWindows); err != nil {
		return 0, err
	}
	if !c.blocking {
		return 0, fmt.Errorf("nccl: ncclCommWindowRegister: %w", ErrNeedsBlocking)
	}
	var w uintptr
	err := c.l.check("ncclCommWindowRegister", c.h, c.l.call(c.l.fn.commWindowRegister, c.h, buf, uintptr(n), uintptr(unsafe.Pointer(&w)), uintptr(flags)))
	return Window(w), err
}

// WindowDeregister ends a registration of WindowRegister
// (ncclCommWindowDeregister).
func (c *Comm) WindowDeregister(w Window) error {
	if err := c.l.need(FeatureWindows); err != nil {
		return err
	}
	return c.l.check("ncclCommWindowDeregister", c.h, c.l.call(c.l.fn.commWindowDeregister, c.h, uintptr(w)))
}

// AlltoAll enqueues NCCL's all-to-all (ncclAlltoAll): count elements of dt
// from send+p*count to every rank p, rank p's landing at recv+p*count.
func (c *Comm) AlltoAll(send, recv uintptr, count uint64, dt DataType, stream uintptr) error {
	if err := c.l.need(FeatureAlltoAll); err != nil {
		return err
	}
	return c.l.check("ncclAlltoAll", c.h, c.l.call(c.l.fn.alltoAll, send, recv, uintptr(count), uintptr(dt), c.h, stream))
}
