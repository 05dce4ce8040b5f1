package ptx

import (
	"fmt"
	"strconv"
	"strings"
)

// Entry is the name of a kernel entry point.
type Entry string

// Op names an operation that has one entry per vector width.
type Op string

// EntryKind is which of an operation's entries an entry is.
type EntryKind int

// The kinds of an operation's entries.
const (
	KindPlain    EntryKind = iota // EntryFor's
	KindCaptured                  // CapturedEntryFor's
	KindGeneral                   // GeneralEntryFor's
	KindWire                      // WireEntryFor's, of any format and type
)

// The operations' names, as the kernel source spells them in its
// entries (the rows of internal/plan.Operations name them).
const (
	OpSendRecvHeads Op = "send_recv_heads"
	OpGatherHeads   Op = "gather_heads"
	OpAllGather     Op = "all_gather"
	OpHeadAllGather Op = "head_all_gather"
)

// Ops lists the operations with plain and captured entries (EntryFor,
// CapturedEntryFor), GeneralOps those with general entries
// (GeneralEntryFor: uneven heads, several tensors, inputs with a token
// stride), WireOps those with fp8 wire entries (WireEntryFor). They are
// read from the names of the embedded files' entries (ParseEntry), in the
// order of each operation's first entry, so that they always say what the
// kernels hold; internal/plan's tests check its table against them.
var (
	Ops        = opsOf(manifest, KindPlain)
	GeneralOps = opsOf(manifest, KindGeneral)
	WireOps    = opsOf(manifest, KindWire)
)

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

// WireWidths lists the fp8 wire entries' widths in bytes of input read at
// once, widest first: 16 (eight elements; the head size a multiple of 8,
// at most WireWideMaxDim, every input address and token stride 16-byte
// aligned), 8 (four elements; a multiple of 4, 8-byte alignment) and 2
// (one).
var WireWidths = []int{16, 8, 2}

// WireWideMaxDim is the largest head size the 16-byte wire entries take
// (a warp's 32 lanes, four chunks of eight elements each).
const WireWideMaxDim = 1024

// WireEntryFor names the fp8 wire entry of op (one of WireOps) for format
// ("e4m3" or "e5m2"), 16-bit element type out ("bf16" or "fp16") and
// width (one of WireWidths).
func WireEntryFor(op Op, format, out string, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_%s_wire_%s_%s_v%d", op, format, out, width))
}

// WireDecodeFor names the entry that turns a Comm's staged fp8 rows into
// its 16-bit output, after an fp8 wire entry of the same format, type and
// width.
func WireDecodeFor(format, out string, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_wire_decode_%s_%s_v%d", format, out, width))
}

// WirePackFor names the entry that quantizes a Comm's inputs, row by row in
// their own order, into codes and scale bytes in a local area, for a
// transport that sends them itself (NCCL); width as WireEntryFor's.
func WirePackFor(format, out string, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_wire_pack_%s_%s_v%d", format, out, width))
}

// WireUnpackFor names the entry that turns the codes and scale bytes such a
// transport delivered into a data half into its 16-bit outputs; width as
// WireDecodeFor's.
func WireUnpackFor(format, out string, width int) Entry {
	return Entry(fmt.Sprintf("ulysses_wire_unpack_%s_%s_v%d", format, out, width))
}

// ParseEntry splits the name of one of an operation's entries into the
// operation, the entry's kind and its width: the inverse of EntryFor,
// CapturedEntryFor, GeneralEntryFor and WireEntryFor (whose format and
// type it drops). It reports false for every other entry: the barriers,
// the wire's decodes, packs and unpacks. It costs a few string searches.
func ParseEntry(e Entry) (op Op, kind EntryKind, width int, ok bool) {
	s, found := strings.CutPrefix(string(e), "ulysses_")
	i := strings.LastIndex(s, "_v")
	if !found || i < 0 || strings.HasPrefix(s, "wire_") {
		return "", 0, 0, false
	}
	width, err := strconv.Atoi(s[i+2:])
	if err != nil || width < 1 {
		return "", 0, 0, false
	}
	s = s[:i]
	if j := strings.Index(s, "_wire_"); j >= 0 {
		return Op(s[:j]), KindWire, width, j > 0
	}
	if name, cut := strings.CutSuffix(s, "_captured"); cut {
		return Op(name), KindCaptured, width, name != ""
	}
	if name, cut := strings.CutSuffix(s, "_general"); cut {
		return Op(name), KindGeneral, width, name != ""
	}
	return Op(s), KindPlain, width, s != ""
}

// opsOf lists the operations that files have entries of kind for, in the
// order of each one's first entry.
func opsOf(files []File, kind EntryKind) []Op {
	var ops []Op
	seen := map[Op]bool{}
	for _, f := range files {
		for _, e := range f.Entries {
			if op, k, _, ok := ParseEntry(e); ok && k == kind && !seen[op] {
				seen[op] = true
				ops = append(ops, op)
			}
		}
	}
	return ops
}
