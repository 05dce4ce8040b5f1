package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The wire's build takes compute_90 unless -arch asks for a newer one
// (compared by number: compute_100 is newer); the other builds take -arch
// as given.
func TestArchFor(t *testing.T) {
	wire, exact := variant{wire: true}, variant{}
	for arch, want := range map[string]string{
		"compute_70": "compute_90", "compute_75": "compute_90", "compute_90": "compute_90",
		"compute_100": "compute_100", "compute_120": "compute_120",
	} {
		assert.Equal(t, want, archFor(wire, arch), arch)
		assert.Equal(t, arch, archFor(exact, arch), arch)
	}
}

// Every file is assembled for the archs at least as new as its .target:
// the exact kernels (sm_70) for sm_90 and sm_80, the wire's (sm_90) for
// sm_90 only.
func TestCubinJobs(t *testing.T) {
	arches := func(target string) []string {
		var a []string
		for _, j := range cubinJobs(described{name: "x.ptx", target: target}, []byte("text")) {
			a = append(a, j.arch)
			assert.Equal(t, "x."+j.arch+".cubin.gz", j.name())
			assert.Equal(t, sha256Hex([]byte("text")), j.ptxSHA256)
		}
		return a
	}
	assert.Equal(t, []string{"sm_90", "sm_80"}, arches("sm_70"))
	assert.Equal(t, []string{"sm_90"}, arches("sm_90"))
	assert.Empty(t, arches("sm_100"))
}
