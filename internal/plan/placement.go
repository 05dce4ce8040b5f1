package plan

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
)

// HalfOff is where data half half starts in the buffer: halves alternate,
// and with a single half it is always at 0.
func (l Layout) HalfOff(half uint32) int64 { return int64(half) * l.HalfBytes }

// checkPlacement refuses an input of r in the data half the operation
// writes (half), or in the signals and state after the data, and an Into
// output that does not have the output's shape p.Out, whose token stride
// is over MaxPitch, or that lies in the Comm's buffer.
func (env *Env) checkPlacement(r *Request, p *Plan, half uint32) error {
	out := env.Buf + uintptr(env.Layout.HalfOff(half))
	signals := env.Buf + uintptr(env.Layout.SignalOff)
	for k := range r.N {
		x := r.Xs[k]
		if Overlaps(x.Ptr, x.Span, out, env.Layout.DataBytes) || Overlaps(x.Ptr, x.Span, signals, env.Layout.Total-env.Layout.SignalOff) {
			return fmt.Errorf("a2a: %s input %v lies in the part of the Comm's buffer that peers write during the operation: %w", r.Op, x, api.ErrAliased)
		}
	}
	if !r.Into {
		return nil
	}
	es := int64(env.DType.Size())
	for k := range r.N {
		dst := r.Dsts[k]
		if dst.Shape != p.Out {
			return fmt.Errorf("a2a: %s output %d has shape %v, want %v: %w", r.Op, k, dst.Shape, p.Out, api.ErrShape)
		}
		if dst.Strided() && dst.RowElems*es > MaxPitch {
			return fmt.Errorf("a2a: %s output %v: token stride over the %d-byte copy pitch: %w", r.Op, dst, int64(MaxPitch), api.ErrNotSupported)
		}
		if Overlaps(dst.Ptr, dst.Span, env.Buf, env.Layout.Total) {
			return fmt.Errorf("a2a: %s output %v lies in the Comm's buffer: %w", r.Op, dst, api.ErrAliased)
		}
	}
	return nil
}
