package plan

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The division by multiplication is exact for the divisors and indices
// the walks meet (and the edges of 32 bits), so that the kernels may use
// it wherever they divided.
func TestDivisorIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var ds []uint32
	for d := uint32(1); d <= 4096; d++ {
		ds = append(ds, d)
	}
	for range 2000 {
		ds = append(ds, rng.Uint32()|1, rng.Uint32N(1<<20)+1)
	}
	ds = append(ds, 1<<31, 1<<31-1, 1<<31+1, math.MaxUint32, math.MaxUint32-1)
	for _, d := range ds {
		v := DivisorOf(d)
		ns := []uint32{0, 1, d - 1, d, d + 1, 2*d - 1, 2 * d, math.MaxUint32, math.MaxUint32 - 1, math.MaxUint32 / d * d}
		for range 64 {
			ns = append(ns, rng.Uint32(), rng.Uint32N(1<<24))
		}
		for _, n := range ns {
			if got := v.Quotient(n); got != n/d {
				t.Fatalf("%d / %d: %d, want %d (%+v)", n, d, got, n/d, v)
			}
		}
	}
	one := DivisorOf(0) // a walk of no rows: a division by 1
	assert.Equal(t, uint32(1), one.D)
	assert.Equal(t, uint32(12345), one.Quotient(12345))
}
