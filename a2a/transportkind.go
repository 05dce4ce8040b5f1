package a2a

import "github.com/ulysses-go/ulysses/internal/api"

// Transport chooses how a Comm's operations reach the peers
// (Config.Transport): CUDA IPC (TransportIPC, the zero value: one host
// with peer access between every pair of GPUs), NCCL (TransportNCCL: any
// GPUs, any hosts NCCL reaches), or whichever the group's GPUs need
// (TransportAuto). Every rank must ask for the same one: Connect refuses
// a group that disagrees (ErrHandle).
type Transport uint8

const (
	// TransportIPC, the zero value, maps every peer's buffer over CUDA IPC
	// (or by pointer within one process) and moves bytes with the SM
	// kernels or the copy engines (Config.Mover): the fastest where it
	// works, and the only transport that can be captured into CUDA graphs.
	// It needs every rank on one host and peer access between every pair
	// of GPUs (Connect fails with ErrNoPeerAccess otherwise), and loads no
	// NCCL.
	TransportIPC Transport = iota
	// TransportNCCL moves bytes with NCCL's grouped sends and receives,
	// loaded at run time (libnccl.so.2, or $ULYSSES_LIBNCCL): it reaches
	// GPUs without peer access and other hosts. Connect needs rank 0's
	// NCCL unique id (ConnectNCCL; Join carries it in a second exchange),
	// and fails with ErrNoNCCL where NCCL cannot be loaded. Boxes that are
	// not contiguous on one side cost a device copy into or out of a
	// staging area (two data halves more of device memory); waits poll
	// the device instead of blocking, and operations cannot be captured
	// into CUDA graphs (ErrNotSupported).
	TransportNCCL
	// TransportAuto takes IPC when every rank is on one host (the handles'
	// host identities) and every pair of their GPUs has peer access both
	// ways (each rank's handle lists the GPUs its own can reach), NCCL
	// otherwise: a verdict every rank reaches alike from the handles
	// alone. It costs what the chosen transport costs, and loads NCCL
	// only when NCCL is chosen (NeedsNCCL tells New+Connect users which).
	TransportAuto
)

// String names the transport as Config and the command line spell it:
// "ipc", "nccl" or "auto".
func (t Transport) String() string { return api.Transport(t).String() }

// Transport is the transport the Comm's operations use: after Connect (or
// Join) TransportIPC or TransportNCCL, what TransportAuto chose; before,
// the Config's (the zero Transport for a Comm that New did not make). It
// costs the Comm's lock.
func (c *Comm) Transport() Transport {
	if !c.made() {
		return TransportIPC
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.t == nil {
		return c.cfg.Transport
	}
	return Transport(c.t.Kind())
}
