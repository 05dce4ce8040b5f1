package a2a

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

// loadNCCL opens NCCL: nccl.Load, the process's one library
// ($ULYSSES_LIBNCCL or libnccl.so.2). A variable so that tests can hand
// the package a stub of their own.
var loadNCCL = nccl.Load

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
		return NCCLID{}, api.WrapNCCL("loading NCCL", err)
	}
	id, err := l.UniqueID()
	if err != nil {
		return NCCLID{}, api.WrapNCCL("making an NCCL unique id", err)
	}
	return NCCLID(id), nil
}

// NCCLVersion loads NCCL as TransportNCCL would (once per process:
// $ULYSSES_LIBNCCL or libnccl.so.2) and returns its version code (22809
// for 2.28.9) and the path it was opened from; ErrNoNCCL where it cannot
// be loaded. It makes no communicator.
func NCCLVersion() (version int, path string, err error) {
	l, err := loadNCCL()
	if err != nil {
		return 0, "", api.WrapNCCL("loading NCCL", err)
	}
	return l.Version(), l.Path(), nil
}
