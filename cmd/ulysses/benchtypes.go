package main

import (
	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

type benchOpts struct {
	group                 groupFlags
	batch, heads, headDim int
	bytes, dtypes, ops    string
	sms                   string
	warmup, iters, rotate int
	graphOps              int
	json, compare, mover  string
	data                  string // --data: values or bits
	wires                 string // --wires: the wires each row is timed over
	wireDirect            string // --wire-direct-below
	wireLanding           string // --wire-landing
	plot                  string // --plot: the SVG of the times against size
	singleProcess         bool
	overlap               bool
	ncclSelf              bool         // --nccl-self
	ncclLaunch            string       // --nccl-launch
	phases                *phaseMarker // --nccl-self's marker, set by benchRun
	results               string       // worker only: where rank 0 writes its results
}

// benchPlan is the validated lists of a bench run.
type benchPlan struct {
	sizes     []int64
	dtypes    []a2a.DType
	ops       []benchOp
	sms       []int
	mover     a2a.Mover
	transport a2a.Transport
	sharing   a2a.Sharing
	wires     []a2a.Wire
	// wireDirect replaces plan.WireDirectBytes in every rank's process,
	// for the process's life (0: the library's own).
	wireDirect int64
	// landing replaces the library's choice of where staged wire rows are
	// decoded (ipc.LandingOverride), in every rank's process.
	landing ipc.Landing
	launch  nccltransport.Launch // --nccl-launch, in every rank's process
}

// benchOp is an operation as bench and nccl_bench.py name it.
type benchOp string

const (
	opSendRecvHeads benchOp = "send_recv_heads"
	opGatherHeads   benchOp = "gather_heads"
	opAllGather     benchOp = "all_gather"
	// HeadAllGather of GatherHeads' input, [B, T, H_rank, D]: every rank's
	// heads of every token to every rank. PyTorch + NCCL has no
	// counterpart in the comparison.
	opHeadAllGather benchOp = "head_all_gather"
	// q, k and v (3 tensors of --bytes each) exchanged by one
	// SendRecvHeadsPacked, and by three SendRecvHeads: one timed operation
	// each. PyTorch + NCCL has no counterpart in the comparison.
	opQKVPacked   benchOp = "qkv_packed"
	opQKVSeparate benchOp = "qkv_separate"
)

// sizePlan is one per-rank size that divides into whole tokens.
type sizePlan struct {
	bytes  int64
	tokens int // T_r
}

// benchRow is one timed (op, dtype, size, SM count), the slowest rank's
// statistics, and what they mean against the peer copy rate.
type benchRow struct {
	Impl          string  `json:"impl"`
	Mover         string  `json:"mover,omitempty"`     // a2a.Config.Mover of ulysses rows
	Transport     string  `json:"transport,omitempty"` // what the Comm used (Comm.Transport) of ulysses rows
	Sharing       string  `json:"sharing,omitempty"`   // how rank 0's buffer was shared (Comm.Sharing) of ulysses rows
	Wire          string  `json:"wire,omitempty"`      // a2a.Config.Wire of ulysses rows over a lossy wire; "" exactly
	Op            string  `json:"op"`
	DType         string  `json:"dtype"`
	BytesPerRank  int64   `json:"bytes_per_rank"`
	TokensPerRank int     `json:"tokens_per_rank"`
	World         int     `json:"world"`
	Batch         int     `json:"batch"`
	Heads         int     `json:"heads"`
	HeadDim       int     `json:"head_dim"`
	SMs           int     `json:"sms"`    // asked for; 0 = all
	Blocks        int     `json:"blocks"` // thread blocks the kernels ran
	Iters         int     `json:"iters"`
	MedianUS      float64 `json:"median_us"`
	P10US         float64 `json:"p10_us"`
	P90US         float64 `json:"p90_us"`
	MeanUS        float64 `json:"mean_us"`
	BackToBackUS  float64 `json:"back_to_back_us"` // mean per operation with no events between operations
	StreamUS      float64 `json:"stream_us"`       // the same on a stream of the caller's (Comm.On)
	GraphUS       float64 `json:"graph_us"`        // the same replayed from a CUDA graph of GraphOps operations
	GraphOps      int     `json:"graph_ops"`
	// --overlap: back to back beside the burn kernel, and the slowdowns
	// (0.05: 5% longer than alone) of the compute kernel and the exchange.
	OverlapUS               float64 `json:"overlap_us,omitempty"`
	OverlapComputeSlowdown  float64 `json:"overlap_compute_slowdown,omitempty"`
	OverlapExchangeSlowdown float64 `json:"overlap_exchange_slowdown,omitempty"`
	// --nccl-self: the median device time of each phase of the NCCL
	// transport's operation.
	Phases *phaseTimes `json:"nccl_phases,omitempty"`
	// --nccl-self at world one: NCCL's own send to itself (and
	// ncclAlltoAll) of the row's per-rank bytes, the same run.
	NCCLReference *ncclReference `json:"nccl_reference,omitempty"`
	AlgBWGBps     float64        `json:"algbw_gbps"`
	NVLinkBytes   float64        `json:"nvlink_bytes_per_rank"`
	FloorUS       float64        `json:"floor_us"`
	TimeOverFloor float64        `json:"time_over_floor"`
}

// finish fills in the derived columns, given the peer copy rate in bytes
// per second (0: unknown, no floor). Over a lossy wire, the NVLink bytes
// and the floor are those of the fp8 rows and their scales.
func (r *benchRow) finish(peerBW float64) {
	if r.MedianUS > 0 {
		r.AlgBWGBps = float64(r.BytesPerRank) / r.MedianUS / 1e3
	}
	r.NVLinkBytes = nvlinkBytes(benchOp(r.Op), r.BytesPerRank, r.World) * wireShare(r.Wire, r.HeadDim)
	r.FloorUS, r.TimeOverFloor = 0, 0
	if peerBW > 0 && r.NVLinkBytes > 0 {
		r.FloorUS = r.NVLinkBytes / peerBW * 1e6
		r.TimeOverFloor = r.MedianUS / r.FloorUS
	}
}

// benchResults is what rank 0 hands back to the parent.
type benchResults struct {
	PeerBandwidth float64    `json:"peer_bandwidth_bytes_per_s"`
	PeerPair      string     `json:"peer_pair"`
	PeerNote      string     `json:"peer_note,omitempty"`
	Rows          []benchRow `json:"rows"`
	Notes         []string   `json:"notes,omitempty"`
}

// benchReport is the --json file.
type benchReport struct {
	Date          string       `json:"date"`
	Command       []string     `json:"command"`
	Driver        string       `json:"driver"`
	DriverVersion int          `json:"driver_version"`
	GPUs          []string     `json:"gpus"`
	World         int          `json:"world"`
	Warmup        int          `json:"warmup"`
	Iters         int          `json:"iters"`
	Rotate        int          `json:"rotate"`
	PeerGBps      float64      `json:"peer_bandwidth_gbps"`
	PeerPair      string       `json:"peer_pair"`
	PeerNote      string       `json:"peer_note,omitempty"`
	Rows          []benchRow   `json:"rows"`
	Notes         []string     `json:"notes,omitempty"`
	NCCL          []ncclRecord `json:"nccl,omitempty"`
	NCCLNote      string       `json:"nccl_note,omitempty"`
	NCCLLaunch    string       `json:"nccl_launch"` // --nccl-launch: auto, async or blocking
	Data          string       `json:"data"`        // --data: values or bits
	Compare       []compareRow `json:"compare,omitempty"`
	Seconds       float64      `json:"seconds"`
}

// enqueuer is what enqueues the timed operations: a *a2a.Comm (its own
// stream) or an a2a.StreamOps (a stream of the bench's).
type enqueuer interface {
	SendRecvHeads(x a2a.Tensor) (a2a.Tensor, error)
	GatherHeadsPacked(heads int, views, xs []a2a.Tensor) error
	AllGather(x a2a.Tensor) (a2a.Tensor, error)
	HeadAllGather(heads int, x a2a.Tensor) (a2a.Tensor, error)
	SendRecvHeadsPacked(views, xs []a2a.Tensor) error
}

// benchInputs are the rotating inputs of one size: xs [B, T_r, H, D] and
// ys [B, T, H_rank, D] (GatherHeads'), with H heads in all.
type benchInputs struct {
	heads  int
	xs, ys []a2a.Tensor
}

// qkvTensors is how many tensors the qkv operations move.
const qkvTensors = 3

// opFunc is the i-th operation of a timed run: op on input i modulo the
// number of inputs (and the next ones, for the qkv operations), through
// e. GatherHeads goes through GatherHeadsPacked of one tensor, which takes
// the head count (the same kernels when P divides it).
func opFunc(e enqueuer, op benchOp, in benchInputs) func(int) error {
	n := len(in.xs)
	views := make([]a2a.Tensor, qkvTensors)
	qkv := make([][]a2a.Tensor, n) // qkv[i]: xs i, i+1, i+2 (mod n)
	for i := range qkv {
		for k := range qkvTensors {
			qkv[i] = append(qkv[i], in.xs[(i+k)%n])
		}
	}
	switch op {
	case opSendRecvHeads:
		return func(i int) error { _, err := e.SendRecvHeads(in.xs[i%n]); return err }
	case opGatherHeads:
		return func(i int) error { return e.GatherHeadsPacked(in.heads, views[:1], in.ys[i%n:i%n+1]) }
	case opHeadAllGather:
		return func(i int) error { _, err := e.HeadAllGather(in.heads, in.ys[i%n]); return err }
	case opQKVPacked:
		return func(i int) error { return e.SendRecvHeadsPacked(views, qkv[i%n]) }
	case opQKVSeparate:
		return func(i int) error {
			for _, x := range qkv[i%n] {
				if _, err := e.SendRecvHeads(x); err != nil {
					return err
				}
			}
			return nil
		}
	default:
		return func(i int) error { _, err := e.AllGather(in.xs[i%n]); return err }
	}
}
