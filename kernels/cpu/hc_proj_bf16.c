/* hc_proj_bf16.c: the frame's coefficient projection with bf16 operands
 * (residual.proj_precision: bf16; hc_frame.h lists what it exports): its three products
 * z = X W'^T, M += A^T X and the dX pass's dz W' by vdpbf16ps or by AMX tiles, the W'
 * layouts they take and the dz pairs of the dX pass, and the scratch they need. Built where
 * the compiler targets AVX512_BF16 (HC_BF16) and AMX-BF16 (HC_AMX); the scratch sizes in
 * every build. hc_frame.c holds the fp32 products and the passes that call these. */
#include <string.h>
#include "kernels/cpu/hc_frame.h"

/* ---- the projection's products with bf16 operands (residual.proj_precision: bf16) ----
 * vdpbf16ps multiplies 32 pairs of bf16 values and adds each pair's two products into
 * one of 16 fp32 lanes: twice the multiply-adds of an fp32 FMA per instruction, at the
 * same rate on the AVX512_BF16 cores measured (docs/performance.md, log item 36). The
 * three products of the coefficient projection round their operands to bf16 (to nearest
 * even, as vcvtne2ps2bf16) and sum in fp32 in a fixed order: bit-identical for a given
 * thread count, and the products of two bf16 values are exact in fp32, so each sum is
 * within the float rounding of the sum of the rounded operands' products (tests/test_frame). */

#define HC_MT_ROWS_BF 32 /* hc_at_x_bf16: rows per block (16 pairs), their rounded X 32 KB at D = 512 */
#define HC_MT_K_BF 12    /* hc_at_x_bf16: outputs per tile at most, the blocks of a row even */

/* Reals of a row of D values in bf16, padded to whole vectors of 32 (in reals: half). */
static inline size_t hc_bf16_row(size_t D) { return (D + 31) / 32 * 16; }

/* With AMX (HC_AMX, below): outputs in blocks of 16 (a tile's columns); hc_at_x_amx takes
 * rows in blocks of HC_AMX_ROWS (64 pairs: their rounded X 128 KB at D = 512, L2). The
 * scratch sizes below serve either kind of product. */
#define HC_AMX_ROWS 128
static inline int hc_amx_kt(int Kr) { return (Kr + 15) / 16; }

/* Scratch of hc_at_x_bf16, in reals: HC_MT_ROWS_BF / 2 pairs of rows of X (D words each)
 * and of A (Kr words each); with AMX, HC_AMX_ROWS / 2 pairs of X and A's pairs transposed
 * (16 hc_amx_kt(Kr) rows of HC_AMX_ROWS / 2 words). */
size_t hc_at_x_bf16_scratch(int Kr, size_t D) {
    const size_t vnni = (size_t)HC_MT_ROWS_BF / 2 * (D + (size_t)Kr);
    return HC_AMX ? hc_max_size(vnni, (size_t)HC_AMX_ROWS / 2 * (D + (size_t)hc_amx_kt(Kr) * 16)) : vnni;
}

/* Scratch of hc_x_wt_bf16, in reals: HC_XW_R rows of X in bf16 (with AMX, 16 rows). */
size_t hc_x_wt_bf16_scratch(size_t D) { return (size_t)(HC_AMX ? 16 : HC_XW_R) * hc_bf16_row(D); }

/* The forward's W' in bf16, in reals: Kr rows of hc_bf16_row(D) (with AMX, as B tiles:
 * hc_bf16_row(D) rows of 16 hc_amx_kt(Kr) words, hc_scaled_weight_amx). */
size_t hc_w_bf16_scratch(int Kr, size_t D) {
    return hc_bf16_row(D) * (size_t)(HC_AMX ? hc_amx_kt(Kr) * 16 : Kr);
}

#if HC_BF16
/* The bf16 pair (a, b) in one 32-bit word, a in the low half: vdpbf16ps's element 2i. */
static inline uint32_t hc_bf16_pair(float a, float b) { return hc_bf16_bits(a) | hc_bf16_bits(b) << 16; }

/* x[0..n) rounded to bf16 in place (hc_bf16_round's values, 16 at a time). */
inline void hc_bf16_round_n(real *x, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 w = (__mmask16)(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1u);
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(w, x + i));
        __m256i hb;
        memcpy(&hb, &h, sizeof hb);
        _mm512_mask_storeu_ps(x + i, w, (__m512)_mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    }
}

/* hc_x_wt with bf16 operands: Z = X W'^T, W' from hc_scaled_weight_bf16. Tiles of
 * HC_XW_R rows by HC_XW_K outputs as in fp32, over rows already in bf16 (xb: rows of
 * hc_bf16_row(D) reals, zeros past D, meeting W''s zero padding). */
