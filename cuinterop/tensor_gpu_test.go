package cuinterop_test

import (
	"errors"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/cuinterop"
)

// TestTensorChecks: what the driver says of a pointer decides, for memory
// of the primary context (whole, strided, empty) and for addresses that
// are not such memory (host memory, past the allocation).
func TestTensorChecks(t *testing.T) {
	lockThread()
	d := openDevice(t, 0)
	const h, dim = 4, 16
	mem := d.alloc(t, 2*8*3*h*dim*2, 0) // a fused [2, 8, 3, H, D] bf16 projection
	shape := [4]int{2, 8, h, dim}
	k := mem + cu.DevicePtr(h*dim*2)
	x, err := cuinterop.StridedTensor(k, shape, a2a.BFloat16, 3*h*dim)
	if want := (a2a.Tensor{Ptr: uintptr(k), Shape: shape, DType: a2a.BFloat16, RowStride: 3 * h * dim}); err != nil || x != want {
		t.Errorf("StridedTensor of k: %v, %v; want %v", x, err, want)
	}
	if p := cuinterop.DevicePtr(x); p != k {
		t.Errorf("DevicePtr: %v, want %v", p, k)
	}
	if _, err := cuinterop.Tensor(0, [4]int{2, 0, h, dim}, a2a.BFloat16); err != nil {
		t.Errorf("Tensor of no tokens at 0: %v", err)
	}
	v := mem + cu.DevicePtr(2*h*dim*2)
	if _, err := cuinterop.StridedTensor(v, shape, a2a.BFloat16, 3*h*dim); err != nil {
		t.Errorf("StridedTensor of v, which ends where the allocation does: %v", err)
	}
	var host [64]byte
	for _, c := range []struct {
		what   string
		ptr    cu.DevicePtr
		shape  [4]int
		stride int
		want   error
	}{
		{"v one token on, past the allocation's end", v + cu.DevicePtr(3*h*dim*2), shape, 3 * h * dim, a2a.ErrShape},
		{"the whole projection at k", k, [4]int{2, 8, 3 * h, dim}, 0, a2a.ErrShape},
		{"host memory", cu.DevicePtr(uintptr(unsafe.Pointer(&host[0]))), [4]int{1, 1, 2, 16}, 0, cuinterop.ErrNotDevicePointer},
	} {
		if _, err := cuinterop.StridedTensor(c.ptr, c.shape, a2a.BFloat16, c.stride); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want an error matching %v", c.what, err, c.want)
		} else {
			t.Logf("%s: %v", c.what, err)
		}
	}
}
