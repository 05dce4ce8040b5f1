package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// writeTable prints a header, a rule and rows in aligned columns, two
// spaces apart. align has one letter per column: 'l' left, 'r' right
// (missing letters mean left).
func writeTable(w io.Writer, head []string, align string, rows [][]string) {
	widths := make([]int, len(head))
	for _, r := range append([][]string{head}, rows...) {
		for i, c := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < len(align) && align[i] == 'r' {
				b.WriteString(pad + c)
			} else {
				b.WriteString(c + pad)
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(head)
	rule := make([]string, len(widths))
	for i, n := range widths {
		rule[i] = strings.Repeat("-", n)
	}
	line(rule)
	for _, r := range rows {
		line(r)
	}
}

// writeWireTable is writeTable with a "wire" column after the dtype when
// some row crossed a lossy wire (wires[i] is rows[i]'s wire field), and
// the same table as before the wire existed otherwise.
func writeWireTable(w io.Writer, head []string, align string, rows [][]string, wires []string) {
	head, align, rows = withWireColumn(head, align, rows, wires)
	writeTable(w, head, align, rows)
}

// rowWires is the wire field of each row.
func rowWires(rows []benchRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Wire
	}
	return out
}

var benchHead = []string{"op", "dtype", "bytes/rank", "SMs", "median us", "p10-p90 us", "b2b us", "stream us", "graph us", "algbw GB/s", "NVLink bytes/rank", "floor us", "time/floor"}

const benchAlign = "llrrrrrrrrrrr"

// benchTableRows formats ulysses rows for writeTable with benchHead.
func benchTableRows(rows []benchRow) [][]string {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		floor, ratio, graph := "-", "-", "-" // no graph over NCCL
		if r.GraphUS > 0 {
			graph = fmt.Sprintf("%.1f", r.GraphUS)
		}
		if r.FloorUS > 0 {
			floor = fmt.Sprintf("%.1f", r.FloorUS)
			ratio = fmt.Sprintf("%.2fx", r.TimeOverFloor)
		}
		out = append(out, []string{
			r.Op, r.DType, formatBytes(float64(r.BytesPerRank)), smsLabel(r.SMs, r.Blocks),
			fmt.Sprintf("%.1f", r.MedianUS), fmt.Sprintf("%.1f-%.1f", r.P10US, r.P90US), fmt.Sprintf("%.1f", r.BackToBackUS),
			fmt.Sprintf("%.1f", r.StreamUS), graph, fmt.Sprintf("%.1f", r.AlgBWGBps), formatBytes(r.NVLinkBytes), floor, ratio,
		})
	}
	return out
}

// smsLabel shows the SM count asked for and the blocks the kernels run.
func smsLabel(asked, blocks int) string {
	if asked == 0 {
		return fmt.Sprintf("all (%d)", blocks)
	}
	if blocks != 0 && blocks != asked {
		return fmt.Sprintf("%d (%d)", asked, blocks)
	}
	return fmt.Sprint(asked)
}

var compareHead = []string{"op", "dtype", "bytes/rank", "SMs", "ulysses us", "NCCL us", "NCCL/ulysses"}

const compareAlign = "llrrrrr"

// compareTableRows formats the comparison rows for writeTable with compareHead.
func compareTableRows(rows []compareRow) [][]string {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, []string{
			r.Op, r.DType, formatBytes(float64(r.BytesPerRank)), smsLabel(r.SMs, r.Blocks),
			fmt.Sprintf("%.1f", r.UlyssesUS), fmt.Sprintf("%.1f", r.NCCLUS), fmt.Sprintf("%.2fx", r.Ratio),
		})
	}
	return out
}

var overlapHead = []string{"op", "dtype", "bytes/rank", "SMs", "alone us", "beside us", "exchange slowdown", "compute slowdown"}

const overlapAlign = "llrrrrrr"

// overlapTableRows formats bench --overlap's rows for writeTable with
// overlapHead.
func overlapTableRows(rows []benchRow) [][]string {
	out := make([][]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, []string{
			r.Op, r.DType, formatBytes(float64(r.BytesPerRank)), smsLabel(r.SMs, r.Blocks),
			fmt.Sprintf("%.1f", r.BackToBackUS), fmt.Sprintf("%.1f", r.OverlapUS),
			fmt.Sprintf("%+.1f%%", 100*r.OverlapExchangeSlowdown), fmt.Sprintf("%+.1f%%", 100*r.OverlapComputeSlowdown),
		})
	}
	return out
}
