package testutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/ulysses-go/ulysses/internal/cstub"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
)

// stubImage returns a function that builds a stub library once per test
// binary (build writes it into a directory and returns its path) and
// returns its bytes.
func stubImage(prefix string, build func(dir string) (string, error)) func() ([]byte, error) {
	return sync.OnceValues(func() ([]byte, error) {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		path, err := build(dir)
		if err != nil {
			return nil, err
		}
		return os.ReadFile(path)
	})
}

var (
	cudaImage         = stubImage("fakecuda", fakecuda.Build)
	cudaNoDeviceImage = stubImage("fakecuda-nodevice", fakecuda.BuildNoDevice)
	ncclImage         = stubImage("fakenccl", fakenccl.Build)
)

// FakeCUDA returns the path of a fresh copy of internal/fakecuda's stub
// driver (libcuda.so.1) in a temporary directory of tb. No process has
// loaded that file yet: once opened (driver.LoadLibrary, or driver.Load
// through ULYSSES_LIBCUDA), its state and counters are its own, whatever
// other copies the process has loaded. Without a C compiler for this
// platform (cstub.ErrNoCompiler: for a linux/arm64 test binary under
// emulation, the aarch64 cross compiler) the test is skipped, except under
// CI=true, where it fails; without dlopen (Windows) it is skipped.
func FakeCUDA(tb testing.TB) string {
	tb.Helper()
	return stubCopy(tb, "the stub CUDA driver", fakecuda.Library, cudaImage)
}

// FakeCUDANoDevice is FakeCUDA for a driver without a device
// (fakecuda.BuildNoDevice): its cuInit says CUDA_ERROR_NO_DEVICE, as a
// machine with the driver's library and no GPU does.
func FakeCUDANoDevice(tb testing.TB) string {
	tb.Helper()
	return stubCopy(tb, "the stub CUDA driver without a device", fakecuda.Library, cudaNoDeviceImage)
}

// FakeNCCL is FakeCUDA for internal/fakenccl's stub NCCL (libnccl.so.2).
func FakeNCCL(tb testing.TB) string {
	tb.Helper()
	return stubCopy(tb, "the stub NCCL", fakenccl.Library, ncclImage)
}

// stubCopy writes a fresh copy of image's library, named name, into tb's
// temporary directory and returns its path (see FakeCUDA).
func stubCopy(tb testing.TB, what, name string, image func() ([]byte, error)) string {
	tb.Helper()
	if runtime.GOOS == "windows" {
		tb.Skipf("no dlopen on windows: %s cannot be loaded", what)
	}
	b, err := image()
	if errors.Is(err, cstub.ErrNoCompiler) && os.Getenv("CI") != "true" {
		tb.Skipf("cannot build %s: %v", what, err)
		return ""
	}
	if err != nil {
		tb.Fatalf("building %s: %v", what, err)
		return ""
	}
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, b, 0o755); err != nil {
		tb.Fatalf("copying %s: %v", what, err)
	}
	return path
}
