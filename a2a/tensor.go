package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/plan"
)

// Tensor is a row-major device tensor of shape [B, T, H, D]: B batches of
// T tokens, each of H heads of D elements. A Tensor is a description, not
// an owner: making or copying one costs nothing, and freeing the memory
// is the caller's (Device.Free for what Device.Alloc made).
//
// RowStride is the number of elements from one token to the next; 0 means
// H*D (contiguous). A larger stride makes the tensor a view into a wider
// one, such as q, k or v of a fused projection [B, T, 3, H, D] (RowStride
// 3*H*D, k at Ptr + H*D elements): the head operations read such inputs
// in place, and the Into forms write such outputs row by row (one
// cuMemcpy2DAsync). Device's helpers want tensors contiguous.
type Tensor struct {
	Ptr       uintptr // device address in the primary context of the Comm's device
	Shape     [4]int  // [B, T, H, D]
	DType     DType   // element type
	RowStride int     // elements from one token to the next; 0 means H*D
}

// Elems returns the number of elements, B*T*H*D.
func (t Tensor) Elems() int64 {
	return int64(t.Shape[0]) * int64(t.Shape[1]) * int64(t.Shape[2]) * int64(t.Shape[3])
}

// Bytes returns the size of the elements in bytes, Elems times the
// element size (the gaps of a strided view not counted).
func (t Tensor) Bytes() int64 { return t.Elems() * int64(t.DType.Size()) }

// String prints the address, shape and type, and the token stride of a
// strided view.
func (t Tensor) String() string {
	if t.strided() {
		return fmt.Sprintf("Tensor{%#x %v %v stride %d}", t.Ptr, t.Shape, t.DType, t.RowStride)
	}
	return fmt.Sprintf("Tensor{%#x %v %v}", t.Ptr, t.Shape, t.DType)
}

// strided reports whether t's tokens are not contiguous.
func (t Tensor) strided() bool {
	return t.RowStride != 0 && int64(t.RowStride) != int64(t.Shape[2])*int64(t.Shape[3])
}

// input checks t as one of an operation's tensors on a Comm of element
// type dt, and describes it for planning, once: its dtype here (ErrDType),
// then its shape, pointer, stride and alignment (plan.NewInput).
func (t Tensor) input(dt DType) (plan.Input, error) {
	if t.DType != dt {
		return plan.Input{}, fmt.Errorf("a2a: %v has dtype %v, want %v: %w", t, t.DType, dt, ErrDType)
	}
	return plan.NewInput(t.Ptr, t.Shape, t.RowStride, dt.Size())
}
