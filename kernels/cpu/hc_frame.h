/* hc_frame.h: internal to the CPU model (harness/model.c), its tests and tools/frame_bench.
 * The hyper-connection frame's kernels on the CPU: the layout of a token's n streams, the
 * coefficient projection's products (register tiles in fp32, hc_frame.c; with bf16 operands
 * by vdpbf16ps or by AMX tiles, hc_proj_bf16.c), the streams stored in bf16, the write-back
 * and the per-token work of the backward (hc_frame.c). They take pointers and sizes
 * (hc_dims, hc_params); harness/model.c runs them in its frame regions (docs/performance.md).
 */
#ifndef S2HC_HC_FRAME_H
#define S2HC_HC_FRAME_H
#include <stddef.h>
#include <stdint.h>
#include "harness/model.h"
#include "kernels/cpu/cpu_math.h"

/* The frame's projection products with bf16 operands (residual.proj_precision: bf16):
 * built where the compiler targets AVX512_BF16 (-march=native on such a CPU), in float. */
#if !REAL_IS_DOUBLE && defined(__AVX512BF16__) && defined(__AVX512BW__)
#define HC_BF16 1
#include <immintrin.h>
#else
#define HC_BF16 0
#endif

/* The same products by AMX tiles (TDPBF16PS: a 16 x 16 fp32 tile += 16 x 32 by 32 x 16
 * bf16), where the build targets AMX-BF16 and the kernel grants the process its tile
 * state (model_amx_usable): the projection's operands rounded as with vdpbf16ps, the sums
 * in fp32 in the tiles' own order. (GCC names the targets __AMX_TILE__ and __AMX_BF16__,
 * clang __AMXTILE__ and __AMXBF16__.) */
#if HC_BF16 && (defined(__AMX_TILE__) || defined(__AMXTILE__)) && (defined(__AMX_BF16__) || defined(__AMXBF16__))
#define HC_AMX 1
#else
#define HC_AMX 0
#endif

/* the fixed-lane vectors of the CPU kernels (kernels/cpu/cpu_math.h) */
typedef cpu_vec hc_vec;
#define HC_VL CPU_VL
#define hc_load cpu_vload
#define hc_store cpu_vstore
#define hc_vsum cpu_vsum
#define hc_vsum_many cpu_vsum_many

/* Weights of a plain sum of stream rows (hc_combine). */
static const real hc_ones[HC_MAX_N] = {1, 1, 1, 1, 1, 1, 1, 1};

/* The frame's parameters of sublayer l. */
typedef struct {
    const real *g, *W, *theta;
    real *dg, *dW, *dtheta;
} hc_params;

/* Sizes of the frame's GEMMs: Kr outputs per norm row of D values. */
typedef struct {
    int n, C, K, rpt, Kr, nt;
    int blk; /* the streams in channel blocks (hc_xv): a training step's, with one norm row */
    const uint32_t *cols; /* then W's column of each position of a token's values (hc_xcol) */
    size_t D, nC, KD;
} hc_dims;

/* How the dX pass takes the projection's term dz W': fp32 products; bf16 operands by
 * vdpbf16ps (W' in pairs of rows, each group's dz in pairs); by AMX tiles (one norm row per
 * token and Kr > 16: each group's products, hc_dx_products_amx); or, with AMX at Kr <= 16,
 * where the tiles' stores cost more than they save and vdpbf16ps runs at a quarter of the
 * FMA's rate (log item 47), the fp32 loop on W' and dz rounded to bf16 (their products are
 * exact in fp32). */
typedef enum { HC_DX_FP32, HC_DX_PAIRS, HC_DX_TILES, HC_DX_ROUNDED } hc_dx_kind;

/* A thread's share of a sublayer's gradient scratch, zeroed a piece at a time (hc_zero_next;
 * harness/model.c, hc_zero_share). */
typedef struct {
    real *p[3];
    size_t left[3];
    int k;
} hc_zero_cursor;

/* The register tiles of z = X W'^T (hc_x_wt, hc_frame.c, says why; hc_x_wt_bf16 takes the
 * same): HC_XW_R rows by up to HC_XW_K outputs. */
#if CPU_NREGS >= 32
#define HC_XW_R 4 /* 24 accumulators, 4 x vectors, a w vector: 29 of 32 registers */
#define HC_XW_K 6
#else
#define HC_XW_R 2 /* 12 + 2 + 1 of 16 (3 x 4 measured 30 % slower: K = 17 left a tile of 1) */
#define HC_XW_K 6
#endif

static inline size_t hc_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The dX pass's projection terms by AMX (one norm row per token): a group's products
 * dz W' (hc_dx_products_amx), a row of hc_amx_pz_row(nC) reals per token (rows, not
 * tiles side by side: in the streams' rows a stream's first position need not be a
 * multiple of 16); W' for them (hc_scaled_weight_dx_amx) is hc_amx_pz_row(nC) 16
 * hc_amx_kq(Kr) words; a group's dz in bf16, 16 rows of 16 hc_amx_kq(Kr) words. */
