package driver

import (
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ulysses-go/ulysses/internal/dl"
)

// The driver's virtual memory management (VMM) API: physical allocations
// made with cuMemCreate, mapped at addresses reserved with
// cuMemAddressReserve, and shared between processes as a POSIX file
// descriptor or, across the hosts of an NVLink domain, as a fabric handle.
// All of it is optional: a driver without these symbols still loads, and
// the calls report ErrSymbolMissing.

// vmmFuncs are the VMM entry points.
type vmmFuncs struct {
	create, release, reserve, addressFree, mapMem, unmap, setAccess uintptr
	granularity, export, importHandle                               uintptr
}

func (f *vmmFuncs) table() []dl.Symbol {
	return []dl.Symbol{
		dl.Opt(&f.create, "cuMemCreate"),
		dl.Opt(&f.release, "cuMemRelease"),
		dl.Opt(&f.reserve, "cuMemAddressReserve"),
		dl.Opt(&f.addressFree, "cuMemAddressFree"),
		dl.Opt(&f.mapMem, "cuMemMap"),
		dl.Opt(&f.unmap, "cuMemUnmap"),
		dl.Opt(&f.setAccess, "cuMemSetAccess"),
		dl.Opt(&f.granularity, "cuMemGetAllocationGranularity"),
		dl.Opt(&f.export, "cuMemExportToShareableHandle"),
		dl.Opt(&f.importHandle, "cuMemImportFromShareableHandle"),
	}
}

// Device attributes of the VMM API.
const (
	AttrVirtualMemoryManagement Attribute = 102 // CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED
	AttrHandleTypePosixFD       Attribute = 103 // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED
	AttrHandleTypeFabric        Attribute = 128 // CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED (CUDA 12.3)
)

// HandleType is a CUmemAllocationHandleType: how an allocation may be
// exported.
type HandleType uint32

// The handle types this package exports and imports.
const (
	HandlePosixFD HandleType = 0x1 // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: an int
	HandleFabric  HandleType = 0x8 // CU_MEM_HANDLE_TYPE_FABRIC: 64 bytes (FabricHandle)
)

// FabricHandle is a CUmemFabricHandle: 64 opaque bytes that any process of
// the NVLink domain (with an IMEX channel) can import.
type FabricHandle [64]byte

// MemHandle is a CUmemGenericAllocationHandle: a physical allocation.
type MemHandle uint64

// Constants of cuda.h's VMM structures.
const (
	memAllocationTypePinned = 0x1 // CU_MEM_ALLOCATION_TYPE_PINNED
	memLocationTypeDevice   = 0x1 // CU_MEM_LOCATION_TYPE_DEVICE
	memAccessReadWrite      = 0x3 // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
	granularityMinimum      = 0x0 // CU_MEM_ALLOC_GRANULARITY_MINIMUM
)

// memLocation is a CUmemLocation.
type memLocation struct {
	Type int32 // CUmemLocationType
	ID   int32 // a device ordinal for CU_MEM_LOCATION_TYPE_DEVICE
}

// memAllocationProp is a CUmemAllocationProp (CUDA 11.x to 13.x: 32 bytes
// on 64-bit platforms; vmm_test.go pins the layout).
type memAllocationProp struct {
	Type                 int32  // CUmemAllocationType
	RequestedHandleTypes uint32 // CUmemAllocationHandleType, a bit mask
	Location             memLocation
	Win32HandleMetaData  uintptr // zero off Windows
	CompressionType      uint8
	GPUDirectRDMACapable uint8
	Usage                uint16
	Reserved             [4]uint8
}

// memAccessDesc is a CUmemAccessDesc (12 bytes).
type memAccessDesc struct {
	Location memLocation
	Flags    int32 // CUmemAccess_flags
}

// deviceProp is the property of a pinned allocation on device ordinal
// exportable as types.
func deviceProp(ordinal int, types HandleType) *memAllocationProp {
	return &memAllocationProp{Type: memAllocationTypePinned, RequestedHandleTypes: uint32(types),
		Location: memLocation{Type: memLocationTypeDevice, ID: int32(ordinal)}}
}

// vmmMissing is the error of a VMM call the driver lacks, nil when it has
// fn.
func (d *Driver) vmmMissing(fn uintptr, name string) error {
	if fn == 0 {
		return d.missing(name)
	}
	return nil
}

