/* attention.cu: causal multi-head self-attention, FlashAttention-2 style: no (T, T) score
 * matrix ever reaches global memory.
 *
 * Forward: one block per (64-query tile, batch*head). It walks the key tiles up to the
 * diagonal, keeping a running row max m and row sum l (online softmax), rescales the
 * output accumulator, and at the end writes O / l and lse = m + log l (B, NH, T).
 * Backward (recompute): D = rowsum(dO * O) first; then one kernel per key tile that
 * rebuilds P = exp(scale Q K^T - lse) tile by tile and accumulates dK and dV, and one
 * kernel per query tile that rebuilds P and dP again and accumulates dQ. Two passes
 * instead of atomics: every gradient element is written by exactly one block, so the
 * result is deterministic (FlashAttention-2 adds dQ with atomics instead).
 *
 * Two implementations with the same tiles:
 *  - fp32 (CUDA cores): four threads per row of a tile, scores and products in float32;
 *    the reference-precision path (checked at 1e-4 against the CPU).
 *  - bf16 tensor cores (WMMA 16x16x16, fp32 accumulation), used in bf16 mode when
 *    hs is 32, 64 or 128: four warps, each owning 16 rows of the tile; the softmax and
 *    its statistics stay in float32 (shared memory), only the matrix-product operands are
 *    rounded to bf16.
 * Layout: qkv (B, T, 3C) = q | k | v, head h at channels [h hs, (h+1) hs); out (B, T, C).
 */
#include <math.h>
#include <mma.h>
#include "kernels/cuda/ops_cuda.cuh"

#define ATT_TILE 64        /* query and key tile (rows) */
#define ATT_F32_THREADS 256 /* fp32 path: 4 threads per tile row */
#define ATT_F32_SLICE (ATT_MAX_HS / 4)
#define ATT_TC_THREADS 128  /* tensor-core path: 4 warps x 16 rows */
#define ATT_LOAD_BATCH 8    /* loads of each tile a thread has in flight at once */

/* ---- shared helpers ------------------------------------------------------------------------ */

template <typename TS>
__device__ __forceinline__ TS att_cvt(float v);
template <>
__device__ __forceinline__ float att_cvt<float>(float v) { return v; }
template <>
__device__ __forceinline__ bf16 att_cvt<bf16>(float v) { return __float2bfloat16_rn(v); }

/* Rows [r0, r0 + ATT_TILE) of NP tiles into shared memory: tile p from src[p] (one head's
 * part of qkv, or of dout; row stride lds[p] floats) into dst[p] (row stride ld), rows
 * past T as zeros. Each thread issues its loads of all NP tiles, ATT_LOAD_BATCH of each,
 * before it stores any, so a round costs one memory latency: one load and one store per
 * element in turn (how this started) stalled every thread on each load in turn, about
 * 64 latencies per 64 x 64 pair of tiles, and made attention 75 % of a bf16 M-preset step
 * on an H200. W = 4: 16-byte loads (float4), W = 1: one float each. */
template <typename TS, int NP, int W>
__device__ __forceinline__ void att_load_core(TS *const *dst, const float *const *src, const int *lds, int ld, int r0,
                                              int T, int hs) {
    const int nt = blockDim.x, q = hs / W, n = ATT_TILE * q;
    for (int i0 = threadIdx.x; i0 < n; i0 += nt * ATT_LOAD_BATCH) {
        float v[NP][ATT_LOAD_BATCH][W];
#pragma unroll
        for (int p = 0; p < NP; p++) {
#pragma unroll
            for (int u = 0; u < ATT_LOAD_BATCH; u++) {
                const int i = i0 + u * nt, r = i / q, t = r0 + r;
                if (i < n && t < T) {
                    const float *sp = src[p] + (size_t)t * lds[p] + (i - r * q) * W;
                    if constexpr (W == 4) {
                        const float4 f = ld_float4(sp);
                        v[p][u][0] = f.x;
                        v[p][u][1] = f.y;
                        v[p][u][2] = f.z;
                        v[p][u][3] = f.w;
                    } else {
                        v[p][u][0] = *sp;
                    }
                } else {
#pragma unroll
                    for (int w = 0; w < W; w++) v[p][u][w] = 0.0f;
                }
            }
        }
#pragma unroll
        for (int p = 0; p < NP; p++) {
#pragma unroll
            for (int u = 0; u < ATT_LOAD_BATCH; u++) {
                const int i = i0 + u * nt, r = i / q;
                if (i < n) {
                    TS *d = dst[p] + r * ld + (i - r * q) * W;
#pragma unroll
                    for (int w = 0; w < W; w++) d[w] = att_cvt<TS>(v[p][u][w]);
                }
            }
        }
    }
}

/* 16-byte loads when every tile's rows allow them (hs and the strides multiples of 4,
 * the sources 16-byte aligned), else one float per load */
template <typename TS, int NP>
__device__ __forceinline__ void att_load_tiles(TS *const *dst, const float *const *src, const int *lds, int ld, int r0,
                                               int T, int hs) {
    bool vec = (hs & 3) == 0;
#pragma unroll
    for (int p = 0; p < NP; p++) vec = vec && (lds[p] & 3) == 0 && ((uintptr_t)src[p] & 15) == 0;
    if (vec) att_load_core<TS, NP, 4>(dst, src, lds, ld, r0, T, hs);
    else att_load_core<TS, NP, 1>(dst, src, lds, ld, r0, T, hs);
}

