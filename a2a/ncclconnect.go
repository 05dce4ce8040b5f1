package a2a

import "fmt"

// useNCCL makes the NCCL transport the Comm's, for a group that uses
// NCCL: it needs rank 0's id, and NCCL (ErrNoNCCL where it cannot be
// loaded).
func (c *Comm) useNCCL(id *NCCLID) error {
	if id == nil {
		return fmt.Errorf("a2a: rank %d's group uses NCCL: pass rank 0's NewNCCLID to ConnectNCCL, or use Join: %w", c.cfg.Rank, ErrConfig)
	}
	lib, err := loadNCCL()
	if err != nil {
		return wrapNCCL("loading NCCL", err)
	}
	c.t = newNCCLTransport(c, lib, *id)
	return nil
}

// dropNCCL gives back an NCCL transport whose connect failed, and makes
// the IPC transport the Comm's again.
func (c *Comm) dropNCCL() {
	if t, ok := c.t.(*ncclTransport); ok {
		t.releaseOwn()
		c.t = c.sm
	}
}
