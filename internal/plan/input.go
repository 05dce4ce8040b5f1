package plan

import (
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Input is one tensor of an operation as planning reads it, an input or
// an Into form's output: checked once, by NewInput at the face, with its
// row geometry derived then. Planning, the placement checks and the
// transports read its fields and derive nothing again.
type Input struct {
	Ptr      uintptr
	Shape    [4]int // [B, T, H, D]
	RowElems int64  // elements from one token to the next: the token stride, never under H*D
	Span     int64  // bytes from Ptr to the last byte, the gaps between tokens included
}

// NewInput checks a [B, T, H, D] tensor of elemSize-byte elements at ptr
// whose tokens lie rowStride elements apart (0: H*D, contiguous), and
// describes it: no dimension over api.MaxDim, positive batch, heads and
// head size, no negative token count (ErrShape); no nil pointer where
// there are elements (ErrShape); a stride of H*D elements or more, and
// at most api.MaxDim (ErrShape); a pointer aligned to the element
// (ErrAlignment). It costs a few multiplications.
func NewInput(ptr uintptr, shape [4]int, rowStride, elemSize int) (Input, error) {
	for _, n := range shape {
		if n > api.MaxDim {
			return Input{}, fmt.Errorf("a2a: shape %v: dimension over %d: %w", shape, api.MaxDim, api.ErrShape)
		}
	}
	b, t, h, d := shape[0], shape[1], shape[2], shape[3]
	if b < 1 || h < 1 || d < 1 || t < 0 {
		return Input{}, fmt.Errorf("a2a: shape %v: batch, heads and head size must be positive: %w", shape, api.ErrShape)
	}
	in := Input{Ptr: ptr, Shape: shape, RowElems: int64(h) * int64(d)}
	if ptr == 0 && t > 0 {
		return Input{}, fmt.Errorf("a2a: shape %v at a nil pointer: %w", shape, api.ErrShape)
	}
	if rowStride < 0 || (rowStride != 0 && int64(rowStride) < in.RowElems) || rowStride > api.MaxDim {
		return Input{}, fmt.Errorf("a2a: token stride %d is under H*D = %d elements: %w", rowStride, in.RowElems, api.ErrShape)
	}
	if ptr%uintptr(elemSize) != 0 {
		return Input{}, fmt.Errorf("a2a: %#x is not aligned to its %d-byte elements: %w", ptr, elemSize, api.ErrAlignment)
	}
	if rowStride != 0 {
		in.RowElems = int64(rowStride)
	}
	in.Span = span(int64(b)*int64(t), in.RowElems, int64(h)*int64(d), int64(elemSize))
	return in, nil
}

// span is the bytes from the first element of rows rows of row elements
// each, stride elements apart, to the last: math.MaxInt64 where that
// overflows (then it overlaps everything; planning refuses such a tensor
// before anything looks).
func span(rows, stride, row, es int64) int64 {
	if rows == 0 {
		return 0
	}
	gaps, ok1 := mulChecked(rows-1, stride)
	n, ok2 := mulChecked(gaps+row, es)
	if !ok1 || !ok2 || gaps > math.MaxInt64-row {
		return math.MaxInt64
	}
	return n
}

// Strided reports whether in's tokens are not contiguous.
func (in Input) Strided() bool { return in.RowElems != int64(in.Shape[2])*int64(in.Shape[3]) }

// String prints the shape, address and a token stride, for errors.
func (in Input) String() string {
	if in.Strided() {
		return fmt.Sprintf("%v at %#x (token stride %d)", in.Shape, in.Ptr, in.RowElems)
	}
	return fmt.Sprintf("%v at %#x", in.Shape, in.Ptr)
}
