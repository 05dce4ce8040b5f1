//go:build !(linux || darwin || freebsd || netbsd)

package driver

import (
	"errors"
	"runtime"
)

var errNoDlopen = errors.New("dlopen is not available on " + runtime.GOOS)

// dlopen always fails: this platform has no dlopen.
func dlopen(string) (uintptr, error) { return 0, errNoDlopen }

// dlsym always fails: this platform has no dlopen.
func dlsym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }

// dlclose does nothing.
func dlclose(uintptr) {}
