package a2a

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// boxSide is one side of a boxCopy: where its first row starts (bytes from
// the input's address, or from the start of the peer's data half), the
// bytes from one row to the next, and the rows from one slice to the next.
type boxSide struct {
	off, pitch, height int64
}

// boxCopy is one copy-engine copy of an operation: depth (batch) slices
// of rows rows of width bytes, from input tensor of this rank into the
// data half of rank peer. The layout change is all in the two sides'
// offsets and pitches, as the kernels fold it into their stores.
type boxCopy struct {
	peer, tensor       int
	src, dst           boxSide
	width, rows, depth int64
}

// linear reports whether both sides of c are contiguous: rows packed
// without gaps, and slices too where there are several.
func (c boxCopy) linear() bool { return c.contiguous(c.src) && c.contiguous(c.dst) }

// contiguous reports whether side s of c is: rows packed without gaps,
// and slices too where there are several.
func (c boxCopy) contiguous(s boxSide) bool {
	return s.pitch == c.width && (c.depth == 1 || s.height == c.rows)
}

// bytes is what c moves.
func (c boxCopy) bytes() int64 { return c.width * c.rows * c.depth }

// copyBoxAsync enqueues on s the copy of box c's shape from src, whose
// geometry is from, to dst, whose geometry is to: one linear copy when
// both are contiguous, else one pitched 3D copy. The copy-engine mode
// and the NCCL transport's packs and unpacks share it.
func copyBoxAsync(ctx *driver.Context, dst driver.DevicePtr, to boxSide, src driver.DevicePtr, from boxSide, c boxCopy, s driver.Stream) error {
	if c.contiguous(to) && c.contiguous(from) {
		return ctx.MemcpyDtoDAsync(dst, src, uint64(c.bytes()), s)
	}
	return ctx.MemcpyBoxAsync(
		driver.Box{Ptr: dst, Pitch: uint64(to.pitch), Height: uint64(to.height)},
		driver.Box{Ptr: src, Pitch: uint64(from.pitch), Height: uint64(from.height)},
		uint64(c.width), uint64(c.rows), uint64(c.depth), s)
}

// copyPlan appends to cs the copies that move r's bytes from rank to
// every rank, one per (tensor, peer) that has bytes to move, under the
// counts ts and the plan p (its output regions). es is the element size.
// Allocation-free once cs has room for maxTensors * MaxWorldSize.
func copyPlan(cs []boxCopy, r request, p opPlan, rank, world int, ts tokenSet, es int64) []boxCopy {
	x := r.xs[0]
	B, D := int64(x.Shape[0]), int64(x.Shape[3])
	H := int64(r.totalHeads(world))
	if r.op == ptx.OpAllGather {
		H = int64(x.Shape[2])
	}
	pitch := api.RowElems(x) * es
	T, Tr, pr := int64(ts.total()), int64(ts.counts[rank]), int64(ts.prefix[rank])
	firstR, cntR := HeadRange(int(H), world, rank)
	head := D * es
	for k := range max(r.n, 1) {
		region := int64(k) * p.region
		for q := range world {
			Tq, pq := int64(ts.counts[q]), int64(ts.prefix[q])
			firstQ, cntQ := HeadRange(int(H), world, q)
			c := boxCopy{peer: q, tensor: k, depth: B}
			switch r.op {
			case ptx.OpSendRecvHeads: // heads of q of my tokens -> my rows of q's [B, T, H_q, D]
				w := int64(cntQ) * head
				c.src = boxSide{off: int64(firstQ) * head, pitch: pitch, height: Tr}
				c.dst = boxSide{off: region + pr*w, pitch: w, height: T}
				c.width, c.rows = w, Tr
			case ptx.OpGatherHeads: // my heads of q's tokens -> my columns of q's [B, T_q, H, D]
				c.src = boxSide{off: pq * pitch, pitch: pitch, height: T}
				c.dst = boxSide{off: region + int64(firstR)*head, pitch: H * head, height: Tq}
				c.width, c.rows = int64(cntR)*head, Tq
			case ptx.OpHeadAllGather: // my heads of every token -> my columns of everyone's [B, T, H, D]
				c.src = boxSide{pitch: pitch, height: T}
				c.dst = boxSide{off: region + int64(firstR)*head, pitch: H * head, height: T}
				c.width, c.rows = int64(cntR)*head, T
			default: // AllGather: my tokens -> my rows of everyone's [B, T, H, D]
				c.src = boxSide{pitch: pitch, height: Tr}
				c.dst = boxSide{off: region + pr*H*head, pitch: H * head, height: T}
				c.width, c.rows = H*head, Tr
			}
			if c.width > 0 && c.rows > 0 && c.depth > 0 {
				cs = append(cs, c)
			}
		}
	}
	return cs
}
