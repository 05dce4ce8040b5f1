package a2a

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// The kernels' argument and shared structures are generated with the
// kernels' header from one description: internal/kernelabi tests them.
// What is left here is how a2a uses them.
func TestKernelArgsAsLoaded(t *testing.T) {
	files := ptx.Files()
	require.NotEmpty(t, files)
	for _, f := range files {
		assert.Equal(t, int(argsBytes), f.ArgsBytes, f.Name)
	}
	assert.Equal(t, int64(131072), plan.SignalByeOff)
	assert.Equal(t, int64(131104), plan.SignalAreaBytes)
	assert.Equal(t, int64(16), plan.StateBytes)
}

// The Comm's layout follows Config.SingleBuffer.
func TestConfigLayout(t *testing.T) {
	c := goodConfig()
	assert.Equal(t, int64(2), c.halves())
	l := plan.NewLayout(c.capacityBytes(), c.halves())
	assert.Equal(t, c.capacityBytes(), l.HalfBytes)
	assert.Equal(t, 2*c.capacityBytes(), l.SignalOff)

	c.SingleBuffer = true
	assert.Equal(t, int64(1), c.halves())
	l = plan.NewLayout(c.capacityBytes(), c.halves())
	assert.Zero(t, l.HalfBytes)
	assert.Equal(t, c.capacityBytes(), l.SignalOff)
}

// Operation e writes half e&1: consecutive operations alternate.
func TestHalfOffset(t *testing.T) {
	c := &Comm{layout: plan.NewLayout(1000, 2)}
	assert.Equal(t, int64(0), c.halfOffset(0))
	assert.Equal(t, int64(1024), c.halfOffset(1))
	assert.Equal(t, int64(0), c.halfOffset(2))
	assert.Equal(t, int64(1024), c.halfOffset(3))
	assert.Equal(t, int64(1024), c.halfOffset(math.MaxUint64))

	single := &Comm{layout: plan.NewLayout(1000, 1)}
	for e := uint64(0); e < 4; e++ {
		assert.Equal(t, int64(0), single.halfOffset(e), "epoch %d", e)
	}
}
