package fp8

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hspec describes a 16-bit type independently of the package's tables.
type hspec struct {
	name   string
	h      Half
	mbits  int
	bias   int
	maxPat uint16    // largest finite pattern
	nanPat uint16    // canonical NaN
	sub    float64   // smallest subnormal
	vals   []float64 // vals[u] = value of pattern u, 0 <= u <= maxPat
}

func newHspec(name string, h Half, mbits, bias int, maxPat, nanPat uint16) *hspec {
	s := &hspec{name: name, h: h, mbits: mbits, bias: bias, maxPat: maxPat, nanPat: nanPat}
	s.sub = math.Ldexp(1, 1-bias-mbits)
	for u := 0; u <= int(maxPat); u++ {
		s.vals = append(s.vals, s.value(uint16(u)))
	}
	return s
}

var hspecs = []*hspec{
	newHspec("bf16", BF16, 7, 127, 0x7F7F, 0x7FC0),
	newHspec("fp16", FP16, 10, 15, 0x7BFF, 0x7E00),
}

// wires pairs each Wire with the fp8 test spec of its format.
var wires = []struct {
	w Wire
	s spec
}{{WireE4M3, specs[0]}, {WireE5M2, specs[1]}}

// value decodes u from the type's definition, in float64 (exact).
func (s *hspec) value(u uint16) float64 {
	top := 1<<(15-s.mbits) - 1
	e, m := int(u&0x7FFF)>>s.mbits, int(u)&(1<<s.mbits-1)
	var v float64
	switch {
	case e == top && m != 0:
		return math.NaN()
	case e == top:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), 1-s.bias-s.mbits)
	default:
		v = math.Ldexp(float64(1<<s.mbits+m), e-s.bias-s.mbits)
	}
	if u&0x8000 != 0 {
		v = -v
	}
	return v
}

// nearest returns the index of the value of vals (ascending, vals[0] = 0)
// nearest to a, 0 <= a <= vals[len-1], ties to the even index. It compares
// 2a with the sum of the two neighbours, both exact in float64 here.
func nearest(vals []float64, a float64) int {
	i := sort.Search(len(vals), func(i int) bool { return vals[i] > a }) - 1
	if vals[i] == a {
		return i
	}
	switch mid := vals[i] + vals[i+1]; {
	case 2*a < mid:
		return i
	case 2*a > mid:
		return i + 1
	}
	return i + i&1
}

func signOf(v float64) int {
	if math.Signbit(v) {
		return 1
	}
	return 0
}

// refOut rounds v to the 16-bit type: nearest even, saturating, NaN to
// the canonical NaN.
func (s *hspec) refOut(v float64) uint16 {
	if math.IsNaN(v) {
		return s.nanPat
	}
	sign := uint16(signOf(v)) << 15
	if a := math.Abs(v); a <= s.vals[s.maxPat] {
		return sign | uint16(nearest(s.vals, a))
	}
	return sign | s.maxPat
}

// wireVals lists the fp8 format's non-negative finite values, ascending.
func wireVals(ws spec) []float64 {
	var v []float64
	for c := 0; c <= int(ws.maxCode); c++ {
		v = append(v, ws.refValue(uint8(c)))
	}
	return v
}

var wireTables = [2][]float64{wireVals(specs[0]), wireVals(specs[1])}

// refCode rounds the exact value s to the fp8 format as cvt.rn.satfinite.
func refCode(wi int, s float64) uint8 {
	ws := wires[wi].s
	if math.IsNaN(s) {
		return 0x7F
	}
	sign := uint8(signOf(s)) << 7
	if a := math.Abs(s); a <= ws.max {
		return sign | uint8(nearest(wireTables[wi], a))
	}
	return sign | ws.maxCode
}

// refScale returns k for amax by floating-point logarithm, corrected by
// exact comparisons, unclamped.
func refScale(ws spec, amax float64) int {
	if amax == 0 {
		return 0
	}
	k := int(math.Ceil(math.Log2(amax / ws.max)))
	for amax > math.Ldexp(ws.max, k) {
		k++
	}
	for amax <= math.Ldexp(ws.max, k-1) {
		k--
	}
	return k
}

