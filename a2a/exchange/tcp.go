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
	// MaxWorldSize is the largest world size TCP accepts.
	MaxWorldSize = 1024
	// DefaultMaxPayload is the per-rank blob limit used when
	// TCPConfig.MaxPayload is 0.
	DefaultMaxPayload = 1 << 20
	// DefaultDialInterval is the pause between dial attempts used when
	// TCPConfig.DialInterval is 0.
	DefaultDialInterval = 50 * time.Millisecond
)

const (
	// helloTimeout bounds how long rank 0 waits for an accepted connection
	// to deliver its hello when ctx allows longer (or has no deadline).
	helloTimeout = 30 * time.Second
	// notifyTimeout bounds writing an error frame to a peer.
	notifyTimeout = time.Second
	// maxErrorMessage caps the payload of error frames rank 0 sends.
	maxErrorMessage = 4096
	// minResultLimit is the smallest frame limit a peer uses when reading
	// rank 0's answer, so error frames always fit.
	minResultLimit = 64 << 10
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
	// WorldSize is the number of ranks P, 1..MaxWorldSize.
	WorldSize int
	// MaxPayload is the largest blob a rank may contribute; hello frames
	// over it are rejected. 0 means DefaultMaxPayload.
	MaxPayload int
	// DialInterval is the pause between attempts to reach rank 0.
	// 0 means DefaultDialInterval.
	DialInterval time.Duration
}

// TCP all-gathers blobs over TCP with rank 0 as the hub. Create it with
// NewTCP. AllGather calls on one TCP are serialized; Close may be called
// concurrently with them.
type TCP struct {
	cfg TCPConfig // defaults applied

	round sync.Mutex // serializes AllGather

	mu      sync.Mutex
	ln      *net.TCPListener // rank 0 only, once listening
	early   []net.Conn       // accepted as a round ended: the next round's, read then
	closed  bool
	closeCh chan struct{}
}

// NewTCP validates cfg and returns an exchanger. It performs no I/O.
// A bad WorldSize wraps ErrWorldSize and a bad Rank wraps ErrRank.
func NewTCP(cfg TCPConfig) (*TCP, error) {
	if cfg.WorldSize < 1 || cfg.WorldSize > MaxWorldSize {
		return nil, fmt.Errorf("%w: TCPConfig.WorldSize is %d, want 1..%d", ErrWorldSize, cfg.WorldSize, MaxWorldSize)
	}
	if cfg.Rank < 0 || cfg.Rank >= cfg.WorldSize {
		return nil, fmt.Errorf("%w: TCPConfig.Rank is %d, want 0..%d", ErrRank, cfg.Rank, cfg.WorldSize-1)
	}
	if cfg.Addr == "" {
		return nil, errors.New("exchange: TCPConfig.Addr is empty, want host:port")
	}
	if _, _, err := net.SplitHostPort(cfg.Addr); err != nil {
		return nil, fmt.Errorf("exchange: TCPConfig.Addr %q is not host:port: %w", cfg.Addr, err)
	}
	if cfg.MaxPayload < 0 {
		return nil, fmt.Errorf("exchange: TCPConfig.MaxPayload is %d, want >= 0", cfg.MaxPayload)
	}
	if cfg.MaxPayload == 0 {
		cfg.MaxPayload = DefaultMaxPayload
	}
	if uint64(cfg.WorldSize)*(4+uint64(cfg.MaxPayload)) > math.MaxUint32 {
		return nil, fmt.Errorf("%w: TCPConfig.MaxPayload %d is too large for world size %d: a result frame could exceed %d bytes",
			ErrFrameTooLarge, cfg.MaxPayload, cfg.WorldSize, uint64(math.MaxUint32))
	}
	if cfg.DialInterval < 0 {
		return nil, fmt.Errorf("exchange: TCPConfig.DialInterval is %v, want >= 0", cfg.DialInterval)
	}
	if cfg.DialInterval == 0 {
		cfg.DialInterval = DefaultDialInterval
	}
	return &TCP{cfg: cfg, closeCh: make(chan struct{})}, nil
}

// Listen binds rank 0's listener now, so that a port-0 address can be read
// back with Addr before the peers are started. It is a no-op on other ranks
// and when already listening. The listener stays open across rounds until
// Close.
func (x *TCP) Listen() error {
	if x.cfg.Rank != 0 {
		return nil
	}
	_, err := x.listener()
	return err
}

func (x *TCP) listener() (*net.TCPListener, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, fmt.Errorf("%w: rank 0 cannot listen on %s", ErrClosed, x.cfg.Addr)
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
// (useful with port 0), and the configured address otherwise.
func (x *TCP) Addr() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.ln != nil {
		return x.ln.Addr().String()
	}
	return x.cfg.Addr
}

