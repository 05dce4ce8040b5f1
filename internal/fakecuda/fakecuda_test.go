package fakecuda_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// load opens a fresh copy of the stub with device 0's primary context
// retained, and returns the copy's path with them.
func load(t *testing.T) (string, *driver.Driver, *driver.Context) {
	t.Helper()
	lib := testutil.FakeCUDA(t)
	d, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	c, err := d.RetainPrimaryContext(0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Release()) })
	return lib, d, c
}

// kernel loads a module into c and returns a kernel of it; the module is
// unloaded at the end of the test.
func kernel(t *testing.T, c *driver.Context) driver.Function {
	t.Helper()
	m, err := c.LoadModule([]byte("//\n" + entries("k")))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.UnloadModule(m)) })
	f, err := c.Function(m, "k")
	require.NoError(t, err)
	return f
}

func counters(t *testing.T, lib string) fakecuda.Counters {
	t.Helper()
	n, err := fakecuda.Read(lib)
	require.NoError(t, err)
	return n
}

func TestBuild(t *testing.T) {
	testutil.FakeCUDA(t) // skips without a C compiler
	path, err := fakecuda.Build(t.TempDir())
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(path), path)
	require.Equal(t, fakecuda.Library, filepath.Base(path))
	src, err := os.ReadFile(filepath.Join(filepath.Dir(path), "fakecuda.c"))
	require.NoError(t, err)
	require.Equal(t, fakecuda.Source(), string(src))
}

func TestDevices(t *testing.T) {
	_, d, _ := load(t)
	v, err := d.Version()
	require.NoError(t, err)
	require.Equal(t, 13000, v)
	n, err := d.RequireDevices()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	for ord := range n {
		name, err := d.DeviceName(ord)
		require.NoError(t, err)
		require.Equal(t, "Fake CUDA Device "+string(rune('0'+ord)), name)
		bus, err := d.DevicePCIBusID(ord)
		require.NoError(t, err)
		require.Equal(t, "0000:0"+string(rune('0'+ord))+":00.0", bus)
		for a, want := range map[driver.Attribute]int{
			driver.AttrMultiprocessorCount: 132, driver.AttrClockRate: 1980000, driver.AttrComputeCapabilityMajor: 9,
			driver.AttrComputeCapabilityMinor: 0, driver.AttrUnifiedAddressing: 1, driver.AttrCanMapHostMemory: 1,
		} {
			got, err := d.DeviceAttribute(ord, a)
			require.NoError(t, err)
			require.Equal(t, want, got, "attribute %d", a)
		}
		mem, err := d.DeviceTotalMem(ord)
		require.NoError(t, err)
		require.Equal(t, uint64(141<<30), mem)
		u, err := d.DeviceUUID(ord)
		require.NoError(t, err)
		require.NotEqual(t, [16]byte{}, u)
	}
	_, err = d.DeviceName(2)
	require.ErrorIs(t, err, driver.ErrNoDevice)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidDevice))
	require.Contains(t, err.Error(), "CUDA_ERROR_INVALID_DEVICE (101): invalid device ordinal")

	t.Setenv(fakecuda.EnvDevices, "11")
	n, err = d.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 11, n)
	bus, err := d.DevicePCIBusID(10)
	require.NoError(t, err)
	require.Equal(t, "0000:0A:00.0", bus)

	t.Setenv(fakecuda.EnvDevices, "0")
	_, err = d.RequireDevices()
	require.ErrorIs(t, err, driver.ErrNoDevice)
}

func TestPeerAccess(t *testing.T) {
	_, d, _ := load(t)
	t.Setenv(fakecuda.EnvDevices, "4")
	t.Setenv(fakecuda.EnvNoPeer, "1-2, 3>0")
	for a := range 4 {
		for b := range 4 {
			listed := (a == 1 && b == 2) || (a == 2 && b == 1) || (a == 3 && b == 0) // not 0 -> 3
			want := a != b && !listed
			got, err := d.CanAccessPeer(a, b)
			require.NoError(t, err)
			require.Equal(t, want, got, "%d -> %d", a, b)
		}
	}
	c0, err := d.RetainPrimaryContext(0)
	require.NoError(t, err)
	defer c0.Release()
	c1, err := d.RetainPrimaryContext(1)
	require.NoError(t, err)
	defer c1.Release()
	c2, err := d.RetainPrimaryContext(2)
	require.NoError(t, err)
	defer c2.Release()
	require.NoError(t, c0.EnablePeerAccess(c1))
	require.NoError(t, c0.EnablePeerAccess(c1), "ALREADY_ENABLED is not an error")
	err = c1.EnablePeerAccess(c2)
	require.True(t, driver.IsCode(err, driver.ErrorPeerAccessUnsupported), "%v", err)
}

