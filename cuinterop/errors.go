package cuinterop

import "github.com/ulysses-go/ulysses/cuinterop/internal/rule"

// Errors that errors.Is matches. Shape, dtype and alignment errors match
// a2a's own sentinels (a2a.ErrShape, a2a.ErrDType, a2a.ErrAlignment)
// instead, as a2a's checks of the same tensor would.
var (
	// ErrNotPrimaryContext: the memory or stream is of another context
	// than its device's primary context, the one a2a runs in (made by
	// cu.NewContext or Device.MakeContext, say). Its message names the
	// context to use and how to make it current.
	ErrNotPrimaryContext = rule.ErrNotPrimaryContext
	// ErrNotDevicePointer: the driver does not know the address as device
	// memory (host memory, or no CUDA memory at all).
	ErrNotDevicePointer = rule.ErrNotDevicePointer
	// ErrDriver: a driver call of the check failed; the message names it.
	ErrDriver = rule.ErrDriver
)
