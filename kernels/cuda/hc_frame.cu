/* hc_frame.cu: the hyper-connection frame on the device (hc_cuda.cuh has the map).
 *
 * Per sublayer, forward:
 *   hc_wprime      W' = W diag(1 + g), in chunks of rows of W
 *   GEMM           z_raw (rows, Kr) = X (rows, D) W'^T
 *   hc_coef_fwd    per token (one thread, hc_token.cu): z = rstd z_raw, hc_forward -> pre, post, H, cache
 *   hc_readout     u = sum_i pre_i X_i
 *   hc_writeback   X' = H X + post f, and rstd of X' for the next frame
 * backward:
 *   hc_out_bwd     df = sum_i post_i dY_i; dpost_i = <dY_i, f>; dH_ij = <dY_i, X_j>
 *   hc_dpre        dpre_i = <du, X_i>
 *   hc_coef_bwd    per token (hc_token.cu): hc_backward -> dz, theta rows; s = rstd^2 <dz, z> / D;
 *                  dz *= rstd
 *   fused (S2HC_CUDA_FRAME=fused, Kr <= 32, W in one chunk): one pass over the streams,
 *                  dX = dz W' + H^T dY + pre du - s X, and the token groups' partial G = dz^T X;
 *                  then dW += G diag(1 + g), dg += colsum(W o G)
 *   split (the default; faster on an H200):
 *     GEMMs        dX = dz W' (by chunks);  G = dz^T X, then dW += G diag(1 + g),
 *                  dg += colsum(W o G)
 *     hc_in_bwd    dX += H^T dY + pre du - s X
 * The norm backward in closed form: with v = W'^T dz, the CPU's
 *   dX = rstd (v - x rstd <v, x rstd> / D) and <v, x> = <dz, z> / rstd,
 * so only the per-row scalar s = rstd^2 <dz, z> / D is needed besides the GEMM.
 */
#include <math.h>
#include "kernels/cuda/hc_cuda.cuh"
#include "kernels/cuda/model_cuda.h" /* CUDA_PROF_* */
#include "kernels/cuda/ops_cuda.cuh"

#define HC_MAT_CAP ((size_t)1 << 25)   /* floats of the W' / G chunk (128 MiB) */
#define HC_DTH_CAP ((size_t)1 << 26)   /* floats of the per-thread theta rows (256 MiB) */
#define HC_ROW_THREADS 128             /* block-per-token stream kernels */
#define HC_FUSE_SCALE_K 256            /* K up to this: the coefficient kernel scales z itself */
#define HC_FIX_ROWS 32                 /* rows of W per partial sum of dg */
#define HC_FUSED_KR 32                 /* the fused input backward: rows of W up to this (registers) */
#define HC_FUSED_TB 32                 /* ... tokens whose coefficients it stages at a time (n <= 4) */
#define HC_FUSED_GROUPS 64             /* ... token groups (partial dW products) at most */
#define HC_FUSED_MIN_TOKENS 64         /* ... tokens per group at least */

/* ---- spec, sizes, scratch ----------------------------------------------------------------------- */

static size_t hc_perm_bytes(const hc_spec *s) {
    if (!s->perms) return 0;
    if (s->n_factors <= 0) return (size_t)s->n_perms * (size_t)s->n;
    size_t tot = 0;
    for (int f = 0; f < s->n_factors; f++) tot += (size_t)hc_factorial(s->factors[f]) * (size_t)s->factors[f];
    return tot;
}

