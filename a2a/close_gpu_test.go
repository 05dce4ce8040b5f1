package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func init() {
	scenarios["close-during-sync"] = workerCloseDuringSync
}

// TestCloseEndsBlockedSync: rank 0 runs an operation rank 1 never joins
// and blocks in Sync; Close from another goroutine must end that Sync at
// once (ErrClosed) and return without waiting for rank 1. Rank 1 then
// runs an operation with the peer already gone: ErrPeerClosed at once,
// nothing written. Both buffer modes.
func TestCloseEndsBlockedSync(t *testing.T) {
	requireGPU(t)
	runGroup(t, "close-during-sync", 2, nil)
}

func workerCloseDuringSync(rk launch.Rank) error {
	return inBufferModes(rk, func(ex *exchange.TCP, comm *a2a.Comm, cs check.Case, single bool) error {
		// Far beyond the test's bounds: only Close can end the wait.
		err := comm.SetTimeout(time.Minute)
		if err == nil {
			err = comm.SetRankTokens(cs.Tokens)
		}
		if err == nil && rk.Rank == 0 {
			err = closeDuringSync(comm, cs, single)
		}
		if err == nil {
			err = rendezvous(ex, "rank 0 closed")
		}
		if err == nil && rk.Rank == 1 {
			err = operateAfterPeerClosed(comm, cs)
		}
		if err != nil {
			if !closeWithin(comm, 10*time.Second) { // a Close of closeDuringSync's may be the stuck one
				fmt.Printf("rank %d: Close still waits after 10 s\n", rk.Rank)
			}
			return err
		}
		return rendezvous(ex, "done")
	})
}

// closeDuringSync is rank 0's part: the blocked Sync and the Close.
func closeDuringSync(comm *a2a.Comm, cs check.Case, single bool) error {
	dev := comm.Device()
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[0], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	if _, err := comm.SendRecvHeads(x); err != nil {
		return err
	}
	synced := make(chan error, 1)
	go func() { synced <- comm.Sync() }()
	select {
	case err := <-synced:
		return fmt.Errorf("Sync returned %v, but rank 1 never ran the operation", err)
	case <-time.After(300 * time.Millisecond):
	}
	start := time.Now()
	if comm.Config().WorldSize != 2 || comm.Blocks() < 1 {
		return errors.New("Config or Blocks wrong while Sync waits")
	}
	if d := time.Since(start); d > 100*time.Millisecond {
		return fmt.Errorf("Config and Blocks took %v while Sync waits", d)
	}
	start = time.Now()
	closed := make(chan error, 1)
	go func() { closed <- comm.Close() }()
	var syncErr, closeErr error
	var syncTook, closeTook time.Duration
	for range 2 {
		select {
		case syncErr = <-synced:
			syncTook = time.Since(start)
		case closeErr = <-closed:
			closeTook = time.Since(start)
		case <-time.After(10 * time.Second):
			return errors.New("Sync or Close still waits 10 s after Close began")
		}
	}
	fmt.Printf("single-buffer=%v: Sync returned after %v: %v; Close after %v: %v\n",
		single, syncTook.Round(time.Microsecond), syncErr, closeTook.Round(time.Microsecond), closeErr)
	want := "at the end barrier"
	if single {
		want = "at the start barrier"
	}
	switch {
	case !errors.Is(syncErr, a2a.ErrClosed) || !strings.Contains(syncErr.Error(), want) || !strings.Contains(syncErr.Error(), "for rank 1"):
		return fmt.Errorf("Sync during Close returned %v, want ErrClosed naming rank 1 %s", syncErr, want)
	case closeErr != nil:
		return fmt.Errorf("Close that ended a blocked Sync: %w", closeErr)
	case syncTook > time.Second || closeTook > time.Second:
		return fmt.Errorf("Sync took %v and Close %v after Close began, want under 1 s", syncTook, closeTook)
	}
	return nil
}

// operateAfterPeerClosed is rank 1's part: an operation issued after rank
// 0 closed fails with ErrPeerClosed, promptly, and Close finds rank 0's
// goodbye.
func operateAfterPeerClosed(comm *a2a.Comm, cs check.Case) error {
	dev := comm.Device()
	x, err := dev.Alloc([4]int{cs.Batch, cs.Tokens[1], cs.Heads, cs.HeadDim}, cs.DType)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	start := time.Now()
	if _, err := comm.SendRecvHeads(x); err != nil {
		return err
	}
	err = comm.Sync()
	took := time.Since(start)
	var pc *a2a.PeerClosedError
	if !errors.As(err, &pc) || pc.Peer != 0 || pc.Phase != a2a.PhaseStart || took > time.Second {
		return fmt.Errorf("operation after the peer closed: %v after %v, want ErrPeerClosed naming rank 0 at the start, under 1 s", err, took)
	}
	start = time.Now()
	err = comm.Close()
	fmt.Printf("rank 1: operation after the peer closed: %v (%v); Close: %v after %v\n",
		pc, took.Round(time.Microsecond), err, time.Since(start).Round(time.Microsecond))
	if err != nil {
		return fmt.Errorf("Close after the peer's goodbye: %w", err)
	}
	return nil
}

// TestSyncContextEndsWait: in a single-process group, rank 0 runs an
// operation rank 1 never joins, under a timeout far beyond the test's;
// SyncContext with a 200 ms context returns the context's error within
// 100 ms of its end, the Comm is broken (the next operation: ErrAborted),
// and the group closes at once. Then, with every rank joining, a context
// that does not end is Sync.
func TestSyncContextEndsWait(t *testing.T) {
	info := requireGPU(t)
	devices := pairDevices(info)
	cs := check.Case{Batch: 1, Tokens: []int{8, 8}, Heads: 4, HeadDim: 64, DType: a2a.BFloat16}
	g := newTestGroup(t, devices, a2a.BFloat16, []check.Case{cs})
	c := g.Comm(0)
	require.NoError(t, c.SetRankTokens(cs.Tokens))
	require.NoError(t, c.SetTimeout(time.Minute))
	x, err := c.Device().Alloc([4]int{1, 8, 4, 64}, a2a.BFloat16)
	require.NoError(t, err)
	defer c.Device().Free(x)
	_, err = c.AllGather(x)
	require.NoError(t, err)
	requireSyncContextEnds(t, c, x, 200*time.Millisecond, 100*time.Millisecond)

	h := newTestGroup(t, devices, a2a.BFloat16, []check.Case{cs})
	require.NoError(t, eachRank(h, func(c *a2a.Comm) error {
		if err := c.SetRankTokens(cs.Tokens); err != nil {
			return err
		}
		y, err := c.Device().Alloc([4]int{1, 8, 4, 64}, a2a.BFloat16)
		if err != nil {
			return err
		}
		defer c.Device().Free(y)
		if _, err := c.AllGather(y); err != nil {
			return err
		}
		return c.SyncContext(context.Background())
	}))
	start := time.Now()
	require.NoError(t, g.Close())
	t.Logf("Close of the aborted group: %v", time.Since(start))
	assert.Less(t, time.Since(start), 2*time.Second)
}
