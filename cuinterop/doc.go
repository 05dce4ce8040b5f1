// Package cuinterop hands memory and streams of gorgonia.org/cu to the
// operations of github.com/ulysses-go/ulysses/a2a: a cu.DevicePtr with a
// shape and dtype becomes an a2a.Tensor (Tensor, StridedTensor), a
// cu.Stream the stream Comm.On takes (Stream), and an operation's output a
// cu.DevicePtr again (DevicePtr).
//
// It is a module of its own because gorgonia.org/cu needs cgo, cuda.h and
// libcuda to build; the ulysses module itself needs nothing but Go.
//
// # Contexts
//
// a2a runs in each device's primary context, the one the CUDA runtime and
// most bindings share. Memory and streams must be of that context:
// gorgonia's cu.NewContext and Device.MakeContext make new contexts, whose
// pointers are not valid in it. Tensor and Stream ask the driver and refuse
// anything of another context with an error matching ErrNotPrimaryContext
// that names the context to use, before anything is enqueued. Use the
// primary context instead:
//
//	pctx, err := cu.Device(0).RetainPrimaryCtx() // cu.Device(0).ReleasePrimaryCtx() when done
//	err = pctx.Lock()                            // this goroutine's OS thread, pctx current on it
//	mem, err := cu.MemAlloc(bytes)
//	s, err := cu.MakeStream(cu.NonBlocking)
//	x, err := cuinterop.Tensor(mem, [4]int{b, t, h, d}, a2a.BFloat16)
//	stream, err := cuinterop.Stream(s)
//	q, err := comm.On(stream).SendRecvHeads(x) // after the work on s, no host wait
//
// a2a's calls leave the calling thread's current context as they found
// it (they push their device's primary context and pop it), so gorgonia's
// calls that use the current context (cu.MemAlloc, cu.MakeStream, ...)
// find the caller's after them. A goroutine that drives several devices
// still makes each device's context current before its gorgonia calls
// (cu.SetCurrentContext), as with gorgonia alone.
//
// # Costs
//
// Tensor and Stream each make one cgo call of a few driver calls (their
// docs list them): no synchronisation, nothing enqueued, cheap enough per
// step. DevicePtr makes none.
//
// # Without a GPU
//
// gorgonia.org/cu's init exits a program that imports it (this package
// does) where cuInit fails, so nothing here runs without a GPU. The tests
// skip there instead, through internal/gpuguard, and fail under
// ULYSSES_REQUIRE_GPU=1; internal/rule holds the checks' logic, tested on
// any machine.
package cuinterop