static inline __attribute__((always_inline)) void hc_x_wt_bf16_tile(const int rb, const int kb, real *Z,
                                                                  const real *xb, const real *Wf, int Kr,
                                                                  size_t D) {
    const size_t rl = hc_bf16_row(D);
    __m512 acc[HC_XW_R][HC_XW_K];
#pragma GCC unroll 4
    for (int r = 0; r < HC_XW_R; r++)
#pragma GCC unroll 6
        for (int k = 0; k < HC_XW_K; k++) acc[r][k] = _mm512_setzero_ps();
    for (size_t j = 0; j < D; j += 32) {
        hc_bh x[HC_XW_R];
#pragma GCC unroll 4
        for (int r = 0; r < HC_XW_R; r++) memcpy(&x[r], xb + (size_t)(r < rb ? r : 0) * rl + j / 2, sizeof x[r]);
#pragma GCC unroll 6
        for (int k = 0; k < kb; k++) {
            hc_bh wv;
            memcpy(&wv, Wf + (size_t)k * rl + j / 2, sizeof wv);
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) acc[r][k] = _mm512_dpbf16_ps(acc[r][k], x[r], wv);
        }
    }
    real s[HC_XW_R * HC_XW_K];
    hc_vsum_many(HC_XW_R * HC_XW_K, (const hc_vec *)&acc[0][0], s);
    for (int r = 0; r < rb; r++)
        for (int k = 0; k < kb; k++) Z[(size_t)r * Kr + k] = s[r * HC_XW_K + k];
}

/* In a function of the vdpbf16ps products: with amx, call the AMX version instead and
 * return (a build without AMX compiles no call). */
#if HC_AMX
#define HC_AMX_OR(amx, call) \
    if (amx) {               \
        call;                \
        return;              \
    }
#else
#define HC_AMX_OR(amx, call) (void)(amx)
#endif

#if HC_AMX
static void hc_x_wt_amx(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc);
static void hc_at_x_amx(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc);
#endif

/* Each group of HC_XW_R rows of X is rounded to bf16 once, into sc (hc_x_wt_bf16_scratch
 * reals), then every block of outputs takes it: rounding a row per tile cost a conversion
 * per block of outputs (Kr / HC_XW_K of them) beside the tile's products. amx: by AMX
 * tiles instead (hc_x_wt_amx; Wf then from hc_scaled_weight_bf16 with amx). */
void hc_x_wt_bf16(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc, int amx) {
    HC_AMX_OR(amx, hc_x_wt_amx(Z, X, Wf, rows, Kr, D, sc));
    const size_t rl = hc_bf16_row(D);
    for (size_t r0 = 0; r0 < rows; r0 += HC_XW_R) {
        const int rb = rows - r0 < HC_XW_R ? (int)(rows - r0) : HC_XW_R;
        for (int r = 0; r < rb; r++)
            for (size_t j = 0; j < D; j += 32) {
                const hc_bh v = hc_bf16_load32(X + (r0 + (size_t)r) * D + j, D - j < 32 ? (int)(D - j) : 32);
                memcpy(sc + (size_t)r * rl + j / 2, &v, sizeof v);
            }
        for (int k0 = 0; k0 < Kr; k0 += HC_XW_K) {
            const int kb = Kr - k0 < HC_XW_K ? Kr - k0 : HC_XW_K;
            const real *Wk = Wf + (size_t)k0 * rl;
            real *Zt = Z + r0 * (size_t)Kr + k0;
            if (rb < HC_XW_R) {
                hc_x_wt_bf16_tile(rb, kb, Zt, sc, Wk, Kr, D);
                continue;
            }
            switch (kb) {
#define HC_X_WT_BF_CASE(c) \
            case c: hc_x_wt_bf16_tile(HC_XW_R, c, Zt, sc, Wk, Kr, D); break;
            HC_X_WT_BF_CASE(1) HC_X_WT_BF_CASE(2) HC_X_WT_BF_CASE(3)
            HC_X_WT_BF_CASE(4) HC_X_WT_BF_CASE(5) HC_X_WT_BF_CASE(6)
#undef HC_X_WT_BF_CASE
            }
        }
    }
}

/* A tile of hc_at_x_bf16: kb outputs (rows of M from Mk) by nv vectors of 16 channels
 * from j, over the np pairs of rows in xp (X's, D words each) and ak (A's, Kr each). */
