/* ops.cu: LayerNorm, GELU, the embedding, softmax cross-entropy, AdamW, the gradient
 * norm's sum of squares, and two small helpers, on the device. Each op mirrors its CPU
 * twin in kernels/cpu/ (same formulas, same constants); the differences are the order
 * of float additions inside reductions (float with a fixed tree here, double there),
 * which the checks bound at 1e-4 relative. */
#include <math.h>
#include "kernels/cuda/ops_cuda.cuh"

#define LAYERNORM_EPS 1e-5f     /* = kernels/cpu/layernorm.c */
#define GELU_K 0.79788456080286535588f
#define GELU_A 0.044715f
#define GELU_RSQRT2 0.70710678118654752f    /* 1 / sqrt 2 */
#define GELU_RSQRT2PI 0.39894228040143268f  /* 1 / sqrt(2 pi) */
#define COLSUM_ROWS CUDA_COLSUM_ROWS
#define SUMSQ_BLOCKS CUDA_SUMSQ_BLOCKS  /* fixed: the sum order never depends on the GPU */

/* ---- LayerNorm -------------------------------------------------------------------------- */

/* One warp per row: mean, then the biased variance around it (two passes, float). out
 * (fp32) may be NULL where only the bf16 copy is read (bf16 mode's products). */
static __global__ void layernorm_forward_kernel(float *out, bf16 *out_bf, float *mean, float *rstd, const float *inp,
                                                const float *w, const float *b, size_t N, int C) {
    size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + row * C;
    float s = 0;
    for (int c = lane; c < C; c += 32) s += x[c];
    float mu = warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane; c < C; c += 32) {
        float d = x[c] - mu;
        v += d * d;
    }
    float var = warp_sum(v) / (float)C;
    float r = 1.0f / sqrtf(var + LAYERNORM_EPS);
    for (int c = lane; c < C; c += 32) {
        float y = (x[c] - mu) * r * w[c] + (b ? b[c] : 0.0f);
        if (out) out[row * C + c] = y;
        if (out_bf) out_bf[row * C + c] = __float2bfloat16_rn(y);
    }
    if (lane == 0) {
        mean[row] = mu;
        rstd[row] = r;
    }
}

void layernorm_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, size_t N, int C) {
    if (N == 0) return;
    const int rows_per_block = CUDA_THREADS / 32;
    layernorm_forward_kernel<<<cuda_blocks(N, rows_per_block), CUDA_THREADS, 0, ctx->stream>>>(out, out_bf, mean, rstd,
                                                                                                inp, w, b, N, C);
    CUDA_LAUNCH_CHECK();
}

/* dinp += rstd (g - mean_c(g) - n mean_c(g n)), g = dout * w, n = (x - mean) rstd. */
static __global__ void layernorm_backward_dinp_kernel(float *dinp, const float *dout, const float *inp, const float *w,
                                                      const float *mean, const float *rstd, size_t N, int C,
                                                      int set) {
    size_t row = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= N) return;
    const float *x = inp + row * C, *d = dout + row * C;
    float m = mean[row], r = rstd[row];
    float gs = 0, gns = 0;
    for (int c = lane; c < C; c += 32) {
        float g = d[c] * w[c];
        gs += g;
        gns += g * ((x[c] - m) * r);
    }
    float gmean = warp_sum(gs) / (float)C, gnmean = warp_sum(gns) / (float)C;
    float *di = dinp + row * C;
    for (int c = lane; c < C; c += 32) {
        float nrm = (x[c] - m) * r;
        float v = r * (d[c] * w[c] - gmean - nrm * gnmean);
        di[c] = set ? v : di[c] + v;
    }
}

/* Partial column sums of dout * n and dout over COLSUM_ROWS-row chunks: block (32, 8)
 * covers 32 channels of one chunk; part_w, part_b are (chunks, C). */
