/* hc_token.cu: the frame's per-token math on the device: kernels/hc_math.h's hc_forward and
 * hc_backward themselves, one thread per token (hc_cuda.cuh has the map, docs/cuda.md
 * "Per-token math at any K").
 *
 * Two builds of the same two kernels:
 *   generic   n and the method read from the spec at run time: any method at any n. Its
 *             small matrices are indexed by run-time n, so they live in the thread's local
 *             memory (ptxas, sm_90: 4.3 KB of stack forward, 5.4 KB backward).
 *   n = 4     one instance per method with n and the method compile-time constants in the
 *             kernel's copy of the spec: every loop over streams unrolls, the method's
 *             switch folds, and the small matrices become registers (ptxas: no stack for
 *             orthogonal, s2hc, s2hc_rot; 64 bytes for identity; 0.25-0.6 KB for hc, mhc,
 *             mhc_lite; 1.4-1.7 KB for kromhc, whose factor loops stay run-time).
 * n = 4 is the paper's setting for every comparison (and the issue's cost target); other n
 * run the generic build (instantiating all n = 2..8 compiled for three and a half minutes
 * and saved less, their arrays sized by K). Both compute the same expressions in the
 * same order; they may differ in the last bits where the compiler contracts a product
 * into an FMA differently. S2HC_CUDA_TOKEN=generic forces the generic build (a hook: the
 * check's timing part runs s2hc both ways).
 */
#include <math.h>
#include "kernels/cuda/hc_cuda.cuh"
#include "kernels/cuda/ops_cuda.cuh" /* colsum_add_cuda */

#define HC_TOKEN_THREADS 64    /* threads per block: one token each */
#define HC_STACK_SLACK 256     /* stack bytes over the kernels' own frames */
#define HC_TOKEN_N 4           /* the n compiled per method */
#define HC_THETA_SMEM 4096     /* theta staged in shared memory up to this many floats */

/* The block's copy of theta in shared memory when it is small enough (smem > 0 at the
 * launch: hc_theta_smem), else theta itself. One thread runs a token's whole method, and
 * the tokens of a sublayer fill only a few warps per SM, so nothing hides the latency of
 * its reads of theta: from shared memory each costs a few dozen cycles rather than an L2
 * round trip. Every thread of the block must call it (a barrier). */
static __device__ __forceinline__ const float *hc_stage_theta(const float *theta, int n_theta, int staged) {
    extern __shared__ float hc_theta_sh[];
    if (!staged) return theta;
    cuda_stage(hc_theta_sh, theta, n_theta, (int)threadIdx.x, (int)blockDim.x);
    __syncthreads();
    return hc_theta_sh;
}
static size_t hc_theta_smem(const hc_spec *s) {
    return s->n_theta > 0 && s->n_theta <= HC_THETA_SMEM ? (size_t)s->n_theta * sizeof(float) : 0;
}

/* z *= rstd per row first when rstd is given, then the method's forward. NN = 0: n and the
 * method from the spec; else both constants (the caller checked they match). */
template <int NN, int MM>
static __global__ void __launch_bounds__(HC_TOKEN_THREADS)
hc_coef_forward_kernel(hc_spec s, const float *theta, float *z, const float *rstd, float *pre, float *post, float *H,
                       float *cache, size_t N, int staged) {
    size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    theta = hc_stage_theta(theta, s.n_theta, staged);
    if (t >= N) return;
    if (NN) {
        s.n = NN;
        s.method = (hc_method)MM;
    }
    const int n = s.n, K = s.K;
    float *zt = z + t * K;
    if (rstd) {
        const int nr = s.norm == HC_NORM_STREAM ? n : 1, Kr = K / nr;
        for (int r = 0; r < nr; r++) {
            float rs = rstd[t * nr + r];
            for (int k = 0; k < Kr; k++) zt[r * Kr + k] *= rs;
        }
    }
    hc_forward(&s, theta, zt, pre + t * n, post + t * n, H + t * n * n, cache + t * (size_t)s.cache);
}