func TestContexts(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	before := counters(t, lib)
	d, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	c, err := d.RetainPrimaryContext(1)
	require.NoError(t, err)
	require.Equal(t, before.ContextRetains+1, counters(t, lib).ContextRetains)
	require.NoError(t, c.Synchronize())
	require.NoError(t, c.Release())
	require.Equal(t, before.ContextRetains, counters(t, lib).ContextRetains)
	// The driver refuses a released Context itself; the stub refuses a
	// context whose retains are all released (cuCtxPushCurrent).
	require.True(t, driver.IsCode(c.Synchronize(), driver.ErrorContextIsDestroyed))
}

func TestMemory(t *testing.T) {
	lib, _, c := load(t)
	before := counters(t, lib)
	p, err := c.MemAlloc(1000)
	require.NoError(t, err)
	require.Zero(t, p%256, "allocations are 256-byte aligned")
	require.Equal(t, before.DeviceAllocs+1, counters(t, lib).DeviceAllocs)
	require.Equal(t, before.DeviceBytes+1000, counters(t, lib).DeviceBytes)

	got := make([]byte, 1000)
	require.NoError(t, c.MemcpyDtoH(got, p))
	require.Equal(t, strings.Repeat("\xa5", 1000), string(got), "fresh memory is poisoned")
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(i * 7)
	}
	require.NoError(t, c.MemcpyHtoD(p, src))
	require.NoError(t, c.MemcpyDtoH(got, p))
	require.Equal(t, src, got)

	require.NoError(t, c.MemsetD32(p+4, 0x01020304, 2))
	require.NoError(t, c.MemsetD8Async(p+12, 0xEE, 3, 0))
	require.NoError(t, c.MemcpyDtoH(got, p))
	require.Equal(t, []byte{0, 7, 14, 21, 4, 3, 2, 1, 4, 3, 2, 1, 0xEE, 0xEE, 0xEE, 105}, got[:16])

	q, err := c.MemAlloc(16)
	require.NoError(t, err)
	s, err := c.StreamCreate(true)
	require.NoError(t, err)
	require.NoError(t, c.MemcpyDtoDAsync(q, p, 16, s))
	require.NoError(t, c.MemsetD32Async(q, 0, 1, s))
	require.NoError(t, c.MemcpyPeerAsync(q+8, c, p, c, 8, s))
	back := make([]byte, 16)
	require.NoError(t, c.MemcpyDtoHAsync(unsafe.Pointer(&back[0]), q, 16, s))
	require.Equal(t, []byte{0, 0, 0, 0, 4, 3, 2, 1, 0, 7, 14, 21, 4, 3, 2, 1}, back)
	require.NoError(t, c.MemcpyHtoDAsync(q, unsafe.Pointer(&src[0]), 16, s))
	require.NoError(t, c.MemcpyDtoH(back, q))
	require.Equal(t, src[:16], back)

	// Out of range, misaligned, freed: refused, not written.
	require.True(t, driver.IsCode(c.MemsetD32(p+998, 0, 1), driver.ErrorInvalidValue))
	require.True(t, driver.IsCode(c.MemsetD32(p+2, 0, 1), driver.ErrorInvalidValue))
	require.True(t, driver.IsCode(c.MemcpyDtoDAsync(q, p+990, 16, s), driver.ErrorInvalidValue))
	require.True(t, driver.IsCode(c.MemcpyHtoD(p+999, src[:2]), driver.ErrorInvalidValue))
	require.NoError(t, c.MemFree(q))
	require.True(t, driver.IsCode(c.MemFree(q), driver.ErrorInvalidValue), "double free")
	require.True(t, driver.IsCode(c.MemsetD8Async(q, 0, 1, s), driver.ErrorInvalidValue), "use after free")
	require.NoError(t, c.StreamDestroy(s))
	require.True(t, driver.IsCode(c.StreamSynchronize(s), driver.ErrorInvalidHandle), "destroyed stream")
	_, err = c.MemAlloc(1 << 50)
	require.True(t, driver.IsCode(err, driver.ErrorOutOfMemory), "%v", err)

	free, total, err := c.MemGetInfo()
	require.NoError(t, err)
	require.Equal(t, uint64(141<<30), total)
	require.Equal(t, total-uint64(counters(t, lib).DeviceBytes), free)

	host, dev, err := c.HostAllocMapped(64)
	require.NoError(t, err)
	require.Equal(t, driver.DevicePtr(uintptr(host)), dev, "mapped host memory has one address")
	require.NoError(t, c.MemsetD32(dev, 0, 16))
	require.Equal(t, byte(0), *(*byte)(host))
	require.Equal(t, before.HostAllocs+1, counters(t, lib).HostAllocs)
	require.NoError(t, c.HostFree(host))
	require.NoError(t, c.MemFree(p))
	after := counters(t, lib)
	require.Equal(t, before.DeviceAllocs, after.DeviceAllocs)
	require.Equal(t, before.DeviceBytes, after.DeviceBytes)
	require.Equal(t, before.HostAllocs, after.HostAllocs)
}