static __global__ void layernorm_backward_dwdb_kernel(float *part_w, float *part_b, const float *dout,
                                                      const float *inp, const float *mean, const float *rstd,
                                                      size_t N, int C) {
    __shared__ float sw[8][33], sb[8][33];
    int c = blockIdx.x * 32 + threadIdx.x;
    size_t r0 = (size_t)blockIdx.y * COLSUM_ROWS, r1 = r0 + COLSUM_ROWS < N ? r0 + COLSUM_ROWS : N;
    float aw = 0, ab = 0;
    if (c < C)
        for (size_t r = r0 + threadIdx.y; r < r1; r += 8) {
            float d = dout[r * C + c];
            aw += d * ((inp[r * C + c] - mean[r]) * rstd[r]);
            ab += d;
        }
    sw[threadIdx.y][threadIdx.x] = aw;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        float w = 0, b = 0;
        for (int k = 0; k < 8; k++) {
            w += sw[k][threadIdx.x];
            b += sb[k][threadIdx.x];
        }
        part_w[(size_t)blockIdx.y * C + c] = w;
        part_b[(size_t)blockIdx.y * C + c] = b;
    }
}

/* set: overwrite dinp (the _set form) instead of adding into it */
static void layernorm_backward_impl(cuda_ctx *ctx, float *dinp, float *dw, float *db, const float *dout,
                                    const float *inp, const float *w, const float *mean, const float *rstd, size_t N,
                                    int C, int set) {
    if (N == 0) return;
    if (dinp) {
        const int rows_per_block = CUDA_THREADS / 32;
        layernorm_backward_dinp_kernel<<<cuda_blocks(N, rows_per_block), CUDA_THREADS, 0, ctx->stream>>>(
            dinp, dout, inp, w, mean, rstd, N, C, set);
        CUDA_LAUNCH_CHECK();
    }
    if (!dw && !db) return;
    size_t chunks = (N + COLSUM_ROWS - 1) / COLSUM_ROWS;
    if (2 * chunks * (size_t)C > ctx->part_n) {
        fprintf(stderr, "s2hc: kernels/cuda: layernorm_backward_cuda: partial-sum scratch too small\n");
        exit(1);
    }
    float *pw = ctx->part, *pb = ctx->part + chunks * C;
    dim3 grid((unsigned)((C + 31) / 32), (unsigned)chunks), block(32, 8);
    layernorm_backward_dwdb_kernel<<<grid, block, 0, ctx->stream>>>(pw, pb, dout, inp, mean, rstd, N, C);
    CUDA_LAUNCH_CHECK();
    if (dw) colsum_add_cuda(ctx, dw, pw, chunks, (size_t)C);
    if (db) colsum_add_cuda(ctx, db, pb, chunks, (size_t)C);
}

void layernorm_backward_cuda(cuda_ctx *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                             const float *w, const float *mean, const float *rstd, size_t N, int C) {
    layernorm_backward_impl(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C, 0);
}

void layernorm_backward_set_cuda(cuda_ctx *ctx, float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean, const float *rstd, size_t N,
                                 int C) {
    layernorm_backward_impl(ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C, 1);
}

/* ---- column sums, sums, scaling ------------------------------------------------------------- */

/* dst[c] += sum of src[r, c] over the rows. A block of COLSUM_TX x COLSUM_TY threads owns
 * COLSUM_TX columns: thread (x, y) sums rows y, y + TY, ... into COLSUM_UNROLL running
 * sums whose loads are all issued before any is added (a thread that walked every row
 * alone, as this kernel first did, waited one memory latency every four rows: about
 * 0.3 ms for the 8192 per-token theta rows of one M-preset sublayer, as estimated from the
 * H200's time for the per-token math), then the
 * block adds the TY partial sums of each column in y order. The order of the sums depends
 * on `rows` alone: deterministic. */
