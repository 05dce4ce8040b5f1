package a2a_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

func init() {
	scenarios["graph"] = workerGraph
}

// graphCases are the token layouts replays cycle through on a group of
// world ranks: even, uneven, a rank with none; 4 heads per rank, or with
// unevenHeads one more in all.
func graphCases(world int, dt a2a.DType, unevenHeads bool) []check.Case {
	heads := 4 * world
	if unevenHeads {
		heads++
	}
	even, uneven, zero := make([]int, world), make([]int, world), make([]int, world)
	for r := range even {
		even[r], uneven[r], zero[r] = 24, 7+11*r, 5+3*r
	}
	zero[0] = 0
	var cases []check.Case
	for _, tokens := range [][]int{even, uneven, zero} {
		cases = append(cases, check.Case{Name: "graph", Batch: 2, Tokens: tokens, Heads: heads, HeadDim: 64, DType: dt})
	}
	return cases
}

// graphReplays captures SendRecvHeads, GatherHeads and AllGather once on a
// stream of its own and replays the graph iters times: before each
// replay, fresh random inputs are copied in on the stream; inside it, each
// view is copied out right after its operation; the host waits every 4
// replays, sleeps a random 0-3 ms (the peers replay on meanwhile), reads
// the third operation's view itself and compares everything with the
// reference. The token layout
// changes every 50 replays (SetRankTokens after a wait, no recapture).
// With uneven, the heads do not divide among the ranks and the three
// operations are the general entries' SendRecvHeads, GatherHeadsPacked
// and HeadAllGather (of GatherHeads' input: AllGather's result). Every
// rank of the group runs it with the same arguments.
func graphReplays(c *a2a.Comm, dt a2a.DType, iters int, uneven bool) error {
	dev, rank, world := c.Device(), c.Rank(), c.WorldSize()
	cases := graphCases(world, dt, uneven)
	heads := cases[0].Heads
	_, mine := a2a.HeadRange(heads, world, rank)
	maxLocal, maxTotal := 0, 0
	for _, cs := range cases {
		maxLocal, maxTotal = max(maxLocal, cs.Tokens[rank]), max(maxTotal, cs.Shape().TotalTokens())
	}
	ts, err := a2a.OpenTestStream(dev)
	if err != nil {
		return err
	}
	defer ts.Close()
	x, err := dev.Alloc([4]int{2, maxLocal, heads, 64}, dt)
	if err != nil {
		return err
	}
	defer dev.Free(x)
	y, err := dev.Alloc([4]int{2, maxTotal, mine, 64}, dt)
	if err != nil {
		return err
	}
	defer dev.Free(y)
	if err := c.SetRankTokens(cases[0].Tokens); err != nil {
		return err
	}
	// A view holds until the next operation: inside the graph, each is
	// copied out right after its operation, as an attention kernel would
	// read it (the largest output's bytes: the copy's size is frozen).
	var outs [3]a2a.Tensor
	for k := range outs {
		if outs[k], err = dev.Alloc([4]int{2, maxTotal, heads, 64}, dt); err != nil {
			return err
		}
		defer dev.Free(outs[k])
	}
	on := c.On(ts.Stream())
	var last a2a.Tensor // the third operation's view
	g, err := a2a.CaptureGraph(ts.Stream(), func() error {
		ops := []func() (a2a.Tensor, error){
			func() (a2a.Tensor, error) { return on.SendRecvHeads(x) },
			func() (a2a.Tensor, error) { return on.GatherHeads(y) },
			func() (a2a.Tensor, error) { return on.AllGather(x) },
		}
		if uneven {
			ops[1] = func() (a2a.Tensor, error) {
				var v [1]a2a.Tensor
				err := on.GatherHeadsPacked(heads, v[:], []a2a.Tensor{y})
				return v[0], err
			}
			ops[2] = func() (a2a.Tensor, error) { return on.HeadAllGather(heads, y) }
		}
		for k, op := range ops {
			if last, err = op(); err != nil {
				return err
			}
			if err := ts.CopyDtoD(outs[k], last, maxOutput(cases, k, rank)); err != nil {
				return err
			}
		}
		return nil
	}, c)
	if err != nil {
		return err
	}
	defer g.Close()
	return replayChecked(c, ts, g, cases, outs, last, x, y, iters)
}

// maxOutput is the most bytes operation k (SendRecvHeads, GatherHeads,
// AllGather) writes on rank over the cases.
func maxOutput(cases []check.Case, k, rank int) int64 {
	var most int64
	for _, cs := range cases {
		d := cs.Shape()
		n := []int{d.HeadShardBytesFor(rank), d.RankInputBytes(rank), d.GatheredBytes()}[k]
		most = max(most, int64(n))
	}
	return most
}

