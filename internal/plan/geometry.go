package plan

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// geometry is an operation's sizes on one rank, as its walks read them:
// its first input's, the token counts' and the heads'.
type geometry struct {
	B, D, P     int64 // batch, head size, world size
	T, Tr, Tmax int64 // every rank's tokens, this rank's, the most of one rank
	H           int64 // heads in all
	mine, most  int64 // this rank's heads of H (HeadRange), the most of one rank
}

// newGeometry is the geometry of an operation on x on rank of world, H
// heads in all, under the counts ts.
func newGeometry(x Input, rank, world, H int, ts Tokens) geometry {
	_, mine := HeadRange(H, world, rank)
	_, most := HeadRange(H, world, 0)
	return geometry{
		B: int64(x.Shape[0]), D: int64(x.Shape[3]), P: int64(world),
		T: int64(ts.Total()), Tr: int64(ts.Counts[rank]), Tmax: int64(ts.Most()),
		H: int64(H), mine: int64(mine), most: int64(most),
	}
}

// inHeads is how many heads of each token o's input holds on this rank.
func (g *geometry) inHeads(o *Operation) int64 {
	if o.In&RankHeads != 0 {
		return g.mine
	}
	return g.H
}

// out is the shape of o's output of x on this rank.
func (g *geometry) out(o *Operation) [4]int {
	t, h := g.T, g.H
	if o.Out&RankTokens != 0 {
		t = g.Tr
	}
	if o.Out&RankHeads != 0 {
		h = g.mine
	}
	return [4]int{int(g.B), int(t), int(h), int(g.D)}
}

// maxOut is the largest output of o on any rank in bytes, of es-byte
// elements; false on overflow.
func (g *geometry) maxOut(o *Operation, es int64) (int64, bool) {
	t, h := g.T, g.H
	if o.Out&RankTokens != 0 {
		t = g.Tmax
	}
	if o.Out&RankHeads != 0 {
		h = g.most
	}
	return mulChecked(g.B, t, h, g.D, es)
}

// checkTokens refuses an input x of o on rank whose tokens are not what
// the counts ts give it: rank's own, or all ranks' (o.In).
func checkTokens(o *Operation, x Input, rank int, ts Tokens) error {
	t := x.Shape[1]
	if o.In&RankTokens != 0 {
		if t != ts.Counts[rank] {
			return fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave rank %d %d: %w", o.Op, t, rank, ts.Counts[rank], api.ErrTokens)
		}
		return nil
	}
	if t != ts.Total() {
		return fmt.Errorf("a2a: %s input has %d tokens, SetRankTokens gave %d in all: %w", o.Op, t, ts.Total(), api.ErrTokens)
	}
	return nil
}

// products is the product of each of three lists of factors, false where
// any overflows: an operation's walk, the most of any rank, and that per
// token.
func products(a, b, c []int64) (x, y, z int64, ok bool) {
	var oks [3]bool
	x, oks[0] = mulChecked(a...)
	y, oks[1] = mulChecked(b...)
	z, oks[2] = mulChecked(c...)
	return x, y, z, oks[0] && oks[1] && oks[2]
}

// wholeRowsWalk is the general and wire walk of an operation whose
// kernel reads every input token row of this rank whole, all H heads
// (SendRecvHeads, AllGather): in elements.
func wholeRowsWalk(g geometry) (walk, group, row int64, ok bool) {
	return products([]int64{g.B, g.Tr, g.H, g.D}, []int64{g.B, g.Tmax, g.H, g.D}, []int64{g.B, g.H, g.D})
}
