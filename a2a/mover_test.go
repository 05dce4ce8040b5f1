package a2a

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// TestMoverFor: captured operations take the kernels, a fixed Mover is
// kept, and MoverAuto takes the copy engines only in one process and
// from autoCopyBytes on, for the operations where they were faster.
func TestMoverFor(t *testing.T) {
	big := plan.AutoCopyBytes(ptx.OpSendRecvHeads)
	assert.Positive(t, big)
	cases := []struct {
		mover      Mover
		oneProcess bool
		op         ptx.Op
		bytes      int64
		captured   bool
		want       Mover
	}{
		{MoverCopyEngines, false, ptx.OpGatherHeads, 1, false, MoverCopyEngines},
		{MoverCopyEngines, true, ptx.OpAllGather, big, true, MoverKernels},
		{MoverKernels, true, ptx.OpAllGather, big, false, MoverKernels},
		{MoverAuto, true, ptx.OpSendRecvHeads, big, false, MoverCopyEngines},
		{MoverAuto, true, ptx.OpAllGather, big, false, MoverCopyEngines},
		{MoverAuto, true, ptx.OpSendRecvHeads, big - 1, false, MoverKernels},
		{MoverAuto, false, ptx.OpSendRecvHeads, big, false, MoverKernels},
		{MoverAuto, true, ptx.OpSendRecvHeads, big, true, MoverKernels},
		{MoverAuto, true, ptx.OpGatherHeads, big, false, MoverCopyEngines},
		{MoverAuto, true, ptx.OpHeadAllGather, 1 << 40, false, MoverKernels},
	}
	for _, c := range cases {
		tr := &smTransport{mover: c.mover, oneProcess: c.oneProcess}
		assert.Equal(t, c.want, tr.moverFor(c.op, c.bytes, c.captured), "%+v", c)
	}
	SetAutoCopyBytes(t, 4096)
	tr := &smTransport{mover: MoverAuto, oneProcess: true}
	assert.Equal(t, MoverCopyEngines, tr.moverFor(ptx.OpHeadAllGather, 4096, false), "the override covers every operation")
	assert.Equal(t, MoverKernels, tr.moverFor(ptx.OpHeadAllGather, 4095, false))
}
