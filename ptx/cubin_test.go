package ptx

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A stale cubin fails here, on any machine, as stale PTX does: each cubin
// records the hash of the PTX it was made from, which must be that of the
// embedded PTX (TestPTXIsFresh ties the manifest's hash to the .gz); and it
// holds what the manifest says.
func TestCubinsAreFresh(t *testing.T) {
	byName := map[string]File{}
	for _, f := range Files() {
		byName[f.Name] = f
	}
	for _, c := range Cubins() {
		f, ok := byName[c.PTX]
		require.True(t, ok, "%s was made from %s, which the manifest does not list", c.Name, c.PTX)
		assert.Equal(t, f.SHA256, c.PTXSHA256, "%s was made from another %s: run `make ptx` and commit the result", c.Name, c.PTX)
		assert.Equal(t, c.PTX[:len(c.PTX)-len(".ptx")]+"."+c.Arch+".cubin.gz", c.Name)
		img, err := c.Image()
		require.NoError(t, err, c.Name)
		bin := img[:len(img)-1]
		assert.Equal(t, c.Bytes, len(bin), c.Name)
		assert.Equal(t, c.SHA256, sha256Hex(bin), c.Name)
		require.True(t, bytes.HasPrefix(bin, []byte("\x7fELF\x02\x01")), "%s is not a 64-bit little-endian ELF image", c.Name)
		major, minor, ok := archVersion(c.Arch)
		require.True(t, ok, c.Arch)
		assert.Equal(t, byte(major*10+minor), bin[48], "%s: the ELF flags name another architecture", c.Name)
		for _, e := range f.Entries {
			assert.True(t, bytes.Contains(bin, []byte("\x00"+string(e)+"\x00")), "%s lacks the symbol %s", c.Name, e)
		}
	}
}

// Every committed cubin and compressed PTX file is in the manifest, and
// every file has machine code for sm_90 and, but the wire's (which needs
// sm_90), for sm_80.
func TestEveryImageIsListed(t *testing.T) {
	var names []string
	for _, c := range Cubins() {
		names = append(names, c.Name)
	}
	onDisk, err := filepath.Glob("*.cubin.gz")
	require.NoError(t, err)
	slices.Sort(names)
	assert.Equal(t, onDisk, names, "a cubin beside the PTX that the manifest does not list, or the reverse: run `make ptx`")
	var files []string
	for _, f := range Files() {
		files = append(files, f.Name+".gz")
		want := []string{"sm_90", "sm_80"}
		if f.Wire {
			want = want[:1]
		}
		var got []string
		for _, c := range Cubins() {
			if c.PTX == f.Name {
				got = append(got, c.Arch)
			}
		}
		assert.Equal(t, want, got, f.Name)
	}
	ptxs, err := filepath.Glob("*.ptx.gz")
	require.NoError(t, err)
	slices.Sort(files)
	assert.Equal(t, ptxs, files, "a compressed PTX file the manifest does not list, or the reverse: run `make ptx`")
}

func TestMachineCode(t *testing.T) {
	exact, _, err := ForElemBytes(2)
	require.NoError(t, err)
	wire, _, err := ForWire()
	require.NoError(t, err)
	for _, tc := range []struct {
		major, minor int
		exact, wire  string // "": none
	}{
		{9, 0, "sm_90", "sm_90"},
		{8, 0, "sm_80", ""},
		{8, 6, "sm_80", ""},
		{8, 9, "sm_80", ""},
		{9, 1, "sm_90", "sm_90"}, // a cubin for X.y runs on X.z, z >= y
		{7, 5, "", ""},
		{10, 0, "", ""},
		{12, 0, "", ""},
	} {
		for _, f := range []struct {
			file File
			want string
		}{{exact, tc.exact}, {wire, tc.wire}} {
			c, ok := f.file.MachineCode(tc.major, tc.minor)
			assert.Equal(t, f.want != "", ok, "%s on %d.%d", f.file.Name, tc.major, tc.minor)
			assert.Equal(t, f.want, c.Arch, "%s on %d.%d", f.file.Name, tc.major, tc.minor)
			if ok {
				assert.Equal(t, f.file.Name, c.PTX)
			}
		}
	}
}

func TestPTXOnly(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "1": true, "yes": true} {
		t.Setenv(EnvPTXOnly, v)
		assert.Equal(t, want, PTXOnly(), "%q", v)
	}
}
