package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// stubImage is the stub driver, compiled once per test binary.
var stubImage = sync.OnceValues(func() ([]byte, error) {
	dir, err := os.MkdirTemp("", "fakecuda")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	path, err := fakecuda.Build(dir)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(path)
})

// FakeCUDA returns the path of a fresh copy of internal/fakecuda's stub
// driver (libcuda.so.1) in a temporary directory of tb. No process has
// loaded that file yet: once opened (driver.LoadLibrary, or driver.Load
// through ULYSSES_LIBCUDA), its state and counters are its own, whatever
// other copies the process has loaded. Without a C compiler the test is
// skipped, except under CI=true, where it fails; without dlopen
// (Windows) it is skipped.
func FakeCUDA(tb testing.TB) string {
	tb.Helper()
	if runtime.GOOS == "windows" {
		tb.Skip("no dlopen on windows: the stub driver cannot be loaded")
	}
	image, err := stubImage()
	if errors.Is(err, fakecuda.ErrNoCompiler) && os.Getenv("CI") != "true" {
		tb.Skipf("cannot build the stub CUDA driver: %v", err)
	}
	if err != nil {
		tb.Fatalf("building the stub CUDA driver: %v", err)
	}
	path := filepath.Join(tb.TempDir(), fakecuda.Library)
	if err := os.WriteFile(path, image, 0o755); err != nil {
		tb.Fatalf("copying the stub CUDA driver: %v", err)
	}
	return path
}
