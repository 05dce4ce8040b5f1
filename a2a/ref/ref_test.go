package ref

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seq returns the bytes from, from+1, ..., from+n-1.
func seq(from, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(from + i)
	}
	return b
}

// handCase is a small exchange whose expected outputs were worked out by hand
// from the formulas in the package documentation.
type handCase struct {
	name      string
	shape     Shape
	in        [][]byte // per-rank input of SendRecvHeads / AllGather
	sendRecv  [][]byte // expected SendRecvHeads output per rank
	allGather []byte   // expected AllGather output (same on every rank)
}

func handCases() []handCase {
	return []handCase{
		{
			// P=2, B=1, T=[1,2], H=2 (Hp=1), D=1, 1-byte elements.
			// in0[t0] = {h0:1, h1:2}; in1[t0] = {3, 4}, in1[t1] = {5, 6}.
			// out_q[p_r+t, 0] = in_r[t, q]: rank 0 gets head 0 of every
			// token in order (1, 3, 5), rank 1 gets head 1 (2, 4, 6).
			name:      "P2_T12_H2_D1",
			shape:     Shape{Batch: 1, Heads: 2, HeadDim: 1, ElemSize: 1, Tokens: []int{1, 2}},
			in:        [][]byte{{1, 2}, {3, 4, 5, 6}},
			sendRecv:  [][]byte{{1, 3, 5}, {2, 4, 6}},
			allGather: []byte{1, 2, 3, 4, 5, 6},
		},
		{
			// P=2, B=1, T=[1,1], H=4 (Hp=2), D=1: each rank receives two
			// adjacent heads per token.
			// in0[t0] = {1,2,3,4}; in1[t0] = {5,6,7,8}.
			// out0 = [tok0: h0,h1 of rank 0 | tok1: h0,h1 of rank 1] = 1,2,5,6.
			// out1 = [tok0: h2,h3 of rank 0 | tok1: h2,h3 of rank 1] = 3,4,7,8.
			name:      "P2_T11_H4_D1",
			shape:     Shape{Batch: 1, Heads: 4, HeadDim: 1, ElemSize: 1, Tokens: []int{1, 1}},
			in:        [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}},
			sendRecv:  [][]byte{{1, 2, 5, 6}, {3, 4, 7, 8}},
			allGather: []byte{1, 2, 3, 4, 5, 6, 7, 8},
		},
		{
			// P=2, B=2, T=[1,1], H=2 (Hp=1), D=2, 1-byte elements; a chunk
			// is 2 bytes (one head).
			// in0 = b0:{h0:1,2 h1:3,4} b1:{h0:5,6 h1:7,8}
			// in1 = b0:{h0:9,10 h1:11,12} b1:{h0:13,14 h1:15,16}
			// out0 = b0:[tok0 = in0 b0 h0 | tok1 = in1 b0 h0] b1:[in0 b1 h0 | in1 b1 h0]
			// out1 = the same with h1.
			// AllGather = b0:[in0 b0 | in1 b0] b1:[in0 b1 | in1 b1].
			name:  "P2_B2_T11_H2_D2",
			shape: Shape{Batch: 2, Heads: 2, HeadDim: 2, ElemSize: 1, Tokens: []int{1, 1}},
			in: [][]byte{
				{1, 2, 3, 4, 5, 6, 7, 8},
				{9, 10, 11, 12, 13, 14, 15, 16},
			},
			sendRecv: [][]byte{
				{1, 2, 9, 10, 5, 6, 13, 14},
				{3, 4, 11, 12, 7, 8, 15, 16},
			},
			allGather: []byte{1, 2, 3, 4, 9, 10, 11, 12, 5, 6, 7, 8, 13, 14, 15, 16},
		},
		{
			// P=3, B=1, T=[2,0,1] (rank 1 holds no tokens), H=3 (Hp=1),
			// D=1, 2-byte elements; a chunk is 2 bytes.
			// in0 = t0:{h0:1,2 h1:3,4 h2:5,6} t1:{h0:7,8 h1:9,10 h2:11,12}
			// in1 = empty
			// in2 = t0:{h0:13,14 h1:15,16 h2:17,18}
			// T=3, prefixes 0,2,2: out_q = [in0 t0 hq | in0 t1 hq | in2 t0 hq].
			name:  "P3_T201_H3_D1_E2",
			shape: Shape{Batch: 1, Heads: 3, HeadDim: 1, ElemSize: 2, Tokens: []int{2, 0, 1}},
			in:    [][]byte{seq(1, 12), {}, seq(13, 6)},
			sendRecv: [][]byte{
				{1, 2, 7, 8, 13, 14},
				{3, 4, 9, 10, 15, 16},
				{5, 6, 11, 12, 17, 18},
			},
			allGather: seq(1, 18),
		},
		{
			// P=1: every op is the identity.
			name:      "P1_B2_T2_H2_D1",
			shape:     Shape{Batch: 2, Heads: 2, HeadDim: 1, ElemSize: 1, Tokens: []int{2}},
			in:        [][]byte{seq(1, 8)},
			sendRecv:  [][]byte{seq(1, 8)},
			allGather: seq(1, 8),
		},
	}
}

