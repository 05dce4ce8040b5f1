package cstub

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeCompilers makes PATH a directory holding only the named fake
// compilers, each a script answering -dumpmachine with its machine, and
// returns the directory.
func fakeCompilers(t *testing.T, machines map[string]string) string {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the fake compilers are shell scripts")
	}
	dir := t.TempDir()
	for name, machine := range machines {
		script := "#!/bin/sh\n[ \"$1\" = -dumpmachine ] && echo " + machine + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755))
	}
	t.Setenv("PATH", dir)
	t.Setenv(EnvCompiler, "")
	return dir
}

// TestCompiler: cc when it builds for the target, the GNU cross compiler
// when it does not (a linux/arm64 test binary under emulation on an amd64
// host), ErrNoCompiler naming what to install when that is missing too.
func TestCompiler(t *testing.T) {
	for _, tc := range []struct {
		name         string
		have         map[string]string // compiler name: its -dumpmachine
		goos, goarch string
		want         string // the compiler chosen, or "" for ErrNoCompiler
		says         string // in the error
	}{
		{name: "native", have: map[string]string{"cc": "x86_64-linux-gnu", "aarch64-linux-gnu-gcc": "aarch64-linux-gnu"},
			goos: "linux", goarch: "amd64", want: "cc"},
		{name: "native-arm64", have: map[string]string{"cc": "aarch64-linux-gnu"}, goos: "linux", goarch: "arm64", want: "cc"},
		{name: "clang-darwin", have: map[string]string{"cc": "arm64-apple-darwin24.1.0"}, goos: "darwin", goarch: "arm64", want: "cc"},
		{name: "emulated-arm64", have: map[string]string{"cc": "x86_64-linux-gnu", "aarch64-linux-gnu-gcc": "aarch64-linux-gnu"},
			goos: "linux", goarch: "arm64", want: "aarch64-linux-gnu-gcc"},
		{name: "only-cross", have: map[string]string{"aarch64-linux-gnu-gcc": "aarch64-linux-gnu"},
			goos: "linux", goarch: "arm64", want: "aarch64-linux-gnu-gcc"},
		{name: "no-cross", have: map[string]string{"cc": "x86_64-linux-gnu"}, goos: "linux", goarch: "arm64",
			says: "no C compiler for linux/arm64: cc does not target arm64, nor is aarch64-linux-gnu-gcc (on Debian: apt-get install gcc-aarch64-linux-gnu; or set ULYSSES_STUB_CC)"},
		{name: "no-cross-amd64", have: map[string]string{"cc": "aarch64-linux-gnu"}, goos: "linux", goarch: "amd64",
			says: "apt-get install gcc-x86-64-linux-gnu"},
		{name: "not-linux", have: map[string]string{"cc": "x86_64-linux-gnu", "aarch64-linux-gnu-gcc": "aarch64-linux-gnu"},
			goos: "darwin", goarch: "arm64", says: "no C compiler for darwin/arm64: cc does not target arm64 (install gcc or clang; or set ULYSSES_STUB_CC)"},
		{name: "none", goos: "linux", goarch: "arm64", says: "cc is not in PATH, nor is aarch64-linux-gnu-gcc (on Debian: apt-get install gcc-aarch64-linux-gnu, or gcc to build for the host; or set ULYSSES_STUB_CC)"},
		{name: "unknown-arch", have: map[string]string{"cc": "x86_64-linux-gnu"}, goos: "linux", goarch: "mips64", want: "cc"},
		{name: "cannot-say", have: map[string]string{"cc": ""}, goos: "linux", goarch: "arm64", want: "cc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeCompilers(t, tc.have)
			cc, err := compiler(tc.goos, tc.goarch)
			if tc.want == "" {
				require.ErrorIs(t, err, ErrNoCompiler)
				require.ErrorContains(t, err, tc.says)
				require.Empty(t, cc)
				return
			}
			require.NoError(t, err)
			require.Equal(t, filepath.Join(dir, tc.want), cc)
		})
	}
}

// TestCompilerFromEnv: $ULYSSES_STUB_CC wins, even over a cc that fits;
// one that is not there is ErrNoCompiler, naming the variable.
func TestCompilerFromEnv(t *testing.T) {
	dir := fakeCompilers(t, map[string]string{"cc": "aarch64-linux-gnu", "my-cc": "aarch64-linux-gnu"})
	t.Setenv(EnvCompiler, "my-cc")
	cc, err := compiler("linux", "arm64")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "my-cc"), cc)

	t.Setenv(EnvCompiler, filepath.Join(dir, "missing-cc"))
	_, err = compiler("linux", "arm64")
	require.ErrorIs(t, err, ErrNoCompiler)
	require.ErrorContains(t, err, EnvCompiler+"=")
}
