package a2a

import (
	"fmt"
	"os"
	"strings"
	"testing"

	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// EnvTestNCCL names the NCCL transport's tuning that this test binary's
// processes, its rank processes included, run the NCCL tests with: a
// comma-separated list of "auto", "async" or "blocking" (the launch) and "self"
// (a rank's own share through NCCL too, so that a group of one on one GPU
// goes through NCCL for every byte): how the GPU suite checks the
// transport's paths on one GPU.
const EnvTestNCCL = "ULYSSES_TEST_NCCL"

// testNCCLTuning is what $ULYSSES_TEST_NCCL set, the tuning a test that
// sets its own returns to.
var testNCCLTuning nccltransport.Tuning

// SetNCCLTuningFromEnv sets the NCCL transport's tuning from
// $ULYSSES_TEST_NCCL, if set, for the process's life; TestMain calls it.
func SetNCCLTuningFromEnv() error {
	v := os.Getenv(EnvTestNCCL)
	if v == "" {
		return nil
	}
	var tn nccltransport.Tuning
	for _, w := range strings.Split(v, ",") {
		if w == "self" {
			tn.Self = true
			continue
		}
		l, err := nccltransport.ParseLaunch(w)
		if err != nil {
			return fmt.Errorf("%s=%q: want a comma-separated list of a launch (auto, async or blocking) and self: %w", EnvTestNCCL, v, err)
		}
		tn.Launch = l
	}
	testNCCLTuning = tn
	nccltransport.SetTuning(tn)
	return nil
}

// RestoreNCCLTuning sets the tuning back to what SetNCCLTuningFromEnv
// set (the zero Tuning without it): for tests that set their own.
func RestoreNCCLTuning() { nccltransport.SetTuning(testNCCLTuning) }

// UseNCCLTuning sets the tuning of the NCCL transports made until tb
// ends.
func UseNCCLTuning(tb testing.TB, tn nccltransport.Tuning) {
	tb.Helper()
	nccltransport.SetTuning(tn)
	tb.Cleanup(RestoreNCCLTuning)
}
