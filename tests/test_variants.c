/* test_variants.c: what each residual method promises, checked in float (the precision
 * the harness trains in) on random inputs, including large z and theta.
 *
 *   s2hc, s2hc_rot   row and column sums 1 (1e-6), ||H||_2 = 1 (1e-5, by Jacobi
 *                    eigenvalues of H^T H in double, independent of the method's math),
 *                    deviation singular values <= 1 and equal to |Sigma_ii|
 *   mhc_lite, kromhc doubly stochastic (1e-6), non-negative
 *   mhc              the exact side's sums (1e-6); the other side's error after 20
 *                    iterations is printed and bounded
 *   orthogonal       H^T H = I (1e-5); expm cores det +1 and orthogonal
 *   building blocks  Cayley's closed-form 3x3 inverse = the LU path; Helmert basis
 *                    orthonormal and orthogonal to 1; permutation table order
 *   init             every method's H, pre, post at init equal the paper's digest
 *   gradients        a coarse float finite-difference check of every method, and a
 *                    planted fault (dH transposed) that the same comparison must catch
 *   setup            n outside 2..8 and bad option strings are refused
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../harness/residual/residual.h"
#include "../harness/util.h"
#include "t.h"

#define SUM_TOL 1e-6
#define NORM_TOL 1e-5
/* Sinkhorn's inexact side after 20 iterations, per regime of random logits (moderate,
 * large, very large): measured maxima are printed; the bounds leave ~3x headroom. In the
 * very large regime (|logits| ~ 100) 20 iterations need not converge at all: there only
 * the trivial bound (entries >= 0 with exact sums on the other side: sums in [0, n]). */
static const double mhc_other_bound[3] = {0.03, 0.3, HC_MAX_N};

typedef struct {
    const char *label, *method, *order, *core, *init;
} vcase;

static const vcase cases[] = {
    {"identity", "identity", "row_col", "cayley", "tanh4"},
    {"hc", "hc", "row_col", "cayley", "tanh4"},
    {"mhc", "mhc", "row_col", "cayley", "tanh4"},
    {"mhc/col_row", "mhc", "col_row", "cayley", "tanh4"},
    {"mhc_lite", "mhc_lite", "row_col", "cayley", "tanh4"},
    {"kromhc", "kromhc", "row_col", "cayley", "tanh4"},
    {"orthogonal", "orthogonal", "row_col", "cayley", "tanh4"},
    {"orthogonal/expm", "orthogonal", "row_col", "expm", "tanh4"},
    {"s2hc", "s2hc", "row_col", "cayley", "tanh4"},
    {"s2hc/expm", "s2hc", "row_col", "expm", "tanh4"},
    {"s2hc/exact", "s2hc", "row_col", "cayley", "exact"},
    {"s2hc/expm+exact", "s2hc", "row_col", "expm", "exact"},
    {"s2hc_rot", "s2hc_rot", "row_col", "cayley", "tanh4"},
    {"s2hc_rot/expm", "s2hc_rot", "row_col", "expm", "tanh4"},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

typedef struct {
    const hc_variant *v;
    hc_spec s;
    s2hc_config c;
    real *theta, *z, *cache;
} inst;

/* The config comes from config_defaults (so the defaults themselves are exercised). */
static int inst_make(inst *I, const vcase *vc, int n) {
    char err[256];
    memset(I, 0, sizeof *I);
    config_defaults(&I->c);
    snprintf(I->c.method, sizeof I->c.method, "%s", vc->method);
    I->c.n_streams = n;
    snprintf(I->c.sinkhorn_order, sizeof I->c.sinkhorn_order, "%s", vc->order);
    snprintf(I->c.core, sizeof I->c.core, "%s", vc->core);
    snprintf(I->c.init, sizeof I->c.init, "%s", vc->init);
    I->v = hc_variant_find(vc->method);
    if (!I->v || I->v->setup(&I->s, &I->c, err, sizeof err) != 0) {
        fprintf(stderr, "setup %s n=%d: %s\n", vc->label, n, err);
        return -1;
    }
    I->theta = calloc_check((size_t)I->s.n_theta, sizeof(real));
    I->z = calloc_check((size_t)I->s.K, sizeof(real));
    I->cache = calloc_check((size_t)I->s.cache + 1, sizeof(real));
    return 0;
}

static void inst_free(inst *I) {
    if (I->v && I->v->teardown) I->v->teardown(&I->s);
    free(I->theta); free(I->z); free(I->cache);
}

static void inst_randomise(inst *I, rng_t *r, double sd_theta, double sd_z) {
    I->v->init(&I->s, &I->c, I->theta, (int)(rng_u64(r) % 4));
    for (int i = 0; i < I->s.n_theta; i++) I->theta[i] += (real)(sd_theta * rng_normal(r));
    for (int i = 0; i < I->s.K; i++) I->z[i] = (real)(sd_z * rng_normal(r));
}

static void inst_forward(inst *I, real *pre, real *post, real *H) {
    hc_forward(&I->s, I->theta, I->z, pre, post, H, I->cache);
}

/* ---- independent reference math (double) ------------------------------------------- */

/* Eigenvalues of a symmetric n x n matrix by cyclic Jacobi rotations (A is destroyed). */
static void jacobi_eig(int n, double *A, double *ev) {
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) off += A[p * n + q] * A[p * n + q];
        if (off < 1e-30) break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = A[p * n + q];
                if (fabs(apq) < 1e-300) continue;
                double th = (A[q * n + q] - A[p * n + p]) / (2 * apq);
                double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) {
                    double akp = A[k * n + p], akq = A[k * n + q];
                    A[k * n + p] = c * akp - s * akq;
                    A[k * n + q] = s * akp + c * akq;
                }
                for (int k = 0; k < n; k++) {
                    double apk = A[p * n + k], aqk = A[q * n + k];
                    A[p * n + k] = c * apk - s * aqk;
                    A[q * n + k] = s * apk + c * aqk;
                }
            }
    }
    for (int i = 0; i < n; i++) ev[i] = A[i * n + i];
}

/* Singular values of the n x n matrix M (double), descending. */
static void singular_values(int n, const double *M, double *sv) {
    double G[HC_MM];
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += M[i * n + a] * M[i * n + b];
            G[a * n + b] = s;
        }
    jacobi_eig(n, G, sv);
    for (int i = 0; i < n; i++) sv[i] = sqrt(fmax(sv[i], 0));
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (sv[j] > sv[i]) { double t = sv[i]; sv[i] = sv[j]; sv[j] = t; }
}

static double det_lu(int n, const double *M) {
    double A[HC_MM], det = 1;
    memcpy(A, M, sizeof(double) * n * n);
    for (int k = 0; k < n; k++) {
        int p = k;
        for (int r = k + 1; r < n; r++)
            if (fabs(A[r * n + k]) > fabs(A[p * n + k])) p = r;
        if (p != k) {
            for (int c = 0; c < n; c++) { double t = A[k * n + c]; A[k * n + c] = A[p * n + c]; A[p * n + c] = t; }
            det = -det;
        }
        det *= A[k * n + k];
        for (int r = k + 1; r < n; r++) {
            double l = A[r * n + k] / A[k * n + k];
            for (int c = k; c < n; c++) A[r * n + c] -= l * A[k * n + c];
        }
    }
    return det;
}

