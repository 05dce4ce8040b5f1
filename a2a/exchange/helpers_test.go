package exchange

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
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

// testSecret is the group secret of the tests' groups.
var testSecret = []byte("exchange-test-secret-0123456789")

// newGroup builds P exchangers sharing testSecret; rank 0 listens on
// 127.0.0.1:0 and the others dial its actual address.
func newGroup(t *testing.T, P, maxPayload int) []*TCP {
	t.Helper()
	return newGroupWith(t, P, func(c *TCPConfig) { c.MaxPayload = maxPayload })
}

// newGroupWith is newGroup with each rank's config adjusted by mod.
func newGroupWith(t *testing.T, P int, mod func(*TCPConfig)) []*TCP {
	t.Helper()
	cfg := func(addr string, r int) TCPConfig {
		c := TCPConfig{Addr: addr, Rank: r, WorldSize: P, DialInterval: 5 * time.Millisecond, Secret: testSecret}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	xs := make([]*TCP, P)
	xs[0] = newX(t, cfg("127.0.0.1:0", 0))
	require.NoError(t, xs[0].Listen())
	for r := 1; r < P; r++ {
		xs[r] = newX(t, cfg(xs[0].Addr(), r))
	}
	return xs
}

// lastStats returns the counts of rank 0's last round.
func lastStats(x *TCP) roundStats {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.stats
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

// gatherAsync runs x.AllGather(ctx, local) in a goroutine; the channel
// receives its error.
func gatherAsync(ctx context.Context, x *TCP, local []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := x.AllGather(ctx, local)
		done <- err
	}()
	return done
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

// rawFakeRoot listens on 127.0.0.1 and, for the first connection, reads the
// hello and hands it to behave. It returns the address.
func rawFakeRoot(t *testing.T, behave func(c net.Conn, hello frame)) string {
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

// fakeRoot is rawFakeRoot that first runs rank 0's side of the handshake
// with testSecret (rootHandshake) and hands behave the session and the
// peer's blob.
func fakeRoot(t *testing.T, behave func(c net.Conn, s *session, blob []byte)) string {
	t.Helper()
	return rawFakeRoot(t, func(c net.Conn, hello frame) {
		s, blob, err := rootHandshake(c, hello, testSecret)
		if err != nil {
			return
		}
		behave(c, s, blob)
	})
}

// rootHandshake is rank 0's side of the handshake after hello, keyed with
// key: it sends the challenge and reads and checks the proof and the blob.
func rootHandshake(c net.Conn, hello frame, key []byte) (*session, []byte, error) {
	s := &session{key: key, rank: hello.rank, world: hello.world, challenge: newNonce()}
	copy(s.nonce[:], hello.payload)
	if err := encodeFrame(c, frame{kind: kindChallenge, world: hello.world, payload: s.challenge[:]}, s.mac(labelProof, nil)...); err != nil {
		return nil, nil, err
	}
	f, err := decodeFrame(c, macSize)
	if err != nil {
		return nil, nil, err
	}
	if f.kind != kindAuth || !s.verify(labelAuth, nil, f.payload) {
		return nil, nil, errors.New("bad proof")
	}
	f, err = decodeFrame(c, 1<<20)
	if err != nil {
		return nil, nil, err
	}
	blob, mac, ok := splitMAC(f.payload)
	if f.kind != kindBlob || !ok || !s.verify(labelBlob, blob, mac) {
		return nil, nil, errors.New("bad blob")
	}
	return s, blob, nil
}

// resultFrame encodes f (a result) with a valid MAC for s.
func resultFrame(s *session, f frame) []byte {
	b, err := appendFrame(nil, f, s.mac(labelResult, f.payload)...)
	if err != nil {
		panic(err)
	}
	return b
}

// client drives a connection to rank 0 by hand, as a peer (or a stranger
// posing as one). Its methods return errors rather than fail a test, so
// that goroutines and fuzz targets can use them.
type client struct {
	c *net.TCPConn
	s *session
}

// dialClient connects to addr and sends a hello claiming rank and world;
// the client's MACs will use key.
func dialClient(addr string, rank, world uint32, key []byte) (*client, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	cl := &client{c: c.(*net.TCPConn), s: &session{key: key, rank: rank, world: world, nonce: newNonce()}}
	if err := encodeFrame(c, frame{kind: kindHello, rank: rank, world: world, payload: cl.s.nonce[:]}); err != nil {
		_ = c.Close()
		return nil, err
	}
	return cl, nil
}

// challenge reads rank 0's challenge into the session, and reports whether
// its proof checks out under the client's key.
func (cl *client) challenge() (proven bool, err error) {
	f, err := decodeFrame(cl.c, controlLimit)
	if err != nil {
		return false, err
	}
	if f.kind != kindChallenge || len(f.payload) != nonceSize+macSize {
		return false, fmt.Errorf("got kind %d with %d bytes, want a challenge", f.kind, len(f.payload))
	}
	copy(cl.s.challenge[:], f.payload)
	return cl.s.verify(labelProof, nil, f.payload[nonceSize:]), nil
}

// send writes a frame of kind (from the client's rank and world) with
// payload and, if label is not empty, a MAC under label over payload
// after it.
func (cl *client) send(kind uint16, payload []byte, label string) error {
	var tail []byte
	if label != "" {
		tail = cl.s.mac(label, payload)
	}
	return encodeFrame(cl.c, frame{kind: kind, rank: cl.s.rank, world: cl.s.world, payload: payload}, tail...)
}

// authAndBlob sends the proof of the secret and blob.
func (cl *client) authAndBlob(blob []byte) error {
	if err := cl.send(kindAuth, nil, labelAuth); err != nil {
		return err
	}
	return cl.send(kindBlob, blob, labelBlob)
}

// read reads one frame from rank 0.
func (cl *client) read() (frame, error) {
	return decodeFrame(cl.c, 1<<20)
}

// Close closes the connection.
func (cl *client) Close() error { return cl.c.Close() }

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
