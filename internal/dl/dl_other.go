//go:build !(linux || darwin || freebsd || netbsd)

package dl

import (
	"errors"
	"runtime"
)

var errNoDlopen = errors.New("dlopen is not available on " + runtime.GOOS)

// open always fails: this platform has no dlopen.
func open(string) (uintptr, error) { return 0, errNoDlopen }

// sym always fails: this platform has no dlopen.
func sym(uintptr, string) (uintptr, error) { return 0, errNoDlopen }

// closeLib does nothing.
func closeLib(uintptr) {}
