package exchange

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Exchanger is the interface the rest of the library consumes; TCP must
// satisfy it structurally.
type Exchanger interface {
	AllGather(ctx context.Context, local []byte) ([][]byte, error)
}

var _ Exchanger = (*TCP)(nil)

func TestNewTCPValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  TCPConfig
		want error
		msg  string
	}{
		{"world 0", TCPConfig{Addr: "h:1", Rank: 0, WorldSize: 0}, ErrWorldSize, "WorldSize is 0, want 1..1024"},
		{"world negative", TCPConfig{Addr: "h:1", Rank: 0, WorldSize: -3}, ErrWorldSize, "WorldSize is -3"},
		{"world too big", TCPConfig{Addr: "h:1", Rank: 0, WorldSize: 1025}, ErrWorldSize, "WorldSize is 1025"},
		{"rank negative", TCPConfig{Addr: "h:1", Rank: -1, WorldSize: 4}, ErrRank, "Rank is -1, want 0..3"},
		{"rank = world", TCPConfig{Addr: "h:1", Rank: 4, WorldSize: 4}, ErrRank, "Rank is 4, want 0..3"},
		{"empty addr", TCPConfig{Rank: 0, WorldSize: 2}, nil, "Addr is empty"},
		{"addr without port", TCPConfig{Addr: "localhost", Rank: 0, WorldSize: 2}, nil, `Addr "localhost" is not host:port`},
		{"negative max payload", TCPConfig{Addr: "h:1", WorldSize: 2, MaxPayload: -1}, nil, "MaxPayload is -1"},
		{"max payload too big", TCPConfig{Addr: "h:1", WorldSize: 1024, MaxPayload: 8 << 20}, ErrFrameTooLarge, "too large for world size 1024"},
		{"negative dial interval", TCPConfig{Addr: "h:1", WorldSize: 2, DialInterval: -time.Second}, nil, "DialInterval is -1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := NewTCP(tc.cfg)
			require.Error(t, err)
			assert.Nil(t, x)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.Contains(t, err.Error(), tc.msg)
			assertExchangeError(t, err, tc.want)
		})
	}
	for _, cfg := range []TCPConfig{
		{Addr: ":0", Rank: 0, WorldSize: 1},
		{Addr: "127.0.0.1:29600", Rank: 1023, WorldSize: 1024},
		{Addr: "[::1]:1", Rank: 1, WorldSize: 2, MaxPayload: 10, DialInterval: time.Millisecond},
	} {
		x, err := NewTCP(cfg)
		require.NoError(t, err, "%+v", cfg)
		assert.Equal(t, cfg.Addr, x.Addr())
		require.NoError(t, x.Close())
	}
}

func TestAllGatherHappyPath(t *testing.T) {
	sizes := []int{0, 1, 64, 1000}
	for _, P := range []int{1, 2, 4, 8} {
		t.Run(fmt.Sprintf("P=%d", P), func(t *testing.T) {
			checkLeaks(t)
			xs := newGroup(t, P, 0)
			for round := range 2 {
				payloads := make([][]byte, P)
				for r := range P {
					payloads[r] = randBytes(sizes[(r+round)%len(sizes)])
				}
				want := make([][]byte, P)
				for r := range P {
					want[r] = bytes.Clone(payloads[r])
				}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, errs := runRound(ctx, xs, payloads, true)
				cancel()
				for r := range P {
					require.NoError(t, errs[r], "rank %d, round %d", r, round)
					requireBlobs(t, want, res[r], "rank %d, round %d", r, round)
				}
				// Results are copies: scribbling on the inputs and on one
				// rank's result leaves the other ranks' results intact.
				for r := range P {
					for i := range payloads[r] {
						payloads[r][i] ^= 0xff
					}
					for i := range res[0][r] {
						res[0][r][i] ^= 0xff
					}
				}
				for r := 1; r < P; r++ {
					requireBlobs(t, want, res[r], "rank %d after scribbling", r)
				}
			}
		})
	}
}