static double sum_err(int n, const real *H, int cols) {
    double e = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += cols ? H[j * n + i] : H[i * n + j];
        e = fmax(e, fabs(s - 1));
    }
    return e;
}

static double orth_err(int n, const real *H) {
    double e = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += (double)H[i * n + a] * H[i * n + b];
            e = fmax(e, fabs(s - (a == b)));
        }
    return e;
}

static const double regimes[][2] = {{0.3, 1.0}, {1.0, 3.0}, {3.0, 10.0}};  /* sd theta, sd z */

/* ---- invariants ---------------------------------------------------------------------- */

static void test_s2hc_invariants(void) {
    rng_t r;
    rng_seed(&r, 1);
    double worst_sum = 0, worst_norm = 0, worst_sig = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        if (strncmp(cases[ci].method, "s2hc", 4)) continue;
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, &cases[ci], n)) { CHECK(0, "setup"); continue; }
            for (int t = 0; t < 60; t++) {
                inst_randomise(&I, &r, regimes[t % 3][0], regimes[t % 3][1]);
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                inst_forward(&I, pre, post, H);
                double es = fmax(sum_err(n, H, 0), sum_err(n, H, 1));
                CHECK(es <= SUM_TOL, "%s n=%d: row/col sum error %.3g", cases[ci].label, n, es);
                worst_sum = fmax(worst_sum, es);
                double Hd[HC_MM], Dd[HC_MM], sv[HC_MAX_N], dv[HC_MAX_N];
                for (int i = 0; i < n * n; i++) { Hd[i] = H[i]; Dd[i] = H[i] - 1.0 / n; }
                singular_values(n, Hd, sv);
                CHECK(fabs(sv[0] - 1) <= NORM_TOL, "%s n=%d: ||H||_2 = %.9f", cases[ci].label, n, sv[0]);
                worst_norm = fmax(worst_norm, fabs(sv[0] - 1));
                singular_values(n, Dd, dv);   /* deviation H - J: |Sigma_ii| and one 0 */
                CHECK(dv[0] <= 1 + NORM_TOL, "%s n=%d: deviation sv %.9f > 1", cases[ci].label, n, dv[0]);
                double sig[HC_MAX_N];
                hc_s2hc_layout L = hc_s2hc_layout_of(n, I.s.method == HC_S2HC_ROT);
                const real *th = I.theta + HC_GATE_THETA(n), *zz = I.z + HC_GATE_Z(n);
                for (int i = 0; i < L.d; i++) {
                    real ds;
                    sig[i] = L.b_s < 0 ? 1
                                       : fabs(hc_s2hc_sigma(I.s.exact_init, th[L.tau_s] * zz[L.z_s + i] + th[L.b_s + i], &ds));
                }
                for (int i = 0; i < L.d; i++)
                    for (int j = i + 1; j < L.d; j++)
                        if (sig[j] > sig[i]) { double x = sig[i]; sig[i] = sig[j]; sig[j] = x; }
                for (int i = 0; i < L.d; i++) {
                    CHECK(fabs(dv[i] - sig[i]) <= NORM_TOL, "%s n=%d: deviation sv %d = %.7f vs |Sigma| %.7f",
                          cases[ci].label, n, i, dv[i], sig[i]);
                    worst_sig = fmax(worst_sig, fabs(dv[i] - sig[i]));
                }
                CHECK(dv[n - 1] <= NORM_TOL, "%s n=%d: the mean direction is not annihilated (%g)", cases[ci].label, n,
                      dv[n - 1]);
            }
            inst_free(&I);
        }
    }
    printf("  s2hc, s2hc_rot (float): max row/col sum error %.2e, max | ||H||_2 - 1 | %.2e, max |sv(H-J) - |Sigma|| %.2e\n",
           worst_sum, worst_norm, worst_sig);
}

static void test_birkhoff(void) {
    rng_t r;
    rng_seed(&r, 2);
    const char *which[] = {"mhc_lite", "kromhc"};
    for (int w = 0; w < 2; w++) {
        const vcase *vc = NULL;
        for (int ci = 0; ci < N_CASES; ci++)
            if (!strcmp(cases[ci].label, which[w])) vc = &cases[ci];
        double worst = 0;
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, vc, n)) { CHECK(0, "setup"); continue; }
            int trials = I.s.K > 1000 ? 6 : 60;
            for (int t = 0; t < trials; t++) {
                inst_randomise(&I, &r, regimes[t % 3][0], regimes[t % 3][1]);
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                inst_forward(&I, pre, post, H);
                double es = fmax(sum_err(n, H, 0), sum_err(n, H, 1));
                CHECK(es <= SUM_TOL, "%s n=%d: sum error %.3g", which[w], n, es);
                worst = fmax(worst, es);
                for (int i = 0; i < n * n; i++) CHECK(H[i] >= 0 && H[i] <= 1, "%s n=%d: entry %g", which[w], n, H[i]);
            }
            inst_free(&I);
        }
        printf("  %s (float): max row/col sum error %.2e\n", which[w], worst);
    }
}

/* kromhc at n = 6 is F_0 (2x2) (x) F_1 (3x3): H[i][j] = F_0[i/3][j/3] F_1[i%3][j%3],
 * each factor the permutation mixture of its own logits (random theta). */
static void test_kromhc_kronecker(void) {
    rng_t r;
    rng_seed(&r, 12);
    vcase vc = {"kromhc", "kromhc", "row_col", "cayley", "tanh4"};
    inst I;
    if (inst_make(&I, &vc, 6)) { CHECK(0, "setup"); return; }
    CHECK(I.s.n_factors == 2 && I.s.factors[0] == 2 && I.s.factors[1] == 3 && I.s.n_perms == 8, "factors of 6");
    for (int t = 0; t < 20; t++) {
        inst_randomise(&I, &r, 1.0, 2.0);
        real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM], A[4], B[9];
        inst_forward(&I, pre, post, H);
        int g = HC_GATE_THETA(6), zg = HC_GATE_Z(6);
        unsigned char *p2 = hc_perms_alloc(2), *p3 = hc_perms_alloc(3);
        hc_perm_mix_forward(2, 2, p2, I.theta[g], I.theta + g + 1, I.z + zg, A);
        hc_perm_mix_forward(3, 6, p3, I.theta[g], I.theta + g + 3, I.z + zg + 2, B);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 6; j++)
                CHECK_CLOSE(H[i * 6 + j], A[(i / 3) * 2 + j / 3] * B[(i % 3) * 3 + j % 3], 1e-7, 1e-6, "kron [%d][%d]", i, j);
        CHECK(fabs(A[0] - A[3]) < 1e-7 && fabs(A[0] + A[1] - 1) < 1e-6, "2x2 factor is [[p, 1-p], [1-p, p]]");
        free(p2);
        free(p3);
    }
    inst_free(&I);
}

