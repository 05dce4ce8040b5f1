package a2a_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// ncclPair is a world of two over the stub NCCL with timeout d, token
// counts set, and each rank's input of SendRecvHeads (freeInputs frees
// them).
func ncclPair(t *testing.T, d time.Duration) ([]*a2a.Comm, []a2a.Tensor) {
	t.Helper()
	comms := ncclGroup(t, a2a.Config{MaxTokens: 16, HiddenDim: 4 * 8, DType: a2a.BFloat16, Timeout: d}, 2)
	xs := make([]a2a.Tensor, 2)
	for r, c := range comms {
		require.NoError(t, c.SetRankTokens([]int{3, 5}))
		x, err := c.Device().Alloc([4]int{1, 3 + 2*r, 4, 8}, a2a.BFloat16)
		require.NoError(t, err)
		xs[r] = x
	}
	return comms, xs
}

func freeInputs(t *testing.T, comms []*a2a.Comm, xs []a2a.Tensor) {
	t.Helper()
	for r, c := range comms {
		require.NoError(t, c.Device().Free(xs[r]))
	}
}

// launches are the NCCL transport's two launches, each with the
// communicators a rank aborts when its transport fails: the non-blocking
// one, and with the blocking launch the blocking one split from it too.
var launches = []struct {
	launch nccltransport.Launch
	aborts int64 // per rank that failed
}{{nccltransport.LaunchAsync, 1}, {nccltransport.LaunchBlocking, 2}}

// requireNCCLCounts checks the stub's counts of live communicators and
// aborts.
func requireNCCLCounts(t *testing.T, lib string, live, aborts int64) {
	t.Helper()
	n := ncclCounts(t, lib)
	assert.Equal(t, live, n.LiveComms, "live communicators")
	assert.Equal(t, aborts, n.Aborts, "aborts")
}

// TestFakeNCCLTimeout: a transfer that never completes (the stub pairs
// nothing; and, apart, a peer that never enqueues) ends Sync after the
// timeout with a *TimeoutError, the communicator aborted and the Comm
// broken; Close still releases everything.
func TestFakeNCCLTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		env   []string
		ranks int // that enqueue the operation
	}{
		{"hang", []string{fakenccl.EnvP2PHang + "=1"}, 2},
		{"peer never comes", nil, 1},
	} {
		for _, l := range launches {
			t.Run(tc.name+"/"+l.launch.String(), func(t *testing.T) {
				timeoutCase(t, tc.env, tc.ranks, l.launch, l.aborts)
			})
		}
	}
}

// timeoutCase is a case of TestFakeNCCLTimeout: ranks of the two
// enqueue, with launch l, and each rank that fails aborts aborts
// communicators.
func timeoutCase(t *testing.T, env []string, ranks int, l nccltransport.Launch, aborts int64) {
	lib := fakeDriver(t)
	nlib := fakeNCCL(t, env...)
	a2a.UseNCCLTuning(t, nccltransport.Tuning{Launch: l})
	const timeout = 100 * time.Millisecond
	comms, xs := ncclPair(t, timeout)
	// The group cannot be launched while its peer's half never comes
	// (NCCL connects to the peer first, with either launch): the
	// operation's own call waits for it, bounded.
	start := time.Now()
	_, err := comms[0].SendRecvHeads(xs[0])
	took := time.Since(start)
	var te *a2a.TimeoutError
	require.ErrorAs(t, err, &te)
	require.ErrorIs(t, err, a2a.ErrTimeout)
	assert.Equal(t, 0, te.Rank)
	assert.Equal(t, -1, te.Peer, "NCCL does not say which peer")
	assert.Equal(t, timeout, te.Timeout)
	assert.Contains(t, err.Error(), "over NCCL (aborted the communicator)")
	assert.GreaterOrEqual(t, took, timeout)
	assert.Less(t, took, timeout+2*time.Second, "bounded")
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	requireNCCLCounts(t, nlib, 1, aborts)
	_, err = comms[0].SendRecvHeads(xs[0])
	require.ErrorIs(t, err, a2a.ErrBroken)
	require.ErrorIs(t, err, a2a.ErrTimeout)
	require.ErrorIs(t, comms[0].Sync(), a2a.ErrBroken)
	if ranks == 2 {
		_, err = comms[1].SendRecvHeads(xs[1])
		require.ErrorAs(t, err, &te, "rank 1 times out too")
	}
	freeInputs(t, comms, xs)
	require.NoError(t, comms[0].Close(), "Close after the failure was reported")
	require.NoError(t, errors.Join(comms[1].Close()))
	requireNCCLCounts(t, nlib, 0, int64(ranks)*aborts)
	requireReleased(t, lib)
}

