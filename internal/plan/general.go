package plan

import (
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/internal/api"
)

// MaxPitch bounds an Into output's token stride in bytes: the row pitch
// of cuMemcpy2D (CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2^31-1 on current GPUs).
const MaxPitch = 1<<31 - 1

// OutputAlign is where each tensor's output of a packed operation starts
// in a data half: a multiple of this many bytes.
const OutputAlign = 256

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

// sharedGeneral reports whether every rank takes the general entries for
// the request: for what the ranks share (the tensor count, the heads, the
// operation), not for a local choice such as an input's stride. An
// operation without plain entries always does; else uneven heads do:
// heads in all that are not this rank's times the world size where the
// input holds a rank's share, heads the world size does not divide where
// the output does.
func (r *Request) sharedGeneral(world int) bool {
	o, h := Lookup(r.Op), r.Xs[0].Shape[2]
	switch {
	case r.N != 1 || !o.Plain:
		return true
	case o.In&RankHeads != 0:
		return r.Heads != 0 && r.Heads != h*world
	case o.Out&RankHeads != 0:
		return h%world != 0
	}
	return false
}

// generalSpread is how many times more blocks the general entries activate
// than the plain ones for the same bytes, when every rank takes them and
// each has a GPU of its own: they do about twice the integer arithmetic
// per vector, which is the critical path where few blocks are active
// (SendRecvHeads of 41 heads took 12.3 us at 656 KiB against 10.2-10.3 us
// with 40 and 42). Ranks that share a GPU run their kernels at once on its
// SMs, and spread it among themselves (with two ranks on a GPU, 4 cost
// 19% per byte, 2 nothing). Only the block
// count changes; the plain entries, and a general one that stands in for
// them because of a stride, keep theirs, so ranks agree.
const generalSpread = 4

// SpreadFor is the spread of a shared general operation in a group whose
// busiest GPU runs sharers ranks: generalSpread divided among them.
func SpreadFor(sharers int) int64 {
	return max(1, generalSpread/int64(max(sharers, 1)))
}

// totalHeads is H: the input's heads where it holds all of them
// (SendRecvHeads, AllGather), else what the caller gave or this rank's
// heads times the world size.
func (r *Request) totalHeads(world int) int {
	switch {
	case Lookup(r.Op).In&RankHeads == 0:
		return r.Xs[0].Shape[2]
	case r.Heads != 0:
		return r.Heads
	}
	return r.Xs[0].Shape[2] * world
}

// checkRequest refuses packed inputs that differ in shape or token
// stride: every general operation walks them alike.
func checkRequest(r *Request) error {
	x := r.Xs[0]
	for k := 1; k < r.N; k++ {
		if y := r.Xs[k]; y.Shape != x.Shape || y.RowElems != x.RowElems {
			return fmt.Errorf("a2a: %s input %d is %v, input 0 %v: packed tensors share shape and stride: %w", r.Op, k, y, x, api.ErrShape)
		}
	}
	return nil
}

// general plans r with the general entries (choose): uneven heads, up to
// MaxTensors tensors into consecutive regions of the data half, inputs
// with a token stride, and HeadAllGather. shared is r.sharedGeneral: every
// rank takes these entries, for what they share. Like plain, everything
// that decides whether the operation runs depends on values every rank
// shares.
func general(r *Request, env *Env, ts Tokens, shared bool) (Plan, error) {
	if o := Lookup(r.Op); o == nil || !o.General {
		return Plan{}, fmt.Errorf("a2a: %s has no general form: %w", r.Op, api.ErrNotSupported)
	}
	return planRows(r, env, ts, env.Widths, shared)
}

// planRows is general for any operation that moves whole heads of D
// elements, AllGather included (the fp8 wire's entries have one), picking
// the vector width among widths; spread: every rank takes these entries
// (generalSpread).
func planRows(r *Request, env *Env, ts Tokens, widths []int, spread bool) (Plan, error) {
	o, x, rank, world := Lookup(r.Op), r.Xs[0], env.Rank, env.World
	if o == nil {
		return Plan{}, fmt.Errorf("a2a: unknown operation %q: %w", r.Op, api.ErrNotSupported)
	}
	if err := checkRequest(r); err != nil {
		return Plan{}, err
	}
	H := r.totalHeads(world)
	if o.splitsHeads() && (H < world || H > api.MaxDim) {
		return Plan{}, fmt.Errorf("a2a: %s of %d heads on %d ranks: every rank needs a head: %w", r.Op, H, world, api.ErrShape)
	}
	es := int64(env.DType.Size())
	w, err := generalWalks(r, o, rank, world, H, ts, es)
	if err != nil {
		return Plan{}, err
	}
	p := Plan{Op: r.Op, Batch: x.Shape[0], General: true, Out: w.out, WalkTotal: w.walkTotal, Tensors: r.N}
	if err := p.fitOutputs(r, w.maxOut, env.Layout.DataBytes, ts); err != nil {
		return Plan{}, err
	}
	p.OutBytes, _ = mulChecked(int64(p.Out[0]), int64(p.Out[1]), int64(p.Out[2]), int64(p.Out[3]), es)
	for q := 0; q <= world; q++ {
		first, _ := HeadRange(H, world, min(q, world-1))
		if q == world {
			first = H
		}
		p.Heads[q] = int32(first)
	}
	if err := p.setGeneralWalk(r, w, es, widths, spread); err != nil {
		return Plan{}, err
	}
	p.ShapeSig = generalSignature(r.Op, x.Shape[0], H, x.Shape[3], int(es), r.N)
	p.Sig = withTokens(p.ShapeSig, ts.Hash)
	return p, nil
}

