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
// reference because so every entry's PTX is what it was with the loop
// written out at each caller (returning a value computed from a.world
// passed by value let nvcc drop a bound check and changed 30 entries).
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

// Read-only input: the non-coherent path keeps it out of the way of the
// stores (the input never aliases a buffer written during the launch).
template <typename V>
__device__ __forceinline__ V load_input(const V *p) {
    return __ldg(p);
}

// __ldg has overloads for the built-in vector types only; route ours through them.
template <>
__device__ __forceinline__ V16 load_input<V16>(const V16 *p) {
    uint4 v = __ldg(reinterpret_cast<const uint4 *>(p));
    V16 r = {v.x, v.y, v.z, v.w};
    return r;
}
template <>
__device__ __forceinline__ V8 load_input<V8>(const V8 *p) {
    uint2 v = __ldg(reinterpret_cast<const uint2 *>(p));
    V8 r = {v.x, v.y};
    return r;
}
template <>
__device__ __forceinline__ V4 load_input<V4>(const V4 *p) {
    V4 r = {__ldg(reinterpret_cast<const unsigned int *>(p))};
    return r;
}
#if ELEM_BYTES == 2
template <>
__device__ __forceinline__ V2 load_input<V2>(const V2 *p) {
    V2 r = {__ldg(reinterpret_cast<const unsigned short *>(p))};
    return r;
}
#else
template <>
__device__ __forceinline__ V1 load_input<V1>(const V1 *p) {
    V1 r = {__ldg(reinterpret_cast<const unsigned char *>(p))};
    return r;
}
#endif

// ---- where each input vector goes -------------------------------------------

// SendRecvHeads. Input [B, T_r, H, D] read in order (b, t, q, v): chunk
// c = (b*T_r + t)*P + q holds heads q*Hp.. of token t, and goes to rank q at
// token p_r + t of its [B, T, Hp, D] output. The input is read linearly and
// consecutive chunks go to different ranks, so every block spreads its
// stores over all links.
template <typename V>
struct SendRecvHeadsMap {
    const u64 *dst;  // Shared::data
    u64 limit;       // vectors in one data half
    u32 units, world, rank_tokens, total_tokens, rank_prefix;
    __device__ void store(u32 j, const V &v) const {
        const u32 c = j / units, u = j - c * units;
        const u32 q = c % world, row = c / world;
        const u32 b = row / rank_tokens, t = row - b * rank_tokens;
        const u64 at = (static_cast<u64>(b) * total_tokens + rank_prefix + t) * units + u;
        if (at < limit) {  // only ranks that disagree on the token counts could go past it
            reinterpret_cast<V *>(dst[q])[at] = v;
        }
    }
};

// Where vector j of GatherHeads' walk lies: chunk c = j / units of
// this rank's heads of one token, taken in the order (b, k, r) (below).
struct GatherIndex {
    u32 b, k, r, u;
};

// A divisor as the hardware divides: the face the index functions below
// take, which the wire's walks give with a faster division of their own
// (Divisor, wire.cuh).
struct Plain {
    u32 d;
    __device__ u32 div(u32 n) const { return n / d; }
    __device__ u32 rem(u32 n) const { return n % d; }
};

template <typename Div>
__device__ __forceinline__ GatherIndex gather_index_by(u32 j, const Div &units, const Div &world, const Div &max_tokens) {
    GatherIndex g;
    const u32 c = units.div(j);
    g.u = j - c * units.d;
    g.r = world.rem(c);
    const u32 bk = world.div(c);
    g.b = max_tokens.div(bk);
    g.k = bk - g.b * max_tokens.d;
    return g;
}

__device__ __forceinline__ GatherIndex gather_index(u32 j, u32 units, u32 world, u32 max_tokens) {
    return gather_index_by(j, Plain{units}, Plain{world}, Plain{max_tokens});
}