static void test_mhc_sinkhorn(void) {
    rng_t r;
    rng_seed(&r, 3);
    for (int order = 0; order < 2; order++) {
        const vcase *vc = &cases[order ? 3 : 2];
        double worst_exact = 0, worst_other[3] = {0, 0, 0};
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, vc, n)) { CHECK(0, "setup"); continue; }
            CHECK(I.s.sinkhorn_iters == 20, "default iterations %d", I.s.sinkhorn_iters);
            CHECK(I.s.sinkhorn_col_first == order, "order");
            for (int t = 0; t < 90; t++) {
                int rg = t % 3;
                inst_randomise(&I, &r, regimes[rg][0], regimes[rg][1]);
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                inst_forward(&I, pre, post, H);
                int exact_cols = !order;   /* row_col ends on a column step */
                double ee = sum_err(n, H, exact_cols), eo = sum_err(n, H, !exact_cols);
                CHECK(ee <= SUM_TOL, "%s n=%d: exact side error %.3g", vc->label, n, ee);
                CHECK(eo <= mhc_other_bound[rg], "%s n=%d: other side error %.3g", vc->label, n, eo);
                for (int i = 0; i < n * n; i++) CHECK(H[i] >= 0, "negative");
                worst_exact = fmax(worst_exact, ee);
                worst_other[rg] = fmax(worst_other[rg], eo);
            }
            inst_free(&I);
        }
        printf("  %s (float, 20 iterations): exact %s sums within %.2e; %s sums off by up to %.2e / %.2e / %.2e"
               " (moderate / large / very large logits)\n",
               vc->label, order ? "row" : "column", worst_exact, order ? "column" : "row", worst_other[0],
               worst_other[1], worst_other[2]);
    }
}

/* hc_exp_many and hc_tanh_many (the float build's vector exp and tanh) against double
 * libm over a sweep, at lengths under one vector, whole vectors and a padded tail; the edges: exp underflows to 0 below -87.3 and never overflows, tanh keeps its
 * sign and reaches +-1, NaN stays NaN. */
static void test_exp_tanh_many(void) {
    enum { NV = 4096 + 13 };
    real *x = malloc_check(NV * sizeof(real)), *y = malloc_check(NV * sizeof(real));
    double worst_e = 0, worst_t = 0;
    const int lens[] = {5, 16, 31, 32, 45, NV};
    for (int li = 0; li < 6; li++) {
        const int k = lens[li];
        for (int i = 0; i < k; i++) x[i] = (real)(-87.0 + 175.0 * i / (k - 1));
        hc_exp_many(k, x, y);
        for (int i = 0; i < k; i++) {
            double ref = exp((double)x[i]), e = fabs(y[i] - ref) / ref;
            CHECK(e <= 4e-7, "exp(%.6g) = %.9g, want %.9g (k = %d)", (double)x[i], (double)y[i], ref, k);
            worst_e = fmax(worst_e, e);
        }
        for (int i = 0; i < k; i++) x[i] = (real)(-12.0 + 24.0 * i / (k - 1) + (i % 3 ? 0 : 1e-4 * i / k));
        hc_tanh_many(k, x, y);
        for (int i = 0; i < k; i++) {
            double ref = tanh((double)x[i]), e = fabs(y[i] - ref) / fmax(fabs(ref), 1e-30);
            CHECK(e <= 4e-7, "tanh(%.6g) = %.9g, want %.9g (k = %d)", (double)x[i], (double)y[i], ref, k);
            worst_t = fmax(worst_t, e);
        }
    }
    for (int i = 0; i < 40; i++) x[i] = (real)((i % 2 ? 1 : -1) * pow(10.0, -30 + 0.9 * i)); /* tiny to huge */
    hc_tanh_many(40, x, y);
    for (int i = 0; i < 40; i++) {
        double ref = tanh((double)x[i]), e = fabs(y[i] - ref) / fabs(ref);
        CHECK(e <= 4e-7, "tanh(%.3g) = %.9g, want %.9g", (double)x[i], (double)y[i], ref);
        worst_t = fmax(worst_t, e);
    }
    real edge[32] = {-1000, -88, (real)NAN, 0, 89, 1000, (real)INFINITY, (real)-INFINITY};
    real ye[32], yt[32];
    hc_exp_many(32, edge, ye);
    hc_tanh_many(32, edge, yt);
    CHECK(ye[0] == 0 && isnan(ye[2]) && ye[3] == 1 && ye[7] == 0, "exp edges %g %g %g %g", ye[0], ye[2], ye[3], ye[7]);
    CHECK(yt[0] == -1 && yt[1] == -1 && isnan(yt[2]) && yt[3] == 0 && yt[4] == 1 && yt[5] == 1 && yt[6] == 1 &&
              yt[7] == -1, "tanh edges");
#if HC_VEC_EXP /* the vector exp: 0 below -87.3, saturates at exp(88.3) instead of overflowing */
    CHECK(ye[1] == 0 && isfinite(ye[4]) && ye[4] > 1e38 && isfinite(ye[5]) && isfinite(ye[6]), "exp saturates");
#endif
#if HC_VEC_EXP
    printf("  exp, tanh of many values (%d-lane vector code): ", HC_XL);
#else
    printf("  exp, tanh of many values (libm): ");
#endif
    printf("worst relative error %.2e, %.2e (half a float ulp: 5.96e-08)\n", worst_e, worst_t);
    free(x);
    free(y);
}

/* The data-dependent path a rotation core takes for a token (what lanes must merge by
 * selects): expm its number of squarings; Cayley at d >= 4 the LU's pivot rows (found
 * here in double, as base-d digits); 0 for Cayley's closed forms. */
static int rot_path(int d, int expm, real gamma, const real *tc) {
    real A[HC_MM];
    hc_rot_skew(d, gamma, tc, A);
    if (expm) {
        real nrm = 0, sc;
        for (int i = 0; i < d * d; i++) nrm += A[i] * A[i];
        return hc_expm_scaling(RSQRTV(nrm), &sc);
    }
    if (d < 4) return 0;
    double M[HC_MM];
    int code = 0;
    for (int i = 0; i < d * d; i++) M[i] = A[i] + (i % (d + 1) == 0);
    for (int k = 0; k < d; k++) {
        int p = k;
        for (int r = k + 1; r < d; r++)
            if (fabs(M[r * d + k]) > fabs(M[p * d + k])) p = r;
        for (int c = 0; c < d; c++) { double x = M[k * d + c]; M[k * d + c] = M[p * d + c]; M[p * d + c] = x; }
        for (int r = k + 1; r < d; r++) {
            double l = M[r * d + k] / M[k * d + k];
            for (int c = k; c < d; c++) M[r * d + c] -= l * M[k * d + c];
        }
        code = code * d + p;
    }
    return code;
}

