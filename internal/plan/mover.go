package plan

import (
	"sync/atomic"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// MoverSignature mixes the mover into an operation's signature, so that
// ranks that disagree on it fail the operation instead of meeting.
func MoverSignature(sig uint32, m api.Mover) uint32 {
	if m == api.MoverKernels {
		return sig
	}
	return fnvAdd(sig, uint64(m)<<32)
}

// AutoCopyBytes is where MoverAuto takes the copy engines for op: the
// bytes per rank from which they are at least as fast as the kernels
// alone with every rank in one process, or 0 where that was never
// measured (its row's Operation.AutoCopyBytes). On 2 x H200 in one
// process, for SendRecvHeads, GatherHeads and AllGather: level at 64 MiB
// (within 0.5 us), 3% faster at 96 MiB, 3.5-4% at 128 MiB, slower below.
// Across processes (IPC-mapped buffers) they were slower at every size,
// and MoverAuto keeps the kernels there. It costs a lookup.
func AutoCopyBytes(op ptx.Op) int64 {
	if n := AutoCopyOverride.Load(); n != 0 {
		return n
	}
	if o := Lookup(op); o != nil {
		return o.AutoCopyBytes
	}
	return 0
}

// AutoCopyOverride, when not 0, replaces AutoCopyBytes for every
// operation: tests set it to make MoverAuto switch between small sizes.
var AutoCopyOverride atomic.Int64
