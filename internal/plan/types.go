package plan

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/ptx"
)

// Plan is what one operation launches: checked against the token counts
// and the capacity before anything is enqueued.
type Plan struct {
	Op       ptx.Op
	Batch    int    // B, which every input has
	Out      [4]int // output shape on this rank
	OutBytes int64
	Chunk    int64 // bytes moved as one piece: a head group of one token, or a whole token row
	Width    int   // vector width in bytes (may differ across ranks: it depends on local alignment)
	Vectors  int64 // vectors this rank's kernel walks
	// GroupBytes is the most input bytes any rank's kernel walks: it sets
	// the number of active blocks, which every rank must compute alike.
	GroupBytes int64
	GroupRow   int64  // groupBytes per token of the largest rank
	Sig        uint32 // withTokens(shapeSig, the counts): the same on every rank
	ShapeSig   uint32 // sig without the token counts, for captured operations

	// The general entries' part (general).
	General   bool
	Tensors   int
	Region    int64 // bytes between consecutive tensors' outputs in a half
	Heads     [kernelabi.MaxRanks + 1]int32
	Inputs    [MaxTensors]uint64 // every tensor's input (plain and planRows fill it)
	Units     int64              // vectors per input token row (SendRecvHeads) or per chunk
	HeadUnits int64              // vectors per head
	InRow     int64              // vectors between consecutive input tokens
	WalkTotal bool               // HeadAllGather: the walk grows with all tokens
	Spread    bool               // every rank takes the general entries: see generalSpread

	// The fp8 wire (wire): each tensor's staged codes and scale bytes in
	// a data half, after the outputs, and what the decode walks.
	Wire        api.Wire
	WireWidth   int   // bytes of input the wire entries read at once: 16, 8 or 2
	DecodeWidth int   // the decode entry's width (WireDecodeWidth of the head size)
	StageOff    int64 // tensor 0's codes, from the half's start
	ScaleOff    int64 // tensor 0's scale bytes, from the half's start
	StageRegion int64 // bytes between consecutive tensors' codes
	ScaleRegion int64 // bytes between consecutive tensors' scale bytes
	WireRows    int64 // rows one tensor's codes hold
	WireDirect  bool  // every row crosses as rounded 16-bit values: no staging, no decode (WireDirectBytes)

	// The copy-engine mode (Config.Mover): every box this rank moves, in
	// the transport's scratch slice, then ulysses_sync.
	ByCopies bool
	Copies   []Box
}

// MaxTensors is the most tensors one head operation moves (q, k, v and
// one more).
const MaxTensors = kernelabi.MaxTensors

// Request is one operation as the caller asked for it, built once by
// package a2a from its checked inputs (NewInput) and only read after: the
// inputs, N of them (1 to MaxTensors; the packed forms' share a shape and
// stride, which planning checks), with the Into forms' outputs beside
// them, and for GatherHeads and HeadAllGather all ranks' heads together
// (0: this rank's times the world size). It is fixed-size, and passed by
// value like Plan.
type Request struct {
	Op       ptx.Op
	N, Heads int
	Xs       [MaxTensors]Input
	Dsts     [MaxTensors]Input // the Into forms' outputs, when Into
	Into     bool
	// Captured: the operation is captured into a CUDA graph (package a2a
	// asked the driver), so its replays read the token counts set then:
	// planning cuts its inputs to the counts' tokens (Fits).
	Captured bool
}

// BoxSide is one side of a boxCopy: where its first row starts (bytes from
// the input's address, or from the start of the peer's data half), the
// bytes from one row to the next, and the rows from one slice to the next.
type BoxSide struct {
	Off, Pitch, Height int64
}

// Box is one copy-engine copy of an operation: depth (batch) slices
// of rows rows of width bytes, from input tensor of this rank into the
// data half of rank peer. The layout change is all in the two sides'
// offsets and pitches, as the kernels fold it into their stores.
type Box struct {
	Peer, Tensor       int
	Src, Dst           BoxSide
	Width, Rows, Depth int64
}
