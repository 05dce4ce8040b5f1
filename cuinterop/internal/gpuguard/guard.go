// Package gpuguard lets a test binary that imports gorgonia.org/cu skip
// on a machine without a usable GPU instead of dying: gorgonia.org/cu's
// init calls cuInit and, when it fails, exits the process with status 1
// before any test or TestMain runs.
//
// Imported (blank) by such a test package, its init runs first: Go
// initialises packages in import-path order among those whose imports
// are initialised (the spec, since Go 1.21); this path sorts before
// gorgonia.org/cu and its imports (fmt, os, cgo's) are among
// gorgonia.org/cu's own. When cuInit says there is no device, or that
// libcuda.so.1 is NVIDIA's link stub, it prints a skip and ends the
// binary with status 0, or with status 1 under ULYSSES_REQUIRE_GPU=1 (GPU
// runs set it, so that they cannot pass by skipping). Any other cuInit
// failure ends it with status 1. Without libcuda.so.1 at all the dynamic
// loader refuses to start the binary before this can run.
package gpuguard

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
import "C"

import (
	"fmt"
	"os"
)

// envRequireGPU is the main module's testutil.EnvRequireGPU.
const envRequireGPU = "ULYSSES_REQUIRE_GPU"

func init() {
	r := C.cuInit(0)
	if r == C.CUDA_SUCCESS {
		return
	}
	why := fmt.Sprintf("cuInit: %s (%d)", name(r), int(r))
	switch {
	case !noGPU(r):
		fmt.Printf("FAIL: the CUDA driver is broken: %s\n", why)
		os.Exit(1)
	case os.Getenv(envRequireGPU) == "1":
		fmt.Printf("FAIL: %s=1 but there is no usable GPU: %s\n", envRequireGPU, why)
		os.Exit(1)
	}
	fmt.Printf("--- SKIP: every test of this binary: no usable GPU (%s); gorgonia.org/cu cannot start without one\nPASS\n", why)
	os.Exit(0)
}

// noGPU reports whether cuInit's result means this machine has no GPU to
// run on, rather than a broken driver: no device (as the main module's
// ErrNoDevice: also an invalid one), or the link stub instead of a driver.
func noGPU(r C.CUresult) bool {
	return r == C.CUDA_ERROR_NO_DEVICE || r == C.CUDA_ERROR_INVALID_DEVICE || r == C.CUDA_ERROR_STUB_LIBRARY
}

// name is the driver's name of r; the stub names nothing.
func name(r C.CUresult) string {
	var s *C.char
	switch {
	case C.cuGetErrorName(r, &s) == C.CUDA_SUCCESS && s != nil:
		return C.GoString(s)
	case r == C.CUDA_ERROR_STUB_LIBRARY:
		return "CUDA_ERROR_STUB_LIBRARY"
	}
	return "CUresult"
}
