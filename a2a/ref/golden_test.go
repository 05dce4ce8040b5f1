package ref

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/ref from the current code")

// goldenDir is testdata/ref at the repository root, relative to this package.
const goldenDir = "../../testdata/ref"

// goldenHeader is the JSON first line of a golden file.
type goldenHeader struct {
	Name     string `json:"name"`
	Batch    int    `json:"batch"`
	Heads    int    `json:"heads"`
	HeadDim  int    `json:"head_dim"`
	ElemSize int    `json:"elem_size"`
	Tokens   []int  `json:"tokens"`
	Seed     uint64 `json:"seed"`
}

func (h goldenHeader) shape() Shape {
	return Shape{Batch: h.Batch, Heads: h.Heads, HeadDim: h.HeadDim, ElemSize: h.ElemSize, Tokens: h.Tokens}
}

// goldenCases are the fixed cases written to testdata/ref/<name>.golden.
var goldenCases = []goldenHeader{
	{Name: "p1_b2_e1", Batch: 2, Heads: 2, HeadDim: 4, ElemSize: 1, Tokens: []int{3}, Seed: 1},
	{Name: "p2_e2", Batch: 1, Heads: 4, HeadDim: 2, ElemSize: 2, Tokens: []int{2, 3}, Seed: 2},
	{Name: "p3_uneven_e1", Batch: 2, Heads: 6, HeadDim: 4, ElemSize: 1, Tokens: []int{5, 0, 2}, Seed: 3},
	{Name: "p4_b2_e2", Batch: 2, Heads: 8, HeadDim: 3, ElemSize: 2, Tokens: []int{1, 3, 2, 2}, Seed: 4},
	{Name: "p2_d72_e2", Batch: 1, Heads: 4, HeadDim: 72, ElemSize: 2, Tokens: []int{3, 2}, Seed: 5},
	{Name: "p4_zero_ranks_e1", Batch: 1, Heads: 4, HeadDim: 16, ElemSize: 1, Tokens: []int{0, 2, 0, 1}, Seed: 6},
	{Name: "p8_e2", Batch: 1, Heads: 8, HeadDim: 2, ElemSize: 2, Tokens: []int{1, 0, 2, 1, 0, 0, 3, 1}, Seed: 7},
	// Uneven heads: 5 over 3 ranks (2, 2, 1), 7 over 5 (2, 2, 1, 1, 1).
	{Name: "p3_h5_uneven_heads_e2", Batch: 2, Heads: 5, HeadDim: 2, ElemSize: 2, Tokens: []int{2, 0, 3}, Seed: 8},
	{Name: "p5_h7_uneven_heads_e1", Batch: 1, Heads: 7, HeadDim: 3, ElemSize: 1, Tokens: []int{1, 2, 0, 1, 2}, Seed: 9},
}

// goldenSections are the per-rank line kinds of a golden file, in order.
// GatherHeads has no section of its own: its input is the sendrecv lines and
// its expected output the input lines.
var goldenSections = []string{"input", "sendrecv", "allgather"}

// hexOrDash encodes b as lowercase hex, or "-" when b is empty.
func hexOrDash(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}

// renderGolden computes the golden file content for h with the current code.
func renderGolden(t *testing.T, h goldenHeader) []byte {
	t.Helper()
	s := h.shape()
	require.NoError(t, s.Validate())
	in := randomInputs(s, h.Seed, s.RankInputBytes)
	sr, err := SendRecvHeads(s, in)
	require.NoError(t, err)
	all, err := AllGather(s, in)
	require.NoError(t, err)

	var buf bytes.Buffer
	head, err := json.Marshal(h)
	require.NoError(t, err)
	buf.Write(head)
	buf.WriteByte('\n')
	for i, data := range [][][]byte{in, sr, all} {
		for r, b := range data {
			fmt.Fprintf(&buf, "%s %d %s\n", goldenSections[i], r, hexOrDash(b))
		}
	}
	return buf.Bytes()
}

// parseGolden reads a golden file independently of renderGolden.
func parseGolden(t *testing.T, content []byte) (goldenHeader, map[string][][]byte) {
	t.Helper()
	sc := bufio.NewScanner(bytes.NewReader(content))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	require.True(t, sc.Scan(), "missing header line")
	var h goldenHeader
	dec := json.NewDecoder(strings.NewReader(sc.Text()))
	dec.DisallowUnknownFields()
	require.NoError(t, dec.Decode(&h))
	p := len(h.Tokens)
	sections := map[string][][]byte{}
	for _, name := range goldenSections {
		for r := 0; r < p; r++ {
			require.True(t, sc.Scan(), "missing %s line for rank %d", name, r)
			f := strings.Fields(sc.Text())
			require.Len(t, f, 3, "line %q", sc.Text())
			require.Equal(t, name, f[0])
			require.Equal(t, strconv.Itoa(r), f[1])
			b := []byte{}
			if f[2] != "-" {
				var err error
				b, err = hex.DecodeString(f[2])
				require.NoError(t, err)
			}
			sections[name] = append(sections[name], b)
		}
	}
	require.False(t, sc.Scan(), "trailing line %q", sc.Text())
	require.NoError(t, sc.Err())
	return h, sections
}

func TestGolden(t *testing.T) {
	if *update {
		require.NoError(t, os.MkdirAll(goldenDir, 0o755))
	}
	for _, h := range goldenCases {
		t.Run(h.Name, func(t *testing.T) {
			path := filepath.Join(goldenDir, h.Name+".golden")
			want := renderGolden(t, h)
			if *update {
				require.NoError(t, os.WriteFile(path, want, 0o644))
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err, "run go test ./a2a/ref/ -run TestGolden -update to create it")
			require.Equal(t, string(want), string(got), "current code does not reproduce %s byte for byte", path)

			// The file is self-consistent when read back on its own terms.
			fh, sec := parseGolden(t, got)
			assert.Equal(t, h, fh)
			s := fh.shape()
			for r, b := range sec["input"] {
				require.Len(t, b, s.RankInputBytes(r))
			}
			sr, err := SendRecvHeads(s, sec["input"])
			require.NoError(t, err)
			assert.Equal(t, sec["sendrecv"], sr)
			back, err := GatherHeads(s, sec["sendrecv"])
			require.NoError(t, err)
			for r := range back {
				assert.Equal(t, sec["input"][r], back[r], "GatherHeads rank %d", r)
			}
			all, err := AllGather(s, sec["input"])
			require.NoError(t, err)
			assert.Equal(t, sec["allgather"], all)
			// Gathering the heads SendRecvHeads spread gives AllGather's result.
			heads, err := HeadAllGather(s, sec["sendrecv"])
			require.NoError(t, err)
			assert.Equal(t, sec["allgather"], heads)
		})
	}

	// No stale golden files.
	files, err := filepath.Glob(filepath.Join(goldenDir, "*.golden"))
	require.NoError(t, err)
	var names, want []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".golden"))
	}
	for _, h := range goldenCases {
		want = append(want, h.Name)
	}
	sort.Strings(names)
	sort.Strings(want)
	assert.Equal(t, want, names, "golden files in %s", goldenDir)
}
