package exchange

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/ulysses-go/ulysses/internal/admit"
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
	if err := rr.commit(); err != nil {
		return nil, err
	}
	return rr.blobs, nil
}

// rootRound is one round on rank 0. An accept loop admits connections (up
// to MaxConns open at once, evicting one that has not proved the secret
// and has had its grace to make room, or else waiting until one has: see
// admit.Table) and one goroutine per connection (serve) runs its handshake
// up to the blob and reports an event;
// collect, on the caller's goroutine, turns the events into blobs until
// every rank is in, and commit sends the result, collects the
// acknowledgements and commits or aborts. Connections that fail the
// handshake are dropped without failing the round.
type rootRound struct {
	x     *TCP
	ctx   context.Context
	ln    *net.TCPListener
	addr  string // ln's address, for messages
	world int

	events    chan event     // from the serve goroutines and the accept loop
	acceptErr chan error     // the accept loop's fatal error (at most one)
	stop      chan struct{}  // closed when the round stops accepting
	changed   admit.Room     // a connection's grace began or it left the table (the accept loop may wait for it)
	wg        sync.WaitGroup // the accept loop and the other goroutines
	// live holds a token per serve goroutine: at most 2*MaxConns, those of
	// the open connections and of evicted ones still exiting.
	live chan struct{}

	mu      sync.Mutex // guards the fields up to stats
	stopped bool
	conns   *admit.Table // admitted and not yet dropped
	claims  []net.Conn   // by rank: the connection that proved the secret claiming it
	stats   roundStats

	// Used by collect and commit only.
	blobs    [][]byte   // by rank; rank 0's is its own
	byRank   []net.Conn // the connection each peer's blob came on
	sessions []*session // and its session
	have     int        // ranks whose blob is in, rank 0 included
	lastErr  error      // why the last connection was dropped, if any, but for authErr
	authErr  error      // why the last connection that failed to prove the secret was dropped
}

// event is what a serve goroutine (or the accept loop, for transient
// accept errors, with a nil conn) reports to collect: a dropped
// connection (err), a hello that disagrees with the group (reject), or a
// peer's blob.
type event struct {
	conn net.Conn
	err  error // why conn was dropped; or a transient accept error

	reject error  // the sentinel of a disagreeing hello, if not nil
	msg    string // what it disagrees about

	rank int      // the peer's rank, with blob
	blob []byte   // its blob, fresh and non-nil
	sess *session // the connection's session
}

// newRootRound prepares a round that contributes local; start runs it.
func newRootRound(ctx context.Context, x *TCP, ln *net.TCPListener, local []byte) *rootRound {
	world := x.cfg.WorldSize
	helloGrace, proofGrace := graces(x.cfg.AuthTimeout)
	rr := &rootRound{
		x:         x,
		ctx:       ctx,
		ln:        ln,
		addr:      ln.Addr().String(),
		world:     world,
		events:    make(chan event),
		acceptErr: make(chan error, 1),
		stop:      make(chan struct{}),
		changed:   admit.NewRoom(),
		live:      make(chan struct{}, 2*x.cfg.MaxConns),
		conns:     admit.New(x.cfg.MaxConns, helloGrace, proofGrace),
		claims:    make([]net.Conn, world),
		blobs:     make([][]byte, world),
		byRank:    make([]net.Conn, world),
		sessions:  make([]*session, world),
		have:      1,
	}
	rr.blobs[0] = clone(local)
	return rr
}

// start launches a serve goroutine for each connection the previous
// round accepted as it ended, and then the accept loop. In that order:
// admit may wait for serve goroutines to exit (rr.live), and those that
// report wait for collect, which runs on this goroutine once start
// returns.
func (rr *rootRound) start() {
	for _, c := range rr.x.takeEarly() {
		rr.admit(c)
	}
	rr.wg.Add(1)
	go rr.acceptLoop()
}

// acceptLoop admits connections until the round stops accepting or the
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
		if !rr.admit(c) {
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
	if !rr.report(event{err: fmt.Errorf("accept on %s: %w", rr.addr, err)}) {
		return false
	}
	select {
	case <-time.After(10 * time.Millisecond):
		return true
	case <-rr.stop:
		return false
	}
}

