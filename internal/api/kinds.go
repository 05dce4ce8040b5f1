package api

// Mover chooses what moves an operation's bytes between the GPUs.
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
	// the kernels, when every rank of the group is in this process, and
	// the kernels otherwise (internal/plan.AutoCopyBytes). Ranks agree without asking:
	// both depend only on what every rank knows alike. It costs what
	// MoverCopyEngines costs.
	MoverAuto
)

func (m Mover) String() string {
	switch m {
	case MoverKernels:
		return "kernels"
	case MoverCopyEngines:
		return "copy-engines"
	case MoverAuto:
		return "auto"
	}
	return "Mover(?)"
}

// Transport chooses how a Comm's operations reach the peers: CUDA IPC
// (the SM kernels or the copy engines writing into the peers' buffers,
// one host with peer access between every pair of GPUs) or NCCL (any
// GPUs, any hosts NCCL reaches). Every rank must ask for the same one:
// Connect refuses a group that disagrees (ErrHandle).
type Transport uint8

const (
	// TransportIPC, the zero value, maps every peer's buffer over CUDA IPC
	// (or by pointer within one process) and moves bytes with the SM
	// kernels or the copy engines (Config.Mover): the fastest where it
	// works, and the only transport that can be captured into CUDA graphs.
	// It needs every rank on one host and peer access between every pair
	// of GPUs (Connect fails with ErrNoPeerAccess otherwise), and loads no
	// NCCL.
	TransportIPC Transport = iota
	// TransportNCCL moves bytes with NCCL's grouped sends and receives,
	// loaded at run time (libnccl.so.2, or $ULYSSES_LIBNCCL): it reaches
	// GPUs without peer access and other hosts. Connect needs rank 0's
	// NCCL unique id (ConnectNCCL; Join carries it in a second exchange),
	// and fails with ErrNoNCCL where NCCL cannot be loaded. Boxes that are
	// not contiguous on one side cost a device copy into or out of a
	// staging area (two data halves more of device memory); waits poll
	// the device instead of blocking, and operations cannot be captured
	// into CUDA graphs (ErrNotSupported).
	TransportNCCL
	// TransportAuto takes IPC when every rank is on one host (the handles'
	// host identities) and every pair of their GPUs has peer access both
	// ways (each rank's handle lists the GPUs its own can reach), NCCL
	// otherwise: a verdict every rank reaches alike from the handles
	// alone. It costs what the chosen transport costs, and loads NCCL
	// only when NCCL is chosen (NeedsNCCL tells New+Connect users which).
	TransportAuto
)

// transportNames names every kind of Transport, by value: the one list of
// them. A kind's value is its byte in the handle's wire format
// (internal/handle), so a new one takes the next value and none changes.
var transportNames = [...]string{TransportIPC: "ipc", TransportNCCL: "nccl", TransportAuto: "auto"}

// String names the transport as Config and the command line spell it.
func (t Transport) String() string {
	if !t.Known() {
		return "Transport(?)"
	}
	return transportNames[t]
}

// Known reports whether t is a kind this library has: one that
// internal/transport builds (every kind but TransportAuto registers a
// factory there) or TransportAuto. It costs a comparison.
func (t Transport) Known() bool { return int(t) < len(transportNames) }
