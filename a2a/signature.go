package a2a

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

// opSignature names an operation and everything about it that every rank
// shares (the operation, batch, full head count, head size, element size
// and token counts). Kernels compare it across ranks: ranks that run
// different operations at the same epoch get an error, not a result.
func opSignature(op ptx.Op, batch, heads, headDim, elemBytes int, ts tokenSet) uint32 {
	h := ts.hash
	h = fnvAdd(h, uint64(opCode(op)))
	for _, v := range []int{batch, heads, headDim, elemBytes} {
		h = fnvAdd(h, uint64(v))
	}
	return h
}

func opCode(op ptx.Op) int {
	for i, o := range ptx.Ops {
		if o == op {
			return i + 1
		}
	}
	return 0
}