/* one tile: rows [r0, r0 + ATT_TILE) of src (row stride lds) into dst (row stride ld) */
template <typename TS>
__device__ __forceinline__ void att_load_tile(TS *dst, int ld, const float *src, int r0, int T, int lds, int hs) {
    TS *const d[1] = {dst};
    const float *const s[1] = {src};
    const int l[1] = {lds};
    att_load_tiles<TS, 1>(d, s, l, ld, r0, T, hs);
}

/* two tiles of the same rows in one batch of loads (K and V, or Q and dO) */
template <typename TS>
__device__ __forceinline__ void att_load_2tiles(TS *dstA, const float *srcA, int ldsA, TS *dstB, const float *srcB,
                                                int ldsB, int ld, int r0, int T, int hs) {
    TS *const d[2] = {dstA, dstB};
    const float *const s[2] = {srcA, srcB};
    const int l[2] = {ldsA, ldsB};
    att_load_tiles<TS, 2>(d, s, l, ld, r0, T, hs);
}

/* A query tile's loads in the backward: Q and dO (rows q0..) into shared memory and the
 * rows' lse and D into Ls and Ds, every load issued before any store (blockDim >= ATT_TILE).
 * lse_bh, D_bh: the head's rows (B, NH, T) + bh T. */
template <typename TS>
__device__ __forceinline__ void att_load_query_side(TS *Qt, TS *dOt, float *Ls, float *Ds, const float *qsrc,
                                                    const float *osrc, const float *lse_bh, const float *D_bh, int C3,
                                                    int C, int ld, int q0, int T, int hs) {
    const int i = threadIdx.x, t = q0 + i;
    const float l = i < ATT_TILE && t < T ? lse_bh[t] : 0.0f, d = i < ATT_TILE && t < T ? D_bh[t] : 0.0f;
    att_load_2tiles<TS>(Qt, qsrc, C3, dOt, osrc, C, ld, q0, T, hs);
    if (i < ATT_TILE) {
        Ls[i] = l;
        Ds[i] = d;
    }
}

/* D (B, NH, T) = rowsum(dO * O) per head: one warp per (b, h, t). */
static __global__ void att_rowdot_kernel(float *D, const float *dout, const float *out, int B, int T, int C, int NH) {
    size_t w = (size_t)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31, hs = C / NH;
    if (w >= (size_t)B * NH * T) return;
    size_t bh = w / T, t = w % T, b = bh / NH, h = bh % NH;
    size_t off = (b * T + t) * C + h * hs;
    float s = 0;
    for (int d = lane; d < hs; d += 32) s += dout[off + d] * out[off + d];
    s = warp_sum(s);
    if (lane == 0) D[w] = s;
}

/* ---- fp32 forward -------------------------------------------------------------------------- */

static __global__ void att_fwd_f32_kernel(float *out, bf16 *out_bf, float *lse, const float *qkv, int T, int C, int NH,
                                          float scale) {
    extern __shared__ float sm[];
    const int hs = C / NH, C3 = 3 * C, ld = hs + 1, lp = ATT_TILE + 1;
    const int qt = gridDim.x - 1 - blockIdx.x; /* longest tiles first */
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    float *Qs = sm, *Ks = Qs + ATT_TILE * ld, *Vs = Ks + ATT_TILE * ld, *Ps = Vs + ATT_TILE * ld;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    const int r = threadIdx.x >> 2, sub = threadIdx.x & 3, q0 = qt * ATT_TILE, tq = q0 + r;
    att_load_tile<float>(Qs, ld, base, q0, T, C3, hs);
    float o[ATT_F32_SLICE];
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) o[k] = 0;
    float m = -INFINITY, l = 0;
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();
        att_load_2tiles<float>(Ks, base + C, C3, Vs, base + 2 * C, C3, ld, k0, T, hs);
        __syncthreads();
        float s[ATT_TILE / 4], mx = -INFINITY;
#pragma unroll
        for (int jj = 0; jj < ATT_TILE / 4; jj++) {
            int j = sub + 4 * jj, tk = k0 + j;
            float dot = 0;
            for (int d = 0; d < hs; d++) dot += Qs[r * ld + d] * Ks[j * ld + d];
            float v = (tk > tq || tk >= T) ? -INFINITY : dot * scale;
            s[jj] = v;
            mx = fmaxf(mx, v);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        float mn = fmaxf(m, mx), alpha = expf(m - mn), ps = 0;
#pragma unroll
        for (int jj = 0; jj < ATT_TILE / 4; jj++) {
            float p = expf(s[jj] - mn);
            Ps[r * lp + sub + 4 * jj] = p;
            ps += p;
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        ps += __shfl_xor_sync(0xffffffffu, ps, 2);
        l = l * alpha + ps;
        m = mn;
        __syncwarp();
#pragma unroll
        for (int k = 0; k < ATT_F32_SLICE; k++) o[k] *= alpha;
        for (int j = 0; j < ATT_TILE; j++) {
            float p = Ps[r * lp + j];
#pragma unroll
            for (int k = 0; k < ATT_F32_SLICE; k++) {
                int d = sub + 4 * k;
                if (d < hs) o[k] += p * Vs[j * ld + d];
            }
        }
    }
    if (tq >= T) return;
    float inv = 1.0f / l;
    size_t off = ((size_t)b * T + tq) * C + (size_t)h * hs;
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) {
        int d = sub + 4 * k;
        if (d < hs) {
            float y = o[k] * inv;
            out[off + d] = y;
            if (out_bf) out_bf[off + d] = __float2bfloat16_rn(y);
        }
    }
    if (sub == 0) lse[(size_t)bh * T + tq] = m + logf(l);
}

