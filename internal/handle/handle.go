package handle

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/ulysses-go/ulysses/internal/api"
	"github.com/ulysses-go/ulysses/internal/kernelabi"
	"github.com/ulysses-go/ulysses/internal/plan"
)

// Size is the length of an encoded handle.
const Size = 224

const (
	handleMagic   = "ULYH"
	handleVersion = 5 // 2: the host, transport and reach after the IPC handle; 3: the buffer's ID; 4: the signal area's landing words (a larger buffer, the same data half); 5: SharedFD's socket directory
)

// MaxReach is the most GPUs a handle lists as reachable from its own.
const MaxReach = 15

// Handle is what a rank tells its peers: enough to map its buffer and to
// check that the group agrees on the layout.
type Handle struct {
	Rank      uint32
	World     uint32
	ElemBytes uint8
	Blocks    uint32 // thread blocks this rank asks for; the group takes the minimum
	Pid       uint32
	DataBytes uint64
	Nonce     uint64   // random per process: equal nonces mean the same process
	DevPtr    uint64   // the buffer's address, usable directly in the same process
	BusID     [16]byte // PCI bus id of the device, NUL-padded
	IPC       [64]byte // CUipcMemHandle, CUmemFabricHandle or, with SharedFD, the socket's directory (Shared)
	// Shared says how peers in other processes reach the buffer.
	Shared Shared

	SingleBuffer bool // Config.SingleBuffer: the group must agree

	Host      [16]byte      // the host's identity (HostIdentity): equal on one host
	Transport api.Transport // Config.Transport: the group must agree
	// Reach holds the hashes (BusHash) of the PCI bus ids of the GPUs
	// this rank's GPU has peer access with, both ways; the first NReach
	// are set, the rest zero.
	NReach uint8
	Reach  [MaxReach]uint32
	// ID is random per Comm, and travels only in its group's handles: a
	// handle that names a buffer of this process must carry the ID that
	// buffer was registered with, so a peer of one group cannot point a
	// rank at the buffer of another group's Comm.
	ID [16]byte
}

// The flags byte: bit 0 SingleBuffer, bits 1 and 2 Shared.
const (
	handleFlagSingleBuffer = 1
	handleSharedShift      = 1
	handleSharedMask       = 3 << handleSharedShift
	handleKnownFlags       = handleFlagSingleBuffer | handleSharedMask
)

// Shared is how a rank's buffer is shared with peers in other processes
// on its host (the same process uses its address, whatever the kind).
type Shared uint8

const (
	// SharedLegacyIPC: a cuMemAlloc buffer, opened with the IPC handle.
	SharedLegacyIPC Shared = iota
	// SharedFD: a cuMemCreate buffer, whose POSIX file descriptor the
	// owner hands to the group's peers over a Unix-domain socket (named
	// from the handle's ID) in a directory only its user can enter; the
	// IPC bytes hold that directory's absolute path, NUL-padded (FDDir).
	SharedFD
	// SharedFabric: a cuMemCreate buffer whose fabric handle (the IPC
	// bytes) any process of its NVLink domain may import.
	SharedFabric
)

// String names the kind: "legacy-ipc", "fd" or "fabric".
func (s Shared) String() string {
	switch s {
	case SharedLegacyIPC:
		return "legacy-ipc"
	case SharedFD:
		return "fd"
	case SharedFabric:
		return "fabric"
	}
	return "Shared(?)"
}

// ProcessNonce tells this process apart from every other, even across PID
// namespaces; it is set once and never changes.
var ProcessNonce = sync.OnceValue(func() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return uint64(os.Getpid())<<32 | 1
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
})

// Encode writes h in the wire format Decode reads (Size bytes).
func (h *Handle) Encode() []byte {
	b := make([]byte, Size)
	copy(b, handleMagic)
	le := binary.LittleEndian
	le.PutUint16(b[4:], handleVersion)
	b[6] = h.ElemBytes
	if h.SingleBuffer {
		b[7] = handleFlagSingleBuffer
	}
	b[7] |= byte(h.Shared) << handleSharedShift & handleSharedMask
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
	copy(b[208:224], h.ID[:])
	return b
}

