/* emu.h: a CPU emulator of the CUDA subset kernels/cuda uses, so the GPU check can run
 * where there is no GPU (make -f mk/cuda.mk cuda-emu-check). Slow and sequential; it
 * checks the arithmetic, the indexing and the plumbing, not races, timing, shared-memory
 * limits or real warp behaviour.
 *
 *  - A block runs as blockDim cooperative fibers on one OS thread; blocks are spread over
 *    the OpenMP threads (they never talk to each other). __syncthreads, __syncwarp and every shuffle are block-wide
 *    barriers (stricter than CUDA: this project's kernels call them uniformly). A thread
 *    that returns leaves the barrier count, as on the GPU.
 *  - __shared__ variables are thread_local function statics (one block at a time per OS
 *    thread); dynamic shared memory is a buffer per OS thread (cu2cpp.py rewrites
 *    `extern __shared__`).
 *  - WMMA: every lane holds the whole 16x16 fragment; load, store and mma follow the
 *    documented row- / column-major and ldm semantics; bf16 is rounded to nearest even.
 *  - cuBLAS: column-major reference loops (fp32 accumulation).
 *  - Memory: host memory; copies are memcpy; streams and events are trivial.
 */
#ifndef S2HC_EMU_H
#define S2HC_EMU_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <functional>

/* ---- qualifiers (also passed with -D on the command line: real.h may come first) ---------- */
#ifndef __host__
#define __host__
#endif
#ifndef __device__
#define __device__
#endif
#define __global__
#define __forceinline__ inline
#define __shared__ static thread_local /* blocks run in parallel, one per OS thread */
#define __launch_bounds__(...)
#define __align__(n)

/* ---- geometry ------------------------------------------------------------------------------ */
struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
typedef dim3 uint3;
extern thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
extern thread_local void *emu_dyn_smem;

typedef struct emu_stream *cudaStream_t;
/* Run a kernel; `name` feeds the profile printed at exit when S2HC_EMU_PROFILE is set. */
void emu_launch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char *name, std::function<void()> body);
void emu_barrier(void);
int emu_linear_tid(void);
extern thread_local double emu_xchg[1024];

static inline void __syncthreads(void) { emu_barrier(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
    (void)mask;
    emu_barrier();
}
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lanemask) {
    (void)mask;
    int t = emu_linear_tid();
    emu_xchg[t] = (double)v;
    emu_barrier();
    T r = (T)emu_xchg[(t & ~31) | ((t & 31) ^ lanemask)];
    emu_barrier();
    return r;
}

/* ---- runtime API ----------------------------------------------------------------------------- */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2 };
typedef struct emu_event *cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice, cudaMemcpyHostToHost };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount, cudaDevAttrMaxSharedMemoryPerBlockOptin };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize };
enum cudaLimit { cudaLimitStackSize };
#define cudaStreamNonBlocking 1
struct cudaDeviceProp {
    char name[256];
    int major, minor;
    size_t totalGlobalMem;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev);
cudaError_t cudaSetDevice(int dev);
cudaError_t cudaGetDevice(int *dev);
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st = 0);
cudaError_t cudaMemset(void *d, int v, size_t n);
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st = 0);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
template <typename K>
static inline cudaError_t cudaFuncSetAttribute(K, cudaFuncAttribute, int) { return cudaSuccess; }
/* A kernel's attributes: no device stack here (its fibers have their own). */
struct cudaFuncAttributes {
    size_t localSizeBytes;
};
template <typename K>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, K) {
    a->localSizeBytes = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetLimit(size_t *v, cudaLimit l);
cudaError_t cudaDeviceSetLimit(cudaLimit l, size_t v);

#include "cuda_bf16.h"

#endif
