package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ulysses-go/ulysses/a2a"
)

// ncclScript is the PyTorch + NCCL baseline that --compare nccl runs.
const ncclScript = "nccl_bench.py"

// ncclRecord is one JSON line of nccl_bench.py: the max over ranks of its
// statistics for one (op, dtype, bytes); the timings are null for a size it
// skipped.
type ncclRecord struct {
	Impl          string   `json:"impl"`
	Op            string   `json:"op"`
	DType         string   `json:"dtype"`
	BytesPerRank  int64    `json:"bytes_per_rank"`
	World         int      `json:"world"`
	Batch         int      `json:"batch"`
	Heads         int      `json:"heads"`
	HeadDim       int      `json:"head_dim"`
	TokensPerRank *int     `json:"tokens_per_rank"`
	MedianUS      *float64 `json:"median_us"`
	P10US         *float64 `json:"p10_us"`
	P90US         *float64 `json:"p90_us"`
	MeanUS        *float64 `json:"mean_us"`
	BackToBackUS  *float64 `json:"back_to_back_us"`
	Iters         int      `json:"iters"`
	Note          string   `json:"note"`
}

// compareRow is one ulysses row next to NCCL's time for the same shape.
type compareRow struct {
	Op           string  `json:"op"`
	DType        string  `json:"dtype"`
	Wire         string  `json:"wire,omitempty"` // the ulysses row's; NCCL's are exact
	BytesPerRank int64   `json:"bytes_per_rank"`
	SMs          int     `json:"sms"`
	Blocks       int     `json:"blocks"`
	UlyssesUS    float64 `json:"ulysses_median_us"`
	NCCLUS       float64 `json:"nccl_median_us"`
	Ratio        float64 `json:"nccl_over_ulysses"`
}

// unavailableError means the comparison could not run at all (no python3,
// no script, no torch/CUDA/NCCL or not enough GPUs: exit status 3).
type unavailableError struct{ reason string }

func (e *unavailableError) Error() string { return "nccl comparison unavailable: " + e.reason }

// ncclDType is nccl_bench.py's name for d, or "" when it has none.
func ncclDType(d a2a.DType) string {
	switch d {
	case a2a.BFloat16:
		return "bf16"
	case a2a.Float8E4M3:
		return "fp8"
	}
	return ""
}

// parseNCCL reads nccl_bench.py's standard output: one JSON record a line;
// other lines (such as "MISMATCH ...") come back in other.
func parseNCCL(r io.Reader) (recs []ncclRecord, other []string, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "":
		case strings.HasPrefix(line, "{"):
			var rec ncclRecord
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				return recs, other, fmt.Errorf("%s output line %d: %w", ncclScript, n, err)
			}
			recs = append(recs, rec)
		default:
			other = append(other, line)
		}
	}
	return recs, other, sc.Err()
}

// findNCCLScript looks for nccl_bench.py next to the executable, then in
// ./bench and ../bench.
func findNCCLScript() (string, error) {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe))
	}
	dirs = append(dirs, "bench", filepath.Join("..", "bench"))
	for _, d := range dirs {
		p := filepath.Join(d, ncclScript)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", &unavailableError{fmt.Sprintf("%s not found next to the executable, in ./bench or ../bench", ncclScript)}
}

// ncclArgs is the command line of nccl_bench.py for the same shapes as the
// ulysses run (only the dtypes it knows).
func ncclArgs(script string, o *benchOpts, plan benchPlan, world int) ([]string, error) {
	var dtypes, sizes []string
	for _, d := range plan.dtypes {
		if n := ncclDType(d); n != "" {
			dtypes = append(dtypes, n)
		}
	}
	if len(dtypes) == 0 {
		return nil, &unavailableError{"none of the dtypes is bf16 or fp8"}
	}
	if o.heads%world != 0 { // nccl_bench.py refuses them (its reshapes split heads evenly)
		return nil, &unavailableError{fmt.Sprintf("PyTorch's path needs the heads (%d) divisible by the world size (%d)", o.heads, world)}
	}
	for _, s := range plan.sizes {
		sizes = append(sizes, strconv.FormatInt(s, 10))
	}
	return []string{script,
		"--world", strconv.Itoa(world), "--batch", strconv.Itoa(o.batch), "--heads", strconv.Itoa(o.heads),
		"--head-dim", strconv.Itoa(o.headDim), "--bytes", strings.Join(sizes, ","), "--dtypes", strings.Join(dtypes, ","),
		"--warmup", strconv.Itoa(o.warmup), "--iters", strconv.Itoa(o.iters), "--rotate", strconv.Itoa(o.rotate),
	}, nil
}

