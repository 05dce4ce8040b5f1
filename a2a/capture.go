package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// capturedOp is what a captured operation needs of every later token
// layout: its replays read the counts SetRankTokens sets then, so each new
// layout must still fit the input the capture froze (and the buffer).
type capturedOp struct {
	op    ptx.Op
	input Tensor // as captured: its token dimension is the most a replay may use
	graph *Graph // the CaptureGraph that holds it; nil for a capture of the caller's
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
	if op == ptx.OpGatherHeads {
		return ts.total()
	}
	return ts.counts[c.cfg.Rank]
}

// capturedInput is x as the operation reads it now: a captured input's
// token dimension is the most tokens any replay may use, of which the
// current counts use the first ones.
func (c *Comm) capturedInput(op ptx.Op, x Tensor) (Tensor, error) {
	n := c.tokensOf(op, c.tokens)
	if x.Shape[1] < n {
		return Tensor{}, fmt.Errorf("a2a: captured %s input %v holds %d tokens, the counts need %d: %w", op, x, x.Shape[1], n, ErrTokens)
	}
	x.Shape[1] = n
	return x, nil
}

// enqueueCaptured records a captured operation: it is not run now, and
// orders nothing on other streams (the graph does, when launched).
func (c *Comm) enqueueCaptured(op ptx.Op, p opPlan, planned, x Tensor, ls launchSpec, out driver.DevicePtr) (Tensor, error) {
	if err := c.t.refreshCaptured(); err != nil {
		return Tensor{}, err
	}
	if err := c.t.enqueue(op, p, planned, ls); err != nil {
		return Tensor{}, wrapErr(err, "capturing %s", op) // the capture fails, not the Comm
	}
	c.launches++
	c.captured = append(c.captured, capturedOp{op: op, input: x})
	return Tensor{Ptr: uintptr(out), Shape: p.out, DType: c.cfg.DType}, nil
}

// checkCaptured checks new token counts against every captured operation
// that may still replay: its input must hold them, and its output fit.
func (c *Comm) checkCaptured(ts tokenSet) error {
	for _, co := range c.captured {
		n := c.tokensOf(co.op, ts)
		if n > co.input.Shape[1] {
			return fmt.Errorf("a2a: a captured %s reads its input %v, which holds %d tokens; these counts need %d: %w",
				co.op, co.input, co.input.Shape[1], n, ErrCapacity)
		}
		x := co.input
		x.Shape[1] = n
		if _, err := planOp(co.op, x, c.cfg.DType, c.cfg.Rank, c.cfg.WorldSize, ts, c.layout.dataBytes, c.t.widths()); err != nil {
			return wrapErr(err, "a captured operation cannot take these counts")
		}
	}
	return nil
}
