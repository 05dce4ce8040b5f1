package plan

// A transport that sends the fp8 wire's codes itself (NCCL) cannot store
// rows into its peers as the IPC exchange does. It packs this rank's rows
// first (ulysses_wire_pack_*): every row of each input, in the input's own
// order, as D codes and one scale byte, into a local pack area
//
//	[ codes: N x CodeRegion | scale bytes: N x ScaleRegion ]
//
// and then moves two layers of bytes with the copy plans of Boxes: the
// codes as 1-byte elements in heads of D, into the codes of the receivers'
// data halves (Plan.StageOff, StageRegion), and the scale bytes as heads
// of one 1-byte element, into their scale bytes (ScaleOff, ScaleRegion).
// Row i of an output so gets its codes and scale byte where the IPC
// exchange would have stored them, this rank's own rows included, and the
// receiver decodes its whole staging area (ulysses_wire_unpack_*).

// WirePack is one operation's pack area on one rank.
type WirePack struct {
	Rows        int64 // rows of one tensor's input: B * tokens * InHeads
	InHeads     int   // rows per input token
	CodeRegion  int64 // bytes between tensor k's codes and k+1's
	ScaleOff    int64 // tensor 0's scale bytes, from the area's start
	ScaleRegion int64 // bytes between tensor k's scale bytes and k+1's
	Bytes       int64 // the whole area
}

// NewWirePack lays out rank's pack area for r (this rank's request) under
// ts, as every rank can: the rows of rank's input as its operation's row
// says it holds them (Operation.In): the tokens rank holds, all heads
// (SendRecvHeads, AllGather), or all tokens, rank's heads (GatherHeads,
// HeadAllGather).
func NewWirePack(r *Request, rank, world int, ts Tokens) WirePack {
	o, x := Lookup(r.Op), r.Xs[0]
	tokens, heads := ts.Total(), x.Shape[2]
	if o.In&RankTokens != 0 {
		tokens = ts.Counts[rank]
	}
	if o.In&RankHeads != 0 {
		_, heads = HeadRange(r.totalHeads(world), world, rank)
	}
	w := WirePack{InHeads: heads}
	w.Rows = int64(x.Shape[0]) * int64(tokens) * int64(w.InHeads)
	w.CodeRegion = AlignUp(w.Rows*int64(x.Shape[3]), OutputAlign)
	w.ScaleRegion = AlignUp(w.Rows, OutputAlign)
	n := int64(max(r.N, 1))
	w.ScaleOff = n * w.CodeRegion
	w.Bytes = w.ScaleOff + n*w.ScaleRegion
	return w
}

// WireBoxes appends to cs the copies that move the rows rank packed into
// its area w to every rank (Boxes of the two layers: the codes, then the
// scale bytes). Each source offset is from the start of the area, each
// destination offset from the start of the receiver's data half. p is
// the operation's wire plan (its staging offsets and regions).
func WireBoxes(cs []Box, r *Request, p *Plan, w WirePack, rank, world int, ts Tokens) []Box {
	codes, scales := *r, *r
	for k := range max(r.N, 1) {
		codes.Xs[k].RowElems = int64(w.InHeads) * int64(r.Xs[k].Shape[3])
		scales.Xs[k].RowElems = int64(w.InHeads)
		scales.Xs[k].Shape[3] = 1
	}
	layer := func(cs []Box, lr *Request, region, dstOff, srcOff, srcRegion int64) []Box {
		lp := *p
		lp.Region = region
		n := len(cs)
		cs = Boxes(cs, lr, &lp, rank, world, ts, 1)
		for i := n; i < len(cs); i++ {
			cs[i].Dst.Off += dstOff
			cs[i].Src.Off += srcOff + int64(cs[i].Tensor)*srcRegion
		}
		return cs
	}
	cs = layer(cs, &codes, p.StageRegion, p.StageOff, 0, w.CodeRegion)
	return layer(cs, &scales, p.ScaleRegion, p.ScaleOff, w.ScaleOff, w.ScaleRegion)
}
