package exchange

import (
	"bytes"
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

// attack is a kind of stranger: start launches them against addr on run.
type attack struct {
	start func(run *attackRun, addr string)
	// goroutines and fds bound what the strangers hold at once.
	goroutines, fds int
}

// attackRun is one run of an attack: its goroutines, the connections
// they hold, and a count of the connections made.
type attackRun struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	dials  atomic.Int64

	mu     sync.Mutex
	held   map[net.Conn]bool
	closed bool
}

// startAttack runs a against addr until stop.
func startAttack(a attack, addr string) *attackRun {
	run := &attackRun{held: map[net.Conn]bool{}}
	run.ctx, run.cancel = context.WithCancel(context.Background())
	a.start(run, addr)
	return run
}

// dial connects to addr and counts it. It has no timeout: on loopback a
// dial ends at once, and a context would cost a goroutine per dial.
func (run *attackRun) dial(addr string) (net.Conn, bool) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, false
	}
	run.dials.Add(1)
	return c, true
}

// hold runs speak on c (if not nil), then reads c until rank 0 closes it
// or the run stops, then closes it. Rank 0 may not answer c for a while
// (it waits in the listener's backlog while rank 0 waits for room, or for
// good once the rounds are over), so c is registered first, for stop.
func (run *attackRun) hold(c net.Conn, speak func(net.Conn)) {
	run.mu.Lock()
	if run.closed {
		run.mu.Unlock()
		_ = c.Close()
		return
	}
	run.held[c] = true
	run.mu.Unlock()
	if speak != nil {
		speak(c)
	}
	_, _ = io.Copy(io.Discard, c)
	run.mu.Lock()
	delete(run.held, c)
	run.mu.Unlock()
	_ = c.Close()
}

// stop ends the run: no more dials, every held connection closed, every
// goroutine gone.
func (run *attackRun) stop() {
	run.cancel()
	run.mu.Lock()
	run.closed = true
	for c := range run.held {
		_ = c.Close()
	}
	run.mu.Unlock()
	run.wg.Wait()
}

// squatters is n goroutines that each dial, read until rank 0 closes the
// connection, and dial again at once.
func squatters(n int) attack { return redialling(n, nil) }

// redialling is n goroutines that each dial, run speak on the connection
// (nothing if nil), read until rank 0 closes it, and dial again at once.
func redialling(n int, speak func(net.Conn)) attack {
	return attack{goroutines: n, fds: n, start: func(run *attackRun, addr string) {
		for range n {
			run.wg.Go(func() {
				for run.ctx.Err() == nil {
					if c, ok := run.dial(addr); ok {
						run.hold(c, speak)
					}
				}
			})
		}
	}}
}

// halfFrames is n connections, made by dialers goroutines as fast as they
// can, that each send the first 10 bytes of a hello's header and stall
// until rank 0 closes them.
func halfFrames(n, dialers int) attack {
	return attack{goroutines: n + dialers, fds: n + dialers, start: func(run *attackRun, addr string) {
		var next atomic.Int64
		for range dialers {
			run.wg.Go(func() {
				for run.ctx.Err() == nil && next.Add(1) <= int64(n) {
					if c, ok := run.dial(addr); ok {
						_, _ = c.Write(header(kindHello, 1, squatWorld, nonceSize)[:10])
						run.wg.Go(func() { run.hold(c, nil) })
					}
				}
			})
		}
	}}
}

// peakSampler records the process's peak goroutine and descriptor counts
// every 2 ms until stopped.
type peakSampler struct {
	goroutines, fds atomic.Int64
	confirmAbove    int // goroutine counts over this are counted again, exactly
	stop            chan struct{}
	done            chan struct{}
	stopOnce        sync.Once
}

