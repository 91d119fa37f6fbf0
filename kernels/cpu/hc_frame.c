/* hc_frame.c: the hyper-connection frame's kernels on the CPU (hc_frame.h lists them):
 * the layout of a token's n streams, the coefficient projection's products (register tiles
 * in fp32; with bf16 operands by vdpbf16ps or by AMX tiles) and the weights W' they take,
 * the norm, the streams stored in bf16, the write-back, and the backward's per-token work
 * (dots, method backward, dX pass); the products with bf16 operands are hc_proj_bf16.c's. harness/model.c runs them in the frame's regions, a
 * thread's range of tokens a chunk at a time; its comment there says how
 * (docs/performance.md).
 *
 * The loops over channels use hc_vec, GCC's vector extension one register wide (cpu_vec:
 * 16 floats with AVX-512, 8 without; half that in the gradient-check build), and the tiles
 * that keep many accumulators are sized by the registers the target has (CPU_NREGS: 32 with
 * AVX-512, fewer elsewhere): accumulators stay in registers, and the lane of
 * an element is fixed by its index, so a reduction never depends on alignment or
 * threads. The frame's own loops (HC_FMA: the dots, dX, write-back, read-out, df, the
 * norm) and the tiles of the projection and of the dW product (hc_x_wt, hc_at_x) are
 * built with FMA contraction, like the BLAS they sit beside, and their scalar tails take
 * explicit FMAs (hc_fma_s); a channel always takes the same path (vector body or scalar
 * tail, fixed by C), so its bits do not depend on anything but the code. The per-token
 * method math (hc_math.h) is not contracted. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cpu/hc_frame.h"
#include "harness/util.h"

/* The frame's loops over channels, built with FMA contraction (the header comment). */
#ifdef __clang__ /* no such attribute: its fp pragma at the top of the function's body */
#define HC_FMA
#define HC_FMA_BODY _Pragma("clang fp contract(fast)")
#else
#define HC_FMA __attribute__((optimize("fp-contract=fast")))
#define HC_FMA_BODY
#endif

/* v as it is, in a register, opaque to the compiler: it is neither folded into an FMA as
 * a memory operand nor fused with the products it is later added to. */
static inline __attribute__((always_inline)) hc_vec hc_opaque(hc_vec v) {
#ifdef __AVX__ /* a cpu_vec is one register (cpu_math.h) */
    __asm__("" : "+v"(v));
#endif
    return v;
}

/* a b + c rounded once. The scalar tails of the frame's loops take their products with it
 * rather than by contraction: with contraction, two instances of one loop (X in fp32 or in
 * bf16) have been built differently (one vectorised across the streams, its products then
 * added unfused) and so rounded a channel differently (tests/test_train). */
static inline __attribute__((always_inline)) real hc_fma_s(real a, real b, real c) {
#if REAL_IS_DOUBLE
    return __builtin_fma(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}

/* s in every lane, held in a register: GCC otherwise folds each use of a broadcast
 * coefficient into its FMA as a {1to16} memory operand, one load per FMA. (s - 0 is s
 * exactly, -0 included.) */
static inline __attribute__((always_inline)) hc_vec hc_splat(real s) { return hc_opaque(s - (hc_vec){0}); }

/* The end of a dot product kept in vector lanes: s, the lane sum of its accumulator
 * (blocks [0, c0); hc_vsum_many sums many accumulators at once), then a[c] b[c] for the
 * leftover channels c0 <= c < D, in order. */
static inline __attribute__((always_inline)) HC_FMA real hc_dot_tail(real s, const real *a, const real *b, size_t c0,
                                                                     size_t D) {
    HC_FMA_BODY
    for (size_t c = c0; c < D; c++) s = hc_fma_s(a[c], b[c], s);
    return s;
}

/* ---- the layout of a token's n streams ----
 * Rows (blk = 0): stream i's C values at i C .. i C + C - 1. Channel blocks (blk = 1, the
 * training steps' layout, model_forward_backward): the token's n x C values by blocks of
 * HC_VL channels, block b holding stream 0's HC_VL values of it, then stream 1's, ..,
 * stream n - 1's; then the channels past the last whole block (C0 = C rounded down to
 * HC_VL), stream by stream. The frame's loops read a block of channels of every stream
 * together (they mix the streams); in rows that is n runs of memory a row apart, which
 * the hardware's prefetchers follow badly, in blocks one run (docs/performance.md, log
 * item 40). The norm, the projection and dW sum over all n C values of a token and take
 * them in either order (W' is built in the streams' order, dW folded back); the per-
 * stream norm (hc) keeps rows. */
/* The offset of stream i's vector of channels c .. c + HC_VL - 1 (c a multiple of HC_VL,
 * c + HC_VL <= C) in a token's values. */
static inline size_t hc_xv(int blk, int n, int C, int i, int c) {
    return blk ? (size_t)c * (size_t)n + (size_t)i * HC_VL : (size_t)i * (size_t)C + (size_t)c;
}

/* The base of stream i's channels past the last whole block: channel c >= C0 is at
 * hc_xt(...) + c. */
static inline size_t hc_xt(int blk, int n, int C, int i) {
    const size_t C0 = (size_t)(C / HC_VL * HC_VL);
    return blk ? C0 * (size_t)n + (size_t)i * ((size_t)C - C0) - C0 : (size_t)i * (size_t)C;
}

/* The row index (stream j times C plus channel c) of the value at position q of a token's
 * values in channel blocks. */
size_t hc_xcol(int n, int C, size_t q) {
    const size_t C0 = (size_t)(C / HC_VL * HC_VL), bn = (size_t)n * HC_VL;
    if (q < C0 * (size_t)n) {
        const size_t b = q / bn, r = q % bn;
        return r / HC_VL * (size_t)C + b * HC_VL + r % HC_VL;
    }
    const size_t r = q - C0 * (size_t)n, w = (size_t)C - C0;
    return r / w * (size_t)C + C0 + r % w;
}

/* Each of the n streams of a token's values y = x (C values). */
void hc_spread(real *restrict y, const real *restrict x, int n, int C, int blk) {
    if (!blk) {
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * C, x, (size_t)C * sizeof(real));
        return;
    }
    const int C0 = C / HC_VL * HC_VL;
    for (int c = 0; c < C0; c += HC_VL)
        for (int i = 0; i < n; i++) memcpy(y + hc_xv(1, n, C, i, c), x + c, HC_VL * sizeof(real));
    if (C0 < C)
        for (int i = 0; i < n; i++) memcpy(y + hc_xt(1, n, C, i) + C0, x + C0, (size_t)(C - C0) * sizeof(real));
}

