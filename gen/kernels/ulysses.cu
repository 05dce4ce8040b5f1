// Kernels of the ulysses collectives: SendRecvHeads, GatherHeads and AllGather
// over buffers shared with CUDA IPC, plus a data-free barrier used by Close.
//
// Compiled to PTX once per element width (ELEM_BYTES = 2 for bf16/fp16,
// 1 for fp8) by `go generate ./ptx`. The ops only move bytes, so the element
// width only decides the narrowest copy path.
//
// Protocol (docs/DESIGN.md, "The buffer and the protocol"):
//   1. START barrier (single-buffer mode only): block b tells block b of
//      every peer that this rank's stream has reached operation e, and waits
//      until every peer says the same. A peer that reached e has finished
//      everything it queued before e, including every read of the previous
//      contents of its buffer, so after the barrier we may overwrite it.
//      In double-buffer mode (the default) the data region has two halves
//      and operation e writes half e&1. Half e&1 last held the output of
//      e-2, and a peer read that output before its stream reached e-1, which
//      it did before it signalled the END of e-1, which we waited for before
//      we could start e: no start barrier is needed.
//   2. Copy: read the local input once (non-coherent loads, several in
//      flight per thread) and store each vector straight to its final place
//      in the owner's data region (the layout change is fused into the copy).
//   3. END barrier: block b publishes its stores and tells block b of every
//      peer; it then waits for every peer's block b. When all our blocks have
//      passed it, every peer's block has landed its stores in our buffer.
// Flags hold epochs, never counts: the writer stores the epoch with release
// semantics and the waiter compares with wrap-safe arithmetic, so a fast
// peer's next signal can only move a flag forward and never be miscounted.
// Each block keeps its own epoch counter in device memory and advances it
// itself, so a captured CUDA graph replays correctly.
// Every wait is bounded by %globaltimer (nanoseconds; independent of the SM
// clock). On expiry the kernel records {phase, peer, epoch} and returns: it
// never traps, because a trap would destroy the whole CUDA context.

#ifndef ELEM_BYTES
#error "compile with -DELEM_BYTES=1 or -DELEM_BYTES=2"
#endif

#define MAX_RANKS 8
#define MAX_BLOCKS 1024
// THREADS (the largest block the host launches) and UNROLL must match
// maxThreadsPerBlock and unroll in a2a; they are overridable only so
// bench/lab can time other choices. Loops use blockDim, not THREADS.
#ifndef THREADS
#define THREADS 512
#endif
#ifndef UNROLL
#define UNROLL 8
#endif

// Phases of a barrier; each owns one flag per (block, peer).
#define PHASE_START 0u
#define PHASE_END 1u
#define NUM_PHASES 2u

typedef unsigned int u32;
typedef unsigned long long u64;

// Local state at the end of each rank's buffer (only its owner reads it).
// Must match a2a/layout.go.
struct State {
    u32 epoch[MAX_BLOCKS];       // last epoch each block used
    int tokens[MAX_RANKS];       // T_r per rank
    int prefix[MAX_RANKS + 1];   // p_r, prefix[world] = T
    u32 timeout_claimed;         // first block to time out sets it; later launches return at once
};

// What the host reads after a timeout: pinned host memory mapped into the
// device. Written once, by the block that claimed it; code is written last.
struct Status {
    u32 code;   // 0: ok, 1: timed out
    u32 phase;
    u32 peer;
    u32 epoch;
    u32 block;
    u32 rank;
};

// The single kernel parameter, passed by value. Must match a2a/layout.go.
struct Args {
    u64 data[MAX_RANKS];    // data region of every rank's buffer, mapped here
    u64 signal[MAX_RANKS];  // signal area of every rank's buffer, mapped here
    u64 input;              // this rank's input tensor
    u64 state;              // this rank's State
    u64 status;             // device pointer of this rank's host-mapped Status
    u64 timeout_ns;         // how long one barrier may wait
    u64 half_bytes;         // offset of the second data half; 0: single buffer, start barrier needed
    u64 capacity;           // bytes of one data half: no store goes past it
    u32 rank;
    u32 world;
    u32 batch;
    u32 units;              // vectors per chunk (head ops) or per token row (AllGather)
    u32 active;             // blocks that copy and meet at barriers (the same on every rank)
    u32 reserved;
};

