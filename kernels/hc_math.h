/* hc_math.h: the per-token small-matrix math of every hyper-connection method, written
 * once and used by the CPU backend, the CUDA backend (as __host__ __device__ code) and
 * the tests (compiled in double with -DS2HC_DOUBLE).
 *
 * Conventions (see docs/methods.md):
 *  - H is n x n row-major and acts as X_next = H . X: H[i*n + j] is the weight of input
 *    stream j in output stream i (rows are output streams).
 *  - Per token the frame gives the raw projection z = x' W^T (K values, K = spec->K) and
 *    the method's static parameters theta (spec->n_theta values, one sublayer's); the
 *    method returns H_pre (n), H_post (n) and H_res (n x n).
 *  - Methods with the mHC-style frame (every method but `hc`) share the gates
 *      theta = [alpha_pre, alpha_post, b_pre[n], b_post[n], <method part>...]
 *      z     = [z_pre[n], z_post[n], <method part>...]
 *      H_pre[i]  = sigmoid(alpha_pre  * z_pre[i]  + b_pre[i])
 *      H_post[i] = 2 sigmoid(alpha_post * z_post[i] + b_post[i])
 *  - Backward functions take dH_pre, dH_post, dH_res, overwrite dz (K values) and ADD
 *    into dtheta (the caller zeroes once; tokens accumulate).
 *  - Backward may recompute the forward from z; `cache` (spec->cache reals per token,
 *    filled by forward) is there for what is too costly to recompute.
 */
#ifndef S2HC_HC_MATH_H
#define S2HC_HC_MATH_H
#include <math.h>
#include <stddef.h>
#include <string.h>
#include "real.h"

/* Method ids. Stored in files: append only, never renumber. */
enum hc_method {
    HC_RC = 0,
    HC_IDENTITY = 1,
    HC_HC = 2,
    HC_MHC = 3,
    HC_MHC_LITE = 4,
    HC_KROMHC = 5,
    HC_ORTHOGONAL = 6,
    HC_S2HC = 7,
    HC_S2HC_ROT = 8,
    HC_N_METHODS
};

/* How the frame normalises the streams before the coefficient projection. */
enum hc_norm {
    HC_NORM_FLAT = 0,   /* RMS over all n*C values, gain g in R^{nC}, W is [K, nC] */
    HC_NORM_STREAM = 1  /* RMS of each stream's C values, gain g in R^C shared, W is [K/n, C]
                           applied to every stream; z is [n][K/n] (stream-major) */
};

#define HC_MAX_N 8
#define HC_GATE_ALPHA_INIT 0.01   /* alpha_pre, alpha_post, alpha_res, tau */
#define HC_GATE_BIAS_ON 1.0       /* b_pre, b_post on the preferred stream (block mod n) */
#define HC_GATE_BIAS_OFF (-1.0)   /* ... and on the others */

typedef struct {
    int method;          /* enum hc_method */
    int n;               /* streams, 2..8 */
    int K;               /* projection outputs per token */
    int n_theta;         /* static parameters per sublayer */
    int cache;           /* reals of per-token cache written by forward */
    int norm;            /* enum hc_norm */
    /* method options */
    int sinkhorn_iters;  /* mhc */
    int sinkhorn_col_first; /* mhc: 0 = rows then columns each iteration (columns exact) */
    int core_expm;       /* s2hc, s2hc_rot, orthogonal: 0 = Cayley, 1 = matrix exponential */
    int exact_init;      /* s2hc: 0 = Sigma = tanh(u) (the paper, tanh 4 at init);
                            1 = Sigma = fold(tanh(u) / tanh 4): exactly I at init (s2hc section) */
    int n_factors;       /* kromhc: factor sizes, prod = n (mhc_lite: 1 factor of size n) */
    int factors[4];
    int n_perms;         /* mhc_lite: n!; kromhc: sum of factors[f]! (all logits) */
    const unsigned char *perms; /* mhc_lite: perms[k*n + i] = j where P_k[i][j] = 1, k = 0..n!-1 in
                                   lexicographic order (identity first); kromhc: the tables of
                                   every factor, concatenated in factor order. Host memory owned
                                   by the variant (setup allocates, teardown frees). */
} hc_spec;

/* ---- exp and tanh of many values ---------------------------------------------------
 * hc_exp_many, hc_tanh_many: y[i] = exp(x[i]), tanh(x[i]) for i < k (in place allowed).
 * libm computes one value at a time (tanhf ~14 ns, expf ~5 ns here); the CPU float build
 * computes HC_XL at once in GCC vector code (16 with AVX-512, 8 with AVX2), the same bits
 * for any k (a token's exps in a group of 16 tokens or alone; one vector is a ~110-cycle
 * dependency chain, so a token alone pays more than libm's overlapping calls, and only
 * tails and tests do):
 *   exp: x = n ln2 + r (n rounded to nearest, ln2 split in two for an exact n ln2),
 *        exp(r) by Cephes' degree-6 polynomial, 2^n put into the exponent bits; x below
 *        -87.3 gives 0, above 88.3 saturates at exp(88.3); NaN stays NaN.
 *   tanh: |x| < 0.625 by Cephes' odd polynomial (no cancellation near 0), else
 *        sign(x) (1 - 2 / (exp(2|x|) + 1)).
 * Both within 2 ulp of the correctly rounded value (tests/test_variants.c checks a sweep).
 * Every operation is elementwise, so the width changes no bits. The double build
 * (gradient checks), CUDA and CPUs without AVX2 use libm. HC_VEC_MATH (AVX-512 alone)
 * further marks the 16 x 16 register transposes below, written with AVX-512 intrinsics. */
#if (defined(__AVX512F__) || defined(__AVX2__)) && !defined(__CUDACC__) && !REAL_IS_DOUBLE
#define HC_VEC_EXP 1
#include <immintrin.h>
#ifdef __AVX512F__
#define HC_VEC_MATH 1
#define HC_XL 16
#else
#define HC_VEC_MATH 0
#define HC_XL 8
#endif
typedef float hc_fx __attribute__((vector_size(HC_XL * 4)));
typedef int hc_ix __attribute__((vector_size(HC_XL * 4)));
#define HC_FX(c) ((c) - (hc_fx){0}) /* c in every lane (c - 0 is c, -0 included) */
#if HC_XL == 16 /* lane l holds l */
#define HC_IOTA {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
#else
#define HC_IOTA {0, 1, 2, 3, 4, 5, 6, 7}
#endif
#if HC_VEC_MATH
typedef hc_fx hc_f16;
typedef hc_ix hc_i16;
#define HC_F16(c) HC_FX(c)
#endif

static inline hc_fx hc_selx(hc_ix m, hc_fx a, hc_fx b) { return (hc_fx)(((hc_ix)a & m) | ((hc_ix)b & ~m)); }

static inline hc_fx hc_expx(hc_fx x0) {
    const hc_fx lo = HC_FX(-87.3f), hi = HC_FX(88.3f), shift = HC_FX(12582912.0f); /* 1.5 * 2^23 */
    hc_fx x = hc_selx(x0 < lo, lo, x0);
    x = hc_selx(x > hi, hi, x);
    hc_fx n = x * HC_FX(1.44269504088896341f) + shift;
    n = n - shift; /* rounded to the nearest integer */
    hc_fx r = x - n * HC_FX(0.693359375f);
    r = r - n * HC_FX(-2.12194440e-4f);
    hc_fx p = HC_FX(1.9875691500e-4f);
    p = p * r + HC_FX(1.3981999507e-3f);
    p = p * r + HC_FX(8.3334519073e-3f);
    p = p * r + HC_FX(4.1665795894e-2f);
    p = p * r + HC_FX(1.6666665459e-1f);
    p = p * r + HC_FX(5.0000001201e-1f);
    p = p * r * r + r + HC_FX(1.0f);
    const hc_ix e = (__builtin_convertvector(n, hc_ix) + 127) << 23;
    return hc_selx(x0 < lo, HC_FX(0.0f), p * (hc_fx)e);
}

static inline hc_fx hc_tanhx(hc_fx x) {
    const hc_ix sign = (hc_ix)x & (hc_ix)HC_FX(-0.0f);
    const hc_fx a = (hc_fx)((hc_ix)x & ~(hc_ix)HC_FX(-0.0f)), z = x * x;
    hc_fx p = HC_FX(-5.70498872745e-3f);
    p = p * z + HC_FX(2.06390887954e-2f);
    p = p * z - HC_FX(5.37397155531e-2f);
    p = p * z + HC_FX(1.33314422036e-1f);
    p = p * z - HC_FX(3.33332819422e-1f);
    const hc_fx small = p * z * x + x;
    const hc_fx big = HC_FX(1.0f) - HC_FX(2.0f) / (hc_expx(a + a) + HC_FX(1.0f));
    return hc_selx(a < HC_FX(0.625f), small, (hc_fx)((hc_ix)big | sign));
}

/* f over k values, HC_XL at a time (the last block padded with zeros). */
#define HC_MANY(name, fx)                                                   \
    static inline void name(int k, const real *x, real *y) {                \
        int b = 0;                                                          \
        for (; b + HC_XL <= k; b += HC_XL) {                                \
            hc_fx v;                                                        \
            memcpy(&v, x + b, sizeof v);                                    \
            v = fx(v);                                                      \
            memcpy(y + b, &v, sizeof v);                                    \
        }                                                                   \
        if (b < k) { /* the last values, padded with zeros */               \
            real t[HC_XL] = {0};                                            \
            memcpy(t, x + b, (size_t)(k - b) * sizeof(real));               \
            hc_fx v;                                                        \
            memcpy(&v, t, sizeof v);                                        \
            v = fx(v);                                                      \
            memcpy(t, &v, sizeof v);                                        \
            memcpy(y + b, t, (size_t)(k - b) * sizeof(real));               \
        }                                                                   \
    }
HC_MANY(hc_exp_many, hc_expx)
HC_MANY(hc_tanh_many, hc_tanhx)
#undef HC_MANY
#else
#define HC_VEC_EXP 0
#define HC_VEC_MATH 0
HOSTDEV static inline void hc_exp_many(int k, const real *x, real *y) {
    for (int i = 0; i < k; i++) y[i] = REXP(x[i]);
}
HOSTDEV static inline void hc_tanh_many(int k, const real *x, real *y) {
    for (int i = 0; i < k; i++) y[i] = RTANH(x[i]);
}
#endif

/* ---- named constants of the methods' inits and numerics ---------------------------- */

#define HC_MHC_OFFDIAG_BIAS (-8.0)   /* mhc: b_res off the diagonal (0 on it) */
#define HC_S2HC_SIGMA_BIAS 4.0       /* s2hc: b_S, Sigma = tanh(4) = 0.99933 at init */
#define HC_ROT_GAMMA_INIT 1.0        /* s2hc, s2hc_rot, orthogonal: gamma (rotation magnitude) */
#define HC_HC_SCALE_INIT 0.01        /* hc: s_alpha, s_beta */
#define HC_EXPM_TAYLOR 12            /* expm: Taylor degree after scaling */
#define HC_EXPM_THETA 0.25           /* expm: scale until ||A||_F / 2^s <= this; truncation
                                        error <= 0.25^13 / 13! ~ 2.4e-18 relative */
#define HC_MM (HC_MAX_N * HC_MAX_N)
/* Local arrays below are sized for HC_MAX_N (times HC_LANES in lanes). Outside the lanes
 * they are zero-initialised: the loops fill only d x d of them, which gcc's
 * -Wmaybe-uninitialized cannot follow under every -O/-march. The lanes' arrays are not
 * (zeroing their 4 KB per call would cost as much as the math); every loop there writes
 * an element before any reads it. */

/* ---- lanes --------------------------------------------------------------------------
 * V tokens at once, element e of token v at [e * V + v] (V = 1: one token in its own
 * layout). A lane does the one-token arithmetic in the same order, so a token gets the
 * same bits in a lane as alone; the CPU compiles V = HC_LANES into vector code over
 * tokens, which turns each token's chains of dependent operations (mhc's iteration, the
 * cores' inverses and products) into independent lanes. Where one token's arithmetic
 * depends on its data (a pivot row, a number of squarings), every lane runs the union
 * and keeps its own by a select: a select moves bits, so a lane still gets its own. */
#ifdef __CUDACC__
#define HC_LANES 1   /* a CUDA thread is one token */
#else
#define HC_LANES 16
#endif

/* HC_WIDE marks a function whose lanes loops GCC should vectorise in 512-bit vectors (one
 * per 16 tokens): on these CPUs it prefers 256-bit ones by default, two instructions for
 * every operation of a lane group. Moves no bits: the lanes loops are elementwise. */
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define HC_WIDE __attribute__((target("prefer-vector-width=512")))
#else
#define HC_WIDE
#endif

#if HC_VEC_EXP
/* r[i][c] -> r[c][i] for an HC_XL x HC_XL block of floats in registers. The stage of size
 * s swaps bit s of the row index with bit s of the column index: rows a and a + s (bit s
 * of a clear) become a's and b's low halves of each 2s-block, then their high halves
 * (lo[c] = c where bit s of c is clear, else HC_XL + c - s: a's c, else b's c - s; hi =
 * lo + s; the masks fold to constants). log2(HC_XL) stages of HC_XL two-source shuffles
 * (16 x 16 with AVX-512: 64 shuffles, where element by element a block is 256 scalar
 * loads and as many stores; AVX2 does a group's 16 x 16 as four 8 x 8 blocks). mhc_lite
 * moves every logit between the layouts. Moves bits only. */
#ifdef __clang__ /* GCC's shuffle by a mask vector, as cpu_math.h's cpu_shuffle2 */
static inline __attribute__((always_inline)) hc_fx hc_shuffle2(hc_fx x, hc_fx y, hc_ix m) {
#if HC_XL == 16
    return (hc_fx)_mm512_permutex2var_ps((__m512)x, (__m512i)m, (__m512)y);
#else
    const __m256i k = (__m256i)m;
    return (hc_fx)_mm256_blendv_ps(_mm256_permutevar8x32_ps((__m256)x, k), _mm256_permutevar8x32_ps((__m256)y, k),
                                   (__m256)_mm256_slli_epi32(k, 28));
#endif
}
#else
#define hc_shuffle2 __builtin_shuffle
#endif
static inline void hc_transpose(hc_fx *r) {
    const hc_ix iota = HC_IOTA;
#pragma GCC unroll 4
    for (int s = HC_XL / 2; s >= 1; s /= 2) {
        const hc_ix lo = iota + (((iota & s) != 0) & (HC_XL - s)), hi = lo + s;
#pragma GCC unroll 16
        for (int a = 0; a < HC_XL; a++)
            if (!(a & s)) {
                const hc_fx x = r[a], y = r[a + s];
                r[a] = hc_shuffle2(x, y, lo);
                r[a + s] = hc_shuffle2(x, y, hi);
            }
    }
}
#endif

