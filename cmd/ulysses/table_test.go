package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	writeTable(&b, []string{"name", "n"}, "lr", [][]string{{"a", "1"}, {"longer", "100"}})
	assert.Equal(t, "name      n\n------  ---\na         1\nlonger  100\n", b.String())
}

func TestBenchTable(t *testing.T) {
	rows := []benchRow{
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 20, World: 2, SMs: 0, Blocks: 132, MedianUS: 194.7, P10US: 190.2, P90US: 201.9},
		{Op: "all_gather", DType: "fp8e4m3", BytesPerRank: 1 << 20, World: 2, SMs: 32, Blocks: 32, MedianUS: 10.7, P10US: 10.1, P90US: 11.3},
	}
	for i := range rows {
		rows[i].finish(392e9)
	}
	var b bytes.Buffer
	writeTable(&b, benchHead, benchAlign, benchTableRows(rows))
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, 4)
	for _, col := range []string{"op", "dtype", "bytes/rank", "SMs", "median us", "p10-p90 us", "algbw GB/s", "NVLink bytes/rank", "floor us", "time/floor"} {
		assert.Contains(t, lines[0], col)
	}
	assert.Contains(t, lines[2], "send_recv_heads")
	assert.Contains(t, lines[2], "128 MiB")
	assert.Contains(t, lines[2], "all (132)")
	assert.Contains(t, lines[2], "194.7")
	assert.Contains(t, lines[2], "190.2-201.9")
	assert.Contains(t, lines[2], "689.4")  // algbw
	assert.Contains(t, lines[2], "64 MiB") // NVLink bytes
	assert.Contains(t, lines[2], "171.2")  // floor
	assert.Contains(t, lines[2], "1.14x")
	assert.Contains(t, lines[3], "fp8e4m3")
	assert.Contains(t, lines[3], "  32  ")
	assert.Contains(t, lines[3], "1 MiB")

	b.Reset()
	writeTable(&b, compareHead, compareAlign, compareTableRows([]compareRow{{Op: "all_gather", DType: "bf16", BytesPerRank: 1 << 20, Blocks: 132, UlyssesUS: 10.7, NCCLUS: 61, Ratio: 61 / 10.7}}))
	out = b.String()
	for _, s := range []string{"ulysses us", "NCCL us", "NCCL/ulysses", "10.7", "61.0", "5.70x"} {
		assert.Contains(t, out, s)
	}
}

func TestSMsLabel(t *testing.T) {
	assert.Equal(t, "all (132)", smsLabel(0, 132))
	assert.Equal(t, "32", smsLabel(32, 32))
	assert.Equal(t, "16 (8)", smsLabel(16, 8))
}

func TestWriteBenchTable(t *testing.T) {
	rep := &benchReport{World: 2, PeerGBps: 392.4, PeerPair: "GPU 0 -> GPU 1",
		Rows:  []benchRow{{Op: "gather_heads", DType: "bf16", BytesPerRank: 8 << 20, World: 2, Blocks: 132, MedianUS: 19.1}},
		Notes: []string{"bf16 12.1 KiB skipped: 12345 bytes is not a positive multiple of B*H*D*elem = 8192 bytes"}}
	rep.Rows[0].finish(392.4e9)
	_, o := newBenchFlags(false)
	o.batch, o.heads, o.headDim, o.iters, o.warmup = 1, 32, 128, 200, 20
	var b bytes.Buffer
	writeBenchTable(&b, rep, o)
	out := b.String()
	assert.Contains(t, out, "world 2, B=1 H=32 D=128, moved by kernels, 200 iterations (20 warm-up), peer copy GPU 0 -> GPU 1 392 GB/s")
	assert.Contains(t, out, "gather_heads")
	assert.Contains(t, out, "note: bf16 12.1 KiB skipped")

	assert.Regexp(t, `19\.1 +0\.0-0\.0 +0\.0 +0\.0 +- +439\.2`, out, "no graph time: a dash")
	rep.Rows[0].Transport = "nccl"
	b.Reset()
	writeBenchTable(&b, rep, o)
	assert.Contains(t, b.String(), "world 2, B=1 H=32 D=128, over nccl, moved by kernels")
}

func TestOverlapTable(t *testing.T) {
	rows := []benchRow{{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 20, Blocks: 132,
		BackToBackUS: 195.0, OverlapUS: 204.8, OverlapExchangeSlowdown: 0.0503, OverlapComputeSlowdown: 0.12}}
	var b bytes.Buffer
	writeTable(&b, overlapHead, overlapAlign, overlapTableRows(rows))
	out := b.String()
	assert.Contains(t, out, "exchange slowdown")
	assert.Contains(t, out, "195.0")
	assert.Contains(t, out, "204.8")
	assert.Contains(t, out, "+5.0%")
	assert.Contains(t, out, "+12.0%")
}
