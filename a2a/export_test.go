package a2a

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"

	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// UseDriver makes the package open d, or fail with err, instead of the
// process's driver (driver.Load) until tb ends, with NumSMs 0 asking for
// every SM of d's devices (whatever $ULYSSES_TEST_NUM_SMS asks of the
// GPU's). No Comm of the process may be live then, nor when tb ends: what
// the Comms of a device share (its context, the loaded kernels) belongs to
// the driver it came from.
func UseDriver(tb testing.TB, d *driver.Driver, err error) {
	tb.Helper()
	if n := liveShares(); n != 0 {
		tb.Fatalf("a2a.UseDriver: Comms of an earlier test are live on %d devices", n)
	}
	everySM(tb)
	old := loadDriver
	loadDriver = func() (*driver.Driver, error) { return d, err }
	tb.Cleanup(func() {
		loadDriver = old
		if n := liveShares(); n != 0 {
			tb.Errorf("a2a.UseDriver: the test left Comms live on %d devices", n)
		}
	})
}

// everySM makes NumSMs 0 ask for every SM until tb ends, whatever
// $ULYSSES_TEST_NUM_SMS asked of the process.
func everySM(tb testing.TB) {
	was := defaultNumSMs
	defaultNumSMs = 0
	tb.Cleanup(func() { defaultNumSMs = was })
}

// liveShares counts the devices where the process has Comms.
func liveShares() int { return device.LiveShares() }

// DebugDump describes the Comm's device-side protocol state for a test
// that failed: the epoch, the arrival count, the claim, the end flags its
// peers wrote for its first blocks, and their bye words. It reads the
// buffer on the Comm's own stream.
func DebugDump(c *Comm, blocks int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.buf == 0 {
		return "closed\n"
	}
	b := make([]byte, c.layout.Total-c.layout.SignalOff)
	err := c.dev.ctx.MemcpyDtoHAsync(unsafe.Pointer(&b[0]), c.buf+driver.DevicePtr(c.layout.SignalOff), uint64(len(b)), c.stream)
	if err == nil {
		err = c.dev.ctx.StreamSynchronize(c.stream)
	}
	if err != nil {
		return "dump: " + err.Error() + "\n"
	}
	le := binary.LittleEndian
	state := c.layout.StateOff - c.layout.SignalOff
	blocksRun := c.blocksLocked()
	var sb strings.Builder
	fmt.Fprintf(&sb, "rank %d launches %d blocks %d epoch %d arrived %d claimed %d bye",
		c.cfg.Rank, c.launches, blocksRun, le.Uint32(b[state+plan.StateEpochOff:]),
		le.Uint32(b[state+plan.StateArrivedOff:]), le.Uint32(b[state+plan.StateClaimedOff:]))
	for p := 0; p < c.cfg.WorldSize; p++ {
		fmt.Fprintf(&sb, " %d", le.Uint32(b[int(plan.SignalByeOff)+4*p:]))
	}
	sb.WriteByte('\n')
	for blk := 0; blk < min(blocks, blocksRun); blk++ {
		fmt.Fprintf(&sb, "  block %d end flags:", blk)
		for p := 0; p < c.cfg.WorldSize; p++ {
			v := le.Uint64(b[((1*maxBlocks+blk)*MaxWorldSize+p)*plan.FlagBytes:])
			fmt.Fprintf(&sb, " [%d] epoch %d sig %#x", p, uint32(v), uint32(v>>32))
		}
		sb.WriteByte('\n')
	}
	return sb.String()
}

// DebugOccupancy lists, for every kernel of the Comm, its registers and
// how many of its blocks one SM holds at the Comm's block size.
func DebugOccupancy(c *Comm) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.t.(*ipc.Transport); ok {
		return t.Occupancy()
	}
	return "not connected over IPC"
}

// ForceIPC makes Connect IPC-open the buffers of peers in this process too,
// as it does for other processes' (the stub driver opens them), until the
// test ends.
func ForceIPC(tb testing.TB) {
	saved := ipc.FromThisProcess
	ipc.FromThisProcess = func(handle.Handle) bool { return false }
	tb.Cleanup(func() { ipc.FromThisProcess = saved })
}

// HandleWithIPCOf returns h with the IPC payload of other: a handle whose
// claims (capacity, rank) do not match the memory it maps.
func HandleWithIPCOf(h, other []byte) []byte {
	out := append([]byte(nil), h...)
	copy(out[64:128], other[64:128])
	return out
}

// HandleWithPointerOf returns h with the device pointer of other: a
// handle that names, in this process, the buffer of other's Comm.
func HandleWithPointerOf(h, other []byte) []byte {
	out := append([]byte(nil), h...)
	copy(out[40:48], other[40:48])
	return out
}

