package plan_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// plan.HeadRange agrees with the reference and tiles [0, H) in rank order with
// counts that differ by at most one.
func TestHeadRange(t *testing.T) {
	for world := 1; world <= kernelabi.MaxRanks; world++ {
		for heads := world; heads <= 48; heads++ {
			s := ref.Shape{Batch: 1, Heads: heads, HeadDim: 1, ElemSize: 1, Tokens: make([]int, world)}
			next, lo, hi := 0, heads, 0
			for r := range world {
				first, count := plan.HeadRange(heads, world, r)
				wf, wc := s.HeadRange(r)
				require.Equal(t, [2]int{wf, wc}, [2]int{first, count}, "H=%d P=%d rank %d", heads, world, r)
				require.Equal(t, next, first)
				next += count
				lo, hi = min(lo, count), max(hi, count)
			}
			require.Equal(t, heads, next)
			require.LessOrEqual(t, hi-lo, 1)
		}
	}
	f, c := plan.HeadRange(4, 2, 2)
	assert.Equal(t, [2]int{0, 0}, [2]int{f, c}, "rank out of range")
}
