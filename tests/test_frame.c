/* test_frame.c: the frame's own small-product kernels (kernels/cpu/hc_frame.c, with bf16
 * operands hc_proj_bf16.c) against sums in double:
 *   hc_x_wt   Z = X W^T     (the coefficient projection z = X W'^T)
 *   hc_at_x   M += A^T X    (the dW product M = (r dz)^T X)
 * over shapes that reach every tile size and every tail (rows not a multiple of the row
 * tile, outputs not a multiple of the output tile, columns past the last vector), each
 * within the float rounding bound of its sum; and a row's z the same bits wherever it
 * sits in a block (a full tile or the tail), so chunk and thread boundaries do not move
 * a token's coefficients. */
#include <float.h>
#include "kernels/cpu/hc_frame.h"
#include "harness/util.h"
#include "tests/t.h"

static void fill(real *v, size_t n, rng_t *r) {
    for (size_t i = 0; i < n; i++) v[i] = (real)(2 * rng_uniform(r) - 1);
}

/* |got - want| within 2 D eps sum|terms| (the bound of a D-term float sum, doubled) */
static int close_to(double got, double want, double abs_sum, size_t D) {
    return fabs(got - want) <= 2.0 * (double)D * FLT_EPSILON * abs_sum + 1e-30;
}

static const size_t rows_list[] = {1, 3, 4, 5, 7, 64, 131};
static const int k_list[] = {1, 5, 6, 7, 8, 12, 17, 24, 32, 33, 96};
static const size_t d_list[] = {16, 18, 30, 128, 512};
#define NELEM(a) (sizeof(a) / sizeof *(a))

/* Every shape of the lists through one kernel's check; a check returns the values off. */
typedef int (*shape_check)(size_t rows, int K, size_t D, rng_t *r);
static void over_shapes(shape_check check, uint64_t seed, const char *what) {
    rng_t r;
    rng_seed(&r, seed);
    int bad = 0, cases = 0;
    for (size_t a = 0; a < NELEM(rows_list); a++)
        for (size_t b = 0; b < NELEM(k_list); b++)
            for (size_t c = 0; c < NELEM(d_list); c++, cases++) {
                const int off = check(rows_list[a], k_list[b], d_list[c], &r);
                if (off && bad < 5)
                    CHECK(0, "%s: rows %zu K %d D %zu: %d values off", what, rows_list[a], k_list[b], d_list[c], off);
                bad += off;
            }
    CHECK(bad == 0, "%s: %d values off over %d shapes", what, bad, cases);
}

static int x_wt_shape(size_t rows, int K, size_t D, rng_t *r) {
    real *X = malloc_check(rows * D * sizeof(real)), *W = malloc_check((size_t)K * D * sizeof(real));
    real *Z = malloc_check(rows * (size_t)K * sizeof(real));
    int bad = 0;
    fill(X, rows * D, r);
    fill(W, (size_t)K * D, r);
    hc_x_wt(Z, X, W, rows, K, D);
    for (size_t t = 0; t < rows; t++)
        for (int k = 0; k < K; k++) {
            double sum = 0, sa = 0;
            for (size_t j = 0; j < D; j++) {
                double p = (double)X[t * D + j] * (double)W[(size_t)k * D + j];
                sum += p;
                sa += fabs(p);
            }
            bad += !close_to(Z[t * (size_t)K + k], sum, sa, D);
        }
    free(X);
    free(W);
    free(Z);
    return bad;
}

static void test_x_wt_against_double(void) { over_shapes(x_wt_shape, 11, "hc_x_wt"); }

static void test_x_wt_row_position(void) {
    rng_t r;
    rng_seed(&r, 12);
    const size_t rows = 7, D = 130; /* a tile of 4, a tail of 3; columns past the vectors */
    const int K = 17;               /* tiles of 6, 6, 5 */
    real X[7 * 130], W[17 * 130], Z[7 * 17], z1[17];
    fill(X, rows * D, &r);
    fill(W, (size_t)K * D, &r);
    hc_x_wt(Z, X, W, rows, K, D);
    int same = 1;
    for (size_t t = 0; t < rows; t++) {
        hc_x_wt(z1, X + t * D, W, 1, K, D);
        same &= memcmp(z1, Z + t * K, sizeof z1) == 0;
    }
    CHECK(same, "a row's z differs between its block and alone");
}

static int at_x_shape(size_t rows, int K, size_t D, rng_t *r) {
    real *A = malloc_check(rows * (size_t)K * sizeof(real)), *X = malloc_check(rows * D * sizeof(real));
    real *M = malloc_check((size_t)K * D * sizeof(real)), *M0 = malloc_check((size_t)K * D * sizeof(real));
    int bad = 0;
    fill(A, rows * (size_t)K, r);
    fill(X, rows * D, r);
    fill(M0, (size_t)K * D, r); /* it adds into M */
    memcpy(M, M0, (size_t)K * D * sizeof(real));
    hc_at_x(M, A, X, rows, K, D);
    for (int k = 0; k < K; k++)
        for (size_t j = 0; j < D; j++) {
            double sum = M0[(size_t)k * D + j], sa = fabs(sum);
            for (size_t t = 0; t < rows; t++) {
                double p = (double)A[t * (size_t)K + k] * (double)X[t * D + j];
                sum += p;
                sa += fabs(p);
            }
            bad += !close_to(M[(size_t)k * D + j], sum, sa, rows + 1);
        }
    free(A);
    free(X);
    free(M);
    free(M0);
    return bad;
}

