package a2a

import (
	"fmt"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// capturedOp is what a captured operation needs of every later token
// layout: its replays read the counts SetRankTokens sets then, so each new
// layout must still fit the input the capture froze (and the buffer).
type capturedOp struct {
	req   plan.Request // as captured: its inputs' token dimension is the most a replay may use
	half  uint32       // the data half it writes at every replay
	graph *Graph       // the CaptureGraph that holds it; nil for a capture of the caller's
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

// enqueueCaptured records a captured operation: it is not run now, and
// orders nothing on other streams (the graph does, when launched).
func (c *Comm) enqueueCaptured(r plan.Request, p plan.Plan, views []Tensor, ls tp.LaunchSpec, out driver.DevicePtr) (Tensor, error) {
	if err := c.t.RefreshCaptured(); err != nil {
		return Tensor{}, err
	}
	if err := c.t.Enqueue(p, ls); err != nil {
		return Tensor{}, api.Wrap(err, "capturing %s", r.Op) // the capture fails, not the Comm
	}
	c.launches++
	c.captured = append(c.captured, capturedOp{req: r, half: ls.Half})
	return outputViews(p, out, c.cfg.DType, views), nil
}

// checkCaptured checks new token counts against every captured operation
// that may still replay: its input must hold them, and its output fit. It
// plans each kept request again, which reads its inputs as checked when
// it was captured.
func (c *Comm) checkCaptured(ts plan.Tokens) error {
	for _, co := range c.captured {
		if need, ok := co.req.Fits(ts, c.cfg.Rank); !ok {
			return fmt.Errorf("a2a: a captured %s reads its input %v, which holds %d tokens; these counts need %d: %w",
				co.req.Op, co.req.Xs[0], co.req.Xs[0].Shape[1], need, ErrCapacity)
		}
		if _, err := plan.Make(co.req, c.env, ts, co.half); err != nil {
			return api.Wrap(err, "a captured operation cannot take these counts")
		}
	}
	return nil
}
