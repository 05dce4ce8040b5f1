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
