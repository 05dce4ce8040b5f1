package exchange

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The exchangers that a constructor did not make (the nil TCP a failed
// NewTCP returns, the zero TCP, a rank of a nil or zero Local) answer
// instead of panicking: AllGather and Listen fail with ErrClosed, Close
// returns nil (a deferred Close before checking NewTCP's error is
// harmless), Addr is "".
func TestUnmadeExchangers(t *testing.T) {
	ctx := context.Background()
	for name, x := range map[string]*TCP{"nil": nil, "zero": {}} {
		assert.NotPanics(t, func() {
			_, err := x.AllGather(ctx, []byte("x"))
			assert.ErrorIs(t, err, ErrClosed, "%s TCP: AllGather", name)
			assert.ErrorIs(t, x.Listen(), ErrClosed, "%s TCP: Listen", name)
			assert.Regexp(t, `^exchange: Listen on a TCP that NewTCP did not make`, x.Listen().Error())
			assert.Empty(t, x.Addr(), "%s TCP: Addr", name)
			assert.NoError(t, x.Close(), "%s TCP: Close", name)
		}, "%s TCP", name)
	}
	x, err := NewTCP(TCPConfig{WorldSize: 0})
	require.ErrorIs(t, err, ErrWorldSize)
	assert.NoError(t, x.Close(), "the TCP of a failed NewTCP")

	for name, m := range map[string]LocalRank{"zero": {}, "of a nil Local": (*Local)(nil).Rank(0), "of a zero Local": (&Local{}).Rank(0)} {
		assert.NotPanics(t, func() {
			_, err := m.AllGather(ctx, []byte("x"))
			assert.ErrorIs(t, err, ErrClosed, "LocalRank %s: AllGather", name)
			assert.NoError(t, m.Close(), "LocalRank %s: Close", name)
		}, "LocalRank %s", name)
	}
}

// A rank outside a Local group's world gets ErrRank, and the group is
// unharmed: its ranks still gather.
func TestLocalRankOutOfRange(t *testing.T) {
	x := NewLocal(1)
	for _, r := range []int{-1, 1} {
		var err error
		require.NotPanics(t, func() { _, err = x.Rank(r).AllGather(context.Background(), nil) })
		assert.ErrorIs(t, err, ErrRank, "rank %d", r)
	}
	all, err := x.Rank(0).AllGather(context.Background(), []byte("a"))
	require.NoError(t, err)
	assert.Equal(t, [][]byte{[]byte("a")}, all)
}
