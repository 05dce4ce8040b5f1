package nccl

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// PlanMover plans the boxes every rank sends and receives (planBoxes),
// and with the fp8 wire the pack area and kernels around them (planWire).
func (t *Transport) PlanMover(p plan.Plan, r plan.Request, ts plan.Tokens) (plan.Plan, error) {
	t.plan.wire = wirePlan{}
	if p.Wire.Lossy() {
		if err := t.planWire(&p, &r, ts); err != nil {
			return p, err
		}
	}
	err := t.planBoxes(r, &p, ts)
	return p, err
}

// boxes appends to cs the boxes rank q moves for r: plan.Boxes of its
// elements, or with the fp8 wire plan.WireBoxes of its codes and scale
// bytes (whose sources, read only where q is this rank, are in this
// rank's pack area).
func (t *Transport) boxes(cs []plan.Box, r *plan.Request, p *plan.Plan, q int, ts plan.Tokens) []plan.Box {
	if t.plan.wire.on {
		return plan.WireBoxes(cs, r, p, t.plan.wire.pack, q, t.env.World, ts)
	}
	return plan.Boxes(cs, r, p, q, t.env.World, ts, int64(t.env.DType.Size()))
}

// source is where box c of this rank is read from: its tensor's input, or
// with the fp8 wire the pack area.
func (t *Transport) source(p *plan.Plan, c plan.Box) uint64 {
	if t.plan.wire.on {
		return uint64(t.packArea)
	}
	return p.Inputs[c.Tensor]
}

// planBoxes plans r's transfers (planMover calls it instead of making the
// copy-engine plan, before anything is enqueued) from what all ranks share.
// plan.Boxes of rank q gives q's boxes: their sizes and their destination
// side depend only on shared values (shapes, token counts, regions), so
// this rank knows what q sends it and where it lands. Rounds: each
// sender's boxes to its peers, in its (tensor, peer) order, fill rounds of
// one staging region (stageBytes) as if all were staged; every rank
// computes the same rounds for every sender, so each send and its receive
// fall in the same round, and a round's group can only wait for the same
// round of the others. A box never exceeds a data half (it lands in one),
// so one region fits any box; receives staged by one operation are
// disjoint parts of this rank's output, so they fit in one region too.
// With Tuning.Self every rank's own box is a send to itself and a receive
// from itself, planned as a peer's, and every rank counts it in its
// sender's rounds. Its refusals are invariant checks: no
// operation that planning let through reaches them.
func (t *Transport) planBoxes(r plan.Request, p *plan.Plan, ts plan.Tokens) error {
	pl := &t.plan
	pl.own, pl.sends, pl.recvs, pl.rounds = pl.own[:0], pl.sends[:0], pl.recvs[:0], 1
	var recvUsed int64
	for q := range t.env.World {
		pl.scratch = t.boxes(pl.scratch[:0], &r, p, q, ts)
		round, used := 0, int64(0)
		for _, c := range pl.scratch {
			if c.Peer == q && !t.tuning.Self { // q's own box: a copy on q
				if q == t.env.Rank {
					pl.own = append(pl.own, ncclXfer{box: c, peer: q, stage: -1, input: t.source(p, c)})
				}
				continue
			}
			n := c.Bytes()
			if n > t.stageBytes {
				return fmt.Errorf("a2a: a box of %d bytes from rank %d to %d is over the %d-byte staging region: %w", n, q, c.Peer, t.stageBytes, api.ErrCapacity)
			}
			if used+n > t.stageBytes {
				round, used = round+1, 0
			}
			x := ncclXfer{box: c, round: round, stage: -1}
			if q == t.env.Rank { // a send, to a peer or (Tuning.Self) to itself
				s := x
				s.peer, s.input = c.Peer, t.source(p, c)
				if !c.Contiguous(c.Src) {
					s.stage = used
				}
				pl.sends = append(pl.sends, s)
			}
			if c.Peer == t.env.Rank {
				x.peer = q
				if !c.Contiguous(c.Dst) {
					if recvUsed+n > t.stageBytes {
						return fmt.Errorf("a2a: %d bytes to unpack, over the %d-byte staging region: %w", recvUsed+n, t.stageBytes, api.ErrCapacity)
					}
					x.stage, recvUsed = recvUsed, recvUsed+n
				}
				pl.recvs = append(pl.recvs, x)
			}
			used += n
			pl.rounds = max(pl.rounds, round+1)
		}
	}
	return nil
}
