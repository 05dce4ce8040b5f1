package plan

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// ---- Layout ---------------------------------------------------------------

func TestBufferLayout(t *testing.T) {
	caps := []int64{0, 1, 2, 255, 256, 257, 4095, 4096, 1 << 20, 3<<20 + 7, 4096 * 1024 * 2, MaxDataBytes}
	for _, halves := range []int64{1, 2} {
		for _, c := range caps {
			l := NewLayout(c, halves)
			assert.Equal(t, c, l.DataBytes)
			for name, off := range map[string]int64{"halfBytes": l.HalfBytes, "signalOff": l.SignalOff, "stateOff": l.StateOff, "total": l.Total} {
				assert.Zero(t, off%RegionAlign, "capacity %d, %d halves: %s %d not %d-aligned", c, halves, name, off, RegionAlign)
			}
			if halves == 1 {
				assert.Zero(t, l.HalfBytes, "capacity %d: a single half has no second half", c)
			} else {
				// The second half starts after the first and holds a whole output.
				assert.GreaterOrEqual(t, l.HalfBytes, c, "capacity %d", c)
				assert.Less(t, l.HalfBytes, c+RegionAlign, "capacity %d", c)
			}
			// Each region follows the previous one with less than one alignment unit of padding.
			dataEnd := l.HalfBytes + c
			assert.GreaterOrEqual(t, l.SignalOff, dataEnd, "capacity %d, %d halves", c, halves)
			assert.Less(t, l.SignalOff, dataEnd+RegionAlign, "capacity %d, %d halves", c, halves)
			assert.GreaterOrEqual(t, l.StateOff, l.SignalOff+SignalAreaBytes, "capacity %d, %d halves", c, halves)
			assert.Less(t, l.StateOff, l.SignalOff+SignalAreaBytes+RegionAlign, "capacity %d, %d halves", c, halves)
			assert.GreaterOrEqual(t, l.Total, l.StateOff+StateBytes, "capacity %d, %d halves", c, halves)
			assert.Less(t, l.Total, l.StateOff+StateBytes+RegionAlign, "capacity %d, %d halves", c, halves)
			// init zeroes [signalOff, total) with 32-bit words.
			assert.Zero(t, (l.Total-l.SignalOff)%4, "capacity %d, %d halves", c, halves)
		}
	}

	assert.Equal(t, Layout{DataBytes: 0, SignalOff: 0, StateOff: 164096, Total: 164352}, NewLayout(0, 1))
	assert.Equal(t, Layout{DataBytes: 1, SignalOff: 256, StateOff: 164352, Total: 164608}, NewLayout(1, 1))
	assert.Equal(t, Layout{DataBytes: 256, SignalOff: 256, StateOff: 164352, Total: 164608}, NewLayout(256, 1))
	assert.Equal(t, Layout{DataBytes: 257, SignalOff: 512, StateOff: 164608, Total: 164864}, NewLayout(257, 1))

	assert.Equal(t, Layout{DataBytes: 0, HalfBytes: 0, SignalOff: 0, StateOff: 164096, Total: 164352}, NewLayout(0, 2))
	assert.Equal(t, Layout{DataBytes: 1, HalfBytes: 256, SignalOff: 512, StateOff: 164608, Total: 164864}, NewLayout(1, 2))
	assert.Equal(t, Layout{DataBytes: 256, HalfBytes: 256, SignalOff: 512, StateOff: 164608, Total: 164864}, NewLayout(256, 2))
	assert.Equal(t, Layout{DataBytes: 257, HalfBytes: 512, SignalOff: 1024, StateOff: 165120, Total: 165376}, NewLayout(257, 2))
}

