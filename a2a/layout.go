package a2a

import (
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/ptx"
)

// The Comm's one device allocation, shared with its peers through one IPC
// handle (the same layout on every rank, since all ranks have the same
// capacity):
//
//	[ data: capacity bytes | signal area | local state ]
//
// The signal area holds one 32-bit flag per (phase, block, peer), written by
// peers. The local state (epochs, token counts, timeout claim) is read by
// this rank's kernels only. Offsets must match gen/kernels/ulysses.cu.
const (
	numPhases       = 2
	signalAreaBytes = numPhases * maxBlocks * MaxWorldSize * 4

	stateEpochsOff  = 0
	stateTokensOff  = stateEpochsOff + maxBlocks*4
	statePrefixOff  = stateTokensOff + MaxWorldSize*4
	stateClaimedOff = statePrefixOff + (MaxWorldSize+1)*4
	stateBytes      = stateClaimedOff + 4

	regionAlign = 256

	// maxDataBytes bounds the data region; kernels index vectors with
	// 32-bit counts, which each operation checks on its own.
	maxDataBytes = 1 << 40
)

// bufferLayout places the regions of the shared allocation.
type bufferLayout struct {
	dataBytes int64 // capacity of the data region
	signalOff int64
	stateOff  int64
	total     int64
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

func newBufferLayout(dataBytes int64) bufferLayout {
	l := bufferLayout{dataBytes: dataBytes}
	l.signalOff = alignUp(dataBytes, regionAlign)
	l.stateOff = alignUp(l.signalOff+signalAreaBytes, regionAlign)
	l.total = alignUp(l.stateOff+stateBytes, regionAlign)
	return l
}

// opPlan is what one operation launches: checked against the token counts
// and the capacity before anything is enqueued.
type opPlan struct {
	op       ptx.Op
	out      [4]int // output shape
	outBytes int64
	chunk    int64 // bytes moved as one piece: a head group of one token, or a whole token row
	width    int   // vector width in bytes
	vectors  int64 // vectors the kernel copies on this rank
}

// tokenSet is the per-rank token counts given to SetRankTokens.
type tokenSet struct {
	counts []int
	prefix []int // len(counts)+1
}

func newTokenSet(counts []int) tokenSet {
	ts := tokenSet{counts: append([]int(nil), counts...), prefix: make([]int, len(counts)+1)}
	for i, c := range counts {
		ts.prefix[i+1] = ts.prefix[i] + c
	}
	return ts
}

func (ts tokenSet) total() int { return ts.prefix[len(ts.counts)] }

// planOp checks input x of op on rank against the token counts, the world
// size and the capacity, and picks the widest vector width that the chunk
// size and x's alignment allow among widths (widest first).
func planOp(op ptx.Op, x Tensor, dt DType, rank, world int, ts tokenSet, capacity int64, widths []int) (opPlan, error) {
	if err := checkTensor("input", x, dt, x.Shape); err != nil {
		return opPlan{}, err
	}
	b, t, h, d := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if b < 1 || h < 1 || d < 1 || t < 0 {
		return opPlan{}, fmt.Errorf("a2a: %s input shape %v: batch, heads and head size must be positive: %w", op, x.Shape, ErrShape)
	}
	es := int64(dt.Size())
	p := opPlan{op: op}
	switch op {
	case ptx.OpSendRecvHeads, ptx.OpAllGather:
		if t != ts.counts[rank] {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave rank %d %d: %w", op, t, rank, ts.counts[rank], ErrTokens)
		}
		if op == ptx.OpSendRecvHeads {
			if h%world != 0 {
				return opPlan{}, fmt.Errorf("a2a: %d heads not divisible by world size %d: %w", h, world, ErrShape)
			}
			p.out = [4]int{b, ts.total(), h / world, d}
			p.chunk = int64(h/world) * int64(d) * es
			p.vectors = int64(b) * int64(t) * int64(world) // chunks, scaled below
		} else {
			p.out = [4]int{b, ts.total(), h, d}
			p.chunk = int64(h) * int64(d) * es
			p.vectors = int64(b) * int64(t)
		}
	case ptx.OpGatherHeads:
		if t != ts.total() {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave %d in all: %w", op, t, ts.total(), ErrTokens)
		}
		p.out = [4]int{b, ts.counts[rank], h * world, d}
		p.chunk = int64(h) * int64(d) * es
		p.vectors = int64(b) * int64(t)
	default:
		return opPlan{}, fmt.Errorf("a2a: unknown operation %q: %w", op, ErrNotSupported)
	}
	p.outBytes = int64(p.out[0]) * int64(p.out[1]) * int64(p.out[2]) * int64(p.out[3]) * es
	if p.outBytes > capacity {
		return opPlan{}, fmt.Errorf("a2a: %s output %v needs %d bytes, the buffer holds %d (raise MaxTokens): %w", op, p.out, p.outBytes, capacity, ErrCapacity)
	}
	p.width = int(es)
	for _, w := range widths {
		if p.chunk%int64(w) == 0 && x.Ptr%uintptr(w) == 0 {
			p.width = w
			break
		}
	}
	p.vectors *= p.chunk / int64(p.width)
	if p.vectors > math.MaxInt32 {
		return opPlan{}, fmt.Errorf("a2a: %s moves %d vectors of %d bytes, over the kernels' 32-bit limit: %w", op, p.vectors, p.width, ErrCapacity)
	}
	return p, nil
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
	Rank      uint32
	World     uint32
	Batch     uint32
	Units     uint32 // vectors per chunk
}

// statusWord mirrors struct Status in the kernels: written by the device
// into pinned host memory when a barrier times out.
type statusWord struct {
	Code  uint32
	Phase uint32
	Peer  uint32
	Epoch uint32
	Block uint32
	Rank  uint32
}
