package driver

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/dl"
)

func TestLoadLibraryMissing(t *testing.T) {
	const path = "/nonexistent/libcuda.so.1"
	d, err := LoadLibrary(path)
	if d != nil || err == nil {
		t.Fatalf("LoadLibrary(%q) = %v, %v; want error", path, d, err)
	}
	if !errors.Is(err, ErrNoDriver) {
		t.Errorf("error %q does not match ErrNoDriver", err)
	}
	msg := err.Error()
	_, dlErr := dl.Open(path)
	if dlErr == nil {
		t.Fatal("dlopen of a nonexistent path succeeded")
	}
	for _, want := range []string{"driver: ", path, dlErr.Error(), "install the NVIDIA driver"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if errors.Is(err, ErrNoDevice) || errors.Is(err, ErrSymbolMissing) {
		t.Errorf("error %q matches the wrong sentinel", err)
	}
	var le *LoadError
	if !errors.As(err, &le) || le.Path != path || le.Err.Error() != dlErr.Error() {
		t.Errorf("error %q is not a *LoadError for %s keeping the loader's error", err, path)
	}
	if n := strings.Count(msg, path); n != 1 {
		t.Errorf("error %q names %s %d times, want once", msg, path, n)
	}
}

func TestLoadErrorNamesThePath(t *testing.T) {
	e := &LoadError{Path: "libcuda.so.1", Err: errors.New("dlopen failed without a message")}
	if got, want := e.Error(), "driver: libcuda.so.1: dlopen failed without a message (install the NVIDIA driver; the CUDA toolkit is not needed)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLoadCachesResult(t *testing.T) {
	d1, err1 := Load()
	d2, err2 := Load()
	if d1 != d2 || err1 != err2 {
		t.Fatalf("Load not cached: (%p, %v) then (%p, %v)", d1, err1, d2, err2)
	}
	if err1 != nil && !strings.HasPrefix(err1.Error(), "driver: ") {
		t.Errorf("error %q lacks the driver: prefix", err1)
	}
}

func TestErrorFormat(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Code: ErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Description: "out of memory"}
	if got, want := e.Error(), "driver: cuMemAlloc_v2: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = &Error{Call: "cuModuleLoadDataEx", Code: ErrorInvalidPTX, Log: "ptxas fatal: bad"}
	if got, want := e.Error(), "driver: cuModuleLoadDataEx: CUDA_ERROR_INVALID_PTX (218)\nptxas fatal: bad"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e = (*Driver)(nil).newError("cuInit", ErrorNoDevice)
	if got, want := e.Error(), "driver: cuInit: CUDA_ERROR_NO_DEVICE (100)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if err := (*Driver)(nil).check("cuInit", 0); err != nil {
		t.Errorf("check(0) = %v", err)
	}
	// Only the low 32 bits of the return register are the CUresult.
	if err := (*Driver)(nil).check("cuInit", 0xdead_0000_0000); err != nil {
		t.Errorf("check(high bits) = %v", err)
	}
}

func TestErrorIs(t *testing.T) {
	for code, want := range map[Result]bool{
		ErrorNoDevice: true, ErrorInvalidDevice: true,
		ErrorOutOfMemory: false, ErrorNotInitialized: false, ErrorInvalidValue: false, ErrorUnknown: false,
	} {
		err := fmt.Errorf("wrapped: %w", &Error{Call: "cuX", Code: code})
		if got := errors.Is(err, ErrNoDevice); got != want {
			t.Errorf("errors.Is(%v, ErrNoDevice) = %v, want %v", code, got, want)
		}
		if errors.Is(err, ErrNoDriver) || errors.Is(err, ErrSymbolMissing) {
			t.Errorf("%v matches ErrNoDriver or ErrSymbolMissing", code)
		}
	}
}

func TestIsCode(t *testing.T) {
	err := fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", &Error{Call: "cuStreamQuery", Code: ErrorNotReady}))
	if !IsCode(err, ErrorNotReady) {
		t.Error("IsCode(wrapped NotReady, ErrorNotReady) = false")
	}
	if IsCode(err, ErrorLaunchFailed) {
		t.Error("IsCode(wrapped NotReady, ErrorLaunchFailed) = true")
	}
	if IsCode(errors.New("x"), Success) || IsCode(nil, Success) {
		t.Error("IsCode matched a non-*Error")
	}
}

