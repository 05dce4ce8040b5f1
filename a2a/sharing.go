package a2a

import (
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/handle"
)

// Sharing chooses how a Comm's buffer is allocated and shared with the
// peers of other processes on its host (Config.Sharing); peers in the
// same process use its address whatever the choice. Ranks need not
// agree: each maps every peer's buffer the way that peer's handle says.
type Sharing uint8

const (
	// SharingDefault, the zero value, is SharingAuto.
	SharingDefault Sharing = iota
	// SharingLegacyIPC allocates with cuMemAlloc and shares with legacy
	// CUDA IPC (cuIpcGetMemHandle, cuIpcOpenMemHandle): what every CUDA
	// driver supports.
	SharingLegacyIPC
	// SharingFD allocates with the driver's virtual memory API
	// (cuMemCreate, the size rounded up to its 2 MiB granularity, mapped
	// and given access) and hands the buffer's POSIX file descriptor to
	// each peer that fetches it over a Unix-domain socket, the way NCCL
	// and PyTorch share memory. The socket is in a directory of its own
	// under TMPDIR (or /tmp) that only this user can enter, named from
	// the handle's ID; it gives the descriptor only to a peer that proves
	// the ID (which only the group's handles carry), bound to this
	// process, rank and size, and keeps serving the group while
	// strangers of this user crowd it. It costs a directory, a socket and a
	// goroutine from New to Close; the group's processes must share the
	// temporary directory. Connect fails with ErrShare where a peer's
	// buffer cannot be fetched (its process gone, say), and New with
	// ErrNotSupported where the driver lacks the API or the device the
	// handle type (see DeviceInfo.PosixFD). Linux only.
	SharingFD
	// SharingAuto is SharingFD where the driver reports the device able
	// to export memory as a POSIX file descriptor
	// (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED),
	// SharingLegacyIPC elsewhere.
	SharingAuto
)

// defaultSharing is what SharingDefault means (a variable only so that
// the tests can run their suite with another: SetDefaultSharing).
var defaultSharing = SharingAuto

// String names the choice as the command line spells it: "default",
// "legacy-ipc", "fd" or "auto".
func (s Sharing) String() string {
	switch s {
	case SharingDefault:
		return "default"
	case SharingLegacyIPC:
		return "legacy-ipc"
	case SharingFD:
		return "fd"
	case SharingAuto:
		return "auto"
	}
	return "Sharing(?)"
}

// ParseSharing reads a name as Sharing.String prints it, in any case
// ("" is SharingDefault). An unknown name matches ErrConfig.
func ParseSharing(s string) (Sharing, error) {
	if s == "" {
		return SharingDefault, nil
	}
	for _, k := range []Sharing{SharingDefault, SharingLegacyIPC, SharingFD, SharingAuto} {
		if strings.EqualFold(s, k.String()) {
			return k, nil
		}
	}
	return 0, fmt.Errorf("a2a: unknown sharing %q (want default, legacy-ipc, fd or auto): %w", s, ErrConfig)
}

// useFD decides, for a Comm on info's device, whether s means sharing as
// a file descriptor; SharingFD on a device that cannot fails with
// ErrNotSupported. info.PosixFD already says the driver has the VMM API
// (sharingSupport).
func (s Sharing) useFD(info DeviceInfo) (bool, error) {
	if s == SharingDefault {
		s = defaultSharing
	}
	able := info.PosixFD && runtime.GOOS == "linux" // the socket is Linux's (internal/fdshare)
	switch s {
	case SharingLegacyIPC:
		return false, nil
	case SharingAuto:
		return able, nil
	}
	if !able {
		return false, fmt.Errorf("a2a: GPU %d cannot share memory as a file descriptor here (driver without the virtual memory API, device without the handle type, or not Linux): %w", info.Ordinal, ErrNotSupported)
	}
	return true, nil
}

// sharingSupport reads whether device ord can export memory as a POSIX
// file descriptor and as a fabric handle, with the driver's VMM API; an
// attribute the driver does not know (older than CUDA 12.3 for fabric
// handles) reads as no.
func sharingSupport(drv *driver.Driver, ord int) (posixFD, fabric bool) {
	if !drv.HasVMM() {
		return false, false
	}
	v, err := drv.DeviceAttribute(ord, driver.AttrHandleTypePosixFD)
	posixFD = err == nil && v == 1
	v, err = drv.DeviceAttribute(ord, driver.AttrHandleTypeFabric)
	return posixFD, err == nil && v == 1
}

// Sharing is how the Comm's buffer is shared, as Config.Sharing resolved
// on its device: SharingLegacyIPC or SharingFD (SharingDefault for a
// Comm that New did not make).
func (c *Comm) Sharing() Sharing {
	if !c.made() {
		return SharingDefault
	}
	return c.sharing
}

// serveFD starts handing the descriptor of alloc (a VMM buffer on ctx's
// device, of requested bytes) to the peers that prove id, bound to this
// process and to rank of world, each connection bounded by timeout.
func serveFD(ctx *driver.Context, alloc device.Allocation, requested int64, id [16]byte, rank, world int, timeout time.Duration) (*fdshare.Server, error) {
	export := func() (int, uint64, error) {
		fd, err := ctx.ExportFD(alloc.Mem)
		return fd, alloc.Size, err
	}
	claim := fdshare.Claim{Nonce: handle.ProcessNonce(), World: uint32(world), Rank: uint32(rank), Bytes: uint64(requested)}
	return fdshare.Listen(fdshare.Config{Key: id[:], Claim: claim, Timeout: timeout, Export: export})
}
