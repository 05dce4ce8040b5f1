// Copy-engine probe: are the copy engines slower into a peer buffer mapped
// over CUDA IPC (a process per GPU, as a2a.Join) than into one mapped by
// peer access (one process, as a2a.NewGroup)? ulysses's copy-engine mode
// moved about 270 GB/s a direction the first way and 355 the second
// (GPU-RUNS.md runs 37-39). Each way, each GPU copies 64 MiB into the other
// at once (and one GPU alone), as a linear copy and as the 2-D copy of a
// SendRecvHeads half (4 KiB rows from an 8 KiB pitch), with and without a
// local 64 MiB copy beside it on a second stream (what the mode does).
//
// Each through the runtime and through the driver calls ulysses makes, with
// the host time that enqueueing a round took; and the peer's bytes as two
// halves on two streams (two copy engines into one peer); and ulysses's
// arrangement (each copy on a side stream, the local one first on rank 0,
// as its plan orders them).
//
//   nvcc -O3 -arch=sm_90 -o cecopy bench/lab/cecopy.cu -lcuda && ./cecopy one; ./cecopy ipc
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>

#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ck.h"

static const size_t BYTES = 64ull << 20;
static const int ITERS = 20;

// One GPU's side: its source (twice BYTES, for the pitched reads), a local
// destination, the peer's destination (mapped either way), two streams.
struct Side {
    int dev;
    char *src, *local, *peer;
    cudaStream_t s, s2, s3;
    cudaEvent_t a, b, fork, join, fork3, join3;
    double hostUs;  // host time to enqueue one round, last run
};

// The copies: through the runtime, and through the driver calls ulysses
// makes (cuMemcpyDtoDAsync; cuMemcpy3DAsync with device-typed pointers,
// and the same with unified-typed ones).
enum Shape { LINEAR, PITCHED, DRIVER_LINEAR, DRIVER_3D_DEVICE, DRIVER_3D_UNIFIED, DRIVER_SPLIT2, DRIVER_SIDES, SHAPES };

// driver3D enqueues on s the 2-D copy of a SendRecvHeads half (4 KiB rows
// of an 8 KiB pitch) into the peer with cuMemcpy3DAsync, both sides typed
// type.
static void driver3D(Side &d, CUmemorytype type, cudaStream_t s) {
    CUDA_MEMCPY3D m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = m.dstMemoryType = type;
    m.srcDevice = (CUdeviceptr)d.src;
    m.srcPitch = 8192;
    m.srcHeight = BYTES / 4096;
    m.dstDevice = (CUdeviceptr)d.peer;
    m.dstPitch = 4096;
    m.dstHeight = BYTES / 4096;
    m.WidthInBytes = 4096;
    m.Height = BYTES / 4096;
    m.Depth = 1;
    CKD(cuMemcpy3DAsync(&m, s));
}

// sides is ulysses's own arrangement: the peer's copy (3-D, unified) and
// the local one each on a side stream forked from the first and joined
// back, the first stream left empty.
static void sides(Side &d, bool withLocal) {
    CK(cudaEventRecord(d.fork3, d.s));
    CK(cudaStreamWaitEvent(d.s3, d.fork3, 0));
    if (withLocal) CK(cudaStreamWaitEvent(d.s2, d.fork3, 0));
    if (withLocal && d.dev == 0) CKD(cuMemcpyDtoDAsync((CUdeviceptr)d.local, (CUdeviceptr)d.src, BYTES, d.s2));
    driver3D(d, CU_MEMORYTYPE_UNIFIED, d.s3);
    if (withLocal && d.dev != 0) CKD(cuMemcpyDtoDAsync((CUdeviceptr)d.local, (CUdeviceptr)d.src, BYTES, d.s2));
    CK(cudaEventRecord(d.join3, d.s3));
    CK(cudaStreamWaitEvent(d.s, d.join3, 0));
    if (withLocal) {
        CK(cudaEventRecord(d.join, d.s2));
        CK(cudaStreamWaitEvent(d.s, d.join, 0));
    }
}

