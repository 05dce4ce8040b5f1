package a2a

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// handleSeeds are the f.Add seeds; testdata/fuzz/FuzzDecodeHandle holds the
// same kinds of input as files.
func handleSeeds() [][]byte {
	h0 := filledHandle()
	valid := h0.encode()
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		f(b)
		return b
	}
	rankTooBig := filledHandle()
	rankTooBig.Rank = rankTooBig.World
	minimal := handle{World: 1, ElemBytes: 1, Blocks: 1} // SingleBuffer false: flags 0
	return [][]byte{
		valid,
		minimal.encode(),
		mod(func(b []byte) { copy(b, "XLYH") }), // wrong magic
		mod(func(b []byte) { b[4] = 2 }),        // wrong version
		mod(func(b []byte) { b[7] = 2 }),        // unknown flag
		valid[:HandleSize/2],                    // truncated
		rankTooBig.encode(),                     // rank >= world
		{},
	}
}

// FuzzDecodeHandle: decodeHandle never panics, every refusal wraps
// ErrHandle, and every accepted input is exactly what encode writes for
// the decoded handle. The format has no slack: the bytes encode does not
// copy from a field (magic, version, the reserved bytes, the reach past
// its count) are checked, the flags byte must hold only the SingleBuffer
// bit, and BusID is kept whole (bytes after its first
// NUL survive the round trip, though busID() ignores them).
func FuzzDecodeHandle(f *testing.F) {
	for _, s := range handleSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeHandle(b)
		if err != nil {
			if !errors.Is(err, ErrHandle) {
				t.Fatalf("error does not wrap ErrHandle: %v", err)
			}
			return
		}
		if enc := h.encode(); !bytes.Equal(enc, b) {
			t.Fatalf("decode accepted bytes that encode does not reproduce:\n in  %x\n out %x", b, enc)
		}
		if h.World < 1 || h.World > MaxWorldSize || h.Rank >= h.World ||
			(h.ElemBytes != 1 && h.ElemBytes != 2) || h.Blocks < 1 || h.Blocks > maxBlocks || h.DataBytes > maxDataBytes {
			t.Fatalf("decode accepted an out-of-range handle: %+v", h)
		}
		if len(h.busID()) > len(h.BusID) || bytes.IndexByte([]byte(h.busID()), 0) >= 0 {
			t.Fatalf("busID %q is longer than the field or holds a NUL", h.busID())
		}
	})
}

// The committed seed corpus holds what its file names say.
func TestDecodeHandleCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeHandle")
	want := map[string]bool{ // name: decodes
		"valid": true, "valid_minimal": true,
		"wrong_magic": false, "wrong_version": false, "unknown_flags": false,
		"truncated": false, "rank_ge_world": false,
	}
	for name, ok := range want {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err, name)
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		require.Len(t, lines, 2, name)
		require.Equal(t, "go test fuzz v1", lines[0], name)
		require.True(t, strings.HasPrefix(lines[1], "[]byte(") && strings.HasSuffix(lines[1], ")"), name)
		s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		require.NoError(t, err, name)
		h, err := decodeHandle([]byte(s))
		if ok {
			require.NoError(t, err, name)
			assert.Equal(t, []byte(s), h.encode(), name)
			continue
		}
		assert.ErrorIs(t, err, ErrHandle, name)
	}
	b, err := os.ReadFile(filepath.Join(dir, "truncated"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "ULYH", "truncated is a prefix of a valid handle")
}