/* ---- fp32 backward --------------------------------------------------------------------------- */

/* One block per key tile: thread (key row r, sub) accumulates dK, dV of channels sub + 4k. */
static __global__ void att_bwd_kv_f32_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse,
                                             const float *D, int T, int C, int NH, float scale, int set) {
    extern __shared__ float sm[];
    const int hs = C / NH, C3 = 3 * C, ld = hs + 1, lp = ATT_TILE + 1;
    const int nt = gridDim.x, kt = blockIdx.x; /* key tile kt meets query tiles kt..nt-1 */
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    float *Ks = sm, *Vs = Ks + ATT_TILE * ld, *Qs = Vs + ATT_TILE * ld, *dOs = Qs + ATT_TILE * ld;
    float *PT = dOs + ATT_TILE * ld, *dST = PT + ATT_TILE * lp, *Ls = dST + ATT_TILE * lp, *Ds = Ls + ATT_TILE;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    const float *obase = dout + (size_t)b * T * C + (size_t)h * hs;
    const int r = threadIdx.x >> 2, sub = threadIdx.x & 3, k0 = kt * ATT_TILE, tk = k0 + r;
    att_load_2tiles<float>(Ks, base + C, C3, Vs, base + 2 * C, C3, ld, k0, T, hs);
    float dk[ATT_F32_SLICE], dv[ATT_F32_SLICE];
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) dk[k] = dv[k] = 0;
    for (int qt = kt; qt < nt; qt++) {
        const int q0 = qt * ATT_TILE;
        __syncthreads();
        att_load_query_side<float>(Qs, dOs, Ls, Ds, base, obase, lse + (size_t)bh * T, D + (size_t)bh * T, C3, C, ld,
                                 q0, T, hs);
        __syncthreads();
#pragma unroll 4
        for (int ii = 0; ii < ATT_TILE / 4; ii++) {
            int i = sub + 4 * ii, tq = q0 + i;
            float s = 0, dp = 0;
            for (int d = 0; d < hs; d++) {
                s += Qs[i * ld + d] * Ks[r * ld + d];
                dp += dOs[i * ld + d] * Vs[r * ld + d];
            }
            int valid = tq < T && tk <= tq;
            float p = valid ? expf(s * scale - Ls[i]) : 0.0f;
            PT[r * lp + i] = p;
            dST[r * lp + i] = p * (dp - Ds[i]);
        }
        __syncwarp();
        for (int i = 0; i < ATT_TILE; i++) {
            float p = PT[r * lp + i], ds = dST[r * lp + i];
#pragma unroll
            for (int k = 0; k < ATT_F32_SLICE; k++) {
                int d = sub + 4 * k;
                if (d < hs) {
                    dv[k] += p * dOs[i * ld + d];
                    dk[k] += ds * Qs[i * ld + d];
                }
            }
        }
    }
    if (tk >= T) return;
    float *dK = dqkv + ((size_t)b * T + tk) * C3 + C + (size_t)h * hs, *dV = dK + C;
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) {
        int d = sub + 4 * k;
        if (d < hs) {
            dK[d] = set ? scale * dk[k] : dK[d] + scale * dk[k];
            dV[d] = set ? dv[k] : dV[d] + dv[k];
        }
    }
}

/* One block per query tile: thread (query row r, sub) accumulates dQ. */
static __global__ void att_bwd_q_f32_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse,
                                            const float *D, int T, int C, int NH, float scale, int set) {
    extern __shared__ float sm[];
    const int hs = C / NH, C3 = 3 * C, ld = hs + 1, lp = ATT_TILE + 1;
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    float *Qs = sm, *dOs = Qs + ATT_TILE * ld, *Ks = dOs + ATT_TILE * ld, *Vs = Ks + ATT_TILE * ld;
    float *dS = Vs + ATT_TILE * ld;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * hs;
    const float *obase = dout + (size_t)b * T * C + (size_t)h * hs;
    const int r = threadIdx.x >> 2, sub = threadIdx.x & 3, q0 = qt * ATT_TILE, tq = q0 + r;
    att_load_2tiles<float>(Qs, base, C3, dOs, obase, C, ld, q0, T, hs);
    const float L = tq < T ? lse[(size_t)bh * T + tq] : 0.0f, Dr = tq < T ? D[(size_t)bh * T + tq] : 0.0f;
    float dq[ATT_F32_SLICE];
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) dq[k] = 0;
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();
        att_load_2tiles<float>(Ks, base + C, C3, Vs, base + 2 * C, C3, ld, k0, T, hs);
        __syncthreads();
