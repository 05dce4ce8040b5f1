package ipc

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// farewellThreads is the block size of the one-block kernels (start
// barrier, farewell): one thread per peer is enough.
const farewellThreads = 32

// smTransport moves bytes with the kernels of gen/kernels: each operation
// is one kernel whose blocks store straight into the peers' buffers over
// CUDA IPC and signal through the signal area after the data (the
// protocol: docs/DESIGN.md). What it holds besides the Comm's buffer: the
// kernels of the element width, the by-value kernel argument, the pinned
// status word the kernels report failures in, and the peer mappings.
type Transport struct {
	env    *transport.Env
	share  *device.Share
	stream driver.Stream // the Comm's
	k      *device.Kernels
	peers  ipcPeers

	buf        driver.DevicePtr
	layout     plan.Layout
	statusHost unsafe.Pointer // *statusWord in pinned host memory
	// The live token table: staged in pinned host memory, copied into the
	// buffer (liveDev) when captured operations need it.
	liveHost  unsafe.Pointer
	liveDev   driver.DevicePtr
	liveFresh bool // liveDev holds the current counts
	nblocks   int  // this rank's wish until connect, the group's after
	sharers   int  // the most ranks of the group on one GPU (from connect)
	threads   int  // per block: see maxThreadsPerBlock
	args      kernelArgs
	params    [1]unsafe.Pointer // &args, reused by every launch
	fan       *copyFan          // the copy-engine mode's side streams, or nil

	// The copy-engine mode's choice and scratch.
	mover      api.Mover
	oneProcess bool       // every rank of the group is in this process (MoverAuto), from connect
	es         int64      // element bytes
	copies     []plan.Box // the last plan's boxes (opPlan.copies)

	abortedByClose bool // who set the abort word, for the error
}

// newSMTransport prepares the transport of a Comm whose buffer is buf with
// layout l, on stream, running blocks blocks (its wish: connect takes the
// group's least): it allocates the status word and the staging of the
// live token table (pinned host memory, which waits for nothing).
func New(env *transport.Env) (*Transport, error) {
	buf, l := env.Buf, env.Layout
	t := &Transport{env: env, share: env.Share, stream: env.Stream, k: env.Share.Kernels[env.DType.Size()],
		peers: ipcPeers{env: env, share: env.Share}, buf: buf, layout: l, nblocks: env.Blocks,
		mover: env.Mover, es: int64(env.DType.Size())}
	host, status, err := env.Ctx.HostAllocMapped(uint64(unsafe.Sizeof(statusWord{})))
	if err != nil {
		return nil, api.WrapDriver("allocating the status word", err)
	}
	t.statusHost = host
	*(*statusWord)(host) = statusWord{}
	if t.liveHost, _, err = env.Ctx.HostAllocMapped(uint64(unsafe.Sizeof(liveTable{}))); err != nil {
		t.Release()
		return nil, api.WrapDriver("allocating the token table", err)
	}
	*(*liveTable)(t.liveHost) = liveTable{}
	t.liveDev = buf + driver.DevicePtr(l.StateOff+plan.LiveOff)
	if env.Mover != api.MoverKernels {
		fan, err := newCopyFan(env.Ctx, env.World)
		t.fan = fan
		if err != nil {
			t.Release()
			return nil, err
		}
	}
	t.args.Rank = uint32(env.Rank)
	t.args.World = uint32(env.World)
	t.args.State = uint64(buf) + uint64(l.StateOff)
	t.args.Status = uint64(status)
	t.args.TimeoutNs = uint64(env.Timeout.Nanoseconds())
	t.args.HalfBytes = uint64(l.HalfBytes)
	t.args.Capacity = uint64(l.DataBytes)
	t.params[0] = unsafe.Pointer(&t.args)
	return t, nil
}

