package plan

// headAllGatherWalk: the general kernel walks this rank's heads of every
// token, so its walk grows with all tokens (walkTotal).
func headAllGatherWalk(g geometry) (walk, group, row int64, ok bool) {
	return products([]int64{g.B, g.T, g.mine, g.D}, []int64{g.B, g.T, g.most, g.D}, []int64{g.B, g.most, g.D})
}

// headAllGatherBox: my heads of every token -> my columns of peer q's
// [B, T, H, D].
func headAllGatherBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Pitch: f.pitch, Height: f.T}
	c.Dst = BoxSide{Off: f.region + f.firstR*f.head, Pitch: f.H * f.head, Height: f.T}
	c.Width, c.Rows = f.cntR*f.head, f.T
	return c
}