/* y = w[0] x[0] + w[1] x[1] + ... + w[m-1] x[m-1] (in that order), the m streams x[i] of a
 * token's values at x0 in the layout blk, y and x of C values. m is a constant in each
 * instance (hc_combine dispatches), the weights in registers. */
static inline __attribute__((always_inline)) HC_FMA void hc_combine_n(const int m, real *y, const real *w,
                                                                      const real *x0, int C, const int blk) {
    HC_FMA_BODY
    hc_vec wv[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++) wv[i] = hc_splat(w[i]);
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) {
        /* the first product rounded on its own, each later one fused into the sum */
        hc_vec v = hc_opaque(wv[0] * hc_load(x0 + hc_xv(blk, m, C, 0, c)));
#pragma GCC unroll 8
        for (int i = 1; i < m; i++) v += wv[i] * hc_load(x0 + hc_xv(blk, m, C, i, c));
        hc_store(y + c, v);
    }
    for (; c < C; c++) {
        real v = w[0] * x0[hc_xt(blk, m, C, 0) + c];
        for (int i = 1; i < m; i++) v = hc_fma_s(w[i], x0[hc_xt(blk, m, C, i) + c], v);
        y[c] = v;
    }
}

HC_FMA void hc_combine(real *y, const real *w, const real *x0, int m, int C, int blk) {
    HC_FMA_BODY
    switch (m) {
#define HC_COMBINE_CASE(k) \
    case k:                                                      \
        if (blk) hc_combine_n(k, y, w, x0, C, 1);                \
        else hc_combine_n(k, y, w, x0, C, 0);                    \
        break;
        HC_COMBINE_CASE(1) HC_COMBINE_CASE(2) HC_COMBINE_CASE(3) HC_COMBINE_CASE(4)
        HC_COMBINE_CASE(5) HC_COMBINE_CASE(6) HC_COMBINE_CASE(7) HC_COMBINE_CASE(8)
#undef HC_COMBINE_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", m, HC_MAX_N);
    }
}

/* M (Kr, D) += A^T X over `rows` rows: A (rows, Kr), X (rows, D); the frame's dW product.
 * OpenBLAS packs X for every call, and with Kr <= 32 outputs the packing is most of the
 * time (docs/performance.md, log item 11). Here the rows go in blocks of 16 (their X
 * in L1), and for each block tiles of up to 8 rows of M by two vectors of columns are
 * loaded into registers, take the block's rows in order, and go back: every element
 * sums its rows in a fixed order, bit-identical for a given thread count. This and
 * hc_x_wt are built with FMA contraction (as BLAS is): it halves the tiles'
 * instructions, and no test compares these sums bit for bit with a scalar loop
 * (tests/test_frame compares them with sums in double, within float rounding). */
#if CPU_NREGS >= 32
#define HC_MT_K 8 /* 16 accumulators, two x vectors and a broadcast: 19 of 32 registers */
#else
#define HC_MT_K 6 /* 12 + 3 of 16 */
#endif
CPU_CONTRACT_FAST
static inline __attribute__((always_inline)) void hc_at_x_tile(const int kb, real *M, const real *A, const real *X,
                                                             size_t rows, int Kr, size_t D, size_t j, int nv) {
    hc_vec acc[HC_MT_K][2];
#pragma GCC unroll 8
    for (int k = 0; k < HC_MT_K; k++) {
        acc[k][0] = k < kb ? hc_load(M + (size_t)k * D + j) : (hc_vec){0};
        acc[k][1] = k < kb && nv == 2 ? hc_load(M + (size_t)k * D + j + HC_VL) : (hc_vec){0};
    }
    for (size_t t = 0; t < rows; t++) {
        const real *x = X + t * D + j, *a = A + t * (size_t)Kr;
        const hc_vec x0 = hc_load(x), x1 = nv == 2 ? hc_load(x + HC_VL) : x0;
#pragma GCC unroll 8
        for (int k = 0; k < kb; k++) {
            acc[k][0] += a[k] * x0;
            if (nv == 2) acc[k][1] += a[k] * x1;
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < kb; k++)
        for (int v = 0; v < nv; v++) hc_store(M + (size_t)k * D + j + (size_t)v * HC_VL, acc[k][v]);
}

static void hc_at_x_rows(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D) {
    for (int k0 = 0; k0 < Kr; k0 += HC_MT_K) {
        const int kb = Kr - k0 < HC_MT_K ? Kr - k0 : HC_MT_K;
        real *Mk = M + (size_t)k0 * D;
        const real *Ak = A + k0;
        size_t j = 0;
        for (; j + 2 * HC_VL <= D; j += 2 * HC_VL) switch (kb) {
#define HC_AT_X_CASE(c) \
            case c: hc_at_x_tile(c, Mk, Ak, X, rows, Kr, D, j, 2); break;
            HC_AT_X_CASE(1) HC_AT_X_CASE(2) HC_AT_X_CASE(3) HC_AT_X_CASE(4) HC_AT_X_CASE(5) HC_AT_X_CASE(6)
#if HC_MT_K > 6
            HC_AT_X_CASE(7) HC_AT_X_CASE(8)
#endif
#undef HC_AT_X_CASE
            }
        for (; j + HC_VL <= D; j += HC_VL) hc_at_x_tile(kb, Mk, Ak, X, rows, Kr, D, j, 1);
        for (; j < D; j++) /* columns past the last vector */
            for (int k = 0; k < kb; k++) {
                real s = 0;
                for (size_t t = 0; t < rows; t++) s += Ak[t * (size_t)Kr + k] * X[t * D + j];
                Mk[(size_t)k * D + j] += s;
            }
    }
}

/* Z = X W^T, (rows, Kr) from X (rows, D) and W (Kr, D): the frame's coefficient
 * projection z = X W'^T. OpenBLAS runs these shapes (K = 8..32 outputs, D = 128..1024)
 * at about half the FMA rate. Tiles of HC_XW_R rows by up to HC_XW_K outputs keep 24
 * accumulators in registers (12 with 16 registers; the SSE build's 8 register pairs
 * cannot hold them) while a tile's W rows (12 KB at D = 512: L1) meet every row of X;
 * the accumulators then sum their lanes together by the fixed tree
 * (hc_vsum_many, a tenth of the tile's time when each summed alone) and add the columns
 * past the last vector in order: bit-identical for a given thread count. HC_XW_R and
 * HC_XW_K are hc_frame.h's: hc_x_wt_bf16 (hc_proj_bf16.c) takes the same tiles. */
static inline __attribute__((always_inline)) void hc_x_wt_tile(const int rb, const int kb, real *Z, const real *X,
                                                             const real *W, int Kr, size_t D) {
    hc_vec acc[HC_XW_R][HC_XW_K];
#pragma GCC unroll 4
    for (int r = 0; r < HC_XW_R; r++)
#pragma GCC unroll 6
        for (int k = 0; k < HC_XW_K; k++) acc[r][k] = (hc_vec){0};
    size_t j = 0;
    for (; j + HC_VL <= D; j += HC_VL) {
        hc_vec x[HC_XW_R] = {{0}};
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) x[r] = hc_load(X + (size_t)r * D + j);
#pragma GCC unroll 6
        for (int k = 0; k < kb; k++) {
            const hc_vec w = hc_opaque(hc_load(W + (size_t)k * D + j));
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) acc[r][k] += x[r] * w;
        }
    }
    real s[HC_XW_R * HC_XW_K];
    hc_vsum_many(HC_XW_R * HC_XW_K, &acc[0][0], s);
    for (int r = 0; r < rb; r++)
        for (int k = 0; k < kb; k++)
            Z[(size_t)r * Kr + k] = hc_dot_tail(s[r * HC_XW_K + k], X + (size_t)r * D, W + (size_t)k * D, j, D);
}

