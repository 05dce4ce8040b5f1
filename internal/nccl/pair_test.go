package nccl

import (
	"bytes"
	"context"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/fakenccl"
)

// group makes world ready communicators of the stub at l from one id.
func group(t *testing.T, l *Library, world int, id UniqueID) []*Comm {
	t.Helper()
	cs := make([]*Comm, world)
	for r := range cs {
		c, err := l.InitRank(world, r, id)
		require.NoError(t, err)
		require.NoError(t, c.Wait(context.Background(), time.Millisecond))
		cs[r] = c
	}
	return cs
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(&b[0])) }

// filled is n bytes of value v.
func filled(n int, v byte) []byte { return bytes.Repeat([]byte{v}, n) }

// TestPairAcrossRanks: three communicators of one id, enqueued by one
// thread in turn, each rank's sends and receives in one group. Rank 0's
// halves wait for partners (its communicator in progress) until the
// others post; then every receive holds its sender's bytes, nothing is
// queued and every communicator is ready.
func TestPairAcrossRanks(t *testing.T) {
	l, path := stub(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const world, n = 3, 64
	cs := group(t, l, world, UniqueID{7})
	src := make([][]byte, world)
	dst := make([][][]byte, world) // dst[r][q]: what r received from q
	for r := range cs {
		src[r] = filled(n, byte(0x10*(r+1)))
		dst[r] = make([][]byte, world)
		for q := range dst[r] {
			dst[r][q] = filled(n, 0xEE)
		}
	}
	enqueue := func(r int) {
		require.NoError(t, l.GroupStart())
		for q := range world {
			require.NoError(t, cs[r].Send(addr(src[r]), n/2, BFloat16, q, 0))
			require.NoError(t, cs[r].Recv(addr(dst[r][q]), n, Uint8, q, 0))
		}
		require.NoError(t, l.GroupEnd())
	}
	enqueue(0)
	state, err := cs[0].AsyncError()
	require.NoError(t, err)
	require.Equal(t, InProgress, state, "rank 0 waits for its peers")
	require.Equal(t, src[0], dst[0][0], "the exchange with itself completed")
	require.Equal(t, filled(n, 0xEE), dst[0][1])
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(4), counts.Queued, "rank 0's two sends and two receives to and from peers")
	enqueue(1)
	enqueue(2)
	for r := range cs {
		for q := range cs {
			require.Equal(t, src[q], dst[r][q], "rank %d from rank %d", r, q)
		}
		state, err := cs[r].AsyncError()
		require.NoError(t, err)
		require.Equal(t, Success, state)
	}
	counts, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{LiveComms: world, Sends: world * world, Recvs: world * world}, counts)
	for _, c := range cs {
		require.NoError(t, c.Destroy())
	}
}

// TestPairInOrder: transfers between one pair are paired in the order
// each side posted them, outside groups too; communicators of another id
// do not pair with them.
func TestPairInOrder(t *testing.T) {
	l, path := stub(t)
	a := group(t, l, 2, UniqueID{1})
	b := group(t, l, 2, UniqueID{2})
	first, second := filled(8, 1), filled(8, 2)
	got1, got2, other := filled(8, 0), filled(8, 0), filled(8, 0)
	require.NoError(t, a[0].Send(addr(first), 8, Uint8, 1, 0))
	require.NoError(t, a[0].Send(addr(second), 8, Uint8, 1, 0))
	require.NoError(t, b[1].Recv(addr(other), 8, Uint8, 0, 0))
	require.Equal(t, filled(8, 0), other, "another id's rank 0 sent nothing")
	require.NoError(t, a[1].Recv(addr(got1), 8, Uint8, 0, 0))
	require.NoError(t, a[1].Recv(addr(got2), 8, Uint8, 0, 0))
	runtime.KeepAlive(first)
	runtime.KeepAlive(second)
	require.Equal(t, first, got1)
	require.Equal(t, second, got2)
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.Queued, "b's receive still waits")
	for _, c := range append(a, b...) {
		require.NoError(t, c.Destroy())
	}
	counts, err = fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{Sends: 2, Recvs: 3}, counts, "destroy drops what waits")
}

// TestPairSizeMismatch: a send and its receive of different sizes fail
// both communicators with ncclInvalidUsage.
func TestPairSizeMismatch(t *testing.T) {
	l, _ := stub(t)
	cs := group(t, l, 2, UniqueID{5})
	buf := filled(16, 3)
	require.NoError(t, cs[0].Send(addr(buf), 16, Uint8, 1, 0))
	err := cs[1].Recv(addr(buf), 8, Uint8, 0, 0)
	require.True(t, IsCode(err, InvalidUsage), "%v", err)
	require.ErrorContains(t, err, "differ in size")
	for _, c := range cs {
		state, err := c.AsyncError()
		require.NoError(t, err)
		require.Equal(t, InvalidUsage, state)
		require.NoError(t, c.Destroy())
	}
}

// TestPairHang: under FAKENCCL_P2P_HANG nothing pairs, the communicators
// stay in progress, and Abort ends what waits.
func TestPairHang(t *testing.T) {
	l, path := stub(t, fakenccl.EnvP2PHang+"=1")
	cs := group(t, l, 2, UniqueID{6})
	src, dst := filled(8, 9), filled(8, 0)
	require.NoError(t, cs[0].Send(addr(src), 8, Uint8, 1, 0))
	require.NoError(t, cs[1].Recv(addr(dst), 8, Uint8, 0, 0))
	require.Equal(t, filled(8, 0), dst)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, cs[1].Wait(ctx, time.Millisecond), context.DeadlineExceeded)
	for _, c := range cs {
		require.NoError(t, c.Abort())
	}
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{Aborts: 2, Sends: 1, Recvs: 1}, counts)
}

// TestPairWait: under FAKENCCL_P2P_WAIT_MS, ranks enqueueing from threads
// of their own return from ncclGroupEnd with their receives filled, which
// is the order device work after the group relies on; a partner that
// never comes costs the wait and leaves the half queued.
func TestPairWait(t *testing.T) {
	l, path := stub(t, fakenccl.EnvP2PWait+"=5000")
	cs := group(t, l, 2, UniqueID{8})
	src := [][]byte{filled(32, 1), filled(32, 2)}
	dst := [][]byte{filled(32, 0), filled(32, 0)}
	seen := make([][]byte, 2)
	var wg sync.WaitGroup
	for r := range cs {
		wg.Go(func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			if r == 1 {
				time.Sleep(20 * time.Millisecond) // rank 0 waits for it
			}
			if err := l.GroupStart(); err != nil {
				panic(err)
			}
			if err := cs[r].Send(addr(src[r]), 32, Uint8, 1-r, 0); err != nil {
				panic(err)
			}
			if err := cs[r].Recv(addr(dst[r]), 32, Uint8, 1-r, 0); err != nil {
				panic(err)
			}
			if err := l.GroupEnd(); err != nil {
				panic(err)
			}
			seen[r] = append([]byte(nil), dst[r]...)
		})
	}
	wg.Wait()
	require.Equal(t, src[1], seen[0], "rank 0's receive was filled when its ncclGroupEnd returned")
	require.Equal(t, src[0], seen[1])

	t.Setenv(fakenccl.EnvP2PWait, "30")
	start := time.Now()
	require.NoError(t, cs[0].Send(addr(src[0]), 32, Uint8, 1, 0))
	require.GreaterOrEqual(t, time.Since(start), 25*time.Millisecond, "waited for a partner")
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(1), counts.Queued)
	for _, c := range cs {
		require.NoError(t, c.Destroy())
	}
}