// GatherHeads. Input [B, T, Hp, D]: token t holds this rank's heads of a
// token owned by the rank r with p_r <= t < p_r + T_r, and goes to token
// t - p_r, heads rank*Hp.. of r's [B, T_r, H, D] output. To keep every
// link busy all the time, chunks are taken in the order (b, k, r) -- the
// k-th token of each rank in turn -- rather than in input order, which would
// copy all of one rank's tokens before the next's. With uneven counts some
// (k, r) have no token (k >= T_r): those indices are skipped.
template <typename V>
struct GatherHeadsMap {
    const u64 *dst;  // Shared::data
    const int *tokens;
    const int *prefix;
    const V *src;
    u64 limit;
    u32 units, world, rank, total_tokens, max_tokens;
    __device__ bool load(u32 j, V &v) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        if (g.k >= static_cast<u32>(tokens[g.r])) {
            return false;
        }
        v = load_input(src + (static_cast<u64>(g.b) * total_tokens + prefix[g.r] + g.k) * units + g.u);
        return true;
    }
    __device__ void store(u32 j, const V &v) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        const u64 at = ((static_cast<u64>(g.b) * tokens[g.r] + g.k) * world + rank) * units + g.u;
        if (at < limit) {
            reinterpret_cast<V *>(dst[g.r])[at] = v;
        }
    }
};

// AllGather. Input [B, T_r, H, D] read in order (b, t, v); token row (b, t)
// goes to row (b, p_r + t) of every rank's [B, T, H, D] output.
template <typename V>
struct AllGatherMap {
    const u64 *dst;  // Shared::data
    u64 limit;
    u32 units, world, rank_tokens, total_tokens, rank_prefix;
    __device__ void store(u32 j, const V &v) const {
        const u32 row = j / units, u = j - row * units;
        const u32 b = row / rank_tokens, t = row - b * rank_tokens;
        const u64 at = (static_cast<u64>(b) * total_tokens + rank_prefix + t) * units + u;
        if (at >= limit) {
            return;
        }
        for (u32 q = 0; q < world; q++) {
            reinterpret_cast<V *>(dst[q])[at] = v;
        }
    }
};

// ---- the general head operations --------------------------------------------
// Heads split unevenly (rank q holds heads heads[q]..heads[q+1]-1: H/P
// each, one more on the first H mod P ranks), inputs whose tokens are
// in_row vectors apart, and several tensors of one shape, tensor k's
// output region vectors after tensor k-1's. One head is head_units vectors.

// The rank holding head h: the first `extra` ranks hold base+1 heads
// (base1), the others base.
template <typename Div>
__device__ __forceinline__ u32 head_owner_by(u32 h, const Div &base1, const Div &base, u32 extra) {
    const u32 boundary = extra * base1.d;
    return h < boundary ? base1.div(h) : extra + base.div(h - boundary);
}

__device__ __forceinline__ u32 head_owner(u32 h, u32 base, u32 extra) {
    return head_owner_by(h, Plain{base + 1u}, Plain{base}, extra);
}

// SendRecvHeads, general. Input [B, T_r, H, D] (tokens in_row apart) read
// in order (b, t, h, v): head h of token t goes to rank q = head_owner(h),
// token p_r + t, head h - heads[q] of its [B, T, H_q, D] output. As in
// SendRecvHeadsMap, consecutive heads go to ranks in turn.
template <typename V>
struct GeneralSendMap {
    const u64 *dst;  // Shared::data
    const int *heads;
    const V *src;
    u64 limit, region;  // vectors
    u32 row_units, head_units, in_row, base, extra, rank_tokens, total_tokens, rank_prefix;
    __device__ bool load(u32 j, V &v) const {
        const u32 row = j / row_units, col = j - row * row_units;
        v = load_input(src + static_cast<u64>(row) * in_row + col);
        return true;
    }
    __device__ void store(u32 j, const V &v) const {
        const u32 row = j / row_units, col = j - row * row_units;
        const u32 h = col / head_units, u = col - h * head_units;
        const u32 q = head_owner(h, base, extra);
        const u32 first = static_cast<u32>(heads[q]), count = static_cast<u32>(heads[q + 1]) - first;
        const u32 b = row / rank_tokens, t = row - b * rank_tokens;
        const u64 at = region + ((static_cast<u64>(b) * total_tokens + rank_prefix + t) * count + (h - first)) * head_units + u;
        if (at < limit) {
            reinterpret_cast<V *>(dst[q])[at] = v;
        }
    }
};