static inline __attribute__((always_inline)) void hc_at_x_bf16_tile(const int kb, const int nv, real *Mk,
                                                                   const uint32_t *ak, const uint32_t *xp,
                                                                   size_t np, int Kr, size_t D, size_t j) {
    __m512 acc[HC_MT_K_BF][2];
#pragma GCC unroll 12
    for (int k = 0; k < HC_MT_K_BF; k++) acc[k][0] = acc[k][1] = _mm512_setzero_ps(); /* kb constant: no trace */
#pragma GCC unroll 12
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) acc[k][v] = _mm512_loadu_ps(Mk + (size_t)k * D + j + (size_t)v * 16);
    for (size_t p = 0; p < np; p++) {
        hc_bh x[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) memcpy(&x[v], xp + p * D + j + (size_t)v * 16, sizeof x[v]);
        const uint32_t *a = ak + p * (size_t)Kr;
#pragma GCC unroll 12
        for (int k = 0; k < kb; k++) {
            const hc_bh av = (hc_bh)_mm512_set1_epi32((int)a[k]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++) acc[k][v] = _mm512_dpbf16_ps(acc[k][v], av, x[v]);
        }
    }
#pragma GCC unroll 12
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(Mk + (size_t)k * D + j + (size_t)v * 16, acc[k][v]);
}

/* The permute of hc_bf16_interleave: words 0..15 of vcvtne2ps2bf16(hi, lo) take lo[i]
 * and hi[i] side by side. */
static inline __m512i hc_bf16_ilv(void) {
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
                            19, 3, 18, 2, 17, 1, 16, 0);
}

/* Rows lo and hi (16 values each) rounded to bf16 and interleaved value by value: word i
 * the pair (lo[i], hi[i]), lo in the low half (vdpbf16ps's element 2i). ilv: the permute. */
