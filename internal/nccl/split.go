package nccl

import (
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Split makes a communicator of the same ranks as c, in the same order,
// with the choices of opt (ncclCommSplit of color 0, key = c's rank): a
// collective, every rank of c calls it. On a non-blocking c it returns at
// once with the new Comm pending: NCCL makes it on a thread of its own
// and writes its handle when that ends, c reports InProgress meanwhile,
// and the new Comm's AsyncError reports InProgress until the handle has
// come (c must have nothing in progress; use the new Comm for nothing
// but AsyncError, Wait, Abort and Destroy until it reports Success). The
// new Comm is released on its own (Abort or Destroy), before c. It needs
// FeatureSplit, and an option the loaded NCCL lacks is an error matching
// ErrUnsupported; on an error nothing is made.
func (c *Comm) Split(opt CommOptions) (*Comm, error) {
	if err := c.l.need(FeatureSplit); err != nil {
		return nil, err
	}
	cfg, err := c.l.config(opt)
	if err != nil {
		return nil, err
	}
	s := newSplitSlot(c)
	r := c.l.call(c.l.fn.commSplit, c.h, 0, uintptr(c.rank), uintptr(unsafe.Pointer(s.h)), uintptr(unsafe.Pointer(cfg)))
	if r != Success && r != InProgress {
		err := c.l.check("ncclCommSplit", c.h, r)
		s.reap(c.l) // NCCL may not have let go of the slot
		return nil, err
	}
	k := &Comm{l: c.l, world: c.world, rank: c.rank, blocking: opt.Blocking, split: s}
	k.resolve()
	return k, nil
}

// splitSlot is where NCCL writes a split's handle. On a non-blocking
// parent it writes it from its own thread once the child's init ends
// (or fails), long after ncclCommSplit returned, so the word is pinned
// until it has been read, and kept pinned for ever (a few bytes) when no
// one is left to read it.
type splitSlot struct {
	parent *Comm
	h      *uintptr
	pin    runtime.Pinner
}

// pinnedSlots holds every slot that is pinned, so that none becomes
// garbage while pinned (the runtime would panic: a Pinner must be
// unpinned before it is collected), whatever becomes of its Comms.
var pinnedSlots = struct {
	sync.Mutex
	m map[*splitSlot]struct{}
}{m: map[*splitSlot]struct{}{}}

func newSplitSlot(parent *Comm) *splitSlot {
	s := &splitSlot{parent: parent, h: new(uintptr)}
	s.pin.Pin(s.h)
	pinnedSlots.Lock()
	pinnedSlots.m[s] = struct{}{}
	pinnedSlots.Unlock()
	return s
}

// load reads the handle NCCL wrote, 0 before it has.
func (s *splitSlot) load() uintptr { return atomic.LoadUintptr(s.h) }

// reap aborts the communicator NCCL wrote into a slot no Comm will
// take, and lets the slot go; a slot NCCL has not written stays pinned.
func (s *splitSlot) reap(l *Library) {
	if h := s.load(); h != 0 {
		l.call(l.fn.commAbort, h)
		s.unpin()
	}
}

// unpin lets the slot go once NCCL has written it (it writes once).
func (s *splitSlot) unpin() {
	s.pin.Unpin()
	pinnedSlots.Lock()
	delete(pinnedSlots.m, s)
	pinnedSlots.Unlock()
}

// resolve takes the handle of a pending split once NCCL has written it,
// unpinning its slot, and reports whether the Comm has its handle.
func (c *Comm) resolve() bool {
	if c.split == nil {
		return true
	}
	h := c.split.load()
	if h == 0 {
		return false
	}
	c.h = h
	c.split.unpin()
	c.split = nil
	return true
}

// splitState is AsyncError of a pending split: in progress while the
// parent is (NCCL runs the child's init as the parent's work), the
// child's own state once the handle has come, the parent's failure where
// that failed, and an error if the parent is done and no handle came.
// The parent is read first: NCCL writes the handle before it marks the
// parent done.
func (c *Comm) splitState() (Result, error) {
	r, err := c.split.parent.AsyncError()
	switch {
	case err != nil || r == InProgress:
		return r, err
	case c.resolve():
		return c.AsyncError()
	case r != Success:
		return r, nil
	}
	return 0, &Error{Call: "ncclCommSplit", Code: InternalError, Text: "the split ended without a communicator"}
}

// releasePending ends a pending split's Comm without a call: there is no
// handle to give NCCL. Its parent keeps the slot: aborting the parent
// ends the split's init, after which NCCL has written the failed child,
// and the parent's Abort or Destroy releases that (reapSplits). Where the
// parent was released first, that has happened: the child is reaped now.
func (c *Comm) releasePending() {
	p := c.split.parent
	p.orphans = append(p.orphans, c.split)
	c.split = nil
	if p.released {
		p.reapSplits()
	}
}

// reapSplits, after c's own Abort or Destroy, reaps each split released
// while pending.
func (c *Comm) reapSplits() {
	for _, s := range c.orphans {
		s.reap(c.l)
	}
	c.orphans = nil
}
