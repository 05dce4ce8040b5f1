package main

import (
	"fmt"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bench --json file of two GPUs with PyTorch + NCCL beside it, and one
// over three SM counts: plot draws both figures, with a panel per
// operation, the three lines and the sizes.
func TestPlotFromJSON(t *testing.T) {
	dir := t.TempDir()
	out, sms := filepath.Join(dir, "b.svg"), filepath.Join(dir, "s.svg")
	code, _, stderr := runArgs("plot", "../../docs/bench/h200x2-sms.json", "-o", out, "--sms-o", sms)
	require.Equal(t, 0, code, stderr)
	for path, want := range map[string][]string{
		out: {"send_recv_heads", "gather_heads", "all_gather", "ulysses", "PyTorch + NCCL", "NVLink floor", "128 MiB", "2 x NVIDIA H200"},
		sms: {"send_recv_heads", "SMs (thread blocks)", "128 KiB", "128 MiB", ">16<", ">132<"},
	} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		svg := string(b)
		assert.True(t, strings.HasPrefix(svg, "<?xml"), "%s is SVG", path)
		for _, w := range want {
			assert.Contains(t, svg, w, "%s", path)
		}
	}
}

// Bad usage gives exit 2 and one line, before anything is read or drawn.
func TestPlotUsage(t *testing.T) {
	for _, args := range [][]string{
		{"plot"},
		{"plot", "../../docs/bench/h200x2.json", "-o", "/nonexistent/dir/b.svg"},
		{"plot", "../../docs/bench/h200x2.json", "-o", os.TempDir()},
		{"plot", "/nonexistent.json", "--dtype", "int8"},
		{"plot", "a.json", "b.json"},
	} {
		code, stdout, stderr := runArgs(args...)
		assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
		assert.Empty(t, stdout, "%v", args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", args, stderr)
	}
}

// A file that is missing, unreadable or not a bench report fails (exit 1)
// with one line that says so.
func TestPlotBadFile(t *testing.T) {
	dir := t.TempDir()
	array := filepath.Join(dir, "array.json")
	require.NoError(t, os.WriteFile(array, []byte(`[{"op":"send_recv_heads"}]`), 0o644))
	broken := filepath.Join(dir, "broken.json")
	require.NoError(t, os.WriteFile(broken, []byte(`{"world":2,"rows":[`), 0o644))
	for _, tc := range []struct{ file, want string }{
		{"/nonexistent.json", "plot: open /nonexistent.json: no such file or directory"},
		{array, "plot: " + array + " is not a bench --json file: a JSON array where its report (an object with rows) belongs"},
		{broken, "plot: " + broken + ": unexpected end of JSON input"},
	} {
		code, stdout, stderr := runArgs("plot", tc.file, "-o", filepath.Join(dir, "b.svg"))
		assert.Equal(t, exitFailed, code, "%s: %s", tc.file, stderr)
		assert.Empty(t, stdout)
		assert.Equal(t, tc.want+"\n", stderr)
	}
}

// --dtype takes the names check and bench take, in any case.
func TestPlotDTypeNames(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "b.json")
	var rows []string
	for _, dt := range []string{"bf16", "fp8e4m3"} {
		rows = append(rows, fmt.Sprintf(`{"impl":"ulysses","op":"send_recv_heads","dtype":%q,"bytes_per_rank":131072,"sms":0,"blocks":132,"median_us":10}`, dt))
	}
	require.NoError(t, os.WriteFile(in, []byte(`{"world":2,"rows":[`+strings.Join(rows, ",")+`]}`), 0o644))
	for _, name := range []string{"fp8", "FP8E4M3", "BF16", "bfloat16"} {
		out := filepath.Join(dir, name+".svg")
		code, _, stderr := runArgs("plot", in, "-o", out, "--dtype", name)
		require.Equal(t, 0, code, "--dtype %s: %s", name, stderr)
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		want, err := plotDType(name)
		require.NoError(t, err)
		assert.Contains(t, string(b), ">"+want+",", "--dtype %s draws %s", name, want)
	}
}

// A file with nothing to draw against size (every row on 8 SMs), or no row
// of the dtype asked for: one line of error, no panic.
func TestPlotNothingToDraw(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "b.json")
	rows := `{"impl":"ulysses","op":"send_recv_heads","dtype":"bf16","bytes_per_rank":131072,"sms":8,"blocks":8,"median_us":10}`
	require.NoError(t, os.WriteFile(in, []byte(`{"world":2,"rows":[`+rows+`]}`), 0o644))
	for _, args := range [][]string{
		{"plot", in, "-o", filepath.Join(dir, "b.svg")},
		{"plot", in, "-o", filepath.Join(dir, "c.svg"), "--dtype", "fp16", "--sms-o", filepath.Join(dir, "s.svg")},
	} {
		code, _, stderr := runArgs(args...)
		assert.NotEqual(t, 0, code, "%v", args)
		assert.Contains(t, stderr, "rows", "%v", args)
		assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", args, stderr)
	}
}

