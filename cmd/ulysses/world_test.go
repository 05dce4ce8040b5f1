package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// envWorldWant passes TestWorldChild the start of the line it expects.
const envWorldWant = "ULYSSES_TEST_WORLD_WANT"

// TestWorlds runs info, check and bench in the two worlds without a GPU,
// each set up here whatever the machine has installed: no driver
// (ULYSSES_LIBCUDA names a missing file) and a driver without a device
// (the stub driver whose cuInit says so). Each child is a fresh process,
// since the driver is loaded once per process.
func TestWorlds(t *testing.T) {
	for _, w := range []struct{ name, lib, want string }{
		{"no-driver", "/nonexistent/libcuda.so.1",
			"ulysses: no CUDA driver: /nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory: install the NVIDIA driver, which provides libcuda.so.1"},
		{"no-device", testutil.FakeCUDANoDevice(t),
			"ulysses: no GPU (no CUDA-capable device is detected): run on a machine with an NVIDIA GPU, or check CUDA_VISIBLE_DEVICES"},
	} {
		t.Run(w.name, func(t *testing.T) {
			testutil.RunChild(t, "TestWorldChild", driver.EnvLibrary+"="+w.lib, envWorldWant+"="+w.want)
		})
	}
}

// TestWorldChild is TestWorlds' half in the child: every command that
// needs the driver says why it cannot run in one line and exits 3.
func TestWorldChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	want := os.Getenv(envWorldWant)
	for _, args := range [][]string{
		{"info"},
		{"check"},
		{"check", "--world", "2", "--wire", "e4m3", "--dtypes", "bf16"},
		{"bench", "--iters", "1"},
		{"bench", "--single-process", "--world", "1"},
	} {
		code, stdout, stderr := runArgs(args...)
		assert.Equal(t, exitNoGPU, code, "%v: %s", args, stderr)
		assert.Empty(t, stdout, "%v", args)
		assert.Equal(t, want+"\n", stderr, "%v: one line", args)
		assert.Less(t, len(stderr), 200, "%v: one short line", args)
		assert.LessOrEqual(t, strings.Count(stderr, "CUDA driver"), 1, "%v: names the driver once", args)
	}

	code, stdout, stderr := runArgs("info", "--json")
	assert.Equal(t, exitNoGPU, code)
	assert.Equal(t, want+"\n", stderr)
	var obj struct {
		Error string `json:"error"`
		Exit  int    `json:"exit"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &obj), "info --json writes a JSON error object: %q", stdout)
	assert.Equal(t, exitNoGPU, obj.Exit)
	assert.Equal(t, strings.TrimPrefix(want, "ulysses: "), obj.Error)
}

// noDriverLine is what every command that needs the driver prints, alone,
// where there is none.
const noDriverLine = "ulysses: no CUDA driver: /nonexistent/libcuda.so.1: cannot open shared object file: No such file or directory: install the NVIDIA driver, which provides libcuda.so.1\n"

// runTool runs name args in this package's directory with no driver
// (ULYSSES_LIBCUDA names a missing file) and returns its exit status and
// output.
func runTool(t *testing.T, name string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), driver.EnvLibrary+"=/nonexistent/libcuda.so.1")
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

// goTool is the go command, or the test skips.
func goTool(t *testing.T) string {
	t.Helper()
	g, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	return g
}

// The README's promise, as the shell sees it: the command built as the
// README says exits 3 without a driver, with the one-line reason; through
// go run, the README's first command, the shell sees go run's own 1,
// after the reason and go run's "exit status 3", which the README says.
func TestCheckExitStatusWithoutDriver(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	const build = "`go build -o ulysses ./cmd/ulysses && ./ulysses check`"
	for _, want := range []string{"go run ./cmd/ulysses check", "the shell sees 1", "(`exit status 3`)", build} {
		assert.Contains(t, string(readme), want, "README.md says how check's exit status reaches the shell")
	}
	g := goTool(t)
	exe := filepath.Join(t.TempDir(), "ulysses")
	cmd := exec.Command(g, "build", "-o", exe, "./cmd/ulysses")
	cmd.Dir = "../.."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)

	code, stdout, stderr := runTool(t, exe, "check")
	assert.Equal(t, exitNoGPU, code, "./ulysses check: %s", stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, noDriverLine, stderr, "one line, the reason")

	code, stdout, stderr = runTool(t, g, "run", ".", "check")
	assert.Equal(t, 1, code, "go run . check: the shell sees go run's status: %s", stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, noDriverLine+"exit status 3\n", stderr, "the reason, then go run's line with the command's status")
}
