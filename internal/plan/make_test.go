package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// makeEnv is rank 0's Env of a world of 2 whose buffer, two data halves
// of 1 MiB, lies at 0x100000000.
func makeEnv() Env {
	return Env{DType: api.BFloat16, World: 2, Layout: NewLayout(1<<20, 2), Buf: 0x100000000, Widths: widths2}
}

// Make picks the entries that run the request: the plain ones for one
// dense input with heads the world size divides, the general ones for a
// token stride, several tensors or uneven heads, the wire's when the Env
// asks for them.
func TestMakeChooses(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	x := bf16(0x10000, 1, 4, 8, 64)
	strided := x
	strided.Stride = 3 * 8 * 64
	for _, c := range []struct {
		name    string
		r       Request
		wire    api.Wire
		general bool
	}{
		{"plain", request(t, ptx.OpSendRecvHeads, 0, x), api.WireExact, false},
		{"strided", request(t, ptx.OpSendRecvHeads, 0, strided), api.WireExact, true},
		{"packed", request(t, ptx.OpSendRecvHeads, 0, x, x), api.WireExact, true},
		{"uneven heads", request(t, ptx.OpSendRecvHeads, 0, bf16(0x10000, 1, 4, 7, 64)), api.WireExact, true},
		{"wire", request(t, ptx.OpSendRecvHeads, 0, x), api.WireE4M3, true},
	} {
		env := makeEnv()
		env.Wire = c.wire
		p, err := Make(c.r, env, ts, 0)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.general, p.General, c.name)
		assert.Equal(t, c.wire, p.Wire, c.name)
		assert.Equal(t, 1, p.Batch, c.name)
		assert.Equal(t, uint64(0x10000), p.Inputs[0], c.name)
	}
}

// A captured operation's input holds the most tokens a replay may use:
// Make plans the first ones the counts give it, refuses counts it cannot
// hold, and refuses the Into forms.
func TestMakeCaptured(t *testing.T) {
	ts := NewTokens([]int{3, 5})
	r := request(t, ptx.OpGatherHeads, 0, bf16(0x10000, 1, 16, 4, 64))
	r.Captured = true
	need, ok := r.Fits(ts, 1)
	assert.Equal(t, [2]any{8, true}, [2]any{need, ok}, "GatherHeads needs every rank's tokens")
	p, err := Make(r, makeEnv(), ts, 0)
	require.NoError(t, err)
	assert.Equal(t, [4]int{1, 3, 8, 64}, p.Out, "planned on the counts' 8 tokens, not the 16 the input holds")
	cut, err := r.cut(ts, 0, 2)
	require.NoError(t, err)
	assert.Equal(t, 8, cut.Xs[0].Shape[1])
	assert.Equal(t, int64(8*4*64*2), cut.Xs[0].Span, "the cut input's span")

	_, err = Make(r, makeEnv(), NewTokens([]int{9, 8}), 0)
	assert.ErrorIs(t, err, api.ErrTokens, "17 tokens in all, the input holds 16")
	_, ok = r.Fits(NewTokens([]int{9, 8}), 0)
	assert.False(t, ok)

	into := r
	into.Into = true
	_, err = Make(into, makeEnv(), ts, 0)
	assert.ErrorIs(t, err, api.ErrNotSupported)

	uncaptured := r
	uncaptured.Captured = false
	_, err = Make(uncaptured, makeEnv(), ts, 0)
	assert.ErrorIs(t, err, api.ErrTokens, "outside a capture the input holds exactly the counts' tokens")
}

// The placement checks read the inputs' and outputs' descriptions: an
// input may lie in the data half the operation does not write (the
// previous view), not in the one it writes nor in the signals; an Into
// output has the output's shape, a pitch a copy takes, and lies outside
// the buffer.
func TestMakePlacement(t *testing.T) {
	env := makeEnv()
	ts := NewTokens([]int{4, 4})
	half1 := env.Buf + uintptr(env.Layout.HalfOff(1))
	at := func(ptr uintptr) tensor { return bf16(ptr, 1, 4, 8, 64) }
	_, err := Make(request(t, ptx.OpSendRecvHeads, 0, at(half1)), env, ts, 0)
	assert.NoError(t, err, "in the other half")
	_, err = Make(request(t, ptx.OpSendRecvHeads, 0, at(half1)), env, ts, 1)
	assert.ErrorIs(t, err, api.ErrAliased, "in the half it writes")
	_, err = Make(request(t, ptx.OpSendRecvHeads, 0, at(env.Buf+uintptr(env.Layout.SignalOff))), env, ts, 0)
	assert.ErrorIs(t, err, api.ErrAliased, "in the signals")
	_, err = Make(request(t, ptx.OpSendRecvHeads, 0, at(half1-2)), env, ts, 1)
	assert.ErrorIs(t, err, api.ErrAliased, "its last bytes in the half it writes")

	into := func(dst tensor) error {
		r := request(t, ptx.OpSendRecvHeads, 0, at(0x10000))
		r.Into, r.Dsts[0] = true, dst.must(t)
		_, err := Make(r, env, ts, 0)
		return err
	}
	out := bf16(0x20000, 1, 8, 4, 64)
	assert.NoError(t, into(out))
	wide := out
	wide.Stride = 3 * 4 * 64
	assert.NoError(t, into(wide), "a strided output")
	assert.ErrorIs(t, into(bf16(0x20000, 1, 8, 8, 32)), api.ErrShape)
	huge := out
	huge.Stride = MaxPitch/2 + 1
	assert.ErrorIs(t, into(huge), api.ErrNotSupported, "a pitch over MaxPitch")
	assert.ErrorIs(t, into(bf16(env.Buf+uintptr(env.Layout.HalfOff(1)), 1, 8, 4, 64)), api.ErrAliased, "an output in the buffer")
}
