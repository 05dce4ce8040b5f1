//go:build linux

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// Several ranks on one GPU need more hardware queues than the default.
func TestMain(m *testing.M) {
	if os.Getenv("CUDA_DEVICE_MAX_CONNECTIONS") == "" {
		os.Setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32")
	}
	os.Exit(m.Run())
}

// Stale PTX fails here, on any machine: run `go generate
// ./examples/attention` and commit the result.
func TestPTXIsFresh(t *testing.T) {
	src, err := os.ReadFile("attention.cu")
	require.NoError(t, err)
	sum := sha256.Sum256(src)
	first, _, _ := strings.Cut(attentionPTX, "\n")
	assert.Contains(t, first, "sha256 "+hex.EncodeToString(sum[:]), "attention.cu changed since attention.ptx was generated")
	assert.Contains(t, first, "DO NOT EDIT")
	assert.Contains(t, attentionPTX, ".entry attention(")
}

func TestSplitGivesEveryRankTokensAndKeepsTheTotal(t *testing.T) {
	for _, tc := range []struct{ total, p int }{{4096, 1}, {4096, 2}, {4096, 4}, {100, 3}, {8, 8}, {4099, 7}} {
		parts := split(tc.total, tc.p)
		require.Len(t, parts, tc.p)
		assert.Equal(t, tc.total, sum(parts), "%+v", tc)
		for _, n := range parts {
			assert.Positive(t, n, "%+v: %v", tc, parts)
		}
	}
}

// A step on the GPUs of this machine, one rank per GPU and then four
// ranks over them, with heads the world size does not divide, every
// output read after a random 0-4 ms (skipped without a driver
// or a GPU, a failure then under ULYSSES_REQUIRE_GPU=1).
func TestStepEqualsOneGPU(t *testing.T) {
	sys, err := a2a.System()
	testutil.RequireGPU(t, err, a2a.ErrNoDriver, a2a.ErrNoDevice)
	delay := func() { time.Sleep(time.Duration(rand.IntN(4000)) * time.Microsecond) }
	for _, ranks := range slices.Compact([]int{len(sys.Devices), 4}) {
		shares, err := runShape(ranks, 1000+ranks, 6, 5, delay)
		require.NoError(t, err, "%d ranks", ranks)
		require.Len(t, shares, ranks)
		for r, s := range shares {
			assert.Positive(t, s.exchange, "rank %d", r)
			assert.Greater(t, s.step, s.exchange, "rank %d", r)
		}
	}
}

// Without the NVIDIA driver the program says so in one line that keeps the
// dynamic loader's words (in a child: the driver is loaded once a process).
func TestWithoutDriver(t *testing.T) {
	testutil.RunChild(t, "TestWithoutDriverChild", testutil.NoDriverEnv)
}

func TestWithoutDriverChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	_, err := run(1, 64, 2, 1)
	testutil.RequireNoDriverError(t, err, a2a.ErrNoDriver)
}
