package plan

import "github.com/ulysses-go/ulysses/ptx"

// Linear reports whether both sides of c are contiguous: rows packed
// without gaps, and slices too where there are several.
func (c Box) Linear() bool { return c.Contiguous(c.Src) && c.Contiguous(c.Dst) }

// Contiguous reports whether side s of c is: rows packed without gaps,
// and slices too where there are several.
func (c Box) Contiguous(s BoxSide) bool {
	return s.Pitch == c.Width && (c.Depth == 1 || s.Height == c.Rows)
}

// Bytes is what c moves.
func (c Box) Bytes() int64 { return c.Width * c.Rows * c.Depth }

// Boxes appends to cs the copies that move r's bytes from rank to
// every rank, one per (tensor, peer) that has bytes to move, under the
// counts ts and the plan p (its output regions). es is the element size.
// Allocation-free once cs has room for maxTensors * kernelabi.MaxRanks.
func Boxes(cs []Box, r *Request, p *Plan, rank, world int, ts Tokens, es int64) []Box {
	x := r.Xs[0]
	B, D := int64(x.Shape[0]), int64(x.Shape[3])
	H := int64(r.totalHeads(world))
	if r.Op == ptx.OpAllGather {
		H = int64(x.Shape[2])
	}
	pitch := x.RowElems * es
	T, Tr, pr := int64(ts.Total()), int64(ts.Counts[rank]), int64(ts.Prefix[rank])
	firstR, cntR := HeadRange(int(H), world, rank)
	head := D * es
	for k := range max(r.N, 1) {
		region := int64(k) * p.Region
		for q := range world {
			Tq, pq := int64(ts.Counts[q]), int64(ts.Prefix[q])
			firstQ, cntQ := HeadRange(int(H), world, q)
			c := Box{Peer: q, Tensor: k, Depth: B}
			switch r.Op {
			case ptx.OpSendRecvHeads: // heads of q of my tokens -> my rows of q's [B, T, H_q, D]
				w := int64(cntQ) * head
				c.Src = BoxSide{Off: int64(firstQ) * head, Pitch: pitch, Height: Tr}
				c.Dst = BoxSide{Off: region + pr*w, Pitch: w, Height: T}
				c.Width, c.Rows = w, Tr
			case ptx.OpGatherHeads: // my heads of q's tokens -> my columns of q's [B, T_q, H, D]
				c.Src = BoxSide{Off: pq * pitch, Pitch: pitch, Height: T}
				c.Dst = BoxSide{Off: region + int64(firstR)*head, Pitch: H * head, Height: Tq}
				c.Width, c.Rows = int64(cntR)*head, Tq
			case ptx.OpHeadAllGather: // my heads of every token -> my columns of everyone's [B, T, H, D]
				c.Src = BoxSide{Pitch: pitch, Height: T}
				c.Dst = BoxSide{Off: region + int64(firstR)*head, Pitch: H * head, Height: T}
				c.Width, c.Rows = int64(cntR)*head, T
			default: // AllGather: my tokens -> my rows of everyone's [B, T, H, D]
				c.Src = BoxSide{Pitch: pitch, Height: Tr}
				c.Dst = BoxSide{Off: region + pr*H*head, Pitch: H * head, Height: T}
				c.Width, c.Rows = H*head, Tr
			}
			if c.Width > 0 && c.Rows > 0 && c.Depth > 0 {
				cs = append(cs, c)
			}
		}
	}
	return cs
}
