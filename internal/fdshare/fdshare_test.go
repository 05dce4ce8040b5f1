//go:build linux

package fdshare

import (
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

// pipeExport is an Export of new descriptors of a pipe's read end, with
// the write end and a count of exports.
type pipeExport struct {
	r, w    *os.File
	exports atomic.Int32
}

func newPipeExport(t *testing.T) *pipeExport {
	t.Helper()
	r, w, err := os.Pipe()
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); w.Close() })
	return &pipeExport{r: r, w: w}
}

func (p *pipeExport) export() (int, uint64, error) {
	p.exports.Add(1)
	fd, err := syscall.Dup(int(p.r.Fd()))
	return fd, 2 << 20, err
}

func key(b byte) []byte { return []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} }

// TestFetch: a peer with the key gets a working descriptor of the
// owner's object and its size, twice; after Close nothing is left open,
// and the socket is gone.
func TestFetch(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	s, err := Listen(key(1), 5*time.Second, p.export)
	require.NoError(t, err)
	for i := range 2 {
		fd, size, err := Fetch(key(1), time.Now().Add(5*time.Second))
		require.NoError(t, err, "fetch %d", i)
		require.Equal(t, uint64(2<<20), size)
		_, err = p.w.Write([]byte{byte('a' + i)})
		require.NoError(t, err)
		got := make([]byte, 1)
		_, err = syscall.Read(fd, got)
		require.NoError(t, err)
		require.Equal(t, byte('a'+i), got[0], "the descriptor reads the owner's pipe")
		require.NoError(t, syscall.Close(fd))
	}
	require.EqualValues(t, 2, p.exports.Load())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	_, _, err = Fetch(key(1), time.Now().Add(time.Second))
	require.ErrorIs(t, err, api.ErrShare, "after Close")
	p.r.Close()
	p.w.Close()
	testutil.RequireFDs(t, before)
}

// TestFetchSquatter: a process that listens on a buffer's socket name
// without the key gets no proof from the peer and passes no descriptor;
// one that has another key is refused by the honest owner before any
// export.
func TestFetchSquatter(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	s, err := listenAt(socketName(key(1)), key(2), 5*time.Second, p.export)
	require.NoError(t, err)
	_, _, err = Fetch(key(1), time.Now().Add(5*time.Second))
	require.ErrorIs(t, err, api.ErrShare)
	require.ErrorContains(t, err, "does not prove")
	require.Zero(t, p.exports.Load(), "exported to a peer it never saw prove the key")
	require.NoError(t, s.Close())

	s, err = Listen(key(3), 5*time.Second, p.export)
	require.NoError(t, err)
	defer s.Close()
	c, err := net.Dial("unix", socketName(key(3)))
	require.NoError(t, err)
	ss := session{key: key(4), peer: newNonce()}
	_, err = c.Write(hello(ss.peer))
	require.NoError(t, err)
	ch := make([]byte, challengeSize)
	_, err = c.Read(ch)
	require.NoError(t, err)
	copy(ss.server[:], ch)
	_, err = c.Write(ss.mac(labelAuth, nil))
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	n, err := c.Read(make([]byte, 64))
	require.Error(t, err, "the owner answered a wrong proof with %d bytes", n)
	require.Zero(t, p.exports.Load())
	c.Close()
	require.NoError(t, s.Close())
	p.r.Close()
	p.w.Close()
	testutil.RequireFDs(t, before)
}

// badOwner serves one connection on key's socket: it proves the key, reads
// the proof, and then answers with give (the descriptors fds and a
// well-formed message) or, if fds is nil, dies.
func badOwner(t *testing.T, k []byte, fds []int) {
	t.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketName(k), Net: "unix"})
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.AcceptUnix()
		if err != nil {
			return
		}
		defer c.Close()
		in := make([]byte, helloSize)
		if _, err := c.Read(in); err != nil {
			return
		}
		ss := session{key: k, server: newNonce()}
		copy(ss.peer[:], in[8:])
		_, _ = c.Write(append(ss.server[:], ss.mac(labelProof, nil)...))
		if _, err := c.Read(make([]byte, authSize)); err != nil || fds == nil {
			return
		}
		sz := sizeBytes(2 << 20)
		_, _, _ = c.WriteMsgUnix(append(sz, ss.mac(labelGive, sz)...), syscall.UnixRights(fds...), nil)
	}()
}

// TestFetchDistrusts: an owner that sends two descriptors, or none, or
// dies before answering, fails the fetch with ErrShare and leaves no
// descriptor open in the peer.
func TestFetchDistrusts(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	for i, fds := range [][]int{{int(r.Fd()), int(w.Fd())}, {}, nil} {
		k := key(byte(10 + i))
		badOwner(t, k, fds)
		before := testutil.OpenFDs(t) // the bad owner's listener included
		_, _, err := Fetch(k, time.Now().Add(5*time.Second))
		require.ErrorIs(t, err, api.ErrShare, "case %d", i)
		testutil.RequireFDs(t, before)
	}
}

// TestFetchNoOwner: no process listens (the owner died): the dial fails
// at once with ErrShare.
func TestFetchNoOwner(t *testing.T) {
	start := time.Now()
	_, _, err := Fetch(key(42), time.Now().Add(5*time.Second))
	require.ErrorIs(t, err, api.ErrShare)
	require.Less(t, time.Since(start), time.Second)
}

// TestServerFull: connections past MaxConns are closed unanswered, and
// once the idle ones time out the server answers again.
func TestServerFull(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	s, err := Listen(key(7), 500*time.Millisecond, p.export)
	require.NoError(t, err)
	var idle []net.Conn
	for range MaxConns {
		c, err := net.Dial("unix", socketName(key(7)))
		require.NoError(t, err)
		idle = append(idle, c)
	}
	time.Sleep(50 * time.Millisecond) // let the server take them all
	_, _, err = Fetch(key(7), time.Now().Add(200*time.Millisecond))
	require.ErrorIs(t, err, api.ErrShare, "a full server answers nobody")
	time.Sleep(600 * time.Millisecond) // the idle ones time out
	fd, _, err := Fetch(key(7), time.Now().Add(5*time.Second))
	require.NoError(t, err)
	require.NoError(t, syscall.Close(fd))
	for _, c := range idle {
		c.Close()
	}
	require.NoError(t, s.Close())
	p.r.Close()
	p.w.Close()
	testutil.RequireFDs(t, before)
}