func TestIPC(t *testing.T) {
	lib, _, c := load(t)
	p, err := c.MemAlloc(512)
	require.NoError(t, err)
	defer c.MemFree(p)
	h, err := c.IpcGetMemHandle(p + 100)
	require.NoError(t, err)
	require.Equal(t, "FAKECUDA", string(h[:8]))
	before := counters(t, lib).IPCMappings
	q, err := c.IpcOpenMemHandle(h)
	require.NoError(t, err)
	require.Equal(t, p, q, "the handle names the allocation's base")
	require.Equal(t, before+1, counters(t, lib).IPCMappings)
	waits := counters(t, lib).DeviceWaits
	require.NoError(t, c.IpcCloseMemHandle(q))
	require.Equal(t, before, counters(t, lib).IPCMappings)
	require.Equal(t, waits+1, counters(t, lib).DeviceWaits, "closing an IPC mapping waits for the device")
	require.True(t, driver.IsCode(c.IpcCloseMemHandle(q), driver.ErrorInvalidValue))
	// Every one of the 64 bytes counts: the handle opens only intact.
	for i := range h {
		bad := h
		bad[i] ^= 0x10
		_, err = c.IpcOpenMemHandle(bad)
		require.Error(t, err, "byte %d changed", i)
	}
	require.Equal(t, before, counters(t, lib).IPCMappings)

	// Freed by its owner while mapped: gone for its owner, kept for the
	// mapping until it closes.
	r, err := c.MemAlloc(256)
	require.NoError(t, err)
	hr, err := c.IpcGetMemHandle(r)
	require.NoError(t, err)
	mr, err := c.IpcOpenMemHandle(hr)
	require.NoError(t, err)
	base, size, err := c.MemAddressRange(mr + 10)
	require.NoError(t, err)
	require.Equal(t, r, base)
	require.EqualValues(t, 256, size)
	allocs := counters(t, lib).DeviceAllocs
	require.NoError(t, c.MemFree(r))
	require.Equal(t, allocs-1, counters(t, lib).DeviceAllocs)
	require.True(t, driver.IsCode(c.MemFree(r), driver.ErrorInvalidValue), "double free")
	require.NoError(t, c.IpcCloseMemHandle(mr), "the mapping outlives the owner's free")
	require.Equal(t, before, counters(t, lib).IPCMappings)
}

