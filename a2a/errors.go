package a2a

import (
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Errors that errors.Is matches through the context the library wraps them
// in. Their text has no package prefix: every error the package returns
// reads "a2a: <what happened>: <sentinel text>", with the prefix once.
// Each is the value internal/api's layers return, so errors.Is matches an
// error from any of them.
var (
	// ErrConfig: a Config that New (or Join, NewGroup) refuses (a rank
	// outside the world, a world over MaxWorldSize, a non-positive
	// capacity, an unknown Mover, Transport, Sharing or Wire, a lossy wire
	// with the copy engines or for fp8), a bad argument of a call that
	// takes no tensor (a non-positive SetTimeout, a device ordinal not
	// visible, a nil Exchanger, CaptureGraph without Comms), a name that
	// ParseSharing or ParseWire does not know, or a call that the Comm's
	// state refuses (Connect of a group that needs NCCL, an operation on
	// another stream while CaptureGraph records the Comm).
	ErrConfig = api.ErrConfig
	// ErrDType: an unknown element type (in a Config, to Device.Alloc or
	// ParseDType), or a tensor whose type is not the Comm's.
	ErrDType = api.ErrDType
	// ErrShape: a tensor whose shape does not fit the operation (the
	// heads not split as HeadRange says, packed tensors of different
	// shapes, an Into destination of the wrong shape, 0 or over 4 packed
	// tensors, fewer heads than ranks), a negative dimension given to
	// Device.Alloc, or a host slice whose length is not the tensor's
	// bytes (Upload, DownloadInto).
	ErrShape = api.ErrShape
	// ErrTokens: token counts that SetRankTokens refuses (not one per
	// rank, a negative count, over 2^30 tokens in all), or an operation's
	// input whose token dimension is not what the counts give its rank
	// (or, for the gathers, the group).
	ErrTokens = api.ErrTokens
	// ErrCapacity: an operation whose output does not fit the Comm's
	// buffer (raise Config.MaxTokens or MaxTensors), one whose size is
	// over the kernels' 32-bit limits, or counts given to SetRankTokens
	// that a captured operation's input cannot hold.
	ErrCapacity = api.ErrCapacity
	// ErrAlignment: a tensor whose address is not a multiple of its
	// element size.
	ErrAlignment = api.ErrAlignment
	// ErrAliased: an operation's input in the part of the Comm's buffer
	// that its peers write during the operation, or an Into destination
	// in the Comm's buffer.
	ErrAliased = api.ErrAliased
	// ErrHandle: handles that Connect (or NeedsNCCL) refuses: not one per
	// rank in rank order, malformed or of another version, disagreeing on
	// the world size, element width, capacity, SingleBuffer or transport,
	// not this rank's own at its index, or naming memory this process
	// cannot map.
	ErrHandle = api.ErrHandle
	// ErrNotConnected: an operation before Connect (or Join), and every
	// method that returns an error on a Comm or Group its constructor did
	// not make (nil, as a failed New or Join returns, or the zero value).
	ErrNotConnected = api.ErrNotConnected
	// ErrConnected: Connect (or ConnectNCCL) of a Comm already connected.
	ErrConnected = api.ErrConnected
	// ErrClosed: a method of a Comm that is closed or closing (a Sync that
	// Close ended included), of a Device closed by Close or with its Comm,
	// or of a Graph that is closed; also a Device or Graph that OpenDevice
	// or CaptureGraph did not make.
	ErrClosed = api.ErrClosed
	// ErrBroken: an operation (or Sync) of a Comm broken by an earlier
	// failure, which it wraps: a timeout, a peer that closed, mismatched
	// operations, a CUDA error. Only Close is left to do.
	ErrBroken = api.ErrBroken
	// ErrTimeout: a barrier that a peer did not reach within the Comm's
	// timeout (*TimeoutError, from Sync, Close or the next operation; the
	// Comm is broken), or an operation whose kernels the driver compiles
	// from PTX the first time, when the process's queued operations on the
	// GPU did not let the load start within the timeout (nothing is
	// enqueued then).
	ErrTimeout = api.ErrTimeout
	// ErrNoPeerAccess: Connect over CUDA IPC (TransportIPC) of a group
	// with a pair of GPUs that cannot access each other's memory, or a
	// peer's GPU this process does not see; the error names the pair.
	// TransportAuto takes NCCL there instead.
	ErrNoPeerAccess = api.ErrNoPeerAccess
	// ErrNoDriver: the CUDA driver (libcuda.so.1, or $ULYSSES_LIBCUDA)
	// cannot be loaded: New, Join, NewGroup, OpenDevice and System return
	// it, keeping the dynamic loader's words.
	ErrNoDriver = api.ErrNoDriver
	// ErrNoDevice: the driver loaded but sees no usable GPU (none, or none
	// visible through CUDA_VISIBLE_DEVICES), from the same calls.
	ErrNoDevice = api.ErrNoDevice
	// ErrNoNCCL: NCCL was asked for (TransportNCCL) or chosen
	// (TransportAuto) and cannot be loaded, or is older than 2.14; the
	// error keeps the dynamic loader's text.
	ErrNoNCCL = api.ErrNoNCCL
	// ErrNCCL: NCCL reported a failure of a Comm over TransportNCCL (a
	// peer's process gone or the network failing, say); the error keeps
	// NCCL's words, and the Comm is broken.
	ErrNCCL = api.ErrNCCL
	// ErrNotSupported: what this GPU, driver or transport cannot do: a GPU
	// without unified addressing, the fp8 wire below compute capability
	// 9.0, sharing as a file descriptor where the driver or device cannot
	// (or off Linux), capturing the Into forms or NCCL's operations into a
	// graph, a strided tensor given to a memory helper, the blocking NCCL
	// launch without ncclCommSplit.
	ErrNotSupported = api.ErrNotSupported
	// ErrTokensNotSet: an operation before the first SetRankTokens.
	ErrTokensNotSet = api.ErrTokensNotSet
	// ErrPeerClosed: an operation that cannot complete because a peer
	// closed its Comm without taking part (*PeerClosedError); the Comm is
	// broken.
	ErrPeerClosed = api.ErrPeerClosed
	// ErrOpMismatch: ranks that ran different operations, or the same one
	// on different shapes or token counts, at the same point of their
	// sequence (*MismatchError); every rank involved is broken.
	ErrOpMismatch = api.ErrOpMismatch
	// ErrStream: a caller's stream that the driver refuses (destroyed, of
	// another context, or another device's), or a capture that the
	// driver invalidated; from Comm.On's operations, CaptureGraph and
	// Graph.Launch.
	ErrStream = api.ErrStream
	// ErrAborted: operations whose waits on the device were ended, by the
	// end of SyncContext's context (the Comm is then broken) or by Close
	// during a Sync (then the error matches ErrClosed too).
	ErrAborted = api.ErrAborted
	// ErrOddGraph: an operation that would write the data half its
	// previous one wrote, as a captured graph with an odd number of a
	// Comm's operations replayed twice in a row outside Graph.Launch
	// does (Launch keeps the halves in turn); the Comm is broken.
	ErrOddGraph = api.ErrOddGraph
	// ErrShare: a peer's buffer shared as a file descriptor
	// (SharingFD) could not be fetched over its Unix-domain socket (its
	// process gone, its socket refusing this group's proof, or a
	// malformed answer); nothing of it stays mapped.
	ErrShare = api.ErrShare
)

// Phase names the barrier a timed-out rank was waiting in: PhaseStart,
// PhaseEnd or PhaseClose.
type Phase uint32

// Barrier phases, as the kernels number them.
const (
	PhaseStart Phase = iota // before any write into peers: waiting for a peer to reach the operation
	PhaseEnd                // after the writes: waiting for a peer's writes to land
	PhaseClose              // in Close: waiting for a peer to say goodbye
)

// String names the phase: "start", "end" or "close".
func (p Phase) String() string { return api.Phase(p).String() }

// TimeoutError reports a barrier that a peer never reached. The Comm that
// returns it is broken: every later operation returns ErrBroken, and Close
// still releases everything. It matches ErrTimeout; use errors.As to read
// its fields.
type TimeoutError struct {
	Rank    int           // the rank that waited
	Peer    int           // the rank it waited for; -1 over NCCL, which does not say
	Phase   Phase         // which barrier
	Epoch   uint32        // the operation's sequence number on the waiting block
	Block   int           // the waiting thread block
	Timeout time.Duration // the configured bound
}

// Error says who waited for whom, where, and how long.
func (e *TimeoutError) Error() string { return e.internal().Error() }

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return e.internal().Is(target) }

