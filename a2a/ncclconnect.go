package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/transport/ipc"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/nccl"
	tp "github.com/ulysses-go/ulysses/internal/transport"
)

// newTransport builds the transport of kind for this Comm, unconnected.
// NCCL needs rank 0's id, and NCCL (ErrNoNCCL where it cannot be loaded).
func (c *Comm) newTransport(kind Transport, id *NCCLID) (tp.Transport, error) {
	env := &tp.Env{Driver: c.dev.drv, Ctx: c.dev.ctx, Share: c.share, SMs: c.dev.info.SMs, BusID: c.dev.info.BusID,
		Helpers: c.dev.copies, Stream: c.stream, Buf: c.buf, Layout: c.layout, Rank: c.cfg.Rank, World: c.cfg.WorldSize,
		DType: api.DType(c.cfg.DType), Mover: api.Mover(c.cfg.Mover), Wire: api.Wire(c.cfg.Wire), Timeout: c.cfg.timeout(), Blocks: c.blocks}
	if kind == TransportIPC {
		return ipc.New(env)
	}
	if id == nil {
		return nil, fmt.Errorf("a2a: rank %d's group uses NCCL: pass rank 0's NewNCCLID to ConnectNCCL, or use Join: %w", c.cfg.Rank, ErrConfig)
	}
	lib, err := loadNCCL()
	if err != nil {
		return nil, api.WrapNCCL("loading NCCL", err)
	}
	return nccltransport.New(env, lib, nccl.UniqueID(*id)), nil
}
