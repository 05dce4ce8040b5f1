package fp8

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// spec describes a format independently of the package's format table.
type spec struct {
	name    string
	enc     func(float32) uint8
	dec     func(uint8) float32
	mbits   uint    // explicit mantissa bits
	bias    int     // exponent bias
	hasInf  bool    // exponent all ones, mantissa 0 is ±Inf
	maxCode uint8   // largest finite code
	max     float64 // largest finite value
	minSub  float64 // smallest subnormal
}

var specs = []spec{
	{name: "E4M3", enc: E4M3, dec: FromE4M3, mbits: 3, bias: 7, maxCode: 0x7E, max: 448, minSub: 0x1p-9},
	{name: "E5M2", enc: E5M2, dec: FromE5M2, mbits: 2, bias: 15, hasInf: true, maxCode: 0x7B, max: 57344, minSub: 0x1p-16},
}

func (s spec) fields(b uint8) (sign, e, m uint) {
	return uint(b >> 7), uint(b&0x7F) >> s.mbits, uint(b) & (1<<s.mbits - 1)
}

func (s spec) topExp() uint { return 1<<(7-s.mbits) - 1 }

func (s spec) isNaN(b uint8) bool {
	_, e, m := s.fields(b)
	if s.hasInf {
		return e == s.topExp() && m != 0
	}
	return e == s.topExp() && m == 1<<s.mbits-1
}

func (s spec) isInf(b uint8) bool {
	_, e, m := s.fields(b)
	return s.hasInf && e == s.topExp() && m == 0
}

// refValue decodes b from the format's definition, in float64 (exact).
func (s spec) refValue(b uint8) float64 {
	sign, e, m := s.fields(b)
	var v float64
	switch {
	case s.isNaN(b):
		return math.NaN()
	case s.isInf(b):
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(float64(m), 1-s.bias-int(s.mbits))
	default:
		v = math.Ldexp(float64(1<<s.mbits+m), int(e)-s.bias-int(s.mbits))
	}
	if sign == 1 {
		v = -v
	}
	return v
}

// twoSum returns a+b rounded (hi) and its exact rounding error (lo):
// hi+lo == a+b exactly, for finite a and b with no overflow.
func twoSum(a, b float64) (hi, lo float64) {
	hi = a + b
	bb := hi - a
	lo = (a - (hi - bb)) + (b - bb)
	return hi, lo
}

// result is the oracle's answer for one input.
type result struct {
	code    uint8
	tie     bool // two finite codes were exactly as near
	inexact int  // differences that float64 alone did not hold exactly
}

// oracle converts x the slow way: it enumerates every finite value of the
// format, takes the nearest one by exact comparison (each difference is kept
// as an unevaluated float64 pair hi+lo, which is exact even where hi alone is
// rounded), breaks a tie toward the code whose lowest bit is 0, then applies
// the satfinite rule. NaN gives 0x7F; the sign is copied, zero included.
func (s spec) oracle(x float32) result {
	if x != x {
		return result{code: 0x7F}
	}
	var sign uint8
	if math.Signbit(float64(x)) {
		sign = 0x80
	}
	a := math.Abs(float64(x))
	if math.IsInf(a, 1) { // |x| > MAX_NORM: satfinite
		return result{code: sign | s.maxCode}
	}
	var r result
	best := -1
	var bh, bl float64
	for c := 0; c < 0x80; c++ {
		b := uint8(c)
		if s.isNaN(b) || s.isInf(b) {
			continue
		}
		h, l := twoSum(a, -float64(s.dec(b)))
		if l != 0 {
			r.inexact++
		}
		if h < 0 || h == 0 && l < 0 {
			h, l = -h, -l
		}
		switch {
		case best < 0 || h < bh || h == bh && l < bl:
			best, bh, bl, r.tie = c, h, l, false
		case h == bh && l == bl:
			r.tie = true
			if c&1 == 0 {
				best = c
			}
		}
	}
	if a > s.max { // satfinite; the nearest finite value is already MAX_NORM
		best = int(s.maxCode)
	}
	r.code = sign | uint8(best)
	return r
}

