// SendRecvHeads probe: what holds the head exchange back on 16 and 32
// SMs? Two GPUs of one process (peer access) each run SendRecvHeads of
// 128 MiB (B=1, T_r=16384, H=32, D=128, bf16: half of it stays, half
// crosses) at once, with the copy loop written three ways:
//
//   per-vector: the ulysses kernels' way, every 16-byte vector's
//               destination computed on its own (four integer divisions);
//   per-chunk:  a warp takes a whole chunk (one token's heads for one rank,
//               256 vectors) and computes its destination once;
//   halves:     no layout at all: the first half of the input to the peer,
//               the second to this GPU, linearly (the bytes of the exchange
//               with none of its arithmetic).
//
// Then the hybrid: the SMs store only the chunks bound for the peer while a
// copy engine moves this rank's own chunks (one 2-D copy on a second
// stream), and those remote stores alone.
//
// No barrier, no signals: only the data movement. It prints us per
// operation (the slower GPU) and checks per-chunk's bytes against
// per-vector's. bench/lab/bulk.cu showed 16 blocks fill the link when only
// remote stores are made (docs/lab/gpu-runs.md run 40).
//
//   nvcc -O3 -arch=sm_90 -o srhprobe bench/lab/srhprobe.cu && ./srhprobe
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ck.h"

typedef uint32_t u32;
typedef uint64_t u64;

static const u32 P = 2, T_R = 16384, H = 32, D = 128, ES = 2;
static const u32 UNITS = H / P * D * ES / 16;          // vectors per chunk: 256
static const u64 N = (u64)T_R * H * D * ES / 16;       // input vectors per rank
static const u64 BYTES = N * 16;                       // 128 MiB
static const int UNROLL = 8;

struct Out {
    uint4 *dst[P];  // every rank's output, [T, H/P, D]
    // The shape, as kernel arguments: the ulysses kernels divide by
    // run-time values, which the compiler cannot turn into multiplies.
    u32 units, world, rank_tokens;
};

// load_unrolled loads vectors i, i+stride, ... (UNROLL of them, those
// below n) of src into v, all before any is used.
__device__ __forceinline__ void load_unrolled(const uint4 *__restrict__ src, u32 i, u32 stride, u32 n, uint4 *v) {
#pragma unroll
    for (int k = 0; k < UNROLL; k++) {
        const u32 j = i + k * stride;
        if (j < n) v[k] = src[j];
    }
}

// per-vector: SendRecvHeadsMap and copy_vectors, as in gen/kernels/ulysses.cu.
// REMOTE skips this rank's own chunks (for the hybrid: a copy engine moves
// them beside).
template <bool REMOTE>
__global__ void __launch_bounds__(512) per_vector(const uint4 *__restrict__ src, Out o, u32 rank) {
    const u32 n = (u32)N, stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        uint4 v[UNROLL];
        if (REMOTE) {
#pragma unroll
            for (int k = 0; k < UNROLL; k++) {
                const u32 j = i + k * stride;
                if (j < n && (j / o.units) % o.world != rank) v[k] = src[j];
            }
        } else {
            load_unrolled(src, i, stride, n, v);
        }
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            if (j >= n) continue;
            const u32 c = j / o.units, u = j - c * o.units;
            const u32 q = c % o.world, row = c / o.world;
            if (REMOTE && q == rank) continue;
            const u32 b = row / o.rank_tokens, t = row - b * o.rank_tokens;
            const u64 at = ((u64)b * (o.world * o.rank_tokens) + rank * o.rank_tokens + t) * o.units + u;
            o.dst[q][at] = v[k];
        }
    }
}

// copy_chunk: a warp's lanes copy a chunk's units vectors, 8 each a round,
// all loads before the stores.
__device__ __forceinline__ void copy_chunk(const uint4 *from, uint4 *to, u32 units, u32 lane) {
    for (u32 u0 = 0; u0 < units; u0 += 32u * UNROLL) {
        uint4 v[UNROLL];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) v[k] = from[u0 + k * 32u + lane];
#pragma unroll
        for (int k = 0; k < UNROLL; k++) to[u0 + k * 32u + lane] = v[k];
    }
}

