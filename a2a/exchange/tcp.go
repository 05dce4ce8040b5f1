package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Limits and defaults of TCPConfig.
const (
	// MaxTCPRanks is the largest group TCP can exchange for (any Exchanger
	// user, not only a2a, whose groups have at most a2a.MaxWorldSize ranks).
	MaxTCPRanks = 1024
	// DefaultMaxPayload is the per-rank blob limit used when
	// TCPConfig.MaxPayload is 0.
	DefaultMaxPayload = 1 << 20
	// DefaultDialInterval is the pause between dial attempts used when
	// TCPConfig.DialInterval is 0.
	DefaultDialInterval = 50 * time.Millisecond
	// DefaultHelloTimeout is TCPConfig.HelloTimeout when that is 0.
	DefaultHelloTimeout = 10 * time.Second
	// DefaultAuthTimeout is TCPConfig.AuthTimeout when that is 0 (or
	// HelloTimeout, if that is shorter).
	DefaultAuthTimeout = time.Second
	// MinSecretSize is the shortest TCPConfig.Secret NewTCP accepts.
	MinSecretSize = 16
)

const (
	// notifyTimeout bounds writing an error frame.
	notifyTimeout = time.Second
	// turnAwayTimeout bounds writing the error frame that tells a
	// connection rank 0 evicts to dial again, in the accept loop (the
	// frame fits the socket's buffer: the write does not wait).
	turnAwayTimeout = 100 * time.Millisecond
	// controlLimit is the frame limit for reading frames other than blobs
	// and results (challenges, acknowledgements, commits), so that any
	// error frame fits.
	controlLimit = 1 + maxErrorMessage
)

// aLongTimeAgo is a deadline in the past, used to unblock pending I/O.
var aLongTimeAgo = time.Unix(1, 0)

// TCPConfig configures a TCP exchanger.
type TCPConfig struct {
	// Addr is the host:port where rank 0 listens and the other ranks dial,
	// e.g. "127.0.0.1:29600". Rank 0 may use port 0 and publish Addr()
	// after Listen.
	Addr string
	// Rank is this process's rank, 0 <= Rank < WorldSize.
	Rank int
	// WorldSize is the number of ranks P, 1..MaxTCPRanks.
	WorldSize int
	// MaxPayload is the largest blob a rank may contribute; blobs over it
	// are rejected. 0 means DefaultMaxPayload.
	MaxPayload int
	// DialInterval is the pause between attempts to reach rank 0, and the
	// first pause before a peer dials again after rank 0 turned its
	// connection away (see MaxConns); each further one doubles, up to 8
	// times DialInterval, and each pause is drawn at random from its upper
	// half so that turned-away peers do not return in step. 0 means
	// DefaultDialInterval.
	DialInterval time.Duration

	// Secret is the group's shared key, at least MinSecretSize bytes
	// (e.g. 32 random bytes from crypto/rand, as internal/launch makes);
	// every rank needs the same, and NewTCP refuses a config without one
	// (ErrNoSecret). A connection joins a round only after proving it
	// (HMAC-SHA256 over fresh nonces from both ends), rank 0 proves it to
	// each peer before the peer sends its blob, and the result and the
	// commit are MACed: a process without the secret can neither join nor
	// disturb a round nor learn a blob (unless it can read the traffic:
	// nothing is encrypted). The secret never crosses the wire. A round
	// costs six HMAC-SHA256 computations per peer on each side
	// (microseconds, plus one pass over each blob and result).
	Secret []byte
	// MaxConns caps the connections rank 0 holds open at once during a
	// round, its peers' included. When a new one would exceed it, rank 0
	// closes one that has not proved the secret and has had its grace
	// (10 ms of rank 0 waiting for its hello, or a quarter of AuthTimeout
	// waiting for its proof after the challenge), never one that has
	// proved it; until one has, the newcomer waits, and so do those after
	// it in the listener's backlog (see doc.go). The peer whose connection
	// it closed dials again (see DialInterval). Each costs rank 0 a file
	// descriptor and a goroutine;
	// one that has not yet proven the secret also costs at most 104 bytes
	// of buffered frames (see doc.go), so these total at most
	// MaxConns*104 bytes. At least WorldSize; 0 means 4*WorldSize+16.
	MaxConns int
	// HelloTimeout bounds, on rank 0, the time from accepting a
	// connection to having its blob (its hello, its proof of the secret
	// and its blob frame), and the wait for each acknowledgement of the
	// result; the context's deadline bounds both too. 0 means
	// DefaultHelloTimeout.
	HelloTimeout time.Duration
	// AuthTimeout bounds, on rank 0, the time from accepting a connection
	// to its proof of the secret (its hello and its proof): one that has
	// not proved it by then is closed. A peer needs one and a half round
	// trips for it; while strangers fill MaxConns, it has a quarter of
	// AuthTimeout from rank 0's challenge to its proof, and a round trip
	// longer than that keeps it out until they stop (see MaxConns). 0
	// means DefaultAuthTimeout, or HelloTimeout if that is shorter; at
	// most HelloTimeout.
	AuthTimeout time.Duration
}

