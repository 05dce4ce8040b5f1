package ipc

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// launch enqueues one kernel with the current args on s, holding the
// share's launch gate so that no graveyard release starts while it may
// run.
func (t *Transport) launch(f driver.Function, grid, threads int, s driver.Stream) error {
	t.env.Share.Gate.RLock()
	err := t.env.Ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, s, t.params[:])
	t.env.Share.Gate.RUnlock()
	if err != nil {
		return api.WrapDriver("launching kernel", err)
	}
	return nil
}
