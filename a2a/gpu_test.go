package a2a_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// requireGPU reads the system; without a driver or a GPU the test is
// skipped (or fails under ULYSSES_REQUIRE_GPU=1, see testutil.RequireGPU).
func requireGPU(t testing.TB) a2a.SystemInfo {
	t.Helper()
	info, err := a2a.System()
	testutil.RequireGPU(t, err, a2a.ErrNoDriver, a2a.ErrNoDevice)
	return info
}

// TestMain lets this test binary serve as a rank process that runs a
// scenario (runGroup starts them).
func TestMain(m *testing.M) {
	for _, set := range []func() error{a2a.SetDefaultSharingFromEnv, a2a.SetDefaultNumSMsFromEnv, a2a.SetNCCLTuningFromEnv} {
		if err := set(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	testutil.Main(m, runWorker)
}

// scenarios are what a rank process can run; each returns nil on success.
var scenarios = map[string]func(launch.Rank) error{
	"collectives": workerCollectives,
}

func runWorker(name string) int {
	rk, ok, err := launch.FromEnv()
	if !ok || err != nil {
		fmt.Fprintf(os.Stderr, "worker %s: bad environment: %v\n", name, err)
		return 2
	}
	f := scenarios[name]
	if f == nil {
		fmt.Fprintf(os.Stderr, "worker: unknown scenario %q\n", name)
		return 2
	}
	if err := f(rk); err != nil {
		fmt.Printf("FAIL rank %d: %v\n", rk.Rank, err)
		return 1
	}
	fmt.Printf("OK rank %d\n", rk.Rank)
	return 0
}

// runGroup starts world processes of this test binary running scenario.
func runGroup(t *testing.T, scenario string, world int, devices []int, env ...string) []launch.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), groupLimit(world, devices))
	defer cancel()
	res, err := launch.Run(ctx, launch.Spec{
		Exe: os.Args[0], Args: testutil.ScenarioArgs(), World: world, Devices: devices,
		Env: append(testutil.ScenarioEnv(scenario), env...), Output: testWriter{t},
	})
	require.NoError(t, err)
	for _, r := range res {
		require.Contains(t, r.Output, fmt.Sprintf("OK rank %d", r.Rank))
	}
	return res
}

// groupLimit is how long runGroup lets a group of world ranks run: 8
// minutes, 2 a rank where more than 4 share the busiest GPU, whose
// contexts then take turns on it. Eight ranks on one H200 run each
// back-to-back x1002 of the collectives in 25-40 s (all six modes in one
// group took over 8 minutes, every rank passing).
func groupLimit(world int, devices []int) time.Duration {
	busiest := world
	if len(devices) > 0 {
		on := map[int]int{}
		busiest = 0
		for _, d := range devices {
			on[d]++
			busiest = max(busiest, on[d])
		}
	} else if info, err := a2a.System(); err == nil && len(info.Devices) > 0 {
		busiest = (world + len(info.Devices) - 1) / len(info.Devices)
	}
	return time.Duration(max(4, busiest)) * 2 * time.Minute
}