// admit registers c and starts its serve goroutine, and reports true. When
// MaxConns connections are open it first evicts one that has not proved
// the secret and has had its grace (admit.Table.Admit), or waits, holding
// c, until one has; meanwhile newer connections wait in the listener's
// backlog, in the order they came. Once the round has stopped accepting,
// c comes from a peer already in the next round: admit keeps it for that
// round rather than drop its hello, and reports false.
func (rr *rootRound) admit(c net.Conn) bool {
	select {
	case rr.live <- struct{}{}: // waits only while evicted goroutines exit
	case <-rr.stop:
		rr.x.keepEarly(c)
		return false
	}
	for retry := false; ; retry = true {
		victim, challenged, next, ok, stopped := rr.register(c, retry)
		switch {
		case ok:
			if victim != nil {
				rr.turnAway(victim, challenged)
			}
			go rr.serve(c)
			return true
		case stopped || !rr.changed.Wait(next, rr.stop):
			<-rr.live
			rr.x.keepEarly(c)
			return false
		}
	}
}

// register adds c to the table and counts it, reporting the connection
// evicted for it (with admit.Table.Admit's challenged), or !ok and when to
// try again if none is due for eviction (counted once per connection:
// retry says it was before), or stopped if the round has stopped
// accepting.
func (rr *rootRound) register(c net.Conn, retry bool) (victim net.Conn, challenged bool, next time.Time, ok, stopped bool) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.stopped {
		return nil, false, time.Time{}, false, true
	}
	victim, challenged, next, ok = rr.conns.Admit(c, time.Now())
	if !ok {
		if !retry {
			rr.stats.waited++
		}
		return nil, false, next, false, false
	}
	if victim != nil {
		rr.stats.evicted++
	}
	rr.stats.admitted++
	rr.stats.peakConns = max(rr.stats.peakConns, rr.conns.Len())
	rr.wg.Add(1)
	return victim, challenged, time.Time{}, true, false
}

// await records that rank 0 now waits on c for w (see admit.Table.Await),
// wakes the accept loop if it waits for room, and reports false if c was
// evicted.
func (rr *rootRound) await(c net.Conn, w admit.Wait) bool {
	rr.mu.Lock()
	open := rr.conns.Await(c, w, time.Now())
	rr.mu.Unlock()
	if w != admit.Nothing {
		rr.changed.Changed()
	}
	return open
}

// turnAway closes c, which has not proved the secret, to make room. If
// rank 0 challenged it, the peer may have sent its proof and blob: it
// first gets an error frame with codeBusy, so that an honest peer knows
// rank 0 took nothing and dials again. The frame fits the socket's send
// buffer (rank 0 sent c at most a challenge before), so the write does
// not wait; turnAwayTimeout bounds it all the same.
func (rr *rootRound) turnAway(c net.Conn, challenged bool) {
	if challenged {
		rr.sendErrorWithin(c, turnAwayTimeout, errBusy, "rank 0 made room for a newer connection")
	}
	_ = c.Close()
}

// serve runs c's handshake and reports how it ended; it drops c first if
// the handshake failed, and reports nothing if c was evicted meanwhile
// (the round has forgotten it).
func (rr *rootRound) serve(c net.Conn) {
	defer rr.wg.Done()
	defer func() { <-rr.live }()
	ev := rr.handshake(c)
	if ev.err != nil && !rr.drop(c) {
		return
	}
	rr.report(ev)
}

// tellLate sends c, which rank 0 challenged and which ran out of time
// (err) before rank 0 took its blob, an error frame with codeBusy: it may
// be an honest peer that rank 0 was too slow for, whose proof and blob
// rank 0 will close unread, and which then dials again instead of failing
// while rank 0 waits for it.
func (rr *rootRound) tellLate(c net.Conn, err error) {
	if errors.Is(err, os.ErrDeadlineExceeded) && rr.isOpen(c) {
		rr.sendErrorWithin(c, turnAwayTimeout, errBusy, "rank 0 reached its deadline for this connection before it took the blob")
	}
}

// isOpen reports whether c is in the round's table.
func (rr *rootRound) isOpen(c net.Conn) bool {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	return rr.conns.Has(c)
}

