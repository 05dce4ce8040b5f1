package a2a

import (
	"fmt"

	"github.com/ulysses-go/ulysses/internal/driver"
)

// peerMapping is how this process reaches one peer's buffer.
type peerMapping struct {
	ptr       driver.DevicePtr
	ipcOpened bool            // close with cuIpcCloseMemHandle
	peerCtx   *driver.Context // retained for a same-process peer on another device
}

// Connect maps every peer's buffer. handles[i] is rank i's Handle(); every
// rank must pass the same list. It checks that the group agrees on world
// size, element width and capacity, and that every pair of GPUs can reach
// each other (the same verdict on every rank, naming the pair).
func (c *Comm) Connect(handles [][]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return prefixed(ErrClosed)
	}
	if c.connected {
		return prefixed(ErrConnected)
	}
	hs, err := c.checkHandles(handles)
	if err != nil {
		return err
	}
	if err := c.checkPeerAccess(hs); err != nil {
		return err
	}
	blocks := c.blocks
	for _, h := range hs {
		blocks = min(blocks, int(h.Blocks))
	}
	for i, h := range hs {
		if i == c.cfg.Rank {
			c.peers[i] = peerMapping{ptr: c.buf}
			continue
		}
		m, err := c.mapPeer(h)
		if err != nil {
			c.buryPeers() // unmapping may wait for the device: see deviceShare
			return wrapErr(err, "rank %d mapping rank %d's buffer", c.cfg.Rank, i)
		}
		c.peers[i] = m
	}
	for i := 0; i < c.cfg.WorldSize; i++ {
		c.args.Data[i] = uint64(c.peers[i].ptr)
		c.args.Signal[i] = uint64(c.peers[i].ptr) + uint64(c.layout.signalOff)
	}
	c.blocks = blocks
	c.threads = threadsFor(blocks, c.dev.info.SMs)
	c.connected = true
	return nil
}

func (c *Comm) checkHandles(handles [][]byte) ([]handle, error) {
	if len(handles) != c.cfg.WorldSize {
		return nil, fmt.Errorf("a2a: %d handles for world size %d: %w", len(handles), c.cfg.WorldSize, ErrHandle)
	}
	hs := make([]handle, len(handles))
	for i, b := range handles {
		h, err := decodeHandle(b)
		if err != nil {
			return nil, wrapErr(err, "handle %d", i)
		}
		switch {
		case int(h.Rank) != i:
			return nil, fmt.Errorf("a2a: handle %d comes from rank %d: %w", i, h.Rank, ErrHandle)
		case int(h.World) != c.cfg.WorldSize:
			return nil, fmt.Errorf("a2a: rank %d has world size %d, this rank %d: %w", i, h.World, c.cfg.WorldSize, ErrHandle)
		case int(h.ElemBytes) != c.cfg.DType.Size():
			return nil, fmt.Errorf("a2a: rank %d uses %d-byte elements, this rank %d: %w", i, h.ElemBytes, c.cfg.DType.Size(), ErrHandle)
		case int64(h.DataBytes) != c.layout.dataBytes:
			return nil, fmt.Errorf("a2a: rank %d has a %d-byte buffer, this rank %d (MaxTokens*HiddenDim must agree): %w", i, h.DataBytes, c.layout.dataBytes, ErrHandle)
		case h.SingleBuffer != c.cfg.SingleBuffer:
			return nil, fmt.Errorf("a2a: rank %d has SingleBuffer=%v, this rank %v: %w", i, h.SingleBuffer, c.cfg.SingleBuffer, ErrHandle)
		}
		hs[i] = h
	}
	if string(handles[c.cfg.Rank]) != string(c.selfBytes) {
		return nil, fmt.Errorf("a2a: handle %d is not this rank's own: %w", c.cfg.Rank, ErrHandle)
	}
	return hs, nil
}

// checkPeerAccess decides for the whole group: every pair of distinct GPUs
// that this process can see is checked, in rank order, so every rank that
// sees the same GPUs names the same pair.
func (c *Comm) checkPeerAccess(hs []handle) error {
	ordinals := make([]int, len(hs))
	for i, h := range hs {
		ordinals[i] = c.dev.ordinalOfBusID(h.busID())
	}
	for i := range hs {
		for j := i + 1; j < len(hs); j++ {
			a, b := ordinals[i], ordinals[j]
			if a < 0 || b < 0 || a == b {
				continue
			}
			ok, err := c.dev.drv.CanAccessPeer(a, b)
			if err != nil {
				return wrapDriver("checking peer access", err)
			}
			ok2, err := c.dev.drv.CanAccessPeer(b, a)
			if err != nil {
				return wrapDriver("checking peer access", err)
			}
			if !ok || !ok2 {
				return fmt.Errorf("a2a: rank %d (GPU %s) and rank %d (GPU %s) cannot access each other's memory: %w",
					i, hs[i].busID(), j, hs[j].busID(), ErrNoPeerAccess)
			}
		}
	}
	return nil
}

func (c *Comm) mapPeer(h handle) (peerMapping, error) {
	if h.Nonce != processNonce() {
		p, err := c.dev.ctx.IpcOpenMemHandle(h.IPC)
		if err != nil {
			return peerMapping{}, wrapDriver("opening IPC handle", err)
		}
		return peerMapping{ptr: p, ipcOpened: true}, nil
	}
	// The same process: CUDA refuses to IPC-open its own allocations, but
	// with unified addressing the pointer is valid as it is, given peer
	// access when it lives on another device.
	m := peerMapping{ptr: driver.DevicePtr(h.DevPtr)}
	if h.busID() == c.dev.info.BusID {
		return m, nil
	}
	ord := c.dev.ordinalOfBusID(h.busID())
	if ord < 0 {
		return peerMapping{}, fmt.Errorf("a2a: device %s not visible: %w", h.busID(), ErrNoPeerAccess)
	}
	pc, err := c.dev.drv.RetainPrimaryContext(ord)
	if err != nil {
		return peerMapping{}, wrapDriver("retaining peer context", err)
	}
	if err := c.dev.ctx.EnablePeerAccess(pc); err != nil {
		pc.Release()
		return peerMapping{}, wrapDriver("enabling peer access", err)
	}
	m.peerCtx = pc
	return m, nil
}
