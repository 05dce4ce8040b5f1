// Copy-engine probe: are the copy engines slower into a peer buffer mapped
// over CUDA IPC (a process per GPU, as a2a.Join) than into one mapped by
// peer access (one process, as a2a.NewGroup)? ulysses's copy-engine mode
// moved about 270 GB/s a direction the first way and 355 the second
// (docs/lab/gpu-runs.md runs 37-39). Each way, each GPU copies 64 MiB into the other
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
// Then the rounds as the mode runs them back to back (both GPUs at once
// only: each waits for the other): ulysses's arrangement with the local
// copy, then on the main stream, before the next round's fork,
//   - an empty one-block kernel (a kernel between the copies, no waiting);
//   - a one-block sync kernel like ulysses_sync: st.release.sys of the
//     round number into the flag word in the peer's signal area (after its
//     destination, through the pointer the copies use), then ld.acquire.sys
//     of its own flag until the peer's round arrives, given up after 2 s
//     (globaltimer): the round is recorded in an error word and the later
//     rounds of the case signal but no longer wait, so nothing hangs;
//   - cuStreamWriteValue32 into the peer's flag, cuStreamWaitValue32 (GEQ)
//     on its own (the v2 stream memory operations), where both GPUs can do
//     them on these buffers, else skipped with a message;
// and the two waits alone, without copies (a round trip between the GPUs).
// Every case's rounds are enqueued with no host sync between them; a host
// wait of more than 10 s for a case ends the process.
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
static const int ITERS = 20, WARMUP = 3;

// Each destination is followed by a signal area: the flag word the peer's
// sync writes at 0, a scratch word for the stream memory operations' trial
// at 64.
static const size_t SIGNAL = 4096;
static const unsigned long long SPIN_NS = 2000000000ull;  // a sync kernel's longest wait
static const double HOST_WAIT_S = 10;                     // the host's longest wait for a case

// SyncErr is a GPU's record of its first sync kernel that gave up: the
// round it waited for and the flag it last read.
struct SyncErr {
    unsigned timedOut, round, seen;
};