#if HC_VEC_EXP && !HC_VEC_MATH
/* lanes l < w set: vmaskmovps's mask of a block of w < 8 values */
static inline __m256i hc_mask8(int w) {
    const hc_ix iota = HC_IOTA;
    return (__m256i)(iota < w);
}
#endif

/* x[e * V + v] = src[v * ts + e] for e < m: V tokens' m values (token stride ts) into lanes. */
HOSTDEV static inline void hc_lanes_get(int m, int V, const real *src, size_t ts, real *x) {
#if HC_VEC_MATH
    if (V == 16 && m >= 8) { /* by blocks of 16 values, transposed in registers */
        for (int e0 = 0; e0 < m; e0 += 16) {
            const int w = m - e0 < 16 ? m - e0 : 16;
            const __mmask16 k = (__mmask16)((1u << w) - 1); /* a short block: no access past w values */
            hc_f16 r[16];
            for (int v = 0; v < 16; v++) r[v] = (hc_f16)_mm512_maskz_loadu_ps(k, src + v * ts + (size_t)e0);
            hc_transpose(r);
            for (int e = 0; e < w; e++) memcpy(x + (e0 + e) * 16, &r[e], sizeof r[e]);
        }
        return;
    }
#elif HC_VEC_EXP
    if (V == 16 && m >= 8) { /* by blocks of 8 values and 8 tokens, transposed in registers */
        for (int e0 = 0; e0 < m; e0 += 8) {
            const int w = m - e0 < 8 ? m - e0 : 8;
            const __m256i k = hc_mask8(w); /* a short block: no access past w values */
            for (int v0 = 0; v0 < 16; v0 += 8) {
                hc_fx r[8];
                for (int v = 0; v < 8; v++) {
                    const real *p = src + (v0 + v) * ts + (size_t)e0;
                    r[v] = w == 8 ? (hc_fx)_mm256_loadu_ps(p) : (hc_fx)_mm256_maskload_ps(p, k);
                }
                hc_transpose(r);
                for (int e = 0; e < w; e++) memcpy(x + (e0 + e) * 16 + v0, &r[e], sizeof r[e]);
            }
        }
        return;
    }
#endif
    for (int v = 0; v < V; v++)
        for (int e = 0; e < m; e++) x[e * V + v] = src[v * ts + (size_t)e];
}

/* The reverse: dst[v * ts + e] = x[e * V + v]. */
HOSTDEV static inline void hc_lanes_put(int m, int V, const real *x, real *dst, size_t ts) {
#if HC_VEC_MATH
    if (V == 16 && m >= 8) {
        for (int e0 = 0; e0 < m; e0 += 16) {
            const int w = m - e0 < 16 ? m - e0 : 16;
            hc_f16 r[16];
            for (int e = 0; e < 16; e++) {
                if (e < w) memcpy(&r[e], x + (e0 + e) * 16, sizeof r[e]);
                else r[e] = HC_F16(0.0f);
            }
            hc_transpose(r);
            const __mmask16 k = (__mmask16)((1u << w) - 1);
            for (int v = 0; v < 16; v++) _mm512_mask_storeu_ps(dst + v * ts + (size_t)e0, k, (__m512)r[v]);
        }
        return;
    }
#elif HC_VEC_EXP
    if (V == 16 && m >= 8) {
        for (int e0 = 0; e0 < m; e0 += 8) {
            const int w = m - e0 < 8 ? m - e0 : 8;
            const __m256i k = hc_mask8(w);
            for (int v0 = 0; v0 < 16; v0 += 8) {
                hc_fx r[8];
                for (int e = 0; e < 8; e++) {
                    if (e < w) memcpy(&r[e], x + (e0 + e) * 16 + v0, sizeof r[e]);
                    else r[e] = HC_FX(0.0f);
                }
                hc_transpose(r);
                for (int v = 0; v < 8; v++) { /* a masked store is slow on some AMD cores: only for short blocks */
                    real *p = dst + (v0 + v) * ts + (size_t)e0;
                    if (w == 8) _mm256_storeu_ps(p, (__m256)r[v]);
                    else _mm256_maskstore_ps(p, k, (__m256)r[v]);
                }
            }
        }
        return;
    }
#endif
    for (int v = 0; v < V; v++)
        for (int e = 0; e < m; e++) dst[v * ts + (size_t)e] = x[e * V + v];
}

/* A method's cache of V tokens is kept in lanes, element e of token v at cache[e * V + v]
 * (V = 1: the token's own layout), so the lanes code writes and reads it as plain runs of
 * memory, without transposes. hc_forward_tokens and hc_backward_tokens keep each whole
 * group of HC_LANES tokens so (hc_cache_token_get and _put reach one token of a group).
 * m values from element e0 on, between the lanes x and the cache: */
HOSTDEV static inline void hc_cache_put(int m, int V, const real *x, real *cache, int e0) {
    real *dst = cache + (size_t)e0 * V;
    for (int i = 0; i < m * V; i++) dst[i] = x[i];
}

HOSTDEV static inline void hc_cache_get(int m, int V, const real *cache, int e0, real *x) {
    const real *src = cache + (size_t)e0 * V;
    for (int i = 0; i < m * V; i++) x[i] = src[i];
}

/* Token v's cs values of a group of HC_LANES tokens whose cache is in lanes, from and to
 * the token's own layout x. */
HOSTDEV static inline void hc_cache_token_get(int cs, const real *group, int v, real *x) {
    for (int e = 0; e < cs; e++) x[e] = group[(size_t)e * HC_LANES + v];
}

HOSTDEV static inline void hc_cache_token_put(int cs, const real *x, real *group, int v) {
    for (int e = 0; e < cs; e++) group[(size_t)e * HC_LANES + v] = x[e];
}

/* ---- the shared mHC-style gates --------------------------------------------------- */

#define HC_GATE_THETA(n) (2 + 2 * (n))
#define HC_GATE_Z(n) (2 * (n))

/* e[i * V + v] = exp(-logit) of the 2n gates of V tokens (pre's n, then post's n; token
 * v's z at v * zs): the lanes' exp whatever V, so a token's gates have the same bits in
 * lanes as alone. */
HOSTDEV static inline void hc_gates_exp_v(int n, int V, const real *theta, const real *z, size_t zs, real *e) {
    const real ap = theta[0], aq = theta[1];
    const real *bp = theta + 2, *bq = theta + 2 + n;
    hc_lanes_get(2 * n, V, z, zs, e);
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++) {
            e[i * V + v] = -(ap * e[i * V + v] + bp[i]);
            e[(n + i) * V + v] = -(aq * e[(n + i) * V + v] + bq[i]);
        }
    hc_exp_many(2 * n * V, e, e);
}

/* The gates of V tokens (z at stride zs, pre and post at stride n). */
HOSTDEV static inline void hc_gates_forward_v(int n, int V, const real *theta, const real *z, size_t zs, real *pre,
                                              real *post) {
    real e[2 * HC_MAX_N * HC_LANES] = {0}; /* 1 KB: gcc cannot follow the 2n V writes */
    hc_gates_exp_v(n, V, theta, z, zs, e);
    for (int k = 0; k < 2 * n * V; k++) e[k] = (real)1 / ((real)1 + e[k]);
    for (int v = 0; v < V; v++)
        for (int i = 0; i < n; i++) {
            pre[v * n + i] = e[i * V + v];
            post[v * n + i] = (real)2 * e[(n + i) * V + v];
        }
}

/* Their backward (dpre, dpost at stride n, dz at zs); dtheta gets each token's terms in
 * token order, as token by token. */
HOSTDEV static inline void hc_gates_backward_v(int n, int V, const real *theta, const real *z, size_t zs,
                                               const real *dpre, const real *dpost, real *dz, real *dtheta) {
    const real ap = theta[0], aq = theta[1];
    real e[2 * HC_MAX_N * HC_LANES] = {0}, d[2 * HC_MAX_N * HC_LANES];
    hc_gates_exp_v(n, V, theta, z, zs, e);
    for (int v = 0; v < V; v++)
        for (int i = 0; i < n; i++) {
            d[i * V + v] = dpre[v * n + i];
            d[(n + i) * V + v] = dpost[v * n + i];
        }
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++) { /* d/d(logit) */
            const real s = (real)1 / ((real)1 + e[i * V + v]), t = (real)1 / ((real)1 + e[(n + i) * V + v]);
            d[i * V + v] = d[i * V + v] * s * ((real)1 - s);
            d[(n + i) * V + v] = d[(n + i) * V + v] * (real)2 * t * ((real)1 - t);
        }
    for (int v = 0; v < V; v++) {
        const real *zt = z + v * zs;
        real *dzt = dz + v * zs;
        for (int i = 0; i < n; i++) {
            const real g = d[i * V + v], h = d[(n + i) * V + v];
            dzt[i] = g * ap;
            dtheta[0] += g * zt[i];
            dtheta[2 + i] += g;
            dzt[n + i] = h * aq;
            dtheta[1] += h * zt[n + i];
            dtheta[2 + n + i] += h;
        }
    }
}

HOSTDEV static inline void hc_gates_forward(int n, const real *theta, const real *z, real *pre, real *post) {
    hc_gates_forward_v(n, 1, theta, z, 0, pre, post);
}

HOSTDEV static inline void hc_gates_backward(int n, const real *theta, const real *z, const real *dpre,
                                             const real *dpost, real *dz, real *dtheta) {
    hc_gates_backward_v(n, 1, theta, z, 0, dpre, dpost, dz, dtheta);
}

/* ---- identity: H_res = I, dynamic gates (the fixed-identity ablation) -------------- */

/* V tokens (z, pre, post, H at strides K, n, n, n*n). */
HOSTDEV static inline void hc_identity_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                 const real *z, real *pre, real *post, real *H) {
    hc_gates_forward_v(n, V, theta, z, (size_t)s->K, pre, post);
    for (int v = 0; v < V; v++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) H[(v * n + i) * n + j] = (real)(i == j);
}

HOSTDEV static inline void hc_identity_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                  const real *z, const real *dpre, const real *dpost, real *dz,
                                                  real *dtheta) {
    hc_gates_backward_v(n, V, theta, z, (size_t)s->K, dpre, dpost, dz, dtheta);
}

HOSTDEV static inline void hc_identity_forward(const hc_spec *s, const real *theta, const real *z, real *pre,
                                               real *post, real *H) {
    hc_identity_forward_v(s, s->n, 1, theta, z, pre, post, H);
}

HOSTDEV static inline void hc_identity_backward(const hc_spec *s, const real *theta, const real *z,
                                                const real *dpre, const real *dpost, real *dz, real *dtheta) {
    hc_identity_backward_v(s, s->n, 1, theta, z, dpre, dpost, dz, dtheta);
}

/* ---- small dense linear algebra (row-major, d <= HC_MAX_N, in lanes) ---------------- */

HOSTDEV static inline int hc_factorial(int m) {
    int f = 1;
    for (int i = 2; i <= m; i++) f *= i;
    return f;
}

HOSTDEV static inline void hc_eye_v(int d, int V, real *A) {
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            for (int v = 0; v < V; v++) A[(i * d + j) * V + v] = (real)(i == j);
}

/* C (a x c) = A (a x b) . B (b x c) */
HOSTDEV static inline void hc_mm_v(int a, int b, int c, int V, const real *A, const real *B, real *C) {
    real s[HC_LANES];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < c; j++) {
            for (int v = 0; v < V; v++) s[v] = 0;
            for (int k = 0; k < b; k++)
                for (int v = 0; v < V; v++) s[v] += A[(i * b + k) * V + v] * B[(k * c + j) * V + v];
            for (int v = 0; v < V; v++) C[(i * c + j) * V + v] = s[v];
        }
}

HOSTDEV static inline void hc_mm(int a, int b, int c, const real *A, const real *B, real *C) {
    hc_mm_v(a, b, c, 1, A, B, C);
}

/* C (a x c) = A^T . B with A (b x a), B (b x c) */
HOSTDEV static inline void hc_mm_tn_v(int a, int b, int c, int V, const real *A, const real *B, real *C) {
    real s[HC_LANES];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < c; j++) {
            for (int v = 0; v < V; v++) s[v] = 0;
            for (int k = 0; k < b; k++)
                for (int v = 0; v < V; v++) s[v] += A[(k * a + i) * V + v] * B[(k * c + j) * V + v];
            for (int v = 0; v < V; v++) C[(i * c + j) * V + v] = s[v];
        }
}

/* C (a x c) = A . B^T with A (a x b), B (c x b) */
HOSTDEV static inline void hc_mm_nt_v(int a, int b, int c, int V, const real *A, const real *B, real *C) {
    real s[HC_LANES];
    for (int i = 0; i < a; i++)
        for (int j = 0; j < c; j++) {
            for (int v = 0; v < V; v++) s[v] = 0;
            for (int k = 0; k < b; k++)
                for (int v = 0; v < V; v++) s[v] += A[(i * b + k) * V + v] * B[(j * b + k) * V + v];
            for (int v = 0; v < V; v++) C[(i * c + j) * V + v] = s[v];
        }
}

/* 3 x 3 inverse in closed form (adjugate / determinant). */
HOSTDEV static inline void hc_inv3_adj_v(int V, const real *M, real *Mi) {
    for (int v = 0; v < V; v++) {
        const real a = M[0 * V + v], b = M[1 * V + v], c = M[2 * V + v], d = M[3 * V + v], e = M[4 * V + v];
        const real f = M[5 * V + v], g = M[6 * V + v], h = M[7 * V + v], i = M[8 * V + v];
        const real A = e * i - f * h, B = f * g - d * i, C = d * h - e * g;
        const real det = a * A + b * B + c * C, r = (real)1 / det;
        Mi[0 * V + v] = A * r;  Mi[1 * V + v] = (c * h - b * i) * r;  Mi[2 * V + v] = (b * f - c * e) * r;
        Mi[3 * V + v] = B * r;  Mi[4 * V + v] = (a * i - c * g) * r;  Mi[5 * V + v] = (c * d - a * f) * r;
        Mi[6 * V + v] = C * r;  Mi[7 * V + v] = (b * g - a * h) * r;  Mi[8 * V + v] = (a * e - b * d) * r;
    }
}

HOSTDEV static inline void hc_inv3_adj(const real *M, real *Mi) { hc_inv3_adj_v(1, M, Mi); }

/* d x d inverse by LU with partial pivoting (row swaps), then d triangular solves.
 * M must be non-singular (I + skew always is: its eigenvalues are 1 + i*lambda).
 * The pivot row differs between lanes: each lane tracks its own, and every row below
 * the diagonal is swapped in by a select where it is that lane's pivot (no lane
 * swaps where its pivot is the diagonal, as one token alone). */
