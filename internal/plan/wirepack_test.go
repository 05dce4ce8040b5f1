package plan_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// rowCodes is a stand-in for the fp8 pack of one row of 16-bit elements on
// the host: a code per element (its low byte) and a scale byte that
// depends on every byte of the row, so that a row moved whole to the wrong
// place, or split, shows in either.
func rowCodes(row []byte) (codes []byte, scale byte) {
	codes = make([]byte, len(row)/2)
	scale = 0x5A
	for i := range codes {
		codes[i] = row[2*i]
		scale = scale*31 + row[2*i] ^ row[2*i+1]
	}
	return codes, scale
}

// packArea lays rows (dense [rows, 2*d] bytes per tensor, in the input's
// order) out as the pack entry would: tensor k's codes at k*CodeRegion,
// its scale bytes at ScaleOff + k*ScaleRegion.
func packArea(w plan.WirePack, tensors [][]byte, d int) []byte {
	area := make([]byte, w.Bytes)
	for k, b := range tensors {
		for i := range int(w.Rows) {
			codes, scale := rowCodes(b[i*2*d : (i+1)*2*d])
			copy(area[int64(k)*w.CodeRegion+int64(i*d):], codes)
			area[w.ScaleOff+int64(k)*w.ScaleRegion+int64(i)] = scale
		}
	}
	return area
}

// TestWireBoxes moves packed rows with WireBoxes on the host and checks
// that every rank's staging area holds, at each output row, the codes and
// scale byte of the row the reference puts there: every operation, uneven
// and zero token counts, uneven heads, strided inputs (the pack area is
// dense whatever the stride), packed tensors: the cases of opCases with
// 16-bit elements, which the wire carries.
func TestWireBoxes(t *testing.T) {
	for _, c := range opCases {
		if c.es != 2 {
			continue
		}
		P := len(c.tokens)
		ts := plan.NewTokens(c.tokens)
		eachOp(t, c, func(t *testing.T, op ptx.Op, rs []plan.Request, dense, wants [][][]byte) {
			halves := newHalves(P)
			plans := make([]plan.Plan, P)
			packs := make([][]plan.WirePack, P) // [on rank][of rank]
			for rank, r := range rs {
				env := plan.Env{DType: api.BFloat16, Wire: api.WireE4M3, Rank: rank, World: P,
					Layout: plan.Layout{DataBytes: 1 << 20}, Buf: 1 << 40, Widths: []int{2}}
				var err error
				plans[rank], err = plan.Make(r, env, ts, 0)
				require.NoError(t, err)
				packs[rank] = make([]plan.WirePack, P)
				for q := range P {
					packs[rank][q] = plan.NewWirePack(&r, q, P, ts)
				}
				w := packs[rank][rank]
				require.Equal(t, int(w.Rows), rowsOf(dense[rank][0], c.d), "the pack holds every input row")
				area := packArea(w, dense[rank], c.d)
				cs := plan.WireBoxes(nil, &r, &plans[rank], w, rank, P, ts)
				applyCopies(cs, [][]byte{area, area, area, area}, halves)
			}
			for on := range P { // every rank lays out every rank's area alike
				require.Equal(t, packs[on], packs[(on+1)%P])
			}
			for q, p := range plans {
				for k := range c.tensors {
					want := wants[k][q]
					for i := range rowsOf(want, c.d) {
						codes, scale := rowCodes(want[i*2*c.d : (i+1)*2*c.d])
						at := p.StageOff + int64(k)*p.StageRegion + int64(i*c.d)
						require.Equal(t, codes, halves[q][at:at+int64(c.d)], "rank %d tensor %d row %d: codes", q, k, i)
						require.Equal(t, scale, halves[q][p.ScaleOff+int64(k)*p.ScaleRegion+int64(i)], "rank %d tensor %d row %d: scale", q, k, i)
					}
				}
			}
		})
	}
}

// rowsOf is the rows of d 16-bit elements in b.
func rowsOf(b []byte, d int) int { return len(b) / (2 * d) }

// opData is rank's input of op under s (dense, in its own row order), its
// shape, and the reference's outputs of every rank, from inputs seeded by
// seed.
func opData(t *testing.T, s ref.Shape, op ptx.Op, rank int, seed uint64) (local []byte, shape [4]int, want [][]byte) {
	t.Helper()
	P := len(s.Tokens)
	in := make([][]byte, P)
	for q := range P {
		in[q] = make([]byte, s.RankInputBytes(q))
		ref.FillRandom(in[q], seed, q)
	}
	var err error
	switch op {
	case ptx.OpSendRecvHeads:
		want, err = ref.SendRecvHeads(s, in)
		local, shape = in[rank], [4]int{s.Batch, s.Tokens[rank], s.Heads, s.HeadDim}
	case ptx.OpAllGather:
		want, err = ref.AllGather(s, in)
		local, shape = in[rank], [4]int{s.Batch, s.Tokens[rank], s.Heads, s.HeadDim}
	default: // the head shards SendRecvHeads makes are the input
		shards, e := ref.SendRecvHeads(s, in)
		require.NoError(t, e)
		_, mine := plan.HeadRange(s.Heads, P, rank)
		local, shape = shards[rank], [4]int{s.Batch, plan.NewTokens(s.Tokens).Total(), mine, s.HeadDim}
		if op == ptx.OpGatherHeads {
			want = in
		} else {
			want, err = ref.AllGather(s, in)
		}
	}
	require.NoError(t, err)
	return local, shape, want
}