void hc_spec_to_device(const hc_spec *host, hc_spec *dev) {
    *dev = *host;
    size_t nb = hc_perm_bytes(host);
    if (nb) {
        unsigned char *p = (unsigned char *)cuda_malloc_zero(nb);
        CUDA_CHECK(cudaMemcpy(p, host->perms, nb, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaDeviceSynchronize()); /* a pageable copy may still be in flight */
        dev->perms = p;
    }
}

void hc_spec_free_device(hc_spec *dev) {
    if (dev->perms) cudaFree((void *)dev->perms);
    dev->perms = NULL;
}

hc_dims hc_dims_of(const hc_spec *s, size_t N, int C) {
    hc_dims d;
    if (s->norm == HC_NORM_STREAM) {
        d.rows = N * (size_t)s->n;
        d.D = C;
        d.Kr = s->K / s->n;
        d.nr = s->n;
    } else {
        d.rows = N;
        d.D = s->n * C;
        d.Kr = s->K;
        d.nr = 1;
    }
    return d;
}

static size_t hc_chunk_rows(const hc_dims *d, size_t have) {
    size_t kc = have / (size_t)d->D;
    if (kc < 1) kc = 1;
    return kc < (size_t)d->Kr ? kc : (size_t)d->Kr;
}

size_t hc_dtheta_rows(const hc_spec *s, size_t N) {
    size_t g = HC_DTH_CAP / (size_t)(s->n_theta > 0 ? s->n_theta : 1);
    if (g < 1) g = 1;
    return g < N ? g : N;
}

/* The W' / G chunk in floats: HC_MAT_CAP, or S2HC_CUDA_CHUNK (a test hook: tests/gpu/check.cu
 * sets it small to run the chunked path of the projection with a small model). */
static size_t hc_mat_cap(void) {
    const char *e = getenv("S2HC_CUDA_CHUNK");
    size_t v = e ? (size_t)strtoull(e, NULL, 10) : 0;
    return v ? v : HC_MAT_CAP;
}

/* The input side's backward in one pass over the streams (hc_in_backward_fused_kernel),
 * when S2HC_CUDA_FRAME=fused asks for it and W's rows fit its registers (Kr <= HC_FUSED_KR)
 * and W is one chunk: the most token groups whose partial dW products it may write
 * (hc_fused_launch picks the number), or 0 for the split path. The split path is the
 * default: on an H200 at the M preset the fused kernel took 14.5 ms of streams time per
 * step against the split path's 10.3 (docs/cuda.md), although it moves fewer bytes;
 * it has since been rebuilt to keep more loads in flight, not yet timed. The hook lets
 * tests/gpu/check.cu compare both with the CPU and time one against the other. */
static size_t hc_fused_groups(const hc_spec *s, size_t N, int C) {
    const char *e = getenv("S2HC_CUDA_FRAME");
    if (!e || strcmp(e, "fused")) return 0;
    const hc_dims d = hc_dims_of(s, N, C);
    const size_t mat = (size_t)d.Kr * d.D;
    if (d.Kr < 1 || d.Kr > HC_FUSED_KR || s->n < 2 || s->n > HC_MAX_N || mat > hc_mat_cap() || N == 0) return 0;
    size_t G = (N + HC_FUSED_MIN_TOKENS - 1) / HC_FUSED_MIN_TOKENS;
    if (G > HC_FUSED_GROUPS) G = HC_FUSED_GROUPS;
    if (G > hc_mat_cap() / mat) G = hc_mat_cap() / mat;
    const size_t per = (N + G - 1) / G;
    return (N + per - 1) / per; /* no empty group */
}

void hc_scratch_need(const hc_spec *s, size_t N, int C, int x_bf16, cuda_scratch_need *need) {
    hc_dims d = hc_dims_of(s, N, C);
    size_t mat = (size_t)d.Kr * d.D;
    if (mat > hc_mat_cap()) mat = hc_mat_cap();
    if (mat < (size_t)d.D) mat = d.D;
    const size_t fg = hc_fused_groups(s, N, C); /* its partial products live in hc_mat */
    if (fg * (size_t)d.Kr * d.D > mat) mat = fg * (size_t)d.Kr * d.D;
    if (mat > need->hc_mat) need->hc_mat = mat;
    size_t kc = hc_chunk_rows(&d, mat);
    size_t part = ((kc + HC_FIX_ROWS - 1) / HC_FIX_ROWS) * (size_t)d.D;
    if (part > need->part) need->part = part;
    size_t dth = hc_dtheta_rows(s, N) * (size_t)s->n_theta;
    if (dth > need->hc_dth) need->hc_dth = dth;
    if (x_bf16) { /* bf16 streams: W' chunks in bf16 (cvt_b), and dz in bf16 for the split dW product (cvt_a) */
        if (kc * d.D > need->cvt_b) need->cvt_b = kc * d.D;
        if (d.rows * d.Kr > need->cvt_a) need->cvt_a = d.rows * d.Kr;
    }
}

/* ---- projection helpers ------------------------------------------------------------------------- */

/* z (rows, Kr) *= rstd (rows), coalesced (large K) */
static __global__ void hc_scale_rows_kernel(float *z, const float *rstd, size_t rows, int Kr) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < rows * Kr) z[i] *= rstd[i / Kr];
}

/* ---- stream kernels -------------------------------------------------------------------------------- */

/* The streams X are float, or bf16 (residual.stream_precision: bf16): TX is their type.
 * Every sum is float; a value written to bf16 streams is rounded to nearest even, and
 * whatever is computed from it afterwards (the next frame's rms) uses the rounded value. */
__device__ __forceinline__ float hc_ld(const float *p) { return *p; }
__device__ __forceinline__ float hc_ld(const bf16 *p) { return __bfloat162float(*p); }
__device__ __forceinline__ float hc_put(float *p, float v) {
    *p = v;
    return v;
}
__device__ __forceinline__ float hc_put(bf16 *p, float v) {
    const bf16 b = __float2bfloat16_rn(v);
    *p = b;
    return __bfloat162float(b);
}

/* W' (Kc, D) = W[j0 .. j0 + Kc) diag(1 + g) */
static __global__ void hc_wprime_kernel(float *Wp, const float *W, const float *g, size_t Kc, int D) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < Kc * D) Wp[i] = W[i] * (1.0f + g[i % D]);
}

/* the same, rounded to bf16 (the product with bf16 streams) */
static __global__ void hc_wprime_bf16_kernel(bf16 *Wp, const float *W, const float *g, size_t Kc, int D) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < Kc * D) Wp[i] = __float2bfloat16_rn(W[i] * (1.0f + g[i % D]));
}

/* rstd (rows) = 1 / sqrt(mean(x^2) + eps) over D values per row, one block per row */
template <typename TX>
static __global__ void hc_rstd_rows_kernel(float *rstd, const TX *X, int D) {
    __shared__ float sh[32];
    size_t r = blockIdx.x;
    const TX *x = X + r * D;
    float s = 0;
    for (int k = threadIdx.x; k < D; k += blockDim.x) {
        const float v = hc_ld(x + k);
        s += v * v;
    }
    s = block_sum(s, sh);
    if (threadIdx.x == 0) rstd[r] = (float)(1.0 / sqrt((double)s / (double)D + HC_RMS_EPS));
}

/* X[t, i] = in[t] for every stream */
template <typename TX>
static __global__ void hc_broadcast_kernel(TX *X, const float *in, size_t N, int n, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * n * C) return;
    size_t t = i / ((size_t)n * C), c = i % C;
    hc_put(X + i, in[t * C + c]);
}

/* out[t] = sum_i X[t, i] */
template <typename TX>
static __global__ void hc_sum_kernel(float *out, const TX *X, size_t N, int n, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    size_t t = i / C, c = i % C;
    float s = 0;
    for (int k = 0; k < n; k++) s += hc_ld(X + (t * n + k) * C + c);
    out[i] = s;
}

