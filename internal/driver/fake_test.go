//go:build linux

package driver

import (
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// fakeCUDA implements the driver entry points the tests inspect; every other
// symbol of the binding table gets a stub returning CUDA_SUCCESS. Compiled
// by the system C compiler, it checks the argument passing (notably the
// by-value IPC handle) against what C really expects.
const fakeCUDA = `
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef struct { char reserved[64]; } CUipcMemHandle;
static int init_result;
void fake_set_init_result(int r) { init_result = r; }
int cuInit(unsigned flags) { return flags ? 1 : init_result; }
int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int ord) { if (ord < 0 || ord >= 2) return 101; *d = ord + 10; return 0; }
int cuDeviceGetName(char *b, int len, int dev) { snprintf(b, len, "Fake GPU %d", dev); return 0; }
int cuDeviceGetAttribute(int *v, int attr, int dev) { *v = attr * 1000 + dev; return 0; }
int cuDeviceTotalMem_v2(size_t *n, int dev) { *n = ((size_t)80 << 30) + dev; return 0; }
int cuDeviceGetPCIBusId(char *b, int len, int dev) { snprintf(b, len, "0000:%02x:00.0", dev); return 0; }
int cuDeviceCanAccessPeer(int *v, int a, int b) { *v = (a == 10 && b == 11); return 0; }
int cuDeviceGetUuid_v2(unsigned char *u, int dev) { for (int i = 0; i < 16; i++) u[i] = dev + i; return 0; }
int cuGetErrorName(int r, const char **p) {
	switch (r) {
	case 2: *p = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
	case 100: *p = "CUDA_ERROR_NO_DEVICE"; return 0;
	case 218: *p = "CUDA_ERROR_INVALID_PTX"; return 0;
	}
	*p = 0; return 1;
}
int cuGetErrorString(int r, const char **p) {
	switch (r) {
	case 2: *p = "out of memory"; return 0;
	case 100: *p = "no CUDA-capable device is detected"; return 0;
	}
	*p = 0; return 1;
}
int cuDevicePrimaryCtxRetain(uintptr_t *c, int dev) { *c = 0xC0DE00 + dev; return 0; }
static int released;
int cuDevicePrimaryCtxRelease_v2(int dev) { released++; return 0; }
int fake_released(void) { return released; }
static __thread uintptr_t current;
int cuCtxSetCurrent(uintptr_t c) { current = c; return 0; }
int cuCtxGetCurrent(uintptr_t *c) { *c = current; return 0; }
int cuCtxEnablePeerAccess(uintptr_t peer, unsigned flags) { return 704; }
int cuMemGetInfo_v2(size_t *f, size_t *t) { *f = 1 << 20; *t = 2 << 20; return 0; }
int cuMemAlloc_v2(uint64_t *p, size_t n) { if (n > ((size_t)1 << 40)) return 2; *p = 0x7f0000000000ull + n; return 0; }
static unsigned char mem[4096];
int cuMemcpyHtoD_v2(uint64_t dst, const void *src, size_t n) { if (n > sizeof mem) return 1; memcpy(mem, src, n); return 0; }
int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t n) { if (n > sizeof mem) return 1; memcpy(dst, mem, n); return 0; }
int cuMemHostAlloc(void **p, size_t n, unsigned flags) { if (flags != 3) return 1; *p = malloc(n); return 0; }
int cuMemHostGetDevicePointer_v2(uint64_t *d, void *p, unsigned flags) { *d = (uint64_t)(uintptr_t)p + 1; return 0; }
int cuMemFreeHost(void *p) { free(p); return 0; }
static CUipcMemHandle last_handle;
static unsigned last_flags;
int cuIpcGetMemHandle(CUipcMemHandle *h, uint64_t p) { for (int i = 0; i < 64; i++) h->reserved[i] = (char)(p + i); return 0; }
int cuIpcOpenMemHandle_v2(uint64_t *p, CUipcMemHandle h, unsigned flags) {
	last_handle = h; last_flags = flags; *p = 0xABCD00; return 0;
}
unsigned fake_last_ipc(CUipcMemHandle *out) { *out = last_handle; return last_flags; }
int cuModuleLoadDataEx(uintptr_t *m, const char *img, unsigned n, int *opts, void **vals) {
	char *buf = 0; size_t size = 0;
	if (strncmp(img, "good", 4) == 0) { *m = 0x5000 + strlen(img); return 0; }
	for (unsigned i = 0; i < n; i++) {
		if (opts[i] == 5) buf = vals[i];
		if (opts[i] == 6) size = (size_t)vals[i];
	}
	if (buf && size > 0) snprintf(buf, size, "  ptxas fatal : fake error, buffer %zu\n", size);
	return 218;
}
int cuModuleGetFunction(uintptr_t *f, uintptr_t m, const char *name) {
	if (strcmp(name, "kern") != 0) return 500;
	*f = m + 1; return 0;
}
static uint64_t launch[13];
int cuLaunchKernel(uintptr_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
		unsigned shared, uintptr_t stream, void **params, void **extra) {
	uint64_t a[13] = {f, gx, gy, gz, bx, by, bz, shared, stream, (uint64_t)(uintptr_t)extra, 0, 0, params != 0};
	if (params) { a[10] = *(unsigned *)params[0]; a[11] = *(uint64_t *)params[1]; }
	memcpy(launch, a, sizeof a);
	return 0;
}
void fake_last_launch(uint64_t *out) { memcpy(out, launch, sizeof launch); }
int cuStreamQuery(uintptr_t s) { return s == 0 ? 0 : 600; }
int cuStreamCreate(uintptr_t *s, unsigned flags) { *s = 0x5100 + flags; return 0; }
int cuEventCreate(uintptr_t *e, unsigned flags) { *e = 0xE000 + flags; return 0; }
int cuEventElapsedTime_v2(float *ms, uintptr_t a, uintptr_t b) { *ms = 1.5f; return 0; }
int cuEventElapsedTime(float *ms, uintptr_t a, uintptr_t b) { *ms = 99.0f; return 0; }
`

var (
	fakeOnce sync.Once
	fakeDir  string
	fakePath string
	fakeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fakeDir != "" {
		_ = os.RemoveAll(fakeDir)
	}
	os.Exit(code)
}

// fakeLibrary compiles fakeCUDA (plus stubs) into a shared library once per
// test binary and returns its path; the test is skipped without a C compiler.
func fakeLibrary(t *testing.T) string {
	t.Helper()
	fakeOnce.Do(func() {
		cc, err := exec.LookPath("cc")
		if err != nil {
			fakeErr = err
			return
		}
		var src strings.Builder
		src.WriteString(fakeCUDA)
		var f funcs
		for _, s := range f.table() {
			for _, n := range s.names {
				if !strings.Contains(fakeCUDA, " "+n+"(") {
					src.WriteString("int " + n + "(void) { return 0; }\n")
				}
			}
		}
		dir, err := os.MkdirTemp("", "fakecuda")
		if err != nil {
			fakeErr = err
			return
		}
		fakeDir = dir
		c := filepath.Join(dir, "fakecuda.c")
		if fakeErr = os.WriteFile(c, []byte(src.String()), 0o644); fakeErr != nil {
			return
		}
		fakePath = filepath.Join(dir, "libfakecuda.so")
		out, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-o", fakePath, c).CombinedOutput()
		if err != nil {
			fakeErr = errors.New(err.Error() + ": " + string(out))
		}
	})
	if fakeErr != nil {
		t.Skipf("cannot build the fake driver: %v", fakeErr)
	}
	return fakePath
}

// fakeCall calls a helper function of the fake library.
func fakeCall(t *testing.T, name string, args ...uintptr) uintptr {
	t.Helper()
	h, err := purego.Dlopen(fakeLibrary(t), purego.RTLD_NOW|purego.RTLD_GLOBAL)
	if err != nil {
		t.Fatal(err)
	}
	fn, err := purego.Dlsym(h, name)
	if err != nil {
		t.Fatal(err)
	}
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

func fakeContext(t *testing.T) (*Driver, *Context) {
	t.Helper()
	d, err := LoadLibrary(fakeLibrary(t))
	if err != nil {
		t.Fatalf("LoadLibrary(fake): %v", err)
	}
	c, err := d.RetainPrimaryContext(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Release() })
	return d, c
}

func TestFakeDevice(t *testing.T) {
	d, _ := fakeContext(t)
	if v, err := d.Version(); v != 13000 || err != nil {
		t.Errorf("Version = %d, %v", v, err)
	}
	if n, err := d.RequireDevices(); n != 2 || err != nil {
		t.Errorf("RequireDevices = %d, %v", n, err)
	}
	if s, err := d.DeviceName(1); s != "Fake GPU 11" || err != nil {
		t.Errorf("DeviceName = %q, %v", s, err)
	}
	if v, err := d.DeviceAttribute(1, AttrMultiprocessorCount); v != 16011 || err != nil {
		t.Errorf("DeviceAttribute = %d, %v", v, err)
	}
	if v, err := d.DeviceTotalMem(0); v != 80<<30+10 || err != nil {
		t.Errorf("DeviceTotalMem = %d, %v", v, err)
	}
	if s, err := d.DevicePCIBusID(1); s != "0000:0b:00.0" || err != nil {
		t.Errorf("DevicePCIBusID = %q, %v", s, err)
	}
	if ok, err := d.CanAccessPeer(0, 1); !ok || err != nil {
		t.Errorf("CanAccessPeer(0, 1) = %v, %v", ok, err)
	}
	if ok, err := d.CanAccessPeer(1, 0); ok || err != nil {
		t.Errorf("CanAccessPeer(1, 0) = %v, %v", ok, err)
	}
	if u, err := d.DeviceUUID(0); u[0] != 10 || u[15] != 25 || err != nil {
		t.Errorf("DeviceUUID = %x, %v", u, err)
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
	fakeCall(t, "fake_set_init_result", uintptr(ErrorNoDevice))
	defer fakeCall(t, "fake_set_init_result", 0)
	_, err := LoadLibrary(fakeLibrary(t))
	if !errors.Is(err, ErrNoDevice) || errors.Is(err, ErrNoDriver) {
		t.Fatalf("cuInit NO_DEVICE: err = %v", err)
	}
	if want := "driver: cuInit: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is detected"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
}

func TestFakeContext(t *testing.T) {
	d, c := fakeContext(t)
	if c.Ordinal() != 0 || c.Driver() != d {
		t.Error("Ordinal/Driver wrong")
	}
	err := c.Do(func() error {
		cur, err := d.current()
		if cur != 0xC0DE0A {
			t.Errorf("current context in Do = %#x", cur)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.EnablePeerAccess(c); err != nil {
		t.Errorf("EnablePeerAccess with ALREADY_ENABLED: %v", err)
	}
	before := fakeCall(t, "fake_released")
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(); err != nil {
		t.Fatal(err)
	}
	if n := fakeCall(t, "fake_released") - before; n != 1 {
		t.Errorf("Release twice released %d times", n)
	}
}

func TestFakeMemory(t *testing.T) {
	_, c := fakeContext(t)
	if f, tot, err := c.MemGetInfo(); f != 1<<20 || tot != 2<<20 || err != nil {
		t.Errorf("MemGetInfo = %d, %d, %v", f, tot, err)
	}
	if p, err := c.MemAlloc(256); p != 0x7f0000000100 || err != nil {
		t.Errorf("MemAlloc = %#x, %v", p, err)
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
	if err := c.MemcpyHtoD(0, src); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(dst, 0); err != nil {
		t.Fatal(err)
	}
	if string(dst) != string(src) {
		t.Error("HtoD/DtoH round trip differs")
	}
	host, dev, err := c.HostAllocMapped(64)
	if err != nil || host == nil || dev != DevicePtr(uintptr(host))+1 {
		t.Errorf("HostAllocMapped = %p, %#x, %v", host, dev, err)
	}
	if err := c.HostFree(host); err != nil {
		t.Error(err)
	}
}

func TestFakeIpcByValue(t *testing.T) {
	_, c := fakeContext(t)
	h, err := c.IpcGetMemHandle(0x40)
	if err != nil || h[0] != 0x40 || h[63] != 0x7f {
		t.Fatalf("IpcGetMemHandle = %x, %v", h, err)
	}
	for range 10 {
		for i := range h {
			h[i] = byte(rand.Uint32())
		}
		p, err := c.IpcOpenMemHandle(h)
		if p != 0xABCD00 || err != nil {
			t.Fatalf("IpcOpenMemHandle = %#x, %v", p, err)
		}
		var got IpcMemHandle
		flags := fakeCall(t, "fake_last_ipc", uintptr(unsafe.Pointer(&got)))
		if got != h || uint32(flags) != ipcLazyEnablePeerAccess {
			t.Fatalf("C saw handle %x flags %d; sent %x", got, uint32(flags), h)
		}
	}
}

func TestFakeModule(t *testing.T) {
	_, c := fakeContext(t)
	m, err := c.LoadModule([]byte("good ptx"))
	if m != 0x5008 || err != nil {
		t.Fatalf("LoadModule(good) = %#x, %v", m, err)
	}
	if f, err := c.Function(m, "kern"); f != 0x5009 || err != nil {
		t.Errorf("Function = %#x, %v", f, err)
	}
	if _, err := c.Function(m, "nope"); !IsCode(err, ErrorNotFound) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("Function(nope): %v", err)
	}
	_, err = c.LoadModule([]byte("bad ptx"))
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrorInvalidPTX || e.Log != "ptxas fatal : fake error, buffer 8192" {
		t.Fatalf("LoadModule(bad): %#v", err)
	}
	if !strings.HasSuffix(err.Error(), "(218)\nptxas fatal : fake error, buffer 8192") {
		t.Errorf("error text %q", err)
	}
}

func TestFakeStreamEvent(t *testing.T) {
	_, c := fakeContext(t)
	if s, err := c.StreamCreate(true); s != 0x5101 || err != nil {
		t.Errorf("StreamCreate(true) = %#x, %v", s, err)
	}
	if done, err := c.StreamDone(0); !done || err != nil {
		t.Errorf("StreamDone(0) = %v, %v", done, err)
	}
	if done, err := c.StreamDone(7); done || err != nil {
		t.Errorf("StreamDone(busy) = %v, %v", done, err)
	}
	if e, err := c.EventCreate(false); e != 0xE002 || err != nil {
		t.Errorf("EventCreate(false) = %#x, %v", e, err)
	}
	if e, err := c.EventCreate(true); e != 0xE000 || err != nil {
		t.Errorf("EventCreate(true) = %#x, %v", e, err)
	}
	if d, err := c.EventElapsed(1, 2); d != 1500*time.Microsecond || err != nil {
		t.Errorf("EventElapsed = %v, %v (the _v2 symbol must be preferred)", d, err)
	}
}

func TestFakeLaunchAndHotPathAllocs(t *testing.T) {
	_, c := fakeContext(t)
	val := uint32(0xfeed)
	ptr := uint64(0x1122334455667788)
	params := []unsafe.Pointer{unsafe.Pointer(&val), unsafe.Pointer(&ptr)}
	grid, block := [3]uint32{1, 2, 3}, [3]uint32{128, 4, 5}
	if err := c.Launch(0xF00, grid, block, 4096, 0x77, params); err != nil {
		t.Fatal(err)
	}
	var got [13]uint64
	fakeCall(t, "fake_last_launch", uintptr(unsafe.Pointer(&got)))
	want := [13]uint64{0xF00, 1, 2, 3, 128, 4, 5, 4096, 0x77, 0, 0xfeed, 0x1122334455667788, 1}
	if got != want {
		t.Errorf("C saw launch %x, want %x", got, want)
	}
	if err := c.Launch(0xF00, grid, block, 0, 0, nil); err != nil {
		t.Fatal(err)
	}
	fakeCall(t, "fake_last_launch", uintptr(unsafe.Pointer(&got)))
	if got[12] != 0 {
		t.Error("empty params not passed as NULL")
	}

	allocs := testing.AllocsPerRun(200, func() {
		_ = c.Launch(0xF00, grid, block, 0, 0x77, params)
		_ = c.MemsetD32Async(0x10, 1, 4, 0x77)
		_ = c.MemsetD8Async(0x10, 1, 4, 0x77)
		_ = c.MemcpyDtoDAsync(0x10, 0x20, 4, 0x77)
		_ = c.MemcpyPeerAsync(0x10, c, 0x20, c, 4, 0x77)
		_ = c.EventRecord(1, 0x77)
	})
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