func TestResultString(t *testing.T) {
	for r, want := range map[Result]string{
		Success:                         "CUDA_SUCCESS",
		ErrorOutOfMemory:                "CUDA_ERROR_OUT_OF_MEMORY",
		ErrorNoDevice:                   "CUDA_ERROR_NO_DEVICE",
		ErrorInvalidPTX:                 "CUDA_ERROR_INVALID_PTX",
		ErrorPeerAccessAlreadyEnabled:   "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED",
		ErrorLaunchFailed:               "CUDA_ERROR_LAUNCH_FAILED",
		ErrorCompatNotSupportedOnDevice: "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
		12345:                           "CUresult(12345)",
		-1:                              "CUresult(-1)",
	} {
		if got := r.String(); got != want {
			t.Errorf("Result(%d).String() = %q, want %q", int32(r), got, want)
		}
	}
	// Spot-check the numeric values against cuda.h.
	for r, want := range map[Result]int32{
		ErrorInvalidImage: 200, ErrorInvalidContext: 201, ErrorAlreadyMapped: 208, ErrorPeerAccessUnsupported: 217,
		ErrorUnsupportedPTXVersion: 222, ErrorInvalidHandle: 400, ErrorIllegalState: 401, ErrorNotFound: 500,
		ErrorNotReady: 600, ErrorIllegalAddress: 700, ErrorLaunchOutOfResources: 701, ErrorLaunchTimeout: 702,
		ErrorPeerAccessNotEnabled: 705, ErrorContextIsDestroyed: 709, ErrorAssert: 710, ErrorSystemDriverMismatch: 803,
	} {
		if int32(r) != want {
			t.Errorf("%v = %d, want %d", r, int32(r), want)
		}
	}
	if got := (*Driver)(nil).ErrorName(ErrorAssert); got != "CUDA_ERROR_ASSERT" {
		t.Errorf("nil Driver ErrorName = %q", got)
	}
}

// memcpy2D has CUDA_MEMCPY2D's layout (cuda.h, 64-bit): 16 fields of 8
// bytes, the two memory types padded.
func TestMemcpy2DLayout(t *testing.T) {
	var m memcpy2D
	if unsafe.Sizeof(m) != 128 || unsafe.Offsetof(m.srcHost) != 24 || unsafe.Offsetof(m.srcPitch) != 48 ||
		unsafe.Offsetof(m.dstMemoryType) != 72 || unsafe.Offsetof(m.dstPitch) != 104 || unsafe.Offsetof(m.height) != 120 {
		t.Fatalf("memcpy2D does not match CUDA_MEMCPY2D: size %d", unsafe.Sizeof(m))
	}
}

// memcpy3D has CUDA_MEMCPY3D's layout (cuda.h, 64-bit): 200 bytes.
func TestMemcpy3DLayout(t *testing.T) {
	var m memcpy3D
	if unsafe.Sizeof(m) != 200 || unsafe.Offsetof(m.srcMemoryType) != 32 || unsafe.Offsetof(m.srcDevice) != 48 ||
		unsafe.Offsetof(m.srcPitch) != 72 || unsafe.Offsetof(m.dstXInBytes) != 88 || unsafe.Offsetof(m.dstMemoryType) != 120 ||
		unsafe.Offsetof(m.dstDevice) != 136 || unsafe.Offsetof(m.dstPitch) != 160 || unsafe.Offsetof(m.widthInBytes) != 176 ||
		unsafe.Offsetof(m.depth) != 192 {
		t.Fatalf("memcpy3D does not match CUDA_MEMCPY3D: size %d", unsafe.Sizeof(m))
	}
}

func TestIpcHandleArg(t *testing.T) {
	if n := unsafe.Sizeof(ipcHandleArg{}); n != unsafe.Sizeof(IpcMemHandle{}) {
		t.Fatalf("ipcHandleArg is %d bytes, want 64", n)
	}
	var h IpcMemHandle
	for i := range h {
		h[i] = byte(rand.Uint32())
	}
	var arg ipcHandleArg
	*(*IpcMemHandle)(unsafe.Pointer(&arg)) = h
	if got := *(*IpcMemHandle)(unsafe.Pointer(&arg)); got != h {
		t.Fatalf("round trip: %x != %x", got, h)
	}
}

// TestBindIpcOpen checks that binding never panics: it fails with an
// error for a nil address, and binds on the platforms where purego passes
// structs by value (all those with a CUDA driver).
func TestBindIpcOpen(t *testing.T) {
	if f, err := bindIpcOpen(0); f != nil || err == nil || !strings.Contains(err.Error(), "cfn is nil") {
		t.Errorf("bindIpcOpen(0) = %v, %v; want the purego error", f != nil, err)
	}
	f, err := bindIpcOpen(0x1000)
	if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") && (f == nil || err != nil) {
		t.Errorf("bindIpcOpen = %v, %v; want a function", f != nil, err)
	}
	if (f == nil) == (err == nil) {
		t.Errorf("bindIpcOpen = %v, %v; want exactly one of a function and an error", f != nil, err)
	}
}