// GatherHeads, general. Input [B, T, H_rank, D] (tokens in_row apart),
// walked in GatherHeadsMap's order (b, k, r): token p_r + k goes to token k
// of rank r's [B, T_r, H, D] output, heads heads[rank].. of it. units is
// this rank's heads times head_units; out_row is H * head_units.
template <typename V>
struct GeneralGatherMap {
    const u64 *dst;  // Shared::data
    const int *tokens;
    const int *prefix;
    const V *src;
    u64 limit, region;  // vectors
    u32 units, in_row, out_row, col, world, total_tokens, max_tokens;
    __device__ bool load(u32 j, V &v) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        if (g.k >= static_cast<u32>(tokens[g.r])) {
            return false;
        }
        v = load_input(src + (static_cast<u64>(g.b) * total_tokens + prefix[g.r] + g.k) * in_row + g.u);
        return true;
    }
    __device__ void store(u32 j, const V &v) const {
        const GatherIndex g = gather_index(j, units, world, max_tokens);
        const u64 at = region + (static_cast<u64>(g.b) * tokens[g.r] + g.k) * out_row + col + g.u;
        if (at < limit) {
            reinterpret_cast<V *>(dst[g.r])[at] = v;
        }
    }
};

// HeadAllGather. Input [B, T, H_rank, D] (tokens in_row apart) read in
// order (b, t, v); row (b, t) goes to heads heads[rank].. of row (b, t) of
// every rank's [B, T, H, D] output.
template <typename V>
struct HeadAllGatherMap {
    const u64 *dst;  // Shared::data
    const V *src;
    u64 limit, region;  // vectors
    u32 units, in_row, out_row, col, world;
    __device__ bool load(u32 j, V &v) const {
        const u32 row = j / units, u = j - row * units;
        v = load_input(src + static_cast<u64>(row) * in_row + u);
        return true;
    }
    __device__ void store(u32 j, const V &v) const {
        const u32 row = j / units, u = j - row * units;
        const u64 at = region + static_cast<u64>(row) * out_row + col + u;
        if (at >= limit) {
            return;
        }
        for (u32 q = 0; q < world; q++) {
            reinterpret_cast<V *>(dst[q])[at] = v;
        }
    }
};

// ---- the copy loop ----------------------------------------------------------

// Loads of the ops whose input is read in order: vector j of the input.
template <typename V>
struct LinearInput {
    const V *src;
    __device__ bool load(u32 j, V &v) const {
        v = load_input(src + j);
        return true;
    }
};

