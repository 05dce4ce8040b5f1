package nccl

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/dl"
	"github.com/ulysses-go/ulysses/internal/fakenccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// stub loads a fresh copy of the stub NCCL, with env set first.
func stub(t *testing.T, env ...string) (*Library, string) {
	t.Helper()
	path := testutil.FakeNCCL(t)
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	l, err := LoadLibrary(path)
	require.NoError(t, err)
	return l, path
}

func TestLoadMissing(t *testing.T) {
	const path = "/nonexistent/libnccl.so.2"
	_, err := LoadLibrary(path)
	require.ErrorIs(t, err, ErrNoNCCL)
	require.NotErrorIs(t, err, ErrSymbolMissing)
	_, dlErr := dl.Open(path)
	require.Error(t, dlErr)
	for _, want := range []string{path, EnvLibrary, dlErr.Error()} {
		require.Contains(t, err.Error(), want, "the loader's text and how to point at NCCL")
	}
}

func TestLoadNotNCCL(t *testing.T) {
	_, err := LoadLibrary(testutil.FakeCUDA(t))
	require.ErrorIs(t, err, ErrSymbolMissing)
	require.ErrorContains(t, err, "ncclGetVersion")
}

func TestLoadTooOld(t *testing.T) {
	path := testutil.FakeNCCL(t)
	t.Setenv(fakenccl.EnvVersion, "21306")
	_, err := LoadLibrary(path)
	require.ErrorIs(t, err, ErrSymbolMissing)
	require.ErrorContains(t, err, "NCCL 2.13.6, 2.14 or newer")
}

func TestVersion(t *testing.T) {
	l, _ := stub(t)
	require.Equal(t, 22809, l.Version())
	require.Equal(t, "2.28.9", versionString(22809))
	require.Equal(t, "2.7.8", versionString(2708))
}

// TestInitRankPassesArguments: the 128-byte id goes by value as C expects
// (every byte arrives), with the world, the rank and a non-blocking
// config.
func TestInitRankPassesArguments(t *testing.T) {
	l, path := stub(t)
	id, err := l.UniqueID()
	require.NoError(t, err)
	require.NotEqual(t, UniqueID{}, id)
	c, err := l.InitRank(4, 2, id)
	require.NoError(t, err)
	in, err := fakenccl.LastInit(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Init{ID: id, World: 4, Rank: 2, Blocking: 0}, in)
	require.NoError(t, c.Wait(context.Background(), time.Millisecond))
	require.Equal(t, 4, c.World())
	require.Equal(t, 2, c.Rank())
	require.NoError(t, c.Destroy())
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Zero(t, counts.LiveComms)
}

func TestInitRankInProgress(t *testing.T) {
	l, _ := stub(t, fakenccl.EnvInitPolls+"=3")
	c, err := l.InitRank(2, 0, UniqueID{1})
	require.NoError(t, err)
	r, err := c.AsyncError()
	require.NoError(t, err)
	require.Equal(t, InProgress, r)
	require.NoError(t, c.Wait(context.Background(), time.Millisecond))
	require.NoError(t, c.Destroy())
}

// TestWaitBounded: a peer that never comes leaves init in progress; Wait
// returns when its context ends, and Abort frees the communicator.
func TestWaitBounded(t *testing.T) {
	l, path := stub(t, fakenccl.EnvInitHang+"=1")
	c, err := l.InitRank(2, 1, UniqueID{2})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = c.Wait(ctx, time.Millisecond)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 2*time.Second)
	require.NoError(t, c.Abort())
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{Aborts: 1}, counts)
}

func TestInitRankErrors(t *testing.T) {
	l, _ := stub(t, fakenccl.EnvInitError+"=6")
	_, err := l.InitRank(2, 0, UniqueID{})
	require.True(t, IsCode(err, RemoteError), "%v", err)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, "ncclCommInitRankConfig", e.Call)
	require.Contains(t, e.Text, "remote process exited")
	require.Contains(t, e.Detail, "FAKENCCL_INIT_ERROR", "NCCL's own message about the failure")
	_, err = l.InitRank(4, 4, UniqueID{})
	require.True(t, IsCode(err, InvalidArgument), "%v", err)
}

// TestSelfExchange: in a world of one, a grouped send to itself and
// receive from itself move the bytes, and so does an all-gather (the stub
// moves host memory).
func TestSelfExchange(t *testing.T) {
	l, path := stub(t)
	runtime.LockOSThread() // a group is the calling thread's, as in NCCL
	defer runtime.UnlockOSThread()
	c, err := l.InitRank(1, 0, UniqueID{3})
	require.NoError(t, err)
	require.NoError(t, c.Wait(context.Background(), time.Millisecond))
	src := []byte("sixteen bytes!!!")
	dst := make([]byte, len(src))
	gathered := make([]byte, len(src))
	require.NoError(t, l.GroupStart())
	require.NoError(t, c.Send(addr(src), 8, BFloat16, 0, 0))
	require.NoError(t, c.Recv(addr(dst), 8, BFloat16, 0, 0))
	require.NoError(t, l.GroupEnd())
	require.NoError(t, c.AllGather(addr(src), addr(gathered), 16, Uint8, 0))
	runtime.KeepAlive(src)
	require.Equal(t, src, dst)
	require.Equal(t, src, gathered)
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Equal(t, fakenccl.Counts{LiveComms: 1, Sends: 1, Recvs: 1, AllGathers: 1}, counts)
	require.NoError(t, c.Destroy())
}

