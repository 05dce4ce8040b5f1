package transport

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// The token counts reach the argument with their prefix sums, and what a
// larger world left there before is cleared.
func TestSetArgsTokens(t *testing.T) {
	var a kernelabi.Args
	SetArgsTokens(&a, plan.NewTokens([]int{4, 0, 7, 1, 2, 3, 9, 5}))
	SetArgsTokens(&a, plan.NewTokens([]int{3, 5}))
	assert.Equal(t, [kernelabi.MaxRanks]int32{3, 5}, a.Tokens)
	assert.Equal(t, [kernelabi.MaxRanks + 1]int32{0, 3, 8}, a.Prefix)
}

// The general entries' part of a plan is copied field by field, and a
// walk that grows with all tokens sets the flag (cleared for the next).
func TestSetGeneralArgs(t *testing.T) {
	p := plan.Plan{Units: 12, Region: 4096, Tensors: 3, HeadUnits: 4, InRow: 40, WalkTotal: true}
	p.Inputs = [plan.MaxTensors]uint64{0x1000, 0x2000, 0x3000}
	p.Heads = [kernelabi.MaxRanks + 1]int32{0, 3, 5}
	var a kernelabi.Args
	SetGeneralArgs(&a, p)
	assert.Equal(t, [...]uint64{12, 4096, 3, 4, 40, 1}, [...]uint64{uint64(a.Units), a.Region, uint64(a.Tensors), uint64(a.HeadUnits), uint64(a.InRow), uint64(a.WalkTotal)})
	assert.Equal(t, p.Inputs, a.Inputs)
	assert.Equal(t, p.Heads, a.Heads)
	p.WalkTotal = false
	SetGeneralArgs(&a, p)
	assert.Zero(t, a.WalkTotal)
}

// The wire's staging reaches the argument, and the decode writes rows of
// this rank's tokens only for the operation whose output holds them
// (GatherHeads, as its row of plan.Operations says).
func TestSetWireStaging(t *testing.T) {
	for _, o := range plan.Operations {
		p := plan.Plan{Op: o.Op, Out: [4]int{1, 8, 6, 64}, StageOff: 1 << 20, StageRegion: 1 << 16, ScaleOff: 3 << 20, ScaleRegion: 1 << 12, WireRows: 48}
		a := kernelabi.Args{OutRankTokens: 7}
		SetWireStaging(&a, p)
		assert.Equal(t, [...]uint64{1 << 20, 1 << 16, 3 << 20, 1 << 12, 48, 6}, [...]uint64{a.Stage, a.StageRegion, a.Scales, a.ScaleRegion, uint64(a.WireRows), uint64(a.OutHeads)}, o.Name)
		want := uint32(0)
		if o.Op == ptx.OpGatherHeads {
			want = 1
		}
		assert.Equal(t, want, a.OutRankTokens, o.Name)
	}
}

// The wire's local launches take a block per 16 KiB, at least one and at
// most the Comm's.
func TestWireBlocks(t *testing.T) {
	for _, c := range []struct {
		bytes      int64
		most, want int
	}{{0, 132, 1}, {16<<10 - 1, 132, 1}, {16 << 10, 132, 1}, {64 << 10, 132, 4}, {1 << 30, 132, 132}, {1 << 30, 0, 1}} {
		assert.Equal(t, c.want, WireBlocks(c.bytes, c.most), "%d bytes, at most %d", c.bytes, c.most)
	}
}

// A kernel whose functions were not loaded is refused before the driver
// or the launch gate sees it.
func TestLaunchRefusesUnloaded(t *testing.T) {
	var e Env // no driver, no share: anything past the check would panic
	assert.ErrorContains(t, e.Launch(0, 1, 32, 0, nil), "not loaded")
}