func TestModulesAndLaunches(t *testing.T) {
	lib, _, c := load(t)
	_, err := c.LoadModule([]byte("not ptx"))
	var e *driver.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, driver.ErrorInvalidPTX, e.Code)
	require.Contains(t, e.Log, `fakecuda: image does not start with "//"`)
	require.Contains(t, e.Log, "error log buffer of 8192 bytes", "the size LoadModule passes")
	require.Contains(t, err.Error(), "CUDA_ERROR_INVALID_PTX (218)")

	before := counters(t, lib)
	m, err := c.LoadModule([]byte("// PTX\n.version 7.8\n" + entries("any_name", "gone", "also_gone", "gone_not")))
	require.NoError(t, err)
	f, err := c.Function(m, "any_name")
	require.NoError(t, err)
	f2, err := c.Function(m, "any_name")
	require.NoError(t, err)
	require.Equal(t, f, f2)
	_, err = c.Function(m, "any")
	require.True(t, driver.IsCode(err, driver.ErrorNotFound), "a name the image does not define: %v", err)
	t.Setenv(fakecuda.EnvMissingFuncs, "gone, also_gone")
	for _, name := range []string{"gone", "also_gone"} {
		_, err = c.Function(m, name)
		require.True(t, driver.IsCode(err, driver.ErrorNotFound), "%s: %v", name, err)
	}
	_, err = c.Function(m, "gone_not")
	require.NoError(t, err, "only whole names are missing")
	s, err := c.StreamCreate(true)
	require.NoError(t, err)
	arg := uint64(7)
	params := []unsafe.Pointer{unsafe.Pointer(&arg)}
	grid, block := [3]uint32{132, 1, 1}, [3]uint32{256, 1, 1}
	require.NoError(t, c.Launch(f, grid, block, 0, s, params))
	require.Equal(t, before.Launches+1, counters(t, lib).Launches)
	err = c.Launch(f, grid, [3]uint32{2048, 1, 1}, 0, s, params)
	require.True(t, driver.IsCode(err, driver.ErrorLaunchOutOfResources), "%v", err)
	require.True(t, driver.IsCode(c.Launch(f, [3]uint32{0, 1, 1}, block, 0, s, params), driver.ErrorInvalidValue))

	t.Setenv(fakecuda.EnvFailLaunchAfter, "0")
	err = c.Launch(f, grid, block, 0, s, params)
	require.True(t, driver.IsCode(err, driver.ErrorLaunchFailed), "%v", err)
	require.Contains(t, err.Error(), "CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure")
	n := counters(t, lib)
	require.Equal(t, before.Launches+1, n.Launches)
	require.Equal(t, before.LaunchFailures+1, n.LaunchFailures)

	idle, err := c.StreamCreate(true)
	require.NoError(t, err)
	t.Setenv(fakecuda.EnvSyncError, "700")
	err = c.StreamSynchronize(s)
	require.True(t, driver.IsCode(err, driver.ErrorIllegalAddress), "%v", err)
	require.Contains(t, err.Error(), "CUDA_ERROR_ILLEGAL_ADDRESS (700): an illegal memory access was encountered")
	require.NoError(t, c.StreamSynchronize(idle), "a stream that never ran a kernel synchronises")
	require.NoError(t, c.StreamDestroy(idle))
	require.NoError(t, c.Synchronize(), "only stream synchronisation fails")

	require.NoError(t, c.StreamDestroy(s))
	require.NoError(t, c.UnloadModule(m))
	require.True(t, driver.IsCode(c.UnloadModule(m), driver.ErrorInvalidHandle))
	require.True(t, driver.IsCode(c.Launch(f, grid, block, 0, 0, params), driver.ErrorInvalidHandle), "unloaded module")
	n = counters(t, lib)
	require.Equal(t, before.Modules, n.Modules)
	require.Equal(t, before.Streams, n.Streams)
	require.Equal(t, before.PTXLoads+1, n.PTXLoads)
	require.Equal(t, before.CubinLoads, n.CubinLoads)
}

// entries is PTX text declaring the named entries.
func entries(names ...string) string {
	var b strings.Builder
	for _, n := range names {
		b.WriteString(".visible .entry " + n + "(\n\t.param .align 8 .b8 " + n + "_param_0[8]\n)\n{\n\tret;\n}\n")
	}
	return b.String()
}

