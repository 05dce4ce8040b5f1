package plan

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// maxTotalTokens bounds the tokens of a group: the kernels index tokens
// with 32-bit counts.
const maxTotalTokens = 1 << 30

// CheckTokenCounts validates SetRankTokens' counts for a group of world
// ranks: one per rank, none negative, at most 2^30 in all. Each count is
// bounded before it is added, so the sum cannot wrap. Its errors name the
// rank and the count, and match api.ErrTokens.
func CheckTokenCounts(counts []int, world int) error {
	if len(counts) != world {
		return fmt.Errorf("a2a: SetRankTokens: %d token counts for world size %d (one per rank): %w", len(counts), world, api.ErrTokens)
	}
	var total int64
	for r, n := range counts {
		if n < 0 {
			return fmt.Errorf("a2a: SetRankTokens: rank %d's token count %d is negative: %w", r, n, api.ErrTokens)
		}
		if n > maxTotalTokens {
			return fmt.Errorf("a2a: SetRankTokens: rank %d's token count %d is over 2^30, the most the kernels index: %w", r, n, api.ErrTokens)
		}
		if total += int64(n); total > maxTotalTokens {
			return fmt.Errorf("a2a: SetRankTokens: over 2^30 tokens in all (%d by rank %d): %w", total, r, api.ErrTokens)
		}
	}
	return nil
}

// Tokens is the per-rank token counts given to SetRankTokens.
type Tokens struct {
	Counts []int
	Prefix []int  // len(counts)+1
	Hash   uint32 // of the counts: part of every operation's signature
}

// NewTokens records counts (checked by CheckTokenCounts) with their
// prefix sums and hash.
func NewTokens(counts []int) Tokens {
	ts := Tokens{Counts: append([]int(nil), counts...), Prefix: make([]int, len(counts)+1), Hash: fnvOffset}
	for i, c := range counts {
		ts.Prefix[i+1] = ts.Prefix[i] + c
		ts.Hash = fnvAdd(ts.Hash, uint64(c))
	}
	return ts
}

// Total is T, the tokens of all ranks.
func (ts Tokens) Total() int { return ts.Prefix[len(ts.Counts)] }

// Most is the largest count of one rank.
func (ts Tokens) Most() int {
	m := 0
	for _, n := range ts.Counts {
		m = max(m, n)
	}
	return m
}
