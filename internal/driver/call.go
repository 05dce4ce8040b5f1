package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// purego.SyscallN is //go:uintptrescapes, which makes the compiler put its
// variadic argument slice on the heap: one allocation per call. The hot
// paths instead pass a slice inside a pooled, already heap-allocated
// buffer (Driver.calls), which costs no allocation in steady state.

// maxCallArgs is the most arguments any pooled call takes (cuLaunchKernel).
const maxCallArgs = 11

// callBuf is a pooled argument block.
type callBuf struct {
	args [maxCallArgs]uintptr
	keep unsafe.Pointer // keeps a Go object passed as a uintptr alive
	copy memcpy2D       // cuMemcpy2DAsync's argument, on the heap already
	box  memcpy3D       // cuMemcpy3DAsync's
	out  uintptr        // a C function's output word (callOut)
}

// callBuf takes an argument block from the pool (d.calls.Put returns it).
func (d *Driver) callBuf() *callBuf {
	if b, _ := d.calls.Get().(*callBuf); b != nil {
		return b
	}
	return new(callBuf)
}

// call invokes the C function fn with integer arguments (no Go pointers)
// and returns its raw first result, without allocating.
func (d *Driver) call(fn uintptr, args ...uintptr) uintptr {
	return d.callKeep(fn, nil, args...)
}

// callKeep is call for an argument list that carries keep, a Go pointer,
// converted to uintptr. Storing keep in the heap-allocated buffer forces
// the object it points to onto the (non-moving) heap and keeps it alive
// until the C function returns.
func (d *Driver) callKeep(fn uintptr, keep unsafe.Pointer, args ...uintptr) uintptr {
	b := d.callBuf()
	b.keep = keep
	r := callIn(b, fn, args...)
	b.keep = nil
	d.calls.Put(b)
	return r
}

// callIn invokes fn with args passed through b's argument block (which
// the caller holds: anything in b that args point to stays valid).
func callIn(b *callBuf, fn uintptr, args ...uintptr) uintptr {
	n := copy(b.args[:], args)
	r, _, _ := purego.SyscallN(fn, b.args[:n]...)
	return r
}

// callOut invokes the C function fn with the address of one output word
// as its only argument and returns its raw result and the word, without
// allocating (the word lives in a pooled buffer).
func (d *Driver) callOut(fn uintptr) (r, out uintptr) {
	b := d.callBuf()
	b.out = 0
	b.args[0] = uintptr(unsafe.Pointer(&b.out)) // b is on the heap, which does not move, and live until Put
	r, _, _ = purego.SyscallN(fn, b.args[:1]...)
	out = b.out
	d.calls.Put(b)
	return r, out
}