static void test_at_x_against_double(void) { over_shapes(at_x_shape, 13, "hc_at_x"); }

#if HC_BF16
/* ---- the products with bf16 operands (residual.proj_precision: bf16) ----
 * Each against the sum in double of the products of its operands rounded to bf16 (such a
 * product is exact in float, so only the order of the float sum differs: the same bound
 * as above); and the rounding itself against the hardware's. */
static double bfr(real x) { return (double)hc_bf16_round(x); }

/* 1 while the checks below take the products by AMX tiles (run once without, then, where
 * model_amx_usable, once with) */
static int amx_on;

static void test_bf16_rounding_is_the_hardwares(void) {
    rng_t r;
    rng_seed(&r, 21);
    int bad = 0, n = 0;
    float v[32];
    for (int rep = 0; rep < 20000; rep++) {
        for (int i = 0; i < 32; i++) {
            uint32_t b = (uint32_t)rng_u64(&r);
            if (i % 4 == 1) b = (b & 0xffff0000u) | 0x8000u;        /* ties to even */
            if (i % 8 == 2) b &= 0x807fffffu;                       /* denormals and zeros */
            if (i % 16 == 3) b |= 0x7f800000u;                      /* inf and NaN */
            memcpy(&v[i], &b, sizeof b);
        }
        const hc_bh h = hc_bf16_load32(v, 32);
        uint16_t hw[32];
        memcpy(hw, &h, sizeof hw);
        for (int i = 0; i < 32; i++, n++) bad += hc_bf16_bits(v[i]) != hw[i];
    }
    CHECK(bad == 0, "hc_bf16_bits differs from vcvtne2ps2bf16 on %d of %d values", bad, n);
    CHECK(hc_bf16_bits(1.0f + 1.0f / 256) == 0x3f80 && hc_bf16_bits(1.0f + 3.0f / 256) == 0x3f82,
          "ties round to even");
}

static int x_wt_bf16_shape(size_t rows, int K, size_t D, rng_t *r) {
    real *X = malloc_check(rows * D * sizeof(real)), *W = malloc_check((size_t)K * D * sizeof(real));
    real *g = calloc_check(D, sizeof(real)), *Z = malloc_check(rows * (size_t)K * sizeof(real));
    real *Wf = malloc_check(hc_w_bf16_scratch(K, D) * sizeof(real));
    real *sc = malloc_check(hc_x_wt_bf16_scratch(D) * sizeof(real));
    int bad = 0;
    fill(X, rows * D, r);
    fill(W, (size_t)K * D, r);
    hc_params p = {.g = g, .W = W};
    hc_dims d = {.Kr = K, .D = D};
    hc_scaled_weight_bf16(Wf, &p, &d, amx_on);
    hc_x_wt_bf16(Z, X, Wf, rows, K, D, sc, amx_on);
    for (size_t t = 0; t < rows; t++)
        for (int k = 0; k < K; k++) {
            double sum = 0, sa = 0;
            for (size_t j = 0; j < D; j++) {
                double q = bfr(X[t * D + j]) * bfr(W[(size_t)k * D + j]);
                sum += q;
                sa += fabs(q);
            }
            bad += !close_to(Z[t * (size_t)K + k], sum, sa, D);
        }
    free(X), free(W), free(g), free(Z), free(Wf), free(sc);
    return bad;
}

static void test_x_wt_bf16_against_double(void) {
    over_shapes(x_wt_bf16_shape, 23, amx_on ? "hc_x_wt_bf16 (AMX)" : "hc_x_wt_bf16");
}

static int at_x_bf16_shape(size_t rows, int K, size_t D, rng_t *r) {
    real *A = malloc_check(rows * (size_t)K * sizeof(real)), *X = malloc_check(rows * D * sizeof(real));
    real *M = malloc_check((size_t)K * D * sizeof(real)), *M0 = malloc_check((size_t)K * D * sizeof(real));
    real *sc = malloc_check(hc_at_x_bf16_scratch(K, D) * sizeof(real));
    int bad = 0;
    fill(A, rows * (size_t)K, r);
    fill(X, rows * D, r);
    fill(M0, (size_t)K * D, r);
    memcpy(M, M0, (size_t)K * D * sizeof(real));
    hc_at_x_bf16(M, A, X, rows, K, D, sc, amx_on);
    for (int k = 0; k < K; k++)
        for (size_t j = 0; j < D; j++) {
            double sum = M0[(size_t)k * D + j], sa = fabs(sum);
            for (size_t t = 0; t < rows; t++) {
                double q = bfr(A[t * (size_t)K + k]) * bfr(X[t * D + j]);
                sum += q;
                sa += fabs(q);
            }
            bad += !close_to(M[(size_t)k * D + j], sum, sa, rows + 1);
        }
    free(A), free(X), free(M), free(M0), free(sc);
    return bad;
}

