package a2a_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// held is what a Comm holds from the stub driver that Close must give
// back: its memory, mappings, streams and events.
func held(n fakecuda.Counters) [7]int64 {
	return [7]int64{n.DeviceAllocs, n.VMMAllocations, n.VMMMappings, n.VMMReservations, n.IPCMappings, n.Streams, n.Events}
}

// TestFakeReleaseBetweenBusyComms: what a Comm closed while six others of
// the process keep the device busy (each looping an operation, 50 us, a
// Sync; never idle together) must free or unmap is released within a
// second, while they still run, not held until they stop: a service that
// makes and closes groups beside busy ones would otherwise keep every
// closed group's memory. No release finds work queued.
func TestFakeReleaseBetweenBusyComms(t *testing.T) {
	lib := fakeDriver(t)
	before := held(fakeCounters(t, lib))
	stop, closeBusy := busyComms(t, 6)
	withBusy := held(fakeCounters(t, lib))
	b, xb, dstb := fakeComm(t, true, true)
	_, err := b.GatherHeads(xb)
	require.NoError(t, err)
	require.NoError(t, b.Sync())
	require.NoError(t, closeFake(t, b, xb, dstb))
	start := time.Now()
	for held(fakeCounters(t, lib)) != withBusy && time.Since(start) < 3*time.Second {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	after := held(fakeCounters(t, lib))
	ops, busyErr := stop()
	require.NoError(t, busyErr)
	t.Logf("released %v after Close; the busy Comms ran %v operations", took, ops)
	assert.Equal(t, withBusy, after, "what the closed Comm held, released while the others ran")
	assert.Less(t, took, 500*time.Millisecond, "windows of milliseconds")
	closeBusy()
	assert.Equal(t, before, held(fakeCounters(t, lib)))
	requireReleased(t, lib)
}
