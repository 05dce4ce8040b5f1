package nccl

// Tests against the stub driver (internal/transport/transporttest) and
// the stub NCCL (internal/fakenccl): the driver's copies and NCCL's
// sends and receives move host memory, so every byte an operation moves
// lands for real, through NCCL's groups, the staging and the copies of a
// rank's own part.

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/testutil"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/internal/transport/transporttest"
	"github.com/ulysses-go/ulysses/ptx"
)

// group is world NCCL transports on one stub device, over one stub NCCL,
// connected with one unique id.
type group struct {
	d     *transporttest.Device
	nccl  string // the stub NCCL's path, for fakenccl.ReadCounts
	ranks []*transporttest.Rank
	ts    []*Transport
}

// newGroup makes and connects the group with tuning, data halves of
// dataBytes, each rank's timeout, and env ("KEY=value": FAKECUDA_* and
// FAKENCCL_* settings); the test's end releases it. Kernels are done at
// once (FAKECUDA_KERNELS_DONE): the transport's waits poll the stream.
func newGroup(t *testing.T, world int, tuning Tuning, dataBytes int64, timeout time.Duration, env ...string) *group {
	t.Helper()
	g := &group{d: transporttest.NewDevice(t, append(env, fakecuda.EnvKernelsDone+"=1")...), nccl: testutil.FakeNCCL(t)}
	lib, err := binding.LoadLibrary(g.nccl)
	require.NoError(t, err)
	id, err := lib.UniqueID()
	require.NoError(t, err)
	SetTuning(tuning)
	t.Cleanup(func() { SetTuning(Tuning{}) })
	for r := range world {
		rk := g.d.NewRank(t, r, world, dataBytes)
		rk.Timeout = timeout
		tr := New(rk.Env, lib, id)
		t.Cleanup(tr.Release)
		g.ranks, g.ts = append(g.ranks, rk), append(g.ts, tr)
	}
	for r, tr := range g.ts {
		require.NoError(t, tr.Connect(transporttest.Handles(g.ranks)), "rank %d", r)
	}
	return g
}

// each runs f(rank) on every rank at once, a goroutine each (a group's
// ranks meet in NCCL), and returns their errors by rank.
func (g *group) each(f func(r int) error) []error {
	errs := make([]error, len(g.ts))
	var wg sync.WaitGroup
	for r := range g.ts {
		wg.Go(func() { errs[r] = f(r) })
	}
	wg.Wait()
	return errs
}

// counts reads the stub NCCL's counts.
func (g *group) counts(t *testing.T) fakenccl.Counts {
	n, err := fakenccl.ReadCounts(g.nccl)
	require.NoError(t, err)
	return n
}

// Every operation's bytes reach every rank's data half through NCCL, with
// either launch, even and uneven heads and a rank without tokens: sends
// from a side with gaps packed first, receives into one unpacked after,
// a rank's own part copied. Each rank enqueues and waits in a goroutine
// of its own; the stub pairs each send with its receive.
func TestEnqueueMovesBytes(t *testing.T) {
	for _, launch := range []Launch{LaunchAsync, LaunchBlocking} {
		for _, c := range []struct {
			counts []int
			H      int
		}{{[]int{3, 5}, 4}, {[]int{0, 4, 2}, 7}} {
			t.Run(fmt.Sprintf("%v/%v/h%d", launch, c.counts, c.H), func(t *testing.T) {
				g := newGroup(t, len(c.counts), Tuning{Launch: launch}, 1<<16, 5*time.Second, fakenccl.EnvP2PWait+"=20000")
				moves(t, g, transporttest.NewCase(c.counts, 2, c.H, 8))
				n := g.counts(t)
				assert.Positive(t, n.Sends)
				assert.Equal(t, n.Sends, n.Recvs)
				assert.Zero(t, n.Queued, "every send met its receive")
			})
		}
	}
}