// refRow is the slow definition of EncodeRow and DecodeRow on row.
func refRow(wi int, hs *hspec, row []uint16) (k int, codes []uint8, out []uint16) {
	amax := 0.0
	for _, u := range row {
		if v := math.Abs(hs.value(u)); !math.IsInf(v, 0) && v > amax {
			amax = v
		}
	}
	k = min(max(refScale(wires[wi].s, amax), -120), 120)
	for _, u := range row {
		c := refCode(wi, math.Ldexp(hs.value(u), -k))
		codes = append(codes, c)
		out = append(out, hs.refOut(math.Ldexp(wires[wi].s.refValue(c), k)))
	}
	return k, codes, out
}

// encDec runs EncodeRow and DecodeRow on row.
func encDec(t *testing.T, w Wire, h Half, row []uint16) (k int, codes []uint8, out []uint16) {
	t.Helper()
	codes = make([]uint8, len(row))
	out = make([]uint16, len(row))
	sb, err := EncodeRow(w, h, codes, row)
	require.NoError(t, err)
	k2, err := ScaleExp(w, h, row)
	require.NoError(t, err)
	require.Equal(t, k2+128, int(sb))
	require.NoError(t, DecodeRow(w, h, out, codes, sb))
	return int(sb) - 128, codes, out
}

