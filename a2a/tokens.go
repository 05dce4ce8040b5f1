package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// SetRankTokens sets the number of tokens each rank holds (uneven counts and
// zeros allowed; no padding). Every rank must pass the same counts. The
// counts live in device memory, read by the kernels; setting them waits for
// the Comm's queued operations first.
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
	b := make([]byte, (MaxWorldSize+MaxWorldSize+1)*4)
	for i, n := range ts.counts {
		putU32(b[4*i:], uint32(n))
	}
	for i, n := range ts.prefix {
		putU32(b[4*(MaxWorldSize+i):], uint32(n))
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		return c.fail(wrapDriver("waiting for queued operations", err))
	}
	if err := c.dev.ctx.MemcpyHtoD(c.buf+driver.DevicePtr(c.layout.stateOff+stateTokensOff), b); err != nil {
		return c.fail(wrapDriver("writing token counts", err))
	}
	c.tokens = ts
	return nil
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