/* hc_forward_tokens / hc_backward_tokens (what the frame calls: mhc, orthogonal, s2hc
 * and s2hc_rot in groups of HC_LANES tokens in vector lanes) against hc_forward /
 * hc_backward token by token: the same bits for every method, n, Sinkhorn order, core
 * and init, with a tail shorter than a group. mhc: one group holds a token whose logits
 * take the log form (that group falls back). The rotation methods get gamma = 3, tau = 1
 * (generators up to +-3; s2hc's tau_s = 1 too) and a token with generator 0 in the
 * first group, so that lanes of one group take different paths (checked: expm
 * squarings, Cayley's pivot rows at d >= 4, exact init's Sigma fold on both sides) that
 * the lanes merge by selects. A lane
 * that read another lane's row or column, a cache written at the wrong stride, or a
 * select that let a lane take another's path changes bits here. */
static void test_many_tokens(void) {
    enum { NT = 2 * HC_LANES + 7 };
    rng_t r;
    rng_seed(&r, 21);
    int groups = 0, mixed_total = 0;
    for (int ci = 0; ci < N_CASES; ci++)
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, &cases[ci], n)) { CHECK(0, "setup"); continue; }
            if (I.s.method == HC_MHC && (n == 3 || n == 5)) { /* other iteration counts, the cache to match */
                I.s.sinkhorn_iters = n == 3 ? 1 : 7;
                I.s.cache = 2 * I.s.sinkhorn_iters * n;
            }
            const hc_spec *s = &I.s;
            const int K = s->K, cs = s->cache, nn = n * n, g0 = HC_GATE_THETA(n);
            const int rot = s->method == HC_ORTHOGONAL || s->method == HC_S2HC || s->method == HC_S2HC_ROT;
            const hc_s2hc_layout L = hc_s2hc_layout_of(n, s->method == HC_S2HC_ROT);
            real *th = I.theta + g0;
            inst_randomise(&I, &r, 0.3, 1.0);
            if (s->method == HC_ORTHOGONAL) { th[0] = 1; th[1] = 3; }
            if (s->method == HC_S2HC || s->method == HC_S2HC_ROT) {
                th[L.tau_u] = th[L.tau_v] = 1;
                th[L.gamma_u] = th[L.gamma_v] = 3;
                if (L.tau_s >= 0) th[L.tau_s] = 1;   /* u = z + b_s, b_s ~ 4: Sigma folded in about half */
            }
            real *z = malloc_check((size_t)NT * K * sizeof(real)), *dz1 = calloc_check((size_t)NT * K, sizeof(real)),
                 *dz2 = calloc_check((size_t)NT * K, sizeof(real));
            real *pre = malloc_check((size_t)NT * n * 2 * sizeof(real)), *post = pre + NT * n;
            real *pre2 = malloc_check((size_t)NT * n * 2 * sizeof(real)), *post2 = pre2 + NT * n;
            real *H = malloc_check((size_t)NT * nn * 2 * sizeof(real)), *H2 = H + NT * nn;
            real *c1 = calloc_check((size_t)NT * cs + 1, sizeof(real)), *c2 = calloc_check((size_t)NT * cs + 1, sizeof(real));
            real *dp = malloc_check((size_t)NT * (2 * n + nn) * sizeof(real)), *dq = dp + NT * n, *dH = dq + NT * n;
            real *th1 = calloc_check((size_t)s->n_theta, sizeof(real)), *th2 = calloc_check((size_t)s->n_theta, sizeof(real));
            for (int i = 0; i < NT * K; i++) z[i] = (real)rng_normal(&r);
            for (int i = 0; i < NT * (2 * n + nn); i++) dp[i] = (real)rng_normal(&r);
            if (s->method == HC_MHC) /* token HC_LANES + 3: a logit spread above the linear form's */
                z[(size_t)(HC_LANES + 3) * K + HC_GATE_Z(n)] = (real)(80 / I.theta[HC_GATE_THETA(n)]);
            if (s->method == HC_MHC_LITE) /* token 9: one logit ~100 above the rest, whose exps flush to 0 */
                z[(size_t)9 * K + HC_GATE_Z(n)] = (real)(100 / I.theta[HC_GATE_THETA(n)]);
            real *z5 = z + 5 * K + HC_GATE_Z(n);   /* token 5: generators tanh(1 * -b + b) = 0 */
            if (s->method == HC_ORTHOGONAL)
                for (int p = 0; p < n * (n - 1) / 2; p++) z5[p] = -th[2 + p];
            if (s->method == HC_S2HC || s->method == HC_S2HC_ROT)
                for (int p = 0; p < L.k; p++) { z5[L.z_u + p] = -th[L.b_u + p]; z5[L.z_v + p] = -th[L.b_v + p]; }
            for (int t = 0; t < NT; t++) {
                hc_forward(s, I.theta, z + t * K, pre + t * n, post + t * n, H + t * nn, c1 + t * cs);
                hc_backward(s, I.theta, z + t * K, c1 + t * cs, dp + t * n, dq + t * n, dH + t * nn, dz1 + t * K, th1);
            }
            hc_forward_tokens(s, I.theta, z, NT, pre2, post2, H2, c2);
            hc_backward_tokens(s, I.theta, z, c2, NT, dp, dq, dH, dz2, th2);
            /* the cache: each whole group in lanes (element e of its token v at e * HC_LANES
               + v), the tail token by token */
            int cache_same = 1;
            for (int t = 0; t < NT; t++)
                for (int e = 0; e < cs; e++) {
                    const int gs = t / HC_LANES * HC_LANES;
                    const real got = gs + HC_LANES <= NT ? c2[(size_t)gs * cs + (size_t)e * HC_LANES + (t - gs)]
                                                         : c2[(size_t)t * cs + e];
                    cache_same &= !memcmp(&got, &c1[(size_t)t * cs + e], sizeof got);
                }
            CHECK(cache_same, "%s n=%d: the cache of many tokens is not in its documented layout", cases[ci].label, n);
            int same = !memcmp(pre, pre2, (size_t)NT * n * 2 * sizeof(real)) &&
                       !memcmp(H, H2, (size_t)NT * nn * sizeof(real)) &&
                       !memcmp(dz1, dz2, (size_t)NT * K * sizeof(real)) &&
                       !memcmp(th1, th2, (size_t)s->n_theta * sizeof(real));
            CHECK(same, "%s n=%d: many tokens differ from token by token", cases[ci].label, n);
            if (s->method == HC_MHC) {
                real Lg[HC_MM], mx;
                hc_mhc_logits(n, I.theta, z + (size_t)(HC_LANES + 3) * K, Lg);
                CHECK(!hc_mhc_linear(n, Lg, &mx), "%s n=%d: the planted token takes the linear form", cases[ci].label, n);
            }
            if (s->method == HC_MHC_LITE) CHECK(hc_lanes(s) == HC_LANES, "%s n=%d: not in lanes", cases[ci].label, n);
            if (rot) {
                CHECK(hc_lanes(s) == HC_LANES, "%s n=%d: not in lanes", cases[ci].label, n);
                const int orth = s->method == HC_ORTHOGONAL, d = orth ? n : n - 1, rc = HC_ROT_CACHE(d);
                const int branchy = (s->core_expm && d >= 2) || d >= 4;
                int mixed = 0, fold = 0;
                for (int gi = 0; gi + HC_LANES <= NT; gi += HC_LANES)
                    for (int core = 0; core < (orth ? 1 : 2); core++) {
                        const real gamma = orth ? th[1] : th[core ? L.gamma_v : L.gamma_u];
                        const real *tc = c1 + (size_t)gi * cs + core * rc + d * d;
                        const int p0 = rot_path(d, s->core_expm, gamma, tc);
                        int differ = 0;
                        for (int v = 1; v < HC_LANES; v++)
                            differ |= rot_path(d, s->core_expm, gamma, tc + (size_t)v * cs) != p0;
                        mixed += differ;
                    }
                if (s->method == HC_S2HC && s->exact_init)   /* dSigma/du < 0: folded */
                    for (int gi = 0; gi + HC_LANES <= NT; gi += HC_LANES) {
                        int neg = 0, pos = 0;
                        for (int v = 0; v < HC_LANES; v++)
                            for (int c = 0; c < d; c++) {
                                const real ds = c1[(size_t)(gi + v) * cs + 2 * rc + d + c];
                                neg += ds < 0;
                                pos += ds > 0;
                            }
                        fold += neg && pos;
                    }
                if (HC_LANES > 1 && branchy)
                    CHECK(mixed > 0, "%s n=%d: no group mixes the cores' paths", cases[ci].label, n);
                if (HC_LANES > 1 && s->method == HC_S2HC && s->exact_init)
                    CHECK(fold > 0, "%s n=%d: no group mixes folded and unfolded Sigma", cases[ci].label, n);
                mixed_total += mixed;
            }
            groups += hc_lanes(s) > 1;
            free(z); free(dz1); free(dz2); free(pre); free(pre2); free(H); free(c1); free(c2); free(dp); free(th1); free(th2);
            inst_free(&I);
        }
    printf("  many-token forms equal token by token (%d configurations in %d-token lanes; %d groups of rotation"
           " cores whose lanes take different paths)\n", groups, HC_LANES, mixed_total);
}

