package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// wireRequest is op on one bf16 tensor of shape at ptr.
func wireRequest(t *testing.T, op ptx.Op, shape [4]int, ptr uintptr) Request {
	return request(t, op, 0, tensor{Ptr: ptr, Shape: shape, es: 2})
}

// wireOf is wire of r over w on rank of world, dt elements and capacity
// bytes per data half.
func wireOf(r Request, dt api.DType, w api.Wire, rank, world int, ts Tokens, capacity int64) (Plan, error) {
	env := envOf(dt, rank, world, capacity, nil)
	env.Wire = w
	return wire(&r, &env, ts)
}

// The staging area follows the outputs: codes then scale bytes, each
// tensor's from a multiple of 256, one code per element and one byte per
// head; the walk is counted in elements.
func TestWirePlanLayout(t *testing.T) {
	ts := NewTokens([]int{5, 3})
	r := wireRequest(t, ptx.OpSendRecvHeads, [4]int{2, 5, 6, 72}, 0x10000)
	r.N, r.Xs[1], r.Xs[2] = 3, r.Xs[0], r.Xs[0]
	r.Xs[1].Ptr, r.Xs[2].Ptr = 0x20000, 0x30000
	p, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, 1<<20)
	require.NoError(t, err)
	out := int64(2 * 8 * 3 * 72 * 2) // [B, T, H/P, D] bf16
	assert.Equal(t, [4]int{2, 8, 3, 72}, p.Out)
	assert.Equal(t, AlignUp(out, 256), p.Region)
	assert.Equal(t, 3*p.Region, p.StageOff)
	assert.Equal(t, p.Region/144, p.WireRows)
	assert.Equal(t, AlignUp(p.WireRows*72, 256), p.StageRegion)
	assert.Equal(t, p.StageOff+3*p.StageRegion, p.ScaleOff)
	assert.Equal(t, AlignUp(p.WireRows, 256), p.ScaleRegion)
	assert.Equal(t, out, p.OutBytes, "the decode walks OutBytes/2 elements per tensor")
	assert.Equal(t, 2, p.Width, "the walk counts elements")
	assert.Equal(t, int64(72), p.HeadUnits)
	assert.Equal(t, 16, p.WireWidth)
	assert.Equal(t, 16, p.DecodeWidth, "the decode width is planned with the rest")
	assert.True(t, p.Spread && p.General)
	assert.GreaterOrEqual(t, p.WireRows*144, out, "every row of an output has a code row and a scale byte")
}

// 16-byte reads need heads of a multiple of 8 elements (at most 1024),
// 16-byte aligned inputs and token strides; 8-byte reads a multiple of 4
// and 8-byte alignment; anything else reads one element at a time. The
// decode reads only the staging area: the head size decides.
func TestWireWidth(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	for _, c := range []struct {
		shape [4]int
		ptr   uintptr
		want  int
	}{
		{[4]int{1, 4, 2, 64}, 0x1000, 16},
		{[4]int{1, 4, 2, 64}, 0x1008, 8},
		{[4]int{1, 4, 2, 1028}, 0x1000, 8},
		{[4]int{1, 4, 2, 1024}, 0x1000, 16},
		{[4]int{1, 4, 2, 68}, 0x1000, 8},
		{[4]int{1, 4, 2, 64}, 0x1002, 2},
		{[4]int{1, 4, 2, 66}, 0x1000, 2},
		{[4]int{1, 4, 2, 3}, 0x1000, 2},
	} {
		p, err := wireOf(wireRequest(t, ptx.OpAllGather, c.shape, c.ptr), api.BFloat16, api.WireE5M2, 1, 2, ts, 1<<20)
		require.NoError(t, err, "%v", c)
		assert.Equal(t, c.want, p.WireWidth, "%v at %#x", c.shape, c.ptr)
	}
	for d, want := range map[int64]int{128: 16, 72: 16, 1024: 16, 2048: 8, 68: 8, 66: 2, 3: 2} {
		assert.Equal(t, want, WireDecodeWidth(d), "D=%d", d)
	}
}