// FakeHang is the FAKECUDA_HANG setting under which the stub driver's
// kernels behave as the real ones do while a peer never comes: they wait
// until Close sets the status word's abort word, then report the abort.
func FakeHang() string {
	var s kernelabi.Status
	return fmt.Sprintf("%d,%d,%d,%d", unsafe.Offsetof(kernelabi.Args{}.Status),
		unsafe.Offsetof(s.Abort), unsafe.Offsetof(s.Code), kernelabi.StatusAborted)
}

// TestStream is a stream of a test's own on a Comm's device, as a caller
// with its own CUDA binding would make, with async copies between pinned
// host memory and the device on it. The GPU tests' child processes use it
// too, without a testing.TB.
type TestStream struct {
	d      *Device
	s      driver.Stream
	pinned []unsafe.Pointer
	closed bool
}

// OpenTestStream makes a stream on d; Close releases it and its pinned
// memory.
func OpenTestStream(d *Device) (*TestStream, error) {
	s, err := d.ctx.StreamCreate(true)
	if err != nil {
		return nil, err
	}
	return &TestStream{d: d, s: s}, nil
}

// NewTestStream is OpenTestStream, closed when tb ends.
func NewTestStream(tb testing.TB, d *Device) *TestStream {
	tb.Helper()
	ts, err := OpenTestStream(d)
	if err != nil {
		tb.Fatalf("creating a stream: %v", err)
	}
	tb.Cleanup(func() { _ = ts.Close() })
	return ts
}

// Close waits for the stream, destroys it and frees its pinned memory;
// later calls do nothing.
func (ts *TestStream) Close() error {
	if ts.closed {
		return nil
	}
	ts.closed = true
	errs := []error{ts.d.ctx.StreamSynchronize(ts.s), ts.d.ctx.StreamDestroy(ts.s)}
	for _, p := range ts.pinned {
		errs = append(errs, ts.d.ctx.HostFree(p))
	}
	return errors.Join(errs...)
}

// Stream returns the handle to pass to Comm.On.
func (ts *TestStream) Stream() Stream { return Stream(ts.s) }

// Pinned returns n bytes of pinned host memory, freed by Close.
func (ts *TestStream) Pinned(n int) ([]byte, error) {
	host, _, err := ts.d.ctx.HostAllocMapped(uint64(max(n, 1)))
	if err != nil {
		return nil, err
	}
	ts.pinned = append(ts.pinned, host)
	return unsafe.Slice((*byte)(host), n), nil
}

// Upload enqueues a copy of src (pinned) into t on the stream.
func (ts *TestStream) Upload(t Tensor, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return ts.d.ctx.MemcpyHtoDAsync(driver.DevicePtr(t.Ptr), unsafe.Pointer(&src[0]), uint64(len(src)), ts.s)
}

// Download enqueues a copy of t into dst (pinned) on the stream.
func (ts *TestStream) Download(dst []byte, t Tensor) error {
	if len(dst) == 0 {
		return nil
	}
	return ts.d.ctx.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), driver.DevicePtr(t.Ptr), uint64(len(dst)), ts.s)
}

// CopyDtoD enqueues a copy of n bytes from src to dst on the stream.
func (ts *TestStream) CopyDtoD(dst, src Tensor, n int64) error {
	return ts.d.ctx.MemcpyDtoDAsync(driver.DevicePtr(dst.Ptr), driver.DevicePtr(src.Ptr), uint64(n), ts.s)
}

// Sync waits for the stream.
func (ts *TestStream) Sync() error { return ts.d.ctx.StreamSynchronize(ts.s) }

// After makes the work enqueued on ts from now on wait for what other has
// enqueued so far (an event recorded on other), as a caller orders its
// streams.
func (ts *TestStream) After(other *TestStream) error {
	e, err := ts.d.ctx.EventCreate(false)
	if err != nil {
		return err
	}
	err = ts.d.ctx.EventRecord(e, other.s)
	if err == nil {
		err = ts.d.ctx.StreamWaitEvent(ts.s, e)
	}
	return errors.Join(err, ts.d.ctx.EventDestroy(e)) // the wait keeps what it needs
}

// CaptureRaw captures what record enqueues on the stream into a graph
// without CaptureGraph (no padding, as a caller's own binding would) and
// returns a function that replays it on the stream.
func (ts *TestStream) CaptureRaw(record func() error) (func() error, error) {
	if err := ts.d.ctx.StreamBeginCapture(ts.s); err != nil {
		return nil, err
	}
	rerr := record()
	g, err := ts.d.ctx.StreamEndCapture(ts.s)
	if err = errors.Join(rerr, err); err != nil {
		return nil, err
	}
	defer ts.d.ctx.GraphDestroy(g)
	exec, err := ts.d.ctx.GraphInstantiate(g)
	if err != nil {
		return nil, err
	}
	return func() error { return ts.d.ctx.GraphLaunch(exec, ts.s) }, nil
}

//go:embed testdata/testkernels.ptx
var testKernelsPTX []byte

