package exchange

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// greetedClient connects to addr as rank 1 of 2 with key, sends a hello
// and reads the challenge (within 5 s): rank 0 then waits for its proof.
// It reports whether rank 0's proof checks out under key, and is closed
// when the test ends.
func greetedClient(t *testing.T, addr string, key []byte) (*client, bool) {
	t.Helper()
	cl, err := dialClient(addr, 1, 2, key)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Close() })
	require.NoError(t, cl.c.SetDeadline(time.Now().Add(5*time.Second)))
	proven, err := cl.challenge()
	require.NoError(t, err)
	return cl, proven
}

// greetedStranger is greetedClient without the secret.
func greetedStranger(t *testing.T, addr string) *client {
	t.Helper()
	cl, _ := greetedClient(t, addr, nil)
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

// requireOneClosed reads conns until rank 0 closes one of them (within
// 2 s), checks that it closed no other, and returns the index of the one
// it closed and the frames it sent on it first. The others are left with
// nothing read from them and a read deadline in the past.
func requireOneClosed(t *testing.T, conns []net.Conn, msgAndArgs ...any) (int, []frame) {
	t.Helper()
	type ending struct {
		i   int
		got []frame
		err error
	}
	ends := make(chan ending, len(conns))
	for i, c := range conns {
		require.NoError(t, c.SetReadDeadline(time.Now().Add(2*time.Second)))
		go func() {
			var got []frame
			for {
				f, err := decodeFrame(c, controlLimit)
				if err != nil {
					ends <- ending{i, got, err}
					return
				}
				got = append(got, f)
			}
		}()
	}
	first := <-ends
	for _, c := range conns {
		_ = c.SetReadDeadline(aLongTimeAgo)
	}
	for range len(conns) - 1 {
		e := <-ends
		require.ErrorIs(t, e.err, os.ErrDeadlineExceeded, "rank 0 closed connection %d too", e.i)
		require.Empty(t, e.got, "rank 0 sent on connection %d too", e.i)
	}
	require.False(t, errors.Is(first.err, os.ErrDeadlineExceeded), msgAndArgs...)
	return first.i, first.got
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
// at once (MaxConns), its config adjusted by mod if not nil, and starts
// rank 0's round with a context of 10 s; it returns the group, the
// context, its cancel function and rank 0's outcome.
func fullGroup(t *testing.T, P int, mod func(*TCPConfig)) ([]*TCP, context.Context, context.CancelFunc, <-chan error) {
	t.Helper()
	xs := newGroupWith(t, P, func(c *TCPConfig) {
		c.MaxConns = P
		if mod != nil {
			mod(c)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return xs, ctx, cancel, gatherAsync(ctx, xs[0], []byte("zero"))
}

// TestEvictsSilentStrangers: with MaxConns held by silent strangers, each
// honest peer takes the place of one as soon as rank 0 has waited for its
// hello for its grace (10 ms), and ten more strangers cannot keep the
// group from forming. (Which connection goes when: TestConnTable.)
func TestEvictsSilentStrangers(t *testing.T) {
	checkLeaks(t)
	// Strangers that outlive AuthTimeout would be closed for their silence.
	xs, ctx, _, rank0 := fullGroup(t, 3, func(c *TCPConfig) { c.AuthTimeout = 5 * time.Second })
	s := []net.Conn{rawConn(t, xs[0].Addr()), rawConn(t, xs[0].Addr()), rawConn(t, xs[0].Addr())}
	start := time.Now()
	rank1 := gatherAsync(ctx, xs[1], []byte("one"))
	gone, got := requireOneClosed(t, s, "a stranger makes room for rank 1")
	assert.Empty(t, got, "it never spoke: it gets no frame")
	for i, c := range s {
		if i != gone {
			requireOpen(t, c)
		}
	}
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
	assert.GreaterOrEqual(t, st.evicted, 2+10, "one for each peer and each later stranger")
	assert.Equal(t, 3, st.peakConns)
}

// TestEvictionOrder: a challenged stranger keeps its slot for its
// proof's grace (a quarter of AuthTimeout) from its challenge, while a
// newcomer waits; then it is evicted with an error frame of codeBusy (an
// honest peer in its place would dial again). A stranger that sends no
// hello goes before one challenged earlier once its shorter grace is
// over. Rank 0's error, when its round ends without the group, counts the
// evictions.
func TestEvictionOrder(t *testing.T) {
	checkLeaks(t)
	xs, _, cancel, rank0 := fullGroup(t, 2, nil)
	_, proofGrace := graces(xs[0].cfg.AuthTimeout)
	challenged := time.Now() // before rank 0 challenges g[0] and g[1]
	g := []net.Conn{greetedStranger(t, xs[0].Addr()).c, greetedStranger(t, xs[0].Addr()).c}

	n3 := rawConn(t, xs[0].Addr()) // every slot is challenged: n3 waits for the first grace to end
	gone, got := requireOneClosed(t, g, "a challenged stranger is evicted")
	assert.GreaterOrEqual(t, time.Since(challenged), proofGrace, "it kept its slot for its grace")
	require.Len(t, got, 1)
	assert.True(t, isBusy(got[0]), "it is told to dial again: %+v", got[0])
	kept := g[1-gone]
	requireOpen(t, kept)

	n4 := rawConn(t, xs[0].Addr()) // n3 has sent nothing: it goes before the one challenged earlier
	assert.Empty(t, requireClosed(t, n3, "n3 is evicted"), "n3 never spoke: it gets no frame")
	requireOpen(t, kept)
	requireOpen(t, n4)

	cancel()
	err := <-rank0
	require.ErrorIs(t, err, context.Canceled)
	assertExchangeError(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "2 connections closed before they proved the secret, to make room (limit 2 open)")
	st := lastStats(xs[0])
	assert.Equal(t, 2, st.evicted)
	assert.GreaterOrEqual(t, st.waited, 1, "n3 waited for a slot")
}

// busyRoot listens on 127.0.0.1 and turns every connection away as rank 0
// does when it evicts it: the odd ones with errBusy in place of the
// challenge, the even ones after a valid challenge and the peer's proof
// and blob. It returns the address and a function that returns the times
// of the connections so far.
func busyRoot(t *testing.T) (string, func() []time.Time) {
	t.Helper()
	var mu sync.Mutex
	var times []time.Time
	addr := scriptedRoot(t, func(i int, c net.Conn) {
		mu.Lock()
		times = append(times, time.Now())
		mu.Unlock()
		turnAwayLikeRoot(c, i%2 == 0)
	})
	return addr, func() []time.Time {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Time(nil), times...)
	}
}

// scriptedRoot listens on 127.0.0.1 and hands each connection it accepts
// to serve, with its number (from 0), one at a time, until the test
// ends. It returns the address.
func scriptedRoot(t *testing.T, serve func(i int, c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			serve(i, c)
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	return l.Addr().String()
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
	_ = encodeFrame(c, frame{kind: kindError, world: hello.world, payload: encodeError(errBusy, "rank 0 made room for a newer connection")})
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

// TestChallengedPeerKeepsItsSlot: a peer that rank 0 has challenged keeps
// its slot while strangers send hellos, as long as its proof comes
// within its grace: here a peer driven by hand, holding the one slot
// rank 0 has for it, answers after half its grace, while 32 strangers
// dial again and again with hellos, and joins the round. (The code
// before evicted it for the first stranger that came while the table
// was full.)
func TestChallengedPeerKeepsItsSlot(t *testing.T) {
	checkLeaks(t)
	xs, _, _, rank0 := fullGroup(t, 2, nil)
	_, proofGrace := graces(xs[0].cfg.AuthTimeout)
	cl, proven := greetedClient(t, xs[0].Addr(), testSecret)
	require.True(t, proven)

	run := startAttack(redialling(32, sayHello), xs[0].Addr())
	defer run.stop()
	time.Sleep(proofGrace / 2)
	require.NoError(t, cl.authAndBlob([]byte("one")))
	f, err := cl.read()
	require.NoError(t, err)
	require.Equal(t, kindResult, f.kind, "rank 0 took the blob: %+v", f)
	require.NoError(t, cl.send(kindAck, nil, labelAck))
	f, err = cl.read()
	require.NoError(t, err)
	assert.Equal(t, kindCommit, f.kind)
	require.NoError(t, <-rank0)
	st := lastStats(xs[0])
	t.Logf("rank 0: %+v; strangers' connections: %d", st, run.dials.Load())
	assert.Positive(t, st.waited, "strangers came while the table was full")
}

// TestLateProofIsToldToDialAgain: a connection whose proof comes after
// AuthTimeout gets an error frame of codeBusy before rank 0 closes it
// (with the proof and the blob unread), so that a peer rank 0 was too
// slow for dials again instead of failing while rank 0 waits for it;
// then the peer joins. (The code before closed it without a word: the
// peer failed at once, "waiting for the result from rank 0: ...
// connection reset by peer", and rank 0 waited until its deadline. This
// is how TestFlood failed under the race detector.)
func TestLateProofIsToldToDialAgain(t *testing.T) {
	checkLeaks(t)
	const authTimeout = 100 * time.Millisecond
	xs := newGroupWith(t, 2, func(c *TCPConfig) { c.AuthTimeout = authTimeout })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rank0 := gatherAsync(ctx, xs[0], []byte("zero"))
	cl, proven := greetedClient(t, xs[0].Addr(), testSecret)
	require.True(t, proven)
	time.Sleep(2 * authTimeout)
	_ = cl.authAndBlob([]byte("one")) // rank 0 may have closed the connection
	f, err := cl.read()
	require.NoError(t, err, "rank 0 says why it closes the connection")
	assert.True(t, isBusy(f), "a late peer is told to dial again: %+v", f)

	res, err := xs[1].AllGather(ctx, []byte("one"))
	require.NoError(t, err)
	require.NoError(t, <-rank0)
	requireBlobs(t, [][]byte{[]byte("zero"), []byte("one")}, res)
}

// TestNoResultAfterATurnAway: a peer that rank 0 turned away once, and
// whose next blob went out but got no answer by its deadline, says that
// it waited for the result (the code before said only that rank 0 had
// turned it away before taking its blob, which it had not).
func TestNoResultAfterATurnAway(t *testing.T) {
	checkLeaks(t)
	addr := scriptedRoot(t, func(i int, c net.Conn) {
		if i == 0 {
			turnAwayLikeRoot(c, true)
			return
		}
		defer c.Close()
		if hello, err := decodeFrame(c, controlLimit); err == nil {
			_, _, _ = rootHandshake(c, hello, testSecret)
			_, _ = io.Copy(io.Discard, c) // takes the blob, never answers
		}
	})
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 5 * time.Millisecond, Secret: testSecret})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := x1.AllGather(ctx, []byte("one"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertExchangeError(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "waiting for the result from rank 0")
	assert.NotContains(t, err.Error(), "turned away")
	assert.Equal(t, 1, lastStats(x1).turnedAway)
}