// TCP all-gathers blobs over TCP with rank 0 as the hub. Create it with
// NewTCP. AllGather calls on one TCP are serialized; Close may be called
// concurrently with them. On rank 0 it holds a listening socket from Listen
// (or the first AllGather) until Close.
type TCP struct {
	cfg TCPConfig // defaults applied

	round sync.Mutex // serializes AllGather

	mu     sync.Mutex
	ln     *net.TCPListener // rank 0 only, once listening
	early  []net.Conn       // accepted as a round ended: the next round's, read then
	closed bool
	stats  roundStats // of the last round that ended
	// closing ends when Close is called (after closed is set), for
	// selects and context.AfterFunc; markClosed ends it.
	closing    context.Context
	markClosed context.CancelFunc

	// hooks lets tests inject faults; nil outside tests.
	hooks *testHooks
}

// roundStats are counts of one round on rank 0 (on a peer, turnedAway
// only), for tests.
type roundStats struct {
	peakConns int // the most connections held open at once
	waited    int // connections that found MaxConns open and none due for eviction, and waited
	evicted   int // connections closed, before they proved the secret, to make room for a newer one
	admitted  int // connections the round held open

	turnedAway int // a peer's connections that rank 0 turned away before taking its blob
}

// testHooks are called at points where tests inject faults.
type testHooks struct {
	// beforeResult runs on rank 0 before the result is sent to rank r on c.
	beforeResult func(r int, c net.Conn)
}

// NewTCP validates cfg and returns an exchanger. It performs no I/O.
// A bad WorldSize wraps ErrWorldSize, a bad Rank ErrRank, and a missing or
// short Secret ErrNoSecret.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	if err := checkGroup(cfg); err != nil {
		return nil, err
	}
	cfg.Secret = bytes.Clone(cfg.Secret)
	if err := applyLimits(&cfg); err != nil {
		return nil, err
	}
	if err := applyTimeouts(&cfg); err != nil {
		return nil, err
	}
	closing, markClosed := context.WithCancel(context.Background())
	return &TCP{cfg: cfg, closing: closing, markClosed: markClosed}, nil
}

// checkGroup checks who cfg says this rank is and how it finds the group:
// its world size, rank, address and secret.
func checkGroup(cfg TCPConfig) error {
	if cfg.WorldSize < 1 || cfg.WorldSize > MaxTCPRanks {
		return fmt.Errorf("exchange: TCPConfig.WorldSize is %d, want 1..%d: %w", cfg.WorldSize, MaxTCPRanks, ErrWorldSize)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return fmt.Errorf("exchange: TCPConfig.Rank is %d, want 0..%d: %w", cfg.Rank, cfg.WorldSize-1, ErrRank)
	}
	if cfg.Addr == "" {
		return errors.New("exchange: TCPConfig.Addr is empty, want host:port")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return fmt.Errorf("exchange: TCPConfig.Addr %q is not host:port: %w", cfg.Addr, err)
	}
	switch n := len(cfg.Secret); {
	case n == 0:
		return fmt.Errorf("exchange: TCPConfig.Secret is empty: every rank needs the group's secret "+
			"(at least %d bytes, e.g. 32 random bytes, the same on every rank), or anyone who reaches the address could join: %w",
			MinSecretSize, ErrNoSecret)
	case n < MinSecretSize:
		return fmt.Errorf("exchange: TCPConfig.Secret is %d bytes, want at least %d: %w", n, MinSecretSize, ErrNoSecret)
	}
	return nil
}

// applyLimits checks cfg's size and count limits and fills in their
// defaults.
func applyLimits(cfg *TCPConfig) error {
	if cfg.MaxPayload < 0 {
		return fmt.Errorf("exchange: TCPConfig.MaxPayload is %d, want >= 0", cfg.MaxPayload)
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if uint64(cfg.WorldSize)*(4+uint64(cfg.MaxPayload))+macSize > math.MaxUint32 {
		return fmt.Errorf("exchange: TCPConfig.MaxPayload %d is too large for world size %d: a result frame could exceed %d bytes: %w",
			cfg.MaxPayload, cfg.WorldSize, uint64(math.MaxUint32), ErrFrameTooLarge)
	}
	if cfg.MaxConns < 0 || (cfg.MaxConns > 0 && cfg.MaxConns < cfg.WorldSize) {
		return fmt.Errorf("exchange: TCPConfig.MaxConns is %d, want 0 (default) or at least the world size %d", cfg.MaxConns, cfg.WorldSize)
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 4*cfg.WorldSize + 16
	}
	return nil
}

// applyTimeouts checks cfg's durations and fills in their defaults.
func applyTimeouts(cfg *TCPConfig) error {
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"DialInterval", cfg.DialInterval}, {"HelloTimeout", cfg.HelloTimeout}, {"AuthTimeout", cfg.AuthTimeout}} {
		if d.v < 0 {
			return fmt.Errorf("exchange: TCPConfig.%s is %v, want >= 0", d.name, d.v)
		}
	}
	if cfg.DialInterval == 0 {
		cfg.DialInterval = DefaultDialInterval
	}
	if cfg.HelloTimeout == 0 {
		cfg.HelloTimeout = DefaultHelloTimeout
	}
	if cfg.AuthTimeout > cfg.HelloTimeout {
		return fmt.Errorf("exchange: TCPConfig.AuthTimeout is %v, over HelloTimeout %v (the proof of the secret comes before the blob)",
			cfg.AuthTimeout, cfg.HelloTimeout)
	}
	if cfg.AuthTimeout == 0 {
		cfg.AuthTimeout = min(DefaultAuthTimeout, cfg.HelloTimeout)
	}
	return nil
}

