package a2a

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// Some driver calls wait for every kernel running on the device, and hold
// a driver lock while they wait that stalls every launch of the process
// (measured: docs/DESIGN.md, "What waits for what"). Made while one of our
// kernels waits for a peer, such a call waits for that peer, and the peer
// may be stalled the same way: a deadlock that only the timeout breaks.
// So no Comm makes one while another Comm of the process may be running:
//
//   - the kernels of both element widths are loaded once per device, when
//     the first Comm of the process is made there, and unloaded when the
//     last one closes;
//   - what Close must free or unmap goes to a graveyard, released when no
//     Comm of the process on the device has a kernel queued (checked under
//     the launch gate, so none can start meanwhile) or when the last one
//     closes.

// deviceShare is what every Comm of this process on one device shares.
type deviceShare struct {
	ordinal int
	ctx     *driver.Context
	kernels map[int]*kernelSet // by element width

	// gate is held shared by every launch of a Comm kernel and alone by a
	// graveyard release, which runs only when no Comm stream has work.
	gate sync.RWMutex

	mu        sync.Mutex
	refs      int
	comms     map[*Comm]struct{}
	graveyard []release
	deferred  []error // from releases run by tryDrainLater, for the next put
}

// kernelSet is one element width's loaded kernels.
type kernelSet struct {
	file   ptx.File
	widths []int // the file's vector widths, widest first
	module driver.Module
	ops    entryTable
	// captured holds the ops' twins for captured operations, which read
	// the token counts from the live table when a graph replays them.
	captured entryTable
	// general holds the general entries of ptx.GeneralOps: uneven heads,
	// several tensors, strided inputs, HeadAllGather.
	general entryTable
	start   driver.Function // the single-buffer start barrier
	sync    driver.Function // the copy-engine mode's barrier
	close   driver.Function // Close's farewell
}

// release is one deferred driver call.
type release struct {
	what string
	do   func() error
}

var shares = struct {
	mu sync.Mutex
	m  map[int]*deviceShare
}{m: map[int]*deviceShare{}}

// acquireShare returns device ordinal's share with a reference for the
// caller, making it (retaining the context, loading the kernels) if this
// is the process's first Comm there.
func acquireShare(drv *driver.Driver, ordinal int) (*deviceShare, error) {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	if s := shares.m[ordinal]; s != nil {
		s.mu.Lock()
		s.refs++
		s.mu.Unlock()
		return s, nil
	}
	ctx, err := drv.RetainPrimaryContext(ordinal)
	if err != nil {
		return nil, api.WrapDriver("retaining the primary context", err)
	}
	s := &deviceShare{ordinal: ordinal, ctx: ctx, kernels: map[int]*kernelSet{}, refs: 1, comms: map[*Comm]struct{}{}}
	for _, elem := range []int{1, 2} {
		k, err := loadKernels(ctx, elem)
		if err != nil {
			s.teardown()
			return nil, err
		}
		s.kernels[elem] = k
	}
	shares.m[ordinal] = s
	return s, nil
}

// entryTable is a kernelSet's functions of one kind, by operation and
// vector width.
type entryTable = map[ptx.Op]map[int]driver.Function

// loadKernels loads the PTX of elemBytes-wide elements into ctx and looks
// up every entry the transport launches.
func loadKernels(ctx *driver.Context, elemBytes int) (*kernelSet, error) {
	file, image, err := ptx.ForElemBytes(elemBytes)
	if err != nil {
		return nil, err
	}
	if uintptr(file.ArgsBytes) != argsBytes {
		return nil, fmt.Errorf("a2a: kernels take %d parameter bytes, the host passes %d: %w", file.ArgsBytes, argsBytes, ErrNotSupported)
	}
	k := &kernelSet{file: file, widths: file.Widths()}
	if k.module, err = ctx.LoadModule(image); err != nil {
		return nil, api.WrapDriver("loading kernels", err)
	}
	fn := func(e ptx.Entry) (driver.Function, error) {
		f, err := ctx.Function(k.module, string(e))
		if err != nil {
			ctx.UnloadModule(k.module)
			return 0, api.WrapDriver("loading kernels", err)
		}
		return f, nil
	}
	table := func(ops []ptx.Op, name func(ptx.Op, int) ptx.Entry) (entryTable, error) {
		t := entryTable{}
		for _, op := range ops {
			t[op] = map[int]driver.Function{}
			for _, w := range k.widths {
				if t[op][w], err = fn(name(op, w)); err != nil {
					return nil, err
				}
			}
		}
		return t, nil
	}
	if k.ops, err = table(ptx.Ops, ptx.EntryFor); err != nil {
		return nil, err
	}
	if k.captured, err = table(ptx.Ops, ptx.CapturedEntryFor); err != nil {
		return nil, err
	}
	if k.general, err = table(ptx.GeneralOps, ptx.GeneralEntryFor); err != nil {
		return nil, err
	}
	if k.sync, err = fn(ptx.Sync); err != nil {
		return nil, err
	}
	if k.start, err = fn(ptx.Start); err != nil {
		return nil, err
	}
	if k.close, err = fn(ptx.Close); err != nil {
		return nil, err
	}
	return k, nil
}