func (t *Transport) Connect(hs []handle.Handle) error {
	if err := t.peers.checkAccess(hs); err != nil {
		return err
	}
	if err := t.peers.mapAll(hs, int(t.args.Rank), t.buf, t.layout.SignalOff+plan.SignalAreaBytes); err != nil {
		return err
	}
	t.sharers = mostOnOneGPU(hs)
	t.oneProcess = true
	for i, h := range hs {
		t.args.Data[i] = uint64(t.peers.m[i].ptr)
		t.args.Signal[i] = uint64(t.peers.m[i].ptr) + uint64(t.layout.SignalOff)
		t.nblocks = min(t.nblocks, int(h.Blocks))
		t.oneProcess = t.oneProcess && FromThisProcess(h)
	}
	t.threads = plan.ThreadsFor(t.nblocks, t.env.SMs)
	return nil
}

func (t *Transport) Kind() api.Transport { return api.TransportIPC }

func (t *Transport) Blocks() int { return t.nblocks }

// PlanMover adds the copy-engine mode's part to p when the copy engines
// move it (moverFor): the copies into the scratch, every input's address,
// the mover in the signature. The kernels need nothing more.
func (t *Transport) PlanMover(p plan.Plan, r plan.Request, ts plan.Tokens, captured bool) (plan.Plan, error) {
	if t.moverFor(r.Op, p.GroupBytes, captured) != api.MoverCopyEngines {
		return p, nil
	}
	t.copies = plan.Boxes(t.copies[:0], r, p, int(t.args.Rank), int(t.args.World), ts, t.es)
	p.ByCopies, p.Copies = true, t.copies
	for k := range r.N {
		p.Inputs[k] = uint64(r.Xs[k].Ptr)
	}
	p.Sig = plan.MoverSignature(p.Sig, api.MoverCopyEngines)
	return p, nil
}

// Wait blocks in the driver: the kernels bound their own waits.
func (t *Transport) Wait(onCaller bool, tail driver.Event) error {
	if onCaller {
		return t.env.Ctx.EventSynchronize(tail)
	}
	return t.env.Ctx.StreamSynchronize(t.stream)
}

// mostOnOneGPU is the most ranks of hs on one GPU (by PCI bus id): a
// value every rank computes alike.
func mostOnOneGPU(hs []handle.Handle) int {
	most := 0
	for _, h := range hs {
		n := 0
		for _, o := range hs {
			if o.BusID == h.BusID {
				n++
			}
		}
		most = max(most, n)
	}
	return most
}

// SetTokens puts the counts in the argument of later launches and stages
// them for the live table (refreshCaptured).
func (t *Transport) SetTokens(ts plan.Tokens) {
	t.args.Tokens = [kernelabi.MaxRanks]int32{}
	t.args.Prefix = [kernelabi.MaxRanks + 1]int32{}
	for i, n := range ts.Counts {
		t.args.Tokens[i] = int32(n)
	}
	for i, n := range ts.Prefix {
		t.args.Prefix[i] = int32(n)
	}
	live := (*liveTable)(t.liveHost)
	live.Tokens, live.Prefix, live.TokenHash = t.args.Tokens, t.args.Prefix, ts.Hash
	t.liveFresh = false
}

// RefreshCaptured copies the staged counts into the buffer's live table,
// on the Device's copy stream, and waits for that copy alone (tens of
// microseconds). Captured kernels read the table from device memory: all
// their blocks reading pinned host memory at once cost hundreds of
// microseconds per operation.
func (t *Transport) RefreshCaptured() error {
	if t.liveFresh {
		return nil
	}
	err := t.env.Ctx.MemcpyHtoDAsync(t.liveDev, t.liveHost, uint64(unsafe.Sizeof(liveTable{})), t.env.Helpers)
	if err := t.env.Finish("writing the token table", err); err != nil {
		return err
	}
	t.liveFresh = true
	return nil
}

func (t *Transport) SetTimeout(d time.Duration) { t.args.TimeoutNs = uint64(d.Nanoseconds()) }

