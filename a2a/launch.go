package a2a

import "github.com/ulysses-go/ulysses/internal/driver"

// launch enqueues one kernel with the current args, holding the share's
// launch gate so that no graveyard release starts while it may run.
func (c *Comm) launch(f driver.Function, grid, threads int) error {
	c.share.gate.RLock()
	err := c.dev.ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, c.stream, c.params[:])
	c.share.gate.RUnlock()
	if err != nil {
		return c.fail(wrapDriver("launching kernel", err))
	}
	return nil
}

// halfOffset is where operation number epoch writes its output.
func (c *Comm) halfOffset(epoch uint64) int64 {
	return int64(epoch&1) * c.layout.halfBytes
}
