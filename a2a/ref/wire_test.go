package ref_test

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/api"
)

// Rows move whole, so the wire commutes with every operation: SendRecvHeads
// of round-tripped inputs equals the round trip of SendRecvHeads' output.
func TestRoundTripCommutesWithTheOperations(t *testing.T) {
	s := ref.Shape{Batch: 2, Heads: 5, HeadDim: 12, ElemSize: 2, Tokens: []int{3, 0, 4}}
	for _, w := range []api.Wire{api.WireE4M3, api.WireE5M2} {
		for _, dt := range []api.DType{api.BFloat16, api.Float16} {
			in := make([][]byte, s.World())
			rt := make([][]byte, s.World())
			for r := range in {
				in[r] = make([]byte, s.RankInputBytes(r))
				ref.FillRandom(in[r], 7, r)
				rt[r] = append([]byte(nil), in[r]...)
				require.NoError(t, ref.RoundTripRows(w, dt, rt[r], s.HeadDim))
			}
			for q := range s.World() {
				exact := make([]byte, s.HeadShardBytesFor(q))
				lossy := make([]byte, len(exact))
				require.NoError(t, ref.SendRecvHeadsFor(s, q, in, exact))
				require.NoError(t, ref.SendRecvHeadsFor(s, q, rt, lossy))
				require.NoError(t, ref.RoundTripRows(w, dt, exact, s.HeadDim))
				assert.Equal(t, lossy, exact, "%v %v rank %d", w, dt, q)
			}
		}
	}
}

func TestRoundTripRowsErrorBound(t *testing.T) {
	const D = 64
	b := make([]byte, 2*D*40)
	ref.FillRandom(b, 3, 0)
	// FillRandom's bf16 patterns span every exponent; keep them finite.
	for i := 0; i < len(b); i += 2 {
		u := binary.LittleEndian.Uint16(b[i:])
		if u&0x7F80 == 0x7F80 {
			binary.LittleEndian.PutUint16(b[i:], u&^0x4000)
		}
	}
	got := append([]byte(nil), b...)
	require.NoError(t, ref.RoundTripRows(api.WireE4M3, api.BFloat16, got, D))
	for r := 0; r < len(b)/(2*D); r++ {
		amax := 0.0
		for i := range D {
			amax = math.Max(amax, math.Abs(bf16(b, r*D+i)))
		}
		for i := range D {
			if amax < 0x1p-100 {
				continue // the scale's lower clamp: the bound is absolute there
			}
			assert.LessOrEqual(t, math.Abs(bf16(got, r*D+i)-bf16(b, r*D+i)), amax/16, "row %d element %d", r, i)
		}
	}
}

func TestRoundTripRowsRefuses(t *testing.T) {
	b := make([]byte, 12)
	require.ErrorIs(t, ref.RoundTripRows(api.WireE4M3, api.Float8E4M3, b, 6), ref.ErrShape)
	require.ErrorIs(t, ref.RoundTripRows(api.WireE4M3, api.BFloat16, b, 4), ref.ErrShape)
	require.NoError(t, ref.RoundTripRows(api.WireExact, api.Float8E4M3, b, 5), "exact: nothing to do")
}

func bf16(b []byte, i int) float64 {
	return float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16))
}