#define COLSUM_TX 32
#define COLSUM_TY 32
#define COLSUM_UNROLL 8
static __global__ void __launch_bounds__(COLSUM_TX *COLSUM_TY)
colsum_add_kernel(float *dst, const float *src, size_t rows, size_t C) {
    __shared__ float part[COLSUM_TY][COLSUM_TX + 1];
    const int x = threadIdx.x, y = threadIdx.y;
    const size_t c = (size_t)blockIdx.x * COLSUM_TX + x;
    float acc[COLSUM_UNROLL];
#pragma unroll
    for (int u = 0; u < COLSUM_UNROLL; u++) acc[u] = 0;
    if (c < C) {
        const size_t step = (size_t)COLSUM_TY * COLSUM_UNROLL;
        size_t r = y;
        for (; r + (COLSUM_UNROLL - 1) * COLSUM_TY < rows; r += step) {
            float v[COLSUM_UNROLL];
#pragma unroll
            for (int u = 0; u < COLSUM_UNROLL; u++) v[u] = src[(r + (size_t)u * COLSUM_TY) * C + c];
#pragma unroll
            for (int u = 0; u < COLSUM_UNROLL; u++) acc[u] += v[u];
        }
        for (; r < rows; r += COLSUM_TY) acc[0] += src[r * C + c];
    }
    float s = 0;
#pragma unroll
    for (int u = 0; u < COLSUM_UNROLL; u++) s += acc[u];
    part[y][x] = s;
    __syncthreads();
    if (y == 0 && c < C) {
        float t = 0;
        for (int k = 0; k < COLSUM_TY; k++) t += part[k][x];
        dst[c] += t;
    }
}

void colsum_add_cuda(cuda_ctx *ctx, float *dst, const float *src, size_t rows, size_t C) {
    if (C == 0) return;
    colsum_add_kernel<<<cuda_blocks(C, COLSUM_TX), dim3(COLSUM_TX, COLSUM_TY), 0, ctx->stream>>>(dst, src, rows, C);
    CUDA_LAUNCH_CHECK();
}

static __global__ void add_kernel(float *out, const float *a, const float *b, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

void add_cuda(cuda_ctx *ctx, float *out, const float *a, const float *b, size_t n) {
    if (n == 0) return;
    add_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, a, b, n);
    CUDA_LAUNCH_CHECK();
}

static __global__ void scale_kernel(float *x, float s, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= s;
}

void scale_inplace_cuda(cuda_ctx *ctx, float *x, float s, size_t n) {
    if (n == 0) return;
    scale_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(x, s, n);
    CUDA_LAUNCH_CHECK();
}

/* Block b sums the squares of its contiguous chunk in double; a second pass adds the
 * SUMSQ_BLOCKS partial sums in block order. */
static __global__ void sumsq_partial_kernel(double *part, const float *x, size_t n) {
    __shared__ double sh[32];
    size_t b = blockIdx.x, nb = gridDim.x;
    size_t i0 = n / nb * b + (n % nb) * b / nb, i1 = n / nb * (b + 1) + (n % nb) * (b + 1) / nb;
    double acc = 0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) acc += (double)x[i] * (double)x[i];
    acc = warp_sum_d(acc);
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) sh[w] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        double s = 0;
        for (int k = 0; k < (int)(blockDim.x >> 5); k++) s += sh[k];
        part[b] = s;
    }
}

static __global__ void sumsq_final_kernel(double *part, int nb) {
    double s = 0;
    for (int k = 0; k < nb; k++) s += part[k];
    part[nb] = s;
}

