package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/check"
	"github.com/ulysses-go/ulysses/internal/launch"
)

type checkOpts struct {
	group  groupFlags
	dtypes string
	seed   uint64
	sms    int
	mover  string
	wire   string
}

func newCheckFlags() (*flag.FlagSet, *checkOpts) {
	o := &checkOpts{}
	fs := newFlagSet("check", "ulysses check [--world N] [--ranks-per-gpu K] [--dtypes bf16,fp8] [--seed S] [--sms N] [--wire exact]",
		"Runs SendRecvHeads, GatherHeads, AllGather and HeadAllGather (view and Into forms, and\n"+
			"packed q, k and v strided out of one fused tensor) on shapes from public model configs,\n"+
			"uneven tokens and heads, a rank without tokens and a misaligned case, then operations\n"+
			"back to back with late reads; one process per rank. Every output is compared with the\n"+
			"CPU reference. Exits 0 only when every rank passes every case.")
	o.group.register(fs)
	fs.StringVar(&o.dtypes, "dtypes", "bf16,fp8", "comma-separated element types (bf16, fp16, fp8, fp8e5m2)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random inputs")
	fs.IntVar(&o.sms, "sms", 0, "SMs (thread blocks) the kernels use; 0: all")
	fs.StringVar(&o.mover, "mover", "kernels", "what moves the bytes: kernels, copy-engines or auto (a2a.Config.Mover)")
	fs.StringVar(&o.wire, "wire", "exact", "how bf16 and fp16 cross (a2a.Config.Wire): exact, or e4m3 or e5m2: fp8 rows with a scale each (lossy; compute capability 9.0 or later), checked against the reference rounded the same way; a lossy wire needs --dtypes of bf16 and fp16 only")
	return fs, o
}

func checkMain(args []string, stdout, stderr io.Writer) int {
	fs, o := newCheckFlags()
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	plan, err := o.plan()
	if err == nil {
		err = o.group.validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
		return exitUsage
	}
	sys, err := a2a.System()
	if err != nil {
		return systemError(stderr, err)
	}
	if o.group.addr != "" {
		return checkHere(o, plan, len(sys.Devices), stdout, stderr)
	}
	world, devices, err := o.group.layout(len(sys.Devices))
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
		return exitUsage
	}
	fmt.Fprintf(stdout, "check: %d ranks on %d GPUs, sharing %v%s\n", world, len(sys.Devices), plan.cfg.Sharing, wireNote(plan.cfg.Wire))
	ctx, stop := signalContext()
	defer stop()
	prog := newProgress(stdout, stderr, "check: cases", world*checkSteps(world, plan.dtypes), isCaseLine)
	results, err := startRanks(ctx, "check", args, devices, prog)
	prog.finish()
	passed, failed := countResults(results)
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
	}
	fmt.Fprintf(stdout, "check: %d passed, %d failed\n", passed, failed)
	if err != nil || failed > 0 {
		return exitFailed
	}
	return 0
}

// checkHere runs the one rank of a group across hosts that --addr and
// --rank name, in this process.
func checkHere(o *checkOpts, plan checkPlan, gpus int, stdout, stderr io.Writer) int {
	m, err := o.group.remoteMember(gpus)
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
		return exitUsage
	}
	fmt.Fprintf(stdout, "check: rank %d of %d on GPU %d, exchange at %s%s\n", m.rank, m.world, *m.device, o.group.addr, wireNote(plan.cfg.Wire))
	code := checkRank(m, plan, o.seed, stdout, stderr)
	if code == 0 {
		fmt.Fprintf(stdout, "check: rank %d passed\n", m.rank)
	}
	return code
}

// checkSteps is how many PASS or FAIL lines one rank prints: every case
// of every dtype and the back-to-back run after them.
func checkSteps(world int, dtypes []a2a.DType) int {
	n := 0
	for _, dt := range dtypes {
		n += len(checkCases(world, dt)) + 1
	}
	return n
}

// isCaseLine reports whether a line of the ranks' output ends a case.
func isCaseLine(line []byte) bool {
	return bytes.Contains(line, []byte("] PASS ")) || bytes.Contains(line, []byte("] FAIL "))
}

// countResults counts the PASS and FAIL lines of every rank's output.
func countResults(results []launch.Result) (passed, failed int) {
	for _, r := range results {
		for _, line := range strings.Split(r.Output, "\n") {
			switch {
			case strings.HasPrefix(line, "PASS "):
				passed++
			case strings.HasPrefix(line, "FAIL "):
				failed++
			}
		}
	}
	return passed, failed
}

