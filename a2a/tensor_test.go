package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTensorElemsBytes(t *testing.T) {
	cases := []struct {
		x     Tensor
		elems int64
		bytes int64
	}{
		{Tensor{Shape: [4]int{2, 3, 4, 5}, DType: BFloat16}, 120, 240},
		{Tensor{Shape: [4]int{2, 3, 4, 5}, DType: Float16}, 120, 240},
		{Tensor{Shape: [4]int{2, 3, 4, 5}, DType: Float8E4M3}, 120, 120},
		{Tensor{Shape: [4]int{2, 3, 4, 5}, DType: Float8E5M2}, 120, 120},
		{Tensor{Shape: [4]int{1, 0, 4, 5}, DType: BFloat16}, 0, 0},
		{Tensor{Shape: [4]int{2, 3, 4, 5}}, 120, 0}, // unknown dtype: size 0
		{Tensor{Shape: [4]int{1, 1 << 20, 32, 128}, DType: BFloat16}, 1 << 32, 1 << 33},
		{Tensor{Shape: [4]int{1, 2, 3, 4}, DType: BFloat16, RowStride: 36}, 24, 48}, // the gaps not counted
		{Tensor{}, 0, 0},
	}
	for _, c := range cases {
		assert.Equal(t, c.elems, c.x.Elems(), "%v", c.x)
		assert.Equal(t, c.bytes, c.x.Bytes(), "%v", c.x)
	}
	assert.Equal(t, "Tensor{0x1000 [1 2 3 4] bf16}", Tensor{Ptr: 0x1000, Shape: [4]int{1, 2, 3, 4}, DType: BFloat16}.String())
	assert.Equal(t, "Tensor{0x1000 [1 2 3 4] bf16}", Tensor{Ptr: 0x1000, Shape: [4]int{1, 2, 3, 4}, DType: BFloat16, RowStride: 12}.String())
	assert.Equal(t, "Tensor{0x1000 [1 2 3 4] bf16 stride 36}", Tensor{Ptr: 0x1000, Shape: [4]int{1, 2, 3, 4}, DType: BFloat16, RowStride: 36}.String())
}

// input checks the dtype against the Comm's, then the rest as
// plan.NewInput does, and carries the stride into the description.
func TestTensorInput(t *testing.T) {
	x := Tensor{Ptr: 0x1000, Shape: [4]int{1, 2, 3, 4}, DType: BFloat16, RowStride: 36}
	in, err := x.input(BFloat16)
	require.NoError(t, err)
	assert.Equal(t, x.Ptr, in.Ptr)
	assert.Equal(t, x.Shape, in.Shape)
	assert.Equal(t, int64(36), in.RowElems)
	assert.Equal(t, int64((36+12)*2), in.Span)
	for _, c := range []struct {
		name string
		x    Tensor
		dt   DType
		want error
	}{
		{"dtype", Tensor{Ptr: 0x1000, Shape: [4]int{1, 3, 4, 64}, DType: Float16}, BFloat16, ErrDType},
		{"fp8 flavours differ", Tensor{Ptr: 0x1000, Shape: [4]int{1, 3, 4, 64}, DType: Float8E5M2}, Float8E4M3, ErrDType},
		{"dtype unset", Tensor{Ptr: 0x1000, Shape: [4]int{1, 3, 4, 64}}, Float8E4M3, ErrDType},
		{"nil", Tensor{Shape: [4]int{1, 3, 4, 64}, DType: BFloat16}, BFloat16, ErrShape},
		{"misaligned", Tensor{Ptr: 0x1003, Shape: [4]int{1, 3, 4, 64}, DType: Float16}, Float16, ErrAlignment},
	} {
		_, err := c.x.input(c.dt)
		assert.ErrorIs(t, err, c.want, c.name)
	}
}
