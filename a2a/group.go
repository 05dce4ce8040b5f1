package a2a

import (
	"errors"
	"fmt"
	"sync"

	"github.com/ulysses-go/ulysses/internal/api"
)

// Group is a whole group in one process: one Comm per rank, each on its
// own device (a device may repeat), connected by pointer rather than IPC
// handles, with peer access enabled between the devices, or over one NCCL
// communicator where the Config asks for it (see NewGroup). Its Comms are
// ordinary Comms: the same operations, semantics and kernels.
//
// A collective completes only when every rank has run it, so enqueue the
// operation on every rank before waiting for any: from one goroutine per
// rank, or from one goroutine in turn (operations return without
// waiting), but not Sync of one rank before the others have enqueued.
// Ranks on one GPU need no more SMs than one: of each operation, only the
// block that starts last waits, so the ranks' kernels never need to be
// resident at once. Two ranks must not use the same stream for one
// collective (see Comm.On): the second would wait for the first, which
// waits for it, until the timeout. With several ranks on one GPU, set
// CUDA_DEVICE_MAX_CONNECTIONS=32 in the process's environment before CUDA
// starts: with the default 8 hardware queues the ranks' streams share
// them, and a waiting kernel can sit ahead of the one it waits for until
// the timeout (docs/RELIABILITY.md, "Concurrency").
type Group struct {
	comms []*Comm
}

// NewGroup makes a Group of len(devices) ranks: rank i on device
// devices[i], each with cfg's capacity, type, SMs, timeout and buffer mode
// (cfg's Rank, WorldSize and Device are ignored). It costs what New costs
// per rank, plus peer access between distinct devices. With
// cfg.Transport TransportNCCL, or TransportAuto where the GPUs cannot
// reach each other, the ranks form one NCCL communicator instead (NCCL
// refuses two ranks on one GPU). On failure nothing is left allocated.
func NewGroup(cfg Config, devices []int) (*Group, error) {
	if len(devices) < 1 || len(devices) > MaxWorldSize {
		return nil, fmt.Errorf("a2a: a group of %d devices, not 1..%d: %w", len(devices), MaxWorldSize, ErrConfig)
	}
	g := &Group{}
	handles := make([][]byte, len(devices))
	for r, d := range devices {
		rc := cfg
		rc.Rank, rc.WorldSize, rc.Device = r, len(devices), DeviceOrdinal(d)
		c, err := New(rc)
		if err != nil {
			return nil, errors.Join(api.Wrap(err, "making rank %d on device %d", r, d), g.Close())
		}
		g.comms = append(g.comms, c)
		handles[r] = c.Handle()
	}
	if err := g.connect(handles); err != nil {
		return nil, errors.Join(err, g.Close())
	}
	return g, nil
}

// connect connects every rank in turn: over IPC, or, when cfg asked for
// NCCL or TransportAuto chose it, over one NCCL communicator whose unique
// id this process makes (each rank's ConnectNCCL starts its part without
// waiting for the others, so one goroutine can connect them all).
func (g *Group) connect(handles [][]byte) error {
	needs, err := g.comms[0].NeedsNCCL(handles)
	if err != nil {
		return api.Wrap(err, "choosing the transport")
	}
	var id *NCCLID
	if needs {
		nid, err := NewNCCLID()
		if err != nil {
			return err
		}
		id = &nid
	}
	for r, c := range g.comms {
		if err := c.connect(handles, id); err != nil {
			return api.Wrap(err, "connecting rank %d", r)
		}
	}
	return nil
}

// Comm returns rank r's Comm (nil if r is out of range, or for a Group
// that NewGroup did not make).
func (g *Group) Comm(r int) *Comm {
	if g == nil || r < 0 || r >= len(g.comms) {
		return nil
	}
	return g.comms[r]
}

// Size returns the number of ranks (0 for a Group that NewGroup did not
// make: nil, or the zero Group).
func (g *Group) Size() int {
	if g == nil {
		return 0
	}
	return len(g.comms)
}

// Sync waits for every rank's queued operations, all at once, and returns
// what each Sync returned, joined. On a Group that NewGroup did not make
// it returns an error matching ErrNotConnected.
func (g *Group) Sync() error {
	if g.Size() == 0 {
		return fmt.Errorf("a2a: Sync on a Group that NewGroup did not make (nil, or the zero Group): %w", ErrNotConnected)
	}
	return g.each((*Comm).Sync)
}

// Close closes every rank at once (one at a time, each would wait for the
// others' goodbyes until the timeout) and returns what went wrong, joined.
// On a Group that NewGroup did not make it has nothing to close: nil.
func (g *Group) Close() error {
	if g.Size() == 0 {
		return nil
	}
	return g.each((*Comm).Close)
}

// each runs f on every rank's Comm concurrently.
func (g *Group) each(f func(*Comm) error) error {
	errs := make([]error, len(g.comms))
	var wg sync.WaitGroup
	for r, c := range g.comms {
		wg.Go(func() { errs[r] = f(c) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
