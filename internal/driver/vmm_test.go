package driver

import (
	"testing"
	"unsafe"
)

// TestVMMLayout pins the VMM structures passed by pointer to cuda.h's
// layout on 64-bit platforms, as the CUDA 11.8 header (checked with a C
// program printing sizeof and offsetof) and the 12.x and 13.x headers
// declare them: CUmemAllocationProp is 32 bytes, CUmemAccessDesc 12.
func TestVMMLayout(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("the layout is pinned for 64-bit platforms")
	}
	var p memAllocationProp
	var a memAccessDesc
	for _, c := range []struct {
		what      string
		got, want uintptr
	}{
		{"sizeof(CUmemLocation)", unsafe.Sizeof(memLocation{}), 8},
		{"offsetof(CUmemLocation, id)", unsafe.Offsetof(memLocation{}.ID), 4},
		{"sizeof(CUmemAllocationProp)", unsafe.Sizeof(p), 32},
		{"offsetof(CUmemAllocationProp, requestedHandleTypes)", unsafe.Offsetof(p.RequestedHandleTypes), 4},
		{"offsetof(CUmemAllocationProp, location)", unsafe.Offsetof(p.Location), 8},
		{"offsetof(CUmemAllocationProp, win32HandleMetaData)", unsafe.Offsetof(p.Win32HandleMetaData), 16},
		{"offsetof(CUmemAllocationProp, allocFlags.compressionType)", unsafe.Offsetof(p.CompressionType), 24},
		{"offsetof(CUmemAllocationProp, allocFlags.gpuDirectRDMACapable)", unsafe.Offsetof(p.GPUDirectRDMACapable), 25},
		{"offsetof(CUmemAllocationProp, allocFlags.usage)", unsafe.Offsetof(p.Usage), 26},
		{"offsetof(CUmemAllocationProp, allocFlags.reserved)", unsafe.Offsetof(p.Reserved), 28},
		{"sizeof(CUmemAccessDesc)", unsafe.Sizeof(a), 12},
		{"offsetof(CUmemAccessDesc, flags)", unsafe.Offsetof(a.Flags), 8},
		{"sizeof(CUmemGenericAllocationHandle)", unsafe.Sizeof(MemHandle(0)), 8},
		{"sizeof(CUmemFabricHandle)", unsafe.Sizeof(FabricHandle{}), 64},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
		}
	}
	prop := deviceProp(3, HandlePosixFD)
	if prop.Type != 1 || prop.RequestedHandleTypes != 1 || prop.Location != (memLocation{Type: 1, ID: 3}) {
		t.Errorf("deviceProp(3, fd) = %+v, want a pinned allocation on device 3 exportable as a file descriptor", *prop)
	}
}
