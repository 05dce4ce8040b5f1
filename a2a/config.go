package a2a

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// MaxWorldSize is the largest number of ranks in one group (the kernels'
// limit).
const MaxWorldSize = 8

// maxBlocks bounds the number of thread blocks (the signal area has one flag
// per block, peer and phase).
const maxBlocks = kernelabi.MaxBlocks

// DefaultTimeout bounds every barrier wait when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// Config describes one rank of a group.
type Config struct {
	Rank      int // this rank, 0 <= Rank < WorldSize
	WorldSize int // number of ranks, 1..MaxWorldSize

	// Device is the CUDA device ordinal this rank uses. Nil means Rank
	// modulo the number of visible GPUs (several ranks may share a GPU).
	Device *int

	// MaxTokens is the capacity of the Comm's buffer in tokens at the full
	// hidden size, batch included: every output must fit in
	// MaxTokens * HiddenDim elements. It costs that much device memory.
	MaxTokens int
	HiddenDim int   // H*D of the activations
	DType     DType // element type

	// MaxTensors is the most tensors one packed operation moves
	// (SendRecvHeadsPacked: 3 for q, k and v); 0 means 1. The buffer holds
	// that many outputs of MaxTokens tokens, each rounded up to 256 bytes,
	// so it costs that many times the memory.
	MaxTensors int

	// Transport is how operations reach the peers: CUDA IPC (the zero
	// value), NCCL, or the choice of the group's handles (TransportAuto).
	// All ranks must agree. See Transport for what each costs.
	Transport Transport

	// Sharing is how this rank's buffer is allocated and shared with the
	// peers of other processes: legacy CUDA IPC (SharingLegacyIPC), a
	// POSIX file descriptor over a Unix-domain socket (SharingFD), or the
	// latter where the device supports it (SharingAuto, what the zero
	// value SharingDefault means). Ranks may differ. See Sharing for what
	// each costs.
	Sharing Sharing

	// Mover is what moves an operation's bytes: the SM kernels (the
	// default), the copy engines, or either by size (MoverAuto). All
	// ranks must agree (ranks that do not fail the operation, bounded by
	// the timeout).
	Mover Mover

	// NumSMs is the number of thread blocks each kernel runs (one per SM);
	// 0, or more than the device has, uses every SM. Fewer leave room for
	// kernels running beside the copy. All ranks use the smallest value
	// any of them asks for.
	NumSMs int

	// Timeout bounds every barrier wait; 0 means DefaultTimeout.
	Timeout time.Duration

	// Wire chooses how bf16 and fp16 elements cross between the GPUs:
	// exactly (WireExact, the zero value), or as fp8 rows with a scale
	// each (WireE4M3, WireE5M2): about half the bytes, lossy. The output
	// is the exact output with every row (one head of one token, D
	// elements) rounded through fp8 and back, on every rank alike
	// (a2a/ref.RoundTripRows; docs/DESIGN.md, "The fp8 wire", bounds the
	// error). Every operation and form takes it. It needs the SM kernels
	// (ErrConfig with the copy engines), compute capability 9.0 or later
	// (ErrNotSupported), and about 1.56 times the buffer. Over CUDA IPC,
	// operations whose largest rank reads 4 MiB or more cost a second
	// launch, which decodes the peers' rows; smaller ones are one. Over
	// NCCL every operation is a launch that quantizes this rank's rows,
	// NCCL's sends of the codes and scale bytes, and a launch that decodes
	// what arrived; the transport then holds a third staging region (one
	// more buffer half) for the codes it sends.
	// The conversion costs SM time, the more so on fewer SMs
	// (docs/BENCHMARKS.md, "the fp8 wire"). Its kernels load like the
	// others (package doc, "Kernels"): with the process's first Comm on an
	// sm_90 device, from machine code; elsewhere each operation's the first
	// time it runs over the wire. All ranks must agree.
	Wire Wire
	// SingleBuffer halves the buffer's memory at the cost of a second
	// barrier per operation (a few microseconds: it matters for small
	// messages). By default the data region has two halves that
	// consecutive operations alternate between, which lets each operation
	// skip the barrier before its writes. All ranks must agree.
	SingleBuffer bool
}

// DeviceOrdinal returns a pointer to n, for Config.Device.
func DeviceOrdinal(n int) *int { return &n }

// halves is the number of data halves: 2 unless SingleBuffer.
func (c Config) halves() int64 {
	if c.SingleBuffer {
		return 1
	}
	return 2
}