static inline size_t hc_amx_pz_row(size_t nC) { return (nC + 15) / 16 * 16; }
static inline int hc_amx_kq(int Kr) { return (Kr + 31) / 32; }

#if HC_BF16
typedef __m512bh hc_bh;

/* bf16 of x as its 16 bits, rounded to nearest even; NaN stays NaN, and a denormal becomes
 * a signed zero as vcvtne2ps2bf16 makes it. */
static inline uint32_t hc_bf16_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;
    if (!(b & 0x7f800000u)) return (b >> 16) & 0x8000u;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

static inline float hc_bf16_value(uint32_t h) {
    const uint32_t b = h << 16;
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* x rounded to bf16, as a float (exactly: bf16 is float's upper half). */
static inline float hc_bf16_round(float x) { return hc_bf16_value(hc_bf16_bits(x)); }

/* 32 values x[0..w) (0 past w) as bf16, in order. */
static inline __attribute__((always_inline)) hc_bh hc_bf16_load32(const real *x, int w) {
    if (w >= 32) return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    const __mmask16 lo = (__mmask16)(w >= 16 ? 0xffffu : (1u << w) - 1u);
    const __mmask16 hi = (__mmask16)(w <= 16 ? 0u : (1u << (w - 16)) - 1u);
    return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + 16), _mm512_maskz_loadu_ps(lo, x));
}
#endif

/* ---- the layout of a token's n streams */
size_t hc_xcol(int n, int C, size_t q);
void hc_spread(real *restrict y, const real *restrict x, int n, int C, int blk);
void hc_combine(real *y, const real *w, const real *x0, int m, int C, int blk);

/* ---- the coefficient projection's products and the norm */
void hc_at_x(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D);
void hc_x_wt(real *Z, const real *X, const real *W, size_t rows, int Kr, size_t D);
size_t hc_at_x_bf16_scratch(int Kr, size_t D);
size_t hc_x_wt_bf16_scratch(size_t D);
size_t hc_w_bf16_scratch(int Kr, size_t D);
real hc_rstd_of(const real *x, size_t D);
void hc_scaled_weight(real *restrict Wg, const hc_params *p, const hc_dims *d);
void hc_dx_weights(hc_dx_kind kind, real *Wb, const hc_params *p, const hc_dims *d);
#if HC_BF16
void hc_bf16_round_n(real *x, size_t n);
void hc_x_wt_bf16(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc, int amx);
void hc_at_x_bf16(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc, int amx);
void hc_dz_pairs_bf16(const hc_dims *d, const real *dz, int count, uint32_t *zp);
void hc_scaled_weight_pairs_bf16(real *restrict Wp, const hc_params *p, const hc_dims *d);
void hc_scaled_weight_bf16(real *restrict Wf, const hc_params *p, const hc_dims *d, int amx);
#endif
#if HC_AMX
void hc_scaled_weight_dx_amx(real *restrict Wp, const hc_params *p, const hc_dims *d);
void hc_amx_begin(void);
void hc_dx_products_amx(const real *dz, int g, int Kr, size_t nC, const real *Wp, uint32_t *za, real *pz);
#endif

/* ---- the streams: rounded to bf16, stored in bf16, the write-back */
void hc_round_streams(real *Y, size_t n);
void hc_bf16_widen(real *restrict y, const uint16_t *restrict x, size_t n);
void hc_bf16_narrow(uint16_t *restrict x, real *restrict y, size_t n);
void hc_out_token(int n, int xb, int C, int blk, const void *X, const real *f, const real *H, const real *post,
                  real *Y);

/* ---- the backward's per-token work */
void hc_zero_next(hc_zero_cursor *z, size_t count);
void hc_token_grads(const hc_acts *h, const hc_dims *d, size_t t, const real *X, const real *dY, const real *du,
                    real *dH, real *dpost, real *dpre);
void hc_token_dx_coefs(const hc_acts *h, const hc_dims *d, size_t t, int has_du, real *dz, real *cj, real *pj);
void hc_tokens_dx(const hc_acts *h, const hc_dims *d, size_t t0, int g, const real *Xr, const real *dY,
                  const real *du, real *dX, const real *dz, const real *cj, const real *pj, const real *Wb,
                  const real *wsum, real *sum, const uint32_t *zp, const real *pz);
void hc_tokens_backward(const hc_spec *spec, const hc_params *p, const hc_acts *h, const hc_dims *d, size_t t0,
                        size_t t1, real *Xr, const uint16_t *Xb, const real *dY, const real *du, real *dX, real *dz,
                        const real *Wb, const real *wsum, real *sum, real *my_dtheta, hc_zero_cursor *zc,
                        size_t zper, uint32_t *zp, real *pz, int dz_bf16);
#endif
