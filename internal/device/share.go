package device

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Some driver calls wait for every kernel running on the device, and hold
// a driver lock while they wait that stalls every launch of the process
// (measured: docs/DESIGN.md, "What waits for what"). Made while one of our
// kernels waits for a peer, such a call waits for that peer, and the peer
// may be stalled the same way: a deadlock that only the timeout breaks.
// So no Comm makes one while another Comm of the process may be running:
//
//   - the kernels are loaded once per device, when the first Comm of the
//     process is made there, and unloaded when the last one closes: all of
//     them where machine code runs on the device, else the PTX every Comm
//     needs (ptx.FamilyBase), and each other family of PTX the first time
//     an operation needs it, when no Comm has work queued, new operations
//     held back for a while to make it so (load.go);
//   - what Close must free or unmap goes to a graveyard, released when no
//     Comm of the process on the device has a kernel queued (checked under
//     the launch gate, so none can start meanwhile): at a Sync or a Close
//     that finds the Comms idle, by a goroutine that holds new operations
//     back in windows until they are (idle.go), or when the last one
//     closes.

// Share is what every Comm of this process on one device shares.
type Share struct {
	Ordinal int
	Ctx     *driver.Context
	Kernels map[int]*Kernels // by element width
	wire    *moduleSet       // the fp8 wire's kernels; nil below compute capability 9.0
	codes   []Code           // how each file's kernels came, in ptx.Files order; fixed once made
	loadMu  sync.Mutex       // held by a load of PTX after the share is made (load.go)
	// enqueues is held shared by every Comm while it enqueues an
	// operation, and alone by a load's or a release's window (idle.go).
	enqueues sync.RWMutex

	// Gate is held shared by every launch of a Comm kernel and alone by a
	// graveyard release, which runs only when no Comm stream has work.
	Gate sync.RWMutex

	mu        sync.Mutex
	refs      int
	members   map[*Member]struct{}
	graveyard []Release
	releasing int           // releases taken from the graveyard and not yet run
	deferred  []error       // from releases run by TryDrainLater or the drainer, for the next put
	drainer   chan struct{} // closed by the drainer when it ends; nil when none runs
	stopping  chan struct{} // closed by teardown: the drainer must end
}

// Release is one deferred driver call.
type Release struct {
	What string
	Do   func() error
}

var shares = struct {
	mu sync.Mutex
	m  map[int]*Share
}{m: map[int]*Share{}}

// Acquire returns device ordinal's share with a reference for the
// caller, making it (retaining the context, loading the kernels: see
// loadKernels) if this is the process's first Comm there.
func Acquire(drv *driver.Driver, ordinal int) (*Share, error) {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	if s := shares.m[ordinal]; s != nil {
		s.Hold()
		return s, nil
	}
	ctx, err := drv.RetainPrimaryContext(ordinal)
	if err != nil {
		return nil, api.WrapDriver("retaining the primary context", err)
	}
	s := &Share{Ordinal: ordinal, Ctx: ctx, Kernels: map[int]*Kernels{}, refs: 1, members: map[*Member]struct{}{}, stopping: make(chan struct{})}
	if err := s.loadKernels(drv); err != nil {
		return nil, errors.Join(err, s.teardown())
	}
	shares.m[ordinal] = s
	return s, nil
}

// Hold takes another reference of s for a caller that already holds one
// (a buffer of one of its Comms: see buffers.go); Put drops it.
func (s *Share) Hold() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

// Live returns device ordinal's share with a reference for the
// caller (to drop with put), or nil if the process has no Comm there.
func Live(ordinal int) *Share {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	s := shares.m[ordinal]
	if s != nil {
		s.Hold()
	}
	return s
}

// Put drops the caller's reference; the last one releases the graveyard,
// the kernels and the context. Those calls may wait for the device, but no
// Comm of the process is left to be waited for. A caller that is not last
// runs what it can of the graveyard first, while its reference still keeps
// the context: a teardown never overlaps a drain.
func (s *Share) Put() error {
	errs := []error{s.TryDrain()}
	shares.mu.Lock()
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	if last {
		delete(shares.m, s.Ordinal)
	}
	s.mu.Unlock()
	shares.mu.Unlock()
	if last {
		errs = append(errs, s.teardown()) // first: the drainer may defer errors until it ends
	}
	errs = append(errs, s.takeDeferred()...)
	return errors.Join(errs...)
}

// TryDrainLater is tryDrain for callers with nothing to report to (Sync):
// errors wait for the next Close.
func (s *Share) TryDrainLater() { s.DeferError(s.TryDrain()) }

// DeferError keeps err, if any, for the next put to return.
func (s *Share) DeferError(err error) {
	if err != nil {
		s.mu.Lock()
		s.deferred = append(s.deferred, err)
		s.mu.Unlock()
	}
}

func (s *Share) takeDeferred() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	errs := s.deferred
	s.deferred = nil
	return errs
}

func (s *Share) teardown() error {
	s.stopDrainer()
	errs := s.runGraveyard()
	for _, k := range s.Kernels {
		errs = append(errs, k.set.unload()...)
	}
	s.Kernels = nil
	if s.wire != nil {
		errs = append(errs, s.wire.unload()...)
		s.wire = nil
	}
	if err := s.Ctx.Release(); err != nil {
		errs = append(errs, api.WrapDriver("releasing the context", err))
	}
	return errors.Join(errs...)
}

