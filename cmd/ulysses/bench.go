package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	wireplan "github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
	nccltransport "github.com/ulysses-go/ulysses/internal/transport/nccl"
)

func newBenchFlags(worker bool) (*flag.FlagSet, *benchOpts) {
	o := &benchOpts{}
	fs := newFlagSet("bench", "ulysses bench [flags]",
		"Times the collectives with device events, one process per rank, per dtype, SM count and\n"+
			"per-rank size (x is [B, T_r, H, D] with T_r = bytes / (B*H*D*elem)), and prints the slowest\n"+
			"rank's median against the NVLink floor (the bytes crossing NVLink over the one-way peer copy rate).")
	o.group.register(fs)
	fs.IntVar(&o.batch, "batch", 1, "batch size B")
	fs.IntVar(&o.heads, "heads", 32, "heads H (at least the world size; uneven splits take the general kernels)")
	fs.IntVar(&o.headDim, "head-dim", 128, "head size D")
	fs.StringVar(&o.bytes, "bytes", "128K,1M,8M,32M,128M", "per-rank input sizes, with K, M, G suffixes (binary)")
	fs.StringVar(&o.dtypes, "dtypes", "bf16,fp8", "element types (bf16, fp16, fp8, fp8e5m2)")
	fs.StringVar(&o.ops, "ops", "send_recv_heads,gather_heads,all_gather", "operations to time: send_recv_heads, gather_heads, all_gather, head_all_gather (of gather_heads' input), qkv_packed, qkv_separate")
	fs.IntVar(&o.warmup, "warmup", 20, "untimed operations before each timed run")
	fs.IntVar(&o.iters, "iters", 200, "timed operations per row")
	fs.IntVar(&o.graphOps, "graph-ops", 2, "operations in each timed CUDA graph (even; a model step's graph holds many, where replay costs less per operation)")
	fs.IntVar(&o.rotate, "rotate", 4, "distinct inputs used in turn (so the L2 cache does not flatter small sizes)")
	fs.StringVar(&o.sms, "sms", "0", "SM counts (thread blocks per kernel) to time, e.g. 8,16,32,64,0; 0 = all SMs")
	fs.StringVar(&o.json, "json", "", "also write every row, the hardware and the command line to this JSON file")
	fs.StringVar(&o.plot, "plot", "", "also draw the times against size into this file, SVG or PNG by its extension (and, over several --sms, against SMs into FILE-sms.svg or .png); ulysses plot redraws from --json")
	fs.BoolVar(&o.overlap, "overlap", false,
		"also time each operation back to back while a compute-bound kernel of the bench's own (one "+strconv.Itoa(burnThreads)+"-thread block per SM) runs beside it, and report both slowdowns")
	fs.StringVar(&o.mover, "mover", "kernels", "what moves the bytes: kernels, copy-engines or auto (a2a.Config.Mover)")
	fs.StringVar(&o.wires, "wires", "exact", "wires to time every row over, side by side, e.g. exact,e4m3 (a2a.Config.Wire): exact, or e4m3 or e5m2: fp8 rows with a scale each (lossy, about half the NVLink bytes; compute capability 9.0 or later), for bf16 and fp16 rows only")
	fs.StringVar(&o.wireDirect, "wire-direct-below", "", "fp8 wires: send every row as rounded 16-bit values in operations whose largest rank reads fewer bytes than this, and stage the peers' rows as codes from it on (1 always stages; K, M, G suffixes); empty: the library's "+formatBytes(float64(wireplan.WireDirectBytes()))+". For finding where staging pays")
	fs.StringVar(&o.wireLanding, "wire-landing", "auto", "fp8 wires, staged: where the peers' rows are decoded: auto (the library's choice: after the exchange, for now), on (in the exchange, as they land; what had not landed after it) or off (after the exchange)")
	fs.BoolVar(&o.ncclSelf, "nccl-self", false,
		"with --transport nccl: send each rank's own share through NCCL too (a send to itself and a receive from itself in the group), so that --world 1 times NCCL's path on one GPU, and time each phase of it (own, pack, group, unpack) with device events")
	fs.StringVar(&o.ncclLaunch, "nccl-launch", "auto",
		"with --transport nccl: how the NCCL groups are launched: auto (the library's: blocking where NCCL has ncclCommSplit, 2.18 and later, else async), async (on the non-blocking communicator, polled until launched) or blocking (on a blocking communicator split off it at the first operation, under a watchdog)")
	fs.StringVar(&o.data, "data", "values",
		"what the inputs hold: values (finite bf16/fp16 values shaped like activations: a magnitude per row, 2^-4 to 2^4) or bits (every bit pattern, NaN and Inf included: the fp8 wire's slowest case); fp8 inputs are always bits")
	fs.StringVar(&o.compare, "compare", "", `"nccl": also run bench/nccl_bench.py (PyTorch + NCCL) on the same shapes`)
	if worker {
		fs.StringVar(&o.results, "results", "", "file where rank 0 writes its results")
	} else {
		fs.BoolVar(&o.singleProcess, "single-process", false,
			"run every rank in this process (a2a.NewGroup's way: ranks on one GPU share a context), one goroutine each")
	}
	return fs, o
}

