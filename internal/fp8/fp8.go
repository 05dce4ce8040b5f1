// Package fp8 is the CPU definition, bit for bit, of converting float32 to
// the two OCP 8-bit floating-point formats and back. A CUDA kernel that
// converts with PTX cvt.rn.satfinite.e4m3x2.f32 / cvt.rn.satfinite.e5m2x2.f32
// (sm_89 and later), or a software equivalent, is checked byte for byte
// against it.
//
// Formats (S = sign bit):
//
//	E4M3: S.EEEE.MMM, bias 7, no infinities, NaN = S.1111.111,
//	      max finite 448 (0x7E), min subnormal 2^-9 (0x01).
//	E5M2: S.EEEEE.MM, bias 15, Inf = S.11111.00, NaN = S.11111.xx (xx != 0),
//	      max finite 57344 (0x7B), min subnormal 2^-16 (0x01).
//
// Encoding follows cvt.rn.satfinite (PTX ISA, "cvt" instruction,
// https://docs.nvidia.com/cuda/parallel-thread-execution/index.html#data-movement-and-conversion-instructions-cvt):
//
//   - .rn: round to nearest, ties to even; subnormal results are kept
//     (the f8 forms of cvt take no .ftz), and the sign of a zero result is kept.
//   - .satfinite: an input whose magnitude is greater than the format's
//     MAX_NORM gives MAX_NORM with the input's sign; this includes ±Inf,
//     so E5M2's Inf codes are never produced.
//   - .satfinite: a NaN input gives "NaN in the destination format". The PTX
//     text names no byte; this package gives 0x7F for every NaN input, in
//     both formats, whatever its sign or payload, as the host path of
//     NVIDIA's __nv_cvt_float_to_fp8 (cuda_fp8.hpp; its device path on
//     sm_89+ is this cvt instruction) does: it first replaces any NaN with
//     0x7FFFFFFF. (Not yet checked on hardware.)
package fp8

import "math"

// NaN is the byte E4M3 and E5M2 give for every NaN input.
const NaN uint8 = 0x7F

// format describes one binary floating-point format of at most 16 bits
// (sign, exponent, mantissa; IEEE-style subnormals) for the shared
// conversion code: the two 8-bit formats here, and bf16 and fp16 in row.go.
type format struct {
	width   uint32 // bits of a code: 8 or 16
	mbits   uint32 // explicit mantissa bits
	bias    int32  // exponent bias
	maxBits uint32 // math.Float32bits of the largest finite value
	maxCode uint16 // code of the largest finite value
	nan     uint16 // code that encode gives for every NaN input
	hasInf  bool   // exponent all ones, mantissa 0 is ±Inf (else only NaN)
}

var (
	e4m3 = format{width: 8, mbits: 3, bias: 7, maxBits: 0x43E00000, maxCode: 0x7E, nan: uint16(NaN)}                // 448 = 1.75*2^8
	e5m2 = format{width: 8, mbits: 2, bias: 15, maxBits: 0x47600000, maxCode: 0x7B, nan: uint16(NaN), hasInf: true} // 57344 = 1.75*2^15
)

// E4M3 converts f to an E4M3 byte as cvt.rn.satfinite.e4m3x2.f32 does:
// round to nearest even, |f| > 448 (±Inf included) gives ±448 (0x7E/0xFE),
// NaN gives 0x7F, subnormals are kept and a zero keeps its sign.
func E4M3(f float32) uint8 { return uint8(e4m3.encode(f)) }

// E5M2 converts f to an E5M2 byte as cvt.rn.satfinite.e5m2x2.f32 does:
// round to nearest even, |f| > 57344 (±Inf included) gives ±57344
// (0x7B/0xFB), NaN gives 0x7F, subnormals are kept and a zero keeps its sign.
func E5M2(f float32) uint8 { return uint8(e5m2.encode(f)) }

// FromE4M3 decodes an E4M3 byte exactly; 0x7F and 0xFF give a float32 NaN.
func FromE4M3(b uint8) float32 { return e4m3.decode(uint16(b)) }

