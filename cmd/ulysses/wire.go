package main

import (
	"fmt"
	"slices"

	"github.com/ulysses-go/ulysses/a2a"
)

// parseWire reads the wire of flag name: exact, e4m3 or e5m2, in any case.
func parseWire(name, s string) (a2a.Wire, error) {
	w, err := a2a.ParseWire(s)
	if err != nil {
		return 0, fmt.Errorf("unknown %s %q (want exact, e4m3 or e5m2)", name, s)
	}
	return w, nil
}

// parseWires reads bench's --wires: a comma-separated list of wires,
// without repeats.
func parseWires(s string) ([]a2a.Wire, error) {
	var out []a2a.Wire
	for _, f := range splitList(s) {
		w, err := parseWire("--wires", f)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, w) {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no wires in --wires %q", s)
	}
	return out, nil
}

// wireConflict refuses a lossy wire with what cannot carry it: the copy
// engines (the kernels convert the rows).
func wireConflict(w a2a.Wire, mover a2a.Mover) error {
	if w.Lossy() && mover == a2a.MoverCopyEngines {
		return fmt.Errorf("the %v wire converts rows in the kernels: --mover copy-engines cannot carry it (kernels or auto can)", w)
	}
	return nil
}

// wireName is a row's wire field: "" for the exact wire (so that exact
// rows read as before the wire existed), the wire's name otherwise.
func wireName(w a2a.Wire) string {
	if !w.Lossy() {
		return ""
	}
	return w.String()
}

// wireShare is the part of a 16-bit row's NVLink bytes that crosses wire
// (a row's wire field): 1 exactly, and over an fp8 wire one byte per
// element plus one scale byte per head of headDim elements, that is
// 1/2 + 1/(2*headDim).
func wireShare(wire string, headDim int) float64 {
	w, err := a2a.ParseWire(wire)
	if wire == "" || err != nil || !w.Lossy() || headDim < 1 {
		return 1
	}
	return 0.5 + 0.5/float64(headDim)
}

// withWireColumn inserts a "wire" column after the dtype (the second
// column) into a table's head, align and rows when some row crossed a
// lossy wire (wires[i] is rows[i]'s wire field); otherwise it returns
// them unchanged.
func withWireColumn(head []string, align string, rows [][]string, wires []string) ([]string, string, [][]string) {
	if !slices.ContainsFunc(wires, func(w string) bool { return w != "" }) {
		return head, align, rows
	}
	insert := func(cells []string, c string) []string {
		return slices.Insert(slices.Clone(cells), 2, c)
	}
	out := make([][]string, len(rows))
	for i, r := range rows {
		w := wires[i]
		if w == "" {
			w = a2a.WireExact.String()
		}
		out[i] = insert(r, w)
	}
	return insert(head, "wire"), align[:2] + "l" + align[2:], out
}

// interleaveWires merges the rows of one dtype and SM count timed over
// each wire (batches[k]: wire k's, the same sizes and operations in the
// same order) so that a row over each wire follows the next: the wires
// side by side.
func interleaveWires(batches [][]benchRow) []benchRow {
	n := 0
	for _, b := range batches {
		n = max(n, len(b))
	}
	var out []benchRow
	for i := range n {
		for _, b := range batches {
			if i < len(b) {
				out = append(out, b[i])
			}
		}
	}
	return out
}
