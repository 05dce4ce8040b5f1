package a2a

import (
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/ptx"
)

// maxTensors is the most tensors one head operation moves (q, k, v and
// one more).
const maxTensors = kernelabi.MaxTensors

// maxPitch bounds an Into output's token stride in bytes: the row pitch
// of cuMemcpy2D (CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2^31-1 on current GPUs).
const maxPitch = 1<<31 - 1

// outputAlign is where each tensor's output of a packed operation starts
// in a data half: a multiple of this many bytes.
const outputAlign = 256

// HeadRange returns the heads rank holds when heads are split over world
// ranks (SendRecvHeads' output, GatherHeads' and HeadAllGather's input):
// count heads from first. Each rank gets heads/world and the first
// heads%world ranks one more, so counts differ by at most one and the
// ranges tile [0, heads) in rank order. It costs nothing; with heads
// divisible by world it is rank*heads/world, heads/world. A rank outside
// [0, world) or negative heads give 0, 0.
func HeadRange(heads, world, rank int) (first, count int) {
	if world < 1 || rank < 0 || rank >= world || heads < 0 {
		return 0, 0
	}
	base, extra := heads/world, heads%world
	first = rank*base + min(rank, extra)
	count = base
	if rank < extra {
		count++
	}
	return first, count
}

// request is one operation as the caller asked for it: the inputs (1 to
// maxTensors of one shape) and, for GatherHeads and HeadAllGather, all
// ranks' heads together (0: this rank's times the world size).
type request struct {
	op    ptx.Op
	xs    [maxTensors]Tensor
	n     int
	heads int
}

// single is the request of one of the plain operations.
func single(op ptx.Op, x Tensor) request {
	return request{op: op, xs: [maxTensors]Tensor{x}, n: 1}
}

// general reports whether the request needs the general entries: several
// tensors, heads the world size does not divide, a token stride, or an
// operation that has no other.
func (r request) general(world int) bool {
	x := r.xs[0]
	return r.sharedGeneral(world) || api.Strided(x)
}

// sharedGeneral reports whether every rank takes the general entries for
// the request: for what the ranks share (the tensor count, the heads, the
// operation), not for a local choice such as an input's stride.
func (r request) sharedGeneral(world int) bool {
	x := r.xs[0]
	switch {
	case r.n != 1 || r.op == ptx.OpHeadAllGather:
		return true
	case r.op == ptx.OpSendRecvHeads:
		return x.Shape[2]%world != 0
	case r.op == ptx.OpGatherHeads:
		return r.heads != 0 && r.heads != x.Shape[2]*world
	}
	return false
}

// generalSpread is how many times more blocks the general entries activate
// than the plain ones for the same bytes, when every rank takes them and
// each has a GPU of its own: they do about twice the integer arithmetic
// per vector, which is the critical path where few blocks are active
// (GPU-RUNS.md run 29: SendRecvHeads of 41 heads took 12.3 us at 656 KiB
// against 10.2-10.3 us with 40 and 42). Ranks that share a GPU run their
// kernels at once on its SMs, and spread it among themselves (runs 33-34:
// with two ranks on a GPU, 4 cost 19% per byte, 2 nothing). Only the block
// count changes; the plain entries, and a general one that stands in for
// them because of a stride, keep theirs, so ranks agree.
const generalSpread = 4

// spreadFor is the spread of a shared general operation in a group whose
// busiest GPU runs sharers ranks: generalSpread divided among them.
func spreadFor(sharers int) int64 {
	return max(1, generalSpread/int64(max(sharers, 1)))
}

// totalHeads is H: the input's heads for SendRecvHeads, else what the
// caller gave or this rank's heads times the world size.
func (r request) totalHeads(world int) int {
	switch {
	case r.op == ptx.OpSendRecvHeads:
		return r.xs[0].Shape[2]
	case r.heads != 0:
		return r.heads
	}
	return r.xs[0].Shape[2] * world
}

// checkRequest validates what every general operation shares: the tensor
// count, and inputs of one dtype, shape and stride.
func checkRequest(r request, dt DType) error {
	if r.n < 1 || r.n > maxTensors {
		return fmt.Errorf("a2a: %s of %d tensors: 1 to %d: %w", r.op, r.n, maxTensors, ErrShape)
	}
	for k := 1; k < r.n; k++ {
		x, y := r.xs[0], r.xs[k]
		if y.Shape != x.Shape || api.RowElems(y) != api.RowElems(x) {
			return fmt.Errorf("a2a: %s input %d is %v, input 0 %v: packed tensors share shape and stride: %w", r.op, k, y, x, ErrShape)
		}
	}
	for k := range r.n {
		if err := api.CheckTensor("input", r.xs[k], dt, r.xs[k].Shape); err != nil {
			return api.Wrap(err, "%s input %d", r.op, k)
		}
	}
	return nil
}

