package testutil

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Environment variables that tell a process of a test binary what it was
// started for.
const (
	// EnvScenario names the scenario a worker process runs (see Main).
	EnvScenario = "ULYSSES_TEST_SCENARIO"
	// envChild names the one test a process started by RunChild runs.
	envChild = "ULYSSES_TEST_CHILD"
)

// childTimeout bounds a child started by RunChild; its tests get a minute
// less, so that they fail with a stack dump rather than being killed.
const childTimeout = 3 * time.Minute

// RunChild runs test, a top-level test of this test binary, alone in a
// child process, and returns the child's output once the test passed
// there; otherwise it fails tb, showing the output. The child inherits this
// process's environment, less the markers of this package, with env
// ("KEY=value") added last, so env wins. test itself starts with
// SkipUnlessChild. For what needs a fresh process: state kept once per
// process, such as the driver driver.Load caches, or a process to map
// memory into.
func RunChild(tb testing.TB, test string, env ...string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), childTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+test+"$", "-test.v", "-test.count=1",
		"-test.timeout="+(childTimeout-time.Minute).String())
	cmd.Env = append(inherited(), append([]string{envChild + "=" + test}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+test+" (") {
		tb.Fatalf("child running %s (%s): %v\n%s", test, strings.Join(env, " "), err, out)
	}
	return string(out)
}

// SkipUnlessChild skips the test unless this process is the child
// RunChild started to run it.
func SkipUnlessChild(tb testing.TB) {
	tb.Helper()
	if os.Getenv(envChild) != tb.Name() {
		tb.Skip("runs in a child process that its parent test starts (testutil.RunChild)")
	}
}

// Main is the TestMain of a test binary whose processes also serve as
// workers, such as the ranks internal/launch starts: a process started
// with ScenarioEnv(name) parses the test flags, runs run(name) instead of
// the tests and exits with its code; any other process runs the tests.
func Main(m *testing.M, run func(scenario string) int) {
	if name := os.Getenv(EnvScenario); name != "" {
		flag.Parse() // m.Run would: a worker may read -test.short
		os.Exit(run(name))
	}
	os.Exit(m.Run())
}

// ScenarioEnv is what to add to the environment of a process of this test
// binary (launch.Spec.Env, exec.Cmd.Env) to make it run scenario from Main
// instead of the tests.
func ScenarioEnv(scenario string) []string {
	return []string{EnvScenario + "=" + scenario, raceEnv()}
}

// ScenarioArgs are the arguments of such a process: no tests of its own
// (should Main not be its TestMain), and -test.short passed on.
func ScenarioArgs() []string {
	args := []string{"-test.run=^$"}
	if testing.Short() {
		args = append(args, "-test.short")
	}
	return args
}

// inherited is this process's environment without the markers of this
// package, for a child that must not take itself for a worker or for
// another child, and with raceEnv.
func inherited() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, EnvScenario+"=") && !strings.HasPrefix(kv, envChild+"=") {
			env = append(env, kv)
		}
	}
	return append(env, raceEnv())
}

// raceEnv is $GORACE with atexit_sleep_ms=0 added where it does not say:
// a child built with -race would otherwise sleep a second as it exits.
func raceEnv() string {
	gorace := os.Getenv("GORACE")
	if !strings.Contains(gorace, "atexit_sleep_ms") {
		gorace = strings.TrimSpace(gorace + " atexit_sleep_ms=0")
	}
	return fmt.Sprintf("GORACE=%s", gorace)
}
