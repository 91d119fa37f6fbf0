/* emu.h: a CPU emulator of the CUDA subset kernels/cuda uses, so the GPU check can run
 * where there is no GPU (make -f mk/cuda.mk cuda-emu-check). Slow and sequential; it
 * checks the arithmetic, the indexing and the plumbing, not races, timing, shared-memory
 * limits or real warp behaviour.
 *
 *  - A block runs as blockDim cooperative fibers on one OS thread; blocks are spread over
 *    the OpenMP threads (they never talk to each other). __syncthreads is a barrier of the
 *    block (a thread that returns leaves its count, as on the GPU); __syncwarp and every
 *    shuffle are barriers of the warp only, of the lanes their mask names (each must still
 *    be running). S2HC_EMU_ORDER chooses the order the fibers run in (emu.cpp: asc,
 *    desc, random[:SEED]); an exchange between warps or lanes that no barrier orders
 *    reads a stale value in some of them, so the check run in each finds such races. A
 *    shuffle orders memory here as __syncwarp does, which the GPU does not promise.
 *  - __shared__ variables are thread_local function statics (one block at a time per OS
 *    thread), filled with NaN when the block's first thread reaches them (cu2cpp.py adds
 *    EMU_SHARED_POISON); dynamic shared memory is a buffer per OS thread, NaN at each
 *    block's start (cu2cpp.py rewrites `extern __shared__`).
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
extern thread_local unsigned long emu_block_serial; /* blocks run so far on this OS thread, from 1 */
/* NaN bytes in a static __shared__ array once per block: the first of the block's threads
 * to reach its declaration does it, before any thread can have written to it. */
#define EMU_SHARED_POISON(x)                                 \
    do {                                                     \
        static thread_local unsigned long emu_poisoned_ = 0; \
        if (emu_poisoned_ != emu_block_serial) {             \
            emu_poisoned_ = emu_block_serial;                \
            memset((void *)&(x), 0xff, sizeof(x));           \
        }                                                    \
    } while (0)

typedef struct emu_stream *cudaStream_t;
/* Run a kernel (`fn`: the kernel function, for its attributes); `name` feeds the profile
 * printed at exit when S2HC_EMU_PROFILE is set. A launch the GPU would refuse (more than
 * 1024 threads, an empty grid, more dynamic shared memory than the kernel's limit: 48 KiB
 * unless cudaFuncSetAttribute raised it, at most the H100 / H200's 227 KiB) runs nothing
 * and leaves its error for cudaGetLastError, as on the GPU. */
void emu_launch(const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char *name,
                std::function<void()> body);
void emu_barrier(void);
void emu_warp_barrier(unsigned mask);
int emu_linear_tid(void);
extern thread_local double emu_xchg[1024];
extern thread_local double emu_xchg_full[2][1024];
extern thread_local unsigned char emu_shfl_count[1024]; /* each thread's whole-warp shuffles, mod 256 */

static inline void __syncthreads(void) { emu_barrier(); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) { emu_warp_barrier(mask); }
/* A shuffle of the whole warp is one barrier: each lane writes its value into the half of
 * a double buffer that the shuffle's number picks, waits, and reads its source lane's. A
 * lane cannot write that half again (two shuffles on) before every lane has passed the
 * shuffle in between, so after each has read this one. A shuffle of fewer lanes is two
 * barriers around one buffer (the lanes of a mask need not have shuffled equally often). */
template <typename T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lanemask) {
    const int t = emu_linear_tid(), src = (t & ~31) | ((t & 31) ^ lanemask);
    if (mask == 0xffffffffu) {
        double *b = emu_xchg_full[emu_shfl_count[t]++ & 1];
        b[t] = (double)v;
        emu_warp_barrier(mask);
        return (T)b[src];
    }
    emu_xchg[t] = (double)v;
    emu_warp_barrier(mask);
    T r = (T)emu_xchg[src];
    emu_warp_barrier(mask);
    return r;
}

/* ---- vector types ---------------------------------------------------------------------------- */
struct float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
/* A vector load from an address the GPU would refuse (misaligned address) stops the run. */
static inline void emu_check_aligned(const void *p, size_t align, const char *what) {
    if ((uintptr_t)p % align) {
        fprintf(stderr, "emu: %s: address %p is not %zu-byte aligned (the GPU faults)\n", what, p, align);
        abort();
    }
}

/* ---- runtime API ----------------------------------------------------------------------------- */
typedef int cudaError_t;
cudaError_t emu_set_smem_limit(const void *fn, int bytes); /* cudaFuncSetAttribute's */
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9 };
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
static inline cudaError_t cudaFuncSetAttribute(K k, cudaFuncAttribute a, int v) {
    return a == cudaFuncAttributeMaxDynamicSharedMemorySize ? emu_set_smem_limit((const void *)k, v) : cudaSuccess;
}
/* A kernel's attributes: no device stack here (its fibers have their own). */
struct cudaFuncAttributes {
    size_t localSizeBytes;
};
template <typename K>
static inline cudaError_t cudaFuncGetAttributes(cudaFuncAttributes *a, K) {
    a->localSizeBytes = 0;
    return cudaSuccess;
}
/* Resident blocks per SM: the emulator knows no registers, so only the thread limit
 * (2048 per SM, 32 blocks) bounds it. */
template <typename K>
static inline cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, K, int threads, size_t smem) {
    (void)smem;
    int b = threads > 0 ? 2048 / threads : 0;
    *n = b < 32 ? b : 32;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetLimit(size_t *v, cudaLimit l);
cudaError_t cudaDeviceSetLimit(cudaLimit l, size_t v);

#include "cuda_bf16.h"

#endif