#pragma unroll 4
        for (int jj = 0; jj < ATT_TILE / 4; jj++) {
            int j = sub + 4 * jj, tk = k0 + j;
            float s = 0, dp = 0;
            for (int d = 0; d < hs; d++) {
                s += Qs[r * ld + d] * Ks[j * ld + d];
                dp += dOs[r * ld + d] * Vs[j * ld + d];
            }
            int valid = tq < T && tk <= tq;
            float p = valid ? expf(s * scale - L) : 0.0f;
            dS[r * lp + j] = p * (dp - Dr);
        }
        __syncwarp();
        for (int j = 0; j < ATT_TILE; j++) {
            float ds = dS[r * lp + j];
#pragma unroll
            for (int k = 0; k < ATT_F32_SLICE; k++) {
                int d = sub + 4 * k;
                if (d < hs) dq[k] += ds * Ks[j * ld + d];
            }
        }
    }
    if (tq >= T) return;
    float *dQ = dqkv + ((size_t)b * T + tq) * C3 + (size_t)h * hs;
#pragma unroll
    for (int k = 0; k < ATT_F32_SLICE; k++) {
        int d = sub + 4 * k;
        if (d < hs) dQ[d] = set ? scale * dq[k] : dQ[d] + scale * dq[k];
    }
}

/* ---- bf16 tensor-core path (WMMA) ------------------------------------------------------------- */

namespace wm = nvcuda::wmma;
typedef wm::fragment<wm::matrix_a, 16, 16, 16, bf16, wm::row_major> frag_a;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::row_major> frag_b_row;
typedef wm::fragment<wm::matrix_b, 16, 16, 16, bf16, wm::col_major> frag_b_col;
typedef wm::fragment<wm::accumulator, 16, 16, 16, float> frag_acc;

/* Padded shared strides (elements): bf16 tiles HS + 8, float score tiles 64 + 4, bf16
 * probability tiles 64 + 8, float accumulators HS + 4. Every 16-row / 16-column fragment
 * then starts on a 32-byte boundary, as WMMA requires. */
#define TC_LDB(HS) ((HS) + 8)
#define TC_LDS (ATT_TILE + 4)
#define TC_LDP (ATT_TILE + 8)
#define TC_LDO(HS) ((HS) + 4)

/* S (16 x 64 at S, stride lds) = A (16 rows at A, stride lda) . B^T, B = 64 rows at Bm (stride
 * ldb), contraction over HS: the key tile read as a column-major (HS x 64) matrix. */
template <int HS>
__device__ __forceinline__ void tc_rows_times_tile_t(float *S, int lds, const bf16 *A, int lda, const bf16 *Bm,
                                                     int ldb) {
#pragma unroll
    for (int cb = 0; cb < ATT_TILE / 16; cb++) {
        frag_acc acc;
        wm::fill_fragment(acc, 0.0f);
#pragma unroll
        for (int kk = 0; kk < HS / 16; kk++) {
            frag_a a;
            frag_b_col bb;
            wm::load_matrix_sync(a, A + kk * 16, lda);
            wm::load_matrix_sync(bb, Bm + (size_t)cb * 16 * ldb + kk * 16, ldb);
            wm::mma_sync(acc, a, bb, acc);
        }
        wm::store_matrix_sync(S + cb * 16, acc, lds, wm::mem_row_major);
    }
}

/* Column j (j < width / 2) of the row a lane walks in the tensor-core kernels' float score
 * and output tiles and bf16 probability tiles: lanes 2r and 2r + 1 of a warp (wr = r, its
 * row within the warp's 16) take alternate columns, rows 8..15 two columns further on
 * (mod width). A step of the 32 lanes then falls in 32 distinct banks of a float tile
 * whose row stride is 4 mod 32 words (TC_LDS, TC_LDO) and of the bf16 ones (TC_LDP);
 * each lane walking its own half of the row, as first written, put four lanes on every
 * bank used. width: a power of two. */
__device__ __forceinline__ int tc_col(int j, int half, int wr, int width) {
    return (2 * j + half + 2 * (wr >> 3)) & (width - 1);
}

