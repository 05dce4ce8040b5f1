package ipc

import "github.com/ulysses-go/ulysses/internal/driver"

// launch enqueues one kernel with the current args on s (Env.Launch).
func (t *Transport) launch(f driver.Function, grid, threads int, s driver.Stream) error {
	return t.env.Launch(f, grid, threads, s, t.params[:])
}
