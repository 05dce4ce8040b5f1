package exchange

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every rank of a round gets every rank's bytes, in rank order, round
// after round.
func TestLocalRounds(t *testing.T) {
	const world, rounds = 3, 20
	x := NewLocal(world)
	var wg sync.WaitGroup
	errs := make([]error, world)
	for r := range world {
		wg.Go(func() {
			m := x.Rank(r)
			for i := range rounds {
				all, err := m.AllGather(context.Background(), []byte(fmt.Sprintf("%d/%d", r, i)))
				if err != nil {
					errs[r] = err
					return
				}
				for q, b := range all {
					if string(b) != fmt.Sprintf("%d/%d", q, i) {
						errs[r] = fmt.Errorf("round %d: rank %d's bytes are %q", i, q, b)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}

// A rank that quits, or a context that ends, fails the waiting rounds
// instead of leaving them waiting.
func TestLocalQuits(t *testing.T) {
	x := NewLocal(2)
	done := make(chan error, 1)
	go func() {
		_, err := x.Rank(0).AllGather(context.Background(), []byte("a"))
		done <- err
	}()
	time.Sleep(10 * time.Millisecond)
	require.NoError(t, x.Rank(1).Close())
	assert.ErrorIs(t, <-done, ErrClosed)
	_, err := x.Rank(1).AllGather(context.Background(), nil)
	assert.ErrorIs(t, err, ErrClosed)

	y := NewLocal(2)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err = y.Rank(0).AllGather(ctx, nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}