func TestHandWorked(t *testing.T) {
	for _, tc := range handCases() {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.shape.Validate())

			got, err := SendRecvHeads(tc.shape, tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.sendRecv, got, "SendRecvHeads")

			back, err := GatherHeads(tc.shape, tc.sendRecv)
			require.NoError(t, err)
			require.Len(t, back, len(tc.in))
			for r := range tc.in {
				assert.Equal(t, tc.in[r], back[r], "GatherHeads rank %d", r)
			}

			all, err := AllGather(tc.shape, tc.in)
			require.NoError(t, err)
			require.Len(t, all, tc.shape.World())
			for q := range all {
				assert.Equal(t, tc.allGather, all[q], "AllGather rank %d", q)
			}
		})
	}
}

func TestShapeSizes(t *testing.T) {
	s := Shape{Batch: 2, Heads: 6, HeadDim: 4, ElemSize: 2, Tokens: []int{5, 0, 2}}
	require.NoError(t, s.Validate())
	assert.Equal(t, 3, s.World())
	assert.Equal(t, 7, s.TotalTokens())
	assert.Equal(t, 2, s.HeadsPerRank())
	assert.Equal(t, []int{0, 5, 5, 7}, []int{s.Prefix(0), s.Prefix(1), s.Prefix(2), s.Prefix(3)})
	assert.Equal(t, 2*5*6*4*2, s.RankInputBytes(0))
	assert.Equal(t, 0, s.RankInputBytes(1))
	assert.Equal(t, 2*2*6*4*2, s.RankInputBytes(2))
	assert.Equal(t, 2*7*2*4*2, s.HeadShardBytes())
	assert.Equal(t, 2*7*6*4*2, s.GatheredBytes())
}

// randomShape draws a shape from the ranges the round-trip tests cover.
func randomShape(rng *rand.Rand) Shape {
	p := 1 + rng.IntN(8)
	s := Shape{
		Batch:    1 + rng.IntN(4),
		Heads:    p * (1 + rng.IntN(3)),
		HeadDim:  []int{1, 3, 8}[rng.IntN(3)],
		ElemSize: 1 + rng.IntN(2),
		Tokens:   make([]int, p),
	}
	for r := range s.Tokens {
		s.Tokens[r] = rng.IntN(10)
	}
	if rng.IntN(2) == 0 {
		s.Heads = 1 + rng.IntN(3*p) // uneven heads, some ranks possibly with none
	}
	return s
}

// randomInputs returns per-rank inputs of size size(r) filled by FillRandom.
func randomInputs(s Shape, seed uint64, size func(r int) int) [][]byte {
	in := make([][]byte, s.World())
	for r := range in {
		in[r] = make([]byte, size(r))
		FillRandom(in[r], seed, r)
	}
	return in
}

// elem returns the ElemSize bytes of element [b, t, h, d] of a contiguous
// [B, tokens, heads, D] tensor. It works element by element, independently of
// the chunked copies in the package.
func elem(s Shape, buf []byte, b, t, h, d, tokens, heads int) []byte {
	i := (((b*tokens+t)*heads+h)*s.HeadDim + d) * s.ElemSize
	return buf[i : i+s.ElemSize]
}