HOSTDEV static inline void hc_inv_lu_v(int d, int V, const real *M, real *Mi) {
    real LU[HC_MM * HC_LANES], y[HC_MAX_N * HC_LANES], best[HC_LANES], s[HC_LANES];
    int piv[HC_MAX_N * HC_LANES], p[HC_LANES];
    for (int i = 0; i < d * d * V; i++) LU[i] = M[i];
    for (int i = 0; i < d; i++)
        for (int v = 0; v < V; v++) piv[i * V + v] = i;
    for (int k = 0; k < d; k++) {
        for (int v = 0; v < V; v++) {   /* the first largest |LU[r][k]|, r >= k */
            p[v] = k;
            best[v] = RFABS(LU[(k * d + k) * V + v]);
        }
        for (int r = k + 1; r < d; r++)
            for (int v = 0; v < V; v++) {
                const real x = RFABS(LU[(r * d + k) * V + v]);
                const int gt = x > best[v];
                p[v] = gt ? r : p[v];
                best[v] = gt ? x : best[v];
            }
        for (int r = k + 1; r < d; r++) {
            for (int c = 0; c < d; c++)
                for (int v = 0; v < V; v++) {
                    const int sw = p[v] == r;
                    const real a = LU[(k * d + c) * V + v], b = LU[(r * d + c) * V + v];
                    LU[(k * d + c) * V + v] = sw ? b : a;
                    LU[(r * d + c) * V + v] = sw ? a : b;
                }
            for (int v = 0; v < V; v++) {
                const int sw = p[v] == r, a = piv[k * V + v], b = piv[r * V + v];
                piv[k * V + v] = sw ? b : a;
                piv[r * V + v] = sw ? a : b;
            }
        }
        for (int r = k + 1; r < d; r++) {
            for (int v = 0; v < V; v++) LU[(r * d + k) * V + v] = LU[(r * d + k) * V + v] / LU[(k * d + k) * V + v];
            for (int c = k + 1; c < d; c++)
                for (int v = 0; v < V; v++)
                    LU[(r * d + c) * V + v] -= LU[(r * d + k) * V + v] * LU[(k * d + c) * V + v];
        }
    }
    for (int j = 0; j < d; j++) {          /* column j of M^-1: L U x = P e_j */
        for (int r = 0; r < d; r++) {
            for (int v = 0; v < V; v++) s[v] = (real)(piv[r * V + v] == j);
            for (int c = 0; c < r; c++)
                for (int v = 0; v < V; v++) s[v] -= LU[(r * d + c) * V + v] * y[c * V + v];
            for (int v = 0; v < V; v++) y[r * V + v] = s[v];
        }
        for (int r = d - 1; r >= 0; r--) {
            for (int v = 0; v < V; v++) s[v] = y[r * V + v];
            for (int c = r + 1; c < d; c++)
                for (int v = 0; v < V; v++) s[v] -= LU[(r * d + c) * V + v] * y[c * V + v];
            for (int v = 0; v < V; v++) y[r * V + v] = s[v] / LU[(r * d + r) * V + v];
        }
        for (int r = 0; r < d; r++)
            for (int v = 0; v < V; v++) Mi[(r * d + j) * V + v] = y[r * V + v];
    }
}

HOSTDEV static inline void hc_inv_lu(int d, const real *M, real *Mi) { hc_inv_lu_v(d, 1, M, Mi); }

/* Inverse of a small matrix: closed forms up to 3 x 3, LU beyond. */
HOSTDEV static inline void hc_inv_small_v(int d, int V, const real *M, real *Mi) {
    if (d == 1) {
        for (int v = 0; v < V; v++) Mi[v] = (real)1 / M[v];
    } else if (d == 2) {
        for (int v = 0; v < V; v++) {
            const real a = M[0 * V + v], b = M[1 * V + v], c = M[2 * V + v], e = M[3 * V + v];
            const real r = (real)1 / (a * e - b * c);
            Mi[0 * V + v] = e * r; Mi[1 * V + v] = -b * r; Mi[2 * V + v] = -c * r; Mi[3 * V + v] = a * r;
        }
    } else if (d == 3) {
        hc_inv3_adj_v(V, M, Mi);
    } else {
        hc_inv_lu_v(d, V, M, Mi);
    }
}

HOSTDEV static inline void hc_inv_small(int d, const real *M, real *Mi) { hc_inv_small_v(d, 1, M, Mi); }

/* skew(a): the strict upper triangle filled row-major ((0,1), (0,2), ..., (1,2), ...)
 * with a, the lower triangle with -a. a has d(d-1)/2 values. */
HOSTDEV static inline void hc_skew_v(int d, int V, const real *a, real *A) {
    int p = 0;
    for (int i = 0; i < d; i++) {
        for (int v = 0; v < V; v++) A[(i * d + i) * V + v] = 0;
        for (int j = i + 1; j < d; j++, p++)
            for (int v = 0; v < V; v++) {
                A[(i * d + j) * V + v] = a[p * V + v];
                A[(j * d + i) * V + v] = -a[p * V + v];
            }
    }
}

HOSTDEV static inline void hc_skew(int d, const real *a, real *A) { hc_skew_v(d, 1, a, A); }

/* Backward of hc_skew: da[p] = dA[i][j] - dA[j][i] (overwrites da). */
HOSTDEV static inline void hc_skew_backward_v(int d, int V, const real *dA, real *da) {
    int p = 0;
    for (int i = 0; i < d; i++)
        for (int j = i + 1; j < d; j++, p++)
            for (int v = 0; v < V; v++) da[p * V + v] = dA[(i * d + j) * V + v] - dA[(j * d + i) * V + v];
}

/* Cayley(A) = (I + A)^-1 (I - A) = 2 (I + A)^-1 - I: orthogonal with det +1 for skew A
 * (it never reaches eigenvalue -1). */
HOSTDEV static inline void hc_cayley_v(int d, int V, const real *A, real *Q) {
    real M[HC_MM * HC_LANES], Mi[HC_MM * HC_LANES];
    for (int i = 0; i < d * d * V; i++) M[i] = A[i];
    for (int i = 0; i < d; i++)
        for (int v = 0; v < V; v++) M[(i * d + i) * V + v] += 1;
    hc_inv_small_v(d, V, M, Mi);
    for (int i = 0; i < d * d * V; i++) Q[i] = 2 * Mi[i];
    for (int i = 0; i < d; i++)
        for (int v = 0; v < V; v++) Q[(i * d + i) * V + v] -= 1;
}

/* Backward of hc_cayley_v given its output Q: with M = I + A, Q = 2 M^-1 - I, so
 * dA = -2 M^-T dQ M^-T, and M^-1 = (Q + I) / 2 gives dA = -1/2 (Q^T + I) dQ (Q^T + I). */
HOSTDEV static inline void hc_cayley_backward_v(int d, int V, const real *Q, const real *dQ, real *dA) {
    real P[HC_MM * HC_LANES], T[HC_MM * HC_LANES];
    for (int i = 0; i < d; i++)
        for (int j = 0; j < d; j++)
            for (int v = 0; v < V; v++) P[(i * d + j) * V + v] = Q[(j * d + i) * V + v] + (real)(i == j);
    hc_mm_v(d, d, d, V, P, dQ, T);
    hc_mm_v(d, d, d, V, T, P, dA);
    for (int i = 0; i < d * d * V; i++) dA[i] *= (real)-0.5;
}

/* The matrix exponential X = exp(A) and, when E != NULL, its Frechet derivative
 * Y = L(A, E) = d/dt exp(A + tE) at t = 0, for d x d A (d <= HC_MAX_N).
 * Scaling and squaring: s halvings until ||A||_F / 2^s <= HC_EXPM_THETA, a degree
 * HC_EXPM_TAYLOR Taylor polynomial in Horner form, s squarings. The derivative runs the
 * same recurrence on the pair (X, Y) = the block matrix [[X, Y], [0, X]] (exp of
 * [[A, E], [0, A]] has L(A, E) in its corner), so Y is the exact derivative of the
 * computed approximant. The reverse-mode gradient is dA = L(A^T, dX): the adjoint of
 * a polynomial's derivative is the derivative at the transpose, and the Frobenius norm
 * (which chooses s) is transpose-invariant.
 * In lanes s is each lane's own: all run the most squarings, a lane past its s keeps
 * its pair by a select. */

/* s for ||A||_F = nrm, and *sc = 2^-s. */
HOSTDEV static inline int hc_expm_scaling(real nrm, real *sc) {
    real c = 1;
    int s = 0;
    while (nrm * c > (real)HC_EXPM_THETA && s < 64) { c *= (real)0.5; s++; }
    *sc = c;
    return s;
}

HOSTDEV static inline void hc_expm_dual_v(int d, int V, const real *A, const real *E, real *X, real *Y) {
    real B[HC_MM * HC_LANES], F[HC_MM * HC_LANES], RX[HC_MM * HC_LANES];
    real RY[HC_MM * HC_LANES], TX[HC_MM * HC_LANES], TY[HC_MM * HC_LANES];
    real nrm[HC_LANES], sc[HC_LANES];
    int s[HC_LANES], smax = 0;
    const int dd = d * d;
    for (int v = 0; v < V; v++) nrm[v] = 0;
    for (int i = 0; i < dd; i++)
        for (int v = 0; v < V; v++) nrm[v] += A[i * V + v] * A[i * V + v];
    for (int v = 0; v < V; v++) {
        s[v] = hc_expm_scaling(RSQRTV(nrm[v]), &sc[v]);
        smax = s[v] > smax ? s[v] : smax;
    }
    for (int i = 0; i < dd; i++)
        for (int v = 0; v < V; v++) {
            B[i * V + v] = A[i * V + v] * sc[v];
            F[i * V + v] = E ? E[i * V + v] * sc[v] : 0;
        }
    hc_eye_v(d, V, RX);
    for (int i = 0; i < dd * V; i++) RY[i] = 0;
    for (int k = HC_EXPM_TAYLOR; k >= 1; k--) {   /* R <- I + B R / k on the pair */
        hc_mm_v(d, d, d, V, B, RX, TX);
        if (E) {
            hc_mm_v(d, d, d, V, B, RY, TY);
            hc_mm_v(d, d, d, V, F, RX, RY);
            for (int i = 0; i < dd * V; i++) RY[i] = (TY[i] + RY[i]) / (real)k;
        }
        for (int i = 0; i < dd * V; i++) RX[i] = TX[i] / (real)k;
        for (int i = 0; i < d; i++)
            for (int v = 0; v < V; v++) RX[(i * d + i) * V + v] += 1;
    }
    for (int q = 0; q < smax; q++) {              /* (X, Y) <- (X X, X Y + Y X) */
        hc_mm_v(d, d, d, V, RX, RX, TX);
        if (E) {
            hc_mm_v(d, d, d, V, RX, RY, TY);
            hc_mm_v(d, d, d, V, RY, RX, F);
            for (int i = 0; i < dd; i++)
                for (int v = 0; v < V; v++) RY[i * V + v] = q < s[v] ? TY[i * V + v] + F[i * V + v] : RY[i * V + v];
        }
        for (int i = 0; i < dd; i++)
            for (int v = 0; v < V; v++) RX[i * V + v] = q < s[v] ? TX[i * V + v] : RX[i * V + v];
    }
    for (int i = 0; i < dd * V; i++) X[i] = RX[i];
    if (E && Y)
        for (int i = 0; i < dd * V; i++) Y[i] = RY[i];
}

HOSTDEV static inline void hc_expm_dual(int d, const real *A, const real *E, real *X, real *Y) {
    hc_expm_dual_v(d, 1, A, E, X, Y);
}

/* ---- rotation generator: Q = map(skew(gamma * tanh(tau * z + b))) ------------------
 * d x d orthogonal from k = d(d-1)/2 projection outputs z, with scalars gamma, tau and a
 * bias b[k]; map = Cayley (expm = 0) or the matrix exponential (expm = 1). Used by
 * `orthogonal` (d = n) and by the two cores of `s2hc` / `s2hc_rot` (d = n - 1).
 * The forward leaves Q and the k tanh values in the token's cache (HC_ROT_CACHE(d)
 * reals: Q, then tanh); the backward reads them instead of recomputing (tanh is most of
 * the cost of these methods' per-token math). The tanh is the vector one whatever the
 * count (hc_tanh_many), so a token's bits do not depend on how many tokens share
 * the call. */

#define HC_ROT_CACHE(d) ((d) * (d) + (d) * ((d) - 1) / 2)
#define HC_ROT_K (HC_MAX_N * (HC_MAX_N - 1) / 2)

/* A = skew(gamma t), from the tanh values t = tanh(tau z + b) (the cache's tail). */
HOSTDEV static inline void hc_rot_skew_v(int d, int V, real gamma, const real *t, real *A) {
    real a[HC_ROT_K * HC_LANES];
    const int k = d * (d - 1) / 2;
    for (int i = 0; i < k * V; i++) a[i] = gamma * t[i];
    hc_skew_v(d, V, a, A);
}

HOSTDEV static inline void hc_rot_skew(int d, real gamma, const real *tc, real *A) {
    hc_rot_skew_v(d, 1, gamma, tc, A);
}

/* One Newton-Schulz step towards the nearest orthogonal matrix: Q <- Q (3I - Q^T Q) / 2.
 * Orthogonality error e becomes ~1.5 e^2: in float the Cayley inverse of a badly
 * conditioned I + A (|gamma| ~ 10) or many expm squarings leave e ~ 2e-5; after the step
 * it is rounding (~1e-6 at d = 8). A no-op in exact arithmetic, so the backward treats it
 * as the identity (in double it moves Q by ~1e-16). */
HOSTDEV static inline void hc_orth_polish_v(int d, int V, real *Q) {
    real G[HC_MM * HC_LANES], T[HC_MM * HC_LANES];
    hc_mm_tn_v(d, d, d, V, Q, Q, G);
    for (int i = 0; i < d * d * V; i++) G[i] = -(real)0.5 * G[i];
    for (int i = 0; i < d; i++)
        for (int v = 0; v < V; v++) G[(i * d + i) * V + v] += (real)1.5;
    hc_mm_v(d, d, d, V, Q, G, T);
    for (int i = 0; i < d * d * V; i++) Q[i] = T[i];
}

/* u = tau z + b (k values in lanes) of V tokens whose k z values lie at token stride zs. */
HOSTDEV static inline void hc_rot_pre_v(int k, int V, real tau, const real *b, const real *z, size_t zs, real *u) {
    for (int p = 0; p < k; p++)
        for (int v = 0; v < V; v++) u[p * V + v] = tau * z[v * zs + (size_t)p] + b[p];
}

/* Q (d x d, lanes) from the tanh values t = tanh(u) (k, lanes). */
HOSTDEV static inline void hc_rot_core_v(int d, int V, int expm, real gamma, const real *t, real *Q) {
    real A[HC_MM * HC_LANES];
    hc_rot_skew_v(d, V, gamma, t, A);
    if (expm) hc_expm_dual_v(d, V, A, 0, Q, 0);
    else hc_cayley_v(d, V, A, Q);
    hc_orth_polish_v(d, V, Q);
}

