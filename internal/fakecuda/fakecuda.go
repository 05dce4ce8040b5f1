// Package fakecuda builds a stub CUDA driver, a libcuda.so.1 that needs no
// GPU, for tests of code that loads the driver through internal/driver.
//
// The stub (csrc/fakecuda.c, embedded) exports every entry point
// internal/driver requires (not the optional cuFuncGetAttribute and
// cuOccupancyMaxActiveBlocksPerMultiprocessor), and cuFuncSetAttribute for
// the shared-memory carveout. Its devices share the
// host's memory: allocations are malloc'd, so memsets and copies really
// happen, and the address of an allocation works as a device pointer, a
// mapped host pointer and an IPC handle's payload (IPC handles open only in
// the process that made them). Module loads accept PTX (any image starting
// with "//") and cubins (64-bit ELF images) whose architecture runs on the
// device, as the real driver decides (the same major version, a minor
// version no newer), and cuModuleGetFunction finds only the entries the
// image defines (a PTX ".entry NAME(", a cubin's symbol); a failed load's
// error log names the log buffer's size. The stub counts the PTX and cubin
// images loaded (Counters.PTXLoads, CubinLoads). Calls are checked about as strictly as the real driver checks them:
// a current, retained context; live stream, event, module and function
// handles; memory ranges inside one live allocation; an IPC handle intact
// in all its 64 bytes, opened with CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS. As
// in the real driver, memory its owner frees while IPC-mapped stays until
// the last mapping is closed. cuMemGetAddressRange_v2 reports a device
// allocation's base and size.
//
// The virtual memory calls work too (cuMemCreate, cuMemAddressReserve,
// cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemAddressFree, cuMemRelease,
// cuMemGetAllocationGranularity, which says 2 MiB): a physical allocation
// is a memfd, exported as a new descriptor of it, which passes to another
// process over SCM_RIGHTS and imports there onto the same memory, so the
// processes really share it. cuIpcGetMemHandle refuses such memory, as
// the real driver does. Devices report POSIX file descriptor handles
// supported (attribute 103) and fabric handles not (attribute 128, and
// asking for one fails with CUDA_ERROR_NOT_SUPPORTED).
//
// Kernel launches are checked and counted but run nothing. A launch is
// work queued on its stream until the host waits for it:
// cuStreamSynchronize on the stream, cuEventSynchronize on an event
// recorded after it, or a device-wide wait (below); cuStreamQuery answers
// CUDA_ERROR_NOT_READY meanwhile. Copies and memsets happen at once and
// queue nothing.
//
// Some calls wait for all of the device's work in the real driver:
// cuCtxSynchronize, cuMemFree_v2, cuMemFreeHost, cuModuleLoadDataEx,
// cuModuleUnload and cuIpcCloseMemHandle. Made while one of the process's
// kernels waits for a peer, such a call waits for that peer. The stub
// counts them (Counters.DeviceWaits), counts apart those made while a
// stream of the context, live or destroyed, had work queued
// (Counters.BusyDeviceWaits), and treats all of the context's work as done
// after each.
//
// The stub reads its environment at every call:
//
//   - FAKECUDA_DEVICES: the number of devices (default 2, at most 16), named
//     "Fake CUDA Device N", with PCI bus id "0000:0N:00.0" (N in hex), 132
//     SMs, a 1980000 kHz clock, compute capability 9.0 (FAKECUDA_CC) and
//     unified addressing.
//   - FAKECUDA_CC: the devices' compute capabilities, "major.minor" for
//     devices 0, 1, ... separated by commas ("9.0,8.6"), the last one
//     given for the devices after it.
//   - FAKECUDA_CUBIN_ERROR=code: loading a cubin fails with code (e.g.
//     209, CUDA_ERROR_NO_BINARY_FOR_GPU, or 200, CUDA_ERROR_INVALID_IMAGE).
//   - FAKECUDA_NO_PEER: comma-separated pairs of device ordinals that
//     cannot access each other: "i-j" in both directions, "i>j" only from i
//     to j; every other pair of distinct devices can.
//   - FAKECUDA_FAIL_LAUNCH_AFTER=N: every launch after the first N fails
//     with CUDA_ERROR_LAUNCH_FAILED (719).
//   - FAKECUDA_SYNC_ERROR=code: cuStreamSynchronize returns code (e.g. 700,
//     CUDA_ERROR_ILLEGAL_ADDRESS) on a stream that has had a kernel launched
//     on it, as if a kernel had failed (its work is over all the same); a
//     stream that never ran a kernel still synchronises without error.
//   - FAKECUDA_INIT_ERROR=code: cuInit returns code (e.g. 100,
//     CUDA_ERROR_NO_DEVICE).
//   - FAKECUDA_DEVICE_BASE=N: device handles (CUdevice) are ordinal+N, not
//     the ordinal as with the real driver, so that a caller passing an
//     ordinal where a handle belongs gets CUDA_ERROR_INVALID_DEVICE.
//   - FAKECUDA_MISSING_FUNCTIONS: comma-separated kernel names that
//     cuModuleGetFunction does not find (CUDA_ERROR_NOT_FOUND).
//   - FAKECUDA_RECORD_PARAMS=N: cuLaunchKernel records the values of its
//     first N kernel parameters (at most MaxRecordedParams), 8 bytes each;
//     while it is set, every launch must have at least N parameters.
//   - FAKECUDA_NO_POSIX_FD=1: devices report POSIX file descriptor
//     handles unsupported (attribute 103 is 0); the calls work all the same.
//   - FAKECUDA_KERNELS_DONE=1: launches are done at once, as copies are:
//     nothing is queued, so cuStreamQuery finds the stream idle (for code
//     that polls, as the NCCL transport's waits do, rather than waits).
//   - FAKECUDA_HANG=A,W,C,V: kernels wait for their host, as a2a's wait for
//     a peer that never comes until Close sets their abort word: a launch
//     reads the address p at byte A of its first parameter (a2a's status
//     word), and cuStreamSynchronize on its stream then waits, without
//     holding anything, until the 32-bit word at p+W is nonzero, stores V
//     at p+C and settles the stream.
//
// Code under test opens the stub with driver.LoadLibrary, or through
// internal/driver's ULYSSES_LIBCUDA environment variable, which driver.Load
// reads once per process. The dynamic loader loads a file once per
// process, so all that open one path share its state: copy the file to a
// new path for a stub of its own (internal/testutil.FakeCUDA does).
// Read reports the stub's counters (launches, live allocations, streams,
// ...) and ReadCalls the arguments of its latest calls of a few entry
// points, both as seen by the process that reads them.
//
// Building needs a C compiler for the running platform at test time only
// (cc, or its cross compiler: see internal/cstub); the package itself
// builds with CGO_ENABLED=0.
package fakecuda

