package plan

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

// boxFrame is what one box of Boxes is made from: where the tensor's
// output starts in a data half (region), the input's token stride in
// bytes (pitch), the bytes of one head, the heads in all; this rank's
// tokens, prefix and heads; and those of the peer the box goes to.
type boxFrame struct {
	region, pitch, head, H int64
	T, Tr, pr              int64
	firstR, cntR           int64
	Tq, pq, firstQ, cntQ   int64
}

// Boxes appends to cs the copies that move r's bytes from rank to
// every rank, one per (tensor, peer) that has bytes to move, under the
// counts ts and the plan p (its output regions): each of the shape its
// operation's row gives (Operation). es is the element size.
// Allocation-free once cs has room for maxTensors * kernelabi.MaxRanks.
func Boxes(cs []Box, r *Request, p *Plan, rank, world int, ts Tokens, es int64) []Box {
	o, x := Lookup(r.Op), r.Xs[0]
	H := r.totalHeads(world)
	firstR, cntR := HeadRange(H, world, rank)
	f := boxFrame{pitch: x.RowElems * es, head: int64(x.Shape[3]) * es, H: int64(H),
		T: int64(ts.Total()), Tr: int64(ts.Counts[rank]), pr: int64(ts.Prefix[rank]),
		firstR: int64(firstR), cntR: int64(cntR)}
	for k := range max(r.N, 1) {
		f.region = int64(k) * p.Region
		for q := range world {
			firstQ, cntQ := HeadRange(H, world, q)
			f.Tq, f.pq, f.firstQ, f.cntQ = int64(ts.Counts[q]), int64(ts.Prefix[q]), int64(firstQ), int64(cntQ)
			c := Box{Peer: q, Tensor: k, Depth: int64(x.Shape[0])}
			c = o.box(f, c)
			if c.Width > 0 && c.Rows > 0 && c.Depth > 0 {
				cs = append(cs, c)
			}
		}
	}
	return cs
}
