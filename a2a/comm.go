package a2a

import (
	"crypto/rand"
	"fmt"
	"os"
	"sync"

	tp "github.com/ulysses-go/ulysses/internal/transport"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/device"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/fdshare"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// Comm is one rank's endpoint of a group: a device buffer shared with the
// peers over CUDA IPC or as a file descriptor (Config.Sharing), the kernels, and a stream the operations run on.
//
// All methods are safe for concurrent use: they are serialised by the Comm.
// Operations are asynchronous on the Comm's stream; Sync waits for them.
// Several Comms may be used at once from any goroutines (see
// docs/RELIABILITY.md, "Concurrency").
type Comm struct {
	mu sync.Mutex

	cfg    Config
	dev    *Device
	share  *device.Share // what the process's Comms on this device share
	member device.Member // this Comm in share: its stream and tail, for the graveyard
	stream driver.Stream
	// The stream of the last operation (stream, or one passed to On), and
	// an event marking the end of the last operation on a caller's stream.
	lastStream driver.Stream
	tail       driver.Event
	t          tp.Transport // chosen and built by Connect; nil before
	env        plan.Env     // what planning reads of the Comm, set with t
	blocks     int          // this rank's wish of blocks, in its handle

	layout    plan.Layout
	buf       driver.DevicePtr
	fdServer  *fdshare.Server // hands the buffer's descriptor to the peers (SharingFD); nil otherwise
	sharing   Sharing         // how the buffer is shared: SharingLegacyIPC or SharingFD
	selfBytes []byte
	launches  uint64 // operations launched: the device epoch of the last one

	tokens    plan.Tokens
	captured  []capturedOp // operations captured into graphs that may replay
	inCapture bool         // CaptureGraph is recording: only captured operations may be enqueued
	failure   error        // first failure; the Comm is broken once it is set
	reported  bool         // failure has been returned once as itself

	// Waiting and closing, which happen without the lock held: see wait
	// and Close. changed (on mu) signals waiting reaching 0 and closed.
	waiting int  // Syncs and helpers waiting for the stream
	closing bool // Close has begun: nothing new is enqueued
	closed  bool // Close has released everything
	changed sync.Cond
}

// New allocates this rank's buffer (capacity plus about 130 KiB of signals
// and state), creates its stream and, for the process's first Comm on the
// device, loads the kernels: the machine code embedded for the GPU, or
// where there is none the PTX of the barriers, which the driver compiles
// (package doc, "Kernels"). Shared as a file descriptor (Config.Sharing),
// the buffer is rounded up to the driver's granularity (2 MiB) and a
// socket serves it until Close. Connect (or Join) must follow before any
// operation. It waits for no other Comm's work.
func New(cfg Config) (*Comm, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dev, err := openDevice(cfg.Device, cfg.Rank)
	if err != nil {
		return nil, err
	}
	if info := dev.Info(); cfg.Wire.Lossy() && !device.WireRuns(info.Major, info.Minor) {
		dev.Close()
		return nil, fmt.Errorf("a2a: the %v wire needs compute capability 9.0 or later; GPU %d has %d.%d: %w", cfg.Wire, info.Ordinal, info.Major, info.Minor, ErrNotSupported)
	}
	c := &Comm{cfg: cfg, dev: dev}
	c.changed.L = &c.mu
	if err := c.init(); err != nil {
		c.release()
		return nil, err
	}
	c.member = device.Member{Stream: c.stream, Tail: c.tail, Owner: c}
	c.share.Add(&c.member)
	return c, nil
}

func (c *Comm) init() error {
	var err error
	if c.share, err = device.Acquire(c.dev.drv, c.dev.info.Ordinal); err != nil {
		return err
	}
	ctx := c.dev.ctx
	if c.stream, err = ctx.StreamCreate(true); err != nil {
		return api.WrapDriver("creating stream", err)
	}
	c.lastStream = c.stream
	if c.tail, err = ctx.EventCreate(false); err != nil {
		return api.WrapDriver("creating an event", err)
	}
	c.layout = plan.NewLayout(c.cfg.capacityBytes(), c.cfg.halves())
	vmm, err := c.cfg.Sharing.useFD(c.dev.info)
	if err != nil {
		return err
	}
	var id [16]byte // the buffer's ID in the handle: only the group sees it
	if _, err := rand.Read(id[:]); err != nil {
		return fmt.Errorf("a2a: making the buffer's ID: %w", err)
	}
	alloc, err := device.Allocate(ctx, uint64(c.layout.Total), vmm)
	if err != nil {
		return api.WrapDriver(fmt.Sprintf("allocating %d bytes", c.layout.Total), err)
	}
	c.buf = alloc.Ptr
	device.RegisterBuffer(alloc, c.share, c.cfg.Rank, c.layout.DataBytes, id)
	// Signals and state start at zero, and must be zero on the device before
	// any peer can see the handle. Only this Comm's stream is waited for.
	zeroWords := uint64(c.layout.Total-c.layout.SignalOff) / 4
	err = ctx.MemsetD32Async(c.buf+driver.DevicePtr(c.layout.SignalOff), 0, zeroWords, c.stream)
	if err == nil {
		err = ctx.StreamSynchronize(c.stream)
	}
	if err != nil {
		return api.WrapDriver("clearing signals", err)
	}
	var ipc driver.IpcMemHandle
	shared := handle.SharedLegacyIPC
	c.sharing = SharingLegacyIPC
	if alloc.VMM() {
		shared, c.sharing = handle.SharedFD, SharingFD
		if c.fdServer, err = serveFD(ctx, alloc, c.layout.Total, id, c.cfg.Rank, c.cfg.WorldSize, c.cfg.timeout()); err != nil {
			return err
		}
	} else if ipc, err = ctx.IpcGetMemHandle(c.buf); err != nil {
		return api.WrapDriver("exporting the buffer", err)
	}
	c.blocks = c.cfg.blocks(c.dev.info.SMs)
	c.initHandle(ipc, shared, id)
	return nil
}

// initHandle fills the handle peers need to map the buffer.
func (c *Comm) initHandle(ipc driver.IpcMemHandle, shared handle.Shared, id [16]byte) {
	self := handle.Handle{
		Rank: uint32(c.cfg.Rank), World: uint32(c.cfg.WorldSize), ElemBytes: uint8(c.cfg.DType.Size()),
		Blocks: uint32(c.blocks), Pid: uint32(os.Getpid()), DataBytes: uint64(c.layout.DataBytes),
		Nonce: handle.ProcessNonce(), DevPtr: uint64(c.buf), IPC: ipc, Shared: shared, SingleBuffer: c.cfg.SingleBuffer, ID: id,
	}
	if shared == handle.SharedFD {
		self.SetFDDir(c.fdServer.Dir()) // it fits: fdshare.MaxDirLen is the payload's size
	}
	copy(self.BusID[:], c.dev.info.BusID)
	self.Host, self.Transport = handle.HostIdentity(), api.Transport(c.cfg.Transport)
	if c.cfg.Transport == TransportAuto {
		self.NReach, self.Reach = reach(c.dev.drv, c.dev.info.Ordinal)
	}
	c.selfBytes = self.Encode()
}

// made reports whether New made c: false for a nil Comm (what a failed
// New or Join returns) and for the zero Comm. Every exported method
// answers on those without panicking: the operations and the other
// methods that return an error return one matching ErrNotConnected
// (unmade), Close returns nil, and the accessors return zero values.
func (c *Comm) made() bool { return c != nil && c.dev != nil }

// unmade is what a method that returns an error returns on a Comm that
// New did not make.
func unmade(method string) error {
	return fmt.Errorf("a2a: %s on a Comm that New did not make (nil, or the zero Comm): %w", method, ErrNotConnected)
}

// Handle returns the bytes peers need to map this rank's buffer (a few
// hundred, of a length Connect checks). Pass every rank's handle, in rank
// order, to Connect. It is nil for a Comm that New did not make.
func (c *Comm) Handle() []byte {
	if !c.made() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]byte(nil), c.selfBytes...)
}

