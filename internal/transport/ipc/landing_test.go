package ipc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// wireMode: the direct path wherever the plan takes it; staged rows decoded
// after the exchange by default, on any group, and as they land where the
// override says so.
func TestWireMode(t *testing.T) {
	for _, c := range []struct {
		override Landing
		sharers  int
		direct   bool
		want     uint32
	}{
		{LandingAuto, 1, false, kernelabi.WireStaged},
		{LandingAuto, 2, false, kernelabi.WireStaged},
		{LandingAuto, 1, true, kernelabi.WireDirect},
		{LandingOn, 2, false, kernelabi.WireLanding},
		{LandingOn, 2, true, kernelabi.WireDirect},
		{LandingOff, 1, false, kernelabi.WireStaged},
	} {
		LandingOverride.Store(int32(c.override))
		tr := &Transport{sharers: c.sharers}
		assert.Equal(t, c.want, tr.wireMode(plan.Plan{WireDirect: c.direct}), "%v, %d ranks on a GPU, direct %v", c.override, c.sharers, c.direct)
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
