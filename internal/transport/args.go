package transport

import (
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// SetArgsTokens puts the counts ts into a kernel argument: T_r of every
// rank and their prefix sums, zero past the world.
func SetArgsTokens(a *kernelabi.Args, ts plan.Tokens) {
	a.Tokens = [kernelabi.MaxRanks]int32{}
	a.Prefix = [kernelabi.MaxRanks + 1]int32{}
	for i, n := range ts.Counts {
		a.Tokens[i] = int32(n)
	}
	for i, n := range ts.Prefix {
		a.Prefix[i] = int32(n)
	}
}
