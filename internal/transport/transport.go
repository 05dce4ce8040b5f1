package transport

import (
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// LaunchSpec is how the Comm wants one operation enqueued.
type LaunchSpec struct {
	Stream driver.Stream
	Half   uint32 // the data half it writes: consecutive operations alternate
	// Captured: into a CUDA graph, so the token counts (and what follows
	// from them) are read when it replays, not frozen now.
	Captured bool
}

// Transport moves the bytes of planned operations between the ranks of a
// group. The Comm owns everything else, and the same for every transport:
// the checked request of each operation and its plan (plan.Make: shapes,
// token counts, capacity, placement, the verdict every rank shares), the
// buffer's data halves and the views into them, the Into copies, the
// failure bookkeeping and the order of Close. A request reaches a
// transport once planned, and nothing it returns goes back to planning.
// Connect chooses one and builds it (only it) with the factory its kind
// registered (Register, New): ipc.Transport (SM kernels or copy engines
// writing into the peers over CUDA IPC) or nccl.Transport (NCCL's sends
// and receives). Calls come with the Comm's lock held, but wait's.
type Transport interface {
	// Connect joins the group: hs are every rank's validated handles, in
	// rank order, the same on every rank. A transport whose Connect
	// failed is released and dropped.
	Connect(hs []handle.Handle) error
	// Kind is the kind the transport's factory is registered as
	// (TransportIPC, TransportNCCL).
	Kind() api.Transport
	// Blocks is the number of thread Blocks each kernel runs (0 where no
	// kernel of the package moves the bytes).
	Blocks() int
	// PlanMover adds what this transport needs to move p (plan.Make's plan
	// of r under the counts ts) and may refuse it; nothing is enqueued
	// yet. It may load the kernels p needs, which can wait, for at most
	// the Comm's timeout, for the device. By value: a pointer through an
	// interface would move each plan to the heap.
	PlanMover(p plan.Plan, r plan.Request, ts plan.Tokens) (plan.Plan, error)
	// SetTokens and setTimeout change what the operations enqueued after
	// them carry; they touch no device memory.
	SetTokens(ts plan.Tokens)
	SetTimeout(d time.Duration)
	// RefreshCaptured makes what captured operations read when they
	// replay hold the counts SetTokens set last; it waits for that alone.
	RefreshCaptured() error
	// Widths lists the vector Widths in bytes the transport copies with,
	// widest first; planning picks the widest the operation allows.
	Widths() []int
	// Enqueue moves the bytes of the planned operation p into every
	// rank's data half ls.Half, on ls.Stream (the Comm's or the caller's,
	// already ordered after the Comm's previous operation), without
	// waiting for anything.
	Enqueue(p plan.Plan, ls LaunchSpec) error
	// Pad enqueues an operation that moves nothing but takes its turn
	// like any other (a barrier with the peers): Graph.Launch puts one
	// before a replay that would start on the other data half.
	Pad(ls LaunchSpec) error
	// Wait waits, without the Comm's lock, for the Comm's operations: its
	// stream, or the event tail when the last ran on a caller's stream.
	// It returns a driver error; a failure the transport reports itself
	// (timeout, abort) is left for failure.
	Wait(onCaller bool, tail driver.Event) error
	// Failure returns what the device reported (a *TimeoutError,
	// *PeerClosedError or *MismatchError), or nil.
	Failure() error
	// Goodbye enqueues telling the peers that this rank leaves and, with
	// wait, waiting (bounded by the timeout) until each has said the same.
	Goodbye(wait bool) error
	// Abort ends, promptly, every wait of the operations queued so far
	// and later: they fail with an *api.AbortedError (byClose says who asked).
	// It cannot be undone: the Comm is broken after it.
	Abort(byClose bool)
	// Release hands what the transport holds to the share's graveyard.
	Release()
}