/* u[t] = sum_i pre[t, i] X[t, i] */
template <typename TX>
static __global__ void hc_readout_kernel(float *u, const TX *X, const float *pre, size_t N, int n, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    size_t t = i / C, c = i % C;
    float s = 0;
    for (int k = 0; k < n; k++) s += pre[t * n + k] * hc_ld(X + (t * n + k) * C + c);
    u[i] = s;
}

/* Sum NV per-thread values over the block (fixed order); thread v < NV gets value v in
 * out[v] (shared, NV values). red: NV * (blockDim / 32) values of shared memory. */
template <int NV, typename TV>
__device__ __forceinline__ void hc_block_reduce(TV *acc, TV *red, TV *out) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
    for (int v = 0; v < NV; v++) {
        TV x = acc[v];
        for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
        if (lane == 0) red[v * nw + w] = x;
    }
    __syncthreads();
    for (int v = threadIdx.x; v < NV; v += blockDim.x) {
        TV s = 0;
        for (int k = 0; k < nw; k++) s += red[v * nw + k];
        out[v] = s;
    }
    __syncthreads();
}

/* One block per token: X'[i] = post_i f + sum_j H_ij X_j (the CPU's order), and the rms
 * of X' (flat or per stream) for the next frame's norm. */
template <int NS, typename TX>
static __global__ void __launch_bounds__(HC_ROW_THREADS)
hc_writeback_kernel(TX *__restrict__ Xn, float *__restrict__ rstd_next, int flat, const TX *__restrict__ X,
                    const float *__restrict__ H, const float *__restrict__ post, const float *__restrict__ f, int C) {
    __shared__ float Hs[NS * NS], ps[NS], red[NS * (HC_ROW_THREADS / 32)], ss[NS];
    const size_t t = blockIdx.x;
    for (int i = threadIdx.x; i < NS * NS; i += blockDim.x) Hs[i] = H[t * NS * NS + i];
    for (int i = threadIdx.x; i < NS; i += blockDim.x) ps[i] = post[t * NS + i];
    __syncthreads();
    const TX *Xt = X + t * NS * C;
    const float *ft = f + t * C;
    TX *Yt = Xn + t * NS * C;
    float acc[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) acc[i] = 0;
#pragma unroll 2
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float x[NS], fc = ft[c];
#pragma unroll
        for (int j = 0; j < NS; j++) x[j] = hc_ld(Xt + (size_t)j * C + c);
#pragma unroll
        for (int i = 0; i < NS; i++) {
            float y = ps[i] * fc;
#pragma unroll
            for (int j = 0; j < NS; j++) y += Hs[i * NS + j] * x[j];
            y = hc_put(Yt + (size_t)i * C + c, y);
            acc[i] += y * y;
        }
    }
    if (!rstd_next) return;  /* uniform over the block */
    hc_block_reduce<NS, float>(acc, red, ss);
    if (threadIdx.x == 0) {
        if (flat) {
            float s = 0;
            for (int i = 0; i < NS; i++) s += ss[i];
            rstd_next[t] = (float)(1.0 / sqrt((double)s / ((double)NS * C) + HC_RMS_EPS));
        } else {
            for (int i = 0; i < NS; i++) rstd_next[t * NS + i] = (float)(1.0 / sqrt((double)ss[i] / C + HC_RMS_EPS));
        }
    }
}

/* One block per token: df = sum_i post_i dY_i (written), dpost_i = <dY_i, f>,
 * dH_ij = <dY_i, X_j> into dcoef [ . | dpost | dH ]. The dot products accumulate in
 * double, as on the CPU: the streams are nearly equal copies early in training, so dH is
 * close to rank one and the doubly stochastic methods see only its small remainder
 * (their gradients subtract row and column means); float sums lose that remainder. */
template <int NS, typename TX>
static __global__ void __launch_bounds__(HC_ROW_THREADS)
hc_out_backward_kernel(float *df, float *dcoef, const float *dY, const TX *X, const float *post, const float *f,
                       int C) {
    constexpr int NV = NS * NS + NS;
    __shared__ float ps[NS];
    __shared__ double red[NV * (HC_ROW_THREADS / 32)], res[NV];
    const size_t t = blockIdx.x;
    for (int i = threadIdx.x; i < NS; i += blockDim.x) ps[i] = post[t * NS + i];
    __syncthreads();
    const float *dYt = dY + t * NS * C, *ft = f + t * C;
    const TX *Xt = X + t * NS * C;
    double acc[NV];
#pragma unroll
    for (int v = 0; v < NV; v++) acc[v] = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float dy[NS], x[NS], fc = ft[c], d = 0;
#pragma unroll
        for (int i = 0; i < NS; i++) {
            dy[i] = dYt[(size_t)i * C + c];
            x[i] = hc_ld(Xt + (size_t)i * C + c);
        }
#pragma unroll
        for (int i = 0; i < NS; i++) {
            d += ps[i] * dy[i];
            acc[NS * NS + i] += (double)dy[i] * fc;
#pragma unroll
            for (int j = 0; j < NS; j++) acc[i * NS + j] += (double)dy[i] * x[j];
        }
        df[t * C + c] = d;
    }
    hc_block_reduce<NV, double>(acc, red, res);
    float *dc = dcoef + t * (2 * NS + NS * NS);
    for (int v = threadIdx.x; v < NV; v += blockDim.x) {
        if (v < NS * NS) dc[2 * NS + v] = (float)res[v];
        else dc[NS + (v - NS * NS)] = (float)res[v];
    }
}

/* One block per token: dpre_i = <du, X_i> into dcoef [ dpre | . | . ] (double sums, as
 * hc_out_backward_kernel and the CPU). */
