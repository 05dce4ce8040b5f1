package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

func runArgs(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// Every flag is checked before the driver loads: a bad one gives one line
// and exit 2 (exit 3 would mean the driver was asked first).
func TestFlagsCheckedBeforeTheDriver(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--sms", "100000"}, "--sms 100000: want 0 (all) to 1024"},
		{[]string{"bench", "--sms", "8,5000"}, "bad SM count \"5000\""},
		{[]string{"bench", "--bytes", "1K"}, "1024 bytes is not a positive multiple of B*H*D*elem = 8192 bytes"},
		{[]string{"bench", "--json", "/nonexistent/dir/out.json"}, "directory /nonexistent/dir does not exist"},
		{[]string{"check", "--dtypes", "int8"}, `check: --dtypes: a2a: unknown dtype "int8" (want bf16, fp16, fp8 or fp8e5m2)`},
		{[]string{"bench", "--dtypes", "int8"}, `bench: --dtypes: a2a: unknown dtype "int8" (want bf16, fp16, fp8 or fp8e5m2)`},
		{[]string{"bench", "--json", os.TempDir()}, "--json " + os.TempDir() + ": is a directory (want a file name)"},
		{[]string{"bench", "--plot", os.TempDir()}, "--plot " + os.TempDir() + ": is a directory"},
		{[]string{"bench", "--plot", "/nonexistent/dir/b.svg"}, "directory /nonexistent/dir does not exist"},
		{[]string{"bench", "--plot", "b.svg", "--sms", "8,16"}, "--sms must include 0"},
		{[]string{"check", "--wire", "fp4"}, `unknown --wire "fp4" (want exact, e4m3 or e5m2)`},
		{[]string{"check", "--wire", "e4m3"}, "--wire e4m3 moves bf16 and fp16 only, and --dtypes has fp8e4m3"},
		{[]string{"check", "--wire", "e5m2", "--dtypes", "bf16", "--mover", "copy-engines"}, "--mover copy-engines cannot carry it"},
		{[]string{"bench", "--wires", "exact,fp4"}, `unknown --wires "fp4"`},
		{[]string{"bench", "--wires", ","}, "no wires"},
		{[]string{"bench", "--wires", "exact,e4m3", "--dtypes", "fp8,fp8e5m2"}, "--wires e4m3 moves bf16 and fp16 only, and --dtypes has neither"},
		{[]string{"bench", "--wires", "e5m2", "--mover", "copy-engines"}, "--mover copy-engines cannot carry it"},
		{[]string{"check", "--sharing", "cuda-ipc"}, `unknown --sharing "cuda-ipc" (want default, legacy-ipc, fd or auto)`},
		{[]string{"bench", "--sharing", "fabric"}, `unknown --sharing "fabric"`},
	} {
		code, stdout, stderr := runArgs(tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		assert.Empty(t, stdout, "%v", tc.args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
	// The dtypes are read first, in any case; the bad --sms after them
	// stops the run before anything starts.
	code, _, stderr := runArgs("check", "--dtypes", "BF16,FP8", "--sms", "-1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--sms -1", "dtype names in any case: %s", stderr)
	// A lossy wire with 16-bit dtypes, the kernels and auto is fine (wire
	// names in any case): the bad --sms stops the run.
	code, _, stderr = runArgs("check", "--wire", "E4M3", "--dtypes", "bf16,fp16", "--mover", "auto", "--sms", "-1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--sms -1", stderr)
	code, _, stderr = runArgs("bench", "--wires", "exact,E5M2", "--sms", "-1")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "bad SM count", "fp8 dtypes beside bf16 are skipped over the wire, not refused: %s", stderr)
}

func TestUsage(t *testing.T) {
	code, stdout, stderr := runArgs()
	assert.Equal(t, 2, code)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "usage: ulysses <command>")

	code, stdout, _ = runArgs("help")
	assert.Equal(t, 0, code)
	for _, c := range []string{"info", "check", "bench", "help"} {
		assert.Contains(t, stdout, "\n  "+c+" ")
	}
	assert.NotContains(t, stdout, "worker")

	code, stdout, _ = runArgs("help", "check")
	assert.Equal(t, 0, code)
	for _, op := range []string{"SendRecvHeads", "GatherHeads", "AllGather", "HeadAllGather", "packed q, k and v", "back to back"} {
		assert.Contains(t, stdout, op, "check --help names everything check runs")
	}

	code, stdout, _ = runArgs("help", "bench")
	assert.Equal(t, 0, code)
	assert.Contains(t, stdout, "-sms")
	assert.NotContains(t, stdout, "-results", "worker-only flag")

	code, _, stderr = runArgs("frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `ulysses: unknown command "frobnicate"`)

	code, _, _ = runArgs("help", "frobnicate")
	assert.Equal(t, 2, code)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"info", "--nope"},
		{"info", "extra"},
		{"check", "--dtypes", "int8"},
		{"bench", "--bytes", "12Q"},
		{"bench", "--ops", "reduce"},
		{"bench", "--sms", "-1"},
		{"bench", "--compare", "mpi"},
		{"bench", "--wires", "fp8"},
		{"check", "--wire", "exact,e4m3"},
		{"bench", "--iters", "0"},
		{"check", "--world", "9"},
		{"check", "--ranks-per-gpu", "0"},
		{"check", "--sms", "-2"},
		{"bench", "--world", "9"},
		{"bench", "--world", "4", "--heads", "3"},
		{"worker"},
		{"worker", "nope"},
	} {
		code, _, stderr := runArgs(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.NotEmpty(t, stderr, "%v", args)
		assert.NotContains(t, stderr, "no CUDA driver", "%v: a usage error is found before the driver is loaded", args)
	}
	code, _, _ := runArgs("bench", "-h")
	assert.Equal(t, 0, code)
}

func TestWorkerOutsideGroup(t *testing.T) {
	t.Setenv("ULYSSES_RANK", "")
	t.Setenv("ULYSSES_WORLD", "")
	code, _, stderr := runArgs("worker", "check")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "not started by ulysses")
}