// checkFormulas verifies the three ops element by element against the
// defining formulas.
func checkFormulas(t *testing.T, s Shape, in, sendRecv, gathered, all [][]byte) {
	t.Helper()
	P, H, T := s.World(), s.Heads, s.TotalTokens()
	for r := 0; r < P; r++ {
		Tr, pr := s.Tokens[r], s.Prefix(r)
		for b := 0; b < s.Batch; b++ {
			for tok := 0; tok < Tr; tok++ {
				for q := 0; q < P; q++ {
					hq, Hq := s.HeadRange(q)
					for h := 0; h < Hq; h++ {
						for d := 0; d < s.HeadDim; d++ {
							want := elem(s, in[r], b, tok, hq+h, d, Tr, H)
							if got := elem(s, sendRecv[q], b, pr+tok, h, d, T, Hq); string(got) != string(want) {
								t.Fatalf("%+v: SendRecvHeads out[%d][%d,%d,%d,%d] = %x, want %x", s, q, b, pr+tok, h, d, got, want)
							}
							if got := elem(s, gathered[r], b, tok, hq+h, d, Tr, H); string(got) != string(want) {
								t.Fatalf("%+v: GatherHeads out[%d][%d,%d,%d,%d] = %x, want %x", s, r, b, tok, hq+h, d, got, want)
							}
						}
					}
					for h := 0; h < H; h++ {
						for d := 0; d < s.HeadDim; d++ {
							want := elem(s, in[r], b, tok, h, d, Tr, H)
							if got := elem(s, all[q], b, pr+tok, h, d, T, H); string(got) != string(want) {
								t.Fatalf("%+v: AllGather out[%d][%d,%d,%d,%d] = %x, want %x", s, q, b, pr+tok, h, d, got, want)
							}
						}
					}
				}
			}
		}
	}
}

func TestRandomShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		s := randomShape(rng)
		require.NoError(t, s.Validate(), "%+v", s)
		in := randomInputs(s, uint64(i), s.RankInputBytes)

		sr, err := SendRecvHeads(s, in)
		require.NoError(t, err)
		require.Len(t, sr, s.World())
		for q := range sr {
			require.Len(t, sr[q], s.HeadShardBytesFor(q))
			require.LessOrEqual(t, len(sr[q]), s.HeadShardBytes(), "HeadShardBytes bounds every shard")
		}

		back, err := GatherHeads(s, sr)
		require.NoError(t, err)
		require.Equal(t, in, back, "round trip %+v", s)

		all, err := AllGather(s, in)
		require.NoError(t, err)
		require.Len(t, all, s.World())
		for q := range all {
			require.Len(t, all[q], s.GatheredBytes())
			require.Equal(t, all[0], all[q], "AllGather rank %d differs from rank 0, %+v", q, s)
		}
		if s.World() > 1 && s.GatheredBytes() > 0 {
			all[0][0]++
			require.NotEqual(t, all[0][0], all[1][0], "AllGather outputs share memory")
			all[0][0]--
		}

		checkFormulas(t, s, in, sr, back, all)

		// HeadAllGather of the head shards is AllGather of the inputs.
		heads, err := HeadAllGather(s, sr)
		require.NoError(t, err)
		require.Equal(t, all, heads, "HeadAllGather(SendRecvHeads) %+v", s)

		// The *For variants equal the matching slice of the full result,
		// writing every byte of a buffer that starts out dirty.
		for q := 0; q < s.World(); q++ {
			out := make([]byte, s.HeadShardBytesFor(q))
			for j := range out {
				out[j] = 0xEE
			}
			require.NoError(t, SendRecvHeadsFor(s, q, in, out))
			require.Equal(t, sr[q], out, "SendRecvHeadsFor rank %d", q)

			out = make([]byte, s.RankInputBytes(q))
			require.NoError(t, GatherHeadsFor(s, q, sr, out))
			require.Equal(t, back[q], out, "GatherHeadsFor rank %d", q)

			out = make([]byte, s.GatheredBytes())
			require.NoError(t, AllGatherFor(s, q, in, out))
			require.Equal(t, all[q], out, "AllGatherFor rank %d", q)

			out = make([]byte, s.GatheredBytes())
			require.NoError(t, HeadAllGatherFor(s, q, sr, out))
			require.Equal(t, all[q], out, "HeadAllGatherFor rank %d", q)
		}

		// Inputs are not modified.
		require.Equal(t, randomInputs(s, uint64(i), s.RankInputBytes), in)
	}
}

