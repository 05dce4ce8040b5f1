// Whether a flag-in-data ("LL") protocol makes small SendRecvHeads faster
// (issue 16). Two GPUs of one process, P = 2, B = 1, H = 32, D = 128, bf16,
// the same tokens on each rank; us per operation (the slower GPU's mean),
// launched one by one and replayed from a graph of 100 launches.
//
//   direct     today's kernel reduced to its bones: every block stores its
//              vectors straight into their place at the peer, releases its
//              flag there, and the last block to arrive waits for all of
//              the peer's flags (docs/DESIGN.md, "The protocol").
//   ll         every 16-byte vector for the peer travels as two 16-byte
//              stores of {data, flag, data, flag} (NVLink writes each 8
//              bytes at once, so a word whose flag is this operation's
//              carries this operation's data) into a staging area at the
//              peer; each block then receives its share of what the peer
//              sent (polls the staging, writes the output, clears the
//              staging once its share is complete), spinning at most
//              LL_SPIN_NS; the last block to finish receives every share a
//              block gave up on, so only one block ever waits unbounded,
//              as in direct. LL_SPIN_NS sets the spin (default 20000);
//              a spin longer than the run makes every block wait, which
//              is not safe beside other kernels that wait (docs/DESIGN.md)
//              but bounds what the protocol could gain.
// LL_TOKENS lists the tokens per rank to run (default 16,128,1024: 128 KiB,
// 1 MiB and 8 MiB per rank).
//   agg        direct, but each block counts itself in at the end with a
//              system-scope acq_rel atomic (cumulative over the block's
//              stores, which its barrier ordered before it) and only the
//              last signals the peer, once (LL_SKIP=1: only direct and agg,
//              over more block counts).
// Each variant's output is checked against the expected bytes after
// poisoning both halves, for both halves.
//
//   nvcc -O3 -arch=sm_90 -o llprobe bench/lab/llprobe.cu && ./llprobe [rounds]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ck.h"

typedef unsigned int u32;
typedef unsigned long long u64;

static const int UNITS = 16 * 128 * 2 / 16;  // 16-byte vectors of one rank's heads of a token
static const int UNROLL = 8;
static const int THREADS = 512;

struct Rank {
    const uint4 *in;   // [T, 2, UNITS] vectors: this rank's input
    uint4 *out[2];     // this rank's output halves, [2T, UNITS]
    uint4 *peer_out[2];
    uint4 *ll_mine[2];  // staging here, written by the peer: [T*UNITS] x 2 vectors
    uint4 *ll_peer[2];
    u64 *flag_mine, *flag_peer;  // [blocks]
    u32 *state;                  // [0] epoch, [1] arrived, [2 + b] done of block b
    int me, T;
    u64 spin_ns;
};

__device__ __forceinline__ void store_release_sys(u64 *p, u64 v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire_sys(const u64 *p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}
__device__ __forceinline__ u64 now_ns() {
    u64 t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
__device__ __forceinline__ void ll_store(uint4 *slot, uint4 v, u32 f) {
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(slot), "r"(v.x), "r"(f), "r"(v.y), "r"(f) : "memory");
    asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(slot + 1), "r"(v.z), "r"(f), "r"(v.w), "r"(f) : "memory");
}
__device__ __forceinline__ bool ll_load(const uint4 *slot, u32 f, uint4 &v) {
    uint4 a, b;
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(a.x), "=r"(a.y), "=r"(a.z), "=r"(a.w) : "l"(slot) : "memory");
    asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(b.x), "=r"(b.y), "=r"(b.z), "=r"(b.w) : "l"(slot + 1) : "memory");
    v = make_uint4(a.x, a.z, b.x, b.z);
    return a.y == f && a.w == f && b.y == f && b.w == f;
}

// store_direct: the block's share of operation e's vectors, each stored
// straight into its place in this rank's or the peer's output half e&1.
__device__ __forceinline__ void store_direct(const Rank &r, u32 e) {
    uint4 *dst[2];
    dst[r.me] = r.out[e & 1];
    dst[1 - r.me] = r.peer_out[e & 1];
    const u32 n = r.T * 2 * UNITS, stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            if (i + k * stride < n) v[k] = __ldg(r.in + i + k * stride);
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            if (j >= n) break;
            const u32 c = j / UNITS, u = j % UNITS, q = c & 1, t = c >> 1;
            dst[q][(r.me * r.T + t) * UNITS + u] = v[k];
        }
    }
}

