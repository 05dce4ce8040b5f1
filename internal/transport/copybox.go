package transport

import (
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// CopyBox enqueues on s the copy of box c's shape from src, whose
// geometry is from, to dst, whose geometry is to: one linear copy when
// both are contiguous, else one pitched 3D copy. The copy-engine mode
// and the NCCL transport's packs and unpacks share it.
func CopyBox(ctx *driver.Context, dst driver.DevicePtr, to plan.BoxSide, src driver.DevicePtr, from plan.BoxSide, c plan.Box, s driver.Stream) error {
	if c.Contiguous(to) && c.Contiguous(from) {
		return ctx.MemcpyDtoDAsync(dst, src, uint64(c.Bytes()), s)
	}
	return ctx.MemcpyBoxAsync(
		driver.Box{Ptr: dst, Pitch: uint64(to.Pitch), Height: uint64(to.Height)},
		driver.Box{Ptr: src, Pitch: uint64(from.Pitch), Height: uint64(from.Height)},
		uint64(c.Width), uint64(c.Rows), uint64(c.Depth), s)
}