void hc_x_wt(real *Z, const real *X, const real *W, size_t rows, int Kr, size_t D) {
    for (int k0 = 0; k0 < Kr; k0 += HC_XW_K) {
        const int kb = Kr - k0 < HC_XW_K ? Kr - k0 : HC_XW_K;
        const real *Wk = W + (size_t)k0 * D;
        size_t r0 = 0;
        for (; r0 + HC_XW_R <= rows; r0 += HC_XW_R) switch (kb) {
#define HC_X_WT_CASE(c)             case c: hc_x_wt_tile(HC_XW_R, c, Z + r0 * (size_t)Kr + k0, X + r0 * D, Wk, Kr, D); break;
            HC_X_WT_CASE(1) HC_X_WT_CASE(2) HC_X_WT_CASE(3) HC_X_WT_CASE(4) HC_X_WT_CASE(5) HC_X_WT_CASE(6)
#undef HC_X_WT_CASE
            }
        if (r0 < rows) hc_x_wt_tile((int)(rows - r0), kb, Z + r0 * (size_t)Kr + k0, X + r0 * D, Wk, Kr, D);
    }
}

/* Blocks of HC_MT_ROWS rows (32 KB of X at D = 512: L1) through every tile. */
#define HC_MT_ROWS 16
void hc_at_x(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D) {
    for (size_t r0 = 0; r0 < rows; r0 += HC_MT_ROWS) {
        const size_t nr = rows - r0 < HC_MT_ROWS ? rows - r0 : HC_MT_ROWS;
        hc_at_x_rows(M, A + r0 * (size_t)Kr, X + r0 * D, nr, Kr, D);
    }
}
CPU_CONTRACT_END


/* An operand of the projection's products as they take it: itself, or rounded to bf16. */
static inline real hc_proj_operand(real x, int bf16) {
#if HC_BF16
    if (bf16) return hc_bf16_round(x);
#endif
    (void)bf16;
    return x;
}

#define RMS_EPS 1e-6 /* RMSNorm of the streams before the coefficient projection */

/* 1 / sqrt(mean(x^2) + eps) of a norm row of D values. Four accumulators, each block of
 * 4 vectors in turn: one accumulator made a serial chain of D / 16 FMAs, the latency of
 * the write-back's loop (log item 33). */
HC_FMA real hc_rstd_of(const real *x, size_t D) {
    HC_FMA_BODY
    hc_vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t k = 0;
    for (; k + 4 * HC_VL <= D; k += 4 * HC_VL) {
        const hc_vec v0 = hc_load(x + k), v1 = hc_load(x + k + HC_VL);
        const hc_vec v2 = hc_load(x + k + 2 * HC_VL), v3 = hc_load(x + k + 3 * HC_VL);
        a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
    }
    for (; k + HC_VL <= D; k += HC_VL) { const hc_vec v = hc_load(x + k); a0 += v * v; }
    real ss = hc_vsum((a0 + a1) + (a2 + a3));
    for (; k < D; k++) ss = hc_fma_s(x[k], x[k], ss);
    if (!isfinite(ss)) { /* a float sum past 3.4e38 (an rms above ~1e19 / sqrt(D)): in double, where
                            finite values cannot overflow (else rstd 0 silently turned the
                            coefficients off); a row holding a NaN or inf stays so */
        double sd = 0;
        for (size_t i = 0; i < D; i++) sd += (double)x[i] * (double)x[i];
        return (real)(1.0 / sqrt(sd / (double)D + RMS_EPS));
    }
    return (real)(1.0 / sqrt((double)ss / (double)D + RMS_EPS));
}


/* W' = W diag(1 + g), (Kr, D), into this thread's copy. */
void hc_scaled_weight(real *restrict Wg, const hc_params *p, const hc_dims *d) {
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        real *o = Wg + (size_t)k * d->D;
        for (size_t q = 0; q < d->D; q++) { /* its columns in the streams' order */
            const size_t j = d->blk ? d->cols[q] : q;
            o[q] = w[j] * ((real)1 + p->g[j]);
        }
    }
}

/* W' = W diag(1 + g) for the backward's dX pass, by blocks of HC_VL channels: block b's
 * columns of every row and stream side by side, [b][k][j][HC_VL] (j over the n streams
 * of a row with one norm row per token, else one), then the leftover channels,
 * [k][j][C - C0]. The pass walks each block's Kr * n vectors as one run of memory: in
 * rows of W', the same vectors lie at a stride of C reals, Kr * n lines that fall into a
 * few sets of L1 (32 lines of 512-byte stride share 8 of its 64 sets). */
