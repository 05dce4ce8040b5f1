//go:build linux

package fdshare

import (
	"errors"
	"net"
	"os"
	"path/filepath"
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
	failing atomic.Bool // export fails with ENOMEM
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
	if p.failing.Load() {
		return -1, 0, syscall.ENOMEM
	}
	fd, err := syscall.Dup(int(p.r.Fd()))
	return fd, 2 << 20, err
}

func (p *pipeExport) close() { p.r.Close(); p.w.Close() }

func key(b byte) []byte { return []byte{b, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15} }

// The claim of the tests' owners.
var testClaim = Claim{Nonce: 0x1234_5678_9abc_def1, World: 4, Rank: 1, Bytes: 1<<20 + 4096}

// serve starts a Server for key with p's export and the tests' claim,
// closed at the end of the test.
func serve(t *testing.T, k []byte, timeout time.Duration, p *pipeExport) *Server {
	t.Helper()
	s, err := Listen(Config{Key: k, Claim: testClaim, Timeout: timeout, Export: p.export})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

func fetch(s *Server, k []byte, within time.Duration) (int, uint64, error) {
	return Fetch(s.Dir(), k, testClaim, time.Now().Add(within))
}

// TestFetch: a peer with the key gets a working descriptor of the
// owner's object and its size, twice; the directory is closed to other
// users; after Close nothing is left open, and the socket and its
// directory are gone.
func TestFetch(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	s := serve(t, key(1), 5*time.Second, p)
	fi, err := os.Stat(s.Dir())
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.LessOrEqual(t, len(s.Dir()), MaxDirLen)
	for i := range 2 {
		fd, size, err := fetch(s, key(1), 5*time.Second)
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
	// The server counts a descriptor once its send has returned, which can
	// be after the peer holds it.
	require.Eventually(t, func() bool { return s.Stats().Given == 2 }, 5*time.Second, time.Millisecond, "the server counts both descriptors it gave")
	dir := s.Dir()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "idempotent")
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "Close removes the directory")
	_, _, err = fetch(s, key(1), time.Second)
	require.ErrorIs(t, err, api.ErrShare, "after Close")
	p.close()
	testutil.RequireFDs(t, before)
}

// TestFetchClaim: a descriptor whose owner claims another process, world
// size, rank or buffer size (another Comm's buffer behind a swapped ID,
// larger or smaller) is refused with ErrShare and closed; so is an owner that could not
// export, at once and without a second try.
func TestFetchClaim(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	s := serve(t, key(3), 5*time.Second, p)
	other := func(f func(*Claim)) Claim { c := testClaim; f(&c); return c }
	for name, want := range map[string]Claim{
		"another process":  other(func(c *Claim) { c.Nonce++ }),
		"another world":    other(func(c *Claim) { c.World = 2 }),
		"another rank":     other(func(c *Claim) { c.Rank = 0 }),
		"a smaller Comm's": other(func(c *Claim) { c.Bytes += 4096 }),
		"a larger Comm's":  other(func(c *Claim) { c.Bytes -= 4096 }),
	} {
		_, _, err := Fetch(s.Dir(), key(3), want, time.Now().Add(5*time.Second))
		require.ErrorIs(t, err, api.ErrShare, name)
		require.ErrorContains(t, err, "another Comm's", name)
	}
	p.failing.Store(true)
	start := time.Now()
	_, _, err := fetch(s, key(3), 5*time.Second)
	require.ErrorIs(t, err, api.ErrShare)
	require.ErrorContains(t, err, "could not export")
	require.Less(t, time.Since(start), time.Second, "a failed export is final")
	require.NoError(t, s.Close())
	p.close()
	testutil.RequireFDs(t, before)
}

// TestFetchSquatter: a process that listens on a buffer's socket name
// without the key gets no proof from the peer and passes no descriptor;
// one that has another key is refused by the honest owner before any
// export.
func TestFetchSquatter(t *testing.T) {
	before := testutil.OpenFDs(t)
	p := newPipeExport(t)
	dir, err := makeDir()
	require.NoError(t, err)
	s, err := listenAt(dir, SocketPath(dir, key(1)), Config{Key: key(2), Claim: testClaim, Timeout: 5 * time.Second, Export: p.export})
	require.NoError(t, err)
	_, _, err = Fetch(dir, key(1), testClaim, time.Now().Add(5*time.Second))
	require.ErrorIs(t, err, api.ErrShare)
	require.ErrorContains(t, err, "does not prove")
	require.Zero(t, p.exports.Load(), "exported to a peer it never saw prove the key")
	require.NoError(t, s.Close())

	s = serve(t, key(3), 5*time.Second, p)
	c, err := net.Dial("unix", SocketPath(s.Dir(), key(3)))
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
	p.close()
	testutil.RequireFDs(t, before)
}

