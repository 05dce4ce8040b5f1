package nccl

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/transport"
)

func init() { transport.Register(api.TransportNCCL, open) }

// open is the factory of TransportNCCL: New with rank 0's unique id, which
// the group needs (ErrConfig without it), and NCCL, which it loads
// (ErrNoNCCL where it cannot).
func open(env *transport.Env, opts transport.Options) (transport.Transport, error) {
	if opts.NCCLID == nil {
		return nil, fmt.Errorf("a2a: rank %d's group uses NCCL: pass rank 0's NewNCCLID to ConnectNCCL, or use Join: %w", env.Rank, api.ErrConfig)
	}
	lib, err := opts.LoadNCCL()
	if err != nil {
		return nil, api.WrapNCCL("loading NCCL", err)
	}
	return New(env, lib, *opts.NCCLID), nil
}
