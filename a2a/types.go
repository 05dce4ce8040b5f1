package a2a

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// The types below are defined in internal/api, under the packages that
// plan and move the operations, which share them; these are their names
// for users.

// Tensor is a row-major device tensor of shape [B, T, H, D]. Ptr is a
// device address valid in the Comm's CUDA context (the device's primary
// context, which the CUDA runtime and most bindings share).
//
// RowStride is the number of elements from one token to the next; 0 means
// H*D (contiguous). A larger stride makes the tensor a view into a wider
// one, such as q, k or v of a fused projection [B, T, 3, H, D] (RowStride
// 3*H*D, k at Ptr + H*D elements): the head operations read such inputs
// in place, and the Into forms write such outputs row by row (one
// cuMemcpy2DAsync). Device's helpers want tensors contiguous.
type Tensor = api.Tensor

// DType is the element type of a tensor. The collectives only move bytes,
// so types of the same width share one kernel.
type DType = api.DType

// The supported element types.
const (
	BFloat16   = api.BFloat16   // bfloat16, 2 bytes
	Float16    = api.Float16    // IEEE half, 2 bytes
	Float8E4M3 = api.Float8E4M3 // fp8 e4m3, 1 byte
	Float8E5M2 = api.Float8E5M2 // fp8 e5m2, 1 byte
)

// ParseDType reads a name as DType's String prints it ("fp8" is taken as
// fp8e4m3; "bfloat16", "float16", "half", "float8_e4m3fn" and "float8_e5m2"
// too).
func ParseDType(s string) (DType, error) { return api.ParseDType(s) }

// Errors that errors.Is matches through the context the library wraps them
// in. Their text has no package prefix: every error the package returns
// reads "a2a: <what happened>: <sentinel text>", with the prefix once.
var (
	ErrConfig       = api.ErrConfig
	ErrDType        = api.ErrDType
	ErrShape        = api.ErrShape
	ErrTokens       = api.ErrTokens
	ErrCapacity     = api.ErrCapacity
	ErrAlignment    = api.ErrAlignment
	ErrAliased      = api.ErrAliased
	ErrHandle       = api.ErrHandle
	ErrNotConnected = api.ErrNotConnected
	ErrConnected    = api.ErrConnected
	ErrClosed       = api.ErrClosed
	ErrBroken       = api.ErrBroken
	ErrTimeout      = api.ErrTimeout
	ErrNoPeerAccess = api.ErrNoPeerAccess
	ErrNoDriver     = api.ErrNoDriver
	ErrNoDevice     = api.ErrNoDevice
	// ErrNoNCCL: NCCL was asked for (TransportNCCL) or chosen
	// (TransportAuto) and cannot be loaded, or is older than 2.14; the
	// error keeps the dynamic loader's text.
	ErrNoNCCL = api.ErrNoNCCL
	// ErrNCCL: NCCL reported a failure of a Comm over TransportNCCL (a
	// peer's process gone or the network failing, say); the error keeps
	// NCCL's words, and the Comm is broken.
	ErrNCCL         = api.ErrNCCL
	ErrNotSupported = api.ErrNotSupported
	ErrTokensNotSet = api.ErrTokensNotSet
	ErrPeerClosed   = api.ErrPeerClosed
	ErrOpMismatch   = api.ErrOpMismatch
	ErrStream       = api.ErrStream
	ErrAborted      = api.ErrAborted
	ErrOddGraph     = api.ErrOddGraph
)

// Phase names the barrier a timed-out rank was waiting in: PhaseStart
// before any write into peers (waiting for a peer to reach the
// operation), PhaseEnd after the writes (waiting for a peer's writes to
// land), PhaseClose in Close (waiting for a peer to say goodbye).
type Phase = api.Phase

// Barrier phases, as the kernels number them.
const (
	PhaseStart = api.PhaseStart
	PhaseEnd   = api.PhaseEnd
	PhaseClose = api.PhaseClose
)

// TimeoutError reports a barrier that a peer never reached: the rank that
// waited, the peer it waited for (-1 over NCCL, which does not say), the
// phase, the operation's sequence number, the block and the bound. The
// Comm that returns it is broken: every later operation returns
// ErrBroken, and Close still releases everything. It matches ErrTimeout.
type TimeoutError = api.TimeoutError

// PeerClosedError reports an operation that cannot complete because a peer
// closed its Comm (or was closing it) without taking part. The Comm that
// returns it is broken. It matches ErrPeerClosed.
type PeerClosedError = api.PeerClosedError

