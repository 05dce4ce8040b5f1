package nccl

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	binding "github.com/ulysses-go/ulysses/internal/nccl"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
)

// New prepares the NCCL transport of env's Comm with rank 0's id;
// Connect joins the communicator.
func New(env *transport.Env, lib *binding.Library, id binding.UniqueID) *Transport {
	t := &Transport{env: env, vecs: env.Share.Kernels[env.DType.Size()].Widths, lib: lib, id: id,
		stageBytes: env.Layout.DataBytes, tuning: currentTuning()}
	t.tuning.Launch = t.tuning.Launch.resolve(lib)
	t.timeout.Store(int64(env.Timeout))
	t.args.Rank, t.args.World = uint32(env.Rank), uint32(env.World)
	t.params[0] = unsafe.Pointer(&t.args)
	return t
}

// allocStage allocates the staging area where there is one: the send and
// receive regions where anything goes through NCCL (a peer, or Self), and
// the fp8 wire's pack area, each of stageBytes.
func (t *Transport) allocStage() error {
	regions := int64(0)
	if t.env.World > 1 || t.tuning.Self {
		regions = 2
	}
	if t.wire != nil {
		regions++
	}
	if regions == 0 || t.stageBytes == 0 {
		return nil
	}
	p, err := t.env.Ctx.MemAlloc(uint64(regions * t.stageBytes))
	if err != nil {
		return api.WrapDriver(fmt.Sprintf("allocating %d bytes of NCCL staging", regions*t.stageBytes), err)
	}
	t.stage = p
	if t.wire != nil {
		t.packArea = p + driver.DevicePtr((regions-1)*t.stageBytes)
	}
	return nil
}

// Connect allocates the staging area (cuMemAlloc, which waits for
// nothing) and starts joining the communicator without waiting for the
// other ranks (a non-blocking NCCL communicator): the first operation, or
// a wait, finds it ready, bounded by the timeout. The ranks of one process
// may so Connect one after another from one goroutine.
func (t *Transport) Connect(hs []handle.Handle) error {
	if t.env.Wire.Lossy() {
		w, err := t.env.Share.Wire(t.env.Wire, t.env.DType)
		if err != nil {
			return err
		}
		t.wire = w
	}
	if err := t.allocProbe(); err != nil {
		return err
	}
	if err := t.allocStage(); err != nil {
		return err
	}
	var comm *binding.Comm
	err := t.env.Ctx.Do(func() error {
		var err error
		comm, err = t.lib.InitRank(t.env.World, t.env.Rank, t.id)
		return err
	})
	if err != nil {
		return api.WrapNCCL(fmt.Sprintf("rank %d joining the NCCL communicator", t.env.Rank), err)
	}
	t.mu.Lock()
	t.comm, t.settling = comm, true
	t.mu.Unlock()
	t.lastEnqueue.Store(time.Now().UnixNano())
	return nil
}

// SetTokens puts the counts in the argument of the fp8 wire's later
// launches; planBoxes plans each operation with the Comm's counts.
func (t *Transport) SetTokens(ts plan.Tokens) { transport.SetArgsTokens(&t.args, ts) }

// SetTimeout bounds the waits of later operations.
func (t *Transport) SetTimeout(d time.Duration) { t.timeout.Store(int64(d)) }

// RefreshCaptured has nothing to refresh: no operation is captured.
func (t *Transport) RefreshCaptured() error { return nil }

// Widths are the kernels': planning picks one, which this transport
// ignores (NCCL and the copies take any alignment).
func (t *Transport) Widths() []int { return t.vecs }

// Kind is TransportNCCL.
func (t *Transport) Kind() api.Transport { return api.TransportNCCL }

// Blocks is 0, NCCL's kernels moving the bytes, or with the fp8 wire the
// most blocks its conversions run (this rank's wish: no peer shares them).
func (t *Transport) Blocks() int {
	if t.env.Wire.Lossy() {
		return t.env.Blocks
	}
	return 0
}

// Pad is only asked for by CaptureGraph, which this transport cannot serve.
func (t *Transport) Pad(transport.LaunchSpec) error {
	return fmt.Errorf("a2a: operations over NCCL cannot be captured into a CUDA graph: %w", api.ErrNotSupported)
}

// Failure is what broke the communicator, or nil.
func (t *Transport) Failure() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// Abort asks the next poll (or release) to Abort the communicator; the
// waits of the queued operations end with an *api.AbortedError. It cannot be
// undone.
func (t *Transport) Abort(byClose bool) {
	how := int32(abortByContext)
	if byClose {
		how = abortByClose
	}
	t.abortAsk.CompareAndSwap(0, how)
}

// Release ends the communicator (ncclCommDestroy when healthy and idle,
// ncclCommAbort otherwise) and hands the staging area to the graveyard.
func (t *Transport) Release() {
	t.mu.Lock()
	abort := t.failed != nil || t.abortAsk.Load() != 0
	for _, c := range [2]**binding.Comm{&t.child, &t.comm} { // the child before its parent
		if *c == nil {
			continue
		}
		if abort {
			_ = (*c).Abort()
		} else {
			_ = (*c).Destroy()
		}
		*c = nil
	}
	t.mu.Unlock()
	t.bury(&t.stage, "freeing the NCCL staging")
	t.packArea = 0
	t.bury(&t.probe, "freeing the NCCL connecting bytes")
}

// bury hands the device memory at *p, if any, to the graveyard.
func (t *Transport) bury(p *driver.DevicePtr, what string) {
	if q := *p; q != 0 {
		ctx := t.env.Share.Ctx
		t.env.Share.Bury(device.Release{What: what, Do: func() error { return ctx.MemFree(q) }})
		*p = 0
	}
}

// Rounds is how many NCCL groups the last operation was split into (for
// tests).
func (t *Transport) Rounds() int { return t.plan.rounds }