func TestOverlaps(t *testing.T) {
	cases := []struct {
		ptr  uintptr
		n    int64
		lo   uintptr
		size int64
		want bool
	}{
		{0x1000, 0x100, 0x1000, 0x100, true},  // same range
		{0x0f00, 0x100, 0x1000, 0x100, false}, // ends where the region starts
		{0x0f00, 0x101, 0x1000, 0x100, true},  // one byte in
		{0x1100, 0x100, 0x1000, 0x100, false}, // starts where the region ends
		{0x10ff, 0x100, 0x1000, 0x100, true},  // last byte of the region
		{0x1010, 0x10, 0x1000, 0x100, true},   // inside
		{0x0800, 0x1000, 0x1000, 0x100, true}, // around
		{0x1000, 0, 0x1000, 0x100, false},     // empty tensor
		{0x1000, -1, 0x1000, 0x100, false},    // negative length
		{0x1000, 0x100, 0x1000, 0, false},     // empty region
		{0x1010, 0, 0x1000, 0x100, false},     // empty tensor inside the region
		{0x0f00, 0x200, 0x1000, 0, false},     // around an empty region
	}
	for _, c := range cases {
		assert.Equal(t, c.want, Overlaps(c.ptr, c.n, c.lo, c.size), "[%#x+%#x) vs [%#x+%#x)", c.ptr, c.n, c.lo, c.size)
	}
}

func TestAlignUp(t *testing.T) {
	assert.Equal(t, int64(0), AlignUp(0, 256))
	assert.Equal(t, int64(256), AlignUp(1, 256))
	assert.Equal(t, int64(256), AlignUp(256, 256))
	assert.Equal(t, int64(512), AlignUp(257, 256))
	assert.Equal(t, int64(12), AlignUp(9, 4))
}

// ---- Tokens -----------------------------------------------------------------

func TestNewTokenSet(t *testing.T) {
	cases := []struct {
		counts []int
		prefix []int
		total  int
	}{
		{[]int{5}, []int{0, 5}, 5},
		{[]int{0}, []int{0, 0}, 0},
		{[]int{3, 0}, []int{0, 3, 3}, 3},
		{[]int{2, 0, 5}, []int{0, 2, 2, 7}, 7},
		{[]int{1, 2, 3, 4, 5, 6, 7, 0}, []int{0, 1, 3, 6, 10, 15, 21, 28, 28}, 28},
		{[]int{0, 0, 0, 0}, []int{0, 0, 0, 0, 0}, 0},
		{[]int{}, []int{0}, 0},
	}
	for _, c := range cases {
		ts := NewTokens(c.counts)
		assert.Equal(t, append([]int{}, c.counts...), append([]int{}, ts.Counts...)) // nil and empty alike
		assert.Equal(t, c.prefix, ts.Prefix, "counts %v", c.counts)
		assert.Equal(t, c.total, ts.Total(), "counts %v", c.counts)
	}

	// The set owns its counts.
	in := []int{4, 4}
	ts := NewTokens(in)
	in[0] = 100
	assert.Equal(t, []int{4, 4}, ts.Counts)
	assert.Equal(t, 8, ts.Total())
}

// ---- Plain -------------------------------------------------------------------

var (
	widths2 = []int{16, 8, 4, 2}
	widths1 = []int{16, 8, 4, 1}
)

func widthsFor(dt api.DType) []int {
	if dt.Size() == 1 {
		return widths1
	}
	return widths2
}

// The widths Plain is given in a Comm come from the PTX files.
func TestPTXWidths(t *testing.T) {
	f2, _, err := ptx.ForElemBytes(2)
	require.NoError(t, err)
	assert.Equal(t, widths2, f2.Widths())
	f1, _, err := ptx.ForElemBytes(1)
	require.NoError(t, err)
	assert.Equal(t, widths1, f1.Widths())
}

type planCase struct {
	name   string
	op     ptx.Op
	x      tensor
	rank   int
	counts []int

	out      [4]int
	outBytes int64
	chunk    int64
	width    int
	vectors  int64
}

