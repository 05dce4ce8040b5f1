package a2a

import "fmt"

// SetRankTokens sets the number of tokens each rank holds (uneven counts and
// zeros allowed; no padding) for the operations enqueued after it. Every
// rank must pass the same counts. The counts travel with each launch, so
// this touches no device memory and waits for nothing.
func (c *Comm) SetRankTokens(counts []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(false); err != nil {
		return err
	}
	if len(counts) != c.cfg.WorldSize {
		return fmt.Errorf("a2a: %d token counts for world size %d: %w", len(counts), c.cfg.WorldSize, ErrTokens)
	}
	var total int64
	for r, n := range counts {
		if n < 0 {
			return fmt.Errorf("a2a: rank %d has %d tokens: %w", r, n, ErrTokens)
		}
		total += int64(n)
	}
	if total > 1<<30 {
		return fmt.Errorf("a2a: %d tokens in all, over 2^30: %w", total, ErrTokens)
	}
	ts := newTokenSet(counts)
	c.t.setTokens(ts)
	c.tokens = ts
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
