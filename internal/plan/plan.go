package plan

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

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

// plain plans r, one dense input x with heads the world size divides
// (choose), with the plain entries: it checks x against the token counts
// ts, the world size and the capacity, and picks the widest vector width
// that the chunk size and x's alignment allow among env.Widths (widest
// first). Everything that decides whether the operation runs depends only
// on values every rank shares (the token counts, the shape), so either
// every rank launches or none does; only a local error (a wrong pointer,
// dtype or token count on this rank) can split the group, and then the
// peers time out.
func plain(r *Request, env *Env, ts Tokens) (Plan, error) {
	o, x, rank, world := Lookup(r.Op), r.Xs[0], env.Rank, env.World
	if o == nil || o.plain == nil {
		return Plan{}, fmt.Errorf("a2a: %s has no plain entries: %w", r.Op, api.ErrNotSupported)
	}
	es := int64(env.DType.Size())
	p, c, err := plainChunks(o, x, rank, world, ts, es)
	if err != nil {
		return Plan{}, err
	}
	if c.maxOut > env.Layout.DataBytes {
		return Plan{}, fmt.Errorf("a2a: %s needs up to %d bytes of output on a rank, the buffer holds %d (raise MaxTokens): %w", o.Op, c.maxOut, env.Layout.DataBytes, api.ErrCapacity)
	}
	p.Batch = x.Shape[0]
	p.OutBytes, _ = mulChecked(int64(p.Out[0]), int64(p.Out[1]), int64(p.Out[2]), int64(p.Out[3]), es)
	p.Inputs[0] = uint64(x.Ptr)
	p.Width = int(es)
	for _, w := range env.Widths {
		if p.Chunk%int64(w) == 0 && x.Ptr%uintptr(w) == 0 {
			p.Width = w
			break
		}
	}
	var ok [3]bool
	p.Vectors, ok[0] = mulChecked(c.chunks, p.Chunk/int64(p.Width))
	p.GroupBytes, ok[1] = mulChecked(c.group, p.Chunk)
	p.GroupRow, ok[2] = mulChecked(c.row, p.Chunk)
	p.ShapeSig = shapeSignature(o.Op, x.Shape[0], c.heads, x.Shape[3], int(es))
	p.Sig = withTokens(p.ShapeSig, ts.Hash)
	if !ok[0] || !ok[1] || !ok[2] || p.Vectors > math.MaxInt32 {
		return Plan{}, fmt.Errorf("a2a: %s moves %d vectors of %d bytes, over the kernels' 32-bit limit: %w", o.Op, p.Vectors, p.Width, api.ErrCapacity)
	}
	return p, nil
}

// chunks counts what a plain operation walks: this rank's chunks, the
// most any rank has, those per token of the largest rank (the walk is B*P
// chunks per token, B for AllGather, which moves whole rows), the largest
// output of any rank in bytes, and the heads in all.
type chunks struct {
	chunks, group, row, maxOut int64
	heads                      int
}

// plainChunks checks x's tokens and heads against the counts and sets
// the output's shape and the chunk of o on rank: the heads of one token
// that go to or come from one rank, all of them where o splits none.
func plainChunks(o *Operation, x Input, rank, world int, ts Tokens, es int64) (Plan, chunks, error) {
	p := Plan{Op: o.Op}
	var c chunks
	if err := checkTokens(o, x, rank, ts); err != nil {
		return p, c, err
	}
	c.heads = x.Shape[2]
	if o.In&RankHeads != 0 {
		c.heads *= world // the plain entries: every rank holds H/P
	}
	if o.splitsHeads() && c.heads%world != 0 {
		return p, c, fmt.Errorf("a2a: %d heads not divisible by world size %d: %w", c.heads, world, api.ErrShape)
	}
	g := newGeometry(x, rank, world, c.heads, ts)
	p.Out = g.out(o)
	piece := g.H
	if o.splitsHeads() {
		piece = g.mine
	}
	var ok [3]bool
	p.Chunk, ok[0] = mulChecked(piece, g.D, es)
	c.chunks, c.group, c.row, ok[1] = o.plain(g)
	c.maxOut, ok[2] = g.maxOut(o, es)
	if !ok[0] || !ok[1] || !ok[2] {
		return p, c, fmt.Errorf("a2a: %s of %v with %d tokens in all overflows: %w", o.Op, x.Shape, g.T, api.ErrCapacity)
	}
	return p, c, nil
}

// ThreadsFor is the block size for a grid of blocks on a device of sms SMs
// in a group of world ranks: 256 threads on every SM where rows cross a
// link (2 x H200, GatherHeads at 128 MiB: 195 us against 199 us with 512),
// 512 on fewer SMs, where each SM needs more stores in flight
// (SendRecvHeads on 32 SMs at 128 MiB: 236 us with 512, 289 us with 256),
// and 512 for a rank alone, whose copies are local and bound by the
// latency of its loads (one H200, 128 MiB: SendRecvHeads 77.3 us against
// 90.6 with 256, GatherHeads 76.2 against 106.6, AllGather 76.0 against
// 93.0).
func ThreadsFor(blocks, sms, world int) int {
	if blocks >= sms && world > 1 {
		return 256
	}
	return kernelabi.Threads
}

// WireThreadsFor is the block size of both fp8 wire launches for a grid
// of blocks per rank, sharers ranks on a device of sms SMs. The wire's
// warps wait on each row's loads before its arithmetic, one block per SM,
// so its time follows the warps in flight: 512 threads wherever the
// sharers' grids together fit the SMs one block each (one H200, a rank
// alone, 128 MiB SendRecvHeads over E4M3: 120 us against 188 with 256;
// two ranks on 32 SMs each: 585 us against 938, GatherHeads 704 against
// 1161, AllGather 804 against 1291), and 256 where they do not, so that
// the blocks fit beside each other in the registers (two ranks on one
// H200, all SMs, the direct path: 236 us against 324 with 512).
func WireThreadsFor(blocks, sharers, sms int) int {
	if sharers > 1 && blocks*sharers > sms {
		return kernelabi.Threads / 2
	}
	return kernelabi.Threads
}

// ActiveBlocks is how many of the launched blocks take part in an
// operation that walks up to groupBytes of input on a rank: one per 4 KiB
// (kernelabi.SmallGranule) up to 64 (kernelabi.FewBlocks), one per 64 KiB
// (kernelabi.LargeGranule) beyond when that is more, at least one. The
// barrier's own cost grows with the blocks that signal: with the kernel's
// bones alone (SendRecvHeads' stores and barrier, graph replay, 2 x H200)
// 64 blocks or fewer beat 128 by 0.7-1.0 us from 128 KiB to 4 MiB (1 MiB:
// 5.9 us against 6.8; 128 KiB: 32 blocks 4.4 us, 16 blocks 4.6, 8 blocks
// 4.8), and every count from 64 up ran level at 8 MiB.
func ActiveBlocks(groupBytes int64, blocks int) int {
	n := min((groupBytes+kernelabi.SmallGranule-1)/kernelabi.SmallGranule, kernelabi.FewBlocks)
	n = max(n, (groupBytes+kernelabi.LargeGranule-1)/kernelabi.LargeGranule)
	return int(max(1, min(n, int64(blocks))))
}
