package a2a_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// Once a Device is closed, by Close or with its Comm, every helper
// returns an error matching ErrClosed that says so, where Free returned
// the driver's CUDA_ERROR_CONTEXT_IS_DESTROYED; Close stays nil and Info
// still describes the device. On the stub driver.
func TestFakeDeviceAfterClose(t *testing.T) {
	lib := fakeDriver(t)
	d, err := a2a.OpenDevice(1)
	require.NoError(t, err)
	tt, err := d.Alloc([4]int{1, 2, 3, 4}, a2a.BFloat16)
	require.NoError(t, err)
	info := d.Info()
	require.NoError(t, d.Free(tt))
	require.NoError(t, d.Close())

	err = d.Free(tt)
	require.ErrorIs(t, err, a2a.ErrClosed)
	assert.Equal(t, "a2a: Free on a closed Device (closed by Close, or with its Comm): its context is released", err.Error())
	for name, out := range callEvery(t, d) {
		switch name {
		case "Close":
			assert.Nil(t, out[0].Interface(), "Close again")
		case "Info":
			assert.Equal(t, info, out[0].Interface(), "Info")
		default:
			err, _ := out[len(out)-1].Interface().(error)
			assert.ErrorIs(t, err, a2a.ErrClosed, "%s", name)
			if err != nil {
				assert.NotContains(t, err.Error(), "CUDA_ERROR", "%s", name)
				assert.True(t, strings.HasPrefix(err.Error(), "a2a: "+name+" on a closed Device"), "%s: %v", name, err)
			}
		}
	}

	// A Comm's Device closes with the Comm.
	c, x, dst := fakeComm(t, true, true)
	dev := c.Device()
	require.NoError(t, closeFake(t, c, x, dst))
	err = dev.Free(x)
	require.ErrorIs(t, err, a2a.ErrClosed, "Free after the Comm closed")
	assert.NotContains(t, err.Error(), "CONTEXT_IS_DESTROYED")
	_, err = dev.Alloc(x.Shape, a2a.BFloat16)
	require.ErrorIs(t, err, a2a.ErrClosed, "Alloc after the Comm closed")
	requireReleased(t, lib)
}

// SetRankTokens refuses a negative count, one over 2^30 and a wrong
// number of counts with an error naming the rank and the count and
// matching ErrTokens (where a negative count read "token counts
// disagree"), and changes nothing: the Comm runs on with good counts.
func TestFakeSetRankTokensBadCounts(t *testing.T) {
	lib := fakeDriver(t)
	c, x, dst := fakeComm(t, true, false)
	for _, tc := range []struct {
		counts []int
		want   string
	}{
		{[]int{-1}, "a2a: SetRankTokens: rank 0's token count -1 is negative: wrong token counts"},
		{[]int{1<<30 + 1}, "a2a: SetRankTokens: rank 0's token count 1073741825 is over 2^30, the most the kernels index: wrong token counts"},
		{[]int{8, 8}, "a2a: SetRankTokens: 2 token counts for world size 1 (one per rank): wrong token counts"},
	} {
		err := c.SetRankTokens(tc.counts)
		require.ErrorIs(t, err, a2a.ErrTokens, "%v", tc.counts)
		assert.Equal(t, tc.want, err.Error(), "%v", tc.counts)
		_, err = c.SendRecvHeads(x)
		require.ErrorIs(t, err, a2a.ErrTokensNotSet, "%v: the refused counts were not kept", tc.counts)
	}
	require.NoError(t, c.SetRankTokens([]int{8}))
	_, err := c.SendRecvHeads(x)
	require.NoError(t, err)
	require.NoError(t, c.Sync())
	require.NoError(t, closeFake(t, c, x, dst))
	requireReleased(t, lib)
}
