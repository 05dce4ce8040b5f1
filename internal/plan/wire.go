package plan

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// The fp8 wire's part of a data half, after the N outputs of Region bytes:
//
//	[ outputs: N x Region | codes: N x StageRegion | scale bytes: N x ScaleRegion ]
//
// Row i of tensor k's output (one head of one token, D elements) lands as
// D codes at StageOff + k*StageRegion + i*D and one scale byte at
// ScaleOff + k*ScaleRegion + i, written by the rank that held the row; the
// decode turns them into the output in place.

// WireMinHeadDim is the head size WireBytes reserves scale bytes for:
// smaller heads need a scale byte for fewer elements, and fit fewer tokens.
const WireMinHeadDim = 8

// WireBytes is what one data half needs for tensors outputs of at most
// outBytes each (16-bit elements) with the fp8 wire: each output from a
// multiple of OutputAlign, then one code per element and one scale byte
// per head of WireMinHeadDim elements or more, each tensor's from a
// multiple of OutputAlign. About 1.56 times outBytes per tensor.
func WireBytes(outBytes int64, tensors int) int64 {
	r := AlignUp(outBytes, OutputAlign)
	return int64(max(tensors, 1)) * (r + AlignUp(r/2, OutputAlign) + AlignUp(r/(2*WireMinHeadDim), OutputAlign))
}

// wire plans r with its 16-bit rows exchanged as fp8 (env.Wire, lossy): the
// general walks in elements for the four operations, the staging area
// placed after the outputs and checked against capacity, the width the
// wire entries read with, and w in the signature, so that ranks that
// disagree on the wire fail with ErrOpMismatch instead of decoding each
// other's bytes.
func wire(r *Request, env *Env, ts Tokens) (Plan, error) {
	w, dt, world, capacity := env.Wire, env.DType, env.World, env.Layout.DataBytes
	if !w.Lossy() || !w.Carries(dt) {
		return Plan{}, fmt.Errorf("a2a: the %v wire moves 16-bit elements, not %v: %w", w, dt, api.ErrConfig)
	}
	p, err := planRows(r, env, ts, []int{2}, true)
	if err != nil {
		return Plan{}, err
	}
	D := int64(r.Xs[0].Shape[3])
	p.Wire = w
	p.WireRows = p.Region / (2 * D)
	p.StageRegion = AlignUp(p.WireRows*D, OutputAlign)
	p.ScaleRegion = AlignUp(p.WireRows, OutputAlign)
	N := int64(r.N)
	p.StageOff = N * p.Region
	p.ScaleOff = p.StageOff + N*p.StageRegion
	if need := p.ScaleOff + N*p.ScaleRegion; need > capacity {
		return Plan{}, fmt.Errorf("a2a: %s of %d tensors over the %v wire needs up to %d bytes on a rank (outputs, codes and scales), the buffer holds %d (raise MaxTokens or MaxTensors): %w", r.Op, r.N, w, need, capacity, api.ErrCapacity)
	}
	if elems := p.OutBytes / 2; p.WireRows > math.MaxInt32 || elems > math.MaxInt32 {
		return Plan{}, fmt.Errorf("a2a: %s over the %v wire: %d output elements per tensor, over the kernels' 32-bit limit: %w", r.Op, w, elems, api.ErrCapacity)
	}
	p.WireWidth = wireWidth(r, D)
	p.DecodeWidth = WireDecodeWidth(D)
	p.WireDirect = p.GroupBytes < WireDirectBytes() || world == 1 // a world of one has only its own rows
	mode := uint64(w) << 40
	if p.WireDirect {
		mode |= 1 << 48
	}
	p.ShapeSig = fnvAdd(p.ShapeSig, mode)
	p.Sig = withTokens(p.ShapeSig, ts.Hash)
	return p, nil
}

// WireDirectBytes is where the wire starts to stage: an operation whose
// largest rank reads fewer input bytes than this (all its tensors) sends
// every row as the 16-bit values its fp8 round trip gives, straight into
// the outputs, in one launch and with the exact operation's bytes; from it
// on, rows for the peers cross as codes and scale bytes and a decode
// launch follows. Either way the outputs are the same bits. Rank-local
// rows never stage. The figure is an estimate, not a measurement: where
// halving a link's bytes (395 GB/s a direction on 2 x H200) saves the
// decode launch (a few microseconds) and its pass over HBM.
func WireDirectBytes() int64 {
	if n := WireDirectOverride.Load(); n != 0 {
		return n
	}
	return 4 << 20
}

// WireDirectOverride, when not 0, replaces WireDirectBytes: tests set it
// to take either path at any size (1: always stage; math.MaxInt64: never).
var WireDirectOverride atomic.Int64

// wireWidth is the widest of ptx.WireWidths that heads of D elements, the
// token stride and every input's address allow.
func wireWidth(r *Request, D int64) int {
	for _, w := range ptx.WireWidths {
		if headFits(w, D) && r.Xs[0].RowElems%int64(w/2) == 0 && inputsAligned(r, w) {
			return w
		}
	}
	return 2
}

// WireDecodeWidth is the width of the decode entry for heads of D
// elements: it reads only the Comm's own staging area, so the head size
// alone decides.
func WireDecodeWidth(D int64) int {
	for _, w := range ptx.WireWidths {
		if headFits(w, D) {
			return w
		}
	}
	return 2
}

// headFits reports whether the wire entries of width w take heads of D
// elements: a whole number of w-byte groups, and for the widest at most
// ptx.WireWideMaxDim.
func headFits(w int, D int64) bool {
	return D%int64(w/2) == 0 && (w < 16 || D <= ptx.WireWideMaxDim)
}
