package plan

// allGatherChunks: the plain kernel walks a chunk (a whole token row) per
// (batch, own token), stored into every rank.
func allGatherChunks(g geometry) (chunks, group, row int64, ok bool) {
	return products([]int64{g.B, g.Tr}, []int64{g.B, g.Tmax}, []int64{g.B})
}

// allGatherBox: my tokens -> my rows of peer q's [B, T, H, D].
func allGatherBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Pitch: f.pitch, Height: f.Tr}
	c.Dst = BoxSide{Off: f.region + f.pr*f.H*f.head, Pitch: f.H * f.head, Height: f.T}
	c.Width, c.Rows = f.H*f.head, f.Tr
	return c
}
