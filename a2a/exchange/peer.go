package exchange

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"time"
)

// gatherPeer runs one round on rank r > 0: it dials rank 0, sends its
// hello, and waits for the result or for rank 0's error frame.
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
	// Cut the I/O below short as soon as ctx ends or x is closed.
	unblock := func() { _ = conn.SetDeadline(aLongTimeAgo) }
	stopCtx := context.AfterFunc(ctx, unblock)
	defer stopCtx()
	stopClosing := context.AfterFunc(x.closing, unblock)
	defer stopClosing()

	hello := frame{kind: kindHello, rank: uint32(r), world: uint32(P), payload: local}
	if err := encodeFrame(conn, hello); err != nil {
		return nil, x.peerIOError(ctx, "sending hello to", err)
	}
	f, err := decodeFrame(conn, max(P*(4+x.cfg.MaxPayload), minResultLimit))
	if err != nil {
		return nil, x.peerIOError(ctx, "waiting for the result from", err)
	}
	switch f.kind {
	case kindResult:
		return x.checkResult(f, local)
	case kindError:
		return nil, fmt.Errorf("exchange: rank %d: error from rank 0 at %s: %w", r, addr, decodeError(f.payload))
	default:
		return nil, fmt.Errorf("exchange: rank %d: rank 0 at %s sent frame kind %d, want result (kind %d): %w",
			r, addr, f.kind, kindResult, ErrProtocol)
	}
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

// checkResult validates rank 0's result frame f against the group and
// against the blob this rank sent, and returns the blobs it carries.
func (x *TCP) checkResult(f frame, local []byte) ([][]byte, error) {
	addr, r, P := x.cfg.Addr, x.cfg.Rank, x.cfg.WorldSize
	if f.world != uint32(P) {
		return nil, fmt.Errorf("exchange: rank %d: rank 0 at %s reports world size %d, want %d: %w", r, addr, f.world, P, ErrWorldSize)
	}
	if f.rank != 0 {
		return nil, fmt.Errorf("exchange: rank %d: result from %s claims to come from rank %d, want 0: %w", r, addr, f.rank, ErrProtocol)
	}
	blobs, err := decodeBlobs(f.payload, P)
	if err != nil {
		return nil, fmt.Errorf("exchange: rank %d: result from rank 0 at %s: %w", r, addr, err)
	}
	if !bytes.Equal(blobs[r], local) {
		return nil, fmt.Errorf("exchange: rank %d: result from rank 0 at %s holds a %d-byte blob for this rank, but %d bytes were sent (or contents differ): %w",
			r, addr, len(blobs[r]), len(local), ErrProtocol)
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
