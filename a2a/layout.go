package a2a

import (
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// The Comm's one device allocation, shared with its peers through one IPC
// handle (the same layout on every rank, since all ranks have the same
// capacity):
//
//	[ data: 1 or 2 halves of capacity bytes | signal area | local state ]
//
// Operation e (counted from 1 on every rank) writes half e&1 (the host's
// count; the kernels check that halves alternate); with a single
// half every operation writes half 0 and needs a start barrier.
// The signal area (kernelabi.Signals) is written by peers only: one
// 64-bit flag {epoch, signature} per (phase, block, peer), then one
// 32-bit bye word per peer. The local state (kernelabi.State: the epoch,
// the arrival count, the failure claim) is touched by this rank's kernels
// only, and the live token table (kernelabi.Live) follows it.
const (
	numFlagPhases   = kernelabi.FlagPhases
	flagBytes       = 8 // a uint64 {epoch, signature}
	signalByeOff    = int64(unsafe.Offsetof(kernelabi.Signals{}.Bye))
	signalAreaBytes = int64(unsafe.Sizeof(kernelabi.Signals{}))

	stateEpochOff   = int64(unsafe.Offsetof(kernelabi.State{}.Epoch))
	stateArrivedOff = int64(unsafe.Offsetof(kernelabi.State{}.Arrived))
	stateClaimedOff = int64(unsafe.Offsetof(kernelabi.State{}.Claimed))
	stateBytes      = int64(unsafe.Sizeof(kernelabi.State{}))
	// The live token table follows the state: what captured operations
	// read when a graph replays them.
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

// The kernels' argument and the structures they share with the host, as
// kernelabi generates them from their one description.
type (
	kernelArgs = kernelabi.Args
	liveTable  = kernelabi.Live
	statusWord = kernelabi.Status
)

// Status codes the kernels write into statusWord.Code.
const (
	statusOK         = kernelabi.StatusOK
	statusTimeout    = kernelabi.StatusTimeout
	statusPeerClosed = kernelabi.StatusPeerClosed
	statusMismatch   = kernelabi.StatusMismatch
	statusAborted    = kernelabi.StatusAborted    // a wait ended by the abort word (Close during a blocked Sync)
	statusHalfReused = kernelabi.StatusHalfReused // two operations in a row on one data half (a graph's halves out of turn)
)