static void test_orthogonal(void) {
    rng_t r;
    rng_seed(&r, 4);
    double worst = 0;
    for (int ci = 0; ci < N_CASES; ci++) {
        if (strcmp(cases[ci].method, "orthogonal")) continue;
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, &cases[ci], n)) { CHECK(0, "setup"); continue; }
            for (int t = 0; t < 60; t++) {
                inst_randomise(&I, &r, regimes[t % 3][0], regimes[t % 3][1]);
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                inst_forward(&I, pre, post, H);
                double e = orth_err(n, H);
                CHECK(e <= NORM_TOL, "%s n=%d: |H^T H - I| %.3g", cases[ci].label, n, e);
                worst = fmax(worst, e);
                double Hd[HC_MM];
                for (int i = 0; i < n * n; i++) Hd[i] = H[i];
                CHECK(fabs(det_lu(n, Hd) - 1) <= NORM_TOL, "%s n=%d: det %g", cases[ci].label, n, det_lu(n, Hd));
            }
            inst_free(&I);
        }
    }
    printf("  orthogonal (float): max |H^T H - I| %.2e\n", worst);
}

/* expm of skew matrices: orthogonal with det +1, including angles beyond Cayley's reach
 * (a rotation by pi has eigenvalue -1: expm reaches it, Cayley only in the limit).
 * The core as the methods use it (hc_rot_forward: expm, then one Newton-Schulz polish)
 * must meet 1e-5; the raw scaling-and-squaring result is reported and held to 1e-4. */
static void test_expm_cores(void) {
    rng_t r;
    rng_seed(&r, 5);
    double worst = 0, worst_raw = 0;
    for (int d = 2; d <= 7; d++)
        for (int t = 0; t < 50; t++) {
            int k = d * (d - 1) / 2;
            real a[28], z[28], A[HC_MM], Q[HC_MM], Qr[HC_MM], rc[HC_ROT_CACHE(HC_MAX_N)];
            real gamma = t % 2 ? (real)6 : (real)1.5;
            for (int p = 0; p < k; p++) { a[p] = (real)rng_normal(&r); z[p] = (real)rng_normal(&r); }
            hc_rot_forward(d, 1, gamma, (real)0.5, a, z, Q, rc);
            for (int i = 0; i < d * d; i++) CHECK(rc[i] == Q[i], "d=%d: the cache holds Q", d);
            hc_rot_skew(d, gamma, rc + d * d, A);   /* the generator from the cached tanh values */
            hc_expm_dual(d, A, NULL, Qr, NULL);
            double Qd[HC_MM], Qrd[HC_MM];
            for (int i = 0; i < d * d; i++) { Qd[i] = Q[i]; Qrd[i] = Qr[i]; }
            double e = orth_err(d, Q), er = orth_err(d, Qr), det = det_lu(d, Qd), detr = det_lu(d, Qrd);
            CHECK(e <= NORM_TOL, "expm core d=%d: |Q^T Q - I| %.3g", d, e);
            CHECK(fabs(det - 1) <= NORM_TOL, "expm core d=%d: det %.9f", d, det);
            CHECK(er <= 1e-4 && fabs(detr - 1) <= 1e-4, "raw expm d=%d: |Q^T Q - I| %.3g det %.9f", d, er, detr);
            for (int i = 0; i < d * d; i++) CHECK(fabs(Q[i] - Qr[i]) <= 1e-4, "polish moved Q by %g", Q[i] - Qr[i]);
            worst = fmax(worst, fmax(e, fabs(det - 1)));
            worst_raw = fmax(worst_raw, fmax(er, fabs(detr - 1)));
        }
    real A[4] = {0, (real)M_PI, -(real)M_PI, 0}, Q[4];
    hc_expm_dual(2, A, NULL, Q, NULL);
    CHECK(fabs(Q[0] + 1) < 1e-5 && fabs(Q[3] + 1) < 1e-5 && fabs(Q[1]) < 1e-5, "expm of a half turn is -I");
    printf("  expm cores d = 2..7 (float): max |Q^T Q - I|, |det - 1| %.2e as used (raw expm %.2e)\n", worst,
           worst_raw);
}

static void test_cayley_closed_form(void) {
    rng_t r;
    rng_seed(&r, 6);
    double worst = 0;
    for (int t = 0; t < 200; t++) {
        real M[9], a[3], Ma[9], Ml[9];
        if (t % 2) {
            for (int p = 0; p < 3; p++) a[p] = (real)(2 * rng_normal(&r));
            hc_skew(3, a, M);
            for (int i = 0; i < 3; i++) M[i * 4] += 1;
        } else {
            for (int i = 0; i < 9; i++) M[i] = (real)rng_normal(&r);
            for (int i = 0; i < 3; i++) M[i * 4] += 3;   /* keep it well conditioned */
        }
        hc_inv3_adj(M, Ma);
        hc_inv_lu(3, M, Ml);
        for (int i = 0; i < 9; i++) {
            double e = fabs(Ma[i] - Ml[i]) / fmax(1, fabs(Ml[i]));
            CHECK(e <= 1e-5, "adjugate vs LU entry %d: %g vs %g", i, Ma[i], Ml[i]);
            worst = fmax(worst, e);
        }
        real P[9];   /* and M M^-1 = I */
        hc_mm(3, 3, 3, M, Ma, P);
        for (int i = 0; i < 9; i++) CHECK(fabs(P[i] - (i % 4 == 0)) <= 1e-5, "M M^-1 entry %d = %g", i, P[i]);
    }
    printf("  Cayley 3x3: closed-form (adjugate) inverse vs LU, max difference %.2e\n", worst);
    /* and the LU path at d = 4..8 inverts I + skew */
    for (int d = 4; d <= HC_MAX_N; d++) {
        real a[28], M[HC_MM], Mi[HC_MM], P[HC_MM];
        for (int p = 0; p < d * (d - 1) / 2; p++) a[p] = (real)(2 * rng_normal(&r));
        hc_skew(d, a, M);
        for (int i = 0; i < d; i++) M[i * d + i] += 1;
        hc_inv_small(d, M, Mi);
        hc_mm(d, d, d, M, Mi, P);
        for (int i = 0; i < d * d; i++) CHECK(fabs(P[i] - (i % (d + 1) == 0)) <= 1e-5, "LU d=%d", d);
    }
}

