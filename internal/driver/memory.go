package driver

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// DevicePtr is a CUdeviceptr, a device (or mapped host) address.
type DevicePtr uintptr

// cuMemHostAlloc flags.
const (
	memHostAllocPortable  = 0x1
	memHostAllocDeviceMap = 0x2
)

// MemGetInfo returns the free and total memory of the context's device
// (cuMemGetInfo_v2).
func (c *Context) MemGetInfo() (free, total uint64, err error) {
	if c.d.fn.memGetInfo == 0 {
		return 0, 0, c.d.missing("cuMemGetInfo_v2")
	}
	if err := c.enter(); err != nil {
		return 0, 0, err
	}
	var f, t uintptr
	r, _, _ := purego.SyscallN(c.d.fn.memGetInfo, uintptr(unsafe.Pointer(&f)), uintptr(unsafe.Pointer(&t)))
	c.leave()
	return uint64(f), uint64(t), c.d.check("cuMemGetInfo_v2", r)
}

// MemAlloc allocates n bytes of device memory (cuMemAlloc_v2). It is
// synchronous and slow-ish (tens of µs): allocate up front, not per step.
func (c *Context) MemAlloc(n uint64) (DevicePtr, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var p DevicePtr
	r, _, _ := purego.SyscallN(c.d.fn.memAlloc, uintptr(unsafe.Pointer(&p)), uintptr(n))
	c.leave()
	return p, c.d.check("cuMemAlloc_v2", r)
}

// MemFree frees device memory from MemAlloc (cuMemFree_v2); it synchronises
// the device implicitly.
func (c *Context) MemFree(p DevicePtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memFree, uintptr(p))
	c.leave()
	return c.d.check("cuMemFree_v2", r)
}

// MemsetD32 sets n 32-bit words at p to v and waits for it (cuMemsetD32_v2).
func (c *Context) MemsetD32(p DevicePtr, v uint32, n uint64) error {
	if c.d.fn.memsetD32 == 0 {
		return c.d.missing("cuMemsetD32_v2")
	}
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memsetD32, uintptr(p), uintptr(v), uintptr(n))
	c.leave()
	return c.d.check("cuMemsetD32_v2", r)
}

// MemsetD32Async enqueues setting n 32-bit words at p to v on stream s
// (cuMemsetD32Async). Allocation-free.
func (c *Context) MemsetD32Async(p DevicePtr, v uint32, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memsetD32Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemsetD32Async", r)
}

// MemsetD8Async enqueues setting n bytes at p to v on stream s
// (cuMemsetD8Async). Allocation-free.
func (c *Context) MemsetD8Async(p DevicePtr, v uint8, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memsetD8Async, uintptr(p), uintptr(v), uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemsetD8Async", r)
}

// MemcpyHtoD copies src to device address dst and waits for it
// (cuMemcpyHtoD_v2). An empty src is a no-op.
func (c *Context) MemcpyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if c.d.fn.memcpyHtoD == 0 {
		return c.d.missing("cuMemcpyHtoD_v2")
	}
	if err := c.enter(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(c.d.fn.memcpyHtoD, uintptr(dst), uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)))
	c.leave()
	runtime.KeepAlive(src)
	return c.d.check("cuMemcpyHtoD_v2", r)
}

// MemcpyDtoH copies len(dst) bytes from device address src into dst and
// waits for it (cuMemcpyDtoH_v2). An empty dst is a no-op.
func (c *Context) MemcpyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if c.d.fn.memcpyDtoH == 0 {
		return c.d.missing("cuMemcpyDtoH_v2")
	}
	if err := c.enter(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(c.d.fn.memcpyDtoH, uintptr(unsafe.Pointer(&dst[0])), uintptr(src), uintptr(len(dst)))
	c.leave()
	runtime.KeepAlive(dst)
	return c.d.check("cuMemcpyDtoH_v2", r)
}

