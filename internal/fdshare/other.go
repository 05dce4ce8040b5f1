//go:build !linux

package fdshare

import (
	"fmt"
	"time"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Config is what a Server serves (Linux only).
type Config struct {
	Key     []byte
	Claim   Claim
	Timeout time.Duration
	Export  Export
}

// Server is not available off Linux (Unix-domain sockets with
// SO_PEERCRED and SCM_RIGHTS).
type Server struct{}

// Listen reports api.ErrNotSupported off Linux.
func Listen(Config) (*Server, error) { return nil, notLinux() }

// Dir is empty.
func (*Server) Dir() string { return "" }

// Close does nothing.
func (*Server) Close() error { return nil }

// Fetch reports api.ErrNotSupported off Linux.
func Fetch(string, []byte, Claim, time.Time) (int, uint64, error) { return -1, 0, notLinux() }

func notLinux() error {
	return fmt.Errorf("a2a: sharing buffers as file descriptors needs Linux: %w", api.ErrNotSupported)
}
