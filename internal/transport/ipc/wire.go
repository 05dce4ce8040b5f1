package ipc

import (
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// enqueueWire launches an fp8 wire operation: the exchange entry of op
// (after the start barrier with a single buffer), which stores every row
// at its destinations and waits for the peers like any operation, then,
// unless p.WireDirect sent every row as 16-bit values, the decode, which
// turns the rows the peers staged as codes and scale bytes here into the
// 16-bit output in the same half (those the exchange did not decode as
// they landed: wireMode). Allocation-free.
func (t *Transport) enqueueWire(p plan.Plan, ls transport.LaunchSpec) error {
	transport.SetGeneralArgs(&t.args, p)
	transport.SetWireStaging(&t.args, p)
	t.args.WireMode = wireMode(p)
	threads := plan.WireThreadsFor(t.nblocks, t.sharers, t.env.SMs)
	if err := t.launchSized(t.wire.Op(p.Op, p.WireWidth), threads, ls.Stream); err != nil || p.WireDirect {
		return err
	}
	grid := t.nblocks // a captured operation's output grows with the counts at replay
	if !ls.Captured {
		grid = transport.WireBlocks(p.OutBytes*int64(p.Tensors), t.nblocks)
	}
	return t.launch(t.wire.Decode(p.DecodeWidth), grid, threads, ls.Stream)
}