func TestRowHandWorked(t *testing.T) {
	type tc struct {
		name  string
		w     Wire
		h     Half
		row   []uint16
		k     int
		codes []uint8
		out   []uint16
	}
	tests := []tc{
		{"zeros", WireE4M3, BF16, []uint16{0, 0x8000, 0, 0x8000}, 0, []uint8{0, 0x80, 0, 0x80}, []uint16{0, 0x8000, 0, 0x8000}},
		{"zeros", WireE5M2, FP16, []uint16{0x8000, 0}, 0, []uint8{0x80, 0}, []uint16{0x8000, 0}},
		// amax 56 = 448*2^-3 = 57344*2^-10 exactly: the boundary k.
		{"boundary", WireE4M3, BF16, []uint16{0x4260, 0x3F80, 0xC260}, -3, []uint8{0x7E, 0x50, 0xFE}, []uint16{0x4260, 0x3F80, 0xC260}},
		{"boundary", WireE5M2, BF16, []uint16{0x4260, 0x3F80}, -10, []uint8{0x7B, 0x3C + 10<<2}, []uint16{0x4260, 0x3F80}},
		// 56.25, the next bf16: k one larger; 56.25*4 = 225 -> 224 (step 16)
		// -> 56.
		{"above", WireE4M3, BF16, []uint16{0x4261, 0x3F80}, -2, []uint8{0x76, 0x48}, []uint16{0x4260, 0x3F80}},
		// 56.25*2^9 = 28800 -> 28672 (E5M2 step 4096) -> 56.
		{"above", WireE5M2, BF16, []uint16{0x4261}, -9, []uint8{0x77}, []uint16{0x4260}},
		// fp16 65504: 255.875 -> 256 -> 65536 > 65504: saturates;
		// 1*2^-8 = 2*2^-9 (0x02) -> 1 exactly.
		{"fp16max", WireE4M3, FP16, []uint16{0x7BFF, 0xFBFF, 0x3C00}, 8, []uint8{0x78, 0xF8, 0x02}, []uint16{0x7BFF, 0xFBFF, 0x3C00}},
		// 65504/2 = 32752 -> 32768 (E5M2 step 4096) -> 65536: saturates.
		{"fp16max", WireE5M2, FP16, []uint16{0x7BFF}, 1, []uint8{0x78}, []uint16{0x7BFF}},
		// NaN (any payload or sign) -> 0x7F -> canonical NaN; amax 2, k = -7.
		{"nan", WireE4M3, FP16, []uint16{0x3C00, 0x7E01, 0xFC01, 0xC000}, -7, []uint8{0x70, 0x7F, 0x7F, 0xF8}, []uint16{0x3C00, 0x7E00, 0x7E00, 0xC000}},
		{"nan", WireE5M2, BF16, []uint16{0xFFC1, 0x3F80}, -15, []uint8{0x7F, 0x78}, []uint16{0x7FC0, 0x3F80}},
		// ±Inf -> ±MAXW*2^k = ±3.5 (amax 2 from the finite elements).
		{"inf", WireE4M3, BF16, []uint16{0x7F80, 0xFF80, 0x4000, 0x3F00}, -7, []uint8{0x7E, 0xFE, 0x78, 0x68}, []uint16{0x4060, 0xC060, 0x4000, 0x3F00}},
		{"inf", WireE5M2, FP16, []uint16{0x7C00, 0xFC00, 0x4000}, -14, []uint8{0x7B, 0xFB, 0x78}, []uint16{0x4300, 0xC300, 0x4000}},
		// No finite nonzero element: k = 0, Inf -> ±448 (bf16 0x43E0, fp16 0x5F00).
		{"inf only", WireE4M3, BF16, []uint16{0x7F80, 0xFFC0}, 0, []uint8{0x7E, 0x7F}, []uint16{0x43E0, 0x7FC0}},
		{"inf only", WireE4M3, FP16, []uint16{0xFC00, 0x8000}, 0, []uint8{0xFE, 0x80}, []uint16{0xDF00, 0x8000}},
		// bf16 subnormals: amax 127*2^-133 < 2^-126, k clamps at -120.
		// 2^-133*2^120 = 2^-13 < 2^-10 -> ±0; 2^-127 -> 2^-7 (0x04), exact;
		// 127*2^-13 = 7.9375*2^-9 -> 8*2^-9 = 2^-6 (0x08) -> 2^-126 (0x0080).
		{"bf16 subnormal", WireE4M3, BF16, []uint16{0x0001, 0x0040, 0x007F, 0x8001}, -120, []uint8{0x00, 0x04, 0x08, 0x80}, []uint16{0, 0x0040, 0x0080, 0x8000}},
		// Lower clamp: amax 2^-120 (unclamped k = -128): scaled by 2^120
		// only, so 1 -> 0x38 and 2^-125 -> 2^-5 (0x10), both exact.
		{"clamp low", WireE4M3, BF16, []uint16{0x0380, 0x0100}, -120, []uint8{0x38, 0x10}, []uint16{0x0380, 0x0100}},
		// Upper end: the largest bf16 gives k = 120 with E4M3 (unclamped);
		// 255 -> 256, 256*2^120 overflows float32 -> saturates to 0x7F7F;
		// 1*2^-120 -> 0.
		{"clamp high", WireE4M3, BF16, []uint16{0x7F7F, 0xFF7F, 0x3F80}, 120, []uint8{0x78, 0xF8, 0}, []uint16{0x7F7F, 0xFF7F, 0}},
		{"clamp high", WireE5M2, BF16, []uint16{0x7F7F, 0x3F80}, 113, []uint8{0x78, 0}, []uint16{0x7F7F, 0}},
	}
	for _, tt := range tests {
		k, codes, out := encDec(t, tt.w, tt.h, tt.row)
		assert.Equalf(t, tt.k, k, "%s %v/%v k", tt.name, tt.w, tt.h)
		assert.Equalf(t, tt.codes, codes, "%s %v/%v codes", tt.name, tt.w, tt.h)
		assert.Equalf(t, tt.out, out, "%s %v/%v out", tt.name, tt.w, tt.h)
		x := append([]uint16(nil), tt.row...)
		require.NoError(t, RoundTripRows(tt.w, tt.h, x, len(x)))
		assert.Equalf(t, tt.out, x, "%s %v/%v RoundTripRows", tt.name, tt.w, tt.h)
	}
	require.Len(t, tests, 18)
}

// TestRowScaleRange checks, for every finite 16-bit pattern as amax, that
// the unclamped k never exceeds 120 and goes below -120 only for bf16, and
// that ScaleExp agrees with the slow definition.
func TestRowScaleRange(t *testing.T) {
	for wi, wr := range wires {
		for _, hs := range hspecs {
			lo, hi, n := 0, 0, 0
			for u := 0; u <= int(hs.maxPat); u++ {
				kr := refScale(wr.s, hs.vals[u])
				lo, hi = min(lo, kr), max(hi, kr)
				inf := uint16(1<<(15-hs.mbits)-1) << hs.mbits
				k, err := ScaleExp(wr.w, hs.h, []uint16{uint16(u) | 0x8000, inf, 0xFFFF})
				require.NoError(t, err)
				require.Equalf(t, min(max(kr, -120), 120), k, "%s %s %#04x", wr.s.name, hs.name, u)
				n++
			}
			require.Equal(t, int(hs.maxPat)+1, n)
			assert.LessOrEqual(t, hi, 120, "%s %s", wr.s.name, hs.name)
			if hs.h == FP16 {
				assert.Equal(t, [2]int{[]int{-32, -39}[wi], []int{8, 1}[wi]}, [2]int{lo, hi}, wr.s.name)
			} else {
				assert.Equal(t, []int{120, 113}[wi], hi, wr.s.name)
				assert.Less(t, lo, -120, wr.s.name)
			}
		}
	}
}

