package plan

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
)

// NewInput derives the row geometry once: the stride in elements, and the
// span from the pointer to the last byte, gaps included.
func TestNewInput(t *testing.T) {
	shape := [4]int{1, 2, 3, 4}
	for _, c := range []struct {
		x      tensor
		row    int64
		span   int64
		stride bool
	}{
		{tensor{Ptr: 0x1000, Shape: shape, es: 2}, 12, 48, false},
		{tensor{Ptr: 0x1001, Shape: shape, es: 1}, 12, 24, false},
		{tensor{Ptr: 0x1000, Shape: shape, es: 2, Stride: 12}, 12, 48, false}, // the contiguous stride, spelled out
		{tensor{Ptr: 0x1000, Shape: shape, es: 2, Stride: 36}, 36, (36 + 12) * 2, true},
		{tensor{Ptr: 0x1000, Shape: [4]int{2, 3, 1, 4}, es: 2, Stride: 5}, 5, (5*5 + 4) * 2, true},
		{tensor{Ptr: 0, Shape: [4]int{1, 0, 3, 4}, es: 2}, 12, 0, false}, // empty: nil is fine
	} {
		in, err := c.x.input()
		require.NoError(t, err, "%v", c.x)
		assert.Equal(t, c.x.Ptr, in.Ptr)
		assert.Equal(t, c.x.Shape, in.Shape)
		assert.Equal(t, c.row, in.RowElems, "%v", c.x)
		assert.Equal(t, c.span, in.Span, "%v", c.x)
		assert.Equal(t, c.stride, in.Strided(), "%v", c.x)
	}
	assert.Equal(t, "[1 2 3 4] at 0x1000", bf16(0x1000, 1, 2, 3, 4).must(t).String())
	assert.Equal(t, int64(math.MaxInt64), span(1<<40, 1<<31, 1, 2), "an overflowing span overlaps everything")
}

func TestNewInputRefuses(t *testing.T) {
	shape := [4]int{1, 2, 3, 4}
	for _, c := range []struct {
		name string
		x    tensor
		want error
	}{
		{"batch 0", bf16(0x1000, 0, 3, 4, 64), api.ErrShape},
		{"batch 0 nil", bf16(0, 0, 8, 4, 64), api.ErrShape},
		{"heads 0", bf16(0x1000, 1, 3, 0, 64), api.ErrShape},
		{"head size 0", bf16(0x1000, 1, 3, 4, 0), api.ErrShape},
		{"negative tokens", bf16(0x1000, 1, -1, 4, 64), api.ErrShape},
		{"dimension over MaxInt32", fp8(0x1, 1, math.MaxInt32+1, 1, 1), api.ErrShape},
		{"nil", tensor{Shape: shape, es: 2}, api.ErrShape},
		{"nil fp8", fp8(0, 1, 3, 2, 3), api.ErrShape},
		{"stride under H*D", tensor{Ptr: 0x1000, Shape: shape, es: 2, Stride: 11}, api.ErrShape},
		{"negative stride", tensor{Ptr: 0x1000, Shape: shape, es: 2, Stride: -1}, api.ErrShape},
		{"stride over MaxInt32", tensor{Ptr: 0x1000, Shape: shape, es: 2, Stride: math.MaxInt32 + 1}, api.ErrShape},
		{"misaligned", tensor{Ptr: 0x1003, Shape: shape, es: 2}, api.ErrAlignment},
		{"odd ptr bf16", bf16(0x1001, 1, 3, 4, 64), api.ErrAlignment},
		{"misaligned empty", tensor{Ptr: 0x1, Shape: [4]int{1, 0, 3, 4}, es: 2}, api.ErrAlignment},
	} {
		in, err := c.x.input()
		assert.ErrorIs(t, err, c.want, c.name)
		assert.Equal(t, Input{}, in, c.name)
	}
}
