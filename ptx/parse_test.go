package ptx

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// ParseEntry undoes the names of an operation's entries, whatever the
// operation's name holds (underscores, "wire" or "captured" inside), and
// refuses every other name.
func TestParseEntry(t *testing.T) {
	for _, op := range []Op{OpSendRecvHeads, OpHeadAllGather, "x", "wired_captured_x"} {
		for _, w := range []int{16, 8, 4, 2, 1} {
			for kind, e := range map[EntryKind]Entry{
				KindPlain:    EntryFor(op, w),
				KindCaptured: CapturedEntryFor(op, w),
				KindGeneral:  GeneralEntryFor(op, w),
				KindWire:     WireEntryFor(op, "e5m2", "fp16", w),
			} {
				gotOp, gotKind, gotWidth, ok := ParseEntry(e)
				assert.True(t, ok, e)
				assert.Equal(t, [3]any{op, kind, w}, [3]any{gotOp, gotKind, gotWidth}, e)
			}
		}
	}
	for _, e := range []Entry{Start, Close, Sync, WireDecodeFor("e4m3", "bf16", 16), WirePackFor("e4m3", "bf16", 8),
		WireUnpackFor("e5m2", "fp16", 2), "ulysses_v16", "ulysses__captured_v8", "ulysses_x_v0", "ulysses_x_vx", "other_x_v16", "ulysses_x"} {
		_, _, _, ok := ParseEntry(e)
		assert.False(t, ok, e)
	}
}

// The lists read from the manifest name every operation the kernels have,
// each once, and every entry of an operation is of one of them.
func TestOpsFromManifest(t *testing.T) {
	assert.Equal(t, []Op{OpSendRecvHeads, OpGatherHeads, OpAllGather}, Ops)
	assert.Equal(t, []Op{OpSendRecvHeads, OpGatherHeads, OpHeadAllGather}, GeneralOps)
	assert.Equal(t, []Op{OpSendRecvHeads, OpGatherHeads, OpAllGather, OpHeadAllGather}, WireOps)
	lists := map[EntryKind][]Op{KindPlain: Ops, KindCaptured: Ops, KindGeneral: GeneralOps, KindWire: WireOps}
	for _, f := range Files() {
		for _, e := range f.Entries {
			if op, kind, _, ok := ParseEntry(e); ok {
				assert.Contains(t, lists[kind], op, "%s: %s", f.Name, e)
			}
		}
	}
	assert.Empty(t, opsOf(nil, KindPlain))
}
