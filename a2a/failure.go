package a2a

import (
	"errors"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// usable returns nil when an operation may be enqueued: not closed (or
// closing), not broken, and connected if needConnect.
func (c *Comm) usable(needConnect bool) error {
	if c.closing {
		return prefixed(ErrClosed)
	}
	if err := c.broken(); err != nil {
		return err
	}
	if needConnect && !c.connected {
		return prefixed(ErrNotConnected)
	}
	return nil
}

// broken returns the Comm's failure (a failure recorded by the device
// counts), or nil. The first failure is returned as itself once, then
// wrapped in ErrBroken.
func (c *Comm) broken() error {
	if c.failure == nil {
		if f := c.failureFromDevice(); f != nil {
			c.failure = f
		}
	}
	if c.failure != nil {
		if !c.reported {
			c.reported = true
			return c.failure
		}
		return &brokenError{first: c.failure}
	}
	return nil
}

// fail records err as the Comm's failure (if it is the first) and returns
// it for the caller to report: later calls get ErrBroken.
func (c *Comm) fail(err error) error {
	if c.failure == nil {
		c.failure = err
		c.reported = true
	}
	return err
}

// failureFromDevice is what the transport says failed on the device, or
// nil (also for a Comm that never got a transport).
func (c *Comm) failureFromDevice() error {
	if c.t == nil {
		return nil
	}
	return c.t.failure()
}

// driverError is a driver failure seen from this package: its text says
// what a2a was doing and keeps the driver's own words, and errors.Is
// matches both the driver error and this package's sentinel for it.
type driverError struct {
	what     string
	sentinel error // ErrNoDriver, ErrNoDevice or nil
	err      error
}

func (e *driverError) Error() string { return "a2a: " + e.what + ": " + e.err.Error() }

func (e *driverError) Unwrap() []error {
	if e.sentinel == nil {
		return []error{e.err}
	}
	return []error{e.sentinel, e.err}
}

// wrapDriver gives a driver error this package's prefix and sentinels.
func wrapDriver(what string, err error) error {
	e := &driverError{what: what, err: err}
	switch {
	case errors.Is(err, driver.ErrNoDriver):
		e.sentinel = ErrNoDriver
	case errors.Is(err, driver.ErrNoDevice):
		e.sentinel = ErrNoDevice
	}
	return e
}