__global__ void __launch_bounds__(THREADS) direct(Rank r) {
    __shared__ u32 e;
    __shared__ int last;
    if (threadIdx.x == 0) e = r.state[0] + 1;
    __syncthreads();
    if (threadIdx.x == blockDim.x - 1) last = atomicAdd(&r.state[1], 1u) + 1 == gridDim.x;
    store_direct(r, e);
    __syncthreads();
    if (threadIdx.x == 0) store_release_sys(&r.flag_peer[blockIdx.x], e);
    if (!last) return;
    for (u32 b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        while (load_acquire_sys(&r.flag_mine[b]) < e) {
        }
    __syncthreads();
    if (threadIdx.x == 0) {
        r.state[1] = 0;
        r.state[0] = e;
    }
}

// direct, but the blocks count themselves in at the end (after a system
// fence that makes their stores visible to the peer) and only the last one
// signals the peer, once, and waits for the peer's one flag: one flag per
// rank and operation instead of one per block.
__global__ void __launch_bounds__(THREADS) direct_agg(Rank r) {
    __shared__ u32 e;
    __shared__ int last;
    if (threadIdx.x == 0) e = r.state[0] + 1;
    __syncthreads();
    store_direct(r, e);
    __syncthreads();
    if (threadIdx.x == 0) {
        u32 old;
        asm volatile("atom.acq_rel.sys.global.add.u32 %0, [%1], 1;" : "=r"(old) : "l"(&r.state[1]) : "memory");
        last = old + 1 == gridDim.x;
        if (last) store_release_sys(&r.flag_peer[1023], e);  // not a block's: direct runs in turn
    }
    __syncthreads();
    if (!last) return;
    if (threadIdx.x == 0) {
        while (load_acquire_sys(&r.flag_mine[1023]) < e) {
        }
        r.state[1] = 0;
        r.state[0] = e;
    }
}

// Receives share b of the grid (the vectors a grid-stride walk gives block
// b) from the staging into the output, spinning at most spin_ns for any
// vector; returns whether the whole share arrived (every thread's).
__device__ bool receive_share(const Rank &r, u32 b, u32 e, u64 spin_ns) {
    const u32 n = r.T * UNITS, stride = gridDim.x * blockDim.x;
    const uint4 *ll = r.ll_mine[e & 1];
    uint4 *out = r.out[e & 1];
    const u32 peer = 1 - r.me;
    const u64 deadline = now_ns() + spin_ns;
    bool ok = true;
    for (u32 i = b * blockDim.x + threadIdx.x; ok && i < n; i += UNROLL * stride) {
        u32 pending = 0;
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            if (i + k * stride < n) pending |= 1u << k;
        while (pending != 0) {
#pragma unroll
            for (int k = 0; k < UNROLL; k++)
                if ((pending >> k & 1) && ll_load(ll + 2 * (i + k * stride), e, v[k])) pending &= ~(1u << k);
            if (pending != 0 && now_ns() > deadline) {
                ok = false;
                break;
            }
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            if (j < n && !(pending >> k & 1)) out[(peer * r.T) * UNITS + j] = v[k];
        }
    }
    if (!__syncthreads_and(ok)) return false;
    uint4 *clear = r.ll_mine[e & 1];
    for (u32 i = b * blockDim.x + threadIdx.x; i < n; i += stride) {
        clear[2 * i] = make_uint4(0, 0, 0, 0);
        clear[2 * i + 1] = make_uint4(0, 0, 0, 0);
    }
    return true;
}

__global__ void __launch_bounds__(THREADS) ll(Rank r) {
    __shared__ u32 e;
    __shared__ int last;
    if (threadIdx.x == 0) e = r.state[0] + 1;
    __syncthreads();
    const u32 n = r.T * 2 * UNITS, stride = gridDim.x * blockDim.x;
    uint4 *out = r.out[e & 1];
    uint4 *ll = r.ll_peer[e & 1];
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++)
            if (i + k * stride < n) v[k] = __ldg(r.in + i + k * stride);
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            if (j >= n) break;
            const u32 c = j / UNITS, u = j % UNITS, q = c & 1, t = c >> 1;
            if (q == static_cast<u32>(r.me))
                out[(r.me * r.T + t) * UNITS + u] = v[k];
            else
                ll_store(ll + 2 * (t * UNITS + u), v[k], e);
        }
    }
    if (receive_share(r, blockIdx.x, e, r.spin_ns) && threadIdx.x == 0) r.state[2 + blockIdx.x] = e;
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(&r.state[1], 1u) + 1 == gridDim.x;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    // One read of every block's done word at once; the shares are redone
    // one by one only when one is missing.
    int missing = 0;
    for (u32 b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        missing |= *reinterpret_cast<volatile u32 *>(&r.state[2 + b]) != e;
    if (__syncthreads_or(missing))
        for (u32 b = 0; b < gridDim.x; b++)
            if (*reinterpret_cast<volatile u32 *>(&r.state[2 + b]) != e) receive_share(r, b, e, ~0ull >> 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        r.state[1] = 0;
        r.state[0] = e;
    }
}

