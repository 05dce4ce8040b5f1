package a2a

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/nccl"
	tp "github.com/ulysses-go/ulysses/internal/transport"

	// The transports a Comm connects over: each registers its factory
	// with internal/transport when imported, as NCCL's ncclTransports[]
	// lists its own.
	_ "github.com/ulysses-go/ulysses/internal/transport/ipc"
	_ "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// newTransport builds the transport of kind for this Comm, unconnected,
// with the factory kind registered: from the Comm's Env, with rank 0's
// NCCL id (nil from Connect) and the package's NCCL loader for the
// transports that need them.
func (c *Comm) newTransport(kind Transport, id *NCCLID) (tp.Transport, error) {
	env := &tp.Env{Driver: c.dev.drv, Ctx: c.dev.ctx, Share: c.share, SMs: c.dev.info.SMs, BusID: c.dev.info.BusID,
		Helpers: c.dev.copies, Stream: c.stream, Buf: c.buf, Layout: c.layout, Rank: c.cfg.Rank, World: c.cfg.WorldSize,
		DType: api.DType(c.cfg.DType), Mover: api.Mover(c.cfg.Mover), Wire: api.Wire(c.cfg.Wire), Timeout: c.cfg.timeout(), Blocks: c.blocks}
	return tp.New(api.Transport(kind), env, tp.Options{NCCLID: (*nccl.UniqueID)(id), LoadNCCL: loadNCCL})
}
