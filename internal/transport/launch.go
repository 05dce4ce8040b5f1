package transport

import (
	"fmt"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Launch enqueues kernel f on s, grid blocks of threads threads, with
// params, holding the share's launch gate so that no graveyard release
// starts while it may run. f is 0 where its kernels were not loaded (the
// transports' PlanMover loads them): a bug, refused before the driver
// sees it.
func (e *Env) Launch(f driver.Function, grid, threads int, s driver.Stream, params []unsafe.Pointer) error {
	if f == 0 {
		return fmt.Errorf("a2a: launching a kernel that was not loaded: %w", api.ErrNotSupported)
	}
	e.Share.Gate.RLock()
	err := e.Ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, s, params)
	e.Share.Gate.RUnlock()
	if err != nil {
		return api.WrapDriver("launching kernel", err)
	}
	return nil
}
