package a2a_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/exchange"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
	"github.com/ulysses-go/ulysses/internal/timing"
)

// fakeNCCL gives a2a a fresh copy of the stub NCCL for the rest of the
// test, with env set, and returns its path, for fakenccl.ReadCounts.
func fakeNCCL(t *testing.T, env ...string) string {
	t.Helper()
	lib := testutil.FakeNCCL(t)
	for _, kv := range env {
		k, v, _ := cutEnv(kv)
		t.Setenv(k, v)
	}
	a2a.UseNCCL(t, lib)
	return lib
}

// ncclCounts reads the stub NCCL's counts.
func ncclCounts(t *testing.T, lib string) fakenccl.Counts {
	t.Helper()
	n, err := fakenccl.ReadCounts(lib)
	require.NoError(t, err)
	return n
}

func cutEnv(kv string) (string, string, bool) {
	for i := range kv {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// ncclGroup makes world Comms of cfg over NCCL in this process, rank r
// on device r%2, connected with rank 0's id one after another (the
// stub's init, like NCCL's non-blocking one, does not wait for the
// others).
func ncclGroup(t *testing.T, cfg a2a.Config, world int) []*a2a.Comm {
	t.Helper()
	cfg.Transport = a2a.TransportNCCL
	comms, handles := newRanks(t, cfg, world)
	id, err := a2a.NewNCCLID()
	require.NoError(t, err)
	for _, c := range comms {
		needs, err := c.NeedsNCCL(handles)
		require.NoError(t, err)
		require.True(t, needs)
		require.NoError(t, c.ConnectNCCL(handles, id))
	}
	return comms
}

// runRanks runs f on every rank at once, one goroutine each, and returns
// their errors joined.
func runRanks(comms []*a2a.Comm, f func(c *a2a.Comm) error) error {
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for r, c := range comms {
		wg.Go(func() { errs[r] = f(c) })
	}
	wg.Wait()
	for r, err := range errs { // every rank's: the first may only say that it waited for another's
		if err != nil {
			errs[r] = fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return errors.Join(errs...)
}

// ncclCases are the cases of world: uneven and zero token counts, uneven
// heads, batches over 1 (boxes neither side contiguous), misaligned
// inputs, and packed strided tensors.
func ncclCases(world int, dt a2a.DType) []check.Case {
	uneven, zero := make([]int, world), make([]int, world)
	for r := range uneven {
		uneven[r], zero[r] = 3+4*r, 5
	}
	zero[0] = 0
	return []check.Case{
		{Name: "even", Batch: 2, Tokens: uneven, Heads: 2 * world, HeadDim: 64, DType: dt},
		{Name: "zero-tokens", Batch: 1, Tokens: zero, Heads: 3 * world, HeadDim: 32, DType: dt},
		{Name: "uneven-heads", Batch: 3, Tokens: zero, Heads: 3*world + 1, HeadDim: 24, DType: dt, Misalign: 1},
		{Name: "qkv", Batch: 2, Tokens: uneven, Heads: 2*world + 1, HeadDim: 16, DType: dt, Tensors: 3, Strided: true},
	}
}

// TestFakeNCCLTransport runs check.Run, every rank in a goroutine of its
// own, on groups of 1 to 4 ranks over the stub NCCL and the stub driver,
// both element widths, both buffer modes: SendRecvHeads, GatherHeads,
// HeadAllGather and AllGather, views and Into forms, the chain of views,
// and the packed forms, each output poisoned before and compared byte for
// byte with a2a/ref. The stub driver does every copy and the stub NCCL
// every send and receive; EnvP2PWait makes each rank's group return once
// its partners' halves have come, the order the unpacks after it need
// (the stub has no streams).
func TestFakeNCCLTransport(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=2")
	nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
	for world := 1; world <= 4; world++ {
		for _, dt := range []a2a.DType{a2a.BFloat16, a2a.Float8E5M2} {
			for _, single := range []bool{false, true} {
				cases := ncclCases(world, dt)
				maxTokens, hidden := check.Capacity(cases...)
				cfg := a2a.Config{MaxTokens: maxTokens, HiddenDim: hidden, DType: dt, MaxTensors: 3, SingleBuffer: single}
				comms := ncclGroup(t, cfg, world)
				for i, cs := range cases {
					err := runRanks(comms, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(70+i)) })
					require.NoError(t, err, "%v, world %d, single buffer %v", cs, world, single)
				}
				require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
			}
		}
	}
	counts := ncclCounts(t, nlib)
	require.Zero(t, counts.LiveComms, "every communicator destroyed")
	require.Zero(t, counts.Aborts)
	require.Zero(t, counts.Queued)
	require.Positive(t, counts.Sends)
	require.Equal(t, counts.Sends, counts.Recvs)
	requireReleased(t, lib)
}

// TestFakeNCCLRounds: a buffer that holds exactly SendRecvHeads' output
// of 3 ranks, rank 0 holding every token: rank 0 sends two boxes, each
// as large as the buffer, through a staging region of that size, so
// every rank splits the operation into two rounds alike; the outputs
// still match the reference, and so does the AllGather of one rank's
// tokens that fits.
func TestFakeNCCLRounds(t *testing.T) {
	fakeDriver(t, fakecuda.EnvDevices+"=2")
	fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
	const world = 3
	cs := check.Case{Name: "rounds", Batch: 2, Tokens: []int{6, 0, 0}, Heads: 3 * 2, HeadDim: 8, DType: a2a.BFloat16}
	// SendRecvHeads' output: B*T*(H/P)*D elements = 2*6*2*8 = 192 = 6 tokens of 32.
	cfg := a2a.Config{MaxTokens: 6, HiddenDim: 2 * 8 * 2, DType: cs.DType}
	comms := ncclGroup(t, cfg, world)
	err := runRanks(comms, func(c *a2a.Comm) error {
		d, x, err := uploadInput(c, cs, 5)
		if err != nil {
			return err
		}
		defer c.Device().Free(x)
		v, err := c.SendRecvHeads(x)
		if err != nil {
			return err
		}
		if err := c.Sync(); err != nil {
			return err
		}
		if n := a2a.NCCLRounds(c); n != 2 {
			return fmt.Errorf("%d rounds, want 2", n)
		}
		got, err := c.Device().Download(v)
		if err != nil {
			return err
		}
		return check.Compare(fmt.Sprintf("SendRecvHeads on rank %d", c.Rank()), got, d.Shard)
	})
	require.NoError(t, err)
	require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
}

// uploadInput sets c's token counts to cs's and uploads this rank's input
// of cs drawn from seed (d.X), which the caller frees.
func uploadInput(c *a2a.Comm, cs check.Case, seed uint64) (check.Data, a2a.Tensor, error) {
	d, err := check.MakeData(cs, seed, c.Rank())
	if err != nil {
		return d, a2a.Tensor{}, err
	}
	if err := c.SetRankTokens(cs.Tokens); err != nil {
		return d, a2a.Tensor{}, err
	}
	x, err := uploadNew(c.Device(), [4]int{cs.Batch, cs.Tokens[c.Rank()], cs.Heads, cs.HeadDim}, cs.DType, d.X)
	return d, x, err
}

// recordingRank is an Exchanger that keeps what each of its rounds
// returned.
type recordingRank struct {
	ex     a2a.Exchanger
	rounds [][][]byte
}

func (r *recordingRank) AllGather(ctx context.Context, b []byte) ([][]byte, error) {
	all, err := r.ex.AllGather(ctx, b)
	if err == nil {
		r.rounds = append(r.rounds, all)
	}
	return all, err
}

// TestFakeNCCLJoin: Join with TransportNCCL exchanges the handles, then
// rank 0's NCCL id in a second round, and the group works; with
// TransportAuto on GPUs the stub driver keeps apart, the same.
func TestFakeNCCLJoin(t *testing.T) {
	for _, tr := range []a2a.Transport{a2a.TransportNCCL, a2a.TransportAuto} {
		t.Run(tr.String(), func(t *testing.T) {
			lib := fakeDriver(t, fakecuda.EnvNoPeer+"=0-1")
			nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
			const world = 2
			cs := ncclCases(world, a2a.BFloat16)[0]
			maxTokens, hidden := check.Capacity(cs)
			ex := exchange.NewLocal(world)
			ranks := make([]*recordingRank, world)
			comms := make([]*a2a.Comm, world)
			errs := make([]error, world)
			var wg sync.WaitGroup
			for r := range world {
				ranks[r] = &recordingRank{ex: ex.Rank(r)}
				wg.Go(func() {
					cfg := a2a.Config{Rank: r, WorldSize: world, Device: a2a.DeviceOrdinal(r), MaxTokens: maxTokens, HiddenDim: hidden, DType: cs.DType, Transport: tr}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // a rank that fails leaves the other waiting in the exchange
					defer cancel()
					comms[r], errs[r] = a2a.Join(ctx, cfg, ranks[r])
				})
			}
			wg.Wait()
			require.NoError(t, errors.Join(errs...))
			for r, rk := range ranks {
				require.Len(t, rk.rounds, 2, "rank %d: two exchanges: the handles, then the id", r)
				require.Len(t, rk.rounds[1][0], 128, "rank 0 sent the id")
				require.Empty(t, rk.rounds[1][1], "the others send nothing")
			}
			require.NoError(t, runRanks(comms, func(c *a2a.Comm) error { return check.Run(c, cs, 9) }))
			require.NoError(t, runRanks(comms, (*a2a.Comm).Close))
			counts := ncclCounts(t, nlib)
			require.Zero(t, counts.LiveComms)
			requireReleased(t, lib)
		})
	}
}

// TestFakeNCCLGroup: NewGroup forms an NCCL group in one process when the
// Config asks for NCCL, or when TransportAuto finds GPUs that cannot reach
// each other; every rank's operations match the reference (the stub NCCL
// moves the bytes), and Close destroys every communicator. Where the GPUs
// reach each other, auto stays on IPC and makes no communicator.
func TestFakeNCCLGroup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tr      a2a.Transport
		env     string
		devices []int
		want    a2a.Transport
	}{
		{"nccl", a2a.TransportNCCL, fakecuda.EnvDevices + "=2", []int{0, 1, 0}, a2a.TransportNCCL},
		{"auto-no-peer", a2a.TransportAuto, fakecuda.EnvNoPeer + "=0-1", []int{0, 1}, a2a.TransportNCCL},
		{"auto-peer", a2a.TransportAuto, fakecuda.EnvDevices + "=2", []int{0, 1}, a2a.TransportIPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := fakeDriver(t, tc.env)
			nlib := fakeNCCL(t, fakenccl.EnvP2PWait+"=20000")
			cases := ncclCases(len(tc.devices), a2a.BFloat16)
			g := newTestGroup(t, tc.devices, a2a.BFloat16, cases, withTransport(tc.tr), func(c *a2a.Config) { c.MaxTensors = 3 })
			for r := range g.Size() {
				require.Equal(t, tc.want, g.Comm(r).Transport(), "rank %d", r)
			}
			counts := ncclCounts(t, nlib)
			if tc.want == a2a.TransportIPC { // the stub driver runs no kernels: nothing to compare
				require.Zero(t, counts.LiveComms)
				require.NoError(t, g.Close())
				requireReleased(t, lib)
				return
			}
			require.EqualValues(t, len(tc.devices), counts.LiveComms, "one communicator per rank")
			for i, cs := range cases {
				err := eachRank(g, func(c *a2a.Comm) error { return check.Run(c, cs, uint64(90+i)) })
				require.NoError(t, err, "%v", cs)
			}
			require.NoError(t, eachRank(g, timeSendRecvHeads))
			require.NoError(t, g.Close())
			counts = ncclCounts(t, nlib)
			require.Zero(t, counts.LiveComms, "every communicator destroyed")
			require.Zero(t, counts.Aborts)
			require.Positive(t, counts.Sends)
			requireReleased(t, lib)
		})
	}
}

// timeSendRecvHeads times three SendRecvHeads of 2 tokens a rank, as the
// bench does (internal/timing), and wants three durations.
func timeSendRecvHeads(c *a2a.Comm) error {
	tokens := make([]int, c.WorldSize())
	for r := range tokens {
		tokens[r] = 2
	}
	if err := c.SetRankTokens(tokens); err != nil {
		return err
	}
	x, err := c.Device().Alloc([4]int{1, 2, 2 * c.WorldSize(), 64}, a2a.BFloat16)
	if err != nil {
		return err
	}
	defer c.Device().Free(x)
	times, err := timing.Ops(c, 3, func(int) error { _, err := c.SendRecvHeads(x); return err })
	if err == nil && len(times) != 3 {
		err = fmt.Errorf("%d durations, want 3", len(times))
	}
	return err
}
