package a2a

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"sync"

	"github.com/ulysses-go/ulysses/internal/api"
)

// bootIDPath is where Linux keeps a random id of the running kernel: the
// same for every process (and container) of one machine until it reboots.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

// hostIdentity is 16 bytes that equal those of every process on this
// machine and, with overwhelming odds, differ from other machines': the
// kernel's boot id, else a hash of the host name. Read once per process.
var hostIdentity = sync.OnceValue(func() [16]byte {
	var id [16]byte
	if b, err := os.ReadFile(bootIDPath); err == nil {
		raw, err := hex.DecodeString(strings.ReplaceAll(strings.TrimSpace(string(b)), "-", ""))
		if err == nil && len(raw) == len(id) {
			copy(id[:], raw)
			return id
		}
	}
	name, _ := os.Hostname()
	sum := sha256.Sum256([]byte("a2a host " + name))
	copy(id[:], sum[:])
	return id
})

// busHash names a GPU by a 32-bit FNV-1a hash of its PCI bus id (lower
// case), as the handles' reach lists do. Never zero.
func busHash(bus string) uint32 {
	h := uint32(2166136261)
	for _, c := range []byte(strings.ToLower(bus)) {
		h ^= uint32(c)
		h *= 16777619
	}
	return h | 1
}

// reach lists the hashes of the bus ids of the GPUs this process sees
// that d's GPU has peer access with, both ways (at most maxReach; a GPU
// whose bus id or access cannot be read is left out, which only makes
// TransportAuto choose NCCL).
func (d *Device) reach() (n uint8, r [maxReach]uint32) {
	count, err := d.drv.DeviceCount()
	if err != nil {
		return 0, r
	}
	me := d.info.Ordinal
	for o := 0; o < count && int(n) < maxReach; o++ {
		if o == me {
			continue
		}
		bus, err := d.drv.DevicePCIBusID(o)
		if err != nil || bus == "" {
			continue
		}
		to, err1 := d.drv.CanAccessPeer(me, o)
		from, err2 := d.drv.CanAccessPeer(o, me)
		if err1 == nil && err2 == nil && to && from {
			r[n] = busHash(bus)
			n++
		}
	}
	return n, r
}

// reaches reports whether h's GPU and the GPU of bus id bus have peer
// access both ways, as h's rank saw it: the same GPU always does.
func (h handle) reaches(bus string) bool {
	if strings.EqualFold(h.busID(), bus) {
		return true
	}
	want := busHash(bus)
	for _, r := range h.Reach[:h.NReach] {
		if r == want {
			return true
		}
	}
	return false
}

// chooseTransport is the group's transport from its validated handles,
// the same verdict on every rank: what every rank asked for, with
// TransportAuto resolved to IPC when every handle comes from one host and
// every pair of their GPUs reaches each other (by each one's own list),
// NCCL otherwise. Ranks that asked for different transports are refused.
func chooseTransport(hs []handle) (Transport, error) {
	asked := hs[0].Transport
	for i, h := range hs {
		if h.Transport != asked {
			return 0, api.Wrap(ErrHandle, "rank %d asks for transport %v, rank 0 for %v", i, h.Transport, asked)
		}
	}
	if asked != TransportAuto {
		return asked, nil
	}
	for i, a := range hs {
		if a.Host != hs[0].Host {
			return TransportNCCL, nil
		}
		for _, b := range hs[i+1:] {
			if !a.reaches(b.busID()) || !b.reaches(a.busID()) {
				return TransportNCCL, nil
			}
		}
	}
	return TransportIPC, nil
}
