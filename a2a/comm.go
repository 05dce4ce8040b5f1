package a2a

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/ptx"
)

// threadsPerBlock and unroll must match THREADS and UNROLL in gen/kernels.
const (
	threadsPerBlock = 256
	unroll          = 8
)

// Comm is one rank's endpoint of a group: a device buffer shared with the
// peers over CUDA IPC, the kernels, and a stream the operations run on.
//
// All methods are safe for concurrent use: they are serialised by the Comm.
// Operations are asynchronous on the Comm's stream; Sync waits for them.
type Comm struct {
	mu sync.Mutex

	cfg     Config
	dev     *Device
	file    ptx.File
	widths  []int // the file's vector widths, widest first
	module  driver.Module
	fns     map[ptx.Op]map[int]driver.Function
	barrier driver.Function
	stream  driver.Stream

	layout     bufferLayout
	buf        driver.DevicePtr
	statusHost unsafe.Pointer // *statusWord in pinned host memory
	statusDev  driver.DevicePtr
	self       handle
	selfBytes  []byte
	blocks     int    // this rank's wish until Connect, the group's after
	launches   uint64 // kernels launched: the device epoch of the last one

	peers     [MaxWorldSize]peerMapping
	tokens    tokenSet
	args      kernelArgs
	params    [1]unsafe.Pointer // &args, reused by every launch
	connected bool
	closed    bool
	failure   error // first failure; the Comm is broken once it is set
	reported  bool  // failure has been returned once as itself
}

// peerMapping is how this process reaches one peer's buffer.
type peerMapping struct {
	ptr       driver.DevicePtr
	ipcOpened bool            // close with cuIpcCloseMemHandle
	peerCtx   *driver.Context // retained for a same-process peer on another device
}

// New allocates this rank's buffer (capacity plus about 70 KiB of signals
// and state), loads the kernels and creates its stream. Connect (or Join)
// must follow before any operation. It costs one device allocation, one
// pinned host page and one module load (about 0.1 s the first time the
// driver JIT-compiles the PTX; the driver caches the result).
func New(cfg Config) (*Comm, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dev, err := openDevice(cfg.Device, cfg.Rank)
	if err != nil {
		return nil, err
	}
	c := &Comm{cfg: cfg, dev: dev}
	if err := c.init(); err != nil {
		c.release()
		return nil, err
	}
	return c, nil
}

