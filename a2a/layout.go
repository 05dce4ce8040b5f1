package a2a

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ulysses-go/ulysses/ptx"
)

// The Comm's one device allocation, shared with its peers through one IPC
// handle (the same layout on every rank, since all ranks have the same
// capacity):
//
//	[ data: 1 or 2 halves of capacity bytes | signal area | local state ]
//
// Operation e (counted from 1 on every rank) writes half e&1; with a single
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
	l.total = alignUp(l.stateOff+stateBytes, regionAlign)
	return l
}

// opPlan is what one operation launches: checked against the token counts
// and the capacity before anything is enqueued.
type opPlan struct {
	op       ptx.Op
	out      [4]int // output shape on this rank
	outBytes int64
	chunk    int64 // bytes moved as one piece: a head group of one token, or a whole token row
	width    int   // vector width in bytes (may differ across ranks: it depends on local alignment)
	vectors  int64 // vectors this rank's kernel walks
	// groupBytes is the most input bytes any rank's kernel walks: it sets
	// the number of active blocks, which every rank must compute alike.
	groupBytes int64
	sig        uint32 // opSignature: the same on every rank
}

// tokenSet is the per-rank token counts given to SetRankTokens.
type tokenSet struct {
	counts []int
	prefix []int  // len(counts)+1
	hash   uint32 // of the counts: part of every operation's signature
}

func newTokenSet(counts []int) tokenSet {
	ts := tokenSet{counts: append([]int(nil), counts...), prefix: make([]int, len(counts)+1), hash: fnvOffset}
	for i, c := range counts {
		ts.prefix[i+1] = ts.prefix[i] + c
		ts.hash = fnvAdd(ts.hash, uint64(c))
	}
	return ts
}

// FNV-1a, 32 bits, over 64-bit words: the operation signature.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func fnvAdd(h uint32, v uint64) uint32 {
	for i := 0; i < 8; i++ {
		h ^= uint32(v >> (8 * i) & 0xff)
		h *= fnvPrime
	}
	return h
}

// opSignature names an operation and everything about it that every rank
// shares (the operation, batch, full head count, head size, element size
// and token counts). Kernels compare it across ranks: ranks that run
// different operations at the same epoch get an error, not a result.
func opSignature(op ptx.Op, batch, heads, headDim, elemBytes int, ts tokenSet) uint32 {
	h := ts.hash
	h = fnvAdd(h, uint64(opCode(op)))
	for _, v := range []int{batch, heads, headDim, elemBytes} {
		h = fnvAdd(h, uint64(v))
	}
	return h
}

func opCode(op ptx.Op) int {
	for i, o := range ptx.Ops {
		if o == op {
			return i + 1
		}
	}
	return 0
}

func (ts tokenSet) total() int { return ts.prefix[len(ts.counts)] }

// maxDim bounds every dimension of a tensor, so that products of a few of
// them cannot overflow int64 before they are checked.
const maxDim = math.MaxInt32

// mulChecked multiplies non-negative factors, reporting false on overflow.
func mulChecked(factors ...int64) (int64, bool) {
	p := uint64(1)
	for _, f := range factors {
		if f < 0 {
			return 0, false
		}
		hi, lo := bits.Mul64(p, uint64(f))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, false
		}
		p = lo
	}
	return int64(p), true
}

