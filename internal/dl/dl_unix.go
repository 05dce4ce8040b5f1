//go:build linux || darwin || freebsd || netbsd

package dl

import (
	"errors"
	"runtime"

	"github.com/ebitengine/purego"
)

// open opens a shared library with RTLD_NOW|RTLD_GLOBAL. The thread is
// locked because dlerror is per thread: purego calls dlopen and dlerror
// separately, and a goroutine moving between them loses the message.
func open(path string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil && err.Error() == "" {
		err = errors.New("dlopen failed without a message")
	}
	return h, err
}

// sym looks a symbol up; it returns an error rather than panicking.
func sym(handle uintptr, name string) (uintptr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return purego.Dlsym(handle, name)
}

// closeLib drops a reference taken by open.
func closeLib(handle uintptr) { _ = purego.Dlclose(handle) }
