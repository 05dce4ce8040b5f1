package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// What TestMeasurePeerCopyChild must see: the pair, and a note containing
// the given text ("" for none).
const (
	envWantPair = "ULYSSES_TEST_WANT_PAIR"
	envWantNote = "ULYSSES_TEST_WANT_NOTE"
)

// TestMeasurePeerCopy measures against the stub driver, which the command
// finds as it would a real one, through driver.Load and ULYSSES_LIBCUDA:
// each case runs in a child process, Load caching the driver per process.
func TestMeasurePeerCopy(t *testing.T) {
	lib := testutil.FakeCUDA(t)
	for _, tc := range []struct {
		name, lib, pair, note string
		env                   []string
	}{
		{name: "two-gpus", lib: lib, pair: "GPU 0 -> GPU 1"},
		{name: "one-gpu", lib: lib, pair: "GPU 0 -> GPU 0 (one GPU: a local copy)", env: []string{fakecuda.EnvDevices + "=1"}},
		{
			name: "no-peer-access", lib: lib, pair: "GPU 0 -> GPU 1", env: []string{fakecuda.EnvNoPeer + "=0-1"},
			note: "peer copy rate unknown, no floor: enabling peer access: driver: cuCtxEnablePeerAccess: CUDA_ERROR_PEER_ACCESS_UNSUPPORTED",
		},
		{
			name: "no-driver", lib: "/nonexistent/libcuda.so.1", pair: "GPU 0 -> GPU 0 (one GPU: a local copy)",
			note: "peer copy rate unknown, no floor: driver: /nonexistent/libcuda.so.1: cannot open shared object file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{driver.EnvLibrary + "=" + tc.lib, envWantPair + "=" + tc.pair, envWantNote + "=" + tc.note}, tc.env...)
			t.Log(testutil.RunChild(t, "TestMeasurePeerCopyChild", env...))
		})
	}
}

func TestMeasurePeerCopyChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	bw, pair, note := measurePeerCopy(1<<20, 3)
	t.Logf("%s: %g bytes/s, note %q", pair, bw, note)
	require.Equal(t, os.Getenv(envWantPair), pair)
	if want := os.Getenv(envWantNote); want != "" {
		require.Contains(t, note, want)
		require.Zero(t, bw)
	} else {
		require.Empty(t, note)
		// 3 copies of 1 MiB between two events the stub puts 1 µs apart.
		require.InEpsilon(t, 3*float64(1<<20)/1e-6, bw, 1e-3)
	}
	if lib := os.Getenv(driver.EnvLibrary); fileExists(lib) {
		n, err := fakecuda.Read(lib)
		require.NoError(t, err)
		require.Empty(t, n.Live(), "left allocated")
	}
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func TestPeerCopyBandwidthNothingToTime(t *testing.T) {
	for _, c := range [][2]int{{0, 3}, {1 << 20, 0}} {
		_, err := peerCopyBandwidth(nil, 0, 1, int64(c[0]), c[1])
		require.ErrorContains(t, err, "nothing to time", "%d bytes, %d copies", c[0], c[1])
	}
}
