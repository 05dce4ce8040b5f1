// Package spec describes, once, what the host and the CUDA kernels of
// gen/kernels share: the constants, the by-value kernel argument and the
// structures both sides read in device or pinned memory. From it, gen/abi
// writes the C header the kernels include (gen/kernels/abi.cuh) and the Go
// mirror the host uses (internal/kernelabi/abi_gen.go); a test in
// internal/kernelabi fails when either file is stale. Both files check the
// layout computed here: the header with static_asserts that nvcc
// evaluates, the Go package with a test of every field's offset.
package spec

// Const is a #define of the kernels and a Go constant.
type Const struct {
	C, Go  string
	Value  int64
	Suffix string // C literal suffix ("u" for the unsigned codes)
	// Overridable constants are guarded by #ifndef, so that a build of the
	// kernels can try other choices (nvcc -D); the host always uses Value.
	Overridable bool
	// Doc, when set, is written above the constant and starts a group.
	Doc string
}

// Scalar is a member type: its C and Go names and its size (and alignment).
type Scalar struct {
	C, Go string
	Size  int64
}

// The scalars members are made of.
var (
	U32 = Scalar{"u32", "uint32", 4}
	I32 = Scalar{"int", "int32", 4}
	U64 = Scalar{"u64", "uint64", 8}
)

// Dim is an array dimension: a constant's C name (or "") plus Add.
type Dim struct {
	Const string
	Add   int64
}

// Field is a struct member, named in C (snake_case); its Go name is the
// camel-cased C name.
type Field struct {
	C    string
	Type Scalar
	Dims []Dim
	Doc  string // a line's comment after the member
	// Lead, when set, is written above the member and starts a group.
	Lead string
}

// Struct is a structure both sides lay out alike.
type Struct struct {
	Name   string // the same in C and Go
	Doc    string
	Fields []Field
}

// Consts are the shared constants, in the order the files list them.
var Consts = []Const{
	{C: "MAX_RANKS", Go: "MaxRanks", Value: 8, Doc: "The most ranks of a group."},
	{C: "MAX_BLOCKS", Go: "MaxBlocks", Value: 1024, Doc: "The most blocks of an operation: the signal area has one flag per block, peer and phase."},
	{C: "MAX_PARCELS", Go: "MaxParcels", Value: 1024, Doc: "The most parcels a rank's staged fp8 wire operation sends its rows in (all its tensors together): the signal area has one landing word per parcel and peer."},
	{C: "MAX_TENSORS", Go: "MaxTensors", Value: 4, Doc: "The most tensors one general head operation moves (q, k, v and one more)."},
	{C: "THREADS", Go: "Threads", Value: 512, Overridable: true, Doc: "The largest block the host launches (kernels loop over blockDim, not THREADS)."},
	{C: "UNROLL", Go: "Unroll", Value: 8, Overridable: true, Doc: "Vectors each thread keeps in flight."},
	{C: "PHASE_START", Go: "PhaseStart", Value: 0, Suffix: "u", Doc: "Phases: the start barrier (single buffer) and the end of an operation own one flag per (block, peer) each; close has no flags, only bye words."},
	{C: "PHASE_END", Go: "PhaseEnd", Value: 1, Suffix: "u"},
	{C: "PHASE_CLOSE", Go: "PhaseClose", Value: 2, Suffix: "u"},
	{C: "FLAG_PHASES", Go: "FlagPhases", Value: 2, Suffix: "u"},
	{C: "STATUS_OK", Go: "StatusOK", Value: 0, Suffix: "u", Doc: "Status codes the kernels write into Status.code. ABORTED: a wait ended by the abort word (Close during a blocked Sync). HALF_REUSED: two operations in a row on one data half (a graph's halves out of turn)."},
	{C: "STATUS_TIMEOUT", Go: "StatusTimeout", Value: 1, Suffix: "u"},
	{C: "STATUS_PEER_CLOSED", Go: "StatusPeerClosed", Value: 2, Suffix: "u"},
	{C: "STATUS_MISMATCH", Go: "StatusMismatch", Value: 3, Suffix: "u"},
	{C: "STATUS_ABORTED", Go: "StatusAborted", Value: 4, Suffix: "u"},
	{C: "STATUS_HALF_REUSED", Go: "StatusHalfReused", Value: 5, Suffix: "u"},
	{C: "WIRE_STAGED", Go: "WireStaged", Value: 0, Suffix: "u", Doc: "How rows cross over the fp8 wire (Args.wire_mode). STAGED: rows for the peers as codes and scale bytes into their staging areas, decoded by a second launch; this rank's own rows as the 16-bit values their round trip gives, marked by a scale byte 0. DIRECT: every row as those 16-bit values, straight into the outputs (no staging, no decode launch). LANDING: as STAGED, in parcels whose rows the receiver decodes in the exchange launch as they land; the decode launch takes what had not landed."},
	{C: "WIRE_DIRECT", Go: "WireDirect", Value: 1, Suffix: "u"},
	{C: "WIRE_LANDING", Go: "WireLanding", Value: 2, Suffix: "u"},
	{C: "WIRE_PACK", Go: "WirePack", Value: 3, Suffix: "u", Doc: "PACK (ulysses_wire_pack_*, for a transport that sends the codes itself): every row of this rank's inputs, in their own order, as codes and a scale byte into a local area (data[0]); no row goes to the outputs."},
	{C: "SMALL_GRANULE", Go: "SmallGranule", Value: 4096, Doc: "How many blocks an operation activates for the input bytes its largest rank walks: one per SMALL_GRANULE bytes up to FEW_BLOCKS, and one per LARGE_GRANULE bytes beyond, when that is more. From 128 KiB to 4 MiB, 64 blocks or fewer beat 128 by 0.7-1.0 us on 2 x H200; at 8 MiB every count above 64 ran level."},
	{C: "FEW_BLOCKS", Go: "FewBlocks", Value: 64},
	{C: "LARGE_GRANULE", Go: "LargeGranule", Value: 65536},
	{C: "DIVISOR_WORDS", Go: "DivisorWords", Value: 3, Doc: "A division by an operation's fixed divisor d, as walks.cuh's Divisor holds it: d, the multiplier and the shift (plan.DivisorOf makes them). The Live table holds TOKEN_DIVISORS of them, by TOKEN_DIV_*: of this rank's token count and of the most any rank has."},
	{C: "TOKEN_DIV_RANK", Go: "TokenDivRank", Value: 0, Suffix: "u"},
	{C: "TOKEN_DIV_MOST", Go: "TokenDivMost", Value: 1, Suffix: "u"},
	{C: "TOKEN_DIVISORS", Go: "TokenDivisors", Value: 2},
}

