package a2a_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// streamOps are the six operations on x through o (a caller's stream).
func streamOps(o a2a.StreamOps, x, dst a2a.Tensor) []fakeOp {
	return []fakeOp{
		{"On.SendRecvHeads", func() error { _, err := o.SendRecvHeads(x); return err }},
		{"On.SendRecvHeadsInto", func() error { return o.SendRecvHeadsInto(dst, x) }},
		{"On.GatherHeads", func() error { _, err := o.GatherHeads(x); return err }},
		{"On.GatherHeadsInto", func() error { return o.GatherHeadsInto(dst, x) }},
		{"On.AllGather", func() error { _, err := o.AllGather(x); return err }},
		{"On.AllGatherInto", func() error { return o.AllGatherInto(dst, x) }},
	}
}

// TestFakeCallerStream enqueues every operation on a stream of the test's,
// alternating with the Comm's own: each launches its kernel on the stream
// it was given, at most 2 Go allocations each, and a stream the driver
// refuses gets ErrStream without breaking the Comm.
func TestFakeCallerStream(t *testing.T) {
	lib := fakeDriver(t)
	c, x, dst := fakeComm(t, true, true)
	ts := a2a.NewTestStream(t, c.Device())
	on := c.On(ts.Stream())
	for _, op := range streamOps(on, x, dst) {
		require.NoError(t, op.run(), op.name)
		calls, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		assert.Equal(t, uint64(ts.Stream()), uint64(calls.Launch.Stream), "%s launched on the caller's stream", op.name)
		_, err = c.AllGather(x) // back to the Comm's own stream
		require.NoError(t, err)
		calls, err = fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		assert.NotEqual(t, uint64(ts.Stream()), uint64(calls.Launch.Stream), "AllGather on the Comm's stream")
		if fakecuda.RaceEnabled() {
			continue // see TestFakeAllocations
		}
		n := testing.AllocsPerRun(200, func() {
			if err := op.run(); err != nil {
				panic(err)
			}
		})
		assert.LessOrEqual(t, n, 2.0, "%s: Go heap allocations per operation", op.name)
	}
	other, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, Device: a2a.DeviceOrdinal(1), MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16})
	require.NoError(t, err)
	foreign := a2a.NewTestStream(t, other.Device())
	_, err = c.On(foreign.Stream()).SendRecvHeads(x)
	require.ErrorIs(t, err, a2a.ErrStream, "a stream of another device")
	t.Logf("another device's stream: %v", err)
	_, err = c.SendRecvHeads(x)
	require.NoError(t, err, "the Comm is not broken by a refused stream")
	require.NoError(t, c.Sync())
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, c, x, dst))
	require.NoError(t, foreign.Close())
	require.NoError(t, other.Close())
	requireReleased(t, lib)
}

// TestFakeGroup makes single-process groups on the stub's devices: every
// rank's Comm runs operations, Sync and Close cover all ranks, and bad
// device lists are refused with nothing left allocated.
func TestFakeGroup(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	cfg := a2a.Config{MaxTokens: 64, HiddenDim: 4 * 64, DType: a2a.BFloat16}
	g, err := a2a.NewGroup(cfg, []int{0, 1, 0})
	require.NoError(t, err)
	require.Equal(t, 3, g.Size())
	assert.Nil(t, g.Comm(3))
	for r := range g.Size() {
		c := g.Comm(r)
		assert.Equal(t, r, c.Rank())
		assert.Equal(t, 3, c.WorldSize())
		require.NoError(t, c.SetRankTokens([]int{4, 0, 7}))
		x, err := c.Device().Alloc([4]int{1, []int{4, 0, 7}[r], 6, 64}, a2a.BFloat16)
		require.NoError(t, err)
		_, err = c.SendRecvHeads(x)
		require.NoError(t, err)
		require.NoError(t, c.Device().Free(x))
	}
	require.NoError(t, g.Sync())
	require.NoError(t, g.Close())
	requireReleased(t, lib)

	for _, devices := range [][]int{nil, {0, 1, 0, 1, 0, 1, 0, 1, 0}} {
		_, err := a2a.NewGroup(cfg, devices)
		assert.ErrorIs(t, err, a2a.ErrConfig, "%d devices", len(devices))
	}
	_, err = a2a.NewGroup(cfg, []int{0, 5})
	assert.Error(t, err, "a device the driver does not have")
	t.Logf("device 5 of 2: %v", err)
	requireReleased(t, lib)
}

