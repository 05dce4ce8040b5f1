//go:build !(linux || darwin || freebsd || netbsd)

package fakecuda

import (
	"errors"
	"runtime"
)

// errNoDlopen is what Read and ReadCalls return here.
var errNoDlopen = errors.New("fakecuda: dlopen is not available on " + runtime.GOOS)

// Read always fails: this platform has no dlopen.
func Read(path string) (Counters, error) { return Counters{}, errNoDlopen }

// ReadCalls always fails: this platform has no dlopen.
func ReadCalls(path string) (Calls, error) { return Calls{}, errNoDlopen }
