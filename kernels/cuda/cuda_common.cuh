/* cuda_common.cuh: internal to kernels/cuda. Error checks, the context every device op
 * takes (cuBLAS handle, stream, precision, preallocated scratch), reductions, bf16.
 *
 * Conventions of the CUDA backend (docs/cuda.md has the whole picture):
 *  - Every op has the shape contract of its CPU twin in kernels/kernels.h: row-major,
 *    N = B*T tokens, PyTorch [out, in] weights, forward overwrites, backward ADDS into
 *    every gradient it is given (NULL skips it); the _set forms of some backward ops
 *    overwrite the input gradient instead (ops_cuda.cuh).
 *  - Activations and gradients are float32 in memory. In bf16 mode (ctx->use_bf16) the
 *    matrix products read bf16 copies of their operands and accumulate in float32.
 *  - Every reduction runs in a fixed order (no atomics): the same inputs give the same
 *    bits on the same GPU and toolkit.
 *  - Sizes are size_t; every product of dimensions is computed in size_t.
 */
#ifndef S2HC_CUDA_COMMON_CUH
#define S2HC_CUDA_COMMON_CUH
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/real.h"

#if REAL_IS_DOUBLE
#error "the CUDA backend is built in float32 only (real = float)"
#endif

typedef __nv_bfloat16 bf16;

/* Print file, line and the CUDA / cuBLAS error, then exit(1) (llm.c's cudaCheck). */
void cuda_check_(cudaError_t e, const char *what, const char *file, int line);
void cublas_check_(cublasStatus_t s, const char *what, const char *file, int line);
#define CUDA_CHECK(x) cuda_check_((x), #x, __FILE__, __LINE__)
#define CUBLAS_CHECK(x) cublas_check_((x), #x, __FILE__, __LINE__)
/* After a kernel launch: a launch error (bad configuration, no kernel image) stops here. */
#define CUDA_LAUNCH_CHECK() cuda_check_(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)

/* cudaMalloc that exits with the size on failure; zero-filled. n bytes, 0 gives NULL. */
void *cuda_malloc_zero_(size_t n, const char *file, int line);
#define cuda_malloc_zero(n) cuda_malloc_zero_((n), __FILE__, __LINE__)

/* The context of the device ops. Scratch buffers are grown by cuda_ctx_reserve (called
 * when a model is built, never inside a training step). */
typedef struct cuda_ctx {
    cublasHandle_t blas;
    cudaStream_t stream;
    int use_bf16;        /* 1: matrix products in bf16 (fp32 accumulate) */
    int sm_count;
    size_t smem_optin;   /* max dynamic shared memory per block (bytes) */
    /* scratch */
    bf16 *cvt_a; size_t cvt_a_n;      /* bf16 conversion of a matmul's activation operand */
    bf16 *cvt_b; size_t cvt_b_n;      /* ... of its weight / gradient operand */
    float *ones; size_t ones_n;       /* a vector of ones (bias gradients by GEMV) */
    float *part; size_t part_n;       /* partial sums of column reductions */
    double *dpart; size_t dpart_n;    /* partial sums of sumsq */
    float *att_D; size_t att_D_n;     /* attention backward: rowsum(dO * O) */
    float *hc_mat; size_t hc_mat_n;   /* frame: W' = W (1 + g) and the dW product, by chunks */
    float *hc_dth; size_t hc_dth_n;   /* frame: per-thread theta gradients */
    struct cuda_prof *prof;           /* op timing, NULL when off (cuda_prof_mark) */
} cuda_ctx;

/* Op timing (cuda_profile_start / cuda_profile_stop, model_cuda.h): while ctx->prof is
 * set, cuda_prof_mark(ctx, cat) records an event on the stream after an op, and the
 * device time since the previous mark is charged to cat. The categories are
 * CUDA_PROF_* (model_cuda.h); CUDA_PROF_MARKS marks per profiled stretch at most. */
#define CUDA_PROF_MARKS 8192
typedef struct cuda_prof {
    cudaEvent_t ev[CUDA_PROF_MARKS];
    unsigned char cat[CUDA_PROF_MARKS];
    unsigned char op[CUDA_PROF_MARKS]; /* CUDA_OP_* (model_cuda.h), or CUDA_PROF_NO_OP */
    int n, made, overflow;
} cuda_prof;
#define CUDA_PROF_NO_OP 255
void cuda_prof_mark(cuda_ctx *ctx, int cat);
/* the same, naming the op as well (cuda_profile_stop_ops splits the time by op) */
void cuda_prof_mark_op(cuda_ctx *ctx, int cat, int op);
void cuda_prof_free(cuda_ctx *ctx); /* its events and itself; ctx->prof = NULL */

