package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/a2a/ref"
	wireplan "github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/timing"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

func benchWorker(args []string, stdout, stderr io.Writer) int {
	fs, o := newBenchFlags(true)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	plan, err := o.plan()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitUsage
	}
	m, err := joinGroup()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitUsage
	}
	res, code := benchRank(m, o, plan, stderr)
	if res == nil {
		return code
	}
	if o.results == "" {
		err = json.NewEncoder(stdout).Encode(res)
	} else {
		err = writeJSONFile(o.results, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitFailed
	}
	return 0
}

// benchRank runs rank m's part of the bench, the only rank of this
// process, and closes its exchanger (and, with --overlap, the burn kernel
// it opens before and closes after every Comm: see openRankBurner). It
// returns rank 0's results, or nil and the exit code (0 on the other ranks
// when they succeeded).
func benchRank(m *member, o *benchOpts, plan benchPlan, stderr io.Writer) (*benchResults, int) {
	defer m.ex.Close()
	var err error
	if o.overlap {
		if m.burn, err = openRankBurner(m); err != nil {
			fmt.Fprintf(stderr, "bench: rank %d: %s\n", m.rank, oneLine(err))
			return nil, exitFailed
		}
	}
	res, err := benchRun(m, o, plan, stderr)
	if m.burn != nil {
		err = errors.Join(err, m.burn.closeAfterComms())
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: rank %d: %s\n", m.rank, oneLine(err))
		return nil, exitFailed
	}
	if m.rank != 0 {
		return nil, 0
	}
	return res, 0
}

// rankReport is what every rank contributes after each size: its stats per
// op, or what went wrong.
type rankReport struct {
	Stats []opStats `json:"stats,omitempty"`
	Err   string    `json:"err,omitempty"`
}

// benchRun times every dtype, SM count, wire and size on one rank. Rank 0 returns
// the rows (the slowest rank's statistics); the other ranks return nil
// rows.
func benchRun(m *member, o *benchOpts, plan benchPlan, stderr io.Writer) (*benchResults, error) {
	lead := m.rank == 0
	res := &benchResults{}
	if plan.wireDirect != 0 {
		// For the process's life: with --single-process every rank's
		// goroutine sets the same value, and none may reset it while
		// another still plans operations.
		wireplan.WireDirectOverride.Store(plan.wireDirect)
	}
	if plan.landing != ipc.LandingAuto {
		ipc.LandingOverride.Store(int32(plan.landing)) // as wireDirect, for the process's life
	}
	if lead {
		// Before any Comm exists; the others wait in the round below.
		res.PeerBandwidth, res.PeerPair, res.PeerNote = measurePeerCopy(peerCopyBytes, peerCopyIters)
		if res.PeerNote != "" {
			fmt.Fprintf(stderr, "bench: %s\n", res.PeerNote)
		} else {
			fmt.Fprintf(stderr, "bench: peer copy %s: %.1f GB/s\n", res.PeerPair, res.PeerBandwidth/1e9)
		}
	}
	if _, err := m.gather(nil); err != nil {
		return nil, err
	}
	if o.ncclSelf || plan.launch != nccltransport.LaunchAuto { // for the process's life, as the wire override
		tn := nccltransport.Tuning{Self: o.ncclSelf, Launch: plan.launch}
		if o.ncclSelf {
			o.phases = &phaseMarker{}
			tn.Marker = o.phases
			defer o.phases.close()
		}
		nccltransport.SetTuning(tn)
	}
	for _, dt := range plan.dtypes {
		sizes, _ := sizePlans(plan.sizes, o.batch, o.heads, o.headDim, dt) // plan refused sizes of no whole token
		wires, notes := plan.wiresFor(dt)
		if lead {
			res.Notes = append(res.Notes, notes...)
			for _, n := range notes {
				fmt.Fprintf(stderr, "bench: %s\n", n)
			}
		}
		if len(wires) == 0 {
			continue
		}
		maxTokens := 0
		for _, s := range sizes {
			maxTokens = max(maxTokens, s.tokens)
		}
		for _, sms := range plan.sms {
			batches := make([][]benchRow, 0, len(wires))
			for _, w := range wires {
				cfg := a2a.Config{MaxTokens: o.batch * m.world * maxTokens, HiddenDim: o.heads * o.headDim, DType: dt, NumSMs: sms, Mover: plan.mover, Transport: plan.transport, Sharing: plan.sharing, Wire: w}
				if slices.Contains(plan.ops, opQKVPacked) {
					cfg.MaxTensors = qkvTensors
				}
				rows, err := benchConfig(m, cfg, o, plan.ops, sizes, stderr)
				if err != nil {
					return nil, err
				}
				batches = append(batches, rows)
			}
			res.Rows = append(res.Rows, interleaveWires(batches)...)
		}
	}
	return res, nil
}

