// Kernels of the ulysses collectives: SendRecvHeads, GatherHeads and AllGather
// over buffers shared with CUDA IPC, plus the start barrier of the
// single-buffer mode and the farewell Close sends.
//
// Compiled to PTX once per element width (ELEM_BYTES = 2 for bf16/fp16,
// 1 for fp8) by `go generate ./ptx`. The ops only move bytes, so the element
// width only decides the narrowest copy path. A third build (-DWIRE,
// ELEM_BYTES = 2, sm_90 (Hopper) and later: ISA 7.8 has the fp8 conversions for sm_90 only) holds the fp8 wire's entries instead
// (wire.cuh): the same protocol, with rows quantized on the way.
//
// Protocol (docs/DESIGN.md, "The protocol" says why it is safe):
//   1. Start: each active block reads the epoch e and counts itself in.
//   2. Copy: each active block reads its part of the local input once and
//      stores every vector straight to its final place in the owner's data
//      half e&1 (the layout change is fused into the copy; the host's
//      choice of half is checked against it). Halves alternate, so no
//      block waits before writing: the half was last read two operations
//      ago (with a single half, ulysses_start ran first and met every peer).
//   3. Signal: each active block publishes its stores and stores {epoch,
//      signature} into its flag at every peer.
//   4. Wait: only the LAST block to count itself in waits, for every flag
//      of every peer's active blocks, then advances the epoch. No other
//      block ever waits, and every other block had started before it, so a
//      waiting block never keeps a block it depends on out of an SM: any
//      number of Comms can run at once, whatever their grids.
// Flags hold epochs, never counts, so a fast peer's next signal only moves
// a flag forward. The signature names the operation and its shape: a
// waiter that finds the peer at the same epoch with another signature
// reports that the ranks ran different operations instead of a result.
// A peer that closed says so in its farewell word; a waiter that sees it
// fails the operation instead of taking the close for the operation.
// Every wait is bounded by %globaltimer. On expiry the kernel records what
// it waited for and returns: it never traps (a trap destroys the context).
// A wait also ends when the host sets the abort word (Close while a Sync
// is blocked).

#ifndef ELEM_BYTES
#error "compile with -DELEM_BYTES=1 or -DELEM_BYTES=2"
#endif

// The constants and structures the host shares (internal/kernelabi),
// generated from their one description: see the header.
#include "abi.cuh"

// How often a waiting thread whose flag is behind reads the peer's bye
// word: reading it at every poll doubled the acquire loads on the path
// that sees the flag arrive.
#define BYE_POLL_NS 2000ull

// How often a waiting warp reads the host's abort word (over PCIe, so not
// at every poll): a wait Close ends takes at most about this much longer.
// Every 50 us cost SendRecvHeads 1.4 us (0.7%) at 128 MiB, whose waiter
// polls for about 190 us; every 1 ms costs nothing measurable.
#define ABORT_POLL_NS 1000000ull

// ---- memory-model primitives ------------------------------------------------

