package plan

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
	FlagBytes       = 8 // a uint64 {epoch, signature}
	SignalByeOff    = int64(unsafe.Offsetof(kernelabi.Signals{}.Bye))
	SignalAreaBytes = int64(unsafe.Sizeof(kernelabi.Signals{}))

	StateEpochOff   = int64(unsafe.Offsetof(kernelabi.State{}.Epoch))
	StateArrivedOff = int64(unsafe.Offsetof(kernelabi.State{}.Arrived))
	StateClaimedOff = int64(unsafe.Offsetof(kernelabi.State{}.Claimed))
	StateBytes      = int64(unsafe.Sizeof(kernelabi.State{}))
	// The live token table follows the state: what captured operations
	// read when a graph replays them.
	LiveOff    = StateBytes
	localBytes = LiveOff + int64(unsafe.Sizeof(kernelabi.Live{}))

	RegionAlign = 256

	// MaxDataBytes bounds the data region; kernels index vectors with
	// 32-bit counts, which each operation checks on its own.
	MaxDataBytes = 1 << 40
)

// Layout places the regions of the shared allocation.
type Layout struct {
	DataBytes int64 // capacity of one half of the data region
	HalfBytes int64 // offset of the second half; 0 with a single half
	SignalOff int64
	StateOff  int64
	Total     int64
}

// AlignUp rounds n up to a multiple of a.
func AlignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// NewLayout places a buffer of halves (1 or 2) data halves of dataBytes
// each, then the signal area and the local state, each region aligned.
func NewLayout(dataBytes int64, halves int64) Layout {
	l := Layout{DataBytes: dataBytes}
	if halves == 2 {
		l.HalfBytes = AlignUp(dataBytes, RegionAlign)
	}
	l.SignalOff = l.HalfBytes + AlignUp(dataBytes, RegionAlign)
	l.StateOff = AlignUp(l.SignalOff+SignalAreaBytes, RegionAlign)
	l.Total = AlignUp(l.StateOff+localBytes, RegionAlign)
	return l
}