func (t *Transport) Widths() []int { return t.k.Widths }

// Enqueue launches the operation's kernel (after the start barrier's with
// a single buffer) on ls.stream. A captured one reads the token counts
// from the live table when it runs, and computes its active blocks and
// signature from them. Allocation-free.
func (t *Transport) Enqueue(op ptx.Op, p plan.Plan, x api.Tensor, ls transport.LaunchSpec) error {
	t.args.Input = uint64(x.Ptr)
	t.args.Batch = uint32(x.Shape[0])
	t.args.Units = uint32(p.Chunk / int64(p.Width))
	t.args.Half = ls.Half
	t.args.Live, t.args.GroupRow = 0, 0
	spread := int64(1)
	if p.Spread {
		spread = plan.SpreadFor(t.sharers)
	}
	t.args.Active = uint32(plan.ActiveBlocks(p.GroupBytes*spread, t.nblocks))
	t.args.Sig = p.Sig
	if ls.Captured {
		t.args.Live, t.args.GroupRow = uint64(t.liveDev), uint64(p.GroupRow*spread)
		t.args.Active, t.args.Sig = 0, p.ShapeSig
	}
	if p.ByCopies {
		return t.enqueueCopies(p, ls)
	}
	if p.General {
		t.setGeneral(p)
		return t.launchOp(t.k.General[op][p.Width], ls.Stream)
	}
	if ls.Captured {
		return t.launchOp(t.k.Captured[op][p.Width], ls.Stream)
	}
	return t.launchOp(t.k.Ops[op][p.Width], ls.Stream)
}

// setGeneral fills in the general entries' part of the argument.
func (t *Transport) setGeneral(p plan.Plan) {
	t.args.Units = uint32(p.Units)
	t.args.Inputs = p.Inputs
	t.args.Region = uint64(p.Region)
	t.args.Heads = p.Heads
	t.args.Tensors = uint32(p.Tensors)
	t.args.HeadUnits = uint32(p.HeadUnits)
	t.args.InRow = uint32(p.InRow)
	t.args.WalkTotal = 0
	if p.WalkTotal {
		t.args.WalkTotal = 1
	}
}

// launchOp launches f with the current args, after the start barrier with
// a single buffer. Only the active blocks are launched: the rest would
// return at once; launching them cost 0.1-0.4 us of the medians at 128
// KiB-1 MiB. A captured operation computes its
// active blocks when it runs, so it launches all.
func (t *Transport) launchOp(f driver.Function, s driver.Stream) error {
	if t.args.HalfBytes == 0 {
		if err := t.launch(t.k.Start, 1, farewellThreads, s); err != nil {
			return err
		}
	}
	grid := t.nblocks
	if t.args.Live == 0 {
		grid = int(t.args.Active)
	}
	return t.launch(f, grid, t.threads, s)
}

// Pad launches the narrowest AllGather with no batch: one block that
// signals its peers and waits for theirs, writing nothing.
func (t *Transport) Pad(ls transport.LaunchSpec) error {
	narrowest := t.k.Widths[len(t.k.Widths)-1]
	t.args.Input, t.args.Batch, t.args.Units = 0, 0, 1
	t.args.Half, t.args.Live, t.args.GroupRow = ls.Half, 0, 0
	t.args.Active, t.args.Sig = 1, plan.PadSignature
	return t.launchOp(t.k.Ops[ptx.OpAllGather][narrowest], ls.Stream)
}

