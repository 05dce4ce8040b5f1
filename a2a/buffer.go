package a2a

import (
	"sync"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// A Comm's buffer is written through its own address by the kernels of
// the Comms of this process that map it as a peer's (a NewGroup, or ranks
// of one process joined otherwise): their operations' data and signals,
// and their goodbye when they close. Freed when its owner closes, it would
// take a peer that closes later, or still has an operation queued, into
// freed memory, and that kills the CUDA context (GPU-RUNS.md run 45: a
// group of four ranks on one GPU timed out, and every later call on the
// device failed with CUDA_ERROR_ILLEGAL_ADDRESS). So a buffer is freed
// once its owner and every Comm of this process that maps it have let go,
// and it keeps its device's share (context, graveyard) until then. Over
// CUDA IPC the driver does the same: an exported allocation lives while
// another process has it open.

// ownedBuffer is one Comm's buffer and who holds it.
type ownedBuffer struct {
	share     *deviceShare // the owner's device, referenced until the buffer is freed
	owner     bufferOwner  // who owns it: a peer's handle must name the same
	refs      int          // the owner and each Comm of this process that maps it
	ownerGone bool         // the owner let go: no new mapping
}

// bufferOwner is what a handle says of the Comm whose buffer it names:
// its identity (handle.Comm), its rank and its data half. A same-process
// handle's pointer is used only if all three match the buffer's owner.
type bufferOwner struct {
	id        [16]byte
	rank      int
	dataBytes int64
}

var buffers = struct {
	mu sync.Mutex
	m  map[driver.DevicePtr]*ownedBuffer
}{m: map[driver.DevicePtr]*ownedBuffer{}}

// registerBuffer records the new buffer at ptr of owner's Comm on share,
// with the owner's reference, and takes a reference of share for the
// buffer.
func registerBuffer(ptr driver.DevicePtr, share *deviceShare, owner bufferOwner) {
	share.hold()
	buffers.mu.Lock()
	buffers.m[ptr] = &ownedBuffer{share: share, owner: owner, refs: 1}
	buffers.mu.Unlock()
}

// ownsBuffer reports whether ptr is the live buffer of the Comm of this
// process that owner describes (not another Comm's, of another group or
// not, nor one whose owner has let go), without taking a reference.
func ownsBuffer(ptr driver.DevicePtr, owner bufferOwner) bool {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	return buffers.m[ptr].ownedBy(owner)
}

// ownedBy reports whether b (nil: no buffer) is owner's and still held by
// it.
func (b *ownedBuffer) ownedBy(owner bufferOwner) bool {
	return b != nil && !b.ownerGone && b.owner == owner
}

// retainBuffer takes a peer's reference to the buffer at ptr, or reports
// false unless ownsBuffer(ptr, owner): a handle's pointer is used only
// when it passes.
func retainBuffer(ptr driver.DevicePtr, owner bufferOwner) bool {
	buffers.mu.Lock()
	defer buffers.mu.Unlock()
	b := buffers.m[ptr]
	if !b.ownedBy(owner) {
		return false
	}
	b.refs++
	return true
}

// releaseBuffer drops the owner's reference (owner) or a peer's. The last
// one hands the free to the owner's share's graveyard and drops the
// buffer's reference of the share, which runs the graveyard when it can.
func releaseBuffer(ptr driver.DevicePtr, owner bool) error {
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
	ctx := b.share.ctx
	b.share.bury(release{"freeing the buffer", func() error { return ctx.MemFree(ptr) }})
	return b.share.put()
}
