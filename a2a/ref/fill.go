package ref

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fp8"
)

// FillRandom fills buf with deterministic pseudo-random bytes derived from
// (seed, rank) using splitmix64. The same (seed, rank) gives the same bytes
// on every machine, and a shorter buffer gets a prefix of a longer one's
// bytes. Every byte is in [1, 255] (never zero), so a destination byte that
// an implementation forgets to write into a zeroed buffer always shows up.
func FillRandom(buf []byte, seed uint64, rank int) {
	state := mix64(seed) ^ mix64(uint64(int64(rank))+0x632be59bd9b4e019)
	var v uint64
	for i := range buf {
		if i%8 == 0 {
			state += 0x9e3779b97f4a7c15
			v = mix64(state)
		}
		buf[i] = 1 + byte(v>>(8*(i%8)))%255
	}
}

// mix64 is the splitmix64 output function.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// FillValues fills buf, rows of headDim little-endian bf16 or fp16
// elements (dt), with finite values shaped like attention activations,
// derived from (seed, rank) as FillRandom's bytes are. Each row (one head
// of one token) has its own magnitude 2^m, m a whole number from -4 to 4,
// and each element is that magnitude times a bell-shaped value of mean 0
// and standard deviation 2 (four uniform values summed), rounded to dt:
// no NaN, no Inf, nothing near the type's limits. FillRandom's bytes, by
// contrast, hold every bit pattern, so that about 40% of rows of 128
// elements hold a NaN or an Inf: a test of the fp8 wire's edge rules,
// and its slowest case, not a model's data. An error wraps ErrShape. One
// pass; no allocation.
func FillValues(buf []byte, dt a2a.DType, headDim int, seed uint64, rank int) error {
	var h fp8.Half
	switch dt {
	case a2a.BFloat16:
		h = fp8.BF16
	case a2a.Float16:
		h = fp8.FP16
	default:
		return fmt.Errorf("ref: FillValues writes bf16 or fp16, not %v: %w", dt, ErrShape)
	}
	if headDim < 1 || len(buf)%(2*headDim) != 0 {
		return fmt.Errorf("ref: %d bytes are not rows of %d 16-bit elements: %w", len(buf), headDim, ErrShape)
	}
	state := mix64(seed^0x5851f42d4c957f2d) ^ mix64(uint64(int64(rank))+0x632be59bd9b4e019)
	next := func() uint64 {
		state += 0x9e3779b97f4a7c15
		return mix64(state)
	}
	var scale float32
	var err error
	for i := 0; i < len(buf)/2; i++ {
		if i%headDim == 0 {
			scale = float32(math.Ldexp(math.Sqrt(3)/(1<<15), int(next()%9)-4))
		}
		// Four 16-bit uniform values of one draw, summed: a bell of mean
		// 2^17 and variance 2^32/3 before the shift and the scale.
		v := next()
		sum := int32(v&0xFFFF) + int32(v>>16&0xFFFF) + int32(v>>32&0xFFFF) + int32(v>>48)
		f := float32(sum-1<<17) * scale
		var bits uint16
		if h == fp8.BF16 {
			bits = bf16Nearest(f)
		} else if bits, err = fp8.HalfBits(h, f); err != nil {
			return err
		}
		binary.LittleEndian.PutUint16(buf[2*i:], bits)
	}
	return nil
}

// bf16Nearest is fp8.HalfBits(fp8.BF16, f) for a finite f below bf16's
// largest value: the top half of f's bits, rounded to nearest even.
func bf16Nearest(f float32) uint16 {
	b := math.Float32bits(f)
	return uint16((b + 0x7FFF + b>>16&1) >> 16)
}
