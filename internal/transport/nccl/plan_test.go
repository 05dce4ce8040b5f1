package nccl

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// planned is planBoxes of op on every rank of counts (H heads of 8
// bfloat16 elements, batch 2) with staging regions of stage bytes (0:
// the largest output of any rank, the least a Comm's data half holds),
// and tuning: each rank's transfers.
func planned(t *testing.T, op ptx.Op, counts []int, H int, stage int64, tuning Tuning) ([]ncclPlan, error) {
	ts, world := plan.NewTokens(counts), len(counts)
	rs, ps, most := make([]plan.Request, world), make([]plan.Plan, world), int64(0)
	for rank := range world {
		shape := [4]int{2, counts[rank], H, 8}
		if op == ptx.OpGatherHeads || op == ptx.OpHeadAllGather {
			_, n := plan.HeadRange(H, world, rank)
			shape[1], shape[2] = ts.Total(), n
		}
		x, err := plan.NewInput(0x10000, shape, 0, 2)
		require.NoError(t, err)
		rs[rank] = plan.Request{Op: op, N: 1, Heads: H, Xs: [plan.MaxTensors]plan.Input{x}}
		env := plan.Env{DType: api.BFloat16, Rank: rank, World: world, Layout: plan.NewLayout(1<<20, 2), Buf: 1 << 40, Widths: []int{16, 8, 4, 2}}
		ps[rank], err = plan.Make(rs[rank], env, ts, 0)
		require.NoError(t, err)
		most = max(most, ps[rank].OutBytes)
	}
	if stage == 0 {
		stage = most
	}
	plans := make([]ncclPlan, world)
	for rank := range world {
		tr := &Transport{env: &transport.Env{Rank: rank, World: world, DType: api.BFloat16}, stageBytes: stage, tuning: tuning}
		if err := tr.planBoxes(rs[rank], &ps[rank], ts); err != nil {
			return nil, err
		}
		plans[rank] = tr.plan
	}
	return plans, nil
}

// Every send has its receive on the peer, in the same order, of the same
// size and in the same round, whatever the staging splits into rounds; a
// side with gaps is staged within its region, a contiguous one moves
// directly; a rank's own part is a copy, or with Tuning.Self a send to
// itself, counted in its rounds by every rank. Staging regions of the
// largest output split SendRecvHeads and AllGather into rounds here.
func TestPlanBoxesPairs(t *testing.T) {
	counts := []int{6, 0, 10}
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather, ptx.OpHeadAllGather} {
		for _, stage := range []int64{1 << 20, 0} {
			for _, self := range []bool{false, true} {
				name := fmt.Sprintf("%s/stage %d/self %v", op, stage, self)
				plans, err := planned(t, op, counts, 5, stage, Tuning{Self: self})
				require.NoError(t, err, name)
				rounds := 0
				for q, pl := range plans {
					rounds = max(rounds, pl.rounds)
					checkStaging(t, name, pl, stage)
					moves := counts[q] > 0 || op == ptx.OpHeadAllGather // every rank holds a head
					assert.Equal(t, !self && moves, len(pl.own) == 1, "%s: rank %d's own copy", name, q)
				}
				checkPairs(t, name, plans)
				switch {
				case stage != 0:
					assert.Equal(t, 1, rounds, name)
				case op == ptx.OpSendRecvHeads || op == ptx.OpAllGather:
					assert.Greater(t, rounds, 1, "%s: the rounds are exercised", name)
				}
			}
		}
	}
}

// checkStaging checks that pl stages a send or a receive exactly where
// its side has gaps, within a region of stage bytes (0: any).
func checkStaging(t *testing.T, name string, pl ncclPlan, stage int64) {
	t.Helper()
	for _, x := range pl.sends {
		assert.Equal(t, x.stage >= 0, !x.box.Contiguous(x.box.Src), "%s: a send is staged where its side has gaps", name)
		assert.True(t, stage == 0 || x.stage+x.box.Bytes() <= stage, name)
	}
	for _, x := range pl.recvs {
		assert.Equal(t, x.stage >= 0, !x.box.Contiguous(x.box.Dst), "%s: a receive is staged where its side has gaps", name)
	}
}

// checkPairs checks that every rank's sends to a peer are the peer's
// receives from it, in order, size and round.
func checkPairs(t *testing.T, name string, plans []ncclPlan) {
	t.Helper()
	for q := range plans {
		for p := range plans {
			sends, recvs := between(plans[q].sends, p), between(plans[p].recvs, q)
			require.Len(t, recvs, len(sends), "%s: %d to %d", name, q, p)
			for i := range sends {
				assert.Equal(t, sends[i].box.Bytes(), recvs[i].box.Bytes(), "%s: %d to %d, #%d", name, q, p, i)
				assert.Equal(t, sends[i].round, recvs[i].round, "%s: %d to %d, #%d", name, q, p, i)
			}
		}
	}
}

// between is the transfers of xs with peer, in order.
func between(xs []ncclXfer, peer int) []ncclXfer {
	var out []ncclXfer
	for _, x := range xs {
		if x.peer == peer {
			out = append(out, x)
		}
	}
	return out
}

// A box larger than the staging region is refused: planning never lets
// one through (a box lands in one data half, and the region is one).
func TestPlanBoxesRefusesLargeBoxes(t *testing.T) {
	_, err := planned(t, ptx.OpAllGather, []int{3, 5}, 4, 64, Tuning{})
	assert.ErrorIs(t, err, api.ErrCapacity)
}
