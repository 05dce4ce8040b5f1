package ipc

import (
	"fmt"
	"strings"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport"
	"github.com/ulysses-go/ulysses/ptx"
)

// New prepares the transport of env's Comm (its buffer, layout, stream
// and wish of blocks, which Connect lowers to the group's least): it
// allocates the status word and the staging of the live token table
// (pinned host memory, which waits for nothing), and the copy streams
// unless the kernels alone move the bytes.
func New(env *transport.Env) (*Transport, error) {
	buf, l := env.Buf, env.Layout
	t := &Transport{env: env, k: env.Share.Kernels[env.DType.Size()],
		peers: ipcPeers{env: env}, nblocks: env.Blocks, mover: env.Mover}
	host, status, err := env.Ctx.HostAllocMapped(uint64(unsafe.Sizeof(statusWord{})))
	if err != nil {
		return nil, api.WrapDriver("allocating the status word", err)
	}
	t.statusHost = host
	*(*statusWord)(host) = statusWord{}
	if env.Wire.Lossy() {
		if t.wire, err = env.Share.Wire(env.Wire, env.DType); err != nil {
			t.Release()
			return nil, err
		}
	}
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

// Connect checks that every pair of the group's GPUs can reach each
// other, maps every peer's buffer (over CUDA IPC, or by pointer in this
// process), and takes the group's least number of blocks.
func (t *Transport) Connect(hs []handle.Handle) error {
	if err := t.peers.checkAccess(hs); err != nil {
		return err
	}
	if err := t.peers.mapAll(hs, int(t.args.Rank), t.env.Buf, t.env.Layout.SignalOff+plan.SignalAreaBytes); err != nil {
		return err
	}
	t.sharers = mostOnOneGPU(hs)
	t.oneProcess = true
	for i, h := range hs {
		t.args.Data[i] = uint64(t.peers.m[i].ptr)
		t.args.Signal[i] = uint64(t.peers.m[i].ptr) + uint64(t.env.Layout.SignalOff)
		t.nblocks = min(t.nblocks, int(h.Blocks))
		t.oneProcess = t.oneProcess && FromThisProcess(h)
	}
	t.threads = plan.ThreadsFor(t.nblocks, t.env.SMs, len(hs))
	return nil
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

// Kind is TransportIPC.
func (t *Transport) Kind() api.Transport { return api.TransportIPC }

// Blocks is the group's number of thread blocks.
func (t *Transport) Blocks() int { return t.nblocks }

// SetTokens puts the counts in the argument of later launches and stages
// them, with their divisors, for the live table (refreshCaptured).
func (t *Transport) SetTokens(ts plan.Tokens) {
	transport.SetArgsTokens(&t.args, ts)
	live := (*liveTable)(t.liveHost)
	live.Tokens, live.Prefix, live.TokenHash = t.args.Tokens, t.args.Prefix, ts.Hash
	live.TokenDiv = ts.Divisors(int(t.args.Rank))
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

// SetTimeout bounds the kernels' waits of later launches.
func (t *Transport) SetTimeout(d time.Duration) { t.args.TimeoutNs = uint64(d.Nanoseconds()) }

// Widths are the vector widths of the loaded kernels, widest first.
func (t *Transport) Widths() []int { return t.k.Widths }

// Release hands the peer mappings, the status word, the token table and
// the copy streams to the share's graveyard.
func (t *Transport) Release() {
	t.peers.bury()
	ctx := t.env.Share.Ctx
	if host := t.statusHost; host != nil {
		t.env.Share.Bury(device.Release{What: "freeing the status word", Do: func() error { return ctx.HostFree(host) }})
		t.statusHost = nil
	}
	if host := t.liveHost; host != nil {
		t.env.Share.Bury(device.Release{What: "freeing the token table", Do: func() error { return ctx.HostFree(host) }})
		t.liveHost = nil
	}
	if t.fan != nil {
		t.env.Share.Bury(t.fan.releases(ctx)...)
		t.fan = nil
	}
}

// Occupancy lists, for every kernel of the transport, its registers and
// how many of its blocks one SM holds at its block size: a debugging aid
// for tests that fail on a GPU.
func (t *Transport) Occupancy() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "blocks %d x %d threads:", t.nblocks, t.threads)
	for _, op := range ptx.Ops {
		for w, f := range t.k.Loaded(device.Plain, op) {
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
