package plan

import "github.com/ulysses-go/ulysses/ptx"

// sendRecvHeads scatters heads and gathers tokens: rank r's [B, T_r, H, D]
// becomes every rank's [B, T, H_q, D], rank q's heads of every token.
var sendRecvHeads = Operation{
	Op: ptx.OpSendRecvHeads, Name: "SendRecvHeads", Code: 1,
	In: RankTokens, Out: RankHeads,
	Plain: true, General: true, Wire: true, AutoCopyBytes: 64 << 20,
	plain: sendRecvHeadsChunks, general: sendRecvHeadsWalk, box: sendRecvHeadsBox,
}

// sendRecvHeadsChunks: the plain kernel walks a chunk (one peer's heads of
// one token) per (batch, own token, peer).
func sendRecvHeadsChunks(g geometry) (chunks, group, row int64, ok bool) {
	var oks [2]bool
	chunks, oks[0] = mulChecked(g.B, g.Tr, g.P)
	group, oks[1] = mulChecked(g.B, g.Tmax, g.P)
	return chunks, group, g.B * g.P, oks[0] && oks[1]
}

// sendRecvHeadsWalk: the general kernel walks every input token row
// whole, all H heads.
func sendRecvHeadsWalk(g geometry) (walk, group, row int64, ok bool) {
	var oks [3]bool
	walk, oks[0] = mulChecked(g.B, g.Tr, g.H, g.D)
	group, oks[1] = mulChecked(g.B, g.Tmax, g.H, g.D)
	row, oks[2] = mulChecked(g.B, g.H, g.D)
	return walk, group, row, oks[0] && oks[1] && oks[2]
}

// sendRecvHeadsBox: the heads of peer q of my tokens -> my rows of q's
// [B, T, H_q, D].
func sendRecvHeadsBox(f boxFrame, c Box) Box {
	w := f.cntQ * f.head
	c.Src = BoxSide{Off: f.firstQ * f.head, Pitch: f.pitch, Height: f.Tr}
	c.Dst = BoxSide{Off: f.region + f.pr*w, Pitch: w, Height: f.T}
	c.Width, c.Rows = w, f.Tr
	return c
}
