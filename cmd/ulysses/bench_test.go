package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func TestSizePlans(t *testing.T) {
	// B=1, H=32, D=128: 8 KiB a bf16 token, 4 KiB an fp8 token.
	sizes := []int64{128 << 10, 1 << 20, 12345, 4 << 10}
	plans, notes := sizePlans(sizes, 1, 32, 128, a2a.BFloat16)
	assert.Equal(t, []sizePlan{{128 << 10, 16}, {1 << 20, 128}}, plans)
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], "12345 bytes is not a positive multiple of B*H*D*elem = 8192 bytes")
	assert.Contains(t, notes[1], "bf16 4 KiB skipped")

	plans, notes = sizePlans(sizes, 1, 32, 128, a2a.Float8E4M3)
	assert.Equal(t, []sizePlan{{128 << 10, 32}, {1 << 20, 256}, {4 << 10, 1}}, plans)
	assert.Len(t, notes, 1)

	plans, notes = sizePlans([]int64{128 << 20}, 2, 24, 128, a2a.BFloat16) // 12 KiB a token
	assert.Empty(t, plans)
	assert.Len(t, notes, 1)
}

func TestNVLinkFloor(t *testing.T) {
	const mib = 1 << 20
	assert.Equal(t, float64(64*mib), nvlinkBytes(opSendRecvHeads, 128*mib, 2))
	assert.Equal(t, float64(112*mib), nvlinkBytes(opGatherHeads, 128*mib, 8))
	assert.Equal(t, float64(128*mib), nvlinkBytes(opAllGather, 128*mib, 2))
	assert.Equal(t, float64(7*128*mib), nvlinkBytes(opAllGather, 128*mib, 8))
	assert.Equal(t, float64(3*128*mib), nvlinkBytes(opHeadAllGather, 128*mib, 4))
	assert.Zero(t, nvlinkBytes(opSendRecvHeads, mib, 1))

	// DESIGN.md: 64 MiB over NVLink at 392 GB/s is about 171 us.
	r := benchRow{Op: "send_recv_heads", BytesPerRank: 128 * mib, World: 2, MedianUS: 194.7}
	r.finish(392e9)
	assert.InDelta(t, 171.2, r.FloorUS, 0.1)
	assert.InDelta(t, 194.7/171.2, r.TimeOverFloor, 0.01)
	assert.InDelta(t, 689.4, r.AlgBWGBps, 0.1) // 134217728 B / 194.7 us

	r = benchRow{Op: "all_gather", BytesPerRank: mib, World: 2, MedianUS: 10}
	r.finish(0)
	assert.Zero(t, r.FloorUS, "no peer rate, no floor")
	assert.Zero(t, r.TimeOverFloor)
	assert.Equal(t, float64(mib), r.NVLinkBytes)

	r = benchRow{Op: "all_gather", BytesPerRank: mib, World: 1, MedianUS: 10}
	r.finish(392e9)
	assert.Zero(t, r.FloorUS, "one rank moves nothing over NVLink")

	// Over the fp8 wire a bf16 row crosses as a code per element and a
	// scale byte per head of D: (1/2 + 1/(2D)) of the bytes, and the floor
	// with them; the algorithmic bandwidth counts the bf16 bytes.
	r = benchRow{Op: "send_recv_heads", BytesPerRank: 128 * mib, World: 2, HeadDim: 128, MedianUS: 110, Wire: "e4m3"}
	r.finish(392e9)
	assert.Equal(t, float64(64*mib)*(0.5+1.0/256), r.NVLinkBytes)
	assert.InDelta(t, 171.2*(0.5+1.0/256), r.FloorUS, 0.1)
	assert.InDelta(t, 110/r.FloorUS, r.TimeOverFloor, 1e-9)
	assert.InDelta(t, 1220.2, r.AlgBWGBps, 0.1)
	r.Wire = ""
	r.finish(392e9)
	assert.Equal(t, float64(64*mib), r.NVLinkBytes, "exact again")
}