// cubin is a minimal 64-bit ELF image for architecture sm (90: sm_90)
// whose string table names the given kernels.
func cubin(sm byte, names ...string) []byte {
	strtab := "\x00" + strings.Join(names, "\x00") + "\x00"
	b := make([]byte, 64, 64+len(strtab))
	copy(b, "\x7fELF\x02\x01\x01")
	binary.LittleEndian.PutUint64(b[40:], uint64(64+len(strtab))) // e_shoff: the section headers (none) after the table
	binary.LittleEndian.PutUint32(b[48:], 0x460500|uint32(sm))    // e_flags, as ptxas writes them
	binary.LittleEndian.PutUint16(b[58:], 64)                     // e_shentsize
	return append(b, strtab...)
}

// Cubins load where their architecture runs on the device (the same major
// version, a minor one no newer), define the symbols of their string
// table, and are counted apart from PTX; FAKECUDA_CUBIN_ERROR fails them.
func TestCubins(t *testing.T) {
	lib, _, c := load(t)
	before := counters(t, lib)
	load := func(img []byte) (driver.Module, error) {
		m, err := c.LoadModule(img)
		if err == nil {
			t.Cleanup(func() { require.NoError(t, c.UnloadModule(m)) })
		}
		return m, err
	}
	m, err := load(cubin(90, "kern", "other"))
	require.NoError(t, err, "sm_90 on the default 9.0")
	_, err = c.Function(m, "kern")
	require.NoError(t, err)
	_, err = c.Function(m, "ker")
	require.True(t, driver.IsCode(err, driver.ErrorNotFound), "%v", err)
	_, err = load(cubin(80, "kern"))
	require.True(t, driver.IsCode(err, driver.ErrorNoBinaryForGPU), "sm_80 on 9.0: %v", err)
	require.Contains(t, err.Error(), "CUDA_ERROR_NO_BINARY_FOR_GPU (209)")

	t.Setenv(fakecuda.EnvCC, "8.6")
	for sm, ok := range map[byte]bool{80: true, 86: true, 89: false, 90: false, 70: false} {
		_, err := load(cubin(sm, "kern"))
		require.Equal(t, ok, err == nil, "sm_%d on 8.6: %v", sm, err)
	}
	t.Setenv(fakecuda.EnvCubinError, "200")
	_, err = load(cubin(86, "kern"))
	require.True(t, driver.IsCode(err, driver.ErrorInvalidImage), "%v", err)
	t.Setenv(fakecuda.EnvCubinError, "")
	bad := cubin(86, "kern")
	bad[4] = 1 // 32-bit
	_, err = load(bad)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidImage), "%v", err)

	n := counters(t, lib)
	require.Equal(t, before.CubinLoads+3, n.CubinLoads)
	require.Equal(t, before.PTXLoads, n.PTXLoads)
}

// FAKECUDA_CC sets each device's compute capability, the last one given
// for the devices after it.
func TestComputeCapability(t *testing.T) {
	t.Setenv(fakecuda.EnvDevices, "3")
	_, d, _ := load(t)
	cc := func(ord int) [2]int {
		major, err := d.DeviceAttribute(ord, driver.AttrComputeCapabilityMajor)
		require.NoError(t, err)
		minor, err := d.DeviceAttribute(ord, driver.AttrComputeCapabilityMinor)
		require.NoError(t, err)
		return [2]int{major, minor}
	}
	require.Equal(t, [2]int{9, 0}, cc(2), "the default")
	t.Setenv(fakecuda.EnvCC, "10.0,8.6")
	require.Equal(t, [2]int{10, 0}, cc(0))
	require.Equal(t, [2]int{8, 6}, cc(1))
	require.Equal(t, [2]int{8, 6}, cc(2))
}

