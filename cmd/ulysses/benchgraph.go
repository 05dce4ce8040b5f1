package main

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/timing"
)

// timeStreamAndGraph fills in st's caller-stream and graph-replay times of
// op: back to back on a stream of the bench's own (Comm.On), as a caller
// with its own CUDA binding would enqueue them, and replayed from a CUDA
// graph of o.graphOps operations (an even count, so CaptureGraph adds
// none; not over NCCL, whose operations cannot be captured), each after
// warm-up runs.
func timeStreamAndGraph(comm *a2a.Comm, s a2a.Stream, o *benchOpts, op benchOp, in benchInputs, st *opStats) error {
	on := comm.On(s)
	fn := opFunc(on, op, in)
	d, err := warmTimed(comm, s, o.warmup, o.iters, fn)
	if err != nil {
		return fmt.Errorf("%s on a caller's stream: %w", op, err)
	}
	st.Stream = float64(d) / float64(time.Microsecond)
	if comm.Transport() == a2a.TransportNCCL {
		return nil // its operations cannot be captured: no graph row
	}
	g, err := a2a.CaptureGraph(s, func() error {
		for i := range o.graphOps {
			if err := fn(i); err != nil {
				return err
			}
		}
		return nil
	}, comm)
	if err != nil {
		return fmt.Errorf("%s captured into a graph: %w", op, err)
	}
	defer g.Close()
	replay := func(int) error { return g.Launch(s) }
	d, err = warmTimed(comm, s, o.warmup/o.graphOps, o.iters/o.graphOps, replay)
	if err != nil {
		return fmt.Errorf("%s replayed from a graph: %w", op, err)
	}
	st.Graph = float64(d) / float64(o.graphOps) / float64(time.Microsecond)
	return nil
}

// warmTimed runs warmup untimed calls of fn on comm's stream s, then
// returns the mean device time of iters more, back to back (at least one
// of each).
func warmTimed(comm *a2a.Comm, s a2a.Stream, warmup, iters int, fn func(int) error) (time.Duration, error) {
	if _, err := timing.BackToBack(comm, uintptr(s), max(warmup, 1), fn); err != nil {
		return 0, err
	}
	return timing.BackToBack(comm, uintptr(s), max(iters, 1), fn)
}