// ---- memory-model primitives ------------------------------------------------

// Store a flag so that everything this thread has observed (the block's
// stores, ordered by the fence and __syncthreads before it) is visible to a
// system-scope acquirer that reads the flag.
__device__ __forceinline__ void store_release_sys(u32 *p, u32 v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Read a flag written by another GPU; later loads and stores of this thread
// cannot move before it.
__device__ __forceinline__ u32 load_acquire_sys(const u32 *p) {
    u32 v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ u64 global_timer_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// Flags of one rank's signal area: [phase][block][peer].
__device__ __forceinline__ u32 flag_index(u32 phase, u32 block, u32 peer) {
    return (phase * MAX_BLOCKS + block) * MAX_RANKS + peer;
}

// ---- timeout reporting ------------------------------------------------------

__device__ void report_timeout(const Args &a, u32 phase, u32 peer, u32 epoch) {
    State *st = reinterpret_cast<State *>(a.state);
    if (atomicCAS(&st->timeout_claimed, 0u, 1u) != 0u) {
        return;  // another block already reported
    }
    volatile Status *s = reinterpret_cast<volatile Status *>(a.status);
    s->phase = phase;
    s->peer = peer;
    s->epoch = epoch;
    s->block = blockIdx.x;
    s->rank = a.rank;
    // The fields must reach host memory before the code that says they are valid.
    __threadfence_system();
    s->code = 1u;
    __threadfence_system();
}

// ---- the barrier ------------------------------------------------------------

// One block's half of a barrier with every peer. Thread p (< world, != rank)
// signals peer p and waits for peer p's signal. Returns false on timeout (for
// the whole block).
__device__ bool barrier(const Args &a, u32 phase, u32 epoch, int *failed) {
    // Every thread's stores happen before __syncthreads, which happens before
    // thread p's release store; a release at system scope is cumulative, so
    // a peer that acquires the flag also sees every store of this block. No
    // per-thread fence is needed (each one would wait for its own stores'
    // acknowledgements from across NVLink).
    __syncthreads();
    const u32 p = threadIdx.x;
    if (p < a.world && p != a.rank) {
        u32 *remote = reinterpret_cast<u32 *>(a.signal[p]) + flag_index(phase, blockIdx.x, a.rank);
        store_release_sys(remote, epoch);
        const u32 *mine = reinterpret_cast<const u32 *>(a.signal[a.rank]) + flag_index(phase, blockIdx.x, p);
        const u64 deadline = global_timer_ns() + a.timeout_ns;
        // Wrap-safe: the flag is behind while (flag - epoch) is negative.
        while (static_cast<int>(load_acquire_sys(mine) - epoch) < 0) {
            if (global_timer_ns() > deadline) {
                report_timeout(a, phase, p, epoch);
                *failed = 1;
                break;
            }
        }
    }
    __syncthreads();
    return *failed == 0;
}

// Shared per-block prologue: token counts into shared memory and the block's
// next epoch. Returns false when an earlier launch already timed out (the
// Comm is broken: do nothing rather than wait out another timeout).
struct Shared {
    u64 data[MAX_RANKS];  // destinations, indexed at run time: shared, not local memory
    int tokens[MAX_RANKS];
    int prefix[MAX_RANKS + 1];
    u32 epoch;
    int failed;
};

__device__ bool prologue(const Args &a, Shared &sh) {
    State *st = reinterpret_cast<State *>(a.state);
    const u32 p = threadIdx.x;
    u32 e = 0;
    if (p < a.world) {
        sh.tokens[p] = st->tokens[p];
        // Every rank's operation e writes the same half of every buffer.
        // Only this block touches its own counter, and only after the
        // __syncthreads below, so every reader sees the old value.
        e = st->epoch[blockIdx.x] + 1u;
        sh.data[p] = a.data[p] + ((e & 1u) ? a.half_bytes : 0ull);
    }
    if (p <= a.world) {
        sh.prefix[p] = st->prefix[p];
    }
    if (p == 0) {
        sh.failed = static_cast<int>(*reinterpret_cast<volatile u32 *>(&st->timeout_claimed));
        sh.epoch = e;
    }
    __syncthreads();
    if (p == 0) {
        st->epoch[blockIdx.x] = e;
    }
    return sh.failed == 0;
}

// What every operation does before its copy: the prologue, then the start
// barrier when the buffer has a single half.
//
// Every launched block advances its epoch, but only the first `active` ones
// copy and meet at barriers: small operations need few blocks, and fewer
// flags to wait for means less tail latency. `active` is computed from
// values every rank knows, so block b is active on all ranks or on none.
__device__ bool begin(const Args &a, Shared &sh) {
    if (!prologue(a, sh) || blockIdx.x >= a.active) {
        return false;
    }
    return a.half_bytes != 0ull || barrier(a, PHASE_START, sh.epoch, &sh.failed);
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
        const u32 c = j / units, u = j - c * units;
        const u32 r = c % world, bk = c / world;
        const u32 b = bk / max_tokens, k = bk - b * max_tokens;
        if (k >= static_cast<u32>(tokens[r])) {
            return false;
        }
        v = load_input(src + (static_cast<u64>(b) * total_tokens + prefix[r] + k) * units + u);
        return true;
    }
    __device__ void store(u32 j, const V &v) const {
        const u32 c = j / units, u = j - c * units;
        const u32 r = c % world, bk = c / world;
        const u32 b = bk / max_tokens, k = bk - b * max_tokens;
        const u64 at = ((static_cast<u64>(b) * tokens[r] + k) * world + rank) * units + u;
        if (at < limit) {
            reinterpret_cast<V *>(dst[r])[at] = v;
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

template <typename V>
__device__ __forceinline__ void send_recv_heads(const Args &a) {
    __shared__ Shared sh;
    if (!begin(a, sh)) {
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
    copy_vectors<V>(n, a.active, in, m);
    barrier(a, PHASE_END, sh.epoch, &sh.failed);
}

template <typename V>
__device__ __forceinline__ void gather_heads(const Args &a) {
    __shared__ Shared sh;
    if (!begin(a, sh)) {
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
    m.max_tokens = 0;
    for (u32 r = 0; r < a.world; r++) {
        m.max_tokens = max(m.max_tokens, static_cast<u32>(sh.tokens[r]));
    }
    const u32 n = a.batch * m.max_tokens * a.world * a.units;
    copy_vectors<V>(n, a.active, m, m);
    barrier(a, PHASE_END, sh.epoch, &sh.failed);
}

template <typename V>
__device__ __forceinline__ void all_gather(const Args &a) {
    __shared__ Shared sh;
    if (!begin(a, sh)) {
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
    copy_vectors<V>(n, a.active, in, m);
    barrier(a, PHASE_END, sh.epoch, &sh.failed);
}

// ---- entry points -----------------------------------------------------------
// One per operation and vector width: v16, v8, v4 and the element width
// (v2 for 2-byte types, v1 for 1-byte types). The host picks the widest one
// that the chunk size and the pointers' alignment allow.

#define ENTRIES(W, V)                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS) ulysses_send_recv_heads_v##W(const Args a) { \
        send_recv_heads<V>(a);                                                                     \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS) ulysses_gather_heads_v##W(const Args a) {    \
        gather_heads<V>(a);                                                                        \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS) ulysses_all_gather_v##W(const Args a) {      \
        all_gather<V>(a);                                                                          \
    }

ENTRIES(16, V16)
ENTRIES(8, V8)
ENTRIES(4, V4)
#if ELEM_BYTES == 2
ENTRIES(2, V2)
#else
ENTRIES(1, V1)
#endif

// A barrier with no data: Close runs it so that no peer is still signalling
// into this rank's buffer when it is unmapped and freed.
extern "C" __global__ void __launch_bounds__(THREADS) ulysses_barrier(const Args a) {
    __shared__ Shared sh;
    if (!prologue(a, sh) || !barrier(a, PHASE_START, sh.epoch, &sh.failed)) {
        return;
    }
    barrier(a, PHASE_END, sh.epoch, &sh.failed);
}