double sumsq_cuda(cuda_ctx *ctx, const float *x, size_t n) {
    if (ctx->dpart_n < SUMSQ_BLOCKS + 1) {
        fprintf(stderr, "s2hc: kernels/cuda: sumsq_cuda: scratch too small\n");
        exit(1);
    }
    sumsq_partial_kernel<<<SUMSQ_BLOCKS, CUDA_THREADS, 0, ctx->stream>>>(ctx->dpart, x, n);
    CUDA_LAUNCH_CHECK();
    sumsq_final_kernel<<<1, 1, 0, ctx->stream>>>(ctx->dpart, SUMSQ_BLOCKS);
    CUDA_LAUNCH_CHECK();
    double s = 0;
    CUDA_CHECK(cudaMemcpyAsync(&s, ctx->dpart + SUMSQ_BLOCKS, sizeof s, cudaMemcpyDeviceToHost, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    return s;
}

/* ---- GELU (as kernels/cpu/gelu.c): GPT-2's tanh form, or the exact x Phi(x) ----------------- */

/* exp(-2 k (x + a x^3)): gelu(x) = x / (1 + e), its sigmoid 1 / (1 + e) */
static __device__ __forceinline__ float gelu_e(float x) { return expf(-2.0f * GELU_K * (x + GELU_A * x * x * x)); }
/* Phi(x) = erfc(-x / sqrt 2) / 2: the tail x << 0 keeps its digits, as erf's 1 + erf would not */
static __device__ __forceinline__ float gelu_cdf(float x) { return 0.5f * erfcf(-x * GELU_RSQRT2); }
/* exact: model.gelu erf; the flag is the same for every thread of a launch */
static __device__ __forceinline__ float gelu_of(float x, int exact) {
    return exact ? x * gelu_cdf(x) : x / (1.0f + gelu_e(x));
}
/* d gelu / dx: the tanh form's through its sigmoid s; the exact one's Phi(x) + x phi(x) */
static __device__ __forceinline__ float gelu_slope(float x, int exact) {
    if (exact) return gelu_cdf(x) + x * GELU_RSQRT2PI * expf(-0.5f * x * x);
    float s = 1.0f / (1.0f + gelu_e(x));
    return s + 2.0f * x * s * (1.0f - s) * GELU_K * (1.0f + 3.0f * GELU_A * x * x);
}

/* out (fp32, or NULL: bf16 mode keeps only the copy its product reads) and out_bf */
static __global__ void gelu_forward_kernel(float *out, bf16 *out_bf, const float *inp, size_t N, int exact) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float y = gelu_of(inp[i], exact);
    if (out) out[i] = y;
    if (out_bf) out_bf[i] = __float2bfloat16_rn(y);
}

/* Four values per thread, each load and store one instruction (aligned, N4 = N / 4). */
static __global__ void gelu_forward4_kernel(float *out, bf16 *out_bf, const float *inp, size_t N4, int exact) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N4) return;
    float4 x = ld_float4(inp + 4 * i);
    float4 y = make_float4(gelu_of(x.x, exact), gelu_of(x.y, exact), gelu_of(x.z, exact), gelu_of(x.w, exact));
    if (out) st_float4(out + 4 * i, y);
    if (out_bf) st_bf16x4(out_bf + 4 * i, y);
}

static __global__ void gelu_backward_kernel(float *dinp, const float *inp, const float *dout, size_t N, int set,
                                            int exact) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    float v = gelu_slope(inp[i], exact) * dout[i];
    dinp[i] = set ? v : dinp[i] + v;
}

static __global__ void gelu_backward4_kernel(float *dinp, const float *inp, const float *dout, size_t N4, int set,
                                             int exact) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N4) return;
    float4 x = ld_float4(inp + 4 * i), d = ld_float4(dout + 4 * i);
    float4 v = make_float4(gelu_slope(x.x, exact) * d.x, gelu_slope(x.y, exact) * d.y, gelu_slope(x.z, exact) * d.z,
                           gelu_slope(x.w, exact) * d.w);
    if (!set) {
        float4 o = ld_float4(dinp + 4 * i);
        v = make_float4(o.x + v.x, o.y + v.y, o.z + v.z, o.w + v.w);
    }
    st_float4(dinp + 4 * i, v);
}

void gelu_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, const float *inp, size_t N, int exact) {
    if (N == 0) return;
    if (N % 4 == 0 && cuda_aligned16(inp) && (!out || cuda_aligned16(out)) && ((size_t)out_bf & 7) == 0)
        gelu_forward4_kernel<<<cuda_blocks(N / 4, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, out_bf, inp,
                                                                                                 N / 4, exact);
    else
        gelu_forward_kernel<<<cuda_blocks(N, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, out_bf, inp, N,
                                                                                            exact);
    CUDA_LAUNCH_CHECK();
}