// moves is TestEnqueueMovesBytes of one case on g: every operation,
// both data halves.
func moves(t *testing.T, g *group, c transporttest.Case) {
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather, ptx.OpHeadAllGather} {
		for half := range uint32(2) {
			outs := make([][]byte, len(g.ts))
			errs := g.each(func(r int) error {
				var p plan.Plan
				p, outs[r] = c.Plan(t, g.d, g.ranks[r], g.ts[r], op, half)
				if err := g.ts[r].Enqueue(p, transport.LaunchSpec{Stream: g.ranks[r].Stream, Half: half}); err != nil {
					return err
				}
				return g.ts[r].Wait(false, 0)
			})
			for r, rk := range g.ranks {
				require.NoError(t, errs[r], "%s, half %d, rank %d", op, half, r)
				require.NoError(t, g.ts[r].Failure())
				assert.Equal(t, outs[r], g.d.Output(t, rk, half, len(outs[r])), "%s, half %d: rank %d's output", op, half, r)
			}
		}
	}
}

// A communicator that never becomes ready (its init stays in progress)
// fails the wait after the timeout from the last enqueue with a
// TimeoutError, and the communicator is aborted; later operations get
// that failure.
func TestWaitTimesOut(t *testing.T) {
	g := newGroup(t, 2, Tuning{Launch: LaunchAsync}, 1<<12, 50*time.Millisecond, fakenccl.EnvInitHang+"=1")
	tr := g.ts[0]
	start := time.Now()
	require.NoError(t, tr.Wait(false, 0), "the failure is the transport's to report, not the wait's")
	assert.GreaterOrEqual(t, time.Since(start), 40*time.Millisecond)
	var te *api.TimeoutError
	require.ErrorAs(t, tr.Failure(), &te)
	assert.Equal(t, api.TimeoutError{Rank: 0, Peer: -1, Phase: api.PhaseEnd, Timeout: 50 * time.Millisecond}, *te)
	assert.Equal(t, int64(1), g.counts(t).Aborts)
	c := transporttest.NewCase([]int{1, 1}, 1, 2, 8)
	p, _ := c.Plan(t, g.d, g.ranks[0], tr, ptx.OpAllGather, 0)
	assert.ErrorIs(t, tr.Enqueue(p, transport.LaunchSpec{Stream: g.ranks[0].Stream}), api.ErrTimeout)
}

// Abort ends a wait promptly, whatever the timeout, with an AbortedError
// that names who asked; it cannot be undone.
func TestAbortEndsWait(t *testing.T) {
	g := newGroup(t, 2, Tuning{Launch: LaunchAsync}, 1<<12, time.Minute, fakenccl.EnvInitHang+"=1")
	tr := g.ts[1]
	done := make(chan error)
	go func() { done <- tr.Wait(false, 0) }()
	time.Sleep(5 * time.Millisecond)
	tr.Abort(true)
	tr.Abort(false)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not end after Abort")
	}
	var ae *api.AbortedError
	require.ErrorAs(t, tr.Failure(), &ae)
	assert.True(t, ae.ByClose, "the first caller names the cause")
	assert.Equal(t, 1, ae.Rank)
	require.NoError(t, tr.Wait(false, 0), "a broken communicator has nothing to wait for")
	assert.Equal(t, int64(1), g.counts(t).Aborts)
}

// What NCCL cannot serve is refused before anything is enqueued: a
// captured operation and a graph's pad. The transport says what it is.
func TestRefusesCapture(t *testing.T) {
	g := newGroup(t, 1, Tuning{}, 1<<12, 5*time.Second)
	tr := g.ts[0]
	c := transporttest.NewCase([]int{3}, 1, 2, 8)
	p, _ := c.Plan(t, g.d, g.ranks[0], tr, ptx.OpSendRecvHeads, 0)
	err := tr.Enqueue(p, transport.LaunchSpec{Stream: g.ranks[0].Stream, Captured: true})
	assert.ErrorIs(t, err, api.ErrNotSupported)
	assert.ErrorIs(t, tr.Pad(transport.LaunchSpec{}), api.ErrNotSupported)
	assert.NoError(t, tr.Failure(), "a refusal breaks nothing")
	assert.Equal(t, api.TransportNCCL, tr.Kind())
	assert.Zero(t, tr.Blocks(), "NCCL's kernels move the bytes")
	assert.NoError(t, tr.RefreshCaptured())
	assert.True(t, strings.HasPrefix(LaunchBlocking.String(), "block"))
}
