//go:build linux || darwin || freebsd || netbsd

package fakecuda

import (
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"
)

// Read returns the counters of the stub at path as loaded in this process
// (the copy internal/driver uses when path is what ULYSSES_LIBCUDA names;
// the dynamic loader opens a library only once). A stub this process has
// not loaded yet reads as all zeros.
func Read(path string) (Counters, error) {
	runtime.LockOSThread() // dlerror is per thread
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return Counters{}, fmt.Errorf("fakecuda: opening %s: %w", path, err)
	}
	defer purego.Dlclose(h)
	fn, err := purego.Dlsym(h, "fakecuda_counter")
	if err != nil {
		return Counters{}, fmt.Errorf("fakecuda: %s is not the stub: %w", path, err)
	}
	get := func(i int) int64 {
		r, _, _ := purego.SyscallN(fn, uintptr(i))
		return int64(r)
	}
	return Counters{
		Launches: get(0), LaunchFailures: get(1), DeviceAllocs: get(2), DeviceBytes: get(3), HostAllocs: get(4),
		Streams: get(5), Events: get(6), Modules: get(7), IPCMappings: get(8), ContextRetains: get(9),
		DeviceWaits: get(10), BusyDeviceWaits: get(11),
	}, nil
}