func (o *benchOpts) plan() (benchPlan, error) {
	var p benchPlan
	var err error
	if p.launch, err = nccltransport.ParseLaunch(o.ncclLaunch); err != nil {
		return p, fmt.Errorf("--nccl-launch: %w", err)
	}
	switch {
	case o.batch < 1 || o.heads < 1 || o.headDim < 1:
		return p, fmt.Errorf("--batch, --heads and --head-dim must be positive")
	case o.iters < 1 || o.rotate < 1 || o.warmup < 0:
		return p, fmt.Errorf("--iters and --rotate must be positive, --warmup not negative")
	case o.graphOps < 2 || o.graphOps%2 != 0:
		return p, fmt.Errorf("--graph-ops %d: want an even count of at least 2", o.graphOps)
	case o.ncclSelf && o.group.transport != "nccl":
		return p, fmt.Errorf("--nccl-self times the NCCL transport: it needs --transport nccl")
	case o.ncclSelf && o.singleProcess:
		return p, fmt.Errorf("--nccl-self times each rank's phases in a process of its own: drop --single-process")
	case o.ncclLaunch != "auto" && o.group.transport != "nccl":
		return p, fmt.Errorf("--nccl-launch %s launches the NCCL transport's groups: it needs --transport nccl", o.ncclLaunch)
	case o.ncclLaunch != "auto" && o.singleProcess:
		return p, fmt.Errorf("--nccl-launch %s sets each rank's process's transport: drop --single-process", o.ncclLaunch)
	case o.data != "values" && o.data != "bits":
		return p, fmt.Errorf("--data %q: want values or bits", o.data)
	case o.compare != "" && o.compare != "nccl":
		return p, fmt.Errorf("--compare %q: only nccl is known", o.compare)
	}
	if p.sizes, err = parseSizes(o.bytes); err != nil {
		return p, fmt.Errorf("--bytes: %w", err)
	}
	if p.dtypes, err = parseDTypes(o.dtypes); err != nil {
		return p, fmt.Errorf("--dtypes: %w", err)
	}
	if p.ops, err = parseOps(o.ops); err != nil {
		return p, fmt.Errorf("--ops: %w", err)
	}
	if p.sms, err = parseSMs(o.sms); err != nil {
		return p, fmt.Errorf("--sms: %w", err)
	}
	if p.mover, err = parseMover(o.mover); err != nil {
		return p, err
	}
	if p.transport, err = parseTransport(o.group.transport); err != nil {
		return p, err
	}
	if p.sharing, err = parseSharing(o.group.sharing); err != nil {
		return p, err
	}
	if err := p.checkWires(o.wires); err != nil {
		return p, err
	}
	if o.wireDirect != "" {
		if p.wireDirect, err = parseSize(o.wireDirect); err != nil || p.wireDirect < 1 {
			return p, fmt.Errorf("--wire-direct-below %q: want a positive size", o.wireDirect)
		}
	}
	if p.landing, err = ipc.ParseLanding(o.wireLanding); err != nil {
		return p, fmt.Errorf("--wire-landing: %w", err)
	}
	if o.group.addr != "" && (o.compare != "" || o.singleProcess) {
		return p, fmt.Errorf("--addr runs one rank here: --compare and --single-process need every rank on this host")
	}
	if o.plot != "" && !slices.Contains(p.sms, 0) {
		return p, fmt.Errorf("--plot draws the times on all SMs against size: --sms must include 0")
	}
	if err := o.checkSizes(p); err != nil {
		return p, err
	}
	return p, errorsOf(checkWritable("--json", o.json), checkFigure("--plot", o.plot))
}

