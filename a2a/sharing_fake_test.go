package a2a_test

// Buffers shared as file descriptors (Config.Sharing) through the stub
// driver, whose cuMemCreate memory is a memfd: in one process (the ranks'
// buffers fetched over their sockets as another process's would be, with
// ForceIPC, or used by address), with the descriptors and mappings
// counted back to where they started.

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/fakecuda"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// withSharing sets Config.Sharing.
func withSharing(s a2a.Sharing) func(*a2a.Config) { return func(c *a2a.Config) { c.Sharing = s } }

// sharedAs decodes how a Comm's handle shares its buffer.
func sharedAs(t *testing.T, c *a2a.Comm) handle.Shared {
	t.Helper()
	h, err := handle.Decode(c.Handle())
	require.NoError(t, err)
	return h.Shared
}

// closeReleased closes comms and checks that nothing of the stub's is
// left, nor any descriptor that fds (testutil.OpenFDs) did not list.
func closeReleased(t *testing.T, lib string, comms []*a2a.Comm, fds []string) {
	t.Helper()
	for _, c := range comms {
		require.NoError(t, c.Close())
	}
	requireReleased(t, lib)
	testutil.RequireFDs(t, fds)
}

// TestFakeSharingFD: a group of three ranks on three devices that share
// their buffers as file descriptors connects, each rank fetching and
// mapping its two peers' buffers over their sockets (ForceIPC) or using
// them by address with access given; after Close nothing is left: no
// allocation, mapping, reservation or descriptor.
func TestFakeSharingFD(t *testing.T) {
	for _, force := range []bool{true, false} {
		name := map[bool]string{true: "over-sockets", false: "same-process"}[force]
		t.Run(name, func(t *testing.T) {
			lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
			if force {
				a2a.ForceIPC(t)
			}
			fds := testutil.OpenFDs(t)
			comms, handles, _ := fakeGroup(t, withSharing(a2a.SharingFD))
			for _, c := range comms {
				require.Equal(t, handle.SharedFD, sharedAs(t, c))
			}
			n := fakeCounters(t, lib)
			require.EqualValues(t, 3, n.VMMAllocations)
			require.EqualValues(t, 3, n.VMMMappings)
			for r, c := range comms {
				require.NoError(t, c.Connect(handles), "rank %d", r)
			}
			n = fakeCounters(t, lib)
			if force {
				require.EqualValues(t, 6, n.FDExports, "each rank fetched both peers' descriptors")
				require.EqualValues(t, 9, n.VMMMappings, "its own and its two peers' on each rank")
			} else {
				require.Zero(t, n.FDExports, "a peer of this process is used by address")
				require.EqualValues(t, 3, n.VMMMappings)
			}
			require.Zero(t, n.IPCMappings)
			closeReleased(t, lib, comms, fds)
		})
	}
}

// TestFakeSharingMixed: ranks may share differently; each maps its peers'
// buffers the way their handles say.
func TestFakeSharingMixed(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	fds := testutil.OpenFDs(t)
	r := 0
	comms, handles, _ := fakeGroup(t, func(c *a2a.Config) {
		c.Sharing = []a2a.Sharing{a2a.SharingFD, a2a.SharingLegacyIPC, a2a.SharingLegacyIPC}[r]
		r++
	})
	require.Equal(t, []handle.Shared{handle.SharedFD, handle.SharedLegacyIPC, handle.SharedLegacyIPC},
		[]handle.Shared{sharedAs(t, comms[0]), sharedAs(t, comms[1]), sharedAs(t, comms[2])})
	for r, c := range comms {
		require.NoError(t, c.Connect(handles), "rank %d", r)
	}
	n := fakeCounters(t, lib)
	require.EqualValues(t, 2, n.FDExports)
	require.EqualValues(t, 4, n.IPCMappings)
	closeReleased(t, lib, comms, fds)
}

