package a2a_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
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
	for r, err := range errs {
		if err != nil {
			return fmt.Errorf("rank %d: %w", r, err)
		}
	}
	return nil
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
	counts, err := fakenccl.ReadCounts(nlib)
	require.NoError(t, err)
	require.Zero(t, counts.LiveComms, "every communicator destroyed")
	require.Zero(t, counts.Aborts)
	require.Zero(t, counts.Queued)
	require.Positive(t, counts.Sends)
	require.Equal(t, counts.Sends, counts.Recvs)
	requireReleased(t, lib)
}