static void test_at_x_bf16_against_double(void) {
    over_shapes(at_x_bf16_shape, 29, amx_on ? "hc_at_x_bf16 (AMX)" : "hc_at_x_bf16");
}

/* W' for the dX pass in pairs of rows (hc_scaled_weight_pairs_bf16), word by word against
 * the scalar rounding of the scaled values: one norm row of n = 4 streams and one per
 * stream, C = 36 (a block of 32 channels in pairs, 4 left over, kept rounded), Kr odd (a
 * zero row in the last pair). */
static void test_weight_pairs_bf16(void) {
    rng_t r;
    rng_seed(&r, 37);
    enum { n = 4, C = 36, C0 = 32 };
    int bad = 0;
    for (int flat = 0; flat < 2; flat++) {
        const int Kr = flat ? 5 : 3, nj = flat ? n : 1, Kp = (Kr + 1) / 2;
        const size_t D = flat ? (size_t)n * C : C;
        real *W = malloc_check((size_t)Kr * D * sizeof(real)), *g = malloc_check(D * sizeof(real));
        real *Wp = malloc_check(((size_t)Kp * nj * C0 + (size_t)Kr * nj * (C - C0)) * sizeof(real));
        fill(W, (size_t)Kr * D, &r);
        fill(g, D, &r);
        hc_params p = {.g = g, .W = W};
        hc_dims d = {.n = n, .C = C, .Kr = Kr, .D = D, .rpt = flat ? 1 : n};
        hc_scaled_weight_pairs_bf16(Wp, &p, &d);
        const uint32_t *o = (const uint32_t *)Wp;
        for (int j = 0; j < nj; j++)
            for (int c = 0; c < C; c++) {
                const size_t col = (size_t)j * C + (size_t)c;
                for (int k = 0; k < Kr; k++) {
                    const real v = W[(size_t)k * D + col] * ((real)1 + g[col]);
                    if (c < C0) {
                        const int q = k / 2;
                        const uint32_t word = o[(((size_t)(c / 16) * Kp + q) * nj + j) * 16 + c % 16];
                        bad += (k % 2 ? word >> 16 : word & 0xffffu) != hc_bf16_bits(v);
                        if (k == Kr - 1 && Kr % 2) bad += (word >> 16) != 0; /* the zero row */
                    } else {
                        bad += Wp[(size_t)Kp * nj * C0 + ((size_t)k * nj + j) * (C - C0) + (c - C0)] != hc_bf16_round(v);
                    }
                }
            }
        free(W), free(g), free(Wp);
    }
    CHECK(bad == 0, "hc_scaled_weight_pairs_bf16: %d values not the rounded W'", bad);
}

/* The products really round: against the fp32 kernel's z, differences of bf16's size. */
static void test_bf16_is_not_fp32(void) {
    rng_t r;
    rng_seed(&r, 31);
    enum { R = 8, K = 12, D = 256 };
    real X[R * D], W[K * D], g[D] = {0}, Z[R * K], Zb[R * K], Wf[32 * D / 2], sc[16 * D / 2];
    fill(X, R * D, &r);
    fill(W, K * D, &r);
    hc_params p = {.g = g, .W = W};
    hc_dims d = {.Kr = K, .D = D};
    hc_scaled_weight_bf16(Wf, &p, &d, amx_on);
    hc_x_wt(Z, X, W, R, K, D);
    hc_x_wt_bf16(Zb, X, Wf, R, K, D, sc, amx_on);
    double worst = 0;
    for (int i = 0; i < R * K; i++) worst = fmax(worst, fabs((double)Z[i] - (double)Zb[i]));
    CHECK(worst > 1e-4 && worst < 0.1, "bf16 z against fp32 z: largest difference %.3g (bf16's rounding is ~1e-2)",
          worst);
}
#endif

int main(void) {
    t_prog_ = "test_frame";
    T_RUN(test_x_wt_against_double);
    T_RUN(test_x_wt_row_position);
    T_RUN(test_at_x_against_double);
#if HC_BF16
    T_RUN(test_bf16_rounding_is_the_hardwares);
    T_RUN(test_x_wt_bf16_against_double);
    T_RUN(test_at_x_bf16_against_double);
    T_RUN(test_bf16_is_not_fp32);
    T_RUN(test_weight_pairs_bf16);
    if (model_amx_usable()) { /* the same checks through the tiles */
        amx_on = 1;
        T_RUN(test_x_wt_bf16_against_double);
        T_RUN(test_at_x_bf16_against_double);
        T_RUN(test_bf16_is_not_fp32);
    } else
        printf("  (no AMX here: the tiles' products not checked)\n");
#endif
    return T_END();
}