static void hc_scaled_weight_blocks(real *restrict Wb, const hc_params *p, const hc_dims *d) {
    const int nj = d->rpt == 1 ? d->n : 1, C = d->C, C0 = C / HC_VL * HC_VL, Kr = d->Kr;
    for (int k = 0; k < Kr; k++)
        for (int j = 0; j < nj; j++) {
            const size_t col = (size_t)k * d->D + (size_t)j * C; /* row k, stream j's columns */
            const real *w = p->W + col, *g = p->g + (size_t)j * C;
            for (int c0 = 0; c0 < C0; c0 += HC_VL) {
                real *o = Wb + (((size_t)(c0 / HC_VL) * Kr + k) * nj + j) * HC_VL;
#pragma omp simd
                for (int v = 0; v < HC_VL; v++) o[v] = w[c0 + v] * ((real)1 + g[c0 + v]);
            }
            for (int c = C0; c < C; c++)
                Wb[(size_t)Kr * nj * C0 + ((size_t)k * nj + j) * (C - C0) + (c - C0)] = w[c] * ((real)1 + g[c]);
        }
}


/* x rounded to the nearest bf16 value, ties to even (NaN stays NaN), as CUDA's
 * __float2bfloat16_rn: gpt_model.round_streams. Not hc_bf16_round: that one exists only in
 * AVX512_BF16 builds and flushes denormals to zero, as vcvtne2ps2bf16 does. */
static float hc_stream_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void hc_round_streams(real *Y, size_t n) {
    for (size_t i = 0; i < n; i++) Y[i] = (real)hc_stream_bf16((float)Y[i]);
}

/* ---- the streams stored in bf16 (residual.stream_precision: bf16) ----
 * A training step with stream_bf16_on stores each X_l in bf16, in the first half of its
 * fp32 region (the layout stays fp32's: evals and probes run the same buffers in fp32),
 * which halves the bytes of the frame's passes over them. Every value is rounded as
 * round_streams rounds it. The write-back reads X_l's bf16 rows in its loop
 * (hc_out_token_n) and writes X_{l+1}'s rows in fp32 to the thread's staging rows, where
 * a pass rounds them and stores their bf16 (hc_bf16_narrow) and the next coefficients
 * read them; the backward widens a chunk's rows into the staging rows and runs the fp32
 * code on them. The same sums of the same values: the step's loss and gradients are
 * round_streams' bit for bit (tests/test_train). */
/* A bf16 value as a real, exactly: its bits are a float's high half. */
static inline real hc_bf16_get(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (real)f;
}

/* y rounded to bf16 (as hc_stream_bf16: to nearest, ties to even; a NaN stays a NaN, quiet,
 * its payload's high bits kept), its bits stored at x; returns the rounded value. Written
 * apart from hc_stream_bf16 on purpose: round_streams is the reference this path is
 * checked against bit for bit (tests/test_train), and the GPU check holds that reference
 * to CUDA's rounding. */
static inline real hc_bf16_put(uint16_t *x, real y) {
    float f = (float)y;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & 0xffff0000u : r;
    *x = (uint16_t)(u >> 16);
    memcpy(&f, &u, sizeof f);
    return (real)f;
}

/* HC_VL bf16 values as a vector of reals (real may be double: the gradient-check build). */
typedef uint16_t hc_hvec __attribute__((vector_size(2 * HC_VL)));
typedef uint32_t hc_uvec __attribute__((vector_size(4 * HC_VL)));
typedef float hc_fvec __attribute__((vector_size(4 * HC_VL)));

static inline __attribute__((always_inline)) hc_vec hc_bf16_vget(const uint16_t *x) {
    hc_hvec h;
    memcpy(&h, x, sizeof h);
    const hc_uvec u = __builtin_convertvector(h, hc_uvec) << 16;
    return __builtin_convertvector((hc_fvec)u, hc_vec);
}

/* y = x widened to reals (in 512-bit vectors where the target has them: HC_WIDE). */
HC_WIDE void hc_bf16_widen(real *restrict y, const uint16_t *restrict x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = hc_bf16_get(x[i]);
}

/* y rounded to bf16 in place, its bits into x. */
HC_WIDE void hc_bf16_narrow(uint16_t *restrict x, real *restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = hc_bf16_put(x + i, y[i]);
}

/* Write-back of one token: Y[i] = post[i] f + H[i,0] X[0] + ... + H[i,n-1] X[n-1] (in that
 * order). n is a constant in each instance (hc_out_token dispatches): a block of
 * channels of the n rows of X and of f is loaded once for the n rows of Y, and the
 * token's n^2 + n coefficients stay in registers. With xb (bf16 streams, also a
 * constant), X is the token's bf16 row, widened as it is loaded. (Rounding Y in this
 * loop too measured slower than a pass of its own, hc_bf16_narrow: its constants spill
 * the coefficients' registers; log item 38.) */
static inline __attribute__((always_inline)) HC_FMA void hc_out_token_n(const int n, const int xb, int C, const int blk,
                                                                        const void *X, const real *f,
                                                                        const real *H, const real *post, real *Y) {
    HC_FMA_BODY
    const real *Xf = (const real *)X;
    const uint16_t *Xh = (const uint16_t *)X;
    hc_vec hv[HC_MM], qv[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) {
        qv[i] = hc_splat(post[i]);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) hv[i * n + j] = hc_splat(H[i * n + j]);
    }
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) {
        hc_vec xv[HC_MAX_N];
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            xv[j] = xb ? hc_bf16_vget(Xh + hc_xv(blk, n, C, j, c)) : hc_load(Xf + hc_xv(blk, n, C, j, c));
        const hc_vec fv = hc_load(f + c);
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) {
            hc_vec v = hc_opaque(qv[i] * fv); /* as in hc_combine_n */
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) v += hv[i * n + j] * xv[j];
            hc_store(Y + hc_xv(blk, n, C, i, c), v);
        }
    }
    for (; c < C; c++)
        for (int i = 0; i < n; i++) {
            real v = post[i] * f[c];
            for (int j = 0; j < n; j++) {
                const size_t o = hc_xt(blk, n, C, j) + (size_t)c;
                v = hc_fma_s(H[i * n + j], xb ? hc_bf16_get(Xh[o]) : Xf[o], v);
            }
            Y[hc_xt(blk, n, C, i) + (size_t)c] = v;
        }
}

