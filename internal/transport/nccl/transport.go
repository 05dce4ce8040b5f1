package nccl

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// Transport moves the bytes of the copy plans (plan.Boxes) with
// NCCL's grouped sends and receives on the operation's stream: the box of
// this rank to itself is a device copy; a peer's box whose side here is
// contiguous is sent from the input or received into the data half
// directly; otherwise it is packed into, or unpacked out of, a staging
// area with one pitched device copy (plan.go, enqueue.go). NCCL
// has no timeout: the Comm's waits poll the stream and the communicator
// against a deadline and abort the communicator past it (wait.go).
// With the fp8 wire, a pack kernel quantizes the rows before the sends
// and an unpack kernel decodes them after the receives (wire.go).
// Operations cannot be captured into CUDA graphs.
type Transport struct {
	env     *transport.Env // the Comm's share, stream, buffer, layout, rank and world
	vecs    []int          // the kernels' vector widths, which planning picks from
	lib     *binding.Library
	id      binding.UniqueID
	timeout atomic.Int64 // nanoseconds
	tuning  Tuning       // the process's at New

	// stage is 2*stageBytes of device memory: the send region, then the
	// receive region (plan.go says why one data half each is enough);
	// with the fp8 wire, then the pack area of stageBytes more (packArea).
	stage      driver.DevicePtr
	packArea   driver.DevicePtr
	stageBytes int64
	plan       ncclPlan // the next enqueue's, from planBoxes

	// The fp8 wire's kernels (nil without it) and their launches'
	// argument, which params points at.
	wire   *device.WireKernels
	args   kernelabi.Args
	params [1]unsafe.Pointer

	// mu guards comm and every NCCL call on it: the Comm's waits poll
	// without the Comm's lock while operations may be enqueued.
	mu       sync.Mutex
	comm     *binding.Comm    // nil once aborted or destroyed
	child    *binding.Comm    // LaunchBlocking's blocking communicator, split from comm at the first operation; nil before and once released
	probe    driver.DevicePtr // LaunchBlocking: 1+World bytes the connecting group sends from and receives into
	dog      *watchdog        // LaunchBlocking: bounds each blocking call on child, made with it
	settling bool             // init or the last group may still be in progress (NCCL's non-blocking mode)
	failed   error            // what broke the communicator: a *TimeoutError, *api.AbortedError or NCCL's failure

	ops         atomic.Uint32 // operations enqueued, for the errors' epoch
	lastEnqueue atomic.Int64  // time.Now().UnixNano() of the last enqueue (or connect)
	abortAsk    atomic.Int32  // 0, or abortByContext / abortByClose: abort asked, not yet done
}

const (
	abortByContext = 1
	abortByClose   = 2
)

// ncclXfer is one send or receive of an operation over NCCL: a box of
// plan.Boxes, the peer, the round (one NCCL group each) and where it is
// staged, -1 when it goes straight from the input or into the data half.
type ncclXfer struct {
	box   plan.Box
	peer  int
	round int
	stage int64 // offset in the send or the receive region of the staging area
	input uint64
}

// ncclPlan is what one operation enqueues: the copies of this rank to
// itself, then per round the packs, one group of sends and receives in
// (tensor, peer) order, and the unpacks.
type ncclPlan struct {
	own          []ncclXfer
	sends, recvs []ncclXfer
	rounds       int
	scratch      []plan.Box
	wire         wirePlan // with the fp8 wire: the pack and unpack around it all
}
