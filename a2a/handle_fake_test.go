package a2a_test

// Forged handles against the stub driver (see fake_test.go): a peer of
// the group, which holds the group's secret and so may send any handle,
// tries to point a Comm at memory that is not its own rank's buffer.

import (
	"crypto/rand"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// A peer of group A names, in its rank-1 handle, the buffer of group B's
// rank 1 in the same process (same rank, same size, the process's nonce):
// the pointer is not the buffer of the Comm the handle names (its
// identity, which only B's members see), so Connect refuses it before
// anything is mapped, retained or launched. (The code before: Connect
// accepted it, and the operations that followed wrote into B's buffer.)
func TestFakeCrossGroupHandle(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a, aHandles, _ := fakeGroup(t)
	b, bHandles, _ := fakeGroup(t)
	forged := a2a.HandleWithPointerOf(aHandles[1], bHandles[1])
	before := fakeCounters(t, lib)
	err := a[0].Connect([][]byte{aHandles[0], forged, aHandles[2]})
	require.ErrorIs(t, err, a2a.ErrHandle)
	require.Contains(t, err.Error(), "rank 1's handle names")
	require.Contains(t, err.Error(), "is not the buffer of that rank's Comm in this process")
	_, err = a[0].NeedsNCCL([][]byte{aHandles[0], forged, aHandles[2]})
	require.ErrorIs(t, err, a2a.ErrHandle, "Join's first step refuses it too")
	_, err = a[0].SendRecvHeads(a2a.Tensor{})
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	require.Equal(t, before, fakeCounters(t, lib), "nothing mapped, retained, allocated or launched")

	// Both groups still form with their own handles, and run.
	for _, g := range []struct {
		comms   []*a2a.Comm
		handles [][]byte
	}{{a, aHandles}, {b, bHandles}} {
		for r, c := range g.comms {
			require.NoError(t, c.Connect(g.handles), "rank %d", r)
		}
	}
	launched := fakeCounters(t, lib).Launches
	for _, c := range append(a, b...) {
		require.NoError(t, c.SetRankTokens([]int{1, 1, 1}))
		x, err := c.Device().Alloc([4]int{1, 1, 6, 64}, a2a.BFloat16)
		require.NoError(t, err)
		_, err = c.SendRecvHeads(x)
		require.NoError(t, err)
		require.NoError(t, c.Sync())
		require.NoError(t, c.Device().Free(x))
	}
	assert.EqualValues(t, launched+6, fakeCounters(t, lib).Launches)
	for _, c := range append(a, b...) {
		require.NoError(t, c.Close())
	}
	requireReleased(t, lib)
}

// Random bytes as a peer's IPC handle: the driver will not open them, and
// Connect's error matches ErrHandle as well as the driver's own error
// (the code before: the driver's CUDA_ERROR_INVALID_VALUE alone).
func TestFakeRandomIPCHandle(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	comms, handles, _ := fakeGroup(t)
	junk := make([]byte, len(handles[1]))
	_, _ = rand.Read(junk)
	err := comms[0].Connect([][]byte{handles[0], a2a.HandleWithIPCOf(handles[1], junk), handles[2]})
	t.Log(err)
	require.ErrorIs(t, err, a2a.ErrHandle)
	var de *driver.Error
	require.True(t, errors.As(err, &de), "the driver's error is kept: %v", err)
	assert.Equal(t, driver.ErrorInvalidValue, de.Code)
	assert.Contains(t, err.Error(), "rank 1's IPC handle names no memory this process can map")
	require.Zero(t, fakeCounters(t, lib).IPCMappings)
	requireFormsAndCloses(t, lib, comms, handles)
}