static inline __attribute__((always_inline)) __m512i hc_bf16_interleave(__m512i ilv, __m512 lo, __m512 hi) {
    return _mm512_permutexvar_epi16(ilv, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* The columns j >= j0 of M += A^T X over rows [r0, r0 + nr) (those past the last vector of
 * 16) with bf16 operands: the rounded products in fp32, row by row. */
static void hc_at_x_bf16_cols(real *M, const real *A, const real *X, size_t r0, size_t nr, int Kr, size_t D,
                              size_t j0) {
    for (size_t j = j0; j < D; j++)
        for (int k = 0; k < Kr; k++) {
            real s = 0;
            for (size_t t = r0; t < r0 + nr; t++) s += hc_bf16_round(A[t * (size_t)Kr + k]) * hc_bf16_round(X[t * D + j]);
            M[(size_t)k * D + j] += s;
        }
}

/* hc_at_x with bf16 operands: M += A^T X, the sum over rows taken two rows at a time (the
 * pair of a vdpbf16ps lane: rows 2p and 2p + 1, a zero row after an odd last one). Each
 * block of HC_MT_ROWS_BF rows is first rounded into sc (hc_at_x_bf16_scratch reals): X's
 * pairs interleaved channel by channel, [p][c][2], and A's, [p][k][2]; then tiles of up
 * to HC_MT_K_BF outputs (a row's outputs in even blocks) by 32 channels take the pairs
 * in order. Columns past the last vector of 16: the rounded products in fp32, row by
 * row. amx: by AMX tiles instead (hc_at_x_amx). */
void hc_at_x_bf16(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc, int amx) {
    HC_AMX_OR(amx, hc_at_x_amx(M, A, X, rows, Kr, D, sc));
    const size_t D16 = D / 16 * 16;
    uint32_t *xp = (uint32_t *)sc, *ap = xp + (size_t)HC_MT_ROWS_BF / 2 * D;
    const __m512i ilv = hc_bf16_ilv();
    for (size_t r0 = 0; r0 < rows; r0 += HC_MT_ROWS_BF) {
        const size_t nr = rows - r0 < HC_MT_ROWS_BF ? rows - r0 : HC_MT_ROWS_BF, np = (nr + 1) / 2;
        for (size_t p = 0; p < np; p++) {
            const real *x0 = X + (r0 + 2 * p) * D, *a0 = A + (r0 + 2 * p) * (size_t)Kr;
            const int two = 2 * p + 1 < nr;
            const real *x1 = two ? x0 + D : NULL, *a1 = two ? a0 + Kr : NULL;
            for (int k0 = 0; k0 < Kr; k0 += 16) { /* A's pairs as X's below, 16 words at a time */
                const __mmask16 w = (__mmask16)(Kr - k0 >= 16 ? 0xffffu : (1u << (Kr - k0)) - 1u);
                const __m512 lo = _mm512_maskz_loadu_ps(w, a0 + k0);
                const __m512 hi = two ? _mm512_maskz_loadu_ps(w, a1 + k0) : _mm512_setzero_ps();
                _mm512_mask_storeu_epi32(ap + p * (size_t)Kr + k0, w, hc_bf16_interleave(ilv, lo, hi));
            }
            for (size_t c = 0; c < D16; c += 16) {
                const __m512 lo = _mm512_loadu_ps(x0 + c), hi = two ? _mm512_loadu_ps(x1 + c) : _mm512_setzero_ps();
                _mm512_storeu_si512(xp + p * D + c, hc_bf16_interleave(ilv, lo, hi));
            }
        }
        const int nblk = (Kr + HC_MT_K_BF - 1) / HC_MT_K_BF, kbs = (Kr + nblk - 1) / nblk; /* even blocks */
        for (int k0 = 0; k0 < Kr; k0 += kbs) {
            const int kb = Kr - k0 < kbs ? Kr - k0 : kbs;
            real *Mk = M + (size_t)k0 * D;
            const uint32_t *ak = ap + k0;
            size_t j = 0;
            switch (kb) {
#define HC_AT_X_BF_CASE(c)                                                                 \
            case c:                                                                        \
                for (; j + 32 <= D16; j += 32) hc_at_x_bf16_tile(c, 2, Mk, ak, xp, np, Kr, D, j); \
                if (j < D16) hc_at_x_bf16_tile(c, 1, Mk, ak, xp, np, Kr, D, j);           \
                break;
                HC_AT_X_BF_CASE(1) HC_AT_X_BF_CASE(2) HC_AT_X_BF_CASE(3) HC_AT_X_BF_CASE(4)
                HC_AT_X_BF_CASE(5) HC_AT_X_BF_CASE(6) HC_AT_X_BF_CASE(7) HC_AT_X_BF_CASE(8)
                HC_AT_X_BF_CASE(9) HC_AT_X_BF_CASE(10) HC_AT_X_BF_CASE(11) HC_AT_X_BF_CASE(12)
#undef HC_AT_X_BF_CASE
            }
        }
        hc_at_x_bf16_cols(M, A, X, r0, nr, Kr, D, D16);
    }
}
#endif

#if HC_AMX
/* ---- the same products by AMX tiles (m->proj_amx) ----------------------------------
 * Eight tile registers of 16 rows by 64 bytes (palette 1); TDPBF16PS adds into a 16 x 16
 * fp32 tile C the products of a 16 x 32 bf16 tile A (row-major) and a 32 x 16 bf16 tile B
 * kept as 16 rows of 16 pairs (B's rows 2i and 2i + 1 of a column side by side):
 * C[r][c] += sum over i of A[r][2i] B[i][c].lo + A[r][2i + 1] B[i][c].hi. Tiles 0..5 hold
 * sums (up to six blocks of 16 outputs: Kr <= 96), 6 the A operand, 7 the B (the dX
 * pass's products, hc_dx_products_amx: 0 the sums, 1..6 the A operands, 7 the B). A tile's
 * number is part of the instruction, so the loops over output blocks switch on it.
 * hc_x_wt_amx and hc_at_x_amx set the configuration on entry and release the tiles on
 * exit (the state then costs the kernel nothing at a context switch); the dX pass's
 * products leave both to hc_tokens_backward, once per chunk. */
#define HC_AMX_KT_MAX 6

/* The tile configuration (palette 1, tiles 0..7 of 16 rows of 64 bytes) is a constant in
 * read-only memory: GCC 12's ldtilecfg builtin does not tell the compiler that it reads
 * its operand, and a configuration built on the stack lost its stores to dead-store
 * elimination where the function was compiled on its own (tiles 1..7 then read 0 bytes
 * wide, and the first tileloadd raised SIGILL). */
static const struct __attribute__((packed, aligned(64))) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} hc_amx_cfg = {.palette = 1,
                .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

inline void hc_amx_begin(void) { _tile_loadconfig(&hc_amx_cfg); }

/* tileloadd that the compiler knows to read memory: GCC 12's _tile_loadd is an asm with no
 * memory operand, so the stores that fill an operand's buffer just before (the rounded
 * rows of sc, za, the short block's `last`) could be moved past it or, into a local
 * buffer, dropped. The "memory" clobber keeps every store before it in place. */
#define HC_TILE_LOADD(dst, base, stride)                                                       \
    __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm" #dst "|tileloadd\t%%tmm" #dst ", [%0+%1*1]}" \
                     ::"r"((const void *)(base)), "r"((long)(stride))                             \
                     : "memory")

#define HC_AMX_SWITCH(t, STMT)                                                              \
    switch (t) {                                                                            \
    case 0: STMT(0); break;                                                                 \
    case 1: STMT(1); break;                                                                 \
    case 2: STMT(2); break;                                                                 \
    case 3: STMT(3); break;                                                                 \
    case 4: STMT(4); break;                                                                 \
    default: STMT(5); break;                                                                \
    }
/* The same, tile 1 + t: the intrinsics paste the number into the instruction's text */
#define HC_AMX_SWITCH1(t, STMT)                                                             \
    switch (t) {                                                                            \
    case 0: STMT(1); break;                                                                 \
    case 1: STMT(2); break;                                                                 \
    case 2: STMT(3); break;                                                                 \
    case 3: STMT(4); break;                                                                 \
    case 4: STMT(5); break;                                                                 \
    default: STMT(6); break;                                                                \
    }

/* hc_x_wt_bf16 by tiles: Z = X W'^T, Wf from hc_scaled_weight_amx. Each block of 16 rows
 * of X is rounded into sc (16 rows of hc_bf16_row(D) reals, zero rows past the last), the
 * A operand 32 values at a time; the sums leave through a 16 x Kt * 16 buffer. */
static void hc_x_wt_amx(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc) {
    const size_t rl = hc_bf16_row(D);
    const int Kt = hc_amx_kt(Kr), Kw = Kt * 16;
    float out[16 * HC_AMX_KT_MAX * 16];
    hc_amx_begin();
    for (size_t r0 = 0; r0 < rows; r0 += 16) {
        const int rb = rows - r0 < 16 ? (int)(rows - r0) : 16;
        for (int r = 0; r < rb; r++)
            for (size_t j = 0; j < D; j += 32) {
                const hc_bh v = hc_bf16_load32(X + (r0 + (size_t)r) * D + j, D - j < 32 ? (int)(D - j) : 32);
                memcpy(sc + (size_t)r * rl + j / 2, &v, sizeof v);
            }
        if (rb < 16) memset(sc + (size_t)rb * rl, 0, (size_t)(16 - rb) * rl * sizeof(real));
        for (int kt = 0; kt < Kt; kt++) {
#define HC_AMX_ZERO(t) _tile_zero(t)
            HC_AMX_SWITCH(kt, HC_AMX_ZERO)
#undef HC_AMX_ZERO
        }
        for (size_t q = 0; q < rl; q += 16) {
            HC_TILE_LOADD(6, sc + q, (long)(rl * sizeof(real)));
            for (int kt = 0; kt < Kt; kt++) {
                HC_TILE_LOADD(7, Wf + q * (size_t)Kw + (size_t)kt * 16, Kw * (long)sizeof(real));
#define HC_AMX_DP(t) _tile_dpbf16ps(t, 6, 7)
                HC_AMX_SWITCH(kt, HC_AMX_DP)
#undef HC_AMX_DP
            }
        }
        for (int kt = 0; kt < Kt; kt++) {
#define HC_AMX_OUT(t) _tile_stored(t, out + kt * 16, Kw * (long)sizeof(float))
            HC_AMX_SWITCH(kt, HC_AMX_OUT)
#undef HC_AMX_OUT
        }
        for (int r = 0; r < rb; r++) memcpy(Z + (r0 + (size_t)r) * Kr, out + r * Kw, (size_t)Kr * sizeof(real));
    }
    _tile_release();
}

/* hc_at_x_bf16 by tiles: M += A^T X over rows in pairs (a zero row after an odd last one).
 * Per block of HC_AMX_ROWS rows, in sc: X's pairs interleaved channel by channel, [p][c]
 * (the B operand: 16 pairs by 16 channels), and A's pairs transposed, [k][p] (the A
 * operand: 16 outputs by 16 pairs), zero past Kr and past the block's last pair; each
 * 16 x 16 block of M is loaded into a tile once per block of rows. A last block of outputs
 * short of 16 goes through a buffer (M has no rows past Kr). Columns past the last vector
 * of 16: the rounded products in fp32, row by row, as hc_at_x_bf16. */
static void hc_at_x_amx(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc) {
    const size_t D16 = D / 16 * 16, P = HC_AMX_ROWS / 2;
    const int Kt = hc_amx_kt(Kr), kl = Kr - (Kt - 1) * 16; /* outputs in the last block */
    uint32_t *xp = (uint32_t *)sc, *at = xp + P * D;
    const __m512i ilv = hc_bf16_ilv();
    float last[16 * 16];
    hc_amx_begin();
    for (size_t r0 = 0; r0 < rows; r0 += HC_AMX_ROWS) {
        const size_t nr = rows - r0 < HC_AMX_ROWS ? rows - r0 : HC_AMX_ROWS, np = (nr + 1) / 2;
        const size_t npt = (np + 15) / 16 * 16; /* pairs in whole tiles */
        memset(at, 0, (size_t)Kt * 16 * P * sizeof *at);
        for (size_t p = 0; p < np; p++) {
            const real *x0 = X + (r0 + 2 * p) * D, *a0 = A + (r0 + 2 * p) * (size_t)Kr;
            const int two = 2 * p + 1 < nr;
            const real *x1 = two ? x0 + D : NULL, *a1 = two ? a0 + Kr : NULL;
            for (int k = 0; k < Kr; k++) at[(size_t)k * P + p] = hc_bf16_pair(a0[k], two ? a1[k] : 0.0f);
            for (size_t c = 0; c < D16; c += 16) {
                const __m512 lo = _mm512_loadu_ps(x0 + c), hi = two ? _mm512_loadu_ps(x1 + c) : _mm512_setzero_ps();
                _mm512_storeu_si512(xp + p * D + c, hc_bf16_interleave(ilv, lo, hi));
            }
        }
        if (npt > np) memset(xp + np * D, 0, (npt - np) * D * sizeof *xp);
        for (size_t c = 0; c < D16; c += 16) {
            for (int kt = 0; kt < Kt; kt++) {
                const real *mk = M + (size_t)kt * 16 * D + c;
                if (kt == Kt - 1 && kl < 16) {
                    for (int r = 0; r < 16; r++)
                        if (r < kl) memcpy(last + r * 16, mk + (size_t)r * D, 16 * sizeof(float));
                        else memset(last + r * 16, 0, 16 * sizeof(float));
                    mk = last;
                }
                const long stride = mk == last ? 64 : (long)(D * sizeof(real));
#define HC_AMX_LOADC(t) HC_TILE_LOADD(t, mk, stride)
                HC_AMX_SWITCH(kt, HC_AMX_LOADC)
#undef HC_AMX_LOADC
            }
            for (size_t p = 0; p < npt; p += 16) {
                HC_TILE_LOADD(7, xp + p * D + c, (long)(D * sizeof(uint32_t)));
                for (int kt = 0; kt < Kt; kt++) {
                    HC_TILE_LOADD(6, at + (size_t)kt * 16 * P + p, (long)(P * sizeof(uint32_t)));
#define HC_AMX_DP(t) _tile_dpbf16ps(t, 6, 7)
                    HC_AMX_SWITCH(kt, HC_AMX_DP)
#undef HC_AMX_DP
                }
            }
            for (int kt = 0; kt < Kt; kt++) {
                const int part = kt == Kt - 1 && kl < 16;
                real *mk = part ? last : M + (size_t)kt * 16 * D + c;
                const long stride = part ? 64 : (long)(D * sizeof(real));
#define HC_AMX_STOREC(t) _tile_stored(t, mk, stride)
                HC_AMX_SWITCH(kt, HC_AMX_STOREC)
#undef HC_AMX_STOREC
                if (part)
                    for (int r = 0; r < kl; r++) memcpy(M + (size_t)(kt * 16 + r) * D + c, last + r * 16, 16 * sizeof(float));
            }
        }
        hc_at_x_bf16_cols(M, A, X, r0, nr, Kr, D, D16);
    }
    _tile_release();
}

/* The dX pass's projection terms of a group of g <= 16 tokens by tiles (one norm row per
 * token): pz[t][pos] = sum over k of dz[t][k] W'[k][pos], from dz (K = Kr per token)
 * rounded into za (16 rows of 16 Kq words: the A tiles, rows past g and values past Kr
 * zero) and Wp (hc_scaled_weight_dx_amx, the B tiles); rows of hc_amx_pz_row(nC) reals.
 * The caller has configured the tiles (hc_amx_begin, ~85 ns: once for many groups). */
void hc_dx_products_amx(const real *dz, int g, int Kr, size_t nC, const real *Wp, uint32_t *za, real *pz) {
    const int Kq = hc_amx_kq(Kr);
    const size_t kw = 16 * (size_t)Kq, nb = hc_amx_pz_row(nC) / 16;
    for (int t = 0; t < 16; t++)
        for (int q = 0; q < Kq; q++) {
            const int w = t < g ? (Kr - 32 * q < 32 ? Kr - 32 * q : 32) : 0;
            const hc_bh v = w ? hc_bf16_load32(dz + (size_t)t * Kr + 32 * q, w) : (hc_bh)_mm512_setzero_ps();
            memcpy(za + (size_t)t * kw + 16 * (size_t)q, &v, sizeof v);
        }
    for (int q = 0; q < Kq; q++) {
#define HC_AMX_LOADA(t) HC_TILE_LOADD(t, za + 16 * q, (long)(kw * sizeof(uint32_t)))
        HC_AMX_SWITCH1(q, HC_AMX_LOADA)
#undef HC_AMX_LOADA
    }
    const uint32_t *wp = (const uint32_t *)Wp;
    for (size_t b = 0; b < nb; b++) {
        _tile_zero(0);
        for (int q = 0; q < Kq; q++) {
            HC_TILE_LOADD(7, wp + (b * kw + 16 * (size_t)q) * 16, 64);
#define HC_AMX_DPA(t) _tile_dpbf16ps(0, t, 7)
            HC_AMX_SWITCH1(q, HC_AMX_DPA)
#undef HC_AMX_DPA
        }
        _tile_stored(0, pz + 16 * b, (long)(nb * 16 * sizeof(real)));
    }
}
#undef HC_AMX_SWITCH
#undef HC_AMX_SWITCH1
#endif

#if HC_BF16
/* The r dz of `count` tokens (K each, from dz) in bf16 pairs for the dX pass: per token
 * and norm row, Kp = ceil(Kr / 2) words, word q the pair (2q, 2q + 1) (0 past Kr). 32
 * values in order as bf16 are 16 such words: one conversion per 32 (hc_bf16_load32),
 * stored up to the row's last word. */
void hc_dz_pairs_bf16(const hc_dims *d, const real *dz, int count, uint32_t *zp) {
    const int Kr = d->Kr, Kp = (Kr + 1) / 2;
    for (int i = 0; i < count * d->rpt; i++) {
        const real *z = dz + (size_t)i * Kr;
        uint32_t *o = zp + (size_t)i * Kp;
        for (int k0 = 0; k0 < Kr; k0 += 32) {
            const int w = Kr - k0 < 32 ? Kr - k0 : 32;
            const __mmask16 words = (__mmask16)((1u << ((w + 1) / 2)) - 1u);
            _mm512_mask_storeu_epi32(o + k0 / 2, words, (__m512i)hc_bf16_load32(z + k0, w));
        }
    }
}

#endif

#if HC_BF16
/* W' for the backward's dX pass with bf16 operands (hc_scaled_weight_blocks' values): the
 * rows in pairs, rows 2q and 2q + 1 (a zero row past Kr) side by side channel by channel
 * in 32-bit words, row 2q in the low half (vdpbf16ps's element 2i), by blocks of HC_VL
 * channels, [b][q][j][HC_VL]; then the leftover channels as hc_scaled_weight_blocks
 * keeps them, [k][j][C - C0], each value rounded to bf16. Kp = ceil(Kr / 2) pairs. */
void hc_scaled_weight_pairs_bf16(real *restrict Wp, const hc_params *p, const hc_dims *d) {
    const int nj = d->rpt == 1 ? d->n : 1, C = d->C, C0 = C / HC_VL * HC_VL, Kr = d->Kr, Kp = (Kr + 1) / 2;
    uint32_t *o32 = (uint32_t *)Wp;
    for (int q = 0; q < Kp; q++)
        for (int j = 0; j < nj; j++) {
            const real *g = p->g + (size_t)j * C, *w0 = p->W + (size_t)(2 * q) * d->D + (size_t)j * C;
            const real *w1 = 2 * q + 1 < Kr ? w0 + d->D : NULL;
            _Static_assert(HC_VL == 16, "a block of the dX pass is one vector of 16 pairs");
            for (int c0 = 0; c0 < C0; c0 += HC_VL) { /* a conversion a block */
                const __m512 s1 = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(g + c0));
                const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(w0 + c0), s1);
                const __m512 hi = w1 ? _mm512_mul_ps(_mm512_loadu_ps(w1 + c0), s1) : _mm512_setzero_ps();
                _mm512_storeu_si512(o32 + (((size_t)(c0 / HC_VL) * Kp + q) * nj + j) * HC_VL,
                                    hc_bf16_interleave(hc_bf16_ilv(), lo, hi));
            }
        }
    real *t = Wp + (size_t)Kp * nj * C0;
    for (int k = 0; k < Kr; k++)
        for (int j = 0; j < nj; j++) {
            const real *w = p->W + (size_t)k * d->D + (size_t)j * C, *g = p->g + (size_t)j * C;
            for (int c = C0; c < C; c++)
                t[((size_t)k * nj + j) * (C - C0) + (c - C0)] = hc_bf16_round(w[c] * ((real)1 + g[c]));
        }
}

