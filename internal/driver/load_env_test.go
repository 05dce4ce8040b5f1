package driver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// envLoadChild marks a re-executed test binary running one of the
// TestLoadEnvChild tests; its value is the library Load must report.
const envLoadChild = "ULYSSES_DRIVER_LOAD_CHILD"

// runLoadChild re-executes the test binary to run TestLoadEnvChild with
// ULYSSES_LIBCUDA=lib, since Load caches its result per process. The child
// inherits the environment and sets nothing else.
func runLoadChild(t *testing.T, lib string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestLoadEnvChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), EnvLibrary+"="+lib, envLoadChild+"="+lib)
	if gorace := os.Getenv("GORACE"); !strings.Contains(gorace, "atexit_sleep_ms") {
		// A -race child would otherwise sleep 1 s at exit.
		cmd.Env = append(cmd.Env, "GORACE="+strings.TrimSpace(gorace+" atexit_sleep_ms=0"))
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: TestLoadEnvChild") {
		t.Fatalf("child did not run TestLoadEnvChild:\n%s", out)
	}
	return string(out)
}

// TestLoadEnvChild is the child's half of the TestLoadEnv tests: it calls
// Load with ULYSSES_LIBCUDA set and checks it opened that library.
func TestLoadEnvChild(t *testing.T) {
	lib := os.Getenv(envLoadChild)
	if lib == "" {
		t.Skip("run by TestLoadEnvMissing and TestLoadEnvStub")
	}
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
	if !strings.Contains(out, "cannot load "+lib) {
		t.Errorf("child output lacks the error naming %s:\n%s", lib, out)
	}
}

func TestLoadEnvStub(t *testing.T) {
	lib, err := fakecuda.Build(t.TempDir())
	if errors.Is(err, fakecuda.ErrNoCompiler) && os.Getenv("CI") != "true" {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	runLoadChild(t, lib)
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
