package a2a

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
)

// EnvTestSharing names the Sharing (as ParseSharing reads it) that
// SharingDefault means in this test binary's processes, its rank
// processes included: how the GPU suite runs with each kind of sharing.
const EnvTestSharing = "ULYSSES_TEST_SHARING"

// SetDefaultSharingFromEnv makes SharingDefault mean what
// $ULYSSES_TEST_SHARING names, if set, for the process's life; TestMain
// calls it before the tests or a rank's scenario start.
func SetDefaultSharingFromEnv() error {
	v := os.Getenv(EnvTestSharing)
	if v == "" {
		return nil
	}
	s, err := ParseSharing(v)
	if err != nil || s == SharingDefault {
		return fmt.Errorf("%s=%q: want legacy-ipc, fd or auto", EnvTestSharing, v)
	}
	defaultSharing = s
	return nil
}

// EnvTestNumSMs names the SMs (Config.NumSMs) that NumSMs 0 asks for in
// this test binary's processes, its rank processes included: how the GPU
// suite runs on a few SMs.
const EnvTestNumSMs = "ULYSSES_TEST_NUM_SMS"

// SetDefaultNumSMsFromEnv makes NumSMs 0 mean $ULYSSES_TEST_NUM_SMS SMs,
// if set, for the process's life; TestMain calls it before the tests or a
// rank's scenario start.
func SetDefaultNumSMsFromEnv() error {
	v := os.Getenv(EnvTestNumSMs)
	if v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxBlocks {
		return fmt.Errorf("%s=%q: want an SM count of 1 to %d", EnvTestNumSMs, v, maxBlocks)
	}
	defaultNumSMs = n
	return nil
}

// KillAfterGive makes the process kill itself (SIGKILL) once its buffer's
// socket has sent a descriptor, which is then in flight, and ready is
// closed (the process's own part of the handle exchange done: a peer whose
// exchange ends first may fetch before it).
func KillAfterGive(ready <-chan struct{}) {
	fdshare.AfterGive = func() {
		<-ready
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
}

// LiveVMMMappings is the number of VMM mappings (own buffers and
// imported peers') the process holds.
func LiveVMMMappings() int64 { return device.LiveMappings() }

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