// benchConfig times every size on a Comm of cfg, which it joins and
// closes.
func benchConfig(m *member, cfg a2a.Config, o *benchOpts, ops []benchOp, sizes []sizePlan, stderr io.Writer) ([]benchRow, error) {
	comm, err := m.join(cfg)
	if err != nil {
		return nil, err
	}
	rows, err := benchComm(m, comm, cfg.DType, o, ops, sizes, cfg.NumSMs, stderr)
	if cerr := comm.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return rows, err
}

// benchComm times every size on one Comm; after each size the ranks send
// their stats to rank 0, which keeps the slowest rank's as the row.
func benchComm(m *member, comm *a2a.Comm, dt a2a.DType, o *benchOpts, ops []benchOp, sizes []sizePlan, sms int, stderr io.Writer) ([]benchRow, error) {
	lead := m.rank == 0
	var rows []benchRow
	wire := wireName(comm.Config().Wire)
	label := dt.String() // the dtype, and the wire when lossy
	if wire != "" {
		label += " over " + wire
	}
	burn := m.burn // with --overlap; opened before any Comm, closed after the last
	for _, sz := range sizes {
		if lead {
			fmt.Fprintf(stderr, "bench: %s %s SMs %s: %v ...\n", label, formatBytes(float64(sz.bytes)), smsLabel(sms, comm.Blocks()), ops)
		}
		stats, err := benchSize(comm, dt, o, ops, sz, burn)
		var rep rankReport
		if err != nil {
			rep.Err = oneLine(err)
			// Said now, before the round that reports it to rank 0: a rank
			// whose peer died waits there until it is stopped, and the
			// launcher quotes the last line of its output.
			fmt.Fprintf(stderr, "bench: rank %d: %s %s: %s\n", m.rank, label, formatBytes(float64(sz.bytes)), rep.Err)
		} else {
			rep.Stats = stats
		}
		payload, _ := json.Marshal(rep)
		all, gerr := m.gather(payload)
		if gerr != nil {
			return nil, gerr
		}
		perOp := make([][]opStats, len(ops))
		for r, b := range all {
			var rr rankReport
			if err := json.Unmarshal(b, &rr); err != nil {
				return nil, fmt.Errorf("rank %d's report: %w", r, err)
			}
			if rr.Err != "" {
				return nil, fmt.Errorf("%s %s on rank %d: %s", label, formatBytes(float64(sz.bytes)), r, rr.Err)
			}
			if len(rr.Stats) != len(ops) {
				return nil, fmt.Errorf("rank %d reported %d operations, want %d", r, len(rr.Stats), len(ops))
			}
			for k := range ops {
				perOp[k] = append(perOp[k], rr.Stats[k])
			}
		}
		if !lead {
			continue
		}
		for k, op := range ops {
			s := maxOver(perOp[k])
			rows = append(rows, benchRow{
				Impl: "ulysses", Mover: comm.Config().Mover.String(), Transport: comm.Transport().String(), Sharing: comm.Sharing().String(), Wire: wire, Op: string(op), DType: dt.String(), BytesPerRank: sz.bytes, TokensPerRank: sz.tokens,
				World: m.world, Batch: o.batch, Heads: o.heads, HeadDim: o.headDim, SMs: sms, Blocks: comm.Blocks(),
				Iters: o.iters, MedianUS: s.Median, P10US: s.P10, P90US: s.P90, MeanUS: s.Mean, BackToBackUS: s.BackToBack,
				StreamUS: s.Stream, GraphUS: s.Graph, GraphOps: o.graphOps,
				Phases: s.Phases, NCCLReference: s.Ref,
				OverlapUS: s.OverlapExchange, OverlapComputeSlowdown: s.OverlapComputeSlowdown, OverlapExchangeSlowdown: s.OverlapExchangeSlowdown,
			})
			fmt.Fprintf(stderr, "bench: %s %s %s: median %.1f us (p10 %.1f, p90 %.1f)\n",
				label, formatBytes(float64(sz.bytes)), op, s.Median, s.P10, s.P90)
		}
	}
	return rows, nil
}