func TestOperationErrors(t *testing.T) {
	l, _ := stub(t)
	c, err := l.InitRank(2, 0, UniqueID{4})
	require.NoError(t, err)
	defer c.Destroy()
	err = c.Send(0x1000, 1, DataType(12), 1, 0)
	require.True(t, IsCode(err, InvalidArgument), "%v", err)
	require.ErrorContains(t, err, "ncclSend: invalid argument (4): invalid data type")
	err = c.Recv(0x1000, 1, BFloat16, 2, 0)
	require.ErrorContains(t, err, "peer out of range")
	require.True(t, IsCode(l.GroupEnd(), InvalidUsage))
}

// TestConfigLayout: the config mirror has ncclConfig_v22800's layout on
// 64-bit platforms, as nccl.h of NCCL 2.28 declares it (size_t, two
// unsigned, four int, a pointer, two int, a pointer, then eight int).
func TestConfigLayout(t *testing.T) {
	var c config
	require.Equal(t, uintptr(80), unsafe.Sizeof(c))
	for _, f := range []struct {
		name string
		got  uintptr
		want uintptr
	}{
		{"magic", unsafe.Offsetof(c.magic), 8}, {"version", unsafe.Offsetof(c.version), 12},
		{"blocking", unsafe.Offsetof(c.blocking), 16}, {"cgaClusterSize", unsafe.Offsetof(c.cgaClusterSize), 20},
		{"minCTAs", unsafe.Offsetof(c.minCTAs), 24}, {"maxCTAs", unsafe.Offsetof(c.maxCTAs), 28},
		{"netName", unsafe.Offsetof(c.netName), 32}, {"splitShare", unsafe.Offsetof(c.splitShare), 40},
		{"trafficClass", unsafe.Offsetof(c.trafficClass), 44}, {"commName", unsafe.Offsetof(c.commName), 48},
		{"collnetEnable", unsafe.Offsetof(c.collnetEnable), 56}, {"CTAPolicy", unsafe.Offsetof(c.ctaPolicy), 60},
		{"shrinkShare", unsafe.Offsetof(c.shrinkShare), 64}, {"nvlsCTAs", unsafe.Offsetof(c.nvlsCTAs), 68},
		{"nChannelsPerNetPeer", unsafe.Offsetof(c.nChannelsPerNetPeer), 72}, {"nvlinkCentricSched", unsafe.Offsetof(c.nvlinkCentricSched), 76},
	} {
		require.Equal(t, f.want, f.got, f.name)
	}
}

// TestConfigVersion: a 2.28 library gets a config of version 2.28 (whose
// CTA policy it reads), an older one a 2.14 config as before; every
// field but blocking is NCCL's to choose unless asked.
func TestConfigVersion(t *testing.T) {
	c := newConfig(22809, true)
	require.Equal(t, uint32(22800), c.version)
	require.Equal(t, uint64(80), c.size)
	require.Equal(t, int32(1), c.blocking)
	require.Equal(t, int32(undefInt), c.ctaPolicy)
	require.Equal(t, int32(undefInt), c.nvlinkCentricSched)
	old := newConfig(21903, false)
	require.Equal(t, uint32(21400), old.version)
	require.Zero(t, old.blocking)

	for _, v := range []struct {
		env     string
		version int64
	}{{"22809", 22800}, {"22703", 21400}} {
		l, path := stub(t, fakenccl.EnvVersion+"="+v.env)
		c, err := l.InitRankOptions(1, 0, UniqueID{9}, CommOptions{Blocking: true})
		require.NoError(t, err)
		require.True(t, c.Blocking())
		cfg, err := fakenccl.LastConfig(path)
		require.NoError(t, err)
		require.Equal(t, fakenccl.Config{Size: 80, Version: v.version, CTAPolicy: map[bool]int64{true: undefInt, false: -2}[v.version == 22800]}, cfg)
		in, err := fakenccl.LastInit(path)
		require.NoError(t, err)
		require.Equal(t, 1, in.Blocking)
		require.NoError(t, c.Destroy())
	}
}

// TestCTAPolicy: the policy reaches a 2.28 library's config as NCCL's
// code; an older library refuses it with ErrUnsupported and makes
// nothing, and an unknown policy is an invalid argument.
func TestCTAPolicy(t *testing.T) {
	l, path := stub(t)
	c, err := l.InitRankOptions(1, 0, UniqueID{10}, CommOptions{CTAPolicy: CTAPolicyZero})
	require.NoError(t, err)
	cfg, err := fakenccl.LastConfig(path)
	require.NoError(t, err)
	require.Equal(t, int64(2), cfg.CTAPolicy, "NCCL_CTA_POLICY_ZERO")
	require.False(t, c.Blocking())
	require.NoError(t, c.Destroy())
	_, err = l.InitRankOptions(1, 0, UniqueID{10}, CommOptions{CTAPolicy: CTAPolicyZero + 1})
	require.True(t, IsCode(err, InvalidArgument), "%v", err)

	old, path := stub(t, fakenccl.EnvVersion+"=22703")
	_, err = old.InitRankOptions(1, 0, UniqueID{11}, CommOptions{CTAPolicy: CTAPolicyEfficiency})
	require.ErrorIs(t, err, ErrUnsupported)
	require.ErrorContains(t, err, "needs NCCL 2.28.0, and "+path+" is NCCL 2.27.3")
	counts, err := fakenccl.ReadCounts(path)
	require.NoError(t, err)
	require.Zero(t, counts.LiveComms)
}
