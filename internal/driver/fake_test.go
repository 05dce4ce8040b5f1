//go:build linux

package driver

// Tests against internal/fakecuda's stub driver, compiled by the system C
// compiler: they check that arguments reach C as C expects them (the
// by-value IPC handle, the eleven arguments of a launch, device handles,
// flags), through the stub's checks and its record of the latest calls
// (fakecuda.ReadCalls). Each test opens a fresh copy of the stub.

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// fakeContext opens a fresh copy of the stub, with env ("KEY=value",
// FAKECUDA_* settings) set for the test, and retains device 0's primary
// context until the test ends. It returns the copy's path, for
// fakecuda.Read and fakecuda.ReadCalls.
func fakeContext(t *testing.T, env ...string) (string, *Driver, *Context) {
	t.Helper()
	lib := testutil.FakeCUDA(t)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	d, err := LoadLibrary(lib)
	if err != nil {
		t.Fatalf("LoadLibrary(stub): %v", err)
	}
	c, err := d.RetainPrimaryContext(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Release() })
	return lib, d, c
}

// fakeCounters reads the stub's counters.
func fakeCounters(t *testing.T, lib string) fakecuda.Counters {
	t.Helper()
	n, err := fakecuda.Read(lib)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fakeCalls reads the stub's record of its latest calls.
func fakeCalls(t *testing.T, lib string) fakecuda.Calls {
	t.Helper()
	calls, err := fakecuda.ReadCalls(lib)
	if err != nil {
		t.Fatal(err)
	}
	return calls
}

// fakeKernel loads a module and returns a kernel of it and a stream, all
// released at the end of the test.
func fakeKernel(t *testing.T, c *Context) (Function, Stream) {
	t.Helper()
	m, err := c.LoadModule([]byte("// PTX\n.visible .entry kern(\n"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.UnloadModule(m) })
	f, err := c.Function(m, "kern")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.StreamDestroy(s) })
	return f, s
}

// fakeAlloc allocates device memory freed at the end of the test.
func fakeAlloc(t *testing.T, c *Context, n uint64) DevicePtr {
	t.Helper()
	p, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.MemFree(p) })
	return p
}

// TestFakeDevice runs with device handles apart from the ordinals (ordinal
// + 10) and device 1 unable to reach device 0 but not the reverse, so an
// ordinal passed for a handle, or arguments swapped, give a wrong answer
// or an error.
func TestFakeDevice(t *testing.T) {
	_, d, _ := fakeContext(t, fakecuda.EnvDeviceBase+"=10", fakecuda.EnvNoPeer+"=1>0")
	if v, err := d.Version(); v != 13000 || err != nil {
		t.Errorf("Version = %d, %v", v, err)
	}
	if n, err := d.RequireDevices(); n != 2 || err != nil {
		t.Errorf("RequireDevices = %d, %v", n, err)
	}
	if s, err := d.DeviceName(1); s != "Fake CUDA Device 1" || err != nil {
		t.Errorf("DeviceName = %q, %v", s, err)
	}
	if v, err := d.DeviceAttribute(1, AttrMultiprocessorCount); v != 132 || err != nil {
		t.Errorf("DeviceAttribute(SMs) = %d, %v", v, err)
	}
	if v, err := d.DeviceAttribute(1, AttrPCIBusID); v != 1 || err != nil {
		t.Errorf("DeviceAttribute(1, PCI bus) = %d, %v", v, err)
	}
	if v, err := d.DeviceTotalMem(0); v != 141<<30 || err != nil {
		t.Errorf("DeviceTotalMem = %d, %v", v, err)
	}
	if s, err := d.DevicePCIBusID(1); s != "0000:01:00.0" || err != nil {
		t.Errorf("DevicePCIBusID = %q, %v", s, err)
	}
	if ok, err := d.CanAccessPeer(0, 1); !ok || err != nil {
		t.Errorf("CanAccessPeer(0, 1) = %v, %v", ok, err)
	}
	if ok, err := d.CanAccessPeer(1, 0); ok || err != nil {
		t.Errorf("CanAccessPeer(1, 0) = %v, %v", ok, err)
	}
	for ord := range 2 {
		u, err := d.DeviceUUID(ord)
		for i := range u {
			if u[i] != byte(0xFA+16*ord+i) || err != nil {
				t.Fatalf("DeviceUUID(%d) = %x, %v", ord, u, err)
			}
		}
	}
	_, err := d.DeviceName(5)
	if !errors.Is(err, ErrNoDevice) || !IsCode(err, ErrorInvalidDevice) {
		t.Errorf("DeviceName(5): %v", err)
	}
	if got := d.ErrorName(ErrorOutOfMemory); got != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Errorf("ErrorName = %q", got)
	}
	if got := d.ErrorName(ErrorAssert); got != "CUDA_ERROR_ASSERT" {
		t.Errorf("ErrorName fallback = %q", got)
	}
}