typedef void (*Kernel)(Rank);
static const int OPS = 100;

struct Gpu {
    Rank r;
    cudaStream_t s;
    cudaEvent_t a, b;
};

static float perOp(Gpu *g, Kernel k, int blocks, bool graph, int rounds) {
    cudaGraphExec_t exec[2];
    auto launch = [&](int r) { k<<<blocks, THREADS, 0, g[r].s>>>(g[r].r); };
    if (graph)
        for (int r = 0; r < 2; r++) {
            CK(cudaSetDevice(r));
            cudaGraph_t gr;
            CK(cudaStreamBeginCapture(g[r].s, cudaStreamCaptureModeThreadLocal));
            for (int i = 0; i < OPS; i++) launch(r);
            CK(cudaStreamEndCapture(g[r].s, &gr));
            CK(cudaGraphInstantiateWithFlags(&exec[r], gr, 0));
            CK(cudaGraphDestroy(gr));
        }
    auto round = [&](int r) {
        if (graph)
            CK(cudaGraphLaunch(exec[r], g[r].s));
        else
            for (int i = 0; i < OPS; i++) launch(r);
    };
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        round(r);
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaStreamSynchronize(g[r].s));
        CK(cudaEventRecord(g[r].a, g[r].s));
    }
    for (int i = 0; i < rounds; i++)
        for (int r = 0; r < 2; r++) {
            CK(cudaSetDevice(r));
            round(r);
        }
    float worst = 0;
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaEventRecord(g[r].b, g[r].s));
        CK(cudaEventSynchronize(g[r].b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, g[r].a, g[r].b));
        worst = ms > worst ? ms : worst;
        if (graph) CK(cudaGraphExecDestroy(exec[r]));
    }
    return worst * 1e3f / (rounds * OPS);
}

// check poisons both output halves, runs two operations and compares both
// halves with what they must hold; returns the number of wrong vectors.
static long check(Gpu *g, Kernel k, int blocks, const std::vector<std::vector<uint4>> &in, int T) {
    const size_t out_bytes = size_t(2) * T * UNITS * sizeof(uint4);
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaStreamSynchronize(g[r].s));
        for (int h = 0; h < 2; h++) CK(cudaMemset(g[r].r.out[h], 0xab, out_bytes));
        CK(cudaDeviceSynchronize());
    }
    for (int op = 0; op < 2; op++)
        for (int r = 0; r < 2; r++) {
            CK(cudaSetDevice(r));
            k<<<blocks, THREADS, 0, g[r].s>>>(g[r].r);
        }
    long bad = 0;
    std::vector<uint4> got(2 * T * UNITS);
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaStreamSynchronize(g[r].s));
        for (int h = 0; h < 2; h++) {
            CK(cudaMemcpy(got.data(), g[r].r.out[h], out_bytes, cudaMemcpyDeviceToHost));
            for (int s = 0; s < 2; s++)
                for (int t = 0; t < T; t++)
                    for (int u = 0; u < UNITS; u++)
                        bad += memcmp(&got[(s * T + t) * UNITS + u], &in[s][(t * 2 + r) * UNITS + u], 16) != 0;
        }
    }
    return bad;
}

