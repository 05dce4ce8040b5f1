package a2a_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
)

// held is what a Comm holds from the stub driver that Close must give
// back: its memory, mappings, streams and events.
func held(n fakecuda.Counters) [7]int64 {
	return [7]int64{n.DeviceAllocs, n.VMMAllocations, n.VMMMappings, n.VMMReservations, n.IPCMappings, n.Streams, n.Events}
}

// TestFakeReleaseBetweenBusyComms: what a Comm closed while two others of
// the process keep the device busy (each looping an operation, 50 us, a
// Sync; never idle together) must free or unmap is released within a
// second, while they still run, not held until they stop: a service that
// makes and closes groups beside busy ones would otherwise keep every
// closed group's memory. No release finds work queued.
func TestFakeReleaseBetweenBusyComms(t *testing.T) {
	lib := fakeDriver(t)
	type busy struct {
		c      *a2a.Comm
		x, dst a2a.Tensor
	}
	var bs [4]busy
	for i := range bs {
		bs[i].c, bs[i].x, bs[i].dst = fakeComm(t, true, true)
	}
	before := held(fakeCounters(t, lib))
	stop := make(chan struct{})
	errs := make(chan error, len(bs))
	for _, k := range bs {
		go func() {
			for {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				if _, err := k.c.SendRecvHeads(k.x); err != nil {
					errs <- err
					return
				}
				time.Sleep(50 * time.Microsecond)
				if err := k.c.Sync(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	b, xb, dstb := fakeComm(t, true, true)
	_, err := b.GatherHeads(xb)
	require.NoError(t, err)
	require.NoError(t, b.Sync())
	require.NoError(t, closeFake(t, b, xb, dstb))
	start := time.Now()
	for held(fakeCounters(t, lib)) != before && time.Since(start) < 3*time.Second {
		time.Sleep(time.Millisecond)
	}
	took := time.Since(start)
	after := held(fakeCounters(t, lib))
	close(stop)
	for range bs {
		require.NoError(t, <-errs)
	}
	t.Logf("released %v after Close", took)
	assert.Equal(t, before, after, "what the closed Comm held, released while the others ran")
	assert.Less(t, took, time.Second)
	for _, k := range bs {
		require.NoError(t, closeFake(t, k.c, k.x, k.dst))
	}
	requireReleased(t, lib)
}
