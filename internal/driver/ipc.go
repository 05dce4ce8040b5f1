package driver

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ulysses-go/ulysses/internal/dl"
)

// IpcMemHandle is a CUipcMemHandle: an opaque 64-byte token that lets
// another process map a device allocation.
type IpcMemHandle [64]byte

// ipcLazyEnablePeerAccess is CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.
const ipcLazyEnablePeerAccess = 0x1

// IpcGetMemHandle exports the allocation containing p for use by other
// processes (cuIpcGetMemHandle).
func (c *Context) IpcGetMemHandle(p DevicePtr) (IpcMemHandle, error) {
	var h IpcMemHandle
	if err := c.enter(); err != nil {
		return h, err
	}
	r, _, _ := purego.SyscallN(c.d.fn.ipcGetMemHandle, uintptr(unsafe.Pointer(&h)), uintptr(p))
	c.leave()
	return h, c.d.check("cuIpcGetMemHandle", r)
}

// IpcOpenMemHandle maps an allocation exported by another process into c
// (cuIpcOpenMemHandle_v2 with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS). Opening
// a handle from the same process fails. Undo with IpcCloseMemHandle.
func (c *Context) IpcOpenMemHandle(h IpcMemHandle) (DevicePtr, error) {
	if c.d.ipcOpenErr != nil {
		return 0, c.d.ipcOpenErr
	}
	var arg ipcHandleArg
	*(*IpcMemHandle)(unsafe.Pointer(&arg)) = h // the same 64 bytes, in C's order
	if err := c.enter(); err != nil {
		return 0, err
	}
	var p DevicePtr
	r := c.d.ipcOpen(&p, arg, ipcLazyEnablePeerAccess)
	c.leave()
	return p, c.d.check("cuIpcOpenMemHandle_v2", r)
}

// IpcCloseMemHandle unmaps memory from IpcOpenMemHandle
// (cuIpcCloseMemHandle).
func (c *Context) IpcCloseMemHandle(p DevicePtr) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.ipcCloseMemHandle, uintptr(p))
	c.leave()
	return c.d.check("cuIpcCloseMemHandle", r)
}

// ipcHandleArg is a CUipcMemHandle as purego passes a struct by value:
// its fields must be scalars, not arrays, so the 64 bytes are eight words.
type ipcHandleArg struct{ w0, w1, w2, w3, w4, w5, w6, w7 uint64 }

// ipcOpenFunc calls cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h,
// unsigned flags) and returns its CUresult.
type ipcOpenFunc func(p *DevicePtr, h ipcHandleArg, flags uint32) uintptr

// bindIpcOpen wraps cuIpcOpenMemHandle_v2 at fn with purego.RegisterFunc,
// which lays out the by-value 64-byte handle as the platform's C ABI
// wants: on the stack under System V amd64, as a pointer to a copy under
// AAPCS64. The stub driver's TestFakeIpcByValue exercises both paths (the
// arm64 one under emulation, .ci/arm64), the GPU tests the amd64 one on
// hardware; the arm64 path has not run on arm64 hardware.
// Where purego cannot pass structs (it panics, e.g. on 386 or FreeBSD) the
// error is returned, and IpcOpenMemHandle reports it. Calls go through
// reflection and allocate (about six small objects each): acceptable, as
// IPC open is not on the hot path of an operation.
func bindIpcOpen(fn uintptr) (f ipcOpenFunc, err error) {
	if err := dl.RegisterFunc(&f, fn, "cuIpcOpenMemHandle_v2, whose handle is passed by value,"); err != nil {
		return nil, fmt.Errorf("driver: %w", err)
	}
	return f, nil
}
