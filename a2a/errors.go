package a2a

import (
	"errors"
	"fmt"
	"time"
)

// Errors that errors.Is matches through the context the library wraps them in.
var (
	ErrConfig       = errors.New("a2a: invalid configuration")
	ErrDType        = errors.New("a2a: wrong dtype")
	ErrShape        = errors.New("a2a: wrong shape")
	ErrTokens       = errors.New("a2a: token counts disagree")
	ErrCapacity     = errors.New("a2a: capacity exceeded")
	ErrAlignment    = errors.New("a2a: misaligned pointer")
	ErrAliased      = errors.New("a2a: tensor overlaps the Comm's buffer")
	ErrHandle       = errors.New("a2a: bad handle")
	ErrNotConnected = errors.New("a2a: not connected")
	ErrConnected    = errors.New("a2a: already connected")
	ErrClosed       = errors.New("a2a: Comm is closed")
	ErrBroken       = errors.New("a2a: Comm is broken by an earlier failure")
	ErrTimeout      = errors.New("a2a: barrier timed out")
	ErrNoPeerAccess = errors.New("a2a: GPUs cannot access each other")
	ErrNoDriver     = errors.New("a2a: CUDA driver not available")
	ErrNoDevice     = errors.New("a2a: no CUDA device")
	ErrNotSupported = errors.New("a2a: not supported")
	ErrTokensNotSet = errors.New("a2a: SetRankTokens has not been called")
	ErrPeerClosed   = errors.New("a2a: a peer closed its Comm")
	ErrOpMismatch   = errors.New("a2a: ranks ran different operations")
)

// Phase names the barrier a timed-out rank was waiting in.
type Phase uint32

// Barrier phases, as the kernels number them.
const (
	PhaseStart Phase = 0 // before any write into peers: waiting for a peer to reach the operation
	PhaseEnd   Phase = 1 // after the writes: waiting for a peer's writes to land
	PhaseClose Phase = 2 // Close: waiting for a peer to say goodbye
)

func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseEnd:
		return "end"
	case PhaseClose:
		return "close"
	}
	return fmt.Sprintf("Phase(%d)", uint32(p))
}

// TimeoutError reports a barrier that a peer never reached. The Comm that
// returns it is broken: every later operation returns ErrBroken, and Close
// still releases everything.
type TimeoutError struct {
	Rank    int           // the rank that waited
	Peer    int           // the rank it waited for
	Phase   Phase         // which barrier
	Epoch   uint32        // the operation's sequence number on the waiting block
	Block   int           // the waiting thread block
	Timeout time.Duration // the configured bound
}

func (e *TimeoutError) Error() string {
	if e.Phase == PhaseClose {
		return fmt.Sprintf("a2a: rank %d waited %v in Close for rank %d to close too: barrier timed out", e.Rank, e.Timeout, e.Peer)
	}
	return fmt.Sprintf("a2a: rank %d waited %v for rank %d at the %s barrier of operation %d (block %d): barrier timed out",
		e.Rank, e.Timeout, e.Peer, e.Phase, e.Epoch, e.Block)
}

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }

// PeerClosedError reports an operation that cannot complete because a peer
// closed its Comm (or was closing it) without taking part. The Comm that
// returns it is broken.
type PeerClosedError struct {
	Rank  int    // the rank whose operation failed
	Peer  int    // the rank that closed
	Phase Phase  // where it was noticed: PhaseStart before any write, PhaseEnd after
	Epoch uint32 // the operation's sequence number
}

func (e *PeerClosedError) Error() string {
	return fmt.Sprintf("a2a: rank %d's operation %d cannot complete: rank %d closed its Comm (noticed at the %s)", e.Rank, e.Epoch, e.Peer, e.Phase)
}

// Is matches ErrPeerClosed.
func (e *PeerClosedError) Is(target error) bool { return target == ErrPeerClosed }

// MismatchError reports ranks that ran different operations (or the same
// one on different shapes or token counts) at the same point of their
// sequence: the output would be wrong, so it is an error instead. Every
// rank involved gets one; the Comm is broken.
type MismatchError struct {
	Rank, Peer int
	Epoch      uint32 // the operation's sequence number
	Block      int    // the block whose signal disagreed
	// Signature and PeerSignature hash the operation, batch, head count,
	// head size, element size and token counts on each side.
	Signature, PeerSignature uint32
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("a2a: rank %d's operation %d does not match rank %d's (signature %#08x, rank %d's %#08x): "+
		"every rank must run the same operations with the same shapes and token counts", e.Rank, e.Epoch, e.Peer, e.Signature, e.Peer, e.PeerSignature)
}

// Is matches ErrOpMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrOpMismatch }
