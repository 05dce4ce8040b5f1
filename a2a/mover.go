package a2a

import (
	"sync/atomic"

	"github.com/ulysses-go/ulysses/ptx"
)

// moverSignature mixes the mover into an operation's signature, so that
// ranks that disagree on it fail the operation instead of meeting.
func moverSignature(sig uint32, m Mover) uint32 {
	if m == MoverKernels {
		return sig
	}
	return fnvAdd(sig, uint64(m)<<32)
}

// autoCopyBytes is where MoverAuto takes the copy engines for op: the
// bytes per rank from which they are at least as fast as the kernels
// alone with every rank in one process, or 0 where that was never
// measured. GPU-RUNS.md run 38, 2 x H200, one process: level at 64 MiB
// (within 0.5 us), 3% faster at 96 MiB, 3.5-4% at 128 MiB, slower below.
// Across processes (IPC-mapped buffers) they were slower at every size
// (runs 35-37), and MoverAuto keeps the kernels there.
func autoCopyBytes(op ptx.Op) int64 {
	if n := autoCopyOverride.Load(); n != 0 {
		return n
	}
	switch op {
	case ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather:
		return 64 << 20
	}
	return 0
}

// autoCopyOverride, when not 0, replaces autoCopyBytes for every
// operation: tests set it to make MoverAuto switch between small sizes.
var autoCopyOverride atomic.Int64

// moverFor is what moves an operation of op whose largest rank walks
// groupBytes: the kernels when captured, else the Config's choice, with
// MoverAuto resolved as autoCopyBytes says.
func (t *smTransport) moverFor(op ptx.Op, groupBytes int64, captured bool) Mover {
	switch {
	case captured:
		return MoverKernels
	case t.mover != MoverAuto:
		return t.mover
	}
	if least := autoCopyBytes(op); t.oneProcess && least > 0 && groupBytes >= least {
		return MoverCopyEngines
	}
	return MoverKernels
}