func TestBindSymbols(t *testing.T) {
	var all []string
	var f funcs
	for _, s := range f.table() {
		all = append(all, s.Names...)
	}
	lookup := func(skip ...string) func(string) (uintptr, error) {
		return func(name string) (uintptr, error) {
			for _, s := range skip {
				if s == name {
					return 0, errors.New("undefined symbol: " + name)
				}
			}
			return 0x1000, nil
		}
	}

	if err := f.bind("libfake.so", lookup()); err != nil {
		t.Fatalf("bind with every symbol: %v", err)
	}

	f = funcs{}
	err := f.bind("libfake.so", lookup("cuMemcpyPeerAsync"))
	if !errors.Is(err, ErrSymbolMissing) || !strings.Contains(err.Error(), "cuMemcpyPeerAsync") ||
		!strings.HasPrefix(err.Error(), "driver: ") {
		t.Errorf("missing required symbol: err = %v", err)
	}

	f = funcs{}
	if err := f.bind("libfake.so", lookup("cuDeviceGetUuid_v2", "cuDeviceGetUuid")); err != nil {
		t.Errorf("missing optional symbols failed the bind: %v", err)
	}
	if f.deviceGetUUID != 0 {
		t.Error("optional symbol bound though missing")
	}
	d := &Driver{path: "libfake.so", fn: f}
	if _, err := d.DeviceUUID(0); !errors.Is(err, ErrSymbolMissing) {
		t.Errorf("DeviceUUID without the symbol: err = %v", err)
	}

	// Either elapsed-time symbol satisfies the load.
	f = funcs{}
	if err := f.bind("libfake.so", lookup("cuEventElapsedTime_v2")); err != nil || f.eventElapsedTime == 0 {
		t.Errorf("fallback to cuEventElapsedTime: %v", err)
	}
	if f.eventElapsedTimeName != "cuEventElapsedTime" {
		t.Errorf("errors would name %q, the bound symbol is cuEventElapsedTime", f.eventElapsedTimeName)
	}

	// What only tests and probes call is not required.
	f = funcs{}
	testOnly := []string{"cuCtxGetCurrent", "cuCtxSynchronize", "cuMemGetInfo_v2", "cuMemsetD32_v2", "cuMemcpyHtoD_v2", "cuMemcpyDtoH_v2"}
	if err := f.bind("libfake.so", lookup(testOnly...)); err != nil {
		t.Errorf("a driver without the test-only symbols: %v", err)
	}
	d = &Driver{path: "libfake.so", fn: f}
	if _, err := d.current(); !errors.Is(err, ErrSymbolMissing) {
		t.Errorf("current() without cuCtxGetCurrent: err = %v", err)
	}
	f = funcs{}
	err = f.bind("libfake.so", lookup("cuEventElapsedTime_v2", "cuEventElapsedTime"))
	if !errors.Is(err, ErrSymbolMissing) {
		t.Errorf("no elapsed-time symbol: err = %v", err)
	}

	// Every field of funcs is bound by the table.
	f = funcs{}
	_ = f.bind("libfake.so", lookup())
	seen := map[*uintptr]bool{}
	for _, s := range f.table() {
		if seen[s.Addr] {
			t.Errorf("%s binds a field twice", s.Names[0])
		}
		seen[s.Addr] = true
	}
	if n := len(all); n < 45 {
		t.Errorf("only %d symbol names", n)
	}
}

func TestCStrings(t *testing.T) {
	b, ok := cString("kern")
	if !ok || string(b) != "kern\x00" {
		t.Errorf("cString = %q, %v", b, ok)
	}
	if _, ok := cString("a\x00b"); ok {
		t.Error("cString accepted an embedded NUL")
	}
	if got := goString(&b[0]); got != "kern" {
		t.Errorf("goString = %q", got)
	}
	if goString(nil) != "" {
		t.Error("goString(nil) != \"\"")
	}
	if got := jitLog([]byte("  ptxas error  \n\x00junk")); got != "ptxas error" {
		t.Errorf("jitLog = %q", got)
	}
}

func TestReleasedContext(t *testing.T) {
	c := &Context{d: &Driver{}, ordinal: 3}
	c.released.Store(true)
	if err := c.Release(); err != nil {
		t.Errorf("second Release = %v", err)
	}
	_, err := c.MemAlloc(16)
	if !IsCode(err, ErrorContextIsDestroyed) || !strings.Contains(err.Error(), "device 3") {
		t.Errorf("MemAlloc on released context: %v", err)
	}
}
