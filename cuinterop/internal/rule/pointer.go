package rule

import (
	"fmt"

	"github.com/ulysses-go/ulysses/a2a"
)

// MemType is CUmemorytype, what CU_POINTER_ATTRIBUTE_MEMORY_TYPE says;
// 0 when the driver does not know the address.
type MemType uint32

// The CUmemorytype values.
const (
	MemUnknown MemType = 0
	MemHost    MemType = 1
	MemDevice  MemType = 2
	MemArray   MemType = 3
	MemUnified MemType = 4
)

// Pointer is what the driver says of a device address
// (cuPointerGetAttributes) and of its device's primary context.
type Pointer struct {
	Ptr     uintptr
	Type    MemType
	Ctx     uintptr // the context it was allocated in; 0 for memory of no context (cuMemMap, pools)
	Device  int     // the ordinal of its device
	Base    uintptr // its allocation's first byte
	Size    int64   // its allocation's size
	Primary uintptr // Device's primary context; 0 when not active in this process
}

// Check says whether span bytes from p.Ptr may go to a2a: device memory of
// its device's primary context (or of no context, mapped memory valid in
// all of them), all inside one allocation.
func (p Pointer) Check(span int64) error {
	switch p.Type {
	case MemDevice, MemUnified:
	case MemHost:
		return fmt.Errorf("cuinterop: %#x is host memory: %w", p.Ptr, ErrNotDevicePointer)
	default:
		return fmt.Errorf("cuinterop: the CUDA driver does not know %#x as device memory (memory type %d): %w", p.Ptr, p.Type, ErrNotDevicePointer)
	}
	if p.Ctx != 0 && p.Ctx != p.Primary {
		return fmt.Errorf("cuinterop: %#x is memory of context %#x on device %d, not of %s; %s: %w",
			p.Ptr, p.Ctx, p.Device, primaryName(p.Device, p.Primary), UsePrimary(p.Device), ErrNotPrimaryContext)
	}
	if p.Ptr < p.Base || int64(p.Ptr-p.Base) > p.Size-span {
		return fmt.Errorf("cuinterop: %d bytes at %#x run past their allocation of %d bytes at %#x: %w",
			span, p.Ptr, p.Size, p.Base, a2a.ErrShape)
	}
	return nil
}

// primaryName names device's primary context for an error.
func primaryName(device int, primary uintptr) string {
	if primary == 0 {
		return fmt.Sprintf("device %d's primary context (not active in this process)", device)
	}
	return fmt.Sprintf("device %d's primary context %#x", device, primary)
}
