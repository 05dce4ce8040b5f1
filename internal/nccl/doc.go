// Package nccl binds NCCL (libnccl.so.2) at run time with purego, the way
// internal/driver binds the CUDA driver: building needs nothing but Go,
// and a process that never asks for NCCL never loads it. It binds only
// what a transport over NCCL needs: the version, unique ids, a
// non-blocking communicator (init, async error, abort, destroy), grouped
// send and receive, and all-gather; and, where the loaded NCCL has them
// (Library.Has, by version and symbol), ncclMemAlloc, memory windows,
// ncclAlltoAll and the CTA policy of a 2.28 config (features.go). It
// knows nothing of collectives.
//
// NCCL uses the calling thread's current CUDA context (the device's
// primary context, as the rest of this module): make it current around
// InitRank and the operations (driver.Context.Do). Communicators are made
// non-blocking, so that no call waits on a peer: InitRank returns nil
// with the init in progress, GroupEnd an error matching InProgress while
// NCCL's thread puts the group on the stream (Comm.Wait or AsyncError
// polls either), and a caller that gives up calls Abort.
// Every call but the hot ones allocates a little (purego); Send, Recv
// and AllGather allocate one small argument block each.
//
// The stub library internal/fakenccl stands in for NCCL in the tests.
package nccl
