// Device time of one small exchange's skeleton (issue 16): two GPUs of one
// process run, back to back, kernels that do nothing but the protocol's
// barrier: every block stores an epoch into its flag on the peer (release,
// system scope) and one block waits for all of the peer's (acquire). Per
// operation, the slower GPU's mean over many, for an empty kernel, 1 block,
// 8 blocks and 132 blocks; each launched one by one (cuLaunchKernel costs
// 3.2-4.0 us of host time on this machine: run 42), replayed from a CUDA
// graph of 100 launches (no host in the way), and replayed from a graph
// with programmatic dependent launch (each kernel's blocks start while the
// previous one finishes; griddepcontrol.wait before the barrier).
//
//   nvcc -O3 -arch=sm_90 -o pingpong bench/lab/pingpong.cu && ./pingpong
#include <cstdio>
#include <cstdlib>

#include "ck.h"

typedef unsigned long long u64;

struct Flags {
    u64 *mine;  // [blocks] this GPU's flags, written by the peer
    u64 *peer;  // the peer's flags, written by this GPU
    u64 *epoch; // this GPU's operation count (device memory)
};

__device__ __forceinline__ void store_release_sys(u64 *p, u64 v) {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}
__device__ __forceinline__ u64 load_acquire_sys(const u64 *p) {
    u64 v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__global__ void empty(Flags) {}

// barrier: the epoch is read by every block (the previous kernel wrote it
// before this one began), each block signals its peer flag, block 0 waits
// for the peer's blocks and advances the epoch. With pdl, the blocks let
// the next kernel launch at once and wait for this one's predecessor
// before touching anything.
template <bool PDL>
__global__ void barrier(Flags f) {
    if (PDL) {
        asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
        asm volatile("griddepcontrol.wait;" ::: "memory");
    }
    const u64 e = *f.epoch + 1;
    __syncthreads();
    if (threadIdx.x == 0) store_release_sys(&f.peer[blockIdx.x], e);
    if (blockIdx.x != 0) return;
    for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
        while (load_acquire_sys(&f.mine[b]) < e) {
        }
    __syncthreads();
    if (threadIdx.x == 0) *f.epoch = e;
}

typedef void (*Kernel)(Flags);

static const int OPS = 100;

struct Gpu {
    Flags f;
    cudaStream_t s;
    cudaEvent_t a, b;
};

static void enqueue(Gpu &g, Kernel k, int blocks, bool pdl) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = blocks;
    cfg.blockDim = 256;
    cfg.stream = g.s;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    CK(cudaLaunchKernelEx(&cfg, k, g.f));
}

// perOp times rounds of OPS kernels on both GPUs at once, launched one by
// one or (graph) captured once and replayed; returns the slower GPU's us
// per kernel.
static float perOp(Gpu *g, Kernel k, int blocks, bool graph, bool pdl, int rounds) {
    cudaGraphExec_t exec[2];
    if (graph) {
        for (int r = 0; r < 2; r++) {
            CK(cudaSetDevice(r));
            cudaGraph_t gr;
            CK(cudaStreamBeginCapture(g[r].s, cudaStreamCaptureModeThreadLocal));
            for (int i = 0; i < OPS; i++) enqueue(g[r], k, blocks, pdl);
            CK(cudaStreamEndCapture(g[r].s, &gr));
            CK(cudaGraphInstantiateWithFlags(&exec[r], gr, 0));
            CK(cudaGraphDestroy(gr));
        }
    }
    auto round = [&](int r) {
        if (graph)
            CK(cudaGraphLaunch(exec[r], g[r].s));
        else
            for (int i = 0; i < OPS; i++) enqueue(g[r], k, blocks, pdl);
    };
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        round(r);  // warm-up
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaStreamSynchronize(g[r].s));
    }
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
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

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 20;
    Gpu g[2];
    u64 *flags[2];
    for (int r = 0; r < 2; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        CK(cudaMalloc(&flags[r], 1024 * sizeof(u64)));
        CK(cudaMemset(flags[r], 0, 1024 * sizeof(u64)));
        CK(cudaMalloc(&g[r].f.epoch, sizeof(u64)));
        CK(cudaMemset(g[r].f.epoch, 0, sizeof(u64)));
        CK(cudaStreamCreateWithFlags(&g[r].s, cudaStreamNonBlocking));
        CK(cudaEventCreate(&g[r].a));
        CK(cudaEventCreate(&g[r].b));
    }
    for (int r = 0; r < 2; r++) {
        g[r].f.mine = flags[r];
        g[r].f.peer = flags[1 - r];
    }
    printf("us per operation, both GPUs, %d x %d operations\n", rounds, OPS);
    struct {
        const char *name;
        Kernel k;
        int blocks;
    } vs[] = {{"empty, 1 block", empty, 1}, {"barrier, 1 block", barrier<false>, 1},
              {"barrier, 8 blocks", barrier<false>, 8}, {"barrier, 132 blocks", barrier<false>, 132}};
    for (auto &v : vs) {
        float one = perOp(g, v.k, v.blocks, false, false, rounds);
        float gr = perOp(g, v.k, v.blocks, true, false, rounds);
        float pdl = perOp(g, v.k == empty ? empty : barrier<true>, v.blocks, true, true, rounds);
        printf("%-22s launched %6.2f   graph %6.2f   graph+PDL %6.2f\n", v.name, one, gr, pdl);
    }
    return 0;
}
