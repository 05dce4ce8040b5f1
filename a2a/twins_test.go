package a2a_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/twins"
)

// stream_ops.go is what gen/twins writes from ops.go: after changing an
// operation's methods, run `go generate ./a2a`.
func TestStreamOpsAreGenerated(t *testing.T) {
	src, err := os.ReadFile("ops.go")
	require.NoError(t, err)
	want, err := twins.StreamOps(src)
	require.NoError(t, err)
	got, err := os.ReadFile("stream_ops.go")
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "stream_ops.go is stale: run `go generate ./a2a`")
}
