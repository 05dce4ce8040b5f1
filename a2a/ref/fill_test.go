package ref

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fp8"
)

func TestFillValues(t *testing.T) {
	const D, rows = 128, 2000
	for _, c := range []struct {
		dt  a2a.DType
		h   fp8.Half
		inf uint16 // the Inf pattern, sign cleared
	}{{a2a.BFloat16, fp8.BF16, 0x7F80}, {a2a.Float16, fp8.FP16, 0x7C00}} {
		t.Run(c.dt.String(), func(t *testing.T) {
			fill := func(seed uint64, rank int) []byte {
				b := make([]byte, 2*D*rows)
				require.NoError(t, FillValues(b, c.dt, D, seed, rank))
				return b
			}
			b := fill(5, 1)
			assert.Equal(t, b, fill(5, 1), "deterministic")
			assert.NotEqual(t, b, fill(5, 2), "rank changes values")
			assert.NotEqual(t, b, fill(6, 1), "seed changes values")

			// Every element finite, every row's scale exponent (E4M3) in the
			// narrow range magnitudes 2^-4..2^4 of a bell of sd 2 give, and
			// several magnitudes present.
			exps := map[int]bool{}
			row := make([]uint16, D)
			for r := 0; r < rows; r++ {
				for i := range row {
					row[i] = binary.LittleEndian.Uint16(b[2*(r*D+i):])
					require.Less(t, row[i]&0x7FFF, c.inf, "row %d element %d not finite", r, i)
				}
				k, err := fp8.ScaleExp(fp8.WireE4M3, c.h, row)
				require.NoError(t, err)
				require.True(t, k >= -14 && k <= -2, "row %d: scale exponent %d", r, k)
				exps[k] = true
			}
			assert.GreaterOrEqual(t, len(exps), 7, "row magnitudes %v", exps)
		})
	}
	assert.ErrorIs(t, FillValues(make([]byte, 8), a2a.Float8E4M3, 4, 1, 0), ErrShape)
	assert.ErrorIs(t, FillValues(make([]byte, 10), a2a.BFloat16, 4, 1, 0), ErrShape)
	assert.ErrorIs(t, FillValues(make([]byte, 8), a2a.BFloat16, 0, 1, 0), ErrShape)
	assert.NoError(t, FillValues(nil, a2a.BFloat16, 4, 1, 0))
}

// bf16Nearest rounds as fp8.HalfBits does, ties and carries included.
func TestBF16Nearest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 100000; i++ {
		f := math.Float32frombits(r.Uint32N(0x7F7F0000)) // finite, below bf16's largest
		if i%2 == 1 {
			f = -f
		}
		want, err := fp8.HalfBits(fp8.BF16, f)
		require.NoError(t, err)
		require.Equal(t, want, bf16Nearest(f), "%g (%#x)", f, math.Float32bits(f))
	}
	for _, b := range []uint32{0x3F808000, 0x3F818000, 0x3F80FFFF, 0x3FFF8000} {
		want, _ := fp8.HalfBits(fp8.BF16, math.Float32frombits(b))
		assert.Equal(t, want, bf16Nearest(math.Float32frombits(b)), "%#x", b)
	}
}
