package api

import (
	"errors"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

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

// WrapDriverAs is WrapDriver for a driver error that means sentinel
// here (an IPC handle the driver calls invalid is a bad handle): errors.Is
// matches both.
func WrapDriverAs(what string, sentinel, err error) error {
	return &driverError{what: what, sentinel: sentinel, err: err}
}

// WrapDriver gives a driver error this package's prefix and sentinels.
func WrapDriver(what string, err error) error {
	e := &driverError{what: what, err: err}
	switch {
	case errors.Is(err, driver.ErrNoDriver):
		e.sentinel = ErrNoDriver
	case errors.Is(err, driver.ErrNoDevice):
		e.sentinel = ErrNoDevice
	}
	return e
}

// ncclError is an NCCL failure seen from this package: its text says what
// a2a was doing and keeps NCCL's (or the dynamic loader's) words, and
// errors.Is matches both the binding's error and ErrNoNCCL where NCCL
// could not be loaded, ErrNCCL otherwise.
type ncclError struct {
	what     string
	sentinel error // ErrNoNCCL or ErrNCCL
	err      error
}

func (e *ncclError) Error() string { return "a2a: " + e.what + ": " + e.err.Error() }

func (e *ncclError) Unwrap() []error { return []error{e.sentinel, e.err} }

// WrapNCCL gives an error of internal/nccl this package's prefix, and
// ErrNoNCCL when the library is missing or too old, ErrNCCL otherwise.
func WrapNCCL(what string, err error) error {
	e := &ncclError{what: what, err: err, sentinel: ErrNCCL}
	if errors.Is(err, nccl.ErrNoNCCL) || errors.Is(err, nccl.ErrSymbolMissing) {
		e.sentinel = ErrNoNCCL
	}
	return e
}
