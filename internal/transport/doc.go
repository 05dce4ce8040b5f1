// Package transport is the seam between a Comm and what moves its bytes:
// the Transport interface the IPC (transport/ipc) and NCCL
// (transport/nccl) transports implement, the Env they are built from, the
// LaunchSpec of each operation, and the box copy both use.
package transport