static void gelu_backward_impl(cuda_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t N, int set,
                               int exact) {
    if (N == 0) return;
    if (N % 4 == 0 && cuda_aligned16(dinp) && cuda_aligned16(inp) && cuda_aligned16(dout))
        gelu_backward4_kernel<<<cuda_blocks(N / 4, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(dinp, inp, dout,
                                                                                                  N / 4, set, exact);
    else
        gelu_backward_kernel<<<cuda_blocks(N, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(dinp, inp, dout, N, set,
                                                                                             exact);
    CUDA_LAUNCH_CHECK();
}

void gelu_backward_cuda(cuda_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t N, int exact) {
    gelu_backward_impl(ctx, dinp, inp, dout, N, 0, exact);
}

void gelu_backward_set_cuda(cuda_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t N, int exact) {
    gelu_backward_impl(ctx, dinp, inp, dout, N, 1, exact);
}

/* ---- a product's dout in bf16 with its column sums ------------------------------------------ */

/* The backward's dout in bf16 for its products, and its column sums (dbias) in the same
 * read; with g (GELU's input), dout is first GELU's backward, g'(x) dout (the MLP's fc
 * layer: its fp32 gradient is then never stored). Block (32, 8) takes 128 columns (four
 * per thread) of a chunk of CUDA_COLSUM_ROWS rows; thread y adds rows y, y + 8, ... in
 * order, then the block adds its eight partial sums in y order into part (chunks, OC),
 * which colsum_add_cuda sums over the chunks in order: deterministic. (Converting, then a
 * GEMV with a ones vector, read dout twice.) */
static __global__ void to_bf16_colsum_kernel(bf16 *out, float *part, const float *x, const float *g, size_t N,
                                             int OC, int exact) {
    __shared__ float4 sh[8][32];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c = 4 * (blockIdx.x * 32 + tx);
    const size_t r0 = (size_t)blockIdx.y * CUDA_COLSUM_ROWS;
    const size_t r1 = r0 + CUDA_COLSUM_ROWS < N ? r0 + CUDA_COLSUM_ROWS : N;
    float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (c < OC)
        for (size_t r = r0 + ty; r < r1; r += 8) {
            float4 v = ld_float4(x + r * OC + c);
            if (g) {
                const float4 u = ld_float4(g + r * OC + c);
                v = make_float4(gelu_slope(u.x, exact) * v.x, gelu_slope(u.y, exact) * v.y,
                                gelu_slope(u.z, exact) * v.z, gelu_slope(u.w, exact) * v.w);
            }
            st_bf16x4(out + r * OC + c, v);
            a = make_float4(a.x + v.x, a.y + v.y, a.z + v.z, a.w + v.w);
        }
    sh[ty][tx] = a;
    __syncthreads();
    if (ty == 0 && c < OC) {
        float4 t = sh[0][tx];
        for (int k = 1; k < 8; k++) {
            const float4 v = sh[k][tx];
            t = make_float4(t.x + v.x, t.y + v.y, t.z + v.z, t.w + v.w);
        }
        st_float4(part + (size_t)blockIdx.y * OC + c, t);
    }
}

int cuda_to_bf16_colsum(cuda_ctx *ctx, bf16 *out, float *dbias, const float *x, const float *g, int exact, size_t N,
                        int OC) {
    const size_t chunks = (N + CUDA_COLSUM_ROWS - 1) / CUDA_COLSUM_ROWS;
    if (N == 0 || OC <= 0 || OC % 4 || !cuda_aligned16(x) || (g && !cuda_aligned16(g)) || ((size_t)out & 7) ||
        chunks * (size_t)OC > ctx->part_n || chunks > 65535)
        return 0;
    dim3 grid((unsigned)((OC / 4 + 31) / 32), (unsigned)chunks), block(32, 8);
    to_bf16_colsum_kernel<<<grid, block, 0, ctx->stream>>>(out, ctx->part, x, g, N, OC, exact);
    CUDA_LAUNCH_CHECK();
    if (dbias) colsum_add_cuda(ctx, dbias, ctx->part, chunks, (size_t)OC);
    return 1;
}

/* ---- token + position embedding ------------------------------------------------------------ */

static __global__ void encoder_forward_kernel(float *out, const int *inp, const float *wte, const float *wpe,
                                              size_t N, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * C) return;
    size_t tok = i / C, c = i % C;
    out[i] = wte[(size_t)inp[tok] * C + c] + wpe[(tok % T) * C + c];
}

void encoder_forward_cuda(cuda_ctx *ctx, float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                          int C) {
    size_t n = (size_t)B * T * C;
    if (n == 0) return;
    encoder_forward_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, inp, wte, wpe,
                                                                                           (size_t)B * T, T, C);
    CUDA_LAUNCH_CHECK();
}