static void test_helmert(void) {
    for (int n = 2; n <= HC_MAX_N; n++) {
        real U[HC_MAX_N * (HC_MAX_N - 1)];
        hc_helmert_basis(n, U);
        int d = n - 1;
        for (int a = 0; a < d; a++) {
            double s1 = 0;
            for (int i = 0; i < n; i++) s1 += U[i * d + a];
            CHECK(fabs(s1) < 1e-6, "n=%d column %d sums to %g", n, a, s1);
            for (int b = 0; b < d; b++) {
                double s = 0;
                for (int i = 0; i < n; i++) s += (double)U[i * d + a] * U[i * d + b];
                CHECK(fabs(s - (a == b)) < 1e-6, "n=%d U^T U[%d][%d] = %g", n, a, b, s);
            }
        }
    }
    real U[12];   /* the exact form at n = 4: (1,-1,0,0)/sqrt2, (1,1,-2,0)/sqrt6, (1,1,1,-3)/sqrt12 */
    hc_helmert_basis(4, U);
    const double ref[12] = {1 / sqrt(2), 1 / sqrt(6), 1 / sqrt(12), -1 / sqrt(2), 1 / sqrt(6), 1 / sqrt(12),
                            0, -2 / sqrt(6), 1 / sqrt(12), 0, 0, -3 / sqrt(12)};
    for (int i = 0; i < 12; i++) CHECK(fabs(U[i] - ref[i]) < 1e-7, "Helmert n=4 entry %d: %g vs %g", i, U[i], ref[i]);
}

static void test_perm_tables(void) {
    for (int m = 1; m <= HC_MAX_N; m++) {
        unsigned char *t = hc_perms_alloc(m);
        int np = hc_factorial(m);
        for (int i = 0; i < m; i++) CHECK(t[i] == i, "m=%d: the first permutation is not the identity", m);
        for (int k = 1; k < np; k++) {
            CHECK(memcmp(t + (size_t)(k - 1) * m, t + (size_t)k * m, (size_t)m) < 0, "m=%d: not lexicographic at %d", m, k);
            int seen = 0;
            for (int i = 0; i < m; i++) seen |= 1 << t[(size_t)k * m + i];
            CHECK(seen == (1 << m) - 1, "m=%d: row %d is not a permutation", m, k);
        }
        free(t);
    }
    char buf[32];
    CHECK(!strcmp(hc_kromhc_factor_string(4, buf, sizeof buf), "2x2"), "4 -> %s", buf);
    CHECK(!strcmp(hc_kromhc_factor_string(6, buf, sizeof buf), "2x3"), "6 -> %s", buf);
    CHECK(!strcmp(hc_kromhc_factor_string(8, buf, sizeof buf), "2x2x2"), "8 -> %s", buf);
    CHECK(!strcmp(hc_kromhc_factor_string(7, buf, sizeof buf), "7"), "7 -> %s", buf);
    CHECK(!strcmp(hc_kromhc_factor_string(2, buf, sizeof buf), "2"), "2 -> %s", buf);
}

/* ---- init ------------------------------------------------------------------------------ */

static double sigm(double x) { return 1 / (1 + exp(-x)); }

/* Plain (not log-domain) Sinkhorn in double on exp(b), rows then columns: the reference. */
static void sinkhorn_ref(int n, const double *B, int iters, double *H) {
    for (int i = 0; i < n * n; i++) H[i] = exp(B[i]);
    for (int t = 0; t < iters; t++) {
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int j = 0; j < n; j++) s += H[i * n + j];
            for (int j = 0; j < n; j++) H[i * n + j] /= s;
        }
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += H[i * n + j];
            for (int i = 0; i < n; i++) H[i * n + j] /= s;
        }
    }
}