// MemcpyHtoDAsync enqueues a copy of n bytes from host src to dst on s
// (cuMemcpyHtoDAsync_v2). src must be pinned (HostAllocMapped) for the copy
// to be truly asynchronous, and must stay valid until the stream reaches it.
func (c *Context) MemcpyHtoDAsync(dst DevicePtr, src unsafe.Pointer, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.callKeep(c.d.fn.memcpyHtoDAsync, src, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemcpyHtoDAsync_v2", r)
}

// MemcpyDtoHAsync enqueues a copy of n bytes from src to host dst on s
// (cuMemcpyDtoHAsync_v2). dst must be pinned for the copy to be truly
// asynchronous, and must stay valid until the stream reaches it.
func (c *Context) MemcpyDtoHAsync(dst unsafe.Pointer, src DevicePtr, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.callKeep(c.d.fn.memcpyDtoHAsync, dst, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemcpyDtoHAsync_v2", r)
}

// MemcpyDtoDAsync enqueues a device-to-device copy of n bytes on s
// (cuMemcpyDtoDAsync_v2). Allocation-free.
func (c *Context) MemcpyDtoDAsync(dst, src DevicePtr, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memcpyDtoDAsync, uintptr(dst), uintptr(src), uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemcpyDtoDAsync_v2", r)
}

// memcpy2D mirrors CUDA_MEMCPY2D (cuda.h) on 64-bit systems.
type memcpy2D struct {
	srcXInBytes, srcY uintptr
	srcMemoryType     uint32
	_                 uint32
	srcHost           uintptr
	srcDevice         uintptr
	srcArray          uintptr
	srcPitch          uintptr
	dstXInBytes, dstY uintptr
	dstMemoryType     uint32
	_                 uint32
	dstHost           uintptr
	dstDevice         uintptr
	dstArray          uintptr
	dstPitch          uintptr
	widthInBytes      uintptr
	height            uintptr
}

// memoryTypeDevice is CU_MEMORYTYPE_DEVICE.
const memoryTypeDevice = 2

// MemcpyRowsAsync enqueues on s a device-to-device copy of rows rows of
// width bytes each, from src (rows srcPitch bytes apart) to dst (dstPitch
// apart): cuMemcpy2DAsync_v2. Pitches at least width, at most the
// device's maximum pitch (2^31-1 bytes on current GPUs). Allocation-free.
func (c *Context) MemcpyRowsAsync(dst DevicePtr, dstPitch uint64, src DevicePtr, srcPitch uint64, width, rows uint64, s Stream) error {
	return c.copyDescribed("cuMemcpy2DAsync_v2", c.d.fn.memcpy2DAsync, s, func(b *callBuf) unsafe.Pointer {
		b.copy = memcpy2D{
			srcMemoryType: memoryTypeDevice, srcDevice: uintptr(src), srcPitch: uintptr(srcPitch),
			dstMemoryType: memoryTypeDevice, dstDevice: uintptr(dst), dstPitch: uintptr(dstPitch),
			widthInBytes: uintptr(width), height: uintptr(rows),
		}
		return unsafe.Pointer(&b.copy)
	})
}

// copyDescribed calls fn(desc, s), a copy described by a struct that
// describe fills in a pooled, heap-allocated buffer (so the pointer stays
// valid and nothing is allocated), and checks its result as name.
func (c *Context) copyDescribed(name string, fn uintptr, s Stream, describe func(b *callBuf) unsafe.Pointer) error {
	if err := c.enter(); err != nil {
		return err
	}
	b := c.d.callBuf()
	desc := describe(b)
	r := callIn(b, fn, uintptr(desc), uintptr(s)) // b, which desc points into, is held until Put
	c.d.calls.Put(b)
	c.leave()
	return c.d.check(name, r)
}

// memcpy3D mirrors CUDA_MEMCPY3D (cuda.h) on 64-bit systems.
type memcpy3D struct {
	srcXInBytes, srcY, srcZ, srcLOD uintptr
	srcMemoryType                   uint32
	_                               uint32
	srcHost, srcDevice, srcArray    uintptr
	_                               uintptr // reserved0
	srcPitch, srcHeight             uintptr
	dstXInBytes, dstY, dstZ, dstLOD uintptr
	dstMemoryType                   uint32
	_                               uint32
	dstHost, dstDevice, dstArray    uintptr
	_                               uintptr // reserved1
	dstPitch, dstHeight             uintptr
	widthInBytes, height, depth     uintptr
}

// Box is one side of MemcpyBoxAsync: where the first row starts, the
// bytes from one row to the next (Pitch) and the rows from one slice to
// the next (Height).
type Box struct {
	Ptr           DevicePtr
	Pitch, Height uint64
}

// MemcpyBoxAsync enqueues on s a device-to-device copy of depth slices of
// rows rows of width bytes, from src to dst (cuMemcpy3DAsync_v2): row y of
// slice z starts at Ptr + (z*Height + y)*Pitch on each side. Either side
// may be a peer's memory mapped into c. Pitches at most the device's
// maximum pitch. Allocation-free.
func (c *Context) MemcpyBoxAsync(dst, src Box, width, rows, depth uint64, s Stream) error {
	return c.copyDescribed("cuMemcpy3DAsync_v2", c.d.fn.memcpy3DAsync, s, func(b *callBuf) unsafe.Pointer {
		b.box = memcpy3D{
			srcMemoryType: memoryTypeDevice, srcDevice: uintptr(src.Ptr), srcPitch: uintptr(src.Pitch), srcHeight: uintptr(src.Height),
			dstMemoryType: memoryTypeDevice, dstDevice: uintptr(dst.Ptr), dstPitch: uintptr(dst.Pitch), dstHeight: uintptr(dst.Height),
			widthInBytes: uintptr(width), height: uintptr(rows), depth: uintptr(depth),
		}
		return unsafe.Pointer(&b.box)
	})
}

// MemcpyPeerAsync enqueues on s (a stream of c) a copy of n bytes from src
// in srcCtx to dst in dstCtx (cuMemcpyPeerAsync). Allocation-free.
func (c *Context) MemcpyPeerAsync(dst DevicePtr, dstCtx *Context, src DevicePtr, srcCtx *Context, n uint64, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.memcpyPeerAsync, uintptr(dst), dstCtx.ctx, uintptr(src), srcCtx.ctx, uintptr(n), uintptr(s))
	c.leave()
	return c.d.check("cuMemcpyPeerAsync", r)
}

// HostAllocMapped allocates n bytes of pinned host memory, portable across
// contexts and mapped into the device address space (cuMemHostAlloc with
// PORTABLE|DEVICEMAP, then cuMemHostGetDevicePointer_v2). It returns the
// host address and the address kernels use. Slow (page pinning): allocate
// up front. Free with HostFree.
func (c *Context) HostAllocMapped(n uint64) (host unsafe.Pointer, dev DevicePtr, err error) {
	if err := c.enter(); err != nil {
		return nil, 0, err
	}
	defer c.leave()
	var h unsafe.Pointer
	r, _, _ := purego.SyscallN(c.d.fn.memHostAlloc, uintptr(unsafe.Pointer(&h)), uintptr(n), memHostAllocPortable|memHostAllocDeviceMap)
	if err := c.d.check("cuMemHostAlloc", r); err != nil {
		return nil, 0, err
	}
	var p DevicePtr
	r, _, _ = purego.SyscallN(c.d.fn.memHostGetDevicePointer, uintptr(unsafe.Pointer(&p)), uintptr(h), 0)
	if err := c.d.check("cuMemHostGetDevicePointer_v2", r); err != nil {
		purego.SyscallN(c.d.fn.memFreeHost, uintptr(h))
		return nil, 0, err
	}
	return h, p, nil
}

// HostFree frees memory from HostAllocMapped (cuMemFreeHost).
func (c *Context) HostFree(host unsafe.Pointer) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.callKeep(c.d.fn.memFreeHost, host, uintptr(host))
	c.leave()
	return c.d.check("cuMemFreeHost", r)
}

// MemAddressRange returns the base and size of the allocation containing p
// (cuMemGetAddressRange_v2): for an IPC mapping, the exporter's whole
// allocation.
func (c *Context) MemAddressRange(p DevicePtr) (base DevicePtr, size uint64, err error) {
	if err := c.enter(); err != nil {
		return 0, 0, err
	}
	var n uintptr
	r, _, _ := purego.SyscallN(c.d.fn.memGetAddressRange, uintptr(unsafe.Pointer(&base)), uintptr(unsafe.Pointer(&n)), uintptr(p))
	c.leave()
	return base, uint64(n), c.d.check("cuMemGetAddressRange_v2", r)
}
