package a2a

import "fmt"

// useNCCL makes the NCCL transport the Comm's, for a group that uses
// NCCL: it needs rank 0's id.
func (c *Comm) useNCCL(id *NCCLID) error {
	if id == nil {
		return fmt.Errorf("a2a: rank %d's group uses NCCL: pass rank 0's NewNCCLID to ConnectNCCL, or use Join: %w", c.cfg.Rank, ErrConfig)
	}
	return fmt.Errorf("a2a: the NCCL transport is not built yet: %w", ErrNotSupported)
}

// dropNCCL gives back an NCCL transport whose connect failed, and makes
// the IPC transport the Comm's again.
func (c *Comm) dropNCCL() {}
