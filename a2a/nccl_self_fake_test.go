package a2a_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// phaseLog records the phases the transport marks, per rank.
type phaseLog struct {
	mu     sync.Mutex
	phases map[int][]nccltransport.Phase
}

func (l *phaseLog) Mark(rank int, p nccltransport.Phase, _ driver.Stream) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.phases[rank] = append(l.phases[rank], p)
}

// TestFakeNCCLSelf: with Tuning.Self, every rank's own share goes through
// the stub NCCL as a send to itself and a receive from itself (at world
// one, every operation is one group), and every case of check.Run still
// matches a2a/ref; the marker sees each operation's phases in order.
// Without it, a world of one sends nothing.
func TestFakeNCCLSelf(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	for _, self := range []bool{false, true} {
		for world := 1; world <= 2; world++ {
			nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
			log := &phaseLog{phases: map[int][]nccltransport.Phase{}}
			a2a.UseNCCLTuning(t, nccltransport.Tuning{Self: self, Marker: log})
			cases := ncclCases(world, a2a.BFloat16)
			maxTokens, hidden := check.Capacity(cases...)
			comms := ncclGroup(t, a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: a2a.BFloat16, MaxTensors: 3}, world)
			for i, cs := range cases {
				err := runRanks(comms, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(90+i)) })
				require.NoError(t, err, "%v, world %d, self %v", cs, world, self)
			}
			require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
			counts := ncclCounts(t, nlib)
			require.Equal(t, counts.Sends, counts.Recvs)
			require.Zero(t, counts.Queued)
			require.Zero(t, counts.Aborts)
			if world == 1 {
				require.Equal(t, self, counts.Sends > 0, "self %v: %d sends", self, counts.Sends)
			}
			for r := range world {
				requirePhaseOrder(t, log.phases[r])
			}
		}
	}
	requireReleased(t, lib)
}

// requirePhaseOrder checks that ps is whole operations: start, own, then
// rounds of pack, group, unpack.
func requirePhaseOrder(t *testing.T, ps []nccltransport.Phase) {
	t.Helper()
	require.NotEmpty(t, ps)
	for i := 0; i < len(ps); {
		require.Equal(t, nccltransport.PhaseStart, ps[i], "at %d", i)
		require.Equal(t, nccltransport.PhaseOwn, ps[i+1], "at %d", i+1)
		i += 2
		for i < len(ps) && ps[i] == nccltransport.PhasePack {
			require.Equal(t, []nccltransport.Phase{nccltransport.PhasePack, nccltransport.PhaseGroup, nccltransport.PhaseUnpack}, ps[i:i+3], "at %d", i)
			i += 3
		}
	}
}
