package cstub_test

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/cstub"
	"github.com/ulysses-go/ulysses/internal/dl"
)

func needCC(t *testing.T) {
	if _, err := exec.LookPath("cc"); err != nil {
		t.Skipf("no C compiler: %v", err)
	}
}

// TestBuild compiles a one-function library that dl can open and bind.
func TestBuild(t *testing.T) {
	needCC(t)
	path, err := cstub.Build(t.TempDir(), "answer.c", "libanswer.so", []byte("int answer(void) { return 42; }\n"))
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(path))
	lib, err := dl.Open(path)
	require.NoError(t, err)
	defer lib.Close()
	p, err := lib.Sym("answer")
	require.NoError(t, err)
	require.NotZero(t, p)
}

func TestBuildWithoutCompiler(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := cstub.Build(t.TempDir(), "x.c", "libx.so", nil)
	require.ErrorIs(t, err, cstub.ErrNoCompiler)
	require.Contains(t, err.Error(), "libx.so")
}

// TestBuildError: a compile error comes back with the compiler's output,
// and does not match ErrNoCompiler.
func TestBuildError(t *testing.T) {
	needCC(t)
	_, err := cstub.Build(t.TempDir(), "bad.c", "libbad.so", []byte("this is not C\n"))
	require.Error(t, err)
	require.NotErrorIs(t, err, cstub.ErrNoCompiler)
	require.Contains(t, err.Error(), "bad.c")
	_, err = cstub.Build(filepath.Join(t.TempDir(), "missing"), "x.c", "libx.so", nil)
	require.ErrorContains(t, err, "writing the source")
}
