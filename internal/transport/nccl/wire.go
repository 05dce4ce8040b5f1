package nccl

import (
	"fmt"
	"math"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// The fp8 wire over NCCL (package plan, wirepack.go, has the layout): a
// pack launch quantizes this rank's input rows into the pack area, the
// boxes of plan.WireBoxes move the codes and scale bytes as the exact
// operation moves elements (this rank's own box too, so that its rows are
// round-tripped like the others), and an unpack launch decodes the data
// half's staging area into the outputs. The kernels run no protocol:
// stream order puts the pack before the sends and the unpack after the
// last receive.

// wirePlan is what planWire adds to an operation's plan.
type wirePlan struct {
	on   bool
	pack plan.WirePack // this rank's pack area
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
		if q == t.env.Rank {
			t.plan.wire = wirePlan{on: true, pack: pk}
		}
	}
	return t.wire.LoadPacks(p.WireWidth, p.DecodeWidth, time.Duration(t.timeout.Load()))
}

// pack enqueues the quantization of p's inputs into the pack area on s.
func (t *Transport) pack(p plan.Plan, s driver.Stream) error {
	pk := &t.plan.wire.pack
	if pk.Rows == 0 {
		return nil
	}
	a := &t.args
	transport.SetGeneralArgs(a, p)
	a.Data[0] = uint64(t.packArea)
	a.Stage, a.StageRegion = 0, uint64(pk.CodeRegion)
	a.Scales, a.ScaleRegion = uint64(pk.ScaleOff), uint64(pk.ScaleRegion)
	a.WireRows, a.InHeads, a.WireMode = uint32(pk.Rows), uint32(pk.InHeads), kernelabi.WirePack
	return t.launch(t.wire.Pack(p.WireWidth), pk.Rows*p.HeadUnits*2*int64(p.Tensors), s)
}

// unpack enqueues the decode of the staging area of the data half at half
// into p's outputs on s.
func (t *Transport) unpack(p plan.Plan, half driver.DevicePtr, s driver.Stream) error {
	if p.OutBytes == 0 {
		return nil
	}
	a := &t.args
	transport.SetGeneralArgs(a, p)
	transport.SetWireStaging(a, p)
	a.Batch = uint32(p.Batch)
	a.Data[t.env.Rank] = uint64(half)
	return t.launch(t.wire.Unpack(p.DecodeWidth), p.OutBytes*int64(p.Tensors), s)
}

// launch enqueues f with t.args on s (Env.Launch), over bytes
// (transport.WireBlocks), at most the rank's blocks (Config.NumSMs: one
// per SM it may use).
func (t *Transport) launch(f driver.Function, bytes int64, s driver.Stream) error {
	return t.env.Launch(f, transport.WireBlocks(bytes, t.env.Blocks), kernelabi.Threads, s, t.params[:])
}
