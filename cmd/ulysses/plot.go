package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/ulysses-go/ulysses/a2a"
)

// plotOpts are the flags of ulysses plot.
type plotOpts struct {
	out, smsOut, dtype string
}

func newPlotFlags() (*flag.FlagSet, *plotOpts) {
	o := &plotOpts{}
	fs := newFlagSet("plot", "ulysses plot [-o FILE.svg|FILE.png] [--sms-o FILE.svg|FILE.png] [--dtype bf16] BENCH.json",
		"Draws a bench --json file: the median time of each operation against the bytes per rank\n"+
			"(log-log), with PyTorch + NCCL and the NVLink floor where the file has them; with --sms-o,\n"+
			"the time against the SMs the kernels use, one line per size. A figure is SVG or PNG, as\n"+
			"its file's extension says.")
	fs.StringVar(&o.out, "o", "bench.svg", "the figure of time against size (.svg or .png)")
	fs.StringVar(&o.smsOut, "sms-o", "", "also this figure of time against SMs, .svg or .png (needs a bench run over several --sms)")
	fs.StringVar(&o.dtype, "dtype", "", "the element type to draw (default: the file's first)")
	return fs, o
}

func plotMain(args []string, stdout, stderr io.Writer) int {
	fs, o := newPlotFlags()
	if code, ok := parseFlagsArgs(fs, args, stderr, 1); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "plot: want one bench --json file")
		return exitUsage
	}
	dtype, err := plotDType(o.dtype)
	if err == nil {
		err = errorsOf(checkFigure("-o", o.out), checkFigure("--sms-o", o.smsOut))
	}
	if err != nil {
		fmt.Fprintf(stderr, "plot: %s\n", oneLine(err))
		return exitUsage
	}
	rep, err := readReport(fs.Arg(0))
	if err == nil {
		err = writePlots(rep, dtype, o.out, o.smsOut)
	}
	if err != nil {
		fmt.Fprintf(stderr, "plot: %s\n", oneLine(err))
		return exitFailed
	}
	return 0
}

// plotDType reads --dtype as check and bench read --dtypes (any case,
// "fp8" for fp8e4m3) into the name bench's rows carry; "" is the file's
// first.
func plotDType(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	d, err := a2a.ParseDType(s)
	if err != nil {
		return "", fmt.Errorf("--dtype: %w", err)
	}
	return d.String(), nil
}

// errorsOf is the first error that is not nil.
func errorsOf(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// readReport reads a bench --json file.
func readReport(path string) (*benchReport, error) {
	rep, err := readJSONFile[benchReport](path)
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		return nil, fmt.Errorf("%s is not a bench --json file: a JSON %s where its report (an object with rows) belongs", path, typeErr.Value)
	case err == nil && len(rep.Rows) == 0:
		return nil, fmt.Errorf("%s: no rows", path)
	}
	return rep, err
}

// figureFormats are the figures' formats, by file extension (in any
// case): each makes a canvas of a size that writes itself in its format.
var figureFormats = map[string]func(w, h vg.Length) vg.CanvasWriterTo{
	".svg": func(w, h vg.Length) vg.CanvasWriterTo { return vgsvg.New(w, h) },
	".png": func(w, h vg.Length) vg.CanvasWriterTo {
		return vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(figureDPI))}
	},
}

// figureDPI is the PNG figures' resolution: a 4 x 4 inch panel is 600
// pixels square.
const figureDPI = 150

// figureFormat returns the canvas maker for path's extension, or an
// error that names the flag and the formats there are.
func figureFormat(flagName, path string) (func(w, h vg.Length) vg.CanvasWriterTo, error) {
	ext := strings.ToLower(filepath.Ext(path))
	if f, ok := figureFormats[ext]; ok {
		return f, nil
	}
	if ext == "" {
		return nil, fmt.Errorf("%s %s: no file extension to choose the figure's format by (want .svg or .png)", flagName, path)
	}
	return nil, fmt.Errorf("%s %s: unknown figure format %q (want .svg or .png)", flagName, path, ext)
}

// checkFigure refuses, before anything runs, a figure file of a format
// there is none for, or one that cannot be created; "" is no file.
func checkFigure(flagName, path string) error {
	if path == "" {
		return nil
	}
	if err := checkWritable(flagName, path); err != nil {
		return err
	}
	_, err := figureFormat(flagName, path)
	return err
}

