package plan

import "github.com/ulysses-go/ulysses/ptx"

// FNV-1a, 32 bits, over 64-bit words: the operation signature.
const (
	fnvOffset = 2166136261
	fnvPrime  = 16777619
)

func fnvAdd(h uint32, v uint64) uint32 {
	for i := 0; i < 8; i++ {
		h ^= uint32(v >> (8 * i) & 0xff)
		h *= fnvPrime
	}
	return h
}

// An operation's signature names it and everything about it that every
// rank shares: the operation, batch, full head count, head size, element
// size (shapeSignature) and the token counts (mixed in by withTokens).
// Kernels compare it across ranks: ranks that run different operations at
// the same epoch get an error, not a result. A captured operation carries
// only its shape signature; the kernel mixes in the counts it reads at
// replay (fnv_add in gen/kernels, the same as withTokens).
func shapeSignature(op ptx.Op, batch, heads, headDim, elemBytes int) uint32 {
	h := uint32(fnvOffset)
	h = fnvAdd(h, opCode(op))
	for _, v := range []int{batch, heads, headDim, elemBytes} {
		h = fnvAdd(h, uint64(v))
	}
	return h
}

// generalSignature is shapeSignature of an operation of the general
// entries: the same as the plain entries' for one tensor (so ranks may
// take different entries for one operation, as their inputs' strides
// decide), with the tensor count mixed in for more.
func generalSignature(op ptx.Op, batch, heads, headDim, elemBytes, tensors int) uint32 {
	h := shapeSignature(op, batch, heads, headDim, elemBytes)
	if tensors > 1 {
		h = fnvAdd(h, uint64(tensors))
	}
	return h
}

// PadSignature is the signature of the operation that pads a graph (see
// CaptureGraph): it moves nothing, on any shape.
var PadSignature = shapeSignature(ptx.OpAllGather, 0, 0, 0, 0)

// withTokens mixes the token counts' hash into a shape signature.
func withTokens(shape, tokenHash uint32) uint32 { return fnvAdd(shape, uint64(tokenHash)) }

// opCode is op's Operation.Code, 0 for an operation there is no row of.
func opCode(op ptx.Op) uint64 {
	if o := Lookup(op); o != nil {
		return o.Code
	}
	return 0
}
