package a2a_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
)

// noWire says which GPU of info cannot take the fp8 wire (compute
// capability below 9.0), or "" when all can.
func noWire(info a2a.SystemInfo) string {
	for _, d := range info.Devices {
		if d.Major*10+d.Minor < 90 {
			return fmt.Sprintf("GPU %d has compute capability %d.%d", d.Ordinal, d.Major, d.Minor)
		}
	}
	return ""
}

// wirePaths are the wire's ways across, each forced at any size: rows for
// the peers staged as codes and decoded by a second launch; the same, with
// the exchange decoding them as they land (the second launch takes what
// had not); or every row sent as 16-bit values already rounded (the small
// operations' path). With the launches an operation takes on each.
var wirePaths = []wirePath{{"staged", 1, false, 2}, {"landing", 1, true, 2}, {"direct", math.MaxInt64, false, 1}}

type wirePath struct {
	name        string
	directBytes int64
	landing     bool
	launches    int
}

// eachWirePath runs f in a subtest per wire path, that path forced.
func eachWirePath(t *testing.T, f func(t *testing.T, path wirePath)) {
	for _, path := range wirePaths {
		t.Run(path.name, func(t *testing.T) {
			t.Cleanup(a2a.SetWireDirectBytes(path.directBytes))
			t.Cleanup(a2a.SetWireLanding(path.landing))
			f(t, path)
		})
	}
}

// TestWire runs every operation over the fp8 wire, on each of its paths
// (staged, staged with the decode as rows land, direct), in both formats
// (the direct path in E4M3 only: it differs from the staged one in where
// rows go, not in the format), both 16-bit types and both buffer modes, on
// a group of two ranks: every case of collectiveCases (views and Into
// forms, packed, strided, uneven heads and tokens, misaligned inputs) on
// random bit patterns and on narrow, activation-like values, then the
// back-to-back race reading each view up to 3 ms late, the same for a case
// of many parcels (parcelCase), then graph replays with new data and
// counts each time on a caller's stream. Every output must equal the exact
// output with its rows round-tripped (ref.RoundTripRows) byte for byte.
func TestWire(t *testing.T) {
	info := requireGPU(t)
	if why := noWire(info); why != "" {
		t.Skipf("the fp8 wire needs compute capability 9.0: %s", why)
	}
	eachWirePath(t, func(t *testing.T, path wirePath) {
		wires := []a2a.Wire{a2a.WireE4M3, a2a.WireE5M2}
		if path.name == "direct" {
			wires = wires[:1]
		}
		for _, w := range wires {
			for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float16} {
				testWire(t, pairDevices(info), w, dt)
			}
		}
	})
}

// parcelCase is large enough that the staged path sends each rank's rows
// in several parcels per block (hundreds of parcels over about 10 MiB a
// rank, three strided tensors, uneven tokens and heads), so that rows are
// decoded as they land, in the exchange launch, as well as by the decode
// launch after it.
func parcelCase(world int, dt a2a.DType) check.Case {
	tokens := make([]int, world)
	for r := range tokens {
		tokens[r] = 1500 + 97*r
	}
	return check.Case{Name: "parcels", Batch: 2, Tokens: tokens, Heads: 4*world + 1, HeadDim: 128, DType: dt, Tensors: 3, Strided: true, Narrow: true}
}

// testWire is TestWire's subtests for one format and type.
func testWire(t *testing.T, devices []int, w a2a.Wire, dt a2a.DType) {
	world := len(devices)
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("%v/%v/single=%v", w, dt, single), func(t *testing.T) {
			cases := collectiveCases(world, dt)
			big := parcelCase(world, dt)
			g := newTestGroup(t, devices, dt, append(cases, big), withWire(w), withSingleBuffer(single))
			for i, cs := range cases {
				for _, narrow := range []bool{false, true} {
					cs.Narrow = narrow
					err := eachRank(g, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(3000+i)) })
					require.NoError(t, err, "%v", cs)
				}
			}
			race := check.Case{Name: "back-to-back", Batch: 2, Tokens: cases[1].Tokens, Heads: 3*world + 1, HeadDim: 64, DType: dt, Narrow: true}
			err := eachRank(g, func(c *a2a.Comm) error { return check.BackToBack(c, race, backToBackIters(), 3*time.Millisecond, 79) })
			require.NoError(t, err, "%v", race)
			err = eachRank(g, func(c *a2a.Comm) error { return check.Run(c, big, 83) })
			require.NoError(t, err, "%v", big)
			err = eachRank(g, func(c *a2a.Comm) error { return check.BackToBack(c, big, 8, 3*time.Millisecond, 89) })
			require.NoError(t, err, "%v back to back", big)
		})
	}
	t.Run(fmt.Sprintf("%v/%v/graph", w, dt), func(t *testing.T) {
		g := newTestGroup(t, devices, dt, graphCases(world, dt, true), withWire(w))
		require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return graphReplays(c, dt, iterations()/4, true) }))
	})
}
