package nccl

import (
	"fmt"
	"strconv"
	"time"

	"github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// Enqueue runs the plan planBoxes made for this operation on ls.stream,
// on a locked OS thread with the device's context current (NCCL's groups
// are per thread): the copies of this rank's own boxes, then per round
// the packs of staged sends, one NCCL group of sends and receives, and
// the unpacks of staged receives (Tuning.Marker is told where each phase
// ends); with the fp8 wire, the rows' pack before it all and their
// decode after. It waits only for NCCL to have set up
// the previous group (settle), never for a peer's data.
func (t *Transport) Enqueue(p plan.Plan, ls transport.LaunchSpec) error {
	if ls.Captured {
		return fmt.Errorf("a2a: %s over NCCL cannot be captured into a CUDA graph: %w", p.Op, api.ErrNotSupported)
	}
	half := t.env.Buf + driver.DevicePtr(int64(ls.Half)*t.env.Layout.HalfBytes)
	t.mu.Lock()
	defer t.mu.Unlock()
	err := t.env.Ctx.Do(func() error {
		if err := t.settle(); err != nil {
			return err
		}
		t.mark(PhaseStart, ls.Stream)
		if t.plan.wire.on {
			if err := t.pack(p, ls.Stream); err != nil {
				return err
			}
			t.mark(PhaseEncode, ls.Stream)
		}
		for _, o := range t.plan.own {
			if err := transport.CopyBox(t.env.Ctx, half+driver.DevicePtr(o.box.Dst.Off), o.box.Dst, driver.DevicePtr(o.input+uint64(o.box.Src.Off)), o.box.Src, o.box, ls.Stream); err != nil {
				return api.WrapDriver("copying rank "+strconv.Itoa(t.env.Rank)+"'s own part", err)
			}
		}
		t.mark(PhaseOwn, ls.Stream)
		for round := range t.plan.rounds {
			if err := t.round(round, half, ls.Stream); err != nil {
				return err
			}
		}
		if !t.plan.wire.on {
			return nil
		}
		err := t.unpack(p, half, ls.Stream)
		t.mark(PhaseDecode, ls.Stream)
		return err
	})
	t.ops.Add(1)
	t.lastEnqueue.Store(time.Now().UnixNano())
	if err != nil && t.failed == nil {
		t.failLocked(err) // a half-enqueued group leaves the peers waiting: end it
	}
	return err
}

// round enqueues one round: packs, the group, unpacks.
func (t *Transport) round(round int, half driver.DevicePtr, s driver.Stream) error {
	sendStage, recvStage := t.stage, t.stage+driver.DevicePtr(t.stageBytes)
	for _, x := range t.plan.sends {
		if x.round != round || x.stage < 0 {
			continue
		}
		c := x.box
		packed := plan.BoxSide{Pitch: c.Width, Height: c.Rows}
		if err := transport.CopyBox(t.env.Ctx, sendStage+driver.DevicePtr(x.stage), packed, driver.DevicePtr(x.input+uint64(c.Src.Off)), c.Src, c, s); err != nil {
			return api.WrapDriver("packing for rank "+strconv.Itoa(x.peer), err)
		}
	}
	t.mark(PhasePack, s)
	if t.inRound(round) {
		if err := t.group(round, half, sendStage, recvStage, s); err != nil {
			return err
		}
	}
	t.mark(PhaseGroup, s)
	for _, x := range t.plan.recvs {
		if x.round != round || x.stage < 0 {
			continue
		}
		c := x.box
		packed := plan.BoxSide{Pitch: c.Width, Height: c.Rows}
		if err := transport.CopyBox(t.env.Ctx, half+driver.DevicePtr(c.Dst.Off), c.Dst, recvStage+driver.DevicePtr(x.stage), packed, c, s); err != nil {
			return api.WrapDriver("unpacking from rank "+strconv.Itoa(x.peer), err)
		}
	}
	t.mark(PhaseUnpack, s)
	return nil
}

// mark tells Tuning.Marker, where there is one, that phase p has been
// enqueued on s.
func (t *Transport) mark(p Phase, s driver.Stream) {
	if m := t.tuning.Marker; m != nil {
		m.Mark(t.env.Rank, p, s)
	}
}

// group enqueues the round's sends and receives in one NCCL group, each
// in (tensor, peer) order, as every rank does. ncclGroupEnd of a
// non-blocking communicator may return before NCCL has put the group's
// kernel on the stream (ncclInProgress): it settles before returning, or
// what is enqueued after it (the unpacks, the Into copy, the event a
// caller's stream waits on) would run before the data has come (without
// this, half of every two-rank output was wrong). With LaunchBlocking the
// group goes to the blocking communicator, whose ncclGroupEnd returns
// once the group is on the stream: nothing is left to settle.
func (t *Transport) group(round int, half, sendStage, recvStage driver.DevicePtr, s driver.Stream) error {
	comm := t.comm
	if t.child != nil {
		comm = t.child
	}
	if err := t.lib.GroupStart(); err != nil {
		return api.WrapNCCL("starting an NCCL group", err)
	}
	var err error
	for _, x := range t.plan.sends {
		if x.round != round || err != nil {
			continue
		}
		from := uintptr(x.input) + uintptr(x.box.Src.Off)
		if x.stage >= 0 {
			from = uintptr(sendStage) + uintptr(x.stage)
		}
		if err = comm.Send(from, uint64(x.box.Bytes()), binding.Uint8, x.peer, uintptr(s)); err != nil {
			err = api.WrapNCCL("sending to rank "+strconv.Itoa(x.peer), err)
		}
	}
	for _, x := range t.plan.recvs {
		if x.round != round || err != nil {
			continue
		}
		into := uintptr(half) + uintptr(x.box.Dst.Off)
		if x.stage >= 0 {
			into = uintptr(recvStage) + uintptr(x.stage)
		}
		if err = comm.Recv(into, uint64(x.box.Bytes()), binding.Uint8, x.peer, uintptr(s)); err != nil {
			err = api.WrapNCCL("receiving from rank "+strconv.Itoa(x.peer), err)
		}
	}
	blocking := t.child != nil
	end := t.endGroup()  // always: the thread's group must close
	if t.failed != nil { // the watchdog aborted the communicators
		return t.failed
	}
	if end != nil && !binding.IsCode(end, binding.InProgress) && err == nil {
		err = api.WrapNCCL("ending an NCCL group", end)
	}
	if err != nil || blocking {
		return err
	}
	t.settling = true
	return t.settle()
}

// inRound reports whether this rank sends or receives anything in round.
func (t *Transport) inRound(round int) bool {
	for _, xs := range [2][]ncclXfer{t.plan.sends, t.plan.recvs} {
		for _, x := range xs {
			if x.round == round {
				return true
			}
		}
	}
	return false
}
