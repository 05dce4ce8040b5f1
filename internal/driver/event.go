package driver

import (
	"time"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Event is a CUevent.
type Event uintptr

// eventDisableTiming is CU_EVENT_DISABLE_TIMING.
const eventDisableTiming = 0x2

// EventCreate creates an event in c (cuEventCreate). Events without timing
// are cheaper to record and wait on.
func (c *Context) EventCreate(timing bool) (Event, error) {
	var flags uintptr = eventDisableTiming
	if timing {
		flags = 0
	}
	if err := c.enter(); err != nil {
		return 0, err
	}
	var e Event
	r, _, _ := purego.SyscallN(c.d.fn.eventCreate, uintptr(unsafe.Pointer(&e)), flags)
	c.leave()
	return e, c.d.check("cuEventCreate", r)
}

// EventRecord enqueues e on stream s (cuEventRecord). Allocation-free.
func (c *Context) EventRecord(e Event, s Stream) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.eventRecord, uintptr(e), uintptr(s))
	c.leave()
	return c.d.check("cuEventRecord", r)
}

// EventSynchronize blocks until the work before e's last record is done
// (cuEventSynchronize).
func (c *Context) EventSynchronize(e Event) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.eventSynchronize, uintptr(e))
	c.leave()
	return c.d.check("cuEventSynchronize", r)
}

// EventDone reports, without blocking, whether the work before e's last
// record is done (cuEventQuery: CUDA_SUCCESS is true, CUDA_ERROR_NOT_READY
// false). An event never recorded is done. Allocation-free.
func (c *Context) EventDone(e Event) (bool, error) {
	if err := c.enter(); err != nil {
		return false, err
	}
	r := c.d.call(c.d.fn.eventQuery, uintptr(e))
	c.leave()
	if resultOf(r) == ErrorNotReady {
		return false, nil
	}
	if err := c.d.check("cuEventQuery", r); err != nil {
		return false, err
	}
	return true, nil
}

// StreamWaitEvent makes the work enqueued on s after this call wait until
// the work before e's last record is done (cuStreamWaitEvent); the host
// does not wait. s and e may belong to different streams of the context.
// Allocation-free.
func (c *Context) StreamWaitEvent(s Stream, e Event) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.streamWaitEvent, uintptr(s), uintptr(e), 0)
	c.leave()
	return c.d.check("cuStreamWaitEvent", r)
}

// EventElapsed returns the GPU time between two completed timing events
// (cuEventElapsedTime_v2, else cuEventElapsedTime; about 0.5 µs
// resolution).
func (c *Context) EventElapsed(start, end Event) (time.Duration, error) {
	if err := c.enter(); err != nil {
		return 0, err
	}
	var ms float32
	r, _, _ := purego.SyscallN(c.d.fn.eventElapsedTime, uintptr(unsafe.Pointer(&ms)), uintptr(start), uintptr(end))
	c.leave()
	if err := c.d.check(c.d.fn.eventElapsedTimeName, r); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// EventDestroy destroys e (cuEventDestroy_v2).
func (c *Context) EventDestroy(e Event) error {
	if err := c.enter(); err != nil {
		return err
	}
	r := c.d.call(c.d.fn.eventDestroy, uintptr(e))
	c.leave()
	return c.d.check("cuEventDestroy_v2", r)
}
