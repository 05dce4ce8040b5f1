package a2a

import (
	"errors"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/ptx"
)

// inputFor is rank's input of op for a group with counts, hp heads per
// rank and head size d, at a rank-specific address and alignment.
func inputFor(op ptx.Op, rank int, counts []int, b, hp, d int, dt DType) Tensor {
	ts := newTokenSet(counts)
	ptr := uintptr(0x10000 + 0x1000*rank + 2*rank)
	switch op {
	case ptx.OpGatherHeads:
		return Tensor{Ptr: ptr, Shape: [4]int{b, ts.total(), hp, d}, DType: dt}
	case ptx.OpSendRecvHeads:
		return Tensor{Ptr: ptr, Shape: [4]int{b, counts[rank], hp * len(counts), d}, DType: dt}
	}
	return Tensor{Ptr: ptr, Shape: [4]int{b, counts[rank], hp * len(counts), d}, DType: dt}
}

func sigOf(t *testing.T, op ptx.Op, rank int, counts []int, b, hp, d int, dt DType) uint32 {
	t.Helper()
	p, err := planOp(op, inputFor(op, rank, counts, b, hp, d, dt), dt, rank, len(counts), newTokenSet(counts), 1<<30, widthsFor(dt))
	require.NoError(t, err)
	return p.sig
}

// Every rank computes the same signature for the same operation, whatever
// its own input's shape, address and alignment.
func TestOpSignatureSameOnEveryRank(t *testing.T) {
	counts := []int{5, 0, 12}
	for _, op := range ptx.Ops {
		for _, dt := range []DType{BFloat16, Float8E4M3} {
			want := sigOf(t, op, 0, counts, 2, 3, 72, dt)
			for rank := 1; rank < len(counts); rank++ {
				assert.Equal(t, want, sigOf(t, op, rank, counts, 2, 3, 72, dt), "%s %v rank %d", op, dt, rank)
			}
		}
	}
}

// The signature changes with anything the ranks must agree on.
func TestOpSignatureSeparatesOperations(t *testing.T) {
	counts := []int{5, 7}
	base := sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 64, BFloat16)
	seen := map[uint32]string{base: "base"}
	variants := map[string]uint32{
		"gather_heads": sigOf(t, ptx.OpGatherHeads, 0, counts, 2, 3, 64, BFloat16),
		"all_gather":   sigOf(t, ptx.OpAllGather, 0, counts, 2, 3, 64, BFloat16),
		"batch":        sigOf(t, ptx.OpSendRecvHeads, 0, counts, 1, 3, 64, BFloat16),
		"heads":        sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 4, 64, BFloat16),
		"head size":    sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 72, BFloat16),
		"element size": sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 64, Float8E4M3),
		"tokens":       sigOf(t, ptx.OpSendRecvHeads, 0, []int{5, 6}, 2, 3, 64, BFloat16),
		"token order":  sigOf(t, ptx.OpSendRecvHeads, 0, []int{7, 5}, 2, 3, 64, BFloat16),
	}
	for name, sig := range variants {
		if prev, dup := seen[sig]; dup {
			t.Errorf("%s has the same signature as %s: %#x", name, prev, sig)
		}
		seen[sig] = name
	}
	// GatherHeads([B, T, H/P, D]) and SendRecvHeads([B, T_r, H, D]) of one
	// layer name the same full head count.
	assert.NotEqual(t, sigOf(t, ptx.OpGatherHeads, 0, counts, 2, 3, 64, BFloat16), base)
}

// failure turns each status code the kernels write into its error.
func TestSMFailureFromStatus(t *testing.T) {
	var st statusWord
	c := &smTransport{statusHost: unsafe.Pointer(&st)}
	c.args.TimeoutNs = 2e9
	assert.NoError(t, c.failure())

	st = statusWord{Code: statusTimeout, Phase: uint32(PhaseEnd), Peer: 1, Epoch: 9, Block: 3, Rank: 0}
	var te *TimeoutError
	require.ErrorAs(t, c.failure(), &te)
	assert.Equal(t, TimeoutError{Rank: 0, Peer: 1, Phase: PhaseEnd, Epoch: 9, Block: 3, Timeout: 2e9}, *te)
	assert.ErrorIs(t, te, ErrTimeout)

	st = statusWord{Code: statusTimeout, Phase: uint32(PhaseClose), Peer: 2, Rank: 1}
	require.ErrorAs(t, c.failure(), &te)
	assert.Contains(t, te.Error(), "in Close for rank 2")

	st = statusWord{Code: statusPeerClosed, Phase: uint32(PhaseStart), Peer: 2, Epoch: 4, Rank: 1}
	var pe *PeerClosedError
	require.ErrorAs(t, c.failure(), &pe)
	assert.Equal(t, PeerClosedError{Rank: 1, Peer: 2, Phase: PhaseStart, Epoch: 4}, *pe)
	assert.ErrorIs(t, pe, ErrPeerClosed)
	assert.False(t, errors.Is(pe, ErrTimeout))

	st = statusWord{Code: statusMismatch, Phase: uint32(PhaseEnd), Peer: 1, Epoch: 7, Block: 5, Sig: 0xabc, PeerSig: 0xdef}
	var me *MismatchError
	require.ErrorAs(t, c.failure(), &me)
	assert.Equal(t, MismatchError{Rank: 0, Peer: 1, Epoch: 7, Block: 5, Signature: 0xabc, PeerSignature: 0xdef}, *me)
	assert.ErrorIs(t, me, ErrOpMismatch)
}