func (c *Comm) init() error {
	ctx := c.dev.ctx
	file, image, err := ptx.ForElemBytes(c.cfg.DType.Size())
	if err != nil {
		return err
	}
	if uintptr(file.ArgsBytes) != unsafe.Sizeof(kernelArgs{}) {
		return fmt.Errorf("a2a: kernels take %d parameter bytes, the host passes %d: %w", file.ArgsBytes, unsafe.Sizeof(kernelArgs{}), ErrNotSupported)
	}
	c.file = file
	c.widths = file.Widths()
	if c.module, err = ctx.LoadModule(image); err != nil {
		return wrapDriver("loading kernels", err)
	}
	c.fns = make(map[ptx.Op]map[int]driver.Function)
	for _, op := range ptx.Ops {
		c.fns[op] = make(map[int]driver.Function)
		for _, w := range file.Widths() {
			f, err := ctx.Function(c.module, string(ptx.EntryFor(op, w)))
			if err != nil {
				return wrapDriver("loading kernels", err)
			}
			c.fns[op][w] = f
		}
	}
	if c.barrier, err = ctx.Function(c.module, string(ptx.Barrier)); err != nil {
		return wrapDriver("loading kernels", err)
	}
	if c.stream, err = ctx.StreamCreate(true); err != nil {
		return wrapDriver("creating stream", err)
	}

	c.layout = newBufferLayout(c.cfg.capacityBytes(), c.cfg.halves())
	if c.buf, err = ctx.MemAlloc(uint64(c.layout.total)); err != nil {
		return wrapDriver(fmt.Sprintf("allocating %d bytes", c.layout.total), err)
	}
	// Signals and state start at zero, and must be zero on the device before
	// any peer can see the handle.
	zeroWords := uint64(c.layout.total-c.layout.signalOff) / 4
	if err := ctx.MemsetD32(c.buf+driver.DevicePtr(c.layout.signalOff), 0, zeroWords); err != nil {
		return wrapDriver("clearing signals", err)
	}
	if c.statusHost, c.statusDev, err = ctx.HostAllocMapped(uint64(unsafe.Sizeof(statusWord{}))); err != nil {
		return wrapDriver("allocating the status word", err)
	}
	*(*statusWord)(c.statusHost) = statusWord{}
	if err := ctx.Synchronize(); err != nil {
		return wrapDriver("clearing signals", err)
	}

	ipc, err := ctx.IpcGetMemHandle(c.buf)
	if err != nil {
		return wrapDriver("exporting the buffer", err)
	}
	blocks := c.cfg.NumSMs
	if blocks == 0 {
		blocks = c.dev.info.SMs
	}
	c.blocks = min(blocks, maxBlocks)
	c.self = handle{
		Rank: uint32(c.cfg.Rank), World: uint32(c.cfg.WorldSize), ElemBytes: uint8(c.cfg.DType.Size()),
		Blocks: uint32(c.blocks), Pid: uint32(os.Getpid()), DataBytes: uint64(c.layout.dataBytes),
		Nonce: processNonce(), DevPtr: uint64(c.buf), IPC: ipc, SingleBuffer: c.cfg.SingleBuffer,
	}
	copy(c.self.BusID[:], c.dev.info.BusID)
	c.selfBytes = c.self.encode()

	c.args.Rank = uint32(c.cfg.Rank)
	c.args.World = uint32(c.cfg.WorldSize)
	c.args.State = uint64(c.buf) + uint64(c.layout.stateOff)
	c.args.Status = uint64(c.statusDev)
	c.args.TimeoutNs = uint64(c.cfg.timeout().Nanoseconds())
	c.args.HalfBytes = uint64(c.layout.halfBytes)
	c.args.Capacity = uint64(c.layout.dataBytes)
	c.params[0] = unsafe.Pointer(&c.args)
	return nil
}

// Handle returns the bytes peers need to map this rank's buffer
// (HandleSize bytes). Pass every rank's handle, in rank order, to Connect.
func (c *Comm) Handle() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.selfBytes...)
}

// Config returns the configuration the Comm was made with (Timeout as last
// set by SetTimeout).
func (c *Comm) Config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Rank returns this rank.
func (c *Comm) Rank() int { return c.cfg.Rank }

// WorldSize returns the number of ranks.
func (c *Comm) WorldSize() int { return c.cfg.WorldSize }

// Device returns the device the Comm runs on, for the memory helpers.
func (c *Comm) Device() *Device { return c.dev }

// Blocks returns the number of thread blocks each kernel runs (the group's
// minimum once connected).
func (c *Comm) Blocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocks
}

