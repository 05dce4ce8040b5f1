package rule

import (
	"errors"
	"math"
	"testing"

	"github.com/ulysses-go/ulysses/a2a"
)

func TestSpan(t *testing.T) {
	for _, c := range []struct {
		name   string
		ptr    uintptr
		shape  [4]int
		dt     a2a.DType
		stride int
		want   int64
	}{
		{"contiguous bf16", 0x1000, [4]int{2, 24, 8, 64}, a2a.BFloat16, 0, 2 * 24 * 8 * 64 * 2},
		{"contiguous fp8", 0x1001, [4]int{1, 3, 2, 5}, a2a.Float8E4M3, 0, 30},
		{"stride equal to H*D", 0x1000, [4]int{1, 3, 2, 5}, a2a.Float16, 10, 60},
		// q of a fused [B, T, 3, H, D]: the last token ends H*D after its start.
		{"fused q", 0x1000, [4]int{2, 4, 2, 8}, a2a.BFloat16, 48, ((2*4-1)*48 + 16) * 2},
		{"no tokens", 0, [4]int{2, 0, 8, 64}, a2a.BFloat16, 0, 0},
		{"no batch", 0, [4]int{0, 5, 8, 64}, a2a.BFloat16, 0, 0},
	} {
		got, err := Span(c.ptr, c.shape, c.dt, c.stride)
		if err != nil || got != c.want {
			t.Errorf("%s: Span = %d, %v; want %d", c.name, got, err, c.want)
		}
	}
}

func TestSpanRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		ptr    uintptr
		shape  [4]int
		dt     a2a.DType
		stride int
		want   error
	}{
		{"unknown dtype", 0x1000, [4]int{1, 1, 1, 1}, 0, 0, a2a.ErrDType},
		{"negative dimension", 0x1000, [4]int{1, -1, 1, 1}, a2a.BFloat16, 0, a2a.ErrShape},
		{"dimension over int32", 0x1000, [4]int{1, math.MaxInt32 + 1, 1, 1}, a2a.BFloat16, 0, a2a.ErrShape},
		{"stride under H*D", 0x1000, [4]int{1, 2, 2, 4}, a2a.BFloat16, 7, a2a.ErrShape},
		{"negative stride", 0x1000, [4]int{1, 2, 2, 4}, a2a.BFloat16, -8, a2a.ErrShape},
		{"misaligned", 0x1001, [4]int{1, 2, 2, 4}, a2a.BFloat16, 0, a2a.ErrAlignment},
		{"nil pointer", 0, [4]int{1, 2, 2, 4}, a2a.BFloat16, 0, a2a.ErrShape},
		{"overflow", 0x1000, [4]int{math.MaxInt32, math.MaxInt32, math.MaxInt32, 1}, a2a.BFloat16, 0, a2a.ErrShape},
	} {
		if _, err := Span(c.ptr, c.shape, c.dt, c.stride); !errors.Is(err, c.want) {
			t.Errorf("%s: Span error %v, want one matching %v", c.name, err, c.want)
		}
	}
}
