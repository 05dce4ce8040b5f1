package nccl

import (
	"fmt"
	"math"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// The fp8 wire over NCCL (package plan, wirepack.go, has the layout): a
// pack launch quantizes this rank's input rows into the pack area, the
// boxes of plan.WireBoxes move the codes and scale bytes as the exact
// operation moves elements (this rank's own box too, so that its rows are
// round-tripped like the others), and an unpack launch decodes the data
// half's staging area into the outputs. The kernels run no protocol:
// stream order puts the pack before the sends and the unpack after the
// last receive.

// wireBytesPerBlock is how many bytes of input (pack) or output (unpack)
// one block of the wire's launches takes at least, as the IPC transport's
// decode does.
const wireBytesPerBlock = 16 << 10

// wirePlan is what planWire adds to an operation's plan.
type wirePlan struct {
	on                 bool
	pack               plan.WirePack // this rank's pack area
	width, unpackWidth int           // the pack's and the unpack's entry widths
}

// planWire lays out this rank's pack area for r, refuses an operation
// whose rows some rank's area cannot hold (every rank checks every rank's,
// so that all refuse alike rather than leave the others waiting), and
// makes sure the pack and unpack entries are loaded (which may wait,
// within the timeout, for the device).
func (t *Transport) planWire(p *plan.Plan, r *plan.Request, ts plan.Tokens) error {
	for q := range t.env.World {
		pk := plan.NewWirePack(r, q, t.env.World, ts)
		if pk.Bytes > t.stageBytes {
			return fmt.Errorf("a2a: %s of %d tensors over the %v wire packs %d bytes of codes and scales on rank %d, over the %d-byte pack area (raise MaxTokens or MaxTensors): %w", r.Op, r.N, p.Wire, pk.Bytes, q, t.stageBytes, api.ErrCapacity)
		}
		if elems := pk.Rows * int64(r.Xs[0].Shape[3]); elems > math.MaxInt32 {
			return fmt.Errorf("a2a: %s over the %v wire: %d input elements per tensor on rank %d, over the kernels' 32-bit limit: %w", r.Op, p.Wire, elems, q, api.ErrCapacity)
		}
	}
	t.plan.wire = wirePlan{on: true, pack: plan.NewWirePack(r, t.env.Rank, t.env.World, ts), width: p.WireWidth, unpackWidth: p.DecodeWidth}
	return t.wire.LoadPacks(p.WireWidth, p.DecodeWidth, time.Duration(t.timeout.Load()))
}

// pack enqueues the quantization of p's inputs into the pack area on s.
func (t *Transport) pack(p plan.Plan, s driver.Stream) error {
	w := &t.plan.wire
	if w.pack.Rows == 0 {
		return nil
	}
	a := &t.args
	a.Data[0] = uint64(t.packArea)
	a.Inputs, a.InRow, a.HeadUnits, a.Tensors = p.Inputs, uint32(p.InRow), uint32(p.HeadUnits), uint32(p.Tensors)
	a.Stage, a.StageRegion = 0, uint64(w.pack.CodeRegion)
	a.Scales, a.ScaleRegion = uint64(w.pack.ScaleOff), uint64(w.pack.ScaleRegion)
	a.WireRows, a.InHeads, a.WireMode = uint32(w.pack.Rows), uint32(w.pack.InHeads), kernelabi.WirePack
	in := w.pack.Rows * p.HeadUnits * 2 * int64(p.Tensors)
	return t.launch(t.wire.Pack(w.width), in, s)
}

// unpack enqueues the decode of the staging area of the data half at half
// into p's outputs on s.
func (t *Transport) unpack(p plan.Plan, half driver.DevicePtr, s driver.Stream) error {
	if p.OutBytes == 0 {
		return nil
	}
	a := &t.args
	a.Rank, a.World, a.Batch = uint32(t.env.Rank), uint32(t.env.World), uint32(p.Batch)
	a.Data[t.env.Rank] = uint64(half)
	a.Region, a.HeadUnits, a.Tensors = uint64(p.Region), uint32(p.HeadUnits), uint32(p.Tensors)
	a.Stage, a.StageRegion = uint64(p.StageOff), uint64(p.StageRegion)
	a.Scales, a.ScaleRegion = uint64(p.ScaleOff), uint64(p.ScaleRegion)
	a.OutHeads, a.OutRankTokens = uint32(p.Out[2]), 0
	if p.Op == ptx.OpGatherHeads {
		a.OutRankTokens = 1
	}
	return t.launch(t.wire.Unpack(t.plan.wire.unpackWidth), p.OutBytes*int64(p.Tensors), s)
}

// launch enqueues f with t.args on s, one block per wireBytesPerBlock of
// bytes, up to the rank's blocks (Config.NumSMs: one per SM it may use),
// holding the share's launch gate so that no graveyard release starts
// while it may run. f is 0 where planWire did not load it: a bug, refused
// before the driver sees it.
func (t *Transport) launch(f driver.Function, bytes int64, s driver.Stream) error {
	if f == 0 {
		return fmt.Errorf("a2a: launching an fp8 wire kernel that was not loaded: %w", api.ErrNotSupported)
	}
	grid := uint32(min(max(bytes/wireBytesPerBlock, 1), int64(max(t.env.Blocks, 1))))
	t.env.Share.Gate.RLock()
	err := t.env.Ctx.Launch(f, [3]uint32{grid, 1, 1}, [3]uint32{kernelabi.Threads, 1, 1}, 0, s, t.params[:])
	t.env.Share.Gate.RUnlock()
	if err != nil {
		return api.WrapDriver("launching an fp8 wire kernel", err)
	}
	return nil
}
