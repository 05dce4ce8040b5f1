package plan

import (
	"math/bits"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// Divisor is a division by a fixed d as the kernels' walks do it (Divisor
// in gen/kernels/walks.cuh): a multiplication and a shift. The host makes
// the divisions by the token counts of captured operations, which the
// kernels would otherwise make after reading the counts, on the path of
// every replay. Its words are those of kernelabi's DivisorWords.
type Divisor struct {
	D, Mul, Shift uint32
}

// DivisorOf is walks.cuh's divisor_of, step for step (Granlund and
// Montgomery): with l = ceil(log2 d), mul = floor(2^32 * (2^l - d) / d) + 1.
// d = 0 divides by 1, as a walk of no vectors needs. It costs a 64-bit
// division.
func DivisorOf(d uint32) Divisor {
	d = max(d, 1)
	shift := 32 - uint32(bits.LeadingZeros32(d-1))
	mul := uint32((((uint64(1) << shift) - uint64(d)) << 32 / uint64(d)) + 1)
	return Divisor{D: d, Mul: mul, Shift: shift}
}

// Quotient is Divisor::div: (umulhi(n, mul) + n) >> shift, the sum in 64
// bits; it equals n / D for every 32-bit n.
func (v Divisor) Quotient(n uint32) uint32 {
	hi, _ := bits.Mul32(n, v.Mul)
	return uint32((uint64(hi) + uint64(n)) >> v.Shift)
}

// Words are the divisor as the kernels' Live table holds it.
func (v Divisor) Words() [kernelabi.DivisorWords]uint32 {
	return [kernelabi.DivisorWords]uint32{v.D, v.Mul, v.Shift}
}

// Divisors are the divisions by rank's count and by the most tokens of
// any rank, indexed by kernelabi's TokenDiv*, as the Live table holds them
// for captured operations.
func (ts Tokens) Divisors(rank int) [kernelabi.TokenDivisors][kernelabi.DivisorWords]uint32 {
	var out [kernelabi.TokenDivisors][kernelabi.DivisorWords]uint32
	out[kernelabi.TokenDivRank] = DivisorOf(uint32(ts.Counts[rank])).Words()
	out[kernelabi.TokenDivMost] = DivisorOf(uint32(ts.Most())).Words()
	return out
}
