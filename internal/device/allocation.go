package device

import (
	"errors"
	"sync/atomic"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Allocation is a Comm's buffer as allocated: by cuMemAlloc, shared over
// legacy IPC, or by the virtual memory API (VMM), shared as a file
// descriptor.
type Allocation struct {
	Ptr  driver.DevicePtr
	Size uint64           // bytes mapped at Ptr: the request, rounded up to the granularity with VMM
	Mem  driver.MemHandle // the physical allocation; 0 for cuMemAlloc
}

// vmmMappings counts the process's live VMM mappings: its Comms' own
// buffers and the peers' it imported (CountMapping), for the tests that
// check every one is undone.
var vmmMappings atomic.Int64

// CountMapping records a VMM mapping made (+1) or undone (-1).
func CountMapping(delta int64) { vmmMappings.Add(delta) }

// LiveMappings is the number of VMM mappings the process holds.
func LiveMappings() int64 { return vmmMappings.Load() }

// VMM reports whether a is cuMemCreate memory.
func (a Allocation) VMM() bool { return a.Mem != 0 }

// Allocate allocates n bytes on ctx's device: with cuMemAlloc, or with
// vmm by cuMemCreate (exportable as a POSIX file descriptor, n rounded up
// to the granularity), mapped and given read-write access there. A VMM
// allocation costs a few driver calls more and up to one granularity
// (2 MiB) of memory more. On failure nothing is left.
func Allocate(ctx *driver.Context, n uint64, vmm bool) (Allocation, error) {
	if !vmm {
		p, err := ctx.MemAlloc(n)
		return Allocation{Ptr: p, Size: n}, err
	}
	g, err := ctx.Driver().AllocationGranularity(ctx.Ordinal(), driver.HandlePosixFD)
	if err != nil {
		return Allocation{}, err
	}
	size := (n + g - 1) / g * g
	mem, err := ctx.MemCreate(size, driver.HandlePosixFD)
	if err != nil {
		return Allocation{}, err
	}
	p, err := ctx.MapAndGrant(mem, size)
	if err != nil {
		return Allocation{}, errors.Join(err, ctx.MemRelease(mem))
	}
	CountMapping(1)
	return Allocation{Ptr: p, Size: size, Mem: mem}, nil
}

// Free is the release of a (which may wait for the device): cuMemFree, or
// the unmapping and release of the VMM allocation.
func (a Allocation) Free(ctx *driver.Context) Release {
	if !a.VMM() {
		return Release{What: "freeing the buffer", Do: func() error { return ctx.MemFree(a.Ptr) }}
	}
	return Release{What: "unmapping and releasing the buffer", Do: func() error {
		err := ctx.Unmap(a.Ptr, a.Size)
		if err == nil {
			CountMapping(-1)
		}
		return errors.Join(err, ctx.MemRelease(a.Mem))
	}}
}

// FreeNow frees a at once, for an allocation no one has seen yet (a
// failed New).
func (a Allocation) FreeNow(ctx *driver.Context) error {
	r := a.Free(ctx)
	if err := r.Do(); err != nil {
		return api.WrapDriver(r.What, err)
	}
	return nil
}
