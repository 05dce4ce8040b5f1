package a2a

import (
	"errors"

	"github.com/ulysses-go/ulysses/internal/nccl"
)

// loadNCCL opens NCCL: nccl.Load, the process's one library
// ($ULYSSES_LIBNCCL or libnccl.so.2). A variable so that tests can hand
// the package a stub of their own.
var loadNCCL = nccl.Load

// ncclError is an NCCL failure seen from this package: its text says what
// a2a was doing and keeps NCCL's (or the dynamic loader's) words, and
// errors.Is matches both the binding's error and ErrNoNCCL where NCCL
// could not be loaded.
type ncclError struct {
	what     string
	sentinel error // ErrNoNCCL or nil
	err      error
}

func (e *ncclError) Error() string { return "a2a: " + e.what + ": " + e.err.Error() }

func (e *ncclError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.err}
	}
	return []error{e.sentinel, e.err}
}

// wrapNCCL gives an error of internal/nccl this package's prefix, and
// ErrNoNCCL when the library is missing or too old.
func wrapNCCL(what string, err error) error {
	e := &ncclError{what: what, err: err}
	if errors.Is(err, nccl.ErrNoNCCL) || errors.Is(err, nccl.ErrSymbolMissing) {
		e.sentinel = ErrNoNCCL
	}
	return e
}

// NCCLID is an NCCL unique id: made by rank 0 (NewNCCLID) and passed to
// ConnectNCCL on every rank of a group that uses TransportNCCL. It names
// a listening socket on rank 0's host that the ranks meet at.
type NCCLID [128]byte

// NewNCCLID loads NCCL (once per process; ErrNoNCCL where it cannot be)
// and makes a unique id for one group (ncclGetUniqueId: it opens a
// socket on this host that the group's ranks connect to while they
// connect). Call it on rank 0 only, and only for a group that needs NCCL
// (NeedsNCCL); Join does both itself.
func NewNCCLID() (NCCLID, error) {
	l, err := loadNCCL()
	if err != nil {
		return NCCLID{}, wrapNCCL("loading NCCL", err)
	}
	id, err := l.UniqueID()
	if err != nil {
		return NCCLID{}, wrapNCCL("making an NCCL unique id", err)
	}
	return NCCLID(id), nil
}
