package plan

import "github.com/ulysses-go/ulysses/ptx"

// Operation is one collective, declared once: its row of Operations is
// what planning, the transports and the face look up instead of switching
// on the operation. What differs from one operation to the next beyond
// its row's values (the kernels' walks, its copy-engine boxes) is in a
// file of its own, named after it (sendrecvheads.go and the others);
// docs/DEVELOPING.md, "Adding an operation", lists every file a new one
// touches.
type Operation struct {
	// Op names its kernels (ptx.EntryFor and the others), its family of
	// PTX and its rows in the bench: what the kernel source calls it.
	Op ptx.Op
	// Name is the API's: a2a's methods (Name, Name+"Into"), a2a/ref's
	// reference (Name, Name+"For") and internal/check's steps.
	Name string
	// Code is its number in the signature (shapeSignature), so that ranks
	// that run different operations at one epoch fail: never reused.
	Code uint64
	// In and Out say which dimensions of its input and of its output
	// hold this rank's share, not the group's whole.
	In, Out Share
	// Plain: it has plain and captured entries (ptx.EntryFor,
	// ptx.CapturedEntryFor), which run one dense tensor with heads the
	// world size divides; General: general entries (ptx.GeneralEntryFor);
	// Wire: fp8 wire entries (ptx.WireEntryFor). A test checks them
	// against what the embedded kernels hold.
	Plain, General, Wire bool
	// AutoCopyBytes is where MoverAuto takes the copy engines for it: see
	// the function of that name.
	AutoCopyBytes int64

	walkTotal bool                                                 // the general walk grows with all tokens, not one rank's (Plan.WalkTotal)
	plain     func(g geometry) (chunks, group, row int64, ok bool) // the plain entries' walk in chunks; nil without Plain
	general   func(g geometry) (walk, group, row int64, ok bool)   // the general and wire entries' walk in elements
	box       func(f boxFrame, c Box) Box                          // c, one peer's copy-engine box, given its sides and size
}

// Share is a set of a tensor's dimensions that hold one rank's share of
// the group's: its own tokens (T_r of T), its heads (HeadRange's H_r of
// H).
type Share uint8

// The dimensions a Share may hold.
const (
	RankTokens Share = 1 << iota // T_r, this rank's tokens, not T
	RankHeads                    // H_r, this rank's heads, not H
)

// Operations lists every collective, in the order of their codes; each
// one's walks and box are in a file named after it.
var Operations = []Operation{
	// SendRecvHeads scatters heads and gathers tokens: rank r's
	// [B, T_r, H, D] becomes every rank's [B, T, H_q, D], rank q's heads
	// of every token.
	{Op: ptx.OpSendRecvHeads, Name: "SendRecvHeads", Code: 1, In: RankTokens, Out: RankHeads,
		Plain: true, General: true, Wire: true, AutoCopyBytes: 64 << 20,
		plain: sendRecvHeadsChunks, general: wholeRowsWalk, box: sendRecvHeadsBox},
	// GatherHeads is its inverse: rank q's [B, T, H_q, D] becomes every
	// rank r's [B, T_r, H, D].
	{Op: ptx.OpGatherHeads, Name: "GatherHeads", Code: 2, In: RankHeads, Out: RankTokens,
		Plain: true, General: true, Wire: true, AutoCopyBytes: 64 << 20,
		plain: gatherHeadsChunks, general: gatherHeadsWalk, box: gatherHeadsBox},
	// AllGather gathers the sequence: rank r's [B, T_r, H, D] becomes
	// every rank's [B, T, H, D]. It has no general entries; its fp8 wire
	// entries walk as SendRecvHeads' general ones do.
	{Op: ptx.OpAllGather, Name: "AllGather", Code: 3, In: RankTokens,
		Plain: true, Wire: true, AutoCopyBytes: 64 << 20,
		plain: allGatherChunks, general: wholeRowsWalk, box: allGatherBox},
	// HeadAllGather gathers heads: rank r's [B, T, H_r, D] becomes every
	// rank's [B, T, H, D]. It has general entries only, and no measured
	// copy-engine threshold; its walk grows with all tokens.
	{Op: ptx.OpHeadAllGather, Name: "HeadAllGather", Code: 4, In: RankHeads,
		General: true, Wire: true, walkTotal: true,
		general: headAllGatherWalk, box: headAllGatherBox},
}

// Lookup returns op's row of Operations, nil for an operation there is
// none of. It compares a few strings and allocates nothing.
func Lookup(op ptx.Op) *Operation {
	for i := range Operations {
		if Operations[i].Op == op {
			return &Operations[i]
		}
	}
	return nil
}

// splitsHeads reports whether o splits the heads over the ranks, on its
// input or its output: then every rank needs a head.
func (o *Operation) splitsHeads() bool { return (o.In|o.Out)&RankHeads != 0 }
