package driver

import (
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// spinPTX holds spin_ns, a kernel that busy-waits on %globaltimer for the
// given number of nanoseconds: a stand-in for a collective kernel waiting
// for a peer that has not arrived yet.
const spinPTX = `
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin_ns(.param .u64 ns)
{
	.reg .u64 %rd<5>;
	.reg .pred %p;
	ld.param.u64 %rd1, [ns];
	mov.u64 %rd2, %globaltimer;
	add.u64 %rd3, %rd2, %rd1;
LOOP:
	mov.u64 %rd4, %globaltimer;
	setp.lt.u64 %p, %rd4, %rd3;
	@%p bra LOOP;
	ret;
}
`

// spinner launches spin_ns on a stream of its own.
type spinner struct {
	c      *Context
	f      Function
	s      Stream
	ns     uint64
	params []unsafe.Pointer
}

func newSpinner(t *testing.T, c *Context, d time.Duration) *spinner {
	t.Helper()
	m, err := c.LoadModule([]byte(spinPTX))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.UnloadModule(m) })
	f, err := c.Function(m, "spin_ns")
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.StreamDestroy(s) })
	sp := &spinner{c: c, f: f, s: s, ns: uint64(d.Nanoseconds())}
	sp.params = []unsafe.Pointer{unsafe.Pointer(&sp.ns)}
	return sp
}

// start launches the spin and gives it time to begin.
func (sp *spinner) start(t *testing.T) {
	t.Helper()
	if err := sp.c.Launch(sp.f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, sp.s, sp.params); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
}

func (sp *spinner) wait(t *testing.T) {
	t.Helper()
	if err := sp.c.StreamSynchronize(sp.s); err != nil {
		t.Fatal(err)
	}
}

// probe is one driver call TestGPUCallsThatWaitForOtherStreams times.
type probe struct {
	name    string
	relied  bool // the library calls it while other Comms may be running
	call    func() error
	cleanup func()
}

// vmmProbes are the virtual memory calls a Comm made with SharingFD
// makes in New and Connect (and its socket's server whenever a peer
// fetches the buffer), while other Comms of the process may be running:
// create, map and grant, export, import, and their undoing. They run in
// this order, each on what the one before made; none where the device
// cannot export a descriptor.
func vmmProbes(t *testing.T, d *Driver, c *Context) []probe {
	if able, err := d.DeviceAttribute(0, AttrHandleTypePosixFD); err != nil || able == 0 || !d.HasVMM() {
		t.Logf("no VMM probes: attribute %d, %v", able, err)
		return nil
	}
	gran, err := d.AllocationGranularity(0, HandlePosixFD)
	if err != nil {
		t.Fatal(err)
	}
	var h, imported MemHandle
	var p, q DevicePtr
	fd := -1
	t.Cleanup(func() {
		if fd >= 0 {
			syscall.Close(fd)
		}
	})
	return []probe{
		{name: "cuMemCreate", call: func() (err error) { h, err = c.MemCreate(gran, HandlePosixFD); return err }},
		{name: "cuMemAddressReserve+cuMemMap+cuMemSetAccess", call: func() (err error) { p, err = c.MapAndGrant(h, gran); return err }},
		{name: "cuMemExportToShareableHandle (fd)", call: func() (err error) { fd, err = c.ExportFD(h); return err }},
		{name: "cuMemImportFromShareableHandle (fd)", call: func() (err error) { imported, err = c.ImportFD(fd); return err }},
		{name: "map and grant the imported allocation", call: func() (err error) { q, err = c.MapAndGrant(imported, gran); return err }},
		{name: "cuMemUnmap+cuMemAddressFree (imported)", call: func() error { return c.Unmap(q, gran) }},
		{name: "cuMemRelease (imported)", call: func() error { return c.MemRelease(imported) }},
		{name: "cuMemUnmap+cuMemAddressFree", call: func() error { return c.Unmap(p, gran) }},
		{name: "cuMemRelease", call: func() error { return c.MemRelease(h) }},
	}
}

