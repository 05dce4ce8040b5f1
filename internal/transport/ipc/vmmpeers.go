package ipc

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/handle"
)

// A peer's buffer made with the virtual memory API (handle.SharedFD,
// handle.SharedFabric) is imported as a physical allocation, mapped at an
// address of this process and given this device's access; the mapping
// keeps the memory alive after the allocation handle is released (at
// once), so unmapping it (cuMemUnmap, cuMemAddressFree) is all that
// Close leaves to do. It stays valid when the owner's process dies.

// openVMM maps the buffer of h, a handle of another process shared as a
// file descriptor or a fabric handle, whose mapping must hold at least
// need bytes.
func (p *ipcPeers) openVMM(h handle.Handle, need int64) (peerMapping, error) {
	var mem driver.MemHandle
	var size uint64
	var err error
	switch h.Shared {
	case handle.SharedFD:
		mem, size, err = p.importFD(h)
	case handle.SharedFabric:
		err = fmt.Errorf("a2a: rank %d shares its buffer as a fabric handle, which groups do not use yet: %w", h.Rank, api.ErrNotSupported)
	default:
		err = fmt.Errorf("a2a: rank %d shares its buffer as %v: %w", h.Rank, h.Shared, api.ErrHandle)
	}
	if err != nil {
		return peerMapping{}, err
	}
	if err := p.checkVMMSize(h, size, need); err != nil {
		return peerMapping{}, errors.Join(err, p.env.Ctx.MemRelease(mem))
	}
	ptr, err := p.env.Ctx.MapAndGrant(mem, size)
	rerr := p.env.Ctx.MemRelease(mem) // the mapping, if any, keeps the memory
	if err != nil {
		// A size past the allocation's end is the driver's refusal here.
		return peerMapping{}, api.WrapDriverAs(fmt.Sprintf("mapping rank %d's buffer of %d bytes (%v)", h.Rank, size, api.ErrShare), api.ErrShare, err)
	}
	device.CountMapping(1)
	m := peerMapping{ptr: ptr, vmmSize: size}
	if rerr != nil {
		p.env.Share.Bury(p.unmapVMM(ptr, size))
		return peerMapping{}, api.WrapDriver("releasing an imported allocation", rerr)
	}
	return m, nil
}

// importFD fetches h's descriptor from its owner, which must claim the
// buffer h describes: of h's process, rank and world size, of the bytes
// every buffer of this group asks for (a handle that names another
// Comm's ID is refused); and imports it. The descriptor is closed
// whatever happens.
func (p *ipcPeers) importFD(h handle.Handle) (driver.MemHandle, uint64, error) {
	want := fdshare.Claim{Nonce: h.Nonce, World: h.World, Rank: h.Rank, Bytes: uint64(p.env.Layout.Total)}
	fd, size, err := fdshare.Fetch(h.FDDir(), h.ID[:], want, time.Now().Add(p.env.Timeout))
	if err != nil {
		return 0, 0, api.Wrap(err, "fetching rank %d's buffer", h.Rank)
	}
	mem, err := p.env.Ctx.ImportFD(fd)
	syscall.Close(fd)
	if err != nil {
		return 0, 0, api.WrapDriverAs(fmt.Sprintf("importing rank %d's buffer (%v)", h.Rank, api.ErrShare), api.ErrShare, err)
	}
	return mem, size, nil
}

// checkVMMSize checks the size an owner claims for its mapping: at least
// need, what this rank writes, at most one granularity more than need
// rounded up (what the owner's allocation is), and a multiple of the
// granularity. The import and the mapping check the rest.
func (p *ipcPeers) checkVMMSize(h handle.Handle, size uint64, need int64) error {
	g, err := p.env.Driver.AllocationGranularity(p.env.Ctx.Ordinal(), driver.HandlePosixFD)
	if err != nil {
		return api.WrapDriver("reading the allocation granularity", err)
	}
	whole := (uint64(need) + g - 1) / g * g
	if size < uint64(need) || size%g != 0 || size > whole+g {
		return fmt.Errorf("a2a: rank %d claims a %d-byte buffer; this rank writes %d, in multiples of %d: %w", h.Rank, size, need, g, api.ErrShare)
	}
	return nil
}

// unmapVMM is the deferred unmapping of an imported buffer.
func (p *ipcPeers) unmapVMM(ptr driver.DevicePtr, size uint64) device.Release {
	ctx := p.env.Share.Ctx
	return device.Release{What: "unmapping a peer's buffer", Do: func() error {
		err := ctx.Unmap(ptr, size)
		if err == nil {
			device.CountMapping(-1)
		}
		return err
	}}
}

// grantSameProcess gives this device access to the VMM buffer at ptr of
// a Comm of this process on another device (in place of peer access,
// which VMM memory ignores).
func (p *ipcPeers) grantSameProcess(h handle.Handle, ptr driver.DevicePtr) error {
	a, ok := device.BufferAllocation(ptr)
	if !ok {
		return notOwnBuffer(h)
	}
	if err := p.env.Ctx.GrantAccess(a.Ptr, a.Size, p.env.Ctx.Ordinal()); err != nil {
		return api.WrapDriver("giving this device access to a peer's buffer", err)
	}
	return nil
}
