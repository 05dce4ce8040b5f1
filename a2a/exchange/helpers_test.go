package exchange

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var warmNetOnce sync.Once

// warmNet initializes the runtime's network poller (which keeps a few file
// descriptors open for the life of the process) so that leak baselines are
// not skewed by the first network operation.
func warmNet(t *testing.T) {
	warmNetOnce.Do(func() {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		c, err := net.Dial("tcp", l.Addr().String())
		require.NoError(t, err)
		s, err := l.Accept()
		require.NoError(t, err)
		_ = s.Close()
		_ = c.Close()
		_ = l.Close()
	})
}

func countFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count file descriptors: %v", err)
	}
	return len(ents)
}

// checkLeaks records the goroutine and file-descriptor counts now and, when
// the test ends (after every cleanup registered later has run), polls
// briefly until both are back to that baseline. Call it first in a test.
func checkLeaks(t *testing.T) {
	t.Helper()
	warmNet(t)
	g0, f0 := runtime.NumGoroutine(), countFDs(t)
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			g, f := runtime.NumGoroutine(), countFDs(t)
			if g <= g0 && f <= f0 {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Errorf("leak: goroutines %d -> %d, open fds %d -> %d\n%s", g0, g, f0, f, buf[:n])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// newX builds an exchanger that is closed when the test ends.
func newX(t *testing.T, cfg TCPConfig) *TCP {
	t.Helper()
	x, err := NewTCP(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = x.Close() })
	return x
}

// newGroup builds P exchangers; rank 0 listens on 127.0.0.1:0 and the
// others dial its actual address.
func newGroup(t *testing.T, P, maxPayload int) []*TCP {
	t.Helper()
	xs := make([]*TCP, P)
	xs[0] = newX(t, TCPConfig{Addr: "127.0.0.1:0", Rank: 0, WorldSize: P, MaxPayload: maxPayload, DialInterval: 5 * time.Millisecond})
	require.NoError(t, xs[0].Listen())
	for r := 1; r < P; r++ {
		xs[r] = newX(t, TCPConfig{Addr: xs[0].Addr(), Rank: r, WorldSize: P, MaxPayload: maxPayload, DialInterval: 5 * time.Millisecond})
	}
	return xs
}

// runRound runs AllGather on every exchanger concurrently, starting them
// in random order and, with jitter, after random small delays.
func runRound(ctx context.Context, xs []*TCP, payloads [][]byte, jitter bool) ([][][]byte, []error) {
	P := len(xs)
	res := make([][][]byte, P)
	errs := make([]error, P)
	var wg sync.WaitGroup
	for _, r := range rand.Perm(P) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if jitter {
				time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			}
			res[r], errs[r] = xs[r].AllGather(ctx, payloads[r])
		}()
	}
	wg.Wait()
	return res, errs
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return b
}

func requireBlobs(t *testing.T, want, got [][]byte, msgAndArgs ...any) {
	t.Helper()
	require.Len(t, got, len(want), msgAndArgs...)
	for i := range want {
		require.NotNil(t, got[i], msgAndArgs...)
		require.True(t, bytes.Equal(want[i], got[i]), "blob %d: want %x, got %x %v", i, want[i], got[i], msgAndArgs)
	}
}

// frameBytes encodes f.
func frameBytes(t *testing.T, f frame) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, encodeFrame(&b, f))
	return b.Bytes()
}

// header builds a raw frame header with an arbitrary length field.
func header(kind uint16, rank, world, length uint32) []byte {
	return headerVersion(protocolVersion, kind, rank, world, length)
}

// headerVersion is header with an arbitrary protocol version.
func headerVersion(version, kind uint16, rank, world, length uint32) []byte {
	h := make([]byte, headerSize)
	copy(h, magic)
	binary.BigEndian.PutUint16(h[4:], version)
	binary.BigEndian.PutUint16(h[6:], kind)
	binary.BigEndian.PutUint32(h[8:], rank)
	binary.BigEndian.PutUint32(h[12:], world)
	binary.BigEndian.PutUint32(h[16:], length)
	return h
}

// rawConn dials addr with a plain TCP client, closed when the test ends.
func rawConn(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c.(*net.TCPConn)
}

// waitPeerClose reads from c until the other side closes it (or resets it).
func waitPeerClose(t *testing.T, c net.Conn) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, 512)
	for {
		if _, err := c.Read(buf); err != nil {
			require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "peer did not close the connection")
			return
		}
	}
}

// fakeRoot listens on 127.0.0.1 and, for the first connection, reads the
// hello and hands it to behave. It returns the address.
func fakeRoot(t *testing.T, behave func(c net.Conn, hello frame)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		hello, err := decodeFrame(c, 1<<20)
		if err != nil {
			return
		}
		behave(c, hello)
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-done
	})
	return l.Addr().String()
}

// deadAddr returns a loopback address on which nothing listens.
func deadAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// assertExchangeError checks that err, returned by the package's API,
// follows its error scheme: "exchange: <what happened>: <cause>", with a
// single "exchange:" and, if cause is not nil, cause's text last.
func assertExchangeError(t *testing.T, err error, cause error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "exchange: "), "error does not start with %q: %s", "exchange: ", msg)
	assert.Equal(t, 1, strings.Count(msg, "exchange:"), "stutter: %s", msg)
	if cause != nil {
		assert.True(t, strings.HasSuffix(msg, ": "+cause.Error()), "error does not end with its cause %q: %s", cause, msg)
	}
}

// assertInnerError checks that err, from an unexported helper whose
// callers add the "exchange: ..." context, has no prefix and ends with
// cause's text.
func assertInnerError(t *testing.T, err error, cause error) {
	t.Helper()
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "exchange:")
	assert.True(t, strings.HasSuffix(msg, ": "+cause.Error()), "error does not end with its cause %q: %s", cause, msg)
}
