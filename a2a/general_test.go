package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// HeadRange agrees with the reference and tiles [0, H) in rank order with
// counts that differ by at most one.
func TestHeadRange(t *testing.T) {
	for world := 1; world <= MaxWorldSize; world++ {
		for heads := world; heads <= 48; heads++ {
			s := ref.Shape{Batch: 1, Heads: heads, HeadDim: 1, ElemSize: 1, Tokens: make([]int, world)}
			next, lo, hi := 0, heads, 0
			for r := range world {
				first, count := HeadRange(heads, world, r)
				wf, wc := s.HeadRange(r)
				require.Equal(t, [2]int{wf, wc}, [2]int{first, count}, "H=%d P=%d rank %d", heads, world, r)
				require.Equal(t, next, first)
				next += count
				lo, hi = min(lo, count), max(hi, count)
			}
			require.Equal(t, heads, next)
			require.LessOrEqual(t, hi-lo, 1)
		}
	}
	f, c := HeadRange(4, 2, 2)
	assert.Equal(t, [2]int{0, 0}, [2]int{f, c}, "rank out of range")
}

// planAll plans r on every rank of counts, with inputs made by input(rank).
func planAll(t *testing.T, op ptx.Op, heads, n int, counts []int, input func(rank int) Tensor) []opPlan {
	t.Helper()
	ts := newTokenSet(counts)
	var ps []opPlan
	for rank := range counts {
		r := request{op: op, n: n, heads: heads}
		for k := range n {
			r.xs[k] = input(rank)
			r.xs[k].Ptr += uintptr(k) << 20
		}
		p, err := planGeneral(r, BFloat16, rank, len(counts), ts, 1<<30, widths2)
		require.NoError(t, err, "rank %d", rank)
		ps = append(ps, p)
	}
	return ps
}

// Every rank of an operation must launch alike: the same active blocks
// (groupBytes), captured walk (groupRow), signature and regions.
func requireAgree(t *testing.T, ps []opPlan) {
	t.Helper()
	for _, p := range ps[1:] {
		require.Equal(t, ps[0].groupBytes, p.groupBytes)
		require.Equal(t, ps[0].groupRow, p.groupRow)
		require.Equal(t, ps[0].sig, p.sig)
		require.Equal(t, ps[0].region, p.region)
		require.Equal(t, ps[0].heads, p.heads)
	}
}

func TestPlanGeneralUnevenHeads(t *testing.T) {
	counts := []int{5, 0, 7}
	const B, H, D = 2, 40, 128
	srh := planAll(t, ptx.OpSendRecvHeads, 0, 3, counts, func(r int) Tensor { return bf16(0x10000, B, counts[r], H, D) })
	requireAgree(t, srh)
	for r, p := range srh {
		_, mine := HeadRange(H, 3, r)
		assert.Equal(t, [4]int{B, 12, mine, D}, p.out)
		assert.Equal(t, int64(B*counts[r]*H*D*2/16), p.vectors, "every input byte once")
		assert.Equal(t, int64(H*D*2/16), p.units, "a token row")
		assert.Equal(t, int64(D*2/16), p.headUnits)
		assert.Equal(t, alignUp(B*12*14*D*2, outputAlign), p.region, "the largest output, rank 0's 14 heads")
	}
	assert.Equal(t, [MaxWorldSize + 1]int32{0, 14, 27, 40}, srh[0].heads)
	assert.Equal(t, int64(B*7*H*D*2*3), srh[0].groupBytes, "the largest rank's walk of 3 tensors")
	assert.Equal(t, int64(B*H*D*2*3), srh[0].groupRow)
	assert.True(t, srh[0].spread, "every rank takes the general entries")
	gh := planAll(t, ptx.OpGatherHeads, H, 2, counts, func(r int) Tensor {
		_, mine := HeadRange(H, 3, r)
		return bf16(0x10000, B, 12, mine, D)
	})
	requireAgree(t, gh)
	for r, p := range gh {
		assert.Equal(t, [4]int{B, counts[r], H, D}, p.out)
		assert.Equal(t, alignUp(B*7*H*D*2, outputAlign), p.region, "the largest output: 7 tokens")
	}
	hag := planAll(t, ptx.OpHeadAllGather, H, 1, counts, func(r int) Tensor {
		_, mine := HeadRange(H, 3, r)
		return bf16(0x10000, B, 12, mine, D)
	})
	requireAgree(t, hag)
	assert.True(t, hag[0].walkTotal)
	assert.Equal(t, [4]int{B, 12, H, D}, hag[2].out)
}

// One dense tensor with divisible heads plans as the plain entries do, so
// ranks whose inputs differ in stride (general on one, plain on another)
// still launch alike.
func TestPlanGeneralMatchesPlain(t *testing.T) {
	counts := []int{3, 6}
	ts := newTokenSet(counts)
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads} {
		x := bf16(0x10000, 2, 6, 8, 64)
		if op == ptx.OpGatherHeads {
			x = bf16(0x10000, 2, 9, 4, 64)
		}
		plain, err := planOp(op, x, BFloat16, 1, 2, ts, 1<<30, widths2)
		require.NoError(t, err)
		gen, err := planGeneral(single(op, x), BFloat16, 1, 2, ts, 1<<30, widths2)
		require.NoError(t, err)
		assert.Equal(t, plain.out, gen.out, "%s", op)
		assert.Equal(t, plain.groupBytes, gen.groupBytes, "%s", op)
		assert.Equal(t, plain.groupRow, gen.groupRow, "%s", op)
		assert.Equal(t, plain.sig, gen.sig, "%s", op)
		assert.Equal(t, plain.shapeSig, gen.shapeSig, "%s", op)
		assert.Equal(t, plain.vectors, gen.vectors, "%s", op)
		assert.Equal(t, plain.width, gen.width, "%s", op)
	}
}

