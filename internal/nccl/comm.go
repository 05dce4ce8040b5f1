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

// Comm is a non-blocking NCCL communicator of world ranks, this one rank.
type Comm struct {
	l           *Library
	h           uintptr
	world, rank int
}

// InitRank starts joining rank of world to the communicator of id, with
// the calling thread's current CUDA context's device, without waiting for
// the other ranks: the returned Comm may still be connecting (call Wait).
// On an error nothing is left to release.
func (l *Library) InitRank(world, rank int, id UniqueID) (*Comm, error) {
	if world < 1 || rank < 0 || rank >= world || world > 1<<30 {
		e := &Error{Call: "ncclCommInitRankConfig", Code: InvalidArgument, Text: l.errorString(int32(InvalidArgument))}
		return nil, fmt.Errorf("nccl: rank %d of %d: %w", rank, world, e)
	}
	cfg := &config{
		size: uint64(unsafe.Sizeof(config{})), magic: configMagic, version: configVersion, blocking: 0,
		cgaClusterSize: undefInt, minCTAs: undefInt, maxCTAs: undefInt, splitShare: undefInt,
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
	return &Comm{l: l, h: h, world: world, rank: rank}, nil
}

// World and Rank are the communicator's size and this rank.
func (c *Comm) World() int { return c.world }

// Rank is this rank of the communicator.
func (c *Comm) Rank() int { return c.rank }

// AsyncError is the communicator's state (ncclCommGetAsyncError): Success
// once it is ready and nothing failed, InProgress while init or grouped
// work is under way, else the failure.
func (c *Comm) AsyncError() (Result, error) {
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
// (ncclCommAbort), and frees it. The Comm must not be used after.
func (c *Comm) Abort() error {
	return c.l.check("ncclCommAbort", 0, c.l.call(c.l.fn.commAbort, c.h))
}

// Destroy frees a communicator whose work is done (ncclCommDestroy). The
// Comm must not be used after.
func (c *Comm) Destroy() error {
	return c.l.check("ncclCommDestroy", 0, c.l.call(c.l.fn.commDestroy, c.h))
}

// Failure is the *Error of an asynchronous state r that AsyncError
// returned (nil for Success): NCCL's name for r and its last error
// message for the communicator.
func (c *Comm) Failure(r Result) error {
	return c.l.check("ncclCommGetAsyncError", c.h, r)
}
