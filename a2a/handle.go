package a2a

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"sync"
)

// HandleSize is the length of the bytes Handle returns.
const HandleSize = 224

const (
	handleMagic = "ULYH"
	// handleVersion 2 added the host, transport and reach after the IPC
	// handle, 3 the Comm's identity after the reach.
	handleVersion = 3
)

// maxReach is the most GPUs a handle lists as reachable from its own.
const maxReach = 15

// handle is what a rank tells its peers: enough to map its buffer and to
// check that the group agrees on the layout.
type handle struct {
	Rank      uint32
	World     uint32
	ElemBytes uint8
	Blocks    uint32 // thread blocks this rank asks for; the group takes the minimum
	Pid       uint32
	DataBytes uint64
	Nonce     uint64   // random per process: equal nonces mean the same process
	DevPtr    uint64   // the buffer's address, usable directly in the same process
	BusID     [16]byte // PCI bus id of the device, NUL-padded
	IPC       [64]byte // CUipcMemHandle

	SingleBuffer bool // Config.SingleBuffer: the group must agree

	Host      [16]byte  // the host's identity (hostIdentity): equal on one host
	Transport Transport // Config.Transport: the group must agree
	// Reach holds the hashes (busHash) of the PCI bus ids of the GPUs
	// this rank's GPU has peer access with, both ways; the first NReach
	// are set, the rest zero.
	NReach uint8
	Reach  [maxReach]uint32

	// Comm is the Comm's identity (newCommID): random, sent only to the
	// Comm's group. A same-process peer's pointer is used only if it is
	// the buffer of the Comm with this identity, so a peer of one group
	// cannot point a Comm at another group's buffer in its process.
	Comm [16]byte
}

// handleFlagSingleBuffer is bit 0 of the flags byte.
const handleFlagSingleBuffer = 1

// processNonce tells this process apart from every other, even across PID
// namespaces; it is set once and never changes.
var processNonce = sync.OnceValue(func() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(os.Getpid())<<32 | 1
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
})

// newCommID returns a fresh Comm identity: 128 bits from crypto/rand
// (which does not fail on the systems Go supports: it crashes the program
// instead), so that no peer can guess another Comm's.
func newCommID() [16]byte {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return id
}

func (h *handle) encode() []byte {
	b := make([]byte, HandleSize)
	copy(b, handleMagic)
	le := binary.LittleEndian
	le.PutUint16(b[4:], handleVersion)
	b[6] = h.ElemBytes
	if h.SingleBuffer {
		b[7] = handleFlagSingleBuffer
	}
	le.PutUint32(b[8:], h.Rank)
	le.PutUint32(b[12:], h.World)
	le.PutUint32(b[16:], h.Blocks)
	le.PutUint32(b[20:], h.Pid)
	le.PutUint64(b[24:], h.DataBytes)
	le.PutUint64(b[32:], h.Nonce)
	le.PutUint64(b[40:], h.DevPtr)
	copy(b[48:64], h.BusID[:])
	copy(b[64:128], h.IPC[:])
	copy(b[128:144], h.Host[:])
	b[144] = byte(h.Transport)
	b[145] = h.NReach
	for i, r := range h.Reach {
		le.PutUint32(b[148+4*i:], r)
	}
	copy(b[208:224], h.Comm[:])
	return b
}

// decodeHandle parses bytes from a peer; it never panics on any input.
func decodeHandle(b []byte) (handle, error) {
	var h handle
	if len(b) != HandleSize {
		return h, fmt.Errorf("a2a: handle has %d bytes, want %d: %w", len(b), HandleSize, ErrHandle)
	}
	if !bytes.Equal(b[:4], []byte(handleMagic)) {
		return h, fmt.Errorf("a2a: handle does not start with %q: %w", handleMagic, ErrHandle)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[4:]); v != handleVersion {
		return h, fmt.Errorf("a2a: handle version %d, this library speaks %d: %w", v, handleVersion, ErrHandle)
	}
	if b[7]&^handleFlagSingleBuffer != 0 {
		return h, fmt.Errorf("a2a: handle has unknown flags %#x: %w", b[7], ErrHandle)
	}
	h.SingleBuffer = b[7]&handleFlagSingleBuffer != 0
	h.ElemBytes = b[6]
	h.Rank = le.Uint32(b[8:])
	h.World = le.Uint32(b[12:])
	h.Blocks = le.Uint32(b[16:])
	h.Pid = le.Uint32(b[20:])
	h.DataBytes = le.Uint64(b[24:])
	h.Nonce = le.Uint64(b[32:])
	h.DevPtr = le.Uint64(b[40:])
	copy(h.BusID[:], b[48:64])
	copy(h.IPC[:], b[64:128])
	copy(h.Host[:], b[128:144])
	h.Transport, h.NReach = Transport(b[144]), b[145]
	for i := range h.Reach {
		h.Reach[i] = le.Uint32(b[148+4*i:])
	}
	copy(h.Comm[:], b[208:224])
	if err := h.checkV2(b); err != nil {
		return h, err
	}
	switch {
	case h.World < 1 || h.World > MaxWorldSize:
		return h, fmt.Errorf("a2a: handle world size %d not in 1..%d: %w", h.World, MaxWorldSize, ErrHandle)
	case h.Rank >= h.World:
		return h, fmt.Errorf("a2a: handle rank %d not below world size %d: %w", h.Rank, h.World, ErrHandle)
	case h.ElemBytes != 1 && h.ElemBytes != 2:
		return h, fmt.Errorf("a2a: handle element size %d: %w", h.ElemBytes, ErrHandle)
	case h.Blocks < 1 || h.Blocks > maxBlocks:
		return h, fmt.Errorf("a2a: handle asks for %d blocks, not in 1..%d: %w", h.Blocks, maxBlocks, ErrHandle)
	case h.DataBytes > maxDataBytes:
		return h, fmt.Errorf("a2a: handle capacity %d over %d: %w", h.DataBytes, int64(maxDataBytes), ErrHandle)
	}
	return h, nil
}

// owner is what h says of the Comm whose buffer it names (ownsBuffer).
func (h handle) owner() bufferOwner {
	return bufferOwner{id: h.Comm, rank: int(h.Rank), dataBytes: int64(h.DataBytes)}
}

func (h handle) busID() string {
	n := bytes.IndexByte(h.BusID[:], 0)
	if n < 0 {
		n = len(h.BusID)
	}
	return string(h.BusID[:n])
}

// checkV2 checks the fields version 2 added: a known transport, at most
// maxReach GPUs reached, and zeros wherever encode writes none.
func (h handle) checkV2(b []byte) error {
	switch {
	case h.Transport > TransportAuto:
		return fmt.Errorf("a2a: handle asks for transport %d: %w", h.Transport, ErrHandle)
	case h.NReach > maxReach:
		return fmt.Errorf("a2a: handle lists %d reachable GPUs, at most %d: %w", h.NReach, maxReach, ErrHandle)
	case b[146] != 0 || b[147] != 0:
		return fmt.Errorf("a2a: handle has reserved bytes set: %w", ErrHandle)
	}
	for _, r := range h.Reach[h.NReach:] {
		if r != 0 {
			return fmt.Errorf("a2a: handle lists a reachable GPU past its count: %w", ErrHandle)
		}
	}
	return nil
}