static void test_init(void) {
    for (int ci = 0; ci < N_CASES; ci++) {
        const vcase *vc = &cases[ci];
        for (int n = 2; n <= HC_MAX_N; n++)
            for (int block = 0; block < 3; block++) {
                inst I;
                if (inst_make(&I, vc, n)) { CHECK(0, "setup"); continue; }
                I.v->init(&I.s, &I.c, I.theta, block);   /* z = 0: W = 0 at init */
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                inst_forward(&I, pre, post, H);
                int pref = block % n, id = I.s.method;
                for (int i = 0; i < n; i++) {
                    if (id == HC_HC) {
                        CHECK(pre[i] == (i == pref), "hc pre[%d] = %g", i, pre[i]);
                        CHECK(post[i] == 1, "hc post[%d] = %g", i, post[i]);
                    } else {
                        double b = i == pref ? 1 : -1;
                        CHECK_CLOSE(pre[i], sigm(b), 1e-7, 1e-6, "%s pre[%d]", vc->label, i);
                        CHECK_CLOSE(post[i], 2 * sigm(b), 1e-7, 1e-6, "%s post[%d]", vc->label, i);
                    }
                }
                double ref[HC_MM];
                for (int i = 0; i < n * n; i++) ref[i] = (i % (n + 1) == 0);   /* I by default */
                double tol = 0;   /* exactly I unless said otherwise */
                if (id == HC_MHC) {
                    double B[HC_MM];
                    for (int i = 0; i < n * n; i++) B[i] = i % (n + 1) == 0 ? 0 : HC_MHC_OFFDIAG_BIAS;
                    sinkhorn_ref(n, B, 20, ref);
                    tol = 1e-6;
                } else if (id == HC_MHC_LITE || id == HC_KROMHC) {
                    /* each factor of size m: identity weight w, every other permutation w e^-8 */
                    int f[4], nf = hc_kromhc_factorise(n, f);
                    if (id == HC_MHC_LITE) { nf = 1; f[0] = n; }
                    double F[4][HC_MM];
                    for (int q = 0; q < nf; q++) {
                        int m = f[q];
                        double w = hc_lite_identity_weight(m, -8), wo = w * exp(-8.0);
                        double fix = hc_factorial(m - 1);   /* permutations fixing a given i, and mapping i to j */
                        for (int i = 0; i < m; i++)
                            for (int j = 0; j < m; j++) F[q][i * m + j] = i == j ? w + (fix - 1) * wo : fix * wo;
                    }
                    for (int i = 0; i < n; i++)
                        for (int j = 0; j < n; j++) {
                            double v = 1;
                            int ii = i, jj = j;
                            for (int q = nf - 1; q >= 0; q--) {
                                v *= F[q][(ii % f[q]) * f[q] + jj % f[q]];
                                ii /= f[q]; jj /= f[q];
                            }
                            ref[i * n + j] = v;
                        }
                    tol = 1e-6;
                } else if (id == HC_S2HC && !I.s.exact_init) {
                    double sg = tanh(4.0);
                    for (int i = 0; i < n * n; i++) ref[i] = (i % (n + 1) == 0) * sg + (1 - sg) / n;
                    tol = 1e-7;
                    if (n == 4) {
                        CHECK(fabs(H[0] - 0.999497) < 1e-6, "s2hc n=4 init diagonal %.7f (digest 0.999497)", H[0]);
                        CHECK(fabs(H[1] - 1.68e-4) < 1e-6, "s2hc n=4 init off-diagonal %.4g (digest 1.68e-4)", H[1]);
                    }
                }
                for (int i = 0; i < n * n; i++) {
                    if (tol == 0) CHECK(H[i] == ref[i], "%s n=%d: H[%d] = %.9g, want exactly %g", vc->label, n, i, H[i], ref[i]);
                    else CHECK_CLOSE(H[i], ref[i], tol, 1e-5, "%s n=%d H[%d]", vc->label, n, i);
                }
                inst_free(&I);
            }
    }
    /* the identity weights of mhc_lite at init, both offset modes (docs/methods.md table) */
    printf("  mhc_lite identity weight at init:   n:");
    for (int n = 2; n <= HC_MAX_N; n++) printf("  %7d", n);
    const char *modes[] = {"fixed", "scaled"};
    for (int m = 0; m < 2; m++) {
        printf("\n    lite_offset %-6s                ", modes[m]);
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            vcase vc = {"mhc_lite", "mhc_lite", "row_col", "cayley", "tanh4"};
            if (inst_make(&I, &vc, n)) { CHECK(0, "setup"); continue; }
            snprintf(I.c.lite_offset, sizeof I.c.lite_offset, "%s", modes[m]);
            I.v->init(&I.s, &I.c, I.theta, 0);
            double off = hc_lite_offset(&I.c, n), w = hc_lite_identity_weight(n, off);
            /* the weight from the model's own softmax: H[0][0] minus the other fixing perms */
            real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
            inst_forward(&I, pre, post, H);
            double wo = w * exp(off), implied = H[0] - (hc_factorial(n - 1) - 1) * wo;
            CHECK_CLOSE(implied, w, 1e-6, 1e-5, "identity weight n=%d %s", n, modes[m]);
            printf("  %7.5f", w);
            inst_free(&I);
        }
    }
    printf("\n");
    CHECK(fabs(hc_lite_identity_weight(6, -8) - 0.81) < 0.01, "digest: 0.81 at n = 6");
    CHECK(fabs(hc_lite_identity_weight(8, -8) - 0.07) < 0.01, "digest: 0.07 at n = 8");
}

/* exact init: H = I bit for bit, and the Sigma parameters get a gradient there. */
static void test_exact_init_learns(void) {
    rng_t r;
    rng_seed(&r, 8);
    for (int n = 2; n <= HC_MAX_N; n++)
        for (int core = 0; core < 2; core++) {
            vcase vc = {"s2hc/exact", "s2hc", "row_col", core ? "expm" : "cayley", "exact"};
            inst I;
            if (inst_make(&I, &vc, n)) { CHECK(0, "setup"); continue; }
            I.v->init(&I.s, &I.c, I.theta, 1);
            real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM], dpre[HC_MAX_N], dpost[HC_MAX_N], dH[HC_MM];
            inst_forward(&I, pre, post, H);
            for (int i = 0; i < n * n; i++) CHECK(H[i] == (real)(i % (n + 1) == 0), "exact init n=%d H[%d] = %.9g", n, i, H[i]);
            for (int i = 0; i < n; i++) { dpre[i] = (real)rng_normal(&r); dpost[i] = (real)rng_normal(&r); }
            for (int i = 0; i < n * n; i++) dH[i] = (real)rng_normal(&r);
            real *dz = malloc_check((size_t)I.s.K * sizeof(real)), *dth = calloc_check((size_t)I.s.n_theta, sizeof(real));
            hc_backward(&I.s, I.theta, I.z, I.cache, dpre, dpost, dH, dz, dth);
            hc_s2hc_layout L = hc_s2hc_layout_of(n, 0);
            double g = 0;
            for (int i = 0; i < L.d; i++) g = fmax(g, fabs(dth[HC_GATE_THETA(n) + L.b_s + i]));
            CHECK(g > 1e-5, "exact init n=%d: Sigma gradient %g", n, g);
            /* and the projection rows of Sigma (dz_s) too, through tau_s = 0.01 */
            double gz = 0;
            for (int i = 0; i < L.d; i++) gz = fmax(gz, fabs(dz[HC_GATE_Z(n) + L.z_s + i]));
            CHECK(gz > 1e-7, "exact init n=%d: dz_s %g", n, gz);
            free(dz);
            free(dth);
            inst_free(&I);
        }
}

/* ---- coarse gradient check in float, and the planted fault ----------------------------- */

static double floss(inst *I, const real *dpre, const real *dpost, const real *dH) {
    real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
    inst_forward(I, pre, post, H);
    double L = 0;
    for (int i = 0; i < I->s.n; i++) L += (double)dpre[i] * pre[i] + (double)dpost[i] * post[i];
    for (int i = 0; i < I->s.n * I->s.n; i++) L += (double)dH[i] * H[i];
    return L;
}

/* max |analytic - fd| / max |fd| over dz and dtheta (at most 200 coordinates each). */
static double ffd_compare(inst *I, const real *dpre, const real *dpost, const real *dH, int transpose_fault) {
    const int n = I->s.n, K = I->s.K, T = I->s.n_theta;
    const real eps = (real)1e-2;
    real dHb[HC_MM];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) dHb[i * n + j] = transpose_fault ? dH[j * n + i] : dH[i * n + j];
    real *dz = malloc_check((size_t)K * sizeof(real)), *dth = calloc_check((size_t)T, sizeof(real));
    floss(I, dpre, dpost, dH);
    hc_backward(&I->s, I->theta, I->z, I->cache, dpre, dpost, dHb, dz, dth);
    double num = 0, den = 1e-3;
    for (int which = 0; which < 2; which++) {
        real *x = which ? I->theta : I->z;
        real *g = which ? dth : dz;
        int len = which ? T : K;
        for (int i = 0; i < len && i < 200; i++) {
            real x0 = x[i];
            x[i] = x0 + eps;
            double lp = floss(I, dpre, dpost, dH);
            x[i] = x0 - eps;
            double lm = floss(I, dpre, dpost, dH);
            x[i] = x0;
            double f = (lp - lm) / (2 * eps);
            num = fmax(num, fabs(g[i] - f));
            den = fmax(den, fabs(f));
        }
    }
    free(dz);
    free(dth);
    return num / den;
}

