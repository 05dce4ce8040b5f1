// Package ptx holds the kernels of the collectives as PTX, made from
// gen/kernels by `go generate ./ptx` and embedded in the binary. The CUDA
// driver JIT-compiles them for the GPU at load time, so the module needs no
// CUDA toolkit to build or run.
package ptx

//go:generate go run ../gen -out . -src ../gen/kernels

import (
	"embed"
	"fmt"
)

//go:embed *.ptx
var files embed.FS

// Entry is the name of a kernel entry point.
type Entry string

// Op names an operation that has one entry per vector width.
type Op string

// The operations with per-width entries.
const (
	OpSendRecvHeads Op = "send_recv_heads"
	OpGatherHeads   Op = "gather_heads"
	OpAllGather     Op = "all_gather"
)

// Ops lists the operations with per-width entries.
var Ops = []Op{OpSendRecvHeads, OpGatherHeads, OpAllGather}

// OpHeadAllGather gathers heads instead of tokens; it has general entries
// only.
const OpHeadAllGather Op = "head_all_gather"

// GeneralOps lists the operations with general entries (GeneralEntryFor):
// uneven heads, several tensors, inputs with a token stride.
var GeneralOps = []Op{OpSendRecvHeads, OpGatherHeads, OpHeadAllGather}

// Entries without a vector width that every file holds.
const (
	Start Entry = "ulysses_start" // the single-buffer start barrier
	Close Entry = "ulysses_close" // Close's farewell to the peers
	Sync  Entry = "ulysses_sync"  // the copy-engine mode's barrier
)

// vectorWidths lists the copy widths in bytes, widest first. Every file has
// entries for 16, 8 and 4 bytes and for its own element width.
var vectorWidths = []int{16, 8, 4, 2, 1}

// EntryFor names the entry of op that copies width-byte vectors.
func EntryFor(op Op, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_%s_v%d", op, width))
}

// CapturedEntryFor names EntryFor's twin for operations captured into a
// CUDA graph, which reads the token counts when it runs.
func CapturedEntryFor(op Op, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_%s_captured_v%d", op, width))
}

// GeneralEntryFor names the general entry of op (one of GeneralOps) that
// copies width-byte vectors; it serves captured operations too.
func GeneralEntryFor(op Op, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_%s_general_v%d", op, width))
}

// File describes one embedded PTX file.
type File struct {
	Name      string  // file name in this package
	ElemBytes int     // element width it was compiled for
	ISA       string  // PTX ISA version (.version): decides which drivers load it
	Target    string  // .target of the file
	ArgsBytes int     // size of the single by-value parameter of every entry
	Entries   []Entry // entry points, in file order
}

// HasEntry reports whether f has an entry named e.
func (f File) HasEntry(e Entry) bool {
	for _, x := range f.Entries {
		if x == e {
			return true
		}
	}
	return false
}

// Widths lists the vector widths f has entries for, widest first.
func (f File) Widths() []int {
	var w []int
	for _, v := range vectorWidths {
		if v >= f.ElemBytes && f.HasEntry(EntryFor(OpSendRecvHeads, v)) {
			w = append(w, v)
		}
	}
	return w
}

// Files describes every embedded PTX file.
func Files() []File {
	return append([]File(nil), manifest...)
}

// ForElemBytes returns the file for n-byte elements and its NUL-terminated
// PTX text, ready for the driver. Each call copies the text (about 1.2 MB).
func ForElemBytes(n int) (File, []byte, error) {
	for _, f := range manifest {
		if f.ElemBytes == n {
			b, err := files.ReadFile(f.Name)
			if err != nil {
				return File{}, nil, fmt.Errorf("ptx: %w", err)
			}
			return f, append(b, 0), nil
		}
	}
	return File{}, nil, fmt.Errorf("ptx: no kernels for %d-byte elements", n)
}
