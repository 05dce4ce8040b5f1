// Package driver is the only code in ulysses that talks to the CUDA driver
// (libcuda.so.1). It loads the library at run time with purego, so the
// program builds with CGO_ENABLED=0 and needs neither the CUDA toolkit nor a
// C compiler, and exposes typed Go calls for the handful of driver entry
// points the rest of the project needs: devices, primary contexts, memory,
// IPC handles, modules, streams, events and kernel launches.
//
// Load opens libcuda.so.1 through the dynamic loader's search path, or the
// library named by the environment variable ULYSSES_LIBCUDA when it is set
// and non-empty: tests point it at a stub driver (internal/fakecuda builds
// one), and users at a driver installed in an unusual place. It is read
// once, by the first Load.
//
// The package knows nothing about collectives. Every error it returns starts
// with "driver: "; failing driver calls are reported as *Error, and the
// sentinels ErrNoDriver, ErrNoDevice and ErrSymbolMissing classify the
// conditions callers usually branch on.
//
// Context methods lock the calling goroutine to its OS thread and make the
// context current for the duration of the call, so they may be called from
// any goroutine. The context is left current on that thread afterwards; this
// package never relies on which context is current between calls.
package driver
