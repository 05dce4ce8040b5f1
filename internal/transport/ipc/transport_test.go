package ipc

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/handle"
)

// failure turns each status code the kernels write into its error.
func TestSMFailureFromStatus(t *testing.T) {
	var st statusWord
	c := &Transport{statusHost: unsafe.Pointer(&st)}
	c.args.TimeoutNs = 2e9
	assert.NoError(t, c.Failure())

	st = statusWord{Code: statusTimeout, Phase: uint32(api.PhaseEnd), Peer: 1, Epoch: 9, Block: 3, Rank: 0}
	var te *api.TimeoutError
	require.ErrorAs(t, c.Failure(), &te)
	assert.Equal(t, api.TimeoutError{Rank: 0, Peer: 1, Phase: api.PhaseEnd, Epoch: 9, Block: 3, Timeout: 2e9}, *te)
	assert.ErrorIs(t, te, api.ErrTimeout)

	st = statusWord{Code: statusTimeout, Phase: uint32(api.PhaseClose), Peer: 2, Rank: 1}
	require.ErrorAs(t, c.Failure(), &te)
	assert.Contains(t, te.Error(), "in Close for rank 2")

	st = statusWord{Code: statusPeerClosed, Phase: uint32(api.PhaseStart), Peer: 2, Epoch: 4, Rank: 1}
	var pe *api.PeerClosedError
	require.ErrorAs(t, c.Failure(), &pe)
	assert.Equal(t, api.PeerClosedError{Rank: 1, Peer: 2, Phase: api.PhaseStart, Epoch: 4}, *pe)
	assert.ErrorIs(t, pe, api.ErrPeerClosed)
	assert.False(t, errors.Is(pe, api.ErrTimeout))

	st = statusWord{Code: statusMismatch, Phase: uint32(api.PhaseEnd), Peer: 1, Epoch: 7, Block: 5, Sig: 0xabc, PeerSig: 0xdef}
	var me *api.MismatchError
	require.ErrorAs(t, c.Failure(), &me)
	assert.Equal(t, api.MismatchError{Rank: 0, Peer: 1, Epoch: 7, Block: 5, Signature: 0xabc, PeerSignature: 0xdef}, *me)
	assert.ErrorIs(t, me, api.ErrOpMismatch)
}

// TestMostOnOneGPU: the ranks on the busiest GPU, counted alike on every
// rank from the handles.
func TestMostOnOneGPU(t *testing.T) {
	gpu := func(id string) handle.Handle {
		var h handle.Handle
		copy(h.BusID[:], id)
		return h
	}
	assert.Equal(t, 1, mostOnOneGPU([]handle.Handle{gpu("0000:18:00.0"), gpu("0000:2a:00.0")}))
	assert.Equal(t, 2, mostOnOneGPU([]handle.Handle{gpu("0000:18:00.0"), gpu("0000:2a:00.0"), gpu("0000:18:00.0")}))
	assert.Equal(t, 4, mostOnOneGPU([]handle.Handle{gpu("a"), gpu("a"), gpu("a"), gpu("a")}))
}