// planOp checks input x of op on rank against the token counts, the world
// size and the capacity, and picks the widest vector width that the chunk
// size and x's alignment allow among widths (widest first). Everything that
// decides whether the operation runs depends only on values every rank
// shares (the token counts, the shape), so either every rank launches or
// none does; only a local error (a wrong pointer, dtype or token count on
// this rank) can split the group, and then the peers time out.
func planOp(op ptx.Op, x Tensor, dt DType, rank, world int, ts tokenSet, capacity int64, widths []int) (opPlan, error) {
	if !dt.Valid() {
		return opPlan{}, fmt.Errorf("a2a: %v: %w", dt, ErrDType)
	}
	for _, n := range x.Shape {
		if n > maxDim {
			return opPlan{}, fmt.Errorf("a2a: %s input shape %v: dimension over %d: %w", op, x.Shape, maxDim, ErrShape)
		}
	}
	b, t, h, d := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if b < 1 || h < 1 || d < 1 || t < 0 {
		return opPlan{}, fmt.Errorf("a2a: %s input shape %v: batch, heads and head size must be positive: %w", op, x.Shape, ErrShape)
	}
	if err := checkTensor("input", x, dt, x.Shape); err != nil {
		return opPlan{}, err
	}
	es := int64(dt.Size())
	maxTokens := 0
	for _, n := range ts.counts {
		maxTokens = max(maxTokens, n)
	}
	B, T, H, D, P := int64(b), int64(ts.total()), int64(h), int64(d), int64(world)
	Tr, Tmax := int64(ts.counts[rank]), int64(maxTokens)
	p := opPlan{op: op}
	var chunks, groupChunks, maxOut int64 // this rank's chunks, the most any rank has, the largest output
	var ok [4]bool
	switch op {
	case ptx.OpSendRecvHeads, ptx.OpAllGather:
		if int64(t) != Tr {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave rank %d %d: %w", op, t, rank, Tr, ErrTokens)
		}
		if op == ptx.OpSendRecvHeads {
			if h%world != 0 {
				return opPlan{}, fmt.Errorf("a2a: %d heads not divisible by world size %d: %w", h, world, ErrShape)
			}
			p.out = [4]int{b, int(T), h / world, d}
			p.chunk, ok[0] = mulChecked(H/P, D, es)
			chunks, ok[1] = mulChecked(B, Tr, P)
			groupChunks, ok[2] = mulChecked(B, Tmax, P)
		} else {
			p.out = [4]int{b, int(T), h, d}
			p.chunk, ok[0] = mulChecked(H, D, es)
			chunks, ok[1] = mulChecked(B, Tr)
			groupChunks, ok[2] = mulChecked(B, Tmax)
		}
		maxOut, ok[3] = mulChecked(int64(p.out[0]), int64(p.out[1]), int64(p.out[2]), int64(p.out[3]), es)
	case ptx.OpGatherHeads:
		if int64(t) != T {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave %d in all: %w", op, t, T, ErrTokens)
		}
		p.out = [4]int{b, int(Tr), h * world, d}
		p.chunk, ok[0] = mulChecked(H, D, es)
		// The kernel walks every (b, k, r) with k < the largest count.
		chunks, ok[1] = mulChecked(B, Tmax, P)
		groupChunks, ok[2] = chunks, ok[1]
		// Every rank's output must fit, or a peer would write past this
		// rank's buffer while this rank refused the operation.
		maxOut, ok[3] = mulChecked(B, Tmax, H*P, D, es)
	default:
		return opPlan{}, fmt.Errorf("a2a: unknown operation %q: %w", op, ErrNotSupported)
	}
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] {
		return opPlan{}, fmt.Errorf("a2a: %s of %v with %d tokens in all overflows: %w", op, x.Shape, T, ErrCapacity)
	}
	if maxOut > capacity {
		return opPlan{}, fmt.Errorf("a2a: %s needs up to %d bytes of output on a rank, the buffer holds %d (raise MaxTokens): %w", op, maxOut, capacity, ErrCapacity)
	}
	p.outBytes, _ = mulChecked(int64(p.out[0]), int64(p.out[1]), int64(p.out[2]), int64(p.out[3]), es)
	p.width = int(es)
	for _, w := range widths {
		if p.chunk%int64(w) == 0 && x.Ptr%uintptr(w) == 0 {
			p.width = w
			break
		}
	}
	p.vectors, ok[0] = mulChecked(chunks, p.chunk/int64(p.width))
	p.groupBytes, ok[1] = mulChecked(groupChunks, p.chunk)
	fullHeads := h
	if op == ptx.OpGatherHeads {
		fullHeads = h * world
	}
	p.sig = opSignature(op, b, fullHeads, d, int(es), ts)
	if !ok[0] || !ok[1] || p.vectors > math.MaxInt32 {
		return opPlan{}, fmt.Errorf("a2a: %s moves %d vectors of %d bytes, over the kernels' 32-bit limit: %w", op, p.vectors, p.width, ErrCapacity)
	}
	return p, nil
}

// threadsFor is the block size for a grid of blocks on a device of sms SMs.
func threadsFor(blocks, sms int) int {
	if blocks >= sms {
		return 256
	}
	return maxThreadsPerBlock
}

// activeBlocks is how many of the launched blocks take part in an
// operation that walks up to groupBytes of input on a rank: enough for
// every thread to have a full set of loads in flight, at least one.
func activeBlocks(groupBytes int64, blocks int) int {
	perBlock := int64(activeGranule)
	n := (groupBytes + perBlock - 1) / perBlock
	return int(max(1, min(n, int64(blocks))))
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
	Tokens    [MaxWorldSize]int32
	Prefix    [MaxWorldSize + 1]int32
	Rank      uint32
	World     uint32
	Batch     uint32
	Units     uint32 // vectors per chunk
	Active    uint32 // blocks that copy; ulysses_close: 1 to wait for the peers' byes
	Sig       uint32 // the operation's signature, the same on every rank
}

// Status codes the kernels write into statusWord.Code.
const (
	statusOK         = 0
	statusTimeout    = 1
	statusPeerClosed = 2
	statusMismatch   = 3
)

// statusWord mirrors struct Status in the kernels: written by the device
// into pinned host memory when an operation fails.
type statusWord struct {
	Code    uint32
	Phase   uint32
	Peer    uint32
	Epoch   uint32
	Block   uint32
	Rank    uint32
	Sig     uint32
	PeerSig uint32
}