// One GPU's side: its source (twice BYTES, for the pitched reads), a local
// destination, the peer's destination (mapped either way), two streams.
struct Side {
    int dev;
    char *src, *local, *peer;
    char *mine;      // this GPU's own destination, whose signal area the peer writes
    unsigned round;  // the last round signalled to the peer (both GPUs count alike)
    SyncErr *err;    // device memory
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
    for (int i = 0; i < WARMUP; i++) iteration(d, sh, withLocal);
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
    CK(cudaMalloc(&d.err, sizeof(SyncErr)));
    d.round = 0;
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

// destination allocates a peer's destination on dev with its signal area
// after it, zeroed before any peer can write there.
static char *destination(int dev) {
    char *p;
    CK(cudaSetDevice(dev));
    CK(cudaMalloc(&p, BYTES + SIGNAL));
    CK(cudaMemset(p + BYTES, 0, SIGNAL));
    CK(cudaDeviceSynchronize());
    return p;
}

// flag is the flag word of the signal area after destination dst.
static unsigned *flag(char *dst) { return (unsigned *)(dst + BYTES); }

// ---- the rounds with a sync step, as ulysses runs them back to back ----

// The stream memory operations: the v2 calls, on by default since CUDA
// 11.7 (CUDA 12's headers give them the plain names; before 11.7 only the
// v1 calls, which need the driver's NVreg_EnableStreamMemOPs=1).
#if CUDA_VERSION >= 12000 || CUDA_VERSION < 11070
#define WRITE_VALUE32 cuStreamWriteValue32
#define WAIT_VALUE32 cuStreamWaitValue32
#else
#define WRITE_VALUE32 cuStreamWriteValue32_v2
#define WAIT_VALUE32 cuStreamWaitValue32_v2
#endif

__device__ __forceinline__ void storeReleaseSys(unsigned *p, unsigned v) {
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

__device__ __forceinline__ unsigned loadAcquireSys(const unsigned *p) {
    unsigned v;
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ unsigned long long globalTimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void emptyKernel() {}

// syncKernel (one block, thread 0 works, as ulysses_sync's thread for the
// one peer) signals round to the peer, then waits until the peer's flag in
// this GPU's signal area reaches it (wrap-safe). It waits at most SPIN_NS,
// then records the round in err; once err is set, later rounds only signal.
__global__ void syncKernel(unsigned *peerFlag, const unsigned *myFlag, unsigned round, SyncErr *err) {
    if (threadIdx.x != 0) return;
    // The round's copies finished before this kernel began (stream order);
    // the release is the kernel's, as ulysses_sync's is.
    storeReleaseSys(peerFlag, round);
    if (*(volatile unsigned *)&err->timedOut != 0) return;
    const unsigned long long deadline = globalTimer() + SPIN_NS;
    for (;;) {
        const unsigned v = loadAcquireSys(myFlag);
        if ((int)(v - round) >= 0) return;
        if (globalTimer() > deadline) {
            err->round = round;
            err->seen = v;
            err->timedOut = 1;
            return;
        }
    }
}

enum Sync { EMPTY_KERNEL, SYNC_KERNEL, STREAM_MEMOPS };

struct SyncCase {
    Sync how;
    bool copies;  // ulysses's copies (with the local one) before the sync step
    const char *name;
};

// The stream operations' cases last: they are tried before the first.
static const SyncCase syncCases[] = {
    {EMPTY_KERNEL, true, "ulysses + local, then an empty kernel"},
    {SYNC_KERNEL, true, "ulysses + local, then the sync kernel"},
    {SYNC_KERNEL, false, "the sync kernel alone"},
    {STREAM_MEMOPS, true, "ulysses + local, then stream write/wait"},
    {STREAM_MEMOPS, false, "stream write/wait alone"},
};
static const int SYNC_CASES = sizeof syncCases / sizeof syncCases[0];

// syncStep enqueues the step after a round's copies on d's main stream.
static void syncStep(Side &d, Sync how) {
    switch (how) {
    case EMPTY_KERNEL:
        emptyKernel<<<1, 32, 0, d.s>>>();
        CK(cudaGetLastError());
        break;
    case SYNC_KERNEL:
        d.round++;
        syncKernel<<<1, 32, 0, d.s>>>(flag(d.peer), flag(d.mine), d.round, d.err);
        CK(cudaGetLastError());
        break;
    case STREAM_MEMOPS:  // the default write has a fence before it, as the kernel's release
        d.round++;
        CKD(WRITE_VALUE32((CUstream)d.s, (CUdeviceptr)flag(d.peer), d.round, CU_STREAM_WRITE_VALUE_DEFAULT));
        CKD(WAIT_VALUE32((CUstream)d.s, (CUdeviceptr)flag(d.mine), d.round, CU_STREAM_WAIT_VALUE_GEQ));
        break;
    }
}

// syncRounds enqueues count rounds of c, round by round on each of the n
// sides (one process drives both GPUs in turn).
static void syncRounds(Side *ds, int n, const SyncCase &c, int count) {
    for (int i = 0; i < count; i++)
        for (int k = 0; k < n; k++) {
            CK(cudaSetDevice(ds[k].dev));
            if (c.copies) sides(ds[k], true);
            syncStep(ds[k], c.how);
        }
}

static void recordAll(Side *ds, int n, bool first) {
    for (int k = 0; k < n; k++) {
        CK(cudaSetDevice(ds[k].dev));
        CK(cudaEventRecord(first ? ds[k].a : ds[k].b, ds[k].s));
    }
}

// startSync clears the sides' error words, enqueues warm-up rounds, then
// ITERS rounds between each side's events; hostUs is per GPU and round.
static void startSync(Side *ds, int n, const SyncCase &c) {
    for (int k = 0; k < n; k++) {
        CK(cudaSetDevice(ds[k].dev));
        CK(cudaMemsetAsync(ds[k].err, 0, sizeof(SyncErr), ds[k].s));
    }
    syncRounds(ds, n, c, WARMUP);
    recordAll(ds, n, true);
    timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    syncRounds(ds, n, c, ITERS);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    recordAll(ds, n, false);
    double us = ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / 1e3 / ITERS / n;
    for (int k = 0; k < n; k++) ds[k].hostUs = us;
}

// SyncResult is one GPU's outcome of a case: ms a round, and its error word.
struct SyncResult {
    float ms;
    SyncErr err;
};

// finishSync waits (by polling, at most HOST_WAIT_S: a stream wait has no
// bound of its own) for d's rounds; past that it ends the process.
static SyncResult finishSync(Side &d, const char *name) {
    CK(cudaSetDevice(d.dev));
    timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        CUresult r = cuEventQuery((CUevent)d.b);
        if (r == CUDA_SUCCESS) break;
        if (r != CUDA_ERROR_NOT_READY) CKD(r);
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > HOST_WAIT_S) {
            fprintf(stderr, "[%d] GPU %d: %s: rounds not done after %.0f s; giving up\n", getpid(), d.dev, name,
                    HOST_WAIT_S);
            exit(1);
        }
        usleep(20);
    }
    SyncResult res;
    CK(cudaEventElapsedTime(&res.ms, d.a, d.b));
    res.ms /= ITERS;
    CK(cudaMemcpy(&res.err, d.err, sizeof res.err, cudaMemcpyDeviceToHost));
    return res;
}

// reportSync prints a case's line from both GPUs' results (the slower
// GPU's time), and a line for each GPU whose sync kernel gave up.
static void reportSync(const char *how, const SyncCase &c, const SyncResult *r, double hostUs) {
    float ms = r[0].ms > r[1].ms ? r[0].ms : r[1].ms;
    if (c.copies)
        printf("%-26s %-40s %7.1f us %6.1f GB/s  enqueue %6.1f us\n", how, c.name, ms * 1e3, BYTES / (ms * 1e-3) / 1e9,
               hostUs);
    else
        printf("%-26s %-40s %7.1f us %6s GB/s  enqueue %6.1f us\n", how, c.name, ms * 1e3, "-", hostUs);
    for (int g = 0; g < 2; g++)
        if (r[g].err.timedOut)
            printf("%-26s   ERROR: GPU %d's sync kernel gave up after %.0f s waiting for round %u (flag read %u); "
                   "the case's later rounds did not wait\n",
                   how, g, SPIN_NS / 1e9, r[g].err.round, r[g].err.seen);
}

// memopsWork tries a stream write into the peer's signal area (the scratch
// word) and a wait on its own that is met at once; it says why not when
// they fail (a sticky error ends the process in the next checked call, so
// it is tried after the other cases).
static bool memopsWork(Side &d) {
    CK(cudaSetDevice(d.dev));
    CUresult r = WRITE_VALUE32((CUstream)d.s, (CUdeviceptr)(d.peer + BYTES + 64), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r == CUDA_SUCCESS)
        r = WAIT_VALUE32((CUstream)d.s, (CUdeviceptr)(d.mine + BYTES + 64), 0, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize((CUstream)d.s);
    if (r != CUDA_SUCCESS)
        printf("GPU %d: stream write/wait value on these buffers failed (CUresult %d): skipping those cases\n", d.dev,
               (int)r);
    return r == CUDA_SUCCESS;
}

// One process, both GPUs: each side's peer pointer is the other's buffer
// under peer access; both sides are enqueued before either is waited for.
static void oneProcess() {
    Side d[2];
    char *dst[2];
    for (int r = 0; r < 2; r++) {
        setup(d[r], r);
        CK(cudaDeviceEnablePeerAccess(1 - r, 0));
        dst[r] = destination(r);
    }
    for (int r = 0; r < 2; r++) d[r].peer = dst[1 - r], d[r].mine = dst[r];
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
    int memops = -1;  // tried before the first case that needs them (the last cases)
    for (int i = 0; i < SYNC_CASES; i++) {
        if (syncCases[i].how == STREAM_MEMOPS && memops < 0) memops = memopsWork(d[0]) & memopsWork(d[1]);
        if (syncCases[i].how == STREAM_MEMOPS && !memops) continue;
        startSync(d, 2, syncCases[i]);
        SyncResult r[2] = {finishSync(d[0], syncCases[i].name), finishSync(d[1], syncCases[i].name)};
        reportSync("one process, both at once", syncCases[i], r, d[0].hostUs);
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

// bothMemops tries the stream operations in each process and tells each
// whether both can do them.
static bool bothMemops(Side &d, int rd, int wr) {
    bool mine = memopsWork(d), theirs;
    xfer(wr, &mine, sizeof mine, true);
    xfer(rd, &theirs, sizeof theirs, false);
    return mine && theirs;
}

// syncCasesIPC runs the cases with a sync step in a process per GPU: the
// stream operations only where both processes can do them (tried before
// the first case that needs them, the last ones: a failed trial may break
// the context); each case starts after a word each way over the pipes,
// and rank 0 reports.
static void syncCasesIPC(Side &d, int rank, int rd, int wr) {
    int memops = -1;
    for (int i = 0; i < SYNC_CASES; i++) {
        if (syncCases[i].how == STREAM_MEMOPS && memops < 0) memops = bothMemops(d, rd, wr);
        if (syncCases[i].how == STREAM_MEMOPS && !memops) continue;
        char c = 1;
        xfer(wr, &c, 1, true);
        xfer(rd, &c, 1, false);
        startSync(&d, 1, syncCases[i]);
        SyncResult r[2];
        r[rank] = finishSync(d, syncCases[i].name);
        xfer(wr, &r[rank], sizeof r[rank], true);
        xfer(rd, &r[1 - rank], sizeof r[rank], false);
        if (rank == 0) reportSync("IPC, both at once", syncCases[i], r, d.hostUs);
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
    char *dst = destination(rank);
    d.mine = dst;
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
    syncCasesIPC(d, rank, rd, wr);
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
