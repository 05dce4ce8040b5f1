// Package device is what every Comm of the process shares on one GPU
// (Share): its primary context, the kernels (machine code loaded whole
// with the first Comm there, or PTX by family: code.go, modules.go,
// load.go), the launch gate, and the graveyard of the driver calls that
// wait for the whole device, which run only when no Comm there has work
// queued. And the registry of the Comms' buffers (buffers.go), which
// keeps a buffer until its owner and every Comm of the process that maps
// it have let go. Why: docs/DESIGN.md, "What waits for what". It knows
// nothing of collectives.
package device
