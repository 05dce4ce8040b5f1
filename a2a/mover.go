package a2a

// Mover chooses what moves an operation's bytes between the GPUs.
type Mover uint8

const (
	// MoverKernels moves them with the SM kernels: every active block
	// stores straight into the peers' buffers (docs/DESIGN.md). The
	// fastest at every size measured so far, and the default.
	MoverKernels Mover = iota
	// MoverCopyEngines moves them with the GPU's copy engines: one pitched
	// copy (cuMemcpy3DAsync) per peer and tensor, straight to its final
	// place in the peer's buffer, then one block of one SM signals the
	// peers and waits for them, bounded by the timeout like every wait.
	// It leaves the SMs to the caller's kernels. Operations captured into
	// a graph still take the kernels (a copy's size would be frozen).
	// Not yet measured on a GPU.
	MoverCopyEngines
)

func (m Mover) String() string {
	switch m {
	case MoverKernels:
		return "kernels"
	case MoverCopyEngines:
		return "copy-engines"
	}
	return "Mover(?)"
}

// moverSignature mixes the mover into an operation's signature, so that
// ranks that disagree on it fail the operation instead of meeting.
func moverSignature(sig uint32, m Mover) uint32 {
	if m == MoverKernels {
		return sig
	}
	return fnvAdd(sig, uint64(m)<<32)
}
