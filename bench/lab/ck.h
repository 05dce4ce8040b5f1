// CK checks a CUDA runtime call, CKD a driver call, in the lab's programs:
// on a failure they exit with the process id (the probes that fork run a
// process per GPU), file, line, call and error.
#pragma once
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "[%d] %s:%d %s: %s\n", getpid(), __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

// CKD needs <cuda.h> where it is used.
#define CKD(x)                                                                                          \
    do {                                                                                                \
        CUresult e_ = (x);                                                                              \
        if (e_ != CUDA_SUCCESS) {                                                                       \
            fprintf(stderr, "[%d] %s:%d %s: CUresult %d\n", getpid(), __FILE__, __LINE__, #x, (int)e_); \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)
