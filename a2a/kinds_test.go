package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
)

// The public enumerations convert to the layers' own by value: every
// constant must have the value, and the name, of its internal twin.
func TestKindsMatchInternal(t *testing.T) {
	for d, want := range map[DType]api.DType{BFloat16: api.BFloat16, Float16: api.Float16, Float8E4M3: api.Float8E4M3, Float8E5M2: api.Float8E5M2} {
		assert.Equal(t, want, api.DType(d), "%v", d)
		assert.Equal(t, want.String(), d.String())
	}
	for p, want := range map[Phase]api.Phase{PhaseStart: api.PhaseStart, PhaseEnd: api.PhaseEnd, PhaseClose: api.PhaseClose} {
		assert.Equal(t, want, api.Phase(p), "%v", p)
	}
	for m, want := range map[Mover]api.Mover{MoverKernels: api.MoverKernels, MoverCopyEngines: api.MoverCopyEngines, MoverAuto: api.MoverAuto} {
		assert.Equal(t, want, api.Mover(m), "%v", m)
	}
	for k, want := range map[Transport]api.Transport{TransportIPC: api.TransportIPC, TransportNCCL: api.TransportNCCL, TransportAuto: api.TransportAuto} {
		assert.Equal(t, want, api.Transport(k), "%v", k)
	}
	for w, want := range map[Wire]api.Wire{WireExact: api.WireExact, WireE4M3: api.WireE4M3, WireE5M2: api.WireE5M2} {
		assert.Equal(t, want, api.Wire(w), "%v", w)
	}
	assert.Equal(t, kernelabi.MaxRanks, MaxWorldSize, "the kernels' limit")
	assert.Equal(t, "start", PhaseStart.String())
	assert.Equal(t, "copy-engines", MoverCopyEngines.String())
	assert.Equal(t, "nccl", TransportNCCL.String())
	assert.Equal(t, "e5m2", WireE5M2.String())
}

// A failure a transport reports becomes a2a's type with the same fields,
// text and sentinel.
func TestPublicError(t *testing.T) {
	te := &api.TimeoutError{Rank: 1, Peer: 2, Phase: api.PhaseEnd, Epoch: 7, Block: 3, Timeout: 5}
	got, ok := publicError(te).(*TimeoutError)
	if assert.True(t, ok) {
		assert.Equal(t, TimeoutError{Rank: 1, Peer: 2, Phase: PhaseEnd, Epoch: 7, Block: 3, Timeout: 5}, *got)
		assert.Equal(t, te.Error(), got.Error())
		assert.ErrorIs(t, got, ErrTimeout)
	}
	pe := &api.PeerClosedError{Rank: 0, Peer: 1, Phase: api.PhaseStart, Epoch: 4}
	gotPE, ok := publicError(pe).(*PeerClosedError)
	if assert.True(t, ok) {
		assert.Equal(t, PeerClosedError{Rank: 0, Peer: 1, Phase: PhaseStart, Epoch: 4}, *gotPE)
		assert.Equal(t, pe.Error(), gotPE.Error())
		assert.ErrorIs(t, gotPE, ErrPeerClosed)
	}
	me := &api.MismatchError{Rank: 1, Peer: 0, Epoch: 2, Block: 5, Signature: 0xab, PeerSignature: 0xcd}
	gotME, ok := publicError(me).(*MismatchError)
	if assert.True(t, ok) {
		assert.Equal(t, MismatchError{Rank: 1, Peer: 0, Epoch: 2, Block: 5, Signature: 0xab, PeerSignature: 0xcd}, *gotME)
		assert.Equal(t, me.Error(), gotME.Error())
		assert.ErrorIs(t, gotME, ErrOpMismatch)
	}
	other := api.Prefixed(ErrClosed)
	assert.Same(t, other, publicError(other), "other errors pass as they are")
	assert.NoError(t, publicError(nil))
}
