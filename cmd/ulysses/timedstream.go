package main

import (
	"time"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// timedStream is a stream of the bench's own in ctx with two events that
// time the work enqueued between them (the burn kernel, the peer copies).
type timedStream struct {
	ctx        *driver.Context
	stream     driver.Stream
	start, end driver.Event
}

// open makes the stream and the events in ctx, recording their undoing in
// undo.
func (ts *timedStream) open(ctx *driver.Context, undo *undoList) error {
	ts.ctx = ctx
	var err error
	if ts.stream, err = ctx.StreamCreate(true); err != nil {
		return err
	}
	undo.add(func() error { return ctx.StreamDestroy(ts.stream) })
	for _, e := range []*driver.Event{&ts.start, &ts.end} {
		if *e, err = ctx.EventCreate(true); err != nil {
			return err
		}
		ev := *e
		undo.add(func() error { return ctx.EventDestroy(ev) })
	}
	return nil
}

// enqueue records the start event, work (which enqueues on ts.stream)
// and the end event, without waiting.
func (ts *timedStream) enqueue(work func() error) error {
	if err := ts.ctx.EventRecord(ts.start, ts.stream); err != nil {
		return err
	}
	if err := work(); err != nil {
		return err
	}
	return ts.ctx.EventRecord(ts.end, ts.stream)
}

// elapsed waits for the end event and returns the device time from the
// start event to it.
func (ts *timedStream) elapsed() (time.Duration, error) {
	if err := ts.ctx.EventSynchronize(ts.end); err != nil {
		return 0, err
	}
	return ts.ctx.EventElapsed(ts.start, ts.end)
}
