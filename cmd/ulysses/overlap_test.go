package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// The burner on the stub driver: it loads burn.ptx, finds the entry,
// launches one block per SM on its own stream with its two parameters,
// times with its events, and releases all it made.
func TestBurnerOnFakeDriver(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	drv, err := driver.LoadLibrary(lib)
	require.NoError(t, err)
	t.Setenv(fakecuda.EnvRecordParams, "2")
	b, err := openBurner(drv, 0, 7)
	require.NoError(t, err)
	_, err = b.run(1234)
	require.NoError(t, err)
	calls, err := fakecuda.ReadCalls(lib)
	require.NoError(t, err)
	assert.Equal(t, [3]uint32{7, 1, 1}, calls.Launch.Grid)
	assert.Equal(t, [3]uint32{burnThreads, 1, 1}, calls.Launch.Block)
	assert.Equal(t, uint64(b.out), calls.Launch.Args[0], "out")
	assert.Equal(t, uint64(1234), calls.Launch.Args[1]&0xffffffff, "iters")
	assert.Equal(t, uint64(b.timed.stream), uint64(calls.Launch.Stream))
	require.NoError(t, b.close())
	assert.Empty(t, b.undo)
}

// bench --overlap with two ranks on one GPU in this process, on the stub
// driver: every row is timed beside the burn kernel, and each rank loads
// the kernel's module once for the whole run, before its first Comm and
// unloaded after its last, where it was loaded and unloaded with each
// Comm, its waits for the whole device stalling the other rank's kernels
// (on an H200: "rank 0 waited 10s in Close for rank 1 to close too").
// Then one rank alone as a worker runs it (benchRank, its GPU by
// default), and the burner refuses to open, or reports closing, while a
// Comm of the process is live. In a child: the driver is loaded once per
// process.
func TestBenchOverlapSingleProcess(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	out := filepath.Join(t.TempDir(), "b.json")
	testutil.RunChild(t, "TestBenchOverlapSingleProcessChild", driver.EnvLibrary+"="+lib, "FAKECUDA_DEVICES=1",
		"BENCH_LIB="+lib, "BENCH_JSON="+out)
	rep, err := readReport(out)
	require.NoError(t, err)
	require.Len(t, rep.Rows, 4, "bf16 and fp8 on all SMs and 8")
	for _, r := range rep.Rows {
		assert.Positive(t, r.OverlapUS, "%s %s %d SMs: timed beside the burn kernel", r.Op, r.DType, r.SMs)
	}
}

func TestBenchOverlapSingleProcessChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	lib := os.Getenv("BENCH_LIB")
	args := []string{"--overlap", "--bytes", "128K", "--iters", "2", "--warmup", "0", "--rotate", "1",
		"--ops", "send_recv_heads", "--dtypes", "bf16,fp8", "--sms", "0,8"}
	code, stdout, stderr := runArgs(append([]string{"bench", "--single-process", "--ranks-per-gpu", "2", "--json", os.Getenv("BENCH_JSON")}, args...)...)
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.Contains(t, stdout, "beside a compute-bound kernel")
	c, err := fakecuda.Read(lib)
	require.NoError(t, err)
	assert.Equal(t, int64(2), c.PTXLoads, "the burn kernel's module, once per rank for the 4 Comms of each")
	assert.Empty(t, c.Live(), "everything released")

	// One rank alone, as a worker process runs it: its GPU by default.
	fs, o := newBenchFlags(true)
	_, ok := parseFlags(fs, args, io.Discard)
	require.True(t, ok)
	plan, err := o.plan()
	require.NoError(t, err)
	m := &member{rank: 0, world: 1, ex: exchange.NewLocal(1).Rank(0)}
	var errOut strings.Builder
	res, code := benchRank(m, o, plan, &errOut)
	require.Equal(t, 0, code, errOut.String())
	require.Len(t, res.Rows, 4)
	c, err = fakecuda.Read(lib)
	require.NoError(t, err)
	assert.Equal(t, int64(3), c.PTXLoads, "one more burn kernel")
	assert.Empty(t, c.Live())

	// The burner and a live Comm.
	comm, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16})
	require.NoError(t, err)
	_, err = openRankBurner(&member{rank: 0, world: 1})
	assert.ErrorContains(t, err, "not loaded while Comms of this process are live on 1 GPUs")
	require.NoError(t, comm.Close())
	b, err := openRankBurner(&member{rank: 0, world: 1, device: a2a.DeviceOrdinal(0)})
	require.NoError(t, err)
	comm, err = a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16})
	require.NoError(t, err)
	assert.ErrorContains(t, b.closeAfterComms(), "closed while Comms of this process were live on 1 GPUs")
	require.NoError(t, comm.Close())
	c, err = fakecuda.Read(lib)
	require.NoError(t, err)
	assert.Empty(t, c.Live(), "the burner released all the same")
}