var planCases = []planCase{
	// SendRecvHeads: [B, T_r, H, D] -> [B, T, H/P, D]; chunk = H/P*D*es; P chunks per token.
	{"srh world1", ptx.OpSendRecvHeads, bf16(0x1000, 2, 5, 4, 64), 0, []int{5},
		[4]int{2, 5, 4, 64}, 5120, 512, 16, 2 * 5 * 1 * 32},
	{"srh world2 D72", ptx.OpSendRecvHeads, bf16(0x1000, 1, 3, 8, 72), 0, []int{3, 0},
		[4]int{1, 3, 4, 72}, 1728, 576, 16, 1 * 3 * 2 * 36},
	{"srh world2 zero tokens nil", ptx.OpSendRecvHeads, bf16(0, 1, 0, 8, 72), 1, []int{3, 0},
		[4]int{1, 3, 4, 72}, 1728, 576, 16, 0},
	{"srh world3 D3", ptx.OpSendRecvHeads, bf16(0x2000, 2, 5, 6, 3), 2, []int{2, 0, 5},
		[4]int{2, 7, 2, 3}, 168, 12, 4, 2 * 5 * 3 * 3},
	{"srh world8 fp8 D128", ptx.OpSendRecvHeads, fp8(0x10000, 1, 4, 16, 128), 3, []int{1, 2, 3, 4, 5, 6, 7, 0},
		[4]int{1, 28, 2, 128}, 7168, 256, 16, 1 * 4 * 8 * 16},
	{"srh world3 fp8 D3 odd ptr", ptx.OpSendRecvHeads, fp8(0x101, 1, 1, 3, 3), 0, []int{1, 1, 1},
		[4]int{1, 3, 1, 3}, 9, 3, 1, 1 * 1 * 3 * 3},
	{"srh misaligned bf16", ptx.OpSendRecvHeads, bf16(0x1002, 1, 2, 4, 64), 0, []int{2, 2},
		[4]int{1, 4, 2, 64}, 1024, 256, 2, 1 * 2 * 2 * 128},
	{"srh ptr 4-aligned", ptx.OpSendRecvHeads, bf16(0x1004, 1, 2, 4, 64), 0, []int{2, 2},
		[4]int{1, 4, 2, 64}, 1024, 256, 4, 1 * 2 * 2 * 64},
	{"srh ptr 8-aligned", ptx.OpSendRecvHeads, bf16(0x1008, 1, 2, 4, 64), 0, []int{2, 2},
		[4]int{1, 4, 2, 64}, 1024, 256, 8, 1 * 2 * 2 * 32},

	// GatherHeads: [B, T, Hp, D] -> [B, T_r, Hp*P, D]; chunk = Hp*D*es; one chunk per token.
	{"gh world1", ptx.OpGatherHeads, bf16(0x1000, 1, 4, 2, 64), 0, []int{4},
		[4]int{1, 4, 2, 64}, 1024, 256, 16, 4 * 16},
	{"gh world2 uneven", ptx.OpGatherHeads, bf16(0x1000, 2, 8, 4, 64), 1, []int{3, 5},
		[4]int{2, 5, 8, 64}, 10240, 512, 16, 2 * 5 * 2 * 32}, // (b, k, r) with k < max count
	{"gh world3 zero rank D72", ptx.OpGatherHeads, bf16(0x1008, 1, 6, 1, 72), 0, []int{0, 4, 2},
		[4]int{1, 0, 3, 72}, 0, 144, 8, 4 * 3 * 18},
	{"gh world8 fp8 D3", ptx.OpGatherHeads, fp8(0x3, 1, 8, 2, 3), 7, []int{1, 1, 1, 1, 1, 1, 1, 1},
		[4]int{1, 1, 16, 3}, 48, 6, 1, 8 * 6},
	{"gh world8 fp8 D128", ptx.OpGatherHeads, fp8(0x4000, 3, 12, 1, 128), 2, []int{0, 0, 5, 0, 7, 0, 0, 0},
		[4]int{3, 5, 8, 128}, 15360, 128, 16, 3 * 7 * 8 * 8},
	{"gh misaligned bf16", ptx.OpGatherHeads, bf16(0x1002, 1, 2, 1, 128), 0, []int{1, 1},
		[4]int{1, 1, 2, 128}, 512, 256, 2, 2 * 128},

	// AllGather: [B, T_r, H, D] -> [B, T, H, D]; chunk = H*D*es (a token row).
	{"ag world1", ptx.OpAllGather, bf16(0x1000, 1, 7, 2, 64), 0, []int{7},
		[4]int{1, 7, 2, 64}, 1792, 256, 16, 7 * 16},
	{"ag world3 zero tokens D3", ptx.OpAllGather, bf16(0, 3, 0, 5, 3), 1, []int{2, 0, 3},
		[4]int{3, 5, 5, 3}, 450, 30, 2, 0},
	{"ag world2 D72", ptx.OpAllGather, bf16(0x1000, 2, 3, 1, 72), 1, []int{4, 3},
		[4]int{2, 7, 1, 72}, 2016, 144, 16, 2 * 3 * 9},
	{"ag world8 fp8 D72", ptx.OpAllGather, fp8(0x100, 2, 1, 4, 72), 0, []int{1, 2, 3, 4, 5, 6, 7, 8},
		[4]int{2, 36, 4, 72}, 20736, 288, 16, 2 * 1 * 18},
	{"ag fp8 D3 4-aligned", ptx.OpAllGather, fp8(0x104, 1, 2, 4, 3), 0, []int{2, 1},
		[4]int{1, 3, 4, 3}, 36, 12, 4, 2 * 3},
	{"ag misaligned bf16", ptx.OpAllGather, bf16(0x1002, 1, 2, 2, 64), 0, []int{2},
		[4]int{1, 2, 2, 64}, 512, 256, 2, 2 * 128},
}

