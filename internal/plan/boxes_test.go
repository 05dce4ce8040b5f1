package plan_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// applyCopies runs rank's copies on host memory: from its inputs (each
// with its token stride, in elements) into every rank's data half, as
// enqueueCopies does (a linear copy where both sides are contiguous).
func applyCopies(cs []plan.Box, inputs [][]byte, halves [][]byte) {
	for _, c := range cs {
		if c.Linear() {
			n := c.Width * c.Rows * c.Depth
			copy(halves[c.Peer][c.Dst.Off:c.Dst.Off+n], inputs[c.Tensor][c.Src.Off:c.Src.Off+n])
			continue
		}
		for z := range c.Depth {
			for y := range c.Rows {
				from := c.Src.Off + (z*c.Src.Height+y)*c.Src.Pitch
				to := c.Dst.Off + (z*c.Dst.Height+y)*c.Dst.Pitch
				copy(halves[c.Peer][to:to+c.Width], inputs[c.Tensor][from:from+c.Width])
			}
		}
	}
}

// strided lays the dense [rows, row] tensor b out with stride bytes from
// one row to the next (the gaps filled with 0xEE).
func strided(b []byte, row, stride int) []byte {
	if row == 0 || stride == row {
		return b
	}
	rows := len(b) / row
	out := make([]byte, rows*stride)
	for i := range out {
		out[i] = 0xEE
	}
	for i := range rows {
		copy(out[i*stride:], b[i*row:(i+1)*row])
	}
	return out
}

// TestCopyPlans moves every operation's bytes with the copy plans on the
// host and compares every rank's output with the reference: uneven and
// zero token counts, uneven heads, strided inputs, packed tensors.
func TestCopyPlans(t *testing.T) {
	cases := []struct {
		tokens       []int
		b, h, d, es  int
		pad, tensors int // extra elements per token row of the inputs; tensors packed
	}{
		{[]int{3, 5}, 2, 4, 8, 2, 0, 1},
		{[]int{4, 0, 7}, 1, 40, 4, 2, 0, 1},
		{[]int{2, 3, 1, 0, 5}, 3, 7, 2, 1, 3, 2},
		{[]int{6, 6, 6, 6}, 1, 8, 16, 2, 8, 3},
		{[]int{0, 0, 9}, 2, 5, 3, 1, 0, 4},
		{[]int{5}, 1, 3, 8, 2, 1, 1},
	}
	for _, c := range cases {
		P := len(c.tokens)
		s := ref.Shape{Batch: c.b, Heads: c.h, HeadDim: c.d, ElemSize: c.es, Tokens: c.tokens}
		require.NoError(t, s.Validate())
		ts := plan.NewTokens(c.tokens)
		T := ts.Total()
		dt := map[int]api.DType{1: api.Float8E4M3, 2: api.BFloat16}[c.es]
		for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather, ptx.OpHeadAllGather} {
			if op == ptx.OpAllGather && c.tensors > 1 {
				continue
			}
			t.Run(fmt.Sprintf("%s/%v/h%d/pad%d/x%d", op, c.tokens, c.h, c.pad, c.tensors), func(t *testing.T) {
				halves := make([][]byte, P)
				for q := range halves {
					halves[q] = make([]byte, 1<<20)
				}
				wants := make([][][]byte, c.tensors) // [tensor][rank]
				var plans []plan.Plan
				for rank := range P {
					var r plan.Request
					r.Op, r.N, r.Heads = op, c.tensors, c.h
					inputs := make([][]byte, c.tensors)
					for k := range c.tensors {
						in := make([][]byte, P)
						for q := range P {
							in[q] = make([]byte, s.RankInputBytes(q))
							ref.FillRandom(in[q], uint64(100*k+7), q)
						}
						var local []byte
						var shape [4]int
						var err error
						switch op {
						case ptx.OpSendRecvHeads:
							wants[k], err = ref.SendRecvHeads(s, in)
							local, shape = in[rank], [4]int{c.b, c.tokens[rank], c.h, c.d}
						case ptx.OpAllGather:
							wants[k], err = ref.AllGather(s, in)
							local, shape = in[rank], [4]int{c.b, c.tokens[rank], c.h, c.d}
						default: // the head shards SendRecvHeads makes are the input
							shards, e := ref.SendRecvHeads(s, in)
							require.NoError(t, e)
							_, mine := plan.HeadRange(c.h, P, rank)
							local, shape = shards[rank], [4]int{c.b, T, mine, c.d}
							if op == ptx.OpGatherHeads {
								wants[k] = in
							} else {
								wants[k], err = ref.AllGather(s, in)
							}
						}
						require.NoError(t, err)
						row, stride := shape[2]*shape[3], 0
						if c.pad > 0 {
							stride = row + c.pad
						}
						r.Xs[k], err = plan.NewInput(0x10000, shape, stride, c.es)
						require.NoError(t, err)
						inputs[k] = strided(local, row*c.es, (row+c.pad)*c.es)
					}
					env := plan.Env{DType: dt, Rank: rank, World: P, Layout: plan.Layout{DataBytes: 1 << 20}, Widths: []int{c.es}}
					var p plan.Plan
					var err error
					if op == ptx.OpAllGather {
						p, err = plan.Plain(r, env, ts)
					} else {
						p, err = plan.General(r, env, ts)
					}
					require.NoError(t, err)
					plans = append(plans, p)
					applyCopies(plan.Boxes(nil, &r, &p, rank, P, ts, int64(c.es)), inputs, halves)
				}
				for q := range P {
					for k := range c.tensors {
						off := int64(k) * plans[q].Region
						got := halves[q][off : off+plans[q].OutBytes]
						require.Equal(t, wants[k][q], got, "rank %d tensor %d", q, k)
					}
				}
			})
		}
	}
}
