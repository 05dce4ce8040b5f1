package nccl

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/dl"
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

// idArg is a UniqueID as purego passes a struct by value: scalar fields,
// so the 128 bytes are sixteen words.
type idArg struct {
	w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 uint64
}

// initFunc calls ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
// ncclUniqueId id, int rank, ncclConfig_t *config).
type initFunc func(comm *uintptr, nranks int32, id idArg, rank int32, config *config) int32

// bindInit wraps ncclCommInitRankConfig with purego.RegisterFunc, which
// lays the by-value 128-byte id out as the C ABI wants (on the stack under
// System V amd64, as a pointer to a copy under AAPCS64), as
// internal/driver does for cuIpcOpenMemHandle. Where purego cannot pass
// structs it panics; that is returned as an error.
func bindInit(fn uintptr) (f initFunc, err error) {
	if err := dl.RegisterFunc(&f, fn, "ncclCommInitRankConfig, whose id is passed by value,"); err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	return f, nil
}

// config is the leading part of ncclConfig_t as NCCL 2.14 defined it:
// NCCL reads the fields up to size and defaults the rest, and reads
// blocking only from configs of version 2.14 or later.
type config struct {
	size                             uint64
	magic, version                   uint32
	blocking                         int32
	cgaClusterSize, minCTAs, maxCTAs int32
	_                                uintptr // netName: NULL, NCCL's choice
	splitShare                       int32
	_                                int32
}

const (
	configMagic   = 0xcafebeef
	configVersion = 21400
	undefInt      = -1 << 31 // NCCL_CONFIG_UNDEF_INT
)

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
