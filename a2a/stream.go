package a2a

import "github.com/ulysses-go/ulysses/internal/driver"

// StreamOps' operations are the Comm's (ops.go) on another stream,
// written from them into stream_ops.go:
//
//go:generate go run ../gen/twins

// Stream is a CUDA stream handle (a CUstream) of the caller's, made by any
// binding or the runtime API of this process in the primary context of the
// Comm's device; 0 is the legacy default stream.
type Stream uintptr

// StreamOps enqueues a Comm's operations on a stream of the caller's; see
// Comm.On. Its operations are the Comm's, on that stream (stream_ops.go,
// generated from ops.go). It is a small value: make one per call or keep
// it.
type StreamOps struct {
	c *Comm
	s driver.Stream
}

// On returns the Comm's operations enqueued on s instead of the Comm's own
// stream, so that they run between the caller's kernels with no host
// synchronisation: an operation on s reads its input after the work
// queued on s before it, and work queued on s after it sees its complete
// output (view or Into destination). The Comm keeps its operations in
// order across streams: an operation on another stream than the previous
// one waits for it (one cuEventRecord and one cuStreamWaitEvent on the
// switch; on a caller's stream, a cuStreamIsCapturing before and one
// cuEventRecord after each operation). No allocation, no host wait. On a
// stream being captured the operations are captured instead (see Graph).
//
// A view stays valid, and Comm.Buffer the caller's, until the next
// operation of the Comm starts on the device. The ranks' operations of one
// collective run concurrently, so two Comms of one group (NewGroup) must
// not use the same stream for it. Sync and Close wait for the operations
// on every stream used.
func (c *Comm) On(s Stream) StreamOps { return StreamOps{c: c, s: driver.Stream(s)} }
