package a2a_test

// Tests against the stub CUDA driver of internal/fakecuda: no GPU needed,
// only a C compiler. Each test gives a2a a fresh copy of the stub of its
// own, in this process (fakeDriver, through a2a.UseDriver); the stub reads
// its FAKECUDA_* settings at every call, so the tests set them with
// t.Setenv and are not parallel. Only TestFakeLoad starts a child process:
// it checks that a2a finds its driver with driver.Load, which reads
// ULYSSES_LIBCUDA once per process. The stub moves memory for real but its
// kernels do nothing, so these tests cover the host side: validation,
// state, errors, resources, allocations.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
	"github.com/ulysses-go/ulysses/internal/timing"
	"github.com/ulysses-go/ulysses/ptx"
)

// fakeDriver gives a2a a fresh copy of the stub for the rest of the test,
// with env ("KEY=value", FAKECUDA_* settings) set, and returns the copy's
// path, for fakecuda.Read.
func fakeDriver(t *testing.T, env ...string) string {
	t.Helper()
	lib := testutil.FakeCUDA(t)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	d, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	a2a.UseDriver(t, d, nil)
	return lib
}

// fakeCounters reads the stub's counters.
func fakeCounters(t *testing.T, lib string) fakecuda.Counters {
	t.Helper()
	n, err := fakecuda.Read(lib)
	require.NoError(t, err)
	return n
}

// requireReleased checks that nothing from the stub is held any more, and
// that no call that waits for the whole device (freeing, unmapping,
// loading kernels) was ever made while a kernel was queued: it would have
// waited for that kernel (see TestFakeNoDeviceWideWaitWhileCommsLive).
func requireReleased(t *testing.T, lib string) {
	t.Helper()
	n := fakeCounters(t, lib)
	require.Empty(t, n.Live(), "left allocated")
	require.Zero(t, n.BusyDeviceWaits, "device-wide waits made with kernels queued")
}

// requireFormsAndCloses checks that comms still form their group with
// their own handles (after a refused Connect, say), then closes them and
// checks that nothing is left (requireReleased).
func requireFormsAndCloses(t *testing.T, lib string, comms []*a2a.Comm, handles [][]byte) {
	t.Helper()
	for r, c := range comms {
		require.NoError(t, c.Connect(handles), "rank %d", r)
	}
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	requireReleased(t, lib)
}

// fakeComm makes a one-rank Comm on device 0 with room for 64 tokens of
// 32 heads of 128, connected and given 8 tokens if asked, and an input x
// and an output dst of [1, 8, 32, 128] (every operation's shape in a world
// of 1) allocated on the Comm's device.
func fakeComm(t *testing.T, connect, tokens bool, opts ...func(*a2a.Config)) (c *a2a.Comm, x, dst a2a.Tensor) {
	t.Helper()
	cfg := a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := a2a.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { // where the test failed before closing it, so that the next test finds no live Comm
		if !closeWithin(c, 5*time.Second) {
			t.Error("the Comm's Close did not return within 5 s")
		}
	})
	x, err = c.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	dst, err = c.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	if connect {
		require.NoError(t, c.Connect([][]byte{c.Handle()}))
	}
	if tokens {
		require.NoError(t, c.SetRankTokens([]int{8}))
	}
	return c, x, dst
}