// TestRowMatchesReference compares EncodeRow/DecodeRow with refRow on
// every 16-bit pattern x as a row {x, c} for companions c that set k
// (c = 0 makes x its own amax), and checks the claim about tiny products:
// where |x*2^-k| < 2^-126 exactly, the code is a signed zero whatever the
// float32 product (rounded, or flushed to zero) is.
func TestRowMatchesReference(t *testing.T) {
	companions := map[Half][]uint16{
		BF16: {0, 0x3F80, 0x4260, 0x0380, 0x0010, 0x2000, 0x6000, 0x7A00, 0x7F7F},
		FP16: {0, 0x3C00, 0x7BFF, 0x0001, 0x0400, 0x1000, 0x5F00},
	}
	rows, tiny, rounded := 0, 0, 0
	for wi, wr := range wires {
		for _, hs := range hspecs {
			codes, out := make([]uint8, 2), make([]uint16, 2)
			for _, c := range companions[hs.h] {
				for u := 0; u < 1<<16; u++ {
					row := []uint16{uint16(u), c}
					k, wantCodes, wantOut := refRow(wi, hs, row)
					sb, err := EncodeRow(wr.w, hs.h, codes, row)
					require.NoError(t, err)
					require.NoError(t, DecodeRow(wr.w, hs.h, out, codes, sb))
					if int(sb)-128 != k || codes[0] != wantCodes[0] || out[0] != wantOut[0] ||
						codes[1] != wantCodes[1] || out[1] != wantOut[1] {
						t.Fatalf("%s %s row %#04x: k %d codes %#02x out %#04x, want %d %#02x %#04x",
							wr.s.name, hs.name, row, int(sb)-128, codes, out, k, wantCodes, wantOut)
					}
					rows++
					x := hs.value(uint16(u))
					if s := math.Ldexp(x, -k); s != 0 && math.Abs(s) < 0x1p-126 {
						tiny++
						require.Equal(t, uint8(signOf(x))<<7, codes[0])
						p := float64(float32(x) * pow2(int32(-k)))
						if p != s {
							rounded++
						}
						require.Equal(t, codes[0], wr.s.enc(float32(math.Copysign(0, x)))) // FTZ
					}
				}
			}
		}
	}
	require.Equal(t, 2*(9+7)<<16, rows)
	require.Positive(t, tiny)
	require.Positive(t, rounded)
	t.Logf("%d rows; %d tiny products, %d of them rounded in float32", rows, tiny, rounded)
}

// randomRows returns rows of n patterns: each row centred on a random
// binade, its elements spread over up to 12 binades below it (into the
// subnormals and zero), some with outliers 4..15 binades above, some with
// the type's max, NaN or ±Inf, some all zeros.
func randomRows(r *rand.Rand, hs *hspec, rows, n int) []uint16 {
	top := 1<<(15-hs.mbits) - 1
	pat := func(sign, e int) uint16 {
		e = min(max(e, 0), top-1)
		return uint16(sign<<15 | e<<hs.mbits | r.IntN(1<<hs.mbits))
	}
	x := make([]uint16, rows*n)
	for i := 0; i < rows; i++ {
		row := x[i*n : (i+1)*n]
		c, span := 1+r.IntN(top-1), 1+r.IntN(12)
		for j := range row {
			row[j] = pat(r.IntN(2), c-r.IntN(span))
		}
		switch r.IntN(16) {
		case 0, 1, 2, 3:
			for range 1 + r.IntN(3) {
				row[r.IntN(n)] = pat(r.IntN(2), c+4+r.IntN(12))
			}
		case 4:
			row[r.IntN(n)] = hs.maxPat | uint16(r.IntN(2))<<15
		case 5:
			row[r.IntN(n)] = []uint16{hs.nanPat, 0xFFFF, uint16(top) << hs.mbits, uint16(0x8000 | top<<hs.mbits)}[r.IntN(4)]
		case 6:
			for j := range row {
				row[j] = uint16(r.IntN(2)) << 15
			}
		}
	}
	return x
}