import (
	_ "embed"
	"fmt"
	"strings"

	"github.com/ulysses-go/ulysses/internal/cstub"
)

//go:embed csrc/fakecuda.c
var source []byte

// Library is the file name Build writes in its directory.
const Library = "libcuda.so.1"

// Environment variables the stub reads (see the package comment).
const (
	EnvDevices         = "FAKECUDA_DEVICES"
	EnvNoPeer          = "FAKECUDA_NO_PEER"
	EnvFailLaunchAfter = "FAKECUDA_FAIL_LAUNCH_AFTER"
	EnvSyncError       = "FAKECUDA_SYNC_ERROR"
	EnvInitError       = "FAKECUDA_INIT_ERROR"
	EnvDeviceBase      = "FAKECUDA_DEVICE_BASE"
	EnvMissingFuncs    = "FAKECUDA_MISSING_FUNCTIONS"
	EnvRecordParams    = "FAKECUDA_RECORD_PARAMS"
	EnvCC              = "FAKECUDA_CC"
	EnvCubinError      = "FAKECUDA_CUBIN_ERROR"
	EnvNoPosixFD       = "FAKECUDA_NO_POSIX_FD"
	EnvKernelsDone     = "FAKECUDA_KERNELS_DONE"
)

// MaxRecordedParams is the most kernel parameters FAKECUDA_RECORD_PARAMS
// can make cuLaunchKernel record.
const MaxRecordedParams = 4

// Source returns the stub's C source.
func Source() string { return string(source) }

