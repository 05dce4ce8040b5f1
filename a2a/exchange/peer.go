package exchange

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// gatherPeer runs one round on rank r > 0: it connects to rank 0, checks
// its proof of the secret and sends its own proof and its blob (joinRoot),
// checks and acknowledges the result, and returns it once rank 0 commits
// the round.
func (x *TCP) gatherPeer(ctx context.Context, local []byte) ([][]byte, error) {
	addr, r := x.cfg.Addr, x.cfg.Rank
	conn, s, f, unwatch, err := x.joinRoot(ctx, local)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	defer unwatch()

	switch f.kind {
	case kindResult:
	case kindError:
		return nil, x.remoteError(f)
	default:
		return nil, fmt.Errorf("exchange: rank %d: rank 0 at %s sent frame kind %d, want result (kind %d): %w",
			r, addr, f.kind, kindResult, ErrProtocol)
	}
	blobs, err := x.checkResult(f, local, s)
	if err != nil {
		// Tell rank 0, so that it aborts the round for every rank now.
		msg, sentinel := reason(err)
		sendPeerError(conn, s, sentinel, fmt.Sprintf("rank %d: %s", r, msg))
		return nil, fmt.Errorf("exchange: rank %d: result from rank 0 at %s: %w", r, addr, err)
	}
	if err := encodeFrame(conn, s.frame(kindAck, nil), s.mac(labelAck, nil)...); err != nil {
		return nil, x.peerIOError(ctx, "acknowledging the result to", err)
	}

	f, err = decodeFrame(conn, controlLimit)
	if err != nil {
		// The one case where ranks may disagree: rank 0 may have
		// committed (doc.go).
		return nil, x.peerIOError(ctx, "acknowledged the result but got no commit from", err)
	}
	switch {
	case f.kind == kindError:
		return nil, x.remoteError(f)
	case f.kind != kindCommit:
		return nil, fmt.Errorf("exchange: rank %d: rank 0 at %s sent frame kind %d, want commit (kind %d): %w",
			r, addr, f.kind, kindCommit, ErrProtocol)
	case !s.verify(labelCommit, nil, f.payload):
		return nil, fmt.Errorf("exchange: rank %d: commit from %s without a valid MAC: %w", r, addr, ErrAuth)
	}
	return blobs, nil
}

// joinRoot connects to rank 0, runs the handshake (enter) and returns the
// connection, its session and rank 0's answer to the blob (its result, or
// an error frame). While rank 0 turns the connection away before taking
// the blob (it does so to make room, and a rank 0 of protocol version 2
// to every hello), it dials again after a jittered backoff, until ctx
// ends or the exchanger is closed. The connection's I/O is cut short when
// either happens, until unwatch is called.
func (x *TCP) joinRoot(ctx context.Context, local []byte) (conn net.Conn, s *session, answer frame, unwatch func(), err error) {
	refusals := 0
	var last error // the last refusal
	defer x.recordTurnedAway(&refusals)
	pace := newBackoff(x.cfg.DialInterval)
	for {
		conn, err := x.dial(ctx)
		if err != nil {
			if refusals > 0 {
				return nil, nil, frame{}, nil, x.turnedAway(ctx, refusals, last)
			}
			return nil, nil, frame{}, nil, err
		}
		unwatch := x.watch(ctx, conn)
		s, answer, refused, err := x.enter(ctx, conn, local)
		if err == nil && refused == nil {
			return conn, s, answer, unwatch, nil
		}
		unwatch()
		_ = conn.Close()
		if err != nil {
			ended := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, ErrClosed)
			if refusals > 0 && ended && s == nil { // s: the blob went out, and the error says what came after
				return nil, nil, frame{}, nil, x.turnedAway(ctx, refusals, last)
			}
			return nil, nil, frame{}, nil, err
		}
		refusals++
		last = refused
		if !x.pause(ctx, pace.next()) {
			return nil, nil, frame{}, nil, x.turnedAway(ctx, refusals, last)
		}
	}
}

// recordTurnedAway keeps, for tests, how many connections of this peer's
// last round rank 0 turned away.
func (x *TCP) recordTurnedAway(n *int) {
	x.mu.Lock()
	x.stats = roundStats{turnedAway: *n}
	x.mu.Unlock()
}

// turnedAway is joinRoot's error once ctx ended, or x was closed, after
// rank 0 turned away refusals connections, the last for last.
func (x *TCP) turnedAway(ctx context.Context, refusals int, last error) error {
	cause := ctx.Err()
	if x.isClosed() {
		cause = ErrClosed
	} else if cause == nil { // the I/O deadline, ctx's, fired a moment before ctx
		cause = context.DeadlineExceeded
	}
	return fmt.Errorf("exchange: rank %d: rank 0 at %s turned away %d connections of this rank before taking its blob "+
		"(rank 0 evicts connections that have not proved the secret while it holds TCPConfig.MaxConns; a rank 0 of protocol version 2 closes every hello); "+
		"last: %v: %w", x.cfg.Rank, x.cfg.Addr, refusals, last, cause)
}

