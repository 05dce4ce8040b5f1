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
	AllGather(ctx context.Context, local []byte) ([][]byte, error)
}

// Join is New, an exchange of handles, and Connect. On failure nothing is
// left allocated.
func Join(ctx context.Context, cfg Config, ex Exchanger) (*Comm, error) {
	c, err := New(cfg)
	if err != nil {
		return nil, err
	}
	handles, err := ex.AllGather(ctx, c.Handle())
	if err == nil {
		err = c.Connect(handles)
	} else {
		err = fmt.Errorf("a2a: exchanging handles: %w", err)
	}
	if err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}