// Connect maps every peer's buffer. handles[i] is rank i's Handle(); every
// rank must pass the same list. It checks that the group agrees on world
// size, element width and capacity, and that every pair of GPUs can reach
// each other (the same verdict on every rank, naming the pair).
func (c *Comm) Connect(handles [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if c.connected {
		return ErrConnected
	}
	hs, err := c.checkHandles(handles)
	if err != nil {
		return err
	}
	if err := c.checkPeerAccess(hs); err != nil {
		return err
	}
	blocks := c.blocks
	for _, h := range hs {
		blocks = min(blocks, int(h.Blocks))
	}
	for i, h := range hs {
		if i == c.cfg.Rank {
			c.peers[i] = peerMapping{ptr: c.buf}
			continue
		}
		m, err := c.mapPeer(h)
		if err != nil {
			c.unmapPeers()
			return fmt.Errorf("a2a: rank %d mapping rank %d's buffer: %w", c.cfg.Rank, i, err)
		}
		c.peers[i] = m
	}
	for i := 0; i < c.cfg.WorldSize; i++ {
		c.args.Data[i] = uint64(c.peers[i].ptr)
		c.args.Signal[i] = uint64(c.peers[i].ptr) + uint64(c.layout.signalOff)
	}
	c.blocks = blocks
	c.connected = true
	return nil
}

func (c *Comm) checkHandles(handles [][]byte) ([]handle, error) {
	if len(handles) != c.cfg.WorldSize {
		return nil, fmt.Errorf("a2a: %d handles for world size %d: %w", len(handles), c.cfg.WorldSize, ErrHandle)
	}
	hs := make([]handle, len(handles))
	for i, b := range handles {
		h, err := decodeHandle(b)
		if err != nil {
			return nil, fmt.Errorf("a2a: handle %d: %w", i, err)
		}
		switch {
		case int(h.Rank) != i:
			return nil, fmt.Errorf("a2a: handle %d comes from rank %d: %w", i, h.Rank, ErrHandle)
		case int(h.World) != c.cfg.WorldSize:
			return nil, fmt.Errorf("a2a: rank %d has world size %d, this rank %d: %w", i, h.World, c.cfg.WorldSize, ErrHandle)
		case int(h.ElemBytes) != c.cfg.DType.Size():
			return nil, fmt.Errorf("a2a: rank %d uses %d-byte elements, this rank %d: %w", i, h.ElemBytes, c.cfg.DType.Size(), ErrHandle)
		case int64(h.DataBytes) != c.layout.dataBytes:
			return nil, fmt.Errorf("a2a: rank %d has a %d-byte buffer, this rank %d (MaxTokens*HiddenDim must agree): %w", i, h.DataBytes, c.layout.dataBytes, ErrHandle)
		case h.SingleBuffer != c.cfg.SingleBuffer:
			return nil, fmt.Errorf("a2a: rank %d has SingleBuffer=%v, this rank %v: %w", i, h.SingleBuffer, c.cfg.SingleBuffer, ErrHandle)
		}
		hs[i] = h
	}
	if string(handles[c.cfg.Rank]) != string(c.selfBytes) {
		return nil, fmt.Errorf("a2a: handle %d is not this rank's own: %w", c.cfg.Rank, ErrHandle)
	}
	return hs, nil
}

// checkPeerAccess decides for the whole group: every pair of distinct GPUs
// that this process can see is checked, in rank order, so every rank that
// sees the same GPUs names the same pair.
func (c *Comm) checkPeerAccess(hs []handle) error {
	ordinals := make([]int, len(hs))
	for i, h := range hs {
		ordinals[i] = c.dev.ordinalOfBusID(h.busID())
	}
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := ordinals[i], ordinals[j]
			if a < 0 || b < 0 || a == b {
				continue
			}
			ok, err := c.dev.drv.CanAccessPeer(a, b)
			if err != nil {
				return wrapDriver("checking peer access", err)
			}
			ok2, err := c.dev.drv.CanAccessPeer(b, a)
			if err != nil {
				return wrapDriver("checking peer access", err)
			}
			if !ok || !ok2 {
				return fmt.Errorf("a2a: rank %d (GPU %s) and rank %d (GPU %s) cannot access each other's memory: %w",
					i, hs[i].busID(), j, hs[j].busID(), ErrNoPeerAccess)
			}
		}
	}
	return nil
}

func (c *Comm) mapPeer(h handle) (peerMapping, error) {
	if h.Nonce != processNonce() {
		p, err := c.dev.ctx.IpcOpenMemHandle(h.IPC)
		if err != nil {
			return peerMapping{}, wrapDriver("opening IPC handle", err)
		}
		return peerMapping{ptr: p, ipcOpened: true}, nil
	}
	// The same process: CUDA refuses to IPC-open its own allocations, but
	// with unified addressing the pointer is valid as it is, given peer
	// access when it lives on another device.
	m := peerMapping{ptr: driver.DevicePtr(h.DevPtr)}
	if h.busID() == c.dev.info.BusID {
		return m, nil
	}
	ord := c.dev.ordinalOfBusID(h.busID())
	if ord < 0 {
		return peerMapping{}, fmt.Errorf("a2a: device %s not visible: %w", h.busID(), ErrNoPeerAccess)
	}
	pc, err := c.dev.drv.RetainPrimaryContext(ord)
	if err != nil {
		return peerMapping{}, wrapDriver("retaining peer context", err)
	}
	if err := c.dev.ctx.EnablePeerAccess(pc); err != nil {
		pc.Release()
		return peerMapping{}, wrapDriver("enabling peer access", err)
	}
	m.peerCtx = pc
	return m, nil
}