// check compares the conversion with the oracle on xs and returns how many
// inputs it compared and how many of them were exact ties.
func (s spec) check(t *testing.T, xs func(yield func(float32) bool)) (n, ties int) {
	t.Helper()
	for x := range xs {
		want := s.oracle(x)
		if got := s.enc(x); got != want.code {
			t.Fatalf("%s(%g [%#08x]) = %#02x, oracle %#02x", s.name, x, math.Float32bits(x), got, want.code)
		}
		n++
		if want.tie {
			ties++
		}
	}
	return n, ties
}

func TestDecodeMatchesDefinition(t *testing.T) {
	for _, s := range specs {
		n := 0
		for c := 0; c < 256; c++ {
			b := uint8(c)
			got, want := s.dec(b), s.refValue(b)
			if math.IsNaN(want) {
				require.Truef(t, got != got, "%s %#02x decodes to %g, want NaN", s.name, b, got)
			} else {
				require.Equalf(t, want, float64(got), "%s %#02x", s.name, b)
				require.Equalf(t, math.Signbit(want), math.Signbit(float64(got)), "%s %#02x sign", s.name, b)
			}
			n++
		}
		require.Equal(t, 256, n)
		// Codes 0..maxCode are the finite non-negative values, increasing.
		for c := 1; c <= int(s.maxCode); c++ {
			require.Lessf(t, s.dec(uint8(c-1)), s.dec(uint8(c)), "%s %#02x", s.name, c)
		}
		require.Equal(t, s.max, float64(s.dec(s.maxCode)))
		require.Equal(t, s.minSub, float64(s.dec(1)))
	}
}

func TestRoundTrip(t *testing.T) {
	for _, s := range specs {
		finite, inf, nan := 0, 0, 0
		for c := 0; c < 256; c++ {
			b := uint8(c)
			got := s.enc(s.dec(b))
			switch {
			case s.isNaN(b):
				require.Equalf(t, NaN, got, "%s NaN code %#02x", s.name, b)
				nan++
			case s.isInf(b):
				// satfinite: |Inf| > MAX_NORM gives MAX_NORM, sign kept.
				require.Equalf(t, b&0x80|s.maxCode, got, "%s Inf code %#02x", s.name, b)
				inf++
			default:
				require.Equalf(t, b, got, "%s code %#02x", s.name, b)
				finite++
			}
		}
		if s.hasInf {
			assert.Equal(t, [3]int{248, 2, 6}, [3]int{finite, inf, nan}, s.name)
		} else {
			assert.Equal(t, [3]int{254, 0, 2}, [3]int{finite, inf, nan}, s.name)
		}
	}
}

func TestOracleBF16Exhaustive(t *testing.T) {
	for _, s := range specs {
		n, ties := s.check(t, func(yield func(float32) bool) {
			for i := uint32(0); i < 1<<16; i++ {
				if !yield(math.Float32frombits(i << 16)) {
					return
				}
			}
		})
		require.Equal(t, 1<<16, n, s.name)
		require.Positive(t, ties, s.name)
	}
}

func TestOracleRandom(t *testing.T) {
	const perFormat = 1 << 21
	for _, s := range specs {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			s.checkRandom(t, perFormat)
		})
	}
}

// checkRandom compares the conversion with the oracle on n random float32
// bit patterns (fixed seed), three in four of them with an exponent where
// rounding happens, and checks that saturated, subnormal, other nonzero
// results and ties all occurred.
func (s spec) checkRandom(t *testing.T, n int) {
	r := rand.New(rand.NewPCG(0x5eed, uint64(s.bias)))
	// Exponents from a little below half the smallest subnormal to a
	// little above MAX_NORM: where the rounding happens.
	lo := 127 - s.bias - int(s.mbits) - 4
	hi := 127 + int(math.Log2(s.max)) + 2
	var sub, sat, mid int
	got, ties := s.check(t, func(yield func(float32) bool) {
		for i := 0; i < n; i++ {
			u := r.Uint32()
			if i%4 != 0 { // three in four: exponent in the interesting range
				u = u&0x807FFFFF | uint32(lo+r.IntN(hi-lo+1))<<23
			}
			if i%64 == 1 { // now and then a halfway point (where the result is normal)
				u &^= 1<<(23-s.mbits) - 1
				u |= 1 << (22 - s.mbits)
			}
			x := math.Float32frombits(u)
			switch c := s.enc(x) & 0x7F; {
			case c == s.maxCode:
				sat++
			case c != 0 && c < 1<<s.mbits:
				sub++
			case c != 0 && c != 0x7F:
				mid++
			}
			if !yield(x) {
				return
			}
		}
	})
	require.Equal(t, n, got, s.name)
	require.Positive(t, ties, s.name)
	require.Positive(t, sub, s.name)
	require.Positive(t, sat, s.name)
	require.Positive(t, mid, s.name)
	t.Logf("%s: %d random inputs, %d ties, %d subnormal, %d saturated", s.name, got, ties, sub, sat)
}

