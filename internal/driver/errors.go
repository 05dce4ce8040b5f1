package driver

import (
	"errors"
	"strconv"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrNoDriver: libcuda.so.1 could not be loaded (no NVIDIA driver).
	ErrNoDriver = errors.New("CUDA driver not available")
	// ErrNoDevice: the driver loaded but sees no usable CUDA device.
	ErrNoDevice = errors.New("no CUDA device")
	// ErrSymbolMissing: the loaded driver lacks an entry point (too old).
	ErrSymbolMissing = errors.New("CUDA driver symbol missing")
)

// Error is a failed driver call: the entry point, its CUresult and the
// driver's own name and description of that code. Log holds the JIT
// compiler's error log when a module failed to load.
type Error struct {
	Call        string // driver entry point, e.g. "cuMemAlloc_v2"
	Code        Result // CUresult the call returned
	Name        string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Description string // e.g. "out of memory"
	Log         string // JIT error log, if any
}

// Error formats as "driver: <call>: <NAME> (<code>): <description>", followed
// by a newline and the JIT log when there is one.
func (e *Error) Error() string {
	name := e.Name
	if name == "" {
		name = e.Code.String()
	}
	s := "driver: " + e.Call + ": " + name + " (" + strconv.Itoa(int(e.Code)) + ")"
	if e.Description != "" {
		s += ": " + e.Description
	}
	if e.Log != "" {
		s += "\n" + e.Log
	}
	return s
}

// Is reports ErrorNoDevice and ErrorInvalidDevice as ErrNoDevice; no other
// code matches a sentinel.
func (e *Error) Is(target error) bool {
	return target == ErrNoDevice && (e.Code == ErrorNoDevice || e.Code == ErrorInvalidDevice)
}

// IsCode reports whether err is, or wraps, an *Error with the given code.
func IsCode(err error, code Result) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// check turns the raw return of a driver call into nil or an *Error named
// after call. It allocates only on failure.
func (d *Driver) check(call string, r1 uintptr) error {
	code := resultOf(r1)
	if code == Success {
		return nil
	}
	return d.newError(call, code)
}

// newError builds the *Error for a failed call, asking the driver for the
// code's name and description when it can.
func (d *Driver) newError(call string, code Result) *Error {
	e := &Error{Call: call, Code: code}
	if d != nil {
		e.Name = d.ErrorName(code)
		e.Description = d.ErrorString(code)
	} else {
		e.Name = code.String()
	}
	return e
}
