package driver

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/testutil"
)

// requireDriver loads the real CUDA driver; without a driver or a device
// the test is skipped (or fails under ULYSSES_REQUIRE_GPU=1, see
// testutil.RequireGPU).
func requireDriver(t *testing.T) *Driver {
	t.Helper()
	d, err := Load()
	if err == nil {
		_, err = d.RequireDevices()
	}
	testutil.RequireGPU(t, err, ErrNoDriver, ErrNoDevice)
	return d
}

// gpuContext retains a device's primary context for the test.
func gpuContext(t *testing.T, ordinal int) (*Driver, *Context) {
	t.Helper()
	d := requireDriver(t)
	c, err := d.RetainPrimaryContext(ordinal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Release(); err != nil {
			t.Error(err)
		}
	})
	return d, c
}

// gpuAlloc allocates device memory freed at the end of the test.
func gpuAlloc(t *testing.T, c *Context, n uint64) DevicePtr {
	t.Helper()
	p, err := c.MemAlloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.MemFree(p); err != nil {
			t.Error(err)
		}
	})
	return p
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

func TestGPUDevices(t *testing.T) {
	d := requireDriver(t)
	v, err := d.Version()
	if err != nil || v < 11000 {
		t.Errorf("Version = %d, %v", v, err)
	}
	n, err := d.DeviceCount()
	if err != nil || n <= 0 {
		t.Fatalf("DeviceCount = %d, %v", n, err)
	}
	for i := range n {
		name, err := d.DeviceName(i)
		if err != nil || name == "" {
			t.Errorf("DeviceName(%d) = %q, %v", i, name, err)
		}
		for a, min := range map[Attribute]int{
			AttrMultiprocessorCount: 1, AttrClockRate: 1, AttrUnifiedAddressing: 1, AttrCanMapHostMemory: 1,
			AttrMaxThreadsPerBlock: 512, AttrComputeCapabilityMajor: 7, AttrGlobalMemoryBusWidth: 1,
		} {
			if v, err := d.DeviceAttribute(i, a); err != nil || v < min {
				t.Errorf("device %d attribute %d = %d, %v; want >= %d", i, a, v, err, min)
			}
		}
		if v, _ := d.DeviceAttribute(i, AttrUnifiedAddressing); v != 1 {
			t.Errorf("device %d: unified addressing = %d", i, v)
		}
		if m, err := d.DeviceTotalMem(i); err != nil || m < 1<<30 {
			t.Errorf("DeviceTotalMem(%d) = %d, %v", i, m, err)
		}
		bus, err := d.DevicePCIBusID(i)
		if err != nil || strings.Count(bus, ":") != 2 {
			t.Errorf("DevicePCIBusID(%d) = %q, %v", i, bus, err)
		}
		if u, err := d.DeviceUUID(i); err != nil || u == [16]byte{} {
			t.Errorf("DeviceUUID(%d) = %x, %v", i, u, err)
		}
		t.Logf("device %d: %s at %s", i, name, bus)
	}
	if _, err := d.DeviceName(n); !errors.Is(err, ErrNoDevice) {
		t.Errorf("DeviceName(%d) past the end: %v", n, err)
	}
}

// TestGPUResultNames checks the static name table against the driver.
func TestGPUResultNames(t *testing.T) {
	d := requireDriver(t)
	for r, want := range resultNames {
		if got := d.ErrorName(r); got != want {
			t.Errorf("driver names %d %q, table says %q", int32(r), got, want)
		}
	}
	if d.ErrorString(ErrorOutOfMemory) == "" {
		t.Error("no description for CUDA_ERROR_OUT_OF_MEMORY")
	}
}

// TestGPUCallerContextKept: the driver's calls leave the thread's current
// context as the caller had it (none, or another device's when there is
// one), for bindings that rely on it (cuinterop's gorgonia.org/cu).
func TestGPUCallerContextKept(t *testing.T) {
	d, c := gpuContext(t, 0)
	requireCallerContextKept(t, d, c, 0)
	if n, err := d.DeviceCount(); err == nil && n > 1 {
		_, other := gpuContext(t, 1)
		requireCallerContextKept(t, d, c, other.ctx)
	}
}