func TestAllGatherWorldSizeOneNoIO(t *testing.T) {
	checkLeaks(t)
	// Nothing listens on this address (and it is never bound): P=1 must not
	// touch the network.
	x := newX(t, TCPConfig{Addr: "192.0.2.1:9", Rank: 0, WorldSize: 1})
	local := []byte("solo")
	res, err := x.AllGather(context.Background(), local)
	require.NoError(t, err)
	requireBlobs(t, [][]byte{[]byte("solo")}, res)
	local[0] = 'X'
	assert.Equal(t, "solo", string(res[0]))
	assert.Equal(t, "192.0.2.1:9", x.Addr())

	res, err = x.AllGather(context.Background(), nil)
	require.NoError(t, err)
	requireBlobs(t, [][]byte{{}}, res)

	require.NoError(t, x.Close())
	_, err = x.AllGather(context.Background(), local)
	require.ErrorIs(t, err, ErrClosed)
}

func TestAllGatherRejectsOversizedLocal(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 2, 16)
	for r, x := range xs {
		_, err := x.AllGather(context.Background(), make([]byte, 17))
		require.ErrorIs(t, err, ErrFrameTooLarge, "rank %d", r)
		assertExchangeError(t, err, ErrFrameTooLarge)
		assert.Contains(t, err.Error(), "17 bytes, MaxPayload is 16")
	}
}

func TestAllGatherContextAlreadyDone(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 2, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, x := range xs {
		_, err := x.AllGather(ctx, []byte("x"))
		require.ErrorIs(t, err, context.Canceled)
		assertExchangeError(t, err, context.Canceled)
	}
}

// TestListenOnDemand checks that AllGather opens rank 0's listener itself
// and keeps it for the next round.
func TestListenOnDemand(t *testing.T) {
	checkLeaks(t)
	x0 := newX(t, TCPConfig{Addr: "127.0.0.1:0", Rank: 0, WorldSize: 2})
	assert.Equal(t, "127.0.0.1:0", x0.Addr())

	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := x0.AllGather(ctx, []byte("zero"))
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertExchangeError(t, err, context.DeadlineExceeded)
	addr := x0.Addr()
	require.NotEqual(t, "127.0.0.1:0", addr)
	assert.Contains(t, err.Error(), addr)
	assert.Contains(t, err.Error(), "missing ranks [1]")

	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2})
	require.NoError(t, x1.Listen(), "Listen is a no-op on rank > 0")
	assert.Equal(t, addr, x1.Addr())
	require.NoError(t, x0.Listen(), "Listen is idempotent")
	assert.Equal(t, addr, x0.Addr())

	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	payloads := [][]byte{[]byte("zero"), []byte("one")}
	res, errs := runRound(ctx, []*TCP{x0, x1}, payloads, false)
	for r := range 2 {
		require.NoError(t, errs[r])
		requireBlobs(t, payloads, res[r])
	}
}

// garbageCases are connections rank 0 must drop without failing the round.
var garbageCases = []struct {
	name string
	data func(t *testing.T) []byte
	msg  string // expected in rank 0's error if the round then times out
}{
	{"random bytes", func(*testing.T) []byte {
		b := randBytes(64)
		b[0] = 'X' // never "ULYX" by accident
		return b
	}, "bad magic"},
	{"empty", func(*testing.T) []byte { return nil }, "closed before a frame header"},
	{"truncated header", func(t *testing.T) []byte {
		return frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: []byte("x")})[:10]
	}, "truncated frame header"},
	{"truncated payload", func(*testing.T) []byte {
		return append(header(kindHello, 1, 2, 100), make([]byte, 10)...)
	}, "truncated payload: got 10 of 100"},
	{"oversized length", func(*testing.T) []byte {
		return header(kindHello, 1, 2, math.MaxUint32)
	}, "frame too large"},
	{"older version", func(t *testing.T) []byte {
		// A version-1 peer (error frames without codes).
		return append(headerVersion(1, kindHello, 1, 2, 1), 'x')
	}, "unsupported version 1, want 2"},
	{"newer version", func(t *testing.T) []byte {
		return append(headerVersion(protocolVersion+1, kindHello, 1, 2, 1), 'x')
	}, "unsupported version 3, want 2"},
	{"wrong kind", func(t *testing.T) []byte {
		return frameBytes(t, frame{kind: kindResult, rank: 1, world: 2, payload: []byte("x")})
	}, "want hello"},
}

