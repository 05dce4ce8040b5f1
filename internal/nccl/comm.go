package nccl

import (
	"context"
	"fmt"
	"time"
	"unsafe"
)

// UniqueID is an ncclUniqueId: made by one rank (Library.UniqueID) and
// handed to every rank of the communicator.
type UniqueID [128]byte

// UniqueID makes a new id (ncclGetUniqueId). It may open a socket: rank 0
// of the communicator listens on it for the others during InitRank.
func (l *Library) UniqueID() (UniqueID, error) {
	var id UniqueID
	err := l.check("ncclGetUniqueId", 0, l.call(l.fn.getUniqueID, uintptr(unsafe.Pointer(&id))))
	return id, err
}

// Comm is an NCCL communicator of world ranks, this one rank:
// non-blocking unless made with CommOptions.Blocking.
type Comm struct {
	l           *Library
	h           uintptr
	world, rank int
	blocking    bool
	split       *splitSlot   // a split whose handle NCCL has not yet written; nil after
	orphans     []*splitSlot // splits of this Comm released while pending (reapSplits)
	released    bool         // Abort or Destroy has run
}

// CTAPolicy is ncclConfig_t's CTAPolicy (FeatureCTAPolicy): how many
// thread blocks NCCL's kernels take. The zero value leaves NCCL's choice.
type CTAPolicy int32

// The CTA policies: NCCL_CTA_POLICY_DEFAULT, _EFFICIENCY and _ZERO (no
// thread blocks where the copy engines can move the bytes), one above
// NCCL's codes so that the zero value means unset.
const (
	CTAPolicyUnset CTAPolicy = iota
	CTAPolicyDefault
	CTAPolicyEfficiency
	CTAPolicyZero
)

// CommOptions are a communicator's choices beyond the binding's
// defaults; the zero value is a non-blocking communicator with NCCL's
// defaults.
type CommOptions struct {
	// Blocking makes a blocking communicator: InitRank returns once every
	// rank has joined, and GroupEnd launches the group on the calling
	// thread and returns when it is on the stream (no thread of NCCL's in
	// between). Nothing bounds those waits but an Abort from another
	// goroutine.
	Blocking  bool
	CTAPolicy CTAPolicy // needs FeatureCTAPolicy unless unset
}

// InitRank starts joining rank of world to the communicator of id, with
// the calling thread's current CUDA context's device, without waiting for
// the other ranks: the returned Comm may still be connecting (call Wait).
// On an error nothing is left to release.
func (l *Library) InitRank(world, rank int, id UniqueID) (*Comm, error) {
	return l.InitRankOptions(world, rank, id, CommOptions{})
}

// InitRankOptions is InitRank with the choices of opt: with
// opt.Blocking it waits for every rank to join (ncclCommInitRankConfig
// of a blocking config). An option the loaded NCCL lacks is an error
// matching ErrUnsupported, and nothing is made.
func (l *Library) InitRankOptions(world, rank int, id UniqueID, opt CommOptions) (*Comm, error) {
	if world < 1 || rank < 0 || rank >= world || world > 1<<30 || opt.CTAPolicy < CTAPolicyUnset || opt.CTAPolicy > CTAPolicyZero {
		e := &Error{Call: "ncclCommInitRankConfig", Code: InvalidArgument, Text: l.errorString(int32(InvalidArgument))}
		return nil, fmt.Errorf("nccl: rank %d of %d, CTA policy %d: %w", rank, world, opt.CTAPolicy, e)
	}
	cfg, err := l.config(opt)
	if err != nil {
		return nil, err
	}
	arg := *(*idArg)(unsafe.Pointer(&id))
	var h uintptr
	r := Result(l.init(&h, int32(world), arg, int32(rank), cfg))
	if r != Success && r != InProgress {
		err := l.check("ncclCommInitRankConfig", h, r)
		if h != 0 {
			l.call(l.fn.commAbort, h)
		}
		return nil, err
	}
	return &Comm{l: l, h: h, world: world, rank: rank, blocking: opt.Blocking}, nil
}

// config is the ncclConfig_t of opt for the loaded NCCL, or an error
// matching ErrUnsupported for an option it lacks.
func (l *Library) config(opt CommOptions) (*config, error) {
	cfg := newConfig(l.version, opt.Blocking)
	if opt.CTAPolicy != CTAPolicyUnset {
		if err := l.need(FeatureCTAPolicy); err != nil {
			return nil, err
		}
		cfg.ctaPolicy = int32(opt.CTAPolicy - 1)
	}
	return cfg, nil
}

// Blocking reports whether the communicator is a blocking one.
func (c *Comm) Blocking() bool { return c.blocking }

// World and Rank are the communicator's size and this rank.
func (c *Comm) World() int { return c.world }

// Rank is this rank of the communicator.
func (c *Comm) Rank() int { return c.rank }

// AsyncError is the communicator's state (ncclCommGetAsyncError): Success
// once it is ready and nothing failed, InProgress while init or grouped
// work is under way, else the failure.
func (c *Comm) AsyncError() (Result, error) {
	if !c.resolve() {
		return c.splitState()
	}
	var r Result
	if err := c.l.check("ncclCommGetAsyncError", c.h, c.l.call(c.l.fn.commGetAsyncError, c.h, uintptr(unsafe.Pointer(&r)))); err != nil {
		return 0, err
	}
	return r, nil
}

// Wait polls AsyncError every poll until it is no longer InProgress, and
// returns nil for Success, the failure as an *Error, or ctx's error when
// ctx ends first (the communicator is then still in progress: Abort it).
func (c *Comm) Wait(ctx context.Context, poll time.Duration) error {
	for {
		r, err := c.AsyncError()
		if err != nil {
			return err
		}
		if r != InProgress {
			return c.Failure(r)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// Abort ends the communicator at once, whatever is in flight
// (ncclCommAbort), and frees it. The Comm must not be used after. A
// pending split (Split) has no handle yet and is dropped without a call:
// its parent's Abort ends the split and releases what NCCL made of it.
func (c *Comm) Abort() error { return c.release("ncclCommAbort", c.l.fn.commAbort) }

// Destroy frees a communicator whose work is done (ncclCommDestroy). The
// Comm must not be used after; a pending split is dropped as by Abort.
func (c *Comm) Destroy() error { return c.release("ncclCommDestroy", c.l.fn.commDestroy) }

// release is Abort or Destroy: the call fn named name, or, for a pending
// split, none; then the splits released while pending.
func (c *Comm) release(name string, fn uintptr) error {
	if !c.resolve() {
		c.releasePending()
		return nil
	}
	err := c.l.check(name, 0, c.l.call(fn, c.h))
	c.released = true
	c.reapSplits()
	return err
}

// Failure is the *Error of an asynchronous state r that AsyncError
// returned (nil for Success): NCCL's name for r and its last error
// message for the communicator.
func (c *Comm) Failure(r Result) error {
	return c.l.check("ncclCommGetAsyncError", c.h, r)
}
