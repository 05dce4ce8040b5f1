package main

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// divisor is walks.cuh's divisor_of, step for step: the multiplier and
// shift of a division by d.
func divisor(d uint32) (mul, shift uint32) {
	d = max(d, 1)
	shift = 32 - uint32(bits.LeadingZeros32(d-1))
	mul = uint32((((uint64(1) << shift) - uint64(d)) << 32 / uint64(d)) + 1)
	return mul, shift
}

// quotient is Divisor::div: (umulhi(n, mul) + n) >> shift, the sum in 64
// bits.
func quotient(n, mul, shift uint32) uint32 {
	hi, _ := bits.Mul32(n, mul)
	return uint32((uint64(hi) + uint64(n)) >> shift)
}

// The walks' division by multiplication is exact for the divisors and
// indices they meet (and the edges of 32 bits), so that the kernels may
// use it wherever they divided.
func TestDivisorIsExact(t *testing.T) {
	src, err := os.ReadFile("kernels/walks.cuh")
	require.NoError(t, err)
	require.True(t, strings.Contains(string(src), "(static_cast<u64>(__umulhi(n, mul)) + n) >> shift"),
		"walks.cuh's Divisor::div is no longer the formula this test checks")

	rng := rand.New(rand.NewPCG(1, 2))
	var ds []uint32
	for d := uint32(1); d <= 4096; d++ {
		ds = append(ds, d)
	}
	for range 2000 {
		ds = append(ds, rng.Uint32()|1, rng.Uint32N(1<<20)+1)
	}
	ds = append(ds, 1<<31, 1<<31-1, 1<<31+1, math.MaxUint32, math.MaxUint32-1)
	for _, d := range ds {
		mul, shift := divisor(d)
		ns := []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, math.MaxUint32, math.MaxUint32 - 1, math.MaxUint32 / d * d}
		for range 64 {
			ns = append(ns, rng.Uint32(), rng.Uint32N(1<<24))
		}
		for _, n := range ns {
			if got := quotient(n, mul, shift); got != n/d {
				t.Fatalf("%d / %d: %d, want %d (mul %d, shift %d)", n, d, got, n/d, mul, shift)
			}
		}
	}
	mul, shift := divisor(0) // a walk of no rows: a division by 1
	assert.Equal(t, uint32(12345), quotient(12345, mul, shift))
}
