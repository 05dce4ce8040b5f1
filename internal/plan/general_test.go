package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/ptx"
)

// planAll plans r on every rank of counts, with inputs made by input(rank).
func planAll(t *testing.T, op ptx.Op, heads, n int, counts []int, input func(rank int) tensor) []Plan {
	t.Helper()
	ts := NewTokens(counts)
	var ps []Plan
	for rank := range counts {
		r := Request{Op: op, N: n, Heads: heads}
		for k := range n {
			x := input(rank)
			x.Ptr += uintptr(k) << 20
			r.Xs[k] = x.must(t)
		}
		p, err := generalOf(r, rank, len(counts), ts, 1<<30)
		require.NoError(t, err, "rank %d", rank)
		ps = append(ps, p)
	}
	return ps
}

// Every rank of an operation must launch alike: the same active blocks
// (groupBytes), captured walk (groupRow), signature and regions.
func requireAgree(t *testing.T, ps []Plan) {
	t.Helper()
	for _, p := range ps[1:] {
		require.Equal(t, ps[0].GroupBytes, p.GroupBytes)
		require.Equal(t, ps[0].GroupRow, p.GroupRow)
		require.Equal(t, ps[0].Sig, p.Sig)
		require.Equal(t, ps[0].Region, p.Region)
		require.Equal(t, ps[0].Heads, p.Heads)
	}
}

func TestPlanGeneralUnevenHeads(t *testing.T) {
	counts := []int{5, 0, 7}
	const B, H, D = 2, 40, 128
	srh := planAll(t, ptx.OpSendRecvHeads, 0, 3, counts, func(r int) tensor { return bf16(0x10000, B, counts[r], H, D) })
	requireAgree(t, srh)
	for r, p := range srh {
		_, mine := HeadRange(H, 3, r)
		assert.Equal(t, [4]int{B, 12, mine, D}, p.Out)
		assert.Equal(t, int64(B*counts[r]*H*D*2/16), p.Vectors, "every input byte once")
		assert.Equal(t, int64(H*D*2/16), p.Units, "a token row")
		assert.Equal(t, int64(D*2/16), p.HeadUnits)
		assert.Equal(t, AlignUp(B*12*14*D*2, OutputAlign), p.Region, "the largest output, rank 0's 14 heads")
	}
	assert.Equal(t, [kernelabi.MaxRanks + 1]int32{0, 14, 27, 40}, srh[0].Heads)
	assert.Equal(t, int64(B*7*H*D*2*3), srh[0].GroupBytes, "the largest rank's walk of 3 tensors")
	assert.Equal(t, int64(B*H*D*2*3), srh[0].GroupRow)
	assert.True(t, srh[0].Spread, "every rank takes the general entries")
	gh := planAll(t, ptx.OpGatherHeads, H, 2, counts, func(r int) tensor {
		_, mine := HeadRange(H, 3, r)
		return bf16(0x10000, B, 12, mine, D)
	})
	requireAgree(t, gh)
	for r, p := range gh {
		assert.Equal(t, [4]int{B, counts[r], H, D}, p.Out)
		assert.Equal(t, AlignUp(B*7*H*D*2, OutputAlign), p.Region, "the largest output: 7 tokens")
	}
	hag := planAll(t, ptx.OpHeadAllGather, H, 1, counts, func(r int) tensor {
		_, mine := HeadRange(H, 3, r)
		return bf16(0x10000, B, 12, mine, D)
	})
	requireAgree(t, hag)
	assert.True(t, hag[0].WalkTotal)
	assert.Equal(t, [4]int{B, 12, H, D}, hag[2].Out)
}

// One dense tensor with divisible heads plans as the plain entries do, so
// ranks whose inputs differ in stride (general on one, plain on another)
// still launch alike.
func TestPlanGeneralMatchesPlain(t *testing.T) {
	counts := []int{3, 6}
	ts := NewTokens(counts)
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads} {
		x := bf16(0x10000, 2, 6, 8, 64)
		if op == ptx.OpGatherHeads {
			x = bf16(0x10000, 2, 9, 4, 64)
		}
		plain, err := plainOf(op, x, 1, 2, ts, 1<<30, widths2)
		require.NoError(t, err)
		gen, err := generalOf(single(op, x.must(t)), 1, 2, ts, 1<<30)
		require.NoError(t, err)
		assert.Equal(t, plain.Out, gen.Out, "%s", op)
		assert.Equal(t, plain.GroupBytes, gen.GroupBytes, "%s", op)
		assert.Equal(t, plain.GroupRow, gen.GroupRow, "%s", op)
		assert.Equal(t, plain.Sig, gen.Sig, "%s", op)
		assert.Equal(t, plain.ShapeSig, gen.ShapeSig, "%s", op)
		assert.Equal(t, plain.Vectors, gen.Vectors, "%s", op)
		assert.Equal(t, plain.Width, gen.Width, "%s", op)
	}
}

