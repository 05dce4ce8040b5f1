// Package transporttest makes what a transport is built from on the stub
// driver of internal/fakecuda, for the transports' tests: a device's
// share, and each rank's Env with a buffer and a stream. The stub's
// devices share the host's memory, so what a transport copies really
// moves, and Bytes and Fill read and write it. Building the stub needs a
// C compiler (the tests skip without one, as testutil.FakeCUDA says).
package transporttest

import (
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/testutil"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// Device is device 0 of a fresh copy of the stub driver, its share held
// until the test ends.
type Device struct {
	Lib    string // the stub's path, for fakecuda.Read
	Driver *driver.Driver
	Share  *device.Share
}

// NewDevice loads a fresh copy of the stub with env ("KEY=value",
// FAKECUDA_* settings) set for the test and acquires device 0's share;
// the test's end puts it back and fails the test if the stub still holds
// anything then. It loads the kernels as a Comm's first share does (the
// stub is compiled once per test binary, a few hundred milliseconds). The
// share is the process's: one Device at a time.
func NewDevice(tb testing.TB, env ...string) *Device {
	tb.Helper()
	if s := device.Live(0); s != nil {
		_ = s.Put()
		tb.Fatal("device 0's share is held: by another Device of this test, whose end has not come (make one per subtest)")
	}
	lib := testutil.FakeCUDA(tb)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		tb.Setenv(k, v)
	}
	drv, err := driver.LoadLibrary(lib)
	if err != nil {
		tb.Fatalf("loading the stub driver: %v", err)
	}
	s, err := device.Acquire(drv, 0)
	if err != nil {
		tb.Fatalf("acquiring device 0: %v", err)
	}
	d := &Device{Lib: lib, Driver: drv, Share: s}
	tb.Cleanup(func() { d.put(tb) })
	return d
}

// put drops the share and checks that the stub holds nothing more.
func (d *Device) put(tb testing.TB) {
	if err := d.Share.Put(); err != nil {
		tb.Errorf("putting the share back: %v", err)
	}
	n, err := fakecuda.Read(d.Lib)
	if err != nil {
		tb.Errorf("reading the stub's counters: %v", err)
	} else if live := n.Live(); live != "" {
		tb.Errorf("the stub still holds %s", live)
	}
}

// Rank is one rank's Env on a Device, and its handle.
type Rank struct {
	*transport.Env
	Handle handle.Handle
}

// NewRank makes rank's Env in a group of world ranks of bfloat16 tensors,
// data halves of dataBytes (two of them), 132 blocks and a 5 s timeout:
// a buffer whose signal area and state are zero, registered as the
// buffer of a Comm of this process (so that a same-process peer may map
// it), its own stream for the Comm's and the helpers', and the handle
// that describes it. The test's end frees them.
func (d *Device) NewRank(tb testing.TB, rank, world int, dataBytes int64) *Rank {
	tb.Helper()
	ctx := d.Share.Ctx
	l := plan.NewLayout(dataBytes, 2)
	a, err := device.Allocate(ctx, uint64(l.Total), false)
	if err != nil {
		tb.Fatalf("allocating a buffer: %v", err)
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	device.RegisterBuffer(a, d.Share, rank, l.DataBytes, id)
	s, err := ctx.StreamCreate(true)
	if err == nil {
		err = ctx.MemsetD32(a.Ptr, 0, uint64(l.Total)/4)
	}
	if err != nil {
		tb.Fatalf("setting up rank %d: %v", rank, err)
	}
	bus, _ := d.Driver.DevicePCIBusID(0)
	tb.Cleanup(func() {
		if err := ctx.StreamDestroy(s); err != nil {
			tb.Errorf("destroying rank %d's stream: %v", rank, err)
		}
		if err := device.ReleaseBuffer(a.Ptr, true); err != nil {
			tb.Errorf("releasing rank %d's buffer: %v", rank, err)
		}
	})
	r := &Rank{Env: &transport.Env{Driver: d.Driver, Ctx: ctx, Share: d.Share, SMs: 132, BusID: bus, Helpers: s, Stream: s,
		Buf: a.Ptr, Layout: l, Rank: rank, World: world, DType: api.BFloat16, Timeout: 5 * time.Second, Blocks: 132}}
	r.Handle = handle.Handle{Rank: uint32(rank), World: uint32(world), ElemBytes: 2, Blocks: 132, DataBytes: uint64(l.DataBytes),
		Nonce: handle.ProcessNonce(), DevPtr: uint64(a.Ptr), ID: id, Host: handle.HostIdentity()}
	copy(r.Handle.BusID[:], bus)
	return r
}

// Handles is the handles of ranks, in rank order.
func Handles(ranks []*Rank) []handle.Handle {
	hs := make([]handle.Handle, len(ranks))
	for i, r := range ranks {
		hs[i] = r.Handle
	}
	return hs
}

// Alloc is n bytes of device memory holding b's bytes (n >= len(b)),
// freed at the test's end.
func (d *Device) Alloc(tb testing.TB, n int, b []byte) driver.DevicePtr {
	tb.Helper()
	ctx := d.Share.Ctx
	p, err := ctx.MemAlloc(uint64(n))
	if err == nil && len(b) > 0 {
		err = ctx.MemcpyHtoD(p, b)
	}
	if err != nil {
		tb.Fatalf("allocating %d bytes: %v", n, err)
	}
	tb.Cleanup(func() {
		if err := ctx.MemFree(p); err != nil {
			tb.Errorf("freeing %d bytes: %v", n, err)
		}
	})
	return p
}

// Bytes reads n bytes of device memory at p.
func (d *Device) Bytes(tb testing.TB, p driver.DevicePtr, n int64) []byte {
	tb.Helper()
	b := make([]byte, n)
	if err := d.Share.Ctx.MemcpyDtoH(b, p); err != nil {
		tb.Fatalf("reading %d bytes at %#x: %v", n, p, err)
	}
	return b
}

// Pattern is n bytes that depend on each byte's place and on seed: no
// two neighbours alike, nor the same place of two seeds.
func Pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7+i/251) ^ seed*37
	}
	return b
}
