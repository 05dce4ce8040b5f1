package plan

import "github.com/ulysses-go/ulysses/ptx"

// allGather gathers the sequence: rank r's [B, T_r, H, D] becomes every
// rank's [B, T, H, D].
var allGather = Operation{
	Op: ptx.OpAllGather, Name: "AllGather", Code: 3, In: RankTokens,
	Plain: true, Wire: true, AutoCopyBytes: 64 << 20,
	plain: allGatherChunks, general: allGatherWalk, box: allGatherBox,
}

// allGatherChunks: the plain kernel walks a chunk (a whole token row) per
// (batch, own token), stored into every rank.
func allGatherChunks(g geometry) (chunks, group, row int64, ok bool) {
	var oks [2]bool
	chunks, oks[0] = mulChecked(g.B, g.Tr)
	group, oks[1] = mulChecked(g.B, g.Tmax)
	return chunks, group, g.B, oks[0] && oks[1]
}

// allGatherWalk: the fp8 wire's kernel (AllGather has no general entries)
// walks every input token row whole.
func allGatherWalk(g geometry) (walk, group, row int64, ok bool) {
	var oks [3]bool
	walk, oks[0] = mulChecked(g.B, g.Tr, g.H, g.D)
	group, oks[1] = mulChecked(g.B, g.Tmax, g.H, g.D)
	row, oks[2] = mulChecked(g.B, g.H, g.D)
	return walk, group, row, oks[0] && oks[1] && oks[2]
}

// allGatherBox: my tokens -> my rows of peer q's [B, T, H, D].
func allGatherBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Pitch: f.pitch, Height: f.Tr}
	c.Dst = BoxSide{Off: f.region + f.pr*f.H*f.head, Pitch: f.H * f.head, Height: f.T}
	c.Width, c.Rows = f.H*f.head, f.Tr
	return c
}
