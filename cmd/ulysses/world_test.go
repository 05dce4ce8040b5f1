package main

import (
	"encoding/json"
	"os"
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
