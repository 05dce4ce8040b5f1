package transport

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

// emptyRegistry gives the test a registry of its own, the process's back
// at its end.
func emptyRegistry(t *testing.T) {
	registry.Lock()
	saved := registry.factories
	registry.factories = nil
	registry.Unlock()
	t.Cleanup(func() {
		registry.Lock()
		registry.factories = saved
		registry.Unlock()
	})
}

// stubTransport is a Transport that says only its kind.
type stubTransport struct {
	Transport
	kind api.Transport
}

func (s stubTransport) Kind() api.Transport { return s.kind }

// New calls the factory registered for the kind, with the Env and the
// options given, and hands back what it returns.
func TestRegistryNew(t *testing.T) {
	emptyRegistry(t)
	var gotEnv *Env
	var gotOpts Options
	Register(api.TransportNCCL, func(env *Env, opts Options) (Transport, error) {
		gotEnv, gotOpts = env, opts
		return stubTransport{kind: api.TransportNCCL}, nil
	})
	failed := errors.New("no device")
	Register(api.TransportIPC, func(*Env, Options) (Transport, error) { return nil, failed })
	env, id := &Env{Rank: 3}, nccl.UniqueID{1, 2, 3}
	tr, err := New(api.TransportNCCL, env, Options{NCCLID: &id})
	require.NoError(t, err)
	assert.Equal(t, api.TransportNCCL, tr.Kind())
	assert.Same(t, env, gotEnv)
	assert.Same(t, &id, gotOpts.NCCLID)
	_, err = New(api.TransportIPC, env, Options{})
	assert.ErrorIs(t, err, failed)
	assert.Equal(t, []api.Transport{api.TransportIPC, api.TransportNCCL}, Registered())
}

// A kind without a factory is refused by New (TransportAuto, which
// Connect resolves first, too); Register refuses what a program should
// never register.
func TestRegistryRefuses(t *testing.T) {
	emptyRegistry(t)
	for _, k := range []api.Transport{api.TransportIPC, api.TransportAuto, 200} {
		_, err := New(k, &Env{}, Options{})
		assert.ErrorIs(t, err, api.ErrNotSupported, "%v", k)
	}
	assert.Empty(t, Registered())
	f := func(*Env, Options) (Transport, error) { return nil, nil }
	assert.Panics(t, func() { Register(api.TransportAuto, f) }, "auto is a choice")
	assert.Panics(t, func() { Register(200, f) }, "an unknown kind")
	assert.Panics(t, func() { Register(api.TransportIPC, nil) }, "no factory")
	Register(api.TransportIPC, f)
	assert.Panics(t, func() { Register(api.TransportIPC, f) }, "twice")
	assert.Equal(t, []api.Transport{api.TransportIPC}, Registered())
}