// edges lists hand-picked inputs: every code's value and the halfway point
// to the next code with its two float32 neighbours, the region above
// MAX_NORM, the smallest subnormal's half, float32 subnormals, zeros, Infs
// and NaNs. Each appears with both signs.
func (s spec) edges() []float32 {
	var xs []float32
	add := func(vs ...float32) {
		for _, v := range vs {
			xs = append(xs, v, -v)
		}
	}
	inf := float32(math.Inf(1))
	for c := uint8(0); c < s.maxCode; c++ {
		m := (s.dec(c) + s.dec(c+1)) / 2 // exact: at most 5 significant bits
		add(s.dec(c), m, math.Nextafter32(m, 0), math.Nextafter32(m, inf))
	}
	max := s.dec(s.maxCode)
	half := (max - s.dec(s.maxCode-1)) / 2
	add(max, math.Nextafter32(max, inf), max+half, math.Nextafter32(max+half, 0),
		math.Nextafter32(max+half, inf), max+2*half, 2*max, math.MaxFloat32, inf)
	sub := s.dec(1)
	add(sub/2, math.Nextafter32(sub/2, 0), math.Nextafter32(sub/2, inf), sub/4, 3*sub/2)
	for _, u := range []uint32{0, 1, 2, 0x00400000, 0x007FFFFF, 0x00800000} {
		add(math.Float32frombits(u))
	}
	for _, u := range []uint32{0x7FC00000, 0x7F800001, 0x7FA5A5A5, 0x7FFFFFFF, 0x7FC00001} {
		xs = append(xs, math.Float32frombits(u), math.Float32frombits(u|0x80000000))
	}
	return xs
}

func TestOracleEdges(t *testing.T) {
	for _, s := range specs {
		xs := s.edges()
		n, ties := s.check(t, func(yield func(float32) bool) {
			for _, x := range xs {
				if !yield(x) {
					return
				}
			}
		})
		require.Equal(t, len(xs), n, s.name)
		require.Equal(t, 8*int(s.maxCode)+2*9+2*5+2*6+2*5, n, s.name)
		// Exactly the halfway points between two finite codes are ties:
		// one per pair of neighbouring codes, and sub/2 and 3*sub/2 again,
		// each with both signs.
		require.Equal(t, 2*int(s.maxCode)+4, ties, s.name)

		// Directly: a halfway point goes to the even code, its neighbours
		// to the nearer code; the sign is kept.
		for c := uint8(0); c < s.maxCode; c++ {
			m := (s.dec(c) + s.dec(c+1)) / 2
			even := c
			if c&1 == 1 {
				even = c + 1
			}
			require.Equalf(t, even, s.enc(m), "%s midpoint above %#02x", s.name, c)
			require.Equalf(t, 0x80|even, s.enc(-m), "%s -midpoint above %#02x", s.name, c)
			require.Equalf(t, c, s.enc(math.Nextafter32(m, 0)), "%s below midpoint above %#02x", s.name, c)
			require.Equalf(t, c+1, s.enc(math.Nextafter32(m, 1e38)), "%s above midpoint above %#02x", s.name, c)
		}
	}
}

