package nccl

import "unsafe"

// Split makes a communicator of the same ranks as c, in the same order,
// with the choices of opt (ncclCommSplit of color 0, key = c's rank): a
// collective, every rank of c calls it. On a non-blocking c it returns at
// once and the new Comm may still be in progress (poll its AsyncError,
// and c's); c must have nothing in progress. The new Comm is released on
// its own (Abort or Destroy), before c. It needs FeatureSplit, and an
// option the loaded NCCL lacks is an error matching ErrUnsupported; on an
// error nothing is made.
func (c *Comm) Split(opt CommOptions) (*Comm, error) {
	if err := c.l.need(FeatureSplit); err != nil {
		return nil, err
	}
	cfg, err := c.l.config(opt)
	if err != nil {
		return nil, err
	}
	var h uintptr
	r := c.l.call(c.l.fn.commSplit, c.h, 0, uintptr(c.rank), uintptr(unsafe.Pointer(&h)), uintptr(unsafe.Pointer(cfg)))
	if r != Success && r != InProgress {
		err := c.l.check("ncclCommSplit", c.h, r)
		if h != 0 {
			c.l.call(c.l.fn.commAbort, h)
		}
		return nil, err
	}
	return &Comm{l: c.l, h: h, world: c.world, rank: c.rank, blocking: opt.Blocking}, nil
}
