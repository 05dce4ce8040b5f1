package a2a

import (
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// Stream is a CUDA stream handle (a CUstream) of the caller's, made by any
// binding or the runtime API of this process in the primary context of the
// Comm's device; 0 is the legacy default stream.
type Stream uintptr

// StreamOps enqueues a Comm's operations on a stream of the caller's; see
// Comm.On. Its operations are the Comm's, on that stream. It is a small
// value: make one per call or keep it.
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

// SendRecvHeads is Comm.SendRecvHeads, enqueued on o's stream.
func (o StreamOps) SendRecvHeads(x Tensor) (Tensor, error) {
	return o.c.one(o.s, ptx.OpSendRecvHeads, 0, x, nil)
}

// SendRecvHeadsInto is Comm.SendRecvHeadsInto, enqueued on o's stream.
func (o StreamOps) SendRecvHeadsInto(dst, x Tensor) error {
	_, err := o.c.one(o.s, ptx.OpSendRecvHeads, 0, x, []Tensor{dst})
	return err
}

// GatherHeads is Comm.GatherHeads, enqueued on o's stream.
func (o StreamOps) GatherHeads(x Tensor) (Tensor, error) {
	return o.c.one(o.s, ptx.OpGatherHeads, 0, x, nil)
}

// GatherHeadsInto is Comm.GatherHeadsInto, enqueued on o's stream.
func (o StreamOps) GatherHeadsInto(dst, x Tensor) error {
	_, err := o.c.one(o.s, ptx.OpGatherHeads, 0, x, []Tensor{dst})
	return err
}

// AllGather is Comm.AllGather, enqueued on o's stream.
func (o StreamOps) AllGather(x Tensor) (Tensor, error) {
	return o.c.one(o.s, ptx.OpAllGather, 0, x, nil)
}

// AllGatherInto is Comm.AllGatherInto, enqueued on o's stream.
func (o StreamOps) AllGatherInto(dst, x Tensor) error {
	_, err := o.c.one(o.s, ptx.OpAllGather, 0, x, []Tensor{dst})
	return err
}

// SendRecvHeadsPacked is Comm.SendRecvHeadsPacked, enqueued on o's stream.
func (o StreamOps) SendRecvHeadsPacked(views, xs []Tensor) error {
	return o.c.packed(o.s, ptx.OpSendRecvHeads, 0, nil, views, xs)
}

// SendRecvHeadsPackedInto is Comm.SendRecvHeadsPackedInto, enqueued on
// o's stream.
func (o StreamOps) SendRecvHeadsPackedInto(dsts, xs []Tensor) error {
	return o.c.packed(o.s, ptx.OpSendRecvHeads, 0, dsts, nil, xs)
}

// GatherHeadsPacked is Comm.GatherHeadsPacked, enqueued on o's stream.
func (o StreamOps) GatherHeadsPacked(heads int, views, xs []Tensor) error {
	return o.c.packed(o.s, ptx.OpGatherHeads, heads, nil, views, xs)
}

// GatherHeadsPackedInto is Comm.GatherHeadsPackedInto, enqueued on o's
// stream.
func (o StreamOps) GatherHeadsPackedInto(heads int, dsts, xs []Tensor) error {
	return o.c.packed(o.s, ptx.OpGatherHeads, heads, dsts, nil, xs)
}

// HeadAllGather is Comm.HeadAllGather, enqueued on o's stream.
func (o StreamOps) HeadAllGather(heads int, x Tensor) (Tensor, error) {
	return o.c.one(o.s, ptx.OpHeadAllGather, heads, x, nil)
}

// HeadAllGatherInto is Comm.HeadAllGatherInto, enqueued on o's stream.
func (o StreamOps) HeadAllGatherInto(heads int, dst, x Tensor) error {
	_, err := o.c.one(o.s, ptx.OpHeadAllGather, heads, x, []Tensor{dst})
	return err
}
