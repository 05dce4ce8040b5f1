package api

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestWireCarries(t *testing.T) {
	assert.True(t, WireExact.Carries(Float8E5M2), "the exact wire carries any type")
	assert.True(t, WireE5M2.Carries(Float16))
	assert.True(t, WireE4M3.Carries(BFloat16))
	assert.False(t, WireE4M3.Carries(Float8E4M3), "fp8 wires carry 16-bit types only")
	assert.False(t, WireE5M2.Carries(Float8E5M2))
}
