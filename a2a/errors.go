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
)

// Phase names the barrier a timed-out rank was waiting in.
type Phase uint32

// Barrier phases, as the kernels number them.
const (
	PhaseStart Phase = 0 // before any write into peers: waiting for a peer to reach the operation
	PhaseEnd   Phase = 1 // after the writes: waiting for a peer's writes to land
)

func (p Phase) String() string {
	switch p {
	case PhaseStart:
		return "start"
	case PhaseEnd:
		return "end"
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
	return fmt.Sprintf("a2a: rank %d waited %v for rank %d at the %s barrier of operation %d (block %d): barrier timed out",
		e.Rank, e.Timeout, e.Peer, e.Phase, e.Epoch, e.Block)
}

// Is matches ErrTimeout.
func (e *TimeoutError) Is(target error) bool { return target == ErrTimeout }
