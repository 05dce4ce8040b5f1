package ipc

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// peerMapping is how this process reaches one peer's buffer.
type peerMapping struct {
	ptr       driver.DevicePtr
	ipcOpened bool            // close with cuIpcCloseMemHandle
	vmmSize   uint64          // an imported VMM buffer of this size: unmap with cuMemUnmap
	retained  bool            // a same-process peer's buffer: device.ReleaseBuffer
	peerCtx   *driver.Context // retained for a same-process peer on another device
}

// ipcPeers maps the buffers of a group's ranks into this process: over
// CUDA IPC from other processes, directly (with peer access) from this one.
// Transports that write into the peers' memory share it.
type ipcPeers struct {
	env *transport.Env
	m   [kernelabi.MaxRanks]peerMapping
}

// checkAccess decides for the whole group: every pair of distinct GPUs
// that this process can see is checked, in rank order, so every rank that
// sees the same GPUs names the same pair.
func (p *ipcPeers) checkAccess(hs []handle.Handle) error {
	ordinals := make([]int, len(hs))
	for i, h := range hs {
		ordinals[i] = p.env.OrdinalOfBus(h.Bus())
	}
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := ordinals[i], ordinals[j]
			if a < 0 || b < 0 || a == b {
				continue
			}
			ok, err := p.env.Driver.CanAccessPeer(a, b)
			if err != nil {
				return api.WrapDriver("checking peer access", err)
			}
			ok2, err := p.env.Driver.CanAccessPeer(b, a)
			if err != nil {
				return api.WrapDriver("checking peer access", err)
			}
			if !ok || !ok2 {
				return fmt.Errorf("a2a: rank %d (GPU %s) and rank %d (GPU %s) cannot access each other's memory: %w",
					i, hs[i].Bus(), j, hs[j].Bus(), api.ErrNoPeerAccess)
			}
		}
	}
	return nil
}

// FromThisProcess says whether a handle was made by this process (its
// buffer is used directly, not IPC-opened). A variable so that the tests
// can take the IPC path within one process.
var FromThisProcess = func(h handle.Handle) bool { return h.Nonce == handle.ProcessNonce() }

// mapAll maps every rank's buffer; self is this rank, whose own buffer is
// own, and each peer's must hold at least need bytes (what this rank
// writes into it). On failure nothing stays mapped.
func (p *ipcPeers) mapAll(hs []handle.Handle, self int, own driver.DevicePtr, need int64) error {
	for i, h := range hs {
		if i == self {
			p.m[i] = peerMapping{ptr: own}
			continue
		}
		m, err := p.mapOne(h, need)
		if err != nil {
			p.bury() // unmapping may wait for the device: see internal/device
			return api.Wrap(err, "rank %d mapping rank %d's buffer", self, i)
		}
		p.m[i] = m
	}
	return nil
}

func (p *ipcPeers) mapOne(h handle.Handle, need int64) (peerMapping, error) {
	if !FromThisProcess(h) {
		if h.Shared != handle.SharedLegacyIPC {
			return p.openVMM(h, need)
		}
		return p.openIPC(h, need)
	}
	// The same process: CUDA refuses to IPC-open its own allocations, but
	// with unified addressing the pointer is valid as it is, given peer
	// access when it lives on another device. A nonce is no proof (every
	// rank sees its peers'): the pointer must be the buffer of a Comm of
	// this process, of that rank, size and handle ID (which only that
	// Comm's group has seen), whose owner still holds it.
	m := peerMapping{ptr: driver.DevicePtr(h.DevPtr), retained: true}
	if !device.RetainBuffer(m.ptr, int(h.Rank), int64(h.DataBytes), h.ID) {
		return peerMapping{}, notOwnBuffer(h)
	}
	if h.Bus() == p.env.BusID {
		return m, nil
	}
	if h.Shared != handle.SharedLegacyIPC {
		if err := p.grantSameProcess(h, m.ptr); err != nil {
			p.env.Share.DeferError(device.ReleaseBuffer(m.ptr, false))
			return peerMapping{}, err
		}
		return m, nil
	}
	pc, err := p.peerContext(h)
	if err != nil {
		p.env.Share.DeferError(device.ReleaseBuffer(m.ptr, false))
		return peerMapping{}, err
	}
	m.peerCtx = pc
	return m, nil
}

