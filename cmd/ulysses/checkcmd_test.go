package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func sum(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

func TestSplitTokens(t *testing.T) {
	for _, tc := range []struct{ total, world int }{
		{57826, 8}, {6144, 2}, {6144, 4}, {4608, 3}, {75600, 6}, {100, 7}, {5, 1}, {3, 4}, {0, 2},
	} {
		parts := splitTokens(tc.total, tc.world)
		require.Len(t, parts, tc.world)
		assert.Equal(t, tc.total, sum(parts), "%v", tc)
		for _, p := range parts {
			assert.GreaterOrEqual(t, p, 0, "%v: %v", tc, parts)
		}
		if tc.world > 1 && tc.total >= 4*tc.world {
			assert.NotEqual(t, parts[0], parts[1], "%v: parts should differ: %v", tc, parts)
		}
	}
	assert.Equal(t, []int{3069, 3075}, splitTokens(6144, 2))
}

func TestZeroRankSplit(t *testing.T) {
	for world := 1; world <= 8; world++ {
		parts := zeroRankSplit(61*world+7, world)
		require.Len(t, parts, world)
		assert.Equal(t, 0, parts[world/2])
		if world > 1 {
			assert.Equal(t, 61*world+7, sum(parts))
		}
	}
}

func TestCheckCases(t *testing.T) {
	for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
		for world := 1; world <= 8; world++ {
			cases := checkCases(world, dt)
			require.Len(t, cases, len(realisticShapes)+3)
			zero, uneven, packed := 0, 0, 0
			for _, c := range cases {
				s := c.Shape()
				require.NoError(t, s.Validate(), "%v", c)
				assert.Equal(t, world, s.World())
				assert.GreaterOrEqual(t, c.Heads, world, "%v", c)
				if c.Heads%world != 0 {
					uneven++
				}
				if c.Tensors > 1 {
					packed++
				}
				assert.LessOrEqual(t, s.GatheredBytes()*max(1, c.Tensors), maxCaseBytes, "%v", c)
				for _, n := range c.Tokens {
					if n == 0 {
						zero++
					}
				}
			}
			assert.GreaterOrEqual(t, zero, 1, "some case has a rank without tokens")
			assert.Equal(t, 1, packed, "one packed case")
			if world > 1 {
				assert.GreaterOrEqual(t, uneven, 1, "some case has heads the world size does not divide")
			}
			b2b := backToBackCase(world, dt)
			require.NoError(t, b2b.Shape().Validate())
			maxTokens, hidden := check.Capacity(append(cases, b2b)...)
			for _, c := range append(cases, b2b) {
				assert.LessOrEqual(t, c.Shape().GatheredBytes()*max(1, c.Tensors), maxTokens*hidden*dt.Size(), "%v", c)
			}
		}
	}
	// Names say what was changed.
	cases := checkCases(3, a2a.BFloat16)
	assert.Contains(t, cases[4].Name, "tokens 75600->")
	assert.Equal(t, 40, cases[4].Heads, "40 heads on 3 ranks: 14, 13, 13")
	assert.Equal(t, "flux.1-dev-1024px", cases[3].Name, "4608*24*128*2 bytes fit unscaled")
	assert.Contains(t, cases[6].Name, "ltx-2-19b q,k,v")
}

func TestCountResults(t *testing.T) {
	res := []launch.Result{
		{Rank: 0, Output: "PASS a 1ms\nPASS b 2ms\nFAIL c: boom\nnoise\n"},
		{Rank: 1, Output: "PASS a 1ms\nxPASS\n"},
	}
	p, f := countResults(res)
	assert.Equal(t, 3, p)
	assert.Equal(t, 1, f)
	p, f = countResults(nil)
	assert.Zero(t, p+f)
}

func TestLayout(t *testing.T) {
	w, devs, err := groupFlags{ranksPerGPU: 1}.layout(2)
	require.NoError(t, err)
	assert.Equal(t, 2, w)
	assert.Equal(t, []int{0, 1}, devs)

	w, devs, err = groupFlags{ranksPerGPU: 3}.layout(2)
	require.NoError(t, err)
	assert.Equal(t, 6, w)
	assert.Equal(t, []int{0, 1, 0, 1, 0, 1}, devs)

	w, devs, err = groupFlags{world: 3, ranksPerGPU: 1}.layout(2)
	require.NoError(t, err)
	assert.Equal(t, 3, w)
	assert.Equal(t, []int{0, 1, 0}, devs)

	_, _, err = groupFlags{world: 9, ranksPerGPU: 1}.layout(8)
	assert.Error(t, err)
	_, _, err = groupFlags{ranksPerGPU: 2}.layout(8)
	assert.Error(t, err)
	_, _, err = groupFlags{ranksPerGPU: 0}.layout(2)
	assert.Error(t, err)
	_, _, err = groupFlags{ranksPerGPU: 1}.layout(0)
	assert.ErrorIs(t, err, a2a.ErrNoDevice)
}

// --wire sets the Config every Comm of the check starts from; a lossy
// one takes 16-bit dtypes only.
func TestCheckPlanWire(t *testing.T) {
	fs, o := newCheckFlags()
	require.NoError(t, fs.Parse(nil))
	p, err := o.plan()
	require.NoError(t, err)
	assert.Equal(t, a2a.WireExact, p.cfg.Wire, "exact by default")
	assert.Empty(t, wireNote(p.cfg.Wire))

	fs, o = newCheckFlags()
	require.NoError(t, fs.Parse([]string{"--wire", "e5m2", "--dtypes", "bf16,fp16", "--mover", "auto"}))
	p, err = o.plan()
	require.NoError(t, err)
	assert.Equal(t, a2a.WireE5M2, p.cfg.Wire)
	assert.Equal(t, a2a.MoverAuto, p.cfg.Mover)
	assert.Contains(t, wireNote(p.cfg.Wire), "over the e5m2 wire")

	fs, o = newCheckFlags()
	require.NoError(t, fs.Parse([]string{"--wire", "e4m3", "--dtypes", "bf16", "--transport", "nccl"}))
	p, err = o.plan()
	require.NoError(t, err, "NCCL carries the wire")
	assert.Equal(t, a2a.TransportNCCL, p.cfg.Transport)

	for _, args := range [][]string{
		{"--wire", "e4m3", "--dtypes", "bf16,fp8e5m2"},
		{"--wire", "e4m3", "--dtypes", "bf16", "--mover", "copy-engines"},
		{"--wire", "bf16"},
	} {
		fs, o = newCheckFlags()
		require.NoError(t, fs.Parse(args))
		_, err = o.plan()
		assert.Error(t, err, "%v", args)
	}
}