// sendGarbage writes data on a fresh raw connection to addr, half-closes it
// and waits until rank 0 has dropped it.
func sendGarbage(t *testing.T, addr string, data []byte) {
	t.Helper()
	c := rawConn(t, addr)
	if len(data) > 0 {
		_, err := c.Write(data)
		require.NoError(t, err)
	}
	_ = c.CloseWrite()
	waitPeerClose(t, c)
}

// TestRootSurvivesGarbage: a stray connection that sends garbage is
// dropped, and the real peer that follows completes the round.
func TestRootSurvivesGarbage(t *testing.T) {
	for _, tc := range garbageCases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			xs := newGroup(t, 2, 0)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			type result struct {
				blobs [][]byte
				err   error
			}
			done := make(chan result, 1)
			go func() {
				b, err := xs[0].AllGather(ctx, []byte("zero"))
				done <- result{b, err}
			}()
			sendGarbage(t, xs[0].Addr(), tc.data(t))
			res1, err := xs[1].AllGather(ctx, []byte("one"))
			require.NoError(t, err)
			r0 := <-done
			require.NoError(t, r0.err)
			want := [][]byte{[]byte("zero"), []byte("one")}
			requireBlobs(t, want, r0.blobs)
			requireBlobs(t, want, res1)
		})
	}
}

// TestRootReportsGarbageOnDeadline: with only garbage arriving, rank 0 times
// out with an error that wraps the deadline, names the missing rank and
// includes the last protocol error.
func TestRootReportsGarbageOnDeadline(t *testing.T) {
	for _, tc := range garbageCases {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			x0 := newGroup(t, 2, 0)[0]
			ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := x0.AllGather(ctx, []byte("zero"))
				done <- err
			}()
			sendGarbage(t, x0.Addr(), tc.data(t))
			err := <-done
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assertExchangeError(t, err, context.DeadlineExceeded)
			assert.Contains(t, err.Error(), "missing ranks [1]")
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), x0.Addr())
		})
	}
}

func TestRootDropsHelloOverItsLimit(t *testing.T) {
	checkLeaks(t)
	x0 := newX(t, TCPConfig{Addr: "127.0.0.1:0", Rank: 0, WorldSize: 2, MaxPayload: 16})
	require.NoError(t, x0.Listen())
	x1 := newX(t, TCPConfig{Addr: x0.Addr(), Rank: 1, WorldSize: 2, MaxPayload: 1024})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, errs := runRound(ctx, []*TCP{x0, x1}, [][]byte{nil, make([]byte, 100)}, false)
	require.ErrorIs(t, errs[0], context.DeadlineExceeded)
	assert.Contains(t, errs[0].Error(), "announces 100 payload bytes, limit is 16")
	require.Error(t, errs[1])
}

// TestRootSilentClient: a client that connects and never speaks cannot hold
// the round past ctx's deadline.
func TestRootSilentClient(t *testing.T) {
	checkLeaks(t)
	x0 := newGroup(t, 2, 0)[0]
	_ = rawConn(t, x0.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := x0.AllGather(ctx, []byte("zero"))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "missing ranks [1]")
	assert.Less(t, elapsed, time.Second)
}

