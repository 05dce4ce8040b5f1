package handle

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// handleSeeds are the f.Add seeds; testdata/fuzz/FuzzDecodeHandle holds the
// same kinds of input as files.
func handleSeeds() [][]byte {
	h0 := filledHandle()
	valid := h0.Encode()
	mod := func(f func(b []byte)) []byte {
		b := append([]byte(nil), valid...)
		f(b)
		return b
	}
	rankTooBig := filledHandle()
	rankTooBig.Rank = rankTooBig.World
	minimal := Handle{World: 1, ElemBytes: 1, Blocks: 1} // SingleBuffer false: flags 0
	fd := filledHandle()
	fd.Shared = SharedFD
	fd.SetFDDir("/tmp/ulysses-fd-1234567890")
	fabric := filledHandle()
	fabric.Shared = SharedFabric
	return [][]byte{
		valid,
		minimal.Encode(),
		mod(func(b []byte) { copy(b, "XLYH") }), // wrong magic
		mod(func(b []byte) { b[4] = 3 }),        // wrong version
		mod(func(b []byte) { b[7] = 8 }),        // unknown flag
		valid[:Size/2],                          // truncated
		rankTooBig.Encode(),                     // rank >= world
		fd.Encode(),
		fabric.Encode(),
		mod(func(b []byte) { b[7] |= 3 << 1 }),  // sharing kind 3
		mod(func(b []byte) { b[7] = 1 | 1<<1 }), // shared as an fd, with IPC bytes that are no path
		{},
	}
}

// FuzzDecodeHandle: Decode never panics, every refusal wraps
// ErrHandle, and every accepted input is exactly what encode writes for
// the decoded handle. The format has no slack: the bytes encode does not
// copy from a field (magic, version, the reserved bytes, the reach past
// its count) are checked, the flags byte must hold only the SingleBuffer
// bit and a known sharing kind (SharedFD with a NUL-padded absolute path), and BusID is kept whole (bytes after its first
// NUL survive the round trip, though busID() ignores them).
func FuzzDecodeHandle(f *testing.F) {
	for _, s := range handleSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := Decode(b)
		if err != nil {
			if !errors.Is(err, api.ErrHandle) {
				t.Fatalf("error does not wrap api.ErrHandle: %v", err)
			}
			return
		}
		if enc := h.Encode(); !bytes.Equal(enc, b) {
			t.Fatalf("decode accepted bytes that encode does not reproduce:\n in  %x\n out %x", b, enc)
		}
		if h.World < 1 || h.World > kernelabi.MaxRanks || h.Rank >= h.World ||
			(h.ElemBytes != 1 && h.ElemBytes != 2) || h.Blocks < 1 || h.Blocks > kernelabi.MaxBlocks || h.DataBytes > plan.MaxDataBytes {
			t.Fatalf("decode accepted an out-of-range handle: %+v", h)
		}
		if len(h.Bus()) > len(h.BusID) || bytes.IndexByte([]byte(h.Bus()), 0) >= 0 {
			t.Fatalf("busID %q is longer than the field or holds a NUL", h.Bus())
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
		"shared_fd": true, "shared_fabric": true, "shared_unknown": false, "shared_fd_with_ipc": false,
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
		h, err := Decode([]byte(s))
		if ok {
			require.NoError(t, err, name)
			assert.Equal(t, []byte(s), h.Encode(), name)
			continue
		}
		assert.ErrorIs(t, err, api.ErrHandle, name)
	}
	b, err := os.ReadFile(filepath.Join(dir, "truncated"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "ULYH", "truncated is a prefix of a valid handle")
}

// TestWriteHandleCorpus rewrites testdata/fuzz/FuzzDecodeHandle from
// handleSeeds when ULYSSES_WRITE_CORPUS is set (after a format change).
func TestWriteHandleCorpus(t *testing.T) {
	if os.Getenv("ULYSSES_WRITE_CORPUS") == "" {
		t.Skip("set ULYSSES_WRITE_CORPUS=1 to rewrite the corpus")
	}
	names := []string{"valid", "valid_minimal", "wrong_magic", "wrong_version", "unknown_flags", "truncated", "rank_ge_world",
		"shared_fd", "shared_fabric", "shared_unknown", "shared_fd_with_ipc"}
	for i, name := range names {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", handleSeeds()[i])
		require.NoError(t, os.WriteFile(filepath.Join("testdata", "fuzz", "FuzzDecodeHandle", name), []byte(body), 0o644))
	}
}
