package ipc

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// moverFor is what moves an operation of op whose largest rank walks
// groupBytes: the kernels when captured, else the Config's choice, with
// MoverAuto resolved as plan.AutoCopyBytes says.
func (t *Transport) moverFor(op ptx.Op, groupBytes int64, captured bool) api.Mover {
	switch {
	case captured:
		return api.MoverKernels
	case t.mover != api.MoverAuto:
		return t.mover
	}
	if least := plan.AutoCopyBytes(op); t.oneProcess && least > 0 && groupBytes >= least {
		return api.MoverCopyEngines
	}
	return api.MoverKernels
}
