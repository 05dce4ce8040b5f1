//go:build linux

package fdshare

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/testutil"
)

// The attacks of a process of the owner's user that does not know the
// key, and of a process of another user. Each is bounded in count and
// time, and dials only this machine's sockets.

// ownerTimeout is the connection timeout a2a gives a Server (Config's
// default Timeout).
const ownerTimeout = 10 * time.Second

// TestFetchUnderStallers: 16, 64 and 256 connections of the owner's user
// that never prove the key, held or dialling again, silent or stalled
// after their hello: every honest fetch of 15 succeeds within a second,
// the owner evicts to make room where the crowd is larger than its
// table, and nothing (descriptor, goroutine) is left once the attack and
// the owner have stopped.
func TestFetchUnderStallers(t *testing.T) {
	for _, n := range []int{16, 64, 256} {
		for _, k := range []testutil.Staller{testutil.HeldSilent, testutil.RedialSilent, testutil.RedialHello} {
			t.Run(fmt.Sprintf("%d %v", n, k), func(t *testing.T) {
				fdsBefore, goBefore := testutil.OpenFDs(t), runtime.NumGoroutine()
				p := newPipeExport(t)
				s := serve(t, key(20), ownerTimeout, p)
				ctx, cancel := context.WithCancel(context.Background())
				dials := testutil.Crowd(ctx, SocketPath(s.Dir(), key(20)), n, k, Hello())
				time.Sleep(100 * time.Millisecond) // the crowd is in
				times := honestFetches(t, s, 15, time.Second*testutil.Slowdown())
				cancel()
				made := dials()
				st := s.Stats()
				t.Logf("fetch median %v, slowest %v; %d attacking connections, owner evicted %d, waited for room %d times",
					times[len(times)/2], times[len(times)-1], made, st.Evicted, st.Waits)
				require.GreaterOrEqual(t, made, min(n, MaxConns), "the attack ran")
				if n > MaxConns {
					require.Positive(t, st.Evicted, "a crowd larger than the table is evicted")
				}
				require.NoError(t, s.Close())
				p.close()
				testutil.RequireFDs(t, fdsBefore)
				requireGoroutines(t, goBefore)
			})
		}
	}
}

// honestFetches fetches n times from s one after another, requiring each
// to succeed within limit, and returns their times, sorted.
func honestFetches(t *testing.T, s *Server, n int, limit time.Duration) []time.Duration {
	t.Helper()
	var times []time.Duration
	for i := range n {
		start := time.Now()
		fd, _, err := fetch(s, key(20), ownerTimeout)
		took := time.Since(start)
		require.NoError(t, err, "fetch %d", i)
		require.NoError(t, syscall.Close(fd))
		require.Less(t, took, limit, "fetch %d", i)
		times = append(times, took)
	}
	slices.Sort(times)
	return times
}

// requireGoroutines fails t unless the goroutines settle back to before
// within a second.
func requireGoroutines(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left")
}

// Environment of the stranger's test.
const (
	envStrangerPath  = "ULYSSES_TEST_STRANGER_PATH"
	envStrangerConns = "ULYSSES_TEST_STRANGER_CONNS"
)

// TestFetchUnderStrangerFlood: a process of another user floods the
// owner's socket with connections it opens and closes at once, from 8
// and from 32 goroutines, and tries to hold 64: it reaches none (the
// directory is closed to it), and 100 honest fetches meanwhile all
// succeed, the median within 50 ms.
func TestFetchUnderStrangerFlood(t *testing.T) {
	for _, conns := range []int{8, 32} {
		t.Run(strconv.Itoa(conns), func(t *testing.T) {
			p := newPipeExport(t)
			s := serve(t, key(20), ownerTimeout, p)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st := testutil.StartStranger(t, ctx, "TestStrangerFlooder",
				envStrangerPath+"="+SocketPath(s.Dir(), key(20)), envStrangerConns+"="+strconv.Itoa(conns))
			t.Log(st.WaitLine(t, "flooding"))
			times := honestFetches(t, s, 100, ownerTimeout)
			out := st.Stop(t)
			t.Logf("fetch median %v, slowest %v", times[len(times)/2], times[len(times)-1])
			require.Less(t, times[len(times)/2], 50*time.Millisecond*testutil.Slowdown(), "median fetch")
			require.Contains(t, out, "connected 0 times", "the stranger reached the socket:\n%s", out)
			require.Zero(t, s.Stats().Strangers, "no stranger's connection was even accepted")
		})
	}
}

// TestStrangerFlooder is the stranger of TestFetchUnderStrangerFlood, run
// as another user: it tries to hold 64 connections to the socket, then
// connects and closes from ULYSSES_TEST_STRANGER_CONNS goroutines until its
// standard input closes, and says how often it got in and what refused it.
func TestStrangerFlooder(t *testing.T) {
	testutil.SkipUnlessChild(t)
	path := os.Getenv(envStrangerPath)
	conns, err := strconv.Atoi(os.Getenv(envStrangerConns))
	require.NoError(t, err)
	var connected, refused atomic.Int64
	var lastErr atomic.Value
	try := func() net.Conn {
		c, err := net.Dial("unix", path)
		if err != nil {
			refused.Add(1)
			lastErr.Store(errors.Unwrap(err))
			return nil
		}
		connected.Add(1)
		return c
	}
	for range 64 {
		if c := try(); c != nil {
			defer c.Close()
		}
	}
	stop := testutil.UntilStdinCloses()
	var wg sync.WaitGroup
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if c := try(); c != nil {
					c.Close()
				}
			}
		}()
	}
	fmt.Printf("flooding as uid %d from %d goroutines\n", os.Geteuid(), conns)
	wg.Wait()
	fmt.Printf("connected %d times, refused %d times (%v)\n", connected.Load(), refused.Load(), lastErr.Load())
	require.Positive(t, refused.Load()+connected.Load(), "the flood ran")
}