func TestGPUContextDo(t *testing.T) {
	d, c := gpuContext(t, 0)
	err := c.Do(func() error {
		cur, err := d.current()
		if cur != c.ctx {
			t.Errorf("current context %#x, want %#x", cur, c.ctx)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	free, total, err := c.MemGetInfo()
	if err != nil || free == 0 || free > total {
		t.Errorf("MemGetInfo = %d, %d, %v", free, total, err)
	}
	if err := c.Synchronize(); err != nil {
		t.Error(err)
	}
}

func TestGPUMemcpy(t *testing.T) {
	_, c := gpuContext(t, 0)
	const n = 1 << 20
	a, b := gpuAlloc(t, c, n), gpuAlloc(t, c, n)
	src := randomBytes(n)
	if err := c.MemcpyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StreamDestroy(s)
	if err := c.MemcpyDtoDAsync(b, a, n, s); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	if done, err := c.StreamDone(s); !done || err != nil {
		t.Errorf("StreamDone after sync = %v, %v", done, err)
	}
	dst := make([]byte, n)
	if err := c.MemcpyDtoH(dst, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(dst, src) {
		t.Error("HtoD, DtoD, DtoH round trip differs")
	}
	if _, err := c.MemAlloc(1 << 50); !IsCode(err, ErrorOutOfMemory) {
		t.Errorf("MemAlloc(1 PiB): %v", err)
	}
}

// MemcpyRowsAsync moves rows of 96 bytes from a dense source into every
// third 96-byte slot of the destination, leaving the others untouched.
func TestGPUMemcpyRows(t *testing.T) {
	_, c := gpuContext(t, 0)
	const rows, width = 1000, 96
	a, b := gpuAlloc(t, c, rows*width), gpuAlloc(t, c, 3*rows*width)
	src := randomBytes(rows * width)
	if err := c.MemcpyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	before := randomBytes(3 * rows * width)
	if err := c.MemcpyHtoD(b, before); err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StreamDestroy(s)
	if err := c.MemcpyRowsAsync(b+width, 3*width, a, width, width, rows, s); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, 3*rows*width)
	if err := c.MemcpyDtoH(dst, b); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), before...)
	for i := range rows {
		copy(want[(3*i+1)*width:(3*i+2)*width], src[i*width:(i+1)*width])
	}
	if !bytes.Equal(dst, want) {
		t.Error("rows landed elsewhere, or other bytes changed")
	}
	if err := c.MemcpyRowsAsync(b, width-1, a, width, width, rows, s); err == nil {
		t.Error("a pitch under the width was accepted")
	}
}

// MemcpyBoxAsync moves 3 slices of 50 rows of 64 bytes from a source with
// 80-byte rows and 60-row slices into a destination with 128-byte rows and
// 70-row slices, leaving every other byte as it was.
func TestGPUMemcpyBox(t *testing.T) {
	_, c := gpuContext(t, 0)
	const width, rows, depth = 64, 50, 3
	src := Box{Pitch: 80, Height: 60}
	dst := Box{Pitch: 128, Height: 70}
	srcBytes, dstBytes := int(src.Pitch*src.Height*depth), int(dst.Pitch*dst.Height*depth)
	src.Ptr, dst.Ptr = gpuAlloc(t, c, uint64(srcBytes)), gpuAlloc(t, c, uint64(dstBytes))
	in, before := randomBytes(srcBytes), randomBytes(dstBytes)
	if err := c.MemcpyHtoD(src.Ptr, in); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyHtoD(dst.Ptr, before); err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StreamDestroy(s)
	if err := c.MemcpyBoxAsync(dst, src, width, rows, depth, s); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(s); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, dstBytes)
	if err := c.MemcpyDtoH(got, dst.Ptr); err != nil {
		t.Fatal(err)
	}
	want := append([]byte(nil), before...)
	for z := range depth {
		for y := range rows {
			from := (z*int(src.Height) + y) * int(src.Pitch)
			to := (z*int(dst.Height) + y) * int(dst.Pitch)
			copy(want[to:to+width], in[from:from+width])
		}
	}
	if !bytes.Equal(got, want) {
		t.Error("the box landed elsewhere, or other bytes changed")
	}
}