// Close closes rank 0's listener and makes pending and future AllGather
// calls fail with ErrClosed. It is idempotent.
func (x *TCP) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	close(x.closeCh)
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

func (x *TCP) isClosed() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.closed
}

// AllGather contributes local and returns the WorldSize blobs of this round,
// indexed by rank, identical on every rank. The returned slices are fresh
// non-nil copies. Calls form consecutive rounds. Errors wrap the matching
// sentinel, or ctx.Err() when ctx ends first.
func (x *TCP) AllGather(ctx context.Context, local []byte) ([][]byte, error) {
	x.round.Lock()
	defer x.round.Unlock()
	r := x.cfg.Rank
	if x.isClosed() {
		return nil, fmt.Errorf("%w: rank %d: AllGather after Close", ErrClosed, r)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("exchange: rank %d: AllGather not started: %w", r, err)
	}
	if len(local) > x.cfg.MaxPayload {
		return nil, fmt.Errorf("%w: rank %d: local blob is %d bytes, MaxPayload is %d",
			ErrFrameTooLarge, r, len(local), x.cfg.MaxPayload)
	}
	if x.cfg.WorldSize == 1 {
		return [][]byte{clone(local)}, nil
	}
	if r == 0 {
		return x.gatherRoot(ctx, local)
	}
	return x.gatherPeer(ctx, local)
}

// clone returns a non-nil copy of b.
func clone(b []byte) []byte {
	return append(make([]byte, 0, len(b)), b...)
}

// watch runs fn once if ctx ends or closed is closed before the returned
// stop function is called; stop waits for the watcher goroutine to exit.
func watch(ctx context.Context, closed <-chan struct{}, fn func()) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		select {
		case <-ctx.Done():
			fn()
		case <-closed:
			fn()
		case <-done:
		}
	}()
	return func() {
		close(done)
		<-exited
	}
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

// helloEvent is what rank 0's per-connection readers (and the accept loop,
// for transient accept errors, with a nil conn) report to the round.
type helloEvent struct {
	conn  net.Conn
	frame Frame
	err   error
}