// writePlots draws rep's times against size into out and, when smsOut
// is set, against SMs into smsOut, each in its extension's format.
func writePlots(rep *benchReport, dtype, out, smsOut string) error {
	if dtype == "" {
		dtype = rep.Rows[0].DType
	}
	format, err := figureFormat("figure", out)
	if err != nil {
		return err
	}
	fig, err := sizeFigure(rep, dtype, format)
	if err == nil {
		err = os.WriteFile(out, fig, 0o644)
	}
	if err != nil || smsOut == "" {
		return err
	}
	if format, err = figureFormat("figure", smsOut); err != nil {
		return err
	}
	if fig, err = smsFigure(rep, dtype, format); err == nil {
		err = os.WriteFile(smsOut, fig, 0o644)
	}
	return err
}

// reportOps are the operations of rep's ulysses rows, in their order.
func reportOps(rep *benchReport) []string {
	var ops []string
	for _, r := range rep.Rows {
		if !slices.Contains(ops, r.Op) {
			ops = append(ops, r.Op)
		}
	}
	return ops
}

// sizeFigure is one panel per operation: ulysses' median on all SMs (a
// line per wire), PyTorch + NCCL's and the NVLink floor against the bytes
// per rank.
func sizeFigure(rep *benchReport, dtype string, format func(w, h vg.Length) vg.CanvasWriterTo) ([]byte, error) {
	var panels []*plot.Plot
	for _, op := range reportOps(rep) {
		lines := sizeLines(rep, op, dtype)
		if len(lines) == 0 {
			continue // no row of op on all SMs in dtype: no panel
		}
		p := logLogPlot(op, "bytes per rank", "median time (us)")
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return nil, err
		}
		// Room for the legend above the lines, and for the last label.
		p.Y.Max *= 12
		p.X.Min, p.X.Max = p.X.Min/1.4, p.X.Max*1.6
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, fmt.Errorf("no %s rows on all SMs to draw against size (bench --sms 0)", dtype)
	}
	return tiled(panels, fmt.Sprintf("%s, %s, %s", dtype, ranks(rep.World), gpuName(rep)), format)
}

// sizeLines are the lines of op's panel against size, as
// plotutil.AddLinePoints takes them: ulysses' (one per wire, "ulysses
// e4m3" over a lossy one), PyTorch + NCCL's and the NVLink floor of each
// wire; none when no ulysses row of op in dtype ran on all SMs.
func sizeLines(rep *benchReport, op, dtype string) []any {
	var wires []string
	ours, floor := map[string]plotter.XYs{}, map[string]plotter.XYs{}
	for _, r := range rep.Rows {
		if r.Op != op || r.DType != dtype || r.SMs != 0 || r.MedianUS <= 0 {
			continue
		}
		if _, ok := ours[r.Wire]; !ok {
			wires = append(wires, r.Wire)
		}
		ours[r.Wire] = append(ours[r.Wire], plotter.XY{X: float64(r.BytesPerRank), Y: r.MedianUS})
		if r.FloorUS > 0 {
			floor[r.Wire] = append(floor[r.Wire], plotter.XY{X: float64(r.BytesPerRank), Y: r.FloorUS})
		}
	}
	var nccl plotter.XYs
	for _, n := range rep.NCCL {
		if n.Op == op && n.DType == dtype && n.MedianUS != nil {
			nccl = append(nccl, plotter.XY{X: float64(n.BytesPerRank), Y: *n.MedianUS})
		}
	}
	var lines []any
	for _, w := range wires {
		lines = append(lines, wireLabel("ulysses", w), ours[w])
	}
	if len(lines) > 0 && len(nccl) > 0 {
		lines = append(lines, "PyTorch + NCCL", nccl)
	}
	for _, w := range wires {
		if len(floor[w]) > 0 {
			lines = append(lines, wireLabel("NVLink floor", w), floor[w])
		}
	}
	return lines
}

// wireLabel is a line's label: name, followed by the wire when lossy
// (wire is a row's wire field, "" when exact).
func wireLabel(name, wire string) string {
	if wire == "" {
		return name
	}
	return name + " " + wire
}