func TestValidation(t *testing.T) {
	good := Shape{Batch: 1, Heads: 4, HeadDim: 2, ElemSize: 2, Tokens: []int{1, 2}}
	require.NoError(t, good.Validate())
	with := func(f func(s *Shape)) Shape {
		s := good
		s.Tokens = append([]int(nil), good.Tokens...)
		f(&s)
		return s
	}
	bad := map[string]Shape{
		"zero batch":      with(func(s *Shape) { s.Batch = 0 }),
		"negative batch":  with(func(s *Shape) { s.Batch = -1 }),
		"zero heads":      with(func(s *Shape) { s.Heads = 0 }),
		"zero head dim":   with(func(s *Shape) { s.HeadDim = 0 }),
		"zero elem size":  with(func(s *Shape) { s.ElemSize = 0 }),
		"no ranks":        with(func(s *Shape) { s.Tokens = nil }),
		"negative tokens": with(func(s *Shape) { s.Tokens[1] = -1 }),
		"overflow":        with(func(s *Shape) { s.Tokens[0] = 1 << 62 }),
	}
	for name, s := range bad {
		t.Run(name, func(t *testing.T) {
			err := s.Validate()
			require.ErrorIs(t, err, ErrShape)
			assert.Regexp(t, "^ref: ", err.Error())

			// Every op rejects the shape before looking at the buffers.
			in := [][]byte{{}, {}}
			_, err = SendRecvHeads(s, in)
			assert.ErrorIs(t, err, ErrShape)
			_, err = GatherHeads(s, in)
			assert.ErrorIs(t, err, ErrShape)
			_, err = AllGather(s, in)
			assert.ErrorIs(t, err, ErrShape)
			assert.ErrorIs(t, SendRecvHeadsFor(s, 0, in, nil), ErrShape)
			assert.ErrorIs(t, GatherHeadsFor(s, 0, in, nil), ErrShape)
			assert.ErrorIs(t, AllGatherFor(s, 0, in, nil), ErrShape)
		})
	}
	assert.EqualError(t, with(func(s *Shape) { s.Tokens[1] = -1 }).Validate(),
		"ref: tokens[1] = -1 is negative: ref: invalid shape")
}

func TestBufferErrors(t *testing.T) {
	s := Shape{Batch: 1, Heads: 4, HeadDim: 2, ElemSize: 2, Tokens: []int{1, 2}}
	in := randomInputs(s, 7, s.RankInputBytes)        // 16 and 32 bytes
	shards := randomInputs(s, 7, s.HeadShardBytesFor) // 24 bytes each
	type op struct {
		name  string
		full  func(Shape, [][]byte) ([][]byte, error)
		for_  func(Shape, int, [][]byte, []byte) error
		in    [][]byte
		outSz func(r int) int
	}
	ops := []op{
		{"SendRecvHeads", SendRecvHeads, SendRecvHeadsFor, in, s.HeadShardBytesFor},
		{"GatherHeads", GatherHeads, GatherHeadsFor, shards, s.RankInputBytes},
		{"AllGather", AllGather, AllGatherFor, in, s.gatheredBytes},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			check := func(err error, contains ...string) {
				t.Helper()
				require.ErrorIs(t, err, ErrShape)
				assert.Regexp(t, "^ref: "+o.name+": ", err.Error())
				for _, c := range contains {
					assert.Contains(t, err.Error(), c)
				}
			}

			// Wrong slice count.
			_, err := o.full(s, o.in[:1])
			check(err, "got 1 input slices, want 2")
			_, err = o.full(s, append(o.in, nil))
			check(err, "got 3 input slices, want 2")
			check(o.for_(s, 0, nil, make([]byte, o.outSz(0))), "got 0 input slices, want 2")

			// Wrong input length, naming the rank and both lengths.
			short := [][]byte{o.in[0], o.in[1][:len(o.in[1])-1]}
			_, err = o.full(s, short)
			check(err, fmt.Sprintf("rank 1 input has %d bytes, want %d", len(o.in[1])-1, len(o.in[1])))
			long := [][]byte{append(append([]byte(nil), o.in[0]...), 0), o.in[1]}
			_, err = o.full(s, long)
			check(err, fmt.Sprintf("rank 0 input has %d bytes, want %d", len(o.in[0])+1, len(o.in[0])))

			// Destination rank out of range.
			check(o.for_(s, -1, o.in, nil), "rank -1 out of range [0, 2)")
			check(o.for_(s, 2, o.in, nil), "rank 2 out of range [0, 2)")

			// Wrong output length.
			for r := 0; r < 2; r++ {
				want := o.outSz(r)
				check(o.for_(s, r, o.in, make([]byte, want+1)),
					fmt.Sprintf("rank %d output has %d bytes, want %d", r, want+1, want))
				if want > 0 {
					check(o.for_(s, r, o.in, make([]byte, want-1)),
						fmt.Sprintf("rank %d output has %d bytes, want %d", r, want-1, want))
				}
				require.NoError(t, o.for_(s, r, o.in, make([]byte, want)))
			}
		})
	}
}