// gatherRoot runs one round on rank 0.
func (x *TCP) gatherRoot(ctx context.Context, local []byte) ([][]byte, error) {
	ln, err := x.listener()
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	P := x.cfg.WorldSize

	events := make(chan helloEvent)
	acceptErr := make(chan error, 1)
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex // guards stopped and conns
		stopped bool
		conns   = make(map[net.Conn]struct{})
	)
	helloDeadline := func() time.Time {
		d := time.Now().Add(helloTimeout)
		if dl, ok := ctx.Deadline(); ok && dl.Before(d) {
			d = dl
		}
		return d
	}
	reader := func(c net.Conn) {
		defer wg.Done()
		_ = c.SetReadDeadline(helloDeadline())
		f, err := DecodeFrame(c, x.cfg.MaxPayload)
		if err == nil && f.Kind != KindHello {
			err = fmt.Errorf("%w: got frame kind %d from rank %d, want hello (kind %d)", ErrProtocol, f.Kind, f.Rank, KindHello)
		}
		select {
		case events <- helloEvent{conn: c, frame: f, err: err}:
		case <-stop:
		}
	}
	wg.Add(1)
	go func() { // accept loop
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				select {
				case <-stop:
					return
				default:
				}
				if errors.Is(err, net.ErrClosed) {
					acceptErr <- err
					return
				}
				// Transient (e.g. out of file descriptors): report and retry.
				select {
				case events <- helloEvent{err: fmt.Errorf("exchange: rank 0: accept on %s: %w", addr, err)}:
				case <-stop:
					return
				}
				select {
				case <-time.After(10 * time.Millisecond):
				case <-stop:
					return
				}
				continue
			}
			mu.Lock()
			if stopped {
				mu.Unlock()
				// A peer already in the next round: keep its connection
				// for that round rather than drop its hello.
				x.keepEarly(c)
				return
			}
			conns[c] = struct{}{}
			wg.Add(1)
			mu.Unlock()
			go reader(c)
		}
	}()
	// Connections accepted while the last round was ending.
	for _, c := range x.takeEarly() {
		mu.Lock()
		conns[c] = struct{}{}
		wg.Add(1)
		mu.Unlock()
		go reader(c)
	}

	stopAccepting := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		stopped = true
		close(stop)
		_ = ln.SetDeadline(aLongTimeAgo) // unblock Accept
	}
	defer func() {
		stopAccepting()
		mu.Lock()
		for c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
		// Let the next round accept again (connections that arrived
		// meanwhile wait in the backlog). Harmless if Close ran.
		_ = ln.SetDeadline(time.Time{})
	}()
	drop := func(c net.Conn) {
		mu.Lock()
		delete(conns, c)
		mu.Unlock()
		_ = c.Close()
	}

	blobs := make([][]byte, P)
	blobs[0] = clone(local)
	byRank := make([]net.Conn, P)
	have := 1
	var lastErr error

	missing := func() string {
		var rs []int
		for r := 1; r < P; r++ {
			if byRank[r] == nil {
				rs = append(rs, r)
			}
		}
		return formatRanks(rs)
	}
	// notify tells the registered peers (and extra, if any) why the round
	// failed.
	notify := func(msg string, extra net.Conn) {
		stopAccepting()
		if len(msg) > maxErrorMessage {
			msg = msg[:maxErrorMessage]
		}
		f := Frame{Kind: KindError, Rank: 0, World: uint32(P), Payload: []byte(strings.ToValidUTF8(msg, "?"))}
		send := func(c net.Conn) {
			_ = c.SetWriteDeadline(time.Now().Add(notifyTimeout))
			_ = EncodeFrame(c, f)
		}
		for _, c := range byRank {
			if c != nil {
				send(c)
			}
		}
		if extra != nil {
			send(extra)
		}
	}

	for have < P {
		select {
		case <-ctx.Done():
			cerr := ctx.Err()
			notify(fmt.Sprintf("rank 0 at %s abandoned the round: %v while waiting for ranks %s", addr, cerr, missing()), nil)
			last := ""
			if lastErr != nil {
				last = "; last dropped connection: " + lastErr.Error()
			}
			return nil, fmt.Errorf("exchange: rank 0 at %s: missing ranks %s (%d of %d present)%s: %w",
				addr, missing(), have, P, last, cerr)
		case <-x.closeCh:
			notify(fmt.Sprintf("rank 0 at %s abandoned the round: exchanger closed", addr), nil)
			return nil, fmt.Errorf("%w: rank 0 at %s: closed while waiting for ranks %s", ErrClosed, addr, missing())
		case err := <-acceptErr:
			notify(fmt.Sprintf("rank 0 at %s abandoned the round: listener failed", addr), nil)
			if x.isClosed() {
				return nil, fmt.Errorf("%w: rank 0 at %s: closed while waiting for ranks %s", ErrClosed, addr, missing())
			}
			return nil, fmt.Errorf("exchange: rank 0: accept on %s: %w", addr, err)
		case ev := <-events:
			if ev.conn == nil {
				lastErr = ev.err
				continue
			}
			remote := ev.conn.RemoteAddr().String()
			if ev.err != nil {
				lastErr = fmt.Errorf("connection from %s: %w", remote, ev.err)
				drop(ev.conn)
				continue
			}
			f := ev.frame
			if f.World != uint32(P) {
				err := fmt.Errorf("%w: peer %s (rank %d) reports world size %d, rank 0 at %s has %d",
					ErrWorldSize, remote, f.Rank, f.World, addr, P)
				notify(err.Error(), ev.conn)
				return nil, err
			}
			if f.Rank == 0 || f.Rank >= uint32(P) {
				err := fmt.Errorf("%w: peer %s reports rank %d, want 1..%d (rank 0 at %s)",
					ErrRank, remote, f.Rank, P-1, addr)
				notify(err.Error(), ev.conn)
				return nil, err
			}
			if prev := byRank[f.Rank]; prev != nil {
				err := fmt.Errorf("%w: peer %s reports rank %d, already claimed by %s (rank 0 at %s)",
					ErrRank, remote, f.Rank, prev.RemoteAddr(), addr)
				notify(err.Error(), ev.conn)
				return nil, err
			}
			byRank[f.Rank] = ev.conn
			blobs[f.Rank] = f.Payload // fresh and non-nil from DecodeFrame
			have++
		}
	}

	// Stop accepting before answering: once a peer has its result it may
	// start the next round, and its new hello must wait for that round.
	stopAccepting()
	res := Frame{Kind: KindResult, Rank: 0, World: uint32(P), Payload: EncodeBlobs(blobs)}
	var sendErr error
	for r := 1; r < P; r++ {
		c := byRank[r]
		if dl, ok := ctx.Deadline(); ok {
			_ = c.SetWriteDeadline(dl)
		} else {
			_ = c.SetWriteDeadline(time.Now().Add(helloTimeout))
		}
		if err := EncodeFrame(c, res); err != nil && sendErr == nil {
			if cerr := ctxCause(ctx, err); cerr != nil {
				err = fmt.Errorf("%w (%w)", cerr, err)
			}
			sendErr = fmt.Errorf("exchange: rank 0 at %s: send result to rank %d at %s: %w", addr, r, c.RemoteAddr(), err)
		}
	}
	if sendErr != nil {
		return nil, sendErr
	}
	return blobs, nil
}

