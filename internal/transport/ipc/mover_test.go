package ipc

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// TestMoverFor: captured operations take the kernels, a fixed Mover is
// kept, and MoverAuto takes the copy engines only in one process and
// from AutoCopyBytes on, for the operations where they were faster.
func TestMoverFor(t *testing.T) {
	big := plan.AutoCopyBytes(ptx.OpSendRecvHeads)
	assert.Positive(t, big)
	cases := []struct {
		mover      api.Mover
		oneProcess bool
		op         ptx.Op
		bytes      int64
		captured   bool
		want       api.Mover
	}{
		{api.MoverCopyEngines, false, ptx.OpGatherHeads, 1, false, api.MoverCopyEngines},
		{api.MoverCopyEngines, true, ptx.OpAllGather, big, true, api.MoverKernels},
		{api.MoverKernels, true, ptx.OpAllGather, big, false, api.MoverKernels},
		{api.MoverAuto, true, ptx.OpSendRecvHeads, big, false, api.MoverCopyEngines},
		{api.MoverAuto, true, ptx.OpAllGather, big, false, api.MoverCopyEngines},
		{api.MoverAuto, true, ptx.OpSendRecvHeads, big - 1, false, api.MoverKernels},
		{api.MoverAuto, false, ptx.OpSendRecvHeads, big, false, api.MoverKernels},
		{api.MoverAuto, true, ptx.OpSendRecvHeads, big, true, api.MoverKernels},
		{api.MoverAuto, true, ptx.OpGatherHeads, big, false, api.MoverCopyEngines},
		{api.MoverAuto, true, ptx.OpHeadAllGather, 1 << 40, false, api.MoverKernels},
	}
	for _, c := range cases {
		tr := &Transport{mover: c.mover, oneProcess: c.oneProcess}
		assert.Equal(t, c.want, tr.moverFor(c.op, c.bytes, c.captured), "%+v", c)
	}
	plan.AutoCopyOverride.Store(4096)
	t.Cleanup(func() { plan.AutoCopyOverride.Store(0) })
	tr := &Transport{mover: api.MoverAuto, oneProcess: true}
	assert.Equal(t, api.MoverCopyEngines, tr.moverFor(ptx.OpHeadAllGather, 4096, false), "the override covers every operation")
	assert.Equal(t, api.MoverKernels, tr.moverFor(ptx.OpHeadAllGather, 4095, false))
}
