package check

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

func TestCompareReportsFirstDifferenceAndCount(t *testing.T) {
	require.NoError(t, compare("x", []byte{1, 2, 3}, []byte{1, 2, 3}))
	err := compare("x", []byte{1, 9, 3, 8}, []byte{1, 2, 3, 4})
	var m *Mismatch
	require.True(t, errors.As(err, &m))
	require.True(t, errors.Is(err, ErrMismatch))
	require.Equal(t, Mismatch{What: "x", First: 1, Diff: 2, Len: 4}, *m)
	require.Contains(t, err.Error(), "2 of 4 bytes, first at 1")
	err = compare("y", []byte{1}, []byte{1, 2})
	require.Error(t, err)
	require.False(t, errors.Is(err, ErrMismatch), "a length difference is not a byte mismatch")
}

func TestCaseShapeAndCapacity(t *testing.T) {
	c := Case{Name: "c", Batch: 3, Tokens: []int{2, 0, 5}, Heads: 6, HeadDim: 4, DType: a2a.Float16, Misalign: 1}
	s := c.Shape()
	require.NoError(t, s.Validate())
	require.Equal(t, 7, s.TotalTokens())
	require.Equal(t, 2, s.ElemSize)
	require.Contains(t, c.String(), "misaligned+1")
	tokens, hidden := Capacity(c)
	require.Equal(t, [2]int{21, 24}, [2]int{tokens, hidden}, "B*T tokens of H*D")
	tokens, hidden = Capacity(Case{Batch: 1, Tokens: []int{0, 0}, Heads: 2, HeadDim: 1, DType: a2a.BFloat16})
	require.Equal(t, [2]int{1, 2}, [2]int{tokens, hidden}, "room for one token even with none")
	tokens, hidden = Capacity()
	require.Equal(t, [2]int{1, 1}, [2]int{tokens, hidden})
	// The widest hidden size and the most elements need not be one case's:
	// 1*7*(6*4) = 168 elements, 32 wide, take 6 tokens of 32.
	wide := Case{Batch: 1, Tokens: []int{1, 0, 0}, Heads: 2, HeadDim: 16, DType: a2a.BFloat16}
	tokens, hidden = Capacity(Case{Batch: 1, Tokens: c.Tokens, Heads: 6, HeadDim: 4, DType: a2a.Float16}, wide)
	require.Equal(t, [2]int{6, 32}, [2]int{tokens, hidden})
}

func TestInputsAreDeterministicPerRankAndNeverZero(t *testing.T) {
	cs := Case{Batch: 2, Tokens: []int{3, 1}, Heads: 2, HeadDim: 8, DType: a2a.BFloat16}
	s := cs.Shape()
	a, b := inputs(cs, 7), inputs(cs, 7)
	require.Equal(t, a, b)
	require.NotEqual(t, inputs(cs, 8)[0], a[0])
	require.Len(t, a[0], s.RankInputBytes(0))
	require.Len(t, a[1], s.RankInputBytes(1))
	for _, in := range a {
		for _, v := range in {
			require.NotZero(t, v)
		}
	}
}

// Fuse lays token i of part k at (i*n + k)*row, and Unfuse takes it back.
func TestFuse(t *testing.T) {
	parts := [][]byte{{1, 2, 3, 4}, {5, 6, 7, 8}, {9, 10, 11, 12}}
	fused := Fuse(parts, 2)
	require.Equal(t, []byte{1, 2, 5, 6, 9, 10, 3, 4, 7, 8, 11, 12}, fused)
	require.Equal(t, parts, Unfuse(fused, 3, 2))
	views := FusedViews(0x1000, [4]int{1, 2, 1, 1}, a2a.BFloat16, 3)
	require.Equal(t, uintptr(0x1004), views[2].Ptr)
	require.Equal(t, 3, views[2].RowStride)
	require.Equal(t, [4]int{1, 2, 3, 1}, FusedShape([4]int{1, 2, 1, 1}, 3))
}

// Narrow inputs keep every 64th element as drawn and put the others'
// magnitudes in [2^-8, 2^8), for both 16-bit types.
func TestNarrowInputs(t *testing.T) {
	for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float16} {
		cs := Case{Batch: 1, Tokens: []int{64, 3}, Heads: 2, HeadDim: 32, DType: dt}
		wide := inputs(cs, 9)
		cs.Narrow = true
		in := inputs(cs, 9)
		for i := 0; i < len(in[0]); i += 2 {
			u := binary.LittleEndian.Uint16(in[0][i:])
			if i%128 == 0 {
				require.Equal(t, binary.LittleEndian.Uint16(wide[0][i:]), u, "element %d is kept", i/2)
				continue
			}
			m := math.Abs(float64(math.Float32frombits(uint32(u) << 16)))
			if dt == a2a.Float16 {
				e := int(u>>10&31) - 15
				m = math.Ldexp(1+float64(u&0x3FF)/1024, e)
			}
			require.True(t, m >= 0x1p-8 && m < 0x1p8, "%v element %d: %g", dt, i/2, m)
		}
	}
}