// roundTripStats tallies what the bound test saw.
type roundTripStats struct {
	elems, rows, rowsBounded, saturated int
	maxRatio                            float64
}

// TestRowErrorBound checks, on random rows, the element and row bounds
// documented on RoundTripRows, that the output conversion is exact in a
// round trip unless it saturates, that RoundTripRows
// equals EncodeRow+DecodeRow and refRow, and that it is idempotent.
func TestRowErrorBound(t *testing.T) {
	r := rand.New(rand.NewPCG(0xf8, 0x16))
	const rows = 1500
	for wi, wr := range wires {
		for _, hs := range hspecs {
			var st roundTripStats
			for _, n := range []int{64, 128} {
				x := randomRows(r, hs, rows, n)
				y := append([]uint16(nil), x...)
				require.NoError(t, RoundTripRows(wr.w, hs.h, y, n))
				for i := 0; i < rows; i++ {
					checkRow(t, wi, hs, x[i*n:(i+1)*n], y[i*n:(i+1)*n], &st)
				}
				z := append([]uint16(nil), y...)
				require.NoError(t, RoundTripRows(wr.w, hs.h, z, n))
				require.Equal(t, y, z, "idempotence %s %s n=%d", wr.s.name, hs.name, n)
			}
			name := wr.s.name + " " + hs.name
			require.Equal(t, 2*rows, st.rows, name)
			require.Greater(t, st.elems, 150*rows, name)
			require.Greater(t, st.rowsBounded, rows, name)
			require.Positive(t, st.saturated, name)
			require.Greater(t, st.maxRatio, 0.9, name)
			t.Logf("%s: %d elements, %d rows (%d with the row bound), %d saturated, max err/bound %.3f",
				name, st.elems, st.rows, st.rowsBounded, st.saturated, st.maxRatio)
		}
	}
}

// checkRow checks one row x and its round trip y (see TestRowErrorBound).
func checkRow(t *testing.T, wi int, hs *hspec, x, y []uint16, st *roundTripStats) {
	ws := wires[wi].s
	k, codes, out := encDec(t, wires[wi].w, hs.h, x)
	require.Equal(t, out, y)
	kr, _, outr := refRow(wi, hs, x)
	require.Equal(t, kr, k)
	require.Equal(t, outr, y)
	amax, rowErr := 0.0, 0.0
	for i, u := range x {
		xv, yv := hs.value(u), hs.value(y[i])
		if math.IsNaN(xv) || math.IsInf(xv, 0) {
			continue
		}
		amax = max(amax, math.Abs(xv))
		v := math.Ldexp(ws.refValue(codes[i]), k)
		switch {
		case math.Abs(v) > hs.vals[hs.maxPat]:
			st.saturated++
		default:
			require.Equalf(t, v, yv, "%s %s: output rounding in a round trip", ws.name, hs.name)
		}
		d, lo := twoSum(yv, -xv)
		require.Zero(t, lo, "inexact difference")
		e := 1 - ws.bias
		if s := math.Ldexp(xv, -k); s != 0 {
			_, exp := math.Frexp(s)
			e = max(exp-1, e)
		}
		bound := math.Ldexp(1, k+e-int(ws.mbits)-1)
		require.LessOrEqualf(t, math.Abs(d), bound, "%s %s x=%g y=%g k=%d", ws.name, hs.name, xv, yv, k)
		st.maxRatio = max(st.maxRatio, math.Abs(d)/bound)
		rowErr = max(rowErr, math.Abs(d))
		st.elems++
	}
	st.rows++
	if amax > 0 && math.Ldexp(amax, -k) >= math.Ldexp(1, 1-ws.bias) {
		require.LessOrEqual(t, rowErr, math.Ldexp(amax, -int(ws.mbits)-1), "row bound") // exact
		st.rowsBounded++
	}
}