// Rows over a lossy wire draw lines of their own beside the exact ones:
// "ulysses e4m3" against size, "1 MiB e4m3" against SMs.
func TestPlotWires(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "b.json")
	var rows []string
	for _, wire := range []string{"", "e4m3"} {
		for _, sms := range []int{16, 0} {
			for _, size := range []int{131072, 1048576} {
				rows = append(rows, fmt.Sprintf(`{"impl":"ulysses","wire":%q,"op":"send_recv_heads","dtype":"bf16","bytes_per_rank":%d,"sms":%d,"blocks":%d,"median_us":%d,"floor_us":5}`,
					wire, size, sms, max(sms, 132), 10+sms+size/65536))
			}
		}
	}
	require.NoError(t, os.WriteFile(in, []byte(`{"world":2,"rows":[`+strings.Join(rows, ",")+`]}`), 0o644))
	out, sms := filepath.Join(dir, "b.svg"), filepath.Join(dir, "s.svg")
	code, _, stderr := runArgs("plot", in, "-o", out, "--sms-o", sms)
	require.Equal(t, 0, code, stderr)
	for path, want := range map[string][]string{
		out: {">ulysses<", ">ulysses e4m3<", ">NVLink floor<", ">NVLink floor e4m3<"},
		sms: {">128 KiB<", ">128 KiB e4m3<", ">1 MiB e4m3<"},
	} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		for _, w := range want {
			assert.Contains(t, string(b), w, "%s", path)
		}
	}
}

// A figure's format is its file's extension: a .png file (any case) is a
// PNG of the figure's size at figureDPI, panels side by side; an .svg one
// SVG; bench --plot's SM sweep beside it keeps the extension.
func TestPlotPNG(t *testing.T) {
	dir := t.TempDir()
	out, sms := filepath.Join(dir, "b.png"), filepath.Join(dir, "s.PNG")
	code, _, stderr := runArgs("plot", "../../docs/bench/h200x2-sms.json", "-o", out, "--sms-o", sms)
	require.Equal(t, 0, code, stderr)
	for _, path := range []string{out, sms} {
		f, err := os.Open(path)
		require.NoError(t, err)
		img, err := png.Decode(f)
		f.Close()
		require.NoError(t, err, "%s is a PNG", path)
		// Three panels of 4 x 3.6 inches, 0.4 inch of title above them.
		assert.Equal(t, image.Pt(3*4*figureDPI, 4*figureDPI), img.Bounds().Size(), "%s", path)
	}
	assert.Equal(t, filepath.Join(dir, "b-sms.png"), smsPlotPath(filepath.Join(dir, "b.png"), benchPlan{sms: []int{0, 8}}))
	assert.Equal(t, "b-sms.svg", smsPlotPath("b.svg", benchPlan{sms: []int{0, 8}}))
}

// A figure file of any other extension, or of none, is bad usage (exit 2,
// one line naming the flag and the formats), before the file is read: it
// would have been SVG under any name.
func TestPlotUnknownFormat(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", "/nonexistent.json", "-o", filepath.Join(dir, "b.pdf")}, `plot: -o ` + filepath.Join(dir, "b.pdf") + `: unknown figure format ".pdf" (want .svg or .png)`},
		{[]string{"plot", "/nonexistent.json", "--sms-o", filepath.Join(dir, "s.jpg")}, `plot: --sms-o ` + filepath.Join(dir, "s.jpg") + `: unknown figure format ".jpg" (want .svg or .png)`},
		{[]string{"plot", "/nonexistent.json", "-o", filepath.Join(dir, "figure")}, `plot: -o ` + filepath.Join(dir, "figure") + `: no file extension to choose the figure's format by (want .svg or .png)`},
		{[]string{"bench", "--plot", filepath.Join(dir, "b.gif")}, `bench: --plot ` + filepath.Join(dir, "b.gif") + `: unknown figure format ".gif" (want .svg or .png)`},
	} {
		code, stdout, stderr := runArgs(tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, stderr)
		assert.Empty(t, stdout, "%v", tc.args)
		assert.Equal(t, tc.want+"\n", stderr, "%v", tc.args)
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written")
}
