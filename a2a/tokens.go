package a2a

import "github.com/ulysses-go/ulysses/internal/plan"

// SetRankTokens sets the number of tokens each rank holds (uneven counts and
// zeros allowed; no padding) for the operations enqueued after it, and for
// the replays of captured ones (see Graph). Every rank must pass the same
// counts. The counts travel with each launch, so this touches no device
// memory and waits for nothing, unless the Comm has captured operations:
// then it copies the counts (72 bytes) into its buffer for their replays
// and waits for that copy alone.
func (c *Comm) SetRankTokens(counts []int) error {
	if !c.made() {
		return unmade("SetRankTokens")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(false); err != nil {
		return err
	}
	if err := plan.CheckTokenCounts(counts, c.cfg.WorldSize); err != nil {
		return err
	}
	ts := plan.NewTokens(counts)
	if err := c.checkCaptured(ts); err != nil {
		return err
	}
	if c.t != nil {
		c.t.SetTokens(ts)
	}
	c.tokens = ts
	if len(c.captured) > 0 {
		// Replays read the counts from the buffer: copy them there now.
		if err := c.t.RefreshCaptured(); err != nil {
			return c.fail(err)
		}
	}
	return nil
}
