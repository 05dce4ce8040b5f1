package transport

import (
	"fmt"
	"sync"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/nccl"
)

// Factory builds a transport for the Comm env describes, unconnected, from
// what the Comm was given to connect with (opts). Each transport's package
// registers one (Register); Connect calls the chosen kind's through New.
type Factory func(env *Env, opts Options) (Transport, error)

// Options is what a Comm's Connect was given besides the handles, for the
// factories that need it.
type Options struct {
	// NCCLID is rank 0's NCCL unique id (ConnectNCCL); nil from Connect.
	NCCLID *nccl.UniqueID
	// LoadNCCL opens NCCL: the Comm's loader, which its tests replace.
	LoadNCCL func() (*nccl.Library, error)
}

// registry maps each kind of transport to its factory, as NCCL's
// ncclTransports[] lists its own: filled by the transports' packages when
// they are imported (package a2a imports them all), read after.
var registry struct {
	sync.RWMutex
	factories map[api.Transport]Factory
}

// Register makes f the factory of kind, at the cost of a map write. A
// transport's package calls it from init; it panics where kind is not one
// api.Transport knows, is TransportAuto (a choice among the others, not a
// transport) or already has a factory: mistakes of the program, not of
// its input.
func Register(kind api.Transport, f Factory) {
	registry.Lock()
	defer registry.Unlock()
	switch {
	case !kind.Known() || kind == api.TransportAuto:
		panic(fmt.Sprintf("transport: registering %v, not a kind of transport", kind))
	case registry.factories[kind] != nil:
		panic(fmt.Sprintf("transport: %v registered twice", kind))
	case f == nil:
		panic(fmt.Sprintf("transport: %v registered without a factory", kind))
	}
	if registry.factories == nil {
		registry.factories = map[api.Transport]Factory{}
	}
	registry.factories[kind] = f
}

// New builds a transport of kind with its registered factory, for env and
// opts; ErrNotSupported where kind has none (TransportAuto, which Connect
// resolves first, included). It costs what the factory costs.
func New(kind api.Transport, env *Env, opts Options) (Transport, error) {
	registry.RLock()
	f := registry.factories[kind]
	registry.RUnlock()
	if f == nil {
		return nil, fmt.Errorf("a2a: no transport %v in this build: %w", kind, api.ErrNotSupported)
	}
	return f(env, opts)
}

// Registered lists the kinds that have a factory, in the order of their
// values. It allocates the list.
func Registered() []api.Transport {
	registry.RLock()
	defer registry.RUnlock()
	var kinds []api.Transport
	for k := api.Transport(0); k.Known(); k++ {
		if registry.factories[k] != nil {
			kinds = append(kinds, k)
		}
	}
	return kinds
}