HC_FMA void hc_out_token(int n, int xb, int C, int blk, const void *X, const real *f, const real *H,
                                const real *post, real *Y) {
    HC_FMA_BODY
    switch (n * 4 + !!xb * 2 + !!blk) {
#define HC_OUT_CASE(k)                                                      \
    case 4 * k: hc_out_token_n(k, 0, C, 0, X, f, H, post, Y); break;        \
    case 4 * k + 1: hc_out_token_n(k, 0, C, 1, X, f, H, post, Y); break;    \
    case 4 * k + 2: hc_out_token_n(k, 1, C, 0, X, f, H, post, Y); break;    \
    case 4 * k + 3: hc_out_token_n(k, 1, C, 1, X, f, H, post, Y); break;
        HC_OUT_CASE(1) HC_OUT_CASE(2) HC_OUT_CASE(3) HC_OUT_CASE(4)
        HC_OUT_CASE(5) HC_OUT_CASE(6) HC_OUT_CASE(7) HC_OUT_CASE(8)
#undef HC_OUT_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

/* Zero the next `count` reals of the share (all that is left: SIZE_MAX). */
void hc_zero_next(hc_zero_cursor *z, size_t count) {
    while (count && z->k < 3) {
        const size_t c = count < z->left[z->k] ? count : z->left[z->k];
        memset(z->p[z->k], 0, c * sizeof(real));
        z->p[z->k] += c;
        z->left[z->k] -= c;
        count -= c;
        if (!z->left[z->k]) z->k++;
    }
}

/* The dots of one token's backward: dH[i][j] = dy_i . x_j, dpost[i] = dy_i . f,
 * dpre[i] = du . x_i (0 without du). n is a constant in each instance (hc_token_dots
 * dispatches), so the n + 1 accumulators of a row live in registers and dy_i is loaded
 * once per chunk of channels. */
static inline __attribute__((always_inline)) HC_FMA void hc_token_dots_n(const int n, int C, const int blk,
                                                                         const real *X,
                                                                         const real *dy, const real *f,
                                                                         const real *du, real *dH, real *dpost,
                                                                         real *dpre) {
    HC_FMA_BODY
    int c0 = C / HC_VL * HC_VL;
    if (n <= 4 && du && CPU_NREGS >= 32) {
        /* every dot of the token in one pass: n^2 + 2n accumulators (24 at n = 4: dH's,
         * dpost's, dpre's) in registers, each block of X, f, du and dy loaded once (with 16
         * registers they would live on the stack: the loops below instead). Each
         * accumulator takes its blocks in the same order as below, and their lanes are
         * summed together (hc_vsum_many): the same bits. */
        const int nn = n * n;
        hc_vec a[HC_MAX_N * (HC_MAX_N + 2)];
        real s[HC_MAX_N * (HC_MAX_N + 2)];
#pragma GCC unroll 24
        for (int k = 0; k < nn + 2 * n; k++) a[k] = (hc_vec){0};
        for (int c = 0; c < c0; c += HC_VL) {
            hc_vec xv[HC_MAX_N];
#pragma GCC unroll 4
            for (int j = 0; j < n; j++) xv[j] = hc_load(X + hc_xv(blk, n, C, j, c));
            const hc_vec fv = hc_load(f + c), uv = hc_load(du + c);
#pragma GCC unroll 4
            for (int i = 0; i < n; i++) {
                const hc_vec dv = hc_load(dy + hc_xv(blk, n, C, i, c));
#pragma GCC unroll 4
                for (int j = 0; j < n; j++) a[i * n + j] += dv * xv[j];
                a[nn + i] += dv * fv;
            }
#pragma GCC unroll 4
            for (int j = 0; j < n; j++) a[nn + n + j] += uv * xv[j];
        }
        hc_vsum_many(nn + 2 * n, a, s);
#pragma GCC unroll 4
        for (int i = 0; i < n; i++) {
            const real *dyi = dy + hc_xt(blk, n, C, i); /* its channels past c0 */
#pragma GCC unroll 4
            for (int j = 0; j < n; j++)
                dH[i * n + j] = hc_dot_tail(s[i * n + j], dyi, X + hc_xt(blk, n, C, j), c0, C);
            dpost[i] = hc_dot_tail(s[nn + i], dyi, f, c0, C);
        }
#pragma GCC unroll 4
        for (int j = 0; j < n; j++) dpre[j] = hc_dot_tail(s[nn + n + j], du, X + hc_xt(blk, n, C, j), c0, C);
        return;
    }
    for (int i = 0; i < n; i++) {
        const real *dyi = dy + hc_xt(blk, n, C, i);
        hc_vec acc[HC_MAX_N + 1];
        real s[HC_MAX_N + 1];
#pragma GCC unroll 9
        for (int j = 0; j <= n; j++) acc[j] = (hc_vec){0};
        for (int c = 0; c < c0; c += HC_VL) {
            const hc_vec dv = hc_load(dy + hc_xv(blk, n, C, i, c));
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) acc[j] += dv * hc_load(X + hc_xv(blk, n, C, j, c));
            acc[n] += dv * hc_load(f + c);
        }
        hc_vsum_many(n + 1, acc, s);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) dH[i * n + j] = hc_dot_tail(s[j], dyi, X + hc_xt(blk, n, C, j), c0, C);
        dpost[i] = hc_dot_tail(s[n], dyi, f, c0, C);
    }
    if (!du) {
        for (int i = 0; i < n; i++) dpre[i] = 0;
        return;
    }
    hc_vec acc[HC_MAX_N];
    real s[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) acc[i] = (hc_vec){0};
    for (int c = 0; c < c0; c += HC_VL) {
        const hc_vec dv = hc_load(du + c);
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) acc[i] += dv * hc_load(X + hc_xv(blk, n, C, i, c));
    }
    hc_vsum_many(n, acc, s);
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) dpre[i] = hc_dot_tail(s[i], du, X + hc_xt(blk, n, C, i), c0, C);
}

