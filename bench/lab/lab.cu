// Kernel lab: times the ulysses kernels directly from CUDA C++, with no Go
// host in the way, on two GPUs of one process (peer pointers instead of IPC
// handles; the kernels cannot tell). It exists to compare compile-time
// choices (THREADS, UNROLL) and block counts quickly on the GPU machine:
//
//   nvcc -O3 -arch=sm_90 -DELEM_BYTES=2 -DTHREADS=512 -DUNROLL=8 -o lab bench/lab/lab.cu
//   ./lab [iters]
//
// It prints, per operation, size and block count, the mean time per
// operation over iters back-to-back launches on both GPUs (rank 0's stream).
#include "../../gen/kernels/ulysses.cu"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ck.h"

static const int P = 2;
static const u64 SIGNAL_BYTES = sizeof(Signals);

struct Rank {
    char *buf;
    u64 cap, half, signal_off, state_off;
    Status *status_host;
    Status *status_dev;
    char *input;
    cudaStream_t stream;
    cudaEvent_t start, stop;
};

static u64 align_up(u64 n, u64 a) { return (n + a - 1) / a * a; }

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    const u64 max_bytes = 128ull << 20;
    const int B = 1, H = 32, D = 128, es = ELEM_BYTES;
    Rank rk[P];
    for (int r = 0; r < P; r++) {
        CK(cudaSetDevice(r));
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        Rank &k = rk[r];
        k.cap = max_bytes * P;  // AllGather output
        k.half = align_up(k.cap, 256);
        k.signal_off = 2 * k.half;
        k.state_off = align_up(k.signal_off + SIGNAL_BYTES, 256);
        CK(cudaMalloc(&k.buf, k.state_off + sizeof(State)));
        CK(cudaMemset(k.buf + k.signal_off, 0, k.state_off + sizeof(State) - k.signal_off));
        CK(cudaHostAlloc(&k.status_host, sizeof(Status), cudaHostAllocMapped));
        memset(k.status_host, 0, sizeof(Status));
        CK(cudaHostGetDevicePointer((void **)&k.status_dev, k.status_host, 0));
        CK(cudaMalloc(&k.input, max_bytes * P));
        CK(cudaMemset(k.input, 0x11 + r, max_bytes * P));
        CK(cudaStreamCreateWithFlags(&k.stream, cudaStreamNonBlocking));
        CK(cudaEventCreate(&k.start));
        CK(cudaEventCreate(&k.stop));
    }
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const u64 sizes[] = {128ull << 10, 1ull << 20, 8ull << 20, 32ull << 20, 128ull << 20};
    const char *names[] = {"send_recv_heads", "gather_heads", "all_gather"};
    typedef void (*Kernel)(const Args);
    Kernel kernels[] = {ulysses_send_recv_heads_v16, ulysses_gather_heads_v16, ulysses_all_gather_v16};
    std::vector<int> block_counts = {sms, 32};
    if (const char *e = getenv("LAB_BLOCKS")) {
        block_counts.clear();
        for (char *s = strdup(e), *t = strtok(s, ","); t; t = strtok(NULL, ",")) block_counts.push_back(atoi(t));
    }
    printf("THREADS=%d UNROLL=%d ELEM_BYTES=%d iters=%d\n", THREADS, UNROLL, ELEM_BYTES, iters);
    u64 launched = 0;  // launches on each rank so far: launch n is epoch n+1 and writes half (n+1)&1
    for (int blocks : block_counts) {
        for (u64 bytes : sizes) {
            int Tr = (int)(bytes / ((u64)B * H * D * es));
            // Token counts travel in the kernel argument (see Args).
            int tokens[MAX_RANKS] = {0}, prefix[MAX_RANKS + 1] = {0};
            for (int r = 0; r < P; r++) {
                tokens[r] = Tr;
                prefix[r + 1] = prefix[r] + Tr;
            }
            for (int op = 0; op < 3; op++) {
                u64 chunk = op == 2 ? (u64)H * D * es : (u64)H / P * D * es;
                u64 group = op == 2 ? (u64)B * Tr * chunk : (u64)B * Tr * P * chunk;
                u64 per_block = (u64)THREADS * UNROLL * 16;
                u32 active = (u32)((group + per_block - 1) / per_block);
                active = active < 1 ? 1 : (active > (u32)blocks ? (u32)blocks : active);
                Args a[P];
                for (int r = 0; r < P; r++) {
                    memset(&a[r], 0, sizeof(Args));
                    for (int q = 0; q < P; q++) {
                        a[r].data[q] = (u64)rk[q].buf;
                        a[r].signal[q] = (u64)(rk[q].buf + rk[q].signal_off);
                    }
                    a[r].input = (u64)rk[r].input;
                    a[r].state = (u64)(rk[r].buf + rk[r].state_off);
                    a[r].status = (u64)rk[r].status_dev;
                    a[r].timeout_ns = 5000000000ull;
                    a[r].half_bytes = rk[r].half;
                    a[r].capacity = rk[r].cap;
                    a[r].rank = r;
                    a[r].world = P;
                    a[r].batch = B;
                    a[r].units = (u32)(chunk / 16);
                    a[r].active = active;
                    a[r].sig = (u32)op + 1;  // the same on both ranks
                    memcpy(a[r].tokens, tokens, sizeof(tokens));
                    memcpy(a[r].prefix, prefix, sizeof(prefix));
                }
                float ms[P];
                for (int pass = 0; pass < 2; pass++) {  // warm-up, then timed
                    int n = pass == 0 ? 20 : iters;
                    for (int r = 0; r < P; r++) {
                        CK(cudaSetDevice(r));
                        CK(cudaEventRecord(rk[r].start, rk[r].stream));
                    }
                    for (int i = 0; i < n; i++) {
                        for (int r = 0; r < P; r++) {
                            CK(cudaSetDevice(r));
                            a[r].half = (u32)((launched + 1) & 1);  // the kernel refuses another half
                            kernels[op]<<<blocks, THREADS, 0, rk[r].stream>>>(a[r]);
                        }
                        launched++;
                    }
                    for (int r = 0; r < P; r++) {
                        CK(cudaSetDevice(r));
                        CK(cudaEventRecord(rk[r].stop, rk[r].stream));
                        CK(cudaEventSynchronize(rk[r].stop));
                        CK(cudaEventElapsedTime(&ms[r], rk[r].start, rk[r].stop));
                        CK(cudaGetLastError());
                        if (rk[r].status_host->code) {
                            fprintf(stderr, "rank %d reported status %u\n", r, rk[r].status_host->code);
                            return 1;
                        }
                    }
                }
                float worst = ms[0] > ms[1] ? ms[0] : ms[1];
                printf("%-16s %9llu B  blocks %3d active %3u  %8.1f us\n", names[op], (unsigned long long)bytes, blocks,
                       active, 1000.0f * worst / iters);
            }
        }
    }
    return 0;
}
