package ipc

// Tests against the stub driver (internal/transport/transporttest): its
// devices share the host's memory, so the copy engines' copies really
// move bytes; its kernels run nothing, so what they would move is not
// checked here (the GPU tests of a2a do).

import (
	"fmt"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/internal/transport/transporttest"
	"github.com/ulysses-go/ulysses/ptx"
)

// group is world connected IPC transports on one stub device, every rank
// in this process, moving bytes with mover.
type group struct {
	d     *transporttest.Device
	ranks []*transporttest.Rank
	ts    []*Transport
}

// newGroup makes and connects the group, with data halves of dataBytes;
// the test's end releases it.
func newGroup(t *testing.T, world int, mover api.Mover, dataBytes int64, env ...string) *group {
	t.Helper()
	g := &group{d: transporttest.NewDevice(t, env...)}
	for r := range world {
		rk := g.d.NewRank(t, r, world, dataBytes)
		rk.Mover = mover
		tr, err := New(rk.Env)
		require.NoError(t, err)
		t.Cleanup(tr.Release)
		g.ranks, g.ts = append(g.ranks, rk), append(g.ts, tr)
	}
	for r, tr := range g.ts {
		require.NoError(t, tr.Connect(transporttest.Handles(g.ranks)), "rank %d", r)
	}
	return g
}

// launches is how many kernels the stub has launched.
func (g *group) launches(t *testing.T) int64 {
	n, err := fakecuda.Read(g.d.Lib)
	require.NoError(t, err)
	return n.Launches
}

// The copy engines move every operation's bytes between the ranks'
// buffers (same-process peers, by pointer): each rank's output in the
// data half the operation writes is what the operation gives it, with
// even and uneven heads and a zero token count.
func TestCopyEnginesMoveBytes(t *testing.T) {
	for _, c := range []struct {
		counts []int
		H      int
	}{{[]int{3, 5}, 4}, {[]int{3, 5}, 5}, {[]int{0, 4, 2}, 7}} {
		t.Run(fmt.Sprintf("%v/h%d", c.counts, c.H), func(t *testing.T) {
			copyEngines(t, transporttest.NewCase(c.counts, 2, c.H, 8))
		})
	}
}

// copyEngines is TestCopyEnginesMoveBytes of one case. Every operation
// writes both data halves in turn, and every rank enqueues before any
// waits.
func copyEngines(t *testing.T, c transporttest.Case) {
	world := len(c.Tokens.Counts)
	g := newGroup(t, world, api.MoverCopyEngines, 1<<16)
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather, ptx.OpHeadAllGather} {
		for half := range uint32(2) {
			outs := make([][]byte, world)
			for r, tr := range g.ts {
				var p plan.Plan
				p, outs[r] = c.Plan(t, g.d, g.ranks[r], tr, op, half)
				require.True(t, p.ByCopies, "%s: the copy engines move it", op)
				require.NoError(t, tr.Enqueue(p, transport.LaunchSpec{Stream: g.ranks[r].Stream, Half: half}), "%s rank %d", op, r)
			}
			for r, rk := range g.ranks {
				require.NoError(t, g.ts[r].Wait(false, 0))
				assert.Equal(t, outs[r], g.d.Output(t, rk, half, len(outs[r])), "%s, half %d: rank %d's output", op, half, r)
			}
		}
	}
}

// An operation is one launch: its kernel, or after the copy engines'
// copies the barrier; a pad and a goodbye are one each.
func TestLaunchesPerOperation(t *testing.T) {
	c := transporttest.NewCase([]int{4}, 2, 4, 8)
	for _, mover := range []api.Mover{api.MoverKernels, api.MoverCopyEngines} {
		t.Run(mover.String(), func(t *testing.T) {
			g := newGroup(t, 1, mover, 1<<16)
			tr, s := g.ts[0], g.ranks[0].Stream
			p, _ := c.Plan(t, g.d, g.ranks[0], tr, ptx.OpSendRecvHeads, 0)
			assert.Equal(t, mover == api.MoverCopyEngines, p.ByCopies)
			before := g.launches(t)
			require.NoError(t, tr.Enqueue(p, transport.LaunchSpec{Stream: s}))
			assert.Equal(t, before+1, g.launches(t), "launches of an operation")
			require.NoError(t, tr.Pad(transport.LaunchSpec{Stream: s, Half: 1}))
			require.NoError(t, tr.Goodbye(false))
			assert.Equal(t, before+3, g.launches(t), "a pad and a goodbye")
			require.NoError(t, tr.Wait(false, 0))
			assert.NoError(t, tr.Failure())
		})
	}
}