// TestPeerRootNeverUp: a peer whose rank 0 never listens gives up at the
// deadline, naming the address.
func TestPeerRootNeverUp(t *testing.T) {
	checkLeaks(t)
	addr := deadAddr(t)
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := x1.AllGather(ctx, []byte("one"))
	elapsed := time.Since(start)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertExchangeError(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), addr)
	assert.Contains(t, err.Error(), "cannot reach rank 0")
	assert.Less(t, elapsed, time.Second)
}

// TestPeerWaitsForLateRoot: peers retry until rank 0 comes up.
func TestPeerWaitsForLateRoot(t *testing.T) {
	checkLeaks(t)
	addr := deadAddr(t)
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		blobs [][]byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		b, err := x1.AllGather(ctx, []byte("one"))
		done <- result{b, err}
	}()
	time.Sleep(150 * time.Millisecond)
	x0 := newX(t, TCPConfig{Addr: addr, Rank: 0, WorldSize: 2})
	res0, err := x0.AllGather(ctx, []byte("zero"))
	require.NoError(t, err)
	r1 := <-done
	require.NoError(t, r1.err)
	want := [][]byte{[]byte("zero"), []byte("one")}
	requireBlobs(t, want, res0)
	requireBlobs(t, want, r1.blobs)
}

// TestWrongWorldSize: a well-formed hello with another world size fails the
// round at once on rank 0, on the honest peers and on the offender.
func TestWrongWorldSize(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 4, 0)
	bad := newX(t, TCPConfig{Addr: xs[0].Addr(), Rank: 3, WorldSize: 5})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[r] = xs[r].AllGather(ctx, []byte{byte(r)})
		}()
	}
	time.Sleep(300 * time.Millisecond) // let the honest peers register first
	_, errs[3] = bad.AllGather(ctx, []byte{3})
	wg.Wait()
	elapsed := time.Since(start)
	for r, err := range errs {
		require.ErrorIs(t, err, ErrWorldSize, "rank %d", r)
		assertExchangeError(t, err, ErrWorldSize)
	}
	assert.Contains(t, errs[0].Error(), "reports world size 5")
	assert.Contains(t, errs[0].Error(), "has 4")
	assert.Contains(t, errs[1].Error(), "reports world size 5", "peers see rank 0's reason")
	assert.Contains(t, errs[1].Error(), xs[0].Addr())
	assert.Less(t, elapsed, 3*time.Second, "must fail fast, not at the deadline")
}

// TestDuplicateRank: two peers claiming rank 1 fail the round with ErrRank
// on rank 0 and on both claimants.
func TestDuplicateRank(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 3, 0)
	dup := newX(t, TCPConfig{Addr: xs[0].Addr(), Rank: 1, WorldSize: 3})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	_, errs := runRound(ctx, []*TCP{xs[0], xs[1], dup}, [][]byte{[]byte("0"), []byte("1a"), []byte("1b")}, true)
	elapsed := time.Since(start)
	for i, err := range errs {
		require.ErrorIs(t, err, ErrRank, "participant %d", i)
		assertExchangeError(t, err, ErrRank)
	}
	assert.Contains(t, errs[0].Error(), "reports rank 1, already claimed by")
	assert.Contains(t, errs[1].Error(), "already claimed by")
	assert.Contains(t, errs[2].Error(), "already claimed by")
	assert.Less(t, elapsed, 3*time.Second, "must fail fast, not at the deadline")
}

