package a2a_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/ptx"
)

// ---- kernels: machine code or PTX, families of PTX loaded on first use -----

// TestFakeKernelChoice: the first Comm on a device loads the machine code
// that runs there (every kernel, the wire's too on sm_90) or, on a GPU
// without any, when PTX is forced, or when a cubin fails to load, the
// barriers' PTX of both element widths; System says which, and why, before
// and after. Either way the operations run and everything is released.
func TestFakeKernelChoice(t *testing.T) {
	const noBinary = "the sm_90 machine code did not load (a2a: loading kernels: driver: cuModuleLoadDataEx: CUDA_ERROR_NO_BINARY_FOR_GPU (209)"
	for _, tc := range []struct {
		name                 string
		env                  []string
		before, arch, reason string // System's MachineCode before the first Comm, and both after
		cubins, ptxs         int64  // images the first Comm loads
	}{
		{"sm_90", nil, "sm_90", "sm_90", "", 3, 0},
		{"sm_86", []string{fakecuda.EnvCC + "=8.6"}, "sm_80", "sm_80", "", 2, 0},
		{"sm_100", []string{fakecuda.EnvCC + "=10.0"}, "", "", "no machine code for compute capability 10.0", 0, 2},
		{"ptx-only", []string{ptx.EnvPTXOnly + "=1"}, "", "", ptx.EnvPTXOnly + " is set", 0, 2},
		{"cubin-fails", []string{fakecuda.EnvCubinError + "=209"}, "sm_90", "", noBinary, 0, 2},
		// The wire's cubin loads but lacks a kernel: it falls back alone
		// (its PTX loads on first use), the exact kernels keep theirs.
		{"wire-cubin-lacks-an-entry", []string{fakecuda.EnvMissingFuncs + "=ulysses_wire_decode_e4m3_bf16_v16"}, "sm_90", "sm_90",
			"ulysses_wire.ptx: the sm_90 machine code did not load (a2a: loading kernels: driver: cuModuleGetFunction: CUDA_ERROR_NOT_FOUND (500)", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := fakeDriver(t, tc.env...)
			sys, err := a2a.System()
			require.NoError(t, err)
			assert.Equal(t, tc.before, sys.Devices[0].MachineCode, "what a Comm would get")
			c, x, dst := fakeComm(t, true, true)
			n := fakeCounters(t, lib)
			assert.Equal(t, tc.cubins, n.CubinLoads)
			assert.Equal(t, tc.ptxs, n.PTXLoads)
			sys, err = a2a.System()
			require.NoError(t, err)
			d := sys.Devices[0]
			assert.Equal(t, tc.arch, d.MachineCode)
			if tc.reason == "" {
				assert.Empty(t, d.PTXReason)
			} else {
				assert.True(t, strings.HasPrefix(d.PTXReason, tc.reason), "PTXReason %q", d.PTXReason)
			}
			assert.Equal(t, tc.before, sys.Devices[1].MachineCode, "device 1 has no Comm")
			for _, op := range fakeOps(c, x, dst) {
				require.NoError(t, op.run(), op.name)
				require.NoError(t, c.Sync())
			}
			require.NoError(t, closeFake(t, c, x, dst))
			requireReleased(t, lib)
		})
	}
}

// TestFakeLazyFamilies: where the driver compiles PTX, an operation's
// kernels (every width and kind of it, Into forms, packed and general
// forms, captured ones) load the first time one of them is needed, once
// per device: a process compiles what its operations use.
func TestFakeLazyFamilies(t *testing.T) {
	lib := fakeDriver(t, ptx.EnvPTXOnly+"=1")
	c, x, dst := fakeComm(t, true, true)
	loads := func() int64 { return fakeCounters(t, lib).PTXLoads }
	require.EqualValues(t, 2, loads(), "the first Comm: the barriers of both element widths")
	views := make([]a2a.Tensor, 2)
	for _, step := range []struct {
		name  string
		run   func() error
		loads int64
	}{
		{"SendRecvHeads", func() error { _, err := c.SendRecvHeads(x); return err }, 3},
		{"SendRecvHeadsInto", func() error { return c.SendRecvHeadsInto(dst, x) }, 3},
		{"SendRecvHeadsPacked", func() error { return c.SendRecvHeadsPacked(views, []a2a.Tensor{x, x}) }, 3},
		{"GatherHeads", func() error { _, err := c.GatherHeads(x); return err }, 4},
		{"AllGatherInto", func() error { return c.AllGatherInto(dst, x) }, 5},
		{"AllGather", func() error { _, err := c.AllGather(x); return err }, 5},
		{"HeadAllGather", func() error { _, err := c.HeadAllGather(0, x); return err }, 6},
		{"GatherHeads again", func() error { _, err := c.GatherHeads(x); return err }, 6},
	} {
		require.NoError(t, step.run(), step.name)
		require.NoError(t, c.Sync())
		assert.Equal(t, step.loads, loads(), step.name)
	}
	// A second Comm on the device finds them loaded.
	b, xb, dstb := fakeComm(t, true, true)
	_, err := b.GatherHeads(xb)
	require.NoError(t, err)
	require.NoError(t, b.Sync())
	assert.EqualValues(t, 6, loads())
	require.NoError(t, closeFake(t, b, xb, dstb))

	// Captured: the twins are in the same family; AllGather's are loaded
	// by now, SendRecvHeads' too.
	ts := a2a.NewTestStream(t, c.Device())
	on := c.On(ts.Stream())
	g, err := a2a.CaptureGraph(ts.Stream(), func() error {
		if _, err := on.SendRecvHeads(x); err != nil {
			return err
		}
		_, err := on.AllGather(x)
		return err
	}, c)
	require.NoError(t, err)
	require.NoError(t, g.Launch(ts.Stream()))
	require.NoError(t, c.Sync())
	require.NoError(t, g.Close())
	assert.EqualValues(t, 6, loads(), "captured operations use their operation's family")
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}

