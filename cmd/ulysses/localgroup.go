package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/ulysses-go/ulysses/a2a"
)

// localExchange is the exchanger of a group whose ranks are goroutines of
// this process (bench --single-process): each AllGather round waits until
// every rank has deposited its bytes, then hands all of them to each.
type localExchange struct {
	mu      sync.Mutex
	changed *sync.Cond
	world   int
	round   uint64   // rounds completed
	slots   [][]byte // this round's deposits, by rank
	filled  int
	last    [][]byte // the previous round's result
	closed  bool
}

func newLocalExchange(world int) *localExchange {
	x := &localExchange{world: world, slots: make([][]byte, world)}
	x.changed = sync.NewCond(&x.mu)
	return x
}

// errLocalClosed ends the rounds of a group one of whose ranks has quit.
var errLocalClosed = errors.New("a rank of the single-process group has quit")

// localMember is one rank's side of a localExchange.
type localMember struct {
	x    *localExchange
	rank int
}

// AllGather deposits local and returns every rank's deposit of the round.
// A context that ends first, or a rank that quits, ends the wait (the
// round is then broken for every rank).
func (m localMember) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	x := m.x
	stop := context.AfterFunc(ctx, func() { m.Close() })
	defer stop()
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, errLocalClosed
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
		return nil, errLocalClosed
	}
	return append([][]byte(nil), x.last...), nil
}

// Close quits the group: every rank's pending and later rounds fail.
func (m localMember) Close() error {
	m.x.mu.Lock()
	m.x.closed = true
	m.x.changed.Broadcast()
	m.x.mu.Unlock()
	return nil
}

// benchInProcess runs benchRun for every rank as a goroutine of this
// process, rank r on devices[r], and returns rank 0's results. A rank
// that fails quits the group, so the others' rounds fail too.
func benchInProcess(o *benchOpts, plan benchPlan, devices []int, stderr io.Writer) (*benchResults, error) {
	x := newLocalExchange(len(devices))
	results := make([]*benchResults, len(devices))
	errs := make([]error, len(devices))
	var wg sync.WaitGroup
	for r := range devices {
		m := &member{rank: r, world: len(devices), device: a2a.DeviceOrdinal(devices[r]), ex: localMember{x: x, rank: r}}
		wg.Go(func() {
			results[r], errs[r] = benchRun(m, o, plan, stderr)
			if errs[r] != nil {
				errs[r] = fmt.Errorf("rank %d: %w", r, errs[r])
				m.ex.Close()
			}
		})
	}
	wg.Wait()
	return results[0], errors.Join(errs...)
}