// closeWithin closes c, waiting at most d, and reports whether Close
// returned: a second Close waits for a first one in flight, which is what
// a failed test may have left behind.
func closeWithin(c *a2a.Comm, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		c.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

// closeFake frees x and dst and closes c, returning Close's error.
func closeFake(t *testing.T, c *a2a.Comm, x, dst a2a.Tensor) error {
	t.Helper()
	require.NoError(t, c.Device().Free(x))
	require.NoError(t, c.Device().Free(dst))
	return c.Close()
}

type fakeOp struct {
	name string
	run  func() error
}

// fakeOps are the six operations on x (and dst for the Into forms).
func fakeOps(c *a2a.Comm, x, dst a2a.Tensor) []fakeOp {
	return []fakeOp{
		{"SendRecvHeads", func() error { _, err := c.SendRecvHeads(x); return err }},
		{"SendRecvHeadsInto", func() error { return c.SendRecvHeadsInto(dst, x) }},
		{"GatherHeads", func() error { _, err := c.GatherHeads(x); return err }},
		{"GatherHeadsInto", func() error { return c.GatherHeadsInto(dst, x) }},
		{"AllGather", func() error { _, err := c.AllGather(x); return err }},
		{"AllGatherInto", func() error { return c.AllGatherInto(dst, x) }},
	}
}

// fakeCalls are fakeOps plus every other method that needs a usable Comm.
func fakeCalls(c *a2a.Comm, x, dst a2a.Tensor) []fakeOp {
	op := func(int) error { _, err := c.SendRecvHeads(x); return err }
	return append(fakeOps(c, x, dst),
		fakeOp{"Sync", c.Sync},
		fakeOp{"SetRankTokens", func() error { return c.SetRankTokens([]int{8}) }},
		fakeOp{"timing.Ops", func() error { _, err := timing.Ops(c, 2, op); return err }},
		fakeOp{"timing.BackToBack", func() error { _, err := timing.BackToBack(c, timing.Own, 2, op); return err }},
	)
}

// ---- peer access -----------------------------------------------------------

func TestFakePeerAccess(t *testing.T) {
	t.Run("denied", func(t *testing.T) {
		checkPeerDenied(t, fakeDriver(t, fakecuda.EnvDevices+"=3", fakecuda.EnvNoPeer+"=1-2"))
	})
	t.Run("allowed", func(t *testing.T) {
		checkPeerAllowed(t, fakeDriver(t, fakecuda.EnvDevices+"=3"))
	})
	t.Run("allowed-unused-pair", func(t *testing.T) {
		// Only the GPUs the group uses matter: device 3 is in no rank.
		checkPeerAllowed(t, fakeDriver(t, fakecuda.EnvDevices+"=4", fakecuda.EnvNoPeer+"=0-3"))
	})
	t.Run("allowed-shared-gpu", func(t *testing.T) {
		checkPeerAllowed(t, fakeDriver(t, fakecuda.EnvDevices+"=2")) // ranks on GPUs 0, 1, 0
	})
	t.Run("allowed-one-gpu", func(t *testing.T) {
		// Every rank on GPU 0: no pair to check (device 1 does not exist).
		checkPeerAllowed(t, fakeDriver(t, fakecuda.EnvDevices+"=1", fakecuda.EnvNoPeer+"=0-1"))
	})
}

// distinctDevices counts the devices in devices.
func distinctDevices(devices []int) int {
	seen := map[int]bool{}
	for _, d := range devices {
		seen[d] = true
	}
	return len(seen)
}

// fakeGroup makes a world-3 group in this process, rank r on device
// r % FAKECUDA_DEVICES, and returns the ranks, their handles and devices.
func fakeGroup(t *testing.T, mods ...func(*a2a.Config)) ([]*a2a.Comm, [][]byte, []int) {
	t.Helper()
	n, err := strconv.Atoi(os.Getenv(fakecuda.EnvDevices))
	require.NoError(t, err)
	const world = 3
	comms := make([]*a2a.Comm, world)
	handles := make([][]byte, world)
	devices := make([]int, world)
	for r := range comms {
		devices[r] = r % n
		cfg := a2a.Config{
			Rank: r, WorldSize: world, Device: a2a.DeviceOrdinal(devices[r]),
			MaxTokens: 16, HiddenDim: 6 * 64, DType: a2a.BFloat16,
		}
		for _, m := range mods {
			m(&cfg)
		}
		comms[r], err = a2a.New(cfg)
		require.NoError(t, err)
		handles[r] = comms[r].Handle()
	}
	return comms, handles, devices
}

func checkPeerDenied(t *testing.T, lib string) {
	comms, handles, devices := fakeGroup(t)
	var msgs []string
	for r, c := range comms {
		err := c.Connect(handles)
		require.ErrorIs(t, err, a2a.ErrNoPeerAccess, "rank %d", r)
		t.Logf("rank %d: %v", r, err)
		msgs = append(msgs, err.Error())
	}
	for r := range msgs {
		require.Equal(t, msgs[0], msgs[r], "rank %d names another pair", r)
	}
	require.Contains(t, msgs[0], "rank 1 (GPU 0000:01:00.0) and rank 2 (GPU 0000:02:00.0) cannot access each other's memory")
	n := fakeCounters(t, lib)
	require.Zero(t, n.IPCMappings)
	// Each Comm's Device retains its context once, and the process's Comms
	// on one device share one more retain (the kernels' share): 3 + 3 on
	// three devices. A peer context would come on top.
	require.EqualValues(t, len(comms)+distinctDevices(devices), n.ContextRetains,
		"a refused Connect retains no peer context")
	for _, c := range comms {
		_, err := c.SendRecvHeads(a2a.Tensor{})
		require.ErrorIs(t, err, a2a.ErrNotConnected, "a refused Connect leaves the Comm unconnected")
		require.NoError(t, c.Close())
	}
	requireReleased(t, lib)
}

// A handle that carries this process's nonce (every rank sees its peers'
// nonces) but a pointer of the sender's choosing is refused: only a live
// Comm's own buffer is used without the IPC open.
func TestFakeForgedHandle(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	comms, handles, _ := fakeGroup(t)
	forged := append([]byte(nil), handles[1]...)
	ptr := binary.LittleEndian.Uint64(forged[40:])
	binary.LittleEndian.PutUint64(forged[40:], ptr+4096)
	err := comms[0].Connect([][]byte{handles[0], forged, handles[2]})
	require.ErrorIs(t, err, a2a.ErrHandle)
	require.Contains(t, err.Error(), "is not the buffer of that rank's Comm in this process")
	// Another live Comm's buffer, claimed by the wrong rank, is refused too.
	forged = a2a.HandleWithPointerOf(handles[1], handles[2])
	err = comms[0].Connect([][]byte{handles[0], forged, handles[2]})
	require.ErrorIs(t, err, a2a.ErrHandle)
	require.Contains(t, err.Error(), "is not the buffer of that rank's Comm in this process")
	requireFormsAndCloses(t, lib, comms, handles)
}

// A handle's IPC payload that maps less memory than the group writes into
// each peer (here another, smaller Comm's buffer) is refused after the
// open, and the mapping is released; honest handles map over IPC.
func TestFakeIPCRangeChecked(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	comms, handles, _ := fakeGroup(t, withSharing(a2a.SharingLegacyIPC)) // IPC handles are legacy IPC's
	small, err := a2a.New(a2a.Config{Rank: 1, WorldSize: 3, Device: a2a.DeviceOrdinal(1), MaxTokens: 1, HiddenDim: 8, DType: a2a.BFloat16,
		Sharing: a2a.SharingLegacyIPC})
	require.NoError(t, err)
	forged := a2a.HandleWithIPCOf(handles[1], small.Handle())
	err = comms[0].Connect([][]byte{handles[0], forged, handles[2]})
	require.ErrorIs(t, err, a2a.ErrHandle)
	require.Contains(t, err.Error(), "this rank writes")
	t.Log(err)
	// The refused mapping goes to the graveyard, released once the Comms
	// are idle (they are: by the share's drainer, or at the latest by a
	// Sync), before the memory it maps is freed.
	require.NoError(t, comms[0].Sync())
	require.Zero(t, fakeCounters(t, lib).IPCMappings, "the refused mapping is closed")
	require.NoError(t, small.Close())
	for r, c := range comms {
		require.NoError(t, c.Connect(handles), "rank %d", r)
	}
	require.EqualValues(t, 3*2, fakeCounters(t, lib).IPCMappings, "every peer mapped over IPC")
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	requireReleased(t, lib)
}

// connectAll connects every Comm of a fakeGroup at once, as ranks would.
func connectAll(comms []*a2a.Comm, handles [][]byte) error {
	return runRanks(comms, func(c *a2a.Comm) error { return c.Connect(handles) })
}

// threeOpsOnEveryRank runs SendRecvHeads, GatherHeads of its view and
// AllGather on each Comm of a fakeGroup in turn (the stub runs no kernel:
// this checks planning, shapes and launches) and syncs.
func threeOpsOnEveryRank(t *testing.T, comms []*a2a.Comm) {
	t.Helper()
	tokens := []int{4, 5, 6}
	for r, c := range comms {
		require.NoError(t, c.SetRankTokens(tokens))
		x, err := c.Device().Alloc([4]int{1, tokens[r], 6, 64}, a2a.BFloat16)
		require.NoError(t, err)
		out, err := c.SendRecvHeads(x)
		require.NoError(t, err)
		require.Equal(t, [4]int{1, 15, 2, 64}, out.Shape)
		back, err := c.GatherHeads(out)
		require.NoError(t, err)
		require.Equal(t, [4]int{1, tokens[r], 6, 64}, back.Shape)
		all, err := c.AllGather(x)
		require.NoError(t, err)
		require.Equal(t, [4]int{1, 15, 6, 64}, all.Shape)
		require.NoError(t, c.Sync())
		require.NoError(t, c.Device().Free(x))
	}
}

func checkPeerAllowed(t *testing.T, lib string) {
	// Peer contexts are legacy IPC's: VMM buffers get access granted instead.
	comms, handles, devices := fakeGroup(t, withSharing(a2a.SharingLegacyIPC))
	require.NoError(t, connectAll(comms, handles))
	crossPairs := 0
	for r, c := range comms {
		require.Equal(t, 132, c.Blocks())
		for p := range devices {
			if devices[p] != devices[r] {
				crossPairs++
			}
		}
	}
	n := fakeCounters(t, lib)
	require.Zero(t, n.IPCMappings, "same-process peers use the raw pointer, not IPC")
	// One retain per Comm's Device, one per device for the Comms' shared
	// kernels, and on top one peer context per peer on another GPU.
	require.EqualValues(t, len(comms)+distinctDevices(devices)+crossPairs, n.ContextRetains,
		"one peer context retained per peer on another GPU")
	// The machine code of both element widths and the wire's (the stub's
	// devices are sm_90), loaded once per device with a Comm, whatever the
	// number of Comms there.
	require.EqualValues(t, 3*distinctDevices(devices), n.Modules, "three modules per device")
	threeOpsOnEveryRank(t, comms)
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	n = fakeCounters(t, lib)
	// Not single-buffer: one kernel per operation, and the farewell kernel
	// in Close.
	require.EqualValues(t, 3*4, n.Launches, "three operations and the farewell per rank")
	requireReleased(t, lib)
}

// TestFakeWire: a Comm over the fp8 wire uses the wire's module, loaded
// once per device beside the exact kernels, and each operation is two launches
// (the exchange and the decode); MoverAuto stays on the kernels (the copy
// engines would launch one barrier), and the outputs keep their 16-bit
// shapes.
func TestFakeWire(t *testing.T) {
	eachWirePath(t, func(t *testing.T, mode wirePath) {
		lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
		a2a.SetAutoCopyBytes(t, 1)
		comms, handles, devices := fakeGroup(t, func(c *a2a.Config) { c.Wire, c.Mover = a2a.WireE4M3, a2a.MoverAuto })
		require.NoError(t, connectAll(comms, handles))
		require.EqualValues(t, 3*distinctDevices(devices), fakeCounters(t, lib).Modules, "the wire's module beside the two exact ones")
		threeOpsOnEveryRank(t, comms)
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
		require.EqualValues(t, 3*(3*mode.launches+1), fakeCounters(t, lib).Launches, "launches per operation and the farewell, per rank")
		requireReleased(t, lib)
	})
}

// ---- allocations -----------------------------------------------------------

// TestFakeAllocations: an operation allocates nothing on the Go heap once
// its kernels are loaded, from machine code or (each operation's family
// loaded by its first use, before the count) from PTX.
func TestFakeAllocations(t *testing.T) {
	t.Run("machine-code", func(t *testing.T) { checkAllocations(t, fakeDriver(t)) })
	t.Run("ptx", func(t *testing.T) { checkAllocations(t, fakeDriver(t, ptx.EnvPTXOnly+"=1")) })
}

func checkAllocations(t *testing.T, lib string) {
	c, x, dst := fakeComm(t, true, true)
	for _, op := range fakeOps(c, x, dst) {
		require.NoError(t, op.run())
		require.NoError(t, c.Sync()) // a first use of PTX loads when nothing is queued
	}
	for _, op := range fakeOps(c, x, dst) {
		n := testing.AllocsPerRun(1000, func() {
			if err := op.run(); err != nil {
				panic(err)
			}
		})
		t.Logf("allocs/op %s: %v", op.name, n)
		if fakecuda.RaceEnabled() {
			// The race detector makes sync.Pool drop a quarter of what is
			// put back, so internal/driver's pooled call buffers get
			// reallocated: the count means nothing.
			continue
		}
		require.LessOrEqual(t, n, 2.0, "%s: at most 2 Go heap allocations per operation", op.name)
	}
	require.NoError(t, c.Sync())
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}

// ---- errors ----------------------------------------------------------------

func TestFakeErrors(t *testing.T) {
	t.Run("launch-failure", func(t *testing.T) {
		checkLaunchFailure(t, fakeDriver(t, fakecuda.EnvFailLaunchAfter+"=0"))
	})
	t.Run("validation-first", func(t *testing.T) {
		checkValidation(t, fakeDriver(t, fakecuda.EnvFailLaunchAfter+"=0"))
	})
	t.Run("sync-error", func(t *testing.T) {
		checkSyncError(t, fakeDriver(t, fakecuda.EnvSyncError+"=700"))
	})
}

// requireBrokenAfter checks that every call fails with ErrBroken wrapping
// cause, after a failure the Comm has already returned once.
func requireBrokenAfter(t *testing.T, calls []fakeOp, cause string) {
	t.Helper()
	for _, call := range calls {
		err := call.run()
		require.ErrorIs(t, err, a2a.ErrBroken, "%s after the failure", call.name)
		require.Contains(t, err.Error(), cause, "%s: ErrBroken carries the first failure", call.name)
	}
}

func checkLaunchFailure(t *testing.T, lib string) {
	c, x, dst := fakeComm(t, true, true)
	_, err := c.SendRecvHeads(x)
	require.Error(t, err)
	require.True(t, driver.IsCode(err, driver.ErrorLaunchFailed), "%v", err)
	require.NotErrorIs(t, err, a2a.ErrBroken, "the failure itself is returned first")
	t.Logf("launch: %v", err)
	requireBrokenAfter(t, fakeCalls(c, x, dst), "CUDA_ERROR_LAUNCH_FAILED")
	n := fakeCounters(t, lib)
	require.EqualValues(t, 1, n.LaunchFailures, "nothing launched once broken")
	require.Zero(t, n.Launches)
	require.NotPanics(t, func() { err = closeFake(t, c, x, dst) })
	t.Logf("Close: %v", err)
	// A connected Comm says goodbye to its peers even when broken: Close
	// launches its one farewell kernel, which the stub fails as well, and
	// reports that.
	require.True(t, driver.IsCode(err, driver.ErrorLaunchFailed), "Close reports its failed farewell: %v", err)
	n = fakeCounters(t, lib)
	require.EqualValues(t, 2, n.LaunchFailures, "the operation, then Close's farewell")
	require.Zero(t, n.Launches)
	require.NoError(t, c.Close(), "second Close")
	requireReleased(t, lib)
}

func checkValidation(t *testing.T, lib string) {
	c, x, dst := fakeComm(t, true, true)
	buf := c.Buffer()
	fp16 := x
	fp16.DType = a2a.Float16
	noBatch := x
	noBatch.Shape[0] = 0
	sevenTokens := x
	sevenTokens.Shape[1] = 7
	tooBig := x
	tooBig.Shape[0] = 16 // 128 tokens, over MaxTokens 64
	odd := x
	odd.Ptr++
	nilPtr := x
	nilPtr.Ptr = 0
	wrongDst := dst
	wrongDst.Shape = [4]int{1, 8, 16, 256}
	inBuffer := a2a.Tensor{Ptr: buf.Ptr, Shape: dst.Shape, DType: dst.DType}
	for _, tc := range []struct {
		name string
		run  func() error
		want error
	}{
		{"dtype", func() error { _, err := c.SendRecvHeads(fp16); return err }, a2a.ErrDType},
		{"dtype-gather", func() error { _, err := c.GatherHeads(fp16); return err }, a2a.ErrDType},
		{"shape", func() error { _, err := c.AllGather(noBatch); return err }, a2a.ErrShape},
		{"nil-pointer", func() error { _, err := c.AllGather(nilPtr); return err }, a2a.ErrShape},
		{"dst-shape", func() error { return c.SendRecvHeadsInto(wrongDst, x) }, a2a.ErrShape},
		{"dst-dtype", func() error { return c.AllGatherInto(fp16, x) }, a2a.ErrDType},
		{"tokens", func() error { _, err := c.SendRecvHeads(sevenTokens); return err }, a2a.ErrTokens},
		{"tokens-gather", func() error { return c.GatherHeadsInto(dst, sevenTokens) }, a2a.ErrTokens},
		{"tokens-allgather", func() error { _, err := c.AllGather(sevenTokens); return err }, a2a.ErrTokens},
		{"capacity", func() error { _, err := c.AllGather(tooBig); return err }, a2a.ErrCapacity},
		{"alignment", func() error { _, err := c.SendRecvHeads(odd); return err }, a2a.ErrAlignment},
		{"dst-in-buffer", func() error { return c.AllGatherInto(inBuffer, x) }, a2a.ErrAliased},
		// A count out of range is refused, and the counts set before stay
		// (the cases after this one still see 8 tokens).
		{"tokens-huge", func() error { return c.SetRankTokens([]int{math.MaxInt64}) }, a2a.ErrTokens},
		{"tokens-after-huge", func() error { _, err := c.SendRecvHeads(sevenTokens); return err }, a2a.ErrTokens},
	} {
		err := tc.run()
		require.ErrorIs(t, err, tc.want, tc.name)
		require.False(t, driver.IsCode(err, driver.ErrorLaunchFailed), "%s reached the launch: %v", tc.name, err)
		require.NotContains(t, err.Error(), "LAUNCH_FAILED", tc.name)
		t.Logf("%s: %v", tc.name, err)
	}
	n := fakeCounters(t, lib)
	require.Zero(t, n.Launches+n.LaunchFailures, "validation errors enqueue nothing")

	// Not broken: a valid call goes on to the launch, which the stub fails.
	_, err := c.AllGather(x)
	require.True(t, driver.IsCode(err, driver.ErrorLaunchFailed), "%v", err)
	require.NotErrorIs(t, err, a2a.ErrBroken)
	require.EqualValues(t, 1, fakeCounters(t, lib).LaunchFailures)
	_ = closeFake(t, c, x, dst)
	requireReleased(t, lib)
}

// checkSyncError: a synchronisation that fails after a launch (the
// stub fails cuStreamSynchronize only on a stream that has run a kernel, so
// New's own wait still works) breaks the Comm, whichever call waited.
func checkSyncError(t *testing.T, lib string) {
	for _, tc := range []struct {
		name string
		wait func(c *a2a.Comm, view a2a.Tensor) error
	}{
		{"Sync", func(c *a2a.Comm, _ a2a.Tensor) error { return c.Sync() }},
		// A helper reading a view waits for the Comm's queued operations.
		{"Download", func(c *a2a.Comm, view a2a.Tensor) error { _, err := c.Device().Download(view); return err }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fakeCounters(t, lib).Launches
			c, x, dst := fakeComm(t, true, true)
			require.NoError(t, c.Sync(), "nothing launched yet: the wait works")
			view, err := c.SendRecvHeads(x)
			require.NoError(t, err, "the launch itself works")
			err = tc.wait(c, view)
			require.True(t, driver.IsCode(err, driver.ErrorIllegalAddress), "%v", err)
			require.NotErrorIs(t, err, a2a.ErrBroken, "the failure itself is returned first")
			t.Logf("%s: %v", tc.name, err)
			requireBrokenAfter(t, fakeCalls(c, x, dst), "CUDA_ERROR_ILLEGAL_ADDRESS")
			require.NotPanics(t, func() { err = closeFake(t, c, x, dst) })
			require.True(t, driver.IsCode(err, driver.ErrorIllegalAddress), "Close reports the failed wait: %v", err)
			// The operation, then Close's farewell: a broken Comm still says
			// goodbye, and nothing else is launched once broken.
			require.EqualValues(t, before+2, fakeCounters(t, lib).Launches)
			requireReleased(t, lib)
		})
	}
}