// Store a flag so that everything this thread has observed (the block's
// stores, ordered by the __syncthreads before it) is visible to a
// system-scope acquirer that reads the flag.
__device__ __forceinline__ void store_release_sys(u64 *p, u64 v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ void store_release_sys32(u32 *p, u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Read a flag written by another GPU; later loads and stores of this thread
// cannot move before it. (Polling with relaxed loads and one fence.acq_rel.sys
// per thread after them measured slower.)
__device__ __forceinline__ u64 load_acquire_sys(const u64 *p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ u32 load_acquire_sys32(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Count a block in (see begin). Relaxed, and done by a thread that signals
// no peer, so it waits for no fence.
__device__ __forceinline__ u32 arrive(u32 *p) {
    u32 old;
    asm volatile("atom.relaxed.gpu.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(p) : "memory");
    return old;
}

__device__ __forceinline__ u32 load_relaxed_sys32(const u32 *p) {
    u32 v;
    asm volatile("ld.relaxed.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ u64 global_timer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__device__ __forceinline__ Signals *signals_of(const Args &a, u32 r) {
    return reinterpret_cast<Signals *>(a.signal[r]);
}

__device__ __forceinline__ u64 pack_flag(u32 epoch, u32 sig) {
    return static_cast<u64>(sig) << 32 | epoch;
}

// ---- failure reporting ------------------------------------------------------

__device__ void report(const Args &a, u32 code, u32 phase, u32 peer, u32 epoch, u32 block, u32 sig, u32 peer_sig) {
    State *st = reinterpret_cast<State *>(a.state);
    if (atomicCAS(&st->claimed, 0u, 1u) != 0u) {
        return;  // another block already reported
    }
    volatile Status *s = reinterpret_cast<volatile Status *>(a.status);
    s->phase = phase;
    s->peer = peer;
    s->epoch = epoch;
    s->block = block;
    s->rank = a.rank;
    s->sig = sig;
    s->peer_sig = peer_sig;
    // The fields must reach host memory before the code that says they are valid.
    __threadfence_system();
    s->code = code;
    __threadfence_system();
}

// A peer that said bye closed its Comm (or is closing it): it will not
// take part in any operation again. Acquire: on true, everything the peer
// published before its bye is visible.
__device__ __forceinline__ bool peer_left(const Args &a, u32 p) {
    return load_acquire_sys32(&signals_of(a, a.rank)->bye[p]) != 0u;
}

// Whether the host asked the waits to end (Close during a blocked Sync).
// A read of host memory costs a PCIe round trip, so a waiting thread reads
// it only every ABORT_POLL_NS, and with leader_only only the first active
// lane of its warp does (the others learn of it through the block's
// failed flag).
__device__ __forceinline__ bool abort_requested(const Args &a, u64 now, u64 *next_check, bool leader_only) {
    if (now < *next_check) {
        return false;
    }
    *next_check = now + ABORT_POLL_NS;
    if (leader_only && (threadIdx.x & 31u) != static_cast<u32>(__ffs(__activemask()) - 1)) {
        return false;
    }
    return load_relaxed_sys32(&reinterpret_cast<const Status *>(a.status)->abort) != 0u;
}

// ---- waiting ----------------------------------------------------------------

// Wait until every peer's blocks 0..nblocks-1 have signalled epoch e (or
// later) in phase, with the same signature as ours. The threads of the
// block share the (block, peer) flags. On failure the first failing thread
// reports and sets *failed; the others stop soon after. Returns whether
// the whole wait succeeded.
__device__ bool wait_for_peers(const Args &a, u32 phase, u32 e, u32 nblocks, u32 sig, int *failed) {
    const u32 n = nblocks * a.world;
    const u64 started = global_timer_ns();
    const u64 deadline = started + a.timeout_ns;
    u64 next_abort_check = started + ABORT_POLL_NS;
    const Signals *mine = signals_of(a, a.rank);
    for (u32 i = threadIdx.x; i < n; i += blockDim.x) {
        const u32 b = i / a.world, p = i - b * a.world;
        if (p == a.rank) {
            continue;
        }
        const u64 *flag = &mine->flag[phase][b][p];
        u64 next_bye_check = started + BYE_POLL_NS;
        for (;;) {
            u64 v = load_acquire_sys(flag);
            const u64 now = global_timer_ns();
            if (static_cast<int>(static_cast<u32>(v) - e) < 0 && now >= next_bye_check) {
                next_bye_check = now + BYE_POLL_NS;
                if (peer_left(a, p)) {
                    // A peer's bye comes after all its signals: read the
                    // flag again, now that the bye is seen, before calling
                    // it gone.
                    v = load_acquire_sys(flag);
                    if (static_cast<int>(static_cast<u32>(v) - e) < 0) {
                        report(a, STATUS_PEER_CLOSED, phase, p, e, b, sig, 0u);
                        *failed = 1;
                        break;
                    }
                }
            }
            // Wrap-safe: the flag is behind while (flag - e) is negative.
            // A peer ahead of us (epoch e+1) checked our signature at e.
            if (static_cast<int>(static_cast<u32>(v) - e) >= 0) {
                if (static_cast<u32>(v) == e && static_cast<u32>(v >> 32) != sig) {
                    report(a, STATUS_MISMATCH, phase, p, e, b, sig, static_cast<u32>(v >> 32));
                    *failed = 1;
                }
                break;
            }
            if (*reinterpret_cast<volatile int *>(failed) != 0) {
                break;
            }
            if (now > deadline) {
                report(a, STATUS_TIMEOUT, phase, p, e, b, sig, 0u);
                *failed = 1;
                break;
            }
            if (abort_requested(a, now, &next_abort_check, true)) {
                report(a, STATUS_ABORTED, phase, p, e, b, sig, 0u);
                *failed = 1;
                break;
            }
        }
        if (*reinterpret_cast<volatile int *>(failed) != 0) {
            break;
        }
    }
    __syncthreads();
    return *failed == 0;
}

// Store {e, sig} into flag (phase, block) of every peer. Thread p signals
// peer p. Every store this block made before the __syncthreads that must
// precede this call is visible to a peer that acquires the flag: the
// release is cumulative over what the block's barrier ordered before it.
__device__ __forceinline__ void signal_peers(const Args &a, u32 phase, u32 e, u32 sig) {
    const u32 p = threadIdx.x;
    if (p < a.world && p != a.rank) {
        store_release_sys(&signals_of(a, p)->flag[phase][blockIdx.x][a.rank], pack_flag(e, sig));
    }
}

// ---- the operation's frame --------------------------------------------------

struct Shared {
    u64 data[MAX_RANKS];  // destinations, indexed at run time: shared, not local memory
    int tokens[MAX_RANKS];
    int prefix[MAX_RANKS + 1];
    int gone[MAX_RANKS];  // gone[p]: peer p said bye before this operation wrote anything
    u32 epoch;
    u32 active;  // a.active, or computed from the live counts
    u32 sig;     // a.sig, with the live counts' hash mixed in when captured
    int claimed;
    int failed;
    int last;
};

// FNV-1a over the eight bytes of v, as the host's fnvAdd.
__device__ __forceinline__ u32 fnv_add(u32 h, u64 v) {
    for (int i = 0; i < 8; i++) {
        h = (h ^ static_cast<u32>((v >> (8 * i)) & 0xffull)) * 16777619u;
    }
    return h;
}

// Sets most to the largest token count of any rank, from the counts in
// shared memory. It reads the world size from a and writes through a
// reference: returning a value computed from a.world passed by value let
// nvcc drop a bound check.
__device__ __forceinline__ void most_tokens(u32 &most, const Shared &sh, const Args &a) {
    most = 0;
    for (u32 q = 0; q < a.world; q++) {
        most = max(most, static_cast<u32>(sh.tokens[q]));
    }
}

// What every active block does before its copy: the epoch of this
// operation, the token counts into shared memory (from the arguments, or
// for a CAPTURED operation from the Live table as it is now), the
// destinations, and the checks that the Comm is not broken, that no peer
// has left and that the host chose the half this epoch writes (else it
// writes nothing). All loads are issued before one barrier. Blocks past
// the active count return; it is computed from values every rank knows,
// so block b copies on all ranks or on none.
// With count, the block then counts itself in: the last block to do so
// (every other one has started, so it keeps no block of this kernel out
// of an SM) will wait for the peers at the end. It counts in after it has
// read the epoch, and so has every other active block, before the last
// one advances it (an inactive block of a captured operation may read it
// later, so only active blocks report). Returns the number of active
// blocks, or 0 when this block does not take part.
// Captured operations have entries of their own (CAPTURED): the Live path
// compiled into every entry cost 0.3 us per operation at 1 MiB.
template <bool CAPTURED>
__device__ u32 begin(const Args &a, Shared &sh, bool count) {
    const Live *live = CAPTURED ? reinterpret_cast<const Live *>(a.live) : nullptr;
    if (live == nullptr && blockIdx.x >= a.active) {
        return 0u;
    }
    const State *st = reinterpret_cast<const State *>(a.state);
    const u32 p = threadIdx.x;
    if (p < a.world) {
        // Written by the last block of the previous operation, which
        // finished before this launch began (stream order).
        const u32 e = st->epoch + 1u;
        int tokens = a.tokens[p];  // read first: a select between the two would copy Args to local memory
        if (live != nullptr) {
            tokens = *reinterpret_cast<const volatile int *>(&live->tokens[p]);
        }
        sh.tokens[p] = tokens;
        // Operation e writes half e&1, so that halves alternate in the
        // order operations run (graph replays included). Taking the
        // half from a.half instead made GatherHeads 3 us slower at 128 MiB;
        // the host's choice is checked below.
        sh.data[p] = a.data[p] + ((e & 1u) ? a.half_bytes : 0ull);
        // Relaxed: a bye seen here only stops the operation.
        sh.gone[p] = p != a.rank && load_relaxed_sys32(&signals_of(a, a.rank)->bye[p]) != 0u;
        if (p == 0) {
            sh.epoch = e;
            sh.claimed = static_cast<int>(*reinterpret_cast<const volatile u32 *>(&st->claimed));
            sh.failed = 0;
            // The host returns a view in the half it chose: when that is
            // not e&1, its count and the device's differ by an odd number
            // of operations (a graph with an odd number of this Comm's
            // operations replayed), and two operations in a row would
            // write one half, a peer's second overwriting this rank's first
            // view while it is read.
            // Reported below, once this block knows it takes part.
            if (a.half_bytes != 0ull && a.half != (e & 1u)) {
                sh.claimed = 1;
            }
        }
    }
    if (p <= a.world) {
        int prefix = a.prefix[p];
        if (live != nullptr) {
            prefix = *reinterpret_cast<const volatile int *>(&live->prefix[p]);
        }
        sh.prefix[p] = prefix;
    }
    if (p == MAX_RANKS + 1) {
        sh.sig = live != nullptr ? fnv_add(a.sig, *reinterpret_cast<const volatile u32 *>(&live->token_hash)) : a.sig;
    }
    __syncthreads();
    u32 active = a.active;
    if (live != nullptr) {
        u32 most;
        most_tokens(most, sh, a);
        if (a.walk_total != 0u) {
            most = static_cast<u32>(sh.prefix[a.world]);
        }
        const u64 bytes = most * a.group_row;
        const u64 blocks = max(min((bytes + SMALL_GRANULE - 1ull) / SMALL_GRANULE, static_cast<u64>(FEW_BLOCKS)),
                               (bytes + LARGE_GRANULE - 1ull) / LARGE_GRANULE);
        active = static_cast<u32>(max(1ull, min(blocks, static_cast<u64>(gridDim.x))));
        if (blockIdx.x >= active) {
            return 0u;
        }
    }
    if (threadIdx.x == 0) {
        sh.active = active;  // read after end's barrier
    }
    // Only a block that takes part reports what it found. A captured
    // operation's block learns that only here, and one past the active
    // count may start after the last active block has advanced the epoch:
    // it would read the next operation's epoch (a half out of turn that
    // is not) and a bye a peer said after this operation.
    if (p < a.world && sh.gone[p]) {
        report(a, STATUS_PEER_CLOSED, PHASE_START, p, sh.epoch, blockIdx.x, a.sig, 0u);
    }
    if (p == 0 && a.half_bytes != 0ull && a.half != (sh.epoch & 1u)) {
        report(a, STATUS_HALF_REUSED, PHASE_START, a.rank, sh.epoch, blockIdx.x, a.sig, 0u);
    }
    bool ok = sh.claimed == 0;
    for (u32 q = 0; q < a.world; q++) {
        ok = ok && !sh.gone[q];
    }
    if (ok && count && threadIdx.x == blockDim.x - 1) {  // never a signalling thread: blockDim > MAX_RANKS
        sh.last = arrive(&reinterpret_cast<State *>(a.state)->arrived) + 1u == active;
    }
    return ok ? active : 0u;
}

// What every active block does after its copy: signal every peer and, in
// the block that counted itself in last, wait for every peer's blocks and
// advance the epoch.
__device__ void end(const Args &a, Shared &sh) {
    __syncthreads();  // the block's stores are issued before its signals; sh.last is set
    signal_peers(a, PHASE_END, sh.epoch, sh.sig);
    if (!sh.last) {
        return;
    }
    wait_for_peers(a, PHASE_END, sh.epoch, sh.active, sh.sig, &sh.failed);
    if (threadIdx.x == 0) {
        State *st = reinterpret_cast<State *>(a.state);
        st->arrived = 0u;
        st->epoch = sh.epoch;
    }
}

// ---- vector types -----------------------------------------------------------

struct __align__(16) V16 { u32 x, y, z, w; };
struct __align__(8) V8 { u32 x, y; };
struct V4 { u32 x; };
#if ELEM_BYTES == 2
struct V2 { unsigned short x; };
#else
struct V1 { unsigned char x; };
#endif

// Read-only input, read once: at L2 (.cg: no line of it is read again
// from L1) and on the coherent path. With the non-coherent one (__ldg)
// ptxas knows a load aliases no store, and moved each store up to its own
// load: a thread then waited for every load before issuing the next, one
// vector in flight instead of UNROLL. These loads keep the stores behind
// them, and the memory clobber keeps nvcc from moving either.
template <typename V>
__device__ __forceinline__ V load_input(const V *p);

template <>
__device__ __forceinline__ V16 load_input<V16>(const V16 *p) {
    V16 r;
    asm volatile("ld.global.cg.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p)
                 : "memory");
    return r;
}
template <>
__device__ __forceinline__ V8 load_input<V8>(const V8 *p) {
    V8 r;
    asm volatile("ld.global.cg.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p) : "memory");
    return r;
}
template <>
__device__ __forceinline__ V4 load_input<V4>(const V4 *p) {
    V4 r;
    asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(r.x) : "l"(p) : "memory");
    return r;
}
#if ELEM_BYTES == 2
template <>
__device__ __forceinline__ V2 load_input<V2>(const V2 *p) {
    V2 r;
    asm volatile("ld.global.cg.u16 %0, [%1];" : "=h"(r.x) : "l"(p) : "memory");
    return r;
}
#else
template <>
__device__ __forceinline__ V1 load_input<V1>(const V1 *p) {
    unsigned short x;
    asm volatile("ld.global.cg.u8 %0, [%1];" : "=h"(x) : "l"(p) : "memory");
    V1 r = {static_cast<unsigned char>(x)};
    return r;
}
#endif

#include "walks.cuh"

// ---- the operations ---------------------------------------------------------
// Each runs divide_ahead before begin, whose barrier publishes the
// divisors, and walks its input with the divisors it needs.

// What every map takes from the frame: its input, the destinations and
// the bound.
template <typename V, typename Map>
__device__ __forceinline__ void set_base(Map &m, const Args &a, const Shared &sh, u64 src) {
    m.src = reinterpret_cast<const V *>(src);
    m.dst = sh.data;
    m.limit = a.capacity / sizeof(V);
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void send_recv_heads(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    divide_ahead<CAPTURED>(a, div);
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    SendRecvHeadsMap<V> m;
    set_base<V>(m, a, sh, a.input);
    m.units = div[DIV_UNITS];
    m.world = div[DIV_WORLD];
    m.rank_tokens = div[DIV_RANK_TOKENS];
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    const u32 n = a.batch * static_cast<u32>(sh.tokens[a.rank]) * a.world * a.units;
    copy_vectors<V>(n, active, m);
    end(a, sh);
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void gather_heads(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    divide_ahead<CAPTURED>(a, div);
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GatherHeadsMap<V> m;
    set_base<V>(m, a, sh, a.input);
    m.tokens = sh.tokens;
    m.prefix = sh.prefix;
    m.units = div[DIV_UNITS];
    m.world = div[DIV_WORLD];
    m.max_tokens = div[DIV_MOST];
    m.rank = a.rank;
    m.total_tokens = sh.prefix[a.world];
    u32 most;  // not max_tokens.d, which is 1 where every count is 0
    most_tokens(most, sh, a);
    copy_vectors<V>(a.batch * most * a.world * a.units, active, m);
    end(a, sh);
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void all_gather(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    divide_ahead<CAPTURED>(a, div);
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    AllGatherMap<V> m;
    set_base<V>(m, a, sh, a.input);
    m.world = a.world;
    m.units = div[DIV_UNITS];
    m.rank_tokens = div[DIV_RANK_TOKENS];
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    const u32 n = a.batch * static_cast<u32>(sh.tokens[a.rank]) * a.units;
    copy_vectors<V>(n, active, m);
    end(a, sh);
}

// Every tensor of a general operation in turn, each walked by all active
// blocks: n vectors of tensor k from inputs[k] into region k.
template <typename V, typename Map>
__device__ __forceinline__ void copy_tensors(const Args &a, u32 n, u32 active, Map &m) {
    const u64 region = a.region / sizeof(V);
    for (u32 k = 0; k < a.tensors; k++) {
        m.src = reinterpret_cast<const V *>(a.inputs[k]);
        m.region = k * region;
        copy_vectors<V>(n, active, m);
    }
}

template <typename V>
__device__ __forceinline__ void send_recv_heads_general(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    __shared__ int heads[MAX_RANKS + 1];
    if (threadIdx.x <= a.world) {
        heads[threadIdx.x] = a.heads[threadIdx.x];  // before begin's barrier
    }
    divide_ahead<true>(a, div);
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GeneralSendMap<V> m;
    set_base<V>(m, a, sh, a.input);
    m.heads = heads;
    m.row_units = div[DIV_UNITS];
    m.head_units = div[DIV_HEAD_UNITS];
    m.base = div[DIV_BASE];
    m.base1 = div[DIV_BASE1];
    m.rank_tokens = div[DIV_RANK_TOKENS];
    m.in_row = a.in_row;
    m.extra = static_cast<u32>(heads[a.world]) - m.base.d * a.world;
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    copy_tensors<V>(a, a.batch * static_cast<u32>(sh.tokens[a.rank]) * a.units, active, m);
    end(a, sh);
}

// What the maps that write this rank's heads as columns of [.., H, D]
// rows share (GeneralGatherMap, HeadAllGatherMap): the walk's row and the
// output's row and first column.
template <typename V, typename Map>
__device__ __forceinline__ void set_head_columns(Map &m, const Args &a, const Shared &sh, const Divisor *div) {
    set_base<V>(m, a, sh, a.input);
    m.units = div[DIV_UNITS];
    m.in_row = a.in_row;
    m.out_row = static_cast<u32>(a.heads[a.world]) * a.head_units;
    m.col = static_cast<u32>(a.heads[a.rank]) * a.head_units;
}

template <typename V>
__device__ __forceinline__ void gather_heads_general(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    divide_ahead<true>(a, div);
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GeneralGatherMap<V> m;
    set_head_columns<V>(m, a, sh, div);
    m.tokens = sh.tokens;
    m.prefix = sh.prefix;
    m.world = div[DIV_WORLD];
    m.max_tokens = div[DIV_MOST];
    m.total_tokens = sh.prefix[a.world];
    u32 most;  // not max_tokens.d, which is 1 where every count is 0
    most_tokens(most, sh, a);
    copy_tensors<V>(a, a.batch * most * a.world * a.units, active, m);
    end(a, sh);
}

template <typename V>
__device__ __forceinline__ void head_all_gather_general(const Args &a) {
    __shared__ Shared sh;
    __shared__ Divisor div[DIVISORS];
    divide_ahead<true>(a, div);
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    HeadAllGatherMap<V> m;
    set_head_columns<V>(m, a, sh, div);
    m.world = a.world;
    copy_tensors<V>(a, a.batch * static_cast<u32>(sh.prefix[a.world]) * a.units, active, m);
    end(a, sh);
}

#ifdef WIRE
// The fp8 wire's build (ulysses_wire.ptx) holds its own entries only.
#include "wire.cuh"
#else

// ---- entry points -----------------------------------------------------------
// One per operation and vector width: v16, v8, v4 and the element width
// (v2 for 2-byte types, v1 for 1-byte types). The host picks the widest one
// that the chunk size and the pointers' alignment allow. Each has a twin
// for captured operations (ulysses_<op>_captured_v<W>), which reads the
// token counts from the Live table. The general head operations
// (ulysses_<op>_general_v<W>, HeadAllGather only in that form) check at
// run time whether they were captured.

#define ENTRY(OP, V, NAME, CAPTURED)                                                           \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(const Args a) { OP<V, CAPTURED>(a); }

#define GENERAL(OP, V, NAME) \
    extern "C" __global__ void __launch_bounds__(THREADS) NAME(const Args a) { OP<V>(a); }

#define ENTRIES(W, V)                                                                          \
    ENTRY(send_recv_heads, V, ulysses_send_recv_heads_v##W, false)                         \
    ENTRY(gather_heads, V, ulysses_gather_heads_v##W, false)                               \
    ENTRY(all_gather, V, ulysses_all_gather_v##W, false)                                   \
    ENTRY(send_recv_heads, V, ulysses_send_recv_heads_captured_v##W, true)                 \
    ENTRY(gather_heads, V, ulysses_gather_heads_captured_v##W, true)                       \
    ENTRY(all_gather, V, ulysses_all_gather_captured_v##W, true)                          \
    GENERAL(send_recv_heads_general, V, ulysses_send_recv_heads_general_v##W)             \
    GENERAL(gather_heads_general, V, ulysses_gather_heads_general_v##W)                   \
    GENERAL(head_all_gather_general, V, ulysses_head_all_gather_general_v##W)

ENTRIES(16, V16)
ENTRIES(8, V8)
ENTRIES(4, V4)
#if ELEM_BYTES == 2
ENTRIES(2, V2)
#else
ENTRIES(1, V1)
#endif

// The start barrier of the single-buffer mode, launched (one block) before
// each operation's copy: every peer has reached this operation, so it has
// finished everything it queued before, including every read of the
// previous contents of its buffer. A failure claims the Comm, and the copy
// launched after it then writes nothing.
extern "C" __global__ void __launch_bounds__(THREADS) ulysses_start(const Args a) {
    __shared__ Shared sh;
    if (begin<true>(a, sh, false) == 0u) {
        return;
    }
    signal_peers(a, PHASE_START, sh.epoch, sh.sig);
    wait_for_peers(a, PHASE_START, sh.epoch, 1u, sh.sig, &sh.failed);
}

// The copy-engine mode's barrier (one block), launched after the copies
// that moved this rank's bytes into every rank's data half: stream order
// makes them complete before it starts. It takes the part of an
// operation's last block: the checks of begin, a signal to every peer
// (a release, after the copies), the wait for every peer's signal of the
// same epoch, and the epoch's advance. Its flag is block 0's, as for an
// operation of one active block, so it never waits for more.
extern "C" __global__ void __launch_bounds__(THREADS) ulysses_sync(const Args a) {
    __shared__ Shared sh;
    if (begin<true>(a, sh, false) == 0u) {
        return;
    }
    if (threadIdx.x == 0) {
        sh.last = 1;
    }
    end(a, sh);
}

// Close's farewell (one block): tell every peer that this rank will write
// nothing more into its buffer and take part in no operation again, then,
// when a.active is 1, wait until every peer has said the same, so that no
// peer is still writing into this rank's buffer when it is freed.
extern "C" __global__ void __launch_bounds__(THREADS) ulysses_close(const Args a) {
    const u32 p = threadIdx.x;
    if (p < a.world && p != a.rank) {
        // Everything this rank stored into peer p (earlier kernels on this
        // stream) is ordered before the bye.
        __threadfence_system();
        store_release_sys32(&signals_of(a, p)->bye[a.rank], 1u);
        if (a.active != 0u) {
            const u64 started = global_timer_ns();
            const u64 deadline = started + a.timeout_ns;
            u64 next_abort_check = started + ABORT_POLL_NS;
            while (!peer_left(a, p)) {
                const u64 now = global_timer_ns();
                if (now > deadline) {
                    report(a, STATUS_TIMEOUT, PHASE_CLOSE, p, 0u, 0u, 0u, 0u);
                    break;
                }
                if (abort_requested(a, now, &next_abort_check, false)) {
                    report(a, STATUS_ABORTED, PHASE_CLOSE, p, 0u, 0u, 0u, 0u);
                    break;
                }
            }
        }
    }
}

#endif  // WIRE