// TestFakeLazyWire: the wire's families of PTX are an operation's
// exchange for a format and type, and the decode apart, which the direct
// path does not launch. Two ranks on one GPU, each operation enqueued on
// both before either waits.
func TestFakeLazyWire(t *testing.T) {
	eachWirePath(t, func(t *testing.T, mode wirePath) {
		lib := fakeDriver(t, ptx.EnvPTXOnly+"=1")
		g, err := a2a.NewGroup(a2a.Config{MaxTokens: 16, HiddenDim: 8 * 64, DType: a2a.BFloat16, Wire: a2a.WireE4M3}, []int{0, 0})
		require.NoError(t, err)
		xs := make([]a2a.Tensor, g.Size())
		for r := range xs {
			require.NoError(t, g.Comm(r).SetRankTokens([]int{4, 4}))
			xs[r], err = g.Comm(r).Device().Alloc([4]int{1, 4, 8, 64}, a2a.BFloat16)
			require.NoError(t, err)
		}
		loads := func() int64 { return fakeCounters(t, lib).PTXLoads }
		decode := int64(mode.launches - 1) // the staged path's decode family
		for _, step := range []struct {
			op    func(c *a2a.Comm, x a2a.Tensor) error
			loads int64
			what  string
		}{
			{func(c *a2a.Comm, x a2a.Tensor) error { _, err := c.SendRecvHeads(x); return err }, 2 + 1 + decode, "SendRecvHeads' exchange (and the decode)"},
			{func(c *a2a.Comm, x a2a.Tensor) error { _, err := c.AllGather(x); return err }, 2 + 2 + decode, "AllGather's exchange"},
			{func(c *a2a.Comm, x a2a.Tensor) error { _, err := c.SendRecvHeads(x); return err }, 2 + 2 + decode, "loaded"},
		} {
			for r, x := range xs {
				require.NoError(t, step.op(g.Comm(r), x), step.what)
			}
			require.NoError(t, g.Sync())
			assert.Equal(t, step.loads, loads(), step.what)
		}
		for r, x := range xs {
			require.NoError(t, g.Comm(r).Device().Free(x))
		}
		require.NoError(t, g.Close())
		requireReleased(t, lib)
	})
}