// The counts SetTokens stages reach the buffer's live table only when
// RefreshCaptured asks, and once per change.
func TestRefreshCaptured(t *testing.T) {
	g := newGroup(t, 2, api.MoverKernels, 1<<12)
	tr, rk := g.ts[1], g.ranks[1]
	at := rk.Buf + driver.DevicePtr(rk.Layout.StateOff+plan.LiveOff)
	read := func() liveTable {
		b := g.d.Bytes(t, at, int64(unsafe.Sizeof(liveTable{})))
		return *(*liveTable)(unsafe.Pointer(&b[0]))
	}
	ts := plan.NewTokens([]int{6, 2})
	tr.SetTokens(ts)
	assert.Zero(t, read().Tokens, "staged only")
	require.NoError(t, tr.RefreshCaptured())
	live := read()
	assert.Equal(t, [...]int32{6, 2}, [2]int32(live.Tokens[:2]))
	assert.Equal(t, [...]int32{0, 6, 8}, [3]int32(live.Prefix[:3]))
	assert.Equal(t, ts.Hash, live.TokenHash)
	// Rank 1's divisions: by its own 2 tokens, and by the most (6).
	assert.Equal(t, [3]uint32{2, 1, 1}, live.TokenDiv[kernelabi.TokenDivRank])
	assert.Equal(t, plan.DivisorOf(6).Words(), live.TokenDiv[kernelabi.TokenDivMost])
	assert.Equal(t, uint32(6), live.TokenDiv[kernelabi.TokenDivMost][0])
	require.NoError(t, g.d.Share.Ctx.MemsetD32(at, 0, 1))
	require.NoError(t, tr.RefreshCaptured())
	assert.Zero(t, read().Tokens[0], "fresh: nothing copied again")
	tr.SetTokens(plan.NewTokens([]int{1, 9}))
	require.NoError(t, tr.RefreshCaptured())
	assert.Equal(t, int32(9), read().Tokens[1])
}

// Abort sets the status word's abort word once, the first caller naming
// the cause, and the kernels' report of it reads as an AbortedError.
func TestAbort(t *testing.T) {
	g := newGroup(t, 1, api.MoverKernels, 1<<12)
	tr := g.ts[0]
	st := (*statusWord)(tr.statusHost)
	assert.Zero(t, st.Abort)
	tr.Abort(true)
	tr.Abort(false)
	assert.Equal(t, uint32(1), st.Abort)
	assert.NoError(t, tr.Failure(), "nothing reported yet")
	*st = statusWord{Code: statusAborted, Abort: 1, Phase: uint32(api.PhaseEnd), Peer: 0, Epoch: 3}
	var ae *api.AbortedError
	require.ErrorAs(t, tr.Failure(), &ae)
	assert.Equal(t, api.AbortedError{Rank: 0, Peer: 0, Phase: api.PhaseEnd, Epoch: 3, ByClose: true}, *ae)
	*st = statusWord{Code: statusHalfReused}
	assert.ErrorIs(t, tr.Failure(), api.ErrOddGraph)
	*st = statusWord{}
}

// Connect refuses a group whose GPUs cannot reach each other, naming the
// pair, and a same-process handle whose pointer is no Comm's buffer of
// that rank, size and ID; CheckOwnBuffers refuses the latter first.
func TestConnectRefuses(t *testing.T) {
	d := transporttest.NewDevice(t, fakecuda.EnvNoPeer+"=0-1")
	ranks := []*transporttest.Rank{d.NewRank(t, 0, 2, 1<<12), d.NewRank(t, 1, 2, 1<<12)}
	tr, err := New(ranks[0].Env)
	require.NoError(t, err)
	t.Cleanup(tr.Release)
	hs := transporttest.Handles(ranks)
	require.NoError(t, CheckOwnBuffers(hs, 0))

	far := append([]handle.Handle(nil), hs...)
	copy(far[1].BusID[:], "0000:01:00.0") // device 1, which device 0 cannot reach
	err = tr.Connect(far)
	assert.ErrorIs(t, err, api.ErrNoPeerAccess)
	assert.ErrorContains(t, err, "rank 0 (GPU 0000:00:00.0) and rank 1 (GPU 0000:01:00.0)")

	forged := hs[1]
	forged.ID[0] ^= 1
	assert.ErrorIs(t, CheckOwnBuffers([]handle.Handle{hs[0], forged}, 0), api.ErrHandle)
	assert.ErrorIs(t, tr.Connect([]handle.Handle{hs[0], forged}), api.ErrHandle)
	require.NoError(t, tr.Connect(hs), "the group's own handles still connect")
}
