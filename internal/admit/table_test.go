package admit

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTable: a full table evicts only a connection that has had its
// grace (helloGrace waiting for its hello, proofGrace waiting for its
// proof, none while rank 0 works on it), those without a hello first, and
// never a proven one; with none due it says when one will be, and a
// connection it evicted can be neither waited on nor removed.
func TestTable(t *testing.T) {
	conns := make([]net.Conn, 8)
	for i := range conns {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		conns[i] = a
	}
	const hello, proof = 10 * time.Millisecond, 100 * time.Millisecond
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tab := New(3, hello, proof)
	admit := func(c net.Conn, ms int) (victim net.Conn, challenged bool) {
		t.Helper()
		victim, challenged, next, ok := tab.Admit(c, at(ms))
		require.True(t, ok, "admitted at %d ms", ms)
		assert.True(t, next.IsZero())
		return victim, challenged
	}
	wait := func(c net.Conn, ms int) time.Time {
		t.Helper()
		victim, challenged, next, ok := tab.Admit(c, at(ms))
		require.False(t, ok, "waits at %d ms", ms)
		assert.Nil(t, victim)
		assert.False(t, challenged)
		assert.False(t, tab.Has(c))
		return next
	}
	for _, c := range conns[:3] {
		victim, _ := admit(c, 0)
		require.Nil(t, victim, "not full yet")
	}
	assert.True(t, wait(conns[3], 0).IsZero(), "no one is waited on yet: every connection is safe, and no grace is running")

	require.True(t, tab.Await(conns[0], Hello, at(0)))
	require.True(t, tab.Await(conns[1], Hello, at(1)))
	require.True(t, tab.Await(conns[2], Proof, at(2)))
	assert.Equal(t, at(10), wait(conns[3], 5), "the first hello's grace ends at 10 ms")
	victim, challenged := admit(conns[3], 10)
	assert.Equal(t, conns[0], victim, "its grace is over")
	assert.False(t, challenged)
	assert.False(t, tab.Await(conns[0], Hello, at(10)), "an evicted connection is gone")
	assert.False(t, tab.Remove(conns[0]))

	require.True(t, tab.Await(conns[1], Nothing, time.Time{}), "rank 0 read conns[1]'s hello: it is safe again")
	assert.Equal(t, at(102), wait(conns[4], 50), "conns[2]'s proof is due at 102 ms")
	require.True(t, tab.Await(conns[3], Hello, at(60)))
	assert.Equal(t, at(70), wait(conns[4], 60), "conns[3]'s hello is due sooner")
	victim, challenged = admit(conns[4], 150)
	assert.Equal(t, conns[3], victim, "both are due: the one without a hello goes first, though it is younger")
	assert.False(t, challenged)
	victim, challenged = admit(conns[5], 150)
	assert.Equal(t, conns[2], victim, "then the one challenged")
	assert.True(t, challenged, "it may have sent its proof: it is told")

	// conns[1] (proven, say), [4] and [5] are in no line.
	assert.True(t, wait(conns[6], 10_000).IsZero(), "proven or busy connections are never due")
	assert.Equal(t, 3, tab.Len())
	assert.True(t, tab.Remove(conns[1]))
	assert.False(t, tab.Remove(conns[1]))
	victim, _ = admit(conns[6], 10_000)
	assert.Nil(t, victim, "room again")
	for _, c := range []net.Conn{conns[4], conns[5], conns[6]} {
		assert.True(t, tab.Has(c))
	}
}

// TestRoom: Wait returns at next, at a change signalled before or while
// it waits, and reports false once stop is closed; Changed never blocks.
func TestRoom(t *testing.T) {
	r := NewRoom()
	stop := make(chan struct{})
	start := time.Now()
	require.True(t, r.Wait(start.Add(20*time.Millisecond), stop))
	assert.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond, "until next")
	r.Changed()
	r.Changed() // a second signal does not block
	require.True(t, r.Wait(time.Time{}, stop), "a change made before the wait")
	go func() { time.Sleep(10 * time.Millisecond); r.Changed() }()
	require.True(t, r.Wait(time.Time{}, stop), "a change made during the wait")
	close(stop)
	assert.False(t, r.Wait(time.Time{}, stop))
}
