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
	require.NoError(t, run(0))
}
