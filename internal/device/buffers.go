package device

import (
	"sync"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// A Comm's buffer is written through its own address by the kernels of
// the Comms of this process that map it as a peer's (a NewGroup, or ranks
// of one process joined otherwise): their operations' data and signals,
// and their goodbye when they close. Freed when its owner closes, it would
// take a peer that closes later, or still has an operation queued, into
// freed memory, and that kills the CUDA context (a group of four ranks on
// one GPU timed out, and every later call on the device failed with
// CUDA_ERROR_ILLEGAL_ADDRESS). So a buffer is freed
// once its owner and every Comm of this process that maps it have let go,
// and it keeps its device's share (context, graveyard) until then. Over
// CUDA IPC the driver does the same: an exported allocation lives while
// another process has it open.

// ownedBuffer is one Comm's buffer and who holds it.
type ownedBuffer struct {
	alloc     Allocation
	share     *Share   // the owner's device, referenced until the buffer is freed
	rank      int      // the owner's rank
	dataBytes int64    // the owner's data half
	id        [16]byte // the owner's handle ID (handle.Handle.ID)
	refs      int      // the owner and each Comm of this process that maps it
	ownerGone bool     // the owner let go: no new mapping
}

var buffers = struct {
	mu sync.Mutex
	m  map[driver.DevicePtr]*ownedBuffer
}{m: map[driver.DevicePtr]*ownedBuffer{}}

// RegisterBuffer records the new buffer a of rank's Comm on share, with
// a data half of dataBytes and the ID of the Comm's handle, the owner's
// reference, and takes a reference of share for the buffer.
func RegisterBuffer(a Allocation, share *Share, rank int, dataBytes int64, id [16]byte) {
	share.Hold()
	buffers.mu.Lock()
	buffers.m[a.Ptr] = &ownedBuffer{alloc: a, share: share, rank: rank, dataBytes: dataBytes, id: id, refs: 1}
	buffers.mu.Unlock()
}

// BufferAllocation returns the allocation of the buffer at ptr that
// RetainBuffer retained, for a peer of this process that must give its
// device access to it (VMM memory: see internal/transport/ipc).
func BufferAllocation(ptr driver.DevicePtr) (Allocation, bool) {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	if b := buffers.m[ptr]; b != nil {
		return b.alloc, true
	}
	return Allocation{}, false
}

// OwnsBuffer reports whether ptr is the live buffer of the Comm of this
// process of that rank, data half and handle ID, without taking a
// reference: Connect checks every same-process handle with it before it
// maps anything.
func OwnsBuffer(ptr driver.DevicePtr, rank int, dataBytes int64, id [16]byte) bool {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	return liveBuffer(ptr, rank, dataBytes, id) != nil
}

// RetainBuffer takes a peer's reference to the buffer at ptr, or reports
// false when ptr is no buffer of a Comm of this process of that rank,
// data half and handle ID, or its owner has let go of it: a handle's
// pointer is used only when it passes.
func RetainBuffer(ptr driver.DevicePtr, rank int, dataBytes int64, id [16]byte) bool {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	b := liveBuffer(ptr, rank, dataBytes, id)
	if b == nil {
		return false
	}
	b.refs++
	return true
}

// liveBuffer is the buffer at ptr if it is a live buffer of a Comm of
// this process of that rank, data half and handle ID, else nil. Called
// with buffers.mu held.
func liveBuffer(ptr driver.DevicePtr, rank int, dataBytes int64, id [16]byte) *ownedBuffer {
	b := buffers.m[ptr]
	if b == nil || b.ownerGone || b.rank != rank || b.dataBytes != dataBytes || b.id != id {
		return nil
	}
	return b
}

// ReleaseBuffer drops the owner's reference (owner) or a peer's. The last
// one hands the free to the owner's share's graveyard and drops the
// buffer's reference of the share, which runs the graveyard when it can.
func ReleaseBuffer(ptr driver.DevicePtr, owner bool) error {
	buffers.mu.Lock()
	b := buffers.m[ptr]
	if b == nil {
		buffers.mu.Unlock()
		return nil
	}
	b.refs--
	b.ownerGone = b.ownerGone || owner
	last := b.refs == 0
	if last {
		delete(buffers.m, ptr)
	}
	buffers.mu.Unlock()
	if !last {
		return nil
	}
	b.share.Bury(b.alloc.Free(b.share.Ctx))
	return b.share.Put()
}
