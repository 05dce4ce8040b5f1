package nccl

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/fakenccl"
)

// TestFeaturesByVersion: each optional feature is there from its version
// on, whatever the library exports, and its calls refuse with
// ErrUnsupported before it (a 2.17 library: none of them).
func TestFeaturesByVersion(t *testing.T) {
	all := []Feature{FeatureMemAlloc, FeatureWindows, FeatureAlltoAll, FeatureCTAPolicy, FeatureSplit}
	for _, v := range []struct {
		env  string
		have []Feature
	}{
		{"22809", all},
		{"22703", []Feature{FeatureMemAlloc, FeatureWindows, FeatureSplit}},
		{"21903", []Feature{FeatureMemAlloc, FeatureSplit}},
		{"21803", []Feature{FeatureSplit}},
		{"21703", nil},
	} {
		l, _ := stub(t, fakenccl.EnvVersion+"="+v.env)
		for _, f := range all {
			require.Equal(t, slices.Contains(v.have, f), l.Has(f), "NCCL %s, feature %d", v.env, f)
		}
		require.False(t, l.Has(Feature(len(features))))
		if slices.Contains(v.have, FeatureAlltoAll) {
			continue
		}
		c, err := l.InitRank(1, 0, UniqueID{12})
		require.NoError(t, err)
		err = c.AlltoAll(0x1000, 0x2000, 1, Uint8, 0)
		require.ErrorIs(t, err, ErrUnsupported)
		require.ErrorContains(t, err, "ncclAlltoAll needs NCCL 2.28.0")
		if !slices.Contains(v.have, FeatureWindows) {
			_, err = c.WindowRegister(0x1000, 4096, 0)
			require.ErrorIs(t, err, ErrUnsupported)
			require.ErrorIs(t, c.WindowDeregister(1), ErrUnsupported)
		}
		if !slices.Contains(v.have, FeatureMemAlloc) {
			_, err = l.MemAlloc(4096)
			require.ErrorIs(t, err, ErrUnsupported)
			require.ErrorIs(t, l.MemFree(1), ErrUnsupported)
		}
		require.NoError(t, c.Destroy())
	}
}

// TestAlltoAll: two ranks enqueued in turn by one thread; each rank's
// block p lands at block r of rank p, its own block included.
func TestAlltoAll(t *testing.T) {
	l, path := stub(t)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cs := group(t, l, 2, UniqueID{13})
	const n = 8
	send := [][]byte{append(filled(n, 0xa0), filled(n, 0xa1)...), append(filled(n, 0xb0), filled(n, 0xb1)...)}
	recv := [][]byte{filled(2*n, 0xee), filled(2*n, 0xee)}
	for r, c := range cs {
		require.NoError(t, c.AlltoAll(addr(send[r]), addr(recv[r]), n/2, BFloat16, 0))
	}
	runtime.KeepAlive(send)
	require.Equal(t, append(filled(n, 0xa0), filled(n, 0xb0)...), recv[0])
	require.Equal(t, append(filled(n, 0xa1), filled(n, 0xb1)...), recv[1])
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, int64(4), counts.Sends)
	require.Zero(t, counts.Queued)
	for _, c := range cs {
		require.NoError(t, c.Wait(context.Background(), time.Millisecond))
		require.NoError(t, c.Destroy())
	}
	err = cs[0].AlltoAll(addr(send[0]), addr(recv[0]), 1, DataType(12), 0)
	require.True(t, IsCode(err, InvalidArgument), "a destroyed communicator: %v", err)
}

// TestMemAllocAndWindows: memory of MemAlloc registers as a window of a
// blocking communicator (a non-blocking one is refused) and both are
// released; bad arguments are NCCL's invalid
// argument.
func TestMemAllocAndWindows(t *testing.T) {
	l, path := stub(t)
	p, err := l.MemAlloc(1 << 16)
	require.NoError(t, err)
	require.NotZero(t, p)
	nb, err := l.InitRank(1, 0, UniqueID{15})
	require.NoError(t, err)
	_, err = nb.WindowRegister(p, 1<<16, 0)
	require.ErrorIs(t, err, ErrNeedsBlocking, "NCCL would write the window after the call")
	require.NoError(t, nb.Destroy())
	c, err := l.InitRankOptions(1, 0, UniqueID{14}, CommOptions{Blocking: true})
	require.NoError(t, err)
	w, err := c.WindowRegister(p, 1<<16, 0)
	require.NoError(t, err)
	require.NotZero(t, w)
	live, err := fakenccl.ReadLive(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Live{MemAllocs: 1, Windows: 1}, live)
	_, err = c.WindowRegister(p, 0, 0)
	require.True(t, IsCode(err, InvalidArgument), "%v", err)
	require.NoError(t, c.WindowDeregister(w))
	require.NoError(t, l.MemFree(p))
	_, err = l.MemAlloc(0)
	require.True(t, IsCode(err, InvalidArgument), "%v", err)
	live, err = fakenccl.ReadLive(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Live{}, live)
	require.NoError(t, c.Destroy())
}
