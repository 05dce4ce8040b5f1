package exchange

import (
	"context"
	"errors"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// greetedStranger connects to addr without the secret, sends a hello and
// reads the challenge: rank 0 then counts it as greeted. It is closed when
// the test ends.
func greetedStranger(t *testing.T, addr string) *client {
	t.Helper()
	cl, err := dialClient(addr, 1, 2, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	require.NoError(t, cl.c.SetDeadline(time.Now().Add(5*time.Second)))
	_, err = cl.challenge()
	require.NoError(t, err)
	return cl
}

// requireClosed reads c until rank 0 closes it (within 2 s) and returns
// the frames it sent first.
func requireClosed(t *testing.T, c net.Conn, msgAndArgs ...any) []frame {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
	var got []frame
	for {
		f, err := decodeFrame(c, controlLimit)
		if err != nil {
			require.False(t, errors.Is(err, os.ErrDeadlineExceeded), msgAndArgs...)
			return got
		}
		got = append(got, f)
	}
}

// requireOpen checks that rank 0 neither closes c nor sends on it within
// 100 ms.
func requireOpen(t *testing.T, c net.Conn, msgAndArgs ...any) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(100*time.Millisecond)))
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded, msgAndArgs...)
}

// fullGroup makes a group of P whose rank 0 holds at most P connections
// at once (MaxConns) and starts rank 0's round with a context of 10 s; it
// returns the group, the context, its cancel function and rank 0's
// outcome.
func fullGroup(t *testing.T, P int) ([]*TCP, context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	xs := newGroupWith(t, P, func(c *TCPConfig) { c.MaxConns = P })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return xs, ctx, cancel, gatherAsync(ctx, xs[0], []byte("zero"))
}

// TestEvictsOldestUnproven: with MaxConns held by silent strangers, each
// honest peer takes the place of the oldest stranger at once, and ten
// more strangers cannot keep the group from forming. (Which connection
// goes when: TestConnTable.)
func TestEvictsOldestUnproven(t *testing.T) {
	checkLeaks(t)
	xs, ctx, _, rank0 := fullGroup(t, 3)
	s := []*net.TCPConn{rawConn(t, xs[0].Addr()), rawConn(t, xs[0].Addr()), rawConn(t, xs[0].Addr())}
	start := time.Now()
	rank1 := gatherAsync(ctx, xs[1], []byte("one"))
	requireClosed(t, s[0], "the oldest stranger makes room for rank 1")
	requireOpen(t, s[1])
	requireOpen(t, s[2])
	for range 10 {
		_ = rawConn(t, xs[0].Addr())
	}
	res, err := xs[2].AllGather(ctx, []byte("two"))
	took := time.Since(start)
	require.NoError(t, err)
	require.NoError(t, <-rank1)
	require.NoError(t, <-rank0)
	requireBlobs(t, [][]byte{[]byte("zero"), []byte("one"), []byte("two")}, res)
	st := lastStats(xs[0])
	t.Logf("formed after %v; stats %+v", took.Round(time.Millisecond), st)
	assert.Less(t, took, time.Second, "no peer waited for a slot to time out")
	assert.Equal(t, 0, st.refused)
	assert.GreaterOrEqual(t, st.evicted, 2+10, "one for each peer and each later stranger (and one for each peer's connection evicted before rank 0 read its hello)")
	assert.Equal(t, 3, st.peakConns)
}