/* Q and the tanh values t in lanes. */
HOSTDEV static inline void hc_rot_forward_v(int d, int V, int expm, real gamma, real tau, const real *b, const real *z,
                                            size_t zs, real *Q, real *t) {
    const int k = d * (d - 1) / 2;
    hc_rot_pre_v(k, V, tau, b, z, zs, t);
    hc_tanh_many(k * V, t, t);
    hc_rot_core_v(d, V, expm, gamma, t, Q);
}

/* One token: Q (d x d); the cache rc gets Q and the tanh values. */
HOSTDEV static inline void hc_rot_forward(int d, int expm, real gamma, real tau, const real *b, const real *z,
                                          real *Q, real *rc) {
    hc_rot_forward_v(d, 1, expm, gamma, tau, b, z, 0, Q, rc + d * d);
    for (int i = 0; i < d * d; i++) rc[i] = Q[i];
}

/* Given dQ and the forward's Q and t (lanes): overwrite dz[k] (token stride zs, as z),
 * add into *dgamma, *dtau, db[k], token after token. The Cayley backward takes the
 * cached, polished Q for the exact Cayley output (they differ by rounding: the polish
 * is a no-op in exact arithmetic). */
HOSTDEV static inline void hc_rot_backward_v(int d, int V, int expm, real gamma, real tau, const real *z, size_t zs,
                                             const real *Q, const real *t, const real *dQ, real *dz, real *dgamma,
                                             real *dtau, real *db) {
    real dA[HC_MM * HC_LANES], da[HC_ROT_K * HC_LANES], du[HC_ROT_K * HC_LANES];
    const int k = d * (d - 1) / 2;
    if (k == 0) return;
    if (expm) {
        real A[HC_MM * HC_LANES], At[HC_MM * HC_LANES], X[HC_MM * HC_LANES];
        hc_rot_skew_v(d, V, gamma, t, A);
        for (int i = 0; i < d; i++)
            for (int j = 0; j < d; j++)
                for (int v = 0; v < V; v++) At[(i * d + j) * V + v] = A[(j * d + i) * V + v];
        hc_expm_dual_v(d, V, At, dQ, X, dA);
    } else {
        hc_cayley_backward_v(d, V, Q, dQ, dA);
    }
    hc_skew_backward_v(d, V, dA, da);
    for (int i = 0; i < k * V; i++) du[i] = da[i] * gamma * ((real)1 - t[i] * t[i]);
    real g = *dgamma, ta = *dtau;   /* the sums in token order, as token by token */
    for (int v = 0; v < V; v++)
        for (int p = 0; p < k; p++) {
            const int e = p * V + v;
            g += da[e] * t[e];
            dz[v * zs + (size_t)p] = du[e] * tau;
            ta += du[e] * z[v * zs + (size_t)p];
            db[p] += du[e];
        }
    *dgamma = g;
    *dtau = ta;
}

/* ---- hc: Zhu et al. dynamic hyper-connections (unconstrained, HC_NORM_STREAM) ------
 *   z     = [n streams][pre, post, res_0 .. res_{n-1}]       K = n (n + 2)
 *   theta = [s_alpha, s_beta, pre_static[n], post_static[n], res_static[n*n]]
 *   H_pre[i]  = s_alpha tanh(z_i,pre)  + pre_static[i]          (no sigmoid)
 *   H_post[i] = s_beta  tanh(z_i,post) + post_static[i]
 *   H[j][i]   = s_alpha tanh(z_i,res[j]) + res_static[j][i]
 * Column i of H_res (what input stream i sends out) is generated from stream i: Zhu's
 * A_r has rows indexed by input stream and HC applies A_r^T. res_static is stored in our
 * H convention (row = output stream). */

/* V tokens in lanes (z, pre, post, H, dz at strides K, n, n, n*n, K). */
HOSTDEV static inline void hc_hc_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                           const real *z, real *pre, real *post, real *H) {
    const int m = n + 2;
    const real sa = theta[0], sb = theta[1];
    const real *ps = theta + 2, *qs = theta + 2 + n, *rs = theta + 2 + 2 * n;
    real tz[HC_MAX_N * (HC_MAX_N + 2) * HC_LANES], Hl[HC_MM * HC_LANES];
    hc_lanes_get(n * m, V, z, (size_t)s->K, tz);
    hc_tanh_many(n * m * V, tz, tz);
    for (int i = 0; i < n; i++) {
        const real *ti = tz + i * m * V;
        for (int v = 0; v < V; v++) {
            pre[v * n + i] = sa * ti[v] + ps[i];
            post[v * n + i] = sb * ti[V + v] + qs[i];
        }
        for (int j = 0; j < n; j++)
            for (int v = 0; v < V; v++) Hl[(j * n + i) * V + v] = sa * ti[(2 + j) * V + v] + rs[j * n + i];
    }
    hc_lanes_put(n * n, V, Hl, H, (size_t)(n * n));
}

/* A token's terms of s_alpha and s_beta are summed before they are added to dtheta: one
 * addition per token in each chain through dtheta; the other sums keep token order. */
HOSTDEV static inline void hc_hc_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                            const real *z, const real *dpre, const real *dpost, const real *dH,
                                            real *dz, real *dtheta) {
    const int m = n + 2;
    const real sa = theta[0], sb = theta[1];
    real *dps = dtheta + 2, *dqs = dtheta + 2 + n, *drs = dtheta + 2 + 2 * n;
    real tz[HC_MAX_N * (HC_MAX_N + 2) * HC_LANES], dHl[HC_MM * HC_LANES], sA[HC_LANES], sB[HC_LANES];
    hc_lanes_get(n * m, V, z, (size_t)s->K, tz);
    hc_tanh_many(n * m * V, tz, tz);
    hc_lanes_get(n * n, V, dH, (size_t)(n * n), dHl);
    for (int v = 0; v < V; v++) sA[v] = sB[v] = 0;
    for (int i = 0; i < n; i++) { /* tz becomes dz, entry by entry */
        real *ti = tz + i * m * V;
        for (int v = 0; v < V; v++) {
            const real dp = dpre[v * n + i], dq = dpost[v * n + i], t = ti[v], u = ti[V + v];
            sA[v] += dp * t;
            ti[v] = dp * sa * ((real)1 - t * t);
            sB[v] += dq * u;
            ti[V + v] = dq * sb * ((real)1 - u * u);
        }
        for (int j = 0; j < n; j++)
            for (int v = 0; v < V; v++) {
                const real g = dHl[(j * n + i) * V + v], t = ti[(2 + j) * V + v];
                sA[v] += g * t;
                ti[(2 + j) * V + v] = g * sa * ((real)1 - t * t);
            }
    }
    hc_lanes_put(n * m, V, tz, dz, (size_t)s->K);
    for (int v = 0; v < V; v++) {
        dtheta[0] += sA[v];
        dtheta[1] += sB[v];
        for (int i = 0; i < n; i++) {
            dps[i] += dpre[v * n + i];
            dqs[i] += dpost[v * n + i];
            for (int j = 0; j < n; j++) drs[j * n + i] += dHl[(j * n + i) * V + v];
        }
    }
}

HOSTDEV HC_FLATTEN static inline void hc_hc_forward(const hc_spec *s, const real *theta, const real *z, real *pre,
                                                    real *post, real *H) {
    hc_hc_forward_v(s, s->n, 1, theta, z, pre, post, H);
}

HOSTDEV HC_FLATTEN static inline void hc_hc_backward(const hc_spec *s, const real *theta, const real *z,
                                                     const real *dpre, const real *dpost, const real *dH, real *dz,
                                                     real *dtheta) {
    hc_hc_backward_v(s, s->n, 1, theta, z, dpre, dpost, dH, dz, dtheta);
}

/* ---- mhc: Sinkhorn-Knopp on exp(alpha_res mat(z_res) + b_res) ---------------------
 *   theta = [gates, alpha_res, b_res[n*n]]      z = [gates, z_res[n*n]]    K = 2n + n^2
 * With logits L = alpha_res z_res + b_res (row-major, our H convention), `sinkhorn_iters`
 * iterations, each rows then columns (row_col: columns exact) or columns then rows
 * (col_row: rows exact); no epsilon anywhere. Two exact-arithmetic-equal forms, chosen
 * per token from the logits alone (so forward and backward always agree):
 *
 * linear (spread max L - min L <= HC_MHC_LINEAR_SPREAD, every token in practice):
 *   E = exp(L - max L) once; the iterate is M = diag(a) E diag(b), a row step sets
 *   a_i = 1 / sum_j E_ij b_j, a column step b_j = 1 / sum_i a_i E_ij. n^2 exps per token
 *   instead of one per entry per half-step. Every E_ij >= exp(-spread), so the scalings
 *   stay within exp(spread) * n of 1: far inside float's range.
 * log (larger spreads): the iterate kept as potentials, log M = L - r_i - c_j; a row
 *   step sets r = lse_j(L - c), a column step c = lse_i(L - r); lse is shifted by its
 *   max, so any finite logits work.
 * Either way the last half-step normalises in the linear domain, H = e / sum, so the
 * exact side is exact to rounding.
 * Cache: the vector the half-step set (a or b; r or c) after every half-step,
 * 2 * iters * n reals per token.
 * Backward runs the unrolled half-steps in reverse on G = dL(log M): a row step
 * y = x - lse_row(x) has dx = dy - exp(y) * rowsum(dy), with exp(y) = M after the step
 * rebuilt from the cache (linear: E a b, no exp; log: exp(L - r - c)). */

#define HC_MHC_LINEAR_SPREAD 32.0

HOSTDEV static inline int hc_mhc_is_row_step(const hc_spec *s, int t) {
    return ((t & 1) == 0) != (s->sinkhorn_col_first != 0);
}

HOSTDEV static inline void hc_mhc_logits(int n, const real *theta, const real *z, real *Lg) {
    const real a = theta[HC_GATE_THETA(n)];
    const real *b = theta + HC_GATE_THETA(n) + 1, *zr = z + HC_GATE_Z(n);
    for (int i = 0; i < n * n; i++) Lg[i] = a * zr[i] + b[i];
}

/* 1 when the linear form applies; *mx = max L. (NaN logits give a NaN H in either form;
 * the trainer stops on the non-finite loss.) */
HOSTDEV static inline int hc_mhc_linear(int n, const real *Lg, real *mx) {
    real lo = Lg[0], hi = Lg[0];
    for (int i = 1; i < n * n; i++) {
        lo = Lg[i] < lo ? Lg[i] : lo;
        hi = Lg[i] > hi ? Lg[i] : hi;
    }
    *mx = hi;
    return hi - lo <= (real)HC_MHC_LINEAR_SPREAD;
}

/* In lanes (see hc_lanes_get), the cache in lanes too (hc_cache_put): half-step t's n
 * scalings (or potentials) at cache[t * n * V]. The lanes turn the iteration's chain of
 * dependent divisions into independent lanes, and each half-step's scalings are written
 * where the backward reads them: no copy between layouts. */

/* One half-step (lanes; row: a row step, else a column step): sc = 1 / the sums of E's
 * rows (columns) scaled by the other side's scalings; on the last, H = E other / sum. */
HOSTDEV static inline void hc_mhc_half_step_v(const int n, const int V, const int row, const int last,
                                              const real *E, const real *other, real *sc, real *H) {
    const int si = row ? n : 1, sj = row ? 1 : n;   /* E[i][j] of the step's own view */
    real sum[HC_LANES];
    for (int i = 0; i < n; i++) {
        for (int v = 0; v < V; v++) sum[v] = 0;
        for (int j = 0; j < n; j++) {
            const real *e = E + (i * si + j * sj) * V, *o = other + j * V;
            for (int v = 0; v < V; v++) sum[v] += e[v] * o[v];
        }
        for (int v = 0; v < V; v++) sc[i * V + v] = (real)1 / sum[v];
        if (last)
            for (int j = 0; j < n; j++) {
                const int e = (i * si + j * sj) * V;
                for (int v = 0; v < V; v++) H[e + v] = E[e + v] * other[j * V + v] / sum[v];
            }
    }
}

/* The linear form from E = exp(L - max L): H, and the cache of every half-step (lanes:
 * each half-step's scalings straight into their place; the other side's are the
 * previous half-step's). */
HOSTDEV static inline void hc_mhc_scalings_v(const hc_spec *s, const int n, const int V, const real *E, real *H,
                                             real *cache) {
    const int steps = 2 * s->sinkhorn_iters;
    real ones[HC_MAX_N * HC_LANES];
    for (int k = 0; k < n * V; k++) ones[k] = 1;
    const real *prev_a = ones, *prev_b = ones;
    for (int t = 0; t < steps; t++) {
        const int last = t == steps - 1;
        real *slot = cache + (size_t)t * n * V;
        if (hc_mhc_is_row_step(s, t)) {
            hc_mhc_half_step_v(n, V, 1, last, E, prev_b, slot, H);
            prev_a = slot;
        } else {
            hc_mhc_half_step_v(n, V, 0, last, E, prev_a, slot, H);
            prev_b = slot;
        }
    }
}

/* E = exp(L - mx) of one token. */
HOSTDEV static inline void hc_mhc_exp(int n, const real *Lg, real mx, real *E) {
    for (int i = 0; i < n * n; i++) E[i] = Lg[i] - mx;
    hc_exp_many(n * n, E, E); /* the lanes' exp, whatever n: a token's bits never depend on its path */
}

/* One token's linear form. n = 4 compiled as its own copy (the default n). */
HOSTDEV HC_FLATTEN static inline void hc_mhc_sinkhorn_lin(const hc_spec *s, const real *Lg, real mx, real *H,
                                                          real *cache) {
    real E[HC_MM] = {0};
    hc_mhc_exp(s->n, Lg, mx, E);
    if (s->n == 4) hc_mhc_scalings_v(s, 4, 1, E, H, cache);
    else hc_mhc_scalings_v(s, s->n, 1, E, H, cache);
}

