package handle

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

// HostIdentity is 16 bytes that equal those of every process on this
// machine and, with overwhelming odds, differ from other machines': the
// kernel's boot id, else a hash of the host name. Read once per process.
var HostIdentity = sync.OnceValue(func() [16]byte {
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

// BusHash names a GPU by a 32-bit FNV-1a hash of its PCI bus id (lower
// case), as the handles' reach lists do. Never zero.
func BusHash(bus string) uint32 {
	h := uint32(2166136261)
	for _, c := range []byte(strings.ToLower(bus)) {
		h ^= uint32(c)
		h *= 16777619
	}
	return h | 1
}

// Reaches reports whether h's GPU and the GPU of bus id bus have peer
// access both ways, as h's rank saw it: the same GPU always does.
func (h Handle) Reaches(bus string) bool {
	if strings.EqualFold(h.Bus(), bus) {
		return true
	}
	want := BusHash(bus)
	for _, r := range h.Reach[:h.NReach] {
		if r == want {
			return true
		}
	}
	return false
}

// Choose is the group's transport from its validated handles,
// the same verdict on every rank: what every rank asked for, with
// TransportAuto resolved to IPC when every handle comes from one host and
// every pair of their GPUs reaches each other (by each one's own list),
// NCCL otherwise. Ranks that asked for different transports are refused.
func Choose(hs []Handle) (api.Transport, error) {
	asked := hs[0].Transport
	for i, h := range hs {
		if h.Transport != asked {
			return 0, api.Wrap(api.ErrHandle, "rank %d asks for transport %v, rank 0 for %v", i, h.Transport, asked)
		}
	}
	if asked != api.TransportAuto {
		return asked, nil
	}
	for i, a := range hs {
		if a.Host != hs[0].Host {
			return api.TransportNCCL, nil
		}
		for _, b := range hs[i+1:] {
			if !a.Reaches(b.Bus()) || !b.Reaches(a.Bus()) {
				return api.TransportNCCL, nil
			}
		}
	}
	return api.TransportIPC, nil
}
