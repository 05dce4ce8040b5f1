// Host cost of one launch (issue 16: the enqueue of an operation took 4.6
// us of host time in run 41, about 3.8 of it inside cuLaunchKernel with
// ulysses's 392-byte argument). Times, on the host, a million-call loop of
// cuLaunchKernel of an empty kernel whose one argument is a struct of 8,
// 128, 392 and 1024 bytes, passed as kernelParams and as one
// CU_LAUNCH_PARAM_BUFFER_POINTER block; and the other calls an operation
// makes (cuCtxSetCurrent, cuCtxGetCurrent, cuStreamIsCapturing,
// cuEventRecord). The stream is synchronised every 256 calls, outside
// the timer, so the launch queue never fills.
//
//   nvcc -O3 -arch=sm_90 -o launchcost bench/lab/launchcost.cu -lcuda && ./launchcost
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>

#include "ck.h"

template <int N>
struct Arg {
    unsigned long long w[N / 8];
};

// The kernels write one word of their argument where no one looks, so
// that the argument is live.
template <int N>
__global__ void empty(Arg<N> a, unsigned long long *sink) {
    if (a.w[0] == 42 && threadIdx.x == 0) *sink = a.w[N / 8 - 1];
}

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

// perCall returns the host ns one call of f takes, over n calls, with the
// stream synchronised every 256 calls outside the timer.
static double perCall(CUstream s, int n, const std::function<void()> &f) {
    for (int i = 0; i < 512; i++) f();
    CKD(cuStreamSynchronize(s));
    double total = 0;
    for (int done = 0; done < n; done += 256) {
        double t0 = now();
        for (int i = 0; i < 256; i++) f();
        total += now() - t0;
        CKD(cuStreamSynchronize(s));
    }
    return total / n;
}

template <int N>
static void launches(CUstream s, unsigned long long *sink, int n) {
    CUfunction fn;
    CK(cudaGetFuncBySymbol((cudaFunction_t *)&fn, (const void *)empty<N>));
    Arg<N> a;
    memset(&a, 0, sizeof a);
    void *params[] = {&a, &sink};
    double p = perCall(s, n, [&] { CKD(cuLaunchKernel(fn, 132, 1, 1, 512, 1, 1, 0, s, params, nullptr)); });
    struct {
        Arg<N> a;
        unsigned long long *sink;
    } block = {a, sink};
    size_t size = sizeof block;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &block, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
    double b = perCall(s, n, [&] { CKD(cuLaunchKernel(fn, 132, 1, 1, 512, 1, 1, 0, s, nullptr, extra)); });
    printf("cuLaunchKernel, %4d-byte argument: kernelParams %6.0f ns, one buffer %6.0f ns\n", N, p, b);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 200000;
    CK(cudaSetDevice(0));
    CK(cudaFree(0));
    CUcontext ctx;
    CKD(cuCtxGetCurrent(&ctx));
    CUstream s;
    CKD(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned long long *sink;
    CK(cudaMalloc(&sink, 8));
    launches<8>(s, sink, n);
    launches<128>(s, sink, n);
    launches<392>(s, sink, n);
    launches<1024>(s, sink, n);
    CUevent e;
    CKD(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    CUstreamCaptureStatus st;
    CUcontext cur;
    printf("cuCtxSetCurrent      %6.0f ns\n", perCall(s, n, [&] { CKD(cuCtxSetCurrent(ctx)); }));
    printf("cuCtxGetCurrent      %6.0f ns\n", perCall(s, n, [&] { CKD(cuCtxGetCurrent(&cur)); }));
    printf("cuStreamIsCapturing  %6.0f ns\n", perCall(s, n, [&] { CKD(cuStreamIsCapturing(s, &st)); }));
    printf("cuEventRecord        %6.0f ns\n", perCall(s, n, [&] { CKD(cuEventRecord(e, s)); }));
    return 0;
}