func TestDriverVersion(t *testing.T) {
	assert.Equal(t, "13.0", driverVersion(13000))
	assert.Equal(t, "12.4", driverVersion(12040))
	assert.Equal(t, "11.8", driverVersion(11080))
}

func TestWriteInfo(t *testing.T) {
	sys := a2a.SystemInfo{
		DriverVersion: 13000, Library: "/usr/lib/libcuda.so.1",
		Devices: []a2a.DeviceInfo{
			{Ordinal: 0, Name: "NVIDIA H200", BusID: "0000:1A:00.0", SMs: 132, ClockKHz: 1980000, Major: 9, TotalMemory: 150 << 30, Unified: true},
			{Ordinal: 1, Name: "NVIDIA H200", BusID: "0000:2B:00.0", SMs: 132, ClockKHz: 1980000, Major: 9, TotalMemory: 150 << 30, Unified: true, MachineCode: "sm_90",
				PosixFD: true},
			{Ordinal: 2, Name: "NVIDIA B200", BusID: "0000:3C:00.0", SMs: 148, ClockKHz: 1965000, Major: 10, TotalMemory: 180 << 30, Unified: true,
				PTXReason: "no machine code for compute capability 10.0"},
		},
		PeerAccess: [][]bool{{true, true, true}, {false, true, true}, {true, true, true}},
	}
	var b bytes.Buffer
	writeInfo(&b, sys)
	out := b.String()
	for _, s := range []string{"CUDA driver 13.0", "/usr/lib/libcuda.so.1", "NVIDIA H200", "0000:2B:00.0", "132", "1980", "9.0", "150.0", "yes", "no", "ulysses_2byte.ptx", "sm_70",
		"sm_90 sm_80", "GPU 2: PTX, compiled by the driver the first time each kind of operation runs: no machine code for compute capability 10.0"} {
		assert.Contains(t, out, s)
	}
	assert.Regexp(t, `(?m)^1 .* sm_90$`, out, "GPU 1's kernels")
	assert.Regexp(t, `(?m)^2 .* PTX$`, out, "GPU 2's kernels")
	r := newInfoReport(sys)
	assert.Equal(t, "13.0", r.Driver)
	require.Len(t, r.GPUs, 3)
	assert.Equal(t, "sm_90", r.GPUs[1].MachineCode)
	assert.Equal(t, "", r.GPUs[2].MachineCode)
	assert.Equal(t, "no machine code for compute capability 10.0", r.GPUs[2].PTXReason)
	assert.Equal(t, []bool{false, true, false}, []bool{r.GPUs[0].PosixFD, r.GPUs[1].PosixFD, r.GPUs[2].PosixFD}, "which GPUs share memory as descriptors")
	assert.Regexp(t, `(?m)^1 .* yes +no +sm_90$`, out, "GPU 1 shares memory as descriptors, not fabric handles")
	require.NotEmpty(t, r.PTX)
	assert.Equal(t, []string{"sm_90", "sm_80"}, r.PTX[0].Cubins)
	assert.Equal(t, "PTX", kernelsOf(sys.Devices[0]), "no machine code named")
	assert.Equal(t, "sm_90+PTX", kernelsOf(a2a.DeviceInfo{MachineCode: "sm_90", PTXReason: "ulysses_wire.ptx: failed"}))
}

