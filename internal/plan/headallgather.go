package plan

import "github.com/ulysses-go/ulysses/ptx"

// headAllGather gathers heads: rank r's [B, T, H_r, D] becomes every
// rank's [B, T, H, D]. It has general entries only (no plain ones), and
// no copy-engine threshold measured (AutoCopyBytes 0).
var headAllGather = Operation{
	Op: ptx.OpHeadAllGather, Name: "HeadAllGather", Code: 4, In: RankHeads,
	General: true, Wire: true, walkTotal: true,
	general: headAllGatherWalk, box: headAllGatherBox,
}

// headAllGatherWalk: the general kernel walks this rank's heads of every
// token, so its walk grows with all tokens (walkTotal).
func headAllGatherWalk(g geometry) (walk, group, row int64, ok bool) {
	var oks [3]bool
	walk, oks[0] = mulChecked(g.B, g.T, g.mine, g.D)
	group, oks[1] = mulChecked(g.B, g.T, g.most, g.D)
	row, oks[2] = mulChecked(g.B, g.most, g.D)
	return walk, group, row, oks[0] && oks[1] && oks[2]
}

// headAllGatherBox: my heads of every token -> my columns of peer q's
// [B, T, H, D].
func headAllGatherBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Pitch: f.pitch, Height: f.T}
	c.Dst = BoxSide{Off: f.region + f.firstR*f.head, Pitch: f.H * f.head, Height: f.T}
	c.Width, c.Rows = f.cntR*f.head, f.T
	return c
}
