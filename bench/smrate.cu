// What one SM can move, apart from any collective: the rates of reading,
// writing and copying 128 MiB with 8, 16, 32, 64 and all SMs (one block
// each), with plain 16-byte loads and stores kept in flight per thread
// (loads at L2, all of a batch before its stores) and with Hopper's bulk
// copies through shared memory. It tells how far the kernels' rate on few
// SMs is from the SM's own (docs/BENCHMARKS.md, "What one SM can move").
// Not part of the library: a CUDA program of its own, for Hopper.
//
//     nvcc -O3 -arch=sm_90a -o smrate bench/smrate.cu && ./smrate
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

typedef unsigned int u32;
typedef unsigned long long u64;
struct __align__(16) V16 { u32 x, y, z, w; };

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ V16 ld_cg(const V16 *p) {
    V16 r;
    asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p) : "memory");
    return r;
}
__device__ __forceinline__ void st(V16 *p, V16 v) {
    asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}

// D loads in flight per thread, folded into one word so none is dead.
template <int D>
__global__ void read_k(const V16 *src, u32 n, u32 *sink) {
    const u32 stride = gridDim.x * blockDim.x;
    u32 acc = 0;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += D * stride) {
        V16 v[D];
#pragma unroll
        for (int k = 0; k < D; k++) {
            const u32 j = i + k * stride;
            v[k] = j < n ? ld_cg(src + j) : V16{0, 0, 0, 0};
        }
#pragma unroll
        for (int k = 0; k < D; k++) acc ^= v[k].x ^ v[k].y ^ v[k].z ^ v[k].w;
    }
    if (acc == 0x12345678u) sink[0] = acc;
}

__global__ void write_k(V16 *dst, u32 n) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) st(dst + i, V16{i, i, i, i});
}

// D loads, then D stores.
template <int D>
__global__ void copy_k(const V16 *src, V16 *dst, u32 n) {
    const u32 stride = gridDim.x * blockDim.x;
    for (u32 i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += D * stride) {
        V16 v[D];
#pragma unroll
        for (int k = 0; k < D; k++) {
            const u32 j = i + k * stride;
            if (j < n) v[k] = ld_cg(src + j);
        }
#pragma unroll
        for (int k = 0; k < D; k++) {
            const u32 j = i + k * stride;
            if (j < n) st(dst + j, v[k]);
        }
    }
}

// Bulk copies: one thread keeps STAGES chunks of CHUNK bytes loading into
// shared memory (each with its mbarrier) and stores each back out with a
// bulk store as it lands.
#define CHUNK 16384u
template <int STAGES>
__global__ void bulk_k(const char *src, char *dst, u32 chunks) {
    extern __shared__ __align__(128) char buf[];
    __shared__ __align__(8) u64 bar[STAGES];
    if (threadIdx.x != 0) return;
    const u32 sbuf = static_cast<u32>(__cvta_generic_to_shared(buf));
    const u32 sbar = static_cast<u32>(__cvta_generic_to_shared(bar));
    for (int s = 0; s < STAGES; s++) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(sbar + 8 * s));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const u32 mine = chunks > blockIdx.x ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
    auto load = [&](u32 k) {
        const u32 s = k % STAGES;
        const u64 c = blockIdx.x + static_cast<u64>(k) * gridDim.x;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sbar + 8 * s), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(sbuf + s * CHUNK),
                     "l"(src + c * CHUNK), "r"(CHUNK), "r"(sbar + 8 * s)
                     : "memory");
    };
    for (u32 k = 0; k < mine && k < STAGES; k++) load(k);
    for (u32 k = 0; k < mine; k++) {
        const u32 s = k % STAGES, parity = (k / STAGES) & 1u;
        asm volatile(
            "{ .reg .pred p; W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1; @!p bra W; }" ::"r"(sbar + 8 * s), "r"(parity)
            : "memory");
        const u64 c = blockIdx.x + static_cast<u64>(k) * gridDim.x;
        asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst + c * CHUNK), "r"(sbuf + s * CHUNK), "r"(CHUNK) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
        if (k + STAGES < mine) load(k + STAGES);
    }
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

static float median(std::vector<float> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <typename F>
static float time_us(F launch, int iters) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    for (int i = 0; i < 5; i++) launch();
    CK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < iters; i++) {
        CK(cudaEventRecord(a));
        launch();
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        float ms;
        CK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms * 1000.f);
    }
    CK(cudaGetLastError());
    return median(t);
}

int main() {
    const u64 bytes = 128ull << 20;
    const u32 n = bytes / 16;
    V16 *src, *dst;
    u32 *sink;
    CK(cudaMalloc(&src, bytes));
    CK(cudaMalloc(&dst, bytes));
    CK(cudaMalloc(&sink, 4));
    CK(cudaMemset(src, 1, bytes));
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int iters = 30;
    float ce = time_us([&] { CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, iters);
    printf("copy engine / driver memcpy 128 MiB: %.1f us (%.0f GB/s)\n", ce, bytes / ce / 1e3);
    CK(cudaFuncSetAttribute(bulk_k<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * CHUNK));
    CK(cudaFuncSetAttribute(bulk_k<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, 8 * CHUNK));
    CK(cudaFuncSetAttribute(bulk_k<12>, cudaFuncAttributeMaxDynamicSharedMemorySize, 12 * CHUNK));
    printf("%-22s %5s %10s %12s\n", "kernel", "SMs", "us", "GB/s an SM");
    const int counts[] = {8, 16, 32, 64, sms};
    for (int s : counts) {
        auto row = [&](const char *name, float us) { printf("%-22s %5d %10.1f %12.1f\n", name, s, us, bytes / us / 1e3 / s); };
        row("read<8>x512", time_us([&] { read_k<8><<<s, 512>>>(src, n, sink); }, iters));
        row("read<16>x512", time_us([&] { read_k<16><<<s, 512>>>(src, n, sink); }, iters));
        row("read<8>x1024", time_us([&] { read_k<8><<<s, 1024>>>(src, n, sink); }, iters));
        row("write_x512", time_us([&] { write_k<<<s, 512>>>(dst, n); }, iters));
        row("write_x1024", time_us([&] { write_k<<<s, 1024>>>(dst, n); }, iters));
        row("copy<8>x512", time_us([&] { copy_k<8><<<s, 512>>>(src, dst, n); }, iters));
        row("copy<16>x512", time_us([&] { copy_k<16><<<s, 512>>>(src, dst, n); }, iters));
        row("copy<8>x1024", time_us([&] { copy_k<8><<<s, 1024>>>(src, dst, n); }, iters));
        row("bulk<4>16K", time_us([&] { bulk_k<4><<<s, 32, 4 * CHUNK>>>((const char *)src, (char *)dst, bytes / CHUNK); }, iters));
        row("bulk<8>16K", time_us([&] { bulk_k<8><<<s, 32, 8 * CHUNK>>>((const char *)src, (char *)dst, bytes / CHUNK); }, iters));
        row("bulk<12>16K", time_us([&] { bulk_k<12><<<s, 32, 12 * CHUNK>>>((const char *)src, (char *)dst, bytes / CHUNK); }, iters));
    }
    // The copies must have copied.
    std::vector<unsigned char> h(1 << 20);
    CK(cudaMemcpy(h.data(), reinterpret_cast<char *>(dst) + bytes - h.size(), h.size(), cudaMemcpyDeviceToHost));
    for (unsigned char c : h) {
        if (c != 1) {
            printf("copy check FAILED\n");
            return 1;
        }
    }
    printf("copy check ok\n");
    return 0;
}
