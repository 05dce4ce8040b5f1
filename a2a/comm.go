package a2a

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// maxThreadsPerBlock and unroll must match THREADS and UNROLL in
// gen/kernels. A Comm on every SM launches 256-thread blocks (GatherHeads
// 195 us against 199 us with 512 at 128 MiB); one on fewer SMs launches
// 512, since each SM then needs more stores in flight (SendRecvHeads on 32
// SMs at 128 MiB: 236 us with 512 threads, 289 us with 256).
const (
	maxThreadsPerBlock = 512
	unroll             = 8
)

// How many blocks an operation activates (activeBlocks; SMALL_GRANULE,
// FEW_BLOCKS and LARGE_GRANULE in gen/kernels, which captured operations
// use): one per smallGranule input bytes up to fewBlocks, one per
// largeGranule beyond when that is more.
const (
	smallGranule = 4096
	fewBlocks    = 64
	largeGranule = 65536
)

// argsBytes is the size of the kernels' single parameter.
const argsBytes = unsafe.Sizeof(kernelArgs{})

// Comm is one rank's endpoint of a group: a device buffer shared with the
// peers over CUDA IPC, the kernels, and a stream the operations run on.
//
// All methods are safe for concurrent use: they are serialised by the Comm.
// Operations are asynchronous on the Comm's stream; Sync waits for them.
// Several Comms may be used at once from any goroutines (see
// docs/RELIABILITY.md, "Concurrency").
type Comm struct {
	mu sync.Mutex

	cfg    Config
	dev    *Device
	share  *deviceShare // what the process's Comms on this device share
	stream driver.Stream
	// The stream of the last operation (stream, or one passed to On), and
	// an event marking the end of the last operation on a caller's stream.
	lastStream driver.Stream
	tail       driver.Event
	t          transport
	sm         *smTransport // t, for what only it has (blocks)

	layout    bufferLayout
	buf       driver.DevicePtr
	id        [16]byte // the Comm's identity (handle.Comm)
	self      handle
	selfBytes []byte
	launches  uint64 // operations launched: the device epoch of the last one

	tokens tokenSet
	copies []boxCopy // the copy-engine mode's scratch (opPlan.copies)
	// oneProcess: every rank of the group is in this process (MoverAuto).
	oneProcess bool
	captured   []capturedOp // operations captured into graphs that may replay
	inCapture  bool         // CaptureGraph is recording: only captured operations may be enqueued
	connected  bool
	failure    error // first failure; the Comm is broken once it is set
	reported   bool  // failure has been returned once as itself

	// Waiting and closing, which happen without the lock held: see wait
	// and Close. changed (on mu) signals waiting reaching 0 and closed.
	waiting int  // Syncs and helpers waiting for the stream
	closing bool // Close has begun: nothing new is enqueued
	closed  bool // Close has released everything
	changed sync.Cond
}

// New allocates this rank's buffer (capacity plus about 130 KiB of signals
// and state), creates its stream and, for the process's first Comm on the
// device, loads the kernels (about 0.1 s the first time the driver
// JIT-compiles the PTX; the driver caches the result). Connect (or Join)
// must follow before any operation. It waits for no other Comm's work.
func New(cfg Config) (*Comm, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dev, err := openDevice(cfg.Device, cfg.Rank)
	if err != nil {
		return nil, err
	}
	c := &Comm{cfg: cfg, dev: dev}
	c.changed.L = &c.mu
	if err := c.init(); err != nil {
		c.release()
		return nil, err
	}
	c.share.add(c)
	return c, nil
}

func (c *Comm) init() error {
	var err error
	if c.share, err = acquireShare(c.dev.drv, c.dev.info.Ordinal); err != nil {
		return err
	}
	ctx := c.dev.ctx
	if c.stream, err = ctx.StreamCreate(true); err != nil {
		return wrapDriver("creating stream", err)
	}
	c.lastStream = c.stream
	if c.tail, err = ctx.EventCreate(false); err != nil {
		return wrapDriver("creating an event", err)
	}
	c.layout = newBufferLayout(c.cfg.capacityBytes(), c.cfg.halves())
	if c.buf, err = ctx.MemAlloc(uint64(c.layout.total)); err != nil {
		return wrapDriver(fmt.Sprintf("allocating %d bytes", c.layout.total), err)
	}
	c.id = newCommID()
	registerBuffer(c.buf, c.share, bufferOwner{id: c.id, rank: c.cfg.Rank, dataBytes: c.layout.dataBytes})
	// Signals and state start at zero, and must be zero on the device before
	// any peer can see the handle. Only this Comm's stream is waited for.
	zeroWords := uint64(c.layout.total-c.layout.signalOff) / 4
	err = ctx.MemsetD32Async(c.buf+driver.DevicePtr(c.layout.signalOff), 0, zeroWords, c.stream)
	if err == nil {
		err = ctx.StreamSynchronize(c.stream)
	}
	if err != nil {
		return wrapDriver("clearing signals", err)
	}
	ipc, err := ctx.IpcGetMemHandle(c.buf)
	if err != nil {
		return wrapDriver("exporting the buffer", err)
	}
	if c.sm, err = newSMTransport(c.dev, c.share, c.stream, c.buf, c.layout, c.cfg); err != nil {
		return err
	}
	c.t = c.sm
	c.initHandle(ipc)
	return nil
}

// initHandle fills the handle peers need to map the buffer.
func (c *Comm) initHandle(ipc driver.IpcMemHandle) {
	c.self = handle{
		Rank: uint32(c.cfg.Rank), World: uint32(c.cfg.WorldSize), ElemBytes: uint8(c.cfg.DType.Size()),
		Blocks: uint32(c.sm.blocks), Pid: uint32(os.Getpid()), DataBytes: uint64(c.layout.dataBytes),
		Nonce: processNonce(), DevPtr: uint64(c.buf), IPC: ipc, SingleBuffer: c.cfg.SingleBuffer, Comm: c.id,
	}
	copy(c.self.BusID[:], c.dev.info.BusID)
	c.self.Host, c.self.Transport = hostIdentity(), c.cfg.Transport
	if c.cfg.Transport == TransportAuto {
		c.self.NReach, c.self.Reach = c.dev.reach()
	}
	c.selfBytes = c.self.encode()
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

// Device returns the device the Comm runs on, for the memory helpers. It is
// released by Close: free what you allocated through it before closing.
func (c *Comm) Device() *Device { return c.dev }

// Blocks returns the number of thread blocks each kernel runs (the group's
// minimum once connected).
func (c *Comm) Blocks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sm.blocks
}

// Buffer returns the region of the Comm's buffer that the last operation's
// views lie in, as a [1, MaxTokens, 1, HiddenDim] tensor (with MaxTensors
// over 1, [1, 1, 1, n] covering every packed output). Until the next
// operation it is the caller's, to read or overwrite (tests poison it);
// every other part of the buffer may be written by peers at any time.
func (c *Comm) Buffer() Tensor {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return Tensor{}
	}
	shape := [4]int{1, c.cfg.MaxTokens, 1, c.cfg.HiddenDim}
	if c.cfg.MaxTensors > 1 {
		shape = [4]int{1, 1, 1, int(c.layout.dataBytes / int64(c.cfg.DType.Size()))}
	}
	return Tensor{Ptr: uintptr(c.buf) + uintptr(c.halfOffset(c.launches)), Shape: shape, DType: c.cfg.DType}
}
