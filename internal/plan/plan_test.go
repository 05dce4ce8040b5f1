package plan

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/kernelabi"
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

func TestThreadsFor(t *testing.T) {
	const full, half = kernelabi.Threads, kernelabi.Threads / 2
	for _, c := range []struct {
		blocks, sms, world, got int
	}{
		{132, 132, 2, 256},  // rows cross a link on every SM
		{132, 132, 1, full}, // a rank alone
		{32, 132, 2, full},  // fewer SMs
		{131, 132, 8, full},
	} {
		assert.Equal(t, c.got, ThreadsFor(c.blocks, c.sms, c.world), "%+v", c)
	}
	for _, c := range []struct {
		blocks, sharers, sms, got int
	}{
		{132, 1, 132, full}, // a rank with its GPU alone
		{132, 2, 132, half}, // two ranks on every SM
		{32, 2, 132, full},  // two ranks on 32 SMs each fit one block an SM
		{66, 2, 132, full},
		{67, 2, 132, half},
		{33, 4, 132, full},
		{34, 4, 132, half},
	} {
		assert.Equal(t, c.got, WireThreadsFor(c.blocks, c.sharers, c.sms), "%+v", c)
	}
}
