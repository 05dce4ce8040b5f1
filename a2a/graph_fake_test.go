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
// capture runs nothing, alternates the views' halves, replays as 3
// launches and then, 3 being odd, as 4 (a turn that moves nothing first),
// and bounds later token counts by the captured inputs until the graph is
// closed.
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

	require.NoError(t, g.Launch(ts.Stream()))
	assert.Equal(t, before+3, fakeCounters(t, lib).Launches, "the first replay: 3 operations")
	for i := range 2 {
		require.NoError(t, g.Launch(ts.Stream()))
		assert.Equal(t, before+3+int64(4*(i+1)), fakeCounters(t, lib).Launches, "replay %d: a turn that moves nothing, then 3 operations", i+1)
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

// TestFakeGraphTurns: after every replay the Comm's writable region
// (Buffer) is the view of its last captured operation, whatever came
// before: an odd graph replayed again and again, an odd or even graph
// after an operation outside it. Launch puts the operation that moves
// nothing before a replay only where the halves would otherwise not line
// up, and never with a single buffer, whose operations meet at the start.
func TestFakeGraphTurns(t *testing.T) {
	lib := fakeDriver(t)
	c, x, dst := fakeComm(t, true, true)
	ts := a2a.NewTestStream(t, c.Device())
	on := c.On(ts.Stream())
	capture := func(n int) (*a2a.Graph, a2a.Tensor) {
		var last a2a.Tensor
		g, err := a2a.CaptureGraph(ts.Stream(), func() error {
			for range n {
				var err error
				if last, err = on.AllGather(x); err != nil {
					return err
				}
			}
			return nil
		}, c)
		require.NoError(t, err)
		return g, last
	}
	replay := func(g *a2a.Graph, view a2a.Tensor, launches int64, what string) {
		t.Helper()
		before := fakeCounters(t, lib).Launches
		require.NoError(t, g.Launch(ts.Stream()))
		assert.Equal(t, launches, fakeCounters(t, lib).Launches-before, "%s: launches", what)
		assert.Equal(t, view.Ptr, c.Buffer().Ptr, "%s: the last captured view is the Comm's last", what)
	}
	odd, oddView := capture(1)
	even, evenView := capture(2)
	replay(odd, oddView, 1, "an odd graph's first replay")
	replay(odd, oddView, 2, "its second")
	replay(odd, oddView, 2, "its third")
	replay(even, evenView, 3, "an even graph after an odd number of launches (1+2+2)")
	replay(even, evenView, 2, "its second")
	_, err := c.AllGather(x)
	require.NoError(t, err)
	replay(even, evenView, 3, "an even graph after an operation outside it")
	replay(odd, oddView, 1, "an odd graph where the halves line up")
	require.NoError(t, c.Sync())
	require.NoError(t, errors.Join(odd.Close(), even.Close()))
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, c, x, dst))

	single, x, dst := fakeComm(t, true, true, withSingleBuffer(true))
	ts = a2a.NewTestStream(t, single.Device())
	g, err := a2a.CaptureGraph(ts.Stream(), func() error { _, err := single.On(ts.Stream()).AllGather(x); return err }, single)
	require.NoError(t, err)
	for i := range 3 {
		before := fakeCounters(t, lib).Launches
		require.NoError(t, g.Launch(ts.Stream()))
		assert.Equal(t, int64(2), fakeCounters(t, lib).Launches-before, "single buffer, replay %d: the start barrier and the operation", i)
	}
	require.NoError(t, single.Sync())
	require.NoError(t, g.Close())
	require.NoError(t, ts.Close())
	require.NoError(t, closeFake(t, single, x, dst))
	requireReleased(t, lib)
}
