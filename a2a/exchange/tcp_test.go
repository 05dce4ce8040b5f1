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
		{"negative max payload", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, MaxPayload: -1, Secret: testSecret}, nil, "MaxPayload is -1"},
		{"max payload too big", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 1024, MaxPayload: 4 << 20, Secret: testSecret}, ErrFrameTooLarge, "too large for world size 1024"},
		{"negative dial interval", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, DialInterval: -time.Second, Secret: testSecret}, nil, "DialInterval is -1s"},
		{"no secret", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2}, ErrNoSecret, "Secret is empty"},
		{"empty secret", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, Secret: []byte{}}, ErrNoSecret, "Secret is empty"},
		{"no secret, world of one", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 1}, ErrNoSecret, "Secret is empty"},
		{"no secret, not loopback", TCPConfig{Addr: "10.1.2.3:29600", WorldSize: 2}, ErrNoSecret, "anyone who reaches the address could join"},
		{"short secret", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, Secret: []byte("short")}, ErrNoSecret, "Secret is 5 bytes, want at least 16"},
		{"negative max conns", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, MaxConns: -1, Secret: testSecret}, nil, "MaxConns is -1"},
		{"max conns under the world", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 8, MaxConns: 7, Secret: testSecret}, nil, "MaxConns is 7, want 0 (default) or at least the world size 8"},
		{"negative hello timeout", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, HelloTimeout: -time.Second, Secret: testSecret}, nil, "HelloTimeout is -1s"},
		{"negative auth timeout", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, AuthTimeout: -time.Second, Secret: testSecret}, nil, "AuthTimeout is -1s"},
		{"auth timeout over hello timeout", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, AuthTimeout: 2 * time.Second, HelloTimeout: time.Second, Secret: testSecret},
			nil, "AuthTimeout is 2s, over HelloTimeout 1s"},
		{"auth timeout over the default hello timeout", TCPConfig{Addr: "127.0.0.1:1", WorldSize: 2, AuthTimeout: time.Minute, Secret: testSecret},
			nil, "AuthTimeout is 1m0s, over HelloTimeout 10s"},
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
		{Addr: ":0", Rank: 0, WorldSize: 1, Secret: testSecret},
		{Addr: "127.0.0.1:29600", Rank: 1023, WorldSize: 1024, Secret: testSecret},
		{Addr: "[::1]:1", Rank: 1, WorldSize: 2, MaxPayload: 10, DialInterval: time.Millisecond, Secret: testSecret},
		{Addr: "localhost:1", Rank: 1, WorldSize: 2, Secret: testSecret},
		{Addr: "10.1.2.3:29600", Rank: 1, WorldSize: 2, Secret: testSecret},
		{Addr: "gpu-box:29600", Rank: 1, WorldSize: 2, Secret: testSecret[:MinSecretSize]},
		{Addr: "127.0.0.1:1", Rank: 1, WorldSize: 8, MaxConns: 8, HelloTimeout: time.Millisecond, Secret: testSecret},
		{Addr: "127.0.0.1:1", Rank: 1, WorldSize: 8, AuthTimeout: 10 * time.Second, Secret: testSecret},
	} {
		x, err := NewTCP(cfg)
		require.NoError(t, err, "%+v", cfg)
		assert.Equal(t, cfg.Addr, x.Addr())
		require.NoError(t, x.Close())
	}
	// Defaults, and the secret is the exchanger's own copy.
	secret := bytes.Clone(testSecret)
	x, err := NewTCP(TCPConfig{Addr: "127.0.0.1:1", Rank: 1, WorldSize: 5, Secret: secret})
	require.NoError(t, err)
	secret[0] ^= 0xff
	assert.Equal(t, testSecret, x.cfg.Secret)
	assert.Equal(t, 4*5+16, x.cfg.MaxConns)
	assert.Equal(t, DefaultHelloTimeout, x.cfg.HelloTimeout)
	assert.Equal(t, DefaultMaxPayload, x.cfg.MaxPayload)
	assert.Equal(t, DefaultDialInterval, x.cfg.DialInterval)
	assert.Equal(t, DefaultAuthTimeout, x.cfg.AuthTimeout)
	// A short HelloTimeout shortens the default AuthTimeout with it.
	x, err = NewTCP(TCPConfig{Addr: "127.0.0.1:1", Rank: 1, WorldSize: 5, Secret: secret, HelloTimeout: 300 * time.Millisecond})
	require.NoError(t, err)
	assert.Equal(t, 300*time.Millisecond, x.cfg.AuthTimeout)
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
	x := newX(t, TCPConfig{Addr: "192.0.2.1:9", Rank: 0, WorldSize: 1, Secret: testSecret})
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
	x0 := newX(t, TCPConfig{Addr: "127.0.0.1:0", Rank: 0, WorldSize: 2, Secret: testSecret})
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

	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
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
		return append(header(kindHello, 1, 2, nonceSize), make([]byte, 10)...)
	}, "truncated payload: got 10 of 32"},
	{"oversized length", func(*testing.T) []byte {
		return header(kindHello, 1, 2, math.MaxUint32)
	}, "frame too large"},
	{"hello longer than a nonce", func(*testing.T) []byte {
		// A version-2 style hello carrying a blob: refused before it is read.
		return append(header(kindHello, 1, 2, 100), make([]byte, 100)...)
	}, "announces 100 payload bytes, limit is 32"},
	{"older version", func(t *testing.T) []byte {
		// A version-1 peer (error frames without codes).
		return append(headerVersion(1, kindHello, 1, 2, 1), 'x')
	}, "unsupported version 1, want 3"},
	{"version 2", func(t *testing.T) []byte {
		// A version-2 peer: its hello carried its blob, without a proof.
		return append(headerVersion(2, kindHello, 1, 2, 6), "handle"...)
	}, "unsupported version 2, want 3"},
	{"newer version", func(t *testing.T) []byte {
		return append(headerVersion(protocolVersion+1, kindHello, 1, 2, 1), 'x')
	}, "unsupported version 4, want 3"},
	{"wrong kind", func(t *testing.T) []byte {
		return frameBytes(t, frame{kind: kindResult, rank: 1, world: 2, payload: []byte("x")})
	}, "want hello"},
	{"short hello", func(t *testing.T) []byte {
		return frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: []byte("nonce")})
	}, "with 5 payload bytes, want hello (kind 1) with 32"},
	{"hello without proof", func(t *testing.T) []byte {
		return frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: make([]byte, nonceSize)})
	}, "reading proof of the secret: connection closed before a frame header"},
	{"hello and a blob instead of the proof", func(t *testing.T) []byte {
		b := frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: make([]byte, nonceSize)})
		return append(b, frameBytes(t, frame{kind: kindBlob, rank: 1, world: 2, payload: make([]byte, macSize)})...)
	}, "frame kind 6 does not prove the group secret: authentication failed"},
	{"hello and a proof without the secret", func(t *testing.T) []byte {
		// What a stranger who knows the protocol but not the secret sends.
		s := session{rank: 1, world: 2}
		b := frameBytes(t, frame{kind: kindHello, rank: 1, world: 2, payload: s.nonce[:]})
		return append(b, frameBytes(t, frame{kind: kindAuth, rank: 1, world: 2, payload: s.mac(labelAuth, nil)})...)
	}, "does not prove the group secret: authentication failed"},
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
	x0 := newX(t, TCPConfig{Addr: "127.0.0.1:0", Rank: 0, WorldSize: 2, MaxPayload: 16, Secret: testSecret})
	require.NoError(t, x0.Listen())
	x1 := newX(t, TCPConfig{Addr: x0.Addr(), Rank: 1, WorldSize: 2, MaxPayload: 1024, Secret: testSecret})
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	_, errs := runRound(ctx, []*TCP{x0, x1}, [][]byte{nil, make([]byte, 100)}, false)
	require.ErrorIs(t, errs[0], context.DeadlineExceeded)
	// The blob frame carries the blob and its 32-byte MAC.
	assert.Contains(t, errs[0].Error(), "announces 132 payload bytes, limit is 48")
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
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 20 * time.Millisecond, Secret: testSecret})
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
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, DialInterval: 10 * time.Millisecond, Secret: testSecret})
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
	x0 := newX(t, TCPConfig{Addr: addr, Rank: 0, WorldSize: 2, Secret: testSecret})
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
	bad := newX(t, TCPConfig{Addr: xs[0].Addr(), Rank: 3, WorldSize: 5, Secret: testSecret})
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
	dup := newX(t, TCPConfig{Addr: xs[0].Addr(), Rank: 1, WorldSize: 3, Secret: testSecret})
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