// TestFakeNCCLCloseDuringLaunch: Close while an operation waits for its
// group to be launched (a peer that never comes) returns once that wait
// has ended, bounded by the timeout; the operation fails with a
// *TimeoutError. (A Sync waiting for a launched operation that never
// completes, and Close or a context ending it, need a device: the GPU
// test TestNCCLStall.)
func TestFakeNCCLCloseDuringLaunch(t *testing.T) {
	for _, l := range launches {
		t.Run(l.launch.String(), func(t *testing.T) { closeDuringLaunch(t, l.launch, l.aborts) })
	}
}

func closeDuringLaunch(t *testing.T, l nccltransport.Launch, aborts int64) {
	lib := fakeDriver(t)
	nlib := fakeNCCL(t, fakenccl.EnvP2PHang+"=1")
	a2a.UseNCCLTuning(t, nccltransport.Tuning{Launch: l})
	const timeout = 300 * time.Millisecond
	comms, xs := ncclPair(t, timeout)
	keep, err := a2a.OpenDevice(comms[0].Device().Info().Ordinal) // holds the context for xs[0] past Close
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := comms[0].SendRecvHeads(xs[0])
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	require.NoError(t, comms[0].Close())
	took := time.Since(start)
	assert.Less(t, took, timeout+2*time.Second, "bounded")
	select {
	case err := <-done:
		require.ErrorIs(t, err, a2a.ErrTimeout)
		t.Logf("Close after %v, the operation: %v", took.Round(time.Millisecond), err)
	case <-time.After(10 * time.Second):
		t.Fatal("the operation still waits after Close")
	}
	require.NoError(t, keep.Free(xs[0]))
	require.NoError(t, keep.Close())
	require.NoError(t, comms[1].Device().Free(xs[1]))
	require.NoError(t, comms[1].Close())
	requireNCCLCounts(t, nlib, 0, aborts)
	requireReleased(t, lib)
}

// TestFakeNCCLRefusals: an operation captured into a CUDA graph is
// refused (ErrNotSupported) and leaves the Comm usable; ConnectNCCL where
// NCCL cannot be loaded fails with ErrNoNCCL and the dynamic loader's
// text, leaving the Comm unconnected and closable; Connect of a group
// that asked for NCCL is refused (ErrConfig).
func TestFakeNCCLRefusals(t *testing.T) {
	lib := fakeDriver(t)
	fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
	comms := ncclGroup(t, a2a.Config{MaxTokens: 16, HiddenDim: 4 * 8, DType: a2a.BFloat16}, 1)
	c := comms[0]
	require.NoError(t, c.SetRankTokens([]int{4}))
	x, err := c.Device().Alloc([4]int{1, 4, 4, 8}, a2a.BFloat16)
	require.NoError(t, err)
	ts := a2a.NewTestStream(t, c.Device())
	_, err = a2a.CaptureGraph(ts.Stream(), func() error {
		_, err := c.On(ts.Stream()).AllGather(x)
		return err
	}, c)
	require.ErrorIs(t, err, a2a.ErrNotSupported)
	t.Logf("capture: %v", err)
	_, err = c.AllGather(x)
	require.NoError(t, err, "the Comm is usable after the refusal")
	require.NoError(t, c.Sync())
	require.NoError(t, c.Device().Free(x))
	require.NoError(t, ts.Close())
	require.NoError(t, c.Close())

	a2a.UseNCCL(t, "/nonexistent/libnccl.so.2")
	cfg := a2a.Config{WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16, Transport: a2a.TransportNCCL}
	c, err = a2a.New(cfg)
	require.NoError(t, err, "New needs no NCCL")
	err = c.Connect([][]byte{c.Handle()})
	require.ErrorIs(t, err, a2a.ErrConfig)
	require.ErrorContains(t, err, "ConnectNCCL")
	err = c.ConnectNCCL([][]byte{c.Handle()}, a2a.NCCLID{})
	require.ErrorIs(t, err, a2a.ErrNoNCCL)
	require.ErrorContains(t, err, "/nonexistent/libnccl.so.2")
	require.NoError(t, c.SetRankTokens([]int{1}))
	y, err := c.Device().Alloc([4]int{1, 1, 4, 16}, a2a.BFloat16)
	require.NoError(t, err)
	_, err = c.AllGather(y)
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	require.NoError(t, c.Device().Free(y))
	require.NoError(t, c.Close())
	requireReleased(t, lib)
}
