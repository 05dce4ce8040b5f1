//go:build !amd64 && !arm64

package driver

import (
	"errors"
	"runtime"
)

// ipcOpen is not implemented where the by-value struct ABI is unknown.
func ipcOpen(uintptr, *IpcMemHandle, uint32) (DevicePtr, uintptr, error) {
	return 0, 0, errors.New("driver: cuIpcOpenMemHandle_v2: passing the handle by value is not implemented on " + runtime.GOARCH)
}
