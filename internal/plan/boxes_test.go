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

// opCase is a case of the copy plans' tests: token counts, batch, heads,
// head size and element size, extra elements per token row of the inputs,
// tensors packed.
type opCase struct {
	tokens       []int
	b, h, d, es  int
	pad, tensors int
}

// eachOp runs f in a subtest per operation of c (AllGather only for one
// tensor) with every rank's request (rs[rank]: tensor k's input from seed
// 100*k+7, with c.pad's token stride), its inputs' rows dense
// (dense[rank][k]) and the reference's outputs (wants[k][rank]).
func eachOp(t *testing.T, c opCase, f func(t *testing.T, op ptx.Op, rs []plan.Request, dense, wants [][][]byte)) {
	s := ref.Shape{Batch: c.b, Heads: c.h, HeadDim: c.d, ElemSize: c.es, Tokens: c.tokens}
	require.NoError(t, s.Validate())
	P := len(c.tokens)
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpGatherHeads, ptx.OpAllGather, ptx.OpHeadAllGather} {
		if op == ptx.OpAllGather && c.tensors > 1 {
			continue
		}
		t.Run(fmt.Sprintf("%s/%v/h%d/pad%d/x%d", op, c.tokens, c.h, c.pad, c.tensors), func(t *testing.T) {
			rs, dense, wants := make([]plan.Request, P), make([][][]byte, P), make([][][]byte, c.tensors)
			for rank := range P {
				rs[rank].Op, rs[rank].N, rs[rank].Heads = op, c.tensors, c.h
				dense[rank] = make([][]byte, c.tensors)
				for k := range c.tensors {
					var shape [4]int
					dense[rank][k], shape, wants[k] = opData(t, s, op, rank, uint64(100*k+7))
					stride := 0
					if c.pad > 0 {
						stride = shape[2]*shape[3] + c.pad
					}
					var err error
					rs[rank].Xs[k], err = plan.NewInput(0x10000, shape, stride, c.es)
					require.NoError(t, err)
				}
			}
			f(t, op, rs, dense, wants)
		})
	}
}

// newHalves is a data half of 1 MiB for each of P ranks.
func newHalves(P int) [][]byte {
	halves := make([][]byte, P)
	for q := range halves {
		halves[q] = make([]byte, 1<<20)
	}
	return halves
}

// opCases are the copy plans' tests' cases: uneven and zero token counts,
// uneven heads, strided inputs, packed tensors, both element sizes.
var opCases = []opCase{
	{[]int{3, 5}, 2, 4, 8, 2, 0, 1},
	{[]int{4, 0, 7}, 1, 40, 4, 2, 0, 1},
	{[]int{2, 3, 1, 0, 5}, 3, 7, 2, 2, 3, 2},
	{[]int{6, 6, 6, 6}, 1, 8, 16, 2, 8, 3},
	{[]int{0, 0, 9}, 2, 5, 3, 1, 0, 4},
	{[]int{5}, 1, 3, 8, 2, 1, 1},
}

// TestCopyPlans moves every operation's bytes with the copy plans on the
// host and compares every rank's output with the reference, in every case
// of opCases.
func TestCopyPlans(t *testing.T) {
	for _, c := range opCases {
		P := len(c.tokens)
		ts := plan.NewTokens(c.tokens)
		dt := map[int]api.DType{1: api.Float8E4M3, 2: api.BFloat16}[c.es]
		eachOp(t, c, func(t *testing.T, op ptx.Op, rs []plan.Request, dense, wants [][][]byte) {
			halves := newHalves(P)
			plans := make([]plan.Plan, P)
			for rank, r := range rs {
				inputs := make([][]byte, c.tensors)
				for k := range inputs {
					row := r.Xs[k].Shape[2] * c.d * c.es
					inputs[k] = strided(dense[rank][k], row, row+c.pad*c.es)
				}
				env := plan.Env{DType: dt, Rank: rank, World: P, Layout: plan.Layout{DataBytes: 1 << 20}, Widths: []int{c.es}}
				var err error
				if op == ptx.OpAllGather {
					plans[rank], err = plan.Plain(r, env, ts)
				} else {
					plans[rank], err = plan.General(r, env, ts)
				}
				require.NoError(t, err)
				applyCopies(plan.Boxes(nil, &r, &plans[rank], rank, P, ts, int64(c.es)), inputs, halves)
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
