package ipc

import "github.com/ulysses-go/ulysses/internal/driver"

// PeerBuffer returns where this process maps rank r's buffer (its own for
// this rank), 0 before Connect or for r out of range: for tests that read
// a peer's memory through the mapping.
func (t *Transport) PeerBuffer(r int) driver.DevicePtr {
	if r < 0 || r >= len(t.peers.m) {
		return 0
	}
	return t.peers.m[r].ptr
}