// per-chunk: warp w takes chunks w, w+W, ...; its lanes copy the chunk's
// 256 vectors.
__global__ void __launch_bounds__(512) per_chunk(const uint4 *__restrict__ src, Out o, u32 rank) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = gridDim.x * (blockDim.x >> 5);
    const u32 chunks = (u32)(N / o.units);
    for (u32 c = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); c < chunks; c += warps) {
        const u32 q = c % o.world, row = c / o.world;
        const u32 b = row / o.rank_tokens, t = row - b * o.rank_tokens;
        const uint4 *from = src + (u64)c * o.units;
        uint4 *to = o.dst[q] + ((u64)b * (o.world * o.rank_tokens) + rank * o.rank_tokens + t) * o.units;
        copy_chunk(from, to, o.units, lane);
    }
}

// halves: the first half of the input to the peer, the second to this GPU,
// at the same offsets as per-vector's loop would take them.
__global__ void __launch_bounds__(512) halves(const uint4 *__restrict__ src, Out o, u32 rank) {
    const u32 n = (u32)N, half = n / 2, stride = gridDim.x * blockDim.x;
    uint4 *peer = o.dst[1 - rank], *mine = o.dst[rank];
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += UNROLL * stride) {
        uint4 v[UNROLL];
        load_unrolled(src, i, stride, n, v);
#pragma unroll
        for (int k = 0; k < UNROLL; k++) {
            const u32 j = i + k * stride;
            if (j < half)
                peer[j] = v[k];
            else if (j < n)
                mine[j - half] = v[k];
        }
    }
}

// per-chunk-remote: per-chunk over the chunks bound for other ranks only
// (the hybrid).
__global__ void __launch_bounds__(512) per_chunk_remote(const uint4 *__restrict__ src, Out o, u32 rank) {
    const u32 lane = threadIdx.x & 31u;
    const u32 warps = gridDim.x * (blockDim.x >> 5);
    const u32 remote = (u32)(N / o.units) / o.world * (o.world - 1);  // chunks bound elsewhere
    for (u32 k0 = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5); k0 < remote; k0 += warps) {
        const u32 row = k0 / (o.world - 1), qi = k0 - row * (o.world - 1);
        const u32 q = qi < rank ? qi : qi + 1, c = row * o.world + q;
        const u32 b = row / o.rank_tokens, t = row - b * o.rank_tokens;
        const uint4 *from = src + (u64)c * o.units;
        uint4 *to = o.dst[q] + ((u64)b * (o.world * o.rank_tokens) + rank * o.rank_tokens + t) * o.units;
        copy_chunk(from, to, o.units, lane);
    }
}

typedef void (*Kernel)(const uint4 *, Out, u32);

struct Rank {
    uint4 *src, *out;
    cudaStream_t s, s2;
    cudaEvent_t a, b, fork, join;
};

// launch enqueues one operation of rank r: k on its stream and, with
// local, this rank's own chunks as one 2-D copy-engine copy on a second
// stream forked from and joined back to the first (the hybrid).
static void launch(Rank *rk, int r, Kernel k, Out o, int blocks, int threads, bool local) {
    Rank &d = rk[r];
    if (local) {
        CK(cudaEventRecord(d.fork, d.s));
        CK(cudaStreamWaitEvent(d.s2, d.fork, 0));
        const size_t row = UNITS * 16;  // one token's heads for one rank
        CK(cudaMemcpy2DAsync((char *)d.out + (size_t)r * T_R * row, row, (const char *)d.src + r * row, P * row, row,
                             T_R, cudaMemcpyDeviceToDevice, d.s2));
    }
    k<<<blocks, threads, 0, d.s>>>(d.src, o, r);
    if (local) {
        CK(cudaEventRecord(d.join, d.s2));
        CK(cudaStreamWaitEvent(d.s, d.join, 0));
    }
}

