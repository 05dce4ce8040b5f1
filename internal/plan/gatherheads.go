package plan

// gatherHeadsChunks: the plain kernel walks a chunk (this rank's heads of
// one token) per (batch, k, peer) with k below the largest count.
func gatherHeadsChunks(g geometry) (chunks, group, row int64, ok bool) {
	return products([]int64{g.B, g.Tmax, g.P}, []int64{g.B, g.Tmax, g.P}, []int64{g.B, g.P})
}

// gatherHeadsWalk: the general kernel walks this rank's heads of every
// (batch, k, peer) with k below the largest count.
func gatherHeadsWalk(g geometry) (walk, group, row int64, ok bool) {
	return products([]int64{g.B, g.Tmax, g.P, g.mine, g.D}, []int64{g.B, g.Tmax, g.P, g.most, g.D}, []int64{g.B, g.P, g.most, g.D})
}

// gatherHeadsBox: my heads of peer q's tokens -> my columns of q's
// [B, T_q, H, D].
func gatherHeadsBox(f boxFrame, c Box) Box {
	c.Src = BoxSide{Off: f.pq * f.pitch, Pitch: f.pitch, Height: f.T}
	c.Dst = BoxSide{Off: f.region + f.firstR*f.head, Pitch: f.H * f.head, Height: f.Tq}
	c.Width, c.Rows = f.cntR*f.head, f.Tq
	return c
}