// TestFakeLazyLoadWaitsForQueuedWork: a family of PTX loads only when no
// Comm of the process has work queued on the device (loading waits for
// every kernel there, and one may be waiting for a peer): the first
// operation of a kind waits for the others' queued operations, for at
// most its timeout, and fails then with ErrTimeout, enqueuing nothing and
// leaving the Comm usable; a Comm in the middle of an enqueue counts as
// queued work. No device-wide wait ever finds work queued.
func TestFakeLazyLoadWaitsForQueuedWork(t *testing.T) {
	lib := fakeDriver(t, ptx.EnvPTXOnly+"=1")
	a, xa, dsta := fakeComm(t, true, true)
	b, xb, dstb := fakeComm(t, true, true, func(c *a2a.Config) { c.Timeout = 50 * time.Millisecond })
	_, err := a.SendRecvHeads(xa)
	require.NoError(t, err, "loads its family: nothing was queued")
	launches := fakeCounters(t, lib).Launches

	start := time.Now()
	_, err = b.GatherHeads(xb)
	require.ErrorIs(t, err, a2a.ErrTimeout)
	assert.Contains(t, err.Error(), "gather_heads")
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	t.Logf("%v", err)
	assert.Equal(t, launches, fakeCounters(t, lib).Launches, "nothing enqueued")
	_, err = b.SendRecvHeads(xb)
	require.NoError(t, err, "B is not broken, and SendRecvHeads is loaded")
	require.NoError(t, b.Sync())

	// Once A's operation is done, B's load goes ahead: here A syncs while
	// B waits.
	require.NoError(t, b.SetTimeout(10*time.Second))
	done := make(chan error, 1)
	go func() {
		time.Sleep(20 * time.Millisecond)
		done <- a.Sync()
	}()
	_, err = b.GatherHeads(xb)
	require.NoError(t, err)
	require.NoError(t, <-done)
	require.NoError(t, b.Sync())

	// A Comm in the middle of enqueuing (its kernel on a caller's stream
	// may be queued before its tail event says so) counts as busy too.
	require.NoError(t, b.SetTimeout(50*time.Millisecond))
	launches = fakeCounters(t, lib).Launches
	a2a.SetEnqueuing(a, true)
	_, err = b.AllGather(xb)
	require.ErrorIs(t, err, a2a.ErrTimeout, "A's enqueue is not over")
	assert.Equal(t, launches, fakeCounters(t, lib).Launches, "nothing enqueued")
	a2a.SetEnqueuing(a, false)
	_, err = b.AllGather(xb)
	require.NoError(t, err, "A is idle now")
	require.NoError(t, b.Sync())
	require.Zero(t, fakeCounters(t, lib).BusyDeviceWaits, "no load found work queued")
	require.NoError(t, closeFake(t, b, xb, dstb))
	require.NoError(t, closeFake(t, a, xa, dsta))
	requireReleased(t, lib)
}

// TestFakeLazyLoadBetweenBusyComms: two Comms each run one operation
// after another from a goroutine of their own, so that at nearly every
// moment one of them has work queued; a third Comm's first GatherHeads
// needs its family of PTX, and gets it within a few windows of holding
// their new operations back (device.Share.load), not at its timeout. The
// busy Comms lose no operation.
func TestFakeLazyLoadBetweenBusyComms(t *testing.T) {
	lib := fakeDriver(t, ptx.EnvPTXOnly+"=1")
	stop, closeBusy := busyComms(t, 2)
	b, xb, dstb := fakeComm(t, true, true, func(c *a2a.Config) { c.Timeout = 5 * time.Second })
	time.Sleep(20 * time.Millisecond)
	start := time.Now()
	_, err := b.GatherHeads(xb)
	took := time.Since(start)
	require.NoError(t, b.Sync())
	time.Sleep(20 * time.Millisecond)
	ops, busyErr := stop()
	require.NoError(t, busyErr)
	require.NoError(t, err, "the load between busy Comms")
	t.Logf("GatherHeads' load took %v; the busy Comms ran %v operations", took, ops)
	assert.Less(t, took, time.Second, "a few windows, not the 5 s timeout")
	assert.Positive(t, ops[0]+ops[1])
	require.Zero(t, fakeCounters(t, lib).BusyDeviceWaits, "no load found work queued")
	require.NoError(t, closeFake(t, b, xb, dstb))
	closeBusy()
	requireReleased(t, lib)
}

// TestFakeLazyLoadsConcurrent: four ranks of a group on one GPU, each in
// its goroutine, reach each operation's first use together: each family
// is loaded once, and no load waits for queued work.
func TestFakeLazyLoadsConcurrent(t *testing.T) {
	lib := fakeDriver(t, ptx.EnvPTXOnly+"=1")
	g, err := a2a.NewGroup(a2a.Config{MaxTokens: 16, HiddenDim: 8 * 64, DType: a2a.BFloat16}, []int{0, 0, 0, 0})
	require.NoError(t, err)
	comms := make([]*a2a.Comm, g.Size())
	for r := range comms {
		comms[r] = g.Comm(r)
	}
	require.NoError(t, runRanks(comms, func(c *a2a.Comm) error {
		if err := c.SetRankTokens([]int{4, 4, 4, 4}); err != nil {
			return err
		}
		x, err := c.Device().Alloc([4]int{1, 4, 8, 64}, a2a.BFloat16)
		if err != nil {
			return err
		}
		for range 3 {
			v, err := c.SendRecvHeads(x)
			if err == nil {
				err = c.Sync()
			}
			if err == nil {
				_, err = c.GatherHeads(v)
			}
			if err == nil {
				err = c.Sync()
			}
			if err != nil {
				return err
			}
		}
		return c.Device().Free(x)
	}))
	n := fakeCounters(t, lib)
	assert.EqualValues(t, 2+2, n.PTXLoads, "the barriers, then each operation's family once")
	require.NoError(t, g.Close())
	requireReleased(t, lib)
}