// capacityBytes is the size of one data half: the largest output, or
// MaxTensors of them, each from a multiple of outputAlign.
func (c Config) capacityBytes() int64 {
	one := int64(c.MaxTokens) * int64(c.HiddenDim) * int64(c.DType.Size())
	if c.Wire.Lossy() {
		return plan.WireBytes(one, c.MaxTensors)
	}
	if c.MaxTensors <= 1 {
		return one
	}
	return plan.AlignUp(one, plan.OutputAlign) * int64(c.MaxTensors)
}

func (c Config) validate() error {
	switch {
	case c.WorldSize < 1 || c.WorldSize > MaxWorldSize:
		return fmt.Errorf("a2a: world size %d not in 1..%d: %w", c.WorldSize, MaxWorldSize, ErrConfig)
	case c.Rank < 0 || c.Rank >= c.WorldSize:
		return fmt.Errorf("a2a: rank %d not in [0, %d): %w", c.Rank, c.WorldSize, ErrConfig)
	case c.Device != nil && *c.Device < 0:
		return fmt.Errorf("a2a: device %d is negative: %w", *c.Device, ErrConfig)
	case c.MaxTokens < 1:
		return fmt.Errorf("a2a: MaxTokens %d must be positive: %w", c.MaxTokens, ErrConfig)
	case c.HiddenDim < 1:
		return fmt.Errorf("a2a: HiddenDim %d must be positive: %w", c.HiddenDim, ErrConfig)
	case !c.DType.Valid():
		return fmt.Errorf("a2a: %v: %w", c.DType, ErrDType)
	case c.NumSMs < 0 || c.NumSMs > maxBlocks:
		return fmt.Errorf("a2a: NumSMs %d not in 0..%d: %w", c.NumSMs, maxBlocks, ErrConfig)
	case c.Mover > MoverAuto:
		return fmt.Errorf("a2a: Mover %d unknown: %w", c.Mover, ErrConfig)
	case !api.Transport(c.Transport).Known():
		return fmt.Errorf("a2a: Transport %d unknown: %w", c.Transport, ErrConfig)
	case c.Sharing > SharingAuto:
		return fmt.Errorf("a2a: Sharing %d unknown: %w", c.Sharing, ErrConfig)
	case c.MaxTensors < 0 || c.MaxTensors > plan.MaxTensors:
		return fmt.Errorf("a2a: MaxTensors %d not in 0..%d: %w", c.MaxTensors, plan.MaxTensors, ErrConfig)
	case c.Wire > WireE5M2:
		return fmt.Errorf("a2a: Wire %d unknown: %w", c.Wire, ErrConfig)
	case !c.Wire.Carries(c.DType):
		return fmt.Errorf("a2a: the %v wire moves bf16 or fp16, not %v: %w", c.Wire, c.DType, ErrConfig)
	case c.Wire.Lossy() && c.Mover == MoverCopyEngines:
		return fmt.Errorf("a2a: the %v wire converts in the kernels; the copy engines cannot (MoverAuto takes the kernels): %w", c.Wire, ErrConfig)
	case c.Timeout < 0:
		return fmt.Errorf("a2a: negative timeout %v: %w", c.Timeout, ErrConfig)
	case int64(c.MaxTokens) > plan.MaxDataBytes/int64(c.HiddenDim)/int64(c.DType.Size()):
		return fmt.Errorf("a2a: MaxTokens %d * HiddenDim %d overflows the %d-byte limit: %w", c.MaxTokens, c.HiddenDim, int64(plan.MaxDataBytes), ErrConfig)
	}
	if c.capacityBytes() > plan.MaxDataBytes {
		return fmt.Errorf("a2a: buffer of %d bytes is over the %d-byte limit: %w", c.capacityBytes(), int64(plan.MaxDataBytes), ErrConfig)
	}
	return nil
}

// defaultNumSMs is what NumSMs 0 asks for: every SM (0). A variable only
// so that a test binary can run its whole GPU suite on a few SMs, as a
// model step would leave the exchange.
var defaultNumSMs int

// blocks is how many thread blocks this rank wishes its kernels to run on
// a device of sms SMs: one per SM it may use, never more than the SMs (the
// protocol's waits rely on a block an SM: with 264 blocks on an H200's
// 132, a graph's replay found a data half written twice in a row).
func (c Config) blocks(sms int) int {
	n := c.NumSMs
	if n == 0 {
		n = defaultNumSMs
	}
	if n == 0 || n > sms {
		n = sms
	}
	return min(n, maxBlocks)
}

func (c Config) timeout() time.Duration {
	if c.Timeout == 0 {
		return DefaultTimeout
	}
	return c.Timeout
}
