package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// The program on the GPUs of this machine (skipped without a driver or a
// GPU, a failure then under ULYSSES_REQUIRE_GPU=1).
func TestOnTheGPUs(t *testing.T) {
	_, err := a2a.System()
	testutil.RequireGPU(t, err, a2a.ErrNoDriver, a2a.ErrNoDevice)
	require.NoError(t, run(5))
}

// Without the NVIDIA driver the program says so in one line that keeps the
// dynamic loader's words (in a child: the driver is loaded once a process).
func TestWithoutDriver(t *testing.T) {
	testutil.RunChild(t, "TestWithoutDriverChild", testutil.NoDriverEnv)
}

func TestWithoutDriverChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	testutil.RequireNoDriverError(t, run(1), a2a.ErrNoDriver)
}
