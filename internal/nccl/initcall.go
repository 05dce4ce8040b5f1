package nccl

import (
	"fmt"
	"unsafe"

	"github.com/ulysses-go/ulysses/internal/dl"
)

// idArg is a UniqueID as purego passes a struct by value: scalar fields,
// so the 128 bytes are sixteen words.
type idArg struct {
	w0, w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14, w15 uint64
}

// initFunc calls ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
// ncclUniqueId id, int rank, ncclConfig_t *config).
type initFunc func(comm *uintptr, nranks int32, id idArg, rank int32, config *config) int32

// bindInit wraps ncclCommInitRankConfig with purego.RegisterFunc, which
// lays the by-value 128-byte id out as the C ABI wants (on the stack under
// System V amd64, as a pointer to a copy under AAPCS64), as
// internal/driver does for cuIpcOpenMemHandle. Where purego cannot pass
// structs it panics; that is returned as an error.
func bindInit(fn uintptr) (f initFunc, err error) {
	if err := dl.RegisterFunc(&f, fn, "ncclCommInitRankConfig, whose id is passed by value,"); err != nil {
		return nil, fmt.Errorf("nccl: %w", err)
	}
	return f, nil
}

// config is ncclConfig_t as NCCL 2.28 defines it (ncclConfig_v22800),
// every field NCCL reads from a 2.28 config. NCCL copies the first size
// bytes (at most its own struct's) and defaults the fields newer than
// version, so one layout serves every NCCL from 2.14: configVersion
// stamps it 2.14 for older libraries (which read blocking and default the
// rest, as before) and 2.28 for 2.28 and newer (which also read
// CTAPolicy). TestConfigLayout pins the offsets.
type config struct {
	size                             uint64
	magic, version                   uint32
	blocking                         int32
	cgaClusterSize, minCTAs, maxCTAs int32
	netName                          uintptr // NULL: NCCL's choice
	splitShare, trafficClass         int32
	commName                         uintptr // NULL
	collnetEnable, ctaPolicy         int32
	shrinkShare, nvlsCTAs            int32
	nChannelsPerNetPeer              int32
	nvlinkCentricSched               int32
}

const (
	configMagic     = 0xcafebeef
	configVersion   = 21400    // the config's version for NCCLs before 2.28
	configVersion28 = 22800    // for 2.28 and newer: CTAPolicy is read
	undefInt        = -1 << 31 // NCCL_CONFIG_UNDEF_INT
)

// newConfig is a config of every field NCCL's to choose, stamped with the
// version lib reads, and blocking or not as asked.
func newConfig(libVersion int, blocking bool) *config {
	c := &config{size: uint64(unsafe.Sizeof(config{})), magic: configMagic, version: configVersion}
	if libVersion >= configVersion28 {
		c.version = configVersion28
	}
	for _, f := range []*int32{&c.cgaClusterSize, &c.minCTAs, &c.maxCTAs, &c.splitShare, &c.trafficClass,
		&c.collnetEnable, &c.ctaPolicy, &c.shrinkShare, &c.nvlsCTAs, &c.nChannelsPerNetPeer, &c.nvlinkCentricSched} {
		*f = undefInt
	}
	if blocking {
		c.blocking = 1
	}
	return c
}
