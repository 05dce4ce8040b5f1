package a2a

import (
	"context"
	"errors"
	"fmt"
)

// Exchanger all-gathers small byte strings across the ranks of a group:
// AllGather returns every rank's bytes indexed by rank, the caller's own
// included, the same on every rank. a2a/exchange has a TCP implementation;
// any control plane (gRPC, etcd, torch.distributed) can provide one.
type Exchanger interface {
	// AllGather sends local to every rank and returns every rank's
	// bytes, by rank, once each has sent its own; ctx bounds the wait.
	AllGather(ctx context.Context, local []byte) ([][]byte, error)
}

// Join is New, an exchange of handles, and Connect. A group that uses NCCL
// (TransportNCCL, or TransportAuto's choice) exchanges a second time:
// rank 0's NCCL unique id, then ConnectNCCL. On failure nothing is left
// allocated.
func Join(ctx context.Context, cfg Config, ex Exchanger) (*Comm, error) {
	if ex == nil {
		return nil, fmt.Errorf("a2a: Join needs an Exchanger: %w", ErrConfig)
	}
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	handles, err := ex.AllGather(ctx, c.Handle())
	if err == nil {
		err = c.joinConnect(ctx, ex, handles)
	} else {
		err = fmt.Errorf("a2a: exchanging handles: %w", err)
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// joinConnect connects with handles, and for a group that uses NCCL
// first all-gathers rank 0's unique id (the others send nothing; rank 0
// sends nothing when it cannot make one, so that no rank waits for it).
func (c *Comm) joinConnect(ctx context.Context, ex Exchanger, handles [][]byte) error {
	needs, err := c.NeedsNCCL(handles)
	if err != nil || !needs {
		return c.Connect(handles)
	}
	var mine []byte
	var idErr error
	if c.cfg.Rank == 0 {
		id, err := NewNCCLID()
		if err == nil {
			mine = id[:]
		}
		idErr = err
	}
	ids, err := ex.AllGather(ctx, mine)
	switch {
	case idErr != nil:
		return errors.Join(idErr, err)
	case err != nil:
		return fmt.Errorf("a2a: exchanging the NCCL id: %w", err)
	case len(ids) < 1 || len(ids[0]) != len(NCCLID{}):
		return fmt.Errorf("a2a: rank 0 sent no NCCL id (it could not make one): %w", ErrNoNCCL)
	}
	return c.ConnectNCCL(handles, NCCLID(ids[0]))
}