// hold takes another reference of s for a caller that already holds one
// (a buffer of one of its Comms: see buffer.go); put drops it.
func (s *deviceShare) hold() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

// liveShare returns device ordinal's share with a reference for the
// caller (to drop with put), or nil if the process has no Comm there.
func liveShare(ordinal int) *deviceShare {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	s := shares.m[ordinal]
	if s != nil {
		s.mu.Lock()
		s.refs++
		s.mu.Unlock()
	}
	return s
}

// put drops the caller's reference; the last one releases the graveyard,
// the kernels and the context. Those calls may wait for the device, but no
// Comm of the process is left to be waited for. A caller that is not last
// runs what it can of the graveyard first, while its reference still keeps
// the context: a teardown never overlaps a drain.
func (s *deviceShare) put() error {
	errs := []error{s.tryDrain()}
	shares.mu.Lock()
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(shares.m, s.ordinal)
	}
	s.mu.Unlock()
	shares.mu.Unlock()
	errs = append(errs, s.takeDeferred()...)
	if last {
		errs = append(errs, s.teardown())
	}
	return errors.Join(errs...)
}

// tryDrainLater is tryDrain for callers with nothing to report to (Sync):
// errors wait for the next Close.
func (s *deviceShare) tryDrainLater() { s.deferError(s.tryDrain()) }

// deferError keeps err, if any, for the next put to return.
func (s *deviceShare) deferError(err error) {
	if err != nil {
		s.mu.Lock()
		s.deferred = append(s.deferred, err)
		s.mu.Unlock()
	}
}

func (s *deviceShare) takeDeferred() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.deferred
	s.deferred = nil
	return errs
}

func (s *deviceShare) teardown() error {
	errs := s.runGraveyard()
	for _, k := range s.kernels {
		if err := s.ctx.UnloadModule(k.module); err != nil {
			errs = append(errs, api.WrapDriver("unloading kernels", err))
		}
	}
	s.kernels = nil
	if err := s.ctx.Release(); err != nil {
		errs = append(errs, api.WrapDriver("releasing the context", err))
	}
	return errors.Join(errs...)
}

// add and remove keep the set of live Comms.
func (s *deviceShare) add(c *Comm) {
	s.mu.Lock()
	s.comms[c] = struct{}{}
	s.mu.Unlock()
}

func (s *deviceShare) remove(c *Comm) {
	s.mu.Lock()
	delete(s.comms, c)
	s.mu.Unlock()
}

// bury defers calls that may wait for the device until tryDrain or the
// last put runs them.
func (s *deviceShare) bury(rs ...release) {
	s.mu.Lock()
	s.graveyard = append(s.graveyard, rs...)
	s.mu.Unlock()
}

// hasGraves reports whether anything waits in the graveyard.
func (s *deviceShare) hasGraves() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.graveyard) > 0
}

// tryDrain runs the graveyard if no live Comm has work queued. It holds
// the launch gate, so no Comm kernel can start while the calls run.
func (s *deviceShare) tryDrain() error {
	if !s.hasGraves() {
		return nil
	}
	s.gate.Lock()
	defer s.gate.Unlock()
	// The streams are queried under s.mu: a closing Comm destroys its
	// stream only after leaving the set (remove), so none is destroyed
	// while queried here.
	s.mu.Lock()
	idle := true
	for c := range s.comms {
		if !s.idle(c) {
			idle = false // busy (or broken, which Sync reports): try again later
			break
		}
	}
	s.mu.Unlock()
	if !idle {
		return nil
	}
	return errors.Join(s.runGraveyard()...)
}

// idle reports whether c has no work queued: on its stream, and up to the
// end of its last operation on a caller's stream (c.tail; done if never
// recorded). Called with s.mu held, while c cannot release either.
func (s *deviceShare) idle(c *Comm) bool {
	done, err := s.ctx.StreamDone(c.stream)
	if err != nil || !done {
		return false
	}
	done, err = s.ctx.EventDone(c.tail)
	return err == nil && done
}

func (s *deviceShare) runGraveyard() []error {
	s.mu.Lock()
	rs := s.graveyard
	s.graveyard = nil
	s.mu.Unlock()
	var errs []error
	for _, r := range rs {
		if err := r.do(); err != nil {
			errs = append(errs, api.WrapDriver(r.what, err))
		}
	}
	return errs
}

// commsTouching returns the live Comms, on any device, whose buffer
// overlaps [ptr, ptr+n).
func commsTouching(ptr uintptr, n int64) []*Comm {
	return liveComms(func(c *Comm) bool { return plan.Overlaps(ptr, n, uintptr(c.buf), c.layout.Total) })
}

// liveComms returns the live Comms of the process, on any device, for which
// match holds. match runs with the Comm's share locked, while its buffer
// and layout cannot change.
func liveComms(match func(*Comm) bool) []*Comm {
	shares.mu.Lock()
	all := make([]*deviceShare, 0, len(shares.m))
	for _, s := range shares.m {
		all = append(all, s)
	}
	shares.mu.Unlock()
	var out []*Comm
	for _, s := range all {
		s.mu.Lock()
		for c := range s.comms {
			if match(c) {
				out = append(out, c)
			}
		}
		s.mu.Unlock()
	}
	return out
}
