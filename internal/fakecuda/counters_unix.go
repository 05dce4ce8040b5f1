//go:build linux || darwin || freebsd || netbsd

package fakecuda

import (
	"fmt"
	"runtime"

	"github.com/ebitengine/purego"
)

// Read returns the counters of the stub at path as loaded in this process
// (the copy internal/driver uses when it opened path; the dynamic loader
// opens a library only once). A stub this process has not loaded yet reads
// as all zeros.
func Read(path string) (Counters, error) {
	v, err := readAll(path, "fakecuda_counter", 18) // in the order fakecuda_counter lists them
	if err != nil {
		return Counters{}, err
	}
	return Counters{
		Launches: v[0], LaunchFailures: v[1], DeviceAllocs: v[2], DeviceBytes: v[3], HostAllocs: v[4],
		Streams: v[5], Events: v[6], Modules: v[7], IPCMappings: v[8], ContextRetains: v[9],
		DeviceWaits: v[10], BusyDeviceWaits: v[11], PTXLoads: v[12], CubinLoads: v[13],
		VMMAllocations: v[14], VMMMappings: v[15], VMMReservations: v[16], FDExports: v[17],
	}, nil
}

// ReadCalls returns the latest calls the stub at path saw in this process
// (see Read), zeros for a call not made yet.
func ReadCalls(path string) (Calls, error) {
	v, err := readAll(path, "fakecuda_last", 14+MaxRecordedParams) // in the order of fakecuda_last's enum
	if err != nil {
		return Calls{}, err
	}
	u := func(i int) uint32 { return uint32(v[i]) }
	l := Launch{
		Function: uintptr(v[3]), Grid: [3]uint32{u(4), u(5), u(6)}, Block: [3]uint32{u(7), u(8), u(9)},
		SharedBytes: u(10), Stream: uintptr(v[11]), Params: uintptr(v[12]), Extra: uintptr(v[13]),
	}
	for i := range l.Args {
		l.Args[i] = uint64(v[14+i])
	}
	return Calls{HostAllocFlags: u(0), StreamFlags: u(1), EventFlags: u(2), Launch: l}, nil
}

// readAll returns fn(0), ..., fn(n-1), fn being an accessor of the stub at
// path as loaded in this process.
func readAll(path, fn string, n int) ([]int64, error) {
	runtime.LockOSThread() // dlerror is per thread
	defer runtime.UnlockOSThread()
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		return nil, fmt.Errorf("fakecuda: opening %s: %w", path, err)
	}
	defer purego.Dlclose(h)
	sym, err := purego.Dlsym(h, fn)
	if err != nil {
		return nil, fmt.Errorf("fakecuda: %s is not the stub: %w", path, err)
	}
	v := make([]int64, n)
	for i := range v {
		r, _, _ := purego.SyscallN(sym, uintptr(i))
		v[i] = int64(r)
	}
	return v, nil
}