template <int HS>
static __global__ void __launch_bounds__(ATT_TC_THREADS)
att_fwd_tc_kernel(float *out, bf16 *out_bf, float *lse, const float *qkv, int T, int C, int NH, float scale) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int C3 = 3 * C, LDB = TC_LDB(HS), LDO = TC_LDO(HS);
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    bf16 *Qb = (bf16 *)smem_raw, *Kb = Qb + ATT_TILE * LDB, *Vb = Kb + ATT_TILE * LDB;
    float *S = (float *)(Vb + ATT_TILE * LDB), *O = S + ATT_TILE * TC_LDS;
    bf16 *Pb = (bf16 *)(O + ATT_TILE * LDO);
    float *M = (float *)(Pb + ATT_TILE * TC_LDP), *Lr = M + ATT_TILE;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q0 = qt * ATT_TILE;
    const int wr = lane >> 1, row = warp * 16 + wr, half = lane & 1, tq = q0 + row;
    att_load_tile<bf16>(Qb, LDB, base, q0, T, C3, HS);
    for (int i = threadIdx.x; i < ATT_TILE * LDO; i += blockDim.x) O[i] = 0;
    for (int i = threadIdx.x; i < ATT_TILE; i += blockDim.x) {
        M[i] = -INFINITY;
        Lr[i] = 0;
    }
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();
        att_load_2tiles<bf16>(Kb, base + C, C3, Vb, base + 2 * C, C3, LDB, k0, T, HS);
        __syncthreads();
        /* S_w = Q_w K^T */
        tc_rows_times_tile_t<HS>(S + warp * 16 * TC_LDS, TC_LDS, Qb + warp * 16 * LDB, LDB, Kb, LDB);
        __syncwarp();
        /* online softmax of the warp's 16 rows: two lanes per row, 32 columns each */
        const float *srow = S + row * TC_LDS;
        float mx = -INFINITY;
        for (int j = 0; j < ATT_TILE / 2; j++) {
            const int c = tc_col(j, half, wr, ATT_TILE), tk = k0 + c;
            mx = fmaxf(mx, (tk > tq || tk >= T) ? -INFINITY : srow[c] * scale);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        float mo = M[row], mn = fmaxf(mo, mx), alpha = expf(mo - mn), ps = 0;
        bf16 *prow = Pb + row * TC_LDP;
        for (int j = 0; j < ATT_TILE / 2; j++) {
            const int c = tc_col(j, half, wr, ATT_TILE), tk = k0 + c;
            const float p = expf(((tk > tq || tk >= T) ? -INFINITY : srow[c] * scale) - mn);
            prow[c] = __float2bfloat16_rn(p);
            ps += p;
        }
        ps += __shfl_xor_sync(0xffffffffu, ps, 1);
        float *orow = O + row * LDO;
        for (int k = 0; k < HS / 2; k++) orow[tc_col(k, half, wr, HS)] *= alpha;
        __syncwarp();
        if (half == 0) {
            Lr[row] = Lr[row] * alpha + ps;
            M[row] = mn;
        }
        /* O_w += P_w V */
#pragma unroll
        for (int db = 0; db < HS / 16; db++) {
            frag_acc acc;
            float *o = O + warp * 16 * LDO + db * 16;
            wm::load_matrix_sync(acc, o, LDO, wm::mem_row_major);
#pragma unroll
            for (int kb = 0; kb < ATT_TILE / 16; kb++) {
                frag_a a;
                frag_b_row bb;
                wm::load_matrix_sync(a, Pb + warp * 16 * TC_LDP + kb * 16, TC_LDP);
                wm::load_matrix_sync(bb, Vb + kb * 16 * LDB + db * 16, LDB);
                wm::mma_sync(acc, a, bb, acc);
            }
            wm::store_matrix_sync(o, acc, LDO, wm::mem_row_major);
        }
        __syncwarp();
    }
    if (tq >= T) return;
    float l = Lr[row], inv = 1.0f / l;
    size_t off = ((size_t)b * T + tq) * C + (size_t)h * HS;
    for (int k = 0; k < HS / 2; k++) {
        const int d = tc_col(k, half, wr, HS);
        float y = O[row * LDO + d] * inv;
        out[off + d] = y;
        if (out_bf) out_bf[off + d] = __float2bfloat16_rn(y);
    }
    if (half == 0) lse[(size_t)bh * T + tq] = M[row] + logf(l);
}

/* Add (set: write) a warp's 16 x HS float accumulators (fragments acc[HS/16], times `mul`)
 * into rows r0.. of a (T, 3C) gradient, through `stage` (16 x LDO floats of shared memory). */
template <int HS>
__device__ __forceinline__ void tc_add_rows(float *g, int C3, int T, int t0, frag_acc *acc, float mul, float *stage,
                                            int set) {
    const int LDO = TC_LDO(HS), lane = threadIdx.x & 31;
#pragma unroll
    for (int db = 0; db < HS / 16; db++) {
#pragma unroll
        for (int e = 0; e < acc[db].num_elements; e++) acc[db].x[e] *= mul;
        wm::store_matrix_sync(stage + db * 16, acc[db], LDO, wm::mem_row_major);
    }
    __syncwarp();
    for (int idx = lane; idx < 16 * HS; idx += 32) {
        int rr = idx / HS, d = idx % HS, t = t0 + rr;
        if (t < T) {
            float *gt = g + (size_t)t * C3 + d;
            *gt = set ? stage[rr * LDO + d] : *gt + stage[rr * LDO + d];
        }
    }
    __syncwarp();
}

/* One block per key tile; warp w owns keys w*16..: S^T and dP^T by tensor cores, then
 * dV += P^T dO and dK += dS^T Q with the accumulators kept in registers. */