func TestFakeInitNoDevice(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	t.Setenv(fakecuda.EnvInitError, "100")
	_, err := LoadLibrary(lib)
	if !errors.Is(err, ErrNoDevice) || errors.Is(err, ErrNoDriver) {
		t.Fatalf("cuInit NO_DEVICE: err = %v", err)
	}
	if want := "driver: cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestFakeContext(t *testing.T) {
	lib, d, c := fakeContext(t)
	if c.Ordinal() != 0 || c.Driver() != d {
		t.Error("Ordinal/Driver wrong")
	}
	err := c.Do(func() error {
		cur, err := d.current()
		if cur == 0 || cur != c.ctx {
			t.Errorf("current context in Do = %#x, want %#x", cur, c.ctx)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	c1, err := d.RetainPrimaryContext(1)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Release()
	for range 2 { // the second time is ALREADY_ENABLED, reported as success
		if err := c.EnablePeerAccess(c1); err != nil {
			t.Errorf("EnablePeerAccess: %v", err)
		}
	}
	before := fakeCounters(t, lib).ContextRetains
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if n := before - fakeCounters(t, lib).ContextRetains; n != 1 {
		t.Errorf("Release twice released %d times", n)
	}
}

func TestFakeMemory(t *testing.T) {
	lib, _, c := fakeContext(t)
	p := fakeAlloc(t, c, 1000)
	if p == 0 {
		t.Error("MemAlloc returned a null pointer")
	}
	if f, tot, err := c.MemGetInfo(); tot != 141<<30 || f != tot-1000 || err != nil {
		t.Errorf("MemGetInfo = %d, %d, %v", f, tot, err)
	}
	if base, size, err := c.MemAddressRange(p + 100); base != p || size != 1000 || err != nil {
		t.Errorf("MemAddressRange(p+100) = %#x, %d, %v; want %#x, 1000", base, size, err, p)
	}
	if _, _, err := c.MemAddressRange(p + 1000); !IsCode(err, ErrorNotFound) {
		t.Errorf("MemAddressRange past the allocation: %v", err)
	}
	_, err := c.MemAlloc(1 << 41)
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrorOutOfMemory || e.Call != "cuMemAlloc_v2" ||
		err.Error() != "driver: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory" {
		t.Errorf("MemAlloc too much: %v", err)
	}
	src := make([]byte, 1000)
	for i := range src {
		src[i] = byte(rand.Uint32())
	}
	dst := make([]byte, len(src))
	if err := c.MemcpyHtoD(p, src); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(dst, p); err != nil {
		t.Fatal(err)
	}
	if string(dst) != string(src) {
		t.Error("HtoD/DtoH round trip differs")
	}
	host, dev, err := c.HostAllocMapped(64)
	// The stub maps host memory at its own address.
	if err != nil || host == nil || dev != DevicePtr(uintptr(host)) {
		t.Errorf("HostAllocMapped = %p, %#x, %v", host, dev, err)
	}
	if flags := fakeCalls(t, lib).HostAllocFlags; flags != memHostAllocPortable|memHostAllocDeviceMap {
		t.Errorf("cuMemHostAlloc got flags %#x, want PORTABLE|DEVICEMAP", flags)
	}
	if err := c.HostFree(host); err != nil {
		t.Error(err)
	}
}

// TestFakeIpcByValue opens the handles of allocations of several sizes:
// the stub opens a handle only with all 64 bytes intact and with
// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, so each open shows the handle went by
// value as C expects.
func TestFakeIpcByValue(t *testing.T) {
	lib, _, c := fakeContext(t)
	for i := range 10 {
		p := fakeAlloc(t, c, uint64(256*(i+1)+i))
		h, err := c.IpcGetMemHandle(p + DevicePtr(i))
		if err != nil || string(h[:8]) != "FAKECUDA" {
			t.Fatalf("IpcGetMemHandle = %x, %v", h, err)
		}
		q, err := c.IpcOpenMemHandle(h)
		if q != p || err != nil {
			t.Fatalf("IpcOpenMemHandle(%x) = %#x, %v; want %#x", h, q, err, p)
		}
		if err := c.IpcCloseMemHandle(q); err != nil {
			t.Fatal(err)
		}
	}
	if n := fakeCounters(t, lib).IPCMappings; n != 0 {
		t.Errorf("%d IPC mappings left open", n)
	}
}

func TestFakeModule(t *testing.T) {
	_, _, c := fakeContext(t, fakecuda.EnvMissingFuncs+"=nope")
	m, err := c.LoadModule([]byte("// good ptx\n.visible .entry kern(\n"))
	if m == 0 || err != nil {
		t.Fatalf("LoadModule(good) = %#x, %v", m, err)
	}
	defer c.UnloadModule(m)
	if f, err := c.Function(m, "kern"); f == 0 || err != nil {
		t.Errorf("Function = %#x, %v", f, err)
	}
	if _, err := c.Function(m, "nope"); !IsCode(err, ErrorNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Function(nope): %v", err)
	}
	_, err = c.LoadModule([]byte("bad ptx"))
	const log = `ptxas fatal   : fakecuda: image does not start with "//", not PTX (error log buffer of 8192 bytes)`
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrorInvalidPTX || e.Log != log {
		t.Fatalf("LoadModule(bad): %#v", err)
	}
	if want := "driver: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218): a PTX JIT compilation failed\n" + log; err.Error() != want {
		t.Errorf("error text %q, want %q", err, want)
	}
}

func TestFakeStreamEvent(t *testing.T) {
	lib, d, c := fakeContext(t)
	f, s := fakeKernel(t, c)
	if flags := fakeCalls(t, lib).StreamFlags; flags != streamNonBlocking {
		t.Errorf("StreamCreate(true) passed flags %#x", flags)
	}
	blocking, err := c.StreamCreate(false)
	if flags := fakeCalls(t, lib).StreamFlags; blocking == 0 || flags != 0 || err != nil {
		t.Errorf("StreamCreate(false) = %#x, %v, passing flags %#x", blocking, err, flags)
	}
	c.StreamDestroy(blocking)
	if done, err := c.StreamDone(0); !done || err != nil {
		t.Errorf("StreamDone(idle) = %v, %v", done, err)
	}
	if err := c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, s, nil); err != nil {
		t.Fatal(err)
	}
	if done, err := c.StreamDone(s); done || err != nil {
		t.Errorf("StreamDone(busy) = %v, %v", done, err)
	}
	for _, timing := range []bool{false, true} {
		e, err := c.EventCreate(timing)
		flags := fakeCalls(t, lib).EventFlags
		if want := map[bool]uint32{false: eventDisableTiming, true: 0}[timing]; e == 0 || flags != want || err != nil {
			t.Errorf("EventCreate(%v) = %#x, %v, passing flags %#x, want %#x", timing, e, err, flags, want)
		}
		c.EventDestroy(e)
	}
	start, _ := c.EventCreate(true)
	defer c.EventDestroy(start)
	end, _ := c.EventCreate(true)
	defer c.EventDestroy(end)
	if err := errors.Join(c.EventRecord(start, s), c.EventRecord(end, s), c.EventSynchronize(end)); err != nil {
		t.Fatal(err)
	}
	if el, err := c.EventElapsed(start, end); el != time.Microsecond || err != nil {
		t.Errorf("EventElapsed = %v, %v", el, err)
	}
	if d.fn.eventElapsedTimeName != "cuEventElapsedTime_v2" {
		t.Errorf("bound %s; the _v2 symbol must be preferred", d.fn.eventElapsedTimeName)
	}
}

// The calls of an operation's hot path (launch, memsets, linear, peer,
// row and box copies, event record) allocate nothing.
func TestFakeLaunchAndHotPathAllocs(t *testing.T) {
	lib, _, c := fakeContext(t, fakecuda.EnvRecordParams+"=2")
	f, s := fakeKernel(t, c)
	a, b := uint64(0xfeed), uint64(0x1122334455667788)
	params := []unsafe.Pointer{unsafe.Pointer(&a), unsafe.Pointer(&b)}
	grid, block := [3]uint32{1, 2, 3}, [3]uint32{32, 4, 5}
	if err := c.Launch(f, grid, block, 4096, s, params); err != nil {
		t.Fatal(err)
	}
	got := fakeCalls(t, lib).Launch
	want := fakecuda.Launch{Function: uintptr(f), Grid: grid, Block: block, SharedBytes: 4096, Stream: uintptr(s),
		Params: got.Params, Args: [fakecuda.MaxRecordedParams]uint64{0xfeed, 0x1122334455667788}}
	if got != want || got.Params == 0 {
		t.Errorf("C saw launch %+v, want %+v", got, want)
	}
	if err := c.Launch(f, grid, block, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	if got := fakeCalls(t, lib).Launch; got.Params != 0 || got.Stream != 0 {
		t.Errorf("empty params not passed as NULL: %+v", got)
	}

	p := fakeAlloc(t, c, 64)
	e, err := c.EventCreate(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.EventDestroy(e)
	rows := func() error { return c.MemcpyRowsAsync(p+32, 8, p, 8, 8, 2, s) }
	box := func() error {
		return c.MemcpyBoxAsync(Box{Ptr: p + 32, Pitch: 8, Height: 2}, Box{Ptr: p, Pitch: 8, Height: 2}, 8, 2, 1, s)
	}
	if err := errors.Join(rows(), box()); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		_ = rows()
		_ = box()
		_ = c.Launch(f, grid, block, 0, s, params)
		_ = c.MemsetD32Async(p, 1, 4, s)
		_ = c.MemsetD8Async(p, 1, 4, s)
		_ = c.MemcpyDtoDAsync(p+32, p, 4, s)
		_ = c.MemcpyPeerAsync(p+32, c, p, c, 4, s)
		_ = c.EventRecord(e, s)
	})
	if err := c.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if n := fakeCounters(t, lib).Launches; n != 2+201 {
		t.Errorf("%d launches, want 203: a hot-path call failed", n)
	}
	if allocs != 0 {
		if fakecuda.RaceEnabled() {
			// The race detector makes sync.Pool drop a quarter of what is
			// put back, so the pooled call buffers get reallocated.
			t.Logf("hot path allocates %v times per iteration under -race", allocs)
			return
		}
		t.Errorf("hot path allocates %v times per iteration", allocs)
	}
}

// TestFakeSetFuncAttribute: the carveout reaches cuFuncSetAttribute as its
// value, and one out of range comes back as the driver's error.
func TestFakeSetFuncAttribute(t *testing.T) {
	_, _, c := fakeContext(t)
	f, _ := fakeKernel(t, c)
	if err := c.SetFuncAttribute(f, FuncAttrSharedCarveout, 100); err != nil {
		t.Fatal(err)
	}
	if err := c.SetFuncAttribute(f, FuncAttrSharedCarveout, 101); !IsCode(err, ErrorInvalidValue) {
		t.Errorf("a carveout of 101%%: %v, want CUDA_ERROR_INVALID_VALUE", err)
	}
}

// TestFakeCallerContextKept: a call leaves the thread's current context as
// the caller had it, none or another device's.
func TestFakeCallerContextKept(t *testing.T) {
	_, d, c := fakeContext(t, fakecuda.EnvDevices+"=2")
	other, err := d.RetainPrimaryContext(1)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Release()
	requireCallerContextKept(t, d, c, 0)
	requireCallerContextKept(t, d, c, other.ctx)
}
