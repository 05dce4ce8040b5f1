package plan

// sendRecvHeadsChunks: the plain kernel walks a chunk (one peer's heads of
// one token) per (batch, own token, peer).
func sendRecvHeadsChunks(g geometry) (chunks, group, row int64, ok bool) {
	return products([]int64{g.B, g.Tr, g.P}, []int64{g.B, g.Tmax, g.P}, []int64{g.B, g.P})
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
