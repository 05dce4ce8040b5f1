package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/handle"
	"github.com/ulysses-go/ulysses/internal/plan"
	"github.com/ulysses-go/ulysses/internal/transport/ipc"
)

// Connect maps every peer's buffer. handles[i] is rank i's Handle(); every
// rank must pass the same list. It checks that the group agrees on world
// size, element width, capacity and transport, and that every pair of
// GPUs can reach each other (the same verdict on every rank, naming the
// pair). A group that needs NCCL (NeedsNCCL) connects with ConnectNCCL
// instead; Connect refuses it with ErrConfig.
func (c *Comm) Connect(handles [][]byte) error {
	if !c.made() {
		return unmade("Connect")
	}
	return c.connect(handles, nil)
}

// ConnectNCCL is Connect with rank 0's NCCL unique id (NewNCCLID), which
// every rank must pass alike: for a group that uses NCCL, it starts joining
// the NCCL communicator without waiting for the other ranks (so the ranks
// of one process may connect one after another, as NewGroup does); the
// first operation waits for them, bounded by the timeout. For a group that
// TransportAuto resolves to IPC, the id is not used.
func (c *Comm) ConnectNCCL(handles [][]byte, id NCCLID) error {
	if !c.made() {
		return unmade("ConnectNCCL")
	}
	return c.connect(handles, &id)
}

// NeedsNCCL reports whether the group of handles (every rank's, in rank
// order, as Connect takes them) uses NCCL: it asked for TransportNCCL, or
// TransportAuto chose it. Every rank gets the same answer. It costs a
// decode of the handles.
func (c *Comm) NeedsNCCL(handles [][]byte) (bool, error) {
	if !c.made() {
		return false, unmade("NeedsNCCL")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hs, err := c.checkHandles(handles)
	if err != nil {
		return false, err
	}
	kind, err := handle.Choose(hs)
	return kind == api.TransportNCCL, err
}

func (c *Comm) connect(handles [][]byte, id *NCCLID) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return api.Prefixed(ErrClosed)
	}
	if c.t != nil {
		return api.Prefixed(ErrConnected)
	}
	hs, err := c.checkHandles(handles)
	if err != nil {
		return err
	}
	kind, err := handle.Choose(hs)
	if err != nil {
		return err
	}
	t, err := c.newTransport(Transport(kind), id)
	if err != nil {
		return err
	}
	if err := t.Connect(hs); err != nil {
		t.Release()
		return err
	}
	if c.tokens.Counts != nil {
		t.SetTokens(c.tokens)
	}
	c.t = t
	c.env = plan.Env{DType: api.DType(c.cfg.DType), Wire: api.Wire(c.cfg.Wire), Rank: c.cfg.Rank, World: c.cfg.WorldSize,
		Layout: c.layout, Buf: uintptr(c.buf), Widths: t.Widths()}
	return nil
}

func (c *Comm) checkHandles(handles [][]byte) ([]handle.Handle, error) {
	if len(handles) != c.cfg.WorldSize {
		return nil, fmt.Errorf("a2a: %d handles for world size %d: %w", len(handles), c.cfg.WorldSize, ErrHandle)
	}
	hs := make([]handle.Handle, len(handles))
	for i, b := range handles {
		h, err := handle.Decode(b)
		if err != nil {
			return nil, api.Wrap(err, "handle %d", i)
		}
		switch {
		case int(h.Rank) != i:
			return nil, fmt.Errorf("a2a: handle %d comes from rank %d: %w", i, h.Rank, ErrHandle)
		case int(h.World) != c.cfg.WorldSize:
			return nil, fmt.Errorf("a2a: rank %d has world size %d, this rank %d: %w", i, h.World, c.cfg.WorldSize, ErrHandle)
		case int(h.ElemBytes) != c.cfg.DType.Size():
			return nil, fmt.Errorf("a2a: rank %d uses %d-byte elements, this rank %d: %w", i, h.ElemBytes, c.cfg.DType.Size(), ErrHandle)
		case int64(h.DataBytes) != c.layout.DataBytes:
			return nil, fmt.Errorf("a2a: rank %d has a %d-byte buffer, this rank %d (MaxTokens*HiddenDim must agree): %w", i, h.DataBytes, c.layout.DataBytes, ErrHandle)
		case h.SingleBuffer != c.cfg.SingleBuffer:
			return nil, fmt.Errorf("a2a: rank %d has SingleBuffer=%v, this rank %v: %w", i, h.SingleBuffer, c.cfg.SingleBuffer, ErrHandle)
		}
		hs[i] = h
	}
	if string(handles[c.cfg.Rank]) != string(c.selfBytes) {
		return nil, fmt.Errorf("a2a: handle %d is not this rank's own: %w", c.cfg.Rank, ErrHandle)
	}
	if err := ipc.CheckOwnBuffers(hs, c.cfg.Rank); err != nil {
		return nil, err
	}
	return hs, nil
}