// startSampler starts a sampler, which stops when the test ends if not
// before. A goroutine count over confirmAbove (the test's bound) is
// counted again from a dump of every goroutine: the runtime's count can
// run hundreds over while the collector frees the stacks of goroutines
// that exited (those of an earlier test included).
func startSampler(t *testing.T, confirmAbove int) *peakSampler {
	p := &peakSampler{confirmAbove: confirmAbove, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(p.end)
	go func() {
		defer close(p.done)
		for {
			p.sample(t)
			select {
			case <-p.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return p
}

// sample takes one sample now.
func (p *peakSampler) sample(t *testing.T) {
	n := runtime.NumGoroutine()
	if n > p.confirmAbove {
		n = countGoroutines()
	}
	p.goroutines.Store(max(p.goroutines.Load(), int64(n)))
	p.fds.Store(max(p.fds.Load(), int64(countFDs(t))))
}

// end stops the sampler; it is idempotent.
func (p *peakSampler) end() {
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
}

// countGoroutines counts the goroutines in a dump of all of them (which
// stops the world while it is taken).
func countGoroutines() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return bytes.Count(buf[:n], []byte("\n\ngoroutine ")) + 1
		}
		buf = make([]byte, 2*len(buf))
	}
}

// siege is how underAttack runs an attack: rounds rounds, each of which
// must form within bound; one run of the attack for all rounds or, if
// fresh, a run of its own for each round, stopped after it; the group's
// config adjusted by cfg (nil: the tests' usual one).
type siege struct {
	rounds int
	bound  time.Duration
	fresh  bool
	cfg    func(*TCPConfig)
}

// squatSiege is the siege of the squatting tests.
var squatSiege = siege{rounds: squatRounds, bound: squatBound}

// underAttack runs s's rounds of a group of squatWorld ranks under attack
// a and returns how long each took to form. Each round starts once the
// run has made MaxConns connections and must form within s.bound; rank 0
// never holds more than MaxConns connections; the process's goroutines
// and descriptors stay within what the strangers, the group and rank 0's
// table account for, and return to their baseline (checkLeaks).
func underAttack(t *testing.T, a attack, s siege) []time.Duration {
	checkLeaks(t)
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur < uint64(2*a.fds+256) {
		t.Skipf("file descriptor limit %d is too low", lim.Cur)
	}
	xs := newGroupWith(t, squatWorld, s.cfg)
	maxConns := xs[0].cfg.MaxConns
	g0, f0 := runtime.NumGoroutine(), countFDs(t)
	// The group: P AllGathers, each with a goroutine while it dials, and
	// P-1 connections from the peers' side; rank 0: its accept loop, a
	// descriptor per open connection and one for the newcomer it holds
	// while it waits for room, and a goroutine per open or evicted
	// connection (2*MaxConns at most); the sampler.
	gBound := g0 + a.goroutines + 2*squatWorld + 2*maxConns + 8
	fBound := f0 + a.fds + squatWorld + maxConns + 1 + 8
	peaks := startSampler(t, gBound)
	var run *attackRun
	var took []time.Duration
	for round := range s.rounds {
		if round == 0 || s.fresh {
			run = startAttack(a, xs[0].Addr())
			for run.dials.Load() < int64(maxConns) {
				time.Sleep(time.Millisecond)
			}
		}
		d, st := squatRound(t, xs, round, 5*s.bound)
		took = append(took, d)
		t.Logf("round %d formed in %v; rank 0: %+v; peers' connections turned away: %d; strangers' connections so far: %d",
			round, d.Round(100*time.Microsecond), st, turnedAway(xs[1:]), run.dials.Load())
		assert.Less(t, d, s.bound, "round %d", round)
		assert.LessOrEqual(t, st.peakConns, maxConns, "round %d", round)
		if s.fresh || round == s.rounds-1 {
			run.stop()
		}
	}
	peaks.end()
	t.Logf("process peaks: %d goroutines (baseline %d, bound %d), %d descriptors (baseline %d, bound %d)",
		peaks.goroutines.Load(), g0, gBound, peaks.fds.Load(), f0, fBound)
	assert.LessOrEqual(t, int(peaks.goroutines.Load()), gBound)
	assert.LessOrEqual(t, int(peaks.fds.Load()), fBound)
	return took
}

// turnedAway is how many connections of peers rank 0 turned away in
// their last round.
func turnedAway(peers []*TCP) int {
	n := 0
	for _, x := range peers {
		n += lastStats(x).turnedAway
	}
	return n
}

// squatRound runs one round of xs within limit and returns how long it
// took and rank 0's counts; it fails the test if any rank fails.
func squatRound(t *testing.T, xs []*TCP, round int, limit time.Duration) (time.Duration, roundStats) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	payloads := make([][]byte, len(xs))
	for r := range payloads {
		payloads[r] = []byte(fmt.Sprintf("rank %d round %d", r, round))
	}
	start := time.Now()
	res, errs := runRound(ctx, xs, payloads, false)
	took := time.Since(start)
	for r := range xs {
		require.NoError(t, errs[r], "rank %d, round %d, after %v (every rank's error: %v)", r, round, took, errs)
		requireBlobs(t, payloads, res[r])
	}
	return took, lastStats(xs[0])
}

// TestSquatters: 64 strangers that dial rank 0, read until it closes the
// connection and dial again at once cannot keep a group of 4 from forming
// (the code before eviction: not formed in 30 s; 506,326 connections
// refused).
func TestSquatters(t *testing.T) {
	underAttack(t, squatters(64), squatSiege)
}

// TestStalledHalfFrames: 1,000 connections that each send part of a frame
// header and stall, as fast as 8 goroutines can make them, cannot keep a
// group of 4 from forming (the code before eviction: 9.9 s, the hello
// timeout).
func TestStalledHalfFrames(t *testing.T) {
	s := squatSiege
	s.fresh = true
	underAttack(t, halfFrames(1000, 8), s)
}