// TestKernels are the test's own kernels (testdata/testkernels.ptx),
// loaded once per device before any Comm there runs an operation: a
// module load waits for every kernel of the context.
type TestKernels struct {
	d          *Device
	module     driver.Module
	fill, copy driver.Function
}

// LoadTestKernels loads the test kernels on d.
func LoadTestKernels(d *Device) (*TestKernels, error) {
	m, err := d.ctx.LoadModule(testKernelsPTX)
	if err != nil {
		return nil, err
	}
	tk := &TestKernels{d: d, module: m}
	if tk.fill, err = d.ctx.Function(m, "fill_pattern"); err == nil {
		tk.copy, err = d.ctx.Function(m, "copy_bytes")
	}
	if err != nil {
		return nil, errors.Join(err, d.ctx.UnloadModule(m))
	}
	return tk, nil
}

// Close unloads the kernels (which waits for the device).
func (tk *TestKernels) Close() error { return tk.d.ctx.UnloadModule(tk.module) }

// Pattern is byte i of what Fill writes with seed.
func Pattern(seed uint64, i int) byte {
	return byte(((uint64(i)^seed)*0x9E3779B97F4A7C15)>>56) | 1
}

// Fill enqueues a kernel on ts that writes Pattern(seed, i) into byte i of t.
func (tk *TestKernels) Fill(ts *TestStream, t Tensor, seed uint64) error {
	return tk.launch(ts, tk.fill, t.Bytes(), uint64(t.Ptr), uint64(t.Bytes()), seed)
}

// Copy enqueues a kernel on ts that copies n bytes from src to dst.
func (tk *TestKernels) Copy(ts *TestStream, dst, src Tensor, n int64) error {
	return tk.launch(ts, tk.copy, n, uint64(dst.Ptr), uint64(src.Ptr), uint64(n))
}

// launch runs f(a, b, c) on ts over n bytes, with 256-thread blocks.
func (tk *TestKernels) launch(ts *TestStream, f driver.Function, n int64, a, b, c uint64) error {
	if n <= 0 {
		return nil
	}
	blocks := uint32(min((n+255)/256, 1024))
	params := []unsafe.Pointer{unsafe.Pointer(&a), unsafe.Pointer(&b), unsafe.Pointer(&c)}
	return tk.d.ctx.Launch(f, [3]uint32{blocks, 1, 1}, [3]uint32{256, 1, 1}, 0, ts.s, params)
}

// SetAutoCopyBytes makes MoverAuto take the copy engines for every
// operation whose largest rank moves at least n bytes, in this process,
// until tb ends.
func SetAutoCopyBytes(tb testing.TB, n int64) {
	plan.AutoCopyOverride.Store(n)
	tb.Cleanup(func() { plan.AutoCopyOverride.Store(0) })
}

// UseNCCL makes the package open the NCCL at path (nccl.LoadLibrary: a
// stub of the test's own) instead of the process's (nccl.Load) until tb
// ends, with the transport's default tuning (the stub's tests set their
// own where they need another; $ULYSSES_TEST_NCCL is for a real NCCL).
func UseNCCL(tb testing.TB, path string) {
	tb.Helper()
	UseNCCLTuning(tb, nccltransport.Tuning{})
	old := loadNCCL
	l, err := nccl.LoadLibrary(path)
	loadNCCL = func() (*nccl.Library, error) { return l, err }
	tb.Cleanup(func() { loadNCCL = old })
}

// NCCLRounds is how many NCCL groups (rounds) c's last operation over NCCL
// was split into, 0 when c does not use NCCL.
func NCCLRounds(c *Comm) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t, ok := c.t.(*nccltransport.Transport); ok {
		return t.Rounds()
	}
	return 0
}

// SetWireDirectBytes makes the fp8 wire send every row straight (rounded
// to fp8 and back) in operations whose largest rank reads fewer than n
// input bytes, and stage the peers' rows from n on (1: always stage), in
// this process; restore puts the default back. Workers of a multi-process
// test call it for their process.
func SetWireDirectBytes(n int64) (restore func()) {
	plan.WireDirectOverride.Store(n)
	return func() { plan.WireDirectOverride.Store(0) }
}

// SetWireLanding makes the staged fp8 wire operations of this process
// decode the peers' rows in the exchange launch as they land (on), or only
// in the decode launch after it (off), whatever the group; restore puts the
// library's choice back.
func SetWireLanding(on bool) (restore func()) {
	l := ipc.LandingOff
	if on {
		l = ipc.LandingOn
	}
	ipc.LandingOverride.Store(int32(l))
	return func() { ipc.LandingOverride.Store(int32(ipc.LandingAuto)) }
}

// SetEnqueuing marks c as in the middle of enqueuing an operation (or
// not), as run and Graph.Launch do around their launches.
func SetEnqueuing(c *Comm, v bool) { c.member.Enqueuing.Store(v) }