func TestPlanOp(t *testing.T) {
	for _, c := range planCases {
		t.Run(c.name, func(t *testing.T) {
			world := len(c.counts)
			p, err := plainOf(c.op, c.x, c.rank, world, NewTokens(c.counts), 1<<30, widthsFor(c.x.dtype()))
			require.NoError(t, err)
			assert.Equal(t, c.op, p.Op)
			assert.Equal(t, c.out, p.Out, "out shape")
			assert.Equal(t, c.outBytes, p.OutBytes, "outBytes")
			assert.Equal(t, c.chunk, p.Chunk, "chunk")
			assert.Equal(t, c.width, p.Width, "width")
			assert.Equal(t, c.vectors, p.Vectors, "vectors")

			// The same facts, derived independently of the literals above.
			es := int64(c.x.es)
			assert.Equal(t, int64(p.Out[0])*int64(p.Out[1])*int64(p.Out[2])*int64(p.Out[3])*es, p.OutBytes)
			want := 0
			for _, w := range widthsFor(c.x.dtype()) {
				if p.Chunk%int64(w) == 0 && c.x.Ptr%uintptr(w) == 0 {
					want = w
					break
				}
			}
			assert.Equal(t, want, p.Width, "widest width dividing chunk and ptr")
			assert.Zero(t, p.Chunk%es)
			b, tr, h, d := int64(c.x.Shape[0]), int64(c.x.Shape[1]), int64(c.x.Shape[2]), int64(c.x.Shape[3])
			var chunks int64
			switch c.op {
			case ptx.OpSendRecvHeads:
				chunks = b * tr * int64(world)
			case ptx.OpGatherHeads:
				// The kernel walks (b, k, r) for k below the largest count,
				// skipping the holes of smaller ranks.
				tmax := 0
				for _, n := range c.counts {
					tmax = max(tmax, n)
				}
				chunks = b * int64(tmax) * int64(world)
			default:
				chunks = b * tr
			}
			if c.op != ptx.OpGatherHeads {
				// Every input byte is moved exactly once.
				assert.Equal(t, b*tr*h*d*es, p.Vectors*int64(p.Width), "vectors*width = input bytes")
			}
			// The active-block count comes from the largest rank's walk, the
			// same number on every rank.
			tmax := int64(0)
			for _, n := range c.counts {
				tmax = max(tmax, int64(n))
			}
			group := b * tmax * p.Chunk
			if c.op != ptx.OpAllGather {
				group *= int64(world)
			}
			assert.Equal(t, group, p.GroupBytes, "groupBytes")
			assert.Equal(t, chunks*(p.Chunk/int64(p.Width)), p.Vectors, "chunks * units")
		})
	}
}