// TestQueuedWork checks the work model: a launch stays queued on its
// stream until the host waits for it, and the device-wide waits are
// counted, apart when work was queued.
func TestQueuedWork(t *testing.T) {
	lib, _, c := load(t)
	waits := func() (int64, int64) {
		n := counters(t, lib)
		return n.DeviceWaits, n.BusyDeviceWaits
	}
	requireWaits := func(all, busy int64, msg string) {
		t.Helper()
		a, b := waits()
		require.Equal(t, [2]int64{all, busy}, [2]int64{a, b}, "device waits, busy ones: %s", msg)
	}
	done := func(s driver.Stream) bool {
		t.Helper()
		ok, err := c.StreamDone(s)
		require.NoError(t, err)
		return ok
	}
	all, busy := waits()

	m, err := c.LoadModule([]byte("//\n" + entries("k")))
	require.NoError(t, err)
	all++
	requireWaits(all, busy, "a module load waits for the device")
	f, err := c.Function(m, "k")
	require.NoError(t, err)
	s, err := c.StreamCreate(true)
	require.NoError(t, err)
	e, err := c.EventCreate(false)
	require.NoError(t, err)
	launch := func(s driver.Stream) {
		t.Helper()
		require.NoError(t, c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, s, nil))
	}

	require.True(t, done(s), "a new stream is idle")
	launch(s)
	require.False(t, done(s), "a launch is queued until waited for")
	require.NoError(t, c.EventRecord(e, s))
	launch(s)
	require.NoError(t, c.EventSynchronize(e))
	require.False(t, done(s), "an event settles only what was queued before it")
	require.NoError(t, c.EventRecord(e, s))
	require.NoError(t, c.EventSynchronize(e))
	require.True(t, done(s))
	launch(s)
	require.NoError(t, c.StreamSynchronize(s))
	require.True(t, done(s))
	launch(0)
	require.False(t, done(0), "the default stream queues work too")
	require.True(t, done(s), "streams are independent")
	require.NoError(t, c.StreamSynchronize(0))
	require.True(t, done(0))
	requireWaits(all, busy, "stream and event waits are not device-wide")

	p, err := c.MemAlloc(64)
	require.NoError(t, err)
	host, _, err := c.HostAllocMapped(64)
	require.NoError(t, err)
	launch(s)
	require.NoError(t, c.MemFree(p))
	all, busy = all+1, busy+1
	requireWaits(all, busy, "cuMemFree with a launch queued")
	require.True(t, done(s), "a device-wide wait settles every stream")
	require.NoError(t, c.HostFree(host))
	all++
	requireWaits(all, busy, "cuMemFreeHost with nothing queued")
	launch(s)
	require.NoError(t, c.StreamDestroy(s))
	require.NoError(t, c.Synchronize())
	all, busy = all+1, busy+1
	requireWaits(all, busy, "a destroyed stream's work is still waited for")
	require.NoError(t, c.Synchronize())
	all++
	requireWaits(all, busy, "cuCtxSynchronize with nothing queued")
	require.NoError(t, c.EventDestroy(e))
	launch(0)
	require.NoError(t, c.UnloadModule(m))
	all, busy = all+1, busy+1
	requireWaits(all, busy, "cuModuleUnload with a launch queued")
	require.True(t, done(0))
}

func TestEvents(t *testing.T) {
	lib, _, c := load(t)
	before := counters(t, lib).Events
	a, err := c.EventCreate(true)
	require.NoError(t, err)
	b, err := c.EventCreate(true)
	require.NoError(t, err)
	_, err = c.EventElapsed(a, b)
	require.True(t, driver.IsCode(err, driver.ErrorNotReady), "unrecorded events: %v", err)
	require.NoError(t, c.EventRecord(a, 0))
	require.NoError(t, c.EventRecord(b, 0))
	require.NoError(t, c.EventSynchronize(b))
	d, err := c.EventElapsed(a, b)
	require.NoError(t, err)
	require.Equal(t, time.Microsecond, d.Round(time.Microsecond))
	require.Equal(t, before+2, counters(t, lib).Events)
	require.NoError(t, c.EventDestroy(a))
	require.NoError(t, c.EventDestroy(b))
	require.True(t, driver.IsCode(c.EventDestroy(b), driver.ErrorInvalidHandle))
	require.Equal(t, before, counters(t, lib).Events)
}

