package nccl

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/fakenccl"
)

// splitAll splits every communicator of cs into a blocking child, one
// after another from this goroutine: each returns in progress, and the
// children are ready once every rank has split.
func splitAll(t *testing.T, cs []*Comm) []*Comm {
	t.Helper()
	kids := make([]*Comm, len(cs))
	for r, c := range cs {
		k, err := c.Split(CommOptions{Blocking: true})
		require.NoError(t, err)
		require.True(t, k.Blocking())
		require.Equal(t, c.World(), k.World())
		require.Equal(t, r, k.Rank())
		kids[r] = k
	}
	for _, k := range kids {
		require.NoError(t, k.Wait(context.Background(), time.Millisecond))
	}
	return kids
}

// TestSplitBlockingChild: Split of a ready non-blocking communicator is
// in progress until every rank has split; the children are blocking,
// exchange bytes among themselves (a rank's first group waits for its
// peer, so each rank enqueues from a goroutine of its own), and are
// released apart from their parents.
func TestSplitBlockingChild(t *testing.T) {
	l, path := stub(t)
	cs := group(t, l, 2, UniqueID{21})
	k0, err := cs[0].Split(CommOptions{Blocking: true})
	require.NoError(t, err)
	r, err := k0.AsyncError()
	require.NoError(t, err)
	require.Equal(t, InProgress, r, "rank 1 has not split yet")
	k1, err := cs[1].Split(CommOptions{Blocking: true})
	require.NoError(t, err)
	kids := []*Comm{k0, k1}
	for _, k := range kids {
		require.NoError(t, k.Wait(context.Background(), time.Millisecond))
	}
	n, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(2), n.Splits)
	require.Equal(t, int64(4), n.LiveComms)
	require.Equal(t, int64(2), n.LiveBlocking)

	src := [][]byte{filled(16, 1), filled(16, 2)}
	dst := [][]byte{filled(16, 0), filled(16, 0)}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r, k := range kids {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			errs[r] = exchange(l, k, 1-r, src[r], dst[r])
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, src[1], dst[0])
	require.Equal(t, src[0], dst[1])
	n, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(2), n.BlockingSends)
	for r := range cs {
		require.NoError(t, kids[r].Destroy())
		require.NoError(t, cs[r].Destroy())
	}
	n, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Zero(t, n.LiveComms)
	require.Zero(t, n.LiveBlocking)
}

// TestSplitPending: as NCCL does on a non-blocking parent, the stub
// writes the child's handle only once every rank has split, from another
// rank's thread; until then the parent and the pending child report
// InProgress; a child released while pending is aborted by its parent's
// Abort once NCCL has written it (failed), or at its own release where
// the parent went first; a child dropped while pending is safe to
// collect.
func TestSplitPending(t *testing.T) {
	l, path := stub(t)
	cs := group(t, l, 2, UniqueID{25})
	k0, err := cs[0].Split(CommOptions{Blocking: true})
	require.NoError(t, err)
	for _, c := range []*Comm{cs[0], k0} {
		r, err := c.AsyncError()
		require.NoError(t, err)
		require.Equal(t, InProgress, r)
	}
	require.NotNil(t, k0.split, "no handle before every rank has split")
	require.NoError(t, k0.Abort(), "a pending child is dropped without a call")
	require.NoError(t, cs[0].Abort())
	n, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(2), n.Aborts, "the parent, then the failed child NCCL wrote")
	require.Equal(t, int64(1), n.LiveComms, "rank 1's parent")
	require.NoError(t, cs[1].Destroy())

	// The parent released first: the failed child NCCL then wrote is
	// aborted when the child is released.
	cs = group(t, l, 2, UniqueID{27})
	k0, err = cs[0].Split(CommOptions{Blocking: true})
	require.NoError(t, err)
	require.NoError(t, cs[0].Abort())
	require.NoError(t, k0.Abort(), "the child, after its parent")
	n, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(4), n.Aborts, "the second group's parent and child too")
	require.Equal(t, int64(1), n.LiveComms, "this group's rank 1 parent")
	// A child dropped while pending leaves its slot pinned and reachable:
	// collecting the Comm is safe (an unreachable pinned Pinner panics).
	func() {
		dropped, err := cs[1].Split(CommOptions{Blocking: true})
		require.NoError(t, err)
		require.NotNil(t, dropped.split, "rank 0 of this group will never split")
	}()
	runtime.GC()
	runtime.GC()
	require.NoError(t, cs[1].Abort())

	cs = group(t, l, 2, UniqueID{26})
	kids := splitAll(t, cs)
	for r := range cs {
		require.Nil(t, kids[r].split)
		require.NotZero(t, kids[r].h)
		st, err := cs[r].AsyncError()
		require.NoError(t, err)
		require.Equal(t, Success, st)
		require.NoError(t, kids[r].Destroy())
		require.NoError(t, cs[r].Destroy())
	}
	n, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(1), n.LiveComms, "only the failed child of the Comm dropped unreleased")
}

// exchange sends src to peer and receives dst from it in one group.
func exchange(l *Library, c *Comm, peer int, src, dst []byte) error {
	if err := l.GroupStart(); err != nil {
		return err
	}
	err := c.Send(addr(src), uint64(len(src)), Uint8, peer, 0)
	if err == nil {
		err = c.Recv(addr(dst), uint64(len(dst)), Uint8, peer, 0)
	}
	if end := l.GroupEnd(); err == nil {
		err = end
	}
	return err
}

// TestSplitRefusals: a parent still in progress is refused as NCCL
// refuses it (InvalidArgument), and a library before 2.18 lacks Split
// (ErrUnsupported); neither makes a communicator.
func TestSplitRefusals(t *testing.T) {
	l, path := stub(t, fakenccl.EnvInitPolls+"=1000")
	c, err := l.InitRank(1, 0, UniqueID{22})
	require.NoError(t, err)
	_, err = c.Split(CommOptions{Blocking: true})
	require.True(t, IsCode(err, InvalidArgument), "%v", err)
	require.NoError(t, c.Abort())
	n, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Zero(t, n.LiveComms)

	old, _ := stub(t, fakenccl.EnvVersion+"=21703", fakenccl.EnvInitPolls+"=0")
	c, err = old.InitRank(1, 0, UniqueID{23})
	require.NoError(t, err)
	_, err = c.Split(CommOptions{Blocking: true})
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "ncclCommSplit needs NCCL 2.18.0")
	require.NoError(t, c.Destroy())
}

// TestBlockingGroupAbort: a blocking child's first group to a peer that
// never comes blocks in GroupEnd until another goroutine aborts the
// child; GroupEnd then fails, and nothing is left live.
func TestBlockingGroupAbort(t *testing.T) {
	l, path := stub(t)
	cs := group(t, l, 2, UniqueID{24})
	kids := splitAll(t, cs)
	src, dst := filled(8, 3), filled(8, 0)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		done <- exchange(l, kids[0], 1, src, dst)
	}()
	select {
	case err := <-done:
		t.Fatalf("the group returned before its peer came: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	require.NoError(t, kids[0].Abort())
	select {
	case err := <-done:
		require.True(t, IsCode(err, InternalError), "%v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the group still blocks after the abort")
	}
	require.NoError(t, kids[1].Destroy())
	for _, c := range cs {
		require.NoError(t, c.Destroy())
	}
	n, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Zero(t, n.LiveComms)
	require.Zero(t, n.Queued)
}
