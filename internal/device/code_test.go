package device

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/ptx"
)

// chooseCode takes the machine code that runs on the device, unless none
// does or ULYSSES_PTX_ONLY asks for PTX, and says why PTX.
func TestChooseCode(t *testing.T) {
	var exact, wire ptx.File
	for _, f := range ptx.Files() {
		if f.Wire {
			wire = f
		} else if f.ElemBytes == 2 {
			exact = f
		}
	}
	for _, tc := range []struct {
		f            ptx.File
		major, minor int
		ptxOnly      string
		arch, reason string
	}{
		{exact, 9, 0, "", "sm_90", ""},
		{wire, 9, 0, "", "sm_90", ""},
		{exact, 8, 9, "", "sm_80", ""},
		{exact, 7, 0, "", "", "no machine code for compute capability 7.0"},
		{exact, 12, 0, "", "", "no machine code for compute capability 12.0"},
		{exact, 9, 0, "1", "", "ULYSSES_PTX_ONLY is set"},
		{exact, 9, 0, "0", "sm_90", ""},
	} {
		t.Setenv(ptx.EnvPTXOnly, tc.ptxOnly)
		c, cubin := chooseCode(tc.f, tc.major, tc.minor)
		assert.Equal(t, Code{File: tc.f.Name, Arch: tc.arch, Reason: tc.reason}, c, "%s on %d.%d", tc.f.Name, tc.major, tc.minor)
		assert.Equal(t, tc.arch, cubin.Arch)
	}
	names := func(fs []ptx.File) (n []string) {
		for _, f := range fs {
			n = append(n, f.Name)
		}
		return n
	}
	assert.Equal(t, []string{"ulysses_2byte.ptx", "ulysses_1byte.ptx", "ulysses_wire.ptx"}, names(filesFor(9, 0)))
	assert.Equal(t, []string{"ulysses_2byte.ptx", "ulysses_1byte.ptx"}, names(filesFor(8, 9)), "the wire needs 9.0")
}