func TestRowErrors(t *testing.T) {
	codes, row := make([]byte, 4), make([]uint16, 4)
	_, err := EncodeRow(WireE4M3, BF16, codes[:3], row)
	assert.ErrorIs(t, err, ErrCodesLength)
	assert.ErrorIs(t, DecodeRow(WireE4M3, BF16, row, codes[:3], 128), ErrCodesLength)
	assert.ErrorIs(t, DecodeRow(WireE4M3, BF16, row, codes, 7), ErrScaleByte)
	assert.ErrorIs(t, DecodeRow(WireE4M3, BF16, row, codes, 249), ErrScaleByte)
	assert.NoError(t, DecodeRow(WireE4M3, BF16, row, codes, 8))
	assert.NoError(t, DecodeRow(WireE4M3, BF16, row, codes, 248))
	assert.ErrorIs(t, RoundTripRows(WireE4M3, BF16, row, 3), ErrRowLength)
	assert.ErrorIs(t, RoundTripRows(WireE4M3, BF16, row, 0), ErrRowLength)
	assert.ErrorIs(t, RoundTripRows(WireE4M3, BF16, row, -2), ErrRowLength)
	assert.NoError(t, RoundTripRows(WireE4M3, BF16, row, 2))
	assert.NoError(t, RoundTripRows(WireE4M3, BF16, nil, 2))
	_, err = ScaleExp(Wire(2), BF16, row)
	assert.ErrorIs(t, err, ErrFormat)
	_, err = EncodeRow(WireE5M2, Half(-1), codes, row)
	assert.ErrorIs(t, err, ErrFormat)
	assert.ErrorIs(t, RoundTripRows(Wire(7), FP16, row, 4), ErrFormat)
	assert.ErrorIs(t, DecodeRow(WireE4M3, Half(2), row, codes, 128), ErrFormat)

	// Codes an encoder never writes still decode by the rules: E5M2 Inf
	// saturates, NaN is canonical; the largest code at k = 120 overflows
	// float32 and saturates.
	require.NoError(t, DecodeRow(WireE5M2, FP16, row, []byte{0x7C, 0xFC, 0x7D, 0x7B}, 248))
	assert.Equal(t, []uint16{0x7BFF, 0xFBFF, 0x7E00, 0x7BFF}, row)
	require.NoError(t, DecodeRow(WireE5M2, BF16, row, []byte{0x01, 0x81, 0x7E, 0x07}, 8))
	// 2^-16*2^-120 = 2^-136 < 2^-134: rounds to ±0; 0x07 is 1.75*2^-14,
	// times 2^-120 is 0.875*2^-133 -> 2^-133 (0x0001).
	assert.Equal(t, []uint16{0x0000, 0x8000, 0x7FC0, 0x0001}, row)
}

func TestRowNoAllocs(t *testing.T) {
	x := make([]uint16, 256)
	for i := range x {
		x[i] = uint16(0x3C00 + 37*i)
	}
	codes := make([]byte, 128)
	allocs := testing.AllocsPerRun(50, func() {
		sb, _ := EncodeRow(WireE4M3, FP16, codes, x[:128])
		_ = DecodeRow(WireE4M3, FP16, x[128:], codes, sb)
		_ = RoundTripRows(WireE5M2, BF16, x, 64)
		_, _ = ScaleExp(WireE5M2, FP16, x)
	})
	require.Zero(t, allocs)
}

func TestHalfBits(t *testing.T) {
	cases := []struct {
		h    Half
		f    float32
		want uint16
	}{
		{BF16, 1, 0x3F80},
		{BF16, -2.5, 0xC020},
		{BF16, math.Float32frombits(0x3F808000), 0x3F80}, // a tie: to even
		{BF16, math.Float32frombits(0x3F818000), 0x3F82},
		{BF16, float32(math.Inf(1)), 0x7F7F}, // saturates
		{BF16, float32(math.NaN()), 0x7FC0},
		{FP16, 1, 0x3C00},
		{FP16, 65504, 0x7BFF},
		{FP16, 70000, 0x7BFF},
		{FP16, -0x1p-24, 0x8001}, // the smallest subnormal
		{FP16, float32(math.NaN()), 0x7E00},
	}
	for _, c := range cases {
		got, err := HalfBits(c.h, c.f)
		require.NoError(t, err)
		assert.Equal(t, c.want, got, "Half(%d) of %g", c.h, c.f)
	}
	_, err := HalfBits(Half(2), 1)
	assert.ErrorIs(t, err, ErrFormat)
}