// Member is a user of the share whose queued work the graveyard waits
// for (a Comm): its stream, and the event after its last operation on
// another stream. Both must stay valid while it is a member.
type Member struct {
	Stream driver.Stream
	Tail   driver.Event
	Owner  any // what the member stands for, for Members' callers
	// Enqueuing is set while the member enqueues an operation: from
	// before its first launch until Tail marks the operation's end. On a
	// caller's stream a kernel that waits for peers is queued before Tail
	// is recorded; without this the share would take that window for
	// idleness, and a module load or a release made then waits for the
	// kernel, which waits for a peer that cannot launch meanwhile.
	Enqueuing atomic.Bool
}

// Add records m as a live member of s.
func (s *Share) Add(m *Member) {
	s.mu.Lock()
	s.members[m] = struct{}{}
	s.mu.Unlock()
}

// Remove forgets m, before its stream and tail are destroyed.
func (s *Share) Remove(m *Member) {
	s.mu.Lock()
	delete(s.members, m)
	s.mu.Unlock()
}

// Bury defers calls that may wait for the device until TryDrain, the
// drainer or the last put runs them, and starts the drainer if none runs.
func (s *Share) Bury(rs ...Release) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.graveyard = append(s.graveyard, rs...)
	if s.drainer == nil && len(s.graveyard) > 0 {
		s.drainer = make(chan struct{})
		go s.drain(s.drainer)
	}
}

// drain releases the graveyard in windows (idle.go) while it holds
// anything and the share lives, so that what closed Comms held is freed
// beside Comms that are never idle together; its errors wait for the
// next put. It closes done when it ends: when it finds the graveyard
// empty (under mu, so that a Bury after that starts another), or when
// teardown stops it.
func (s *Share) drain(done chan struct{}) {
	defer close(done)
	inWindows(func(window time.Duration) bool {
		var errs []error
		if !s.whenIdle(window, func() { errs = s.runGraveyard() }) {
			return false
		}
		s.DeferError(errors.Join(errs...))
		s.mu.Lock()
		defer s.mu.Unlock()
		if len(s.graveyard) > 0 {
			return false
		}
		s.drainer = nil
		return true
	}, func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-s.stopping:
			return false
		case <-t.C:
			return true
		}
	})
}

// stopDrainer ends the drainer, if one runs, and waits for it: teardown
// then releases the graveyard itself, and the context must outlive every
// release.
func (s *Share) stopDrainer() {
	close(s.stopping)
	s.mu.Lock()
	done := s.drainer
	s.mu.Unlock()
	if done != nil {
		<-done
	}
}

// hasGraves reports whether anything waits in the graveyard or is being
// released (a TryDrain that sees the drainer's releases under way then
// waits for them under the launch gate: after a Sync of idle Comms,
// everything buried before it has been released).
func (s *Share) hasGraves() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.graveyard) > 0 || s.releasing > 0
}

// TryDrain runs the graveyard if no live Comm has work queued. It holds
// the launch gate, so no Comm kernel can start while the calls run.
func (s *Share) TryDrain() error {
	if !s.hasGraves() {
		return nil
	}
	var errs []error
	s.ifIdle(func() { errs = s.runGraveyard() }) // busy (or broken, which Sync reports): try again later
	return errors.Join(errs...)
}

// ifIdle calls f under the launch gate if no member has work queued (no
// Comm kernel can start while f runs), and reports whether it did.
func (s *Share) ifIdle(f func()) bool {
	s.Gate.Lock()
	defer s.Gate.Unlock()
	if !s.allIdle() {
		return false
	}
	f()
	return true
}

// allIdle reports whether no member has work queued. The streams are
// queried under s.mu: a closing Comm destroys its stream only after
// leaving the set (Remove), so none is destroyed while queried here.
func (s *Share) allIdle() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for m := range s.members {
		if !s.idle(m) {
			return false
		}
	}
	return true
}

// idle reports whether m has no work queued: on its stream, and up to the
// end of its last operation on another stream (its tail; done if never
// recorded). Called with s.mu held, while m cannot release either.
func (s *Share) idle(m *Member) bool {
	if m.Enqueuing.Load() {
		return false
	}
	done, err := s.Ctx.StreamDone(m.Stream)
	if err != nil || !done {
		return false
	}
	done, err = s.Ctx.EventDone(m.Tail)
	return err == nil && done
}

func (s *Share) runGraveyard() []error {
	s.mu.Lock()
	rs := s.graveyard
	s.graveyard = nil
	s.releasing += len(rs)
	s.mu.Unlock()
	var errs []error
	for _, r := range rs {
		if err := r.Do(); err != nil {
			errs = append(errs, api.WrapDriver(r.What, err))
		}
	}
	s.mu.Lock()
	s.releasing -= len(rs)
	s.mu.Unlock()
	return errs
}

// Members returns the live members of the process, on any device, for
// which match holds. match runs with the member's share locked.
func Members(match func(*Member) bool) []*Member {
	shares.mu.Lock()
	all := make([]*Share, 0, len(shares.m))
	for _, s := range shares.m {
		all = append(all, s)
	}
	shares.mu.Unlock()
	var out []*Member
	for _, s := range all {
		s.mu.Lock()
		for m := range s.members {
			if match(m) {
				out = append(out, m)
			}
		}
		s.mu.Unlock()
	}
	return out
}

// LiveShares counts the devices where the process holds a share.
func LiveShares() int {
	shares.mu.Lock()
	defer shares.mu.Unlock()
	return len(shares.m)
}

// SyncAfter waits for stream s after work enqueued on it that returned
// err, and gives a failure the package's prefix: what the memory helpers
// and the transports' short copies do before they return.
func SyncAfter(ctx *driver.Context, s driver.Stream, what string, err error) error {
	if err == nil {
		err = ctx.StreamSynchronize(s)
	}
	if err != nil {
		return api.WrapDriver(what, err)
	}
	return nil
}
