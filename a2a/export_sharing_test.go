package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
)

// ReadPeerBuffer reads the first n bytes of rank r's buffer through c's
// mapping of it (c's own buffer for c's rank); c must be connected over
// IPC.
func ReadPeerBuffer(c *Comm, r, n int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.t.(*ipc.Transport)
	if !ok || t.PeerBuffer(r) == 0 {
		return nil, fmt.Errorf("rank %d not mapped over IPC", r)
	}
	b := make([]byte, n)
	return b, c.dev.ctx.MemcpyDtoH(b, t.PeerBuffer(r))
}

// WriteOwnBuffer writes b at the start of c's own buffer (its first data
// half), as a peer's kernels would.
func WriteOwnBuffer(c *Comm, b []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dev.ctx.MemcpyHtoD(driver.DevicePtr(c.buf), b)
}