// planGeneral is planOp for the general entries: uneven heads, up to
// maxTensors tensors into consecutive regions of the data half, inputs
// with a token stride, and HeadAllGather. Like planOp, everything that
// decides whether the operation runs depends on values every rank shares.
func planGeneral(r request, dt DType, rank, world int, ts tokenSet, capacity int64, widths []int) (opPlan, error) {
	x := r.xs[0]
	if err := checkInputShape(r.op, x, dt); err != nil {
		return opPlan{}, err
	}
	b, t, h, d := x.Shape[0], x.Shape[1], x.Shape[2], x.Shape[3]
	if err := checkRequest(r, dt); err != nil {
		return opPlan{}, err
	}
	H := r.totalHeads(world)
	if H < world || H > api.MaxDim {
		return opPlan{}, fmt.Errorf("a2a: %s of %d heads on %d ranks: every rank needs a head: %w", r.op, H, world, ErrShape)
	}
	_, mine := HeadRange(H, world, rank)
	_, most := HeadRange(H, world, 0)
	es := int64(dt.Size())
	T, Tr, Tmax := int64(ts.total()), int64(ts.counts[rank]), int64(ts.most())
	B, D, P, N := int64(b), int64(d), int64(world), int64(r.n)
	p := opPlan{op: r.op, general: true}
	// walk: this rank's input elements per tensor; groupWalk: the most of
	// any rank's; rowWalk: groupWalk per token of what it grows with;
	// maxOut: the largest output of one tensor on any rank.
	var walk, groupWalk, rowWalk, maxOut int64
	var ok [5]bool
	switch r.op {
	case ptx.OpSendRecvHeads:
		if int64(t) != Tr {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave rank %d %d: %w", r.op, t, rank, Tr, ErrTokens)
		}
		p.out = [4]int{b, int(T), mine, d}
		walk, ok[0] = mulChecked(B, Tr, int64(H), D)
		groupWalk, ok[1] = mulChecked(B, Tmax, int64(H), D)
		rowWalk, ok[4] = mulChecked(B, int64(H), D)
		maxOut, ok[2] = mulChecked(B, T, int64(most), D, es)
	case ptx.OpGatherHeads, ptx.OpHeadAllGather:
		if h != mine {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d heads; of %d heads on %d ranks rank %d holds %d: %w", r.op, h, H, world, rank, mine, ErrShape)
		}
		if int64(t) != T {
			return opPlan{}, fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave %d in all: %w", r.op, t, T, ErrTokens)
		}
		if r.op == ptx.OpGatherHeads {
			p.out = [4]int{b, int(Tr), H, d}
			walk, ok[0] = mulChecked(B, Tmax, P, int64(mine), D) // every (b, k, r) with k < the largest count
			groupWalk, ok[1] = mulChecked(B, Tmax, P, int64(most), D)
			rowWalk, ok[4] = mulChecked(B, P, int64(most), D)
			maxOut, ok[2] = mulChecked(B, Tmax, int64(H), D, es)
		} else {
			p.out = [4]int{b, int(T), H, d}
			walk, ok[0] = mulChecked(B, T, int64(mine), D)
			groupWalk, ok[1] = mulChecked(B, T, int64(most), D)
			rowWalk, ok[4] = mulChecked(B, int64(most), D)
			maxOut, ok[2] = mulChecked(B, T, int64(H), D, es)
			p.walkTotal = true
		}
	default:
		return opPlan{}, fmt.Errorf("a2a: %s has no general form: %w", r.op, ErrNotSupported)
	}
	p.tensors = r.n
	p.region = alignUp(maxOut, outputAlign)
	need, ok3 := mulChecked(p.region, N-1)
	ok[3] = ok3 && need <= math.MaxInt64-maxOut
	if !ok[0] || !ok[1] || !ok[2] || !ok[3] || !ok[4] {
		return opPlan{}, fmt.Errorf("a2a: %s of %d x %v with %d tokens in all overflows: %w", r.op, r.n, x.Shape, T, ErrCapacity)
	}
	if need+maxOut > capacity {
		return opPlan{}, fmt.Errorf("a2a: %s of %d tensors needs up to %d bytes of output on a rank, the buffer holds %d (raise MaxTokens or MaxTensors): %w", r.op, r.n, need+maxOut, capacity, ErrCapacity)
	}
	p.outBytes, _ = mulChecked(int64(p.out[0]), int64(p.out[1]), int64(p.out[2]), int64(p.out[3]), es)
	for q := 0; q <= world; q++ {
		first, _ := HeadRange(H, world, min(q, world-1))
		if q == world {
			first = H
		}
		p.heads[q] = int32(first)
	}
	p.width = generalWidth(r, D*es, es, widths)
	p.chunk = D * es
	p.headUnits = D * es / int64(p.width)
	p.units = int64(mine) * p.headUnits // a chunk: this rank's heads of one token
	if r.op == ptx.OpSendRecvHeads {
		p.units = int64(H) * p.headUnits // a whole input token row
	}
	for k := range r.n {
		p.inputs[k] = uint64(r.xs[k].Ptr)
	}
	p.inRow = api.RowElems(x) * es / int64(p.width)
	p.vectors = walk * es / int64(p.width)
	p.spread = r.sharedGeneral(world)
	p.groupBytes, ok[0] = mulChecked(groupWalk, es, N)
	p.groupRow, ok[1] = mulChecked(rowWalk, es, N)
	// The transport multiplies both by up to generalSpread.
	ok[0] = ok[0] && p.groupBytes <= math.MaxInt64/generalSpread
	ok[1] = ok[1] && p.groupRow <= math.MaxInt64/generalSpread
	p.shapeSig = generalSignature(r.op, b, H, d, int(es), r.n)
	p.sig = withTokens(p.shapeSig, ts.hash)
	if !ok[0] || !ok[1] || p.vectors > math.MaxInt32 || p.inRow > math.MaxUint32 {
		return opPlan{}, fmt.Errorf("a2a: %s moves %d vectors of %d bytes per tensor, over the kernels' 32-bit limit: %w", r.op, p.vectors, p.width, ErrCapacity)
	}
	return p, nil
}

// generalWidth is the widest vector width that a head (headBytes), the
// token stride and every input's address allow.
func generalWidth(r request, headBytes, es int64, widths []int) int {
	stride := api.RowElems(r.xs[0]) * es
	for _, w := range widths {
		fits := headBytes%int64(w) == 0 && stride%int64(w) == 0
		for k := range r.n {
			fits = fits && r.xs[k].Ptr%uintptr(w) == 0
		}
		if fits {
			return w
		}
	}
	return int(es)
}