func (c *Comm) unmapPeers() error {
	var errs []error
	for i := range c.peers {
		m := c.peers[i]
		if m.ipcOpened {
			if err := c.dev.ctx.IpcCloseMemHandle(m.ptr); err != nil {
				errs = append(errs, wrapDriver("closing IPC mapping", err))
			}
		}
		if m.peerCtx != nil {
			if err := m.peerCtx.Release(); err != nil {
				errs = append(errs, wrapDriver("releasing peer context", err))
			}
		}
		c.peers[i] = peerMapping{}
	}
	return errors.Join(errs...)
}

// SetRankTokens sets the number of tokens each rank holds (uneven counts and
// zeros allowed; no padding). Every rank must pass the same counts. The
// counts live in device memory, read by the kernels; setting them waits for
// the Comm's queued operations first.
func (c *Comm) SetRankTokens(counts []int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usable(false); err != nil {
		return err
	}
	if len(counts) != c.cfg.WorldSize {
		return fmt.Errorf("a2a: %d token counts for world size %d: %w", len(counts), c.cfg.WorldSize, ErrTokens)
	}
	var total int64
	for r, n := range counts {
		if n < 0 {
			return fmt.Errorf("a2a: rank %d has %d tokens: %w", r, n, ErrTokens)
		}
		total += int64(n)
	}
	if total > 1<<30 {
		return fmt.Errorf("a2a: %d tokens in all, over 2^30: %w", total, ErrTokens)
	}
	ts := newTokenSet(counts)
	b := make([]byte, (MaxWorldSize+MaxWorldSize+1)*4)
	for i, n := range ts.counts {
		putU32(b[4*i:], uint32(n))
	}
	for i, n := range ts.prefix {
		putU32(b[4*(MaxWorldSize+i):], uint32(n))
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		return c.fail(wrapDriver("waiting for queued operations", err))
	}
	if err := c.dev.ctx.MemcpyHtoD(c.buf+driver.DevicePtr(c.layout.stateOff+stateTokensOff), b); err != nil {
		return c.fail(wrapDriver("writing token counts", err))
	}
	c.tokens = ts
	return nil
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

// SetTimeout sets the bound on every barrier wait of later operations.
func (c *Comm) SetTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("a2a: timeout %v must be positive: %w", d, ErrConfig)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.cfg.Timeout = d
	c.args.TimeoutNs = uint64(d.Nanoseconds())
	return nil
}

// Sync waits for every queued operation and reports a barrier that timed
// out (*TimeoutError, matched by ErrTimeout) or a CUDA error; either leaves
// the Comm broken.
func (c *Comm) Sync() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		c.fail(wrapDriver("running the collective", err))
	}
	return c.usable(false)
}

// usable returns nil when an operation may be enqueued: not closed, not
// broken (a timeout recorded by the device counts), and connected if
// needConnect. The first failure is returned as itself once, then wrapped
// in ErrBroken.
func (c *Comm) usable(needConnect bool) error {
	if c.closed {
		return ErrClosed
	}
	if c.failure == nil {
		if t := c.timeoutFromDevice(); t != nil {
			c.failure = t
		}
	}
	if c.failure != nil {
		if !c.reported {
			c.reported = true
			return c.failure
		}
		return fmt.Errorf("%w: %w", ErrBroken, c.failure)
	}
	if needConnect && !c.connected {
		return ErrNotConnected
	}
	return nil
}

// fail records err as the Comm's failure (if it is the first) and returns it.
func (c *Comm) fail(err error) error {
	if c.failure == nil {
		c.failure = err
	}
	return err
}