func TestPlanOpCapacityBoundary(t *testing.T) {
	x := bf16(0x1000, 2, 3, 4, 64)
	ts := NewTokens([]int{3, 5})
	for _, op := range []ptx.Op{ptx.OpSendRecvHeads, ptx.OpAllGather} {
		p, err := plainOf(op, x, 0, 2, ts, 1<<30, widths2)
		require.NoError(t, err)
		_, err = plainOf(op, x, 0, 2, ts, p.OutBytes, widths2)
		assert.NoError(t, err, "%s: output exactly at capacity", op)
		_, err = plainOf(op, x, 0, 2, ts, p.OutBytes-1, widths2)
		assert.ErrorIs(t, err, api.ErrCapacity, "%s", op)
	}
	g := bf16(0x1000, 2, 8, 4, 64)
	p, err := plainOf(ptx.OpGatherHeads, g, 1, 2, ts, 1<<30, widths2)
	require.NoError(t, err)
	_, err = plainOf(ptx.OpGatherHeads, g, 1, 2, ts, p.OutBytes, widths2)
	assert.NoError(t, err)
	_, err = plainOf(ptx.OpGatherHeads, g, 1, 2, ts, p.OutBytes-1, widths2)
	assert.ErrorIs(t, err, api.ErrCapacity)
}

func TestPlanOpErrors(t *testing.T) {
	ts2 := NewTokens([]int{3, 5})
	cases := []struct {
		name     string
		op       ptx.Op
		x        tensor
		rank     int
		world    int
		ts       Tokens
		capacity int64
		want     error
	}{
		{"srh tokens", ptx.OpSendRecvHeads, bf16(0x1000, 1, 4, 4, 64), 0, 2, ts2, 1 << 30, api.ErrTokens},
		{"srh tokens of other rank", ptx.OpSendRecvHeads, bf16(0x1000, 1, 5, 4, 64), 0, 2, ts2, 1 << 30, api.ErrTokens},
		{"ag tokens", ptx.OpAllGather, bf16(0x1000, 1, 3, 4, 64), 1, 2, ts2, 1 << 30, api.ErrTokens},
		{"gh tokens", ptx.OpGatherHeads, bf16(0x1000, 1, 5, 4, 64), 1, 2, ts2, 1 << 30, api.ErrTokens},
		{"srh heads not divisible", ptx.OpSendRecvHeads, bf16(0x1000, 1, 3, 6, 64), 0, 4, NewTokens([]int{3, 1, 1, 1}), 1 << 30, api.ErrShape},
		{"srh heads fewer than world", ptx.OpSendRecvHeads, bf16(0x1000, 1, 3, 1, 64), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"batch 0", ptx.OpAllGather, bf16(0x1000, 0, 3, 4, 64), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"batch 0 nil", ptx.OpGatherHeads, bf16(0, 0, 8, 4, 64), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"heads 0", ptx.OpAllGather, bf16(0x1000, 1, 3, 0, 64), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"head size 0", ptx.OpAllGather, bf16(0x1000, 1, 3, 4, 0), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"negative tokens", ptx.OpAllGather, bf16(0x1000, 1, -1, 4, 64), 0, 1, NewTokens([]int{-1}), 1 << 30, api.ErrShape},
		{"srh over capacity", ptx.OpSendRecvHeads, bf16(0x1000, 1, 3, 4, 64), 0, 2, ts2, 2047, api.ErrCapacity},
		{"ag over capacity", ptx.OpAllGather, bf16(0x1000, 1, 3, 4, 64), 0, 2, ts2, 4095, api.ErrCapacity},
		{"gh over capacity", ptx.OpGatherHeads, bf16(0x1000, 1, 8, 4, 64), 1, 2, ts2, 0, api.ErrCapacity},
		{"odd ptr bf16", ptx.OpAllGather, bf16(0x1001, 1, 3, 4, 64), 0, 2, ts2, 1 << 30, api.ErrAlignment},
		{"nil ptr with elements", ptx.OpAllGather, bf16(0, 1, 3, 4, 64), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"nil ptr fp8", ptx.OpSendRecvHeads, fp8(0, 1, 3, 2, 3), 0, 2, ts2, 1 << 30, api.ErrShape},
		{"over MaxInt32 vectors", ptx.OpAllGather, fp8(0x1, 4, 1<<30, 1, 1), 0, 1, NewTokens([]int{1 << 30}), MaxDataBytes, api.ErrCapacity},
		{"dimension over MaxInt32", ptx.OpGatherHeads, fp8(0x1, 1, math.MaxInt32+1, 1, 1), 0, 1, NewTokens([]int{math.MaxInt32 + 1}), MaxDataBytes, api.ErrShape},
		{"unknown op", ptx.Op("reduce_scatter"), bf16(0x1000, 1, 3, 4, 64), 0, 2, ts2, 1 << 30, api.ErrNotSupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := plainOf(c.op, c.x, c.rank, c.world, c.ts, c.capacity, widthsFor(c.x.dtype()))
			require.Error(t, err)
			assert.ErrorIs(t, err, c.want)
			assert.Equal(t, Plan{}, p, "no partial plan on error")
		})
	}
}