// ---- life cycle ------------------------------------------------------------

func TestFakeLifecycle(t *testing.T) {
	t.Run("sequential", func(t *testing.T) { checkLifecycle(t, fakeDriver(t)) })
	t.Run("concurrent", func(t *testing.T) { checkConcurrent(t, fakeDriver(t)) })
}

func checkLifecycle(t *testing.T, lib string) {
	cfg := a2a.Config{Rank: 0, WorldSize: 2, Device: a2a.DeviceOrdinal(0), MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16}
	newRank := func(mod func(*a2a.Config)) *a2a.Comm {
		cfg := cfg
		mod(&cfg)
		c, err := a2a.New(cfg)
		require.NoError(t, err)
		return c
	}
	c0 := newRank(func(*a2a.Config) {})
	c1 := newRank(func(c *a2a.Config) { c.Rank, c.Device = 1, a2a.DeviceOrdinal(1) })
	h0, h1 := c0.Handle(), c1.Handle()
	x, err := c0.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	dst, err := c0.Device().Alloc([4]int{1, 16, 16, 128}, a2a.BFloat16)
	require.NoError(t, err)

	// Before Connect.
	for _, op := range fakeOps(c0, x, dst) {
		require.ErrorIs(t, op.run(), a2a.ErrNotConnected, op.name)
	}
	_, err = timing.Ops(c0, 1, func(int) error { return nil })
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	require.NoError(t, c0.Sync(), "Sync before Connect has nothing to wait for")

	// Bad handle lists, each refused with ErrHandle and nothing mapped.
	other0 := newRank(func(*a2a.Config) {})
	bigger := newRank(func(c *a2a.Config) { c.Rank, c.MaxTokens = 1, 32 })
	single := newRank(func(c *a2a.Config) { c.Rank, c.SingleBuffer = 1, true })
	fp8 := newRank(func(c *a2a.Config) { c.Rank, c.DType, c.HiddenDim = 1, a2a.Float8E4M3, 2*32*128 })
	world3 := newRank(func(c *a2a.Config) { c.Rank, c.WorldSize = 1, 3 })
	garbage := append([]byte(nil), h1...)
	copy(garbage, "XXXX")
	for _, tc := range []struct {
		name    string
		handles [][]byte
		want    string
	}{
		{"count", [][]byte{h0}, "1 handles for world size 2"},
		{"count-3", [][]byte{h0, h1, h1}, "3 handles for world size 2"},
		{"size", [][]byte{h0, h1[:len(h1)-1]}, fmt.Sprintf("%d bytes", len(h1)-1)},
		{"magic", [][]byte{h0, garbage}, "does not start with"},
		{"order", [][]byte{h1, h0}, "comes from rank 1"},
		{"not-own", [][]byte{other0.Handle(), h1}, "not this rank's own"},
		{"capacity", [][]byte{h0, bigger.Handle()}, "MaxTokens*HiddenDim must agree"},
		{"single-buffer", [][]byte{h0, single.Handle()}, "SingleBuffer=true"},
		{"element-width", [][]byte{h0, fp8.Handle()}, "1-byte elements"},
		{"world", [][]byte{h0, world3.Handle()}, "world size 3"},
	} {
		err := c0.Connect(tc.handles)
		require.ErrorIs(t, err, a2a.ErrHandle, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
		t.Logf("%s: %v", tc.name, err)
	}
	n := fakeCounters(t, lib)
	// Seven Comms on two devices: one retain per Comm's Device, one per
	// device for the share, and the kernels of both element widths and the
	// wire's loaded once per device (fp8 uses the 1-byte ones, loaded with
	// the first Comm).
	require.EqualValues(t, 7+2, n.ContextRetains)
	require.EqualValues(t, 3*2, n.Modules, "kernels are loaded once per device")
	for _, c := range []*a2a.Comm{other0, bigger, single, fp8, world3} {
		require.NoError(t, c.Close(), "closing a Comm never connected")
	}
	n = fakeCounters(t, lib)
	require.Zero(t, n.IPCMappings)
	require.Zero(t, n.Launches, "a Comm never connected launches nothing, in Close neither")
	// c0 and c1's Devices and the two devices' shares: no peer context.
	require.EqualValues(t, 2+2, n.ContextRetains, "refused Connects retain nothing")
	require.EqualValues(t, 3*2, n.Modules, "the kernels stay while a Comm is on the device")

	// Connect, once.
	require.NoError(t, c0.Connect([][]byte{h0, h1}))
	require.NoError(t, c1.Connect([][]byte{h0, h1}))
	require.ErrorIs(t, c0.Connect([][]byte{h0, h1}), a2a.ErrConnected)
	for _, op := range fakeOps(c0, x, dst) {
		require.ErrorIs(t, op.run(), a2a.ErrTokensNotSet, op.name)
	}
	require.ErrorIs(t, c0.SetRankTokens([]int{8}), a2a.ErrTokens)
	require.ErrorIs(t, c0.SetRankTokens([]int{8, -1}), a2a.ErrTokens)
	require.NoError(t, c0.SetRankTokens([]int{8, 8}))
	_, err = c0.SendRecvHeads(x)
	require.NoError(t, err)
	require.NoError(t, c0.SendRecvHeadsInto(dst, x))
	require.ErrorIs(t, c0.SetTimeout(0), a2a.ErrConfig)
	require.NoError(t, c0.SetTimeout(time.Second))
	require.Equal(t, time.Second, c0.Config().Timeout)
	require.NoError(t, c0.Sync())

	// Closed.
	require.NoError(t, c0.Device().Free(x))
	require.NoError(t, c0.Device().Free(dst))
	require.NoError(t, c0.Close())
	for _, call := range fakeCalls(c0, x, dst) {
		require.ErrorIs(t, call.run(), a2a.ErrClosed, call.name)
	}
	require.ErrorIs(t, c0.SetTimeout(time.Second), a2a.ErrClosed)
	require.ErrorIs(t, c0.Connect([][]byte{h0, h1}), a2a.ErrClosed)
	require.NoError(t, c0.Close(), "second Close")
	require.NoError(t, c1.Close())
	require.NoError(t, c1.Close())
	requireReleased(t, lib)

	// Single-buffer: each operation launches a one-block start barrier,
	// then the copy; Close launches the farewell.
	sb, x, dst := fakeComm(t, true, true, withSingleBuffer(true))
	before := fakeCounters(t, lib).Launches
	_, err = sb.AllGather(x)
	require.NoError(t, err)
	require.EqualValues(t, before+2, fakeCounters(t, lib).Launches, "two kernels per single-buffer operation")
	require.NoError(t, sb.Sync())
	require.NoError(t, closeFake(t, sb, x, dst))
	require.EqualValues(t, before+3, fakeCounters(t, lib).Launches, "and one farewell")
	requireReleased(t, lib)
}

// checkConcurrent runs operations and the other methods from
// several goroutines while one of them closes the Comm: every call either
// works or returns ErrClosed, and everything is released (run it with
// -race).
func checkConcurrent(t *testing.T, lib string) {
	c, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16})
	require.NoError(t, err)
	require.NoError(t, c.Connect([][]byte{c.Handle()}))
	require.NoError(t, c.SetRankTokens([]int{8}))
	// The tensors live on a Device of their own: the Comm's goes with it.
	d, err := a2a.OpenDevice(0)
	require.NoError(t, err)
	x, err := d.Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	dst, err := d.Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	const goroutines, iters = 8, 300
	var made atomic.Int64 // calls made, all goroutines
	var wg, workers sync.WaitGroup
	// Not the timing: see TestFakeTimeOpsClose.
	calls := fakeCalls(c, x, dst)[:8]
	for g := range goroutines {
		workers.Go(func() {
			for i := range iters {
				call := calls[(g+i)%len(calls)]
				if err := call.run(); err != nil && !errors.Is(err, a2a.ErrClosed) {
					t.Errorf("goroutine %d, %s: %v", g, call.name, err)
					return
				}
				switch i % 4 {
				case 0:
					_ = c.Buffer()
					_ = c.Blocks()
				case 1:
					if err := c.SetTimeout(time.Second); err != nil && !errors.Is(err, a2a.ErrClosed) {
						t.Errorf("SetTimeout: %v", err)
					}
				case 2:
					_ = c.Config()
					_ = c.Handle()
				}
				made.Add(1)
			}
		})
	}
	finished := make(chan struct{})
	wg.Go(func() {
		workers.Wait()
		close(finished)
	})
	wg.Go(func() {
		// Close once about half the calls are made.
		for made.Load() < goroutines*iters/2 {
			select {
			case <-finished:
			case <-time.After(50 * time.Microsecond):
				continue
			}
			break
		}
		t.Logf("Close after %d of %d calls", made.Load(), goroutines*iters)
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	wg.Wait()
	require.NoError(t, c.Close())
	require.NoError(t, d.Free(x))
	require.NoError(t, d.Free(dst))
	require.NoError(t, d.Close())
	requireReleased(t, lib)
}

// TestFakeTimeOpsClose runs a timing method whose first operation closes
// the Comm: the timing returns ErrClosed, and nothing is left allocated.
func TestFakeTimeOpsClose(t *testing.T) {
	for _, tc := range []struct {
		name   string
		timing func(c *a2a.Comm, op func(int) error) error
	}{
		{"OpsClose", func(c *a2a.Comm, op func(int) error) error { _, err := timing.Ops(c, 2, op); return err }},
		{"BackToBackClose", func(c *a2a.Comm, op func(int) error) error {
			_, err := timing.BackToBack(c, timing.Own, 2, op)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := fakeDriver(t)
			c, x, dst := fakeComm(t, true, true)
			require.NoError(t, c.Device().Free(x))
			require.NoError(t, c.Device().Free(dst))
			err := tc.timing(c, func(int) error { return c.Close() })
			t.Logf("timing: %v", err)
			assert.ErrorIs(t, err, a2a.ErrClosed, "a Close during the timed run")
			assert.Empty(t, fakeCounters(t, lib).Live(), "left allocated")
		})
	}
}

// ---- device-wide waits -------------------------------------------------------

// TestFakeNoDeviceWideWaitWhileCommsLive: while a Comm of the process has
// work queued on a device (a kernel that may be waiting for a peer), no
// other Comm, Device helper or Close there calls the driver in a way that
// waits for the whole device: such a call would wait for that kernel, and
// stall every launch of the process meanwhile. What those calls do
// (freeing, unmapping, loading and unloading kernels) happens when the
// first Comm arrives, when no Comm has work queued, or when the last one
// leaves.
func TestFakeNoDeviceWideWaitWhileCommsLive(t *testing.T) {
	lib := fakeDriver(t)
	// A, in use: made (loading the kernels), connected, given tokens, one
	// operation, synchronised.
	a, xa, dsta := fakeComm(t, true, true)
	_, err := a.SendRecvHeads(xa)
	require.NoError(t, err)
	require.NoError(t, a.Sync())
	base := fakeCounters(t, lib)
	t.Logf("baseline: %+v", base)
	require.Zero(t, base.BusyDeviceWaits, "the kernels were loaded with nothing queued")
	noWait := func(what string) {
		t.Helper()
		n := fakeCounters(t, lib)
		require.Equal(t, base.DeviceWaits, n.DeviceWaits, "%s: a device-wide wait while A is alive", what)
		require.Equal(t, base.BusyDeviceWaits, n.BusyDeviceWaits, "%s: a device-wide wait for queued work", what)
	}
	// From here on until B is closed, A or B always has an operation
	// queued, as when two groups' collectives overlap: a release done now
	// would wait for a kernel of theirs. (The stub settles a stream's work
	// only when the host waits for it.)
	queueA := func() {
		t.Helper()
		require.NoError(t, a.GatherHeadsInto(dsta, xa))
	}
	queueA()

	// B on the same device: made, connected, given tokens, operations.
	b, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16})
	require.NoError(t, err)
	noWait("New")
	require.Equal(t, base.Modules, fakeCounters(t, lib).Modules, "B uses the kernels A's arrival loaded")
	require.NoError(t, b.Connect([][]byte{b.Handle()}))
	require.NoError(t, a.SetRankTokens([]int{8}))
	require.NoError(t, b.SetRankTokens([]int{8}))
	xb, err := b.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	dstb, err := b.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	for _, op := range append(fakeOps(a, xa, dsta), fakeOps(b, xb, dstb)...) {
		require.NoError(t, op.run(), op.name)
	}
	noWait("operations")

	// Every Device helper on memory of A's Device, B's Device and a Device
	// of its own on the same GPU, and on views of A's and B's buffers.
	d, err := a2a.OpenDevice(0)
	require.NoError(t, err)
	for i, dev := range []*a2a.Device{a.Device(), b.Device(), d} {
		tt, err := dev.Alloc(xa.Shape, a2a.BFloat16)
		require.NoError(t, err, "Device %d", i)
		src := roundTripHelpers(t, dev, tt)
		require.NoError(t, dev.Fill(dsta, 0))
		require.NoError(t, dev.Upload(dstb, src))
		require.NoError(t, dev.Free(tt), "freed later, none queued")
		noWait(fmt.Sprintf("Device %d's helpers", i))
	}
	require.NoError(t, d.Close())
	noWait("closing a Device")
	// A view waits for its own Comm's operations, no other's: B's first,
	// while A has work queued, then A's while B has.
	vb, err := b.AllGather(xb)
	require.NoError(t, err)
	_, err = a.Device().Download(vb)
	require.NoError(t, err)
	require.NoError(t, b.Device().Fill(vb, 0))
	require.NoError(t, b.SendRecvHeadsInto(dstb, xb))
	va, err := a.AllGather(xa)
	require.NoError(t, err)
	_, err = b.Device().Download(va)
	require.NoError(t, err)
	require.NoError(t, a.Device().Upload(va, make([]byte, va.Bytes())))
	queueA()
	noWait("helpers on views")

	// Sync both, each while the other has work queued, then close B.
	require.NoError(t, b.Sync())
	require.NoError(t, b.GatherHeadsInto(dstb, xb))
	require.NoError(t, a.Sync())
	queueA()
	require.NoError(t, b.Sync())
	noWait("Sync")
	require.NoError(t, b.Device().Free(xb))
	require.NoError(t, b.Device().Free(dstb))
	require.NoError(t, b.Close())
	noWait("closing B")
	n := fakeCounters(t, lib)
	require.Equal(t, base.Streams, n.Streams, "B's streams are gone")
	require.Equal(t, base.ContextRetains, n.ContextRetains, "B's Device is released")
	require.Equal(t, base.Modules, n.Modules, "the kernels stay for A")
	require.Greater(t, n.DeviceAllocs, base.DeviceAllocs, "what B and the helpers freed waits for A to be idle")

	// A idle, no Comm has work queued: the graveyard is released now, while
	// A lives on (without waiting for anything).
	require.NoError(t, a.Sync())
	n = fakeCounters(t, lib)
	require.Greater(t, n.DeviceWaits, base.DeviceWaits, "released once every Comm is idle")
	require.Equal(t, base.BusyDeviceWaits, n.BusyDeviceWaits, "with nothing queued")
	require.Equal(t, base.DeviceAllocs, n.DeviceAllocs, "everything B and the helpers freed is released")
	require.Equal(t, base.HostAllocs, n.HostAllocs, "B's status word is released")

	// The last Comm leaves: its memory and the kernels go, and the waits
	// that takes come after its farewell was waited for.
	require.NoError(t, closeFake(t, a, xa, dsta))
	n = fakeCounters(t, lib)
	require.Equal(t, base.BusyDeviceWaits, n.BusyDeviceWaits, "no device-wide wait ever found work queued")
	require.Zero(t, n.Modules)
	requireReleased(t, lib)
}

