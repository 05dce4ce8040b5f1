// Package rule decides, from facts the CUDA driver gave, whether a pointer
// or a stream of gorgonia.org/cu may be handed to package a2a, and says
// what to do instead when not. It has no cgo and calls no driver, so its
// tests run on machines without CUDA (the package cuinterop gathers the
// facts through cgo and cannot even start there: gorgonia.org/cu's init
// exits without a driver).
package rule

import (
	"errors"
	"fmt"
)

// The adapter's sentinels; package cuinterop exports them under the same
// names. Like a2a's, their text has no package prefix: errors read
// "cuinterop: <what happened>: <sentinel text>".
var (
	// ErrNotPrimaryContext: memory or a stream of another context than
	// its device's primary context, the one a2a runs in.
	ErrNotPrimaryContext = errors.New("not the device's primary context")
	// ErrNotDevicePointer: an address the driver does not know as device
	// memory (host memory, or no CUDA memory at all).
	ErrNotDevicePointer = errors.New("not device memory")
	// ErrDriver: a driver call the check needs failed.
	ErrDriver = errors.New("CUDA driver call failed")
)

// UsePrimary says what to do instead, naming device's primary context
// and the gorgonia.org/cu calls that make it current.
func UsePrimary(device int) string {
	return fmt.Sprintf("use device %d's primary context, the one a2a runs in: "+
		"pctx, err := cu.Device(%d).RetainPrimaryCtx(), then pctx.Lock() (or cu.SetCurrentContext(pctx)) "+
		"before allocating and making streams, instead of cu.NewContext or Device.MakeContext", device, device)
}
