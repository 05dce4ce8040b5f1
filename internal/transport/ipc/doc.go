// Package ipc is the transport over CUDA IPC on one host: each operation
// is one kernel of gen/kernels whose blocks store straight into the
// peers' buffers and signal them (or, with the copy-engine mover, the
// copy engines' copies and a one-block barrier), the peers' buffers mapped
// over CUDA IPC or, within one process, by pointer with peer access. It
// holds the kernels' by-value argument, the pinned status word the
// kernels report failures in, and the live token table captured
// operations read. The protocol: docs/DESIGN.md.
package ipc