// TestOutOfRangeRank: a hello claiming rank 0 or a rank >= P fails the round
// with ErrRank, and the offender is told why in an error frame.
func TestOutOfRangeRank(t *testing.T) {
	for _, rank := range []uint32{0, 2, math.MaxUint32} {
		t.Run(fmt.Sprint(rank), func(t *testing.T) {
			checkLeaks(t)
			x0 := newGroup(t, 2, 0)[0]
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := x0.AllGather(ctx, []byte("zero"))
				done <- err
			}()
			c := rawConn(t, x0.Addr())
			_, err := c.Write(frameBytes(t, frame{kind: kindHello, rank: rank, world: 2, payload: []byte("evil")}))
			require.NoError(t, err)
			err = <-done
			require.ErrorIs(t, err, ErrRank)
			assertExchangeError(t, err, ErrRank)
			assert.Contains(t, err.Error(), fmt.Sprintf("reports rank %d, want 1..1", rank))

			require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
			f, err := decodeFrame(c, 1<<16)
			require.NoError(t, err)
			assert.Equal(t, kindError, f.kind)
			assert.Equal(t, uint32(2), f.world)
			require.NotEmpty(t, f.payload)
			assert.Equal(t, byte(codeRank), f.payload[0], "the error frame carries ErrRank's code")
			remote := decodeError(f.payload)
			assert.ErrorIs(t, remote, ErrRank)
			assert.Contains(t, remote.Error(), fmt.Sprintf("reports rank %d, want 1..1", rank))
		})
	}
}

// TestRootAbortNotifiesPeers: when rank 0 gives up, connected peers learn it
// at once instead of waiting for their own deadline.
func TestRootAbortNotifiesPeers(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 3, 0)
	ctx0, cancel0 := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel0()
	ctx1, cancel1 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel1()
	done := make(chan error, 1)
	go func() {
		_, err := xs[0].AllGather(ctx0, nil)
		done <- err
	}()
	start := time.Now()
	_, err := xs[1].AllGather(ctx1, nil)
	assert.Less(t, time.Since(start), 3*time.Second)
	require.Error(t, err)
	assertExchangeError(t, err, nil)
	assert.Contains(t, err.Error(), "abandoned the round")
	assert.Contains(t, err.Error(), "ranks [2]")
	for _, s := range []error{ErrProtocol, ErrRank, ErrWorldSize, ErrFrameTooLarge, ErrClosed, context.DeadlineExceeded} {
		assert.NotErrorIs(t, err, s, "rank 0's reason is text only")
	}
	err0 := <-done
	require.ErrorIs(t, err0, context.DeadlineExceeded)
	assertExchangeError(t, err0, context.DeadlineExceeded)
	assert.Contains(t, err0.Error(), "missing ranks [2] (2 of 3 present)")
}

