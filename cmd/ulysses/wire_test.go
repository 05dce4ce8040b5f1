package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/a2a"
	"github.com/ulysses-go/ulysses/internal/driver"
	"github.com/ulysses-go/ulysses/internal/testutil"
)

func TestParseWires(t *testing.T) {
	w, err := parseWire("--wire", "E4M3")
	require.NoError(t, err)
	assert.Equal(t, a2a.WireE4M3, w)
	_, err = parseWire("--wire", "fp8")
	assert.EqualError(t, err, `unknown --wire "fp8" (want exact, e4m3 or e5m2)`)

	ws, err := parseWires("exact, e4m3,EXACT,e5m2")
	require.NoError(t, err)
	assert.Equal(t, []a2a.Wire{a2a.WireExact, a2a.WireE4M3, a2a.WireE5M2}, ws)
	for _, bad := range []string{"", " , ", "exact,nope"} {
		_, err := parseWires(bad)
		assert.Error(t, err, bad)
	}
}

func TestWireConflict(t *testing.T) {
	assert.NoError(t, wireConflict(a2a.WireExact, a2a.MoverCopyEngines), "the exact wire goes anywhere")
	assert.NoError(t, wireConflict(a2a.WireE4M3, a2a.MoverAuto))
	assert.NoError(t, wireConflict(a2a.WireE5M2, a2a.MoverKernels), "NCCL carries the wire too")
	assert.ErrorContains(t, wireConflict(a2a.WireE4M3, a2a.MoverCopyEngines), "--mover copy-engines")
}

// Over an fp8 wire a 16-bit row sends a byte per element and a scale
// byte per head: 1/2 + 1/(2D) of the exact bytes.
func TestWireShare(t *testing.T) {
	assert.Equal(t, 1.0, wireShare("", 128))
	assert.Equal(t, 1.0, wireShare("exact", 128))
	assert.Equal(t, 1.0, wireShare("nonsense", 128))
	assert.Equal(t, 1.0, wireShare("e4m3", 0), "no head size known: the exact bytes")
	assert.Equal(t, 0.5+1.0/256, wireShare("e4m3", 128))
	assert.Equal(t, 0.5+1.0/144, wireShare("e5m2", 72))
}

func TestInterleaveWires(t *testing.T) {
	row := func(op, wire string) benchRow { return benchRow{Op: op, Wire: wire} }
	exact := []benchRow{row("a", ""), row("b", "")}
	e4 := []benchRow{row("a", "e4m3"), row("b", "e4m3")}
	assert.Equal(t, exact, interleaveWires([][]benchRow{exact}))
	assert.Equal(t, []benchRow{row("a", ""), row("a", "e4m3"), row("b", ""), row("b", "e4m3")}, interleaveWires([][]benchRow{exact, e4}))
	assert.Empty(t, interleaveWires([][]benchRow{nil, nil}), "the other ranks have no rows")
}

func TestBenchWiresPlan(t *testing.T) {
	fs, o := newBenchFlags(false)
	require.NoError(t, fs.Parse(nil))
	p, err := o.plan()
	require.NoError(t, err)
	assert.Equal(t, []a2a.Wire{a2a.WireExact}, p.wires, "exact by default")

	fs, o = newBenchFlags(false)
	require.NoError(t, fs.Parse([]string{"--wires", "exact,e4m3", "--dtypes", "bf16,fp8", "--bytes", "1M", "--sms", "8,0"}))
	p, err = o.plan()
	require.NoError(t, err)
	ws, notes := p.wiresFor(a2a.BFloat16)
	assert.Equal(t, []a2a.Wire{a2a.WireExact, a2a.WireE4M3}, ws)
	assert.Empty(t, notes)
	ws, notes = p.wiresFor(a2a.Float8E4M3)
	assert.Equal(t, []a2a.Wire{a2a.WireExact}, ws)
	require.Len(t, notes, 1)
	assert.Equal(t, "fp8e4m3 over the e4m3 wire skipped: the fp8 wire moves bf16 and fp16", notes[0])
	assert.Equal(t, 3*2*1*3, p.rowCount(), "bf16 twice, fp8 once; 2 SM counts, 1 size, 3 ops")
}