// checkSizes refuses, before anything runs, a size that holds no whole
// token for some dtype (B*H*D*elem bytes each).
func (o *benchOpts) checkSizes(p benchPlan) error {
	for _, dt := range p.dtypes {
		if _, notes := sizePlans(p.sizes, o.batch, o.heads, o.headDim, dt); len(notes) > 0 {
			return fmt.Errorf("--bytes: %s", strings.Replace(notes[0], " skipped:", ":", 1))
		}
	}
	return nil
}

// checkWires reads --wires into p and refuses a lossy wire that no
// dtype of p, or its mover or transport, can cross.
func (p *benchPlan) checkWires(s string) error {
	var err error
	if p.wires, err = parseWires(s); err != nil {
		return err
	}
	for _, w := range p.wires {
		if !slices.ContainsFunc(p.dtypes, func(dt a2a.DType) bool { return w.Carries(dt) }) {
			return fmt.Errorf("--wires %v moves bf16 and fp16 only, and --dtypes has neither", w)
		}
		if err := wireConflict(w, p.mover); err != nil {
			return err
		}
	}
	return nil
}

// wiresFor is the wires of p that dtype dt crosses, and a note for each
// it cannot.
func (p benchPlan) wiresFor(dt a2a.DType) ([]a2a.Wire, []string) {
	var out []a2a.Wire
	var notes []string
	for _, w := range p.wires {
		if w.Carries(dt) {
			out = append(out, w)
		} else {
			notes = append(notes, fmt.Sprintf("%v over the %v wire skipped: the fp8 wire moves bf16 and fp16", dt, w))
		}
	}
	return out, notes
}

// rowCount is how many rows the bench times.
func (p benchPlan) rowCount() int {
	n := 0
	for _, dt := range p.dtypes {
		wires, _ := p.wiresFor(dt)
		n += len(wires)
	}
	return n * len(p.sms) * len(p.sizes) * len(p.ops)
}

