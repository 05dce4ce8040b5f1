package a2a

import (
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/ptx"
)

// moverFor is what moves an operation of op whose largest rank walks
// groupBytes: the kernels when captured, else the Config's choice, with
// MoverAuto resolved as autoCopyBytes says.
func (t *smTransport) moverFor(op ptx.Op, groupBytes int64, captured bool) Mover {
	switch {
	case captured:
		return MoverKernels
	case t.mover != MoverAuto:
		return t.mover
	}
	if least := plan.AutoCopyBytes(op); t.oneProcess && least > 0 && groupBytes >= least {
		return MoverCopyEngines
	}
	return MoverKernels
}