/* The norm's part of a token's backward: srow = <dz, z> per row (the input backward makes
 * it rstd^2 <dz, z> / D), then dz *= rstd (the GEMMs' operand). */
static __device__ __forceinline__ void hc_coef_norm_rows(const hc_spec *s, float *dzt, const float *zt,
                                                         const float *rstd, float *srow, size_t t) {
    const int nr = s->norm == HC_NORM_STREAM ? s->n : 1, Kr = s->K / nr;
    for (int r = 0; r < nr; r++) {
        float rs = rstd[t * nr + r], dot = 0;
        for (int k = 0; k < Kr; k++) dot += dzt[r * Kr + k] * zt[r * Kr + k];
        srow[t * nr + r] = dot;
        for (int k = 0; k < Kr; k++) dzt[r * Kr + k] *= rs;
    }
}

/* Thread g handles tokens g, g + G, ..., each into its own theta row g; then, when rstd is
 * given, hc_coef_norm_rows. The compiled instances (NN > 0) take one token per thread
 * (G = N: the caller checks), so that hc_backward is called once and inlined: called in a
 * loop, nvcc keeps it a function of the generic spec, its arrays in local memory. */
template <int NN, int MM>
static __global__ void __launch_bounds__(HC_TOKEN_THREADS)
hc_coef_backward_kernel(hc_spec s, const float *theta, const float *z, const float *cache, const float *dcoef,
                        float *dz, float *dth, const float *rstd, float *srow, size_t N, size_t G, int staged) {
    size_t g = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    theta = hc_stage_theta(theta, s.n_theta, staged);
    if (g >= G) return;
    if (NN) {
        s.n = NN;
        s.method = (hc_method)MM;
    }
    const int n = s.n, K = s.K, nc = 2 * n + n * n;
    float *my = dth + g * (size_t)s.n_theta;
    if (NN) { /* one token (G = N), one call of hc_backward: inlined with the constants */
        const float *d = dcoef + g * nc, *zt = z + g * K;
        hc_backward(&s, theta, zt, cache + g * (size_t)s.cache, d, d + n, d + 2 * n, dz + g * K, my);
        if (rstd) hc_coef_norm_rows(&s, dz + g * K, zt, rstd, srow, g);
    } else {
        for (size_t t = g; t < N; t += G) { /* a call in a loop: nvcc keeps hc_backward a function */
            const float *d = dcoef + t * nc, *zt = z + t * K;
            hc_backward(&s, theta, zt, cache + t * (size_t)s.cache, d, d + n, d + 2 * n, dz + t * K, my);
            if (rstd) hc_coef_norm_rows(&s, dz + t * K, zt, rstd, srow, t);
        }
    }
}

int hc_token_compiled(const hc_spec *s) {
    const char *e = getenv("S2HC_CUDA_TOKEN");
    if (e && !strcmp(e, "generic")) return 0;
    return s->n == HC_TOKEN_N && s->method > HC_RC && s->method < HC_N_METHODS;
}

/* CALL with NN = 4 and MM the spec's method as constants when `compiled`, else with NN = MM
 * = 0 (the generic build, which runs any spec: also a method that has no case here yet). */
#define HC_DISPATCH_TOKEN(s, compiled, CALL)                                                      \
    do {                                                                                          \
        switch ((compiled) ? (int)(s)->method : -1) {                                             \
        case HC_IDENTITY: { constexpr int NN = HC_TOKEN_N, MM = HC_IDENTITY; CALL; } break;       \
        case HC_HC: { constexpr int NN = HC_TOKEN_N, MM = HC_HC; CALL; } break;                   \
        case HC_MHC: { constexpr int NN = HC_TOKEN_N, MM = HC_MHC; CALL; } break;                 \
        case HC_MHC_LITE: { constexpr int NN = HC_TOKEN_N, MM = HC_MHC_LITE; CALL; } break;       \
        case HC_KROMHC: { constexpr int NN = HC_TOKEN_N, MM = HC_KROMHC; CALL; } break;           \
        case HC_ORTHOGONAL: { constexpr int NN = HC_TOKEN_N, MM = HC_ORTHOGONAL; CALL; } break;   \
        case HC_S2HC: { constexpr int NN = HC_TOKEN_N, MM = HC_S2HC; CALL; } break;               \
        case HC_S2HC_ROT: { constexpr int NN = HC_TOKEN_N, MM = HC_S2HC_ROT; CALL; } break;       \
        default: { constexpr int NN = 0, MM = 0; CALL; } break;                                   \
        }                                                                                         \
    } while (0)

