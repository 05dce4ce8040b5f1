package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// gatherRoot runs one round on rank 0.
func (x *TCP) gatherRoot(ctx context.Context, local []byte) ([][]byte, error) {
	ln, err := x.listener()
	if err != nil {
		return nil, err
	}
	rr := newRootRound(ctx, x, ln, local)
	defer rr.end()
	rr.start()
	if err := rr.collect(); err != nil {
		return nil, err
	}
	if err := rr.answer(); err != nil {
		return nil, err
	}
	return rr.blobs, nil
}

// rootRound is one round on rank 0. An accept loop and one reader per
// connection report helloEvents; collect, on the caller's goroutine, turns
// them into blobs until every rank is in, and answer sends the result.
// Connections that send garbage are dropped without failing the round.
type rootRound struct {
	x     *TCP
	ctx   context.Context
	ln    *net.TCPListener
	addr  string // ln's address, for messages
	world int

	events    chan helloEvent // from the readers and the accept loop
	acceptErr chan error      // the accept loop's fatal error (at most one)
	stop      chan struct{}   // closed when the round stops accepting
	wg        sync.WaitGroup  // the accept loop and the readers

	mu      sync.Mutex // guards stopped and conns
	stopped bool
	conns   map[net.Conn]struct{} // adopted and not yet dropped

	// Used by collect and answer only.
	blobs   [][]byte   // by rank; rank 0's is its own
	byRank  []net.Conn // the connection each peer's hello came on
	have    int        // ranks whose blob is in, rank 0 included
	lastErr error      // why the last connection was dropped, if any
}

// helloEvent is what the readers (and the accept loop, for transient
// accept errors, with a nil conn) report to collect.
type helloEvent struct {
	conn  net.Conn
	hello frame // valid if err is nil
	err   error
}

// newRootRound prepares a round that contributes local; start runs it.
func newRootRound(ctx context.Context, x *TCP, ln *net.TCPListener, local []byte) *rootRound {
	world := x.cfg.WorldSize
	rr := &rootRound{
		x:         x,
		ctx:       ctx,
		ln:        ln,
		addr:      ln.Addr().String(),
		world:     world,
		events:    make(chan helloEvent),
		acceptErr: make(chan error, 1),
		stop:      make(chan struct{}),
		conns:     make(map[net.Conn]struct{}),
		blobs:     make([][]byte, world),
		byRank:    make([]net.Conn, world),
		have:      1,
	}
	rr.blobs[0] = clone(local)
	return rr
}

// start launches the accept loop, and a reader for each connection the
// previous round accepted as it ended.
func (rr *rootRound) start() {
	rr.wg.Add(1)
	go rr.acceptLoop()
	for _, c := range rr.x.takeEarly() {
		rr.adopt(c)
	}
}

// acceptLoop adopts connections until the round stops accepting or the
// listener is closed.
func (rr *rootRound) acceptLoop() {
	defer rr.wg.Done()
	for {
		c, err := rr.ln.Accept()
		if err != nil {
			if rr.acceptFailed(err) {
				continue
			}
			return
		}
		if !rr.adopt(c) {
			return
		}
	}
}

// acceptFailed handles an Accept error and reports whether to accept
// again. After the round stopped accepting it is the expected way out; a
// closed listener is reported on acceptErr; anything else (e.g. out of file
// descriptors) is transient: it is reported to collect, and accept retries
// after a short pause.
func (rr *rootRound) acceptFailed(err error) (retry bool) {
	select {
	case <-rr.stop:
		return false
	default:
	}
	if errors.Is(err, net.ErrClosed) {
		rr.acceptErr <- err
		return false
	}
	if !rr.report(helloEvent{err: fmt.Errorf("accept on %s: %w", rr.addr, err)}) {
		return false
	}
	select {
	case <-time.After(10 * time.Millisecond):
		return true
	case <-rr.stop:
		return false
	}
}

// adopt registers c and starts its reader, and reports true. Once the
// round has stopped accepting, c comes from a peer already in the next
// round: adopt keeps it for that round rather than drop its hello, and
// reports false.
func (rr *rootRound) adopt(c net.Conn) bool {
	rr.mu.Lock()
	if rr.stopped {
		rr.mu.Unlock()
		rr.x.keepEarly(c)
		return false
	}
	rr.conns[c] = struct{}{}
	rr.wg.Add(1)
	rr.mu.Unlock()
	go rr.read(c)
	return true
}