// TestPeerValidatesAnswer drives a peer against a fake rank 0.
func TestPeerValidatesAnswer(t *testing.T) {
	reply := func(f frame) func(net.Conn, frame) {
		return func(c net.Conn, _ frame) { _ = encodeFrame(c, f) }
	}
	for _, tc := range []struct {
		name   string
		behave func(c net.Conn, hello frame)
		want   error
		msg    string
	}{
		{"result with other world", reply(frame{kind: kindResult, world: 3, payload: encodeBlobs([][]byte{{}, []byte("one"), {}})}),
			ErrWorldSize, "reports world size 3, want 2"},
		{"result from rank 1", reply(frame{kind: kindResult, rank: 1, world: 2, payload: encodeBlobs([][]byte{{}, []byte("one")})}),
			ErrProtocol, "claims to come from rank 1"},
		{"result with wrong blob", reply(frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("two")})}),
			ErrProtocol, "blob for this rank"},
		{"result with too many blobs", reply(frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("one"), {}})}),
			ErrProtocol, "trailing bytes"},
		{"hello instead of result", reply(frame{kind: kindHello, world: 2}), ErrProtocol, "want result"},
		{"garbage", func(c net.Conn, _ frame) { _, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) },
			ErrProtocol, "bad magic"},
		{"oversized result", func(c net.Conn, _ frame) { _, _ = c.Write(header(kindResult, 0, 2, math.MaxUint32)) },
			ErrFrameTooLarge, "4294967295"},
		{"closed without answer", func(net.Conn, frame) {}, ErrProtocol, "closed before a frame header"},
		{"error frame: rank", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrRank, "rank 1 is taken")}),
			ErrRank, "error from rank 0 at 127.0.0.1:"},
		{"error frame: world", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrWorldSize, "nope")}),
			ErrWorldSize, "nope: bad world size"},
		{"error frame: protocol", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrProtocol, "what was that")}),
			ErrProtocol, "what was that"},
		{"error frame: too large", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrFrameTooLarge, "too big")}),
			ErrFrameTooLarge, "too big"},
		{"error frame: other", reply(frame{kind: kindError, world: 2, payload: encodeError(nil, "out of cheese")}),
			nil, "out of cheese"},
		// The code decides, not the text.
		{"error frame: sentinel text without its code", reply(frame{kind: kindError, world: 2, payload: encodeError(nil, "bad rank")}),
			nil, "bad rank"},
		{"error frame: unknown code", reply(frame{kind: kindError, world: 2, payload: append([]byte{200}, "from the future"...)}),
			ErrProtocol, "from the future (unknown error code 200)"},
		{"error frame: no code", reply(frame{kind: kindError, world: 2, payload: []byte{}}),
			ErrProtocol, "error frame without an error code"},
		{"error frame: truncated", func(c net.Conn, _ frame) {
			_, _ = c.Write(append(header(kindError, 0, 2, 50), byte(codeRank), 'a', 'b'))
		}, ErrProtocol, "truncated payload: got 3 of 50 bytes"},
		// A version-1 rank 0 put the sentinel's text in the message and
		// had no code; a version-2 peer must not read that as ErrRank.
		{"error frame of version 1", func(c net.Conn, _ frame) {
			msg := "exchange: bad rank: rank 1 is taken"
			_, _ = c.Write(append(headerVersion(1, kindError, 0, 2, uint32(len(msg))), msg...))
		}, ErrProtocol, "unsupported version 1, want 2"},
		{"result of version 1", func(c net.Conn, _ frame) {
			p := encodeBlobs([][]byte{{}, []byte("one")})
			_, _ = c.Write(append(headerVersion(1, kindResult, 0, 2, uint32(len(p))), p...))
		}, ErrProtocol, "unsupported version 1, want 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			addr := fakeRoot(t, tc.behave)
			x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := x1.AllGather(ctx, []byte("one"))
			require.Error(t, err)
			assert.Less(t, time.Since(start), 3*time.Second)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			for _, s := range []error{ErrProtocol, ErrRank, ErrWorldSize, ErrFrameTooLarge, ErrClosed} {
				if s != tc.want {
					assert.NotErrorIs(t, err, s)
				}
			}
			assertExchangeError(t, err, tc.want)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Contains(t, err.Error(), addr)
			assert.Contains(t, err.Error(), "rank 1")
		})
	}
}

func TestPeerHelloOnTheWire(t *testing.T) {
	checkLeaks(t)
	hellos := make(chan frame, 1)
	addr := fakeRoot(t, func(c net.Conn, hello frame) {
		hellos <- hello
		_ = encodeFrame(c, frame{kind: kindResult, world: 3, payload: encodeBlobs([][]byte{[]byte("a"), {}, []byte("blob")})})
	})
	x := newX(t, TCPConfig{Addr: addr, Rank: 2, WorldSize: 3})
	res, err := x.AllGather(context.Background(), []byte("blob"))
	require.NoError(t, err)
	requireBlobs(t, [][]byte{[]byte("a"), {}, []byte("blob")}, res)
	hello := <-hellos
	assert.Equal(t, frame{kind: kindHello, rank: 2, world: 3, payload: []byte("blob")}, hello)
}