static void test_float_gradients_and_planted_fault(void) {
    rng_t r;
    rng_seed(&r, 9);
    for (int ci = 0; ci < N_CASES; ci++) {
        int n = 3;   /* n = 3: no method has a symmetric H by construction there */
        inst I;
        if (inst_make(&I, &cases[ci], n)) { CHECK(0, "setup"); continue; }
        inst_randomise(&I, &r, 0.5, 1.0);
        real dpre[HC_MAX_N], dpost[HC_MAX_N], dH[HC_MM];
        for (int i = 0; i < n; i++) { dpre[i] = (real)rng_normal(&r); dpost[i] = (real)rng_normal(&r); }
        for (int i = 0; i < n * n; i++) dH[i] = (real)rng_normal(&r);
        double ok = ffd_compare(&I, dpre, dpost, dH, 0);
        CHECK(ok < 2e-3, "%s: float gradient vs FD %.3g", cases[ci].label, ok);
        if (I.s.method != HC_IDENTITY) {   /* identity ignores dH */
            /* The fault lives in the H_res path: upstream only through dH, and theta
             * drawn away from the near-identity init so H really mixes the streams. */
            for (int i = 0; i < n; i++) dpre[i] = dpost[i] = 0;
            double good = 0, bad = 0;
            for (int draw = 0; draw < 3; draw++) {   /* the worst-caught of 3 draws must be caught */
                for (int i = 0; i < I.s.n_theta; i++) I.theta[i] = (real)rng_normal(&r);
                good = fmax(good, ffd_compare(&I, dpre, dpost, dH, 0));
                bad = fmax(bad, ffd_compare(&I, dpre, dpost, dH, 1));
            }
            /* float FD with eps 1e-2 on fully random theta: truncation ~1e-3 (double FD
             * checks these gradients to 1e-8); the fault shows up as O(0.1 .. 10) */
            CHECK(good < 1e-2, "%s: float gradient (H path) vs FD %.3g", cases[ci].label, good);
            CHECK(bad > 1e-1, "%s: planted fault (dH transposed) NOT caught: %.3g", cases[ci].label, bad);
            printf("  float FD %-16s true %.1e   dH transposed %.1e\n", cases[ci].label, good, bad);
        }
        inst_free(&I);
    }
}

/* ---- setup and the tensor tables --------------------------------------------------------- */

static void test_setup(void) {
    for (int vi = 0; hc_variants[vi]; vi++) {
        const hc_variant *v = hc_variants[vi];
        s2hc_config c;
        config_defaults(&c);
        snprintf(c.method, sizeof c.method, "%s", v->name);
        char err[256];
        hc_spec s;
        int bad_n[] = {0, 1, 9, -3};
        for (int b = 0; b < 4; b++) {
            c.n_streams = bad_n[b];
            memset(&s, 0, sizeof s);
            err[0] = '\0';
            CHECK(v->setup(&s, &c, err, sizeof err) == -1 && err[0], "%s accepted n = %d", v->name, bad_n[b]);
        }
        for (int n = 2; n <= HC_MAX_N; n++) {
            c.n_streams = n;
            memset(&s, 0, sizeof s);
            CHECK(v->setup(&s, &c, err, sizeof err) == 0, "%s n=%d: %s", v->name, n, err);
            CHECK(s.method == v->id && s.n == n, "%s: spec ids", v->name);
            hc_tensor ts[HC_MAX_TENSORS];
            int nt = v->tensors(&s, ts);
            size_t sum = 0;
            for (int i = 0; i < nt; i++) {
                CHECK(ts[i].size > 0, "%s n=%d: empty tensor %s", v->name, n, ts[i].name);
                sum += ts[i].size;
                for (int j = 0; j < i; j++) CHECK(strcmp(ts[i].name, ts[j].name), "%s: duplicate %s", v->name, ts[i].name);
            }
            CHECK(sum == (size_t)s.n_theta, "%s n=%d: tensors sum to %zu, n_theta %d", v->name, n, sum, s.n_theta);
            /* the closed formula is gain + W + theta for this spec */
            double C = 16, nC = n * C;
            double f = s.norm == HC_NORM_FLAT ? nC + s.K * nC + s.n_theta : C + (s.K / n) * C + s.n_theta;
            CHECK(f == v->aux_params(n, C), "%s n=%d: aux formula %.0f vs spec %.0f", v->name, n, v->aux_params(n, C), f);
            if (v->teardown) v->teardown(&s);
        }
    }
    const char *opts[][3] = {{"mhc", "sinkhorn_order", "rows"}, {"mhc_lite", "lite_offset", "big"},
                             {"kromhc", "lite_offset", "big"},  {"s2hc", "core", "svd"},
                             {"s2hc", "init", "zero"},         {"orthogonal", "core", "qr"}};
    for (int o = 0; o < 6; o++) {
        s2hc_config c;
        config_defaults(&c);
        snprintf(c.method, sizeof c.method, "%s", opts[o][0]);
        c.n_streams = 4;
        if (!strcmp(opts[o][1], "sinkhorn_order")) snprintf(c.sinkhorn_order, sizeof c.sinkhorn_order, "%s", opts[o][2]);
        if (!strcmp(opts[o][1], "lite_offset")) snprintf(c.lite_offset, sizeof c.lite_offset, "%s", opts[o][2]);
        if (!strcmp(opts[o][1], "core")) snprintf(c.core, sizeof c.core, "%s", opts[o][2]);
        if (!strcmp(opts[o][1], "init")) snprintf(c.init, sizeof c.init, "%s", opts[o][2]);
        hc_spec s;
        memset(&s, 0, sizeof s);
        char err[256] = "";
        CHECK(hc_variant_find(opts[o][0])->setup(&s, &c, err, sizeof err) == -1, "%s accepted %s = %s", opts[o][0],
              opts[o][1], opts[o][2]);
        CHECK(strstr(err, opts[o][1]) != NULL, "error names the key: '%s'", err);
    }
    s2hc_config c;
    config_defaults(&c);
    snprintf(c.method, sizeof c.method, "mhc");
    c.sinkhorn_iters = 0;
    hc_spec s;
    char err[256];
    CHECK(hc_variant_find("mhc")->setup(&s, &c, err, sizeof err) == -1, "mhc accepted 0 iterations");
    CHECK(hc_variant_find("rc") == NULL, "rc has no frame");
}

int main(void) {
    T_NAME("test_variants");
    T_RUN(test_s2hc_invariants);
    T_RUN(test_birkhoff);
    T_RUN(test_kromhc_kronecker);
    T_RUN(test_mhc_sinkhorn);
    T_RUN(test_many_tokens);
    T_RUN(test_exp_tanh_many);
    T_RUN(test_orthogonal);
    T_RUN(test_expm_cores);
    T_RUN(test_cayley_closed_form);
    T_RUN(test_helmert);
    T_RUN(test_perm_tables);
    T_RUN(test_init);
    T_RUN(test_exact_init_learns);
    T_RUN(test_float_gradients_and_planted_fault);
    T_RUN(test_setup);
    return T_END();
}
