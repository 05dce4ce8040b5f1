package a2a_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

// wireOps runs the four operations on c, each after the last, for case cs
// (random input of this rank's tokens), and waits for them.
func wireOps(c *a2a.Comm, cs check.Case) error {
	_, x, err := uploadInput(c, cs, 11)
	if err != nil {
		return err
	}
	defer c.Device().Free(x)
	mine, err := c.SendRecvHeads(x)
	if err != nil {
		return err
	}
	b, err := c.Device().Download(mine) // the view is the next operation's output
	if err != nil {
		return err
	}
	shard, err := uploadNew(c.Device(), mine.Shape, cs.DType, b)
	if err != nil {
		return err
	}
	defer c.Device().Free(shard)
	for _, op := range []func() error{
		func() error { return c.GatherHeadsPacked(cs.Heads, make([]a2a.Tensor, 1), []a2a.Tensor{shard}) }, // uneven heads
		func() error { _, err := c.AllGather(x); return err },
		func() error { _, err := c.HeadAllGather(cs.Heads, shard); return err },
	} {
		if err := op(); err != nil {
			return err
		}
	}
	return c.Sync()
}

// TestFakeNCCLWire: the fp8 wire over the stub NCCL and the stub driver,
// which runs no kernels (the bits are the GPU tests': TestNCCLTransport).
// At worlds 1 to 3 (and world one with every byte through NCCL), every
// operation launches the pack and the unpack on each rank, sends every
// box of the exact operation twice (its codes and its scale bytes: twice
// the exact wire's sends for the same operations), and marks its phases
// in order (start, encode, own, the rounds, decode). Close releases
// everything.
func TestFakeNCCLWire(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2", fakecuda.EnvKernelsDone+"=1") // the transport's waits poll
	for _, g := range []struct {
		world int
		self  bool
	}{{1, false}, {1, true}, {2, false}, {3, false}} {
		t.Run(fmt.Sprintf("world%d/self=%v", g.world, g.self), func(t *testing.T) {
			cs := check.Case{Name: "wire", Batch: 2, Tokens: []int{3, 5, 4}[:g.world], Heads: 2*g.world + 1, HeadDim: 64, DType: a2a.BFloat16}
			maxTokens, hidden := check.Capacity(cs)
			sends := map[a2a.Wire]int64{}
			for _, w := range []a2a.Wire{a2a.WireExact, a2a.WireE4M3} {
				nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
				log := &phaseLog{phases: map[int][]nccltransport.Phase{}}
				// The asynchronous launch sends nothing to connect, so that
				// the stub's sends are the operations' alone.
				a2a.UseNCCLTuning(t, nccltransport.Tuning{Self: g.self, Marker: log, Launch: nccltransport.LaunchAsync})
				comms := ncclGroup(t, a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: cs.DType, Wire: w}, g.world)
				before := fakeCounters(t, lib).Launches
				require.NoError(t, runRanks(comms, func(c *a2a.Comm) error { return wireOps(c, cs) }), "%v wire", w)
				launches := fakeCounters(t, lib).Launches - before
				require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
				counts := ncclCounts(t, nlib)
				require.Equal(t, counts.Sends, counts.Recvs)
				require.Zero(t, counts.Aborts)
				sends[w] = counts.Sends
				if !w.Lossy() {
					require.Zero(t, launches, "the exact wire over NCCL launches no kernel")
					continue
				}
				require.EqualValues(t, 2*4*g.world, launches, "a pack and an unpack per operation and rank")
				for r := range g.world {
					requireWirePhases(t, log.phases[r], 4)
				}
			}
			require.Equal(t, 2*sends[a2a.WireExact], sends[a2a.WireE4M3], "codes and scale bytes for every box")
			if g.world > 1 || g.self {
				require.Positive(t, sends[a2a.WireExact])
			}
		})
	}
	requireReleased(t, lib)
}