// FromE5M2 decodes an E5M2 byte exactly; 0x7C/0xFC give ±Inf and the
// other codes with all exponent bits set give a float32 NaN.
func FromE5M2(b uint8) float32 { return e5m2.decode(uint16(b)) }

// encode rounds once: every float32 is sig*2^k with an integer sig of 24
// bits, so the target code is floor(sig*2^k/ulp) and the remainder is the
// exact set of bits shifted out. The round-to-nearest-even decision is taken
// on those exact bits and nothing is rounded before it (no float64 or other
// intermediate format), so there is no double rounding. The rules are those
// of cvt.rn.satfinite: NaN gives f.nan, |x| > MAX_NORM (Inf included) gives
// ±MAX_NORM, a zero keeps its sign.
func (f format) encode(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>(32-f.width)) & (1 << (f.width - 1))
	abs := b & 0x7FFFFFFF
	switch {
	case abs > 0x7F800000: // NaN
		return f.nan
	case abs > f.maxBits: // beyond MAX_NORM, or Inf: satfinite
		return sign | f.maxCode
	}
	return sign | uint16(f.round(abs))
}

// round returns the code of abs (the bits of a float32 in [0, max finite])
// rounded to nearest even. Codes are ordered as the values are, so a carry
// out of the mantissa into the exponent field gives the right next code.
func (f format) round(abs uint32) uint32 {
	// Biased exponent in the target. A float32 subnormal (exponent field 0)
	// has the scale of exponent field 1, without the implicit bit.
	e := int32(max(abs>>23, 1)) - 127 + f.bias
	if e >= 1 { // normal in the target: rebias, drop bits
		// (With exponent field 0 this is reached only when bias = 127,
		// bf16, whose codes are then the float32 bits with 16 dropped.)
		return rne(abs-uint32(127-f.bias)<<23, 23-f.mbits)
	}
	// Subnormal or below: the value is sig*2^(e-bias-23) and one step of
	// the code is 2^(1-bias-mbits), so code = sig / 2^(24-mbits-e).
	shift := uint32(24 - int32(f.mbits) - e)
	if shift > 24 { // sig < 2^24 <= half an ulp: rounds to zero
		return 0
	}
	sig := abs & 0x007FFFFF
	if abs >= 0x00800000 {
		sig |= 0x00800000 // implicit bit of a float32 normal
	}
	return rne(sig, shift)
}

// rne returns v / 2^s rounded to nearest, ties to even (1 <= s <= 24).
func rne(v, s uint32) uint32 {
	q := v >> s
	rem := v & (1<<s - 1)
	half := uint32(1) << (s - 1)
	if rem > half || rem == half && q&1 == 1 {
		q++
	}
	return q
}

// decode returns the float32 of code b (exact: every value of E4M3, E5M2,
// fp16 and bf16 is a float32).
func (f format) decode(b uint16) float32 {
	sign := uint32(b>>(f.width-1)) << 31
	e := int32(b&(1<<(f.width-1)-1)) >> f.mbits
	mant := uint32(b) & (1<<f.mbits - 1)
	top := int32(1)<<(f.width-1-f.mbits) - 1 // all exponent bits set
	switch {
	case e == top && f.hasInf && mant == 0:
		return math.Float32frombits(sign | 0x7F800000)
	case e == top && (f.hasInf || mant == 1<<f.mbits-1):
		return math.Float32frombits(0x7FFFFFFF) // canonical NaN
	case e == 0: // zero or subnormal: mant * 2^(1-bias-mbits), exact
		// (mant has at most 10 bits and 2^(1-bias-mbits) >= 2^-133, so
		// the product lies on the float32 grid, subnormal for bf16).
		v := float32(mant) * pow2(1-f.bias-int32(f.mbits))
		return math.Float32frombits(sign | math.Float32bits(v))
	}
	return math.Float32frombits(sign | uint32(e-f.bias+127)<<23 | mant<<(23-f.mbits))
}

// pow2 returns 2^n as a float32, exactly, for -149 <= n <= 127.
func pow2(n int32) float32 {
	if n < -126 {
		return math.Float32frombits(1 << uint32(n+149)) // subnormal
	}
	return math.Float32frombits(uint32(n+127) << 23)
}
