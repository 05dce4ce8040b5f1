package launch

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/testutil"
)

// TestMain lets the test binary act as a rank (testutil.Main): it prints
// what it learned from its environment and exits as the scenario says.
func TestMain(m *testing.M) {
	testutil.Main(m, rank)
}

// rank is a rank process's scenario: "ok", "fail-rank-1" (rank 1 exits 3)
// or "hang-rank-0" (rank 0 sleeps a minute); or rank 1 killing itself
// (SIGKILL) while rank 0 "kill-rank-1-timeout" times out on its own a
// second later (exit 1, with its error on stderr), "kill-rank-1-hang"
// sleeps a minute, or "kill-rank-1-deaf" sleeps a minute ignoring
// SIGTERM.
func rank(scenario string) int {
	r, ok, err := FromEnv()
	if !ok || err != nil {
		return 9
	}
	dev := -1
	if r.Device != nil {
		dev = *r.Device
	}
	os.Stdout.WriteString("secret " + string(r.Secret) + "\n")
	os.Stdout.WriteString("rank " + itoa(r.Rank) + " of " + itoa(r.World) + " device " + itoa(dev) + " addr " + r.Addr + "\n")
	if scenario == "fail-rank-1" && r.Rank == 1 {
		return 3
	}
	if scenario == "hang-rank-0" && r.Rank == 0 {
		time.Sleep(time.Minute)
	}
	if rest, ok := strings.CutPrefix(scenario, "kill-rank-1-"); ok {
		if r.Rank == 1 {
			os.Stdout.WriteString("rank 1 working\n")
			p, _ := os.FindProcess(os.Getpid())
			p.Kill()
			time.Sleep(time.Minute)
		}
		os.Stdout.WriteString("rank 0 waiting for rank 1\n")
		switch rest {
		case "timeout":
			time.Sleep(time.Second)
			os.Stderr.WriteString("rank 0: waited 1s for rank 1: barrier timed out\n")
			return 1
		case "deaf":
			signal.Ignore(syscall.SIGTERM)
		}
		time.Sleep(time.Minute)
	}
	return 0
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestRunGivesEachRankItsEnvironment(t *testing.T) {
	var out strings.Builder
	// An inherited secret and one in Env are both overridden.
	t.Setenv(EnvSecret, "inherited-secret-0123456789")
	res, err := Run(context.Background(), Spec{
		Exe: os.Args[0], World: 3, Devices: []int{1, 0, 1},
		Env: append(testutil.ScenarioEnv("ok"), EnvSecret+"=from-spec-env-0123456789"), Output: &out,
	})
	require.NoError(t, err)
	require.Len(t, res, 3)
	addr, secret := "", ""
	for r, x := range res {
		require.NoError(t, x.Err)
		require.Contains(t, x.Output, "rank "+itoa(r)+" of 3 device "+itoa([]int{1, 0, 1}[r]))
		a := x.Output[strings.Index(x.Output, "addr ")+5:]
		if addr == "" {
			addr = a
		}
		require.Equal(t, addr, a, "every rank gets the same rendezvous address")
		s := secretOf(t, x.Output)
		if secret == "" {
			secret = s
		}
		require.Equal(t, secret, s, "every rank gets the same secret")
	}
	require.Regexp(t, "^[0-9a-f]{64}$", secret)
	require.Contains(t, out.String(), "[rank 2] rank 2 of 3")

	// Another group gets another secret.
	res, err = Run(context.Background(), Spec{Exe: os.Args[0], World: 1, Env: testutil.ScenarioEnv("ok")})
	require.NoError(t, err)
	require.NotEqual(t, secret, secretOf(t, res[0].Output))
}

// printed returns what a rank process printed after label ("secret ",
// "addr ") up to the end of that line.
func printed(t *testing.T, out, label string) string {
	t.Helper()
	i := strings.Index(out, label)
	require.GreaterOrEqual(t, i, 0, out)
	line, _, _ := strings.Cut(out[i+len(label):], "\n")
	return line
}

// secretOf returns the secret a rank process printed.
func secretOf(t *testing.T, out string) string { t.Helper(); return printed(t, out, "secret ") }

func TestNewSecret(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	require.Regexp(t, "^[0-9a-f]{64}$", a)
	require.NotEqual(t, a, b)
}

func TestRunReportsTheFailedRankAndStopsTheOthers(t *testing.T) {
	start := time.Now()
	res, err := Run(context.Background(), Spec{
		Exe: os.Args[0], World: 2, Env: testutil.ScenarioEnv("fail-rank-1"), Grace: 10 * time.Second,
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "rank 1")
	require.NoError(t, res[0].Err)
	require.Error(t, res[1].Err)
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestRunStopsAtTheContextDeadline(t *testing.T) {
	// Long enough for the quick rank to finish even under -race on a busy
	// machine; the hanging one sleeps for a minute.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	res, err := Run(ctx, Spec{Exe: os.Args[0], World: 2, Env: testutil.ScenarioEnv("hang-rank-0")})
	require.Error(t, err)
	require.Error(t, res[0].Err, "the hanging rank is stopped")
	require.True(t, res[0].Stopped)
	require.NoError(t, res[1].Err)
	require.Less(t, time.Since(start), 20*time.Second)
	if runtime.GOOS != "windows" {
		require.Equal(t, `launch: rank 0: stopped by the launcher as its context ended (SIGTERM): signal: terminated; its output ended: "rank 0 of 2 device -1 addr `+addrOf(t, res[0].Output)+`"`, err.Error())
	}
}

// addrOf returns the address a rank process printed.
func addrOf(t *testing.T, out string) string { t.Helper(); return printed(t, out, "addr ") }

// When a rank dies of a signal, the others get the grace to fail on their
// own: Run's error names the dead rank first, with its signal, then the
// survivor's own exit status and the last line of its output (its error),
// where the launcher used to kill it and report both as "signal: killed".
// A survivor still running after the grace is stopped with SIGTERM; one
// that ignores it is killed stopDelay later; each is said so.
func TestRunReportsTheDeadRankThenTheSurvivors(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("a rank killing itself and SIGTERM: Unix")
	}
	saved := stopDelay
	stopDelay = time.Second
	t.Cleanup(func() { stopDelay = saved })
	const dead = `launch: rank 1 failed first: signal: killed (a signal the launcher did not send); its output ended: "rank 1 working"` + "\n"
	for _, tc := range []struct {
		scenario string
		grace    time.Duration
		stopped  bool
		survivor string
		within   time.Duration
	}{
		{"timeout", 20 * time.Second, false, `rank 0: exit status 1; its output ended: "rank 0: waited 1s for rank 1: barrier timed out"`, 15 * time.Second},
		{"hang", 500 * time.Millisecond, true, `rank 0: stopped by the launcher 500ms after rank 1 failed (SIGTERM): signal: terminated; its output ended: "rank 0 waiting for rank 1"`, 15 * time.Second},
		{"deaf", 500 * time.Millisecond, true, `rank 0: stopped by the launcher 500ms after rank 1 failed (SIGTERM, then SIGKILL 1s later): signal: killed; its output ended: "rank 0 waiting for rank 1"`, 20 * time.Second},
	} {
		t.Run(tc.scenario, func(t *testing.T) {
			start := time.Now()
			res, err := Run(context.Background(), Spec{
				Exe: os.Args[0], World: 2, Env: testutil.ScenarioEnv("kill-rank-1-" + tc.scenario), Grace: tc.grace,
			})
			elapsed := time.Since(start)
			require.Error(t, err)
			assert.Equal(t, dead+tc.survivor, err.Error())
			assert.False(t, res[1].Stopped, "rank 1 died on its own")
			assert.Equal(t, tc.stopped, res[0].Stopped)
			var exit *exec.ExitError
			assert.ErrorAs(t, err, &exit, "the exit status stays in the chain")
			assert.Less(t, elapsed, tc.within)
			if !tc.stopped {
				assert.Less(t, elapsed, tc.grace, "rank 0 failed on its own, before the grace ended")
			}
		})
	}
}

func TestFromEnvOutsideRun(t *testing.T) {
	t.Setenv(EnvRank, "")
	t.Setenv(EnvWorld, "")
	_, ok, err := FromEnv()
	require.False(t, ok)
	require.NoError(t, err)
	t.Setenv(EnvRank, "x")
	t.Setenv(EnvWorld, "2")
	_, ok, err = FromEnv()
	require.True(t, ok)
	require.Error(t, err)
}

func TestFromEnvSecret(t *testing.T) {
	t.Setenv(EnvRank, "1")
	t.Setenv(EnvWorld, "2")
	t.Setenv(EnvAddr, "127.0.0.1:1")
	t.Setenv(EnvSecret, "")
	r, ok, err := FromEnv()
	require.True(t, ok)
	require.NoError(t, err)
	require.Nil(t, r.Secret)
	t.Setenv(EnvSecret, "00112233445566778899aabbccddeeff")
	r, _, err = FromEnv()
	require.NoError(t, err)
	require.Equal(t, []byte("00112233445566778899aabbccddeeff"), r.Secret)
}

func TestPrefixWriterWritesWholeLines(t *testing.T) {
	var out strings.Builder
	w := &prefixWriter{mu: new(sync.Mutex), w: &out, prefix: "[rank 0] "}
	w.Write([]byte("hel"))
	require.Empty(t, out.String())
	w.Write([]byte("lo\nwor"))
	w.Write([]byte("ld\n"))
	require.Equal(t, "[rank 0] hello\n[rank 0] world\n", out.String())
}