// benchSize times each op at one size on this rank: rotate random inputs
// x [B, T_r, H, D] and y [B, T, H_r, D], a warm-up, then iters timed
// operations (events between them, back to back, on a stream of the
// bench's, replayed from a graph, and, with --overlap, beside the burn
// kernel).
func benchSize(comm *a2a.Comm, dt a2a.DType, o *benchOpts, ops []benchOp, sz sizePlan, burn *burner) ([]opStats, error) {
	counts := make([]int, comm.WorldSize())
	for i := range counts {
		counts[i] = sz.tokens
	}
	if err := comm.SetRankTokens(counts); err != nil {
		return nil, err
	}
	dev := comm.Device()
	in, err := uploadBenchInputs(comm, dt, o, sz)
	defer func() {
		for _, t := range append(in.xs, in.ys...) {
			dev.Free(t)
		}
	}()
	if err != nil {
		return nil, err
	}
	stream, err := dev.NewStream()
	if err != nil {
		return nil, err
	}
	defer dev.DestroyStream(stream)
	stats := make([]opStats, len(ops))
	for k, op := range ops {
		if stats[k], err = timeBenchOp(comm, stream, o, op, in, burn); err != nil {
			return nil, err
		}
	}
	if o.phases != nil && comm.WorldSize() == 1 {
		ref, err := timeNCCLReference(o.phases.ctx, sz.bytes, o.warmup, o.iters)
		if err != nil {
			return nil, fmt.Errorf("NCCL's own send to itself of %d bytes: %w", sz.bytes, err)
		}
		for k := range stats {
			stats[k].Ref = &ref
		}
	}
	return stats, nil
}

// uploadBenchInputs allocates and fills o.rotate inputs of each shape: xs
// [B, T_r, H, D] and ys [B, T, H_r, D]. What it allocated is in the
// result even when it fails, for the caller to free.
func uploadBenchInputs(comm *a2a.Comm, dt a2a.DType, o *benchOpts, sz sizePlan) (benchInputs, error) {
	P, rank, dev := comm.WorldSize(), comm.Rank(), comm.Device()
	_, mine := a2a.HeadRange(o.heads, P, rank) // H/P unless P does not divide H
	in := benchInputs{heads: o.heads}
	var host []byte // one staging buffer for every upload, grown when a tensor needs more
	upload := func(dst *[]a2a.Tensor, shape [4]int, seed uint64) error {
		t, err := dev.Alloc(shape, dt)
		if err != nil {
			return err
		}
		*dst = append(*dst, t)
		if n := int(t.Bytes()); len(host) < n {
			host = make([]byte, n)
		}
		b := host[:t.Bytes()]
		if o.data == "values" && dt.Size() == 2 {
			if err := ref.FillValues(b, dt, o.headDim, seed, rank); err != nil {
				return err
			}
		} else {
			ref.FillRandom(b, seed, rank)
		}
		return dev.Upload(t, b)
	}
	for i := range o.rotate {
		if err := upload(&in.xs, [4]int{o.batch, sz.tokens, o.heads, o.headDim}, uint64(2*i+1)); err != nil {
			return in, err
		}
		if err := upload(&in.ys, [4]int{o.batch, P * sz.tokens, mine, o.headDim}, uint64(2*i+2)); err != nil {
			return in, err
		}
	}
	return in, nil
}

// timeBenchOp times op every way the bench reports: launched one at a
// time, back to back, on a caller's stream and from a graph, and beside
// the burn kernel when burn is set.
func timeBenchOp(comm *a2a.Comm, stream a2a.Stream, o *benchOpts, op benchOp, in benchInputs, burn *burner) (opStats, error) {
	fn := opFunc(comm, op, in)
	if o.warmup > 0 {
		if _, err := timing.Ops(comm, o.warmup, fn); err != nil {
			return opStats{}, fmt.Errorf("%s warm-up: %w", op, err)
		}
	}
	times, err := timing.Ops(comm, o.iters, fn)
	if err != nil {
		return opStats{}, fmt.Errorf("%s: %w", op, err)
	}
	st := summarize(times)
	b2b, err := timing.BackToBack(comm, timing.Own, o.iters, fn)
	if err != nil {
		return opStats{}, fmt.Errorf("%s back to back: %w", op, err)
	}
	st.BackToBack = float64(b2b) / float64(time.Microsecond)
	if err := timeStreamAndGraph(comm, stream, o, op, in, &st); err != nil {
		return opStats{}, err
	}
	if o.phases != nil {
		if err := o.phases.bind(comm); err != nil {
			return opStats{}, err
		}
		ph, err := timePhases(comm, o.phases, o.iters, fn)
		if err != nil {
			return opStats{}, fmt.Errorf("%s, its phases: %w", op, err)
		}
		st.Phases = &ph
	}
	if burn != nil {
		if err := timeOverlap(comm, burn, o.iters, fn, &st); err != nil {
			return opStats{}, fmt.Errorf("%s beside the burn kernel: %w", op, err)
		}
	}
	return st, nil
}