// runNCCL runs python3 with args, its progress going to stderr, and
// returns its records. Exit status 3 is an *unavailableError.
func runNCCL(ctx context.Context, args []string, stderr io.Writer) ([]ncclRecord, error) {
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, &unavailableError{"python3 not found"}
	}
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, py, args...)
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(stderr, &errOut)
	runErr := cmd.Run()
	recs, other, perr := parseNCCL(&out)
	if runErr != nil {
		var ee *exec.ExitError
		if errors.As(runErr, &ee) && ee.ExitCode() == 3 {
			reason := lastLine(errOut.String())
			if reason == "" {
				reason = ncclScript + " exited with status 3"
			}
			return recs, &unavailableError{reason}
		}
		if len(other) > 0 {
			return recs, fmt.Errorf("%s: %w: %s", ncclScript, runErr, strings.Join(other, "; "))
		}
		return recs, fmt.Errorf("%s: %w", ncclScript, runErr)
	}
	return recs, perr
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// compareRows pairs each ulysses row with NCCL's record of the same op,
// dtype and size (records without a time are left out); a row over a
// lossy wire is paired with NCCL's exact exchange.
func compareRows(rows []benchRow, recs []ncclRecord) []compareRow {
	type key struct {
		op, dtype string
		bytes     int64
	}
	nccl := map[key]float64{}
	for _, r := range recs {
		if r.MedianUS != nil {
			nccl[key{r.Op, r.DType, r.BytesPerRank}] = *r.MedianUS
		}
	}
	var out []compareRow
	for _, r := range rows {
		d, err := a2a.ParseDType(r.DType)
		if err != nil {
			continue
		}
		n, ok := nccl[key{r.Op, ncclDType(d), r.BytesPerRank}]
		if !ok || r.MedianUS <= 0 {
			continue
		}
		out = append(out, compareRow{Op: r.Op, DType: r.DType, Wire: r.Wire, BytesPerRank: r.BytesPerRank, SMs: r.SMs, Blocks: r.Blocks,
			UlyssesUS: r.MedianUS, NCCLUS: n, Ratio: n / r.MedianUS})
	}
	return out
}

// compareNCCL runs the NCCL baseline and prints the comparison table; it
// returns the exit status (0 also when the comparison is unavailable).
func compareNCCL(ctx context.Context, stdout, stderr io.Writer, rep *benchReport, o *benchOpts, plan benchPlan) int {
	var recs []ncclRecord
	script, err := findNCCLScript()
	var args []string
	if err == nil {
		args, err = ncclArgs(script, o, plan, rep.World)
	}
	if err == nil {
		fmt.Fprintf(stderr, "bench: python3 %s\n", strings.Join(args, " "))
		recs, err = runNCCL(ctx, args, stderr)
	}
	rep.NCCL = recs
	if un := (*unavailableError)(nil); errors.As(err, &un) {
		fmt.Fprintf(stdout, "bench: %s\n", un.Error())
		rep.NCCLNote = un.Error()
		return 0
	}
	rep.Compare = compareRows(rep.Rows, recs)
	if len(rep.Compare) > 0 {
		fmt.Fprintln(stdout, "\nNCCL (PyTorch: permute + all_to_all_single + permute, all_gather_into_tensor), slowest rank's median:")
		wires := make([]string, len(rep.Compare))
		for i, c := range rep.Compare {
			wires[i] = c.Wire
		}
		writeWireTable(stdout, compareHead, compareAlign, compareTableRows(rep.Compare), wires)
	}
	if err != nil {
		rep.NCCLNote = oneLine(err)
		fmt.Fprintf(stderr, "bench: nccl comparison failed: %s\n", oneLine(err))
		return exitFailed
	}
	return 0
}
