package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/ptx"
)

// inputFor is rank's input of op for a group with counts, hp heads per
// rank and head size d, at a rank-specific address and alignment.
func inputFor(op ptx.Op, rank int, counts []int, b, hp, d int, dt api.DType) tensor {
	ts := NewTokens(counts)
	ptr := uintptr(0x10000 + 0x1000*rank + 2*rank)
	switch op {
	case ptx.OpGatherHeads:
		return tensor{Ptr: ptr, Shape: [4]int{b, ts.Total(), hp, d}, es: dt.Size()}
	case ptx.OpSendRecvHeads:
		return tensor{Ptr: ptr, Shape: [4]int{b, counts[rank], hp * len(counts), d}, es: dt.Size()}
	}
	return tensor{Ptr: ptr, Shape: [4]int{b, counts[rank], hp * len(counts), d}, es: dt.Size()}
}

func sigOf(t *testing.T, op ptx.Op, rank int, counts []int, b, hp, d int, dt api.DType) uint32 {
	t.Helper()
	p, err := plainOf(op, inputFor(op, rank, counts, b, hp, d, dt), rank, len(counts), NewTokens(counts), 1<<30, widthsFor(dt))
	require.NoError(t, err)
	return p.Sig
}

// Every rank computes the same signature for the same operation, whatever
// its own input's shape, address and alignment.
func TestOpSignatureSameOnEveryRank(t *testing.T) {
	counts := []int{5, 0, 12}
	for _, op := range ptx.Ops {
		for _, dt := range []api.DType{api.BFloat16, api.Float8E4M3} {
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
	base := sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 64, api.BFloat16)
	seen := map[uint32]string{base: "base"}
	variants := map[string]uint32{
		"gather_heads": sigOf(t, ptx.OpGatherHeads, 0, counts, 2, 3, 64, api.BFloat16),
		"all_gather":   sigOf(t, ptx.OpAllGather, 0, counts, 2, 3, 64, api.BFloat16),
		"batch":        sigOf(t, ptx.OpSendRecvHeads, 0, counts, 1, 3, 64, api.BFloat16),
		"heads":        sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 4, 64, api.BFloat16),
		"head size":    sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 72, api.BFloat16),
		"element size": sigOf(t, ptx.OpSendRecvHeads, 0, counts, 2, 3, 64, api.Float8E4M3),
		"tokens":       sigOf(t, ptx.OpSendRecvHeads, 0, []int{5, 6}, 2, 3, 64, api.BFloat16),
		"token order":  sigOf(t, ptx.OpSendRecvHeads, 0, []int{7, 5}, 2, 3, 64, api.BFloat16),
	}
	for name, sig := range variants {
		if prev, dup := seen[sig]; dup {
			t.Errorf("%s has the same signature as %s: %#x", name, prev, sig)
		}
		seen[sig] = name
	}
	// GatherHeads([B, T, H/P, D]) and SendRecvHeads([B, T_r, H, D]) of one
	// layer name the same full head count.
	assert.NotEqual(t, sigOf(t, ptx.OpGatherHeads, 0, counts, 2, 3, 64, api.BFloat16), base)
}