// smsFigure is one panel per operation: ulysses' median against the SMs
// its kernels used (the blocks they ran), one line per size.
func smsFigure(rep *benchReport, dtype string, format func(w, h vg.Length) vg.CanvasWriterTo) ([]byte, error) {
	var panels []*plot.Plot
	for _, op := range reportOps(rep) {
		p := logLogPlot(op, "SMs (thread blocks)", "median time (us)")
		p.X.Scale = plot.LinearScale{}
		p.Legend.Left = false
		lines := smsLines(rep, op, dtype)
		if len(lines) == 0 {
			continue // no row of op in dtype: no panel
		}
		if err := plotutil.AddLinePoints(p, lines...); err != nil {
			return nil, err
		}
		p.X.Tick.Marker = blocksTicks(rep, op)
		p.Y.Max *= 8
		p.X.Max += 8
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, fmt.Errorf("no %s rows to draw against SMs", dtype)
	}
	return tiled(panels, fmt.Sprintf("%s, %s, %s: the SMs' share", dtype, ranks(rep.World), gpuName(rep)), format)
}

// smsLines are the lines of op's panel against SMs, as
// plotutil.AddLinePoints takes them: one per size and wire, labelled with
// the size (and the wire when lossy).
func smsLines(rep *benchReport, op, dtype string) []any {
	type key struct {
		bytes int64
		wire  string
	}
	byKey := map[key]plotter.XYs{}
	var keys []key
	for _, r := range rep.Rows {
		if r.Op != op || r.DType != dtype || r.MedianUS <= 0 {
			continue
		}
		k := key{r.BytesPerRank, r.Wire}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], plotter.XY{X: float64(r.Blocks), Y: r.MedianUS})
	}
	var lines []any
	for _, k := range keys {
		xy := byKey[k]
		slices.SortFunc(xy, func(a, b plotter.XY) int { return int(a.X - b.X) })
		lines = append(lines, wireLabel(formatBytes(float64(k.bytes)), k.wire), xy)
	}
	return lines
}

// blocksTicks marks the SM counts rep timed op with.
func blocksTicks(rep *benchReport, op string) plot.ConstantTicks {
	var ts plot.ConstantTicks
	for _, r := range rep.Rows {
		if r.Op == op && !slices.ContainsFunc(ts, func(t plot.Tick) bool { return t.Value == float64(r.Blocks) }) {
			ts = append(ts, plot.Tick{Value: float64(r.Blocks), Label: fmt.Sprint(r.Blocks)})
		}
	}
	return ts
}

// logLogPlot is an empty plot with log axes.
func logLogPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = x, y
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = bytesTicks{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs, p.Legend.YOffs = 0.1*vg.Inch, -0.1*vg.Inch
	return p
}

// bytesTicks labels powers of two of bytes (128 KiB, 1 MiB, ...) between
// the axis' ends.
type bytesTicks struct{}

func (bytesTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for v := 1024.0; v <= hi*1.001; v *= 2 {
		if v < lo*0.999 {
			continue
		}
		label := ""
		if l := formatBytes(v); strings.HasPrefix(l, "1 ") || strings.HasPrefix(l, "8 ") || strings.HasPrefix(l, "128 ") {
			label = l
		}
		ts = append(ts, plot.Tick{Value: v, Label: label})
	}
	return ts
}

// tiled draws panels side by side under a title, on a canvas of format.
func tiled(panels []*plot.Plot, title string, format func(w, h vg.Length) vg.CanvasWriterTo) ([]byte, error) {
	if len(panels) == 0 {
		return nil, fmt.Errorf("nothing to draw")
	}
	const w, h = 4 * vg.Inch, 3.6 * vg.Inch
	img := format(vg.Length(len(panels))*w, h+0.4*vg.Inch)
	dc := draw.New(img)
	sty := draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, 13), Handler: plot.DefaultTextHandler}
	dc.FillText(sty, vg.Point{X: 0.3 * vg.Inch, Y: h + 0.15*vg.Inch}, title)
	grid := [][]*plot.Plot{panels}
	tiles := draw.Tiles{Rows: 1, Cols: len(panels), PadX: vg.Millimeter * 4, PadTop: 0.4 * vg.Inch}
	for j, c := range plot.Align(grid, tiles, dc)[0] {
		panels[j].Draw(c)
	}
	var buf bytes.Buffer
	if _, err := img.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// gpuName is the report's first GPU, or "".
func gpuName(rep *benchReport) string {
	if len(rep.GPUs) == 0 {
		return ""
	}
	return fmt.Sprintf("%d x %s", len(rep.GPUs), rep.GPUs[0])
}

// ranks says "1 rank" or "n ranks".
func ranks(n int) string {
	if n == 1 {
		return "1 rank"
	}
	return fmt.Sprintf("%d ranks", n)
}
