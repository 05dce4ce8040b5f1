package a2a

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/timing"
)

func init() {
	timing.Install(func(comm any, s uintptr, n int, op func(int) error, each bool) ([]time.Duration, error) {
		c, ok := comm.(*Comm)
		if !ok || c == nil {
			return nil, fmt.Errorf("a2a: timing %T, not a Comm: %w", comm, ErrConfig)
		}
		return c.timeEvents(n, op, each, driver.Stream(s))
	})
}

// timeEvents runs op n times between device events on stream s (ownStream
// or the caller's): one after each operation when each is true (n
// durations), else one at each end (one). internal/timing is its face,
// for the bench: the public API carries no timing.
func (c *Comm) timeEvents(n int, op func(i int) error, each bool, s driver.Stream) ([]time.Duration, error) {
	if n < 1 {
		return nil, fmt.Errorf("a2a: timing %d operations: %w", n, ErrConfig)
	}
	c.mu.Lock()
	err := c.usable(true)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// op runs outside the Comm's lock and may close it: hold a context
	// reference of our own so the events can still be destroyed then.
	ctx, err := c.dev.drv.RetainPrimaryContext(c.dev.ctx.Ordinal())
	if err != nil {
		return nil, api.WrapDriver("retaining the context", err)
	}
	defer ctx.Release()
	count := 2
	if each {
		count = n + 1
	}
	events, err := newEvents(ctx, count)
	defer destroyEvents(ctx, events)
	if err != nil {
		return nil, err
	}
	if err := c.recordEvent(ctx, events[0], s); err != nil {
		return nil, err
	}
	for i := 0; i < n; i++ {
		if err := op(i); err != nil {
			return nil, err
		}
		if each || i == n-1 {
			if err := c.recordEvent(ctx, events[min(i+1, count-1)], s); err != nil {
				return nil, err
			}
		}
	}
	if err := c.Sync(); err != nil {
		return nil, err
	}
	return elapsed(ctx, events, c.cfg.timeout())
}

// newEvents makes count timing events; the ones made stay in the slice
// even on an error, for destroyEvents.
func newEvents(ctx *driver.Context, count int) ([]driver.Event, error) {
	events := make([]driver.Event, 0, count)
	for range count {
		e, err := ctx.EventCreate(true)
		if err != nil {
			return events, api.WrapDriver("creating events", err)
		}
		events = append(events, e)
	}
	return events, nil
}

func destroyEvents(ctx *driver.Context, events []driver.Event) {
	for _, e := range events {
		ctx.EventDestroy(e)
	}
}

// recordEvent records e on s (ownStream: the Comm's), unless the Comm is
// closing.
func (c *Comm) recordEvent(ctx *driver.Context, e driver.Event, s driver.Stream) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return api.Prefixed(ErrClosed)
	}
	if s == ownStream {
		s = c.stream
	}
	if err := ctx.EventRecord(e, s); err != nil {
		return api.WrapDriver("recording an event", err)
	}
	return nil
}

// elapsed waits for the last event and returns the times between
// consecutive ones. On a caller's stream the last event comes after the
// Comm's last operation, which is all Sync waits for, so it is done at
// once or nearly; it is still polled against timeout, never waited for in
// the driver, so that nothing here can hang (over NCCL in particular).
func elapsed(ctx *driver.Context, events []driver.Event, timeout time.Duration) ([]time.Duration, error) {
	last, deadline := events[len(events)-1], time.Now().Add(timeout)
	for {
		done, err := ctx.EventDone(last)
		if err != nil {
			return nil, api.WrapDriver("waiting for the last event", err)
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("a2a: the last timing event not done %v after the operations: %w", timeout, ErrTimeout)
		}
		time.Sleep(20 * time.Microsecond)
	}
	times := make([]time.Duration, len(events)-1)
	for i := range times {
		d, err := ctx.EventElapsed(events[i], events[i+1])
		if err != nil {
			return nil, api.WrapDriver("reading events", err)
		}
		times[i] = d
	}
	return times, nil
}
