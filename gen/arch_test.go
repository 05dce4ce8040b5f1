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
