package ipc

import (
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// PlanMover adds the copy-engine mode's part to p when the copy engines
// move it (moverFor; never over the fp8 wire, which the kernels convert,
// nor captured): the copies into the scratch, every input's address, the
// mover in the signature. Where the kernels move it, it makes sure their
// functions are loaded (loadFor).
func (t *Transport) PlanMover(p plan.Plan, r plan.Request, ts plan.Tokens) (plan.Plan, error) {
	if p.Wire.Lossy() || t.moverFor(r.Op, p.GroupBytes, r.Captured) != api.MoverCopyEngines {
		return p, t.loadFor(p, r.Captured)
	}
	t.copies = plan.Boxes(t.copies[:0], &r, &p, int(t.args.Rank), int(t.args.World), ts, int64(t.env.DType.Size()))
	p.ByCopies, p.Copies = true, t.copies
	p.Sig = plan.MoverSignature(p.Sig, api.MoverCopyEngines)
	return p, nil
}

// loadFor makes sure the kernels Enqueue launches for p are loaded: at
// once where they are (always with machine code, and after an operation's
// first time); else it loads their PTX, which waits for the process's
// queued operations on the device, for at most the Comm's timeout
// (device.Kernels.Load). Allocation-free once they are.
func (t *Transport) loadFor(p plan.Plan, captured bool) error {
	timeout := time.Duration(t.args.TimeoutNs)
	if p.Wire.Lossy() {
		return t.wire.Load(p.Op, p.WireWidth, p.DecodeWidth, !p.WireDirect, timeout)
	}
	return t.k.Load(kindFor(p, captured), p.Op, p.Width, timeout)
}

// kindFor is the kind of exact entry that runs p.
func kindFor(p plan.Plan, captured bool) device.Kind {
	switch {
	case p.General:
		return device.General
	case captured:
		return device.Captured
	}
	return device.Plain
}

// Enqueue launches the operation's kernel (after the start barrier's with
// a single buffer) on ls.stream. A captured one reads the token counts
// from the live table when it runs, and computes its active blocks and
// signature from them. Allocation-free.
func (t *Transport) Enqueue(p plan.Plan, ls transport.LaunchSpec) error {
	t.args.Input = p.Inputs[0]
	t.args.Batch = uint32(p.Batch)
	t.args.Units = uint32(p.Chunk / int64(p.Width))
	t.args.Half = ls.Half
	t.args.Live, t.args.GroupRow = 0, 0
	spread := int64(1)
	if p.Spread {
		spread = plan.SpreadFor(t.sharers)
	}
	t.args.Active = uint32(plan.ActiveBlocks(p.GroupBytes*spread, t.nblocks))
	t.args.Sig = p.Sig
	if ls.Captured {
		t.args.Live, t.args.GroupRow = uint64(t.liveDev), uint64(p.GroupRow*spread)
		t.args.Active, t.args.Sig = 0, p.ShapeSig
	}
	if p.ByCopies {
		return t.enqueueCopies(p, ls)
	}
	if p.Wire.Lossy() {
		return t.enqueueWire(p, ls)
	}
	if p.General {
		transport.SetGeneralArgs(&t.args, p)
	}
	return t.launchOp(t.k.Func(kindFor(p, ls.Captured), p.Op, p.Width), ls.Stream)
}

// launchOp launches f with the current args, after the start barrier with
// a single buffer. Only the active blocks are launched: the rest would
// return at once; launching them cost 0.1-0.4 us of the medians at 128
// KiB-1 MiB. A captured operation computes its
// active blocks when it runs, so it launches all.
func (t *Transport) launchOp(f driver.Function, s driver.Stream) error {
	return t.launchSized(f, t.threads, s)
}

// launchSized is launchOp with blocks of threads threads.
func (t *Transport) launchSized(f driver.Function, threads int, s driver.Stream) error {
	if err := t.startBarrier(s); err != nil {
		return err
	}
	grid := t.nblocks
	if t.args.Live == 0 {
		grid = int(t.args.Active)
	}
	return t.launch(f, grid, threads, s)
}

// startBarrier launches the single-buffer mode's start barrier on s (one
// block: every rank's operation waits there until every peer is done with
// the previous one); with a double buffer there is none.
func (t *Transport) startBarrier(s driver.Stream) error {
	if t.args.HalfBytes != 0 {
		return nil
	}
	return t.launch(t.k.Start(), 1, farewellThreads, s)
}

// Pad launches the narrowest AllGather with no batch: one block that
// signals its peers and waits for theirs, writing nothing.
func (t *Transport) Pad(ls transport.LaunchSpec) error {
	narrowest := t.k.Widths[len(t.k.Widths)-1]
	t.args.Input, t.args.Batch, t.args.Units = 0, 0, 1
	t.args.Half, t.args.Live, t.args.GroupRow = ls.Half, 0, 0
	t.args.Active, t.args.Sig = 1, plan.PadSignature
	return t.launchOp(t.k.Func(device.Plain, ptx.OpAllGather, narrowest), ls.Stream) // ptx.FamilyBase: loaded with the share
}
