package fp8

import (
	"errors"
	"fmt"
	"math"
)

// This file defines, bit for bit, a lossy wire format for rows of 16-bit
// activations: a row of n bf16 or fp16 elements (one head of one token) is
// sent as n fp8 codes and one byte holding a power-of-two scale 2^k, and
// decoded back to the same 16-bit type. Every step is one a GPU computes
// identically in fp32 without flush-to-zero: integer max over bit patterns,
// a multiplication by 2^±k built as a float32 (exact, see below),
// cvt.rn.satfinite to fp8, and cvt.rn.satfinite to bf16/fp16.
//
// Scale. k is the smallest integer with amax <= MAXW*2^k (MAXW = 448 for
// E4M3, 57344 for E5M2), clamped to [MinScaleExp, MaxScaleExp]; amax is the
// largest |x| over the row's finite elements, and k = 0 when amax is 0 (or
// there is no finite element). The byte on the wire is k+128 (8..248).
// The upper clamp never binds for these inputs: the largest bf16, just under
// 2^128, gives k = 120 exactly with E4M3 and 113 with E5M2, and fp16 gives
// at most 8 and 1. The lower clamp binds only for bf16 rows with
// amax <= MAXW*2^-121 (fp16's smallest subnormal 2^-24 gives k >= -32 with
// E4M3, k >= -39 with E5M2).
//
// Encode. code = cvt.rn.satfinite(float32(x) * 2^-k). The product is exact
// whenever its magnitude is at least 2^-126 (a float32 normal): x has at most
// 11 significant bits, and for finite x, |x*2^-k| <= amax*2^-k <= MAXW, so it
// neither overflows nor needs more than 24 bits. Below 2^-126 the product
// may be rounded (or flushed to zero by a GPU with FTZ), but it stays at most
// 2^-126 in magnitude with the sign of x, far under half the smallest fp8
// subnormal (2^-10 for E4M3, 2^-17 for E5M2), so the code is the signed zero
// 0x00/0x80 either way, as the exact product would give. NaN gives 0x7F;
// ±Inf saturates to ±MAXW, so an infinite element arrives as ±MAXW*2^k
// (then saturated to the output type's largest finite value if beyond it).
//
// Decode. y = cvt.rn.satfinite.OUT(FromE*(code) * 2^k). An fp8 value q has
// at most 4 significant bits and its lowest bit is at least 2^-9 (E4M3) or
// 2^-16 (E5M2), so for k >= -120 the product's lowest bit is at least 2^-136,
// above float32's 2^-149: the product is exact unless it overflows, which
// happens only when |q|*2^k >= 2^128 (E5M2 with k >= 113, E4M3 with
// k = 120 and |q| >= 256). An overflowing product becomes ±Inf, and the
// exact value is as far beyond both outputs' largest finite value, so
// either way the output saturates: y is OUT(exact q*2^k) for every code and
// every k in range. OUT rounds to nearest even, keeps subnormals (fp16 down
// to 2^-24, bf16 to 2^-133), saturates to ±max finite (bf16 0x7F7F, fp16
// 0x7BFF) and gives the canonical NaN (bf16 0x7FC0, fp16 0x7E00) for NaN.
// Saturation is needed because decoding can exceed amax by half an fp8
// step: fp16 65504 with E4M3 has k = 8, scales to 255.875, rounds to 256,
// and 256*2^8 = 65536 is beyond fp16's 65504.

// Half names a 16-bit element type; elements are passed as bit patterns.
type Half int

const (
	BF16 Half = iota // bfloat16: 1.8.7, max 0x7F7F, canonical NaN 0x7FC0
	FP16             // IEEE binary16: 1.5.10, max 0x7BFF = 65504, NaN 0x7E00
)

// Wire names the 8-bit format of the codes on the wire.
type Wire int

const (
	WireE4M3 Wire = iota // E4M3, MAXW = 448
	WireE5M2             // E5M2, MAXW = 57344
)

// The range of the scale exponent k; the wire byte is k+128.
const (
	MinScaleExp = -120
	MaxScaleExp = 120
)

// Errors returned by the row functions.
var (
	ErrFormat      = errors.New("fp8: unknown Wire or Half")
	ErrRowLength   = errors.New("fp8: row length n must be positive and divide len(x)")
	ErrCodesLength = errors.New("fp8: len(codes) != len(row)")
	ErrScaleByte   = errors.New("fp8: scale byte outside 8..248")
)

var (
	bf16 = format{width: 16, mbits: 7, bias: 127, maxBits: 0x7F7F0000, maxCode: 0x7F7F, nan: 0x7FC0, hasInf: true}
	fp16 = format{width: 16, mbits: 10, bias: 15, maxBits: 0x477FE000, maxCode: 0x7BFF, nan: 0x7E00, hasInf: true}
)

// formats returns the format tables of w and h.
func formats(w Wire, h Half) (wf, hf *format, err error) {
	switch w {
	case WireE4M3:
		wf = &e4m3
	case WireE5M2:
		wf = &e5m2
	default:
		return nil, nil, fmt.Errorf("%w: Wire(%d)", ErrFormat, int(w))
	}
	switch h {
	case BF16:
		hf = &bf16
	case FP16:
		hf = &fp16
	default:
		return nil, nil, fmt.Errorf("%w: Half(%d)", ErrFormat, int(h))
	}
	return wf, hf, nil
}

// HalfBits returns f as h's bit pattern, rounded as the decode's output
// conversion rounds (nearest even, saturating to the largest finite value,
// NaN to the canonical NaN). No allocation.
func HalfBits(h Half, f float32) (uint16, error) {
	switch h {
	case BF16:
		return bf16.encode(f), nil
	case FP16:
		return fp16.encode(f), nil
	}
	return 0, fmt.Errorf("%w: Half(%d)", ErrFormat, int(h))
}

