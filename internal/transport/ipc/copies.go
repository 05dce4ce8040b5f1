package ipc

import (
	"strconv"

	"github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// enqueueCopies is the copy-engine mode's operation: the start barrier
// with a single buffer, every copy of p into the peers' data half
// ls.Half (spread over the side streams, see copyFan), then ulysses_sync
// (one block: signal, wait, advance the epoch). Allocation-free.
func (t *Transport) enqueueCopies(p plan.Plan, ls transport.LaunchSpec) error {
	t.args.Active, t.args.Sig = 1, p.Sig
	if err := t.startBarrier(ls.Stream); err != nil {
		return err
	}
	ctx := t.env.Ctx
	fan := t.fan != nil && len(p.Copies) > 1 && planBytes(p.Copies) >= fanMinBytes
	if fan {
		if err := ctx.EventRecord(t.fan.fork, ls.Stream); err != nil {
			return api.WrapDriver("forking the copy streams", err)
		}
	}
	used := 0 // side streams that waited on the fork
	t.env.Share.Gate.RLock()
	for _, c := range p.Copies {
		s := ls.Stream
		if fan {
			k := c.Peer % len(t.fan.sides)
			for ; used <= k; used++ {
				if err := ctx.StreamWaitEvent(t.fan.sides[used], t.fan.fork); err != nil {
					t.env.Share.Gate.RUnlock()
					return api.WrapDriver("forking the copy streams", err)
				}
			}
			s = t.fan.sides[k]
		}
		if err := t.copyBox(p.Inputs[c.Tensor], c, ls.Half, s); err != nil {
			t.env.Share.Gate.RUnlock()
			return err
		}
	}
	t.env.Share.Gate.RUnlock()
	for k := range used {
		if err := ctx.EventRecord(t.fan.joins[k], t.fan.sides[k]); err != nil {
			return api.WrapDriver("joining the copy streams", err)
		}
		if err := ctx.StreamWaitEvent(ls.Stream, t.fan.joins[k]); err != nil {
			return api.WrapDriver("joining the copy streams", err)
		}
	}
	return t.launch(t.k.Sync(), 1, farewellThreads, ls.Stream)
}

// copyBox enqueues c, from input on s into data half half of its peer.
func (t *Transport) copyBox(input uint64, c plan.Box, half uint32, s driver.Stream) error {
	at := uint64(half) * t.args.HalfBytes
	from := driver.DevicePtr(input + uint64(c.Src.Off))
	to := driver.DevicePtr(t.args.Data[c.Peer] + at + uint64(c.Dst.Off))
	if err := transport.CopyBox(t.env.Ctx, to, c.Dst, from, c.Src, c, s); err != nil {
		return api.WrapDriver("copying to rank "+strconv.Itoa(c.Peer), err)
	}
	return nil
}
