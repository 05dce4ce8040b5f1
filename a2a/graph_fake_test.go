package a2a_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// TestFakeCaptureGraph captures the three operations into a graph on the
// stub (whose captures record launches and whose graphs queue them): the
// capture runs nothing, gets a padding operation (3 is odd), alternates
// the views' halves, replays as 4 launches, and bounds later token counts
// by the captured inputs until the graph is closed.
func TestFakeCaptureGraph(t *testing.T) {
	lib := fakeDriver(t)
	c, x, dst := fakeComm(t, true, true)
	ts := a2a.NewTestStream(t, c.Device())
	on := c.On(ts.Stream())
	before := fakeCounters(t, lib).Launches
	var q, o, a a2a.Tensor
	g, err := a2a.CaptureGraph(ts.Stream(), func() error {
		var err error
		if q, err = on.SendRecvHeads(x); err != nil {
			return err
		}
		_, err = c.SendRecvHeads(x)
		require.ErrorIs(t, err, a2a.ErrConfig, "an operation on the Comm's own stream during the capture")
		require.ErrorIs(t, on.AllGatherInto(dst, x), a2a.ErrNotSupported, "an Into form captured")
		if o, err = on.GatherHeads(x); err != nil {
			return err
		}
		a, err = on.AllGather(x)
		return err
	}, c)
	require.NoError(t, err)
	assert.Equal(t, before, fakeCounters(t, lib).Launches, "a capture runs nothing")
	assert.NotEqual(t, q.Ptr, o.Ptr, "consecutive operations alternate halves")
	assert.Equal(t, q.Ptr, a.Ptr)

	for i := range 3 {
		require.NoError(t, g.Launch(ts.Stream()))
		assert.Equal(t, before+int64(4*(i+1)), fakeCounters(t, lib).Launches, "replay %d: 3 operations and the padding", i)
	}
	require.NoError(t, c.Sync())

	require.ErrorIs(t, c.SetRankTokens([]int{9}), a2a.ErrCapacity, "more tokens than the captured input holds")
	require.NoError(t, c.SetRankTokens([]int{5}), "fewer")
	require.NoError(t, g.Launch(ts.Stream()))
	require.NoError(t, c.Sync())
	require.NoError(t, g.Close())
	require.NoError(t, g.Close(), "twice")
	require.ErrorIs(t, g.Launch(ts.Stream()), a2a.ErrClosed)
	require.NoError(t, c.SetRankTokens([]int{9}), "no captured operation bounds the counts once its graph is closed")

	// A failed capture leaves the Comm as it was.
	require.NoError(t, c.SetRankTokens([]int{8}))
	boom := errors.New("boom")
	_, err = a2a.CaptureGraph(ts.Stream(), func() error {
		if _, err := on.SendRecvHeads(x); err != nil {
			return err
		}
		return boom
	}, c)
	require.ErrorIs(t, err, boom)
	require.NoError(t, c.SetRankTokens([]int{9}), "the failed capture's operation bounds nothing")
	require.NoError(t, c.SetRankTokens([]int{8}))
	_, err = c.SendRecvHeads(x)
	require.NoError(t, err, "the Comm works after a failed capture")

	_, err = a2a.CaptureGraph(ts.Stream(), func() error { return nil })
	require.ErrorIs(t, err, a2a.ErrConfig, "no Comms")

	// A graph may outlive its Comm: it holds a context reference of its own.
	late, err := a2a.CaptureGraph(ts.Stream(), func() error { _, err := on.AllGather(x); return err }, c)
	require.NoError(t, err)
	require.NoError(t, c.Sync())
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, c, x, dst))
	require.ErrorIs(t, late.Launch(0), a2a.ErrClosed, "replaying a closed Comm's graph")
	require.NoError(t, late.Close(), "closing a graph after its Comm")
	requireReleased(t, lib)
}
