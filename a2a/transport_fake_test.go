package a2a_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// newRanks makes world unconnected Comms of cfg, rank r on device r%2,
// closed when t ends, and returns them with their handles.
func newRanks(t *testing.T, cfg a2a.Config, world int) ([]*a2a.Comm, [][]byte) {
	t.Helper()
	comms := make([]*a2a.Comm, world)
	handles := make([][]byte, world)
	for r := range comms {
		rc := cfg
		rc.Rank, rc.WorldSize, rc.Device = r, world, a2a.DeviceOrdinal(r%2)
		c, err := a2a.New(rc)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		comms[r], handles[r] = c, c.Handle()
	}
	return comms, handles
}

// TestFakeTransportAuto: TransportAuto picks IPC for GPUs of one host
// with peer access (and connects with Connect), NCCL when the stub driver
// refuses the pair, the same on every rank; a group that needs NCCL is
// refused by Connect, and ranks that ask for different transports by
// every rank.
func TestFakeTransportAuto(t *testing.T) {
	cfg := a2a.Config{MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16, Transport: a2a.TransportAuto}
	t.Run("peer access", func(t *testing.T) {
		lib := fakeDriver(t)
		comms, handles := newRanks(t, cfg, 2)
		for _, c := range comms {
			needs, err := c.NeedsNCCL(handles)
			require.NoError(t, err)
			assert.False(t, needs)
		}
		for _, c := range comms {
			require.NoError(t, c.Connect(handles))
		}
		for _, c := range comms {
			require.NoError(t, c.Close())
		}
		requireReleased(t, lib)
	})
	t.Run("no peer access", func(t *testing.T) {
		fakeDriver(t, fakecuda.EnvNoPeer+"=0-1")
		comms, handles := newRanks(t, cfg, 2)
		for _, c := range comms {
			needs, err := c.NeedsNCCL(handles)
			require.NoError(t, err)
			assert.True(t, needs)
			err = c.Connect(handles)
			require.ErrorIs(t, err, a2a.ErrConfig)
			assert.ErrorContains(t, err, "ConnectNCCL")
		}
	})
	t.Run("disagreeing ranks", func(t *testing.T) {
		fakeDriver(t)
		c0, h0 := newRanks(t, cfg, 2)
		c1, err := a2a.New(a2a.Config{Rank: 1, WorldSize: 2, Device: a2a.DeviceOrdinal(1), MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16})
		require.NoError(t, err)
		defer c1.Close()
		handles := [][]byte{h0[0], c1.Handle()}
		for _, c := range []*a2a.Comm{c0[0], c1} {
			err := c.Connect(handles)
			require.ErrorIs(t, err, a2a.ErrHandle)
			assert.ErrorContains(t, err, "rank 1 asks for transport ipc, rank 0 for auto")
		}
	})
}

// oneRankExchanger is the Exchanger of a world of one.
type oneRankExchanger struct{}

func (oneRankExchanger) AllGather(_ context.Context, b []byte) ([][]byte, error) {
	return [][]byte{b}, nil
}

// TestFakeNoNCCL: with ULYSSES_LIBNCCL naming no library, what needs NCCL
// fails with ErrNoNCCL and the loader's text (in a child process: the
// binding reads the variable once per process), and what does not, works.
func TestFakeNoNCCL(t *testing.T) {
	testutil.RunChild(t, "TestFakeNoNCCLChild", driver.EnvLibrary+"="+testutil.FakeCUDA(t),
		nccl.EnvLibrary+"=/nonexistent/libnccl.so.2")
}

func TestFakeNoNCCLChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	_, err := a2a.NewNCCLID()
	require.ErrorIs(t, err, a2a.ErrNoNCCL)
	require.ErrorIs(t, err, nccl.ErrNoNCCL, "the binding's error is kept")
	require.NotErrorIs(t, err, a2a.ErrNCCL, "a missing library is not a failure of NCCL")
	require.ErrorContains(t, err, "/nonexistent/libnccl.so.2")
	t.Logf("%v", err)
	cfg := a2a.Config{WorldSize: 1, MaxTokens: 8, HiddenDim: 64, DType: a2a.BFloat16}
	for _, tr := range []a2a.Transport{a2a.TransportIPC, a2a.TransportAuto} {
		cfg.Transport = tr
		c, err := a2a.Join(context.Background(), cfg, oneRankExchanger{})
		require.NoError(t, err, "%v needs no NCCL here", tr)
		require.NoError(t, c.Close())
	}
	cfg.Transport = a2a.TransportNCCL
	_, err = a2a.Join(context.Background(), cfg, oneRankExchanger{})
	require.ErrorIs(t, err, a2a.ErrNoNCCL)
	require.Contains(t, os.Getenv(nccl.EnvLibrary), "nonexistent")
}