// Listen binds rank 0's listener now, so that a port-0 address can be read
// back with Addr before the peers are started. It is a no-op on other ranks
// and when already listening. The listener (one socket) stays open across
// rounds until Close.
func (x *TCP) Listen() error {
	if !x.made() {
		return unmadeTCP("Listen")
	}
	if x.cfg.Rank != 0 {
		return nil
	}
	_, err := x.listener()
	return err
}

// listener returns rank 0's listener, opening it on first use.
func (x *TCP) listener() (*net.TCPListener, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, fmt.Errorf("exchange: rank 0: listen on %s: %w", x.cfg.Addr, ErrClosed)
	}
	if x.ln != nil {
		return x.ln, nil
	}
	l, err := net.Listen("tcp", x.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("exchange: rank 0: listen on %s: %w", x.cfg.Addr, err)
	}
	tl, ok := l.(*net.TCPListener)
	if !ok { // cannot happen for "tcp"
		_ = l.Close()
		return nil, fmt.Errorf("exchange: rank 0: listen on %s: unexpected listener type %T", x.cfg.Addr, l)
	}
	x.ln = tl
	return tl, nil
}

// Addr returns the address rank 0 actually listens on once it is listening
// (useful with port 0), and the configured address otherwise. It does no
// I/O. It is "" for a TCP that NewTCP did not make.
func (x *TCP) Addr() string {
	if !x.made() {
		return ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ln != nil {
		return x.ln.Addr().String()
	}
	return x.cfg.Addr
}

// Close closes rank 0's listener and any connections kept for the next
// round, and makes pending and future AllGather calls fail with ErrClosed
// (on rank 0, a pending round first sends its connected peers an error
// frame). It does not wait for them, and it is idempotent. On a TCP that
// NewTCP did not make (the nil a failed NewTCP returns, or the zero TCP)
// it has nothing to close: nil.
func (x *TCP) Close() error {
	if !x.made() {
		return nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	x.markClosed()
	for _, c := range x.early {
		_ = c.Close()
	}
	x.early = nil
	if x.ln != nil {
		if err := x.ln.Close(); err != nil {
			return fmt.Errorf("exchange: rank 0: close listener on %s: %w", x.ln.Addr(), err)
		}
	}
	return nil
}

// keepEarly stores a connection accepted after a round stopped accepting,
// or closes it if the exchanger is closed.
func (x *TCP) keepEarly(c net.Conn) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		_ = c.Close()
		return
	}
	x.early = append(x.early, c)
}

// takeEarly hands the stored connections to the round that starts.
func (x *TCP) takeEarly() []net.Conn {
	x.mu.Lock()
	defer x.mu.Unlock()
	cs := x.early
	x.early = nil
	return cs
}

// made reports whether NewTCP made x. On a TCP it did not make (nil, or
// the zero TCP), AllGather and Listen return an error matching ErrClosed
// (unmadeTCP), Close returns nil and Addr "".
func (x *TCP) made() bool { return x != nil && x.closing != nil }

// unmadeTCP is what a method returns on a TCP that NewTCP did not make.
func unmadeTCP(method string) error {
	return fmt.Errorf("exchange: %s on a TCP that NewTCP did not make (nil, or the zero TCP): %w", method, ErrClosed)
}

// isClosed reports whether Close has been called.
func (x *TCP) isClosed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closed
}

// clone returns a non-nil copy of b.
func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}

// ctxCause reports whether an I/O error err was caused by ctx ending (its
// deadline is also used as the I/O deadline, and the I/O timer may fire a
// moment before ctx's own) and returns ctx's error if so.
func ctxCause(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	if dl, ok := ctx.Deadline(); ok && errors.Is(err, os.ErrDeadlineExceeded) && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// formatRanks renders sorted ranks compactly, e.g. "[1 3-5 9]".
func formatRanks(rs []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(rs[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(rs[j]))
		}
		i = j + 1
	}
	b.WriteByte(']')
	return b.String()
}