template <int HS>
static __global__ void __launch_bounds__(ATT_TC_THREADS)
att_bwd_kv_tc_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D, int T, int C,
                     int NH, float scale, int set) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int C3 = 3 * C, LDB = TC_LDB(HS);
    const int nt = gridDim.x, kt = blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    bf16 *Kb = (bf16 *)smem_raw, *Vb = Kb + ATT_TILE * LDB, *Qb = Vb + ATT_TILE * LDB, *dOb = Qb + ATT_TILE * LDB;
    float *ST = (float *)(dOb + ATT_TILE * LDB), *dPT = ST + ATT_TILE * TC_LDS;
    bf16 *PTb = (bf16 *)(dPT + ATT_TILE * TC_LDS), *dSTb = PTb + ATT_TILE * TC_LDP;
    float *Ls = (float *)(dSTb + ATT_TILE * TC_LDP), *Ds = Ls + ATT_TILE;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float *obase = dout + (size_t)b * T * C + (size_t)h * HS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, k0 = kt * ATT_TILE;
    const int wr = lane >> 1, row = warp * 16 + wr, half = lane & 1, tk = k0 + row;
    att_load_2tiles<bf16>(Kb, base + C, C3, Vb, base + 2 * C, C3, LDB, k0, T, HS);
    frag_acc dK[HS / 16], dV[HS / 16];
#pragma unroll
    for (int db = 0; db < HS / 16; db++) {
        wm::fill_fragment(dK[db], 0.0f);
        wm::fill_fragment(dV[db], 0.0f);
    }
    for (int qt = kt; qt < nt; qt++) {
        const int q0 = qt * ATT_TILE;
        __syncthreads();
        att_load_query_side<bf16>(Qb, dOb, Ls, Ds, base, obase, lse + (size_t)bh * T, D + (size_t)bh * T, C3, C, LDB,
                                 q0, T, HS);
        __syncthreads();
        tc_rows_times_tile_t<HS>(ST + warp * 16 * TC_LDS, TC_LDS, Kb + warp * 16 * LDB, LDB, Qb, LDB);
        tc_rows_times_tile_t<HS>(dPT + warp * 16 * TC_LDS, TC_LDS, Vb + warp * 16 * LDB, LDB, dOb, LDB);
        __syncwarp();
        for (int j = 0; j < ATT_TILE / 2; j++) {
            const int c = tc_col(j, half, wr, ATT_TILE), tq = q0 + c;
            int valid = tq < T && tk <= tq;
            float p = valid ? expf(ST[row * TC_LDS + c] * scale - Ls[c]) : 0.0f;
            PTb[row * TC_LDP + c] = __float2bfloat16_rn(p);
            dSTb[row * TC_LDP + c] = __float2bfloat16_rn(p * (dPT[row * TC_LDS + c] - Ds[c]));
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < HS / 16; db++) {
#pragma unroll
            for (int kb = 0; kb < ATT_TILE / 16; kb++) {
                frag_a a;
                frag_b_row bb;
                wm::load_matrix_sync(a, PTb + warp * 16 * TC_LDP + kb * 16, TC_LDP);
                wm::load_matrix_sync(bb, dOb + kb * 16 * LDB + db * 16, LDB);
                wm::mma_sync(dV[db], a, bb, dV[db]);
                wm::load_matrix_sync(a, dSTb + warp * 16 * TC_LDP + kb * 16, TC_LDP);
                wm::load_matrix_sync(bb, Qb + kb * 16 * LDB + db * 16, LDB);
                wm::mma_sync(dK[db], a, bb, dK[db]);
            }
        }
    }
    __syncthreads(); /* ST / dPT become the staging area */
    float *stage = ST + warp * 16 * TC_LDO(HS);
    float *g = dqkv + (size_t)b * T * C3 + (size_t)h * HS;
    tc_add_rows<HS>(g + C, C3, T, k0 + warp * 16, dK, scale, stage, set);
    tc_add_rows<HS>(g + 2 * C, C3, T, k0 + warp * 16, dV, 1.0f, stage, set);
}

/* One block per query tile; warp w owns queries w*16..: S and dP by tensor cores, then
 * dQ += dS K with the accumulators in registers. */
template <int HS>
static __global__ void __launch_bounds__(ATT_TC_THREADS)
att_bwd_q_tc_kernel(float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D, int T, int C,
                    int NH, float scale, int set) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int C3 = 3 * C, LDB = TC_LDB(HS);
    const int qt = gridDim.x - 1 - blockIdx.x;
    const int bh = blockIdx.y, b = bh / NH, h = bh % NH;
    bf16 *Qb = (bf16 *)smem_raw, *dOb = Qb + ATT_TILE * LDB, *Kb = dOb + ATT_TILE * LDB, *Vb = Kb + ATT_TILE * LDB;
    float *S = (float *)(Vb + ATT_TILE * LDB), *dP = S + ATT_TILE * TC_LDS;
    bf16 *dSb = (bf16 *)(dP + ATT_TILE * TC_LDS);
    float *Ls = (float *)(dSb + ATT_TILE * TC_LDP), *Ds = Ls + ATT_TILE;
    const float *base = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const float *obase = dout + (size_t)b * T * C + (size_t)h * HS;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, q0 = qt * ATT_TILE;
    const int wr = lane >> 1, row = warp * 16 + wr, half = lane & 1, tq = q0 + row;
    att_load_query_side<bf16>(Qb, dOb, Ls, Ds, base, obase, lse + (size_t)bh * T, D + (size_t)bh * T, C3, C, LDB, q0,
                              T, HS);
    frag_acc dQ[HS / 16];
