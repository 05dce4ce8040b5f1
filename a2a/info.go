package a2a

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// DeviceInfo describes one GPU as the driver reports it.
type DeviceInfo struct {
	Ordinal      int    // the device's ordinal in this process (after CUDA_VISIBLE_DEVICES)
	Name         string // as the driver names it, e.g. "NVIDIA H200"
	BusID        string // PCI bus id, e.g. "0000:1A:00.0"
	SMs          int    // streaming multiprocessors
	ClockKHz     int    // peak SM clock
	Major, Minor int    // compute capability
	TotalMemory  uint64 // bytes of device memory
	Unified      bool   // unified addressing (required)
	// MachineCode is the architecture of the embedded machine code the
	// kernels load as on this GPU ("sm_90", "sm_80"), or "" where the
	// driver JIT-compiles their PTX instead, each kind of operation the
	// first time the process runs it there. PTXReason says why PTX (and,
	// where only some of the kernels take it, which). Both describe the
	// kernels of the process's Comms on the GPU where it has any, else
	// what a Comm made now would get.
	MachineCode string
	PTXReason   string // why PTX, where MachineCode is "" or some kernels take PTX; "" otherwise
	// PosixFD: the device can export memory as a POSIX file descriptor
	// (SharingFD) and the driver has the virtual memory API.
	PosixFD bool
	// Fabric: the device can export memory as a fabric handle, which
	// processes on other hosts of its NVLink domain may import (needs an
	// IMEX channel as well; not used yet: docs/DESIGN.md, "Groups across
	// the hosts of an NVLink domain").
	Fabric bool
}

// SystemInfo is what `ulysses info` prints: the driver, the GPUs and which
// pairs of them can access each other's memory.
type SystemInfo struct {
	DriverVersion int          // e.g. 13000 for CUDA 13.0
	Library       string       // the path of the driver library loaded (libcuda.so.1, or $ULYSSES_LIBCUDA)
	Devices       []DeviceInfo // by ordinal
	PeerAccess    [][]bool     // PeerAccess[i][j]: device i can access device j (true on the diagonal)
}

// System reads the driver's view of the machine. On a machine without the
// driver it returns an error matching ErrNoDriver; without GPUs, ErrNoDevice.
func System() (SystemInfo, error) {
	drv, err := loadDriver()
	if err != nil {
		return SystemInfo{}, api.WrapDriver("loading the CUDA driver", err)
	}
	var s SystemInfo
	s.Library = drv.Path()
	if s.DriverVersion, err = drv.Version(); err != nil {
		return s, api.WrapDriver("reading the driver version", err)
	}
	n, err := drv.RequireDevices()
	if err != nil {
		return s, api.WrapDriver("counting devices", err)
	}
	for i := 0; i < n; i++ {
		d, err := deviceInfo(drv, i)
		if err != nil {
			return s, err
		}
		s.Devices = append(s.Devices, d)
	}
	s.PeerAccess = make([][]bool, n)
	for i := range s.PeerAccess {
		s.PeerAccess[i] = make([]bool, n)
		for j := range s.PeerAccess[i] {
			if i == j {
				s.PeerAccess[i][j] = true
				continue
			}
			if s.PeerAccess[i][j], err = drv.CanAccessPeer(i, j); err != nil {
				return s, api.WrapDriver("checking peer access", err)
			}
		}
	}
	return s, nil
}

func deviceInfo(drv *driver.Driver, ord int) (DeviceInfo, error) {
	d := DeviceInfo{Ordinal: ord}
	var err error
	if d.Name, err = drv.DeviceName(ord); err != nil {
		return d, api.WrapDriver("reading the device name", err)
	}
	if d.BusID, err = drv.DevicePCIBusID(ord); err != nil {
		return d, api.WrapDriver("reading the PCI bus id", err)
	}
	if d.TotalMemory, err = drv.DeviceTotalMem(ord); err != nil {
		return d, api.WrapDriver("reading the memory size", err)
	}
	attrs := []struct {
		a   driver.Attribute
		dst *int
	}{
		{driver.AttrMultiprocessorCount, &d.SMs},
		{driver.AttrClockRate, &d.ClockKHz},
		{driver.AttrComputeCapabilityMajor, &d.Major},
		{driver.AttrComputeCapabilityMinor, &d.Minor},
	}
	for _, a := range attrs {
		if *a.dst, err = drv.DeviceAttribute(ord, a.a); err != nil {
			return d, api.WrapDriver(fmt.Sprintf("reading attribute %d", a.a), err)
		}
	}
	u, err := drv.DeviceAttribute(ord, driver.AttrUnifiedAddressing)
	if err != nil {
		return d, api.WrapDriver("reading unified addressing", err)
	}
	d.Unified = u == 1
	d.MachineCode, d.PTXReason = kernelCode(device.Codes(ord, d.Major, d.Minor))
	d.PosixFD, d.Fabric = sharingSupport(drv, ord)
	return d, nil
}

// kernelCode sums up how the kernels' files reach a GPU: the machine
// code's architecture, if any file takes one, and why the others take
// PTX (the reason alone where every file takes PTX for the same one).
func kernelCode(cs []device.Code) (arch, reason string) {
	var why []string
	for _, c := range cs {
		if c.Arch != "" {
			arch = c.Arch
			continue
		}
		why = append(why, c.File+": "+c.Reason)
	}
	if len(why) == 0 {
		return arch, ""
	}
	if same := cs[0].Reason; arch == "" && !slices.ContainsFunc(cs, func(c device.Code) bool { return c.Reason != same }) {
		return "", same
	}
	return arch, strings.Join(why, "; ")
}
