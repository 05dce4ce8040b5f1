package exchange

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Tests of strangers that try to keep a group from forming by holding
// rank 0's connection slots. Each runs squatRounds rounds of a group of 4
// under the attack; every round must form within squatBound.
const (
	squatRounds = 3
	squatBound  = 2 * time.Second
	squatWorld  = 4
)

// attack starts strangers against addr that stop when ctx ends, and
// returns how many connections they have made so far.
type attack func(ctx context.Context, wg *sync.WaitGroup, addr string) (dials func() int64)

// holdUntilClosed reads c until rank 0 closes it, or ctx ends.
func holdUntilClosed(ctx context.Context, c net.Conn) {
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	_, _ = io.Copy(io.Discard, c)
	stop()
	_ = c.Close()
}

// squatters is n goroutines that each dial, read until rank 0 closes the
// connection, and dial again at once.
func squatters(n int) attack {
	return func(ctx context.Context, wg *sync.WaitGroup, addr string) func() int64 {
		var dials atomic.Int64
		d := net.Dialer{Timeout: time.Second}
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						continue
					}
					dials.Add(1)
					holdUntilClosed(ctx, c)
				}
			})
		}
		return dials.Load
	}
}

// halfFrames is n connections, made by dialers goroutines as fast as they
// can, that each send the first 10 bytes of a hello's header and stall
// until rank 0 closes them.
func halfFrames(n, dialers int) attack {
	return func(ctx context.Context, wg *sync.WaitGroup, addr string) func() int64 {
		var next, dials atomic.Int64
		d := net.Dialer{Timeout: time.Second}
		for range dialers {
			wg.Go(func() {
				for ctx.Err() == nil && next.Add(1) <= int64(n) {
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						continue
					}
					dials.Add(1)
					_, _ = c.Write(header(kindHello, 1, squatWorld, nonceSize)[:10])
					wg.Go(func() { holdUntilClosed(ctx, c) })
				}
			})
		}
		return dials.Load
	}
}

// peakSampler records the process's peak goroutine and descriptor counts
// every 2 ms until stopped.
type peakSampler struct {
	goroutines, fds atomic.Int64
	stop            chan struct{}
	done            chan struct{}
}

func startSampler(t *testing.T) *peakSampler {
	p := &peakSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			p.goroutines.Store(max(p.goroutines.Load(), int64(runtime.NumGoroutine())))
			p.fds.Store(max(p.fds.Load(), int64(countFDs(t))))
			select {
			case <-p.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return p
}

func (p *peakSampler) end() {
	close(p.stop)
	<-p.done
}

// underAttack runs squatRounds rounds of a group of squatWorld ranks while
// strangers run attack (restarted for each round if fresh), each round
// starting once the strangers have made maxConns connections. Every round
// must form within squatBound; rank 0 never holds more than MaxConns
// connections; the process's goroutines and descriptors stay within what
// the strangers (at most maxStrangers at once), the group and rank 0's
// table account for, and return to their baseline (checkLeaks).
func underAttack(t *testing.T, start attack, fresh bool, maxStrangers int) {
	checkLeaks(t)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(4*maxStrangers+256) {
		t.Skipf("file descriptor limit %d is too low", lim.Cur)
	}
	xs := newGroupWith(t, squatWorld, nil)
	maxConns := xs[0].cfg.MaxConns
	g0, f0 := runtime.NumGoroutine(), countFDs(t)
	peaks := startSampler(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var dials func() int64
	for round := range squatRounds {
		if round == 0 || fresh {
			dials = start(ctx, &wg, xs[0].Addr())
		}
		for first := dials(); dials()-first < int64(maxConns) && (round == 0 || fresh); {
			time.Sleep(time.Millisecond)
		}
		took, st := squatRound(t, xs, round)
		t.Logf("round %d formed in %v; rank 0: %+v; strangers' connections so far: %d", round, took.Round(100*time.Microsecond), st, dials())
		assert.Less(t, took, squatBound, "round %d", round)
		assert.LessOrEqual(t, st.peakConns, maxConns, "round %d", round)
	}
	cancel()
	wg.Wait()
	peaks.end()
	// Strangers: a goroutine and a descriptor each; the group: P
	// AllGathers and P-1 connections from the peers' side; rank 0: its
	// accept loop, a descriptor per open connection and a goroutine per
	// open or evicted connection (2*MaxConns at most); the sampler and
	// runRound's goroutines.
	gBound := g0 + maxStrangers + 2*squatWorld + 2*maxConns + 8
	fBound := f0 + maxStrangers + squatWorld + maxConns + 8
	t.Logf("process peaks: %d goroutines (baseline %d, bound %d), %d descriptors (baseline %d, bound %d)",
		peaks.goroutines.Load(), g0, gBound, peaks.fds.Load(), f0, fBound)
	assert.LessOrEqual(t, int(peaks.goroutines.Load()), gBound)
	assert.LessOrEqual(t, int(peaks.fds.Load()), fBound)
}

// squatRound runs one round of xs and returns how long it took and rank
// 0's counts; it fails the test if any rank fails.
func squatRound(t *testing.T, xs []*TCP, round int) (time.Duration, roundStats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*squatBound)
	defer cancel()
	payloads := make([][]byte, len(xs))
	for r := range payloads {
		payloads[r] = []byte(fmt.Sprintf("rank %d round %d", r, round))
	}
	start := time.Now()
	res, errs := runRound(ctx, xs, payloads, false)
	took := time.Since(start)
	for r := range xs {
		require.NoError(t, errs[r], "rank %d, round %d, after %v", r, round, took)
		requireBlobs(t, payloads, res[r])
	}
	return took, lastStats(xs[0])
}

// TestSquatters: 64 strangers that dial rank 0, read until it closes the
// connection and dial again at once cannot keep a group of 4 from forming
// (the code before eviction: not formed in 30 s; 506,326 connections
// refused).
func TestSquatters(t *testing.T) {
	const n = 64
	underAttack(t, squatters(n), false, n)
}

// TestStalledHalfFrames: 1,000 connections that each send part of a frame
// header and stall, as fast as 8 goroutines can make them, cannot keep a
// group of 4 from forming (the code before eviction: 9.9 s, the hello
// timeout).
func TestStalledHalfFrames(t *testing.T) {
	underAttack(t, halfFrames(1000, 8), true, 1000)
}