#pragma unroll
    for (int db = 0; db < HS / 16; db++) wm::fill_fragment(dQ[db], 0.0f);
    for (int kt = 0; kt <= qt; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();
        att_load_2tiles<bf16>(Kb, base + C, C3, Vb, base + 2 * C, C3, LDB, k0, T, HS);
        __syncthreads();
        tc_rows_times_tile_t<HS>(S + warp * 16 * TC_LDS, TC_LDS, Qb + warp * 16 * LDB, LDB, Kb, LDB);
        tc_rows_times_tile_t<HS>(dP + warp * 16 * TC_LDS, TC_LDS, dOb + warp * 16 * LDB, LDB, Vb, LDB);
        __syncwarp();
        const float L = Ls[row], Dr = Ds[row];
        for (int j = 0; j < ATT_TILE / 2; j++) {
            const int c = tc_col(j, half, wr, ATT_TILE), tk = k0 + c;
            int valid = tq < T && tk <= tq;
            float p = valid ? expf(S[row * TC_LDS + c] * scale - L) : 0.0f;
            dSb[row * TC_LDP + c] = __float2bfloat16_rn(p * (dP[row * TC_LDS + c] - Dr));
        }
        __syncwarp();
#pragma unroll
        for (int db = 0; db < HS / 16; db++) {
#pragma unroll
            for (int kb = 0; kb < ATT_TILE / 16; kb++) {
                frag_a a;
                frag_b_row bb;
                wm::load_matrix_sync(a, dSb + warp * 16 * TC_LDP + kb * 16, TC_LDP);
                wm::load_matrix_sync(bb, Kb + kb * 16 * LDB + db * 16, LDB);
                wm::mma_sync(dQ[db], a, bb, dQ[db]);
            }
        }
    }
    __syncthreads();
    float *stage = S + warp * 16 * TC_LDO(HS);
    float *g = dqkv + (size_t)b * T * C3 + (size_t)h * HS;
    tc_add_rows<HS>(g, C3, T, q0 + warp * 16, dQ, scale, stage, set);
}

/* ---- launchers ------------------------------------------------------------------------------- */

static size_t tc_fwd_smem(int hs) {
    return (size_t)3 * ATT_TILE * TC_LDB(hs) * sizeof(bf16) + (size_t)ATT_TILE * TC_LDS * sizeof(float) +
           (size_t)ATT_TILE * TC_LDO(hs) * sizeof(float) + (size_t)ATT_TILE * TC_LDP * sizeof(bf16) +
           2 * ATT_TILE * sizeof(float);
}
/* both backward kernels: 4 bf16 tiles, 2 float score tiles, 1-2 bf16 probability tiles,
 * 2 row vectors; the float score tiles double as the (64 x HS+4) staging area */
static size_t tc_bwd_smem(int hs) {
    size_t scores = (size_t)2 * ATT_TILE * TC_LDS * sizeof(float);
    size_t stage = (size_t)ATT_TILE * TC_LDO(hs) * sizeof(float);
    return (size_t)4 * ATT_TILE * TC_LDB(hs) * sizeof(bf16) + (scores > stage ? scores : stage) +
           (size_t)2 * ATT_TILE * TC_LDP * sizeof(bf16) + 2 * ATT_TILE * sizeof(float);
}
static size_t f32_fwd_smem(int hs) {
    return ((size_t)3 * ATT_TILE * (hs + 1) + (size_t)ATT_TILE * (ATT_TILE + 1)) * sizeof(float);
}
static size_t f32_bwd_kv_smem(int hs) {
    return ((size_t)4 * ATT_TILE * (hs + 1) + (size_t)2 * ATT_TILE * (ATT_TILE + 1) + 2 * ATT_TILE) * sizeof(float);
}
static size_t f32_bwd_q_smem(int hs) {
    return ((size_t)4 * ATT_TILE * (hs + 1) + (size_t)ATT_TILE * (ATT_TILE + 1)) * sizeof(float);
}

static void att_check(const cuda_ctx *ctx, const char *op, int C, int NH, size_t smem) {
    if (NH <= 0 || C % NH != 0 || C / NH > ATT_MAX_HS) {
        fprintf(stderr, "s2hc: kernels/cuda: %s: need C divisible by NH and C/NH <= %d (C %d, NH %d)\n", op,
                ATT_MAX_HS, C, NH);
        exit(1);
    }
    if (smem > ctx->smem_optin) {
        fprintf(stderr, "s2hc: kernels/cuda: %s: needs %zu bytes of shared memory per block, the GPU allows %zu\n", op,
                smem, ctx->smem_optin);
        exit(1);
    }
}

/* Raise a kernel's dynamic shared memory limit (needed past 48 KiB). */
template <typename K>
static void att_smem_attr(K kernel, size_t smem) {
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
}

int attention_uses_tensor_cores(const cuda_ctx *ctx, int C, int NH) {
    if (!ctx->use_bf16 || NH <= 0 || C % NH != 0) return 0;
    int hs = C / NH;
    return hs == 32 || hs == 64 || hs == 128;
}