// requireWirePhases checks that ps is ops operations over the fp8 wire:
// start, encode, own, rounds of pack, group, unpack, then decode.
func requireWirePhases(t *testing.T, ps []nccltransport.Phase, ops int) {
	t.Helper()
	n := 0
	for i := 0; i < len(ps); n++ {
		require.Equal(t, []nccltransport.Phase{nccltransport.PhaseStart, nccltransport.PhaseEncode, nccltransport.PhaseOwn}, ps[i:i+3], "at %d", i)
		end := i + 3 + slices.Index(ps[i+3:], nccltransport.PhaseDecode)
		require.Greater(t, end, i+2, "no decode after %d", i)
		exact := ps[i:end]
		exact = slices.Delete(slices.Clone(exact), 1, 2)
		requirePhaseOrder(t, exact)
		i = end + 1
	}
	require.Equal(t, ops, n)
}

// TestFakeNCCLWireBlocks: over NCCL the wire's conversions run this
// rank's blocks at most (Config.NumSMs), which Blocks reports; without the
// wire Blocks is 0 (NCCL's kernels move the bytes).
func TestFakeNCCLWireBlocks(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2", fakecuda.EnvKernelsDone+"=1")
	fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
	cs := check.Case{Name: "blocks", Batch: 1, Tokens: []int{4096}, Heads: 8, HeadDim: 128, DType: a2a.BFloat16} // 8 MiB: 512 blocks' worth
	maxTokens, hidden := check.Capacity(cs)
	for _, c := range []struct {
		wire   a2a.Wire
		numSMs int
		want   int
	}{{a2a.WireExact, 0, 0}, {a2a.WireE4M3, 0, 132}, {a2a.WireE4M3, 8, 8}} {
		comms := ncclGroup(t, a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: cs.DType, Wire: c.wire, NumSMs: c.numSMs}, 1)
		require.Equal(t, c.want, comms[0].Blocks(), "%v wire, NumSMs %d", c.wire, c.numSMs)
		require.NoError(t, wireOps(comms[0], cs))
		if c.wire.Lossy() {
			calls, err := fakecuda.ReadCalls(lib)
			require.NoError(t, err)
			require.EqualValues(t, c.want, calls.Launch.Grid[0], "the last unpack's grid")
		}
		require.NoError(t, comms[0].Close())
	}
	requireReleased(t, lib)
}

// TestFakeNCCLWireCapacity: an operation whose rows some rank's pack area
// cannot hold (rank 0 holding every token of a SendRecvHeads of four ranks:
// its input is four times an output) is refused with ErrCapacity on every
// rank alike, before anything is sent, and the Comms go on with one that
// fits.
func TestFakeNCCLWireCapacity(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2", fakecuda.EnvKernelsDone+"=1")
	nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
	const world = 4
	// The buffer holds the AllGather of fits, 8 tokens: big's SendRecvHeads
	// output (32 tokens of one head) fits it, but not rank 0's input rows.
	big := check.Case{Name: "big", Batch: 1, Tokens: []int{32, 0, 0, 0}, Heads: 4, HeadDim: 64, DType: a2a.BFloat16}
	fits := check.Case{Name: "fits", Batch: 1, Tokens: []int{2, 2, 2, 2}, Heads: 4, HeadDim: 64, DType: a2a.BFloat16}
	comms := ncclGroup(t, a2a.Config{MaxTokens: 8, HiddenDim: 4 * 64, DType: a2a.BFloat16, Wire: a2a.WireE5M2}, world)
	err := runRanks(comms, func(c *a2a.Comm) error {
		err := wireOps(c, big)
		if !errors.Is(err, a2a.ErrCapacity) {
			return fmt.Errorf("want ErrCapacity, got %v", err)
		}
		return nil
	})
	require.NoError(t, err)
	require.Zero(t, ncclCounts(t, nlib).Sends, "nothing sent")
	require.NoError(t, runRanks(comms, func(c *a2a.Comm) error { return wireOps(c, fits) }))
	require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
	requireReleased(t, lib)
}