func TestFillRandom(t *testing.T) {
	// Pinned: changing the generator changes every golden file.
	b := make([]byte, 8)
	FillRandom(b, 1, 0)
	assert.Equal(t, []byte{0xa5, 0x11, 0xa3, 0x99, 0x54, 0xa0, 0xfa, 0x03}, b)

	fill := func(n int, seed uint64, rank int) []byte {
		b := make([]byte, n)
		FillRandom(b, seed, rank)
		return b
	}
	assert.Equal(t, fill(1000, 42, 3), fill(1000, 42, 3), "deterministic")
	assert.NotEqual(t, fill(64, 42, 3), fill(64, 42, 4), "rank changes bytes")
	assert.NotEqual(t, fill(64, 42, 3), fill(64, 43, 3), "seed changes bytes")
	assert.NotEqual(t, fill(64, 0, 0), fill(64, 0, 1), "seed 0")
	assert.Equal(t, fill(1000, 9, 2)[:37], fill(37, 9, 2), "shorter buffer is a prefix")

	// Never zero, and the byte values are spread out.
	counts := make([]int, 256)
	for seed := uint64(0); seed < 8; seed++ {
		for rank := -1; rank < 8; rank++ {
			for _, v := range fill(4096, seed, rank) {
				counts[v]++
			}
		}
	}
	assert.Zero(t, counts[0], "zero byte produced")
	for v := 1; v < 256; v++ {
		assert.Greater(t, counts[v], 0, "byte %d never produced", v)
	}
	for n := 1; n <= 16; n++ {
		assert.NotEqual(t, make([]byte, n), fill(n, 0, 0))
	}
	FillRandom(nil, 1, 0) // must not panic
}

func TestErrShapeWrapped(t *testing.T) {
	err := Shape{}.Validate()
	require.Error(t, err)
	assert.True(t, errors.Is(err, ErrShape))
}

// TestHeadRange checks the split of H heads over P ranks: contiguous
// ranges in rank order that tile [0, H), counts differing by at most one,
// the larger ones first, and H/P each when P divides H.
func TestHeadRange(t *testing.T) {
	for _, tc := range []struct {
		heads, world int
		want         []int
	}{
		{40, 3, []int{14, 13, 13}},
		{40, 6, []int{7, 7, 7, 7, 6, 6}},
		{24, 5, []int{5, 5, 5, 5, 4}},
		{24, 8, []int{3, 3, 3, 3, 3, 3, 3, 3}},
		{2, 3, []int{1, 1, 0}},
		{1, 1, []int{1}},
	} {
		s := Shape{Batch: 1, Heads: tc.heads, HeadDim: 1, ElemSize: 1, Tokens: make([]int, tc.world)}
		next := 0
		for q, want := range tc.want {
			first, count := s.HeadRange(q)
			assert.Equal(t, next, first, "H=%d P=%d rank %d", tc.heads, tc.world, q)
			assert.Equal(t, want, count, "H=%d P=%d rank %d", tc.heads, tc.world, q)
			next += count
		}
		assert.Equal(t, tc.heads, next, "H=%d P=%d: the ranges tile the heads", tc.heads, tc.world)
		assert.Equal(t, tc.want[0], s.HeadsPerRank(), "HeadsPerRank is the largest count")
	}
	assert.Panics(t, func() { Shape{Heads: 4, Tokens: []int{1, 1}}.HeadRange(2) })
}
