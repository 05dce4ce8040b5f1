package ipc

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// launch enqueues one kernel with the current args on s, holding the
// share's launch gate so that no graveyard release starts while it may
// run. f is 0 where its kernels were not loaded (PlanMover loads them): a
// bug, refused before the driver sees it.
func (t *Transport) launch(f driver.Function, grid, threads int, s driver.Stream) error {
	if f == 0 {
		return fmt.Errorf("a2a: launching a kernel that was not loaded: %w", api.ErrNotSupported)
	}
	t.env.Share.Gate.RLock()
	err := t.env.Ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, s, t.params[:])
	t.env.Share.Gate.RUnlock()
	if err != nil {
		return api.WrapDriver("launching kernel", err)
	}
	return nil
}
