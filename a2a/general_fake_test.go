package a2a_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// TestFakeGeneralOperations runs the packed, head-allgather and strided
// forms on the stub: each launches one kernel, allocation-free but for the
// caller's slices; bad requests fail with the sentinel, enqueue nothing
// and leave the Comm usable.
func TestFakeGeneralOperations(t *testing.T) {
	lib := fakeDriver(t)
	c, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16, MaxTensors: 3})
	require.NoError(t, err)
	require.NoError(t, c.Connect([][]byte{c.Handle()}))
	require.NoError(t, c.SetRankTokens([]int{8}))
	dev := c.Device()
	fused, err := dev.Alloc([4]int{1, 8, 3 * 32, 128}, a2a.BFloat16)
	require.NoError(t, err)
	qkv := make([]a2a.Tensor, 3)
	dsts := make([]a2a.Tensor, 3)
	for k := range qkv {
		qkv[k] = a2a.Tensor{Ptr: fused.Ptr + uintptr(k*32*128*2), Shape: [4]int{1, 8, 32, 128}, DType: a2a.BFloat16, RowStride: 3 * 32 * 128}
		dsts[k], err = dev.Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
		require.NoError(t, err)
	}
	views := make([]a2a.Tensor, 3)
	ops := []fakeOp{
		{"SendRecvHeadsPacked", func() error { return c.SendRecvHeadsPacked(views, qkv) }},
		{"SendRecvHeadsPackedInto", func() error { return c.SendRecvHeadsPackedInto(dsts, qkv) }},
		{"GatherHeadsPacked", func() error { return c.GatherHeadsPacked(32, views, qkv) }},
		{"GatherHeadsPackedInto", func() error { return c.GatherHeadsPackedInto(0, dsts, qkv) }},
		{"HeadAllGather", func() error { _, err := c.HeadAllGather(32, dsts[0]); return err }},
		{"HeadAllGatherInto", func() error { return c.HeadAllGatherInto(0, dsts[1], qkv[2]) }},
		{"SendRecvHeads strided", func() error { _, err := c.SendRecvHeads(qkv[1]); return err }},
	}
	for _, op := range ops {
		_, err := c.AllGather(dsts[2]) // another kernel, so the launch below shows
		require.NoError(t, err)
		before, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		require.NoError(t, op.run(), op.name)
		after, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		assert.NotEqual(t, before.Launch, after.Launch, "%s launched", op.name)
		if fakecuda.RaceEnabled() {
			continue
		}
		n := testing.AllocsPerRun(100, func() {
			if err := op.run(); err != nil {
				panic(err)
			}
		})
		assert.LessOrEqual(t, n, 2.0, "%s: Go heap allocations per operation", op.name)
	}
	assert.Equal(t, [4]int{1, 8, 32, 128}, views[2].Shape)
	assert.Greater(t, views[2].Ptr, views[1].Ptr)
	assert.Greater(t, views[1].Ptr, views[0].Ptr)

	bad := []struct {
		name string
		run  func() error
		want error
	}{
		{"five tensors", func() error { return c.SendRecvHeadsPacked(make([]a2a.Tensor, 5), make([]a2a.Tensor, 5)) }, a2a.ErrShape},
		{"no tensors", func() error { return c.SendRecvHeadsPacked(nil, nil) }, a2a.ErrShape},
		{"views of another length", func() error { return c.SendRecvHeadsPacked(views[:2], qkv) }, a2a.ErrShape},
		{"heads not the rank's share", func() error { return c.GatherHeadsPacked(33, views[:1], qkv[:1]) }, a2a.ErrShape},
		{"upload into a strided view", func() error { return dev.Upload(qkv[0], make([]byte, qkv[0].Bytes())) }, a2a.ErrNotSupported},
	}
	for _, b := range bad {
		before, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		err = b.run()
		assert.ErrorIs(t, err, b.want, b.name)
		t.Logf("%s: %v", b.name, err)
		after, err := fakecuda.ReadCalls(lib)
		require.NoError(t, err)
		assert.Equal(t, before.Launch, after.Launch, "%s: nothing launched", b.name)
	}
	require.NoError(t, c.SendRecvHeadsPacked(views, qkv), "the Comm is usable after refusals")
	require.NoError(t, c.Sync())

	// Into strided outputs: the stub runs no kernel, so each output is
	// what its region of the buffer held; tensors 0 and 1 of the fused
	// tensor get it row by row, and tensor 2's columns stay as they were.
	require.NoError(t, dev.Fill(c.Buffer(), 0x77)) // the half the operation after next writes
	require.NoError(t, dev.Fill(fused, 0))
	require.NoError(t, c.SendRecvHeadsPacked(views[:2], dsts[:2]))
	require.NoError(t, c.Sync())
	require.NoError(t, c.SendRecvHeadsPackedInto(qkv[:2], dsts[:2]))
	require.NoError(t, c.Sync())
	got, err := dev.Download(fused)
	require.NoError(t, err)
	row := 32 * 128 * 2
	for i := 0; i < 8; i++ {
		for k, want := range []byte{0x77, 0x77, 0} {
			b := got[(3*i+k)*row : (3*i+k+1)*row]
			require.Equal(t, want, b[0], "token %d, tensor %d", i, k)
			require.Equal(t, want, b[row-1], "token %d, tensor %d", i, k)
		}
	}
	for _, d := range dsts {
		require.NoError(t, dev.Free(d))
	}
	require.NoError(t, dev.Free(fused))
	require.NoError(t, c.Close())
	requireReleased(t, lib)
}

// TestFakeMaxTensors: a buffer sized for one output refuses a packed
// operation of two (ErrCapacity, nothing launched), and MaxTensors 2 makes
// room for both.
func TestFakeMaxTensors(t *testing.T) {
	fakeDriver(t)
	for _, n := range []int{0, 2} {
		c, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 4 * 64, DType: a2a.BFloat16, MaxTensors: n})
		require.NoError(t, err)
		require.NoError(t, c.Connect([][]byte{c.Handle()}))
		require.NoError(t, c.SetRankTokens([]int{8}))
		x, err := c.Device().Alloc([4]int{1, 8, 4, 64}, a2a.BFloat16)
		require.NoError(t, err)
		views := make([]a2a.Tensor, 2)
		err = c.SendRecvHeadsPacked(views, []a2a.Tensor{x, x})
		if n == 0 {
			assert.ErrorIs(t, err, a2a.ErrCapacity)
			t.Logf("MaxTensors 0: %v", err)
		} else {
			assert.NoError(t, err)
		}
		require.NoError(t, c.Device().Free(x))
		require.NoError(t, c.Close())
	}
	_, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16, MaxTensors: 5})
	assert.ErrorIs(t, err, a2a.ErrConfig)
}

// TestFakeMissingEntry: kernels that lack the farewell, in the machine
// code and in the PTX (which the first Comm falls back to), fail New with
// the driver's error, and leave nothing allocated.
func TestFakeMissingEntry(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvMissingFuncs+"=ulysses_close")
	_, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "loading kernels")
	assert.Contains(t, err.Error(), "ulysses_close")
	t.Logf("%v", err)
	requireReleased(t, lib)
}