// Flags go before, between or after the positional arguments; a flag's
// value is the next argument (even one that looks like a flag) unless it
// is boolean or written -name=value; "--" ends the flags.
func TestParseInterspersed(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		o, dtype  string
		smsOut    string
		overlap   bool
		remaining []string
	}{
		{[]string{"a.json"}, "bench.svg", "", "", false, []string{"a.json"}},
		{[]string{"--dtype", "bf16", "a.json", "-o", "y.svg"}, "y.svg", "bf16", "", false, []string{"a.json"}},
		{[]string{"a.json", "-o=y.png", "--sms-o", "s.svg"}, "y.png", "", "s.svg", false, []string{"a.json"}},
		{[]string{"-o", "--", "a.json", "b.json"}, "--", "", "", false, []string{"a.json", "b.json"}},
		{[]string{"a.json", "--overlap", "b.json", "--dtype", "-fp8"}, "bench.svg", "-fp8", "", true, []string{"a.json", "b.json"}},
		{[]string{"--", "-o", "a.json"}, "bench.svg", "", "", false, []string{"-o", "a.json"}},
		{[]string{"-", "--overlap=false"}, "bench.svg", "", "", false, []string{"-"}},
	} {
		fs, o := newPlotFlags()
		overlap := fs.Bool("overlap", false, "a boolean flag")
		require.NoError(t, parseInterspersed(fs, tc.args), "%v", tc.args)
		assert.Equal(t, tc.o, o.out, "%v: -o", tc.args)
		assert.Equal(t, tc.dtype, o.dtype, "%v: --dtype", tc.args)
		assert.Equal(t, tc.smsOut, o.smsOut, "%v: --sms-o", tc.args)
		assert.Equal(t, tc.overlap, *overlap, "%v: --overlap", tc.args)
		assert.Equal(t, tc.remaining, fs.Args(), "%v: the arguments", tc.args)
	}
	fs, _ := newPlotFlags()
	assert.ErrorContains(t, parseInterspersed(fs, []string{"a.json", "-o"}), "flag needs an argument: -o")
	fs, _ = newPlotFlags()
	assert.ErrorContains(t, parseInterspersed(fs, []string{"a.json", "--nope", "x"}), "flag provided but not defined: -nope")
}

// Every subcommand takes its flags after an argument too: plot draws with
// -o after the file; the others, which take no argument, refuse a stray
// one wherever it stands, naming it, before the driver is loaded; -h
// after an argument is still help.
func TestFlagsAfterArguments(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "y.svg")
	code, _, stderr := runArgs("plot", "--dtype", "bf16", "../../docs/bench/h200x2-sms.json", "-o", out)
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "<?xml"), "-o after the file is where the figure goes")
	for _, args := range [][]string{
		{"info", "stray", "--json"},
		{"check", "stray", "--world", "2"},
		{"check", "--world", "2", "stray"},
		{"bench", "--iters", "1", "stray", "--warmup", "0"},
	} {
		code, stdout, stderr := runArgs(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.Empty(t, stdout, "%v", args)
		assert.Equal(t, args[0]+": unexpected argument \"stray\"\n", stderr, "%v", args)
	}
	code, stdout, _ := runArgs("plot", "a.json", "-h")
	assert.Equal(t, 0, code)
	assert.Empty(t, stdout, "help goes to stderr after -h, as before")
}
