package testutil_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/cstub"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.Main(m, func(scenario string) int {
		fmt.Printf("scenario %s short=%v\n", scenario, testing.Short())
		return 3
	})
}

// recorder is a testing.TB that records Skip and Fatal instead of ending
// the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                      {}
func (r *recorder) Skip(args ...any)             { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Skipf(f string, args ...any)  { r.skipped = fmt.Sprintf(f, args...) }
func (r *recorder) Fatalf(f string, args ...any) { r.failed = fmt.Sprintf(f, args...) }

var (
	errNoDriver = errors.New("no driver")
	errNoDevice = errors.New("no device")
)

func TestRequireGPU(t *testing.T) {
	for _, tc := range []struct {
		name, require string
		err           error
		skip, fail    string
	}{
		{name: "found"},
		{name: "no-driver", err: errNoDriver, skip: "no GPU: no driver"},
		{name: "no-device-wrapped", err: fmt.Errorf("counting: %w", errNoDevice), skip: "no GPU: counting: no device"},
		{name: "required", require: "1", err: errNoDevice, fail: testutil.EnvRequireGPU + "=1 but: no device"},
		{name: "other-error", err: errors.New("driver broken"), fail: "looking for a GPU: driver broken"},
		{name: "other-error-required", require: "1", err: errors.New("driver broken"), fail: "looking for a GPU: driver broken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(testutil.EnvRequireGPU, tc.require)
			r := &recorder{TB: t}
			testutil.RequireGPU(r, tc.err, errNoDriver, errNoDevice)
			require.Equal(t, tc.skip, r.skipped)
			require.Equal(t, tc.fail, r.failed)
		})
	}
}

func TestRunChild(t *testing.T) {
	// The parent's own markers do not reach the child: with this one it
	// would run the scenario rather than the test.
	t.Setenv(testutil.EnvScenario, "not-for-the-child")
	out := testutil.RunChild(t, "TestRunChildChild", "TESTUTIL_VALUE=42")
	require.Contains(t, out, "child saw 42")
}

func TestRunChildChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	require.Empty(t, os.Getenv(testutil.EnvScenario))
	require.Contains(t, os.Getenv("GORACE"), "atexit_sleep_ms=0")
	fmt.Printf("child saw %s\n", os.Getenv("TESTUTIL_VALUE"))
}

func TestRunChildFails(t *testing.T) {
	r := &recorder{TB: t}
	testutil.RunChild(r, "TestRunChildFailingChild")
	require.Contains(t, r.failed, "child running TestRunChildFailingChild")
	require.Contains(t, r.failed, "meant to fail")
}

func TestRunChildFailingChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	t.Fatal("meant to fail")
}

func TestSkipUnlessChild(t *testing.T) {
	r := &recorder{TB: t}
	testutil.SkipUnlessChild(r)
	require.Contains(t, r.skipped, "child process")
}

func TestScenario(t *testing.T) {
	cmd := exec.Command(os.Args[0], testutil.ScenarioArgs()...)
	cmd.Env = append(os.Environ(), testutil.ScenarioEnv("echo")...)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 3, exit.ExitCode(), "Main exits with the scenario's code")
	require.Equal(t, fmt.Sprintf("scenario echo short=%v\n", testing.Short()), string(out), "-test.short is passed on")
	require.Contains(t, testutil.ScenarioEnv("x"), testutil.EnvScenario+"=x")
}

func TestFakeCUDA(t *testing.T) {
	a, b := testutil.FakeCUDA(t), testutil.FakeCUDA(t)
	require.NotEqual(t, a, b)
	require.Equal(t, fakecuda.Library, filepath.Base(a))
	d, err := driver.LoadLibrary(a)
	require.NoError(t, err)
	c, err := d.RetainPrimaryContext(0)
	require.NoError(t, err)
	defer c.Release()
	na, err := fakecuda.Read(a)
	require.NoError(t, err)
	nb, err := fakecuda.Read(b)
	require.NoError(t, err)
	require.EqualValues(t, 1, na.ContextRetains)
	require.Empty(t, nb.Live(), "each copy is a library of its own")
}

// TestStubBuildFailure: a stub that cannot be built for want of a C
// compiler for this platform (under emulation, its cross compiler) skips
// the test, or fails it under CI=true; any other build error fails it.
func TestStubBuildFailure(t *testing.T) {
	noCC := fmt.Errorf("building the stub libx.so: %w for linux/arm64: cc does not target arm64", cstub.ErrNoCompiler)
	broken := errors.New("x.c:1:1: error: expected ';'")
	for _, tc := range []struct {
		name, ci   string
		err        error
		skip, fail string
	}{
		{name: "no-compiler", err: noCC, skip: "cannot build the stub X: " + noCC.Error()},
		{name: "no-compiler-ci", ci: "true", err: noCC, fail: "building the stub X: " + noCC.Error()},
		{name: "broken", err: broken, fail: "building the stub X: " + broken.Error()},
		{name: "broken-ci", ci: "true", err: broken, fail: "building the stub X: " + broken.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			path := testutil.StubCopy(r, "the stub X", "libx.so", func() ([]byte, error) { return nil, tc.err })
			require.Empty(t, path)
			require.Equal(t, tc.skip, r.skipped)
			require.Equal(t, tc.fail, r.failed)
		})
	}
	path := testutil.StubCopy(t, "the stub X", "libx.so", func() ([]byte, error) { return []byte("ELF"), nil })
	require.Equal(t, "libx.so", filepath.Base(path))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "ELF", string(b), "a copy of the image")
}
