package driver

import (
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ipcOpen calls cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h,
// unsigned flags), whose middle argument is a 64-byte struct passed BY
// VALUE. Under AAPCS64 a composite larger than 16 bytes is copied by the
// caller to memory and passed as a pointer to that copy in the next
// register, so the arguments are &p, &copy, flags. Untested on hardware.
func ipcOpen(fn uintptr, h *IpcMemHandle, flags uint32) (DevicePtr, uintptr, error) {
	cp := new(IpcMemHandle)
	*cp = *h
	var p DevicePtr
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&p)), uintptr(unsafe.Pointer(cp)), uintptr(flags))
	runtime.KeepAlive(cp)
	return p, r, nil
}