// enter runs one attempt on conn: the hello, rank 0's challenge (greet),
// this rank's proof and blob, and rank 0's first answer, which it
// returns. If rank 0 turned conn away before taking the blob (it closed
// it before answering the hello, or said so with errBusy), enter returns
// why as refused, and a nil err. It returns s with an error of waiting
// for the answer (the blob went out), and a nil s with any other.
func (x *TCP) enter(ctx context.Context, conn net.Conn, local []byte) (s *session, answer frame, refused, err error) {
	s, refused, err = x.greet(ctx, conn)
	if refused != nil || err != nil {
		return nil, frame{}, refused, err
	}
	out, err := appendFrame(nil, s.frame(kindAuth, nil), s.mac(labelAuth, nil)...)
	if err == nil {
		out, err = appendFrame(out, s.frame(kindBlob, local), s.mac(labelBlob, local)...)
	}
	if err != nil {
		return nil, frame{}, nil, fmt.Errorf("exchange: rank %d: encoding blob: %w", x.cfg.Rank, err)
	}
	if _, werr := conn.Write(out); werr != nil {
		// Rank 0 closed conn before reading it all; if it evicted it, it
		// said so first (the read returns at once on a closed connection).
		if isRefusal(werr) {
			if f, err := decodeFrame(conn, controlLimit); err == nil && isBusy(f) {
				return nil, frame{}, decodeError(f.payload), nil
			}
		}
		return nil, frame{}, nil, x.peerIOError(ctx, "sending blob to", werr)
	}
	answer, err = decodeFrame(conn, max(x.cfg.WorldSize*(4+x.cfg.MaxPayload)+macSize, controlLimit))
	if err != nil {
		return s, frame{}, nil, x.peerIOError(ctx, "waiting for the result from", err)
	}
	if isBusy(answer) {
		return nil, frame{}, decodeError(answer.payload), nil
	}
	return s, answer, nil, nil
}

// isBusy reports whether f is rank 0's word that it evicted the
// connection before it took anything from it (codeBusy).
func isBusy(f frame) bool {
	return f.kind == kindError && errors.Is(decodeError(f.payload), errBusy)
}

// greet sends the hello on conn and reads and checks rank 0's challenge.
// If rank 0 closed conn before answering, or evicted it, greet returns
// the error that says so as refused, and a nil err. If rank 0's proof of
// the secret is wrong it tells rank 0 (proofRefusal) and fails with
// ErrAuth.
func (x *TCP) greet(ctx context.Context, conn net.Conn) (s *session, refused, err error) {
	addr, r, P := x.cfg.Addr, x.cfg.Rank, x.cfg.WorldSize
	s = &session{key: x.cfg.Secret, rank: uint32(r), world: uint32(P), nonce: newNonce()}
	if err := encodeFrame(conn, s.frame(kindHello, s.nonce[:])); err != nil {
		if isRefusal(err) {
			return nil, err, nil
		}
		return nil, nil, x.peerIOError(ctx, "sending hello to", err)
	}
	f, err := decodeFrame(conn, controlLimit)
	if err != nil {
		if isRefusal(err) {
			return nil, err, nil
		}
		return nil, nil, x.peerIOError(ctx, "waiting for the challenge from", err)
	}
	switch {
	case isBusy(f):
		return nil, decodeError(f.payload), nil
	case f.kind == kindError:
		return nil, nil, x.remoteError(f)
	case f.kind != kindChallenge:
		return nil, nil, fmt.Errorf("exchange: rank %d: rank 0 at %s sent frame kind %d, want challenge (kind %d): %w",
			r, addr, f.kind, kindChallenge, ErrProtocol)
	case len(f.payload) != nonceSize+macSize:
		return nil, nil, fmt.Errorf("exchange: rank %d: challenge from %s has %d payload bytes, want %d: %w",
			r, addr, len(f.payload), nonceSize+macSize, ErrProtocol)
	}
	copy(s.challenge[:], f.payload)
	if !s.verify(labelProof, nil, f.payload[nonceSize:]) {
		sendPeerError(conn, s, ErrAuth, proofRefusal)
		return nil, nil, fmt.Errorf("exchange: rank %d: rank 0's address %s answered without the group's secret; "+
			"another process may hold the port (or rank 0's secret differs): %w", r, addr, ErrAuth)
	}
	return s, nil, nil
}

