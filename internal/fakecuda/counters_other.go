//go:build !(linux || darwin || freebsd || netbsd)

package fakecuda

import (
	"errors"
	"runtime"
)

// Read always fails: this platform has no dlopen.
func Read(path string) (Counters, error) {
	return Counters{}, errors.New("fakecuda: dlopen is not available on " + runtime.GOOS)
}
