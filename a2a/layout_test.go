package a2a

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/plan"
)

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
