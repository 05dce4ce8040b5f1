package driver

import (
	"encoding/binary"
	"unsafe"

	"github.com/ebitengine/purego"
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
	if err := c.enter(); err != nil {
		return 0, err
	}
	p, r, err := ipcOpen(c.d.fn.ipcOpenMemHandle, &h, ipcLazyEnablePeerAccess)
	c.leave()
	if err != nil {
		return 0, err
	}
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

// handleWords splits a handle into the eight little-endian 64-bit words a
// by-value struct argument occupies on the stack.
func handleWords(h *IpcMemHandle) [8]uint64 {
	var w [8]uint64
	for i := range w {
		w[i] = binary.LittleEndian.Uint64(h[i*8:])
	}
	return w
}

// handleFromWords is the inverse of handleWords.
func handleFromWords(w [8]uint64) IpcMemHandle {
	var h IpcMemHandle
	for i, v := range w {
		binary.LittleEndian.PutUint64(h[i*8:], v)
	}
	return h
}
