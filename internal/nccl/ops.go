package nccl

// DataType is an ncclDataType_t.
type DataType int32

// The data types the binding passes on.
const (
	Int8       DataType = 0
	Uint8      DataType = 1
	Float16    DataType = 6
	BFloat16   DataType = 9
	Float8E4M3 DataType = 10
	Float8E5M2 DataType = 11
)

// GroupStart opens a group of operations that NCCL runs together
// (ncclGroupStart): every Send and Recv of one exchange goes in one.
func (l *Library) GroupStart() error {
	return l.check("ncclGroupStart", 0, l.call(l.fn.groupStart))
}

// GroupEnd closes the group and enqueues its work (ncclGroupEnd). On a
// non-blocking communicator it may return an error matching InProgress:
// the work is being set up; Comm.Wait it.
func (l *Library) GroupEnd() error {
	return l.check("ncclGroupEnd", 0, l.call(l.fn.groupEnd))
}

// Send enqueues count elements of dt at buf (device memory) to peer on
// stream (a CUstream; 0 is the legacy default stream), inside a group.
func (c *Comm) Send(buf uintptr, count uint64, dt DataType, peer int, stream uintptr) error {
	return c.l.check("ncclSend", c.h, c.l.call(c.l.fn.send, buf, uintptr(count), uintptr(dt), uintptr(peer), c.h, stream))
}

// Recv enqueues receiving count elements of dt from peer into buf.
func (c *Comm) Recv(buf uintptr, count uint64, dt DataType, peer int, stream uintptr) error {
	return c.l.check("ncclRecv", c.h, c.l.call(c.l.fn.recv, buf, uintptr(count), uintptr(dt), uintptr(peer), c.h, stream))
}

// AllGather enqueues gathering count elements of dt from every rank's
// send into recv, rank r's at element r*count (ncclAllGather).
func (c *Comm) AllGather(send, recv uintptr, count uint64, dt DataType, stream uintptr) error {
	return c.l.check("ncclAllGather", c.h, c.l.call(c.l.fn.allGather, send, recv, uintptr(count), uintptr(dt), c.h, stream))
}