/* Create the context on the current device (cuBLAS handle, a stream, no TF32). */
void cuda_ctx_init(cuda_ctx *ctx, int use_bf16);
void cuda_ctx_free(cuda_ctx *ctx);
/* Grow scratch buffers to at least these element counts (0 leaves one as it is). */
typedef struct {
    size_t cvt_a, cvt_b, ones, part, dpart, att_D, hc_mat, hc_dth;
} cuda_scratch_need;
void cuda_ctx_reserve(cuda_ctx *ctx, const cuda_scratch_need *need);

/* Launch geometry helpers. */
#define CUDA_THREADS 256
static inline unsigned cuda_blocks(size_t n, int threads) {
    size_t b = (n + (size_t)threads - 1) / (size_t)threads;
    return (unsigned)(b < 1 ? 1 : (b > 0x7fffffffu ? 0x7fffffffu : b));
}

/* ---- device helpers --------------------------------------------------------------- */
#ifdef __CUDACC__
/* dst[i] = src[i] for i < count by a block's nthr threads (this one tid), each with up to
 * 8 loads in flight before its stores: a loop of load-then-store waits out the memory
 * once per value. For staging small arrays in shared memory; no barrier. */
__device__ __forceinline__ void cuda_stage(float *dst, const float *__restrict__ src, int count, int tid, int nthr) {
    for (int i0 = 0; i0 < count; i0 += 8 * nthr) {
        float v[8];
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const int i = i0 + tid + m * nthr;
            v[m] = i < count ? src[i] : 0.0f;
        }
#pragma unroll
        for (int m = 0; m < 8; m++) {
            const int i = i0 + tid + m * nthr;
            if (i < count) dst[i] = v[m];
        }
    }
}
/* Four floats in one 16-byte load; p must be 16-byte aligned (the emulator checks). */
__device__ __forceinline__ float4 ld_float4(const float *p) {
#ifdef S2HC_EMU_H
    emu_check_aligned(p, 16, "ld_float4");
#endif
    return *reinterpret_cast<const float4 *>(p);
}
/* Four floats in one 16-byte store; p 16-byte aligned. */
__device__ __forceinline__ void st_float4(float *p, float4 v) {
#ifdef S2HC_EMU_H
    emu_check_aligned(p, 16, "st_float4");
#endif
    *reinterpret_cast<float4 *>(p) = v;
}
/* Four floats rounded to bf16 (nearest even) in one 8-byte store; p 8-byte aligned. */
struct alignas(8) bf16x4 {
    bf16 v[4];
};
__device__ __forceinline__ void st_bf16x4(bf16 *p, float4 x) {
#ifdef S2HC_EMU_H
    emu_check_aligned(p, 8, "st_bf16x4");
#endif
    bf16x4 q;
    q.v[0] = __float2bfloat16_rn(x.x);
    q.v[1] = __float2bfloat16_rn(x.y);
    q.v[2] = __float2bfloat16_rn(x.z);
    q.v[3] = __float2bfloat16_rn(x.w);
    *reinterpret_cast<bf16x4 *>(p) = q;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ double warp_sum_d(double v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
/* Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the
 * result. `sh` is 32 floats of shared memory; the block must call this uniformly. */
__device__ __forceinline__ float block_sum(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();                 /* sh may still be read by a previous call */
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float s = 0;
    for (int i = 0; i < nw; i++) s += sh[i];   /* fixed order */
    return s;
}
__device__ __forceinline__ float block_max(float v, float *sh) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) sh[w] = v;
    __syncthreads();
    float m = sh[0];
    for (int i = 1; i < nw; i++) m = fmaxf(m, sh[i]);
    return m;
}
#endif

/* Whether the elementwise kernels may take p four floats at a time (16-byte aligned). */
static inline int cuda_aligned16(const void *p) { return ((size_t)p & 15) == 0; }

/* float32 -> bf16 copy of n values (round to nearest even). */
void cuda_to_bf16(cuda_ctx *ctx, bf16 *out, const float *in, size_t n);

#endif