#if HC_AMX
static void hc_scaled_weight_amx(real *restrict Wf, const hc_params *p, const hc_dims *d);
#endif

/* W' = W diag(1 + g) (hc_scaled_weight's values) in bf16, row by row, each row padded with
 * zeros to hc_bf16_row(D); amx: as hc_x_wt_amx's B tiles (hc_scaled_weight_amx). */
void hc_scaled_weight_bf16(real *restrict Wf, const hc_params *p, const hc_dims *d, int amx) {
    HC_AMX_OR(amx, hc_scaled_weight_amx(Wf, p, d));
    const size_t rl = hc_bf16_row(d->D);
    real buf[32];
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        for (size_t j0 = 0; j0 < d->D; j0 += 32) {
            const int wn = d->D - j0 < 32 ? (int)(d->D - j0) : 32;
            for (int j = 0; j < wn; j++) { /* the columns in the streams' order */
                const size_t c = d->blk ? d->cols[j0 + (size_t)j] : j0 + (size_t)j;
                buf[j] = w[c] * ((real)1 + p->g[c]);
            }
            const hc_bh v = hc_bf16_load32(buf, wn);
            memcpy(Wf + (size_t)k * rl + j0 / 2, &v, sizeof v);
        }
    }
}

#if HC_AMX
/* W' = W diag(1 + g) (hc_scaled_weight's values) in bf16 as B tiles: word [q][k] the pair
 * (W'[k][2q], W'[k][2q + 1]), Kt * 16 words a row, q over hc_bf16_row(D) rows; zero past
 * Kr and past D. hc_w_bf16_scratch(Kr, D) reals. */