// Config returns the configuration the Comm was made with (Timeout as last
// set by SetTimeout); the zero Config for a Comm that New did not make.
func (c *Comm) Config() Config {
	if !c.made() {
		return Config{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg
}

// Rank returns this rank (0 for a Comm that New did not make: check
// WorldSize, which is 0 then).
func (c *Comm) Rank() int {
	if !c.made() {
		return 0
	}
	return c.cfg.Rank
}

// WorldSize returns the number of ranks, or 0 for a Comm that New did not
// make.
func (c *Comm) WorldSize() int {
	if !c.made() {
		return 0
	}
	return c.cfg.WorldSize
}

// Device returns the device the Comm runs on, for the memory helpers (nil
// for a Comm that New did not make). It is released by Close: free what
// you allocated through it before closing; afterwards its helpers return
// an error matching ErrClosed.
func (c *Comm) Device() *Device {
	if !c.made() {
		return nil
	}
	return c.dev
}

// Blocks returns the number of thread blocks each kernel runs: this
// rank's wish until Connect, the group's least after (over NCCL, whose own
// kernels move the bytes, 0, or with the fp8 wire this rank's wish, the
// most its conversions run); 0 for a Comm that New did not make.
func (c *Comm) Blocks() int {
	if !c.made() {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.blocksLocked()
}

// blocksLocked is Blocks for a caller that holds c.mu.
func (c *Comm) blocksLocked() int {
	if c.t != nil {
		return c.t.Blocks()
	}
	return c.blocks
}

// Buffer returns the region of the Comm's buffer that the last operation's
// views lie in, as a [1, MaxTokens, 1, HiddenDim] tensor (with MaxTensors
// over 1, [1, 1, 1, n] covering every packed output). Until the next
// operation it is the caller's, to read or overwrite (tests poison it);
// every other part of the buffer may be written by peers at any time. It
// is the zero Tensor once the Comm is closing, and for a Comm that New
// did not make.
func (c *Comm) Buffer() Tensor {
	if !c.made() {
		return Tensor{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return Tensor{}
	}
	shape := [4]int{1, c.cfg.MaxTokens, 1, c.cfg.HiddenDim}
	if c.cfg.MaxTensors > 1 {
		shape = [4]int{1, 1, 1, int(c.layout.DataBytes / int64(c.cfg.DType.Size()))}
	}
	return Tensor{Ptr: uintptr(c.buf) + uintptr(c.halfOffset(c.launches)), Shape: shape, DType: c.cfg.DType}
}