int encoder_group_tokens(const int *h_inp, size_t N, int V, int *h_order, int *h_ids, int *h_starts, int *n_ids) {
    /* counting sort by id, stable: h_starts doubles as the per-id cursor */
    int *count = (int *)calloc((size_t)V + 1, sizeof(int));
    if (!count) {
        fprintf(stderr, "s2hc: kernels/cuda: out of memory grouping tokens\n");
        exit(1);
    }
    for (size_t i = 0; i < N; i++) {
        if (h_inp[i] < 0 || h_inp[i] >= V) {
            free(count);
            return -1;
        }
        count[h_inp[i] + 1]++;
    }
    for (int v = 0; v < V; v++) count[v + 1] += count[v];   /* count[v] = first slot of id v */
    int k = 0;
    for (int v = 0; v < V; v++)
        if (count[v + 1] > count[v]) {
            h_ids[k] = v;
            h_starts[k] = count[v];
            k++;
        }
    h_starts[k] = (int)N;
    *n_ids = k;
    for (size_t i = 0; i < N; i++) h_order[count[h_inp[i]]++] = (int)i;
    free(count);
    return 0;
}

/* block (id k, channel chunk): dwte[ids[k]] += dout over the id's positions, in order */
static __global__ void encoder_backward_wte_kernel(float *dwte, const float *dout, const int *order, const int *ids,
                                                   const int *starts, int C) {
    int k = blockIdx.x, c = blockIdx.y * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0;
    for (int p = starts[k]; p < starts[k + 1]; p++) acc += dout[(size_t)order[p] * C + c];
    dwte[(size_t)ids[k] * C + c] += acc;
}

static __global__ void encoder_backward_wpe_kernel(float *dwpe, const float *dout, int B, int T, int C) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C) return;
    size_t t = i / C, c = i % C;
    float acc = 0;
    for (int b = 0; b < B; b++) acc += dout[((size_t)b * T + t) * C + c];
    dwpe[i] += acc;
}

void encoder_backward_cuda(cuda_ctx *ctx, float *dwte, float *dwpe, const float *dout, const int *order,
                           const int *ids, const int *starts, int n_ids, int B, int T, int C) {
    if (dwpe) {
        size_t n = (size_t)T * C;
        encoder_backward_wpe_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(dwpe, dout, B, T,
                                                                                                    C);
        CUDA_LAUNCH_CHECK();
    }
    if (dwte && n_ids > 0) {
        dim3 grid((unsigned)n_ids, (unsigned)((C + 127) / 128));
        encoder_backward_wte_kernel<<<grid, 128, 0, ctx->stream>>>(dwte, dout, order, ids, starts, C);
        CUDA_LAUNCH_CHECK();
    }
}

/* ---- softmax cross-entropy ------------------------------------------------------------------ */

/* One block per row. probs (may be NULL) = softmax; loss = log(sum) - (x_t - max);
 * dlogits (may be NULL) = (p - onehot) * scale; a target outside [0, V) gives loss 0 and
 * a zero gradient row (the model checks targets on the host before upload). */
static __global__ void crossentropy_kernel(float *losses, float *probs, float *dlogits, const float *logits,
                                           const int *targets, float scale, int V) {
    __shared__ float sh[32];
    size_t row = blockIdx.x;
    const float *x = logits + row * V;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x) mx = fmaxf(mx, x[v]);
    mx = block_max(mx, sh);
    float s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(x[v] - mx);
    s = block_sum(s, sh);
    float inv = 1.0f / s;
    int t = targets[row];
    int ok = t >= 0 && t < V;
    if (probs)
        for (int v = threadIdx.x; v < V; v += blockDim.x) probs[row * V + v] = expf(x[v] - mx) * inv;
    if (dlogits)
        for (int v = threadIdx.x; v < V; v += blockDim.x)
            dlogits[row * V + v] = ok ? (expf(x[v] - mx) * inv - (v == t ? 1.0f : 0.0f)) * scale : 0.0f;
    if (threadIdx.x == 0) losses[row] = ok ? logf(s) - (x[t] - mx) : 0.0f;
}