func TestGPUMemset(t *testing.T) {
	_, c := gpuContext(t, 0)
	const words = 4096
	p := gpuAlloc(t, c, 4*words)
	if err := c.MemsetD32(p, 0xdeadbeef, words); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4*words)
	if err := c.MemcpyDtoH(buf, p); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(buf); i += 4 {
		if v := uint32(buf[i]) | uint32(buf[i+1])<<8 | uint32(buf[i+2])<<16 | uint32(buf[i+3])<<24; v != 0xdeadbeef {
			t.Fatalf("word %d = %#x", i/4, v)
		}
	}
	if err := c.MemsetD32Async(p, 0x01020304, words/2, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD8Async(p, 0xab, 3, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if err := c.MemcpyDtoH(buf, p); err != nil {
		t.Fatal(err)
	}
	if want := []byte{0xab, 0xab, 0xab, 0x01, 0x04, 0x03}; !bytes.Equal(buf[:6], want) {
		t.Errorf("after async memsets: % x", buf[:6])
	}
	if buf[2*words] != 0xef {
		t.Errorf("memset went past its end: %#x", buf[2*words])
	}
}

func TestGPUHostAllocMapped(t *testing.T) {
	_, c := gpuContext(t, 0)
	const n = 1 << 16
	host, dev, err := c.HostAllocMapped(n)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := c.HostFree(host); err != nil {
			t.Error(err)
		}
	}()
	hb := unsafe.Slice((*byte)(host), n)
	src := randomBytes(n)
	copy(hb, src)
	got := make([]byte, n)
	if err := c.MemcpyDtoH(got, dev); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Error("reading mapped host memory through its device pointer differs")
	}
	// Pinned host -> device, asynchronously, and back.
	p := gpuAlloc(t, c, n)
	if err := c.MemcpyHtoDAsync(p, host, n, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(0); err != nil {
		t.Fatal(err)
	}
	clear(hb)
	if err := c.MemcpyDtoHAsync(host, p, n, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.StreamSynchronize(0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(hb, src) {
		t.Error("pinned HtoDAsync/DtoHAsync round trip differs")
	}
}

func TestGPUEvents(t *testing.T) {
	_, c := gpuContext(t, 0)
	p := gpuAlloc(t, c, 64<<20)
	start, err := c.EventCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.EventDestroy(start)
	end, err := c.EventCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.EventDestroy(end)
	if err := c.EventRecord(start, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.MemsetD32Async(p, 7, 16<<20, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.EventRecord(end, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.EventSynchronize(end); err != nil {
		t.Fatal(err)
	}
	el, err := c.EventElapsed(start, end)
	if err != nil || el < 0 {
		t.Errorf("EventElapsed = %v, %v", el, err)
	}
	t.Logf("64 MiB memset: %v", el)
	nt, err := c.EventCreate(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.EventDestroy(nt)
	if err := c.EventRecord(nt, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.EventSynchronize(nt); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EventElapsed(start, nt); err == nil {
		t.Error("EventElapsed with a non-timing event succeeded")
	}
}

const storePTX = `
.version 7.0
.target sm_70
.address_size 64

.visible .entry store_u32(
	.param .u64 store_u32_dst,
	.param .u32 store_u32_val
)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	ld.param.u64 %rd1, [store_u32_dst];
	ld.param.u32 %r1, [store_u32_val];
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r1;
	ret;
}
`

func TestGPUModuleLaunch(t *testing.T) {
	_, c := gpuContext(t, 0)
	m, err := c.LoadModule([]byte(storePTX))
	if err != nil {
		t.Fatal(err)
	}
	defer c.UnloadModule(m)
	f, err := c.Function(m, "store_u32")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Function(m, "nope"); !IsCode(err, ErrorNotFound) {
		t.Errorf("Function(nope): %v", err)
	}
	if err := c.SetFuncAttribute(f, FuncAttrSharedCarveout, 100); err != nil {
		t.Fatal(err)
	}
	if v, err := c.FuncAttribute(f, FuncAttrSharedCarveout); err != nil || v != 100 {
		t.Errorf("the shared carveout set to 100 reads back %d, %v", v, err)
	}
	p := gpuAlloc(t, c, 4)
	dst, val := uint64(p), uint32(0x12345678)
	params := []unsafe.Pointer{unsafe.Pointer(&dst), unsafe.Pointer(&val)}
	if err := c.Launch(f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, 0, params); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if err := c.MemcpyDtoH(buf, p); err != nil {
		t.Fatal(err)
	}
	if got := uint32(buf[0]) | uint32(buf[1])<<8 | uint32(buf[2])<<16 | uint32(buf[3])<<24; got != val {
		t.Errorf("kernel stored %#x, want %#x", got, val)
	}
}

func TestGPUModuleBadPTX(t *testing.T) {
	_, c := gpuContext(t, 0)
	bad := ".version 7.0\n.target sm_70\n.address_size 64\n.visible .entry k() { this is not ptx; }\n"
	_, err := c.LoadModule([]byte(bad))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("LoadModule(bad) = %v, want *Error", err)
	}
	if e.Log == "" && e.Code != ErrorInvalidPTX && e.Code != ErrorInvalidImage {
		t.Errorf("bad PTX: code %v, empty log", e.Code)
	}
	t.Logf("bad PTX: %v", err)
}

func TestGPUConcurrentUse(t *testing.T) {
	_, c := gpuContext(t, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				p, err := c.MemAlloc(4096)
				if err != nil {
					errs <- err
					return
				}
				v := uint32(g<<16 | i)
				buf := make([]byte, 4)
				err = c.MemsetD32(p, v, 1024)
				if err == nil {
					err = c.MemcpyDtoH(buf, p)
				}
				if err == nil && uint32(buf[0])|uint32(buf[1])<<8|uint32(buf[2])<<16|uint32(buf[3])<<24 != v {
					err = errors.New("wrong value read back")
				}
				if ferr := c.MemFree(p); err == nil {
					err = ferr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestGPUPeer(t *testing.T) {
	d := requireDriver(t)
	if n, _ := d.DeviceCount(); n < 2 {
		t.Skip("needs two devices")
	}
	ok, err := d.CanAccessPeer(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	_, c0 := gpuContext(t, 0)
	_, c1 := gpuContext(t, 1)
	if ok {
		for range 2 { // the second time is ALREADY_ENABLED, reported as success
			if err := c0.EnablePeerAccess(c1); err != nil {
				t.Fatal(err)
			}
			if err := c1.EnablePeerAccess(c0); err != nil {
				t.Fatal(err)
			}
		}
	}
	const n = 1 << 20
	a, b := gpuAlloc(t, c0, n), gpuAlloc(t, c1, n)
	src := randomBytes(n)
	if err := c0.MemcpyHtoD(a, src); err != nil {
		t.Fatal(err)
	}
	if err := c0.MemcpyPeerAsync(b, c1, a, c0, n, 0); err != nil {
		t.Fatal(err)
	}
	if err := c0.StreamSynchronize(0); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := c1.MemcpyDtoH(got, b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, src) {
		t.Error("peer copy differs")
	}
}

const (
	ipcHandleEnv = "ULYSSES_DRIVER_TEST_IPC_HANDLE"
	ipcLenEnv    = "ULYSSES_DRIVER_TEST_IPC_LEN"
)

func ipcPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + 1)
	}
	return b
}

// TestGPUIpc exports an allocation and has a child process (this test
// binary, running TestGPUIpcChild) map it and check its contents.
func TestGPUIpc(t *testing.T) {
	_, c := gpuContext(t, 0)
	const n = 1 << 16
	p := gpuAlloc(t, c, n)
	if err := c.MemcpyHtoD(p, ipcPattern(n)); err != nil {
		t.Fatal(err)
	}
	h, err := c.IpcGetMemHandle(p)
	if err != nil {
		t.Fatal(err)
	}
	if h == (IpcMemHandle{}) {
		t.Fatal("IpcGetMemHandle returned a zero handle")
	}
	out := testutil.RunChild(t, "TestGPUIpcChild", ipcHandleEnv+"="+hex.EncodeToString(h[:]), ipcLenEnv+"="+strconv.Itoa(n))
	if !strings.Contains(out, "IPC-OK") {
		t.Fatalf("the child did not read the memory:\n%s", out)
	}
}

func TestGPUIpcChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	hs := os.Getenv(ipcHandleEnv)
	n, _ := strconv.Atoi(os.Getenv(ipcLenEnv))
	var h IpcMemHandle
	if b, err := hex.DecodeString(hs); err != nil || len(b) != len(h) {
		t.Fatalf("bad handle %q: %v", hs, err)
	} else {
		copy(h[:], b)
	}
	_, c := gpuContext(t, 0)
	p, err := c.IpcOpenMemHandle(h)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]byte, n)
	if err := c.MemcpyDtoH(got, p); err != nil {
		t.Fatal(err)
	}
	if err := c.IpcCloseMemHandle(p); err != nil {
		t.Error(err)
	}
	if !bytes.Equal(got, ipcPattern(n)) {
		t.Fatal("child read different bytes through the IPC mapping")
	}
	t.Log("IPC-OK")
}