func parseOps(s string) ([]benchOp, error) {
	var out []benchOp
	for _, f := range splitList(s) {
		op := benchOp(f)
		switch op {
		case opSendRecvHeads, opGatherHeads, opAllGather, opHeadAllGather, opQKVPacked, opQKVSeparate:
		default:
			return nil, fmt.Errorf("unknown operation %q (want send_recv_heads, gather_heads, all_gather, head_all_gather, qkv_packed, qkv_separate)", f)
		}
		if !slices.Contains(out, op) {
			out = append(out, op)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no operations in %q", s)
	}
	return out, nil
}

// parseSMs reads a list of SM counts, 0 meaning all.
func parseSMs(s string) ([]int, error) {
	var out []int
	for _, f := range splitList(s) {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 0 || n > maxSMs || fmt.Sprint(n) != f {
			return nil, fmt.Errorf("bad SM count %q: want 0 (all) to %d", f, maxSMs)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no SM counts in %q", s)
	}
	return out, nil
}

// sizePlans computes T_r = bytes / (B*H*D*elem) for every size, skipping
// (with a note) those that are not a positive multiple of a token.
func sizePlans(sizes []int64, batch, heads, headDim int, dt a2a.DType) ([]sizePlan, []string) {
	perToken := int64(batch) * int64(heads) * int64(headDim) * int64(dt.Size())
	var plans []sizePlan
	var notes []string
	for _, s := range sizes {
		if s < perToken || s%perToken != 0 {
			notes = append(notes, fmt.Sprintf("%v %s skipped: %d bytes is not a positive multiple of B*H*D*elem = %d bytes",
				dt, formatBytes(float64(s)), s, perToken))
			continue
		}
		plans = append(plans, sizePlan{bytes: s, tokens: int(s / perToken)})
	}
	return plans, notes
}

// nvlinkBytes is what one rank must send over NVLink: all but its own
// 1/P of its input for the head exchanges, its whole input to P-1 peers
// for the gathers.
func nvlinkBytes(op benchOp, bytes int64, world int) float64 {
	switch op {
	case opAllGather, opHeadAllGather:
		return float64(bytes) * float64(world-1)
	case opQKVPacked, opQKVSeparate:
		return qkvTensors * float64(bytes) * float64(world-1) / float64(world)
	}
	return float64(bytes) * float64(world-1) / float64(world)
}

func benchMain(args []string, stdout, stderr io.Writer) int {
	fs, o := newBenchFlags(false)
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	plan, err := o.plan()
	if err == nil {
		err = o.group.validate()
	}
	if err == nil && o.group.world > 0 && o.heads < o.group.world {
		err = fmt.Errorf("--heads %d is fewer than --world %d", o.heads, o.group.world)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitUsage
	}
	sys, err := a2a.System()
	if err != nil {
		return systemError(stderr, err)
	}
	if o.group.addr != "" {
		return benchHere(o, plan, sys, stdout, stderr)
	}
	world, devices, err := o.group.layout(len(sys.Devices))
	if err == nil && o.heads < world {
		err = fmt.Errorf("--heads %d is fewer than the world size %d", o.heads, world)
	}
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitUsage
	}
	dir, err := os.MkdirTemp("", "ulysses-bench-")
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitFailed
	}
	defer os.RemoveAll(dir)
	resultsPath := filepath.Join(dir, "results.json")

	ctx, stop := signalContext()
	defer stop()
	start := time.Now()
	fmt.Fprintf(stderr, "bench: %d ranks on %d GPUs, B=%d H=%d D=%d\n", world, len(sys.Devices), o.batch, o.heads, o.headDim)
	var res *benchResults
	prog := newProgress(stderr, stderr, "bench: rows", plan.rowCount(), isRowLine)
	if o.singleProcess {
		res, err = benchInProcess(o, plan, devices, prog)
	} else if _, err = startRanks(ctx, "bench", append([]string{"--results", resultsPath}, args...), devices, prog); err == nil {
		if res, err = readJSONFile[benchResults](resultsPath); err != nil {
			err = fmt.Errorf("reading rank 0's results: %w", err)
		}
	}
	prog.finish()
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitFailed
	}
	return reportBench(ctx, start, world, res, sys, o, plan, stdout, stderr)
}

// benchHere runs the one rank of a group across hosts that --addr and
// --rank name, in this process; rank 0 reports.
func benchHere(o *benchOpts, plan benchPlan, sys a2a.SystemInfo, stdout, stderr io.Writer) int {
	m, err := o.group.remoteMember(len(sys.Devices))
	if err != nil {
		fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
		return exitUsage
	}
	start := time.Now()
	fmt.Fprintf(stderr, "bench: rank %d of %d on GPU %d, exchange at %s, B=%d H=%d D=%d\n", m.rank, m.world, *m.device, o.group.addr, o.batch, o.heads, o.headDim)
	res, code := benchRank(m, o, plan, stderr)
	if res == nil {
		return code
	}
	return reportBench(context.Background(), start, m.world, res, sys, o, plan, stdout, stderr)
}