// backToBackIters is how many back-to-back operations the race test runs
// (fewer in -short runs, such as under compute-sanitizer).
func backToBackIters() int {
	if testing.Short() {
		return 60
	}
	return 1002
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// collectiveCases covers B 1..4, uneven and zero token counts, D in
// {64, 72, 128}, head counts 1..4 per rank and heads the world size does
// not divide, misaligned inputs, and 2, 3 (strided out of one fused
// tensor) and 4 tensors packed.
func collectiveCases(world int, dt a2a.DType) []check.Case {
	even := make([]int, world)
	uneven := make([]int, world)
	oneZero := make([]int, world)
	lastOnly := make([]int, world)
	for r := range even {
		even[r] = 16
		uneven[r] = 3 + 5*r + r*r%7
		oneZero[r] = 9 + r
		lastOnly[r] = 0
	}
	oneZero[world/2] = 0
	lastOnly[world-1] = 11
	return []check.Case{
		{Name: "even", Batch: 1, Tokens: even, Heads: 4 * world, HeadDim: 128, DType: dt},
		{Name: "uneven", Batch: 2, Tokens: uneven, Heads: 2 * world, HeadDim: 64, DType: dt},
		{Name: "zero-rank", Batch: 3, Tokens: oneZero, Heads: world, HeadDim: 72, DType: dt},
		{Name: "last-only", Batch: 4, Tokens: lastOnly, Heads: 3 * world, HeadDim: 64, DType: dt},
		{Name: "wide", Batch: 2, Tokens: uneven, Heads: 16 * world, HeadDim: 128, DType: dt},
		{Name: "misaligned", Batch: 2, Tokens: uneven, Heads: 2 * world, HeadDim: 72, DType: dt, Misalign: 1},
		{Name: "odd-dim", Batch: 1, Tokens: uneven, Heads: world, HeadDim: 3, DType: dt},
		{Name: "uneven-heads", Batch: 2, Tokens: oneZero, Heads: 3*world + 1, HeadDim: 64, DType: dt},
		{Name: "uneven-heads-misaligned", Batch: 1, Tokens: uneven, Heads: 5*world - 1, HeadDim: 72, DType: dt, Misalign: 1},
		{Name: "packed-2", Batch: 1, Tokens: uneven, Heads: 2 * world, HeadDim: 64, DType: dt, Tensors: 2},
		{Name: "packed-3-strided", Batch: 2, Tokens: oneZero, Heads: 3*world + 1, HeadDim: 128, DType: dt, Tensors: 3, Strided: true},
		{Name: "packed-4", Batch: 1, Tokens: lastOnly, Heads: 4 * world, HeadDim: 64, DType: dt, Tensors: 4},
	}
}

// exchangerFor is the TCP exchanger of a rank started by launch.Run, keyed
// with the group's secret.
func exchangerFor(rk launch.Rank) (*exchange.TCP, error) {
	return exchange.NewTCP(exchange.TCPConfig{Addr: rk.Addr, Rank: rk.Rank, WorldSize: rk.World, Secret: rk.Secret})
}

// joinFor builds a Comm big enough for every case; opts adjust its Config.
func joinFor(rk launch.Rank, ex a2a.Exchanger, dt a2a.DType, cases []check.Case, single bool, opts ...func(*a2a.Config)) (*a2a.Comm, error) {
	maxTokens, hidden := check.Capacity(cases...)
	cfg := a2a.Config{
		Rank: rk.Rank, WorldSize: rk.World, Device: rk.Device, DType: dt,
		HiddenDim: hidden, MaxTokens: maxTokens, SingleBuffer: single,
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return a2a.Join(ctx, cfg, ex)
}

// The Config options of the tests' helpers (joinFor, newTestGroup,
// fakeComm and the like).

func withMover(m a2a.Mover) func(*a2a.Config) {
	return func(c *a2a.Config) { c.Mover = m }
}

func withTransport(tr a2a.Transport) func(*a2a.Config) {
	return func(c *a2a.Config) { c.Transport = tr }
}

func withWire(w a2a.Wire) func(*a2a.Config) {
	return func(c *a2a.Config) { c.Wire = w }
}

func withSingleBuffer(single bool) func(*a2a.Config) {
	return func(c *a2a.Config) { c.SingleBuffer = single }
}

// envCollectivesMode is the index in collectiveModes of the mode a
// "collectives" group runs.
const envCollectivesMode = "ULYSSES_TEST_COLLECTIVES_MODE"

// collectiveMode is one Comm the collectives scenario checks every case
// and the back-to-back races on.
type collectiveMode struct {
	dt     a2a.DType
	single bool
	mover  a2a.Mover
	sms    int
}

// collectiveModes: the 16-SM mode gives every thread several of a wide
// case's vectors.
var collectiveModes = []collectiveMode{
	{a2a.BFloat16, false, a2a.MoverKernels, 0}, {a2a.Float8E4M3, false, a2a.MoverKernels, 0}, {a2a.BFloat16, true, a2a.MoverKernels, 0},
	{a2a.BFloat16, false, a2a.MoverKernels, 16},
	{a2a.BFloat16, false, a2a.MoverCopyEngines, 0}, {a2a.Float8E4M3, true, a2a.MoverCopyEngines, 0},
}

// String names the mode as its subtest: "bf16-double-kernels-sms0".
func (m collectiveMode) String() string {
	buffers := "double"
	if m.single {
		buffers = "single"
	}
	return fmt.Sprintf("%v-%s-%v-sms%d", m.dt, buffers, m.mover, m.sms)
}

func workerCollectives(rk launch.Rank) error {
	i, err := strconv.Atoi(os.Getenv(envCollectivesMode))
	if err != nil || i < 0 || i >= len(collectiveModes) {
		return fmt.Errorf("collectives: %s=%q, want a mode of 0 to %d", envCollectivesMode, os.Getenv(envCollectivesMode), len(collectiveModes)-1)
	}
	mode := collectiveModes[i]
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	dt := mode.dt
	fmt.Printf("mode %v single-buffer=%v mover=%v sms=%d\n", dt, mode.single, mode.mover, mode.sms)
	cases := collectiveCases(rk.World, dt)
	comm, err := joinFor(rk, ex, dt, cases, mode.single, withMover(mode.mover), func(c *a2a.Config) { c.NumSMs = mode.sms })
	if err != nil {
		return err
	}
	for i, c := range cases {
		start := time.Now()
		if err := check.Run(comm, c, uint64(1000+i)); err != nil {
			comm.Close()
			return fmt.Errorf("%v: %w", c, err)
		}
		fmt.Printf("PASS %v (%v)\n", c, time.Since(start).Round(time.Millisecond))
	}
	// Back to back, with per-rank random delays before each view is read.
	iters := backToBackIters()
	races := [][2]int{{2 * rk.World, 64}, {3*rk.World + 1, 64}} // heads, head size
	if mode.sms != 0 {
		races = append(races, [2]int{16 * rk.World, 128})
	}
	for _, hd := range races {
		race := check.Case{Name: "back-to-back", Batch: 2, Tokens: cases[1].Tokens, Heads: hd[0], HeadDim: hd[1], DType: dt}
		start := time.Now()
		if err := check.BackToBack(comm, race, iters, 3*time.Millisecond, 77); err != nil {
			comm.Close()
			return fmt.Errorf("%v: %w", race, err)
		}
		fmt.Printf("PASS %v x%d (%v)\n", race, iters, time.Since(start).Round(time.Millisecond))
	}
	return comm.Close()
}

// TestCollectivesMultiProcess runs one process per rank, several ranks per
// GPU where the world is larger than the GPUs, and checks every operation
// against the CPU reference: a group per world and mode (world8/bf16-
// double-kernels-sms0, ...), so that one mode can run alone.
func TestCollectivesMultiProcess(t *testing.T) {
	info := requireGPU(t)
	n := len(info.Devices)
	worlds := []int{1, 2, 3, 4, 8}
	if testing.Short() {
		worlds = []int{1, 2}
	}
	groups := func(world int, devices []int) func(*testing.T) {
		return func(t *testing.T) {
			for i, m := range collectiveModes {
				t.Run(m.String(), func(t *testing.T) {
					runGroup(t, "collectives", world, devices, fmt.Sprintf("%s=%d", envCollectivesMode, i))
				})
			}
		}
	}
	for _, world := range worlds {
		t.Run(fmt.Sprintf("world%d", world), groups(world, nil))
	}
	t.Run("world2-same-gpu", groups(2, []int{0, 0}))
	if n < 2 {
		t.Logf("only %d GPU: every rank shares it", n)
	}
}
