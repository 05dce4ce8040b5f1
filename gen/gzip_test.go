package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// writeGzip leaves a file holding the same content alone, whatever bytes
// compressed it, and rewrites one whose content differs.
func TestWriteGzipKeepsSameContent(t *testing.T) {
	p := filepath.Join(t.TempDir(), "x.gz")
	require.NoError(t, writeGzip(p, []byte("content")))
	got, err := readGzip(p)
	require.NoError(t, err)
	require.Equal(t, "content", string(got))

	// The same content compressed otherwise (a header field set): kept.
	raw, err := os.ReadFile(p)
	require.NoError(t, err)
	other := append([]byte(nil), raw...)
	other[4] = 1 // MTIME
	require.NoError(t, os.WriteFile(p, other, 0o644))
	require.NoError(t, writeGzip(p, []byte("content")))
	now, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, other, now, "same content: the file is left as it was")

	require.NoError(t, writeGzip(p, []byte("changed")))
	got, err = readGzip(p)
	require.NoError(t, err)
	require.Equal(t, "changed", string(got))
}