template <int NS, typename TX>
static __global__ void __launch_bounds__(HC_ROW_THREADS)
hc_dpre_kernel(float *dcoef, const float *du, const TX *X, int C) {
    __shared__ double red[NS * (HC_ROW_THREADS / 32)], res[NS];
    const size_t t = blockIdx.x;
    const TX *Xt = X + t * NS * C;
    const float *dut = du + t * C;
    double acc[NS];
#pragma unroll
    for (int i = 0; i < NS; i++) acc[i] = 0;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        double d = dut[c];
#pragma unroll
        for (int i = 0; i < NS; i++) acc[i] += d * hc_ld(Xt + (size_t)i * C + c);
    }
    hc_block_reduce<NS, double>(acc, red, res);
    for (int i = threadIdx.x; i < NS; i += blockDim.x) dcoef[t * (2 * NS + NS * NS) + i] = (float)res[i];
}

/* One block per token: dX_j += sum_i H_ij dY_i + pre_j du - s_j X_j, where dX already
 * holds rstd W'^T dz and s_j = rstd^2 <dz, z> / D of the row holding stream j. */
template <int NS, typename TX>
static __global__ void __launch_bounds__(HC_ROW_THREADS)
hc_in_backward_kernel(float *__restrict__ dX, const float *__restrict__ dY, const float *__restrict__ du,
                      const TX *__restrict__ X, const float *__restrict__ H, const float *__restrict__ pre,
                      const float *__restrict__ rstd, const float *__restrict__ sdot, int flat, int C, float invD) {
    __shared__ float Hs[NS * NS], prs[NS], sj[NS];
    const size_t t = blockIdx.x;
    for (int i = threadIdx.x; i < NS * NS; i += blockDim.x) Hs[i] = H[t * NS * NS + i];
    for (int i = threadIdx.x; i < NS; i += blockDim.x) {
        prs[i] = pre[t * NS + i];
        size_t r = flat ? t : t * NS + i;
        float rs = rstd[r];
        sj[i] = rs * rs * sdot[r] * invD;
    }
    __syncthreads();
    const float *dYt = dY + t * NS * C, *dut = du + t * C;
    const TX *Xt = X + t * NS * C;
    float *dXt = dX + t * NS * C;
    /* every load of a channel (and of the next one) before any store: a store to dX
     * between the loads would make each stream's wait for memory a separate one */
#pragma unroll 2
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float dy[NS], x[NS], dx[NS], duc = dut[c];
#pragma unroll
        for (int i = 0; i < NS; i++) {
            const size_t e = (size_t)i * C + c;
            dy[i] = dYt[e];
            x[i] = hc_ld(Xt + e);
            dx[i] = dXt[e];
        }
#pragma unroll
        for (int j = 0; j < NS; j++) {
            float v = 0;
#pragma unroll
            for (int i = 0; i < NS; i++) v += Hs[i * NS + j] * dy[i];
            dXt[(size_t)j * C + c] = dx[j] + (v + prs[j] * duc - sj[j] * x[j]);
        }
    }
}

/* The fused kernel's staging, by n: tokens whose coefficients (dz, H, pre, s) sit in shared
 * memory at a time (TB), and tokens whose streams do (SB, twice: one set read while the next
 * is loaded). At n > 4 fewer of both keep the static shared memory under 48 KB. */
template <int NS> struct hc_fused_tiles {
    static constexpr int TB = NS <= 4 ? HC_FUSED_TB : HC_FUSED_TB / 2;
    static constexpr int SB = NS <= 4 ? 8 : 4;
    static constexpr int DU = (SB + NS - 1) / NS; /* du values each thread loads per set */
};

/* One set of SB tokens' streams into registers: thread (c, j) loads X and dY of its
 * channel c of stream j, and du of channel c for the set's tokens b = j, j + NS, ... (0
 * past the group's end or the channels' end). Every load is issued before any is used. */
template <int NS, typename TX>
__device__ __forceinline__ void hc_fused_load(float *rx, float *ry, float *ru, const TX *__restrict__ X,
                                              const float *__restrict__ dY, const float *__restrict__ du, size_t t,
                                              size_t t1, int j, int c, int C, bool on) {
    constexpr int SB = hc_fused_tiles<NS>::SB, DU = hc_fused_tiles<NS>::DU;
    const size_t e0 = (t * NS + j) * C + c, st = (size_t)NS * C;
    if (on && t + SB <= t1) { /* a whole set: no conditions between the loads */
#pragma unroll
        for (int b = 0; b < SB; b++) {
            rx[b] = hc_ld(X + e0 + b * st);
            ry[b] = dY[e0 + b * st];
        }
#pragma unroll
        for (int q = 0; q < DU; q++)
            ru[q] = j + q * NS < SB ? du[(t + j + q * NS) * C + c] : 0.0f;
        return;
    }
#pragma unroll
    for (int b = 0; b < SB; b++) {
        const bool ok = on && t + b < t1;
        rx[b] = ok ? hc_ld(X + e0 + b * st) : 0.0f;
        ry[b] = ok ? dY[e0 + b * st] : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < DU; q++) {
        const int b = j + q * NS;
        ru[q] = on && b < SB && t + b < t1 ? du[(t + b) * C + c] : 0.0f;
    }
}

/* The input side's backward in one pass over the streams, for Kr <= KM rows of W: one
 * block per 32 channels of every stream (thread (c, j): channel c of stream j) and per
 * group of tokens, which it walks in order. With dz already times rstd (hc_coef_backward_cuda),
 *   dX_j = sum_k dz[row, k] W'[k, d] + sum_i H_ij dY_i + pre_j du - s_j X_j   (written once)
 *   Gp[group, k, d] = sum over the group's rows of dz[row, k] X[row, d]       (dW's product)
 * where W' = W diag(1 + g), row = the token (flat norm, d = j C + c) or (token, j) (per
 * stream, d = c; the n streams' sums meet in shared memory, in stream order). The thread
 * keeps its column of W' and its Kr partial products in registers, so the streams, dY
 * and du are read once and dX written once: the split path's two GEMMs and in_bwd read
 * X three times and dY once, and write dX twice and read it once.
 * The streams go through shared memory SB tokens at a time (hc_fused_tiles), each thread
 * loading only its own stream's X and dY (and a share of du) for all SB tokens at once,
 * the next set's loads in flight while this set's tokens are computed: 2 SB + DU loads
 * per thread outstanding instead of one token's n + 2, and dY read once per block rather
 * than once per stream (each thread needs every stream's dY of its channel). */
