package launch

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/testutil"
)

// TestMain lets the test binary act as a rank (testutil.Main): it prints
// what it learned from its environment and exits as the scenario says.
func TestMain(m *testing.M) {
	testutil.Main(m, rank)
}

// rank is a rank process's scenario: "ok", "fail-rank-1" (rank 1 exits 3)
// or "hang-rank-0" (rank 0 sleeps a minute).
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

// secretOf returns the secret a rank process printed.
func secretOf(t *testing.T, out string) string {
	t.Helper()
	i := strings.Index(out, "secret ")
	require.GreaterOrEqual(t, i, 0, out)
	line, _, _ := strings.Cut(out[i+len("secret "):], "\n")
	return line
}

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
	require.Error(t, res[0].Err, "the hanging rank is killed")
	require.NoError(t, res[1].Err)
	require.Less(t, time.Since(start), 20*time.Second)
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