func TestKnownValues(t *testing.T) {
	negZero := math.Float32frombits(0x80000000)
	nan := math.Float32frombits(0x7FC00000)
	negNaN := math.Float32frombits(0xFFC00000)
	inf := float32(math.Inf(1))
	tests := []struct {
		name string
		enc  func(float32) uint8
		in   float32
		want uint8
	}{
		{"E4M3", E4M3, 0, 0x00},
		{"E4M3", E4M3, negZero, 0x80},
		{"E4M3", E4M3, 1, 0x38},
		{"E4M3", E4M3, 448, 0x7E},
		{"E4M3", E4M3, -448, 0xFE},
		{"E4M3", E4M3, 416, 0x7D},
		{"E4M3", E4M3, 256, 0x78},
		{"E4M3", E4M3, 240, 0x77},
		{"E4M3", E4M3, 3, 0x44},
		{"E4M3", E4M3, 0.1, 0x1D},          // 1.6*2^-4: mantissa 4.8/8 -> 5/8
		{"E4M3", E4M3, 1.0625, 0x38},       // tie 1 / 1.125 -> even 0x38
		{"E4M3", E4M3, 1.1875, 0x3A},       // tie 1.125 / 1.25 -> even 0x3A
		{"E4M3", E4M3, 400, 0x7C},          // tie 384 / 416 -> even 0x7C
		{"E4M3", E4M3, 432, 0x7E},          // tie 416 / 448 -> even 0x7E
		{"E4M3", E4M3, 440, 0x7E},          // nearer 448
		{"E4M3", E4M3, 464, 0x7E},          // > MAX_NORM: satfinite
		{"E4M3", E4M3, 465, 0x7E},          // > MAX_NORM: satfinite
		{"E4M3", E4M3, 1e10, 0x7E},         // > MAX_NORM: satfinite
		{"E4M3", E4M3, -1e10, 0xFE},        // > MAX_NORM: satfinite
		{"E4M3", E4M3, inf, 0x7E},          // satfinite
		{"E4M3", E4M3, -inf, 0xFE},         // satfinite
		{"E4M3", E4M3, nan, 0x7F},          // canonical NaN
		{"E4M3", E4M3, negNaN, 0x7F},       // canonical NaN, sign dropped
		{"E4M3", E4M3, 0x1p-6, 0x08},       // smallest normal
		{"E4M3", E4M3, 7 * 0x1p-9, 0x07},   // largest subnormal
		{"E4M3", E4M3, 0x1p-9, 0x01},       // smallest subnormal
		{"E4M3", E4M3, -0x1p-9, 0x81},      // smallest subnormal, negative
		{"E4M3", E4M3, 0x1p-10, 0x00},      // tie 0 / 2^-9 -> even 0
		{"E4M3", E4M3, -0x1p-10, 0x80},     // tie -> -0
		{"E4M3", E4M3, 1.5 * 0x1p-9, 0x02}, // tie 0x01 / 0x02 -> even 0x02
		{"E4M3", E4M3, 2.5 * 0x1p-9, 0x02}, // tie 0x02 / 0x03 -> even 0x02
		{"E4M3", E4M3, 0x1p-149, 0x00},     // float32 subnormal
		{"E4M3", E4M3, -0x1p-149, 0x80},    // float32 subnormal, negative

		{"E5M2", E5M2, 0, 0x00},
		{"E5M2", E5M2, negZero, 0x80},
		{"E5M2", E5M2, 1, 0x3C},
		{"E5M2", E5M2, 0.5, 0x38},
		{"E5M2", E5M2, -2, 0xC0},
		{"E5M2", E5M2, 448, 0x5F},
		{"E5M2", E5M2, 0.1, 0x2E},           // 1.6*2^-4: mantissa 2.4/4 -> 2/4
		{"E5M2", E5M2, 1.125, 0x3C},         // tie 1 / 1.25 -> even 0x3C
		{"E5M2", E5M2, 1.375, 0x3E},         // tie 1.25 / 1.5 -> even 0x3E
		{"E5M2", E5M2, 53248, 0x7A},         // tie 49152 / 57344 -> even 0x7A
		{"E5M2", E5M2, 57344, 0x7B},         // MAX_NORM
		{"E5M2", E5M2, -57344, 0xFB},        // -MAX_NORM
		{"E5M2", E5M2, 61440, 0x7B},         // > MAX_NORM (RNE alone would give Inf)
		{"E5M2", E5M2, 65536, 0x7B},         // > MAX_NORM: satfinite
		{"E5M2", E5M2, inf, 0x7B},           // satfinite, not 0x7C
		{"E5M2", E5M2, -inf, 0xFB},          // satfinite, not 0xFC
		{"E5M2", E5M2, nan, 0x7F},           // canonical NaN
		{"E5M2", E5M2, negNaN, 0x7F},        // canonical NaN, sign dropped
		{"E5M2", E5M2, 0x1p-14, 0x04},       // smallest normal
		{"E5M2", E5M2, 0x1p-16, 0x01},       // smallest subnormal
		{"E5M2", E5M2, 0x1p-17, 0x00},       // tie 0 / 2^-16 -> even 0
		{"E5M2", E5M2, -0x1p-17, 0x80},      // tie -> -0
		{"E5M2", E5M2, 1.5 * 0x1p-16, 0x02}, // tie 0x01 / 0x02 -> even 0x02
		{"E5M2", E5M2, 0x1p-149, 0x00},      // float32 subnormal
	}
	for _, tc := range tests {
		assert.Equalf(t, tc.want, tc.enc(tc.in), "%s(%g)", tc.name, tc.in)
	}
	require.Len(t, tests, 57)

	decodes := []struct {
		name string
		dec  func(uint8) float32
		in   uint8
		want float64
	}{
		{"E4M3", FromE4M3, 0x38, 1},
		{"E4M3", FromE4M3, 0x7E, 448},
		{"E4M3", FromE4M3, 0xFE, -448},
		{"E4M3", FromE4M3, 0x78, 256},
		{"E4M3", FromE4M3, 0x08, 0x1p-6},
		{"E4M3", FromE4M3, 0x07, 7 * 0x1p-9},
		{"E4M3", FromE4M3, 0x01, 0x1p-9},
		{"E5M2", FromE5M2, 0x3C, 1},
		{"E5M2", FromE5M2, 0x7B, 57344},
		{"E5M2", FromE5M2, 0xFB, -57344},
		{"E5M2", FromE5M2, 0x7C, math.Inf(1)},
		{"E5M2", FromE5M2, 0xFC, math.Inf(-1)},
		{"E5M2", FromE5M2, 0x04, 0x1p-14},
		{"E5M2", FromE5M2, 0x03, 3 * 0x1p-16},
		{"E5M2", FromE5M2, 0x01, 0x1p-16},
	}
	for _, tc := range decodes {
		assert.Equalf(t, tc.want, float64(tc.dec(tc.in)), "From%s(%#02x)", tc.name, tc.in)
	}
	assert.True(t, math.Signbit(float64(FromE4M3(0x80))))
	assert.Zero(t, FromE4M3(0x80))
	assert.True(t, math.Signbit(float64(FromE5M2(0x80))))
	assert.Zero(t, FromE5M2(0x80))
	for _, b := range []uint8{0x7F, 0xFF} {
		assert.True(t, math.IsNaN(float64(FromE4M3(b))), "FromE4M3(%#02x)", b)
	}
	for _, b := range []uint8{0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF} {
		assert.True(t, math.IsNaN(float64(FromE5M2(b))), "FromE5M2(%#02x)", b)
	}
}

