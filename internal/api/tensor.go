package api

import (
	"fmt"
	"math"
)

// MaxDim bounds every dimension of a tensor, so that products of a few of
// them cannot overflow int64.
const MaxDim = math.MaxInt32

// Tensor is a row-major device tensor of shape [B, T, H, D]. Ptr is a
// device address valid in the Comm's CUDA context (the device's primary
// context, which the CUDA runtime and most bindings share).
//
// RowStride is the number of elements from one token to the next; 0 means
// H*D (contiguous). A larger stride makes the tensor a view into a wider
// one, such as q, k or v of a fused projection [B, T, 3, H, D] (RowStride
// 3*H*D, k at Ptr + H*D elements): the head operations read such inputs
// in place, and the Into forms write such outputs row by row (one
// cuMemcpy2DAsync). Device's helpers want tensors contiguous.
type Tensor struct {
	Ptr       uintptr
	Shape     [4]int
	DType     DType
	RowStride int
}

// Elems returns the number of elements.
func (t Tensor) Elems() int64 {
	return int64(t.Shape[0]) * int64(t.Shape[1]) * int64(t.Shape[2]) * int64(t.Shape[3])
}

// Bytes returns the size in bytes.
func (t Tensor) Bytes() int64 { return t.Elems() * int64(t.DType.Size()) }

func (t Tensor) String() string {
	if Strided(t) {
		return fmt.Sprintf("Tensor{%#x %v %v stride %d}", t.Ptr, t.Shape, t.DType, t.RowStride)
	}
	return fmt.Sprintf("Tensor{%#x %v %v}", t.Ptr, t.Shape, t.DType)
}

// RowElems is the number of elements between consecutive tokens of t.
func RowElems(t Tensor) int64 {
	if t.RowStride == 0 {
		return int64(t.Shape[2]) * int64(t.Shape[3])
	}
	return int64(t.RowStride)
}

// Strided reports whether t's tokens are not contiguous.
func Strided(t Tensor) bool { return RowElems(t) != int64(t.Shape[2])*int64(t.Shape[3]) }

// Span is the number of bytes from t.Ptr to t's last byte, the gaps
// between its tokens included.
func Span(t Tensor) int64 {
	rows := int64(t.Shape[0]) * int64(t.Shape[1])
	if rows == 0 || t.Elems() == 0 {
		return 0
	}
	return ((rows-1)*RowElems(t) + int64(t.Shape[2])*int64(t.Shape[3])) * int64(t.DType.Size())
}

// CheckTensor validates a tensor against an expected dtype and shape; name
// says which argument it is in errors.
func CheckTensor(name string, t Tensor, dt DType, shape [4]int) error {
	if !dt.Valid() {
		return fmt.Errorf("a2a: %v: %w", dt, ErrDType)
	}
	if t.DType != dt {
		return fmt.Errorf("a2a: %s has dtype %v, want %v: %w", name, t.DType, dt, ErrDType)
	}
	if t.Shape != shape {
		return fmt.Errorf("a2a: %s has shape %v, want %v: %w", name, t.Shape, shape, ErrShape)
	}
	if t.Ptr == 0 && t.Elems() > 0 {
		return fmt.Errorf("a2a: %s has a nil pointer: %w", name, ErrShape)
	}
	if t.RowStride < 0 || (t.RowStride != 0 && int64(t.RowStride) < int64(shape[2])*int64(shape[3])) || t.RowStride > MaxDim {
		return fmt.Errorf("a2a: %s's token stride %d is under its H*D = %d elements: %w", name, t.RowStride, int64(shape[2])*int64(shape[3]), ErrShape)
	}
	if t.Ptr%uintptr(dt.Size()) != 0 {
		return fmt.Errorf("a2a: %s at %#x is not aligned to its %d-byte elements: %w", name, t.Ptr, dt.Size(), ErrAlignment)
	}
	return nil
}
