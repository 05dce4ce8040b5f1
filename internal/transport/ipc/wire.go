package ipc

import (
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// decodeBytesPerBlock is how many output bytes one block of the decode
// takes at least: four passes of a block of 512 threads writing 8 bytes
// each. (Not measured yet: a first guess between one block per pass,
// which small operations would wait on to launch, and a long serial loop
// per thread.)
const decodeBytesPerBlock = 16 << 10

// enqueueWire launches an fp8 wire operation: the exchange entry of op
// (after the start barrier with a single buffer), which stores every row
// at its destinations and waits for the peers like any operation, then,
// unless p.WireDirect sent every row as 16-bit values, the decode, which
// turns the rows the peers staged as codes and scale bytes here into the
// 16-bit output in the same half (those the exchange did not decode as
// they landed: wireMode). Allocation-free.
func (t *Transport) enqueueWire(p plan.Plan, ls transport.LaunchSpec) error {
	t.setGeneral(p)
	t.args.Stage = uint64(p.StageOff)
	t.args.Scales = uint64(p.ScaleOff)
	t.args.StageRegion = uint64(p.StageRegion)
	t.args.ScaleRegion = uint64(p.ScaleRegion)
	t.args.WireRows = uint32(p.WireRows)
	t.args.OutHeads = uint32(p.Out[2])
	t.args.OutRankTokens = 0
	if p.Op == ptx.OpGatherHeads {
		t.args.OutRankTokens = 1
	}
	t.args.WireMode = wireMode(p)
	threads := plan.WireThreadsFor(t.nblocks, t.sharers, t.env.SMs)
	if err := t.launchSized(t.wire.Op(p.Op, p.WireWidth), threads, ls.Stream); err != nil || p.WireDirect {
		return err
	}
	grid := t.nblocks // a captured operation's output grows with the counts at replay
	if !ls.Captured {
		grid = int(min(max(p.OutBytes*int64(p.Tensors)/decodeBytesPerBlock, 1), int64(t.nblocks)))
	}
	return t.launch(t.wire.Decode(p.DecodeWidth), grid, threads, ls.Stream)
}
