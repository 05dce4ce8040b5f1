package a2a

import "fmt"

// Tensor is a contiguous, row-major device tensor of shape [B, T, H, D].
// Ptr is a device address valid in the Comm's CUDA context (the device's
// primary context, which the CUDA runtime and most bindings share).
type Tensor struct {
	Ptr   uintptr
	Shape [4]int
	DType DType
}

// Elems returns the number of elements.
func (t Tensor) Elems() int64 {
	return int64(t.Shape[0]) * int64(t.Shape[1]) * int64(t.Shape[2]) * int64(t.Shape[3])
}

// Bytes returns the size in bytes.
func (t Tensor) Bytes() int64 { return t.Elems() * int64(t.DType.Size()) }

func (t Tensor) String() string {
	return fmt.Sprintf("Tensor{%#x %v %v}", t.Ptr, t.Shape, t.DType)
}

// checkTensor validates a tensor against an expected dtype and shape; name
// says which argument it is in errors.
func checkTensor(name string, t Tensor, dt DType, shape [4]int) error {
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
	if t.Ptr%uintptr(dt.Size()) != 0 {
		return fmt.Errorf("a2a: %s at %#x is not aligned to its %d-byte elements: %w", name, t.Ptr, dt.Size(), ErrAlignment)
	}
	return nil
}
