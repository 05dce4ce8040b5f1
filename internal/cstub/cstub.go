// Package cstub compiles the stub C libraries that stand in for vendor
// libraries in tests (internal/fakecuda's libcuda, internal/fakenccl's
// libnccl), for the platform of the process that loads them. It needs a C
// compiler at test time only: cc, or the target's cross compiler where cc
// builds for another (a linux/arm64 test binary run under emulation on an
// amd64 host), or $ULYSSES_STUB_CC. The packages that use it build with
// CGO_ENABLED=0.
package cstub

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// ErrNoCompiler is matched by the error Build returns when there is no C
// compiler for the running platform.
var ErrNoCompiler = errors.New("no C compiler")

// Build writes source to dir/src and compiles it with -shared -fPIC -O1
// and cflags into dir/lib, a library for the running GOOS/GOARCH, and
// returns the library's absolute path. The compiler is $ULYSSES_STUB_CC,
// else cc if it targets GOARCH, else the GNU cross compiler for GOARCH (on
// linux); finding it runs cc -dumpmachine once. The error matches
// ErrNoCompiler when there is none, and names lib.
func Build(dir, src, lib string, source []byte, cflags ...string) (path string, err error) {
	cc, err := compiler(runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return "", fmt.Errorf("building the stub %s: %w", lib, err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	srcPath := filepath.Join(dir, src)
	if err := os.WriteFile(srcPath, source, 0o644); err != nil {
		return "", fmt.Errorf("writing the source: %w", err)
	}
	path = filepath.Join(dir, lib)
	args := append([]string{"-shared", "-fPIC", "-O1"}, cflags...)
	cmd := exec.Command(cc, append(args, "-o", path, srcPath)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return path, nil
}