// Failure decodes the status word a failed kernel wrote, or nil.
func (t *Transport) Failure() error {
	if t.statusHost == nil {
		return nil // released
	}
	st := (*statusWord)(t.statusHost)
	code := atomic.LoadUint32(&st.Code)
	if code == statusOK {
		return nil
	}
	rank, peer := int(atomic.LoadUint32(&st.Rank)), int(atomic.LoadUint32(&st.Peer))
	phase, epoch := api.Phase(atomic.LoadUint32(&st.Phase)), atomic.LoadUint32(&st.Epoch)
	block := int(atomic.LoadUint32(&st.Block))
	switch code {
	case statusPeerClosed:
		return &api.PeerClosedError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch}
	case statusMismatch:
		return &api.MismatchError{Rank: rank, Peer: peer, Epoch: epoch, Block: block,
			Signature: atomic.LoadUint32(&st.Sig), PeerSignature: atomic.LoadUint32(&st.PeerSig)}
	case statusHalfReused:
		return fmt.Errorf("a2a: rank %d's operation %d would write the data half its previous operation wrote (capture with CaptureGraph, whose Launch keeps the halves in turn): %w", rank, epoch, api.ErrOddGraph)
	case statusAborted:
		return &api.AbortedError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch, ByClose: t.abortedByClose}
	}
	return &api.TimeoutError{Rank: rank, Peer: peer, Phase: phase, Epoch: epoch, Block: block, Timeout: time.Duration(t.args.TimeoutNs)}
}

// Goodbye launches ulysses_close: the bye words, and with wait the wait
// for the peers'.
func (t *Transport) Goodbye(wait bool) error {
	t.args.Active = 0
	if wait {
		t.args.Active = 1
	}
	return t.launch(t.k.Close, 1, farewellThreads, t.stream)
}

// Abort sets the status word's Abort word: every wait of a kernel queued
// so far or later ends within about 1 ms (ABORT_POLL_NS) with
// STATUS_ABORTED. It cannot be undone; the first caller names the cause.
func (t *Transport) Abort(byClose bool) {
	if t.statusHost != nil && atomic.LoadUint32(&(*statusWord)(t.statusHost).Abort) == 0 {
		t.abortedByClose = byClose
		atomic.StoreUint32(&(*statusWord)(t.statusHost).Abort, 1)
	}
}

func (t *Transport) Release() {
	t.peers.bury()
	ctx := t.share.Ctx
	if host := t.statusHost; host != nil {
		t.share.Bury(device.Release{What: "freeing the status word", Do: func() error { return ctx.HostFree(host) }})
		t.statusHost = nil
	}
	if host := t.liveHost; host != nil {
		t.share.Bury(device.Release{What: "freeing the token table", Do: func() error { return ctx.HostFree(host) }})
		t.liveHost = nil
	}
	if t.fan != nil {
		t.share.Bury(t.fan.releases(ctx)...)
		t.fan = nil
	}
}

// launch enqueues one kernel with the current args on s, holding the
// share's launch gate so that no graveyard release starts while it may
// run.
func (t *Transport) launch(f driver.Function, grid, threads int, s driver.Stream) error {
	t.share.Gate.RLock()
	err := t.env.Ctx.Launch(f, [3]uint32{uint32(grid), 1, 1}, [3]uint32{uint32(threads), 1, 1}, 0, s, t.params[:])
	t.share.Gate.RUnlock()
	if err != nil {
		return api.WrapDriver("launching kernel", err)
	}
	return nil
}

// Occupancy lists, for every kernel of the transport, its registers and
// how many of its blocks one SM holds at its block size: a debugging aid
// for tests that fail on a GPU.
func (t *Transport) Occupancy() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "blocks %d x %d threads:", t.nblocks, t.threads)
	for op, fs := range t.k.Ops {
		for w, f := range fs {
			regs, _ := t.env.Ctx.FuncAttribute(f, driver.FuncAttrNumRegs)
			n, err := t.env.Ctx.MaxActiveBlocks(f, t.threads)
			if err != nil {
				fmt.Fprintf(&sb, " %s/v%d: %v", op, w, err)
				continue
			}
			fmt.Fprintf(&sb, " %s/v%d %d regs %d/SM;", op, w, regs, n)
		}
	}
	return sb.String()
}