// walks is what the general entries walk for one tensor: the output's
// shape on this rank; the input elements this rank walks (walk), the most
// any rank walks (group), and group per token of what it grows with
// (row); the largest output of one tensor on any rank in bytes; the heads
// of one input token row on this rank; and whether the walk grows with
// all tokens (HeadAllGather).
type walks struct {
	out                      [4]int
	walk, group, row, maxOut int64
	rowHeads                 int64
	walkTotal                bool
}

// generalWalks checks r's tokens and heads on rank against the counts and
// computes the walks of o, H heads in all.
func generalWalks(r *Request, o *Operation, rank, world, H int, ts Tokens, es int64) (walks, error) {
	x := r.Xs[0]
	g := newGeometry(x, rank, world, H, ts)
	w := walks{rowHeads: g.inHeads(o), walkTotal: o.walkTotal}
	if h := int64(x.Shape[2]); o.In&RankHeads != 0 && h != g.mine {
		return w, fmt.Errorf("a2a: %s input has %d heads; of %d heads on %d ranks rank %d holds %d: %w", r.Op, h, H, world, rank, g.mine, api.ErrShape)
	}
	if err := checkTokens(o, x, rank, ts); err != nil {
		return w, err
	}
	w.out = g.out(o)
	var ok [2]bool
	w.walk, w.group, w.row, ok[0] = o.general(g)
	w.maxOut, ok[1] = g.maxOut(o, es)
	if !ok[0] || !ok[1] {
		return w, fmt.Errorf("a2a: %s of %d x %v with %d tokens in all overflows: %w", r.Op, r.N, x.Shape, g.T, api.ErrCapacity)
	}
	return w, nil
}

// fitOutputs places the tensors' outputs, maxOut bytes each at most,
// OutputAlign apart, and checks that every rank's fit in capacity.
func (p *Plan) fitOutputs(r *Request, maxOut, capacity int64, ts Tokens) error {
	p.Region = AlignUp(maxOut, OutputAlign)
	need, ok := mulChecked(p.Region, int64(r.N)-1)
	if !ok || need > math.MaxInt64-maxOut {
		return fmt.Errorf("a2a: %s of %d x %v with %d tokens in all overflows: %w", r.Op, r.N, r.Xs[0].Shape, ts.Total(), api.ErrCapacity)
	}
	if need+maxOut > capacity {
		return fmt.Errorf("a2a: %s of %d tensors needs up to %d bytes of output on a rank, the buffer holds %d (raise MaxTokens or MaxTensors): %w", r.Op, r.N, need+maxOut, capacity, api.ErrCapacity)
	}
	return nil
}

// setGeneralWalk sets what the general kernels walk: the vector width,
// the units of a chunk, head and input row, the inputs, and the bytes
// that set the active blocks, which the kernels index with 32 bits.
func (p *Plan) setGeneralWalk(r *Request, w walks, es int64, widths []int, spread bool) error {
	D, N := int64(r.Xs[0].Shape[3]), int64(r.N)
	p.Width = generalWidth(r, D*es, es, widths)
	p.Chunk = D * es
	p.HeadUnits = D * es / int64(p.Width)
	p.Units = w.rowHeads * p.HeadUnits // an input token row: all heads, or this rank's
	for k := range r.N {
		p.Inputs[k] = uint64(r.Xs[k].Ptr)
	}
	p.InRow = r.Xs[0].RowElems * es / int64(p.Width)
	p.Vectors = w.walk * es / int64(p.Width)
	p.Spread = spread
	var ok [2]bool
	p.GroupBytes, ok[0] = mulChecked(w.group, es, N)
	p.GroupRow, ok[1] = mulChecked(w.row, es, N)
	// The transport multiplies both by up to generalSpread.
	ok[0] = ok[0] && p.GroupBytes <= math.MaxInt64/generalSpread
	ok[1] = ok[1] && p.GroupRow <= math.MaxInt64/generalSpread
	if !ok[0] || !ok[1] || p.Vectors > math.MaxInt32 || p.InRow > math.MaxUint32 {
		return fmt.Errorf("a2a: %s moves %d vectors of %d bytes per tensor, over the kernels' 32-bit limit: %w", r.Op, p.Vectors, p.Width, api.ErrCapacity)
	}
	return nil
}

// generalWidth is the widest vector width that a head (headBytes), the
// token stride and every input's address allow.
func generalWidth(r *Request, headBytes, es int64, widths []int) int {
	stride := r.Xs[0].RowElems * es
	for _, w := range widths {
		if headBytes%int64(w) == 0 && stride%int64(w) == 0 && inputsAligned(r, w) {
			return w
		}
	}
	return int(es)
}

// inputsAligned reports whether every input of r starts at a multiple of
// w bytes.
func inputsAligned(r *Request, w int) bool {
	for k := range r.N {
		if r.Xs[k].Ptr%uintptr(w) != 0 {
			return false
		}
	}
	return true
}
