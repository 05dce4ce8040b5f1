package plan

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// The table says what the embedded kernels hold: an operation has plain,
// general or wire entries exactly where its row says so, and every
// operation the kernels name has a row.
func TestOperationsMatchKernels(t *testing.T) {
	for _, c := range []struct {
		kind string
		ops  []ptx.Op
		has  func(o Operation) bool
	}{
		{"plain", ptx.Ops, func(o Operation) bool { return o.Plain }},
		{"general", ptx.GeneralOps, func(o Operation) bool { return o.General }},
		{"wire", ptx.WireOps, func(o Operation) bool { return o.Wire }},
	} {
		require.NotEmpty(t, c.ops, c.kind)
		for _, o := range Operations {
			assert.Equal(t, c.has(o), slices.Contains(c.ops, o.Op), "%s: %s entries", o.Name, c.kind)
		}
		for _, op := range c.ops {
			assert.NotNil(t, Lookup(op), "the kernels' %s has %s entries and no row", op, c.kind)
		}
	}
}

// Every row is whole: a name, a code no other row has (the signature's
// numbers never change: ranks of two builds must agree), the walks its
// entries need and a box.
func TestOperationRows(t *testing.T) {
	codes := map[ptx.Op]uint64{ptx.OpSendRecvHeads: 1, ptx.OpGatherHeads: 2, ptx.OpAllGather: 3, ptx.OpHeadAllGather: 4}
	seen := map[uint64]string{}
	for i := range Operations {
		o := &Operations[i]
		assert.NotEmpty(t, o.Name, o.Op)
		if want, ok := codes[o.Op]; ok {
			assert.Equal(t, want, o.Code, "%s's code is in every signature", o.Name)
		}
		assert.NotZero(t, o.Code, o.Name)
		assert.NotContains(t, seen, o.Code, "%s shares its code with %s", o.Name, seen[o.Code])
		seen[o.Code] = o.Name
		assert.Equal(t, o.Plain, o.plain != nil, "%s: plain entries and a plain walk", o.Name)
		assert.NotNil(t, o.general, o.Name)
		assert.NotNil(t, o.box, o.Name)
		assert.Same(t, o, Lookup(o.Op))
		assert.Equal(t, o.Code, opCode(o.Op))
	}
	assert.Nil(t, Lookup("reduce_scatter"))
	assert.Zero(t, opCode("reduce_scatter"))
}

// What the rows' shares decide, for each operation: the tokens a
// captured input must hold, the heads in all, the output's shape, and
// which requests every rank takes to the general entries.
func TestOperationShares(t *testing.T) {
	ts := NewTokens([]int{3, 5})
	for _, c := range []struct {
		op        ptx.Op
		x         tensor
		heads     int
		need, all int
		out       [4]int
		shared    bool
	}{
		{ptx.OpSendRecvHeads, bf16(0x1000, 2, 5, 6, 8), 0, 5, 6, [4]int{2, 8, 3, 8}, false},
		{ptx.OpSendRecvHeads, bf16(0x1000, 2, 5, 7, 8), 0, 5, 7, [4]int{2, 8, 3, 8}, true},
		{ptx.OpGatherHeads, bf16(0x1000, 2, 8, 3, 8), 0, 8, 6, [4]int{2, 5, 6, 8}, false},
		{ptx.OpGatherHeads, bf16(0x1000, 2, 8, 3, 8), 7, 8, 7, [4]int{2, 5, 7, 8}, true},
		{ptx.OpAllGather, bf16(0x1000, 2, 5, 7, 8), 0, 5, 7, [4]int{2, 8, 7, 8}, false},
		{ptx.OpHeadAllGather, bf16(0x1000, 2, 8, 3, 8), 6, 8, 6, [4]int{2, 8, 6, 8}, true},
	} {
		r := request(t, c.op, c.heads, c.x)
		need, ok := r.Fits(ts, 1)
		assert.Equal(t, c.need, need, "%s: tokens to hold", c.op)
		assert.True(t, ok, c.op)
		assert.Equal(t, c.all, r.totalHeads(2), "%s: heads in all", c.op)
		assert.Equal(t, c.shared, r.sharedGeneral(2), "%s of %v, %d heads: shared general", c.op, c.x.Shape, c.heads)
		env := envOf(api.BFloat16, 1, 2, 1<<30, widths2)
		p, err := Make(r, env, ts, 0)
		require.NoError(t, err, c.op)
		assert.Equal(t, c.out, p.Out, "%s: output shape", c.op)
		assert.Equal(t, c.shared, p.General, c.op)
	}
}

// Make refuses an operation there is no row of before it plans anything;
// an operation without a general form refuses the general entries.
func TestMakeRefusesUnknownOperations(t *testing.T) {
	ts := NewTokens([]int{4, 4})
	r := request(t, "reduce_scatter", 0, bf16(0x10000, 1, 4, 8, 64))
	_, err := Make(r, makeEnv(), ts, 0)
	assert.ErrorIs(t, err, api.ErrNotSupported)
	assert.ErrorContains(t, err, "unknown operation")
	r.Op = ptx.OpAllGather
	env := makeEnv()
	_, err = general(&r, &env, ts, true)
	assert.ErrorIs(t, err, api.ErrNotSupported, "AllGather has no general entries")
	r.Op = ptx.OpHeadAllGather
	_, err = plain(&r, &env, ts)
	assert.ErrorIs(t, err, api.ErrNotSupported, "HeadAllGather has no plain entries")
}
