package a2a

import "github.com/ulysses-go/ulysses/internal/api"

// Mover chooses what moves an operation's bytes between the GPUs
// (Config.Mover): the SM kernels (MoverKernels, the zero value), the copy
// engines (MoverCopyEngines), or either by size (MoverAuto). Every rank
// must choose the same.
type Mover uint8

const (
	// MoverKernels moves them with the SM kernels: every active block
	// stores straight into the peers' buffers (docs/DESIGN.md). The
	// default, and the fastest alone below 64 MiB per rank, and at every
	// size across processes (docs/BENCHMARKS.md).
	MoverKernels Mover = iota
	// MoverCopyEngines moves them with the GPU's copy engines: one pitched
	// copy per peer and tensor (linear where both sides are contiguous),
	// each peer's on a stream of its own, straight to its final place in
	// the peer's buffer, then one block of one SM signals the peers and
	// waits for them, bounded by the timeout like every wait. It leaves
	// the other SMs to the caller's kernels. Operations captured into a
	// graph still take the kernels (a copy's size would be frozen). The
	// Comm holds a stream per peer (at most 8) and an event each; every
	// operation records and waits on them (a few microseconds of host
	// time), and small ones stay on one stream.
	MoverCopyEngines
	// MoverAuto takes the copy engines for an operation whose largest rank
	// moves at least the size from which they were measured as fast as
	// the kernels (64 MiB; HeadAllGather, never measured, keeps the
	// kernels), when every rank of the group is in this process, and the
	// kernels otherwise. Ranks agree without asking: both depend only on
	// what every rank knows alike. It costs what MoverCopyEngines costs.
	MoverAuto
)

// String names the mover: "kernels", "copy-engines" or "auto".
func (m Mover) String() string { return api.Mover(m).String() }
