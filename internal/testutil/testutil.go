// Package testutil is the one home of the helpers the tests of this module
// share: the GPU requirement (RequireGPU), child processes of a test binary
// (RunChild, SkipUnlessChild, and Main with ScenarioEnv and ScenarioArgs for
// worker processes), and the stub CUDA driver and NCCL (FakeCUDA, FakeNCCL).
//
// It imports no package of this module but the stubs' (internal/fakecuda,
// internal/fakenccl, internal/cstub, internal/dl), so the in-package tests
// of any other package, internal/driver's included, can use it without an
// import cycle. It is for tests only.
package testutil

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// EnvRequireGPU turns every GPU skip into a failure when set to 1: GPU runs
// set it, so a GPU run can never pass by skipping.
const EnvRequireGPU = "ULYSSES_REQUIRE_GPU"

// RequireGPU is how a GPU test reacts to err, what looking for the driver
// and a device gave: nothing when err is nil; a skip when err matches one
// of noGPU (the callers' "no driver" and "no device" sentinels), or a
// failure instead under ULYSSES_REQUIRE_GPU=1; a failure for any other
// error. It skips only on those sentinels, so a broken driver or a bug
// fails the test rather than hiding behind a skip.
func RequireGPU(tb testing.TB, err error, noGPU ...error) {
	tb.Helper()
	if err == nil {
		return
	}
	for _, sentinel := range noGPU {
		if !errors.Is(err, sentinel) {
			continue
		}
		if os.Getenv(EnvRequireGPU) == "1" {
			tb.Fatalf("%s=1 but: %v", EnvRequireGPU, err)
			return
		}
		tb.Skipf("no GPU: %v", err)
		return
	}
	tb.Fatalf("looking for a GPU: %v", err)
}

// NoDriverEnv is the environment ("KEY=value") of a machine without the
// NVIDIA driver, for RunChild: the driver library is a missing file,
// whatever the machine has installed.
const NoDriverEnv = "ULYSSES_LIBCUDA=/nonexistent/libcuda.so.1"

// RequireNoDriverError fails tb unless err is what a program should say on
// a machine without the driver (NoDriverEnv): it matches noDriver (the
// caller's "no driver" sentinel), it is one line that keeps the dynamic
// loader's own words and says what to do, and it names the driver once.
func RequireNoDriverError(tb testing.TB, err, noDriver error) {
	tb.Helper()
	if !errors.Is(err, noDriver) {
		tb.Fatalf("want an error matching %v, got %v", noDriver, err)
	}
	msg := err.Error()
	for _, want := range []string{"/nonexistent/libcuda.so.1: cannot open shared object file", "install the NVIDIA driver"} {
		if !strings.Contains(msg, want) {
			tb.Errorf("%q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") || strings.Count(msg, "CUDA driver") > 1 {
		tb.Errorf("%q: want one line naming the CUDA driver at most once", msg)
	}
}
