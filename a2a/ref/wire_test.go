package ref_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
)

// Rows move whole, so the wire commutes with every operation: SendRecvHeads
// of round-tripped inputs equals the round trip of SendRecvHeads' output.
func TestRoundTripCommutesWithTheOperations(t *testing.T) {
	s := ref.Shape{Batch: 2, Heads: 5, HeadDim: 12, ElemSize: 2, Tokens: []int{3, 0, 4}}
	for _, w := range []a2a.Wire{a2a.WireE4M3, a2a.WireE5M2} {
		for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float16} {
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
	require.NoError(t, ref.RoundTripRows(a2a.WireE4M3, a2a.BFloat16, got, D))
	for r := 0; r < len(b)/(2*D); r++ {
		amax := 0.0
		for i := range D {
			amax = math.Max(amax, math.Abs(fromHalf(a2a.BFloat16, b, r*D+i)))
		}
		for i := range D {
			if amax < 0x1p-100 {
				continue // the scale's lower clamp: the bound is absolute there
			}
			assert.LessOrEqual(t, math.Abs(fromHalf(a2a.BFloat16, got, r*D+i)-fromHalf(a2a.BFloat16, b, r*D+i)), amax/16, "row %d element %d", r, i)
		}
	}
}

func TestRoundTripRowsRefuses(t *testing.T) {
	b := make([]byte, 12)
	require.ErrorIs(t, ref.RoundTripRows(a2a.WireE4M3, a2a.Float8E4M3, b, 6), ref.ErrShape)
	require.ErrorIs(t, ref.RoundTripRows(a2a.WireE4M3, a2a.BFloat16, b, 4), ref.ErrShape)
	require.NoError(t, ref.RoundTripRows(a2a.WireExact, a2a.Float8E4M3, b, 5), "exact: nothing to do")
}

// The error figures docs/BENCHMARKS.md quotes, on rows drawn as attention
// activations look (normal, standard deviation 1, with one outlier of 20
// in every eighth row), D = 128, bf16 and fp16: the largest error per row
// relative to the row's amax, the mean of it, and the RMS error relative
// to the RMS of the row. The GPU's outputs equal RoundTripRows bit for bit
// (a2a's TestWire), so these are the wire's figures. Asserted against the
// bound; printed with -v.
func TestRoundTripRowsErrorFigures(t *testing.T) {
	const D, rows = 128, 4096
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float16} {
		x := make([]byte, 2*D*rows)
		for i := range D * rows {
			v := rng.NormFloat64()
			if i%(8*D) == 0 {
				v = 20
			}
			binary.LittleEndian.PutUint16(x[2*i:], toHalf(dt, v))
		}
		for _, w := range []a2a.Wire{a2a.WireE4M3, a2a.WireE5M2} {
			y := append([]byte(nil), x...)
			require.NoError(t, ref.RoundTripRows(w, dt, y, D))
			var worst, sumMax, sumRel float64
			for r := range rows {
				amax, errMax, e2, x2 := 0.0, 0.0, 0.0, 0.0
				for i := r * D; i < (r+1)*D; i++ {
					a, b := fromHalf(dt, x, i), fromHalf(dt, y, i)
					amax, errMax = math.Max(amax, math.Abs(a)), math.Max(errMax, math.Abs(b-a))
					e2, x2 = e2+(b-a)*(b-a), x2+a*a
				}
				worst = math.Max(worst, errMax/amax)
				sumMax += errMax / amax
				sumRel += math.Sqrt(e2 / x2)
			}
			bound := 1.0 / 16
			if w == a2a.WireE5M2 {
				bound = 1.0 / 8
			}
			assert.LessOrEqual(t, worst, bound, "%v %v", w, dt)
			t.Logf("%v over %v: max error/amax per row: worst %.4f, mean %.4f; RMS error/RMS per row: mean %.4f",
				dt, w, worst, sumMax/rows, sumRel/rows)
		}
	}
}

// toHalf rounds v to bf16 or fp16 (to nearest even), as a bit pattern.
func toHalf(dt a2a.DType, v float64) uint16 {
	f := float32(v)
	if dt == a2a.BFloat16 {
		b := math.Float32bits(f)
		return uint16((b + 0x7FFF + (b >> 16 & 1)) >> 16)
	}
	return float16(f)
}

// float16 converts a float32 in fp16's normal range to fp16, rounding to
// nearest even (enough for the test's values).
func float16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23&0xFF) - 127 + 15
	mant := b & 0x7FFFFF
	if exp <= 0 { // below fp16's normals: flush (the test's values are larger)
		return sign
	}
	v := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1FFF
	if rem > 0x1000 || rem == 0x1000 && v&1 == 1 {
		v++
	}
	return sign | uint16(v)
}

func fromHalf(dt a2a.DType, b []byte, i int) float64 {
	u := binary.LittleEndian.Uint16(b[2*i:])
	if dt == a2a.BFloat16 {
		return float64(math.Float32frombits(uint32(u) << 16))
	}
	e, m := int(u>>10&31), float64(u&0x3FF)
	v := math.Ldexp(1+m/1024, e-15)
	if e == 0 {
		v = math.Ldexp(m/1024, -14)
	}
	if u&0x8000 != 0 {
		v = -v
	}
	return v
}
