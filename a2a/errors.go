package a2a

import (
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

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
	Rank, Peer int
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
