package exchange

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConnTable: a full table evicts the oldest fresh connection, then the
// oldest greeted one, never a proven one, and refuses a newcomer only when
// every open connection is proven; a connection it evicted can be neither
// greeted nor proven.
func TestConnTable(t *testing.T) {
	conns := make([]net.Conn, 8)
	for i := range conns {
		a, b := net.Pipe()
		t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
		conns[i] = a
	}
	tab := newConnTable(3)
	add := func(c net.Conn) (net.Conn, bool) {
		t.Helper()
		victim, greeted, ok := tab.add(c)
		require.True(t, ok)
		return victim, greeted
	}
	for _, c := range conns[:3] {
		victim, _ := add(c)
		require.Nil(t, victim, "not full yet")
	}
	require.True(t, tab.greet(conns[0]))
	require.True(t, tab.greet(conns[1]))
	require.True(t, tab.prove(conns[1]))

	victim, greeted := add(conns[3]) // fresh: 2; greeted: 0; proven: 1
	assert.Equal(t, conns[2], victim, "a fresh connection goes before an older greeted one")
	assert.False(t, greeted)
	victim, greeted = add(conns[4]) // fresh: 3
	assert.Equal(t, conns[3], victim, "the oldest fresh one")
	assert.False(t, greeted)
	require.True(t, tab.greet(conns[4]))
	victim, greeted = add(conns[5]) // greeted: 0, 4 (in the order of their hellos)
	assert.Equal(t, conns[0], victim, "no fresh one left: the oldest greeted one")
	assert.True(t, greeted)
	assert.False(t, tab.greet(conns[0]), "an evicted connection is gone")
	assert.False(t, tab.prove(conns[0]))

	require.True(t, tab.prove(conns[4]))
	require.True(t, tab.prove(conns[5]))
	victim, greeted, ok := tab.add(conns[6]) // proven: 1, 4, 5
	assert.False(t, ok, "every open connection proved the secret: the newcomer is refused")
	assert.Nil(t, victim)
	assert.False(t, greeted)
	assert.False(t, tab.has(conns[6]))
	assert.Equal(t, 3, tab.len())
	for _, c := range []net.Conn{conns[1], conns[4], conns[5]} {
		assert.True(t, tab.has(c), "proven connections stay")
	}
	assert.True(t, tab.remove(conns[1]))
	assert.False(t, tab.remove(conns[1]))
	victim, _ = add(conns[7])
	assert.Nil(t, victim, "room again")
}
