package ipc

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// Wait blocks in the driver: the kernels bound their own waits.
func (t *Transport) Wait(onCaller bool, tail driver.Event) error {
	if onCaller {
		return t.env.Ctx.EventSynchronize(tail)
	}
	return t.env.Ctx.StreamSynchronize(t.env.Stream)
}

// Failure decodes the status word a failed kernel wrote, or nil.
func (t *Transport) Failure() error {
	if t.statusHost == nil {
		return nil // released
	}
	st := (*statusWord)(t.statusHost)
	code := atomic.LoadUint32(&st.Code)
	if code == statusOK {
		return nil
	}
	rank, peer := int(atomic.LoadUint32(&st.Rank)), int(atomic.LoadUint32(&st.Peer))
	phase, epoch := api.Phase(atomic.LoadUint32(&st.Phase)), atomic.LoadUint32(&st.Epoch)
	block := int(atomic.LoadUint32(&st.Block))
	switch code {
	case statusPeerClosed:
		return &api.PeerClosedError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch}
	case statusMismatch:
		return &api.MismatchError{Rank: rank, Peer: peer, Epoch: epoch, Block: block,
			Signature: atomic.LoadUint32(&st.Sig), PeerSignature: atomic.LoadUint32(&st.PeerSig)}
	case statusHalfReused:
		return fmt.Errorf("a2a: rank %d's operation %d would write the data half its previous operation wrote (capture with CaptureGraph, whose Launch keeps the halves in turn): %w", rank, epoch, api.ErrOddGraph)
	case statusAborted:
		return &api.AbortedError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch, ByClose: t.abortedByClose}
	}
	return &api.TimeoutError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch, Block: block, Timeout: time.Duration(t.args.TimeoutNs)}
}

// Goodbye launches ulysses_close: the bye words, and with wait the wait
// for the peers'.
func (t *Transport) Goodbye(wait bool) error {
	t.args.Active = 0
	if wait {
		t.args.Active = 1
	}
	return t.launch(t.k.Close(), 1, farewellThreads, t.env.Stream)
}

// Abort sets the status word's Abort word: every wait of a kernel queued
// so far or later ends within about 1 ms (ABORT_POLL_NS) with
// STATUS_ABORTED. It cannot be undone; the first caller names the cause.
func (t *Transport) Abort(byClose bool) {
	if t.statusHost != nil && atomic.LoadUint32(&(*statusWord)(t.statusHost).Abort) == 0 {
		t.abortedByClose = byClose
		atomic.StoreUint32(&(*statusWord)(t.statusHost).Abort, 1)
	}
}
