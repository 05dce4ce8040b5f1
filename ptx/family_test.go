package ptx

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/ptxtext"
)

// Every entry of every file is in exactly one family, and each family's
// image is a PTX module of its own: the file's header and the family's
// entries, cut from the file whole, nothing else; together the families
// hold every entry's text.
func TestFamiliesCoverEveryEntry(t *testing.T) {
	for _, f := range Files() {
		text, err := source(f.Name)
		require.NoError(t, err)
		whole, err := ptxtext.Split(text)
		require.NoError(t, err, f.Name)
		byName := map[string]string{}
		for _, s := range whole.Entries {
			byName[s.Name] = string(text[s.Start:s.End])
		}
		require.Len(t, byName, len(f.Entries), f.Name)
		seen := map[Entry]Family{}
		for _, fam := range f.Families() {
			es := f.FamilyEntries(fam)
			require.NotEmpty(t, es, "%s %s", f.Name, fam)
			img, err := f.FamilyImage(fam)
			require.NoError(t, err, "%s %s", f.Name, fam)
			require.Equal(t, byte(0), img[len(img)-1], "NUL-terminated")
			part, err := ptxtext.Split(img[:len(img)-1])
			require.NoError(t, err, "%s %s", f.Name, fam)
			assert.Equal(t, string(text[:whole.HeaderEnd]), string(img[:part.HeaderEnd]), "%s %s: the file's header", f.Name, fam)
			require.Len(t, part.Entries, len(es), "%s %s", f.Name, fam)
			for i, s := range part.Entries {
				e := Entry(s.Name)
				assert.Equal(t, es[i], e, "%s %s: file order", f.Name, fam)
				assert.Equal(t, byName[s.Name], string(img[s.Start:s.End]), "%s %s: %s cut whole", f.Name, fam, e)
				got, ok := f.FamilyOf(e)
				assert.True(t, ok)
				assert.Equal(t, fam, got)
				_, twice := seen[e]
				assert.False(t, twice, "%s in two families", e)
				seen[e] = fam
			}
		}
		for _, e := range f.Entries {
			_, ok := seen[e]
			assert.True(t, ok, "%s: %s is in no family", f.Name, e)
		}
		_, err = f.FamilyImage("nope")
		assert.Error(t, err)
		_, ok := f.FamilyOf("ulysses_nope")
		assert.False(t, ok)
	}
}

// The families are what the loading code expects: a base per exact file
// with the barriers and the padding AllGather, one per operation with all
// its widths and kinds; for the wire one per operation, format and type,
// the decodes apart, and the packs and unpacks apart.
func TestFamilyShapes(t *testing.T) {
	for _, f := range Files() {
		if f.Wire {
			assert.Len(t, f.Families(), 24, f.Name)
			assert.ElementsMatch(t, []Entry{
				WireEntryFor(OpGatherHeads, "e5m2", "fp16", 16), WireEntryFor(OpGatherHeads, "e5m2", "fp16", 8),
				WireEntryFor(OpGatherHeads, "e5m2", "fp16", 2),
			}, f.FamilyEntries(WireFamily(OpGatherHeads, "e5m2", "fp16")))
			assert.ElementsMatch(t, []Entry{
				WireDecodeFor("e4m3", "bf16", 16), WireDecodeFor("e4m3", "bf16", 8), WireDecodeFor("e4m3", "bf16", 2),
			}, f.FamilyEntries(WireDecodeFamily("e4m3", "bf16")))
			assert.ElementsMatch(t, []Entry{
				WirePackFor("e5m2", "bf16", 16), WirePackFor("e5m2", "bf16", 8), WirePackFor("e5m2", "bf16", 2),
				WireUnpackFor("e5m2", "bf16", 16), WireUnpackFor("e5m2", "bf16", 8), WireUnpackFor("e5m2", "bf16", 2),
			}, f.FamilyEntries(WirePackFamily("e5m2", "bf16")))
			continue
		}
		assert.Equal(t, []Family{"send_recv_heads", "gather_heads", "all_gather", "head_all_gather", FamilyBase}, f.Families(), f.Name)
		assert.ElementsMatch(t, []Entry{Start, Sync, Close, EntryFor(OpAllGather, f.ElemBytes)}, f.FamilyEntries(FamilyBase), f.Name)
		assert.Len(t, f.FamilyEntries(Family(OpSendRecvHeads)), 12, f.Name)
		assert.Len(t, f.FamilyEntries(Family(OpAllGather)), 7, f.Name)
		assert.Len(t, f.FamilyEntries(Family(OpHeadAllGather)), 4, f.Name)
		base, err := f.FamilyImage(FamilyBase)
		require.NoError(t, err)
		whole, err := f.text()
		require.NoError(t, err)
		assert.Less(t, len(base), len(whole)/4, "%s: the base family is a small part of the file", f.Name)
		assert.True(t, bytes.Contains(base, []byte(".entry "+string(Close)+"(")))
		assert.False(t, strings.Contains(string(base), string(EntryFor(OpAllGather, 16))))
	}
}