// handshake reads c's hello, answers with a challenge and reads its proof
// of the secret, within AuthTimeout, and then, if its claim agrees with
// the group, its blob, within HelloTimeout (ctx's deadline bounds both).
// Until the proof checks out it reads at most two frames of 32-byte
// payloads (104 bytes) from c. It tells the table when it starts and
// stops waiting on c, which gives c its grace.
func (rr *rootRound) handshake(c net.Conn) event {
	helloDL := rr.helloDeadline()
	_ = c.SetDeadline(rr.deadlineIn(rr.x.cfg.AuthTimeout)) // AuthTimeout <= HelloTimeout: within helloDL
	s, err := rr.authenticate(c)
	if err != nil {
		if s != nil {
			rr.tellLate(c, err)
		}
		return dropped(c, err)
	}
	// c holds the secret: a disagreeing claim is a bug worth failing for.
	if ev, ok := rr.claim(c, s); !ok {
		return ev
	}
	_ = c.SetDeadline(helloDL)
	blob, err := rr.readBlob(c, s)
	if err != nil {
		rr.unclaim(c, s.rank)
		rr.tellLate(c, err)
		return dropped(c, fmt.Errorf("rank %d: reading blob: %w", s.rank, err))
	}
	return event{conn: c, rank: int(s.rank), blob: blob[:len(blob):len(blob)], sess: s}
}

// authenticate reads c's hello, answers with a challenge (rank 0's proof
// of the secret) and reads and checks c's proof, returning c's session;
// it returns the session with an error too once the challenge went out.
// A peer whose secret differs says so with an error frame in place of
// its proof: that is ErrAuth too.
func (rr *rootRound) authenticate(c net.Conn) (*session, error) {
	s, err := rr.readHello(c)
	if err != nil {
		return nil, err
	}
	challenge := frame{kind: kindChallenge, world: uint32(rr.world), payload: s.challenge[:]}
	if err := encodeFrame(c, challenge, s.mac(labelProof, nil)...); err != nil {
		return nil, fmt.Errorf("sending challenge: %w", err)
	}
	f, err := rr.readWaitedFor(c, admit.Proof, macSize)
	if errors.Is(err, errEvicted) {
		return s, err
	}
	switch {
	case err != nil:
		return s, fmt.Errorf("reading proof of the secret: %w", err)
	case f.kind == kindError:
		return s, fmt.Errorf("the peer claiming rank %d found rank 0's proof of the secret wrong (its secret differs): %w", s.rank, ErrAuth)
	case f.kind != kindAuth || !s.verify(labelAuth, nil, f.payload):
		return s, fmt.Errorf("rank %d: frame kind %d does not prove the group secret: %w", f.rank, f.kind, ErrAuth)
	}
	return s, nil
}

// readWaitedFor reads one frame of at most limit payload bytes from c,
// the table told that rank 0 waits on c for w while it does and that it
// no longer waits once the frame is in; errEvicted where c was evicted
// before or while it waited.
func (rr *rootRound) readWaitedFor(c net.Conn, w admit.Wait, limit int) (frame, error) {
	if !rr.await(c, w) {
		return frame{}, errEvicted
	}
	f, err := decodeFrame(c, limit)
	if err == nil && !rr.await(c, admit.Nothing) {
		return f, errEvicted
	}
	return f, err
}

// readHello reads c's hello and returns a session with a fresh challenge
// for it.
func (rr *rootRound) readHello(c net.Conn) (*session, error) {
	f, err := rr.readWaitedFor(c, admit.Hello, nonceSize)
	if errors.Is(err, errEvicted) {
		return nil, err
	}
	if err != nil {
		var ve *versionError
		if errors.As(err, &ve) {
			// A rank of another version: tell it, so that it fails with a
			// clear ErrProtocol. This says nothing about the group.
			rr.sendError(c, ErrProtocol, fmt.Sprintf("rank 0 speaks exchange protocol version %d", protocolVersion))
		}
		return nil, fmt.Errorf("reading hello: %w", err)
	}
	if f.kind != kindHello || len(f.payload) != nonceSize {
		return nil, fmt.Errorf("got frame kind %d with %d payload bytes, want hello (kind %d) with %d: %w",
			f.kind, len(f.payload), kindHello, nonceSize, ErrProtocol)
	}
	s := &session{key: rr.x.cfg.Secret, rank: f.rank, world: f.world, challenge: newNonce()}
	copy(s.nonce[:], f.payload)
	return s, nil
}

// readBlob reads the blob frame of c, which proved the secret, and
// checks its MAC.
func (rr *rootRound) readBlob(c net.Conn, s *session) ([]byte, error) {
	f, err := decodeFrame(c, rr.x.cfg.MaxPayload+macSize)
	if err != nil {
		return nil, err
	}
	if f.kind != kindBlob {
		return nil, fmt.Errorf("got frame kind %d, want blob (kind %d): %w", f.kind, kindBlob, ErrProtocol)
	}
	blob, mac, ok := splitMAC(f.payload)
	if !ok || !s.verify(labelBlob, blob, mac) {
		return nil, fmt.Errorf("blob frame of %d bytes without a valid MAC: %w", len(f.payload), ErrAuth)
	}
	return blob, nil
}

