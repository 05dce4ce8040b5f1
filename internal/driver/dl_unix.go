//go:build linux || darwin || freebsd || netbsd

package driver

import (
	"errors"
	"runtime"

	"github.com/ebitengine/purego"
)

// dlopen opens a shared library with RTLD_NOW|RTLD_GLOBAL. The thread is
// locked because dlerror is per thread: purego calls dlopen and dlerror
// separately, and a goroutine moving between them loses the message.
func dlopen(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil && err.Error() == "" {
		err = errors.New("dlopen failed without a message")
	}
	return h, err
}

// dlsym looks a symbol up; it returns an error rather than panicking.
func dlsym(handle uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(handle, name)
}

// dlclose drops a reference taken by dlopen.
func dlclose(handle uintptr) { _ = purego.Dlclose(handle) }