// ---- System and devices ------------------------------------------------------

func TestFakeSystem(t *testing.T) {
	t.Run("default", func(t *testing.T) { checkSystem(t, fakeDriver(t)) })
	t.Run("no-peer", func(t *testing.T) {
		checkSystem(t, fakeDriver(t, fakecuda.EnvDevices+"=3", fakecuda.EnvNoPeer+"=0-2"))
	})
	t.Run("two-no-peer", func(t *testing.T) { checkSystem(t, fakeDriver(t, fakecuda.EnvNoPeer+"=0-1")) })
	t.Run("no-device", func(t *testing.T) { checkSystem(t, fakeDriver(t, fakecuda.EnvDevices+"=0")) })
	t.Run("no-driver", func(t *testing.T) {
		const lib = "/nonexistent/libcuda.so.1"
		d, err := driver.LoadLibrary(lib)
		a2a.UseDriver(t, d, err)
		checkNoDriver(t, lib)
	})
}

func checkSystem(t *testing.T, lib string) {
	n := 2
	if s := os.Getenv(fakecuda.EnvDevices); s != "" {
		var err error
		n, err = strconv.Atoi(s)
		require.NoError(t, err)
	}
	denied := map[[2]int]bool{}
	for _, pair := range strings.Split(os.Getenv(fakecuda.EnvNoPeer), ",") {
		var a, b int
		if _, err := fmt.Sscanf(pair, "%d-%d", &a, &b); err == nil {
			denied[[2]int{a, b}], denied[[2]int{b, a}] = true, true
		}
	}
	info, err := a2a.System()
	if n == 0 {
		require.ErrorIs(t, err, a2a.ErrNoDevice)
		require.NotErrorIs(t, err, a2a.ErrNoDriver)
		_, err = a2a.New(a2a.Config{WorldSize: 1, MaxTokens: 1, HiddenDim: 1, DType: a2a.BFloat16})
		require.ErrorIs(t, err, a2a.ErrNoDevice)
		return
	}
	require.NoError(t, err)
	t.Logf("%+v", info)
	require.Equal(t, 13000, info.DriverVersion)
	require.Equal(t, lib, info.Library)
	require.Len(t, info.Devices, n)
	for i, d := range info.Devices {
		require.Equal(t, a2a.DeviceInfo{
			Ordinal: i, Name: fmt.Sprintf("Fake CUDA Device %d", i), BusID: fmt.Sprintf("0000:%02X:00.0", i),
			SMs: 132, ClockKHz: 1980000, Major: 9, Minor: 0, TotalMemory: 141 << 30, Unified: true, MachineCode: "sm_90", PosixFD: true,
		}, d)
	}
	require.Len(t, info.PeerAccess, n)
	for i := range n {
		require.Len(t, info.PeerAccess[i], n)
		for j := range n {
			require.Equal(t, i == j || !denied[[2]int{i, j}], info.PeerAccess[i][j], "PeerAccess[%d][%d]", i, j)
		}
	}
	_, err = a2a.OpenDevice(n)
	require.ErrorIs(t, err, a2a.ErrConfig)
}