// reportBench prints rank 0's results (and with --compare, PyTorch's
// beside them) and writes the JSON report.
func reportBench(ctx context.Context, start time.Time, world int, res *benchResults, sys a2a.SystemInfo, o *benchOpts, plan benchPlan, stdout, stderr io.Writer) int {
	for i := range res.Rows {
		res.Rows[i].finish(res.PeerBandwidth)
	}
	rep := benchReport{
		Date: start.UTC().Format(time.RFC3339), Command: os.Args, Driver: driverVersion(sys.DriverVersion),
		DriverVersion: sys.DriverVersion, World: world, Warmup: o.warmup, Iters: o.iters, Rotate: o.rotate,
		PeerGBps: res.PeerBandwidth / 1e9, PeerPair: res.PeerPair, PeerNote: res.PeerNote, Rows: res.Rows, Notes: res.Notes,
		NCCLLaunch: plan.launch.String(), Data: o.data,
	}
	for _, d := range sys.Devices {
		rep.GPUs = append(rep.GPUs, d.Name)
	}
	writeBenchTable(stdout, &rep, o)

	code := 0
	if o.compare == "nccl" {
		code = compareNCCL(ctx, stdout, stderr, &rep, o, plan)
	}
	rep.Seconds = time.Since(start).Seconds()
	if o.json != "" {
		if err := writeJSONFile(o.json, rep); err != nil {
			fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
			return exitFailed
		}
	}
	if o.plot != "" {
		if err := writePlots(&rep, "", o.plot, smsPlotPath(o.plot, plan)); err != nil {
			fmt.Fprintf(stderr, "bench: %s\n", oneLine(err))
			return exitFailed
		}
	}
	return code
}

// isRowLine reports whether a line of the ranks' output is a row's
// median: rank 0's, or one from this process.
func isRowLine(line []byte) bool {
	return bytes.Contains(line, []byte(": median ")) &&
		(bytes.HasPrefix(line, []byte("[rank 0] ")) || !bytes.HasPrefix(line, []byte("[rank ")))
}

// smsPlotPath is where bench --plot draws the SM sweep: beside the size
// figure, or nowhere when one SM count was timed.
func smsPlotPath(path string, plan benchPlan) string {
	if len(plan.sms) < 2 {
		return ""
	}
	ext := filepath.Ext(path) // .svg or .png: checkFigure refused any other
	return strings.TrimSuffix(path, ext) + "-sms" + ext
}

// writeBenchTable prints the header line, the ulysses table and the notes.
func writeBenchTable(w io.Writer, rep *benchReport, o *benchOpts) {
	peer := "unknown"
	if rep.PeerGBps > 0 {
		peer = fmt.Sprintf("%.0f GB/s", rep.PeerGBps)
	}
	over := ""
	if len(rep.Rows) > 0 && rep.Rows[0].Transport != "" {
		over = " over " + rep.Rows[0].Transport + ","
	}
	if len(rep.Rows) > 0 && rep.Rows[0].Transport == "nccl" && rep.NCCLLaunch != "" {
		over += " NCCL launch " + rep.NCCLLaunch + ","
	}
	if len(rep.Rows) > 0 && rep.Rows[0].Sharing != "" {
		over += " shared as " + rep.Rows[0].Sharing + ","
	}
	fmt.Fprintf(w, "ulysses: world %d, B=%d H=%d D=%d,%s moved by %s, %d iterations (%d warm-up), peer copy %s %s\n",
		rep.World, o.batch, o.heads, o.headDim, over, o.mover, o.iters, o.warmup, rep.PeerPair, peer)
	writeWireTable(w, benchHead, benchAlign, benchTableRows(rep.Rows), rowWires(rep.Rows))
	if o.overlap {
		fmt.Fprintf(w, "beside a compute-bound kernel (one %d-thread block per SM), back to back:\n", burnThreads)
		writeWireTable(w, overlapHead, overlapAlign, overlapTableRows(rep.Rows), rowWires(rep.Rows))
	}
	writePhaseTable(w, rep.Rows)
	if rep.PeerNote != "" {
		fmt.Fprintf(w, "note: %s\n", rep.PeerNote)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// readJSONFile decodes the JSON file at path into a new T; a decoding
// error names the file.
func readJSONFile[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	v := new(T)
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