HOSTDEV static inline void hc_mhc_sinkhorn_log(const hc_spec *s, const real *Lg, real *H, real *cache) {
    const int n = s->n, steps = 2 * s->sinkhorn_iters;
    real r[HC_MAX_N] = {0}, c[HC_MAX_N] = {0};
    for (int t = 0; t < steps; t++) {
        int row = hc_mhc_is_row_step(s, t), last = t == steps - 1;
        real *pot = row ? r : c;
        const real *other = row ? c : r;
        for (int i = 0; i < n; i++) {      /* row step: over j of L[i][j] - c[j]; column: transposed */
            real mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                real v = (row ? Lg[i * n + j] : Lg[j * n + i]) - other[j];
                mx = v > mx ? v : mx;
            }
            real sum = 0;
            for (int j = 0; j < n; j++) {
                real e = REXP((row ? Lg[i * n + j] : Lg[j * n + i]) - other[j] - mx);
                sum += e;
                if (last) H[row ? i * n + j : j * n + i] = e;
            }
            pot[i] = mx + RLOG(sum);
            /* H = e / sum: the same value as exp(L - r - c), but its sums are exact to
             * rounding even when the potentials are large (|r| ~ 100 would cost 1e-5 in
             * float through exp). */
            if (last)
                for (int j = 0; j < n; j++) H[row ? i * n + j : j * n + i] /= sum;
        }
        for (int i = 0; i < n; i++) cache[t * n + i] = pot[i];
    }
}

HOSTDEV static inline void hc_mhc_forward(const hc_spec *s, const real *theta, const real *z, real *pre, real *post,
                                          real *H, real *cache) {
    real Lg[HC_MM] = {0}, mx = 0;
    hc_gates_forward(s->n, theta, z, pre, post);
    hc_mhc_logits(s->n, theta, z, Lg);
    if (hc_mhc_linear(s->n, Lg, &mx)) hc_mhc_sinkhorn_lin(s, Lg, mx, H, cache);
    else hc_mhc_sinkhorn_log(s, Lg, H, cache);
}

/* M after half-step t (lanes), from the cache (half-step u's scalings at cache[u * n * V]):
 * the linear form's M = diag(a) E diag(b) from X = E, or the log form's
 * M = exp(L - r - c) from X = L. */
HOSTDEV static inline void hc_mhc_iterate_v(const hc_spec *s, const int n, const int V, const int lin,
                                            const real *X, const real *cache, int t, real *M) {
    real unit[HC_MAX_N * HC_LANES];
    const real *r = unit, *c = unit;
    if (t == 0)
        for (int k = 0; k < n * V; k++) unit[k] = lin ? 1 : 0;
    for (int u = t > 0 ? t - 1 : 0; u <= t; u++) {
        const real *p = cache + (size_t)u * n * V;
        if (hc_mhc_is_row_step(s, u)) r = p;
        else c = p;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const int e = (i * n + j) * V;
            if (lin)
                for (int v = 0; v < V; v++) M[e + v] = r[i * V + v] * X[e + v] * c[j * V + v];
            else
                for (int v = 0; v < V; v++) M[e + v] = REXP(X[e + v] - r[i * V + v] - c[j * V + v]);
        }
}

/* Back through one half-step (lanes; row: a row step, else a column step) that left M:
 * y = x - lse(x) over each row (column) has dx = dy - exp(y) sum(dy). */
HOSTDEV static inline void hc_mhc_back_step_v(const int n, const int V, const int row, const real *M, real *G) {
    const int si = row ? n : 1, sj = row ? 1 : n;
    real sum[HC_LANES];
    for (int i = 0; i < n; i++) {
        for (int v = 0; v < V; v++) sum[v] = 0;
        for (int j = 0; j < n; j++)
            for (int v = 0; v < V; v++) sum[v] += G[(i * si + j * sj) * V + v];
        for (int j = 0; j < n; j++) {
            const int e = (i * si + j * sj) * V;
            for (int v = 0; v < V; v++) G[e + v] -= M[e + v] * sum[v];
        }
    }
}

/* G = dL from dH (lanes, the cache too): through H = exp(log M), then the half-steps in
 * reverse. */
HOSTDEV static inline void hc_mhc_unroll_back_v(const hc_spec *s, const int n, const int V, const int lin,
                                                const real *X, const real *cache, const real *dH, real *G) {
    const int steps = 2 * s->sinkhorn_iters;
    real M[HC_MM * HC_LANES];
    for (int t = steps - 1; t >= 0; t--) {
        hc_mhc_iterate_v(s, n, V, lin, X, cache, t, M);
        if (t == steps - 1)
            for (int k = 0; k < n * n * V; k++) G[k] = dH[k] * M[k];
        if (hc_mhc_is_row_step(s, t)) hc_mhc_back_step_v(n, V, 1, M, G);
        else hc_mhc_back_step_v(n, V, 0, M, G);
    }
}

/* dz_res and dtheta from G = dL of V tokens (lanes; z and dz of token v at v * zs). A
 * token's term of alpha_res is summed over its n^2 entries before it is added to dtheta:
 * one addition per token in the chain through dtheta. */
HOSTDEV static inline void hc_mhc_dlogits_v(int n, int V, const real *theta, const real *z, size_t zs,
                                            const real *G, real *dz, real *dtheta) {
    const int g0 = HC_GATE_THETA(n), nn = n * n;
    const real a = theta[g0];
    real zr[HC_MM * HC_LANES], dzr[HC_MM * HC_LANES], sa[HC_LANES];
    hc_lanes_get(nn, V, z + HC_GATE_Z(n), zs, zr);
    for (int v = 0; v < V; v++) sa[v] = 0;
    for (int e = 0; e < nn; e++)
        for (int v = 0; v < V; v++) {
            dzr[e * V + v] = a * G[e * V + v];
            sa[v] += G[e * V + v] * zr[e * V + v];
        }
    hc_lanes_put(nn, V, dzr, dz + HC_GATE_Z(n), zs);
    for (int v = 0; v < V; v++) {
        dtheta[g0] += sa[v];
        for (int e = 0; e < nn; e++) dtheta[g0 + 1 + e] += G[e * V + v];
    }
}

HOSTDEV static inline void hc_mhc_backward_n(const hc_spec *s, const int n, const real *theta, const real *z,
                                             const real *cache, const real *dpre, const real *dpost, const real *dH,
                                             real *dz, real *dtheta) {
    real Lg[HC_MM] = {0}, G[HC_MM] = {0}, E[HC_MM] = {0}, mx = 0;
    hc_gates_backward(n, theta, z, dpre, dpost, dz, dtheta);
    hc_mhc_logits(n, theta, z, Lg);
    const int lin = hc_mhc_linear(n, Lg, &mx);
    if (lin) hc_mhc_exp(n, Lg, mx, E);
    hc_mhc_unroll_back_v(s, n, 1, lin, lin ? E : Lg, cache, dH, G);
    hc_mhc_dlogits_v(n, 1, theta, z, 0, G, dz, dtheta);
}