// Exact rows write no wire field: their JSON is as before the wire.
func TestWireJSON(t *testing.T) {
	b, err := json.Marshal(benchRow{Op: "all_gather"})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "wire")
	b, err = json.Marshal(benchRow{Op: "all_gather", Wire: "e4m3"})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"wire":"e4m3"`)
}

// The bench table has a wire column only when some row is lossy; an
// exact row then says "exact".
func TestWireColumn(t *testing.T) {
	rows := []benchRow{
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 20, World: 2, HeadDim: 128, Blocks: 132, MedianUS: 194.7},
		{Op: "send_recv_heads", DType: "bf16", BytesPerRank: 128 << 20, World: 2, HeadDim: 128, Blocks: 132, MedianUS: 110.2, Wire: "e4m3"},
	}
	for i := range rows {
		rows[i].finish(392e9)
	}
	var b bytes.Buffer
	writeWireTable(&b, benchHead, benchAlign, benchTableRows(rows[:1]), rowWires(rows[:1]))
	exactOnly := b.String()
	assert.NotContains(t, exactOnly, "wire")
	var plain bytes.Buffer
	writeTable(&plain, benchHead, benchAlign, benchTableRows(rows[:1]))
	assert.Equal(t, plain.String(), exactOnly, "the table of exact rows is unchanged")

	b.Reset()
	writeWireTable(&b, benchHead, benchAlign, benchTableRows(rows), rowWires(rows))
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	require.Len(t, lines, 4)
	assert.Regexp(t, `^op +dtype +wire +bytes/rank`, lines[0])
	assert.Regexp(t, `^send_recv_heads +bf16 +exact +128 MiB`, lines[2])
	assert.Regexp(t, `^send_recv_heads +bf16 +e4m3 +128 MiB`, lines[3])
	assert.Contains(t, lines[2], "64 MiB")   // NVLink bytes, exact
	assert.Contains(t, lines[3], "32.2 MiB") // 64 MiB * (1/2 + 1/256) = 32.25 MiB

	// writeBenchTable: both the times and the overlap table.
	_, o := newBenchFlags(false)
	o.overlap = true
	b.Reset()
	writeBenchTable(&b, &benchReport{World: 2, Rows: rows}, o)
	assert.Equal(t, 2, strings.Count(b.String(), "  wire  "), "a wire column in each table:\n%s", b.String())
	assert.Equal(t, 2, strings.Count(b.String(), "  e4m3  "), "%s", b.String())
}

// bench --wires on the stub driver, every rank in this process: each bf16
// row over each wire, side by side, fp8 exactly only (with a note), and
// the wire in the JSON of the lossy rows alone. In a child process, since
// the driver is loaded once per process.
func TestBenchWiresOnFakeDriver(t *testing.T) {
	out := filepath.Join(t.TempDir(), "b.json")
	testutil.RunChild(t, "TestBenchWiresOnFakeDriverChild", driver.EnvLibrary+"="+testutil.FakeCUDA(t), "BENCH_JSON="+out)
	rep, err := readReport(out)
	require.NoError(t, err)
	var got []string
	for _, r := range rep.Rows {
		got = append(got, r.Op+" "+r.DType+" "+r.Wire)
	}
	assert.Equal(t, []string{
		"send_recv_heads bf16 ", "send_recv_heads bf16 e4m3", "all_gather bf16 ", "all_gather bf16 e4m3",
		"send_recv_heads fp8e4m3 ", "all_gather fp8e4m3 ",
	}, got)
	assert.Equal(t, rep.Rows[0].NVLinkBytes*(0.5+1.0/256), rep.Rows[1].NVLinkBytes)
}

func TestBenchWiresOnFakeDriverChild(t *testing.T) {
	testutil.SkipUnlessChild(t)
	code, stdout, stderr := runArgs("bench", "--single-process", "--world", "2", "--transport", "ipc", "--wires", "exact,e4m3",
		"--dtypes", "bf16,fp8", "--bytes", "128K", "--ops", "send_recv_heads,all_gather", "--iters", "2", "--warmup", "0", "--rotate", "1",
		"--json", os.Getenv("BENCH_JSON"))
	require.Equal(t, 0, code, "%s\n%s", stdout, stderr)
	assert.Regexp(t, `op +dtype +wire +bytes/rank`, stdout)
	assert.Contains(t, stdout, "note: fp8e4m3 over the e4m3 wire skipped")
}
