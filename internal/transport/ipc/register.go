package ipc

import (
	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/transport"
)

func init() { transport.Register(api.TransportIPC, open) }

// open is the factory of TransportIPC: New, which needs nothing besides
// the Env.
func open(env *transport.Env, _ transport.Options) (transport.Transport, error) {
	t, err := New(env)
	if err != nil {
		return nil, err // not a nil *Transport in a non-nil interface
	}
	return t, nil
}