// Decode parses bytes from a peer; it never panics on any input.
func Decode(b []byte) (Handle, error) {
	var h Handle
	if len(b) != Size {
		return h, fmt.Errorf("a2a: handle has %d bytes, want %d: %w", len(b), Size, api.ErrHandle)
	}
	if !bytes.Equal(b[:4], []byte(handleMagic)) {
		return h, fmt.Errorf("a2a: handle does not start with %q: %w", handleMagic, api.ErrHandle)
	}
	le := binary.LittleEndian
	if v := le.Uint16(b[4:]); v != handleVersion {
		return h, fmt.Errorf("a2a: handle version %d, this library speaks %d: %w", v, handleVersion, api.ErrHandle)
	}
	if b[7]&^handleKnownFlags != 0 {
		return h, fmt.Errorf("a2a: handle has unknown flags %#x: %w", b[7], api.ErrHandle)
	}
	h.SingleBuffer = b[7]&handleFlagSingleBuffer != 0
	h.Shared = Shared(b[7] & handleSharedMask >> handleSharedShift)
	if err := checkShared(h.Shared, b[64:128]); err != nil {
		return h, err
	}
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
	h.Transport, h.NReach = api.Transport(b[144]), b[145]
	for i := range h.Reach {
		h.Reach[i] = le.Uint32(b[148+4*i:])
	}
	copy(h.ID[:], b[208:224])
	if err := h.checkV2(b); err != nil {
		return h, err
	}
	switch {
	case h.World < 1 || h.World > kernelabi.MaxRanks:
		return h, fmt.Errorf("a2a: handle world size %d not in 1..%d: %w", h.World, kernelabi.MaxRanks, api.ErrHandle)
	case h.Rank >= h.World:
		return h, fmt.Errorf("a2a: handle rank %d not below world size %d: %w", h.Rank, h.World, api.ErrHandle)
	case h.ElemBytes != 1 && h.ElemBytes != 2:
		return h, fmt.Errorf("a2a: handle element size %d: %w", h.ElemBytes, api.ErrHandle)
	case h.Blocks < 1 || h.Blocks > kernelabi.MaxBlocks:
		return h, fmt.Errorf("a2a: handle asks for %d blocks, not in 1..%d: %w", h.Blocks, kernelabi.MaxBlocks, api.ErrHandle)
	case h.DataBytes > plan.MaxDataBytes:
		return h, fmt.Errorf("a2a: handle capacity %d over %d: %w", h.DataBytes, int64(plan.MaxDataBytes), api.ErrHandle)
	}
	return h, nil
}

// Bus is the PCI bus id of the handle's device.
func (h Handle) Bus() string {
	n := bytes.IndexByte(h.BusID[:], 0)
	if n < 0 {
		n = len(h.BusID)
	}
	return string(h.BusID[:n])
}

// checkV2 checks the fields version 2 added: a known transport, at most
// MaxReach GPUs reached, and zeros wherever encode writes none.
func (h Handle) checkV2(b []byte) error {
	switch {
	case !h.Transport.Known():
		return fmt.Errorf("a2a: handle asks for transport %d: %w", h.Transport, api.ErrHandle)
	case h.NReach > MaxReach:
		return fmt.Errorf("a2a: handle lists %d reachable GPUs, at most %d: %w", h.NReach, MaxReach, api.ErrHandle)
	case b[146] != 0 || b[147] != 0:
		return fmt.Errorf("a2a: handle has reserved bytes set: %w", api.ErrHandle)
	}
	for _, r := range h.Reach[h.NReach:] {
		if r != 0 {
			return fmt.Errorf("a2a: handle lists a reachable GPU past its count: %w", api.ErrHandle)
		}
	}
	return nil
}

// checkShared checks the sharing kind and its payload: a known kind, and
// with SharedFD an absolute path, NUL-padded, with nothing after it.
func checkShared(s Shared, payload []byte) error {
	switch s {
	case SharedLegacyIPC, SharedFabric:
		return nil
	case SharedFD:
		dir, pad, _ := bytes.Cut(payload, []byte{0})
		if len(dir) == 0 || dir[0] != '/' || !bytes.Equal(pad, make([]byte, len(pad))) {
			return fmt.Errorf("a2a: handle shared as a file descriptor does not name an absolute directory: %w", api.ErrHandle)
		}
		return nil
	}
	return fmt.Errorf("a2a: handle shares its buffer in an unknown way (%d): %w", s, api.ErrHandle)
}

// FDDir is the directory of the socket that hands out a SharedFD
// handle's descriptor (what the owner's fdshare.Server.Dir said); Decode
// checked that it is an absolute path. Empty for the other kinds.
func (h Handle) FDDir() string {
	if h.Shared != SharedFD {
		return ""
	}
	dir, _, _ := bytes.Cut(h.IPC[:], []byte{0})
	return string(dir)
}

// SetFDDir records dir, the socket's directory, as a SharedFD handle's
// payload; it reports false, changing nothing, if dir does not fit.
func (h *Handle) SetFDDir(dir string) bool {
	if len(dir) > len(h.IPC) || strings.IndexByte(dir, 0) >= 0 {
		return false
	}
	h.IPC = [64]byte{}
	copy(h.IPC[:], dir)
	return true
}
