package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// docs/GUIDE.md shows this program whole: the code block after its marker
// must be the file, byte for byte.
func TestGuideShowsThisFile(t *testing.T) {
	guide, err := os.ReadFile("../../docs/GUIDE.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	const marker = "<!-- the file examples/join/main.go, kept identical to it by its test -->\n```go\n"
	_, block, ok := strings.Cut(string(guide), marker)
	require.True(t, ok, "docs/GUIDE.md lacks the marker %q", marker)
	block, _, ok = strings.Cut(block, "```\n")
	require.True(t, ok, "docs/GUIDE.md: the code block is not closed")
	require.Equal(t, string(src), block, "docs/GUIDE.md's copy of examples/join/main.go differs: copy the file into it")
}

// A secret is required before anything else is tried.
func TestRefusesAnEmptySecret(t *testing.T) {
	err := run(0, 1, "127.0.0.1:0", nil)
	require.ErrorContains(t, err, "Secret is empty")
}

// The program on a GPU, as a group of one (skipped without a driver or a
// GPU, a failure then under ULYSSES_REQUIRE_GPU=1).
func TestRoundTripOnAGPU(t *testing.T) {
	_, err := a2a.System()
	testutil.RequireGPU(t, err, a2a.ErrNoDriver, a2a.ErrNoDevice)
	require.NoError(t, run(0, 1, "127.0.0.1:0", []byte("a secret of the group of one, 32")))
}

// Without the NVIDIA driver the program says so in one line that keeps the
// dynamic loader's words (in a child: the driver is loaded once a process).
func TestWithoutDriver(t *testing.T) {
	testutil.RunChild(t, "TestWithoutDriverChild", testutil.NoDriverEnv)
}

func TestWithoutDriverChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	testutil.RequireNoDriverError(t, run(0, 1, "127.0.0.1:0", []byte("a secret of sixteen bytes")), a2a.ErrNoDriver)
}
