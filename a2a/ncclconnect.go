package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// newTransport builds the transport of kind for this Comm, unconnected.
// NCCL needs rank 0's id, and NCCL (ErrNoNCCL where it cannot be loaded).
func (c *Comm) newTransport(kind Transport, id *NCCLID) (transport, error) {
	if kind == TransportIPC {
		return newSMTransport(c.dev, c.share, c.stream, c.buf, c.layout, c.cfg, c.blocks)
	}
	if id == nil {
		return nil, fmt.Errorf("a2a: rank %d's group uses NCCL: pass rank 0's NewNCCLID to ConnectNCCL, or use Join: %w", c.cfg.Rank, ErrConfig)
	}
	lib, err := loadNCCL()
	if err != nil {
		return nil, api.WrapNCCL("loading NCCL", err)
	}
	return newNCCLTransport(c, lib, *id), nil
}
