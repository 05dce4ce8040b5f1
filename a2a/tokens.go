package a2a

import "fmt"

// maxTotalTokens bounds the tokens of a group: the kernels index tokens
// with 32-bit counts.
const maxTotalTokens = 1 << 30

// SetRankTokens sets the number of tokens each rank holds (uneven counts and
// zeros allowed; no padding) for the operations enqueued after it, and for
// the replays of captured ones (see Graph). Every rank must pass the same
// counts. The counts travel with each launch, so this touches no device
// memory and waits for nothing, unless the Comm has captured operations:
// then it copies the counts (72 bytes) into its buffer for their replays
// and waits for that copy alone (not timed here).
func (c *Comm) SetRankTokens(counts []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(false); err != nil {
		return err
	}
	if err := checkTokenCounts(counts, c.cfg.WorldSize); err != nil {
		return err
	}
	ts := newTokenSet(counts)
	if err := c.checkCaptured(ts); err != nil {
		return err
	}
	if c.t != nil {
		c.t.setTokens(ts)
	}
	c.tokens = ts
	if len(c.captured) > 0 {
		// Replays read the counts from the buffer: copy them there now.
		if err := c.t.refreshCaptured(); err != nil {
			return c.fail(err)
		}
	}
	return nil
}

// checkTokenCounts validates SetRankTokens' counts for a group of world
// ranks. Each count is bounded before it is added, so the sum cannot wrap.
func checkTokenCounts(counts []int, world int) error {
	if len(counts) != world {
		return fmt.Errorf("a2a: %d token counts for world size %d: %w", len(counts), world, ErrTokens)
	}
	var total int64
	for r, n := range counts {
		if n < 0 || n > maxTotalTokens {
			return fmt.Errorf("a2a: rank %d has %d tokens, not in 0..2^30: %w", r, n, ErrTokens)
		}
		if total += int64(n); total > maxTotalTokens {
			return fmt.Errorf("a2a: over 2^30 tokens in all (%d by rank %d): %w", total, r, ErrTokens)
		}
	}
	return nil
}

// tokenSet is the per-rank token counts given to SetRankTokens.
type tokenSet struct {
	counts []int
	prefix []int  // len(counts)+1
	hash   uint32 // of the counts: part of every operation's signature
}

func newTokenSet(counts []int) tokenSet {
	ts := tokenSet{counts: append([]int(nil), counts...), prefix: make([]int, len(counts)+1), hash: fnvOffset}
	for i, c := range counts {
		ts.prefix[i+1] = ts.prefix[i] + c
		ts.hash = fnvAdd(ts.hash, uint64(c))
	}
	return ts
}

func (ts tokenSet) total() int { return ts.prefix[len(ts.counts)] }

// most is the largest count of one rank.
func (ts tokenSet) most() int {
	m := 0
	for _, n := range ts.counts {
		m = max(m, n)
	}
	return m
}