func TestPlanGeneralStrided(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	x := bf16(0x10000, 1, 4, 8, 64)
	x.Stride = 3 * 8 * 64
	r := Request{Op: ptx.OpSendRecvHeads, N: 3}
	for k := range 3 {
		y := x
		y.Ptr += uintptr(k * 8 * 64 * 2)
		r.Xs[k] = y.must(t)
	}
	require.True(t, r.Xs[0].Strided())
	p, err := generalOf(r, 0, 2, ts, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, int64(3*8*64*2/16), p.InRow)
	assert.Equal(t, 16, p.Width)
	assert.NotEqual(t, generalSignature(ptx.OpSendRecvHeads, 1, 8, 64, 2, 1), p.ShapeSig, "the tensor count is in the signature")

	// A stride of an odd number of elements allows only element-wide copies.
	x.Stride = 8*64 + 1
	p, err = generalOf(single(ptx.OpSendRecvHeads, x.must(t)), 0, 2, ts, 1<<30)
	require.NoError(t, err)
	assert.Equal(t, 2, p.Width)
	assert.Equal(t, int64(8*64+1), p.InRow)
	assert.Equal(t, int64((3*(8*64+1)+8*64)*2), x.must(t).Span, "span: three gaps of one element")
}

func TestPlanGeneralErrors(t *testing.T) {
	ts := NewTokens([]int{4, 4, 4})
	x := bf16(0x10000, 1, 4, 8, 64)
	wide := x
	wide.Stride = 1024
	cases := []struct {
		name string
		r    Request
		cap  int64
		want error
	}{
		{"shapes differ", request(t, ptx.OpSendRecvHeads, 0, x, bf16(0x20000, 1, 4, 8, 32)), 1 << 30, api.ErrShape},
		{"strides differ", request(t, ptx.OpSendRecvHeads, 0, x, wide), 1 << 30, api.ErrShape},
		{"fewer heads than ranks", request(t, ptx.OpSendRecvHeads, 0, bf16(0x10000, 1, 4, 2, 64)), 1 << 30, api.ErrShape},
		{"gather: heads not this rank's share", request(t, ptx.OpGatherHeads, 8, bf16(0x10000, 1, 12, 2, 64)), 1 << 30, api.ErrShape},
		{"gather: tokens", request(t, ptx.OpGatherHeads, 8, bf16(0x10000, 1, 4, 3, 64)), 1 << 30, api.ErrTokens},
		{"packed over capacity", request(t, ptx.OpSendRecvHeads, 0, x, x), 12*3*64*2*2 - 1, api.ErrCapacity},
	}
	for _, c := range cases {
		_, err := generalOf(c.r, 0, 3, ts, c.cap)
		assert.ErrorIs(t, err, c.want, c.name)
	}
	// Exactly at capacity: the last tensor needs no padding.
	r := request(t, ptx.OpSendRecvHeads, 0, x, x)
	p, err := generalOf(r, 0, 3, ts, 1<<30)
	require.NoError(t, err)
	_, err = generalOf(r, 0, 3, ts, p.Region+p.OutBytes)
	assert.NoError(t, err)
	_, err = generalOf(r, 0, 3, ts, p.Region+p.OutBytes-1)
	assert.ErrorIs(t, err, api.ErrCapacity)
}

// TestSpreadAmongSharers: ranks that share a GPU divide generalSpread
// among themselves.
func TestSpreadAmongSharers(t *testing.T) {
	for sharers, want := range map[int]int64{0: 4, 1: 4, 2: 2, 3: 1, 8: 1} {
		assert.Equal(t, want, SpreadFor(sharers), "%d ranks on a GPU", sharers)
	}
}