HOSTDEV HC_FLATTEN static inline void hc_mhc_backward(const hc_spec *s, const real *theta, const real *z,
                                                      const real *cache, const real *dpre, const real *dpost,
                                                      const real *dH, real *dz, real *dtheta) {
    if (s->n == 4) hc_mhc_backward_n(s, 4, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    else hc_mhc_backward_n(s, s->n, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}

#if HC_LANES > 1
/* The logits of HC_LANES tokens in lanes, minus each token's largest: E = L - max L
 * before the exp; 0 when a token takes the log form.
 * (hc_lanes_get fills E[0 .. n n V) for any n >= 1, in its transposed blocks too, but at
 * -O3 GCC 12 loses track of them and calls E "maybe uninitialized": a false alarm that
 * -Werror would turn into a failed `make OPT="-O3 -march=native"`.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static inline int hc_mhc_shifted_logits_v(const int n, const real *theta, const real *z, size_t zs, real *E) {
    const int V = HC_LANES, nn = n * n;
    const real a = theta[HC_GATE_THETA(n)], *b = theta + HC_GATE_THETA(n) + 1;
    real lo[HC_LANES], hi[HC_LANES];
    hc_lanes_get(nn, V, z + HC_GATE_Z(n), zs, E);
    for (int e = 0; e < nn; e++)
        for (int v = 0; v < V; v++) E[e * V + v] = a * E[e * V + v] + b[e];
    for (int v = 0; v < V; v++) lo[v] = hi[v] = E[v];
    for (int e = 1; e < nn; e++) /* hc_mhc_linear's order */
        for (int v = 0; v < V; v++) {
            const real x = E[e * V + v];
            lo[v] = x < lo[v] ? x : lo[v];
            hi[v] = x > hi[v] ? x : hi[v];
        }
    int lin = 1;
    for (int v = 0; v < V; v++) lin &= hi[v] - lo[v] <= (real)HC_MHC_LINEAR_SPREAD;
    if (!lin) return 0;
    for (int e = 0; e < nn; e++)
        for (int v = 0; v < V; v++) E[e * V + v] -= hi[v];
    return 1;
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* HC_LANES consecutive tokens in lanes (z, pre, post, H at strides K, n, n*n; the cache in
 * lanes), when every one takes the linear form; 0 (nothing written) otherwise. */
static inline int hc_mhc_forward_lanes_n(const hc_spec *s, const int n, const real *theta, const real *z, real *pre,
                                         real *post, real *H, real *cache) {
    const int V = HC_LANES, K = s->K, nn = n * n;
    real E[HC_MM * HC_LANES], Hv[HC_MM * HC_LANES];
    if (!hc_mhc_shifted_logits_v(n, theta, z, (size_t)K, E)) return 0;
    hc_exp_many(nn * V, E, E);
    hc_gates_forward_v(n, V, theta, z, (size_t)K, pre, post);
    hc_mhc_scalings_v(s, n, V, E, Hv, cache);
    hc_lanes_put(nn, V, Hv, H, (size_t)nn);
    return 1;
}

/* The backward of the same HC_LANES tokens (dpre, dpost, dH, dz at strides n, n, n*n, K);
 * dtheta gets each token's terms in token order, as token by token. */
static inline int hc_mhc_backward_lanes_n(const hc_spec *s, const int n, const real *theta, const real *z,
                                          const real *cache, const real *dpre, const real *dpost, const real *dH,
                                          real *dz, real *dtheta) {
    const int V = HC_LANES, K = s->K, nn = n * n;
    real E[HC_MM * HC_LANES], dHv[HC_MM * HC_LANES], G[HC_MM * HC_LANES];
    if (!hc_mhc_shifted_logits_v(n, theta, z, (size_t)K, E)) return 0;
    hc_exp_many(nn * V, E, E);
    hc_lanes_get(nn, V, dH, (size_t)nn, dHv);
    hc_mhc_unroll_back_v(s, n, V, 1, E, cache, dHv, G);
    hc_gates_backward_v(n, V, theta, z, (size_t)K, dpre, dpost, dz, dtheta);
    hc_mhc_dlogits_v(n, V, theta, z, (size_t)K, G, dz, dtheta);
    return 1;
}

HC_WIDE HC_FLATTEN static inline int hc_mhc_forward_lanes(const hc_spec *s, const real *theta, const real *z, real *pre,
                                                  real *post, real *H, real *cache) {
    if (s->n == 4) return hc_mhc_forward_lanes_n(s, 4, theta, z, pre, post, H, cache);
    return hc_mhc_forward_lanes_n(s, s->n, theta, z, pre, post, H, cache);
}

HC_WIDE HC_FLATTEN static inline int hc_mhc_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                   const real *cache, const real *dpre, const real *dpost,
                                                   const real *dH, real *dz, real *dtheta) {
    if (s->n == 4) return hc_mhc_backward_lanes_n(s, 4, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    return hc_mhc_backward_lanes_n(s, s->n, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}
#endif

/* ---- permutation mixtures (mhc_lite, the factors of kromhc) ------------------------
 * F (m x m) = sum_k softmax(alpha z + b)_k P_k over np permutations, P_k[i][perms[k*m+i]]
 * = 1. Exactly doubly stochastic and non-negative. Nothing is cached: forward and
 * backward each recompute the softmax (n! can be 40320); backward parks the weights in
 * dz, which it overwrites anyway. The forward sums with Kahan compensation: a plain float
 * sum of 40320 terms leaves row sums off by ~5e-5, compensated ones by ~1e-7.
 * In lanes (see hc_lanes_get): z and dz of token v at [v * zs + k] (each token's own row,
 * so the parked weights are each lane's own), F and dF at [e * V + v]. The table is the
 * same for every token, so every lane runs the same sequence and each compensated add
 * into F is one vector operation over V tokens. The logits go through a block of
 * HC_PERM_BLOCK permutations at a time (a block times V on the stack, whatever n!), the
 * exp is the vector one whatever the count, and the sums into dtheta keep token order. */

#define HC_PERM_BLOCK 16

/* s += x with compensation c (Kahan), in lanes. Needs strict IEEE evaluation (no
 * -ffast-math, no contraction). */
HOSTDEV static inline void hc_kahan_add_v(int V, real *s, real *c, const real *x) {
    for (int v = 0; v < V; v++) {
        real y = x[v] - c[v], t = s[v] + y;
        c[v] = (t - s[v]) - y;
        s[v] = t;
    }
}

/* t[q * V + v] = alpha z_v[k0 + q] + b[k0 + q], q < kb: a block of logits in lanes. */
HOSTDEV static inline void hc_perm_logits_v(int k0, int kb, int V, real alpha, const real *b, const real *z,
                                            size_t zs, real *t) {
    hc_lanes_get(kb, V, z + k0, zs, t);
    for (int q = 0; q < kb; q++)
        for (int v = 0; v < V; v++) t[q * V + v] = alpha * t[q * V + v] + b[k0 + q];
}

HOSTDEV static inline int hc_perm_block(int np, int k0) {
    return np - k0 < HC_PERM_BLOCK ? np - k0 : HC_PERM_BLOCK;
}

/* mx[v] = token v's largest logit. Over k, then the lanes: the compare-and-select chain
 * of one token becomes V independent ones. */
HOSTDEV static inline void hc_perm_max_v(int np, int V, real alpha, const real *b, const real *z, size_t zs,
                                         real *mx) {
    real t[HC_PERM_BLOCK * HC_LANES];
    for (int v = 0; v < V; v++) mx[v] = -INFINITY;
    for (int k0 = 0; k0 < np; k0 += HC_PERM_BLOCK) {
        const int kb = hc_perm_block(np, k0);
        hc_perm_logits_v(k0, kb, V, alpha, b, z, zs, t);
        for (int q = 0; q < kb; q++)
            for (int v = 0; v < V; v++) mx[v] = t[q * V + v] > mx[v] ? t[q * V + v] : mx[v];
    }
}

/* t = exp(logit - mx) of a block, in lanes: the vector exp for any count, so that a
 * token's bits never depend on its path. */
HOSTDEV static inline void hc_perm_exp_v(int k0, int kb, int V, real alpha, const real *b, const real *z, size_t zs,
                                         const real *mx, real *t) {
    hc_perm_logits_v(k0, kb, V, alpha, b, z, zs, t);
    for (int q = 0; q < kb; q++)
        for (int v = 0; v < V; v++) t[q * V + v] -= mx[v];
    hc_exp_many(kb * V, t, t);
}

/* dw[v] = <dF, P> for one permutation p, in lanes. */
HOSTDEV static inline void hc_perm_dot_v(int m, int V, const unsigned char *p, const real *dF, real *dw) {
    for (int v = 0; v < V; v++) dw[v] = 0;
    for (int i = 0; i < m; i++) {
        const real *d = dF + (i * m + p[i]) * V;
        for (int v = 0; v < V; v++) dw[v] += d[v];
    }
}

HOSTDEV static inline void hc_perm_mix_forward_v(int m, int V, int np, const unsigned char *perms,
                                                 real alpha, const real *b, const real *z, size_t zs, real *F) {
    real mx[HC_LANES], sum[HC_LANES], sum_c[HC_LANES], t[HC_PERM_BLOCK * HC_LANES];
    real S[HC_MM * HC_LANES], Sc[HC_MM * HC_LANES]; /* F's sums and their Kahan compensations
                                                       (local: no store into F can alias) */
    hc_perm_max_v(np, V, alpha, b, z, zs, mx);
    for (int e = 0; e < m * m * V; e++) S[e] = Sc[e] = 0;
    for (int v = 0; v < V; v++) sum[v] = sum_c[v] = 0;
    for (int k0 = 0; k0 < np; k0 += HC_PERM_BLOCK) {
        const int kb = hc_perm_block(np, k0);
        hc_perm_exp_v(k0, kb, V, alpha, b, z, zs, mx, t);
        for (int q = 0; q < kb; q++) {
            const real *e = t + q * V;
            const unsigned char *p = perms + (size_t)(k0 + q) * m;
            hc_kahan_add_v(V, sum, sum_c, e);
            for (int i = 0; i < m; i++) {
                const int f = (i * m + p[i]) * V;
                hc_kahan_add_v(V, S + f, Sc + f, e);
            }
        }
    }
    for (int v = 0; v < V; v++) sum[v] = (real)1 / sum[v];
    for (int e = 0; e < m * m; e++)
        for (int v = 0; v < V; v++) F[e * V + v] = S[e * V + v] * sum[v];
}

/* dz = alpha g and db += g (tokens in order) for kb logits, g by token at g[v * HC_PERM_BLOCK
 * + q]. Called with kb = HC_PERM_BLOCK as a constant for whole blocks: gcc -O2 vectorises
 * only loops whose trip count it knows. */
HOSTDEV static inline void hc_perm_grad_put(int kb, int V, real alpha, const real *g, real *dz, size_t zs,
                                           real *db) {
    for (int v = 0; v < V; v++) {
        const real *gv = g + v * HC_PERM_BLOCK;
        real *d = dz + v * zs;
        for (int q = 0; q < kb; q++) d[q] = alpha * gv[q];
        for (int q = 0; q < kb; q++) db[q] += gv[q];
    }
}

/* Given dF (lanes): overwrite dz[np] of every token, set da[v] (token v's term of alpha:
 * the sum of its np terms; the caller adds them into dtheta in its order) and add into
 * db[np] (each k's terms in token order). */
HOSTDEV static inline void hc_perm_mix_backward_v(int m, int V, int np, const unsigned char *perms,
                                                  real alpha, const real *b, const real *z, size_t zs, const real *dF,
                                                  real *dz, real *da, real *db) {
    real mx[HC_LANES], sum[HC_LANES], sum_c[HC_LANES], dot[HC_LANES], dw[HC_LANES];
    real t[HC_PERM_BLOCK * HC_LANES], zt[HC_PERM_BLOCK * HC_LANES];
    hc_perm_max_v(np, V, alpha, b, z, zs, mx);
    for (int v = 0; v < V; v++) sum[v] = sum_c[v] = dot[v] = da[v] = 0;
    /* e = exp(l - mx) parked in dz, its sum, and dot = sum_k e_k dw_k / sum (= sum_k w_k
     * dw_k with w = e / sum, dw_k = <dF, P_k>: one pass over the logits fewer) */
    for (int k0 = 0; k0 < np; k0 += HC_PERM_BLOCK) {
        const int kb = hc_perm_block(np, k0);
        hc_perm_exp_v(k0, kb, V, alpha, b, z, zs, mx, t);
        for (int q = 0; q < kb; q++) {
            const real *e = t + q * V;
            hc_kahan_add_v(V, sum, sum_c, e);
            hc_perm_dot_v(m, V, perms + (size_t)(k0 + q) * m, dF, dw);
            for (int v = 0; v < V; v++) dot[v] += e[v] * dw[v];
        }
        hc_lanes_put(kb, V, t, dz + k0, zs);
    }
    for (int v = 0; v < V; v++) {
        sum[v] = (real)1 / sum[v];
        dot[v] *= sum[v];
    }
    for (int k0 = 0; k0 < np; k0 += HC_PERM_BLOCK) {
        const int kb = hc_perm_block(np, k0);
        hc_lanes_get(kb, V, dz + k0, zs, t);
        for (int q = 0; q < kb; q++) {
            real *w = t + q * V;
            hc_perm_dot_v(m, V, perms + (size_t)(k0 + q) * m, dF, dw);
            for (int v = 0; v < V; v++) w[v] = w[v] * sum[v] * (dw[v] - dot[v]); /* d/d(logit_k) = w_k (dw_k - dot) */
        }
        hc_lanes_get(kb, V, z + k0, zs, zt);
        for (int q = 0; q < kb; q++)
            for (int v = 0; v < V; v++) da[v] += t[q * V + v] * zt[q * V + v];
        hc_lanes_put(kb, V, t, zt, HC_PERM_BLOCK); /* g by token: db's sums over tokens by vectors over k */
        if (kb == HC_PERM_BLOCK) hc_perm_grad_put(HC_PERM_BLOCK, V, alpha, zt, dz + k0, zs, db + k0);
        else hc_perm_grad_put(kb, V, alpha, zt, dz + k0, zs, db + k0);
    }
}

/* One token (V = 1). */
HOSTDEV static inline void hc_perm_mix_forward(int m, int np, const unsigned char *perms, real alpha, const real *b,
                                               const real *z, real *F) {
    hc_perm_mix_forward_v(m, 1, np, perms, alpha, b, z, 0, F);
}

/* mhc_lite: theta = [gates, alpha_res, b_res[n!]], z = [gates, z_res[n!]], K = 2n + n!.
 * V tokens in lanes (z, pre, post, H, dz at strides K, n, n, n*n, K). */
HOSTDEV static inline void hc_mhc_lite_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                 const real *z, real *pre, real *post, real *H) {
    const int g0 = HC_GATE_THETA(n), nn = n * n;
    const size_t K = (size_t)s->K;
    real F[HC_MM * HC_LANES];
    hc_gates_forward_v(n, V, theta, z, K, pre, post);
    hc_perm_mix_forward_v(n, V, s->n_perms, s->perms, theta[g0], theta + g0 + 1, z + HC_GATE_Z(n), K, F);
    hc_lanes_put(nn, V, F, H, (size_t)nn);
}

HOSTDEV static inline void hc_mhc_lite_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                  const real *z, const real *dpre, const real *dpost, const real *dH,
                                                  real *dz, real *dtheta) {
    const int g0 = HC_GATE_THETA(n), nn = n * n;
    const size_t K = (size_t)s->K;
    real dF[HC_MM * HC_LANES], da[HC_LANES];
    hc_lanes_get(nn, V, dH, (size_t)nn, dF);
    hc_gates_backward_v(n, V, theta, z, K, dpre, dpost, dz, dtheta);
    hc_perm_mix_backward_v(n, V, s->n_perms, s->perms, theta[g0], theta + g0 + 1, z + HC_GATE_Z(n), K, dF,
                           dz + HC_GATE_Z(n), da, dtheta + g0 + 1);
    for (int v = 0; v < V; v++) dtheta[g0] += da[v];
}

/* One token (V = 1); n = 4 compiled as its own copy (the default n). */
HOSTDEV HC_FLATTEN static inline void hc_mhc_lite_forward(const hc_spec *s, const real *theta, const real *z,
                                                          real *pre, real *post, real *H) {
    if (s->n == 4) hc_mhc_lite_forward_v(s, 4, 1, theta, z, pre, post, H);
    else hc_mhc_lite_forward_v(s, s->n, 1, theta, z, pre, post, H);
}

HOSTDEV HC_FLATTEN static inline void hc_mhc_lite_backward(const hc_spec *s, const real *theta, const real *z,
                                                           const real *dpre, const real *dpost, const real *dH,
                                                           real *dz, real *dtheta) {
    if (s->n == 4) hc_mhc_lite_backward_v(s, 4, 1, theta, z, dpre, dpost, dH, dz, dtheta);
    else hc_mhc_lite_backward_v(s, s->n, 1, theta, z, dpre, dpost, dH, dz, dtheta);
}

/* ---- kromhc: H = F_0 (x) F_1 (x) ... , each factor a permutation mixture ------------
 *   theta = [gates, alpha_res, b_res[sum_f m_f!]], z = [gates, logits[sum_f m_f!]]
 * Factor f (size m_f) owns the next m_f! logits and the next m_f! * m_f bytes of perms.
 * Kronecker order: stream index i = (i_0 m_1 + i_1) m_2 + i_2 ... (factor 0 outermost),
 * H[i][j] = prod_f F_f[i_f][j_f]. A Kronecker product of doubly stochastic matrices is
 * doubly stochastic. Nothing cached. */

/* The factors of V tokens in lanes (z at stride zs): factor f at F + o_f V, o_f the sum
 * of the earlier factors' m^2, entry [a][b] at ((a m_f + b) V + v). */
HOSTDEV static inline void hc_kromhc_factors_v(const hc_spec *s, const int V, const real *theta, const real *z,
                                               size_t zs, real *F) {
    const int n = s->n, g0 = HC_GATE_THETA(n);
    const real *b = theta + g0 + 1, *zl = z + HC_GATE_Z(n);
    const unsigned char *pp = s->perms;
    for (int f = 0; f < s->n_factors; f++) {
        const int m = s->factors[f], np = hc_factorial(m);
        hc_perm_mix_forward_v(m, V, np, pp, theta[g0], b, zl, zs, F);
        F += m * m * V; b += np; zl += np; pp += (size_t)np * m;
    }
}

/* For every stream index i, its entry offset in each factor: row (digit of i) times m_f
 * plus o_f, with the digits in the factor radices, factor 0 most significant; col[i][f]
 * the same digit alone. */
HOSTDEV static inline void hc_kromhc_index(const hc_spec *s, int row[HC_MAX_N][4], int col[HC_MAX_N][4]) {
    for (int i = 0; i < s->n; i++) {
        int r = i, o = 0;
        for (int f = s->n_factors - 1; f >= 0; f--) {
            col[i][f] = r % s->factors[f];
            r /= s->factors[f];
        }
        for (int f = 0; f < s->n_factors; f++) {
            row[i][f] = o + col[i][f] * s->factors[f];
            o += s->factors[f] * s->factors[f];
        }
    }
}

/* V tokens in lanes (z, pre, post, H, dz at strides K, n, n, n*n, K). */
HOSTDEV static inline void hc_kromhc_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                               const real *z, real *pre, real *post, real *H) {
    const size_t K = (size_t)s->K;
    real F[HC_MM * HC_LANES], Hl[HC_MM * HC_LANES];
    int row[HC_MAX_N][4], col[HC_MAX_N][4];
    hc_gates_forward_v(n, V, theta, z, K, pre, post);
    hc_kromhc_factors_v(s, V, theta, z, K, F);
    hc_kromhc_index(s, row, col);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            real *h = Hl + (i * n + j) * V;
            for (int v = 0; v < V; v++) h[v] = 1;
            for (int f = 0; f < s->n_factors; f++) {
                const real *Ff = F + (row[i][f] + col[j][f]) * V;
                for (int v = 0; v < V; v++) h[v] *= Ff[v];
            }
        }
    hc_lanes_put(n * n, V, Hl, H, (size_t)(n * n));
}

/* dtheta gets each token's terms in token order, as token by token: the factors' terms
 * of alpha_res (shared) by token, then by factor. */
HOSTDEV static inline void hc_kromhc_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                const real *z, const real *dpre, const real *dpost, const real *dH,
                                                real *dz, real *dtheta) {
    const int g0 = HC_GATE_THETA(n), nf = s->n_factors;
    const size_t K = (size_t)s->K;
    real F[HC_MM * HC_LANES], dF[HC_MM * HC_LANES], dHl[HC_MM * HC_LANES], da[4 * HC_LANES];
    int row[HC_MAX_N][4], col[HC_MAX_N][4], tot = 0;
    hc_gates_backward_v(n, V, theta, z, K, dpre, dpost, dz, dtheta);
    hc_kromhc_factors_v(s, V, theta, z, K, F);
    hc_kromhc_index(s, row, col);
    hc_lanes_get(n * n, V, dH, (size_t)(n * n), dHl);
    for (int f = 0; f < nf; f++) tot += s->factors[f] * s->factors[f];
    for (int e = 0; e < tot * V; e++) dF[e] = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            for (int f = 0; f < nf; f++) {
                real t[HC_LANES];
                for (int v = 0; v < V; v++) t[v] = dHl[(i * n + j) * V + v];
                for (int g = 0; g < nf; g++)
                    if (g != f) {
                        const real *Fg = F + (row[i][g] + col[j][g]) * V;
                        for (int v = 0; v < V; v++) t[v] *= Fg[v];
                    }
                real *d = dF + (row[i][f] + col[j][f]) * V;
                for (int v = 0; v < V; v++) d[v] += t[v];
            }
    const real *b = theta + g0 + 1, *zl = z + HC_GATE_Z(n);
    real *dzl = dz + HC_GATE_Z(n), *db = dtheta + g0 + 1, *dFf = dF;
    const unsigned char *pp = s->perms;
    for (int f = 0; f < nf; f++) {
        const int m = s->factors[f], np = hc_factorial(m);
        hc_perm_mix_backward_v(m, V, np, pp, theta[g0], b, zl, K, dFf, dzl, da + f * V, db);
        b += np; zl += np; dzl += np; db += np; dFf += m * m * V; pp += (size_t)np * m;
    }
    for (int v = 0; v < V; v++)
        for (int f = 0; f < nf; f++) dtheta[g0] += da[f * V + v];
}

HOSTDEV static inline void hc_kromhc_forward(const hc_spec *s, const real *theta, const real *z, real *pre,
                                             real *post, real *H) {
    hc_kromhc_forward_v(s, s->n, 1, theta, z, pre, post, H);
}

HOSTDEV static inline void hc_kromhc_backward(const hc_spec *s, const real *theta, const real *z, const real *dpre,
                                              const real *dpost, const real *dH, real *dz, real *dtheta) {
    hc_kromhc_backward_v(s, s->n, 1, theta, z, dpre, dpost, dH, dz, dtheta);
}