// TestTwoSumExact checks the oracle's exact-difference tool against
// math/big, on pairs of the kinds the oracle forms (a float32 magnitude
// against a format value), including pairs whose float64 difference alone is
// rounded.
func TestTwoSumExact(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	n, rounded := 0, 0
	for _, s := range specs {
		for i := 0; i < 20000; i++ {
			a := math.Abs(float64(math.Float32frombits(r.Uint32() & 0x7F7FFFFF))) // finite
			v := float64(s.dec(uint8(r.IntN(int(s.maxCode) + 1))))
			hi, lo := twoSum(a, -v)
			exact := new(big.Float).SetPrec(1000).Sub(big.NewFloat(a).SetPrec(1000), big.NewFloat(v))
			got := new(big.Float).SetPrec(1000).Add(big.NewFloat(hi).SetPrec(1000), big.NewFloat(lo))
			require.Zerof(t, exact.Cmp(got), "%g - %g", a, v)
			if lo != 0 {
				rounded++
			}
			n++
		}
	}
	require.Equal(t, 40000, n)
	require.Positive(t, rounded) // the float64 difference alone is not always exact
}

func TestNoAllocs(t *testing.T) {
	var sink uint8
	var fsink float32
	allocs := testing.AllocsPerRun(100, func() {
		sink ^= E4M3(1.5) ^ E5M2(-3.25)
		fsink += FromE4M3(0x38) + FromE5M2(0x3C)
	})
	require.Zero(t, allocs)
	_, _ = sink, fsink
}