// TestEvictionOrder: rank 0 evicts strangers that have not sent a hello
// before those that have, even older ones; a greeted stranger it evicts
// gets an error frame with codeBusy (an honest peer in its place would
// dial again). Rank 0's error, when its round ends without the group,
// counts the evictions.
func TestEvictionOrder(t *testing.T) {
	checkLeaks(t)
	xs, _, cancel, rank0 := fullGroup(t, 2)
	g1, g2 := greetedStranger(t, xs[0].Addr()), greetedStranger(t, xs[0].Addr())

	n3 := rawConn(t, xs[0].Addr()) // every slot is greeted: the oldest, g1, goes
	got := requireClosed(t, g1.c, "g1 is evicted")
	require.Len(t, got, 1)
	assert.True(t, isBusy(got[0]), "g1 is told to dial again: %+v", got[0])
	requireOpen(t, g2.c)

	n4 := rawConn(t, xs[0].Addr()) // n3 has sent nothing: it goes before g2
	assert.Empty(t, requireClosed(t, n3, "n3 is evicted"), "n3 never spoke: it gets no frame")
	requireOpen(t, g2.c)
	requireOpen(t, n4)

	cancel()
	err := <-rank0
	require.ErrorIs(t, err, context.Canceled)
	assertExchangeError(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "2 connections closed before they proved the secret, to make room (limit 2 open)")
	assert.Equal(t, 2, lastStats(xs[0]).evicted)
}

// busyRoot listens on 127.0.0.1 and turns every connection away as rank 0
// does when it evicts it: the odd ones with errBusy in place of the
// challenge, the even ones after a valid challenge and the peer's proof
// and blob. It returns the address and a function that returns the times
// of the connections so far.
func busyRoot(t *testing.T) (string, func() []time.Time) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var times []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			times = append(times, time.Now())
			mu.Unlock()
			turnAwayLikeRoot(c, i%2 == 0)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	return l.Addr().String(), func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

// turnAwayLikeRoot reads c's hello and, if challenge, runs rank 0's side
// of the handshake up to the blob with testSecret, then sends errBusy and
// closes c.
func turnAwayLikeRoot(c net.Conn, challenge bool) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	hello, err := decodeFrame(c, controlLimit)
	if err != nil {
		return
	}
	if challenge {
		if _, _, err := rootHandshake(c, hello, testSecret); err != nil {
			return
		}
	}
	_ = encodeFrame(c, frame{kind: kindError, world: hello.world, payload: encodeError(errBusy, "dial again")})
}

// TestTurnedAwayUntilDeadline: a peer that rank 0 turns away, before or
// after the challenge, dials again with a growing, jittered pause, and
// says so at its deadline.
func TestTurnedAwayUntilDeadline(t *testing.T) {
	checkLeaks(t)
	addr, dials := busyRoot(t)
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 5 * time.Millisecond, Secret: testSecret})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := x1.AllGather(ctx, []byte("one"))
	assert.Less(t, time.Since(start), time.Second)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertExchangeError(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "turned away")
	assert.Contains(t, err.Error(), "rank 0 made room for a newer connection")
	times := dials()
	require.GreaterOrEqual(t, len(times), 5, "it dialed again after both kinds of refusal")
	// Pauses: [2.5, 5] ms, [5, 10], [10, 20], then [20, 40] each.
	for i := 4; i < len(times); i++ {
		assert.GreaterOrEqual(t, times[i].Sub(times[i-1]), 20*time.Millisecond, "pause %d", i)
	}
	assert.Less(t, len(times), 30, "at most one dial per 20 ms after the first few")
}

// TestBackoff: pauses start at DialInterval, double up to maxBackoff times
// it, and are drawn from the upper half of their span.
func TestBackoff(t *testing.T) {
	const base = 10 * time.Millisecond
	b := newBackoff(base)
	span := base
	for i := range 8 {
		d := b.next()
		assert.GreaterOrEqual(t, d, span/2, "pause %d", i)
		assert.LessOrEqual(t, d, span, "pause %d", i)
		span = min(2*span, maxBackoff*base)
	}
	seen := map[time.Duration]bool{}
	for range 100 {
		d := b.next()
		require.GreaterOrEqual(t, d, maxBackoff*base/2)
		require.LessOrEqual(t, d, maxBackoff*base)
		seen[d] = true
	}
	assert.Greater(t, len(seen), 50, "pauses are jittered")
}