// MismatchError reports ranks that ran different operations (or the same
// one on different shapes or token counts) at the same point of their
// sequence: the output would be wrong, so it is an error instead. Every
// rank involved gets one; the Comm is broken. It matches ErrOpMismatch.
type MismatchError = api.MismatchError

// Mover chooses what moves an operation's bytes between the GPUs.
type Mover = api.Mover

const (
	// MoverKernels moves them with the SM kernels: every active block
	// stores straight into the peers' buffers (docs/DESIGN.md). The
	// default, and the fastest alone below 64 MiB per rank, and at every
	// size across processes (docs/BENCHMARKS.md).
	MoverKernels = api.MoverKernels
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
	MoverCopyEngines = api.MoverCopyEngines
	// MoverAuto takes the copy engines for an operation whose largest rank
	// moves at least the size from which they were measured as fast as
	// the kernels, when every rank of the group is in this process, and
	// the kernels otherwise (internal/plan.AutoCopyBytes). Ranks agree without asking:
	// both depend only on what every rank knows alike. It costs what
	// MoverCopyEngines costs.
	MoverAuto = api.MoverAuto
)

// Transport chooses how a Comm's operations reach the peers: CUDA IPC
// (the SM kernels or the copy engines writing into the peers' buffers,
// one host with peer access between every pair of GPUs) or NCCL (any
// GPUs, any hosts NCCL reaches). Every rank must ask for the same one:
// Connect refuses a group that disagrees (ErrHandle).
type Transport = api.Transport

const (
	// TransportIPC, the zero value, maps every peer's buffer over CUDA IPC
	// (or by pointer within one process) and moves bytes with the SM
	// kernels or the copy engines (Config.Mover): the fastest where it
	// works, and the only transport that can be captured into CUDA graphs.
	// It needs every rank on one host and peer access between every pair
	// of GPUs (Connect fails with ErrNoPeerAccess otherwise), and loads no
	// NCCL.
	TransportIPC = api.TransportIPC
	// TransportNCCL moves bytes with NCCL's grouped sends and receives,
	// loaded at run time (libnccl.so.2, or $ULYSSES_LIBNCCL): it reaches
	// GPUs without peer access and other hosts. Connect needs rank 0's
	// NCCL unique id (ConnectNCCL; Join carries it in a second exchange),
	// and fails with ErrNoNCCL where NCCL cannot be loaded. Boxes that are
	// not contiguous on one side cost a device copy into or out of a
	// staging area (two data halves more of device memory); waits poll
	// the device instead of blocking, and operations cannot be captured
	// into CUDA graphs (ErrNotSupported).
	TransportNCCL = api.TransportNCCL
	// TransportAuto takes IPC when every rank is on one host (the handles'
	// host identities) and every pair of their GPUs has peer access both
	// ways (each rank's handle lists the GPUs its own can reach), NCCL
	// otherwise: a verdict every rank reaches alike from the handles
	// alone. It costs what the chosen transport costs, and loads NCCL
	// only when NCCL is chosen (NeedsNCCL tells New+Connect users which).
	TransportAuto = api.TransportAuto
)

// Wire chooses how a Comm's 16-bit elements cross between the GPUs:
// exactly (the zero value), or as fp8 codes with one power-of-two scale per
// row of D elements (one head of one token), which moves about half the
// bytes and loses precision. See Config.Wire.
type Wire = api.Wire

const (
	// WireExact moves the elements as they are: the output equals the input.
	WireExact = api.WireExact
	// WireE4M3 sends each row as E4M3 codes scaled by 2^k, the smallest
	// power of two that brings the row's largest finite magnitude amax
	// within 448: every element comes back within amax/16 (half an E4M3
	// step at the row's top binade), nearer for smaller elements.
	WireE4M3 = api.WireE4M3
	// WireE5M2 sends E5M2 codes (max 57344): within amax/8 per row, with
	// more range for small elements beside a large one.
	WireE5M2 = api.WireE5M2
)

// ParseWire reads a wire's name as Wire.String prints it, in any case.
func ParseWire(s string) (Wire, error) { return api.ParseWire(s) }

// HeadRange returns the heads rank holds when heads are split over world
// ranks (SendRecvHeads' output, GatherHeads' and HeadAllGather's input):
// count heads from first. Each rank gets heads/world and the first
// heads%world ranks one more, so counts differ by at most one and the
// ranges tile [0, heads) in rank order. It costs nothing; with heads
// divisible by world it is rank*heads/world, heads/world. A rank outside
// [0, world) or negative heads give 0, 0.
func HeadRange(heads, world, rank int) (first, count int) { return plan.HeadRange(heads, world, rank) }

// HandleSize is the length of the bytes Comm.Handle returns.
const HandleSize = handle.Size