// errEvicted is why serve stops for a connection the table evicted.
var errEvicted = errors.New("evicted to make room for a newer connection")

// dropped is the event of a connection dropped for err.
func dropped(c net.Conn, err error) event { return event{conn: c, err: err} }

// claim records that c, which proved the secret, is rank s.rank, and
// reports true; if s claims another world size or a rank that is out of
// range or taken, it reports false with the event that fails the round.
func (rr *rootRound) claim(c net.Conn, s *session) (event, bool) {
	remote := c.RemoteAddr()
	rr.mu.Lock()
	defer rr.mu.Unlock()
	reject := func(sentinel error, format string, args ...any) (event, bool) {
		return event{conn: c, reject: sentinel, msg: fmt.Sprintf(format, args...)}, false
	}
	switch {
	case rr.stopped:
		return dropped(c, errors.New("the round is over")), false
	case !rr.conns.Has(c):
		return dropped(c, errEvicted), false
	case s.world != uint32(rr.world):
		return reject(ErrWorldSize, "peer %s (rank %d) reports world size %d, rank 0 has %d", remote, s.rank, s.world, rr.world)
	case s.rank == 0 || s.rank >= uint32(rr.world):
		return reject(ErrRank, "peer %s reports rank %d, want 1..%d", remote, s.rank, rr.world-1)
	case rr.claims[s.rank] != nil:
		return reject(ErrRank, "peer %s reports rank %d, already claimed by %s", remote, s.rank, rr.claims[s.rank].RemoteAddr())
	}
	rr.claims[s.rank] = c
	return event{}, true
}

// unclaim releases rank r if c holds it.
func (rr *rootRound) unclaim(c net.Conn, r uint32) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.claims[r] == c {
		rr.claims[r] = nil
	}
}

// helloDeadline is when a connection admitted now must have delivered its
// blob: HelloTimeout from now, or ctx's deadline if sooner.
func (rr *rootRound) helloDeadline() time.Time { return rr.deadlineIn(rr.x.cfg.HelloTimeout) }

// deadlineIn is d from now, or ctx's deadline if that comes first.
func (rr *rootRound) deadlineIn(d time.Duration) time.Time {
	dl := time.Now().Add(d)
	if ctxDL, ok := rr.ctx.Deadline(); ok && ctxDL.Before(dl) {
		dl = ctxDL
	}
	return dl
}

// report hands ev to collect, and reports false if the round stopped
// accepting first.
func (rr *rootRound) report(ev event) bool {
	select {
	case rr.events <- ev:
		return true
	case <-rr.stop:
		return false
	}
}

// collect waits until every rank's blob is in. It fails when ctx ends, the
// exchanger is closed, the listener fails, or a hello that proved the
// secret disagrees with the group, and then first tells the peers that
// proved it why.
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
// returns an error naming the missing ranks, the last dropped
// connection's fault and the connections evicted to stay within
// MaxConns, wrapping ctx's error and, if a connection failed to prove the
// secret, ErrAuth with the last such connection's fault.
func (rr *rootRound) giveUp() error {
	cerr := rr.ctx.Err()
	missing := rr.missing()
	rr.notify(nil, fmt.Sprintf("abandoned the round while waiting for ranks %s (%v)", missing, cerr), nil)
	last := ""
	if rr.lastErr != nil {
		last = "; last error: " + rr.lastErr.Error()
	}
	rr.mu.Lock()
	if n := rr.stats.evicted; n > 0 {
		last += fmt.Sprintf("; %d connections closed before they proved the secret, to make room (limit %d open)", n, rr.x.cfg.MaxConns)
	}
	rr.mu.Unlock()
	if rr.authErr != nil {
		return fmt.Errorf("exchange: rank 0 at %s: missing ranks %s (%d of %d present%s; a connection failed authentication: %w): %w",
			rr.addr, missing, rr.have, rr.world, last, rr.authErr, cerr)
	}
	return fmt.Errorf("exchange: rank 0 at %s: missing ranks %s (%d of %d present%s): %w",
		rr.addr, missing, rr.have, rr.world, last, cerr)
}

