package a2a_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
)

// TestGroupRankClosesAfterTimeout: in a single-process group, rank 0 runs
// an operation rank 1 never joins, times out and closes (without waiting
// for rank 1's goodbye, as after any timeout); rank 1 then closes, and its
// goodbye writes into rank 0's buffer. That buffer must still be there:
// freed with rank 0's Close, the write killed the device's context (every
// later call failed with CUDA_ERROR_ILLEGAL_ADDRESS, as once seen on a GPU).
// The device must be usable afterwards, and a new group must work.
func TestGroupRankClosesAfterTimeout(t *testing.T) {
	info := requireGPU(t)
	for _, devices := range pairPlacements(info) {
		t.Run(fmt.Sprint(devices), func(t *testing.T) {
			// 64 MiB a data half: an allocation the driver unmaps when it is freed.
			cfg := a2a.Config{MaxTokens: 8192, HiddenDim: 32 * 128, DType: a2a.BFloat16, Timeout: 300 * time.Millisecond}
			g, err := a2a.NewGroup(cfg, devices)
			require.NoError(t, err)
			c0 := g.Comm(0)
			require.NoError(t, c0.SetRankTokens([]int{16, 16}))
			x, err := c0.Device().Alloc([4]int{1, 16, 32, 128}, a2a.BFloat16)
			require.NoError(t, err)
			_, err = c0.SendRecvHeads(x)
			require.NoError(t, err)
			var te *a2a.TimeoutError
			require.ErrorAs(t, c0.Sync(), &te, "rank 1 never joins")
			require.NoError(t, c0.Device().Free(x))
			t.Logf("rank 0's Close: %v", c0.Close())
			require.NoError(t, g.Comm(1).Close(), "rank 1's goodbye reaches rank 0's buffer")

			d, err := a2a.OpenDevice(devices[0])
			require.NoError(t, err, "the device's context survives")
			y, err := d.Alloc([4]int{1, 4, 4, 64}, a2a.BFloat16)
			require.NoError(t, err)
			require.NoError(t, d.Fill(y, 7))
			got, err := d.Download(y)
			require.NoError(t, err)
			require.Equal(t, byte(7), got[len(got)-1])
			require.NoError(t, d.Free(y))
			require.NoError(t, d.Close())
			checkGroup(t, devices)
		})
	}
}

// checkGroup runs one checked SendRecvHeads and GatherHeads on a fresh
// group on devices.
func checkGroup(t *testing.T, devices []int) {
	t.Helper()
	cs := groupCases(len(devices), a2a.BFloat16)[0]
	g := newTestGroup(t, devices, a2a.BFloat16, []check.Case{cs})
	require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return check.Run(c, cs, 9) }), "a new group, %v", cs)
}