void crossentropy_forward_cuda(cuda_ctx *ctx, float *losses, float *probs, const float *logits, const int *targets,
                               size_t N, int V) {
    if (N == 0) return;
    crossentropy_kernel<<<(unsigned)N, CUDA_THREADS, 0, ctx->stream>>>(losses, probs, NULL, logits, targets, 0.0f, V);
    CUDA_LAUNCH_CHECK();
}

void crossentropy_fused_cuda(cuda_ctx *ctx, float *losses, float *dlogits, const float *logits, const int *targets,
                             float scale, size_t N, int V) {
    if (N == 0) return;
    crossentropy_kernel<<<(unsigned)N, CUDA_THREADS, 0, ctx->stream>>>(losses, NULL, dlogits, logits, targets, scale,
                                                                      V);
    CUDA_LAUNCH_CHECK();
}

static __global__ void crossentropy_backward_kernel(float *dlogits, const float *probs, const int *targets,
                                                    float scale, size_t N, int V) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * V) return;
    size_t row = i / V;
    int v = (int)(i % V), t = targets[row];
    if (t < 0 || t >= V) {
        dlogits[i] = 0;
        return;
    }
    float d = probs[i] * scale;
    if (v == t) d -= scale;
    dlogits[i] = d;
}

void crossentropy_backward_cuda(cuda_ctx *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                                size_t N, int V) {
    size_t n = N * (size_t)V;
    if (n == 0) return;
    crossentropy_backward_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(dlogits, probs,
                                                                                                 targets, scale, N, V);
    CUDA_LAUNCH_CHECK();
}

/* ---- AdamW ---------------------------------------------------------------------------------- */

__device__ __forceinline__ void adamw_one(float *p, bf16 *p_bf, const float *g, float *m, float *v, size_t i,
                                          float lr, float b1, float b2, float eps, float wd, float gscale, float bc1,
                                          float bc2) {
    float gi = g[i];
    if (gscale != 1.0f) gi *= gscale;
    float mi = b1 * m[i] + (1.0f - b1) * gi;
    float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / bc1, vhat = vi / bc2;
    float pi = p[i] - lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    p[i] = pi;
    if (p_bf) p_bf[i] = __float2bfloat16_rn(pi);
}

static __global__ void adamw_kernel(float *p, const float *g, float *m, float *v, size_t n, float lr, float b1,
                                    float b2, float eps, float wd, float bc1, float bc2) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) adamw_one(p, NULL, g, m, v, i, lr, b1, b2, eps, wd, 1.0f, bc1, bc2);
}

/* tensor of element i: the last k with seg_start[k] <= i (binary search, nseg <= a few thousand) */
static __global__ void adamw_all_kernel(float *p, bf16 *p_bf, const float *g, float *m, float *v, size_t n,
                                        const size_t *seg_start, const float *seg_wd, int nseg, float lr, float b1,
                                        float b2, float eps, float gscale, float bc1, float bc2) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int lo = 0, hi = nseg - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (seg_start[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    adamw_one(p, p_bf, g, m, v, i, lr, b1, b2, eps, seg_wd[lo], gscale, bc1, bc2);
}

void adamw_update_cuda(cuda_ctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t) {
    if (n == 0) return;
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    adamw_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(p, g, m, v, n, lr, beta1, beta2, eps,
                                                                                 wd, bc1, bc2);
    CUDA_LAUNCH_CHECK();
}

void adamw_all_cuda(cuda_ctx *ctx, float *p, bf16 *p_bf, const float *g, float *m, float *v, size_t n,
                    const size_t *seg_start, const float *seg_wd, int nseg, float lr, float beta1, float beta2,
                    float eps, float gscale, int t) {
    if (n == 0) return;
    float bc1 = (float)(1.0 - pow(beta1, t)), bc2 = (float)(1.0 - pow(beta2, t));
    adamw_all_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(
        p, p_bf, g, m, v, n, seg_start, seg_wd, nseg, lr, beta1, beta2, eps, gscale, bc1, bc2);
    CUDA_LAUNCH_CHECK();
}
