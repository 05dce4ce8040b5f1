//go:build !linux

package fdshare

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Server is not available off Linux (abstract sockets, SO_PEERCRED).
type Server struct{}

// Listen reports api.ErrNotSupported off Linux.
func Listen([]byte, time.Duration, Export) (*Server, error) {
	return nil, fmt.Errorf("a2a: sharing buffers as file descriptors needs Linux: %w", api.ErrNotSupported)
}

// Close does nothing.
func (*Server) Close() error { return nil }

// Fetch reports api.ErrNotSupported off Linux.
func Fetch([]byte, time.Time) (int, uint64, error) {
	return -1, 0, fmt.Errorf("a2a: sharing buffers as file descriptors needs Linux: %w", api.ErrNotSupported)
}
