package cuinterop_test

// gorgonia.org/cu's init exits the process when cuInit fails; gpuguard's
// init runs before it and turns "no GPU" into a skip of the whole binary
// (a failure under ULYSSES_REQUIRE_GPU=1). Every test here needs a GPU:
// the CPU tests of the checks are internal/rule's.
import _ "github.com/ulysses-go/ulysses/cuinterop/internal/gpuguard"