/* ---- orthogonal: H = map(skew(gamma tanh(tau z + b))) over the full n x n ----------
 *   theta = [gates, tau, gamma, b_res[n(n-1)/2]], z = [gates, z_res[n(n-1)/2]]
 * map = Cayley (default) or expm (core: expm). Orthogonal, but the mean is not kept.
 * V tokens in lanes (z, pre, post, H, dz at strides K, n, n*n, K; the cache in lanes). */

HOSTDEV static inline void hc_orthogonal_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                   const real *z, real *pre, real *post, real *H, real *cache) {
    const int g0 = HC_GATE_THETA(n), nn = n * n, k = n * (n - 1) / 2;
    const size_t K = (size_t)s->K;
    real Q[HC_MM * HC_LANES], t[HC_ROT_K * HC_LANES];
    hc_gates_forward_v(n, V, theta, z, K, pre, post);
    hc_rot_forward_v(n, V, s->core_expm, theta[g0 + 1], theta[g0], theta + g0 + 2, z + HC_GATE_Z(n), K, Q, t);
    hc_lanes_put(nn, V, Q, H, (size_t)nn);
    hc_cache_put(nn, V, Q, cache, 0);
    hc_cache_put(k, V, t, cache, nn);
}

HOSTDEV static inline void hc_orthogonal_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                                    const real *z, const real *cache, const real *dpre,
                                                    const real *dpost, const real *dH, real *dz, real *dtheta) {
    const int g0 = HC_GATE_THETA(n), nn = n * n, k = n * (n - 1) / 2;
    const size_t K = (size_t)s->K;
    real Q[HC_MM * HC_LANES], t[HC_ROT_K * HC_LANES], dQ[HC_MM * HC_LANES];
    hc_gates_backward_v(n, V, theta, z, K, dpre, dpost, dz, dtheta);
    hc_cache_get(nn, V, cache, 0, Q);
    hc_cache_get(k, V, cache, nn, t);
    hc_lanes_get(nn, V, dH, (size_t)nn, dQ);
    hc_rot_backward_v(n, V, s->core_expm, theta[g0 + 1], theta[g0], z + HC_GATE_Z(n), K, Q, t, dQ, dz + HC_GATE_Z(n),
                      dtheta + g0 + 1, dtheta + g0, dtheta + g0 + 2);
}

/* One token (V = 1); n = 4 compiled as its own copy (the default n). */
HOSTDEV HC_FLATTEN static inline void hc_orthogonal_forward(const hc_spec *s, const real *theta, const real *z,
                                                            real *pre, real *post, real *H, real *cache) {
    if (s->n == 4) hc_orthogonal_forward_v(s, 4, 1, theta, z, pre, post, H, cache);
    else hc_orthogonal_forward_v(s, s->n, 1, theta, z, pre, post, H, cache);
}

HOSTDEV HC_FLATTEN static inline void hc_orthogonal_backward(const hc_spec *s, const real *theta, const real *z,
                                                             const real *cache, const real *dpre, const real *dpost,
                                                             const real *dH, real *dz, real *dtheta) {
    if (s->n == 4) hc_orthogonal_backward_v(s, 4, 1, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    else hc_orthogonal_backward_v(s, s->n, 1, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}

/* ---- s2hc and s2hc_rot: H = J + U_Z U_core Sigma V_core^T U_Z^T --------------------
 * d = n - 1, k = d(d-1)/2.
 *   s2hc:     theta = [gates, tau_u, tau_v, tau_s, gamma_u, gamma_v, b_u[k], b_v[k], b_s[d]]
 *             z     = [gates, z_u[k], z_v[k], z_s[d]]                K = 2n + d^2
 *   s2hc_rot: theta = [gates, tau_u, tau_v, gamma_u, gamma_v, b_u[k], b_v[k]]
 *             z     = [gates, z_u[k], z_v[k]]                        K = 2n + 2k
 *   U_core = map(skew(gamma_u tanh(tau_u z_u + b_u))), V_core likewise (map = Cayley or
 *   expm), Sigma = diag(sigma(tau_s z_s + b_s)) (s2hc_rot: Sigma = I).
 * U_Z is the truncated Helmert basis of the zero-sum subspace (hc_helmert). Since
 * J + U_Z U_Z^T = I, H is computed as H = I + U_Z D U_Z^T with D = U_core Sigma V_core^T - I
 * (d x d): the same matrix, but exactly I when the cores and Sigma are exactly I.
 *
 * sigma (the Sigma map), per diagonal entry u = tau_s z_s + b_s:
 *   init tanh4 (the paper):  sigma(u) = tanh(u); b_s = 4 gives 0.99933, H != I at init.
 *   init exact:              x = tanh(u) / tanh(4), sigma = fold(x): x for |x| <= 1,
 *                            2 - x above 1, -2 - x below -1 (|sigma| <= 1 always).
 *   At init u = b_s = 4 gives sigma = 1 exactly (tanh(4) / tanh(4)) and H = I exactly.
 *   A smooth map bounded by 1 has zero derivative where it reaches 1, so any smooth
 *   design with H = I would freeze Sigma; the fold is a kink at the one value the init
 *   uses, with the derivative of the inner branch there, (1 - tanh^2 4) / tanh 4 =
 *   1.34e-3 (the tanh4 design's own slope / tanh 4). A step that wants Sigma > 1 goes
 *   past the kink and meets the mirrored branch, which pushes it back: the projected-
 *   gradient behaviour of the active constraint |sigma| <= 1, with no dead zone (the
 *   slope is never zero). docs/methods.md has the argument. */

HOSTDEV static inline real hc_helmert(int r, int c) {
    const int i = c + 1;  /* column c is the i-th Helmert contrast, i = 1..n-1 */
    if (r > i) return 0;
    real h = (real)1 / RSQRTV((real)(i * (i + 1)));
    return r < i ? h : -(real)i * h;
}

/* U_Z (n x (n-1)), row-major. */
HOSTDEV static inline void hc_helmert_basis(int n, real *U) {
    for (int r = 0; r < n; r++)
        for (int c = 0; c < n - 1; c++) U[r * (n - 1) + c] = hc_helmert(r, c);
}

/* Sigma and dSigma/du of m entries (any layout) from their t = tanh(u); t4 = tanh 4,
 * taken by the same tanh as t so that u = 4 gives sigma = 1 exactly. The fold is a
 * select per entry (lanes take different branches). */
HOSTDEV static inline void hc_s2hc_sigma_v(int exact, int m, const real *t, real t4, real *sig, real *dsig) {
    if (!exact) {
        for (int i = 0; i < m; i++) {
            sig[i] = t[i];
            dsig[i] = (real)1 - t[i] * t[i];
        }
        return;
    }
    for (int i = 0; i < m; i++) {
        const real x = t[i] / t4, dx = ((real)1 - t[i] * t[i]) / t4;
        const int hi = x > 1, lo = x < -1;
        sig[i] = hi ? (real)2 - x : lo ? (real)-2 - x : x;
        dsig[i] = hi || lo ? -dx : dx;
    }
}

/* One entry: sigma(u), *dsdu. */
HOSTDEV static inline real hc_s2hc_sigma(int exact, real u, real *dsdu) {
    real t[2] = {u, (real)HC_S2HC_SIGMA_BIAS}, sg = 0;
    hc_tanh_many(2, t, t);
    hc_s2hc_sigma_v(exact, 1, t, t[1], &sg, dsdu);
    return sg;
}

/* Offsets into the method part of theta and z (relative to the gates' end); -1 absent. */
typedef struct { int d, k, tau_u, tau_v, tau_s, gamma_u, gamma_v, b_u, b_v, b_s, z_u, z_v, z_s; } hc_s2hc_layout;

HOSTDEV static inline hc_s2hc_layout hc_s2hc_layout_of(int n, int rot_only) {
    hc_s2hc_layout L;
    L.d = n - 1;
    L.k = L.d * (L.d - 1) / 2;
    if (rot_only) {
        L.tau_u = 0; L.tau_v = 1; L.tau_s = -1; L.gamma_u = 2; L.gamma_v = 3;
        L.b_u = 4; L.b_v = 4 + L.k; L.b_s = -1;
        L.z_u = 0; L.z_v = L.k; L.z_s = -1;
    } else {
        L.tau_u = 0; L.tau_v = 1; L.tau_s = 2; L.gamma_u = 3; L.gamma_v = 4;
        L.b_u = 5; L.b_v = 5 + L.k; L.b_s = 5 + 2 * L.k;
        L.z_u = 0; L.z_v = L.k; L.z_s = 2 * L.k;
    }
    return L;
}

/* The token's cache: U's rotation cache (U first), V's, then Sigma sig[d] and dsig/du[d]. */
#define HC_S2HC_CACHE(n) (2 * HC_ROT_CACHE((n) - 1) + 2 * ((n) - 1))

/* U_Z in lanes (the same in every lane). */
HOSTDEV static inline void hc_helmert_basis_v(int n, int V, real *UZ) {
    real U[HC_MM];
    hc_helmert_basis(n, U);
    for (int e = 0; e < n * (n - 1); e++)
        for (int v = 0; v < V; v++) UZ[e * V + v] = U[e];
}

/* V tokens in lanes (z, pre, post, H, dz at strides K, n, n*n, K; the cache in lanes). */
HOSTDEV static inline void hc_s2hc_forward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                             const real *z, real *pre, real *post, real *H, real *cache) {
    const hc_s2hc_layout L = hc_s2hc_layout_of(n, s->method == HC_S2HC_ROT);
    const int d = L.d, k = L.k, rc = HC_ROT_CACHE(d);
    const size_t K = (size_t)s->K;
    const real *th = theta + HC_GATE_THETA(n), *zz = z + HC_GATE_Z(n);
    real U[HC_MM * HC_LANES], Vc[HC_MM * HC_LANES], sig[HC_MAX_N * HC_LANES], dsig[HC_MAX_N * HC_LANES];
    real D[HC_MM * HC_LANES], UZ[HC_MM * HC_LANES], T[HC_MM * HC_LANES], Hl[HC_MM * HC_LANES], S[HC_LANES];
    real t[(2 * HC_ROT_K + HC_MAX_N) * HC_LANES + 1];   /* tanh of U's, V's, Sigma's u; then of 4 */
    real *tU = t, *tV = t + k * V, *ts = t + 2 * k * V;
    const int m = L.b_s < 0 ? 2 * k * V : (2 * k + d) * V, t4 = L.b_s >= 0 && s->exact_init;
    hc_gates_forward_v(n, V, theta, z, K, pre, post);
    hc_rot_pre_v(k, V, th[L.tau_u], th + L.b_u, zz + L.z_u, K, tU);
    hc_rot_pre_v(k, V, th[L.tau_v], th + L.b_v, zz + L.z_v, K, tV);
    if (L.b_s >= 0) hc_rot_pre_v(d, V, th[L.tau_s], th + L.b_s, zz + L.z_s, K, ts);
    t[m] = (real)HC_S2HC_SIGMA_BIAS;
    hc_tanh_many(m + t4, t, t);      /* one call: a token alone pads one vector, not three */
    hc_rot_core_v(d, V, s->core_expm, th[L.gamma_u], tU, U);
    hc_rot_core_v(d, V, s->core_expm, th[L.gamma_v], tV, Vc);
    if (L.b_s < 0)
        for (int i = 0; i < d * V; i++) { sig[i] = 1; dsig[i] = 0; }
    else
        hc_s2hc_sigma_v(s->exact_init, d * V, ts, t[m], sig, dsig);
    for (int a = 0; a < d; a++)          /* D = U Sigma V^T - I */
        for (int b = 0; b < d; b++) {
            for (int v = 0; v < V; v++) S[v] = 0;
            for (int c = 0; c < d; c++)
                for (int v = 0; v < V; v++)
                    S[v] += U[(a * d + c) * V + v] * sig[c * V + v] * Vc[(b * d + c) * V + v];
            for (int v = 0; v < V; v++) D[(a * d + b) * V + v] = S[v] - (real)(a == b);
        }
    hc_helmert_basis_v(n, V, UZ);
    hc_mm_v(n, d, d, V, UZ, D, T);       /* T = U_Z D (n x d) */
    hc_mm_nt_v(n, d, n, V, T, UZ, Hl);   /* H = T U_Z^T */
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++) Hl[(i * n + i) * V + v] += 1;
    hc_lanes_put(n * n, V, Hl, H, (size_t)(n * n));
    hc_cache_put(d * d, V, U, cache, 0);
    hc_cache_put(k, V, tU, cache, d * d);
    hc_cache_put(d * d, V, Vc, cache, rc);
    hc_cache_put(k, V, tV, cache, rc + d * d);
    hc_cache_put(d, V, sig, cache, 2 * rc);
    hc_cache_put(d, V, dsig, cache, 2 * rc + d);
}

HOSTDEV static inline void hc_s2hc_backward_v(const hc_spec *s, const int n, const int V, const real *theta,
                                              const real *z, const real *cache, const real *dpre, const real *dpost,
                                              const real *dH, real *dz, real *dtheta) {
    const hc_s2hc_layout L = hc_s2hc_layout_of(n, s->method == HC_S2HC_ROT);
    const int d = L.d, k = L.k, rc = HC_ROT_CACHE(d);
    const size_t K = (size_t)s->K;
    const real *th = theta + HC_GATE_THETA(n), *zz = z + HC_GATE_Z(n);
    real *dth = dtheta + HC_GATE_THETA(n), *dzz = dz + HC_GATE_Z(n);
    real U[HC_MM * HC_LANES], Vc[HC_MM * HC_LANES], tU[HC_ROT_K * HC_LANES], tV[HC_ROT_K * HC_LANES];
    real sig[HC_MAX_N * HC_LANES], dsig[HC_MAX_N * HC_LANES], du[HC_MAX_N * HC_LANES];
    real UZ[HC_MM * HC_LANES], T[HC_MM * HC_LANES], dHl[HC_MM * HC_LANES], dD[HC_MM * HC_LANES];
    real dU[HC_MM * HC_LANES], dV[HC_MM * HC_LANES], su[HC_LANES], sv[HC_LANES];
    hc_gates_backward_v(n, V, theta, z, K, dpre, dpost, dz, dtheta);
    hc_cache_get(d * d, V, cache, 0, U);
    hc_cache_get(k, V, cache, d * d, tU);
    hc_cache_get(d * d, V, cache, rc, Vc);
    hc_cache_get(k, V, cache, rc + d * d, tV);
    hc_cache_get(d, V, cache, 2 * rc, sig);
    hc_cache_get(d, V, cache, 2 * rc + d, dsig);
    hc_lanes_get(n * n, V, dH, (size_t)(n * n), dHl);
    hc_helmert_basis_v(n, V, UZ);
    hc_mm_tn_v(d, n, n, V, UZ, dHl, T);  /* dD = U_Z^T dH U_Z */
    hc_mm_v(d, n, d, V, T, UZ, dD);
    for (int a = 0; a < d; a++)          /* D = U diag(sig) V^T: dU = dD V Sigma, dV = dD^T U Sigma */
        for (int c = 0; c < d; c++) {
            for (int v = 0; v < V; v++) { su[v] = 0; sv[v] = 0; }
            for (int b = 0; b < d; b++)
                for (int v = 0; v < V; v++) {
                    su[v] += dD[(a * d + b) * V + v] * Vc[(b * d + c) * V + v];
                    sv[v] += dD[(b * d + a) * V + v] * U[(b * d + c) * V + v];
                }
            for (int v = 0; v < V; v++) {
                dU[(a * d + c) * V + v] = su[v] * sig[c * V + v];
                dV[(a * d + c) * V + v] = sv[v] * sig[c * V + v];
            }
        }
    hc_rot_backward_v(d, V, s->core_expm, th[L.gamma_u], th[L.tau_u], zz + L.z_u, K, U, tU, dU, dzz + L.z_u,
                      dth + L.gamma_u, dth + L.tau_u, dth + L.b_u);
    hc_rot_backward_v(d, V, s->core_expm, th[L.gamma_v], th[L.tau_v], zz + L.z_v, K, Vc, tV, dV, dzz + L.z_v,
                      dth + L.gamma_v, dth + L.tau_v, dth + L.b_v);
    if (L.b_s < 0) return;
    for (int c = 0; c < d; c++) {        /* dsigma_c = (U^T dD V)_cc */
        for (int v = 0; v < V; v++) su[v] = 0;
        for (int a = 0; a < d; a++)
            for (int b = 0; b < d; b++)
                for (int v = 0; v < V; v++)
                    su[v] += U[(a * d + c) * V + v] * dD[(a * d + b) * V + v] * Vc[(b * d + c) * V + v];
        for (int v = 0; v < V; v++) du[c * V + v] = su[v] * dsig[c * V + v];
    }
    for (int v = 0; v < V; v++)          /* the sums in token order, as token by token */
        for (int c = 0; c < d; c++) {
            const real g = du[c * V + v];
            dzz[v * K + (size_t)(L.z_s + c)] = g * th[L.tau_s];
            dth[L.tau_s] += g * zz[v * K + (size_t)(L.z_s + c)];
            dth[L.b_s + c] += g;
        }
}

