package api

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// Errors that errors.Is matches through the context the library wraps them
// in. Their text has no package prefix: every error the package returns
// reads "a2a: <what happened>: <sentinel text>", with the prefix once.
var (
	ErrConfig       = errors.New("invalid configuration")
	ErrDType        = errors.New("wrong dtype")
	ErrShape        = errors.New("wrong shape")
	ErrTokens       = errors.New("wrong token counts")
	ErrCapacity     = errors.New("capacity exceeded")
	ErrAlignment    = errors.New("misaligned pointer")
	ErrAliased      = errors.New("tensor overlaps the Comm's buffer")
	ErrHandle       = errors.New("bad handle")
	ErrNotConnected = errors.New("not connected")
	ErrConnected    = errors.New("already connected")
	ErrClosed       = errors.New("the Comm is closed")
	ErrBroken       = errors.New("the Comm is broken by an earlier failure")
	ErrTimeout      = errors.New("barrier timed out")
	ErrNoPeerAccess = errors.New("GPUs cannot access each other")
	ErrNoDriver     = errors.New("CUDA driver not available")
	ErrNoDevice     = errors.New("no CUDA device")
	// ErrNoNCCL: NCCL was asked for (TransportNCCL) or chosen
	// (TransportAuto) and cannot be loaded, or is older than 2.14; the
	// error keeps the dynamic loader's text.
	ErrNoNCCL = errors.New("NCCL not available")
	// ErrNCCL: NCCL reported a failure of a Comm over TransportNCCL (a
	// peer's process gone or the network failing, say); the error keeps
	// NCCL's words, and the Comm is broken.
	ErrNCCL         = errors.New("NCCL failed")
	ErrNotSupported = errors.New("not supported")
	ErrTokensNotSet = errors.New("SetRankTokens has not been called")
	ErrPeerClosed   = errors.New("a peer closed its Comm")
	ErrOpMismatch   = errors.New("ranks ran different operations")
	ErrStream       = errors.New("bad stream")
	ErrAborted      = errors.New("wait aborted")
	ErrOddGraph     = errors.New("a graph with an odd number of a Comm's operations replayed twice in a row")
	// ErrShare: a peer's buffer shared as a file descriptor could not be
	// fetched (its process gone, its socket refusing this group's proof,
	// or a malformed answer); nothing of it stays mapped.
	ErrShare = errors.New("fetching a peer's buffer failed")
)

// Phase names the barrier a timed-out rank was waiting in.
type Phase uint32

// Barrier phases, as the kernels number them.
const (
	PhaseStart Phase = kernelabi.PhaseStart // before any write into peers: waiting for a peer to reach the operation
	PhaseEnd   Phase = kernelabi.PhaseEnd   // after the writes: waiting for a peer's writes to land
	PhaseClose Phase = kernelabi.PhaseClose // Close: waiting for a peer to say goodbye
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
	Peer    int           // the rank it waited for; -1 over NCCL, which does not say
	Phase   Phase         // which barrier
	Epoch   uint32        // the operation's sequence number on the waiting block
	Block   int           // the waiting thread block
	Timeout time.Duration // the configured bound
}

func (e *TimeoutError) Error() string {
	if e.Phase == PhaseClose {
		return fmt.Sprintf("a2a: rank %d waited %v in Close for rank %d to close too: barrier timed out", e.Rank, e.Timeout, e.Peer)
	}
	if e.Peer < 0 { // NCCL does not say which peer is late
		return fmt.Sprintf("a2a: rank %d waited %v for its peers in operation %d over NCCL (aborted the communicator): barrier timed out",
			e.Rank, e.Timeout, e.Epoch)
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

// AbortedError reports a wait on the device that the host ended: Close
// during a blocked Sync, or the end of SyncContext's context. It matches
// ErrAborted, and ErrClosed when Close ended it. Package a2a does not
// export it: users match the sentinels.
type AbortedError struct {
	Rank, Peer int
	Phase      Phase
	Epoch      uint32 // the operation's sequence number (0 in Close's own wait)
	ByClose    bool   // Close ended it, not a context
}

func (e *AbortedError) Error() string {
	why, sentinel := "its Sync's context ended", ErrAborted
	if e.ByClose {
		why, sentinel = "Close was called", ErrClosed
	}
	if e.Phase == PhaseClose {
		return fmt.Sprintf("a2a: rank %d stopped waiting in Close for rank %d to close too: %v", e.Rank, e.Peer, sentinel)
	}
	if e.Peer < 0 {
		return fmt.Sprintf("a2a: rank %d's operations over NCCL stopped waiting because %s: %v", e.Rank, why, sentinel)
	}
	return fmt.Sprintf("a2a: rank %d's operation %d stopped waiting for rank %d at the %s barrier because %s: %v",
		e.Rank, e.Epoch, e.Peer, e.Phase, why, sentinel)
}

// Is matches ErrAborted, and ErrClosed when Close ended the wait.
func (e *AbortedError) Is(target error) bool {
	return target == ErrAborted || (e.ByClose && target == ErrClosed)
}

// contextError adds context to an error from this package without
// repeating its "a2a: " prefix.
type contextError struct {
	msg string
	err error
}

func (e *contextError) Error() string {
	return "a2a: " + e.msg + ": " + strings.TrimPrefix(e.err.Error(), "a2a: ")
}

func (e *contextError) Unwrap() error { return e.err }

// Wrap returns err with the context format describes, the "a2a: "
// prefix once.
func Wrap(err error, format string, args ...any) error {
	return &contextError{msg: fmt.Sprintf(format, args...), err: err}
}

// Prefixed returns sentinel with the package prefix, for a sentinel
// returned with no other context.
func Prefixed(sentinel error) error { return fmt.Errorf("a2a: %w", sentinel) }

// Broken is what a broken Comm returns: ErrBroken, wrapping the first
// failure.
func Broken(first error) error { return &brokenError{first: first} }

type brokenError struct{ first error }

func (e *brokenError) Error() string {
	return "a2a: " + ErrBroken.Error() + ": " + strings.TrimPrefix(e.first.Error(), "a2a: ")
}

func (e *brokenError) Unwrap() []error { return []error{ErrBroken, e.first} }
