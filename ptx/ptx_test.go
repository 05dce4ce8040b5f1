package ptx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/kernelsrc"
)

// Stale PTX fails here, on any machine: regenerate with `make ptx`. The
// manifest records the hash of gen/kernels it was made from, and of each
// PTX text; the embedded copy (the .gz, the only form committed) must hold
// that text, with a header naming the same source hash.
func TestPTXIsFresh(t *testing.T) {
	h, err := kernelsrc.Hash("../gen/kernels")
	require.NoError(t, err)
	require.Equal(t, h, SourceHash, "gen/kernels changed since the PTX was generated: run `make ptx` and commit the result")
	for _, f := range Files() {
		b, err := source(f.Name)
		require.NoError(t, err, "%s.gz is missing or unreadable: run `make ptx` and commit the result", f.Name)
		assert.Contains(t, string(b[:300]), "sha256 "+SourceHash, "%s header does not name the current source hash", f.Name)
		assert.Contains(t, string(b[:300]), "DO NOT EDIT", f.Name)
		assert.Equal(t, f.SHA256, sha256Hex(b), "%s.gz does not hold the PTX the manifest describes: run `make ptx` and commit the result", f.Name)
	}
}

func TestEveryFileHasItsEntriesAndHeaders(t *testing.T) {
	files := Files()
	require.Len(t, files, 3)
	seen := map[int]bool{}
	for _, f := range files {
		b, err := source(f.Name)
		require.NoError(t, err)
		text := string(b)
		assert.Regexp(t, regexp.MustCompile(`(?m)^\.version `+regexp.QuoteMeta(f.ISA)+`$`), text, f.Name)
		assert.Regexp(t, regexp.MustCompile(`(?m)^\.target `+regexp.QuoteMeta(f.Target)+`$`), text, f.Name)
		assert.Regexp(t, regexp.MustCompile(`(?m)^\.address_size 64$`), text, f.Name)
		// Every listed entry is in the text, and nothing else is.
		assert.Equal(t, len(f.Entries), strings.Count(text, ".visible .entry "), f.Name)
		assert.Equal(t, 448, f.ArgsBytes, "%s: kernel parameter size changed: update a2a's launch arguments", f.Name)
		if f.Wire {
			checkWireEntries(t, f, text)
			continue
		}
		seen[f.ElemBytes] = true
		for _, op := range Ops {
			for _, w := range []int{16, 8, 4, f.ElemBytes} {
				for _, e := range []Entry{EntryFor(op, w), CapturedEntryFor(op, w)} {
					assert.True(t, f.HasEntry(e), "%s lacks %s", f.Name, e)
					assert.Contains(t, text, ".entry "+string(e)+"(", f.Name)
				}
			}
		}
		for _, op := range GeneralOps {
			for _, w := range []int{16, 8, 4, f.ElemBytes} {
				e := GeneralEntryFor(op, w)
				assert.True(t, f.HasEntry(e), "%s lacks %s", f.Name, e)
			}
		}
		assert.True(t, f.HasEntry(Start), f.Name)
		assert.True(t, f.HasEntry(Close), f.Name)
		assert.True(t, f.HasEntry(Sync), f.Name)
		assert.Equal(t, []int{16, 8, 4, f.ElemBytes}, f.Widths(), f.Name)
	}
	assert.True(t, seen[1] && seen[2], "need one file per element width")
}

// checkWireEntries: the wire's file has an entry per operation, format,
// output type and width, and a decode, a pack and an unpack per format,
// type and width; it targets sm_90: ISA 7.8 (nvcc 11.8) has the fp8
// conversions for sm_90 only.
func checkWireEntries(t *testing.T, f File, text string) {
	t.Helper()
	assert.Equal(t, "sm_90", f.Target, f.Name)
	assert.Equal(t, 2, f.ElemBytes, f.Name)
	n := 0
	for _, format := range []string{"e4m3", "e5m2"} {
		for _, out := range []string{"bf16", "fp16"} {
			for _, w := range WireWidths {
				for _, op := range WireOps {
					assert.Contains(t, text, ".entry "+string(WireEntryFor(op, format, out, w))+"(", f.Name)
					n++
				}
				assert.True(t, f.HasEntry(WireDecodeFor(format, out, w)), "%s lacks a decode", f.Name)
				assert.True(t, f.HasEntry(WirePackFor(format, out, w)), "%s lacks a pack", f.Name)
				assert.True(t, f.HasEntry(WireUnpackFor(format, out, w)), "%s lacks an unpack", f.Name)
				n += 3
			}
		}
	}
	assert.Len(t, f.Entries, n, "%s has entries no name names", f.Name)
}

func TestForElemBytes(t *testing.T) {
	for _, n := range []int{1, 2} {
		f, b, err := ForElemBytes(n)
		require.NoError(t, err)
		assert.Equal(t, n, f.ElemBytes)
		require.NotEmpty(t, b)
		assert.Equal(t, byte(0), b[len(b)-1], "PTX handed to the driver must end in NUL")
	}
	_, _, err := ForElemBytes(4)
	require.Error(t, err)
	f, b, err := ForWire()
	require.NoError(t, err)
	assert.True(t, f.Wire)
	assert.Equal(t, byte(0), b[len(b)-1])
	f, _, err = ForElemBytes(2)
	require.NoError(t, err)
	assert.False(t, f.Wire, "the exact kernels for 2-byte elements, not the wire's")
}

func TestISAIsLoadableByOldDrivers(t *testing.T) {
	// ISA 7.8 (CUDA 11.8) loads on drivers >= 520. A newer nvcc raises the
	// floor: docs/GUIDE.md's "Supported drivers and GPUs" must change with it.
	for _, f := range Files() {
		assert.Equal(t, "7.8", f.ISA, "%s was made by a different nvcc (%s): update docs/GUIDE.md's supported drivers and this test", f.Name, NVCCVersion)
	}
}

// source returns the text of the embedded PTX file name, without the NUL
// the package appends.
func source(name string) ([]byte, error) {
	for _, f := range Files() {
		if f.Name == name {
			b, err := f.text()
			if err != nil {
				return nil, err
			}
			return b[:len(b)-1], nil
		}
	}
	return nil, fmt.Errorf("ptx: no file %s", name)
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
