// Bulk-copy probe: how fast can few SMs push bytes into a peer GPU? It
// moves 64 MiB from each of two GPUs into the other at once (one process,
// peer access), on G blocks (one per SM), two ways:
//
//   threads: 512 threads per block, 16-byte loads and stores, 8 in flight
//            per thread (what the ulysses kernels do);
//   bulk:    one thread per block drives the Hopper bulk-copy unit: a
//            chunk is loaded into shared memory (cp.async.bulk, completing
//            on an mbarrier) and stored from there into the peer
//            (cp.async.bulk ... bulk_group), STAGES chunks in flight.
//
// It prints GB/s per direction for G in 16, 32, 132 and checks the bytes.
// Issue 15 asks 16 and 32 SMs to reach 85% and 95% of the all-SM rate.
//
//   nvcc -O3 -arch=sm_90 -o bulk bench/lab/bulk.cu && ./bulk
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ck.h"

static const size_t BYTES = 64ull << 20;

__global__ void __launch_bounds__(512) thread_copy(const uint4 *__restrict__ src, uint4 *dst, size_t n) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 7 * stride < n; i += 8 * stride) {
        uint4 v[8];
#pragma unroll
        for (int k = 0; k < 8; k++) v[k] = src[i + k * stride];
#pragma unroll
        for (int k = 0; k < 8; k++) dst[i + k * stride] = v[k];
    }
    for (; i < n; i += stride) dst[i] = src[i];
}

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    }
}

// bulk_copy: block b moves chunks b, b+G, b+2G, ... of CHUNK bytes, with
// STAGES shared-memory buffers: the load of chunk i+STAGES-1 is issued
// before chunk i's load is waited for, and a buffer is reloaded only once
// the store that read it has finished reading (wait_group.read).
template <int CHUNK, int STAGES>
__global__ void bulk_copy(const char *__restrict__ src, char *dst, size_t bytes) {
    extern __shared__ __align__(128) char smem[];
    __shared__ __align__(8) uint64_t bar[STAGES];
    if (threadIdx.x != 0) return;
    for (int s = 0; s < STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(&bar[s])));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    const size_t chunks = bytes / CHUNK;
    const size_t mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    auto chunk_of = [&](size_t i) { return (size_t)blockIdx.x + i * gridDim.x; };
    auto load = [&](size_t i) {
        int s = (int)(i % STAGES);
        uint32_t b = smem_addr(&bar[s]);
        asm volatile("{ .reg .b64 st; mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1; }" ::"r"(b), "r"(CHUNK)
                     : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                         smem_addr(smem + s * CHUNK)),
                     "l"(src + chunk_of(i) * CHUNK), "r"(CHUNK), "r"(b)
                     : "memory");
    };
    for (size_t i = 0; i < mine && i < STAGES - 1; i++) load(i);
    for (size_t i = 0; i < mine; i++) {
        if (i + STAGES - 1 < mine) {
            // Its buffer was last read by store i-1, the latest group.
            asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
            load(i + STAGES - 1);
        }
        int s = (int)(i % STAGES);
        mbar_wait(smem_addr(&bar[s]), (uint32_t)((i / STAGES) & 1));
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + chunk_of(i) * CHUNK),
                     "r"(smem_addr(smem + s * CHUNK)), "r"(CHUNK)
                     : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

struct Side {
    char *src, *dst;  // dst lives on the other GPU
    cudaStream_t s;
    cudaEvent_t a, b;
};

typedef void (*Launch)(Side &, int blocks);

template <int CHUNK, int STAGES>
static void launch_bulk(Side &d, int blocks) {
    bulk_copy<CHUNK, STAGES><<<blocks, 32, CHUNK * STAGES, d.s>>>(d.src, d.dst, BYTES);
}

static void launch_threads(Side &d, int blocks) {
    thread_copy<<<blocks, 512, 0, d.s>>>((const uint4 *)d.src, (uint4 *)d.dst, BYTES / 16);
}

// timed runs both directions at once iters times and returns GB/s per
// direction (the slower GPU's mean).
static double timed(Side *d, Launch f, int blocks, int iters) {
    for (int w = 0; w < 3; w++)
        for (int r = 0; r < 2; r++) {
            CK(cudaSetDevice(r));
            f(d[r], blocks);
        }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceSynchronize());
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaEventRecord(d[r].a, d[r].s));
        for (int i = 0; i < iters; i++) f(d[r], blocks);
        CK(cudaEventRecord(d[r].b, d[r].s));
    }
    float worst = 0;
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaEventSynchronize(d[r].b));
        CK(cudaGetLastError());
        float ms;
        CK(cudaEventElapsedTime(&ms, d[r].a, d[r].b));
        if (ms > worst) worst = ms;
    }
    return BYTES / (worst / iters * 1e-3) / 1e9;
}

static bool same(Side *d) {
    std::vector<char> a(BYTES), b(BYTES);
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(a.data(), d[r].src, BYTES, cudaMemcpyDefault));
        CK(cudaMemcpy(b.data(), d[r].dst, BYTES, cudaMemcpyDefault));
        if (memcmp(a.data(), b.data(), BYTES) != 0) return false;
    }
    return true;
}

static void poison(Side *d) {
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(1 - r));
        CK(cudaMemset(d[r].dst, 0xEE, BYTES));
        CK(cudaDeviceSynchronize());
    }
}

template <int CHUNK, int STAGES>
static void enable_smem() {
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaFuncSetAttribute(bulk_copy<CHUNK, STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize, CHUNK * STAGES));
    }
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20;
    Side d[2];
    char *bufs[2][2];
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        CK(cudaMalloc(&bufs[r][0], BYTES));
        CK(cudaMalloc(&bufs[r][1], BYTES));
        std::vector<uint32_t> h(BYTES / 4);
        for (size_t i = 0; i < h.size(); i++) h[i] = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 0x9e3779b9u);
        CK(cudaMemcpy(bufs[r][0], h.data(), BYTES, cudaMemcpyHostToDevice));
        CK(cudaStreamCreateWithFlags(&d[r].s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&d[r].a));
        CK(cudaEventCreate(&d[r].b));
    }
    for (int r = 0; r < 2; r++) {
        d[r].src = bufs[r][0];
        d[r].dst = bufs[1 - r][1];
    }
    enable_smem<16384, 4>();
    enable_smem<32768, 4>();
    enable_smem<8192, 8>();
    struct Variant {
        const char *name;
        Launch f;
    } vs[] = {
        {"threads 512x16B x8", launch_threads},
        {"bulk 16KiB x4", launch_bulk<16384, 4>},
        {"bulk 32KiB x4", launch_bulk<32768, 4>},
        {"bulk 8KiB x8", launch_bulk<8192, 8>},
    };
    int blocks[] = {16, 32, 132};
    printf("64 MiB each way at once, %d iterations; GB/s per direction (slower GPU)\n", iters);
    for (auto &v : vs) {
        poison(d);
        double all = 0;
        for (int g : blocks) {
            double bw = timed(d, v.f, g, iters);
            if (g == 132) all = bw;
            printf("%-20s blocks %3d: %6.1f GB/s\n", v.name, g, bw);
        }
        printf("%-20s bytes %s; 16/32 blocks need %.1f / %.1f GB/s for 85%% / 95%% of all\n", v.name,
               same(d) ? "ok" : "WRONG", 0.85 * all, 0.95 * all);
    }
    return 0;
}