func TestPlanOpVectorLimit(t *testing.T) {
	// Exactly MaxInt32 one-byte vectors is still allowed.
	x := fp8(0x1, 1, math.MaxInt32, 1, 1)
	p, err := plainOf(ptx.OpAllGather, x, 0, 1, NewTokens([]int{math.MaxInt32}), MaxDataBytes, widths1)
	require.NoError(t, err)
	assert.Equal(t, int64(math.MaxInt32), p.Vectors)
	assert.Equal(t, 1, p.Width)

	// Wider vectors bring a large tensor back under the limit.
	x = fp8(0x1000, 1, 1<<30, 1, 16)
	p, err = plainOf(ptx.OpAllGather, x, 0, 1, NewTokens([]int{1 << 30}), MaxDataBytes, widths1)
	require.NoError(t, err)
	assert.Equal(t, 16, p.Width)
	assert.Equal(t, int64(1<<30), p.Vectors)
	// The same bytes at a misaligned address need 1-byte vectors: too many.
	x.Ptr = 0x1001
	_, err = plainOf(ptx.OpAllGather, x, 0, 1, NewTokens([]int{1 << 30}), MaxDataBytes, widths1)
	assert.ErrorIs(t, err, api.ErrCapacity)
}

// A shape whose byte count wraps around int64 must be refused. Known bug in
// plan.go (Plain multiplies the shape without overflow checks): unskip
// once fixed.
func TestPlanOpShapeOverflow(t *testing.T) {
	cases := []struct {
		name  string
		x     tensor
		count int
	}{
		// outBytes and vectors both wrap to 0; Batch becomes uint32(2^62) = 0.
		{"wraps to zero", bf16(0x1000, 1<<62, 4, 1, 1), 4},
		// outBytes and vectors wrap to -1, so both limits pass, while the
		// kernel gets Batch = 0x55555555, Units = 3 and copies 2^32-1 vectors
		// into a 1 MiB buffer.
		{"wraps negative", fp8(0x1000, 0x5555555555555555, 1, 3, 1), 1},
	}
	var bugs []string
	for _, c := range cases {
		p, err := plainOf(ptx.OpAllGather, c.x, 0, 1, NewTokens([]int{c.count}), 1<<20, widthsFor(c.x.dtype()))
		if err == nil {
			bugs = append(bugs, fmt.Sprintf("%s: accepted %v (outBytes %d, vectors %d, Batch %d, Units %d)",
				c.name, c.x.Shape, p.OutBytes, p.Vectors, uint32(c.x.Shape[0]), uint32(p.Chunk/int64(p.Width))))
			continue
		}
		assert.True(t, errors.Is(err, api.ErrShape) || errors.Is(err, api.ErrCapacity), "%s: %v", c.name, err)
	}
	assert.Empty(t, bugs, "Plain overflows int64")
}