// closedError is the error of a round ended by Close.
func (rr *rootRound) closedError() error {
	return fmt.Errorf("exchange: rank 0 at %s: waiting for ranks %s: %w", rr.addr, rr.missing(), ErrClosed)
}

// take handles one event: it records a blob or why a connection failed
// its handshake (serve dropped it), and fails the round on a hello that
// proved the secret but disagrees with the group.
func (rr *rootRound) take(ev event) error {
	switch {
	case ev.conn == nil: // transient accept error
		rr.lastErr = ev.err
	case ev.err != nil:
		err := fmt.Errorf("connection from %s: %w", ev.conn.RemoteAddr(), ev.err)
		if errors.Is(err, ErrAuth) {
			rr.authErr = err
		} else {
			rr.lastErr = err
		}
	case ev.reject != nil:
		rr.notify(ev.reject, ev.msg, ev.conn)
		return fmt.Errorf("exchange: rank 0 at %s: %s: %w", rr.addr, ev.msg, ev.reject)
	default:
		rr.byRank[ev.rank] = ev.conn
		rr.sessions[ev.rank] = ev.sess
		rr.blobs[ev.rank] = ev.blob
		rr.have++
	}
	return nil
}

// notify stops accepting and sends an error frame (sentinel's code and
// msg) to every connection that claimed a rank and to extra, if not nil.
// The other open connections, still in their handshake (an honest peer's
// may be among them), learn only that the round failed. Failures are
// ignored, as the round is failing anyway.
func (rr *rootRound) notify(sentinel error, msg string, extra net.Conn) {
	rr.stopAccepting()
	told := make(map[net.Conn]bool, rr.world)
	var targets, others []net.Conn
	rr.mu.Lock()
	for _, c := range rr.claims {
		if c != nil {
			told[c] = true
			targets = append(targets, c)
		}
	}
	if extra != nil && !told[extra] {
		told[extra] = true
		targets = append(targets, extra)
	}
	for c := range rr.conns.All() {
		if !told[c] {
			others = append(others, c)
		}
	}
	rr.mu.Unlock()
	for _, c := range targets {
		rr.sendError(c, sentinel, msg)
	}
	for _, c := range others {
		rr.sendError(c, nil, "rank 0 failed the round before this connection joined it")
	}
}

// sendError writes an error frame to c within notifyTimeout, ignoring
// failures.
func (rr *rootRound) sendError(c net.Conn, sentinel error, msg string) {
	rr.sendErrorWithin(c, notifyTimeout, sentinel, msg)
}

// sendErrorWithin is sendError with the write bounded by d.
func (rr *rootRound) sendErrorWithin(c net.Conn, d time.Duration, sentinel error, msg string) {
	_ = c.SetWriteDeadline(time.Now().Add(d))
	_ = encodeFrame(c, frame{kind: kindError, world: uint32(rr.world), payload: encodeError(sentinel, msg)})
}

// commit sends the result to every peer, waits for every peer's
// acknowledgement, and then sends every peer the commit. If a result
// cannot be sent, or a peer does not acknowledge it in time (HelloTimeout,
// or ctx's deadline if sooner), it aborts instead: every peer gets an
// error frame, so that no rank returns the result unless all can.
func (rr *rootRound) commit() error {
	// Stop accepting first: once a peer has the commit it may start the
	// next round, and its new hello must wait for that round.
	rr.stopAccepting()
	rr.dropStrangers()
	P := rr.world
	list := encodeBlobs(rr.blobs)
	dl := rr.helloDeadline()
	for r := 1; r < P; r++ {
		c := rr.byRank[r]
		_ = c.SetDeadline(dl)
		if h := rr.x.hooks; h != nil && h.beforeResult != nil {
			h.beforeResult(r, c)
		}
		res := frame{kind: kindResult, world: uint32(P), payload: list}
		if err := encodeFrame(c, res, rr.sessions[r].mac(labelResult, list)...); err != nil {
			return rr.abort(fmt.Sprintf("cannot deliver the result to rank %d at %s", r, c.RemoteAddr()), rr.ioCause(err))
		}
	}

	type ack struct {
		rank int
		err  error
	}
	acks := make(chan ack, P-1)
	for r := 1; r < P; r++ {
		rr.wg.Add(1)
		go func() {
			defer rr.wg.Done()
			acks <- ack{r, rr.readAck(r)}
		}()
	}
	pending := P - 1
	for pending > 0 {
		select {
		case a := <-acks:
			if a.err != nil {
				return rr.abort(fmt.Sprintf("rank %d at %s did not acknowledge the result", a.rank, rr.byRank[a.rank].RemoteAddr()), a.err)
			}
			pending--
		case <-rr.ctx.Done():
			return rr.abort("waiting for the peers to acknowledge the result", rr.ctx.Err())
		case <-rr.x.closing.Done():
			rr.notify(nil, "aborted the round (its exchanger was closed)", nil)
			return fmt.Errorf("exchange: rank 0 at %s: waiting for the peers to acknowledge the result: %w", rr.addr, ErrClosed)
		}
	}

	// Every peer holds the result: the round is committed. A peer that
	// does not get the commit now fails alone (doc.go).
	for r := 1; r < P; r++ {
		c := rr.byRank[r]
		_ = encodeFrame(c, frame{kind: kindCommit, world: uint32(P)}, rr.sessions[r].mac(labelCommit, nil)...)
	}
	return nil
}

