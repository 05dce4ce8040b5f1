package plan

import "github.com/ulysses-go/ulysses/ptx"

// gatherHeads is the inverse of sendRecvHeads: rank q's [B, T, H_q, D]
// becomes every rank r's [B, T_r, H, D].
var gatherHeads = Operation{
	Op: ptx.OpGatherHeads, Name: "GatherHeads", Code: 2,
	In: RankHeads, Out: RankTokens,
	Plain: true, General: true, Wire: true, AutoCopyBytes: 64 << 20,
	plain: gatherHeadsChunks, general: gatherHeadsWalk, box: gatherHeadsBox,
}

// gatherHeadsChunks: the plain kernel walks a chunk (this rank's heads of
// one token) per (batch, k, peer) with k below the largest count.
func gatherHeadsChunks(g geometry) (chunks, group, row int64, ok bool) {
	chunks, ok = mulChecked(g.B, g.Tmax, g.P)
	return chunks, chunks, g.B * g.P, ok
}

// gatherHeadsWalk: the general kernel walks this rank's heads of every
// (batch, k, peer) with k below the largest count.
func gatherHeadsWalk(g geometry) (walk, group, row int64, ok bool) {
	var oks [3]bool
	walk, oks[0] = mulChecked(g.B, g.Tmax, g.P, g.mine, g.D)
	group, oks[1] = mulChecked(g.B, g.Tmax, g.P, g.most, g.D)
	row, oks[2] = mulChecked(g.B, g.P, g.most, g.D)
	return walk, group, row, oks[0] && oks[1] && oks[2]
}

// gatherHeadsBox: my heads of peer q's tokens -> my columns of q's
// [B, T_q, H, D].
func gatherHeadsBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Off: f.pq * f.pitch, Pitch: f.pitch, Height: f.T}
	c.Dst = BoxSide{Off: f.region + f.firstR*f.head, Pitch: f.H * f.head, Height: f.Tq}
	c.Width, c.Rows = f.cntR*f.head, f.Tq
	return c
}