static HC_FMA void hc_token_dots(int n, int C, int blk, const real *X, const real *dy, const real *f, const real *du,
                                 real *dH, real *dpost, real *dpre) {
    HC_FMA_BODY
    switch (n) {
#define HC_DOTS_CASE(k) \
    case k:                                                                             \
        if (blk) hc_token_dots_n(k, C, 1, X, dy, f, du, dH, dpost, dpre);              \
        else hc_token_dots_n(k, C, 0, X, dy, f, du, dH, dpost, dpre);                  \
        break;
        HC_DOTS_CASE(1) HC_DOTS_CASE(2) HC_DOTS_CASE(3) HC_DOTS_CASE(4)
        HC_DOTS_CASE(5) HC_DOTS_CASE(6) HC_DOTS_CASE(7) HC_DOTS_CASE(8)
#undef HC_DOTS_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

/* The dots of token t's backward (hc_token_dots), its row of X at X, into dH, dpost, dpre. */
inline void hc_token_grads(const hc_acts *h, const hc_dims *d, size_t t, const real *X, const real *dY,
                                  const real *du, real *dH, real *dpost, real *dpre) {
    hc_token_dots(d->n, d->C, d->blk, X, dY + t * d->nC, h->f + t * d->C, du ? du + t * d->C : NULL, dH,
                  dpost, dpre);
}

/* Token t after the method's backward has written its dz: the norm's own coefficient
 * of each stream, cj[j] = r^2 (dz . z) / D of stream j's norm row, pj[j] = pre[j] (0
 * without du), and dz *= r. */
inline void hc_token_dx_coefs(const hc_acts *h, const hc_dims *d, size_t t, int has_du, real *dz, real *cj,
                                     real *pj) {
    const int n = d->n, K = d->K, rpt = d->rpt, Kr = d->Kr;
    const real *z = h->z + t * K;
    real *dzt = dz + t * K;
    real c[HC_MAX_N];
    for (int r = 0; r < rpt; r++) {
        const real rs = h->rstd[t * rpt + r];
        real dzz = 0;
        for (int k = 0; k < Kr; k++) dzz += dzt[r * Kr + k] * z[r * Kr + k];
        c[r] = rs * rs * dzz / (real)d->D;
        for (int k = 0; k < Kr; k++) dzt[r * Kr + k] *= rs;
    }
    for (int j = 0; j < n; j++) {
        cj[j] = c[rpt == 1 ? 0 : j];
        pj[j] = has_du ? h->pre[t * n + j] : 0;
    }
}

/* dX of TT tokens from t0, their rows of X from Xr, in one pass (the coefficients of
 * hc_token_dx_coefs in cj, pj, n per token): for each stream j,
 *   dx_j = pre_j du - c_j x_j + sum_i H_ij dy_i + sum_k (r dz)_k W'[k, cols of j]
 * the last sum being the projection's backward (W' is (Kr, D): stream j's columns are
 * jC.. of row 0's dz with one norm row per token, or all D = C of row j's), read from
 * Wb in the blocks of hc_scaled_weight_blocks. Each vector of W' loaded serves the TT
 * tokens. The first three terms go first, token by token, with
 * the token's n^2 coefficients H_ij in registers for all its blocks of channels up to 4
 * streams (beyond, one broadcast load each per block), into dX; the
 * projection's terms are then added block by block. n is a constant in each instance
 * (hc_tokens_dx dispatches). dX may be dY itself: each block of channels of a token
 * reads its n rows of dY before it writes any row of dX. With bf16 operands, zp holds the
 * tokens' dz in pairs for vdpbf16ps; or pz the projection's terms themselves, already
 * summed by AMX tiles (hc_dx_products_amx, rows of hc_amx_pz_row(nC)), added in place of
 * the Kr multiply-adds. */
static inline __attribute__((always_inline)) HC_FMA void hc_tokens_dx_n(const int n, const int TT, const int blk,
                                                                        const hc_acts *h,
                                                                        const hc_dims *d, size_t t0, const real *Xr,
                                                                        const real *dY, const real *du, real *dX,
                                                                        const real *dz, const real *cj, const real *pj,
                                                                        const real *Wb, const real *wsum,
                                                                        real *sum, const uint32_t *zp,
                                                                        const real *pz) {
    HC_FMA_BODY
    const int C = d->C, Kr = d->Kr, flat = d->rpt == 1, Kp = (Kr + 1) / 2;
    const size_t nC = d->nC, pzr = hc_amx_pz_row(nC);
    const real *X[4], *dy[4], *uu[4], *H[4], *zz[4], *ws[4];
    real *dx[4], *sm[4];
    for (int t = 0; t < TT; t++) {
        const size_t tt = t0 + (size_t)t;
        X[t] = Xr + (size_t)t * nC;
        dy[t] = dY + tt * nC;
        uu[t] = du ? du + tt * C : X[t]; /* with pj = 0 the term vanishes exactly */
        dx[t] = dX + tt * nC;
        H[t] = h->H + tt * (size_t)(n * n);
        zz[t] = dz + tt * (size_t)d->K;
        ws[t] = wsum ? wsum + tt * (size_t)n : hc_ones;
        sm[t] = sum ? sum + tt * C : NULL;
    }
    const int C0 = C / HC_VL * HC_VL;
    for (int t = 0; t < TT; t++) { /* the stream terms, token by token */
        hc_vec hv[16]; /* up to 4 streams, the n^2 coefficients in registers */
        if (n <= 4)
#pragma GCC unroll 16
            for (int e = 0; e < n * n; e++) hv[e] = hc_splat(H[t][e]);
        for (int c = 0; c < C0; c += HC_VL) {
            hc_vec dv[HC_MAX_N];
#pragma GCC unroll 8
            for (int i = 0; i < n; i++) dv[i] = hc_load(dy[t] + hc_xv(blk, n, C, i, c));
            const hc_vec uv = hc_load(uu[t] + c);
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) {
                hc_vec v = hc_opaque(pj[t * n + j] * uv) - cj[t * n + j] * hc_load(X[t] + hc_xv(blk, n, C, j, c));
#pragma GCC unroll 8
                for (int i = 0; i < n; i++) v += (n <= 4 ? hv[i * n + j] : H[t][i * n + j] - (hc_vec){0}) * dv[i];
                hc_store(dx[t] + hc_xv(blk, n, C, j, c), v);
            }
        }
    }
    const int nj = flat ? n : 1;
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) { /* then the projection's terms, tile by tile */
        const real *wb = Wb + (size_t)(c / HC_VL) * Kr * nj * HC_VL; /* this block's W' */
        hc_vec acc[4][HC_MAX_N];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) acc[t][j] = hc_load(dx[t] + hc_xv(blk, n, C, j, c));
#if HC_AMX
        if (pz) { /* by AMX tiles, already: the TT tokens' rows of pz (hc_dx_products_amx) */
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                for (int j = 0; j < n; j++) acc[t][j] += hc_load(pz + (size_t)t * pzr + hc_xv(blk, n, C, j, c));
        } else
#endif
#if HC_BF16
        if (zp) { /* bf16 operands: W' in pairs of rows (hc_scaled_weight_pairs_bf16), dz's
                     pairs of the TT tokens (their rows of Kp words from zp) */
            const uint32_t *wp = (const uint32_t *)Wb + (size_t)(c / HC_VL) * Kp * nj * HC_VL;
            for (int q = 0; q < Kp; q++) {
                if (flat) {
                    hc_bh w[HC_MAX_N];
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) memcpy(&w[j], wp + ((size_t)q * n + j) * HC_VL, sizeof w[j]);
#pragma GCC unroll 4
                    for (int t = 0; t < TT; t++) {
                        const hc_bh b = (hc_bh)_mm512_set1_epi32((int)zp[(size_t)t * Kp + q]);
#pragma GCC unroll 8
                        for (int j = 0; j < n; j++) acc[t][j] = (hc_vec)_mm512_dpbf16_ps((__m512)acc[t][j], b, w[j]);
                    }
                } else {
                    hc_bh w;
                    memcpy(&w, wp + (size_t)q * HC_VL, sizeof w);
#pragma GCC unroll 4
                    for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                        for (int j = 0; j < n; j++) {
                            const hc_bh b = (hc_bh)_mm512_set1_epi32((int)zp[((size_t)t * n + j) * Kp + q]);
                            acc[t][j] = (hc_vec)_mm512_dpbf16_ps((__m512)acc[t][j], b, w);
                        }
                }
            }
        } else
