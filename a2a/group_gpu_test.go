package a2a_test

import (
	"fmt"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
)

// groupPlacements lists the device lists the single-process tests use:
// world 2 on 2 GPUs (when there are 2), and 2 and 4 ranks on GPU 0.
func groupPlacements(gpus int) [][]int {
	ps := [][]int{{0, 0}, {0, 0, 0, 0}}
	if gpus >= 2 {
		ps = append([][]int{{0, 1}, {0, 1, 0, 1}}, ps...)
	}
	return ps
}

// pairDevices is a group of two for the single-process tests: one rank per
// GPU when there are two, else both on GPU 0.
func pairDevices(info a2a.SystemInfo) []int {
	if len(info.Devices) >= 2 {
		return []int{0, 1}
	}
	return []int{0, 0}
}

// pairPlacements are the groups of two the graph and stream tests run on:
// one rank per GPU when there are two, and both ranks on GPU 0 always (two
// Comms sharing a context, where a spinning kernel is not preempted).
func pairPlacements(info a2a.SystemInfo) [][]int {
	if len(info.Devices) >= 2 {
		return [][]int{{0, 1}, {0, 0}}
	}
	return [][]int{{0, 0}}
}

// eachPairGroup runs f in a subtest (named prefix, the placement and the
// width) for every pairPlacements placement and both element widths, on
// a fresh single-process group holding cases(world, width).
func eachPairGroup(t *testing.T, info a2a.SystemInfo, prefix string, cases func(world int, dt a2a.DType) []check.Case,
	f func(t *testing.T, g *a2a.Group, cs []check.Case, dt a2a.DType)) {
	for _, devices := range pairPlacements(info) {
		for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
			t.Run(fmt.Sprintf("%s%v/%v", prefix, devices, dt), func(t *testing.T) {
				cs := cases(len(devices), dt)
				f(t, newTestGroup(t, devices, dt, cs), cs, dt)
			})
		}
	}
}

// iterations is how many operations or replays the stream and graph tests
// check: 1000, 200 with -short.
func iterations() int {
	if testing.Short() {
		return 200
	}
	return 1000
}

// groupCases are the shapes checked on a group of world ranks: even and
// uneven token counts, one rank with none; heads the ranks do not share
// evenly, q, k and v packed out of one fused tensor.
func groupCases(world int, dt a2a.DType) []check.Case {
	even, uneven := make([]int, world), make([]int, world)
	for r := range even {
		even[r] = 32
		uneven[r] = 5 + 13*r
	}
	uneven[world-1] = 0
	return []check.Case{
		{Name: "even", Batch: 2, Tokens: even, Heads: 4 * world, HeadDim: 128, DType: dt},
		{Name: "uneven", Batch: 1, Tokens: uneven, Heads: 2 * world, HeadDim: 72, DType: dt},
		{Name: "uneven-heads-qkv", Batch: 2, Tokens: uneven, Heads: 3*world + 1, HeadDim: 64, DType: dt, Tensors: 3, Strided: true},
	}
}

// newTestGroup makes a Group on devices holding every case, closed when
// the test ends.
func newTestGroup(t *testing.T, devices []int, dt a2a.DType, cases []check.Case, opts ...func(*a2a.Config)) *a2a.Group {
	t.Helper()
	maxTokens, hidden := check.Capacity(cases...)
	cfg := a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: dt}
	for _, o := range opts {
		o(&cfg)
	}
	g, err := a2a.NewGroup(cfg, devices)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, g.Close()) })
	return g
}

// TestGroupSingleProcess runs every operation on groups made in this
// process (NewGroup), both element widths, every mover, against the
// reference: once with one goroutine per rank (check.Run on each), once
// from this goroutine alone, enqueueing each operation on every rank in
// turn before reading. MoverAuto is set to take the copy engines from 64
// KiB, so its Comms switch movers between the cases ("even" moves 128 KiB
// a rank at world 2, the others under 32 KiB).
func TestGroupSingleProcess(t *testing.T) {
	info := requireGPU(t)
	a2a.SetAutoCopyBytes(t, 64<<10)
	for _, devices := range groupPlacements(len(info.Devices)) {
		for _, mode := range []struct {
			dt    a2a.DType
			mover a2a.Mover
		}{
			{a2a.BFloat16, a2a.MoverKernels}, {a2a.Float8E4M3, a2a.MoverKernels}, {a2a.BFloat16, a2a.MoverCopyEngines},
			{a2a.BFloat16, a2a.MoverAuto},
		} {
			dt := mode.dt
			t.Run(fmt.Sprintf("%v/%v/%v", devices, dt, mode.mover), func(t *testing.T) {
				cases := groupCases(len(devices), dt)
				g := newTestGroup(t, devices, dt, cases, withMover(mode.mover))
				for i, cs := range cases {
					seed := uint64(100 + i)
					require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return check.Run(c, cs, seed) }), "goroutine per rank, %v", cs)
					require.NoError(t, checkInTurn(g, cs, seed+50), "one goroutine, %v", cs)
				}
			})
		}
	}
}

// eachRank runs f on every rank's Comm, one goroutine each.
func eachRank(g *a2a.Group, f func(*a2a.Comm) error) error {
	comms := make([]*a2a.Comm, g.Size())
	for r := range comms {
		comms[r] = g.Comm(r)
	}
	return runRanks(comms, f)
}

// TestExamples runs the package's examples, which have no Output lines
// (they need a GPU), and checks what they print.
func TestExamples(t *testing.T) {
	requireGPU(t)
	for name, f := range map[string]func(){"Join": ExampleJoin, "NewGroup": ExampleNewGroup, "CaptureGraph": ExampleCaptureGraph} {
		t.Run(name, func(t *testing.T) {
			out := captureStdout(t, f)
			require.Equal(t, "round trip: ok\n", out)
		})
	}
}

// captureStdout returns what f prints to os.Stdout.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	saved := os.Stdout
	os.Stdout = w
	done := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(r)
		done <- b
	}()
	defer func() { os.Stdout = saved }()
	f()
	os.Stdout = saved
	require.NoError(t, w.Close())
	return string(<-done)
}