// CheckOwnBuffers checks, before anything is mapped, that every handle
// from this process but self's names the live buffer of the Comm it comes
// from (its ID, rank and size): a peer of this group could otherwise
// point this Comm at the buffer of a Comm of another group in this
// process, whose ID it never saw.
func CheckOwnBuffers(hs []handle.Handle, self int) error {
	for i, h := range hs {
		if i != self && FromThisProcess(h) && !device.OwnsBuffer(driver.DevicePtr(h.DevPtr), int(h.Rank), int64(h.DataBytes), h.ID) {
			return notOwnBuffer(h)
		}
	}
	return nil
}

// notOwnBuffer is the error of a same-process handle whose pointer is not
// its Comm's buffer.
func notOwnBuffer(h handle.Handle) error {
	return fmt.Errorf("a2a: rank %d's handle names %#x, which is not the buffer of that rank's Comm in this process "+
		"(no buffer, another Comm's, of this group or another, or one being freed): %w", h.Rank, h.DevPtr, api.ErrHandle)
}

// ipcOpenError words the failed IPC open of h's buffer. A handle the
// driver calls invalid (random bytes, say) matches ErrHandle as well as
// the driver's error; other failures (out of memory, no driver) are the
// driver's alone.
func ipcOpenError(h handle.Handle, err error) error {
	if !driver.IsCode(err, driver.ErrorInvalidValue) && !driver.IsCode(err, driver.ErrorInvalidHandle) {
		return api.WrapDriver("opening IPC handle", err)
	}
	what := fmt.Sprintf("rank %d's IPC handle names no memory this process can map (%v)", h.Rank, api.ErrHandle)
	return api.WrapDriverAs(what, api.ErrHandle, err)
}

// peerContext retains the primary context of the device of h's buffer
// and enables this context's access to it.
func (p *ipcPeers) peerContext(h handle.Handle) (*driver.Context, error) {
	ord := p.env.OrdinalOfBus(h.Bus())
	if ord < 0 {
		return nil, fmt.Errorf("a2a: device %s not visible: %w", h.Bus(), api.ErrNoPeerAccess)
	}
	pc, err := p.env.Driver.RetainPrimaryContext(ord)
	if err != nil {
		return nil, api.WrapDriver("retaining peer context", err)
	}
	if err := p.env.Ctx.EnablePeerAccess(pc); err != nil {
		pc.Release()
		return nil, api.WrapDriver("enabling peer access", err)
	}
	return pc, nil
}

// openIPC maps another process's buffer and checks that the mapping is a
// whole allocation of at least need bytes: the handle's claims are not
// trusted, and this rank's kernels write need bytes into it.
func (p *ipcPeers) openIPC(h handle.Handle, need int64) (peerMapping, error) {
	ptr, err := p.env.Ctx.IpcOpenMemHandle(h.IPC)
	if err != nil {
		return peerMapping{}, ipcOpenError(h, err)
	}
	base, size, err := p.env.Ctx.MemAddressRange(ptr)
	if err != nil {
		err = api.WrapDriver("reading the mapped range", err)
	} else if base != ptr || size < uint64(need) {
		err = fmt.Errorf("a2a: rank %d's buffer maps %d bytes at %#x of an allocation at %#x, this rank writes %d: %w",
			h.Rank, size, ptr, base, need, api.ErrHandle)
	}
	if err != nil {
		p.env.Share.Bury(p.unmap(ptr))
		return peerMapping{}, err
	}
	return peerMapping{ptr: ptr, ipcOpened: true}, nil
}

// unmap is the deferred release of an IPC mapping at ptr.
func (p *ipcPeers) unmap(ptr driver.DevicePtr) device.Release {
	ctx := p.env.Share.Ctx
	return device.Release{What: "closing an IPC mapping", Do: func() error { return ctx.IpcCloseMemHandle(ptr) }}
}

// bury forgets the mappings, handing what unmaps them to the share's
// graveyard.
func (p *ipcPeers) bury() {
	var graves []device.Release
	var retained []driver.DevicePtr
	for i := range p.m {
		m := p.m[i]
		if m.retained {
			retained = append(retained, m.ptr)
		}
		if m.ipcOpened {
			graves = append(graves, p.unmap(m.ptr))
		}
		if m.vmmSize != 0 {
			graves = append(graves, p.unmapVMM(m.ptr, m.vmmSize))
		}
		if m.peerCtx != nil {
			graves = append(graves, device.Release{What: "releasing a peer context", Do: m.peerCtx.Release})
		}
		p.m[i] = peerMapping{}
	}
	p.env.Share.Bury(graves...)
	// After the peer context's release is buried: freeing the buffer may
	// tear its device's share down.
	for _, ptr := range retained {
		p.env.Share.DeferError(device.ReleaseBuffer(ptr, false))
	}
}
