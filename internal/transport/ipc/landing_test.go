package ipc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// wireMode: the direct path wherever the plan takes it; staged rows decoded
// after the exchange by default, and as they land where the override says
// so.
func TestWireMode(t *testing.T) {
	for _, c := range []struct {
		override Landing
		direct   bool
		want     uint32
	}{
		{LandingAuto, false, kernelabi.WireStaged},
		{LandingAuto, true, kernelabi.WireDirect},
		{LandingOn, false, kernelabi.WireLanding},
		{LandingOn, true, kernelabi.WireDirect},
		{LandingOff, false, kernelabi.WireStaged},
		{LandingOff, true, kernelabi.WireDirect},
	} {
		LandingOverride.Store(int32(c.override))
		assert.Equal(t, c.want, wireMode(plan.Plan{WireDirect: c.direct}), "%v, direct %v", c.override, c.direct)
	}
	LandingOverride.Store(int32(LandingAuto))
}

func TestParseLanding(t *testing.T) {
	for _, l := range []Landing{LandingAuto, LandingOn, LandingOff} {
		got, err := ParseLanding(l.String())
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := ParseLanding("sometimes")
	assert.ErrorContains(t, err, "want auto, on or off")
}
