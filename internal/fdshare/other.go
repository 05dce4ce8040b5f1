//go:build !linux

package fdshare

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// MaxConns is the most connections a Server serves at once.
const MaxConns = 16

// Export returns a new descriptor of the buffer and its size.
type Export func() (fd int, size uint64, err error)

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
