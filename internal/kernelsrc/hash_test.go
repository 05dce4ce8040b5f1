package kernelsrc

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestHashChangesWithContentAndIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.cu"), []byte("x"), 0o644))
	h1, err := Hash(dir)
	require.NoError(t, err)
	require.Len(t, h1, 64)

	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("y"), 0o644))
	h2, err := Hash(dir)
	require.NoError(t, err)
	require.Equal(t, h1, h2, "non-kernel files must not change the hash")

	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.cu"), []byte("z"), 0o644))
	h3, err := Hash(dir)
	require.NoError(t, err)
	require.NotEqual(t, h1, h3)
}

func TestHashEmptyDirFails(t *testing.T) {
	_, err := Hash(t.TempDir())
	require.Error(t, err)
}