static void hc_scaled_weight_amx(real *restrict Wf, const hc_params *p, const hc_dims *d) {
    const size_t rl = hc_bf16_row(d->D), Kw = (size_t)hc_amx_kt(d->Kr) * 16;
    uint32_t *o = (uint32_t *)Wf;
    real buf[32];
    memset(o, 0, rl * Kw * sizeof *o);
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        for (size_t j0 = 0; j0 < d->D; j0 += 32) { /* 32 values, 16 pairs, a conversion */
            const int wn = d->D - j0 < 32 ? (int)(d->D - j0) : 32;
            for (int j = 0; j < wn; j++) { /* the columns in the streams' order */
                const size_t c = d->blk ? d->cols[j0 + (size_t)j] : j0 + (size_t)j;
                buf[j] = w[c] * ((real)1 + p->g[c]);
            }
            const hc_bh v = hc_bf16_load32(buf, wn);
            uint32_t pr[16];
            memcpy(pr, &v, sizeof pr);
            for (int q = 0; q < (wn + 1) / 2; q++) o[(j0 / 2 + (size_t)q) * Kw + (size_t)k] = pr[q];
        }
    }
}

/* W' for the dX pass's products by tiles (one norm row per token): B tiles over the
 * positions of a token's values (the streams' order), [b][q][16]: word v of row q of
 * block b the pair (W'[2q][col], W'[2q + 1][col]) at position 16 b + v, rows q over
 * 16 hc_amx_kq(Kr) pairs of outputs; zero past Kr and past nC. */
void hc_scaled_weight_dx_amx(real *restrict Wp, const hc_params *p, const hc_dims *d) {
    const size_t nb = hc_amx_pz_row(d->nC) / 16, nq = 16 * (size_t)hc_amx_kq(d->Kr);
    const __m512i ilv = hc_bf16_ilv();
    uint32_t *o = (uint32_t *)Wp;
    for (size_t b = 0; b < nb; b++)
        for (size_t q = 0; q < nq; q++) {
            real w[2][16] = {{0}}; /* rows 2q and 2q + 1 at the block's 16 positions */
            for (size_t e = 0; e < 2; e++) {
                const size_t k = 2 * q + e;
                if (k >= (size_t)d->Kr) continue;
                for (size_t v = 0; v < 16 && 16 * b + v < d->nC; v++) {
                    const size_t pos = 16 * b + v, c = d->blk ? d->cols[pos] : pos;
                    w[e][v] = p->W[k * d->D + c] * ((real)1 + p->g[c]);
                }
            }
            _mm512_storeu_si512(o + (b * nq + q) * 16,
                                hc_bf16_interleave(ilv, _mm512_loadu_ps(w[0]), _mm512_loadu_ps(w[1])));
        }
}
#endif

#endif