template <int NS, int KM, typename TX>
static __global__ void __launch_bounds__(32 * NS)
hc_in_backward_fused_kernel(float *__restrict__ dX, float *__restrict__ Gp, const float *__restrict__ dY,
                            const float *__restrict__ du, const TX *__restrict__ X, const float *__restrict__ H,
                            const float *__restrict__ pre, const float *__restrict__ rstd,
                            const float *__restrict__ sdot, const float *__restrict__ dz,
                            const float *__restrict__ W, const float *__restrict__ g, int flat, int C, int Kr,
                            float invD, size_t N, size_t per) {
    constexpr int TB = hc_fused_tiles<NS>::TB, SB = hc_fused_tiles<NS>::SB, DU = hc_fused_tiles<NS>::DU;
    constexpr int ZS = TB * NS * KM, SS = SB * NS * 32; /* dz's floats; one set of one stream array */
    /* dz, then two sets of X, dY and du; at the end the streams' sums of Gp from 0 */
    constexpr int SH = ZS + 2 * (2 * SS + SB * 32);
    static_assert(SH >= NS * KM * 32, "the shared buffer holds the per-stream sums of Gp");
    static_assert(TB % SB == 0, "a coefficients' batch is whole sets of tokens");
    __shared__ float sh[SH];
    __shared__ float Hs[TB * NS * NS], prs[TB * NS], sj[TB * NS];
    float *const dzs = sh;
    const int lane = threadIdx.x, j = threadIdx.y, tid = j * 32 + lane, nthr = 32 * NS;
    const int c = blockIdx.x * 32 + lane;
    const bool on = c < C;
    const size_t D = flat ? (size_t)NS * C : (size_t)C, d = flat ? (size_t)j * C + c : (size_t)c;
    const int K = flat ? Kr : NS * Kr, zoff = flat ? 0 : j * Kr;
    const size_t t0 = (size_t)blockIdx.y * per, t1 = t0 + per < N ? t0 + per : N;
    const size_t nsub = t1 > t0 ? (t1 - t0 + SB - 1) / SB : 0;
    float w[KM], ga[KM];
    const float gk = on ? 1.0f + g[d] : 0.0f;
#pragma unroll
    for (int k = 0; k < KM; k++) {
        w[k] = on && k < Kr ? W[(size_t)k * D + d] * gk : 0.0f;
        ga[k] = 0.0f;
    }
    float rx[SB], ry[SB], ru[DU];
    if (nsub) hc_fused_load<NS>(rx, ry, ru, X, dY, du, t0, t1, j, c, C, on);
    for (size_t s = 0; s < nsub; s++) {
        const size_t ts = t0 + s * SB; /* this set's first token */
        const int bt = (int)((s * SB) % TB); /* its place in the coefficients' batch */
        if (bt == 0) {
            __syncthreads(); /* the previous batch's coefficients are no longer read */
            const int nb = (int)(t1 - ts < TB ? t1 - ts : TB);
            cuda_stage(dzs, dz + ts * K, nb * K, tid, nthr);
            cuda_stage(Hs, H + ts * NS * NS, nb * NS * NS, tid, nthr);
            for (int i = tid; i < nb * NS; i += nthr) {
                prs[i] = pre[ts * NS + i];
                const size_t r = flat ? ts + i / NS : ts * NS + i;
                const float rs = rstd[r];
                sj[i] = rs * rs * sdot[r] * invD;
            }
        }
        /* this set into its buffer (the set two back, which used it, is done: every thread
         * passed the last barrier after computing it) */
        float *const xs = sh + ZS + (s & 1) * (2 * SS + SB * 32), *const ys = xs + SS, *const us = ys + SS;
#pragma unroll
        for (int b = 0; b < SB; b++) {
            xs[(b * NS + j) * 32 + lane] = rx[b];
            ys[(b * NS + j) * 32 + lane] = ry[b];
        }
#pragma unroll
        for (int q = 0; q < DU; q++)
            if (j + q * NS < SB) us[(j + q * NS) * 32 + lane] = ru[q];
        __syncthreads();
        if (s + 1 < nsub) hc_fused_load<NS>(rx, ry, ru, X, dY, du, ts + SB, t1, j, c, C, on);
        if (!on) continue;
        const int nbs = (int)(t1 - ts < SB ? t1 - ts : SB);
#pragma unroll
        for (int b = 0; b < SB; b++) {
            if (b >= nbs) break;
            const int bb = bt + b;
            const size_t e = ((ts + b) * NS + j) * C + c;
            const float x = xs[(b * NS + j) * 32 + lane], duc = us[b * 32 + lane];
            float dy[NS];
#pragma unroll
            for (int i = 0; i < NS; i++) dy[i] = ys[(b * NS + i) * 32 + lane];
            const float *zr = dzs + bb * K + zoff;
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < KM; k++)
                if (k < Kr) {
                    const float dk = zr[k];
                    acc += dk * w[k];
                    ga[k] += dk * x;
                }
            float v = 0.0f;
#pragma unroll
            for (int i = 0; i < NS; i++) v += Hs[(bb * NS + i) * NS + j] * dy[i];
            dX[e] = acc + (v + prs[bb * NS + j] * duc - sj[bb * NS + j] * x);
        }
    }
    float *gp = Gp + (size_t)blockIdx.y * Kr * D;
    if (flat) {
        if (on)
#pragma unroll
            for (int k = 0; k < KM; k++)
                if (k < Kr) gp[(size_t)k * D + d] = ga[k];
        return;
    }
    __syncthreads(); /* the shared buffer is free: the streams' partial products meet there */