// badOwner serves one connection on key's socket in a directory of its
// own: it proves the key, reads the proof, and then answers with give
// (the descriptors fds and a well-formed message) or, if fds is nil,
// dies. It returns the directory.
func badOwner(t *testing.T, k []byte, fds []int) string {
	t.Helper()
	dir, err := makeDir()
	require.NoError(t, err)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir, k), Net: "unix"})
	require.NoError(t, err)
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done; os.Remove(dir) })
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
		body := giveBody(2<<20, testClaim)
		_, _, _ = c.WriteMsgUnix(append(body, ss.mac(labelGive, body)...), syscall.UnixRights(fds...), nil)
	}()
	return dir
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
		dir := badOwner(t, k, fds)
		before := testutil.OpenFDs(t) // the bad owner's listener included
		_, _, err := Fetch(dir, k, testClaim, time.Now().Add(2*time.Second))
		require.ErrorIs(t, err, api.ErrShare, "case %d", i)
		testutil.RequireFDs(t, before)
	}
}

// TestFetchNoOwner: no process listens (the owner closed, or died and
// left its socket): the fetch fails at once with ErrShare, saying which.
func TestFetchNoOwner(t *testing.T) {
	dir, err := makeDir()
	require.NoError(t, err)
	defer os.RemoveAll(dir)
	start := time.Now()
	_, _, err = Fetch(dir, key(42), testClaim, time.Now().Add(5*time.Second))
	require.ErrorIs(t, err, api.ErrShare)
	require.ErrorContains(t, err, "gone")

	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir, key(42)), Net: "unix"})
	require.NoError(t, err)
	ln.SetUnlinkOnClose(false) // what a killed owner leaves
	require.NoError(t, ln.Close())
	_, _, err = Fetch(dir, key(42), testClaim, time.Now().Add(5*time.Second))
	require.ErrorIs(t, err, api.ErrShare)
	require.ErrorContains(t, err, "no process listens")
	require.Less(t, time.Since(start), time.Second)
}

// TestSocketDir: a peer dials only into a directory of this library's,
// absolute and clean, owned by its own user and closed to the others,
// not a link; anything else is refused with ErrShare before any dial.
func TestSocketDir(t *testing.T) {
	good, err := makeDir()
	require.NoError(t, err)
	defer os.RemoveAll(good)
	_, err = socketPath(good, key(1))
	require.NoError(t, err)

	open, err := os.MkdirTemp("", dirPrefix)
	require.NoError(t, err)
	defer os.RemoveAll(open)
	require.NoError(t, os.Chmod(open, 0o755))
	link := good + "-link"
	require.NoError(t, os.Symlink(good, link))
	defer os.Remove(link)
	other, err := os.MkdirTemp("", "not-ours-")
	require.NoError(t, err)
	defer os.RemoveAll(other)
	file := filepath.Join(good, dirPrefix+"file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	for _, dir := range []string{"", "tmp/" + dirPrefix + "1", good + "/", good + "/../" + filepath.Base(good), other, open, link, file,
		filepath.Join(os.TempDir(), dirPrefix+"missing"), "/" + dirPrefix + string(make([]byte, MaxDirLen))} {
		_, err := socketPath(dir, key(1))
		require.ErrorIs(t, err, api.ErrShare, "%q", dir)
	}
	if os.Geteuid() == 0 {
		theirs, err := os.MkdirTemp("", dirPrefix)
		require.NoError(t, err)
		defer os.RemoveAll(theirs)
		require.NoError(t, os.Chown(theirs, testutil.StrangerUID, testutil.StrangerUID))
		_, err = socketPath(theirs, key(1))
		require.ErrorContains(t, err, "another user")
	}
}

// TestSweepStale: a socket directory whose socket nobody listens on, left
// a minute ago, is removed; one whose owner listens, one left a moment
// ago, one holding anything but a socket, and one open to other users
// are kept.
func TestSweepStale(t *testing.T) {
	base := t.TempDir()
	now := time.Now()
	old := now.Add(-2 * staleAge)
	mk := func(listen, dead bool, age time.Time) string {
		t.Helper()
		dir, err := os.MkdirTemp(base, dirPrefix)
		require.NoError(t, err)
		if listen || dead {
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: SocketPath(dir, key(1)), Net: "unix"})
			require.NoError(t, err)
			if dead {
				ln.SetUnlinkOnClose(false) // what a killed owner leaves
				require.NoError(t, ln.Close())
			} else {
				t.Cleanup(func() { ln.Close() })
			}
			require.NoError(t, os.Chtimes(SocketPath(dir, key(1)), age, age))
		}
		require.NoError(t, os.Chtimes(dir, age, age))
		return dir
	}
	deadOld := mk(false, true, old)
	emptyOld := mk(false, false, old)
	live := mk(true, false, old)
	deadYoung := mk(false, true, now)
	withFile := mk(false, true, old)
	require.NoError(t, os.WriteFile(filepath.Join(withFile, "x"), nil, 0o600))
	require.NoError(t, os.Chtimes(withFile, old, old))
	open := mk(false, true, old)
	require.NoError(t, os.Chmod(open, 0o755))
	sweepIn(base, now)
	for dir, gone := range map[string]bool{deadOld: true, emptyOld: true, live: false, deadYoung: false, withFile: false, open: false} {
		_, err := os.Lstat(dir)
		require.Equal(t, gone, errors.Is(err, os.ErrNotExist), "%s (gone: %v)", filepath.Base(dir), gone)
	}
}
