package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// ncclSample is nccl_bench.py's stdout format (json.dumps of its records).
const ncclSample = `{"impl": "nccl", "dtype": "bf16", "bytes_per_rank": 131072, "world": 2, "batch": 1, "heads": 32, "head_dim": 128, "op": "send_recv_heads", "tokens_per_rank": 16, "median_us": 108.5, "p10_us": 101.25, "p90_us": 120.0, "mean_us": 110.1, "back_to_back_us": 95.2, "iters": 200, "note": ""}
{"impl": "nccl", "dtype": "bf16", "bytes_per_rank": 131072, "world": 2, "batch": 1, "heads": 32, "head_dim": 128, "op": "a2a_only", "tokens_per_rank": 16, "median_us": 56.0, "p10_us": 50.0, "p90_us": 60.0, "mean_us": 56.5, "back_to_back_us": 50.1, "iters": 200, "note": ""}
{"impl": "nccl", "dtype": "fp8", "bytes_per_rank": 131072, "world": 2, "batch": 1, "heads": 32, "head_dim": 128, "op": "all_gather", "tokens_per_rank": 32, "median_us": 61.0, "p10_us": 58.0, "p90_us": 70.0, "mean_us": 62.0, "back_to_back_us": 59.0, "iters": 200, "note": "torch.float8_e4m3fn not supported by NCCL collectives; ran them on a torch.uint8 view of the same bytes; B=1: gathered [P,1,T_r,H,D] is already [1,T,H,D], permute skipped"}
{"impl": "nccl", "dtype": "bf16", "bytes_per_rank": 12345, "world": 2, "batch": 1, "heads": 32, "head_dim": 128, "op": "gather_heads", "tokens_per_rank": null, "median_us": null, "p10_us": null, "p90_us": null, "mean_us": null, "back_to_back_us": null, "iters": 0, "note": "skipped: 12345 bytes is not a positive multiple of B*H*D*elem = 8192 bytes"}
MISMATCH dtype=bf16 bytes_per_rank=1048576
`

func TestParseNCCL(t *testing.T) {
	recs, other, err := parseNCCL(strings.NewReader(ncclSample))
	require.NoError(t, err)
	require.Len(t, recs, 4)
	assert.Equal(t, []string{"MISMATCH dtype=bf16 bytes_per_rank=1048576"}, other)
	r := recs[0]
	assert.Equal(t, "send_recv_heads", r.Op)
	assert.Equal(t, "bf16", r.DType)
	assert.Equal(t, int64(131072), r.BytesPerRank)
	require.NotNil(t, r.MedianUS)
	assert.Equal(t, 108.5, *r.MedianUS)
	assert.Equal(t, 16, *r.TokensPerRank)
	assert.Nil(t, recs[3].MedianUS)
	assert.Nil(t, recs[3].TokensPerRank)
	assert.Contains(t, recs[3].Note, "skipped")

	_, _, err = parseNCCL(strings.NewReader("{\"op\": \n"))
	assert.Error(t, err)
}

func TestCompareRows(t *testing.T) {
	recs, _, err := parseNCCL(strings.NewReader(ncclSample))
	require.NoError(t, err)
	rows := []benchRow{
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 131072, MedianUS: 10.85, SMs: 0, Blocks: 132},
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 131072, MedianUS: 21.7, SMs: 16, Blocks: 16},
		{Op: "all_gather", DType: "fp8e4m3", BytesPerRank: 131072, MedianUS: 6.1, Blocks: 132},
		{Op: "gather_heads", DType: "bf16", BytesPerRank: 131072, MedianUS: 9},  // no NCCL record
		{Op: "all_gather", DType: "fp8e5m2", BytesPerRank: 131072, MedianUS: 6}, // NCCL has no e5m2
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 131072, MedianUS: 5.425, Blocks: 132, Wire: "e4m3"},
	}
	cmp := compareRows(rows, recs)
	require.Len(t, cmp, 4)
	assert.Equal(t, "e4m3", cmp[3].Wire, "a lossy row beside NCCL's exact one")
	assert.InDelta(t, 20.0, cmp[3].Ratio, 1e-9)
	assert.Empty(t, cmp[0].Wire)
	assert.InDelta(t, 10.0, cmp[0].Ratio, 1e-9)
	assert.Equal(t, 108.5, cmp[0].NCCLUS)
	assert.InDelta(t, 5.0, cmp[1].Ratio, 1e-9)
	assert.Equal(t, "fp8e4m3", cmp[2].DType)
	assert.InDelta(t, 10.0, cmp[2].Ratio, 1e-9)
}

func TestNCCLArgs(t *testing.T) {
	fs, o := newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--bytes", "128K,1M", "--dtypes", "bf16,fp16,fp8", "--iters", "50"}))
	p, err := o.plan()
	require.NoError(t, err)
	args, err := ncclArgs("bench/nccl_bench.py", o, p, 2)
	require.NoError(t, err)
	assert.Equal(t, "bench/nccl_bench.py --world 2 --batch 1 --heads 32 --head-dim 128 --bytes 131072,1048576 --dtypes bf16,fp8 --warmup 20 --iters 50 --rotate 4",
		strings.Join(args, " "))

	var un *unavailableError
	_, err = ncclArgs("x", o, p, 3)
	assert.ErrorAs(t, err, &un, "32 heads on 3 ranks: the script would refuse them")
	assert.ErrorContains(t, err, "divisible by the world size (3)")

	p.dtypes = []a2a.DType{a2a.Float16}
	_, err = ncclArgs("x", o, p, 2)
	assert.ErrorAs(t, err, &un)
}

func TestRunNCCLUnavailable(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "fake.py")
	require.NoError(t, os.WriteFile(script, []byte("import sys\nprint('nccl_bench: torch is not installed', file=sys.stderr)\nsys.exit(3)\n"), 0o644))
	_, err := runNCCL(context.Background(), []string{script}, io.Discard)
	var un *unavailableError
	require.True(t, errors.As(err, &un), "%v", err)
	assert.Equal(t, "nccl_bench: torch is not installed", un.reason)

	require.NoError(t, os.WriteFile(script, []byte("print('{\"op\": \"all_gather\", \"dtype\": \"bf16\", \"bytes_per_rank\": 8, \"median_us\": 3.5}')\nprint('MISMATCH x')\nraise SystemExit(1)\n"), 0o644))
	recs, err := runNCCL(context.Background(), []string{script}, io.Discard)
	require.Error(t, err)
	assert.False(t, errors.As(err, &un))
	assert.Contains(t, err.Error(), "MISMATCH x")
	assert.Len(t, recs, 1)
}

func TestFindNCCLScript(t *testing.T) {
	// The tests run in cmd/ulysses: ../bench is not there, ../../bench is;
	// from the module root ./bench is.
	wd, err := os.Getwd()
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(filepath.Dir(exe), ncclScript)); err == nil {
		t.Skip("a copy of the script lies next to the test binary")
	}
	t.Chdir(filepath.Join(wd, "..", ".."))
	p, err := findNCCLScript()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("bench", ncclScript), p)

	t.Chdir(filepath.Join(wd, "..")) // cmd/: ../bench
	p, err = findNCCLScript()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("..", "bench", ncclScript), p)

	t.Chdir(t.TempDir())
	_, err = findNCCLScript()
	var un *unavailableError
	assert.ErrorAs(t, err, &un)
}
