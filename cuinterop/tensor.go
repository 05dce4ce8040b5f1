package cuinterop

import (
	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/cuinterop/internal/rule"
)

// Tensor returns the contiguous [B, T, H, D] tensor of type dt at ptr for
// a2a's operations, after checking that ptr is device memory of its
// device's primary context (ErrNotPrimaryContext otherwise, before anything
// is enqueued) and that its allocation holds the whole tensor. It costs one
// cgo call of four driver calls (cuPointerGetAttributes,
// cuDevicePrimaryCtxGetState, and a retain and release of the primary
// context); no synchronisation, nothing enqueued. A tensor of no bytes is
// not checked with the driver.
func Tensor(ptr cu.DevicePtr, shape [4]int, dt a2a.DType) (a2a.Tensor, error) {
	return StridedTensor(ptr, shape, dt, 0)
}

// StridedTensor is Tensor for a view whose tokens are rowStride elements
// apart (a2a.Tensor.RowStride; 0 is contiguous), such as q, k or v of a
// fused [B, T, 3, H, D] projection: rowStride 3*H*D, k at ptr + H*D
// elements. The allocation must hold the view from ptr to its last byte.
// It costs what Tensor costs.
func StridedTensor(ptr cu.DevicePtr, shape [4]int, dt a2a.DType, rowStride int) (a2a.Tensor, error) {
	span, err := rule.Span(uintptr(ptr), shape, dt, rowStride)
	if err != nil {
		return a2a.Tensor{}, err
	}
	if span > 0 {
		p, err := pointerFacts(ptr)
		if err != nil {
			return a2a.Tensor{}, err
		}
		if err := p.Check(span); err != nil {
			return a2a.Tensor{}, err
		}
	}
	return a2a.Tensor{Ptr: uintptr(ptr), Shape: shape, DType: dt, RowStride: rowStride}, nil
}

// DevicePtr returns t's address as a cu.DevicePtr, for gorgonia's copies
// and kernels on an operation's output (a view or an Into destination). No
// driver call. Read a view on the operation's stream before the Comm's
// next operation is enqueued (see a2a's package doc, "Views").
func DevicePtr(t a2a.Tensor) cu.DevicePtr { return cu.DevicePtr(t.Ptr) }