// Grid-stride over n vectors with the `active` blocks, UNROLL loads in
// flight per thread before the stores. One pass of the grid covers a
// contiguous window, so each warp's loads and stores are coalesced, and
// every block sees every destination.
template <typename V, typename In, typename Map>
__device__ __forceinline__ void copy_vectors(u32 n, u32 active, const In &in, const Map &map) {
    const u32 stride = active * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        V v[UNROLL];
        bool ok[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            ok[k] = j < n && in.load(j, v[k]);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            if (ok[k]) {
                map.store(i + k * stride, v[k]);
            }
        }
    }
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void send_recv_heads(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    SendRecvHeadsMap<V> m;
    m.dst = sh.data;
    m.limit = a.capacity / sizeof(V);
    m.units = a.units;
    m.world = a.world;
    m.rank_tokens = sh.tokens[a.rank];
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    const u32 n = a.batch * m.rank_tokens * a.world * a.units;
    const LinearInput<V> in = {reinterpret_cast<const V *>(a.input)};
    copy_vectors<V>(n, active, in, m);
    end(a, sh);
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void gather_heads(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GatherHeadsMap<V> m;
    m.dst = sh.data;
    m.tokens = sh.tokens;
    m.prefix = sh.prefix;
    m.src = reinterpret_cast<const V *>(a.input);
    m.limit = a.capacity / sizeof(V);
    m.units = a.units;
    m.world = a.world;
    m.rank = a.rank;
    m.total_tokens = sh.prefix[a.world];
    most_tokens(m.max_tokens, sh, a);
    const u32 n = a.batch * m.max_tokens * a.world * a.units;
    copy_vectors<V>(n, active, m, m);
    end(a, sh);
}

template <typename V, bool CAPTURED>
__device__ __forceinline__ void all_gather(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<CAPTURED>(a, sh, true);
    if (active == 0u) {
        return;
    }
    AllGatherMap<V> m;
    m.dst = sh.data;
    m.limit = a.capacity / sizeof(V);
    m.units = a.units;
    m.world = a.world;
    m.rank_tokens = sh.tokens[a.rank];
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    const u32 n = a.batch * m.rank_tokens * a.units;
    const LinearInput<V> in = {reinterpret_cast<const V *>(a.input)};
    copy_vectors<V>(n, active, in, m);
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
        copy_vectors<V>(n, active, m, m);
    }
}

template <typename V>
__device__ __forceinline__ void send_recv_heads_general(const Args &a) {
    __shared__ Shared sh;
    __shared__ int heads[MAX_RANKS + 1];
    if (threadIdx.x <= a.world) {
        heads[threadIdx.x] = a.heads[threadIdx.x];  // before begin's barrier
    }
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GeneralSendMap<V> m;
    m.dst = sh.data;
    m.heads = heads;
    m.limit = a.capacity / sizeof(V);
    m.head_units = a.head_units;
    m.row_units = a.units;
    m.in_row = a.in_row;
    m.base = static_cast<u32>(heads[a.world]) / a.world;
    m.extra = static_cast<u32>(heads[a.world]) - m.base * a.world;
    m.rank_tokens = sh.tokens[a.rank];
    m.total_tokens = sh.prefix[a.world];
    m.rank_prefix = sh.prefix[a.rank];
    copy_tensors<V>(a, a.batch * m.rank_tokens * m.row_units, active, m);
    end(a, sh);
}

// What the maps that write this rank's heads as columns of [.., H, D]
// rows share (GeneralGatherMap, HeadAllGatherMap): the destinations, the
// bound, the walk's row and the output's row and first column.
template <typename V, typename Map>
__device__ __forceinline__ void set_head_columns(Map &m, const Args &a, const Shared &sh) {
    m.dst = sh.data;
    m.limit = a.capacity / sizeof(V);
    m.units = a.units;
    m.in_row = a.in_row;
    m.out_row = static_cast<u32>(a.heads[a.world]) * a.head_units;
    m.col = static_cast<u32>(a.heads[a.rank]) * a.head_units;
    m.world = a.world;
}

template <typename V>
__device__ __forceinline__ void gather_heads_general(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    GeneralGatherMap<V> m;
    set_head_columns<V>(m, a, sh);
    m.tokens = sh.tokens;
    m.prefix = sh.prefix;
    m.total_tokens = sh.prefix[a.world];
    most_tokens(m.max_tokens, sh, a);
    copy_tensors<V>(a, a.batch * m.max_tokens * a.world * m.units, active, m);
    end(a, sh);
}

template <typename V>
__device__ __forceinline__ void head_all_gather_general(const Args &a) {
    __shared__ Shared sh;
    const u32 active = begin<true>(a, sh, true);
    if (active == 0u) {
        return;
    }
    HeadAllGatherMap<V> m;
    set_head_columns<V>(m, a, sh);
    copy_tensors<V>(a, a.batch * static_cast<u32>(sh.prefix[a.world]) * m.units, active, m);
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