static float timed(Rank *rk, Kernel k, int blocks, int threads, int iters, bool local = false) {
    Out o = {{rk[0].out, rk[1].out}, UNITS, P, T_R};
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        for (int w = 0; w < 3; w++) launch(rk, r, k, o, blocks, threads, local);
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaStreamSynchronize(rk[r].s));
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaEventRecord(rk[r].a, rk[r].s));
        for (int i = 0; i < iters; i++) launch(rk, r, k, o, blocks, threads, local);
        CK(cudaEventRecord(rk[r].b, rk[r].s));
    }
    float worst = 0;
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaEventSynchronize(rk[r].b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, rk[r].a, rk[r].b));
        if (ms > worst) worst = ms;
    }
    return worst / iters * 1e3f;
}

static std::vector<char> outputs(Rank *rk) {
    std::vector<char> all(2 * BYTES);
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(all.data() + r * BYTES, rk[r].out, BYTES, cudaMemcpyDeviceToHost));
    }
    return all;
}

static void poison(Rank *rk) {
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaMemset(rk[r].out, 0xEE, BYTES));
        CK(cudaDeviceSynchronize());
    }
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    Rank rk[2];
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        CK(cudaMalloc(&rk[r].src, BYTES));
        CK(cudaMalloc(&rk[r].out, BYTES));
        std::vector<uint32_t> h(BYTES / 4);
        for (size_t i = 0; i < h.size(); i++) h[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 0x9e3779b9u);
        CK(cudaMemcpy(rk[r].src, h.data(), BYTES, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&rk[r].s, cudaStreamNonBlocking));
        CK(cudaStreamCreateWithFlags(&rk[r].s2, cudaStreamNonBlocking));
        CK(cudaEventCreateWithFlags(&rk[r].fork, cudaEventDisableTiming));
        CK(cudaEventCreateWithFlags(&rk[r].join, cudaEventDisableTiming));
        CK(cudaEventCreate(&rk[r].a));
        CK(cudaEventCreate(&rk[r].b));
    }
    struct {
        const char *name;
        Kernel k;
    } vs[] = {{"per-vector", per_vector<false>}, {"per-chunk", per_chunk}, {"halves", halves}};
    printf("SendRecvHeads data movement, 128 MiB a rank, both GPUs at once, %d iterations\n", iters);
    std::vector<char> want;
    for (auto &v : vs) {
        poison(rk);
        for (int blocks : {16, 32, 132}) {
            int threads = blocks < 132 ? 512 : 256;
            float us = timed(rk, v.k, blocks, threads, iters);
            printf("%-11s blocks %3d x %3d: %7.1f us  %6.1f GB/s walked\n", v.name, blocks, threads, us, BYTES / (us * 1e-6) / 1e9);
        }
        if (v.k == per_vector<false>) {
            want = outputs(rk);
        } else if (v.k == per_chunk) {
            printf("per-chunk bytes %s\n", outputs(rk) == want ? "equal per-vector's" : "DIFFER from per-vector's");
        }
    }
    // The hybrid: SMs store the remote chunks only, a copy engine moves the
    // local half beside them; and the remote stores alone, for the bound.
    struct {
        const char *name;
        Kernel k;
    } hs[] = {{"vector+CE", per_vector<true>}, {"chunk+CE", per_chunk_remote}};
    for (auto &v : hs) {
        poison(rk);
        for (int blocks : {8, 16, 32, 132}) {
            int threads = blocks < 132 ? 512 : 256;
            float us = timed(rk, v.k, blocks, threads, iters, true);
            float alone = timed(rk, v.k, blocks, threads, iters, false);
            printf("%-11s blocks %3d x %3d: %7.1f us  %6.1f GB/s walked; remote stores alone %7.1f us\n", v.name, blocks,
                   threads, us, BYTES / (us * 1e-6) / 1e9, alone);
        }
        poison(rk);
        timed(rk, v.k, 16, 512, 1, true);
        printf("%s bytes %s\n", v.name, outputs(rk) == want ? "equal per-vector's" : "DIFFER from per-vector's");
    }
    return 0;
}
