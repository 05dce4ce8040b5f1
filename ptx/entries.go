package ptx

import "fmt"

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

// WireWidths lists the fp8 wire entries' widths in bytes of input read at
// once, widest first: 16 (eight elements; the head size a multiple of 8,
// at most WireWideMaxDim, every input address and token stride 16-byte
// aligned), 8 (four elements; a multiple of 4, 8-byte alignment) and 2
// (one).
var WireWidths = []int{16, 8, 2}

// WireWideMaxDim is the largest head size the 16-byte wire entries take
// (a warp's 32 lanes, four chunks of eight elements each).
const WireWideMaxDim = 1024

// WireOps lists the operations with fp8 wire entries.
var WireOps = []Op{OpSendRecvHeads, OpGatherHeads, OpAllGather, OpHeadAllGather}

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
