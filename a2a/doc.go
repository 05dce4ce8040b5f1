// Package a2a moves attention activations between the GPUs of one machine
// for sequence-parallel ("Ulysses") attention. Each operation is one CUDA
// kernel that writes straight into the peers' memory over CUDA IPC, with
// the head/sequence layout change folded into the copy. Where IPC cannot
// reach (GPUs without peer access, several hosts), Config.Transport can
// take NCCL instead, loaded at run time (TransportNCCL, TransportAuto).
//
// # Operations
//
// A Tensor describes device memory of the caller's: its address, shape
// [B, T, H, D], DType and token stride. Each operation checks its tensors
// once, before anything is enqueued.
//
// Rank r of P holds T_r tokens (any count, zero included); T is their sum.
// H_r is the rank's share of the H heads: H/P, or where P does not divide
// H one more on the first H mod P ranks (HeadRange).
//
//	SendRecvHeads  [B, T_r, H, D]  -> [B, T, H_r, D]  this rank's heads of every token
//	GatherHeads    [B, T, H_r, D]  -> [B, T_r, H, D]  the inverse
//	AllGather      [B, T_r, H, D]  -> [B, T, H, D]    the same on every rank
//	HeadAllGather  [B, T, H_r, D]  -> [B, T, H, D]    the same on every rank
//
// SendRecvHeadsPacked and GatherHeadsPacked move q, k and v (up to four
// tensors) in one launch, and inputs may be strided views of a fused
// projection (Tensor.RowStride). They only move bytes: bf16, fp16 and both
// fp8 formats, bit-exact. Package a2a/ref is the CPU reference of all four.
//
// # Lifecycle
//
// New allocates a rank's buffer; Connect maps every peer's (Join does both
// with an Exchanger, such as a2a/exchange's TCP one); SetRankTokens sets
// the token counts of the operations that follow; the operations enqueue
// on the Comm's stream and return at once; Sync waits for them; Close says
// goodbye to the peers and releases everything. Every rank must run the
// same operations, on the same shapes and counts, in the same order.
// NewGroup makes a whole group in one process instead, one Comm per
// device.
//
// # Kernels
//
// The kernels are embedded as machine code for sm_90 (H100, H200) and
// sm_80 (A100, and the GPUs of compute capability 8.6 and 8.9), which the
// process's first Comm on a device loads whole, and as PTX, which the
// driver compiles for any other GPU (and for every GPU while the
// environment variable ULYSSES_PTX_ONLY=1 is set). From PTX, the
// first Comm on a device compiles the barriers only, and each kind of
// operation's kernels (every width and form; over the fp8 wire, per format
// and type) are compiled the first time one of them runs there. A load
// waits for every kernel on the device, so that first operation waits
// first, for at most the Comm's timeout, until no Comm of the process has
// operations queued there (else ErrTimeout, with nothing enqueued): a
// goroutine that drives several ranks of a group must enqueue an operation
// on all of them before a new kind of operation on any. DeviceInfo says
// what each GPU gets, and why.
//
// # Streams and graphs
//
// Comm.On(s) enqueues the operations on a stream of the caller's, between
// the caller's own kernels, with no host wait; the Comm keeps its
// operations in order across streams. CaptureGraph records operations
// enqueued on a capturing stream into a CUDA graph that Graph.Launch
// replays; replays use the token counts set last, and the views keep their
// address.
//
// # Movers
//
// Config.Mover chooses what moves the bytes: the SM kernels (the default,
// fastest alone), the copy engines (MoverCopyEngines: one block of one SM
// for the barrier, the rest left to the caller's kernels), or either by
// size (MoverAuto). Captured operations always take the kernels.
//
// # The fp8 wire
//
// Config.Wire (WireE4M3, WireE5M2; opt-in, lossy) sends bf16 and fp16 rows
// of D elements as fp8 codes with one power-of-two scale per row, about
// half the bytes: every output equals ref.RoundTripRows of the exact one,
// byte for byte, each element within amax/16 (E4M3) or amax/8 (E5M2) of
// its row's largest magnitude amax. It takes the SM kernels (compute
// capability 9.0 or later) and about 1.56 times the buffer; over CUDA IPC,
// operations of 4 MiB a rank or more cost a second launch that decodes the
// peers' rows, smaller ones send the rounded 16-bit values in one. Over
// NCCL a launch quantizes the rank's rows before NCCL's transfer and
// another decodes after it, with one more buffer half of staging.
//
// # Views
//
// An operation returns a view: a Tensor inside the Comm's buffer, valid
// until the next operation on the Comm is enqueued; on the device, work
// queued on the operation's stream before the next operation may read it
// (after a graph replay, the view of each Comm's last captured operation
// holds until its next operation or replay). It may be passed to the next
// operation directly (GatherHeads(SendRecvHeads(x)) needs no
// copy). The Into forms copy the result to a tensor of the caller's.
//
// # Errors
//
// Bad input gets an error that errors.Is matches to a sentinel (ErrShape,
// ErrTokens, ...) and enqueues nothing. A failure on the device (a peer
// that never arrives, a peer that closed, ranks that ran different
// operations) comes back from Sync or the next operation as a
// *TimeoutError, *PeerClosedError or *MismatchError (errors.As reads
// their fields), never as a result; the Comm is then broken and returns
// ErrBroken until closed. No wait is unbounded: Config.Timeout bounds
// every one.
//
// # Memory helpers
//
// Device (Comm.Device, OpenDevice) has Alloc, Free, Upload, Download,
// Fill and streams, for callers with no other CUDA binding: each waits for
// its own work on the device, so they are for setup and tests, not the hot
// path. Callers with a binding of their own pass its device pointers and
// streams instead (cuinterop does it for gorgonia.org/cu).
//
// # Concurrency
//
// A Comm's methods are safe for concurrent use. Sync and Close wait
// without holding the Comm, and a Close made while a Sync waits for a peer
// that never comes ends that wait at once (the Sync returns an error
// matching ErrClosed). A process may hold many Comms, on one GPU or
// several, and use them at once from any goroutines: no call on one waits
// for another's kernels. The memory helpers of Device wait for their own
// copies and for the Comm whose buffer they touch, nothing else.
// docs/RELIABILITY.md lists what each call waits for, and docs/DESIGN.md
// how the package is built.
package a2a