func checkNoDriver(t *testing.T, lib string) {
	_, err := a2a.System()
	require.ErrorIs(t, err, a2a.ErrNoDriver)
	require.Contains(t, err.Error(), lib)
	_, err = a2a.New(a2a.Config{WorldSize: 1, MaxTokens: 1, HiddenDim: 1, DType: a2a.BFloat16})
	require.ErrorIs(t, err, a2a.ErrNoDriver)
	_, err = a2a.OpenDevice(0)
	require.ErrorIs(t, err, a2a.ErrNoDriver)
}

// TestFakeLoad checks that a2a opens the process's driver with
// driver.Load, which finds the stub through ULYSSES_LIBCUDA: in a child
// process, since Load reads it once per process.
func TestFakeLoad(t *testing.T) {
	testutil.RunChild(t, "TestFakeLoadChild", driver.EnvLibrary+"="+testutil.FakeCUDA(t))
}

func TestFakeLoadChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	lib := os.Getenv(driver.EnvLibrary)
	info, err := a2a.System()
	require.NoError(t, err)
	require.Equal(t, lib, info.Library)
	require.Len(t, info.Devices, 2)
	c, x, dst := fakeComm(t, true, true)
	_, err = c.AllGather(x)
	require.NoError(t, err)
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}

func TestFakeDevice(t *testing.T) {
	lib := fakeDriver(t)
	d, err := a2a.OpenDevice(1)
	require.NoError(t, err)
	require.Equal(t, 1, d.Info().Ordinal)
	tt, err := d.Alloc([4]int{2, 3, 4, 5}, a2a.Float16)
	require.NoError(t, err)
	src := roundTripHelpers(t, d, tt)
	require.ErrorIs(t, d.Upload(tt, src[1:]), a2a.ErrShape)
	require.ErrorIs(t, d.DownloadInto(make([]byte, len(src)-1), tt), a2a.ErrShape)
	_, err = d.Alloc([4]int{1, -1, 1, 1}, a2a.BFloat16)
	require.ErrorIs(t, err, a2a.ErrShape)
	_, err = d.Alloc([4]int{1, 1, 1, 1}, 0)
	require.ErrorIs(t, err, a2a.ErrDType)
	empty, err := d.Alloc([4]int{0, 1, 1, 1}, a2a.BFloat16)
	require.NoError(t, err)
	require.NotZero(t, empty.Ptr)
	require.NoError(t, d.Free(empty))
	require.NoError(t, d.Free(tt))
	require.NoError(t, d.Close())
	require.NoError(t, d.Close())

	// The Into forms copy the view out of the Comm's buffer, whose data the
	// stub's kernels never write: it still holds the stub's 0xA5 poison.
	c, x, dst := fakeComm(t, true, true)
	require.NoError(t, c.Device().Fill(dst, 0))
	require.NoError(t, c.AllGatherInto(dst, x))
	got, err := c.Device().Download(dst)
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("\xa5", len(got)), string(got))

	times, err := timing.Ops(c, 3, func(int) error { _, err := c.SendRecvHeads(x); return err })
	require.NoError(t, err)
	require.Equal(t, []time.Duration{time.Microsecond, time.Microsecond, time.Microsecond}, roundAll(times))
	mean, err := timing.BackToBack(c, timing.Own, 4, func(int) error { _, err := c.SendRecvHeads(x); return err })
	require.NoError(t, err)
	require.Equal(t, 250*time.Nanosecond, mean.Round(10*time.Nanosecond))
	_, err = timing.Ops(x, 1, func(int) error { return nil })
	require.ErrorIs(t, err, a2a.ErrConfig, "timing something that is not a Comm")
	ts := a2a.NewTestStream(t, c.Device())
	mean, err = timing.BackToBack(c, uintptr(ts.Stream()), 4, func(int) error { _, err := c.On(ts.Stream()).SendRecvHeads(x); return err })
	require.NoError(t, err)
	require.Equal(t, 250*time.Nanosecond, mean.Round(10*time.Nanosecond), "on a caller's stream")
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Microsecond)
	}
	return out
}

