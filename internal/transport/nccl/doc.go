// Package nccl is the transport over NCCL, for GPUs that CUDA IPC cannot
// reach (other hosts, no peer access): each operation is the copy-engine
// boxes of package plan sent and received with NCCL's grouped point to
// point calls, packed into and out of staging where a box is not
// contiguous on one side. NCCL has no timeout: waits poll against a
// deadline and abort the communicator past it. The binding to libnccl is
// internal/nccl, imported here as binding.
package nccl