int main(int argc, char **argv) {
    const int rounds = argc > 1 ? atoi(argv[1]) : 20;
    const int maxT = 1024;  // 8 MiB of input per rank
    const size_t in_v = size_t(maxT) * 2 * UNITS, out_v = size_t(2) * maxT * UNITS, ll_v = size_t(2) * maxT * UNITS;
    Gpu g[2];
    std::vector<std::vector<uint4>> host(2, std::vector<uint4>(in_v));
    u32 seed = 12345;
    for (auto &h : host)
        for (auto &v : h) {
            u32 *w = &v.x;
            for (int i = 0; i < 4; i++) w[i] = seed = seed * 1664525u + 1013904223u;
        }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        Rank &k = g[r].r;
        uint4 *in;
        CK(cudaMalloc(&in, in_v * 16));
        CK(cudaMemcpy(in, host[r].data(), in_v * 16, cudaMemcpyHostToDevice));
        k.in = in;
        for (int h = 0; h < 2; h++) {
            CK(cudaMalloc(&k.out[h], out_v * 16));
            CK(cudaMalloc(&k.ll_mine[h], ll_v * 16));
            CK(cudaMemset(k.ll_mine[h], 0, ll_v * 16));
        }
        CK(cudaMalloc(&k.flag_mine, 1024 * 8));
        CK(cudaMemset(k.flag_mine, 0, 1024 * 8));
        CK(cudaMalloc(&k.state, 1040 * 4));
        CK(cudaMemset(k.state, 0, 1040 * 4));
        k.me = r;
        CK(cudaStreamCreateWithFlags(&g[r].s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&g[r].a));
        CK(cudaEventCreate(&g[r].b));
    }
    for (int r = 0; r < 2; r++) {
        for (int h = 0; h < 2; h++) {
            g[r].r.peer_out[h] = g[1 - r].r.out[h];
            g[r].r.ll_peer[h] = g[1 - r].r.ll_mine[h];
        }
        g[r].r.flag_peer = g[1 - r].r.flag_mine;
    }
    const char *spins = getenv("LL_SPIN_NS");
    std::vector<int> tokens;
    for (char *t = strtok(getenv("LL_TOKENS") ? strdup(getenv("LL_TOKENS")) : strdup("16,128,1024"), ","); t; t = strtok(0, ","))
        tokens.push_back(atoi(t) > maxT ? maxT : atoi(t));
    printf("us per operation, both GPUs, %d x %d operations; wrong = wrong vectors after poisoning\n", rounds, OPS);
    for (int T : tokens) {
        for (int r = 0; r < 2; r++) {
            g[r].r.T = T;
            g[r].r.spin_ns = spins ? strtoull(spins, 0, 10) : 20000;
        }
        std::vector<int> granules = {4096, 8192, 16384, 32768};
        if (getenv("LL_SKIP")) granules = {4096, 8192, 16384, 32768, 65536};
        if (getenv("LL_ONLY")) granules = {2048, 4096, 8192, 16384};
        for (int granule : granules) {
            int blocks = (T * 2 * UNITS * 16 + granule - 1) / granule;
            if (blocks > 132) blocks = 132;
            struct {
                const char *name;
                Kernel k;
            } vs[] = {{"direct", direct}, {"agg", direct_agg}, {"ll", ll}};
            for (auto &v : vs) {
                if (getenv("LL_SKIP") && v.k == ll) continue;
                if (getenv("LL_ONLY") && v.k == direct_agg) continue;
                float one = perOp(g, v.k, blocks, false, rounds);
                float gr = perOp(g, v.k, blocks, true, rounds);
                long bad = check(g, v.k, blocks, host, T);
                printf("%5d KiB  granule %5d  %3d blocks  %-7s launched %7.2f  graph %7.2f  wrong %ld\n", T * 8, granule,
                       blocks, v.name, one, gr, bad);
            }
        }
    }
    return 0;
}