func (e *TimeoutError) internal() *api.TimeoutError {
	return &api.TimeoutError{Rank: e.Rank, Peer: e.Peer, Phase: api.Phase(e.Phase), Epoch: e.Epoch, Block: e.Block, Timeout: e.Timeout}
}

// PeerClosedError reports an operation that cannot complete because a peer
// closed its Comm (or was closing it) without taking part. The Comm that
// returns it is broken. It matches ErrPeerClosed.
type PeerClosedError struct {
	Rank  int    // the rank whose operation failed
	Peer  int    // the rank that closed
	Phase Phase  // where it was noticed: PhaseStart before any write, PhaseEnd after
	Epoch uint32 // the operation's sequence number
}

// Error says whose operation failed and who closed.
func (e *PeerClosedError) Error() string { return e.internal().Error() }

// Is matches ErrPeerClosed.
func (e *PeerClosedError) Is(target error) bool { return e.internal().Is(target) }

func (e *PeerClosedError) internal() *api.PeerClosedError {
	return &api.PeerClosedError{Rank: e.Rank, Peer: e.Peer, Phase: api.Phase(e.Phase), Epoch: e.Epoch}
}

// MismatchError reports ranks that ran different operations (or the same
// one on different shapes or token counts) at the same point of their
// sequence: the output would be wrong, so it is an error instead. Every
// rank involved gets one; the Comm is broken. It matches ErrOpMismatch.
type MismatchError struct {
	Rank, Peer int    // the rank whose operation failed, and the peer it disagreed with
	Epoch      uint32 // the operation's sequence number
	Block      int    // the block whose signal disagreed
	// Signature and PeerSignature hash the operation, batch, head count,
	// head size, element size and token counts on each side.
	Signature, PeerSignature uint32
}

// Error names the two ranks and their signatures.
func (e *MismatchError) Error() string { return (*api.MismatchError)(e).Error() }

// Is matches ErrOpMismatch.
func (e *MismatchError) Is(target error) bool { return (*api.MismatchError)(e).Is(target) }

// publicError is err as users see it: the transports' failure types made
// a2a's, anything else as it is. The transports return those unwrapped.
func publicError(err error) error {
	switch e := err.(type) {
	case *api.TimeoutError:
		return &TimeoutError{Rank: e.Rank, Peer: e.Peer, Phase: Phase(e.Phase), Epoch: e.Epoch, Block: e.Block, Timeout: e.Timeout}
	case *api.PeerClosedError:
		return &PeerClosedError{Rank: e.Rank, Peer: e.Peer, Phase: Phase(e.Phase), Epoch: e.Epoch}
	case *api.MismatchError:
		return (*MismatchError)(e)
	}
	return err
}