/* One token (V = 1); n = 4 compiled as its own copy (the default n). */
HOSTDEV HC_FLATTEN static inline void hc_s2hc_forward(const hc_spec *s, const real *theta, const real *z, real *pre,
                                                      real *post, real *H, real *cache) {
    if (s->n == 4) hc_s2hc_forward_v(s, 4, 1, theta, z, pre, post, H, cache);
    else hc_s2hc_forward_v(s, s->n, 1, theta, z, pre, post, H, cache);
}

HOSTDEV HC_FLATTEN static inline void hc_s2hc_backward(const hc_spec *s, const real *theta, const real *z,
                                                       const real *cache, const real *dpre, const real *dpost,
                                                       const real *dH, real *dz, real *dtheta) {
    if (s->n == 4) hc_s2hc_backward_v(s, 4, 1, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    else hc_s2hc_backward_v(s, s->n, 1, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}

/* ---- dispatch ----------------------------------------------------------------------- */

/* Per token: z[K] -> pre[n], post[n], H[n*n]; cache[spec->cache] written for backward. */
HOSTDEV static inline void hc_forward(const hc_spec *s, const real *theta, const real *z, real *pre, real *post,
                                      real *H, real *cache) {
    switch (s->method) {
    case HC_IDENTITY: hc_identity_forward(s, theta, z, pre, post, H); break;
    case HC_HC: hc_hc_forward(s, theta, z, pre, post, H); break;
    case HC_MHC: hc_mhc_forward(s, theta, z, pre, post, H, cache); break;
    case HC_MHC_LITE: hc_mhc_lite_forward(s, theta, z, pre, post, H); break;
    case HC_KROMHC: hc_kromhc_forward(s, theta, z, pre, post, H); break;
    case HC_ORTHOGONAL: hc_orthogonal_forward(s, theta, z, pre, post, H, cache); break;
    case HC_S2HC:
    case HC_S2HC_ROT: hc_s2hc_forward(s, theta, z, pre, post, H, cache); break;
    default: break;
    }
}

/* Per token: given dpre[n], dpost[n], dH[n*n], overwrite dz[K] and add into dtheta.
 * cache is what hc_forward wrote for the same token, theta and z (mhc, orthogonal, s2hc
 * and s2hc_rot read it). */
HOSTDEV static inline void hc_backward(const hc_spec *s, const real *theta, const real *z, const real *cache,
                                       const real *dpre, const real *dpost, const real *dH, real *dz,
                                       real *dtheta) {
    switch (s->method) {
    case HC_IDENTITY: hc_identity_backward(s, theta, z, dpre, dpost, dz, dtheta); break;
    case HC_HC: hc_hc_backward(s, theta, z, dpre, dpost, dH, dz, dtheta); break;
    case HC_MHC: hc_mhc_backward(s, theta, z, cache, dpre, dpost, dH, dz, dtheta); break;
    case HC_MHC_LITE: hc_mhc_lite_backward(s, theta, z, dpre, dpost, dH, dz, dtheta); break;
    case HC_KROMHC: hc_kromhc_backward(s, theta, z, dpre, dpost, dH, dz, dtheta); break;
    case HC_ORTHOGONAL: hc_orthogonal_backward(s, theta, z, cache, dpre, dpost, dH, dz, dtheta); break;
    case HC_S2HC:
    case HC_S2HC_ROT: hc_s2hc_backward(s, theta, z, cache, dpre, dpost, dH, dz, dtheta); break;
    default: break;
    }
}

/* ---- many tokens --------------------------------------------------------------------- */

/* Tokens that hc_forward_tokens and hc_backward_tokens take at once: every method runs
 * HC_LANES tokens in vector lanes. */
static inline int hc_lanes(const hc_spec *s) { return s->method == HC_RC ? 1 : HC_LANES; }

#ifndef __CUDACC__
#if HC_LANES > 1
/* HC_LANES consecutive tokens (strides as below) in lanes; n = 4 compiled as its own copy. */
#define HC_LANES_N(f, ...)                                 \
    do {                                                   \
        if (s->n == 4) f(s, 4, HC_LANES, __VA_ARGS__);     \
        else f(s, s->n, HC_LANES, __VA_ARGS__);            \
    } while (0)

HC_WIDE HC_FLATTEN static inline void hc_hc_forward_lanes(const hc_spec *s, const real *theta, const real *z, real *pre,
                                                  real *post, real *H) {
    HC_LANES_N(hc_hc_forward_v, theta, z, pre, post, H);
}

HC_WIDE HC_FLATTEN static inline void hc_hc_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                   const real *dpre, const real *dpost, const real *dH, real *dz,
                                                   real *dtheta) {
    HC_LANES_N(hc_hc_backward_v, theta, z, dpre, dpost, dH, dz, dtheta);
}

HC_FLATTEN static inline void hc_identity_forward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                        real *pre, real *post, real *H) {
    HC_LANES_N(hc_identity_forward_v, theta, z, pre, post, H);
}

HC_FLATTEN static inline void hc_identity_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                         const real *dpre, const real *dpost, real *dz,
                                                         real *dtheta) {
    HC_LANES_N(hc_identity_backward_v, theta, z, dpre, dpost, dz, dtheta);
}

HC_FLATTEN static inline void hc_kromhc_forward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                      real *pre, real *post, real *H) {
    HC_LANES_N(hc_kromhc_forward_v, theta, z, pre, post, H);
}

HC_FLATTEN static inline void hc_kromhc_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                       const real *dpre, const real *dpost, const real *dH,
                                                       real *dz, real *dtheta) {
    HC_LANES_N(hc_kromhc_backward_v, theta, z, dpre, dpost, dH, dz, dtheta);
}

HC_WIDE HC_FLATTEN static inline void hc_mhc_lite_forward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                        real *pre, real *post, real *H) {
    HC_LANES_N(hc_mhc_lite_forward_v, theta, z, pre, post, H);
}

HC_WIDE HC_FLATTEN static inline void hc_mhc_lite_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                         const real *dpre, const real *dpost, const real *dH,
                                                         real *dz, real *dtheta) {
    HC_LANES_N(hc_mhc_lite_backward_v, theta, z, dpre, dpost, dH, dz, dtheta);
}

HC_FLATTEN static inline void hc_orthogonal_forward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                          real *pre, real *post, real *H, real *cache) {
    HC_LANES_N(hc_orthogonal_forward_v, theta, z, pre, post, H, cache);
}

HC_FLATTEN static inline void hc_orthogonal_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                           const real *cache, const real *dpre, const real *dpost,
                                                           const real *dH, real *dz, real *dtheta) {
    HC_LANES_N(hc_orthogonal_backward_v, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}

HC_FLATTEN static inline void hc_s2hc_forward_lanes(const hc_spec *s, const real *theta, const real *z, real *pre,
                                                    real *post, real *H, real *cache) {
    HC_LANES_N(hc_s2hc_forward_v, theta, z, pre, post, H, cache);
}

HC_FLATTEN static inline void hc_s2hc_backward_lanes(const hc_spec *s, const real *theta, const real *z,
                                                     const real *cache, const real *dpre, const real *dpost,
                                                     const real *dH, real *dz, real *dtheta) {
    HC_LANES_N(hc_s2hc_backward_v, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}
#undef HC_LANES_N

/* HC_LANES tokens in lanes; 0 (nothing written) where they must go token by token (mhc:
 * a token in the log form). */
static inline int hc_forward_lanes(const hc_spec *s, const real *theta, const real *z, real *pre, real *post,
                                   real *H, real *cache) {
    switch (s->method) {
    case HC_IDENTITY: hc_identity_forward_lanes(s, theta, z, pre, post, H); return 1;
    case HC_HC: hc_hc_forward_lanes(s, theta, z, pre, post, H); return 1;
    case HC_KROMHC: hc_kromhc_forward_lanes(s, theta, z, pre, post, H); return 1;
    case HC_MHC: return hc_mhc_forward_lanes(s, theta, z, pre, post, H, cache);
    case HC_MHC_LITE: hc_mhc_lite_forward_lanes(s, theta, z, pre, post, H); return 1;
    case HC_ORTHOGONAL: hc_orthogonal_forward_lanes(s, theta, z, pre, post, H, cache); return 1;
    case HC_S2HC:
    case HC_S2HC_ROT: hc_s2hc_forward_lanes(s, theta, z, pre, post, H, cache); return 1;
    default: return 0;
    }
}

static inline int hc_backward_lanes(const hc_spec *s, const real *theta, const real *z, const real *cache,
                                    const real *dpre, const real *dpost, const real *dH, real *dz, real *dtheta) {
    switch (s->method) {
    case HC_IDENTITY: hc_identity_backward_lanes(s, theta, z, dpre, dpost, dz, dtheta); return 1;
    case HC_HC: hc_hc_backward_lanes(s, theta, z, dpre, dpost, dH, dz, dtheta); return 1;
    case HC_KROMHC: hc_kromhc_backward_lanes(s, theta, z, dpre, dpost, dH, dz, dtheta); return 1;
    case HC_MHC: return hc_mhc_backward_lanes(s, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    case HC_MHC_LITE: hc_mhc_lite_backward_lanes(s, theta, z, dpre, dpost, dH, dz, dtheta); return 1;
    case HC_ORTHOGONAL: hc_orthogonal_backward_lanes(s, theta, z, cache, dpre, dpost, dH, dz, dtheta); return 1;
    case HC_S2HC:
    case HC_S2HC_ROT: hc_s2hc_backward_lanes(s, theta, z, cache, dpre, dpost, dH, dz, dtheta); return 1;
    default: return 0;
    }
}
#endif

/* hc_forward of `count` consecutive tokens (z, pre, post, H at strides K, n, n*n), the
 * same bits as token by token. The cache (spec->cache reals per token): each whole group
 * of HC_LANES tokens from the first in lanes, in the group's HC_LANES * spec->cache
 * reals (hc_cache_put); the tokens after the last whole group each in its own layout.
 * hc_backward_tokens reads it so: the backward must take the same tokens from the same
 * first one, in whole groups (the frame's ranges and chunks start at multiples of
 * HC_LANES). */
static inline void hc_forward_tokens(const hc_spec *s, const real *theta, const real *z, int count, real *pre,
                                     real *post, real *H, real *cache) {
    const int n = s->n, K = s->K, cs = s->cache;
    int t = 0;
#if HC_LANES > 1
    if (hc_lanes(s) > 1)
        for (; t + HC_LANES <= count; t += HC_LANES)
            if (!hc_forward_lanes(s, theta, z + (size_t)t * K, pre + t * n, post + t * n, H + (size_t)t * n * n,
                                  cache + (size_t)t * cs))
                for (int u = t; u < t + HC_LANES; u++) { /* token by token, the cache moved into lanes */
                    real own[cs > 0 ? cs : 1];
                    hc_forward(s, theta, z + (size_t)u * K, pre + u * n, post + u * n, H + (size_t)u * n * n, own);
                    hc_cache_token_put(cs, own, cache + (size_t)t * cs, u - t);
                }
#endif
    for (; t < count; t++)
        hc_forward(s, theta, z + (size_t)t * K, pre + t * n, post + t * n, H + (size_t)t * n * n,
                   cache + (size_t)t * cs);
}

/* hc_backward of `count` consecutive tokens (dpre, dpost, dH, dz at strides n, n, n*n,
 * K; the cache as hc_forward_tokens left it), the same bits as token by token (dtheta
 * included). */
static inline void hc_backward_tokens(const hc_spec *s, const real *theta, const real *z, const real *cache,
                                      int count, const real *dpre, const real *dpost, const real *dH, real *dz,
                                      real *dtheta) {
    const int n = s->n, K = s->K, cs = s->cache;
    int t = 0;
#if HC_LANES > 1
    if (hc_lanes(s) > 1)
        for (; t + HC_LANES <= count; t += HC_LANES)
            if (!hc_backward_lanes(s, theta, z + (size_t)t * K, cache + (size_t)t * cs, dpre + t * n, dpost + t * n,
                                   dH + (size_t)t * n * n, dz + (size_t)t * K, dtheta))
                for (int u = t; u < t + HC_LANES; u++) {
                    real own[cs > 0 ? cs : 1];
                    hc_cache_token_get(cs, cache + (size_t)t * cs, u - t, own);
                    hc_backward(s, theta, z + (size_t)u * K, own, dpre + u * n, dpost + u * n,
                                dH + (size_t)u * n * n, dz + (size_t)u * K, dtheta);
                }
#endif
    for (; t < count; t++)
        hc_backward(s, theta, z + (size_t)t * K, cache + (size_t)t * cs, dpre + t * n, dpost + t * n,
                    dH + (size_t)t * n * n, dz + (size_t)t * K, dtheta);
}
#endif

#endif
