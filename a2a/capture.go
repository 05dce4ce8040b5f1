package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// capturedOp is what a captured operation needs of every later token
// layout: its replays read the counts SetRankTokens sets then, so each new
// layout must still fit the input the capture froze (and the buffer).
type capturedOp struct {
	req   request // as captured: its inputs' token dimension is the most a replay may use
	graph *Graph  // the CaptureGraph that holds it; nil for a capture of the caller's
}

// capturing reports whether s is being captured into a CUDA graph; only a
// caller's stream can be.
func (c *Comm) capturing(s driver.Stream) (bool, error) {
	if s == c.stream {
		return false, nil
	}
	st, err := c.dev.ctx.StreamCapturing(s)
	switch {
	case err != nil:
		return false, fmt.Errorf("a2a: stream %#x: %w: %w", uintptr(s), ErrStream, err)
	case st == driver.CaptureInvalidated:
		return false, fmt.Errorf("a2a: stream %#x: its capture was invalidated: %w", uintptr(s), ErrStream)
	}
	return st == driver.CaptureActive, nil
}

// tokensOf is how many tokens op's input holds under ts on this rank.
func (c *Comm) tokensOf(op ptx.Op, ts tokenSet) int {
	if op == ptx.OpGatherHeads || op == ptx.OpHeadAllGather {
		return ts.total()
	}
	return ts.counts[c.cfg.Rank]
}

// withTokens is r with its inputs cut to the tokens the counts ts give
// them: a captured input's token dimension is the most tokens any replay
// may use, of which the counts use the first ones.
func (c *Comm) withTokens(r request, ts tokenSet) (request, error) {
	n := c.tokensOf(r.op, ts)
	if r.xs[0].Shape[1] < n {
		return request{}, fmt.Errorf("a2a: captured %s input %v holds %d tokens, the counts need %d: %w", r.op, r.xs[0], r.xs[0].Shape[1], n, ErrTokens)
	}
	for k := range r.n {
		r.xs[k].Shape[1] = n
	}
	return r, nil
}

// enqueueCaptured records a captured operation: it is not run now, and
// orders nothing on other streams (the graph does, when launched).
func (c *Comm) enqueueCaptured(r request, p opPlan, planned request, views []Tensor, ls launchSpec, out driver.DevicePtr) (Tensor, error) {
	if err := c.t.refreshCaptured(); err != nil {
		return Tensor{}, err
	}
	if err := c.t.enqueue(r.op, p, planned.xs[0], ls); err != nil {
		return Tensor{}, api.Wrap(err, "capturing %s", r.op) // the capture fails, not the Comm
	}
	c.launches++
	c.captured = append(c.captured, capturedOp{req: r})
	return outputViews(p, out, c.cfg.DType, views), nil
}

// checkCaptured checks new token counts against every captured operation
// that may still replay: its input must hold them, and its output fit.
func (c *Comm) checkCaptured(ts tokenSet) error {
	for _, co := range c.captured {
		r, err := c.withTokens(co.req, ts)
		if err != nil {
			return fmt.Errorf("a2a: a captured %s reads its input %v, which holds %d tokens; these counts need %d: %w",
				co.req.op, co.req.xs[0], co.req.xs[0].Shape[1], c.tokensOf(co.req.op, ts), ErrCapacity)
		}
		if _, err := c.plan(r, ts); err != nil {
			return api.Wrap(err, "a captured operation cannot take these counts")
		}
	}
	return nil
}
