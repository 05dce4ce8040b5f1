// Package transport is the seam between a Comm and what moves its bytes:
// the Transport interface the IPC (transport/ipc) and NCCL
// (transport/nccl) transports implement, the registry of their factories
// by kind (Register, New), the Env they are built from, the LaunchSpec of
// each operation, and what both use: the box copy, the kernel argument's
// shared parts, the launch.
package transport