// proofRefusal is the message of the error frame a peer sends rank 0 in
// place of its own proof when rank 0's proof of the secret is wrong: rank
// 0 of the group can then say that a peer's secret differs (ErrAuth). It
// says nothing a stranger could use, and is short enough for the 32-byte
// payload rank 0 reads in place of a proof.
const proofRefusal = "rank 0's proof is wrong"

// sendPeerError writes this rank's error frame to rank 0 on conn within
// notifyTimeout, ignoring failures.
func sendPeerError(conn net.Conn, s *session, sentinel error, msg string) {
	_ = conn.SetWriteDeadline(time.Now().Add(notifyTimeout))
	_ = encodeFrame(conn, s.frame(kindError, encodeError(sentinel, msg)))
}

// isRefusal reports whether err, from the first I/O on a connection, says
// that rank 0 closed it before answering: the connection ended before a
// frame header, or was reset.
func isRefusal(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// watch applies ctx's deadline to conn and cuts conn's I/O short as soon
// as ctx ends or x is closed, until the returned function is called.
func (x *TCP) watch(ctx context.Context, conn net.Conn) (unwatch func()) {
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	unblock := func() { _ = conn.SetDeadline(aLongTimeAgo) }
	stopCtx := context.AfterFunc(ctx, unblock)
	stopClosing := context.AfterFunc(x.closing, unblock)
	return func() {
		stopCtx()
		stopClosing()
	}
}

// pause waits d, and reports false if ctx ended or x was closed first.
func (x *TCP) pause(ctx context.Context, d time.Duration) bool {
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(x.closing, cancel)
	defer stop()
	return sleep(pctx, d)
}

// remoteError is the error of a round that rank 0 failed with error frame
// f.
func (x *TCP) remoteError(f frame) error {
	return fmt.Errorf("exchange: rank %d: error from rank 0 at %s: %w", x.cfg.Rank, x.cfg.Addr, decodeError(f.payload))
}

// peerIOError words an error of the I/O with rank 0 (what is e.g. "sending
// hello to"): it wraps ErrClosed if x was closed, ctx's error if ctx ended,
// and err otherwise.
func (x *TCP) peerIOError(ctx context.Context, what string, err error) error {
	r, addr := x.cfg.Rank, x.cfg.Addr
	if x.isClosed() {
		return fmt.Errorf("exchange: rank %d: %s rank 0 at %s: %w", r, what, addr, ErrClosed)
	}
	if cerr := ctxCause(ctx, err); cerr != nil {
		return fmt.Errorf("exchange: rank %d: %s rank 0 at %s: %w", r, what, addr, cerr)
	}
	return fmt.Errorf("exchange: rank %d: %s rank 0 at %s: %w", r, what, addr, err)
}

// checkResult validates rank 0's result frame f against the session, the
// group and the blob this rank sent, and returns the blobs it carries. Its
// errors are for the caller to word.
func (x *TCP) checkResult(f frame, local []byte, s *session) ([][]byte, error) {
	r, P := x.cfg.Rank, x.cfg.WorldSize
	list, mac, ok := splitMAC(f.payload)
	if !ok || !s.verify(labelResult, list, mac) {
		return nil, fmt.Errorf("%d bytes without a valid MAC: %w", len(f.payload), ErrAuth)
	}
	if f.world != uint32(P) {
		return nil, fmt.Errorf("reports world size %d, want %d: %w", f.world, P, ErrWorldSize)
	}
	if f.rank != 0 {
		return nil, fmt.Errorf("claims to come from rank %d, want 0: %w", f.rank, ErrProtocol)
	}
	blobs, err := decodeBlobs(list, P)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(blobs[r], local) {
		return nil, fmt.Errorf("holds a %d-byte blob for this rank, but %d bytes were sent (or contents differ): %w",
			len(blobs[r]), len(local), ErrProtocol)
	}
	return blobs, nil
}

// dial connects to rank 0, retrying every DialInterval until ctx ends or
// the exchanger is closed.
func (x *TCP) dial(ctx context.Context) (net.Conn, error) {
	addr, r := x.cfg.Addr, x.cfg.Rank
	dctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClosing := context.AfterFunc(x.closing, cancel)
	defer stopClosing()
	var d net.Dialer
	for attempt := 1; ; attempt++ {
		c, err := d.DialContext(dctx, "tcp", addr)
		if err == nil {
			return c, nil
		}
		if sleep(dctx, x.cfg.DialInterval) {
			continue
		}
		// dctx ended: x was closed or ctx ended.
		if x.isClosed() {
			return nil, fmt.Errorf("exchange: rank %d: dialing rank 0 at %s: %w", r, addr, ErrClosed)
		}
		return nil, fmt.Errorf("exchange: rank %d: cannot reach rank 0 at %s after %d attempts (last error: %v): %w",
			r, addr, attempt, err, ctx.Err())
	}
}

// sleep waits for d to pass or ctx to end, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