// split2 copies the peer's bytes as two linear halves, the second on a
// third stream: do two copy engines into one peer beat one?
static void split2(Side &d) {
    CK(cudaEventRecord(d.fork3, d.s));
    CK(cudaStreamWaitEvent(d.s3, d.fork3, 0));
    CKD(cuMemcpyDtoDAsync((CUdeviceptr)d.peer, (CUdeviceptr)d.src, BYTES / 2, d.s));
    CKD(cuMemcpyDtoDAsync((CUdeviceptr)d.peer + BYTES / 2, (CUdeviceptr)d.src + BYTES / 2, BYTES / 2, d.s3));
    CK(cudaEventRecord(d.join3, d.s3));
    CK(cudaStreamWaitEvent(d.s, d.join3, 0));
}

static void copy(Side &d, Shape sh, bool withLocal) {
    switch (sh) {
    case LINEAR:
        CK(cudaMemcpyAsync(d.peer, d.src, BYTES, cudaMemcpyDeviceToDevice, d.s));
        break;
    case PITCHED:
        CK(cudaMemcpy2DAsync(d.peer, 4096, d.src, 8192, 4096, BYTES / 4096, cudaMemcpyDeviceToDevice, d.s));
        break;
    case DRIVER_LINEAR:
        CKD(cuMemcpyDtoDAsync((CUdeviceptr)d.peer, (CUdeviceptr)d.src, BYTES, d.s));
        break;
    case DRIVER_3D_DEVICE:
        driver3D(d, CU_MEMORYTYPE_DEVICE, d.s);
        break;
    case DRIVER_SPLIT2:
        split2(d);
        break;
    case DRIVER_SIDES:
        sides(d, withLocal);
        return;
    default:
        driver3D(d, CU_MEMORYTYPE_UNIFIED, d.s);
    }
    if (withLocal) CK(cudaMemcpyAsync(d.local, d.src, BYTES, cudaMemcpyDeviceToDevice, d.s2));
}

// iteration enqueues one round on d: the local copy, when asked, forks off
// to the second stream and joins back, as the copy-engine mode does.
static void iteration(Side &d, Shape sh, bool withLocal) {
    if (sh == DRIVER_SIDES) {
        copy(d, sh, withLocal);
        return;
    }
    if (withLocal) {
        CK(cudaEventRecord(d.fork, d.s));
        CK(cudaStreamWaitEvent(d.s2, d.fork, 0));
    }
    copy(d, sh, withLocal);
    if (withLocal) {
        CK(cudaEventRecord(d.join, d.s2));
        CK(cudaStreamWaitEvent(d.s, d.join, 0));
    }
}

// start enqueues warm-up rounds, then ITERS rounds between d's events.
static void start(Side &d, Shape sh, bool withLocal) {
    CK(cudaSetDevice(d.dev));
    for (int i = 0; i < 3; i++) iteration(d, sh, withLocal);
    CK(cudaEventRecord(d.a, d.s));
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < ITERS; i++) iteration(d, sh, withLocal);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    d.hostUs = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / ITERS;
    CK(cudaEventRecord(d.b, d.s));
}

// finish waits for start's rounds and returns the ms each took.
static float finish(Side &d) {
    CK(cudaSetDevice(d.dev));
    CK(cudaEventSynchronize(d.b));
    float ms;
    CK(cudaEventElapsedTime(&ms, d.a, d.b));
    return ms / ITERS;
}

static float run(Side &d, Shape sh, bool withLocal) {
    start(d, sh, withLocal);
    return finish(d);
}

static void setup(Side &d, int dev) {
    d.dev = dev;
    CK(cudaSetDevice(dev));
    CK(cudaMalloc(&d.src, 2 * BYTES));
    CK(cudaMemset(d.src, dev + 1, 2 * BYTES));
    CK(cudaMalloc(&d.local, BYTES));
    CK(cudaStreamCreateWithFlags(&d.s, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&d.s2, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&d.s3, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&d.fork3, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&d.join3, cudaEventDisableTiming));
    CK(cudaEventCreate(&d.a));
    CK(cudaEventCreate(&d.b));
    CK(cudaEventCreateWithFlags(&d.fork, cudaEventDisableTiming));
    CK(cudaEventCreateWithFlags(&d.join, cudaEventDisableTiming));
}

