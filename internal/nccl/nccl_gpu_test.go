package nccl

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// gpuNCCL loads the CUDA driver and the real NCCL ($ULYSSES_LIBNCCL or
// libnccl.so.2), skipping without either unless ULYSSES_REQUIRE_GPU=1, and
// retains device 0's primary context for the test.
func gpuNCCL(t *testing.T) (*Library, *driver.Context) {
	t.Helper()
	d, err := driver.Load()
	if err == nil {
		_, err = d.RequireDevices()
	}
	testutil.RequireGPU(t, err, driver.ErrNoDriver, driver.ErrNoDevice)
	l, err := Load()
	testutil.RequireGPU(t, err, ErrNoNCCL)
	c, err := d.RetainPrimaryContext(0)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Release()) })
	return l, c
}

// TestGPUAllGatherWorldOne runs the binding against the real NCCL on one
// GPU: a unique id, a non-blocking communicator of one rank made ready, an
// all-gather of 1 MiB of random bytes over a poisoned output, and the
// communicator destroyed.
func TestGPUAllGatherWorldOne(t *testing.T) {
	l, c := gpuNCCL(t)
	t.Logf("NCCL %s from %s", versionString(l.Version()), l.Path())
	const n = 1 << 20
	src, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(src)
	dst, err := c.MemAlloc(n)
	require.NoError(t, err)
	defer c.MemFree(dst)
	want := make([]byte, n)
	for i := range want {
		want[i] = byte(rand.Uint32())
	}
	require.NoError(t, c.MemcpyHtoD(src, want))
	poison := make([]byte, n)
	for i := range poison {
		poison[i] = 0xEE
	}
	require.NoError(t, c.MemcpyHtoD(dst, poison))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = c.Do(func() error {
		id, err := l.UniqueID()
		if err != nil {
			return err
		}
		comm, err := l.InitRank(1, 0, id)
		if err != nil {
			return err
		}
		defer comm.Destroy()
		if err := comm.Wait(ctx, time.Millisecond); err != nil {
			return err
		}
		if err := comm.AllGather(uintptr(src), uintptr(dst), n, Uint8, 0); err != nil && !IsCode(err, InProgress) {
			return err
		}
		if err := comm.Wait(ctx, time.Millisecond); err != nil {
			return err
		}
		return c.Synchronize()
	})
	require.NoError(t, err)
	got := make([]byte, n)
	require.NoError(t, c.MemcpyDtoH(got, dst))
	require.Equal(t, want, got)
}
