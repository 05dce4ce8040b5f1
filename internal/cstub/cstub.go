// Package cstub compiles the stub C libraries that stand in for vendor
// libraries in tests (internal/fakecuda's libcuda, internal/fakenccl's
// libnccl). It needs a C compiler, cc, at test time only; the packages
// that use it build with CGO_ENABLED=0.
package cstub

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoCompiler is matched by the error Build returns when cc is missing.
var ErrNoCompiler = errors.New("no C compiler: cc is not in PATH")

// Build writes source to dir/src and compiles it with cc -shared -fPIC
// -O1 and cflags into dir/lib, and returns the library's absolute path.
// The error matches ErrNoCompiler when cc is missing.
func Build(dir, src, lib string, source []byte, cflags ...string) (path string, err error) {
	cc, err := exec.LookPath("cc")
	if err != nil {
		return "", fmt.Errorf("%w (install gcc or clang to build the stub %s): %v", ErrNoCompiler, lib, err)
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
