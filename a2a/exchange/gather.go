package exchange

import (
	"context"
	"fmt"
)

// AllGather contributes local and returns the WorldSize blobs of this round,
// indexed by rank, identical on every rank. The returned slices are fresh
// non-nil copies. Calls form consecutive rounds. Errors wrap the matching
// sentinel, or ctx.Err() when ctx ends first. A round succeeds on every
// rank or fails on every rank, but for one case: a peer that loses its
// connection after acknowledging the result, before rank 0's commit
// reaches it, fails while the others succeed (see doc.go). A round costs
// one TCP connection per peer, three round trips on it, and, on rank 0,
// memory for all the blobs (at most WorldSize*MaxPayload bytes plus
// framing) and for at most TCPConfig.MaxConns connections; with WorldSize
// 1 it does no I/O.
func (x *TCP) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	if !x.made() {
		return nil, unmadeTCP("AllGather")
	}
	x.round.Lock()
	defer x.round.Unlock()
	r := x.cfg.Rank
	if x.isClosed() {
		return nil, fmt.Errorf("exchange: rank %d: AllGather after Close: %w", r, ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exchange: rank %d: AllGather not started: %w", r, err)
	}
	if len(local) > x.cfg.MaxPayload {
		return nil, fmt.Errorf("exchange: rank %d: local blob is %d bytes, MaxPayload is %d: %w",
			r, len(local), x.cfg.MaxPayload, ErrFrameTooLarge)
	}
	if x.cfg.WorldSize == 1 {
		return [][]byte{clone(local)}, nil
	}
	if r == 0 {
		return x.gatherRoot(ctx, local)
	}
	return x.gatherPeer(ctx, local)
}