func TestHotPathAllocationFree(t *testing.T) {
	_, _, c := load(t)
	f := kernel(t, c)
	p, err := c.MemAlloc(64)
	require.NoError(t, err)
	defer c.MemFree(p)
	arg := uint64(7)
	params := []unsafe.Pointer{unsafe.Pointer(&arg)}
	allocs := testing.AllocsPerRun(100, func() {
		_ = c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, 0, params)
		_ = c.MemsetD32Async(p, 0, 4, 0)
		_ = c.MemcpyDtoDAsync(p+32, p, 16, 0)
	})
	if fakecuda.RaceEnabled() {
		// The race detector makes sync.Pool drop a quarter of what is put
		// back, so internal/driver's pooled call buffers get reallocated.
		t.Logf("%v allocations per iteration under -race", allocs)
		return
	}
	require.Zero(t, allocs)
}

func TestDeviceBase(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	d, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	t.Setenv(fakecuda.EnvDeviceBase, "10")
	c, err := d.RetainPrimaryContext(1) // by handle 11, from cuDeviceGet
	require.NoError(t, err)
	name, err := d.DeviceName(1)
	require.NoError(t, err)
	require.Equal(t, "Fake CUDA Device 1", name)
	require.NoError(t, c.Release())
	require.Zero(t, counters(t, lib).ContextRetains)

	// A handle from before the base changed is an ordinal now: refused.
	t.Setenv(fakecuda.EnvDeviceBase, "")
	c, err = d.RetainPrimaryContext(1) // by handle 1
	require.NoError(t, err)
	t.Setenv(fakecuda.EnvDeviceBase, "10")
	err = c.Release()
	require.True(t, driver.IsCode(err, driver.ErrorInvalidDevice), "%v", err)
	require.EqualValues(t, 1, counters(t, lib).ContextRetains)
}

func TestInitError(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	t.Setenv(fakecuda.EnvInitError, "100")
	_, err := driver.LoadLibrary(lib)
	require.True(t, driver.IsCode(err, driver.ErrorNoDevice), "%v", err)
	t.Setenv(fakecuda.EnvInitError, "")
	_, err = driver.LoadLibrary(lib)
	require.NoError(t, err)
}

// TestNoDevice checks the build without a device: cuInit says no device
// with FAKECUDA_INIT_ERROR unset, and the variable still overrides it.
func TestNoDevice(t *testing.T) {
	lib := testutil.FakeCUDANoDevice(t)
	t.Setenv(fakecuda.EnvInitError, "")
	_, err := driver.LoadLibrary(lib)
	require.ErrorIs(t, err, driver.ErrNoDevice)
	require.NotErrorIs(t, err, driver.ErrNoDriver)
	t.Setenv(fakecuda.EnvInitError, "0")
	d, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	n, err := d.DeviceCount()
	require.NoError(t, err)
	require.Equal(t, 2, n, "past cuInit it is the usual stub")
}

// TestLaunchRecord checks what the stub records of a launch: every call,
// failed ones too, and only as many parameters as FAKECUDA_RECORD_PARAMS
// asks for. (internal/driver's tests check the values a launch passes.)
func TestLaunchRecord(t *testing.T) {
	lib, _, c := load(t)
	f := kernel(t, c)
	last := func() fakecuda.Launch {
		t.Helper()
		calls, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		return calls.Launch
	}
	a, b := uint64(7), uint64(8)
	params := []unsafe.Pointer{unsafe.Pointer(&a), unsafe.Pointer(&b)}
	require.NoError(t, c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, 0, params))
	require.Zero(t, last().Args, "no parameters read unless asked")
	t.Setenv(fakecuda.EnvRecordParams, "1")
	err := c.Launch(f, [3]uint32{0, 1, 1}, [3]uint32{32, 1, 1}, 0, 0, params)
	require.True(t, driver.IsCode(err, driver.ErrorInvalidValue), "%v", err)
	l := last()
	require.Equal(t, [3]uint32{0, 1, 1}, l.Grid, "a failed launch is recorded")
	require.Equal(t, [fakecuda.MaxRecordedParams]uint64{7}, l.Args)
	require.NoError(t, c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{32, 1, 1}, 0, 0, nil))
	require.Zero(t, last().Params)
	require.Zero(t, last().Args, "no parameters to read")
	require.NoError(t, c.Synchronize())
}