// Build compiles the stub into dir/libcuda.so.1 with cstub.Build (-shared
// -fPIC -O1, for the running GOARCH) and returns the library's absolute
// path. It leaves the source beside it (fakecuda.c). The error matches
// cstub.ErrNoCompiler when there is no compiler for the platform.
func Build(dir string) (path string, err error) {
	path, err = cstub.Build(dir, "fakecuda.c", Library, source)
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	return path, nil
}

// BuildNoDevice is Build for a driver without a device: its cuInit
// returns CUDA_ERROR_NO_DEVICE (100) unless FAKECUDA_INIT_ERROR says
// otherwise, as a machine with the driver's library and no GPU does. It is
// the world CI runs the CPU tests in beside the one without a driver
// (ULYSSES_LIBCUDA naming a missing file).
func BuildNoDevice(dir string) (path string, err error) {
	path, err = cstub.Build(dir, "fakecuda.c", Library, source, "-DFAKECUDA_DEFAULT_INIT_ERROR=100")
	if err != nil {
		return "", fmt.Errorf("fakecuda: %w", err)
	}
	return path, nil
}

// Counters are the stub's running totals in one process.
type Counters struct {
	Launches       int64 // launches that succeeded
	LaunchFailures int64 // launches failed by FAKECUDA_FAIL_LAUNCH_AFTER
	DeviceAllocs   int64 // live cuMemAlloc allocations
	DeviceBytes    int64 // their size in bytes
	HostAllocs     int64 // live cuMemHostAlloc allocations
	Streams        int64 // live streams
	Events         int64 // live events
	Modules        int64 // loaded modules
	IPCMappings    int64 // cuIpcOpenMemHandle mappings not yet closed
	ContextRetains int64 // primary context retains not yet released, all devices

	// The virtual memory API's: live physical allocations (cuMemCreate,
	// or imported from a file descriptor), live mappings (cuMemMap),
	// reserved address ranges, and the file descriptors exported (a
	// running total, not part of Live: the caller closes them).
	VMMAllocations  int64
	VMMMappings     int64
	VMMReservations int64
	FDExports       int64

	// Running totals of the calls that wait for all of a device's work in
	// the real driver (see the package comment), made with a current
	// context, whether or not they then succeed; BusyDeviceWaits counts
	// those made while the context had kernel work queued. Not part of
	// Live.
	DeviceWaits     int64
	BusyDeviceWaits int64

	// Running totals of the images loaded (cuModuleLoadDataEx calls that
	// succeeded), by kind. Not part of Live.
	PTXLoads   int64
	CubinLoads int64
}

// Live reports whether anything is still allocated, loaded, open or
// retained; it is "" when the process holds nothing from the stub, else a
// description of what is left.
func (c Counters) Live() string {
	var s []string
	for _, f := range []struct {
		n    int64
		what string
	}{
		{c.DeviceAllocs, "device allocations"}, {c.HostAllocs, "host allocations"}, {c.Streams, "streams"},
		{c.Events, "events"}, {c.Modules, "modules"}, {c.IPCMappings, "IPC mappings"},
		{c.ContextRetains, "context retains"}, {c.VMMAllocations, "VMM allocations"},
		{c.VMMMappings, "VMM mappings"}, {c.VMMReservations, "reserved address ranges"},
	} {
		if f.n != 0 {
			s = append(s, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	return strings.Join(s, ", ")
}

// Calls are the arguments of the latest call of a few of the stub's entry
// points in one process, recorded as each call starts, whether or not it
// then succeeds: for tests of how arguments reach C.
type Calls struct {
	HostAllocFlags uint32 // cuMemHostAlloc's flags
	StreamFlags    uint32 // cuStreamCreate's
	EventFlags     uint32 // cuEventCreate's
	Launch         Launch // the latest cuLaunchKernel
}

// Launch is a cuLaunchKernel call as the stub saw it.
type Launch struct {
	Function    uintptr
	Grid, Block [3]uint32
	SharedBytes uint32
	Stream      uintptr
	Params      uintptr // the kernelParams pointer (0: NULL)
	Extra       uintptr // the extra pointer
	// Args are the values of the first FAKECUDA_RECORD_PARAMS parameters,
	// 8 bytes each; the rest are zero.
	Args [MaxRecordedParams]uint64
}
