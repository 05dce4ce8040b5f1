package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// The kernels divide as internal/plan's Divisor, whose test shows the
// division exact: the host makes some of their divisors (plan.DivisorOf),
// so walks.cuh's divisor_of and Divisor::div must stay the formulas that
// Go mirrors.
func TestKernelsDivideAsThePlan(t *testing.T) {
	src, err := os.ReadFile("kernels/walks.cuh")
	require.NoError(t, err)
	for _, formula := range []string{
		"(static_cast<u64>(__umulhi(n, mul)) + n) >> shift", // Divisor.Quotient
		"v.d = max(d, 1u);", // DivisorOf(0) divides by 1
		"v.shift = 32u - static_cast<u32>(__clz(v.d - 1u));",                        // l = ceil(log2 d)
		"v.mul = static_cast<u32>((((1ull << v.shift) - v.d) << 32) / v.d + 1ull);", // the multiplier
	} {
		require.True(t, strings.Contains(string(src), formula), "walks.cuh no longer has %q, which plan.Divisor mirrors", formula)
	}
}