// AllocationGranularity returns the minimum granularity of a pinned
// allocation on device ordinal exportable as types
// (cuMemGetAllocationGranularity): sizes and addresses of VMM mappings
// are multiples of it (2 MiB on current GPUs).
func (d *Driver) AllocationGranularity(ordinal int, types HandleType) (uint64, error) {
	if err := d.vmmMissing(d.fn.vmm.granularity, "cuMemGetAllocationGranularity"); err != nil {
		return 0, err
	}
	var g uintptr
	prop := deviceProp(ordinal, types)
	r, _, _ := purego.SyscallN(d.fn.vmm.granularity, uintptr(unsafe.Pointer(&g)), uintptr(unsafe.Pointer(prop)), granularityMinimum)
	return uint64(g), d.check("cuMemGetAllocationGranularity", r)
}

// MemCreate makes a physical allocation of size bytes (a multiple of the
// granularity) on c's device, exportable as types (cuMemCreate). It is
// not mapped anywhere: MapAndGrant maps it. Undo with MemRelease.
func (c *Context) MemCreate(size uint64, types HandleType) (MemHandle, error) {
	if err := c.d.vmmMissing(c.d.fn.vmm.create, "cuMemCreate"); err != nil {
		return 0, err
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var h MemHandle
	prop := deviceProp(c.ordinal, types)
	r, _, _ := purego.SyscallN(c.d.fn.vmm.create, uintptr(unsafe.Pointer(&h)), uintptr(size), uintptr(unsafe.Pointer(prop)), 0)
	c.leave()
	return h, c.d.check("cuMemCreate", r)
}

// MemRelease releases a physical allocation (cuMemRelease); its memory
// lives on while a mapping of it remains.
func (c *Context) MemRelease(h MemHandle) error {
	if err := c.d.vmmMissing(c.d.fn.vmm.release, "cuMemRelease"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.vmm.release, uintptr(h))
	c.leave()
	return c.d.check("cuMemRelease", r)
}

// MapAndGrant reserves size bytes of address space, maps h there and
// gives c's device read-write access (cuMemAddressReserve, cuMemMap,
// cuMemSetAccess). On failure nothing stays reserved or mapped. Undo with
// Unmap.
func (c *Context) MapAndGrant(h MemHandle, size uint64) (DevicePtr, error) {
	for _, s := range []struct {
		fn   uintptr
		name string
	}{{c.d.fn.vmm.reserve, "cuMemAddressReserve"}, {c.d.fn.vmm.mapMem, "cuMemMap"}, {c.d.fn.vmm.setAccess, "cuMemSetAccess"},
		{c.d.fn.vmm.unmap, "cuMemUnmap"}, {c.d.fn.vmm.addressFree, "cuMemAddressFree"}} {
		if err := c.d.vmmMissing(s.fn, s.name); err != nil {
			return 0, err
		}
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	defer c.leave()
	var p DevicePtr
	r, _, _ := purego.SyscallN(c.d.fn.vmm.reserve, uintptr(unsafe.Pointer(&p)), uintptr(size), 0, 0, 0)
	if err := c.d.check("cuMemAddressReserve", r); err != nil {
		return 0, err
	}
	r = c.d.call(c.d.fn.vmm.mapMem, uintptr(p), uintptr(size), 0, uintptr(h), 0)
	if err := c.d.check("cuMemMap", r); err != nil {
		c.d.call(c.d.fn.vmm.addressFree, uintptr(p), uintptr(size))
		return 0, err
	}
	if err := c.grant(p, size, c.ordinal); err != nil {
		c.d.call(c.d.fn.vmm.unmap, uintptr(p), uintptr(size))
		c.d.call(c.d.fn.vmm.addressFree, uintptr(p), uintptr(size))
		return 0, err
	}
	return p, nil
}

// grant is cuMemSetAccess giving device ordinal read-write access to
// [p, p+size). Called inside enter.
func (c *Context) grant(p DevicePtr, size uint64, ordinal int) error {
	desc := &memAccessDesc{Location: memLocation{Type: memLocationTypeDevice, ID: int32(ordinal)}, Flags: memAccessReadWrite}
	r, _, _ := purego.SyscallN(c.d.fn.vmm.setAccess, uintptr(p), uintptr(size), uintptr(unsafe.Pointer(desc)), 1)
	return c.d.check("cuMemSetAccess", r)
}

// GrantAccess gives device ordinal read-write access to the mapping
// [p, p+size) (cuMemSetAccess): what a peer of this process on another
// device needs to reach a VMM buffer, in place of peer access.
func (c *Context) GrantAccess(p DevicePtr, size uint64, ordinal int) error {
	if err := c.d.vmmMissing(c.d.fn.vmm.setAccess, "cuMemSetAccess"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	return c.grant(p, size, ordinal)
}

// Unmap unmaps [p, p+size) and frees the address range (cuMemUnmap,
// cuMemAddressFree). The real driver waits for the device's work here.
func (c *Context) Unmap(p DevicePtr, size uint64) error {
	if err := c.d.vmmMissing(c.d.fn.vmm.unmap, "cuMemUnmap"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.leave()
	r := c.d.call(c.d.fn.vmm.unmap, uintptr(p), uintptr(size))
	err := c.d.check("cuMemUnmap", r)
	if err == nil {
		err = c.d.check("cuMemAddressFree", c.d.call(c.d.fn.vmm.addressFree, uintptr(p), uintptr(size)))
	}
	return err
}

// ExportFD exports h as a new POSIX file descriptor, which the caller
// owns and must close (cuMemExportToShareableHandle). h must have been
// made exportable as HandlePosixFD.
func (c *Context) ExportFD(h MemHandle) (int, error) {
	fd := int32(-1)
	err := c.exportShareable(unsafe.Pointer(&fd), h, HandlePosixFD)
	return int(fd), err
}

// ImportFD imports the allocation a POSIX file descriptor from ExportFD
// (of this process or another) stands for (cuMemImportFromShareableHandle).
// fd stays the caller's to close; the allocation is released with
// MemRelease.
func (c *Context) ImportFD(fd int) (MemHandle, error) {
	return c.importShareable(fd, nil)
}

// ExportFabric exports h as a fabric handle (cuMemExportToShareableHandle
// with CU_MEM_HANDLE_TYPE_FABRIC): bytes that any process of the NVLink
// domain may import. h must have been made exportable as HandleFabric,
// which needs a driver reporting AttrHandleTypeFabric and an IMEX channel.
func (c *Context) ExportFabric(h MemHandle) (FabricHandle, error) {
	var fh FabricHandle
	err := c.exportShareable(unsafe.Pointer(&fh), h, HandleFabric)
	return fh, err
}

// ImportFabric imports the allocation a fabric handle stands for
// (cuMemImportFromShareableHandle with CU_MEM_HANDLE_TYPE_FABRIC).
func (c *Context) ImportFabric(fh FabricHandle) (MemHandle, error) {
	return c.importShareable(-1, &fh)
}

// exportShareable is cuMemExportToShareableHandle of h as kind into dst,
// an int for HandlePosixFD or a FabricHandle for HandleFabric.
func (c *Context) exportShareable(dst unsafe.Pointer, h MemHandle, kind HandleType) error {
	if err := c.d.vmmMissing(c.d.fn.vmm.export, "cuMemExportToShareableHandle"); err != nil {
		return err
	}
	if err := c.enter(); err != nil {
		return err
	}
	r, _, _ := purego.SyscallN(c.d.fn.vmm.export, uintptr(dst), uintptr(h), uintptr(kind), 0)
	c.leave()
	return c.d.check("cuMemExportToShareableHandle", r)
}

// importShareable is cuMemImportFromShareableHandle of the POSIX
// descriptor fd (HandlePosixFD, passed as the pointer-sized value itself)
// or, where fabric is not nil, of the fabric handle at fabric
// (HandleFabric, passed by address, converted in the call so that it
// stays alive until the driver returns).
func (c *Context) importShareable(fd int, fabric *FabricHandle) (MemHandle, error) {
	if err := c.d.vmmMissing(c.d.fn.vmm.importHandle, "cuMemImportFromShareableHandle"); err != nil {
		return 0, err
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var h MemHandle
	var r uintptr
	if fabric != nil {
		r, _, _ = purego.SyscallN(c.d.fn.vmm.importHandle, uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(fabric)), uintptr(HandleFabric))
	} else {
		r, _, _ = purego.SyscallN(c.d.fn.vmm.importHandle, uintptr(unsafe.Pointer(&h)), uintptr(fd), uintptr(HandlePosixFD))
	}
	c.leave()
	return h, c.d.check("cuMemImportFromShareableHandle", r)
}

// HasVMM reports whether the driver exports every VMM call this package
// binds.
func (d *Driver) HasVMM() bool {
	for _, s := range d.fn.vmm.table() {
		if *s.Addr == 0 {
			return false
		}
	}
	return true
}
