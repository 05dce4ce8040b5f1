package exchange

import (
	"context"
	"fmt"
	"sync"
)

// Local all-gathers among ranks that are goroutines of one process (a
// service driving every GPU, a single-process bench, tests): each round
// waits until every rank has deposited its bytes, then hands all of them
// to each. Nothing leaves the process, so there is nothing to
// authenticate. A round costs a copy of every rank's bytes per rank.
type Local struct {
	mu      sync.Mutex
	changed *sync.Cond
	world   int
	round   uint64   // rounds completed
	slots   [][]byte // this round's deposits, by rank
	filled  int
	last    [][]byte // the previous round's result
	closed  bool
}

// NewLocal makes the exchanger of a group of world ranks in this process.
func NewLocal(world int) *Local {
	x := &Local{world: world, slots: make([][]byte, world)}
	x.changed = sync.NewCond(&x.mu)
	return x
}

// Rank is rank r's side of x, an a2a.Exchanger.
func (x *Local) Rank(r int) LocalRank { return LocalRank{x: x, rank: r} }

// LocalRank is one rank's side of a Local exchanger.
type LocalRank struct {
	x    *Local
	rank int
}

// made reports whether m is a rank of a Local that NewLocal made. On one
// that is not (the zero LocalRank, or a rank of a nil or zero Local),
// AllGather returns an error matching ErrClosed and Close nil.
func (m LocalRank) made() bool { return m.x != nil && m.x.changed != nil }

// AllGather deposits local and returns every rank's deposit of the round,
// in rank order. A context that ends first, or a rank that closes, ends
// the wait (the round is then broken for every rank: ErrClosed). A rank
// outside the group's world (Local.Rank of a bad r) gets ErrRank.
func (m LocalRank) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	if !m.made() {
		return nil, fmt.Errorf("exchange: AllGather on a LocalRank that Local.Rank of a NewLocal did not make: %w", ErrClosed)
	}
	x := m.x
	if m.rank < 0 || m.rank >= x.world {
		return nil, fmt.Errorf("exchange: rank %d of a Local group of %d: %w", m.rank, x.world, ErrRank)
	}
	stop := context.AfterFunc(ctx, func() { m.Close() })
	defer stop()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, fmt.Errorf("exchange: rank %d: a rank of the group has quit: %w", m.rank, ErrClosed)
	}
	round := x.round
	x.slots[m.rank] = append([]byte(nil), local...)
	if x.filled++; x.filled == x.world {
		x.last, x.slots, x.filled = x.slots, make([][]byte, x.world), 0
		x.round++
		x.changed.Broadcast()
	}
	for x.round == round && !x.closed {
		x.changed.Wait()
	}
	if x.round == round {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("exchange: rank %d: a rank of the group has quit: %w", m.rank, ErrClosed)
	}
	return append([][]byte(nil), x.last...), nil
}

// Close quits the group: every rank's pending and later rounds fail.
func (m LocalRank) Close() error {
	if !m.made() {
		return nil
	}
	m.x.mu.Lock()
	m.x.closed = true
	m.x.changed.Broadcast()
	m.x.mu.Unlock()
	return nil
}