func checkWorker(args []string, stdout, stderr io.Writer) int {
	fs, o := newCheckFlags()
	if code, ok := parseFlags(fs, args, stderr); !ok {
		return code
	}
	plan, err := o.plan()
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
		return exitUsage
	}
	m, err := joinGroup()
	if err != nil {
		fmt.Fprintf(stderr, "check: %s\n", oneLine(err))
		return exitUsage
	}
	return checkRank(m, plan, o.seed, stdout, stderr)
}

// checkPlan is what the check flags ask for: the dtypes, and the Config
// every dtype's Comm starts from.
type checkPlan struct {
	dtypes []a2a.DType
	cfg    a2a.Config
}

// plan reads the flags every rank needs (the group's layout is checked
// apart, by groupFlags.validate).
func (o *checkOpts) plan() (checkPlan, error) {
	var p checkPlan
	var err error
	if p.dtypes, err = parseDTypes(o.dtypes); err != nil {
		return p, fmt.Errorf("--dtypes: %w", err)
	}
	if p.cfg.Mover, err = parseMover(o.mover); err != nil {
		return p, err
	}
	if p.cfg.Transport, err = parseTransport(o.group.transport); err != nil {
		return p, err
	}
	if p.cfg.Sharing, err = parseSharing(o.group.sharing); err != nil {
		return p, err
	}
	if o.sms < 0 || o.sms > maxSMs {
		return p, fmt.Errorf("--sms %d: want 0 (all) to %d", o.sms, maxSMs)
	}
	p.cfg.NumSMs = o.sms
	if p.cfg.Wire, err = parseWire("--wire", o.wire); err != nil {
		return p, err
	}
	return p, checkWirePlan(p)
}

// checkWirePlan refuses a lossy wire that some dtype of the check, its
// mover or its transport cannot cross.
func checkWirePlan(p checkPlan) error {
	w := p.cfg.Wire
	for _, dt := range p.dtypes {
		if !w.Carries(dt) {
			return fmt.Errorf("--wire %v moves bf16 and fp16 only, and --dtypes has %v: give --dtypes bf16,fp16 (or some of them)", w, dt)
		}
	}
	return wireConflict(w, p.cfg.Mover)
}

// wireNote is what check's first line says of a lossy wire: "" for the
// exact one.
func wireNote(w a2a.Wire) string {
	if !w.Lossy() {
		return ""
	}
	return fmt.Sprintf(", over the %v wire (outputs compared with the reference's rows rounded through %v)", w, w)
}

// checkRank runs every case of every dtype on rank m, printing a PASS or
// FAIL line per case, and returns the exit code; it closes m's exchanger.
func checkRank(m *member, plan checkPlan, seed uint64, stdout, stderr io.Writer) int {
	defer m.ex.Close()
	passed := true
	for _, dt := range plan.dtypes {
		cfg := plan.cfg
		cfg.DType = dt
		ok, err := checkDType(m, cfg, seed, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "check: rank %d: %s\n", m.rank, oneLine(err))
			return exitFailed
		}
		passed = passed && ok
	}
	if !passed {
		return exitFailed
	}
	return 0
}

// checkDType runs every case of one dtype on a Comm sized for the largest,
// printing a PASS or FAIL line per case. After each case the ranks compare
// notes; when any failed, they start over on a fresh Comm so one failure
// does not spill into the next cases. err is a failure of the group itself.
func checkDType(m *member, cfg a2a.Config, seed uint64, stdout io.Writer) (bool, error) {
	dt := cfg.DType
	cases := checkCases(m.world, dt)
	b2b := backToBackCase(m.world, dt)
	cfg.MaxTokens, cfg.HiddenDim = check.Capacity(append(cases, b2b)...)
	comm, err := m.join(cfg)
	if err != nil {
		return false, err
	}
	if m.rank == 0 {
		fmt.Fprintf(stdout, "check: %v: rank 0 shares its buffer as %v\n", dt, comm.Sharing())
	}
	defer func() {
		if comm != nil {
			comm.Close()
		}
	}()
	passed := true
	for i := 0; i <= len(cases); i++ {
		start := time.Now()
		var cs check.Case
		var caseErr error
		if i < len(cases) {
			cs = cases[i]
			caseErr = check.Run(comm, cs, seed+uint64(i))
		} else {
			cs = b2b
			caseErr = check.BackToBack(comm, cs, 48, 2*time.Millisecond, seed+uint64(i))
		}
		if caseErr != nil {
			passed = false
			fmt.Fprintf(stdout, "FAIL %v: %s\n", cs, oneLine(caseErr))
		} else {
			fmt.Fprintf(stdout, "PASS %v %v\n", cs, time.Since(start).Round(100*time.Microsecond))
		}
		groupOK, err := m.allOK(caseErr == nil)
		if err != nil {
			return false, err
		}
		if !groupOK && i < len(cases) {
			comm.Close()
			if comm, err = m.join(cfg); err != nil {
				return false, err
			}
		}
	}
	return passed, nil
}