// dial connects to rank 0, retrying every DialInterval until ctx ends or
// the exchanger is closed.
func (x *TCP) dial(ctx context.Context) (net.Conn, error) {
	addr, r := x.cfg.Addr, x.cfg.Rank
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopWatch := watch(ctx, x.closeCh, cancel)
	defer stopWatch()
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		c, err := d.DialContext(dctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if x.isClosed() {
			return nil, fmt.Errorf("%w: rank %d: closed while dialing rank 0 at %s", ErrClosed, r, addr)
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("exchange: rank %d: cannot reach rank 0 at %s after %d attempts (last error: %v): %w",
				r, addr, attempt, err, cerr)
		}
		t := time.NewTimer(x.cfg.DialInterval)
		select {
		case <-t.C:
		case <-dctx.Done():
			t.Stop()
			if x.isClosed() {
				return nil, fmt.Errorf("%w: rank %d: closed while dialing rank 0 at %s", ErrClosed, r, addr)
			}
			return nil, fmt.Errorf("exchange: rank %d: cannot reach rank 0 at %s after %d attempts (last error: %v): %w",
				r, addr, attempt, err, ctx.Err())
		}
	}
}

// gatherPeer runs one round on rank r > 0.
func (x *TCP) gatherPeer(ctx context.Context, local []byte) ([][]byte, error) {
	addr, r, P := x.cfg.Addr, x.cfg.Rank, x.cfg.WorldSize
	conn, err := x.dial(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stopWatch := watch(ctx, x.closeCh, func() { _ = conn.SetDeadline(aLongTimeAgo) })
	defer stopWatch()

	ioErr := func(what string, err error) error {
		if x.isClosed() {
			return fmt.Errorf("%w: rank %d: closed while %s rank 0 at %s", ErrClosed, r, what, addr)
		}
		if cerr := ctxCause(ctx, err); cerr != nil {
			return fmt.Errorf("exchange: rank %d: %s rank 0 at %s: %w", r, what, addr, cerr)
		}
		return fmt.Errorf("exchange: rank %d: %s rank 0 at %s: %w", r, what, addr, err)
	}
	hello := Frame{Kind: KindHello, Rank: uint32(r), World: uint32(P), Payload: local}
	if err := EncodeFrame(conn, hello); err != nil {
		return nil, ioErr("sending hello to", err)
	}
	limit := max(P*(4+x.cfg.MaxPayload), minResultLimit)
	f, err := DecodeFrame(conn, limit)
	if err != nil {
		return nil, ioErr("waiting for the result from", err)
	}
	switch f.Kind {
	case KindResult:
	case KindError:
		return nil, fmt.Errorf("exchange: rank %d: rank 0 at %s failed the round: %w", r, addr, newRemoteError(f.Payload))
	default:
		return nil, fmt.Errorf("%w: rank %d: rank 0 at %s sent frame kind %d, want result (kind %d)",
			ErrProtocol, r, addr, f.Kind, KindResult)
	}
	if f.World != uint32(P) {
		return nil, fmt.Errorf("%w: rank %d: rank 0 at %s reports world size %d, want %d", ErrWorldSize, r, addr, f.World, P)
	}
	if f.Rank != 0 {
		return nil, fmt.Errorf("%w: rank %d: result from %s claims to come from rank %d, want 0", ErrProtocol, r, addr, f.Rank)
	}
	blobs, err := DecodeBlobs(f.Payload, P)
	if err != nil {
		return nil, fmt.Errorf("exchange: rank %d: result from rank 0 at %s: %w", r, addr, err)
	}
	if !bytes.Equal(blobs[r], local) {
		return nil, fmt.Errorf("%w: rank %d: result from rank 0 at %s holds a %d-byte blob for this rank, but %d bytes were sent (or contents differ)",
			ErrProtocol, r, addr, len(blobs[r]), len(local))
	}
	return blobs, nil
}

// remoteError is the message of an error frame from rank 0, unwrapping to
// the sentinel it names (if any).
type remoteError struct {
	msg      string
	sentinel error
}

func newRemoteError(payload []byte) *remoteError {
	msg := strings.ToValidUTF8(string(payload), "?")
	e := &remoteError{msg: msg}
	for _, s := range []error{ErrWorldSize, ErrRank, ErrFrameTooLarge, ErrProtocol} {
		if strings.Contains(msg, s.Error()) {
			e.sentinel = s
			break
		}
	}
	return e
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.sentinel }