// TestGPUCallsThatWaitForOtherStreams measures which driver calls wait for
// a kernel running on another (non-blocking) stream. A call that does is a
// device-wide wait: made while a collective kernel waits for a peer, it
// waits for that peer too. The library must make none of them on a path a
// running service reaches (see docs/DESIGN.md, "What waits for what"); the
// test fails if a call the library relies on waits, and logs the rest.
func TestGPUCallsThatWaitForOtherStreams(t *testing.T) {
	d, c := gpuContext(t, 0)
	const spin = 400 * time.Millisecond
	sp := newSpinner(t, c, spin)
	own, err := c.StreamCreate(true)
	if err != nil {
		t.Fatal(err)
	}
	defer c.StreamDestroy(own)
	host := make([]byte, 1<<20)
	dev := gpuAlloc(t, c, 1<<20)

	var freeMe DevicePtr
	var hostMem unsafe.Pointer
	var mod Module
	var ev Event
	var st Stream
	probes := []probe{
		{name: "cuStreamSynchronize(own stream)", relied: true, call: func() error { return c.StreamSynchronize(own) }},
		{name: "cuMemcpyHtoDAsync(own)+sync", relied: true, call: func() error {
			if err := c.MemcpyHtoDAsync(dev, unsafe.Pointer(&host[0]), uint64(len(host)), own); err != nil {
				return err
			}
			return c.StreamSynchronize(own)
		}},
		{name: "cuMemcpyDtoHAsync(own)+sync", relied: true, call: func() error {
			if err := c.MemcpyDtoHAsync(unsafe.Pointer(&host[0]), dev, uint64(len(host)), own); err != nil {
				return err
			}
			return c.StreamSynchronize(own)
		}},
		{name: "cuMemsetD8Async(own)+sync", relied: true, call: func() error {
			if err := c.MemsetD8Async(dev, 1, 1<<20, own); err != nil {
				return err
			}
			return c.StreamSynchronize(own)
		}},
		{name: "cuStreamQuery(own)", relied: true, call: func() error { _, err := c.StreamDone(own); return err }},
		{name: "cuEventCreate", relied: true, call: func() (err error) { ev, err = c.EventCreate(false); return err },
			cleanup: func() { c.EventDestroy(ev) }},
		{name: "cuStreamCreate", relied: true, call: func() (err error) { st, err = c.StreamCreate(true); return err }},
		{name: "cuMemAlloc", call: func() (err error) { freeMe, err = c.MemAlloc(1 << 20); return err },
			cleanup: func() { c.MemFree(freeMe) }},
		{name: "cuMemFree", call: func() error { return c.MemFree(freeMe) },
			cleanup: func() {}},
		{name: "cuMemHostAlloc", call: func() (err error) { hostMem, _, err = c.HostAllocMapped(4096); return err }},
		{name: "cuMemFreeHost", call: func() error { return c.HostFree(hostMem) }},
		{name: "cuModuleLoadData", call: func() (err error) { mod, err = c.LoadModule([]byte(spinPTX)); return err }},
		{name: "cuModuleUnload", call: func() error { return c.UnloadModule(mod) }},
		{name: "cuStreamDestroy", call: func() error { return c.StreamDestroy(st) }},
		{name: "cuMemcpyHtoD (pageable, legacy stream)", call: func() error { return c.MemcpyHtoD(dev, host) }},
		{name: "cuMemcpyDtoH (legacy stream)", call: func() error { return c.MemcpyDtoH(host, dev) }},
		{name: "cuMemsetD32 (legacy stream)", call: func() error { return c.MemsetD32(dev, 0, 1<<18) }},
		{name: "cuIpcGetMemHandle", call: func() error { _, err := c.IpcGetMemHandle(dev); return err }},
		{name: "cuCtxSynchronize", call: func() error { return c.Synchronize() }},
	}
	probes = append(probes, vmmProbes(t, d, c)...)
	var report []string
	for _, p := range probes {
		if p.name == "cuMemFree" {
			// Needs an allocation made while nothing spins.
			var err error
			if freeMe, err = c.MemAlloc(1 << 20); err != nil {
				t.Fatal(err)
			}
		}
		sp.start(t)
		start := time.Now()
		err := p.call()
		took := time.Since(start)
		sp.wait(t)
		if err != nil {
			t.Errorf("%s: %v", p.name, err)
			continue
		}
		if p.cleanup != nil {
			p.cleanup()
		}
		waits := took > spin/2
		report = append(report, fmt.Sprintf("%-45s %8v waits=%v", p.name, took.Round(10*time.Microsecond), waits))
		if waits && p.relied {
			t.Errorf("%s waited %v for another stream's kernel", p.name, took)
		}
	}
	report = append(report, launchDuringBlockedFree(t, c, sp))
	for _, line := range report {
		t.Log(line)
	}
}

// launchDuringBlockedFree measures whether a launch from another thread is
// held up while a cuMemFree waits for a running kernel: a driver lock held
// across the wait lets one waiting call stall every launch of the process.
func launchDuringBlockedFree(t *testing.T, c *Context, sp *spinner) string {
	other := newSpinner(t, c, 0)
	p, err := c.MemAlloc(1 << 20)
	if err != nil {
		t.Fatal(err)
	}
	sp.start(t)
	var wg sync.WaitGroup
	var freeTook time.Duration
	wg.Add(1)
	go func() {
		defer wg.Done()
		start := time.Now()
		if err := c.MemFree(p); err != nil {
			t.Error(err)
		}
		freeTook = time.Since(start)
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := c.Launch(other.f, [3]uint32{1, 1, 1}, [3]uint32{1, 1, 1}, 0, other.s, other.params); err != nil {
		t.Fatal(err)
	}
	launchTook := time.Since(start)
	wg.Wait()
	sp.wait(t)
	other.wait(t)
	return fmt.Sprintf("cuMemFree took %v; a launch on a third stream made during it took %v",
		freeTook.Round(time.Microsecond), launchTook.Round(time.Microsecond))
}