// maxCaseBytes bounds the largest tensor of a case on one rank (the
// gathered [B, T, H, D] of AllGather).
const maxCaseBytes = 64 << 20

// modelShape is one row of DESIGN.md's realistic shapes.
type modelShape struct {
	name                          string
	batch, tokens, heads, headDim int
}

var realisticShapes = []modelShape{
	{"ltx-video-2b", 2, 6144, 32, 64},
	{"ltx-2-19b", 4, 6144, 32, 128},
	{"ltx-2-19b-1536px", 1, 24576, 32, 128},
	{"flux.1-dev-1024px", 1, 4608, 24, 128},
	{"wan2.1-14b-720p", 1, 75600, 40, 128},
	{"hunyuanvideo-720p", 1, 119056, 24, 128},
}

// checkCases are the cases for world ranks and dtype dt: the realistic
// shapes with their own head counts (split unevenly where the world size
// does not divide them) and their tokens scaled to fit maxCaseBytes, split
// unevenly; q, k and v of the second one packed and strided out of one
// fused tensor; then a case where one rank holds no tokens, and a
// misaligned one with an odd head size and heads the world size does not
// divide.
func checkCases(world int, dt a2a.DType) []check.Case {
	es := dt.Size()
	var cases []check.Case
	for _, s := range realisticShapes {
		t := scaleTokens(s.tokens, s.batch*s.heads*s.headDim*es, maxCaseBytes)
		name := s.name
		if t != s.tokens {
			name += fmt.Sprintf(" (tokens %d->%d)", s.tokens, t)
		}
		cases = append(cases, check.Case{Name: name, Batch: s.batch, Tokens: splitTokens(t, world), Heads: s.heads, HeadDim: s.headDim, DType: dt})
	}
	qkv := realisticShapes[1]
	t := scaleTokens(qkv.tokens, 3*qkv.batch*qkv.heads*qkv.headDim*es, maxCaseBytes)
	cases = append(cases,
		check.Case{Name: qkv.name + fmt.Sprintf(" q,k,v (tokens %d->%d)", qkv.tokens, t), Batch: qkv.batch, Tokens: splitTokens(t, world),
			Heads: qkv.heads, HeadDim: qkv.headDim, DType: dt, Tensors: 3, Strided: true},
		check.Case{Name: "zero-tokens", Batch: 2, Tokens: zeroRankSplit(61*world+7, world), Heads: 4 * world, HeadDim: 128, DType: dt},
		check.Case{Name: "odd-head-dim", Batch: 3, Tokens: splitTokens(29*world+3, world), Heads: 2*world + 1, HeadDim: 72, DType: dt, Misalign: 1},
	)
	return cases
}

// backToBackCase is the shape of the back-to-back run (check.BackToBack).
func backToBackCase(world int, dt a2a.DType) check.Case {
	return check.Case{Name: "back-to-back", Batch: 1, Tokens: splitTokens(256*world+5, world), Heads: 4 * world, HeadDim: 128, DType: dt}
}

// scaleTokens returns tokens, or fewer so that tokens*bytesPerToken <= limit.
func scaleTokens(tokens, bytesPerToken, limit int) int {
	if tokens*bytesPerToken <= limit {
		return tokens
	}
	return limit / bytesPerToken
}

// splitTokens splits total tokens over world ranks unevenly: about
// total/world each, a few more or fewer by rank, the rest on the last rank.
func splitTokens(total, world int) []int {
	base := total / world
	step := min(3, base/world)
	parts := make([]int, world)
	sum := 0
	for r := 0; r < world-1; r++ {
		parts[r] = base + step*(r%3-1)
		sum += parts[r]
	}
	parts[world-1] = total - sum
	return parts
}

// zeroRankSplit is splitTokens with rank world/2 holding no tokens.
func zeroRankSplit(total, world int) []int {
	if world == 1 {
		return []int{0}
	}
	z := world / 2
	rest := splitTokens(total, world-1)
	return append(append(append([]int(nil), rest[:z]...), 0), rest[z:]...)
}
