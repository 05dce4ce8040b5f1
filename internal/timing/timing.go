// Package timing times a Comm's operations with device events, for the
// bench (cmd/ulysses) and the tests. What it measures needs the Comm's own
// stream and lock, so package a2a installs the implementation when it is
// loaded, and its public API carries none of it.
package timing

import (
	"errors"
	"time"
)

// Own stands for the Comm's own stream where a stream is asked for.
const Own = ^uintptr(0)

// events runs op n times between device events on stream: one after each
// operation when each is true (n durations), else one at each end (one).
var events func(comm any, stream uintptr, n int, op func(i int) error, each bool) ([]time.Duration, error)

// Install sets the implementation; package a2a calls it from its init.
func Install(f func(comm any, stream uintptr, n int, op func(i int) error, each bool) ([]time.Duration, error)) {
	events = f
}

var errNotInstalled = errors.New("timing: package a2a is not loaded")

// Ops enqueues op(0), ..., op(n-1) back to back on the Comm's own stream
// (comm is an *a2a.Comm), with a device event before the first and after
// each one, waits for them, and returns each operation's device time.
// op must enqueue on that Comm. It costs n+1 events, made and destroyed
// here.
func Ops(comm any, n int, op func(i int) error) ([]time.Duration, error) {
	if events == nil {
		return nil, errNotInstalled
	}
	return events(comm, Own, n, op, true)
}

// BackToBack enqueues op(0), ..., op(n-1) back to back between two device
// events on stream (Own, or a caller's stream op enqueues on through
// Comm.On or a Graph's Launch) and returns the mean time per operation:
// what a caller issuing operations one after another sees. It costs two
// events.
func BackToBack(comm any, stream uintptr, n int, op func(i int) error) (time.Duration, error) {
	if events == nil {
		return 0, errNotInstalled
	}
	times, err := events(comm, stream, n, op, false)
	if err != nil {
		return 0, err
	}
	return times[0] / time.Duration(n), nil
}
