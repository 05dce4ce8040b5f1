package driver

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/ulysses-go/ulysses/internal/testutil"
)

// envLoadWant is the library a TestLoadEnvChild child must report having
// opened: ULYSSES_LIBCUDA as its parent set it.
const envLoadWant = "ULYSSES_DRIVER_TEST_LOAD_WANT"

// runLoadChild runs TestLoadEnvChild in a child process with
// ULYSSES_LIBCUDA=lib, since Load caches its result per process.
func runLoadChild(t *testing.T, lib string) string {
	t.Helper()
	return testutil.RunChild(t, "TestLoadEnvChild", EnvLibrary+"="+lib, envLoadWant+"="+lib)
}

// TestLoadEnvChild is the child's half of the TestLoadEnv tests: it calls
// Load with ULYSSES_LIBCUDA set and checks it opened that library.
func TestLoadEnvChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	lib := os.Getenv(envLoadWant)
	if got := os.Getenv(EnvLibrary); got != lib {
		t.Fatalf("%s=%q, want %q", EnvLibrary, got, lib)
	}
	d, err := Load()
	if strings.HasPrefix(lib, "/nonexistent/") {
		if d != nil || !errors.Is(err, ErrNoDriver) || !strings.Contains(err.Error(), lib) {
			t.Fatalf("Load() = %v, %v; want an error matching ErrNoDriver naming %s", d, err, lib)
		}
		t.Logf("Load: %v", err)
		return
	}
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if d.Path() != lib {
		t.Fatalf("Load opened %s, want %s", d.Path(), lib)
	}
	if name, err := d.DeviceName(0); err != nil || !strings.HasPrefix(name, "Fake CUDA Device") {
		t.Fatalf("DeviceName(0) = %q, %v; want the stub's device", name, err)
	}
	t.Logf("Load: %s", d.Path())
}

func TestLoadEnvMissing(t *testing.T) {
	const lib = "/nonexistent/x.so"
	out := runLoadChild(t, lib)
	if !strings.Contains(out, lib+": cannot open shared object file") {
		t.Errorf("child output lacks the loader's words naming %s:\n%s", lib, out)
	}
}

func TestLoadEnvStub(t *testing.T) {
	runLoadChild(t, testutil.FakeCUDA(t))
}

func TestLibraryPath(t *testing.T) {
	t.Setenv(EnvLibrary, "")
	if got := libraryPath(); got != DefaultLibrary {
		t.Errorf("empty %s: libraryPath() = %q, want %q", EnvLibrary, got, DefaultLibrary)
	}
	t.Setenv(EnvLibrary, "/opt/nvidia/lib/libcuda.so.1")
	if got := libraryPath(); got != "/opt/nvidia/lib/libcuda.so.1" {
		t.Errorf("libraryPath() = %q", got)
	}
	os.Unsetenv(EnvLibrary)
	if got := libraryPath(); got != DefaultLibrary {
		t.Errorf("unset %s: libraryPath() = %q, want %q", EnvLibrary, got, DefaultLibrary)
	}
}
