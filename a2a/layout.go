package a2a

import "unsafe"

// The Comm's one device allocation, shared with its peers through one IPC
// handle (the same layout on every rank, since all ranks have the same
// capacity):
//
//	[ data: 1 or 2 halves of capacity bytes | signal area | local state ]
//
// Operation e (counted from 1 on every rank) writes half e&1 (the host's
// count; the kernels check that halves alternate); with a single
// half every operation writes half 0 and needs a start barrier.
// The signal area (struct Signals in the kernels) is written by peers only:
// one 64-bit flag {epoch, signature} per (phase, block, peer), then one
// 32-bit bye word per peer. The local state (struct State: the epoch, the
// arrival count, the failure claim) is touched by this rank's kernels only.
// Offsets must match gen/kernels/ulysses.cu.
const (
	numFlagPhases   = 2 // start and end own flags; close has bye words only
	flagBytes       = 8
	signalByeOff    = numFlagPhases * maxBlocks * MaxWorldSize * flagBytes
	signalAreaBytes = signalByeOff + MaxWorldSize*4

	stateEpochOff   = 0
	stateArrivedOff = 4
	stateClaimedOff = 8
	stateBytes      = 16
	// The live token table (struct Live) follows the state: what captured
	// operations read when a graph replays them.
	liveOff    = stateBytes
	localBytes = liveOff + int64(unsafe.Sizeof(liveTable{}))

	regionAlign = 256

	// maxDataBytes bounds the data region; kernels index vectors with
	// 32-bit counts, which each operation checks on its own.
	maxDataBytes = 1 << 40
)

// bufferLayout places the regions of the shared allocation.
type bufferLayout struct {
	dataBytes int64 // capacity of one half of the data region
	halfBytes int64 // offset of the second half; 0 with a single half
	signalOff int64
	stateOff  int64
	total     int64
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func newBufferLayout(dataBytes int64, halves int64) bufferLayout {
	l := bufferLayout{dataBytes: dataBytes}
	if halves == 2 {
		l.halfBytes = alignUp(dataBytes, regionAlign)
	}
	l.signalOff = l.halfBytes + alignUp(dataBytes, regionAlign)
	l.stateOff = alignUp(l.signalOff+signalAreaBytes, regionAlign)
	l.total = alignUp(l.stateOff+localBytes, regionAlign)
	return l
}

// kernelArgs is the single by-value parameter of every kernel. It must match
// struct Args in gen/kernels/ulysses.cu (ptx.File.ArgsBytes checks its size).
type kernelArgs struct {
	Data      [MaxWorldSize]uint64 // every rank's data region, mapped in this context
	Signal    [MaxWorldSize]uint64 // every rank's signal area, mapped in this context
	Input     uint64
	State     uint64
	Status    uint64 // device address of the host-mapped status word
	TimeoutNs uint64
	HalfBytes uint64 // offset of the second data half; 0: single buffer
	Capacity  uint64 // bytes of one data half; kernels store nothing past it
	Live      uint64 // captured operations: device address of the liveTable; 0 otherwise
	GroupRow  uint64 // captured: input bytes per token of the largest rank's walk
	Tokens    [MaxWorldSize]int32
	Prefix    [MaxWorldSize + 1]int32
	Rank      uint32
	World     uint32
	Batch     uint32
	Units     uint32 // vectors per chunk
	Active    uint32 // blocks that copy (captured: computed from Live); ulysses_close: 1 to wait for the peers' byes
	Sig       uint32 // the operation's signature, the same on every rank (captured: without the counts' hash)
	Half      uint32 // the data half the operation writes
	Reserved  uint32
	// Read by the general head entries only (see generalPlan).
	Inputs    [maxTensors]uint64 // tensor k's input; Inputs[0] == Input
	Region    uint64             // bytes between tensor k's output and k+1's
	Heads     [MaxWorldSize + 1]int32
	Tensors   uint32
	HeadUnits uint32 // vectors per head
	InRow     uint32 // vectors between consecutive tokens of an input
	WalkTotal uint32 // captured: the walk grows with all tokens (HeadAllGather)
}

// liveTable mirrors struct Live in the kernels: the token counts captured
// operations read when a graph replays them, in the Comm's buffer after
// the state (see smTransport.refreshCaptured).
type liveTable struct {
	Tokens    [MaxWorldSize]int32
	Prefix    [MaxWorldSize + 1]int32
	TokenHash uint32
}

// Status codes the kernels write into statusWord.Code.
const (
	statusOK         = 0
	statusTimeout    = 1
	statusPeerClosed = 2
	statusMismatch   = 3
	statusAborted    = 4 // a wait ended by the abort word (Close during a blocked Sync)
	statusHalfReused = 5 // two operations in a row on one data half (an odd graph replayed)
)

// statusWord mirrors struct Status in the kernels: written by the device
// into pinned host memory when an operation fails, except Abort, which the
// host writes to end the device's waits.
type statusWord struct {
	Code    uint32
	Phase   uint32
	Peer    uint32
	Epoch   uint32
	Block   uint32
	Rank    uint32
	Sig     uint32
	PeerSig uint32
	Abort   uint32
}