#pragma unroll
    for (int k = 0; k < KM; k++)
        if (k < Kr) sh[(j * KM + k) * 32 + lane] = ga[k];
    __syncthreads();
    for (int i = tid; i < Kr * 32; i += nthr) {
        const int k = i / 32, l = i % 32, cc = blockIdx.x * 32 + l;
        if (cc >= C) continue;
        float sum = 0.0f;
        for (int s = 0; s < NS; s++) sum += sh[(s * KM + k) * 32 + l];
        gp[(size_t)k * D + cc] = sum;
    }
}

/* Over a chunk of rows j0.. of W: with G the sum of `groups` partial products (group
 * stride gs floats, in group order), dW[j, k] += G[j, k] (1 + g_k) and partial sums
 * part[y, k] = sum over the block's rows of W[j, k] G[j, k]. grid (ceil(D / 256), row groups). */
static __global__ void hc_proj_grad_kernel(float *dW, float *part, const float *W, const float *G, size_t groups,
                                           size_t gs, const float *g, size_t Kc, int D) {
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= (size_t)D) return;
    size_t j0 = (size_t)blockIdx.y * HC_FIX_ROWS, j1 = j0 + HC_FIX_ROWS < Kc ? j0 + HC_FIX_ROWS : Kc;
    float gk = 1.0f + g[k], acc = 0;
    for (size_t j = j0; j < j1; j++) {
        float gv = G[j * D + k];
        for (size_t q = 1; q < groups; q++) gv += G[q * gs + j * D + k];
        acc += W[j * D + k] * gv;
        dW[j * D + k] += gv * gk;
    }
    part[(size_t)blockIdx.y * D + k] = acc;
}

/* ---- dispatch on n -------------------------------------------------------------------------------- */

#define HC_DISPATCH_N(n, CALL)                                                              \
    switch (n) {                                                                            \
    case 2: { constexpr int NS = 2; CALL; } break;                                          \
    case 3: { constexpr int NS = 3; CALL; } break;                                          \
    case 4: { constexpr int NS = 4; CALL; } break;                                          \
    case 5: { constexpr int NS = 5; CALL; } break;                                          \
    case 6: { constexpr int NS = 6; CALL; } break;                                          \
    case 7: { constexpr int NS = 7; CALL; } break;                                          \
    case 8: { constexpr int NS = 8; CALL; } break;                                          \
    default:                                                                                \
        fprintf(stderr, "s2hc: kernels/cuda: hyper-connection frame: n = %d outside 2..%d\n", n, HC_MAX_N); \
        exit(1);                                                                            \
    }

/* The streams' type TX: bf16 with residual.stream_precision: bf16, else float. */
#define HC_DISPATCH_X(x_bf16, CALL)                                                         \
    if (x_bf16) { using TX = bf16; CALL; }                                                  \
    else { using TX = float; CALL; }

/* The fused kernel's register count: the smallest of 8, 16, 24, 32 that holds Kr rows. */
#define HC_DISPATCH_KM(Kr, CALL)                                                            \
    if ((Kr) <= 8) { constexpr int KM = 8; CALL; }                                          \
    else if ((Kr) <= 16) { constexpr int KM = 16; CALL; }                                   \
    else if ((Kr) <= 24) { constexpr int KM = 24; CALL; }                                   \
    else { constexpr int KM = 32; CALL; }

/* ---- host side ------------------------------------------------------------------------------------ */

void hc_streams_init_cuda(cuda_ctx *ctx, const hc_spec *s, float *X0, float *rstd0, const float *in, size_t N, int C,
                          int x_bf16) {
    const int n = s->n;
    size_t tot = N * (size_t)n * C;
    if (tot == 0) return;
    HC_DISPATCH_X(x_bf16, (hc_broadcast_kernel<TX><<<cuda_blocks(tot, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
                              (TX *)X0, in, N, n, C)));
    CUDA_LAUNCH_CHECK();
    if (!rstd0) return;
    hc_dims d = hc_dims_of(s, N, C);
    HC_DISPATCH_X(x_bf16, (hc_rstd_rows_kernel<TX><<<(unsigned)d.rows, HC_ROW_THREADS, 0, ctx->stream>>>(
                              rstd0, (const TX *)X0, d.D)));
    CUDA_LAUNCH_CHECK();
}

void hc_streams_sum_cuda(cuda_ctx *ctx, float *out, const float *X, size_t N, int n, int C, int x_bf16) {
    size_t tot = N * (size_t)C;
    if (tot == 0) return;
    HC_DISPATCH_X(x_bf16, (hc_sum_kernel<TX><<<cuda_blocks(tot, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
                              out, (const TX *)X, N, n, C)));
    CUDA_LAUNCH_CHECK();
}

/* Rows of W per chunk: what hc_scratch_need asked for (the context may hold more). */
static size_t hc_chunk_of(const hc_spec *s, size_t N, int C) {
    cuda_scratch_need need;
    memset(&need, 0, sizeof need);
    hc_scratch_need(s, N, C, 0, &need);
    hc_dims d = hc_dims_of(s, N, C);
    return hc_chunk_rows(&d, need.hc_mat);
}

static void hc_need(const cuda_ctx *ctx, const hc_spec *s, size_t N, int C, int x_bf16, const char *op) {
    cuda_scratch_need need;
    memset(&need, 0, sizeof need);
    hc_scratch_need(s, N, C, x_bf16, &need);
    if (need.hc_mat > ctx->hc_mat_n || need.hc_dth > ctx->hc_dth_n || need.part > ctx->part_n ||
        need.cvt_a > ctx->cvt_a_n || need.cvt_b > ctx->cvt_b_n) {
        fprintf(stderr, "s2hc: kernels/cuda: %s: frame scratch too small: reserve it first\n", op);
        exit(1);
    }
}

