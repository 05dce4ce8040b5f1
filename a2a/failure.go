package a2a

import "github.com/ulysses-go/ulysses/internal/api"

// usable returns nil when an operation may be enqueued: not closed (or
// closing), not broken, and connected if needConnect.
func (c *Comm) usable(needConnect bool) error {
	if c.closing {
		return api.Prefixed(ErrClosed)
	}
	if err := c.broken(); err != nil {
		return err
	}
	if needConnect && c.t == nil {
		return api.Prefixed(ErrNotConnected)
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
		return api.Broken(c.failure)
	}
	return nil
}

// fail records err as the Comm's failure (if it is the first) and returns
// it for the caller to report: later calls get ErrBroken. A transport's
// failure type becomes a2a's here (publicError).
func (c *Comm) fail(err error) error {
	err = publicError(err)
	if c.failure == nil {
		c.failure = err
		c.reported = true
	}
	return err
}

// failureFromDevice is what the transport says failed on the device, as
// a2a's error types (publicError), or nil (also for a Comm that never got
// a transport).
func (c *Comm) failureFromDevice() error {
	if c.t == nil {
		return nil
	}
	return publicError(c.t.Failure())
}
