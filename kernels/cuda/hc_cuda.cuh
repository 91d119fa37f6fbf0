/* hc_cuda.cuh: the hyper-connection frame on the device (see harness/model.h for the math):
 *
 *   x'    = X / rms(X) * (1 + g)            flat (one rms per token) or per stream (hc)
 *   z     = x' W^T                          coefficient projection, cuBLAS
 *   pre, post, H = hc_forward(spec, theta, z)   per token, kernels/hc_math.h itself
 *   u     = sum_i pre[i] X[i]               read-out
 *   X'[i] = sum_j H[i,j] X[j] + post[i] f   write-back (also the rms of X' for the next frame)
 *
 * What is fused, and why (docs/cuda.md): the norm is folded into the projection,
 * z = rstd * (X (W diag(1 + g))^T), so x' is never written; rstd comes out of the
 * previous write-back, which already holds X' in registers. The write-back reads X and f
 * and writes X' once; its backward reads dY, X and f once; the input side's backward
 * (Kr <= 32) is one pass that reads dY and X and writes dX, with the projection's dX term
 * and the partial products of dW. The n x C streams are read 3 times and written once
 * per sublayer forward, read 5 times and written once backward.
 *
 * Per-token math runs one thread per token with z, dz and the cache in global memory, so
 * K = 40336 (mhc_lite, n = 8) works like K = 17; spec.perms must be a device pointer
 * (hc_spec_to_device). Theta gradients go to per-thread rows (ctx->hc_dth) reduced in a
 * fixed order: no atomics.
 */
#ifndef S2HC_HC_CUDA_CUH
#define S2HC_HC_CUDA_CUH
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/hc_math.h"

#define HC_RMS_EPS 1e-6 /* = RMS_EPS of kernels/cpu/hc_frame.c (the frame's RMSNorm) */

/* Copy a host spec to `dev`, with perms (mhc_lite, kromhc) uploaded to device memory. */
void hc_spec_to_device(const hc_spec *host, hc_spec *dev);
void hc_spec_free_device(hc_spec *dev);

/* One sublayer's frame: its parameters, gradients and activations (device pointers). */
typedef struct {
    const float *g, *W, *theta;  /* norm gain (D), projection (Kr, D), static parameters */
    float *dg, *dW, *dtheta;     /* their gradients (+=) */
    float *X;      /* (N, n, C) streams entering the sublayer: floats, or bf16 values when x_bf16 */
    int x_bf16;    /* residual.stream_precision: bf16 (X and the write-back's output are bf16) */
    float *rstd;   /* (N) flat, (N, n) per stream: 1 / rms of X (written by whoever wrote X) */
    float *z;      /* (N, K) scaled projection, as on the CPU */
    float *pre, *post, *H, *cache; /* (N, n), (N, n), (N, n, n), (N, spec.cache) */
    float *u;      /* (N, C) read-out */
    float *f;      /* (N, C) the sublayer's output */
} hc_frame_dev;

/* Rows of the projection: flat -> N rows of D = n C, Kr = K; per stream -> N n rows of
 * D = C, Kr = K / n. */
typedef struct { size_t rows; int D, Kr, nr; } hc_dims;
hc_dims hc_dims_of(const hc_spec *s, size_t N, int C);

/* Scratch the frame needs for N tokens (adds into need); x_bf16: bf16 streams. */
void hc_scratch_need(const hc_spec *s, size_t N, int C, int x_bf16, cuda_scratch_need *need);
/* Per-thread theta rows used by the per-token backward for N tokens. */
size_t hc_dtheta_rows(const hc_spec *s, size_t N);

/* X0[t, i] = in[t] for every stream i (bf16 values when x_bf16); rstd0 (may be NULL) from
 * the norm of X0 as stored. */
void hc_streams_init_cuda(cuda_ctx *ctx, const hc_spec *s, float *X0, float *rstd0, const float *in, size_t N, int C,
                          int x_bf16);
/* out[t] = sum_i X[t, i] (the final read-out, and the embedding gradient); X bf16 when x_bf16. */
void hc_streams_sum_cuda(cuda_ctx *ctx, float *out, const float *X, size_t N, int n, int C, int x_bf16);

/* Forward input side: z, pre, post, H, cache and u from X and rstd. */
void hc_frame_in_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, size_t N, int C);
/* Forward write-back: Xnext = H X + post f, and rstd_next (may be NULL) for the next frame. */
void hc_frame_out_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, float *Xnext, float *rstd_next,
                       size_t N, int C);
/* Backward of the write-back: df (N, C) OVERWRITTEN = sum_i post_i dY_i; dcoef (N, 2n + n^2)
 * gets [ . | dpost | dH ] (dpre is filled by hc_frame_in_backward_cuda). */
void hc_frame_out_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, const float *dY, float *df,
                                float *dcoef, size_t N, int C);
/* Backward of the input side and of the write-back's stream mixing: dX (N, n, C)
 * OVERWRITTEN with the whole gradient of X (H^T dY + pre du + the norm and projection
 * paths); dg, dW, dtheta accumulate. dz (N, K) and srow (N, nr) are scratch. */
void hc_frame_in_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, const float *du,
                               const float *dY, float *dX, float *dcoef, float *dz, float *srow, size_t N, int C);

/* The per-token math (hc_token.cu): kernels/hc_math.h, one thread per token; at n = 4 a
 * kernel per method compiled with n and the method constant (hc_token_compiled says which
 * runs; S2HC_CUDA_TOKEN=generic forces the generic one). The frame calls these; the device
 * checks call them alone, without rstd, and compare them with the host.
 * Forward over N tokens of z (N, K), scaled by rstd per row first when rstd is given:
 * -> pre, post, H, cache.
 * Backward from dcoef (N, 2n + n^2) = [dpre | dpost | dH]: dz (N, K) overwritten, dtheta
 * (n_theta) += the sum over tokens (per-thread rows in ctx->hc_dth, summed in a fixed
 * order); with rstd, also srow = <dz, z> per row and then dz *= rstd. */
int hc_token_compiled(const hc_spec *s);
void hc_coef_forward_cuda(cuda_ctx *ctx, const hc_spec *s, const float *theta, float *z, const float *rstd,
                          float *pre, float *post, float *H, float *cache, size_t N);
void hc_coef_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const float *theta, const float *z, const float *cache,
                           const float *dcoef, float *dz, float *dtheta, const float *rstd, float *srow, size_t N);
/* Raise the device's per-thread stack to what the per-token kernels need (before the
 * model's memory is counted: the driver reserves it at once). */
/* 0, or the bytes per thread it could not reserve (the device's memory is short; the
 * model's memory check reports it). */
size_t hc_frame_reserve_stack(void);

#endif