// roundTripHelpers uploads a pattern into tt, reads it back, fills tt and
// reads that back, and returns the pattern.
func roundTripHelpers(t *testing.T, dev *a2a.Device, tt a2a.Tensor) []byte {
	t.Helper()
	src := make([]byte, tt.Bytes())
	for i := range src {
		src[i] = byte(i)
	}
	require.NoError(t, dev.Upload(tt, src))
	got, err := dev.Download(tt)
	require.NoError(t, err)
	require.Equal(t, src, got)
	require.NoError(t, dev.Fill(tt, 0x3C))
	require.NoError(t, dev.DownloadInto(got, tt))
	require.Equal(t, strings.Repeat("\x3c", len(got)), string(got))
	return src
}

// TestZeroCommRefuses: the operations of a Comm or StreamOps that New and
// On did not make return an error, not a panic.
func TestZeroCommRefuses(t *testing.T) {
	var c a2a.Comm
	_, err := c.SendRecvHeads(a2a.Tensor{})
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	var o a2a.StreamOps
	require.ErrorIs(t, o.SendRecvHeadsPacked(make([]a2a.Tensor, 1), []a2a.Tensor{{}}), a2a.ErrNotConnected)
}

// busyComms makes n connected Comms of one rank and starts a goroutine
// for each that loops SendRecvHeads, 50 us of host work, Sync, so that
// at nearly every moment one of them has work queued. stop ends the
// loops and returns each one's operations and their first error;
// closeAll then frees and closes them.
func busyComms(t *testing.T, n int) (stop func() ([]int, error), closeAll func()) {
	t.Helper()
	type busy struct {
		c      *a2a.Comm
		x, dst a2a.Tensor
	}
	bs := make([]busy, n)
	for i := range bs {
		bs[i].c, bs[i].x, bs[i].dst = fakeComm(t, true, true)
		_, err := bs[i].c.SendRecvHeads(bs[i].x) // where families load on first use: nothing else runs yet
		require.NoError(t, err)
		require.NoError(t, bs[i].c.Sync())
	}
	quit := make(chan struct{})
	errs := make(chan error, n)
	ops := make([]int, n)
	for i, k := range bs {
		go func() {
			for {
				select {
				case <-quit:
					errs <- nil
					return
				default:
				}
				if _, err := k.c.SendRecvHeads(k.x); err != nil {
					errs <- err
					return
				}
				ops[i]++
				time.Sleep(50 * time.Microsecond) // the host's work between an operation and its Sync
				if err := k.c.Sync(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	stop = func() ([]int, error) {
		close(quit)
		var first error
		for range bs {
			if err := <-errs; err != nil && first == nil {
				first = err
			}
		}
		return ops, first
	}
	closeAll = func() {
		for _, k := range bs {
			require.NoError(t, closeFake(t, k.c, k.x, k.dst))
		}
	}
	return stop, closeAll
}