func (c *Comm) timeoutFromDevice() *TimeoutError {
	st := (*statusWord)(c.statusHost)
	if atomic.LoadUint32(&st.Code) == 0 {
		return nil
	}
	return &TimeoutError{
		Rank: int(atomic.LoadUint32(&st.Rank)), Peer: int(atomic.LoadUint32(&st.Peer)),
		Phase: Phase(atomic.LoadUint32(&st.Phase)), Epoch: atomic.LoadUint32(&st.Epoch),
		Block: int(atomic.LoadUint32(&st.Block)), Timeout: time.Duration(c.args.TimeoutNs),
	}
}

// Close waits for queued operations, meets every peer at a barrier (bounded
// by the timeout) so that no peer is still signalling into this buffer,
// then unmaps the peers and frees everything. It is idempotent; the Comm
// is unusable afterwards. It returns what went wrong on the way (a timed-out
// close barrier included), having released everything regardless.
func (c *Comm) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	var errs []error
	if c.connected && c.usable(true) == nil {
		c.args.Active = uint32(c.blocks)
		if err := c.launch(c.barrier); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.dev.ctx.StreamSynchronize(c.stream); err != nil {
		errs = append(errs, wrapDriver("waiting for queued operations", err))
	}
	if c.failure == nil {
		if t := c.timeoutFromDevice(); t != nil {
			errs = append(errs, t)
		}
	}
	c.closed = true
	errs = append(errs, c.unmapPeers(), c.release())
	return errors.Join(errs...)
}

// release frees what init acquired; safe on a partly initialised Comm.
func (c *Comm) release() error {
	ctx := c.dev.ctx
	var errs []error
	keep := func(what string, err error) {
		if err != nil {
			errs = append(errs, wrapDriver(what, err))
		}
	}
	if c.buf != 0 {
		keep("freeing the buffer", ctx.MemFree(c.buf))
		c.buf = 0
	}
	if c.statusHost != nil {
		keep("freeing the status word", ctx.HostFree(c.statusHost))
		c.statusHost = nil
	}
	if c.stream != 0 {
		keep("destroying the stream", ctx.StreamDestroy(c.stream))
		c.stream = 0
	}
	if c.module != 0 {
		keep("unloading kernels", ctx.UnloadModule(c.module))
		c.module = 0
	}
	errs = append(errs, c.dev.Close())
	return errors.Join(errs...)
}

// launch enqueues one kernel with the current args.
func (c *Comm) launch(f driver.Function) error {
	err := c.dev.ctx.Launch(f, [3]uint32{uint32(c.blocks), 1, 1}, [3]uint32{threadsPerBlock, 1, 1}, 0, c.stream, c.params[:])
	if err != nil {
		return c.fail(wrapDriver("launching kernel", err))
	}
	c.launches++
	return nil
}

// halfOffset is where operation number epoch writes its output.
func (c *Comm) halfOffset(epoch uint64) int64 {
	return int64(epoch&1) * c.layout.halfBytes
}

// wrapDriver gives a driver error this package's prefix and sentinels.
func wrapDriver(what string, err error) error {
	switch {
	case errors.Is(err, driver.ErrNoDriver):
		return fmt.Errorf("a2a: %s: %w: %w", what, ErrNoDriver, err)
	case errors.Is(err, driver.ErrNoDevice):
		return fmt.Errorf("a2a: %s: %w: %w", what, ErrNoDevice, err)
	}
	return fmt.Errorf("a2a: %s: %w", what, err)
}

// Buffer returns the region of the Comm's buffer that the last operation's
// view lies in, as a [1, MaxTokens, 1, HiddenDim] tensor. Until the next
// operation it is the caller's, to read or overwrite (tests poison it);
// every other part of the buffer may be written by peers at any time.
func (c *Comm) Buffer() Tensor {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Tensor{Ptr: uintptr(c.buf) + uintptr(c.halfOffset(c.launches)), Shape: [4]int{1, c.cfg.MaxTokens, 1, c.cfg.HiddenDim}, DType: c.cfg.DType}
}