template <int HS>
static void att_fwd_tc(cuda_ctx *ctx, float *out, bf16 *out_bf, float *lse, const float *qkv, int B, int T, int C,
                       int NH, float scale) {
    size_t smem = tc_fwd_smem(HS);
    att_check(ctx, "attention_forward_cuda", C, NH, smem);
    att_smem_attr(att_fwd_tc_kernel<HS>, smem);
    dim3 grid((unsigned)((T + ATT_TILE - 1) / ATT_TILE), (unsigned)(B * NH));
    att_fwd_tc_kernel<HS><<<grid, ATT_TC_THREADS, smem, ctx->stream>>>(out, out_bf, lse, qkv, T, C, NH, scale);
    CUDA_LAUNCH_CHECK();
}

template <int HS>
static void att_bwd_tc(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *lse, const float *D,
                       int B, int T, int C, int NH, float scale, int set) {
    size_t smem = tc_bwd_smem(HS);
    att_check(ctx, "attention_backward_cuda", C, NH, smem);
    att_smem_attr(att_bwd_kv_tc_kernel<HS>, smem);
    att_smem_attr(att_bwd_q_tc_kernel<HS>, smem);
    dim3 grid((unsigned)((T + ATT_TILE - 1) / ATT_TILE), (unsigned)(B * NH));
    att_bwd_kv_tc_kernel<HS><<<grid, ATT_TC_THREADS, smem, ctx->stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale,
                                                                          set);
    CUDA_LAUNCH_CHECK();
    att_bwd_q_tc_kernel<HS><<<grid, ATT_TC_THREADS, smem, ctx->stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale,
                                                                         set);
    CUDA_LAUNCH_CHECK();
}

void attention_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, float *lse, const float *qkv, int B, int T,
                            int C, int NH) {
    if (B <= 0 || T <= 0) return;
    int hs = C / NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    if (attention_uses_tensor_cores(ctx, C, NH)) {
        if (hs == 32) att_fwd_tc<32>(ctx, out, out_bf, lse, qkv, B, T, C, NH, scale);
        else if (hs == 64) att_fwd_tc<64>(ctx, out, out_bf, lse, qkv, B, T, C, NH, scale);
        else att_fwd_tc<128>(ctx, out, out_bf, lse, qkv, B, T, C, NH, scale);
        return;
    }
    size_t smem = f32_fwd_smem(hs);
    att_check(ctx, "attention_forward_cuda", C, NH, smem);
    att_smem_attr(att_fwd_f32_kernel, smem);
    dim3 grid((unsigned)((T + ATT_TILE - 1) / ATT_TILE), (unsigned)(B * NH));
    att_fwd_f32_kernel<<<grid, ATT_F32_THREADS, smem, ctx->stream>>>(out, out_bf, lse, qkv, T, C, NH, scale);
    CUDA_LAUNCH_CHECK();
}

/* set: dqkv overwritten (every element of its rows t < T is written once: dQ by the query
 * kernel, dK and dV by the key kernel) instead of added into */
static void attention_backward_impl(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                    const float *lse, int B, int T, int C, int NH, int set) {
    if (B <= 0 || T <= 0) return;
    int hs = C / NH;
    float scale = (float)(1.0 / sqrt((double)hs));
    size_t rows = (size_t)B * NH * T;
    if (ctx->att_D_n < rows) {
        fprintf(stderr, "s2hc: kernels/cuda: attention_backward_cuda: scratch too small: reserve it first\n");
        exit(1);
    }
    float *D = ctx->att_D;
    att_rowdot_kernel<<<cuda_blocks(rows, CUDA_THREADS / 32), CUDA_THREADS, 0, ctx->stream>>>(D, dout, out, B, T, C,
                                                                                             NH);
    CUDA_LAUNCH_CHECK();
    if (attention_uses_tensor_cores(ctx, C, NH)) {
        if (hs == 32) att_bwd_tc<32>(ctx, dqkv, dout, qkv, lse, D, B, T, C, NH, scale, set);
        else if (hs == 64) att_bwd_tc<64>(ctx, dqkv, dout, qkv, lse, D, B, T, C, NH, scale, set);
        else att_bwd_tc<128>(ctx, dqkv, dout, qkv, lse, D, B, T, C, NH, scale, set);
        return;
    }
    dim3 grid((unsigned)((T + ATT_TILE - 1) / ATT_TILE), (unsigned)(B * NH));
    size_t smem = f32_bwd_kv_smem(hs);
    att_check(ctx, "attention_backward_cuda", C, NH, smem);
    att_smem_attr(att_bwd_kv_f32_kernel, smem);
    att_bwd_kv_f32_kernel<<<grid, ATT_F32_THREADS, smem, ctx->stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale, set);
    CUDA_LAUNCH_CHECK();
    smem = f32_bwd_q_smem(hs);
    att_check(ctx, "attention_backward_cuda", C, NH, smem);
    att_smem_attr(att_bwd_q_f32_kernel, smem);
    att_bwd_q_f32_kernel<<<grid, ATT_F32_THREADS, smem, ctx->stream>>>(dqkv, dout, qkv, lse, D, T, C, NH, scale, set);
    CUDA_LAUNCH_CHECK();
}

void attention_backward_cuda(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                             const float *lse, int B, int T, int C, int NH) {
    attention_backward_impl(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, 0);
}

void attention_backward_set_cuda(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                 const float *lse, int B, int T, int C, int NH) {
    attention_backward_impl(ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, 1);
}
