package rule

import "fmt"

// Stream is what the driver says of a stream's context
// (cuStreamGetCtx; for the NULL stream, the calling thread's current
// context) and of its device's primary context.
type Stream struct {
	Handle  uintptr // the CUstream; 0 for cu.NoStream
	Ctx     uintptr // its context; 0 only for the NULL stream with no context current
	Device  int     // Ctx's device (cuCtxGetDevice: a CUdevice, which the driver numbers as ordinals)
	Primary uintptr // Device's primary context; 0 when not active in this process
}

// Check says whether the stream may go to a2a: a stream of its device's
// primary context. The NULL stream with no context current passes: a2a
// takes it as the legacy default stream of the Comm's device's primary
// context.
func (s Stream) Check() error {
	if s.Ctx == 0 && s.Handle == 0 {
		return nil
	}
	if s.Ctx != 0 && s.Ctx == s.Primary {
		return nil
	}
	what := fmt.Sprintf("stream %#x", s.Handle)
	if s.Handle == 0 {
		what = "cu.NoStream, with the calling thread's current context,"
	}
	return fmt.Errorf("cuinterop: %s is of context %#x on device %d, not of %s; %s: %w",
		what, s.Ctx, s.Device, primaryName(s.Device, s.Primary), UsePrimary(s.Device), ErrNotPrimaryContext)
}