// TestFakeSharingChoice: SharingAuto (the default) shares as a
// descriptor where the device reports the handle type and over legacy
// IPC where not, where SharingFD fails with ErrNotSupported; DeviceInfo
// says which; an unknown Sharing is ErrConfig.
func TestFakeSharingChoice(t *testing.T) {
	t.Run("supported", func(t *testing.T) {
		lib := fakeDriver(t, fakecuda.EnvDevices+"=1")
		c, x, dst := fakeComm(t, true, false, withSharing(a2a.SharingAuto))
		require.Equal(t, handle.SharedFD, sharedAs(t, c))
		require.True(t, c.Device().Info().PosixFD)
		require.False(t, c.Device().Info().Fabric)
		require.NoError(t, closeFake(t, c, x, dst))
		requireReleased(t, lib)
	})
	t.Run("unsupported", func(t *testing.T) {
		lib := fakeDriver(t, fakecuda.EnvDevices+"=1", fakecuda.EnvNoPosixFD+"=1")
		c, x, dst := fakeComm(t, true, false, withSharing(a2a.SharingAuto))
		require.Equal(t, handle.SharedLegacyIPC, sharedAs(t, c))
		require.False(t, c.Device().Info().PosixFD)
		require.NoError(t, closeFake(t, c, x, dst))
		_, err := a2a.New(a2a.Config{WorldSize: 1, MaxTokens: 1, HiddenDim: 8, DType: a2a.BFloat16, Sharing: a2a.SharingFD})
		require.ErrorIs(t, err, a2a.ErrNotSupported)
		requireReleased(t, lib)
	})
	for _, tc := range []struct { // the default is SharingAuto
		name string
		env  []string
		want handle.Shared
	}{
		{"default", []string{fakecuda.EnvDevices + "=1"}, handle.SharedFD},
		{"default-unsupported", []string{fakecuda.EnvDevices + "=1", fakecuda.EnvNoPosixFD + "=1"}, handle.SharedLegacyIPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if os.Getenv(a2a.EnvTestSharing) != "" {
				t.Skipf("%s sets what the default means", a2a.EnvTestSharing)
			}
			lib := fakeDriver(t, tc.env...)
			c, x, dst := fakeComm(t, true, false)
			require.Equal(t, tc.want, sharedAs(t, c))
			require.NoError(t, closeFake(t, c, x, dst))
			requireReleased(t, lib)
		})
	}
	_, err := a2a.New(a2a.Config{WorldSize: 1, MaxTokens: 1, HiddenDim: 8, DType: a2a.BFloat16, Sharing: a2a.SharingAuto + 1})
	require.ErrorIs(t, err, a2a.ErrConfig)
	for _, s := range []a2a.Sharing{a2a.SharingDefault, a2a.SharingLegacyIPC, a2a.SharingFD, a2a.SharingAuto} {
		got, err := a2a.ParseSharing(s.String())
		require.NoError(t, err)
		require.Equal(t, s, got)
	}
	_, err = a2a.ParseSharing("cuda-ipc")
	require.ErrorIs(t, err, a2a.ErrConfig)
}

// TestFakeSharingPeerGone: a peer whose Comm is gone (its socket with
// it, as when its process dies) fails Connect with ErrShare and leaves
// nothing mapped nor open; so does a handle whose ID was changed (its
// socket is another's name, which no one serves); the Comm stays
// unconnected and closes clean.
func TestFakeSharingPeerGone(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	fds := testutil.OpenFDs(t)
	comms, handles, _ := fakeGroup(t, withSharing(a2a.SharingFD))
	forged := append([]byte(nil), handles[2]...)
	forged[208] ^= 1 // the ID
	err := comms[0].Connect([][]byte{handles[0], handles[1], forged})
	require.ErrorIs(t, err, a2a.ErrShare)
	t.Log(err)
	require.NoError(t, comms[2].Close())
	err = comms[0].Connect(handles)
	require.ErrorIs(t, err, a2a.ErrShare)
	require.Contains(t, err.Error(), "rank 2")
	// Rank 1's buffer, mapped before rank 2's failed, waits in the
	// graveyard for its unmapping (it may wait for the device), which
	// requireReleased sees done after Close.
	_, err = comms[0].SendRecvHeads(a2a.Tensor{})
	require.ErrorIs(t, err, a2a.ErrNotConnected)
	closeReleased(t, lib, comms[:2], fds)
}

// TestFakeSharingFabricRefused: a peer's handle that shares its buffer as
// a fabric handle is refused with ErrNotSupported (groups across hosts
// are not built), and nothing stays mapped.
func TestFakeSharingFabricRefused(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	comms, handles, _ := fakeGroup(t, withSharing(a2a.SharingFD))
	h, err := handle.Decode(handles[1])
	require.NoError(t, err)
	h.Shared = handle.SharedFabric
	err = comms[0].Connect([][]byte{handles[0], h.Encode(), handles[2]})
	require.ErrorIs(t, err, a2a.ErrNotSupported)
	require.Contains(t, err.Error(), "fabric handle")
	requireFormsAndCloses(t, lib, comms, handles)
}

// TestFakeSharingSwappedID: a handle that names another Comm's buffer
// (its ID and socket directory) in place of its own is refused with
// ErrShare, whether that Comm's buffer is larger or smaller (both round
// up to the same allocation) or another rank's, and nothing stays mapped.
func TestFakeSharingSwappedID(t *testing.T) {
	lib := fakeDriver(t, fakecuda.EnvDevices+"=3")
	a2a.ForceIPC(t)
	comms, handles, _ := fakeGroup(t, withSharing(a2a.SharingFD))
	for _, tc := range []struct {
		name      string
		maxTokens int
		rank      int
	}{{"larger", 32, 1}, {"smaller", 8, 1}, {"another rank's", 16, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			others, otherHandles, _ := fakeGroup(t, withSharing(a2a.SharingFD), func(c *a2a.Config) { c.MaxTokens = tc.maxTokens })
			theirs, err := handle.Decode(otherHandles[tc.rank])
			require.NoError(t, err)
			h, err := handle.Decode(handles[1])
			require.NoError(t, err)
			h.ID = theirs.ID
			require.True(t, h.SetFDDir(theirs.FDDir()))
			err = comms[0].Connect([][]byte{handles[0], h.Encode(), handles[2]})
			require.ErrorIs(t, err, a2a.ErrShare)
			require.ErrorContains(t, err, "another Comm's")
			t.Log(err)
			for _, c := range others {
				require.NoError(t, c.Close())
			}
		})
	}
	requireFormsAndCloses(t, lib, comms, handles)
}