static const char *names[] = {"linear", "pitched 4K/8K", "cuMemcpyDtoD linear", "cuMemcpy3D device 4K/8K",
                               "cuMemcpy3D unified 4K/8K", "cuMemcpyDtoD 2 halves, 2 streams",
                               "ulysses: both on side streams"};

static void report(const char *how, const char *what, float ms, double hostUs) {
    printf("%-26s %-40s %7.1f us %6.1f GB/s  enqueue %6.1f us\n", how, what, ms * 1e3, BYTES / (ms * 1e-3) / 1e9, hostUs);
}

// One process, both GPUs: each side's peer pointer is the other's buffer
// under peer access; both sides are enqueued before either is waited for.
static void oneProcess() {
    Side d[2];
    char *dst[2];
    for (int r = 0; r < 2; r++) {
        setup(d[r], r);
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        CK(cudaMalloc(&dst[r], BYTES));
    }
    for (int r = 0; r < 2; r++) d[r].peer = dst[1 - r];
    for (int sh = 0; sh < SHAPES; sh++)
        for (int loc = 0; loc < 2; loc++) {
            char what[64];
            snprintf(what, sizeof what, "%s%s", names[sh], loc ? " + local" : "");
            float alone = run(d[0], (Shape)sh, loc);
            report("one process, GPU 0 alone", what, alone, d[0].hostUs);
            for (int r = 0; r < 2; r++) start(d[r], (Shape)sh, loc);  // both enqueued, then waited for
            float m0 = finish(d[0]), m1 = finish(d[1]);
            report("one process, both at once", what, m0 > m1 ? m0 : m1, d[0].hostUs);
        }
}

static void xfer(int fd, void *p, size_t n, bool w) {
    char *c = (char *)p;
    while (n > 0) {
        ssize_t k = w ? write(fd, c, n) : read(fd, c, n);
        if (k <= 0) {
            perror("pipe");
            exit(1);
        }
        c += k;
        n -= (size_t)k;
    }
}

// A process per GPU (forked before CUDA starts): each maps the other's
// destination with cudaIpcOpenMemHandle; pipes carry the handles and
// line the two up before each case.
static void twoProcesses() {
    int up[2], down[2];
    if (pipe(up) || pipe(down)) exit(1);
    pid_t pid = fork();
    int rank = pid == 0 ? 1 : 0;
    int rd = rank == 0 ? up[0] : down[0], wr = rank == 0 ? down[1] : up[1];
    Side d;
    setup(d, rank);
    char *dst;
    CK(cudaMalloc(&dst, BYTES));
    cudaIpcMemHandle_t mine, theirs;
    CK(cudaIpcGetMemHandle(&mine, dst));
    xfer(wr, &mine, sizeof mine, true);
    xfer(rd, &theirs, sizeof theirs, false);
    CK(cudaIpcOpenMemHandle((void **)&d.peer, theirs, cudaIpcMemLazyEnablePeerAccess));
    auto barrier = [&]() {
        char c = 1;
        xfer(wr, &c, 1, true);
        xfer(rd, &c, 1, false);
    };
    for (int sh = 0; sh < SHAPES; sh++)
        for (int loc = 0; loc < 2; loc++) {
            char what[64];
            snprintf(what, sizeof what, "%s%s", names[sh], loc ? " + local" : "");
            barrier();
            if (rank == 0) {
                float alone = run(d, (Shape)sh, loc);
                report("IPC, GPU 0 alone", what, alone, d.hostUs);
            }
            barrier();
            float ms = run(d, (Shape)sh, loc), other;
            xfer(wr, &ms, sizeof ms, true);
            xfer(rd, &other, sizeof other, false);
            if (rank == 0) report("IPC, both at once", what, ms > other ? ms : other, d.hostUs);
        }
    barrier();
    CK(cudaIpcCloseMemHandle(d.peer));
    if (rank == 1) exit(0);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "rank 1 failed\n");
        exit(1);
    }
}

int main(int argc, char **argv) {
    // The processes fork before this process touches CUDA; one-process
    // runs in a fresh process too, so neither inherits the other's state.
    if (argc > 1 && strcmp(argv[1], "one") == 0) {
        oneProcess();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "ipc") == 0) {
        twoProcesses();
        return 0;
    }
    fprintf(stderr, "usage: cecopy one|ipc\n");
    return 2;
}
