package nccl

import (
	"fmt"

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

// config is the leading part of ncclConfig_t as NCCL 2.14 defined it:
// NCCL reads the fields up to size and defaults the rest, and reads
// blocking only from configs of version 2.14 or later.
type config struct {
	size                             uint64
	magic, version                   uint32
	blocking                         int32
	cgaClusterSize, minCTAs, maxCTAs int32
	_                                uintptr // netName: NULL, NCCL's choice
	splitShare                       int32
	_                                int32
}

const (
	configMagic   = 0xcafebeef
	configVersion = 21400
	undefInt      = -1 << 31 // NCCL_CONFIG_UNDEF_INT
)