func TestBenchPlan(t *testing.T) {
	fs, o := newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--bytes", "1M,2M", "--dtypes", "bf16,fp8,bf16", "--ops", "all_gather,gather_heads,head_all_gather", "--sms", "8,16,0"}))
	p, err := o.plan()
	require.NoError(t, err)
	assert.Equal(t, []int64{1 << 20, 2 << 20}, p.sizes)
	assert.Equal(t, []a2a.DType{a2a.BFloat16, a2a.Float8E4M3}, p.dtypes)
	assert.Equal(t, []benchOp{opAllGather, opGatherHeads, opHeadAllGather}, p.ops)
	assert.Equal(t, []int{8, 16, 0}, p.sms)

	fs, o = newBenchFlags(false)
	require.NoError(t, fs.Parse(nil))
	p, err = o.plan()
	require.NoError(t, err)
	assert.Len(t, p.sizes, 5)
	assert.Equal(t, []benchOp{opSendRecvHeads, opGatherHeads, opAllGather}, p.ops)
	assert.Equal(t, []int{0}, p.sms)

	for _, n := range []string{"0", "3", "-2"} {
		fs, o = newBenchFlags(false)
		require.NoError(t, fs.Parse([]string{"--graph-ops", n}))
		_, err = o.plan()
		assert.ErrorContains(t, err, "--graph-ops", n)
	}
	fs, o = newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--graph-ops", "32"}))
	_, err = o.plan()
	require.NoError(t, err)
	assert.Equal(t, 32, o.graphOps)

	for _, bad := range []string{"x", "1.5", "-2", "2000", " "} {
		_, err := parseSMs(bad)
		assert.Error(t, err, bad)
	}

	fs, o = newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--wire-direct-below", "1G"}))
	p, err = o.plan()
	require.NoError(t, err)
	assert.Equal(t, int64(1<<30), p.wireDirect)
	for _, bad := range []string{"0", "-1M", "x"} {
		fs, o = newBenchFlags(false)
		require.NoError(t, fs.Parse([]string{"--wire-direct-below", bad}))
		_, err = o.plan()
		assert.ErrorContains(t, err, "--wire-direct-below", bad)
	}

	assert.Equal(t, "values", o.data, "the default")
	for _, d := range []string{"values", "bits"} {
		fs, o = newBenchFlags(false)
		require.NoError(t, fs.Parse([]string{"--data", d}))
		_, err = o.plan()
		require.NoError(t, err, d)
	}
	fs, o = newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--data", "zeros"}))
	_, err = o.plan()
	assert.ErrorContains(t, err, "--data")
}

func TestParseMover(t *testing.T) {
	for _, s := range []string{"kernels", "copy-engines"} {
		m, err := parseMover(s)
		require.NoError(t, err)
		assert.Equal(t, s, m.String())
	}
	_, err := parseMover("dma")
	assert.Error(t, err)
}

// A rank whose size fails says so on its own output at once, before the
// round that reports it to rank 0: a rank whose peer died waits in that
// round until the launcher stops it, and the launcher quotes the last
// line of its output. On the stub driver, a launch failing on one rank.
func TestBenchRankSaysItsFailureAtOnce(t *testing.T) {
	testutil.RunChild(t, "TestBenchRankSaysItsFailureAtOnceChild", driver.EnvLibrary+"="+testutil.FakeCUDA(t), "FAKECUDA_FAIL_LAUNCH_AFTER=5")
}

func TestBenchRankSaysItsFailureAtOnceChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	code, _, stderr := runArgs("bench", "--single-process", "--world", "2", "--bytes", "128K", "--iters", "2", "--warmup", "0",
		"--rotate", "1", "--ops", "send_recv_heads", "--dtypes", "bf16")
	require.Equal(t, exitFailed, code, stderr)
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	own := slices.IndexFunc(lines, func(l string) bool {
		return regexp.MustCompile(`^bench: rank [01]: bf16 128 KiB: send_recv_heads.*CUDA_ERROR_LAUNCH_FAILED`).MatchString(l)
	})
	require.GreaterOrEqual(t, own, 0, "the failing rank's own line:\n%s", stderr)
	assert.Less(t, own, len(lines)-1, "before the group's error, the last line:\n%s", stderr)
	assert.Contains(t, lines[len(lines)-1], "bf16 128 KiB on rank")
}