void hc_coef_forward_cuda(cuda_ctx *ctx, const hc_spec *s, const float *theta, float *z, const float *rstd,
                          float *pre, float *post, float *H, float *cache, size_t N) {
    if (N == 0) return;
    const unsigned blocks = cuda_blocks(N, HC_TOKEN_THREADS);
    const size_t smem = hc_theta_smem(s);
    HC_DISPATCH_TOKEN(s, hc_token_compiled(s),
                      (hc_coef_forward_kernel<NN, MM><<<blocks, HC_TOKEN_THREADS, smem, ctx->stream>>>(
                          *s, theta, z, rstd, pre, post, H, cache, N, smem > 0)));
    CUDA_LAUNCH_CHECK();
}

void hc_coef_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const float *theta, const float *z, const float *cache,
                           const float *dcoef, float *dz, float *dtheta, const float *rstd, float *srow, size_t N) {
    if (N == 0) return;
    const size_t G = hc_dtheta_rows(s, N);
    if (G * (size_t)s->n_theta > ctx->hc_dth_n) {
        fprintf(stderr, "s2hc: kernels/cuda: hc_coef_backward_cuda: theta scratch too small: reserve it first\n");
        exit(1);
    }
    CUDA_CHECK(cudaMemsetAsync(ctx->hc_dth, 0, G * (size_t)s->n_theta * sizeof(float), ctx->stream));
    const unsigned blocks = cuda_blocks(G, HC_TOKEN_THREADS);
    const size_t smem = hc_theta_smem(s);
    HC_DISPATCH_TOKEN(s, hc_token_compiled(s) && G >= N,
                      (hc_coef_backward_kernel<NN, MM><<<blocks, HC_TOKEN_THREADS, smem, ctx->stream>>>(
                          *s, theta, z, cache, dcoef, dz, ctx->hc_dth, rstd, srow, N, G, smem > 0)));
    CUDA_LAUNCH_CHECK();
    colsum_add_cuda(ctx, dtheta, ctx->hc_dth, G, (size_t)s->n_theta);
}

/* The per-thread stack (the driver's default is 1 KB), set before the model's memory is
 * counted: the driver reserves a thread's stack for every thread the GPU can hold (an
 * H200: 132 x 2048), and left to grow it at the first launch it would take over a GiB
 * after the model's memory check had passed, and fail that launch on a full device. The
 * generic build's frames, which any spec may run (S2HC_CUDA_TOKEN), are the largest. */
size_t hc_frame_reserve_stack(void) {
    cudaFuncAttributes fa, ba;
    CUDA_CHECK(cudaFuncGetAttributes(&fa, hc_coef_forward_kernel<0, 0>));
    CUDA_CHECK(cudaFuncGetAttributes(&ba, hc_coef_backward_kernel<0, 0>));
    const size_t frame = fa.localSizeBytes > ba.localSizeBytes ? fa.localSizeBytes : ba.localSizeBytes;
    const size_t need = (frame + HC_STACK_SLACK + 255) / 256 * 256;
    size_t cur = 0;
    CUDA_CHECK(cudaDeviceGetLimit(&cur, cudaLimitStackSize));
    if (need > cur && cudaDeviceSetLimit(cudaLimitStackSize, need) != cudaSuccess) {
        (void)cudaGetLastError(); /* (not sticky: cleared, the caller reports it) */
        return need;
    }
    return 0;
}
