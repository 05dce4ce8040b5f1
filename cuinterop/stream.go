package cuinterop

import (
	"gorgonia.org/cu"

	"github.com/ulysses-go/ulysses/a2a"
)

// Stream returns s as the stream a2a's operations take (Comm.On,
// CaptureGraph, Graph.Launch), after checking that s is a stream of its
// device's primary context (ErrNotPrimaryContext otherwise). cu.NoStream
// becomes a2a's 0, the legacy default stream of the Comm's device's primary
// context; it is checked against the calling thread's current context,
// the one gorgonia's calls on NoStream use, and passes when none is
// current. It costs one cgo call of seven driver calls (cuStreamGetCtx,
// a push, cuCtxGetDevice and a pop of that context, then what Tensor
// costs for the primary context); nothing enqueued. a2a checks again, at
// the operation, that the stream is of the Comm's own device.
func Stream(s cu.Stream) (a2a.Stream, error) {
	f, err := streamFacts(s)
	if err != nil {
		return 0, err
	}
	if err := f.Check(); err != nil {
		return 0, err
	}
	return a2a.Stream(f.Handle), nil
}