// TestFakeGroupCloseRepeatedly makes, uses and closes groups with two
// ranks per device many times: the ranks close at once, and the last one
// of a device tears down what they share while the others drain what they
// left (a race once found on a GPU; under -race this test failed on
// the code before the fix within a few rounds).
func TestFakeGroupCloseRepeatedly(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	cfg := a2a.Config{MaxTokens: 64, HiddenDim: 4 * 64, DType: a2a.BFloat16}
	for i := range 50 {
		g, err := a2a.NewGroup(cfg, []int{0, 1, 0, 1})
		require.NoError(t, err)
		for r := range g.Size() {
			c := g.Comm(r)
			require.NoError(t, c.SetRankTokens([]int{4, 4, 4, 4}))
			x, err := c.Device().Alloc([4]int{1, 4, 8, 64}, a2a.BFloat16)
			require.NoError(t, err)
			_, err = c.AllGather(x)
			require.NoError(t, err)
			require.NoError(t, c.Device().Free(x)) // deferred: Comms are live
		}
		require.NoError(t, g.Close(), "round %d", i)
		requireReleased(t, lib)
	}
}

// TestFakeTestKernels runs the GPU tests' own kernels' helpers on the
// stub (which launches nothing): the module loads, both entries are found,
// each launch goes to the test's stream, and an empty range launches
// nothing.
func TestFakeTestKernels(t *testing.T) {
	lib := fakeDriver(t)
	c, x, dst := fakeComm(t, true, true)
	tk, err := a2a.LoadTestKernels(c.Device())
	require.NoError(t, err)
	ts := a2a.NewTestStream(t, c.Device())
	before := fakeCounters(t, lib).Launches
	require.NoError(t, tk.Fill(ts, x, 7))
	require.NoError(t, tk.Copy(ts, dst, x, x.Bytes()))
	require.NoError(t, tk.Copy(ts, dst, x, 0), "nothing to copy")
	assert.Equal(t, before+2, fakeCounters(t, lib).Launches)
	calls, err := fakecuda.ReadCalls(lib)
	require.NoError(t, err)
	assert.Equal(t, uint64(ts.Stream()), uint64(calls.Launch.Stream))
	assert.Equal(t, byte(a2a.Pattern(7, 3)), a2a.Pattern(7, 3)|1, "patterns are never zero")
	require.NoError(t, ts.Close())
	require.NoError(t, tk.Close())
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}

// TestFakeGroupBufferOutlivesItsOwner closes the ranks of a group one at
// a time: a rank's buffer, which its peers in the process write into
// (their goodbye included), stays allocated until the last Comm that maps
// it has closed, and its device's context with it (a GPU once lost its
// context when it did not).
func TestFakeGroupBufferOutlivesItsOwner(t *testing.T) {
	for _, devices := range [][]int{{0, 0}, {0, 1}} {
		t.Run(fmt.Sprint(devices), func(t *testing.T) {
			lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
			cfg := a2a.Config{MaxTokens: 64, HiddenDim: 4 * 64, DType: a2a.BFloat16}
			g, err := a2a.NewGroup(cfg, devices)
			require.NoError(t, err)
			both := fakeCounters(t, lib)
			require.NoError(t, g.Comm(0).Close())
			n := fakeCounters(t, lib)
			assert.Equal(t, both.DeviceAllocs, n.DeviceAllocs, "rank 0's buffer, mapped by rank 1, is kept")
			assert.Equal(t, both.DeviceBytes, n.DeviceBytes)
			if devices[1] != devices[0] {
				assert.Positive(t, n.ContextRetains, "device 0's context is kept for its buffer")
			}
			require.NoError(t, g.Comm(1).Close())
			requireReleased(t, lib)
		})
	}
}