// Structs are the shared structures.
var Structs = []Struct{
	{Name: "State", Doc: "Local state at the end of each rank's buffer: only its owner's kernels touch it.", Fields: []Field{
		{C: "epoch", Type: U32, Doc: "operations completed: the last block of each advances it"},
		{C: "arrived", Type: U32, Doc: "active blocks of the running operation that have signalled"},
		{C: "claimed", Type: U32, Doc: "the first failure claims it; later launches return at once"},
		{C: "reserved", Type: U32},
	}},
	{Name: "Live", Doc: "The token counts of captured operations (CUDA graphs), which replays must read when they run, not when they were captured: in the Comm's buffer after the State, where SetRankTokens copies them (reading pinned host memory from every block cost hundreds of microseconds per operation).", Fields: []Field{
		{C: "tokens", Type: I32, Dims: []Dim{{Const: "MAX_RANKS"}}},
		{C: "prefix", Type: I32, Dims: []Dim{{Const: "MAX_RANKS", Add: 1}}},
		{C: "token_hash", Type: U32, Doc: "the FNV-1a hash of the counts, which signatures mix in"},
		{C: "token_div", Type: U32, Dims: []Dim{{Const: "TOKEN_DIVISORS"}, {Const: "DIVISOR_WORDS"}}, Doc: "the divisions by this rank's count and by the most tokens, made by the host"},
	}},
	{Name: "Signals", Doc: "The signal area of each rank's buffer: written only by its peers.", Fields: []Field{
		{C: "flag", Type: U64, Dims: []Dim{{Const: "FLAG_PHASES"}, {Const: "MAX_BLOCKS"}, {Const: "MAX_RANKS"}}, Doc: "{epoch | signature << 32} from (block, peer)"},
		{C: "bye", Type: U32, Dims: []Dim{{Const: "MAX_RANKS"}}, Doc: "nonzero: that peer closed and writes nothing more here"},
		{C: "landed", Type: U32, Dims: []Dim{{Const: "MAX_RANKS"}, {Const: "MAX_PARCELS"}}, Doc: "the fp8 wire: [peer][g], the epoch of the last operation whose parcel g that peer has stored here"},
	}},
	{Name: "Status", Doc: "What the host reads after a failure: pinned host memory mapped into the device. Written once, by the block that claimed it; code is written last. abort is the one word the host writes: Close sets it to end the waits of operations a blocked Sync is waiting for.", Fields: []Field{
		{C: "code", Type: U32, Doc: "STATUS_*"},
		{C: "phase", Type: U32},
		{C: "peer", Type: U32},
		{C: "epoch", Type: U32},
		{C: "block", Type: U32, Doc: "the block whose flag was missing or wrong"},
		{C: "rank", Type: U32},
		{C: "sig", Type: U32, Doc: "this rank's signature of the operation"},
		{C: "peer_sig", Type: U32, Doc: "the peer's, for STATUS_MISMATCH"},
		{C: "abort", Type: U32, Doc: "written by the host: nonzero ends every wait"},
	}},
	{Name: "Args", Doc: "The single kernel parameter, passed by value. Everything an operation depends on travels in it, token counts included, so nothing the host writes to the device can race with a kernel.", Fields: []Field{
		{C: "data", Type: U64, Dims: []Dim{{Const: "MAX_RANKS"}}, Doc: "data region of every rank's buffer, mapped here"},
		{C: "signal", Type: U64, Dims: []Dim{{Const: "MAX_RANKS"}}, Doc: "signal area of every rank's buffer, mapped here"},
		{C: "input", Type: U64, Doc: "this rank's input tensor"},
		{C: "state", Type: U64, Doc: "this rank's State"},
		{C: "status", Type: U64, Doc: "device pointer of this rank's host-mapped Status"},
		{C: "timeout_ns", Type: U64, Doc: "how long one wait may take"},
		{C: "half_bytes", Type: U64, Doc: "offset of the second data half; 0: single buffer"},
		{C: "capacity", Type: U64, Doc: "bytes of one data half: no store goes past it"},
		{C: "live", Type: U64, Doc: "captured operations: the Live table (else 0)"},
		{C: "group_row", Type: U64, Doc: "captured: input bytes per token of the largest rank's walk"},
		{C: "tokens", Type: I32, Dims: []Dim{{Const: "MAX_RANKS"}}, Doc: "T_r of every rank (not captured)"},
		{C: "prefix", Type: I32, Dims: []Dim{{Const: "MAX_RANKS", Add: 1}}, Doc: "p_r; prefix[world] = T"},
		{C: "rank", Type: U32},
		{C: "world", Type: U32},
		{C: "batch", Type: U32},
		{C: "units", Type: U32, Doc: "vectors per chunk (head ops) or per token row (AllGather)"},
		{C: "active", Type: U32, Doc: "blocks that copy (the same on every rank; captured: from live); ulysses_close: 1 to wait for byes"},
		{C: "sig", Type: U32, Doc: "signature of the operation (captured: without the counts' hash)"},
		{C: "half", Type: U32, Doc: "the data half the host chose (0 or 1); the kernel writes half e&1 and checks it"},
		{C: "reserved", Type: U32},
		{C: "inputs", Type: U64, Dims: []Dim{{Const: "MAX_TENSORS"}}, Lead: "Only the general head entries (ulysses_<op>_general_v<W>) read what follows: uneven heads, several tensors, inputs with a token stride.", Doc: "tensor k's input; inputs[0] is input"},
		{C: "region", Type: U64, Doc: "bytes between tensor k's output and k+1's in a data half"},
		{C: "heads", Type: I32, Dims: []Dim{{Const: "MAX_RANKS", Add: 1}}, Doc: "rank q holds heads heads[q]..heads[q+1]-1"},
		{C: "tensors", Type: U32, Doc: "tensors moved: 1..MAX_TENSORS"},
		{C: "head_units", Type: U32, Doc: "vectors per head"},
		{C: "in_row", Type: U32, Doc: "vectors between consecutive tokens of an input"},
		{C: "walk_total", Type: U32, Doc: "captured: the walk grows with all tokens (HeadAllGather), not one rank's"},
		{C: "stage", Type: U64, Lead: "Only the fp8 wire's entries (ulysses_<op>_wire_<fmt>_<out>_v<W>, ulysses_wire_decode_*, ulysses_wire_pack_* and ulysses_wire_unpack_*) read what follows: where each row's codes and scale byte land in a data half, and what the decode walks.", Doc: "bytes from a data half's start to tensor 0's fp8 codes"},
		{C: "scales", Type: U64, Doc: "bytes from a data half's start to tensor 0's scale bytes"},
		{C: "stage_region", Type: U64, Doc: "bytes between tensor k's codes and k+1's"},
		{C: "scale_region", Type: U64, Doc: "bytes between tensor k's scale bytes and k+1's"},
		{C: "wire_rows", Type: U32, Doc: "rows one tensor's codes hold: no store goes past them"},
		{C: "out_heads", Type: U32, Doc: "rows per token of the output (and H of AllGather's input)"},
		{C: "out_rank_tokens", Type: U32, Doc: "nonzero: the output holds this rank's tokens (GatherHeads), else all"},
		{C: "wire_mode", Type: U32, Doc: "WIRE_*: how rows cross over the fp8 wire"},
		{C: "in_heads", Type: U32, Doc: "ulysses_wire_pack_*: rows per token of the inputs"},
	}},
}