// ScaleExp returns the scale exponent k of row (see the file comment):
// the smallest k with amax <= MAXW*2^k, clamped to [-120, 120], 0 for a row
// with no finite nonzero element. One pass over row; no allocation.
func ScaleExp(w Wire, h Half, row []uint16) (int, error) {
	wf, hf, err := formats(w, h)
	if err != nil {
		return 0, err
	}
	return scaleExp(wf, hf, row), nil
}

// scaleExp computes k with integer operations only. Non-negative floats
// order as their bit patterns do, so amax is an integer max over the
// patterns below the Inf pattern. With amax = (1+m)*2^E and
// MAXW = (1+mw)*2^Ew as float32 fields, amax <= MAXW*2^k holds exactly when
// E < Ew+k, or E == Ew+k and m <= mw; the smallest such k follows. A float32
// subnormal amax (bf16 only, below 2^-126) gives k < -120, as the true k is.
func scaleExp(w, h *format, row []uint16) int {
	inf := uint16(1<<(h.width-1)-1) &^ uint16(1<<h.mbits-1) // Inf pattern
	var amax uint16
	for _, u := range row {
		if a := u & 0x7FFF; a < inf && a > amax {
			amax = a
		}
	}
	if amax == 0 {
		return 0
	}
	a := math.Float32bits(h.decode(amax))
	k := int(a>>23) - int(w.maxBits>>23)
	if a&0x7FFFFF > w.maxBits&0x7FFFFF {
		k++
	}
	return min(max(k, MinScaleExp), MaxScaleExp)
}

// EncodeRow writes row's fp8 codes into codes (len(codes) must equal
// len(row)) and returns the scale byte k+128 (see the file comment). Two
// passes over row (amax, then one multiply and one conversion per
// element); no allocation.
func EncodeRow(w Wire, h Half, codes []byte, row []uint16) (scaleByte byte, err error) {
	wf, hf, err := formats(w, h)
	if err != nil {
		return 0, err
	}
	if len(codes) != len(row) {
		return 0, fmt.Errorf("%w: %d codes, %d elements", ErrCodesLength, len(codes), len(row))
	}
	k := scaleExp(wf, hf, row)
	inv := pow2(int32(-k))
	for i, u := range row {
		codes[i] = byte(wf.encode(float32(hf.decode(u) * inv)))
	}
	return byte(k + 128), nil
}

// DecodeRow writes into row (len(row) must equal len(codes)) the 16-bit
// values of codes scaled by 2^(scaleByte-128); scaleByte must be in 8..248.
// One multiply and two conversions per element; no allocation.
func DecodeRow(w Wire, h Half, row []uint16, codes []byte, scaleByte byte) error {
	wf, hf, err := formats(w, h)
	if err != nil {
		return err
	}
	if len(codes) != len(row) {
		return fmt.Errorf("%w: %d codes, %d elements", ErrCodesLength, len(codes), len(row))
	}
	k := int(scaleByte) - 128
	if k < MinScaleExp || k > MaxScaleExp {
		return fmt.Errorf("%w: %d", ErrScaleByte, scaleByte)
	}
	p := pow2(int32(k))
	for i, c := range codes {
		row[i] = hf.encode(float32(wf.decode(uint16(c)) * p))
	}
	return nil
}

// RoundTripRows replaces every row of n elements of x, in place, by
// DecodeRow(EncodeRow(row)): the reference a lossy collective that moves
// whole rows is checked against. len(x) must be a multiple of n > 0. One
// pass to find each row's k and one to convert; no allocation.
//
// Error bound. For a finite element x of a row with scale k, let
// s = x*2^-k (|s| <= MAXW) and e(s) = max(floor(log2|s|), 1-bias) the fp8
// binade of s (1-bias = -6 for E4M3, -14 for E5M2; e(0) = 1-bias). Then
//
//	|y - x| <= 2^(k + e(s) - mbits - 1)
//
// (mbits = 3 for E4M3, 2 for E5M2): half an fp8 step at s's binade, scaled
// back. The output conversion adds nothing: v = q*2^k (q the fp8 value) is
// either beyond the output's max finite, and then y = ±max lies between x
// and v, or representable in the output type. (If |v| is a normal of the
// output, q's 4 significant bits fit. If not, every output value is a
// multiple of its smallest subnormal u: when the fp8 step times 2^k is at
// least u, v is a multiple of it, hence of u; when it is smaller, x is a
// multiple of that step times 2^k, so s is already an fp8 value, q = s and
// v = x.) DecodeRow on codes or a scale byte that EncodeRow did not produce
// for the same type can round; a round trip cannot. When amax*2^-k is at
// least the smallest fp8 normal 2^(1-bias) (always when k > -120),
// e(s) <= floor(log2(amax*2^-k)), so per row
//
//	max|y - x| <= amax * 2^-(mbits+1).
//
// NaN becomes the canonical NaN; ±Inf becomes ±MAXW*2^k, saturated to the
// output's max finite.
func RoundTripRows(w Wire, h Half, x []uint16, n int) error {
	wf, hf, err := formats(w, h)
	if err != nil {
		return err
	}
	if n <= 0 || len(x)%n != 0 {
		return fmt.Errorf("%w: len(x) = %d, n = %d", ErrRowLength, len(x), n)
	}
	for r := 0; r < len(x); r += n {
		row := x[r : r+n]
		k := scaleExp(wf, hf, row)
		inv, p := pow2(int32(-k)), pow2(int32(k))
		for i, u := range row {
			c := wf.encode(float32(hf.decode(u) * inv))
			row[i] = hf.encode(float32(wf.decode(c) * p))
		}
	}
	return nil
}
