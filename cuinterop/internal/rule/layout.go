package rule

import (
	"fmt"
	"math"

	"github.com/ulysses-go/ulysses/a2a"
)

// maxDim bounds each dimension and the stride, as a2a does, so that the
// products below fit in an int64.
const maxDim = math.MaxInt32

// Span checks a [B, T, H, D] tensor of dt at ptr whose tokens are
// rowStride elements apart (0: H*D, contiguous) and returns the number of
// bytes from ptr to its last byte, gaps included: what its allocation must
// hold. Errors match a2a.ErrDType, a2a.ErrShape or a2a.ErrAlignment, as
// a2a's own checks would.
func Span(ptr uintptr, shape [4]int, dt a2a.DType, rowStride int) (int64, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("cuinterop: %v: %w", dt, a2a.ErrDType)
	}
	for i, n := range shape {
		if n < 0 || n > maxDim {
			return 0, fmt.Errorf("cuinterop: shape %v: dimension %d is %d, want 0 to %d: %w", shape, i, n, maxDim, a2a.ErrShape)
		}
	}
	row := int64(shape[2]) * int64(shape[3])
	stride := int64(rowStride)
	if rowStride == 0 {
		stride = row
	}
	if stride < row || stride > maxDim {
		return 0, fmt.Errorf("cuinterop: token stride %d is under H*D = %d elements or over %d: %w", rowStride, row, maxDim, a2a.ErrShape)
	}
	if ptr%uintptr(dt.Size()) != 0 {
		return 0, fmt.Errorf("cuinterop: %#x is not aligned to %v's %d-byte elements: %w", ptr, dt, dt.Size(), a2a.ErrAlignment)
	}
	rows := int64(shape[0]) * int64(shape[1])
	if rows == 0 || row == 0 {
		return 0, nil
	}
	if (rows - 1) > (math.MaxInt64/int64(dt.Size())-row)/stride {
		return 0, fmt.Errorf("cuinterop: shape %v with token stride %d spans more bytes than an int64 holds: %w", shape, stride, a2a.ErrShape)
	}
	span := ((rows-1)*stride + row) * int64(dt.Size())
	if ptr == 0 {
		return 0, fmt.Errorf("cuinterop: nil pointer for %d bytes: %w", span, a2a.ErrShape)
	}
	return span, nil
}