// Ranks that disagree on the wire, or run the exact operation, fail with a
// mismatch instead of reading each other's bytes: the signatures differ.
func TestWireSignature(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	r := wireRequest(t, ptx.OpAllGather, [4]int{1, 4, 2, 64}, 0x1000)
	exactEnv := envOf(api.BFloat16, 0, 2, 1<<20, widths2)
	exact, err := plain(&r, &exactEnv, ts)
	require.NoError(t, err)
	e4, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, 1<<20)
	require.NoError(t, err)
	e5, err := wireOf(r, api.BFloat16, api.WireE5M2, 0, 2, ts, 1<<20)
	require.NoError(t, err)
	assert.NotEqual(t, exact.Sig, e4.Sig)
	assert.NotEqual(t, e4.Sig, e5.Sig)
	assert.NotEqual(t, e4.ShapeSig, e5.ShapeSig)
	assert.Equal(t, withTokens(e4.ShapeSig, ts.Hash), e4.Sig)
}

// Operations whose largest rank reads fewer than WireDirectBytes send every
// row straight; every rank decides alike (on the largest rank's bytes, and
// a world of one always), and the choice is in the signature.
func TestWireDirect(t *testing.T) {
	ts := NewTokens([]int{6, 2}) // rank 0 reads three times rank 1's bytes
	r := wireRequest(t, ptx.OpSendRecvHeads, [4]int{1, 6, 4, 64}, 0x1000)
	r1 := wireRequest(t, ptx.OpSendRecvHeads, [4]int{1, 2, 4, 64}, 0x1000)
	largest := int64(6 * 4 * 64 * 2)
	t.Cleanup(func() { WireDirectOverride.Store(0) })
	for _, c := range []struct {
		below int64
		want  bool
	}{{largest, false}, {largest + 1, true}} {
		WireDirectOverride.Store(c.below)
		p0, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, 1<<20)
		require.NoError(t, err)
		p1, err := wireOf(r1, api.BFloat16, api.WireE4M3, 1, 2, ts, 1<<20)
		require.NoError(t, err)
		assert.Equal(t, c.want, p0.WireDirect, "direct below %d bytes", c.below)
		assert.Equal(t, c.want, p1.WireDirect, "rank 1 decides on rank 0's bytes")
		assert.Equal(t, p0.Sig, p1.Sig)
	}
	WireDirectOverride.Store(1)
	staged, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, 1<<20)
	require.NoError(t, err)
	WireDirectOverride.Store(0)
	assert.Equal(t, int64(4<<20), WireDirectBytes())
	direct, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, 1<<20)
	require.NoError(t, err)
	assert.True(t, direct.WireDirect)
	assert.NotEqual(t, staged.Sig, direct.Sig)
	WireDirectOverride.Store(1)
	one, err := wireOf(r, api.BFloat16, api.WireE4M3, 0, 1, NewTokens([]int{6}), 1<<20)
	require.NoError(t, err)
	assert.True(t, one.WireDirect, "a world of one has only its own rows")
}

func TestWireRefuses(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	r := wireRequest(t, ptx.OpSendRecvHeads, [4]int{1, 4, 2, 64}, 0x1000)
	_, err := wireOf(r, api.BFloat16, api.WireExact, 0, 2, ts, 1<<20)
	assert.ErrorIs(t, err, api.ErrConfig)
	_, err = wireOf(r, api.Float8E4M3, api.WireE4M3, 0, 2, ts, 1<<20)
	assert.ErrorIs(t, err, api.ErrConfig)
	// The output fits, the codes and scales do not.
	out := int64(1 * 8 * 1 * 64 * 2)
	_, err = wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, out)
	assert.ErrorIs(t, err, api.ErrCapacity)
	_, err = wireOf(r, api.BFloat16, api.WireE4M3, 0, 2, ts, WireBytes(out, 1))
	assert.NoError(t, err, "WireBytes is enough")
	// AllGather has no exact general form.
	ag := wireRequest(t, ptx.OpAllGather, [4]int{1, 4, 2, 64}, 0x1000)
	agEnv := envOf(api.BFloat16, 0, 2, 1<<20, []int{2})
	_, err = general(&ag, &agEnv, ts, ag.sharedGeneral(2))
	assert.ErrorIs(t, err, api.ErrNotSupported)
}
