package a2a_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// blockingLaunch sets Tuning.Launch to LaunchBlocking (and Self) for the
// transports made until the test ends.
func blockingLaunch(t *testing.T, self bool) {
	t.Helper()
	a2a.UseNCCLTuning(t, nccltransport.Tuning{Self: self, Launch: nccltransport.LaunchBlocking})
}

// TestFakeNCCLBlockingLaunch: with LaunchBlocking every rank splits a
// blocking communicator off at its first operation, every send goes
// through it (the parent sends nothing), every case of check.Run matches
// a2a/ref, and Close releases both communicators of every rank with
// nothing aborted.
func TestFakeNCCLBlockingLaunch(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	for _, tc := range []struct {
		world int
		self  bool
	}{{1, true}, {2, false}, {2, true}} {
		nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
		blockingLaunch(t, tc.self)
		cases := ncclCases(tc.world, a2a.BFloat16)
		maxTokens, hidden := check.Capacity(cases...)
		comms := ncclGroup(t, a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: a2a.BFloat16, MaxTensors: 3}, tc.world)
		for i, cs := range cases {
			err := runRanks(comms, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(190+i)) })
			require.NoError(t, err, "%v, %+v", cs, tc)
		}
		n := ncclCounts(t, nlib)
		assert.Equal(t, int64(tc.world), n.Splits, "%+v", tc)
		assert.Equal(t, int64(2*tc.world), n.LiveComms, "%+v", tc)
		assert.Equal(t, int64(tc.world), n.LiveBlocking, "%+v", tc)
		assert.Greater(t, n.BlockingSends, int64(tc.world*tc.world), "%+v: more than the connecting group's", tc)
		assert.Equal(t, n.Sends, n.BlockingSends, "%+v: every send on the blocking communicator", tc)
		require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
		n = ncclCounts(t, nlib)
		assert.Equal(t, fakenccl.Counts{Sends: n.Sends, Recvs: n.Sends, Splits: int64(tc.world), BlockingSends: n.Sends}, n, "%+v", tc)
	}
	requireReleased(t, lib)
}

// TestFakeNCCLBlockingTimeout: under LaunchBlocking nothing waits past
// the timeout: a peer that never reaches its first operation (the split
// waits for it), a connecting group whose peer's half never comes, and a
// blocking launch that never returns after the first operation (the
// watchdog aborts both communicators from another goroutine) each end
// the operation with a *TimeoutError within its bound; every
// communicator is released by Close and the device stays usable.
func TestFakeNCCLBlockingTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ranks int // that enqueue
		warm  bool
		env   []string // set after the first (warm) operation, if any
	}{
		{"split peer never comes", 1, false, nil},
		{"connecting group hangs", 2, false, []string{fakenccl.EnvP2PHang + "=1"}},
		{"launch hangs", 2, true, []string{fakenccl.EnvP2PHang + "=1", fakenccl.EnvBlockingWaitAll + "=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := fakeDriver(t)
			nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
			blockingLaunch(t, false)
			const timeout = 150 * time.Millisecond
			comms, xs := ncclPair(t, timeout)
			if tc.warm {
				require.NoError(t, runRanks(comms, func(c *a2a.Comm) error {
					_, err := c.SendRecvHeads(xs[c.Rank()])
					if err == nil {
						err = c.Sync()
					}
					return err
				}))
			}
			for _, kv := range tc.env {
				k, v, _ := cutEnv(kv)
				t.Setenv(k, v)
			}
			start := time.Now()
			err := runRanks(comms[:tc.ranks], func(c *a2a.Comm) error {
				_, err := c.SendRecvHeads(xs[c.Rank()])
				if err == nil {
					err = c.Sync()
				}
				return err
			})
			took := time.Since(start)
			var te *a2a.TimeoutError
			require.ErrorAs(t, err, &te)
			require.ErrorIs(t, err, a2a.ErrTimeout)
			assert.Equal(t, timeout, te.Timeout)
			assert.GreaterOrEqual(t, took, timeout)
			assert.Less(t, took, timeout+2*time.Second, "bounded")
			t.Logf("after %v: %v", took.Round(time.Millisecond), err)
			n := ncclCounts(t, nlib)
			assert.Equal(t, int64(2*tc.ranks), n.Aborts, "both communicators of every rank that enqueued aborted")
			_, err = comms[0].SendRecvHeads(xs[0])
			require.ErrorIs(t, err, a2a.ErrBroken)
			freeInputs(t, comms, xs)
			require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
			n = ncclCounts(t, nlib)
			assert.Zero(t, n.LiveComms)
			assert.Zero(t, n.LiveBlocking)
			requireReleased(t, lib)
		})
	}
}

// TestFakeNCCLBlockingRefused: LaunchBlocking where the loaded NCCL
// lacks ncclCommSplit (before 2.18) fails ConnectNCCL with
// ErrNotSupported, naming the call, and leaves the Comm closable.
func TestFakeNCCLBlockingRefused(t *testing.T) {
	lib := fakeDriver(t)
	nlib := fakeNCCL(t, fakenccl.EnvVersion+"=21703")
	blockingLaunch(t, true)
	comms, handles := newRanks(t, a2a.Config{MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16, Transport: a2a.TransportNCCL}, 1)
	id, err := a2a.NewNCCLID()
	require.NoError(t, err)
	err = comms[0].ConnectNCCL(handles, id)
	require.ErrorIs(t, err, a2a.ErrNotSupported)
	require.ErrorContains(t, err, "ncclCommSplit")
	t.Logf("refused: %v", err)
	require.NoError(t, comms[0].Close())
	assert.Zero(t, ncclCounts(t, nlib).LiveComms)
	requireReleased(t, lib)
}

// TestFakeNCCLLaunchAuto: the transport as users get it (the zero
// Tuning's launch) launches on a blocking communicator where NCCL can
// split (2.28 here) and on the non-blocking one before 2.18, and is
// correct either way.
func TestFakeNCCLLaunchAuto(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	for _, tc := range []struct {
		version string
		splits  int64
	}{{"22809", 2}, {"21703", 0}} {
		nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000", fakenccl.EnvVersion+"="+tc.version) // with the zero Tuning
		cases := ncclCases(2, a2a.BFloat16)[:2]
		maxTokens, hidden := check.Capacity(cases...)
		comms := ncclGroup(t, a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: a2a.BFloat16, MaxTensors: 3}, 2)
		for i, cs := range cases {
			err := runRanks(comms, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(290+i)) })
			require.NoError(t, err, "NCCL %s: %v", tc.version, cs)
		}
		n := ncclCounts(t, nlib)
		assert.Equal(t, tc.splits, n.Splits, "NCCL %s", tc.version)
		if tc.splits > 0 {
			assert.Equal(t, n.Sends, n.BlockingSends, "every send on the blocking communicator")
		} else {
			assert.Zero(t, n.BlockingSends)
		}
		require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
		assert.Zero(t, ncclCounts(t, nlib).LiveComms)
	}
	requireReleased(t, lib)
}