func TestPlanGeneralStrided(t *testing.T) {
	ts := newTokenSet([]int{4, 4})
	x := bf16(0x10000, 1, 4, 8, 64)
	x.RowStride = 3 * 8 * 64
	r := request{op: ptx.OpSendRecvHeads, n: 3}
	for k := range 3 {
		r.xs[k] = x
		r.xs[k].Ptr += uintptr(k * 8 * 64 * 2)
	}
	require.True(t, r.general(2))
	p, err := planGeneral(r, BFloat16, 0, 2, ts, 1<<30, widths2)
	require.NoError(t, err)
	assert.Equal(t, int64(3*8*64*2/16), p.inRow)
	assert.Equal(t, 16, p.width)
	assert.NotEqual(t, generalSignature(ptx.OpSendRecvHeads, 1, 8, 64, 2, 1), p.shapeSig, "the tensor count is in the signature")

	// A stride of an odd number of elements allows only element-wide copies.
	x.RowStride = 8*64 + 1
	p, err = planGeneral(single(ptx.OpSendRecvHeads, x), BFloat16, 0, 2, ts, 1<<30, widths2)
	require.NoError(t, err)
	assert.Equal(t, 2, p.width)
	assert.Equal(t, int64(8*64+1), p.inRow)
	assert.Equal(t, int64((3*(8*64+1)+8*64)*2), api.Span(x), "span: three gaps of one element")
}

func TestPlanGeneralErrors(t *testing.T) {
	ts := newTokenSet([]int{4, 4, 4})
	x := bf16(0x10000, 1, 4, 8, 64)
	five := request{op: ptx.OpSendRecvHeads, n: 5}
	cases := []struct {
		name string
		r    request
		cap  int64
		want error
	}{
		{"five tensors", five, 1 << 30, ErrShape},
		{"shapes differ", request{op: ptx.OpSendRecvHeads, n: 2, xs: [maxTensors]Tensor{x, bf16(0x20000, 1, 4, 8, 32)}}, 1 << 30, ErrShape},
		{"strides differ", request{op: ptx.OpSendRecvHeads, n: 2, xs: [maxTensors]Tensor{x, func() Tensor { y := x; y.RowStride = 1024; return y }()}}, 1 << 30, ErrShape},
		{"stride under H*D", single(ptx.OpSendRecvHeads, func() Tensor { y := x; y.RowStride = 100; return y }()), 1 << 30, ErrShape},
		{"fewer heads than ranks", single(ptx.OpSendRecvHeads, bf16(0x10000, 1, 4, 2, 64)), 1 << 30, ErrShape},
		{"gather: heads not this rank's share", request{op: ptx.OpGatherHeads, n: 1, heads: 8, xs: [maxTensors]Tensor{bf16(0x10000, 1, 12, 2, 64)}}, 1 << 30, ErrShape},
		{"gather: tokens", request{op: ptx.OpGatherHeads, n: 1, heads: 8, xs: [maxTensors]Tensor{bf16(0x10000, 1, 4, 3, 64)}}, 1 << 30, ErrTokens},
		{"packed over capacity", request{op: ptx.OpSendRecvHeads, n: 2, xs: [maxTensors]Tensor{x, x}}, 12*3*64*2*2 - 1, ErrCapacity},
		{"wrong dtype", single(ptx.OpHeadAllGather, fp8(0x10000, 1, 12, 3, 64)), 1 << 30, ErrDType},
	}
	for _, c := range cases {
		_, err := planGeneral(c.r, BFloat16, 0, 3, ts, c.cap, widths2)
		assert.ErrorIs(t, err, c.want, c.name)
	}
	// Exactly at capacity: the last tensor needs no padding.
	r := request{op: ptx.OpSendRecvHeads, n: 2, xs: [maxTensors]Tensor{x, x}}
	p, err := planGeneral(r, BFloat16, 0, 3, ts, 1<<30, widths2)
	require.NoError(t, err)
	_, err = planGeneral(r, BFloat16, 0, 3, ts, p.region+p.outBytes, widths2)
	assert.NoError(t, err)
	_, err = planGeneral(r, BFloat16, 0, 3, ts, p.region+p.outBytes-1, widths2)
	assert.ErrorIs(t, err, ErrCapacity)
}

// TestSpreadAmongSharers: ranks that share a GPU divide generalSpread
// among themselves, counted alike on every rank from the handles.
func TestSpreadAmongSharers(t *testing.T) {
	for sharers, want := range map[int]int64{0: 4, 1: 4, 2: 2, 3: 1, 8: 1} {
		assert.Equal(t, want, spreadFor(sharers), "%d ranks on a GPU", sharers)
	}
	gpu := func(id string) handle {
		var h handle
		copy(h.BusID[:], id)
		return h
	}
	assert.Equal(t, 1, mostOnOneGPU([]handle{gpu("0000:18:00.0"), gpu("0000:2a:00.0")}))
	assert.Equal(t, 2, mostOnOneGPU([]handle{gpu("0000:18:00.0"), gpu("0000:2a:00.0"), gpu("0000:18:00.0")}))
	assert.Equal(t, 4, mostOnOneGPU([]handle{gpu("a"), gpu("a"), gpu("a"), gpu("a")}))
}