// readAck reads rank r's acknowledgement of the result, and returns why
// it is not one: an I/O error, the reason of an error frame, or a frame
// that is not a valid acknowledgement.
func (rr *rootRound) readAck(r int) error {
	f, err := decodeFrame(rr.byRank[r], controlLimit)
	switch {
	case err != nil:
		return rr.ioCause(err)
	case f.kind == kindError:
		return fmt.Errorf("it refused it: %w", decodeError(f.payload))
	case f.kind != kindAck:
		return fmt.Errorf("got frame kind %d, want acknowledgement (kind %d): %w", f.kind, kindAck, ErrProtocol)
	case !rr.sessions[r].verify(labelAck, nil, f.payload):
		return fmt.Errorf("acknowledgement without a valid MAC: %w", ErrAuth)
	}
	return nil
}

// ioCause adds ctx's error to an I/O error that ctx's end caused.
func (rr *rootRound) ioCause(err error) error {
	if cerr := ctxCause(rr.ctx, err); cerr != nil {
		return fmt.Errorf("%w: %w", err, cerr)
	}
	return err
}

// abort fails a round whose result went out: every peer gets an error
// frame saying what went wrong (with cause's code, if it has one), and
// rank 0 an error wrapping cause.
func (rr *rootRound) abort(what string, cause error) error {
	msg, sentinel := reason(cause)
	rr.notify(sentinel, "aborted the round: "+what+": "+msg, nil)
	return fmt.Errorf("exchange: rank 0 at %s: aborted the round: %s: %w", rr.addr, what, cause)
}

// missing renders the ranks whose blob is not in yet.
func (rr *rootRound) missing() string {
	var rs []int
	for r := 1; r < rr.world; r++ {
		if rr.byRank[r] == nil {
			rs = append(rs, r)
		}
	}
	return formatRanks(rs)
}

// drop forgets c and closes it, making room, and reports whether c was
// open (it was not if evicted: the evictor closed it).
func (rr *rootRound) drop(c net.Conn) bool {
	rr.mu.Lock()
	open := rr.conns.Remove(c)
	rr.mu.Unlock()
	if open {
		rr.changed.Changed()
		_ = c.Close()
	}
	return open
}

// dropStrangers closes every connection that is not a peer's, once the
// round has every blob.
func (rr *rootRound) dropStrangers() {
	member := make(map[net.Conn]bool, rr.world)
	for _, c := range rr.byRank {
		member[c] = true
	}
	rr.mu.Lock()
	defer rr.mu.Unlock()
	for c := range rr.conns.All() {
		if !member[c] {
			rr.conns.Remove(c)
			_ = c.Close()
		}
	}
}

// stopAccepting makes the accept loop (and serve goroutines still waiting
// to report) stop, and connections accepted from now on go to the next
// round. It is idempotent.
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
// registered, waits for the accept loop and the other goroutines to exit,
// records the round's counts, and lets the listener accept again for the
// next round (connections that arrived meanwhile wait in the backlog;
// harmless if Close ran).
func (rr *rootRound) end() {
	rr.stopAccepting()
	rr.mu.Lock()
	for c := range rr.conns.All() {
		_ = c.Close()
	}
	stats := rr.stats
	rr.mu.Unlock()
	rr.wg.Wait()
	rr.x.mu.Lock()
	rr.x.stats = stats
	rr.x.mu.Unlock()
	_ = rr.ln.SetDeadline(time.Time{})
}
