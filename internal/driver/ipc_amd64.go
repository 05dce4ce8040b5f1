package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"
)

// ipcOpen calls cuIpcOpenMemHandle_v2(CUdeviceptr *p, CUipcMemHandle h,
// unsigned flags), whose middle argument is a 64-byte struct passed BY
// VALUE. Under the System V amd64 ABI a struct larger than 16 bytes is
// passed in memory: copied onto the stack in the argument area, and it
// takes no register, so flags goes in the next free integer register (rsi).
// purego.SyscallN puts its first six arguments in rdi, rsi, rdx, rcx, r8,
// r9 and the rest on the stack in order, so: &p, flags, four zero fillers
// for rdx..r9, then the eight words of the handle, which land on the stack
// exactly as the struct would.
func ipcOpen(fn uintptr, h *IpcMemHandle, flags uint32) (DevicePtr, uintptr, error) {
	w := handleWords(h)
	var p DevicePtr
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&p)), uintptr(flags), 0, 0, 0, 0,
		uintptr(w[0]), uintptr(w[1]), uintptr(w[2]), uintptr(w[3]),
		uintptr(w[4]), uintptr(w[5]), uintptr(w[6]), uintptr(w[7]))
	return p, r, nil
}