#endif
        if (flat) { /* one norm row: stream j's columns of W' row k, dz_k of the token */
            for (int k = 0; k < Kr; k++) {
                hc_vec w[HC_MAX_N];
#pragma GCC unroll 8
                for (int j = 0; j < n; j++) w[j] = hc_opaque(hc_load(wb + (size_t)(k * n + j) * HC_VL));
#pragma GCC unroll 4
                for (int t = 0; t < TT; t++) {
                    const hc_vec b = hc_splat(zz[t][k]);
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) acc[t][j] += b * w[j];
                }
            }
        } else { /* a norm row per stream: W' row k's columns c for every stream, dz of row j */
            for (int k = 0; k < Kr; k++) {
                const hc_vec w = hc_opaque(hc_load(wb + (size_t)k * HC_VL));
#pragma GCC unroll 4
                for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) acc[t][j] += zz[t][j * Kr + k] * w;
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) hc_store(dx[t] + hc_xv(blk, n, C, j, c), acc[t][j]);
        if (sum) /* after the block's du was read: sum may be du itself */
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) {
                hc_vec v = hc_opaque(ws[t][0] * acc[t][0]);
#pragma GCC unroll 8
                for (int j = 1; j < n; j++) v += ws[t][j] * acc[t][j];
                hc_store(sm[t] + c, v);
            }
    }
    for (; c < C; c++)
        for (int t = 0; t < TT; t++) {
            real dvs[HC_MAX_N];
            for (int i = 0; i < n; i++) dvs[i] = dy[t][hc_xt(blk, n, C, i) + (size_t)c];
            for (int j = 0; j < n; j++) {
                real v = hc_fma_s(-cj[t * n + j], X[t][hc_xt(blk, n, C, j) + (size_t)c], pj[t * n + j] * uu[t][c]);
                for (int i = 0; i < n; i++) v = hc_fma_s(H[t][i * n + j], dvs[i], v);
                if (pz) {
                    v += pz[(size_t)t * pzr + hc_xt(blk, n, C, j) + (size_t)c];
                } else {
                    const real *w = Wb + (size_t)(zp ? Kp : Kr) * nj * C0 + (size_t)(flat ? j : 0) * (C - C0) + (c - C0);
                    const int zr = flat ? 0 : j * Kr;
                    for (int k = 0; k < Kr; k++)
                        v = hc_fma_s(hc_proj_operand(zz[t][zr + k], zp != NULL), w[(size_t)k * nj * (C - C0)], v);
                }
                dx[t][hc_xt(blk, n, C, j) + (size_t)c] = v;
            }
            if (sum) {
                real v = ws[t][0] * dx[t][hc_xt(blk, n, C, 0) + (size_t)c];
                for (int j = 1; j < n; j++) v = hc_fma_s(ws[t][j], dx[t][hc_xt(blk, n, C, j) + (size_t)c], v);
                sm[t][c] = v;
            }
        }
}

/* Tokens per tile of hc_tokens_dx: the TT n rows of dY a block of channels holds. */
#if CPU_NREGS >= 32
#define HC_DX_TILE(n) ((n) <= 4 ? 4 : 2) /* n <= 4: 16 accumulators, 4 W' vectors, a broadcast */
#else
#define HC_DX_TILE(n) ((n) <= 4 ? 2 : 1) /* 8 + 4 + 1 of 16 registers (1, 3, 4: slower) */
#endif

/* dX of the g tokens from t0, their rows of X from Xr (hc_tokens_dx_n), in tiles of
 * HC_DX_TILE(n) tokens and single tokens for the rest. cj, pj: n per token, from
 * hc_token_dx_coefs. */
