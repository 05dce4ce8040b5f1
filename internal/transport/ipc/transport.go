package ipc

import (
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// farewellThreads is the block size of the one-block kernels (start
// barrier, farewell): one thread per peer is enough.
const farewellThreads = 32

// Transport moves bytes with the kernels of gen/kernels: each operation
// is one kernel whose blocks store straight into the peers' buffers over
// CUDA IPC and signal through the signal area after the data (the
// protocol: docs/DESIGN.md). What it holds besides the Comm's buffer: the
// kernels of the element width, the by-value kernel argument, the pinned
// status word the kernels report failures in, and the peer mappings.
type Transport struct {
	env   *transport.Env // the Comm's share, stream, buffer, layout, rank and dtype
	k     *device.Kernels
	wire  *device.WireKernels // the fp8 wire's, when the Comm's Config asks for it
	peers ipcPeers

	statusHost unsafe.Pointer // *statusWord in pinned host memory
	// The live token table: staged in pinned host memory, copied into the
	// buffer (liveDev) when captured operations need it.
	liveHost  unsafe.Pointer
	liveDev   driver.DevicePtr
	liveFresh bool // liveDev holds the current counts
	nblocks   int  // this rank's wish until connect, the group's after
	sharers   int  // the most ranks of the group on one GPU (from connect)
	threads   int  // per block of the exact kernels: plan.ThreadsFor (the wire's: plan.WireThreadsFor)
	args      kernelArgs
	params    [1]unsafe.Pointer // &args, reused by every launch
	fan       *copyFan          // the copy-engine mode's side streams, or nil

	// The copy-engine mode's choice and scratch.
	mover      api.Mover
	oneProcess bool       // every rank of the group is in this process (MoverAuto), from connect
	copies     []plan.Box // the last plan's boxes (Plan.Copies)

	abortedByClose bool // who set the abort word, for the error
}
