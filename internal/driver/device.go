package driver

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Attribute is a CUdevice_attribute, queried with DeviceAttribute.
type Attribute int32

// Device attributes this package names; any CUdevice_attribute value works.
const (
	AttrMaxThreadsPerBlock     Attribute = 1
	AttrClockRate              Attribute = 13 // kHz
	AttrMultiprocessorCount    Attribute = 16
	AttrIntegrated             Attribute = 18
	AttrCanMapHostMemory       Attribute = 19
	AttrPCIBusID               Attribute = 33
	AttrPCIDeviceID            Attribute = 34
	AttrMemoryClockRate        Attribute = 36 // kHz
	AttrGlobalMemoryBusWidth   Attribute = 37 // bits
	AttrUnifiedAddressing      Attribute = 41
	AttrPCIDomainID            Attribute = 50
	AttrComputeCapabilityMajor Attribute = 75
	AttrComputeCapabilityMinor Attribute = 76
)

// Version returns the driver's CUDA version (cuDriverGetVersion), e.g.
// 13000 for CUDA 13.0.
func (d *Driver) Version() (int, error) {
	var v int32
	r, _, _ := purego.SyscallN(d.fn.driverGetVersion, uintptr(unsafe.Pointer(&v)))
	return int(v), d.check("cuDriverGetVersion", r)
}

// DeviceCount returns how many CUDA devices the driver sees (may be 0).
func (d *Driver) DeviceCount() (int, error) {
	var n int32
	r, _, _ := purego.SyscallN(d.fn.deviceGetCount, uintptr(unsafe.Pointer(&n)))
	return int(n), d.check("cuDeviceGetCount", r)
}

// RequireDevices returns the device count, or an error matching ErrNoDevice
// when it is 0.
func (d *Driver) RequireDevices() (int, error) {
	n, err := d.DeviceCount()
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, fmt.Errorf("driver: the CUDA driver sees no device (check nvidia-smi and CUDA_VISIBLE_DEVICES): %w", ErrNoDevice)
	}
	return n, nil
}

// device returns the CUdevice handle of an ordinal (cuDeviceGet).
func (d *Driver) device(ordinal int) (int32, error) {
	var dev int32
	r, _, _ := purego.SyscallN(d.fn.deviceGet, uintptr(unsafe.Pointer(&dev)), uintptr(uint32(int32(ordinal))))
	return dev, d.check("cuDeviceGet", r)
}

// DeviceName returns the marketing name of a device, e.g. "NVIDIA H200".
func (d *Driver) DeviceName(ordinal int) (string, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 256)
	r, _, _ := purego.SyscallN(d.fn.deviceGetName, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(uint32(dev)))
	runtime.KeepAlive(buf)
	if err := d.check("cuDeviceGetName", r); err != nil {
		return "", err
	}
	return trimNUL(buf), nil
}

// DeviceAttribute returns one integer attribute of a device.
func (d *Driver) DeviceAttribute(ordinal int, a Attribute) (int, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return 0, err
	}
	var v int32
	r, _, _ := purego.SyscallN(d.fn.deviceGetAttribute, uintptr(unsafe.Pointer(&v)), uintptr(uint32(a)), uintptr(uint32(dev)))
	return int(v), d.check("cuDeviceGetAttribute", r)
}

// DeviceTotalMem returns a device's total memory in bytes.
func (d *Driver) DeviceTotalMem(ordinal int) (uint64, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return 0, err
	}
	var n uintptr
	r, _, _ := purego.SyscallN(d.fn.deviceTotalMem, uintptr(unsafe.Pointer(&n)), uintptr(uint32(dev)))
	return uint64(n), d.check("cuDeviceTotalMem_v2", r)
}

// DevicePCIBusID returns a device's PCI address, e.g. "0000:19:00.0".
func (d *Driver) DevicePCIBusID(ordinal int) (string, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 64)
	r, _, _ := purego.SyscallN(d.fn.deviceGetPCIBusID, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(uint32(dev)))
	runtime.KeepAlive(buf)
	if err := d.check("cuDeviceGetPCIBusId", r); err != nil {
		return "", err
	}
	return trimNUL(buf), nil
}

// DeviceUUID returns a device's 16-byte UUID (cuDeviceGetUuid_v2, else
// cuDeviceGetUuid); an error matching ErrSymbolMissing if neither exists.
func (d *Driver) DeviceUUID(ordinal int) ([16]byte, error) {
	var u [16]byte
	if d.fn.deviceGetUUID == 0 {
		return u, d.missing("cuDeviceGetUuid_v2")
	}
	dev, err := d.device(ordinal)
	if err != nil {
		return u, err
	}
	r, _, _ := purego.SyscallN(d.fn.deviceGetUUID, uintptr(unsafe.Pointer(&u)), uintptr(uint32(dev)))
	return u, d.check(d.fn.deviceGetUUIDName, r)
}

// CanAccessPeer reports whether device ordinal can map memory of device
// peer (cuDeviceCanAccessPeer).
func (d *Driver) CanAccessPeer(ordinal, peer int) (bool, error) {
	dev, err := d.device(ordinal)
	if err != nil {
		return false, err
	}
	pdev, err := d.device(peer)
	if err != nil {
		return false, err
	}
	var v int32
	r, _, _ := purego.SyscallN(d.fn.deviceCanAccessPeer, uintptr(unsafe.Pointer(&v)), uintptr(uint32(dev)), uintptr(uint32(pdev)))
	return v != 0, d.check("cuDeviceCanAccessPeer", r)
}

// ErrorName returns the driver's name for r (cuGetErrorName), falling back
// to r.String() for codes the driver does not know.
func (d *Driver) ErrorName(r Result) string {
	if d != nil {
		if s := d.errorText(d.fn.getErrorName, r); s != "" {
			return s
		}
	}
	return r.String()
}

// ErrorString returns the driver's description of r (cuGetErrorString), or
// "" when the driver does not know the code.
func (d *Driver) ErrorString(r Result) string {
	if d == nil {
		return ""
	}
	return d.errorText(d.fn.getErrorString, r)
}

// errorText calls cuGetErrorName or cuGetErrorString.
func (d *Driver) errorText(fn uintptr, r Result) string {
	if fn == 0 {
		return ""
	}
	var p *byte
	rc, _, _ := purego.SyscallN(fn, uintptr(uint32(r)), uintptr(unsafe.Pointer(&p)))
	if resultOf(rc) != Success {
		return ""
	}
	return goString(p)
}