HC_FMA void hc_tokens_dx(const hc_acts *h, const hc_dims *d, size_t t0, int g, const real *Xr, const real *dY,
                                const real *du, real *dX, const real *dz, const real *cj, const real *pj,
                                const real *Wb, const real *wsum, real *sum, const uint32_t *zp, const real *pz) {
    HC_FMA_BODY
    const size_t zrow = (size_t)d->rpt * (size_t)((d->Kr + 1) / 2); /* a token's words in zp */
    const size_t pzr = hc_amx_pz_row(d->nC);
    const int n = d->n;
    int i = 0;
    switch (n) {
#define HC_DX_RUN(k, b)                                                                                         \
        for (; i + HC_DX_TILE(k) <= g; i += HC_DX_TILE(k))                                                      \
            hc_tokens_dx_n(k, HC_DX_TILE(k), b, h, d, t0 + (size_t)i, Xr + (size_t)i * d->nC, dY, du, dX, dz,   \
                           cj + i * k, pj + i * k, Wb, wsum, sum, zp ? zp + (size_t)i * zrow : NULL,            \
                           pz ? pz + (size_t)i * pzr : NULL);                                                   \
        for (; i < g; i++)                                                                                      \
            hc_tokens_dx_n(k, 1, b, h, d, t0 + (size_t)i, Xr + (size_t)i * d->nC, dY, du, dX, dz, cj + i * k,   \
                           pj + i * k, Wb, wsum, sum, zp ? zp + (size_t)i * zrow : NULL, pz ? pz + (size_t)i * pzr : NULL);
#define HC_DX_CASE(k)                                                                                           \
    case k:                                                                                                     \
        if (d->blk) { HC_DX_RUN(k, 1) } else { HC_DX_RUN(k, 0) }                                                \
        break;
        HC_DX_CASE(1) HC_DX_CASE(2) HC_DX_CASE(3) HC_DX_CASE(4)
        HC_DX_CASE(5) HC_DX_CASE(6) HC_DX_CASE(7) HC_DX_CASE(8)
#undef HC_DX_CASE
#undef HC_DX_RUN
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

/* Ask for the len reals at p (write: for writing) ahead of their use. */
static inline void hc_prefetch(const real *p, size_t len, int write) {
    const char *b = (const char *)p, *e = (const char *)(p + len);
    if (write)
        for (; b < e; b += 64) __builtin_prefetch(b, 1);
    else
        for (; b < e; b += 64) __builtin_prefetch(b, 0);
}

/* W' = W diag(1 + g) for the dX pass, into Wb in the layout of its kind. */
void hc_dx_weights(hc_dx_kind kind, real *Wb, const hc_params *p, const hc_dims *d) {
    switch (kind) {
#if HC_AMX
    case HC_DX_TILES: hc_scaled_weight_dx_amx(Wb, p, d); return;
    case HC_DX_ROUNDED:
        hc_scaled_weight_blocks(Wb, p, d);
        hc_bf16_round_n(Wb, d->KD);
        return;
#endif
#if HC_BF16
    case HC_DX_PAIRS: hc_scaled_weight_pairs_bf16(Wb, p, d); return;
#endif
    default: hc_scaled_weight_blocks(Wb, p, d);
    }
}

/* Tokens [t0, t1) of the frame's backward (their rows of X from Xr), hc_lanes() at a
 * time: the dots, the method's backward (dz, dtheta into my_dtheta), each token's
 * dz *= r and norm coefficients, then the group's dX pass (hc_tokens_dx, with
 * sum = wsum . dX when sum is given). While a token's dots run, the next token's rows
 * and method cache are prefetched: the hardware's streams restart at every 4 KB page,
 * a group reads its tokens' caches as 16 interleaved streams, and one token ahead
 * measured faster than a whole group ahead (docs/performance.md, log item 28); the dX
 * pass finds them in L2. Its rows of X and dY only in rows: in channel blocks each is
 * one run of memory, which the hardware follows, and the hints measured slower (item 40).
 * With Xb (bf16 streams), Xr is the staging rows, into which this widens the rows from
 * Xb a token ahead instead, in the same place. With zc, also zper more reals of the zeroing
 * zc walks, before each token's dots: its stores drain while the token's work runs.
 * zp: the bf16 scratch of a group's dz (hc_dz_pairs_bf16, or with pz the A tiles of
 * hc_dx_products_amx, whose products go to pz); dz_bf16: instead, each group's dz rounded
 * to bf16 in place for the fp32 loop (W' in Wb rounded alike). */
void hc_tokens_backward(const hc_spec *spec, const hc_params *p, const hc_acts *h, const hc_dims *d, size_t t0,
                               size_t t1, real *Xr, const uint16_t *Xb, const real *dY, const real *du,
                               real *dX, real *dz, const real *Wb, const real *wsum, real *sum, real *my_dtheta,
                               hc_zero_cursor *zc, size_t zper, uint32_t *zp, real *pz, int dz_bf16) {
    const int n = d->n, K = d->K, cs = spec->cache, lanes = hc_lanes(spec);
    real dpre[HC_LANES * HC_MAX_N], dpost[HC_LANES * HC_MAX_N], dH[HC_LANES * HC_MM];
    real cj[HC_LANES * HC_MAX_N], pj[HC_LANES * HC_MAX_N];
#if HC_AMX
    if (pz) hc_amx_begin(); /* for every group's hc_dx_products_amx */
#endif
    if (Xb && t1 > t0) hc_bf16_widen(Xr, Xb, d->nC);
    for (size_t g0 = t0; g0 < t1; g0 += (size_t)lanes) {
        const int g = t1 - g0 < (size_t)lanes ? (int)(t1 - g0) : lanes;
        for (int i = 0; i < g; i++) {
            const size_t t = g0 + (size_t)i + 1; /* the next token's rows, while this one's dots run */
            if (t < t1) {
                if (Xb) hc_bf16_widen(Xr + (t - t0) * d->nC, Xb + (t - t0) * d->nC, d->nC);
                else if (!d->blk) { /* in channel blocks the hardware's prefetchers follow them */
                    hc_prefetch(Xr + (t - t0) * d->nC, d->nC, 0);
                    hc_prefetch(dY + t * d->nC, d->nC, 1);
                }
                hc_prefetch(h->f + t * d->C, d->C, 0);
                if (du) hc_prefetch(du + t * d->C, d->C, 0);
                if (cs) hc_prefetch(h->cache + t * cs, (size_t)cs, 0);
            }
            if (zc) hc_zero_next(zc, zper);
            hc_token_grads(h, d, g0 + i, Xr + (g0 + i - t0) * d->nC, dY, du, dH + i * n * n, dpost + i * n,
                           dpre + i * n);
        }
        hc_backward_tokens(spec, p->theta, h->z + g0 * K, h->cache + g0 * cs, g, dpre, dpost, dH, dz + g0 * K,
                           my_dtheta);
        for (int i = 0; i < g; i++) hc_token_dx_coefs(h, d, g0 + i, du != NULL, dz, cj + i * n, pj + i * n);
#if HC_AMX
        if (pz) hc_dx_products_amx(dz + g0 * K, g, d->Kr, d->nC, Wb, zp, pz);
        else
#endif
#if HC_BF16
        if (zp) hc_dz_pairs_bf16(d, dz + g0 * K, g, zp);
        else if (dz_bf16) hc_bf16_round_n(dz + g0 * K, (size_t)g * K); /* dW rounds them again: the same */
#else
        (void)dz_bf16;
#endif
        hc_tokens_dx(h, d, g0, g, Xr + (g0 - t0) * d->nC, dY, du, dX, dz, cj, pj, Wb, wsum, sum, pz ? NULL : zp, pz);
    }
#if HC_AMX
    if (pz) _tile_release();
#endif
}