// TestOutOfRangeRank: a hello that proves the secret but claims rank 0 or
// a rank >= P fails the round with ErrRank, and the offender is told why in
// an error frame.
func TestOutOfRangeRank(t *testing.T) {
	for _, rank := range []uint32{0, 2, math.MaxUint32} {
		t.Run(fmt.Sprint(rank), func(t *testing.T) {
			checkLeaks(t)
			x0 := newGroup(t, 2, 0)[0]
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			done := gatherAsync(ctx, x0, []byte("zero"))
			cl, err := dialClient(x0.Addr(), rank, 2, testSecret)
			require.NoError(t, err)
			defer cl.Close()
			require.NoError(t, cl.c.SetDeadline(time.Now().Add(5*time.Second)))
			proven, err := cl.challenge()
			require.NoError(t, err)
			require.True(t, proven, "rank 0 proves the secret whatever the hello claims")
			require.NoError(t, cl.authAndBlob([]byte("evil")))
			err = <-done
			require.ErrorIs(t, err, ErrRank)
			assertExchangeError(t, err, ErrRank)
			assert.Contains(t, err.Error(), fmt.Sprintf("reports rank %d, want 1..1", rank))

			f, err := cl.read()
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

// TestPeerValidatesAnswer drives a peer against a fake rank 0 that
// answers its blob (or, for "before the challenge" cases, its hello) in
// the wrong way.
func TestPeerValidatesAnswer(t *testing.T) {
	// reply sends f as is; result sends it with a valid MAC.
	reply := func(f frame) func(net.Conn, *session, []byte) {
		return func(c net.Conn, _ *session, _ []byte) { _ = encodeFrame(c, f) }
	}
	result := func(f frame) func(net.Conn, *session, []byte) {
		return func(c net.Conn, s *session, _ []byte) { _, _ = c.Write(resultFrame(s, f)) }
	}
	good := frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("one")})}
	// acked sends a good result, reads the acknowledgement and then runs
	// then.
	acked := func(then func(c net.Conn, s *session)) func(net.Conn, *session, []byte) {
		return func(c net.Conn, s *session, _ []byte) {
			_, _ = c.Write(resultFrame(s, good))
			if f, err := decodeFrame(c, controlLimit); err == nil && f.kind == kindAck && s.verify(labelAck, nil, f.payload) {
				then(c, s)
			}
		}
	}
	// raw cases answer the hello directly.
	raw := func(b func(hello frame) []byte) func(net.Conn, frame) {
		return func(c net.Conn, hello frame) { _, _ = c.Write(b(hello)) }
	}
	for _, tc := range []struct {
		name   string
		behave func(c net.Conn, s *session, blob []byte)
		raw    func(c net.Conn, hello frame) // instead of behave: before the challenge
		want   error
		msg    string
	}{
		{"result with other world", result(frame{kind: kindResult, world: 3, payload: encodeBlobs([][]byte{{}, []byte("one"), {}})}), nil,
			ErrWorldSize, "reports world size 3, want 2"},
		{"result from rank 1", result(frame{kind: kindResult, rank: 1, world: 2, payload: encodeBlobs([][]byte{{}, []byte("one")})}), nil,
			ErrProtocol, "claims to come from rank 1"},
		{"result with wrong blob", result(frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("two")})}), nil,
			ErrProtocol, "blob for this rank"},
		{"result with too many blobs", result(frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("one"), {}})}), nil,
			ErrProtocol, "trailing bytes"},
		{"result without a valid MAC", func(c net.Conn, s *session, _ []byte) {
			other := *s
			other.key = []byte("another group's secret")
			_, _ = c.Write(resultFrame(&other, good))
		}, nil, ErrAuth, "without a valid MAC"},
		{"result too short for a MAC", reply(frame{kind: kindResult, world: 2, payload: []byte("short")}), nil,
			ErrAuth, "5 bytes without a valid MAC"},
		{"hello instead of result", reply(frame{kind: kindHello, world: 2}), nil, ErrProtocol, "want result"},
		{"garbage", func(c net.Conn, _ *session, _ []byte) { _, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\n\r\n")) }, nil,
			ErrProtocol, "bad magic"},
		{"oversized result", func(c net.Conn, _ *session, _ []byte) { _, _ = c.Write(header(kindResult, 0, 2, math.MaxUint32)) }, nil,
			ErrFrameTooLarge, "4294967295"},
		{"closed without answer", func(net.Conn, *session, []byte) {}, nil, ErrProtocol, "waiting for the result from rank 0"},
		{"error frame: rank", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrRank, "rank 1 is taken")}), nil,
			ErrRank, "error from rank 0 at 127.0.0.1:"},
		{"error frame: world", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrWorldSize, "nope")}), nil,
			ErrWorldSize, "nope: bad world size"},
		{"error frame: protocol", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrProtocol, "what was that")}), nil,
			ErrProtocol, "what was that"},
		{"error frame: too large", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrFrameTooLarge, "too big")}), nil,
			ErrFrameTooLarge, "too big"},
		{"error frame: auth", reply(frame{kind: kindError, world: 2, payload: encodeError(ErrAuth, "rank 2 refused the result")}), nil,
			ErrAuth, "rank 2 refused the result: authentication failed"},
		{"error frame: other", reply(frame{kind: kindError, world: 2, payload: encodeError(nil, "out of cheese")}), nil,
			nil, "out of cheese"},
		// The code decides, not the text.
		{"error frame: sentinel text without its code", reply(frame{kind: kindError, world: 2, payload: encodeError(nil, "bad rank")}), nil,
			nil, "bad rank"},
		{"error frame: unknown code", reply(frame{kind: kindError, world: 2, payload: append([]byte{200}, "from the future"...)}), nil,
			ErrProtocol, "from the future (unknown error code 200)"},
		{"error frame: no code", reply(frame{kind: kindError, world: 2, payload: []byte{}}), nil,
			ErrProtocol, "error frame without an error code"},
		{"error frame: truncated", func(c net.Conn, _ *session, _ []byte) {
			_, _ = c.Write(append(header(kindError, 0, 2, 50), byte(codeRank), 'a', 'b'))
		}, nil, ErrProtocol, "truncated payload: got 3 of 50 bytes"},
		// A version-1 rank 0 put the sentinel's text in the message and
		// had no code; a version-3 peer must not read that as ErrRank.
		{"error frame of version 1", func(c net.Conn, _ *session, _ []byte) {
			msg := "exchange: bad rank: rank 1 is taken"
			_, _ = c.Write(append(headerVersion(1, kindError, 0, 2, uint32(len(msg))), msg...))
		}, nil, ErrProtocol, "unsupported version 1, want 3"},
		{"result of version 2", func(c net.Conn, _ *session, _ []byte) {
			p := encodeBlobs([][]byte{{}, []byte("one")})
			_, _ = c.Write(append(headerVersion(2, kindResult, 0, 2, uint32(len(p))), p...))
		}, nil, ErrProtocol, "unsupported version 2, want 3"},

		// After the acknowledgement: the commit.
		{"no commit", acked(func(net.Conn, *session) {}), nil, ErrProtocol, "acknowledged the result but got no commit from rank 0"},
		{"commit without a valid MAC", acked(func(c net.Conn, s *session) {
			_ = encodeFrame(c, frame{kind: kindCommit, world: 2, payload: make([]byte, macSize)})
		}), nil, ErrAuth, "commit from 127.0.0.1:"},
		{"commit with the ack's MAC", acked(func(c net.Conn, s *session) {
			_ = encodeFrame(c, frame{kind: kindCommit, world: 2, payload: s.mac(labelAck, nil)})
		}), nil, ErrAuth, "without a valid MAC"},
		{"abort instead of commit", acked(func(c net.Conn, s *session) {
			_ = encodeFrame(c, frame{kind: kindError, world: 2, payload: encodeError(nil, "aborted the round: rank 2 did not acknowledge")})
		}), nil, nil, "aborted the round: rank 2 did not acknowledge"},
		{"result instead of commit", acked(func(c net.Conn, s *session) { _, _ = c.Write(resultFrame(s, good)) }), nil,
			ErrProtocol, "want commit"},

		// Before the challenge.
		{"garbage instead of the challenge", nil, raw(func(frame) []byte { return []byte("SSH-2.0-OpenSSH_9.6\r\n") }),
			ErrProtocol, "bad magic"},
		{"challenge without the secret", nil, raw(func(hello frame) []byte {
			s := session{rank: hello.rank, world: hello.world, challenge: newNonce()}
			copy(s.nonce[:], hello.payload)
			b, _ := appendFrame(nil, frame{kind: kindChallenge, world: 2, payload: s.challenge[:]}, s.mac(labelProof, nil)...)
			return b
		}), ErrAuth, "answered without the group's secret"},
		{"challenge replaying another nonce", nil, raw(func(hello frame) []byte {
			s := session{key: testSecret, rank: hello.rank, world: hello.world, challenge: newNonce()} // nonce not the peer's
			b, _ := appendFrame(nil, frame{kind: kindChallenge, world: 2, payload: s.challenge[:]}, s.mac(labelProof, nil)...)
			return b
		}), ErrAuth, "answered without the group's secret"},
		{"short challenge", nil, raw(func(frame) []byte {
			b, _ := appendFrame(nil, frame{kind: kindChallenge, world: 2, payload: make([]byte, nonceSize)})
			return b
		}), ErrProtocol, "challenge from 127.0.0.1:"},
		{"result instead of the challenge", nil, raw(func(frame) []byte {
			b, _ := appendFrame(nil, good)
			return b
		}), ErrProtocol, "want challenge"},
		{"error frame instead of the challenge", nil, raw(func(frame) []byte {
			b, _ := appendFrame(nil, frame{kind: kindError, world: 2, payload: encodeError(ErrProtocol, "rank 0 speaks exchange protocol version 9")})
			return b
		}), ErrProtocol, "rank 0 speaks exchange protocol version 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkLeaks(t)
			var addr string
			if tc.raw != nil {
				addr = rawFakeRoot(t, tc.raw)
			} else {
				addr = fakeRoot(t, tc.behave)
			}
			x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			start := time.Now()
			_, err := x1.AllGather(ctx, []byte("one"))
			require.Error(t, err)
			assert.Less(t, time.Since(start), 3*time.Second)
			if tc.want != nil {
				require.ErrorIs(t, err, tc.want)
			}
			for _, s := range []error{ErrProtocol, ErrRank, ErrWorldSize, ErrFrameTooLarge, ErrAuth, ErrClosed} {
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

// TestPeerRefusesBadResult: a peer that refuses the result tells rank 0
// why, with the sentinel's code, instead of acknowledging it.
func TestPeerRefusesBadResult(t *testing.T) {
	checkLeaks(t)
	got := make(chan frame, 1)
	addr := fakeRoot(t, func(c net.Conn, s *session, _ []byte) {
		_, _ = c.Write(resultFrame(s, frame{kind: kindResult, world: 2, payload: encodeBlobs([][]byte{{}, []byte("two")})}))
		if f, err := decodeFrame(c, controlLimit); err == nil {
			got <- f
		}
	})
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
	_, err := x1.AllGather(context.Background(), []byte("one"))
	require.ErrorIs(t, err, ErrProtocol)
	f := <-got
	assert.Equal(t, kindError, f.kind)
	assert.Equal(t, uint32(1), f.rank)
	e := decodeError(f.payload)
	assert.ErrorIs(t, e, ErrProtocol)
	assert.Equal(t, "rank 1: holds a 3-byte blob for this rank, but 3 bytes were sent (or contents differ): protocol error", e.Error())
}

// TestPeerHelloOnTheWire checks what a peer sends, frame by frame.
func TestPeerHelloOnTheWire(t *testing.T) {
	checkLeaks(t)
	type seen struct {
		hello frame
		blob  []byte
		sess  *session
		ack   bool
	}
	seenCh := make(chan seen, 1)
	want := [][]byte{[]byte("a"), {}, []byte("blob")}
	addr := rawFakeRoot(t, func(c net.Conn, hello frame) {
		s, blob, err := rootHandshake(c, hello, testSecret)
		if err != nil {
			return
		}
		_, _ = c.Write(resultFrame(s, frame{kind: kindResult, world: 3, payload: encodeBlobs(want)}))
		f, err := decodeFrame(c, controlLimit)
		ack := err == nil && f.kind == kindAck && f.rank == 2 && f.world == 3 && s.verify(labelAck, nil, f.payload)
		seenCh <- seen{hello, blob, s, ack}
		_ = encodeFrame(c, frame{kind: kindCommit, world: 3}, s.mac(labelCommit, nil)...)
	})
	x := newX(t, TCPConfig{Addr: addr, Rank: 2, WorldSize: 3, Secret: testSecret})
	res, err := x.AllGather(context.Background(), []byte("blob"))
	require.NoError(t, err)
	requireBlobs(t, want, res)
	got := <-seenCh
	assert.Equal(t, kindHello, got.hello.kind)
	assert.Equal(t, uint32(2), got.hello.rank)
	assert.Equal(t, uint32(3), got.hello.world)
	assert.Len(t, got.hello.payload, nonceSize)
	assert.Equal(t, "blob", string(got.blob))
	assert.True(t, got.ack, "the peer acknowledges the result with a valid MAC")
	assert.NotContains(t, string(got.hello.payload), string(testSecret))
}

// TestPeerDeadlineWaitingForResult: rank 0 takes the blob but never answers.
func TestPeerDeadlineWaitingForResult(t *testing.T) {
	checkLeaks(t)
	addr := fakeRoot(t, func(c net.Conn, _ *session, _ []byte) { _, _ = io.Copy(io.Discard, c) })
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
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
	addr := fakeRoot(t, func(c net.Conn, _ *session, _ []byte) { _, _ = io.Copy(io.Discard, c) })
	x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
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
		x1 := newX(t, TCPConfig{Addr: deadAddr(t), Rank: 1, WorldSize: 2, Secret: testSecret})
		closeSoon(x1)
		_, err := x1.AllGather(context.Background(), []byte("one"))
		require.ErrorIs(t, err, ErrClosed)
		assertExchangeError(t, err, ErrClosed)
	})
	t.Run("peer waiting for result", func(t *testing.T) {
		checkLeaks(t)
		addr := fakeRoot(t, func(c net.Conn, _ *session, _ []byte) { _, _ = io.Copy(io.Discard, c) })
		x1 := newX(t, TCPConfig{Addr: addr, Rank: 1, WorldSize: 2, Secret: testSecret})
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