// replaySlot is one replay's pinned inputs and outputs, and what they expect.
type replaySlot struct {
	x, y      []byte
	out, want [3][]byte
	what      string
}

func replayChecked(c *a2a.Comm, ts *a2a.TestStream, g *a2a.Graph, cases []check.Case, views [3]a2a.Tensor, last, x, y a2a.Tensor, iters int) error {
	rank := c.Rank()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(rank)))
	var slots [4]replaySlot
	for i := range slots {
		var err error
		if slots[i].x, err = ts.Pinned(int(x.Bytes())); err != nil {
			return err
		}
		if slots[i].y, err = ts.Pinned(int(y.Bytes())); err != nil {
			return err
		}
		for k := range slots[i].out {
			if slots[i].out[k], err = ts.Pinned(int(max(x.Bytes(), y.Bytes()) * int64(c.WorldSize()))); err != nil {
				return err
			}
		}
	}
	wait := func(n int) error {
		if err := ts.Sync(); err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		for _, s := range slots[:n] {
			for k := range s.out {
				if err := check.Compare(fmt.Sprintf("%s, operation %d", s.what, k), s.out[k], s.want[k]); err != nil {
					return err
				}
			}
		}
		time.Sleep(time.Duration(rng.Int64N(int64(3 * time.Millisecond))))
		s := slots[n-1] // the latest replay's; its view read as bytes
		got, err := c.Device().Download(a2a.Tensor{Ptr: last.Ptr, Shape: [4]int{1, 1, 1, len(s.want[2])}, DType: a2a.Float8E4M3})
		if err != nil {
			return err
		}
		return check.Compare(s.what+", operation 2's view read late by the host", got, s.want[2])
	}
	for i := range iters {
		cs, err := layoutAt(c, cases, i) // the earlier replays are done: see wait
		if err != nil {
			return err
		}
		d, err := check.MakeData(cs, uint64(1000+i), rank)
		if err != nil {
			return err
		}
		s := &slots[i%len(slots)]
		s.what = fmt.Sprintf("replay %d (%v) on rank %d", i, cs.Tokens, rank)
		s.want = [3][]byte{d.Shard, d.X, d.Gathered}
		x0, y0 := s.x[:copy(s.x, d.X)], s.y[:copy(s.y, d.Shard)]
		if err := errors.Join(ts.Upload(x, x0), ts.Upload(y, y0)); err != nil {
			return err
		}
		for _, w := range s.want { // over a lossy wire, what the rows become
			if err := ref.RoundTripRows(c.Config().Wire, cs.DType, w, cs.HeadDim); err != nil {
				return err
			}
		}
		if err := g.Launch(ts.Stream()); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
		for k := range s.out {
			s.out[k] = s.out[k][:cap(s.out[k])][:len(s.want[k])]
			for j := range s.out[k] {
				s.out[k][j] = 0x5A // poison: an output never written cannot pass
			}
			if err := ts.Download(s.out[k], views[k]); err != nil {
				return err
			}
		}
		if n := i%len(slots) + 1; n == len(slots) || i == iters-1 || (i+1)%50 == 0 {
			if err := wait(n); err != nil {
				return err
			}
		}
	}
	return nil
}

// workerGraph is graphReplays in one process per rank, both widths.
func workerGraph(rk launch.Rank) error {
	ex, err := exchangerFor(rk)
	if err != nil {
		return err
	}
	defer ex.Close()
	iters := iterations()
	for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E4M3} {
		comm, err := joinFor(rk, ex, dt, graphCases(rk.World, dt, false), false)
		if err != nil {
			return err
		}
		err = graphReplays(comm, dt, iters, false)
		if cerr := comm.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%v: %w", dt, err)
		}
		fmt.Printf("rank %d: %v: %d replays checked\n", rk.Rank, dt, iters)
	}
	return nil
}

// TestGraphReplay: graphReplays in a group of 2 processes and in
// single-process groups (one goroutine per rank) on every pairPlacements
// placement, both widths; and with heads the ranks do not share evenly
// (the general entries, captured).
func TestGraphReplay(t *testing.T) {
	info := requireGPU(t)
	t.Run("processes", func(t *testing.T) {
		runGroup(t, "graph", 2, nil)
	})
	even := func(world int, dt a2a.DType) []check.Case { return graphCases(world, dt, false) }
	eachPairGroup(t, info, "group", even, func(t *testing.T, g *a2a.Group, _ []check.Case, dt a2a.DType) {
		require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return graphReplays(c, dt, iterations(), false) }))
	})
	for _, devices := range pairPlacements(info) {
		t.Run(fmt.Sprintf("group%v/uneven-heads", devices), func(t *testing.T) {
			g := newTestGroup(t, devices, a2a.BFloat16, graphCases(len(devices), a2a.BFloat16, true))
			require.NoError(t, eachRank(g, func(c *a2a.Comm) error { return graphReplays(c, a2a.BFloat16, iterations(), true) }))
		})
	}
}

