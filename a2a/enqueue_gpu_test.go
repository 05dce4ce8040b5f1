package a2a_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// benchmarkEnqueue measures the host-side cost of enqueueing one operation
// on a single-rank Comm (validation, argument packing and cuLaunchKernel),
// with a Sync outside the timer every 256 operations so the launch queue
// never fills. allocs/op is the Go heap allocations per operation.
func benchmarkEnqueue(b *testing.B, run func(c *a2a.Comm, x a2a.Tensor) error) {
	requireGPU(b)
	comm, err := a2a.New(a2a.Config{Rank: 0, WorldSize: 1, MaxTokens: 64, HiddenDim: 32 * 128, DType: a2a.BFloat16})
	require.NoError(b, err)
	defer comm.Close()
	require.NoError(b, comm.Connect([][]byte{comm.Handle()}))
	require.NoError(b, comm.SetRankTokens([]int{8}))
	x, err := comm.Device().Alloc([4]int{1, 8, 32, 128}, a2a.BFloat16)
	require.NoError(b, err)
	defer comm.Device().Free(x)
	require.NoError(b, run(comm, x))
	require.NoError(b, comm.Sync())
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := run(comm, x); err != nil {
			b.Fatal(err)
		}
		if i%256 == 255 {
			b.StopTimer()
			require.NoError(b, comm.Sync())
			b.StartTimer()
		}
	}
	b.StopTimer()
	require.NoError(b, comm.Sync())
}

func BenchmarkEnqueueSendRecvHeads(b *testing.B) {
	benchmarkEnqueue(b, func(c *a2a.Comm, x a2a.Tensor) error { _, err := c.SendRecvHeads(x); return err })
}

func BenchmarkEnqueueAllGather(b *testing.B) {
	benchmarkEnqueue(b, func(c *a2a.Comm, x a2a.Tensor) error { _, err := c.AllGather(x); return err })
}

// TestEnqueueAllocations holds the steady-state promise: at most 2 Go heap
// allocations per operation.
func TestEnqueueAllocations(t *testing.T) {
	requireGPU(t)
	res := testing.Benchmark(BenchmarkEnqueueSendRecvHeads)
	require.NotZero(t, res.N)
	t.Logf("SendRecvHeads enqueue: %v, %d allocs/op", res.NsPerOp(), res.AllocsPerOp())
	require.LessOrEqual(t, res.AllocsPerOp(), int64(2))
}
