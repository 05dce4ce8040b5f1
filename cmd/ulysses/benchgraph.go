package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
)

// streamTimer times operations enqueued on a stream of the bench's own, as
// a caller with its own CUDA binding would: back to back through Comm.On,
// and replayed from a CUDA graph (a2a.CaptureGraph), between two device
// events on that stream.
type streamTimer struct {
	ctx        *driver.Context
	stream     driver.Stream
	start, end driver.Event
}

// newStreamTimer makes the stream and events on comm's device.
func newStreamTimer(comm *a2a.Comm) (*streamTimer, error) {
	drv, err := driver.Load()
	if err != nil {
		return nil, err
	}
	ctx, err := drv.RetainPrimaryContext(comm.Device().Info().Ordinal)
	if err != nil {
		return nil, err
	}
	st := &streamTimer{ctx: ctx}
	if st.stream, err = ctx.StreamCreate(true); err == nil {
		if st.start, err = ctx.EventCreate(true); err == nil {
			st.end, err = ctx.EventCreate(true)
		}
	}
	if err != nil {
		return nil, errors.Join(err, st.close())
	}
	return st, nil
}

func (st *streamTimer) close() error {
	var errs []error
	for _, e := range []driver.Event{st.start, st.end} {
		if e != 0 {
			errs = append(errs, st.ctx.EventDestroy(e))
		}
	}
	if st.stream != 0 {
		errs = append(errs, st.ctx.StreamSynchronize(st.stream), st.ctx.StreamDestroy(st.stream))
	}
	return errors.Join(append(errs, st.ctx.Release())...)
}

// time runs enqueue (which puts n operations on the stream) between the
// events, then waits, and returns the device time per operation.
func (st *streamTimer) time(comm *a2a.Comm, n int, enqueue func() error) (time.Duration, error) {
	if err := st.ctx.EventRecord(st.start, st.stream); err != nil {
		return 0, err
	}
	if err := enqueue(); err != nil {
		return 0, err
	}
	if err := st.ctx.EventRecord(st.end, st.stream); err != nil {
		return 0, err
	}
	if err := st.ctx.StreamSynchronize(st.stream); err != nil {
		return 0, err
	}
	if err := comm.Sync(); err != nil {
		return 0, err
	}
	d, err := st.ctx.EventElapsed(st.start, st.end)
	return d / time.Duration(n), err
}

// onStream times iters operations op(i) on the stream, back to back, after
// warmup untimed ones.
func (st *streamTimer) onStream(comm *a2a.Comm, warmup, iters int, op func(on a2a.StreamOps, i int) error) (time.Duration, error) {
	on := comm.On(a2a.Stream(st.stream))
	run := func(n int) func() error {
		return func() error {
			for i := range n {
				if err := op(on, i); err != nil {
					return err
				}
			}
			return nil
		}
	}
	if _, err := st.time(comm, max(warmup, 1), run(max(warmup, 1))); err != nil {
		return 0, err
	}
	return st.time(comm, iters, run(iters))
}

// graphsPerCapture is how many operations each timed graph holds: an even
// number, so CaptureGraph adds none.
const graphsPerCapture = 2

// replayed captures graphsPerCapture operations op(0), op(1) into a graph
// and times iters/graphsPerCapture replays of it, after warmup untimed
// ones; it returns the time per operation.
func (st *streamTimer) replayed(comm *a2a.Comm, warmup, iters int, op func(on a2a.StreamOps, i int) error) (time.Duration, error) {
	on := comm.On(a2a.Stream(st.stream))
	g, err := a2a.CaptureGraph(a2a.Stream(st.stream), func() error {
		for i := range graphsPerCapture {
			if err := op(on, i); err != nil {
				return err
			}
		}
		return nil
	}, comm)
	if err != nil {
		return 0, err
	}
	defer g.Close()
	replays := func(n int) func() error {
		return func() error {
			for range n {
				if err := g.Launch(a2a.Stream(st.stream)); err != nil {
					return err
				}
			}
			return nil
		}
	}
	w := max(warmup/graphsPerCapture, 1)
	if _, err := st.time(comm, w*graphsPerCapture, replays(w)); err != nil {
		return 0, err
	}
	n := max(iters/graphsPerCapture, 1)
	return st.time(comm, n*graphsPerCapture, replays(n))
}

// streamOpFunc is opFunc through a StreamOps.
func streamOpFunc(op benchOp, xs, ys []a2a.Tensor) func(on a2a.StreamOps, i int) error {
	n := len(xs)
	switch op {
	case opSendRecvHeads:
		return func(on a2a.StreamOps, i int) error { _, err := on.SendRecvHeads(xs[i%n]); return err }
	case opGatherHeads:
		return func(on a2a.StreamOps, i int) error { _, err := on.GatherHeads(ys[i%n]); return err }
	default:
		return func(on a2a.StreamOps, i int) error { _, err := on.AllGather(xs[i%n]); return err }
	}
}

// timeStreamAndGraph fills in s's caller-stream and graph-replay times of op.
func timeStreamAndGraph(st *streamTimer, comm *a2a.Comm, o *benchOpts, op benchOp, xs, ys []a2a.Tensor, s *opStats) error {
	fn := streamOpFunc(op, xs, ys)
	d, err := st.onStream(comm, o.warmup, o.iters, fn)
	if err != nil {
		return fmt.Errorf("%s on a caller's stream: %w", op, err)
	}
	s.Stream = float64(d) / float64(time.Microsecond)
	if d, err = st.replayed(comm, o.warmup, o.iters, fn); err != nil {
		return fmt.Errorf("%s replayed from a graph: %w", op, err)
	}
	s.Graph = float64(d) / float64(time.Microsecond)
	return nil
}