// TestOddGraphReplayedTwice captures one operation per rank without
// CaptureGraph (as a caller's own binding would, so nothing keeps the
// halves in turn) and replays it twice in a row: the second replay would
// write the half the first one's view lies in, and fails with ErrOddGraph
// on every rank instead. The first replays meet; the second ones are
// refused before any wait, each after a random host delay, so no rank's
// refusal can leave another waiting.
func TestOddGraphReplayedTwice(t *testing.T) {
	info := requireGPU(t)
	devices := pairDevices(info)
	cs := check.Case{Batch: 1, Tokens: []int{8, 8}, Heads: 4, HeadDim: 64, DType: a2a.BFloat16}
	g := newTestGroup(t, devices, a2a.BFloat16, []check.Case{cs})
	replays := make([]func() error, g.Size())
	streams := make([]*a2a.TestStream, g.Size())
	for r := range g.Size() {
		c := g.Comm(r)
		require.NoError(t, c.SetRankTokens(cs.Tokens))
		x, err := c.Device().Alloc([4]int{1, 8, 4, 64}, a2a.BFloat16)
		require.NoError(t, err)
		defer c.Device().Free(x)
		streams[r] = a2a.NewTestStream(t, c.Device())
		replays[r], err = streams[r].CaptureRaw(func() error { _, err := c.On(streams[r].Stream()).AllGather(x); return err })
		require.NoError(t, err)
	}
	for r := range g.Size() {
		require.NoError(t, replays[r]())
	}
	for r := range g.Size() {
		require.NoError(t, streams[r].Sync(), "the first replays")
	}
	require.NoError(t, g.Sync())
	require.NoError(t, eachRank(g, func(c *a2a.Comm) error {
		time.Sleep(time.Duration(rand.Int64N(int64(3 * time.Millisecond))))
		if err := replays[c.Rank()](); err != nil {
			return err
		}
		if err := streams[c.Rank()].Sync(); err != nil {
			return err
		}
		err := c.Sync()
		t.Logf("rank %d: %v", c.Rank(), err)
		if !errors.Is(err, a2a.ErrOddGraph) {
			return fmt.Errorf("Sync after an odd graph replayed twice: %v, want ErrOddGraph", err)
		}
		return nil
	}))
}

// TestGraphPeerStopsReplaying: both ranks of a single-process group replay
// a graph, then rank 1 stops; rank 0's next replay times out within the
// bound, as any operation does, and the group still closes.
func TestGraphPeerStopsReplaying(t *testing.T) {
	info := requireGPU(t)
	devices := pairDevices(info)
	cs := check.Case{Batch: 1, Tokens: []int{8, 8}, Heads: 4, HeadDim: 64, DType: a2a.BFloat16}
	g := newTestGroup(t, devices, a2a.BFloat16, []check.Case{cs})
	graphs := make([]*a2a.Graph, 2)
	streams := make([]*a2a.TestStream, 2)
	for r := range 2 {
		c := g.Comm(r)
		require.NoError(t, c.SetRankTokens(cs.Tokens))
		require.NoError(t, c.SetTimeout(time.Second))
		x, err := c.Device().Alloc([4]int{1, 8, 4, 64}, a2a.BFloat16)
		require.NoError(t, err)
		defer c.Device().Free(x)
		streams[r] = a2a.NewTestStream(t, c.Device())
		on := c.On(streams[r].Stream())
		graphs[r], err = a2a.CaptureGraph(streams[r].Stream(), func() error { _, err := on.AllGather(x); return err }, c)
		require.NoError(t, err)
		defer graphs[r].Close()
	}
	for range 5 {
		for r := range 2 {
			require.NoError(t, graphs[r].Launch(streams[r].Stream()))
		}
	}
	require.NoError(t, g.Sync())
	start := time.Now()
	require.NoError(t, graphs[0].Launch(streams[0].Stream()))
	err := g.Comm(0).Sync()
	took := time.Since(start)
	t.Logf("rank 0's replay without rank 1: %v after %v", err, took)
	require.ErrorIs(t, err, a2a.ErrTimeout)
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, 5*time.Second/2)
}