void hc_frame_in_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, size_t N, int C) {
    if (N == 0) return;
    hc_need(ctx, s, N, C, fr->x_bf16, "hc_frame_in_cuda");
    const hc_dims d = hc_dims_of(s, N, C);
    const size_t kc = hc_chunk_of(s, N, C);
    /* z_raw (rows, Kr) = X (rows, D) W'^T, W' by chunks of kc rows (bf16 streams: W' in bf16 too) */
    for (size_t j0 = 0; j0 < (size_t)d.Kr; j0 += kc) {
        size_t len = (size_t)d.Kr - j0 < kc ? (size_t)d.Kr - j0 : kc;
        if (fr->x_bf16) {
            hc_wprime_bf16_kernel<<<cuda_blocks(len * d.D, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
                ctx->cvt_b, fr->W + j0 * d.D, fr->g, len, d.D);
            CUDA_LAUNCH_CHECK();
            gemm_bf16(ctx, 0, 1, (int)d.rows, (int)len, d.D, 1.0f, (const bf16 *)fr->X, d.D, ctx->cvt_b, d.D, 0.0f,
                      fr->z + j0, d.Kr);
            continue;
        }
        hc_wprime_kernel<<<cuda_blocks(len * d.D, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
            ctx->hc_mat, fr->W + j0 * d.D, fr->g, len, d.D);
        CUDA_LAUNCH_CHECK();
        gemm_f32(ctx, 0, 1, (int)d.rows, (int)len, d.D, 1.0f, fr->X, d.D, ctx->hc_mat, d.D, 0.0f, fr->z + j0, d.Kr);
    }
    int fuse = s->K <= HC_FUSE_SCALE_K;
    if (!fuse) {
        size_t tot = d.rows * (size_t)d.Kr;
        hc_scale_rows_kernel<<<cuda_blocks(tot, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(fr->z, fr->rstd, d.rows,
                                                                                               d.Kr);
        CUDA_LAUNCH_CHECK();
    }
    cuda_prof_mark_op(ctx, CUDA_PROF_HC_PROJ, CUDA_OP_HC_Z);
    hc_coef_forward_cuda(ctx, s, fr->theta, fr->z, fuse ? fr->rstd : NULL, fr->pre, fr->post, fr->H, fr->cache, N);
    cuda_prof_mark_op(ctx, CUDA_PROF_HC_MATH, CUDA_OP_HC_COEF_FWD);
    size_t tot = N * (size_t)C;
    HC_DISPATCH_X(fr->x_bf16, (hc_readout_kernel<TX><<<cuda_blocks(tot, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
                                  fr->u, (const TX *)fr->X, fr->pre, N, s->n, C)));
    CUDA_LAUNCH_CHECK();
    cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_READOUT);
}

void hc_frame_out_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, float *Xnext, float *rstd_next,
                       size_t N, int C) {
    if (N == 0) return;
    const int flat = s->norm != HC_NORM_STREAM;
    HC_DISPATCH_X(fr->x_bf16, HC_DISPATCH_N(s->n, (hc_writeback_kernel<NS, TX><<<(unsigned)N, HC_ROW_THREADS, 0,
                                                                                  ctx->stream>>>(
                                                      (TX *)Xnext, rstd_next, flat, (const TX *)fr->X, fr->H, fr->post,
                                                      fr->f, C))));
    CUDA_LAUNCH_CHECK();
    cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_WRITEBACK);
}

void hc_frame_out_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, const float *dY, float *df,
                                float *dcoef, size_t N, int C) {
    if (N == 0) return;
    HC_DISPATCH_X(fr->x_bf16, HC_DISPATCH_N(s->n, (hc_out_backward_kernel<NS, TX><<<(unsigned)N, HC_ROW_THREADS, 0,
                                                                                     ctx->stream>>>(
                                                      df, dcoef, dY, (const TX *)fr->X, fr->post, fr->f, C))));
    CUDA_LAUNCH_CHECK();
    cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_OUT_BWD);
}

/* Launch the fused input backward with at most gmax token groups; returns the number used.
 * Its grid is (C / 32 blocks of channels) x (groups), and a grid a little past a whole
 * number of waves (resident blocks on all SMs) would leave most SMs idle in its last one:
 * the groups are cut to the largest whole number of waves that gmax allows (the same GPU
 * always picks the same number, so the sums' order is fixed; another GPU may pick another). */
template <int NS, int KM, typename TX>
static size_t hc_fused_launch(cuda_ctx *ctx, const hc_frame_dev *fr, const float *du, const float *dY, float *dX,
                              const float *dz, const float *srow, int flat, int C, int Kr, float invD, size_t N,
                              size_t gmax) {
    static int per_sm = 0; /* resident blocks per SM: one device per process */
    if (!per_sm) {
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, hc_in_backward_fused_kernel<NS, KM, TX>,
                                                                 32 * NS, 0));
        if (per_sm < 1) per_sm = 1;
    }
    const size_t cb = (size_t)(C + 31) / 32, wave = (size_t)per_sm * (size_t)(ctx->sm_count > 0 ? ctx->sm_count : 1);
    size_t groups = gmax;
    const size_t waves = gmax * cb / wave;
    if (waves >= 1 && waves * wave / cb >= 1) groups = waves * wave / cb;
    const size_t per = (N + groups - 1) / groups;
    groups = (N + per - 1) / per; /* no empty group */
    dim3 grid((unsigned)cb, (unsigned)groups);
    hc_in_backward_fused_kernel<NS, KM, TX><<<grid, dim3(32, NS), 0, ctx->stream>>>(
        dX, ctx->hc_mat, dY, du, (const TX *)fr->X, fr->H, fr->pre, fr->rstd, srow, dz, fr->W, fr->g, flat, C, Kr,
        invD, N, per);
    CUDA_LAUNCH_CHECK();
    return groups;
}