// read reads c's first frame, within helloDeadline, and reports it to
// collect as a hello or as the reason to drop c.
func (rr *rootRound) read(c net.Conn) {
	defer rr.wg.Done()
	_ = c.SetReadDeadline(rr.helloDeadline())
	f, err := decodeFrame(c, rr.x.cfg.MaxPayload)
	if err == nil && f.kind != kindHello {
		err = fmt.Errorf("got frame kind %d from rank %d, want hello (kind %d): %w", f.kind, f.rank, kindHello, ErrProtocol)
	}
	rr.report(helloEvent{conn: c, hello: f, err: err})
}

// helloDeadline is when a connection accepted now must have delivered its
// hello: helloTimeout from now, or ctx's deadline if sooner.
func (rr *rootRound) helloDeadline() time.Time {
	d := time.Now().Add(helloTimeout)
	if dl, ok := rr.ctx.Deadline(); ok && dl.Before(d) {
		d = dl
	}
	return d
}

// report hands ev to collect, and reports false if the round stopped
// accepting first.
func (rr *rootRound) report(ev helloEvent) bool {
	select {
	case rr.events <- ev:
		return true
	case <-rr.stop:
		return false
	}
}

// collect waits until every rank's blob is in. It fails when ctx ends, the
// exchanger is closed, the listener fails, or a hello disagrees with the
// group, and then first tells the peers that sent a hello why.
func (rr *rootRound) collect() error {
	for rr.have < rr.world {
		select {
		case <-rr.ctx.Done():
			return rr.giveUp()
		case <-rr.x.closing.Done():
			rr.notify(nil, "abandoned the round (its exchanger was closed)", nil)
			return rr.closedError()
		case err := <-rr.acceptErr:
			rr.notify(nil, "abandoned the round (listener failed)", nil)
			if rr.x.isClosed() {
				return rr.closedError()
			}
			return fmt.Errorf("exchange: rank 0: accept on %s: %w", rr.addr, err)
		case ev := <-rr.events:
			if err := rr.take(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// giveUp fails the round because ctx ended: it tells the peers, and
// returns an error naming the missing ranks and the last dropped
// connection's fault, wrapping ctx's error.
func (rr *rootRound) giveUp() error {
	cerr := rr.ctx.Err()
	missing := rr.missing()
	rr.notify(nil, fmt.Sprintf("abandoned the round while waiting for ranks %s (%v)", missing, cerr), nil)
	last := ""
	if rr.lastErr != nil {
		last = "; last error: " + rr.lastErr.Error()
	}
	return fmt.Errorf("exchange: rank 0 at %s: missing ranks %s (%d of %d present%s): %w",
		rr.addr, missing, rr.have, rr.world, last, cerr)
}

// closedError is the error of a round ended by Close.
func (rr *rootRound) closedError() error {
	return fmt.Errorf("exchange: rank 0 at %s: waiting for ranks %s: %w", rr.addr, rr.missing(), ErrClosed)
}

// take handles one event: it records a valid hello, drops a connection
// that sent garbage, and fails the round on a well-formed hello that
// disagrees with the group.
func (rr *rootRound) take(ev helloEvent) error {
	if ev.conn == nil { // transient accept error
		rr.lastErr = ev.err
		return nil
	}
	if ev.err != nil {
		rr.lastErr = fmt.Errorf("connection from %s: %w", ev.conn.RemoteAddr(), ev.err)
		rr.drop(ev.conn)
		return nil
	}
	f := ev.hello
	if err := rr.check(ev.conn, f); err != nil {
		return err
	}
	rr.byRank[f.rank] = ev.conn
	rr.blobs[f.rank] = f.payload // fresh and non-nil from decodeFrame
	rr.have++
	return nil
}

// check fails the round if hello f, which came on c, claims another world
// size or a rank that is out of range or already taken.
func (rr *rootRound) check(c net.Conn, f frame) error {
	remote := c.RemoteAddr()
	switch {
	case f.world != uint32(rr.world):
		return rr.reject(c, ErrWorldSize, fmt.Sprintf("peer %s (rank %d) reports world size %d, rank 0 has %d",
			remote, f.rank, f.world, rr.world))
	case f.rank == 0 || f.rank >= uint32(rr.world):
		return rr.reject(c, ErrRank, fmt.Sprintf("peer %s reports rank %d, want 1..%d", remote, f.rank, rr.world-1))
	case rr.byRank[f.rank] != nil:
		return rr.reject(c, ErrRank, fmt.Sprintf("peer %s reports rank %d, already claimed by %s",
			remote, f.rank, rr.byRank[f.rank].RemoteAddr()))
	}
	return nil
}

// reject fails the round because of the hello that came on c: it tells the
// registered peers and c why (msg, with sentinel's code) and returns rank
// 0's error.
func (rr *rootRound) reject(c net.Conn, sentinel error, msg string) error {
	rr.notify(sentinel, msg, c)
	return fmt.Errorf("exchange: rank 0 at %s: %s: %w", rr.addr, msg, sentinel)
}

// notify stops accepting and sends an error frame (sentinel's code and
// msg) to every registered peer and to extra, if not nil. Each write gets
// notifyTimeout; failures are ignored, as the round is failing anyway.
func (rr *rootRound) notify(sentinel error, msg string, extra net.Conn) {
	rr.stopAccepting()
	f := frame{kind: kindError, world: uint32(rr.world), payload: encodeError(sentinel, msg)}
	send := func(c net.Conn) {
		_ = c.SetWriteDeadline(time.Now().Add(notifyTimeout))
		_ = encodeFrame(c, f)
	}
	for _, c := range rr.byRank {
		if c != nil {
			send(c)
		}
	}
	if extra != nil {
		send(extra)
	}
}

// answer sends the result to every peer. Each write may last until ctx's
// deadline, or helloTimeout without one.
func (rr *rootRound) answer() error {
	// Stop accepting first: once a peer has its result it may start the
	// next round, and its new hello must wait for that round.
	rr.stopAccepting()
	res := frame{kind: kindResult, world: uint32(rr.world), payload: encodeBlobs(rr.blobs)}
	var sendErr error
	for r := 1; r < rr.world; r++ {
		c := rr.byRank[r]
		if dl, ok := rr.ctx.Deadline(); ok {
			_ = c.SetWriteDeadline(dl)
		} else {
			_ = c.SetWriteDeadline(time.Now().Add(helloTimeout))
		}
		if err := encodeFrame(c, res); err != nil && sendErr == nil {
			if cerr := ctxCause(rr.ctx, err); cerr != nil {
				err = fmt.Errorf("%w: %w", err, cerr)
			}
			sendErr = fmt.Errorf("exchange: rank 0 at %s: send result to rank %d at %s: %w", rr.addr, r, c.RemoteAddr(), err)
		}
	}
	return sendErr
}

// missing renders the ranks whose hello is not in yet.
func (rr *rootRound) missing() string {
	var rs []int
	for r := 1; r < rr.world; r++ {
		if rr.byRank[r] == nil {
			rs = append(rs, r)
		}
	}
	return formatRanks(rs)
}

// drop forgets c and closes it.
func (rr *rootRound) drop(c net.Conn) {
	rr.mu.Lock()
	delete(rr.conns, c)
	rr.mu.Unlock()
	_ = c.Close()
}

// stopAccepting makes the accept loop (and readers still waiting to
// report) stop, and connections accepted from now on go to the next round.
// It is idempotent.
func (rr *rootRound) stopAccepting() {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.stopped {
		return
	}
	rr.stopped = true
	close(rr.stop)
	_ = rr.ln.SetDeadline(aLongTimeAgo) // unblock Accept
}

// end releases the round: it stops accepting, closes the connections still
// registered, waits for the accept loop and the readers to exit, and lets
// the listener accept again for the next round (connections that arrived
// meanwhile wait in the backlog; harmless if Close ran).
func (rr *rootRound) end() {
	rr.stopAccepting()
	rr.mu.Lock()
	for c := range rr.conns {
		_ = c.Close()
	}
	rr.mu.Unlock()
	rr.wg.Wait()
	_ = rr.ln.SetDeadline(time.Time{})
}
