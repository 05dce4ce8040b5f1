package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestActiveBlocks(t *testing.T) {
	const kib, mib = 1 << 10, 1 << 20
	for _, c := range []struct {
		bytes       int64
		blocks, got int
	}{
		{0, 132, 1},
		{1, 132, 1},
		{4 * kib, 132, 1},
		{4*kib + 1, 132, 2},
		{128 * kib, 132, 32},
		{256 * kib, 132, 64},
		{1 * mib, 132, 64},
		{4 * mib, 132, 64},
		{4*mib + 1, 132, 65},
		{8 * mib, 132, 128},
		{128 * mib, 132, 132},
		{128 * kib, 16, 16}, // a Comm on 16 SMs
		{8 * mib, 1, 1},
	} {
		assert.Equal(t, c.got, ActiveBlocks(c.bytes, c.blocks), "%d bytes, %d blocks", c.bytes, c.blocks)
	}
}
