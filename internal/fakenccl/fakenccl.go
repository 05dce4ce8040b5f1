// Package fakenccl builds a stub NCCL, a libnccl.so.2 that needs no GPU
// and no network, for the tests of internal/nccl and a2a (csrc/fakenccl.c,
// embedded). It checks the arguments of the entry points internal/nccl
// binds and moves bytes on host memory (its device pointers are host
// pointers, as the stub CUDA driver's are). Communicators of one process
// made from the same unique id form a group: a send from rank a to b and
// a receive on b from a are paired in posting order per (sender,
// receiver) pair and copied when the second half arrives; a half whose
// partner has not come is queued (its communicator reports ncclInProgress
// meanwhile), so one thread can enqueue every rank in turn. Streams are
// not modelled: the copy happens when the pair completes, not in stream
// order (EnvP2PWait gives ranks on threads of their own that order).
// On a blocking communicator (ncclCommSplit makes them, color 0 and key =
// rank only) a group's first transfer with a peer waits, unbounded, for
// the peer's half or the communicator's release, as NCCL's blocking
// launch connects. ncclAlltoAll pairs as a group of sends and receives; ncclMemAlloc is
// malloc and windows are counted (ReadLive). All-gather moves bytes only
// in a world of one. It can keep a
// non-blocking communicator "in progress" for a number of polls or for
// ever, and leave every transfer unpaired (EnvP2PHang), so bounded waits
// can be tested. LastInit, LastConfig, ReadCounts and ReadLive read what it saw. Building needs a C
// compiler at test time only.
package fakenccl

import (
	_ "embed"
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ulysses-go/ulysses/internal/cstub"
	"github.com/ulysses-go/ulysses/internal/dl"
)

//go:embed csrc/fakenccl.c
var source []byte

// Library is the file name Build writes in its directory.
const Library = "libnccl.so.2"

// Environment variables the stub reads (see csrc/fakenccl.c).
const (
	EnvVersion   = "FAKENCCL_VERSION"    // the version code ncclGetVersion reports (default 22809)
	EnvInitError = "FAKENCCL_INIT_ERROR" // ncclCommInitRankConfig fails with this result
	EnvInitPolls = "FAKENCCL_INIT_POLLS" // a non-blocking init is in progress for this many polls
	EnvInitHang  = "FAKENCCL_INIT_HANG"  // "1": a non-blocking init stays in progress until aborted
	// EnvP2PWait: ncclGroupEnd (or a send or receive outside a group)
	// waits up to this many milliseconds for the partners of the halves
	// it posts, then returns with the rest still queued.
	EnvP2PWait = "FAKENCCL_P2P_WAIT_MS"
	// EnvP2PHang: "1" pairs nothing; every half stays queued, and its
	// communicator in progress, until the communicator is aborted or
	// destroyed, as with a peer that never comes.
	EnvP2PHang = "FAKENCCL_P2P_HANG"
	// EnvBlockingWaitAll: "1" makes ncclGroupEnd on a blocking
	// communicator wait for the partner of every half it posts, not only
	// of those to peers it never paired with: a blocking launch that
	// hangs after connecting.
	EnvBlockingWaitAll = "FAKENCCL_BLOCKING_WAIT_ALL"
)

// Build compiles the stub into dir/libnccl.so.2 and returns its absolute
// path.
func Build(dir string) (string, error) {
	path, err := cstub.Build(dir, "fakenccl.c", Library, source)
	if err != nil {
		return "", fmt.Errorf("fakenccl: %w", err)
	}
	return path, nil
}

// Init is what the latest ncclCommInitRankConfig call received.
type Init struct {
	ID          [128]byte
	World, Rank int
	Blocking    int // the config's blocking field, -1 without a config
}

// Counts are the stub's running totals in one process, and Queued, the
// halves of transfers waiting for their partner now; Splits, the
// ncclCommSplit calls, LiveBlocking, the blocking communicators of
// LiveComms, and BlockingSends, the sends on blocking communicators.
type Counts struct {
	LiveComms, Aborts, Sends, Recvs, AllGathers, Queued int64
	Splits, LiveBlocking, BlockingSends                 int64
}

// LastInit reads the latest init the stub at path saw in this process.
func LastInit(path string) (Init, error) {
	var in Init
	var world, rank, blocking int32
	err := callStub(path, "fakenccl_last_init", uintptr(unsafe.Pointer(&in.ID[0])),
		uintptr(unsafe.Pointer(&world)), uintptr(unsafe.Pointer(&rank)), uintptr(unsafe.Pointer(&blocking)))
	in.World, in.Rank, in.Blocking = int(world), int(rank), int(blocking)
	return in, err
}

// ReadCounts reads the stub's totals at path in this process.
func ReadCounts(path string) (Counts, error) {
	var v [9]int64
	err := callStub(path, "fakenccl_counts", uintptr(unsafe.Pointer(&v[0])))
	return Counts{LiveComms: v[0], Aborts: v[1], Sends: v[2], Recvs: v[3], AllGathers: v[4], Queued: v[5],
		Splits: v[6], LiveBlocking: v[7], BlockingSends: v[8]}, err
}

// Config is what the latest ncclCommInitRankConfig's config held: its
// size and version (-1 without a config) and its CTA policy (-2 unless
// it is a config of 2.28 or later).
type Config struct {
	Size, Version, CTAPolicy int64
}

// LastConfig reads the latest init's config the stub at path saw.
func LastConfig(path string) (Config, error) {
	var v [3]int64
	err := callStub(path, "fakenccl_last_config", uintptr(unsafe.Pointer(&v[0])))
	return Config{Size: v[0], Version: v[1], CTAPolicy: v[2]}, err
}

// Live is what the stub holds now: blocks of ncclMemAlloc not freed and
// windows registered and not deregistered.
type Live struct {
	MemAllocs, Windows int64
}

// ReadLive reads what the stub at path holds now in this process.
func ReadLive(path string) (Live, error) {
	var v [2]int64
	err := callStub(path, "fakenccl_live", uintptr(unsafe.Pointer(&v[0])))
	return Live{MemAllocs: v[0], Windows: v[1]}, err
}

// callStub calls the stub's accessor fn with args, pointers converted to
// uintptr, which uintptrescapes keeps on the heap and alive for the call.
//
//go:uintptrescapes
func callStub(path, fn string, args ...uintptr) error {
	lib, err := dl.Open(path)
	if err != nil {
		return fmt.Errorf("fakenccl: opening %s: %w", path, err)
	}
	defer lib.Close()
	sym, err := lib.Sym(fn)
	if err != nil {
		return fmt.Errorf("fakenccl: %s is not the stub: %w", path, err)
	}
	purego.SyscallN(sym, args...)
	return nil
}