// Every rank must reach the same verdict on an operation: with the double
// buffer there is no start barrier, so peers that launch write into the
// buffer of a rank that refused. Known bug in layout.go (GatherHeads checks
// capacity against this rank's own T_r only): unskip once fixed.
func TestPlanOpVerdictAgreesAcrossRanks(t *testing.T) {
	const hp, d = 2, 64
	counts := []int{1, 3}
	ts := NewTokens(counts)
	world := len(counts)
	capacity := int64(1 * ts.Total() * hp * d * 2) // exactly the SendRecvHeads output
	var bugs []string
	for _, op := range ptx.Ops {
		var errs []error
		for rank := range world {
			var x tensor
			switch op {
			case ptx.OpGatherHeads:
				x = bf16(0x1000, 1, ts.Total(), hp, d)
			case ptx.OpSendRecvHeads:
				x = bf16(0x1000, 1, counts[rank], hp*world, d)
			default:
				x = bf16(0x1000, 1, counts[rank], hp, d)
			}
			_, err := plainOf(op, x, rank, world, ts, capacity, widths2)
			errs = append(errs, err)
		}
		for rank := 1; rank < world; rank++ {
			if (errs[rank] == nil) != (errs[0] == nil) {
				bugs = append(bugs, fmt.Sprintf("%s: rank 0: %v; rank %d: %v", op, errs[0], rank, errs[rank]))
			}
		}
		if op != ptx.OpGatherHeads {
			assert.Equal(t, errs[0] == nil, errs[1] == nil, "%s", op)
		}
	}
	assert.Empty(t, bugs, "ranks disagree on the capacity check")
}

// Token counts whose sum would wrap around, or exceed what the kernels
// index, negative ones and too few or many are refused before anything
// changes, naming the rank and the count.
func TestCheckTokenCounts(t *testing.T) {
	for _, tc := range []struct {
		counts []int
		want   string // "": accepted
	}{
		{[]int{0, 0}, ""},
		{[]int{1 << 29, 1 << 29}, ""},
		{[]int{1 << 30, 1}, "over 2^30 tokens in all (1073741825 by rank 1)"},
		{[]int{math.MaxInt64, 2}, "rank 0's token count 9223372036854775807 is over 2^30, the most the kernels index"},
		{[]int{2, math.MaxInt64}, "rank 1's token count 9223372036854775807 is over 2^30, the most the kernels index"},
		{[]int{-1, 3}, "rank 0's token count -1 is negative"},
		{[]int{3, -5}, "rank 1's token count -5 is negative"},
		{[]int{3}, "1 token counts for world size 2 (one per rank)"},
	} {
		err := CheckTokenCounts(tc.counts, 2)
		if tc.want == "" {
			assert.NoError(t, err, "%v", tc.counts)
			continue
		}
		assert.ErrorIs(t, err, api.ErrTokens, "%v", tc.counts)
		assert.Equal(t, "a2a: SetRankTokens: "+tc.want+": wrong token counts", err.Error(), "%v", tc.counts)
	}
}

// The offsets of the signal area and the state, as the kernels' ABI lays
// them out (internal/kernelabi tests the ABI itself).
func TestLayoutOffsets(t *testing.T) {
	assert.Equal(t, int64(131072), SignalByeOff)
	assert.Equal(t, int64(131104+32768), SignalAreaBytes) // the bye words, then the wire's landing words
	assert.Equal(t, int64(16), StateBytes)
}
