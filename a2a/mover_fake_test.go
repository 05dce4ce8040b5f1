package a2a_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// TestFakeCopyEngines runs checkInTurn on single-process groups of the
// stub with Mover: MoverCopyEngines. The stub runs no kernel but does
// every copy, so every output here is the copy engines' work alone: all
// operations, uneven and zero token counts, uneven heads, packed and
// strided tensors, against the reference, byte for byte. (The stub has no
// barrier, so the ranks' operations are enqueued in turn, each before any
// is read.)
func TestFakeCopyEngines(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	for _, devices := range [][]int{{0, 1}, {0, 1, 0}, {1, 1, 0, 0}} {
		world := len(devices)
		uneven, zero := make([]int, world), make([]int, world)
		for r := range uneven {
			uneven[r], zero[r] = 3+4*r, 5
		}
		zero[world-1] = 0
		for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
			for _, single := range []bool{false, true} {
				cases := []check.Case{
					{Name: "even", Batch: 2, Tokens: uneven, Heads: 2 * world, HeadDim: 64, DType: dt},
					{Name: "uneven-heads", Batch: 1, Tokens: zero, Heads: 3*world + 1, HeadDim: 72, DType: dt, Misalign: 1},
					{Name: "qkv", Batch: 2, Tokens: uneven, Heads: 2*world + 1, HeadDim: 32, DType: dt, Tensors: 3, Strided: true},
				}
				if dt == a2a.BFloat16 && !single && world == 2 { // large enough for the side streams (fanMinBytes)
					cases = append(cases, check.Case{Name: "large", Batch: 1, Tokens: slices.Repeat([]int{1024}, world), Heads: 2 * world, HeadDim: 1024, DType: dt})
				}
				maxTokens, hidden := check.Capacity(cases...)
				cfg := a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: dt, Mover: a2a.MoverCopyEngines, SingleBuffer: single}
				g, err := a2a.NewGroup(cfg, devices)
				require.NoError(t, err)
				for i, cs := range cases {
					require.NoError(t, checkInTurn(g, cs, uint64(40+i)), "%v on %v, single buffer %v", cs, devices, single)
				}
				require.NoError(t, g.Close())
			}
		}
	}
	requireReleased(t, lib)
}