/* Rows j0 .. j0 + len of W: dW += G diag(1 + g), dg += colsum(W o G), with G the sum of
 * `groups` partial products gs floats apart. */
static void hc_proj_grad_cuda(cuda_ctx *ctx, const hc_frame_dev *fr, size_t j0, size_t len, int D, const float *G,
                              size_t groups, size_t gs) {
    size_t rg = (len + HC_FIX_ROWS - 1) / HC_FIX_ROWS;
    dim3 grid(cuda_blocks((size_t)D, CUDA_THREADS), (unsigned)rg);
    hc_proj_grad_kernel<<<grid, CUDA_THREADS, 0, ctx->stream>>>(fr->dW + j0 * D, ctx->part, fr->W + j0 * D, G, groups,
                                                                gs, fr->g, len, D);
    CUDA_LAUNCH_CHECK();
    colsum_add_cuda(ctx, (float *)fr->dg, ctx->part, rg, (size_t)D);
}

void hc_frame_in_backward_cuda(cuda_ctx *ctx, const hc_spec *s, const hc_frame_dev *fr, const float *du,
                               const float *dY, float *dX, float *dcoef, float *dz, float *srow, size_t N, int C) {
    if (N == 0) return;
    hc_need(ctx, s, N, C, fr->x_bf16, "hc_frame_in_backward_cuda");
    const hc_dims d = hc_dims_of(s, N, C);
    /* dpre, then the method's backward per token (dz, theta rows, <dz, z>, dz *= rstd) */
    HC_DISPATCH_X(fr->x_bf16, HC_DISPATCH_N(s->n, (hc_dpre_kernel<NS, TX><<<(unsigned)N, HC_ROW_THREADS, 0, ctx->stream>>>(
                                                      dcoef, du, (const TX *)fr->X, C))));
    CUDA_LAUNCH_CHECK();
    cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_DPRE);
    hc_coef_backward_cuda(ctx, s, fr->theta, fr->z, fr->cache, dcoef, dz, fr->dtheta, fr->rstd, srow, N);
    cuda_prof_mark_op(ctx, CUDA_PROF_HC_MATH, CUDA_OP_HC_COEF_BWD);
    const int flat = s->norm != HC_NORM_STREAM;
    const float invD = 1.0f / (float)d.D;
    const size_t fg = hc_fused_groups(s, N, C);
    if (fg) {
        /* dX whole, and the groups' partial products G in hc_mat: the streams read once */
        size_t groups = 0;
        HC_DISPATCH_X(fr->x_bf16, HC_DISPATCH_N(s->n, HC_DISPATCH_KM(d.Kr, (groups = hc_fused_launch<NS, KM, TX>(
                                                                           ctx, fr, du, dY, dX, dz, srow, flat, C, d.Kr,
                                                                           invD, N, fg)))));
        cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_FUSED);
        hc_proj_grad_cuda(ctx, fr, 0, (size_t)d.Kr, d.D, ctx->hc_mat, groups, (size_t)d.Kr * d.D);
        cuda_prof_mark_op(ctx, CUDA_PROF_HC_PROJ, CUDA_OP_HC_FUSED);
        return;
    }
    /* the projection: dX = dz W' (overwrites), G = dz^T X -> dW, dg; by chunks of W's rows */
    const size_t kc = hc_chunk_of(s, N, C);
    if (fr->x_bf16) cuda_to_bf16(ctx, ctx->cvt_a, dz, d.rows * (size_t)d.Kr); /* for G with bf16 streams */
    for (size_t j0 = 0; j0 < (size_t)d.Kr; j0 += kc) {
        size_t len = (size_t)d.Kr - j0 < kc ? (size_t)d.Kr - j0 : kc;
        hc_wprime_kernel<<<cuda_blocks(len * d.D, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
            ctx->hc_mat, fr->W + j0 * d.D, fr->g, len, d.D);
        CUDA_LAUNCH_CHECK();
        gemm_f32(ctx, 0, 0, (int)d.rows, d.D, (int)len, 1.0f, dz + j0, d.Kr, ctx->hc_mat, d.D, j0 == 0 ? 0.0f : 1.0f,
                 dX, d.D);
        if (fr->x_bf16)
            gemm_bf16(ctx, 1, 0, (int)len, d.D, (int)d.rows, 1.0f, ctx->cvt_a + j0, d.Kr, (const bf16 *)fr->X, d.D,
                      0.0f, ctx->hc_mat, d.D);
        else
            gemm_f32(ctx, 1, 0, (int)len, d.D, (int)d.rows, 1.0f, dz + j0, d.Kr, fr->X, d.D, 0.0f, ctx->hc_mat, d.D);
        hc_proj_grad_cuda(ctx, fr, j0, len, d.D, ctx->hc_mat, 1, 0);
    }
    cuda_prof_mark_op(ctx, CUDA_PROF_HC_PROJ, CUDA_OP_HC_IN_PROJ);
    /* dX += H^T dY + pre du - s X */
    HC_DISPATCH_X(fr->x_bf16, HC_DISPATCH_N(s->n, (hc_in_backward_kernel<NS, TX><<<(unsigned)N, HC_ROW_THREADS, 0,
                                                                                    ctx->stream>>>(
                                                      dX, dY, du, (const TX *)fr->X, fr->H, fr->pre, fr->rstd, srow,
                                                      flat, C, invD))));
    CUDA_LAUNCH_CHECK();
    cuda_prof_mark_op(ctx, CUDA_PROF_STREAMS, CUDA_OP_HC_IN_BWD);
}
