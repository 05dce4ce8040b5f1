package a2a_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
)

// prompt is how long a call that must not wait for the device may take.
const prompt = time.Second

// TestFakeCloseEndsBlockedSync blocks a Sync on an operation whose peer
// never comes (the stub's kernels wait until their abort word is set, as
// the real ones do), checks that the Comm answers meanwhile, then closes
// it: the Sync returns at once with an error matching ErrClosed, and Close
// returns without waiting for the peer.
func TestFakeCloseEndsBlockedSync(t *testing.T) {
	lib := fakeDriver(t, "FAKECUDA_HANG="+a2a.FakeHang())
	c, x, dst := fakeComm(t, true, true)
	_, err := c.SendRecvHeads(x)
	require.NoError(t, err)
	synced := make(chan error, 1)
	go func() { synced <- c.Sync() }()
	select {
	case err := <-synced:
		t.Fatalf("Sync returned %v while its operation waits for a peer", err)
	case <-time.After(100 * time.Millisecond):
	}

	// A waiting Sync holds nothing: the Comm answers and takes more work.
	start := time.Now()
	assert.Equal(t, 1, c.Config().WorldSize)
	assert.Positive(t, c.Blocks())
	assert.NotZero(t, c.Buffer().Ptr)
	require.NoError(t, c.SetTimeout(time.Minute))
	_, err = c.AllGather(x)
	require.NoError(t, err, "an operation enqueued while Sync waits")
	assert.Less(t, time.Since(start), prompt, "calls made while Sync waits")

	require.NoError(t, c.Device().Free(x))
	require.NoError(t, c.Device().Free(dst))
	start = time.Now()
	closed := make(chan error, 1)
	go func() { closed <- c.Close() }()
	select {
	case err := <-synced:
		t.Logf("Sync: %v", err)
		require.ErrorIs(t, err, a2a.ErrClosed)
		assert.Contains(t, err.Error(), "because Close was called")
	case <-time.After(prompt):
		t.Fatal("Sync still waits after Close")
	}
	select {
	case err := <-closed:
		assert.NoError(t, err, "Close of a Comm whose blocked Sync it ended")
	case <-time.After(prompt):
		t.Fatal("Close waits for the peer after ending the Sync")
	}
	t.Logf("Sync and Close returned %v after Close began", time.Since(start))
	assert.ErrorIs(t, c.Sync(), a2a.ErrClosed)
	assert.NoError(t, c.Close(), "a second Close")
	requireReleased(t, lib)
}

// TestFakeCloseTwiceAtOnce closes a Comm from two goroutines while a Sync
// waits: both return once everything is released, and neither reports the
// abort the first one asked for.
func TestFakeCloseTwiceAtOnce(t *testing.T) {
	lib := fakeDriver(t, "FAKECUDA_HANG="+a2a.FakeHang())
	c, x, dst := fakeComm(t, true, true)
	_, err := c.GatherHeads(x)
	require.NoError(t, err)
	require.NoError(t, c.Device().Free(x))
	require.NoError(t, c.Device().Free(dst))
	synced := make(chan error, 1)
	go func() { synced <- c.Sync() }()
	time.Sleep(100 * time.Millisecond) // Sync is waiting (it cannot return before Close)
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- c.Close() }()
	}
	for range 2 {
		select {
		case err := <-errs:
			assert.NoError(t, err)
		case <-time.After(prompt):
			t.Fatal("a Close did not return")
		}
	}
	select {
	case err := <-synced:
		assert.ErrorIs(t, err, a2a.ErrClosed)
	case <-time.After(prompt):
		t.Fatal("Sync still waits after both Closes returned")
	}
	requireReleased(t, lib)
}

// requireSyncContextEnds waits for c's queued operation, which never
// ends, with SyncContext under a context of bound: it returns the
// context's error within slack of it, and the Comm is broken for good
// (the next operation on x: ErrAborted).
func requireSyncContextEnds(t *testing.T, c *a2a.Comm, x a2a.Tensor, bound, slack time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	start := time.Now()
	err := c.SyncContext(ctx)
	took := time.Since(start)
	t.Logf("SyncContext after %v: %v", took, err)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, took, bound+slack)
	_, err = c.AllGather(x)
	t.Logf("next operation: %v", err)
	require.ErrorIs(t, err, a2a.ErrAborted, "an operation after the abort")
	assert.ErrorIs(t, err, a2a.ErrBroken)
}

// TestFakeSyncContext ends a SyncContext blocked on an operation whose
// peer never comes: it returns the context's error promptly, the Comm is
// broken (ErrAborted), and Close returns at once.
func TestFakeSyncContext(t *testing.T) {
	lib := fakeDriver(t, "FAKECUDA_HANG="+a2a.FakeHang())
	c, x, dst := fakeComm(t, true, true)
	_, err := c.SendRecvHeads(x)
	require.NoError(t, err)
	requireSyncContextEnds(t, c, x, 100*time.Millisecond, prompt)

	// A context that does not end is Sync.
	c2, x2, dst2 := fakeComm(t, true, true)
	t.Setenv("FAKECUDA_HANG", "")
	_, err = c2.AllGather(x2)
	require.NoError(t, err)
	require.NoError(t, c2.SyncContext(context.Background()))
	require.NoError(t, closeFake(t, c2, x2, dst2))

	start := time.Now()
	require.NoError(t, closeFake(t, c, x, dst))
	assert.Less(t, time.Since(start), prompt, "Close after an aborted SyncContext")
	requireReleased(t, lib)
}