// TestPeerDeadlineWaitingForResult: rank 0 accepts but never answers.
func TestPeerDeadlineWaitingForResult(t *testing.T) {
	checkLeaks(t)
	addr := fakeRoot(t, func(c net.Conn, _ frame) { _, _ = io.Copy(io.Discard, c) })
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := x1.AllGather(ctx, []byte("one"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assertExchangeError(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "waiting for the result from rank 0 at "+addr)
	assert.Less(t, time.Since(start), time.Second)
}

// TestPeerCanceled: cancellation without a deadline interrupts the wait.
func TestPeerCanceled(t *testing.T) {
	checkLeaks(t)
	addr := fakeRoot(t, func(c net.Conn, _ frame) { _, _ = io.Copy(io.Discard, c) })
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := x1.AllGather(ctx, []byte("one"))
	require.ErrorIs(t, err, context.Canceled)
}

func TestRootCanceled(t *testing.T) {
	checkLeaks(t)
	xs := newGroup(t, 2, 0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err := xs[0].AllGather(ctx, []byte("zero"))
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, err.Error(), "missing ranks [1]")
}

// TestClose covers Close during and after rounds on both sides.
func TestClose(t *testing.T) {
	closeSoon := func(x *TCP) { time.AfterFunc(100*time.Millisecond, func() { _ = x.Close() }) }

	t.Run("rank 0 waiting", func(t *testing.T) {
		checkLeaks(t)
		xs := newGroup(t, 2, 0)
		closeSoon(xs[0])
		start := time.Now()
		_, err := xs[0].AllGather(context.Background(), []byte("zero"))
		require.ErrorIs(t, err, ErrClosed)
		assertExchangeError(t, err, ErrClosed)
		assert.Less(t, time.Since(start), 2*time.Second)
		_, err = xs[0].AllGather(context.Background(), []byte("zero"))
		require.ErrorIs(t, err, ErrClosed)
		assertExchangeError(t, err, ErrClosed)
		require.ErrorIs(t, xs[0].Listen(), ErrClosed)
		assertExchangeError(t, xs[0].Listen(), ErrClosed)
		require.NoError(t, xs[0].Close())
		require.NoError(t, xs[0].Close())
	})
	t.Run("peer dialing", func(t *testing.T) {
		checkLeaks(t)
		x1 := newX(t, TCPConfig{Addr: deadAddr(t), Rank: 1, WorldSize: 2})
		closeSoon(x1)
		_, err := x1.AllGather(context.Background(), []byte("one"))
		require.ErrorIs(t, err, ErrClosed)
		assertExchangeError(t, err, ErrClosed)
	})
	t.Run("peer waiting for result", func(t *testing.T) {
		checkLeaks(t)
		addr := fakeRoot(t, func(c net.Conn, _ frame) { _, _ = io.Copy(io.Discard, c) })
		x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2})
		closeSoon(x1)
		_, err := x1.AllGather(context.Background(), []byte("one"))
		require.ErrorIs(t, err, ErrClosed)
		assertExchangeError(t, err, ErrClosed)
		require.NoError(t, x1.Close())
	})
	t.Run("listener released", func(t *testing.T) {
		checkLeaks(t)
		x0 := newGroup(t, 2, 0)[0]
		addr := x0.Addr()
		require.NoError(t, x0.Close())
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the port must be free after Close")
		require.NoError(t, l.Close())
	})
}

// TestManyRounds runs several back-to-back rounds without jitter, so peers
// race into the next round while rank 0 is still answering the last one.
func TestManyRounds(t *testing.T) {
	checkLeaks(t)
	const P = 4
	xs := newGroup(t, P, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, P)
	for r := range P {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 20 {
				local := []byte(fmt.Sprintf("r%d-%d", r, round))
				res, err := xs[r].AllGather(ctx, local)
				if err != nil {
					errs[r] = fmt.Errorf("round %d: %w", round, err)
					return
				}
				for q := range P {
					if want := fmt.Sprintf("r%d-%d", q, round); string(res[q]) != want {
						errs[r] = fmt.Errorf("round %d: blob %d = %q, want %q", round, q, res[q], want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for r, err := range errs {
		require.NoError(t, err, "rank %d", r)
	}
}
