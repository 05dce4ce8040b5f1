package nccl

import (
	"fmt"
	"sync/atomic"

	"github.com/ulysses-go/ulysses/internal/driver"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
)

// Tuning is the process's choices for the NCCL transports made after
// SetTuning (New reads it): knobs for timing the transport, which the
// bench sets. The zero value is the transport as users get it.
type Tuning struct {
	// Self sends a rank's own share through NCCL too, a send to itself
	// and a receive from itself in the round's group (packed and unpacked
	// through the staging where a side is not contiguous), instead of
	// copying it: at world one, every operation is then one NCCL group, so
	// the group's fixed cost, the packs and the unpacks can be timed on
	// one GPU.
	Self bool
	// Marker, when set, is told after each phase of every operation has
	// been enqueued (PhaseStart first): it may record an event on the
	// stream, so that the device time of each phase can be read.
	Marker PhaseMarker
	// Launch is how the groups of the data path are launched; the zero
	// value, LaunchAuto, is the transport as users get it.
	Launch Launch
}

// Launch is a way of launching the data path's NCCL groups.
type Launch int

const (
	// LaunchAuto is LaunchBlocking where the loaded NCCL can split a
	// communicator (2.18 and later), else LaunchAsync. On one H200 at
	// world one (every byte through NCCL) the blocking launch took 11.8 us
	// a SendRecvHeads of 128 KiB where the asynchronous one took 64 us.
	LaunchAuto Launch = iota
	// LaunchAsync launches each group on the non-blocking communicator:
	// ncclGroupEnd hands the launch to a thread of NCCL's, and the
	// operation polls until it is on the stream (settle), bounded by the
	// timeout, aborting the communicator past it.
	LaunchAsync
	// LaunchBlocking launches each group on a blocking communicator split
	// from the non-blocking one at the first operation (ncclCommSplit,
	// which the loaded NCCL must have: else Connect fails with
	// ErrNotSupported), its connections to every rank made there by a
	// group of one byte to and from each: ncclGroupEnd launches on the
	// enqueuing thread and returns once the group is on the stream, so
	// nothing is polled. A watchdog aborts both communicators when a
	// blocking call outlasts the timeout, which ends it with a
	// *TimeoutError. Ranks of one process must enqueue from goroutines of
	// their own (the first operation's split and connections wait for
	// every rank), as for LaunchAsync's first group.
	LaunchBlocking
)

// String is the launch's name as the bench's --nccl-launch spells it.
func (l Launch) String() string {
	switch l {
	case LaunchAsync:
		return "async"
	case LaunchBlocking:
		return "blocking"
	}
	return "auto"
}

// ParseLaunch reads a launch by its String: auto, async or blocking.
func ParseLaunch(s string) (Launch, error) {
	for _, l := range []Launch{LaunchAuto, LaunchAsync, LaunchBlocking} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, fmt.Errorf("launch %q: want auto, async or blocking", s)
}

// resolve is the launch a transport over lib uses for l.
func (l Launch) resolve(lib *binding.Library) Launch {
	if l != LaunchAuto {
		return l
	}
	if lib.Has(binding.FeatureSplit) {
		return LaunchBlocking
	}
	return LaunchAsync
}

// Phase is a part of an operation over NCCL, in the order Enqueue puts
// them on the stream: with the fp8 wire the encode, the own boxes, then
// per round the packs, the group and the unpacks, and with the wire the
// decode.
type Phase int

// The phases, PhaseStart marking where an operation begins.
const (
	PhaseStart Phase = iota
	PhaseOwn
	PhasePack
	PhaseGroup
	PhaseUnpack
	// The fp8 wire's: the rows quantized into the pack area (before the
	// own boxes), and the data half's staging area decoded (last).
	PhaseEncode
	PhaseDecode
)

// PhaseMarker is told where the phases of an operation end on its
// stream: Mark is called on the enqueuing thread, with the device's
// context current, after the phase p of rank's operation has been
// enqueued on s (also when the phase enqueued nothing). It must not call
// into the transport.
type PhaseMarker interface {
	Mark(rank int, p Phase, s driver.Stream)
}

var tuning atomic.Pointer[Tuning]

// SetTuning sets the choices of the transports New makes from now on in
// this process; transports made before keep theirs.
func SetTuning(t Tuning) { tuning.Store(&t) }

// currentTuning is the last SetTuning's, or the zero Tuning.
func currentTuning() Tuning {
	if t := tuning.Load(); t != nil {
		return *t
	}
	return Tuning{}
}
