/* test_probes.c: every probe statistic against an independent computation.
 *  - small SVD (one-sided Jacobi) against the eigenvalues of AᵀA from a symmetric Jacobi
 *    eigen-solver, on random, diagonal, rank-deficient, orthogonal, doubly stochastic and
 *    rectangular matrices; deviation singular values of known matrices;
 *  - composite products and cumulative norms against a naive loop;
 *  - cosine similarity through the Gram matrix against the direct formula on H·X;
 *  - percentiles against a sorted array; histogram counts and bins;
 *  - diagonal dominance: identity yes, any other permutation no;
 *  - probe_step on a model against statistics recomputed from its activations;
 *  - the probes leave parameters, gradients and inputs bit for bit as they were;
 *  - an identity model reports exactly the identity; an rc model records no H_res;
 *  - the run file is written, read back and compared;
 *  - `s2hc inspect` on a run file of known matrices: every number it prints (H_res, row and
 *    column sums, singular values, diagonal share, largest off-diagonal, the summary CSV,
 *    the step selected, the Jacobian line) against values worked out in the test;
 *  - the Jacobian estimate: 1 for identity without branches, and the top singular value of
 *    the full Jacobian built column by column with the VJP on a tiny model.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "../harness/model.h"
#include "../harness/util.h"
#include "../probes/probes.h"
#include "t.h"
#include "t_model.h"

static char tmp[512];

static int T_VERBOSE_ON(void) { return getenv("T_VERBOSE") != NULL; }

/* ---- the second method: eigenvalues of a symmetric matrix by cyclic Jacobi ------------- */

static void sym_eig(double *A, int n, double *eig) { /* destroys A */
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0, tot = 0;
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                tot += A[i * n + j] * A[i * n + j];
                if (i != j) off += A[i * n + j] * A[i * n + j];
            }
        if (off <= 1e-30 * tot || off == 0) break;
        for (int p = 0; p < n - 1; p++)
            for (int q = p + 1; q < n; q++) {
                double apq = A[p * n + q];
                if (apq == 0) continue;
                double theta = (A[q * n + q] - A[p * n + p]) / (2 * apq);
                double t = (theta >= 0 ? 1.0 : -1.0) / (fabs(theta) + sqrt(theta * theta + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int k = 0; k < n; k++) { /* A <- Gᵀ A G: columns then rows */
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
    for (int i = 0; i < n; i++) eig[i] = A[i * n + i];
}

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* singular values by the second method: sqrt of the eigenvalues of AᵀA (cols x cols) */
static void sv_by_eig(const double *A, int rows, int cols, double *sv) {
    double *G = malloc_check((size_t)cols * cols * sizeof(double)), *e = malloc_check((size_t)cols * sizeof(double));
    for (int i = 0; i < cols; i++)
        for (int j = 0; j < cols; j++) {
            double s = 0;
            for (int k = 0; k < rows; k++) s += A[(size_t)k * cols + i] * A[(size_t)k * cols + j];
            G[i * cols + j] = s;
        }
    sym_eig(G, cols, e);
    qsort(e, (size_t)cols, sizeof(double), cmp_desc);
    int k = rows < cols ? rows : cols;
    for (int i = 0; i < k; i++) sv[i] = sqrt(e[i] > 0 ? e[i] : 0);
    free(G);
    free(e);
}

/* top singular value by power iteration on AᵀA (a third, simpler check) */
static double top_sv_power(const double *A, int n, int iters) {
    double v[64], w[64];
    for (int i = 0; i < n; i++) v[i] = 1.0 + 0.1 * i;
    double s = 0;
    for (int it = 0; it < iters; it++) {
        for (int i = 0; i < n; i++) {
            w[i] = 0;
            for (int j = 0; j < n; j++) w[i] += A[i * n + j] * v[j];
        }
        for (int j = 0; j < n; j++) {
            v[j] = 0;
            for (int i = 0; i < n; i++) v[j] += A[i * n + j] * w[i];
        }
        double nv = 0;
        for (int j = 0; j < n; j++) nv += v[j] * v[j];
        nv = sqrt(nv);
        if (nv == 0) return 0;
        s = sqrt(nv);
        for (int j = 0; j < n; j++) v[j] /= nv;
    }
    return s;
}

static void rand_matrix(rng_t *r, double *A, int rows, int cols) {
    for (int i = 0; i < rows * cols; i++) A[i] = rng_normal(r);
}

/* a random orthogonal matrix: Gram-Schmidt of a random one */
static void rand_orthogonal(rng_t *r, double *Q, int n) {
    rand_matrix(r, Q, n, n);
    for (int j = 0; j < n; j++) {
        for (int k = 0; k < j; k++) {
            double d = 0;
            for (int i = 0; i < n; i++) d += Q[i * n + j] * Q[i * n + k];
            for (int i = 0; i < n; i++) Q[i * n + j] -= d * Q[i * n + k];
        }
        double s = 0;
        for (int i = 0; i < n; i++) s += Q[i * n + j] * Q[i * n + j];
        s = sqrt(s);
        for (int i = 0; i < n; i++) Q[i * n + j] /= s;
    }
}

static void check_svd(const double *A, int rows, int cols, const char *what) {
    double s1[256], s2[256];
    int k = rows < cols ? rows : cols;
    int sw = probe_svd(A, rows, cols, s1);
    CHECK(sw > 0, "%s: one-sided Jacobi did not converge", what);
    sv_by_eig(A, rows, cols, s2);
    double scale = s1[0] > 1 ? s1[0] : 1;
    for (int i = 0; i < k; i++) {
        /* sqrt of an eigenvalue loses half the digits near 0: compare with an absolute floor */
        CHECK_CLOSE(s1[i], s2[i], 1e-7 * scale, 1e-9, "%s %dx%d: sv %d", what, rows, cols, i);
        if (i > 0) CHECK(s1[i] <= s1[i - 1], "%s: not descending at %d", what, i);
    }
}

static void test_svd(void) {
    rng_t r;
    rng_seed(&r, 7);
    double A[64 * 64], Q[64], D[64];
    for (int n = 1; n <= 8; n++)
        for (int rep = 0; rep < 20; rep++) {
            rand_matrix(&r, A, n, n);
            check_svd(A, n, n, "random");
            double s[8];
            probe_svd(A, n, n, s);
            CHECK_CLOSE(s[0], top_sv_power(A, n, 3000), 1e-6, 1e-6, "random %d: power iteration", n);
        }
    /* rectangular, both orientations, and a larger one */
    rand_matrix(&r, A, 7, 3);
    check_svd(A, 7, 3, "tall");
    rand_matrix(&r, A, 3, 7);
    check_svd(A, 3, 7, "wide");
    rand_matrix(&r, A, 40, 40);
    check_svd(A, 40, 40, "40x40");
    /* diagonal with known values (unsorted, one negative) */
    double dv[5] = {0.3, -2.0, 1.5, 0.0, 0.7}, want[5] = {2.0, 1.5, 0.7, 0.3, 0.0}, s[8];
    memset(A, 0, sizeof A);
    for (int i = 0; i < 5; i++) A[i * 5 + i] = dv[i];
    probe_svd(A, 5, 5, s);
    for (int i = 0; i < 5; i++) CHECK(s[i] == want[i], "diagonal: sv %d = %g, want %g", i, s[i], want[i]);
    check_svd(A, 5, 5, "diagonal");
    /* rank-deficient: outer product of rank 2 in 6x6 */
    double u1[6], v1[6], u2[6], v2[6];
    for (int i = 0; i < 6; i++) { u1[i] = rng_normal(&r); v1[i] = rng_normal(&r); u2[i] = rng_normal(&r); v2[i] = rng_normal(&r); }
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 6; j++) A[i * 6 + j] = u1[i] * v1[j] + u2[i] * v2[j];
    probe_svd(A, 6, 6, s);
    for (int i = 2; i < 6; i++) CHECK(fabs(s[i]) < 1e-12 * s[0], "rank 2: sv %d = %g", i, s[i]);
    check_svd(A, 6, 6, "rank-deficient");
    /* orthogonal: every singular value 1 */
    for (int n = 2; n <= 8; n++) {
        rand_orthogonal(&r, Q, n);
        probe_svd(Q, n, n, s);
        for (int i = 0; i < n; i++) CHECK_CLOSE(s[i], 1.0, 1e-13, 0, "orthogonal %d: sv %d", n, i);
    }
    /* doubly stochastic: a convex mixture of permutations has top sv exactly 1 (vector of ones) */
    for (int n = 2; n <= 8; n++) {
        memset(D, 0, sizeof D);
        double wsum = 0;
        for (int k = 0; k < 5; k++) {
            int perm[8];
            for (int i = 0; i < n; i++) perm[i] = i;
            for (int i = n - 1; i > 0; i--) {
                int j = (int)(rng_u64(&r) % (uint64_t)(i + 1)), t = perm[i];
                perm[i] = perm[j];
                perm[j] = t;
            }
            double w = rng_uniform(&r) + 0.1;
            wsum += w;
            for (int i = 0; i < n; i++) D[i * n + perm[i]] += w;
        }
        for (int i = 0; i < n * n; i++) D[i] /= wsum;
        probe_svd(D, n, n, s);
        CHECK_CLOSE(s[0], 1.0, 1e-13, 0, "doubly stochastic %d: top sv", n);
        check_svd(D, n, n, "doubly stochastic");
        double sv[8], dev[8];
        probe_sv_and_deviation(D, n, sv, dev);
        CHECK(fabs(dev[n - 1]) < 1e-13, "doubly stochastic %d: deviation has a zero singular value (%g)", n, dev[n - 1]);
        /* (D - J) = D restricted to the zero-sum subspace: its sv are the sv of D but the top 1 */
        CHECK(dev[0] <= 1 + 1e-12, "doubly stochastic: deviation norm %g > 1", dev[0]);
    }
    /* a diverged matrix gives NaN singular values, not a hang */
    double bad[4] = {1, NAN, 0, 1}, sb[2];
    CHECK(probe_svd(bad, 2, 2, sb) == -1 && isnan(sb[0]) && isnan(sb[1]), "NaN in, NaN out");
    /* J itself: sv (1, 0, ...), deviation all 0; I: sv all 1, deviation (1, ..., 1, 0) */
    for (int n = 2; n <= 8; n++) {
        double J[64], I[64], sv[8], dev[8];
        for (int i = 0; i < n * n; i++) { J[i] = 1.0 / n; I[i] = (i % (n + 1)) == 0; }
        probe_sv_and_deviation(J, n, sv, dev);
        CHECK_CLOSE(sv[0], 1.0, 1e-14, 0, "J sv0");
        for (int i = 1; i < n; i++) CHECK(fabs(sv[i]) < 1e-14, "J sv %d = %g", i, sv[i]);
        for (int i = 0; i < n; i++) CHECK(fabs(dev[i]) < 1e-14, "J dev %d = %g", i, dev[i]);
        probe_sv_and_deviation(I, n, sv, dev);
        for (int i = 0; i < n; i++) CHECK(sv[i] == 1.0, "I sv %d = %.17g", i, sv[i]);
        for (int i = 0; i < n - 1; i++) CHECK_CLOSE(dev[i], 1.0, 1e-14, 0, "I dev %d", i);
        CHECK(fabs(dev[n - 1]) < 1e-14, "I dev last = %g", dev[n - 1]);
    }
}

/* ---- composite ------------------------------------------------------------------------- */

static void test_composite(void) {
    rng_t r;
    rng_seed(&r, 11);
    for (int n = 2; n <= 8; n += 3)
        for (int L = 1; L <= 12; L += 5) {
            double H[12 * 64], P[64], cum[12], N[64], T[64];
            for (int i = 0; i < L * n * n; i++) H[i] = 0.4 * rng_normal(&r) + ((i % (n * n)) % (n + 1) == 0);
            probe_composite(H, L, n, P, cum);
            /* naive: X_l as explicit vectors: push each basis vector e_j through the layers */
            for (int j = 0; j < n; j++) {
                double x[8], y[8];
                for (int i = 0; i < n; i++) x[i] = i == j;
                for (int l = 0; l < L; l++) {
                    for (int i = 0; i < n; i++) {
                        y[i] = 0;
                        for (int k = 0; k < n; k++) y[i] += H[l * n * n + i * n + k] * x[k];
                    }
                    memcpy(x, y, sizeof x);
                }
                for (int i = 0; i < n; i++) N[i * n + j] = x[i];
            }
            for (int i = 0; i < n * n; i++) CHECK_CLOSE(P[i], N[i], 1e-12, 1e-12, "composite n=%d L=%d entry %d", n, L, i);
            /* cumulative norms: naive left-to-right product H_{l-1} (... (H_1 H_0)) */
            memcpy(N, H, (size_t)n * n * sizeof(double));
            for (int l = 0; l < L; l++) {
                if (l > 0) {
                    probe_matmul(H + l * n * n, N, T, n);
                    memcpy(N, T, (size_t)n * n * sizeof(double));
                }
                CHECK_CLOSE(cum[l], top_sv_power(N, n, 5000), 1e-8, 1e-6, "cum norm n=%d l=%d", n, l + 1);
            }
        }
}

/* ---- cosine similarity ----------------------------------------------------------------- */

static double cos_direct(const double *Y, int n, int C) {
    double s = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double d = 0, a = 0, b = 0;
            for (int c = 0; c < C; c++) {
                d += Y[i * C + c] * Y[j * C + c];
                a += Y[i * C + c] * Y[i * C + c];
                b += Y[j * C + c] * Y[j * C + c];
            }
            s += d / (sqrt(a) * sqrt(b));
            cnt++;
        }
    return s / cnt;
}

static void test_cosine(void) {
    rng_t r;
    rng_seed(&r, 13);
    for (int n = 2; n <= 8; n += 2) {
        const int C = 33;
        real X[8 * 33], H[64];
        double Xd[8 * 33], Y[8 * 33];
        for (int rep = 0; rep < 10; rep++) {
            for (int i = 0; i < n * C; i++) { X[i] = (real)(rng_normal(&r) + (i % C) * 0.05); Xd[i] = X[i]; }
            for (int i = 0; i < n * n; i++) H[i] = (real)(rng_normal(&r) * 0.3 + ((i % (n + 1)) == 0));
            for (int i = 0; i < n; i++)
                for (int c = 0; c < C; c++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += (double)H[i * n + k] * Xd[k * C + c];
                    Y[i * C + c] = s;
                }
            double before, after;
            probe_token_cos(X, H, n, C, &before, &after);
            CHECK_CLOSE(before, cos_direct(Xd, n, C), 1e-12, 1e-10, "cos before n=%d", n);
            CHECK_CLOSE(after, cos_direct(Y, n, C), 1e-10, 1e-8, "cos after n=%d", n);
        }
    }
    /* identical streams: 1; orthogonal streams: 0; a zero stream is skipped */
    real X[3 * 4] = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4}, I[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};
    double b, a;
    probe_token_cos(X, I, 3, 4, &b, &a);
    CHECK_CLOSE(b, 1.0, 1e-15, 0, "identical streams");
    real O[2 * 2] = {1, 0, 0, 1}, I2[4] = {1, 0, 0, 1};
    probe_token_cos(O, I2, 2, 2, &b, &a);
    CHECK(b == 0 && a == 0, "orthogonal streams: %g %g", b, a);
    real Z[2 * 2] = {1, 1, 0, 0};
    probe_token_cos(Z, I2, 2, 2, &b, &a);
    CHECK(isnan(b), "a zero stream leaves no pair: %g", b);
}

/* ---- percentiles, histogram, diagonal dominance ---------------------------------------- */

static double pct_sorted(const float *v, size_t m, double q) { /* v sorted ascending */
    double pos = q * (double)(m - 1);
    size_t k = (size_t)floor(pos);
    if (k + 1 >= m) return v[m - 1 < k ? m - 1 : k];
    return v[k] + (pos - (double)k) * ((double)v[k + 1] - v[k]);
}

static int cmp_f(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void test_percentiles(void) {
    rng_t r;
    rng_seed(&r, 17);
    const double qs[] = {0, 0.1, 0.25, 0.5, 0.9, 0.999, 1};
    size_t sizes[] = {1, 2, 3, 10, 101, 1000, 4096};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        size_t m = sizes[si];
        float *v = malloc_check(m * sizeof(float)), *s = malloc_check(m * sizeof(float)), *w = malloc_check(m * sizeof(float));
        for (size_t i = 0; i < m; i++) v[i] = (si % 2) ? (float)(rng_u64(&r) % 7) : (float)rng_normal(&r); /* ties too */
        memcpy(s, v, m * sizeof(float));
        qsort(s, m, sizeof(float), cmp_f);
        for (size_t qi = 0; qi < sizeof qs / sizeof qs[0]; qi++) {
            memcpy(w, v, m * sizeof(float));
            double got = probe_percentile(w, m, qs[qi]), want = pct_sorted(s, m, qs[qi]);
            CHECK_CLOSE(got, want, 1e-6, 1e-6, "percentile %g of %zu values", qs[qi], m);
        }
        free(v);
        free(s);
        free(w);
    }
    /* non-finite values are left out */
    float v[6] = {NAN, 3, INFINITY, 1, 2, -INFINITY};
    CHECK_CLOSE(probe_percentile(v, 6, 0.5), 2.0, 0, 0, "median of the finite values");
    float z[2] = {NAN, NAN};
    CHECK(isnan(probe_percentile(z, 2, 0.5)), "no finite value: NaN");
}

static void test_histogram(void) {
    double e[PROBE_HIST_BINS + 1];
    probe_hist_edges(e);
    CHECK(e[0] == PROBE_HIST_LO && e[PROBE_HIST_BINS] == PROBE_HIST_HI, "edges span [lo, hi]");
    CHECK_CLOSE(e[1] - e[0], 0.01, 1e-12, 0, "bin width 0.01");
    rng_t r;
    rng_seed(&r, 19);
    int64_t counts[PROBE_HIST_BINS + 2] = {0};
    const int N = 20000;
    for (int i = 0; i < N; i++) {
        double v = rng_normal(&r);
        if (i % 97 == 0) v = NAN;
        int k = probe_hist_bin(v);
        CHECK(k >= -1 && k <= PROBE_HIST_BINS, "bin range");
        if (k >= 0 && k < PROBE_HIST_BINS) CHECK(v >= e[k] && v < e[k + 1], "%g not in bin %d of the stored edges", v, k);
        if (k == -1) CHECK(v < PROBE_HIST_LO, "below");
        if (k == PROBE_HIST_BINS) CHECK(!(v < PROBE_HIST_HI), "above");
        counts[k + 1]++;
    }
    int64_t tot = 0;
    for (int k = 0; k < PROBE_HIST_BINS + 2; k++) tot += counts[k];
    CHECK(tot == N, "counts add up: %lld", (long long)tot);
    CHECK(probe_hist_bin(0.0) == 100 && probe_hist_bin(1.0) == 200, "0 and 1 land in bins 100, 200 (%d, %d)",
          probe_hist_bin(0.0), probe_hist_bin(1.0));
    /* next to an edge the bin is the stored edges' (v + 1 rounds -1e-17 up to the edge 0) */
    CHECK(probe_hist_bin(-1e-17) == 99 && probe_hist_bin(-1e-300) == 99 && probe_hist_bin(nextafter(0.5, 0)) == 149,
          "just below 0 in bin 99 (%d, %d), just below 0.5 in 149 (%d)", probe_hist_bin(-1e-17), probe_hist_bin(-1e-300),
          probe_hist_bin(nextafter(0.5, 0)));
    for (int k = 1; k < PROBE_HIST_BINS; k++)
        CHECK(probe_hist_bin(e[k]) == k && probe_hist_bin(nextafter(e[k], -1e9)) == k - 1, "edge %d: %d, below it %d", k,
              probe_hist_bin(e[k]), probe_hist_bin(nextafter(e[k], -1e9)));
    /* the boundaries, to the last ulp: bins are [lo, hi) */
    const double lo = PROBE_HIST_LO, hi = PROBE_HIST_HI;
    CHECK(probe_hist_bin(lo) == 0, "lo itself is in bin 0 (got %d)", probe_hist_bin(lo));
    CHECK(probe_hist_bin(nextafter(lo, -INFINITY)) == -1, "just below lo is below the range (got %d)",
          probe_hist_bin(nextafter(lo, -INFINITY)));
    CHECK(probe_hist_bin(nextafter(lo, INFINITY)) == 0, "just above lo is in bin 0");
    CHECK(probe_hist_bin(nextafter(hi, -INFINITY)) == PROBE_HIST_BINS - 1, "just below hi is in the last bin (got %d)",
          probe_hist_bin(nextafter(hi, -INFINITY)));
    CHECK(probe_hist_bin(hi) == PROBE_HIST_BINS, "hi itself is above the range (got %d)", probe_hist_bin(hi));
    CHECK(probe_hist_bin(-INFINITY) == -1 && probe_hist_bin(INFINITY) == PROBE_HIST_BINS, "infinities");
    /* the float32 value the model stores for lo is lo exactly */
    CHECK(probe_hist_bin((double)(real)lo) == 0, "float lo in bin 0");
}

static void test_diag_dominance(void) {
    real I[16], P[16];
    for (int i = 0; i < 16; i++) I[i] = (i % 5) == 0;
    CHECK(probe_diag_dominant(I, 4), "identity is diagonal-dominant");
    /* every non-identity permutation of 4 is detected as off-diagonal */
    int perm[4] = {0, 1, 2, 3}, count = 0;
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++)
            for (int c = 0; c < 4; c++)
                for (int d = 0; d < 4; d++) {
                    perm[0] = a; perm[1] = b; perm[2] = c; perm[3] = d;
                    int used = 0;
                    for (int i = 0; i < 4; i++) used |= 1 << perm[i];
                    if (used != 15) continue;
                    for (int i = 0; i < 16; i++) P[i] = 0;
                    for (int i = 0; i < 4; i++) P[i * 4 + perm[i]] = 1;
                    int ident = a == 0 && b == 1 && c == 2 && d == 3;
                    CHECK(probe_diag_dominant(P, 4) == ident, "permutation %d%d%d%d", a, b, c, d);
                    count++;
                }
    CHECK(count == 24, "24 permutations");
    /* a soft mixture with a heavy diagonal is dominant; ties count; NaN does not */
    real M[4] = {0.6f, 0.4f, 0.3f, 0.7f}, Tt[4] = {0.5f, 0.5f, 0.5f, 0.5f}, Nn[4] = {NAN, 0, 0, 1};
    CHECK(probe_diag_dominant(M, 2), "soft diagonal");
    CHECK(probe_diag_dominant(Tt, 2), "ties count as diagonal");
    CHECK(!probe_diag_dominant(Nn, 2), "NaN is not dominant");
    /* rows, not columns (H[i, j], row i = output stream): R's row maxima sit on the diagonal
     * (0.5 >= 0.1, 0.7 >= 0.6) but its first column's maximum does not (0.6 > 0.5); its
     * transpose is column- but not row-dominant */
    real R[4] = {0.5f, 0.1f, 0.6f, 0.7f}, Rt[4] = {0.5f, 0.6f, 0.1f, 0.7f};
    CHECK(probe_diag_dominant(R, 2) == 1, "row-dominant, not column-dominant: dominant");
    CHECK(probe_diag_dominant(Rt, 2) == 0, "column-dominant, not row-dominant: not dominant");
    /* n = 3, the off-diagonal maximum of a column below the diagonal */
    real R3[9] = {0.4f, 0.3f, 0.3f, 0.9f, 1.0f, 0.0f, 0.0f, 0.2f, 0.3f}, R3t[9];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) R3t[i * 3 + j] = R3[j * 3 + i];
    CHECK(probe_diag_dominant(R3, 3) == 1, "3x3 row-dominant");
    CHECK(probe_diag_dominant(R3t, 3) == 0, "3x3 transpose: not dominant");
}

/* the windows of the probe batch and of /final: midpoints floor((2i + 1) W / (2k)) */
static void test_windows(void) {
    uint64_t w[8];
    probe_windows(NULL, 8, 10, 5, w);
    const uint64_t want5[5] = {1, 3, 5, 7, 9};
    for (int i = 0; i < 5; i++)
        CHECK(w[i] == want5[i], "W=10 k=5: window %d = %llu, want %llu", i, (unsigned long long)w[i],
              (unsigned long long)want5[i]);
    probe_windows(NULL, 8, 10, 1, w);
    CHECK(w[0] == 5, "W=10 k=1: the middle window (got %llu)", (unsigned long long)w[0]);
    probe_windows(NULL, 8, 7, 3, w);
    const uint64_t want3[3] = {1, 3, 5};
    for (int i = 0; i < 3; i++) CHECK(w[i] == want3[i], "W=7 k=3: window %d = %llu", i, (unsigned long long)w[i]);
    probe_windows(NULL, 8, 4, 4, w); /* k = W: every window once */
    for (int i = 0; i < 4; i++) CHECK(w[i] == (uint64_t)i, "W=4 k=4: window %d = %llu", i, (unsigned long long)w[i]);
}

/* ---- models ----------------------------------------------------------------------------- */

static void make_shard(const char *name, size_t count, char *path, size_t len) {
    unsigned char *b = malloc_check(count);
    rng_t r;
    rng_seed(&r, 23);
    for (size_t i = 0; i < count; i++) b[i] = (unsigned char)(32 + rng_u64(&r) % 90);
    snprintf(path, len, "%s/%s.bin", tmp, name);
    CHECK(shard_write(path, b, count, 256, 1) == 0, "shard_write %s", path);
    free(b);
}

/* aux_noise > 0 moves every hyper-connection parameter: H_res far from I and token-dependent */
static int build(gpt_model *m, const char *method, int n, int layers, int C, int B, double aux_noise) {
    if (t_model(m, method, n, layers, C, 99, 29, aux_noise, 0) != 0) return -1;
    model_alloc_acts(m, B);
    return 0;
}

static const h5log_series *series(const h5log *log, const char *path) {
    int i = h5log_find(log, path);
    CHECK(i >= 0, "missing %s", path);
    return i >= 0 ? &log->series[i] : NULL;
}
/* last row of a float64 series (or the static data) */
static const double *last_row(const h5log *log, const char *path) {
    const h5log_series *s = series(log, path);
    if (!s) return NULL;
    CHECK(s->type == H5LOG_F64, "%s is not float64", path);
    return (const double *)s->data + (s->rows - 1) * s->row_elems;
}

/* probe_step against statistics recomputed from the activations it leaves behind */
static void test_probe_step_matches_direct(void) {
    char vpath[600], err[256];
    make_shard("val_a", 2000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "mhc", 4, 2, 16, 3, 0.5) != 0) return;
    h5log log;
    h5log_init(&log);
    probe_state *p = probe_open(&m, &val, &log);
    CHECK(p != NULL, "probe_open");
    if (!p) return;
    probe_step(p, 10);
    /* the activations now hold the probe batch */
    const int Lh = m.Lh, n = m.n, C = m.C;
    const size_t N = (size_t)m.B * m.T;
    float *rm = malloc_check(N * n * Lh * sizeof(float));
    size_t nr = 0;
    int64_t diag = 0;
    const double *Hm = last_row(&log, "/probe/H_res_mean"), *cos = last_row(&log, "/probe/cos_sim"),
                 *cosb = last_row(&log, "/probe/cos_sim_before"), *csx = last_row(&log, "/probe/colsum_dev_max"),
                 *rsm = last_row(&log, "/probe/rowsum_dev_mean"), *sv = last_row(&log, "/probe/sv"),
                 *dev = last_row(&log, "/probe/dev_sv"), *rml = last_row(&log, "/probe/row_max_layer"),
                 *dfl = last_row(&log, "/probe/diag_frac_layer"), *rms = last_row(&log, "/probe/stream_rms");
    if (!Hm || !cos || !cosb || !csx || !rsm || !sv || !dev || !rml || !dfl || !rms) return;
    double max_dev_seen = 0;
    for (int l = 0; l < Lh; l++) {
        hc_acts h = model_hc_acts(&m, l);
        double mean[64] = {0}, cs = 0, rsum = 0, ca = 0, cb = 0;
        size_t ld0 = nr;
        int64_t dl = 0;
        for (size_t t = 0; t < N; t++) {
            const real *H = h.H + t * n * n;
            double Y[4 * 16], Xd[4 * 16];
            int dom = 1;
            for (int i = 0; i < n; i++) {
                double rowmax = -1e30, rs = 0, colsum = 0;
                for (int j = 0; j < n; j++) {
                    mean[i * n + j] += H[i * n + j] / (double)N;
                    if (H[i * n + j] > rowmax) rowmax = H[i * n + j];
                    rs += H[i * n + j];
                    colsum += H[j * n + i];
                }
                if (rowmax > H[i * n + i]) dom = 0;
                rm[nr++] = (float)rowmax;
                cs = fmax(cs, fabs(colsum - 1));
                rsum += fabs(rs - 1) / n / (double)N;
            }
            dl += dom;
            for (int i = 0; i < n * C; i++) Xd[i] = h.X[t * n * C + i];
            for (int i = 0; i < n; i++)
                for (int c = 0; c < C; c++) {
                    double s = 0;
                    for (int k = 0; k < n; k++) s += (double)H[i * n + k] * Xd[k * C + c];
                    Y[i * C + c] = s;
                }
            ca += cos_direct(Y, n, C) / (double)N;
            cb += cos_direct(Xd, n, C) / (double)N;
        }
        diag += dl;
        for (int k = 0; k < n * n; k++) {
            CHECK_CLOSE(Hm[l * n * n + k], mean[k], 1e-12, 1e-9, "H_res_mean layer %d entry %d", l, k);
            max_dev_seen = fmax(max_dev_seen, fabs(mean[k] - (k % (n + 1) == 0)));
        }
        CHECK_CLOSE(cos[l], ca, 1e-9, 1e-7, "cos_sim layer %d", l);
        CHECK_CLOSE(cosb[l], cb, 1e-9, 1e-7, "cos_sim_before layer %d", l);
        CHECK_CLOSE(csx[l], cs, 1e-12, 1e-9, "colsum_dev_max layer %d", l);
        CHECK_CLOSE(rsm[l], rsum, 1e-12, 1e-9, "rowsum_dev_mean layer %d", l);
        CHECK_CLOSE(dfl[l], (double)dl / (double)N, 0, 0, "diag_frac_layer %d", l);
        double s2[8], d2[8], Dm[64];
        sv_by_eig(mean, n, n, s2);
        for (int k = 0; k < n * n; k++) Dm[k] = mean[k] - 1.0 / n;
        sv_by_eig(Dm, n, n, d2);
        for (int i = 0; i < n; i++) {
            CHECK_CLOSE(sv[l * n + i], s2[i], 1e-7, 1e-7, "sv layer %d #%d", l, i);
            CHECK_CLOSE(dev[l * n + i], d2[i], 1e-7, 1e-7, "dev_sv layer %d #%d", l, i);
        }
        qsort(rm + ld0, nr - ld0, sizeof(float), cmp_f);
        CHECK_CLOSE(rml[l * 3 + 1], pct_sorted(rm + ld0, nr - ld0, 0.5), 0, 1e-7, "row max median layer %d", l);
        CHECK_CLOSE(rml[l * 3 + 0], pct_sorted(rm + ld0, nr - ld0, 0.1), 0, 1e-7, "row max p10 layer %d", l);
    }
    CHECK(max_dev_seen > 0.05, "the test model's H_res is far from I (max |H - I| %g)", max_dev_seen);
    qsort(rm, nr, sizeof(float), cmp_f);
    CHECK_CLOSE(*last_row(&log, "/probe/row_max_median"), pct_sorted(rm, nr, 0.5), 0, 1e-7, "pooled median");
    CHECK_CLOSE(*last_row(&log, "/probe/row_max_p10"), pct_sorted(rm, nr, 0.1), 0, 1e-7, "pooled p10");
    CHECK_CLOSE(*last_row(&log, "/probe/row_max_p90"), pct_sorted(rm, nr, 0.9), 0, 1e-7, "pooled p90");
    CHECK_CLOSE(*last_row(&log, "/probe/diag_frac"), (double)diag / ((double)N * Lh), 0, 1e-15, "pooled diag_frac");
    /* stream RMS of the final streams */
    const real *XL = model_streams(&m, Lh);
    double ss = 0;
    for (size_t k = 0; k < N * n * C; k++) ss += (double)XL[k] * XL[k];
    CHECK_CLOSE(rms[Lh], sqrt(ss / (double)(N * n * C)), 1e-12, 1e-9, "stream_rms final");
    /* the same batch every time: a second probe gives the same row */
    probe_step(p, 20);
    const h5log_series *s = series(&log, "/probe/H_res_mean");
    CHECK(s->rows == 2 && !memcmp(s->data, (const double *)s->data + s->row_elems, s->row_elems * sizeof(double)),
          "the probe batch is fixed: identical rows for unchanged weights");
    free(rm);
    probe_close(p);
    h5log_free(&log);
    model_free(&m);
    shard_close(&val);
}

/* probe_step and probe_final leave parameters, gradients and the inputs as they were */
static void test_probe_is_read_only(void) {
    char vpath[600], err[256];
    make_shard("val_b", 3000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "mhc", 4, 1, 16, 2, 0.3) != 0) return;
    const size_t N = (size_t)m.B * m.T;
    int *in = malloc_check(N * sizeof(int)), *tg = malloc_check(N * sizeof(int));
    for (size_t i = 0; i < N; i++) { in[i] = (int)(i * 7 % 256); tg[i] = (int)(i * 13 % 256); }
    model_zero_grad(&m);
    real loss0 = model_forward(&m, in, tg, m.B);
    model_backward(&m, 1);
    real *P0 = malloc_check(m.n_params * sizeof(real)), *G0 = malloc_check(m.n_params * sizeof(real));
    memcpy(P0, m.params, m.n_params * sizeof(real));
    memcpy(G0, m.grads, m.n_params * sizeof(real));
    h5log log;
    h5log_init(&log);
    probe_state *p = probe_open(&m, &val, &log);
    probe_step(p, 1);
    CHECK(!memcmp(P0, m.params, m.n_params * sizeof(real)), "probe_step changed parameters");
    CHECK(!memcmp(G0, m.grads, m.n_params * sizeof(real)), "probe_step changed gradients");
    CHECK(!memcmp(in, m.inputs, N * sizeof(int)), "probe_step changed the model's inputs");
    CHECK(m.mean_loss == loss0, "probe_step changed mean_loss");
    CHECK(probe_final(&m, &val, 5, &log, 1, 0) == 0, "probe_final");
    CHECK(!memcmp(P0, m.params, m.n_params * sizeof(real)), "probe_final changed parameters");
    CHECK(!memcmp(G0, m.grads, m.n_params * sizeof(real)), "probe_final changed gradients");
    /* and training continues exactly */
    real loss1 = model_forward(&m, in, tg, m.B);
    CHECK(loss1 == loss0, "loss after probing %.9g vs %.9g", loss1, loss0);
    probe_close(p);
    h5log_free(&log);
    free(P0);
    free(G0);
    free(in);
    free(tg);
    model_free(&m);
    shard_close(&val);
}

/* probe_open takes the totals of a resumed run's sessions from /probe@calls and
 * @seconds_total; one no build wrote (a damaged or edited run file) starts the count over
 * rather than reaching an int64 cast out of range (1e300) or counting on from a negative
 * or fractional number; a sound one is counted on from */
static void test_probe_damaged_totals(void) {
    char vpath[600], err[256];
    make_shard("val_t", 3000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "mhc", 4, 1, 16, 2, 0.3) != 0) return;
    static const struct { double calls, seconds, want_calls; int want_seconds_kept; } cases[] = {
        {1e300, 2.0, 1, 1}, {-5, 2.0, 1, 1}, {NAN, 2.0, 1, 1}, {2.5, 2.0, 1, 1}, {9.1e15, 2.0, 1, 1},
        {7, -1.0, 8, 0}, {7, INFINITY, 8, 0}, {7, NAN, 8, 0}, {7, 2.0, 8, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        h5log log;
        h5log_init(&log);
        h5log_attr_num(&log, "/probe", "calls", cases[k].calls);
        h5log_attr_num(&log, "/probe", "seconds_total", cases[k].seconds);
        probe_state *p = probe_open(&m, &val, &log);
        probe_step(p, 1);
        const double calls = h5log_get_attr_num(&log, "/probe", "calls");
        const double secs = h5log_get_attr_num(&log, "/probe", "seconds_total");
        CHECK(calls == cases[k].want_calls, "stored calls %g: counted on to %g, wanted %g", cases[k].calls, calls,
              cases[k].want_calls);
        CHECK(isfinite(secs) && secs >= (cases[k].want_seconds_kept ? 2.0 : 0.0) &&
                  secs < (cases[k].want_seconds_kept ? 2.0 : 0.0) + 60,
              "stored seconds_total %g: now %g", cases[k].seconds, secs);
        probe_close(p);
        h5log_free(&log);
    }
    model_free(&m);
    shard_close(&val);
}

/* an identity model reports exactly the identity everywhere */
static void test_identity_is_identity(void) {
    char vpath[600], err[256];
    make_shard("val_c", 2000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "identity", 4, 2, 16, 4, 0.3) != 0) return;
    const int Lh = m.Lh, n = m.n;
    h5log log;
    h5log_init(&log);
    probe_state *p = probe_open(&m, &val, &log);
    probe_step(p, 5);
    const double *Hm = last_row(&log, "/probe/H_res_mean"), *sv = last_row(&log, "/probe/sv"),
                 *dev = last_row(&log, "/probe/dev_sv");
    if (!Hm || !sv || !dev) return;
    for (int l = 0; l < Lh; l++)
        for (int k = 0; k < n * n; k++) CHECK(Hm[l * n * n + k] == (k % (n + 1) == 0), "H_res_mean[%d][%d] = %.17g", l, k, Hm[l * n * n + k]);
    for (int k = 0; k < Lh * n; k++) CHECK(sv[k] == 1.0, "sv %d = %.17g", k, sv[k]);
    for (int l = 0; l < Lh; l++) {
        for (int i = 0; i < n - 1; i++) CHECK_CLOSE(dev[l * n + i], 1.0, 1e-14, 0, "dev_sv");
        CHECK(fabs(dev[l * n + n - 1]) < 1e-14, "dev_sv last");
    }
    CHECK(*last_row(&log, "/probe/diag_frac") == 1.0, "diag_frac 1");
    CHECK(*last_row(&log, "/probe/row_max_median") == 1.0 && *last_row(&log, "/probe/row_max_p10") == 1.0,
          "row maxima all 1");
    const double *csx = last_row(&log, "/probe/colsum_dev_max"), *rsx = last_row(&log, "/probe/rowsum_dev_max");
    for (int l = 0; l < Lh; l++) CHECK(csx[l] == 0 && rsx[l] == 0, "sums exactly 1 at layer %d", l);
    /* mixing by I changes nothing */
    const double *ca = last_row(&log, "/probe/cos_sim"), *cb = last_row(&log, "/probe/cos_sim_before");
    for (int l = 0; l < Lh; l++) CHECK_CLOSE(ca[l], cb[l], 1e-15, 1e-14, "cos after = before at layer %d", l);

    const int S = 10; /* with B = 4: batches of 4, 4 and a padded 2 */
    CHECK(probe_final(&m, &val, S, &log, 5, 0) == 0, "probe_final");
    const double *H = last_row(&log, "/final/H_res"), *comp = last_row(&log, "/final/composite"),
                 *cum = last_row(&log, "/final/cum_spectral_norm"), *ccs = last_row(&log, "/final/composite_colsum"),
                 *ctm = last_row(&log, "/final/composite_token_mean"), *jr = last_row(&log, "/final/jacobian_norm_residual"),
                 *ct = last_row(&log, "/final/cum_spectral_norm_tokens");
    if (!H || !comp || !cum || !ccs || !ctm || !jr || !ct) return;
    for (int s = 0; s < S; s++) {
        for (int k = 0; k < Lh * n * n; k++) CHECK(H[s * Lh * n * n + k] == ((k % (n * n)) % (n + 1) == 0), "final H_res");
        for (int k = 0; k < n * n; k++) {
            CHECK(comp[s * n * n + k] == (k % (n + 1) == 0), "composite is I");
            CHECK(ctm[s * n * n + k] == (k % (n + 1) == 0), "token-mean composite is I");
        }
        for (int l = 0; l < Lh; l++) CHECK(cum[s * Lh + l] == 1.0, "cumulative norm 1");
        for (int i = 0; i < n; i++) CHECK(ccs[s * n + i] == 1.0, "composite column sums 1");
        if (s < PROBE_JAC_SEQS)
            CHECK_CLOSE(jr[s], 1.0, 1e-6, 0, "Jacobian of the residual path of identity = 1 (sequence %d)", s);
    }
    const h5log_series *tk = series(&log, "/final/H_res_tokens");
    CHECK(tk && tk->rows == 1 && tk->row_dims[0] == (size_t)S * PROBE_TOKENS_PER_SEQ, "token subsample rows");
    for (size_t k = 0; k < (size_t)S * PROBE_TOKENS_PER_SEQ * Lh; k++) CHECK(ct[k] == 1.0, "per-token composite norm 1");
    /* histogram: S*T*n entries at 1 (bin 200), S*T*(n*n - n) at 0 (bin 100), counts add up */
    const h5log_series *hs = series(&log, "/final/hist_counts"), *ho = series(&log, "/final/hist_outside");
    if (hs && ho) {
        const int64_t *hc = hs->data, *out = ho->data;
        for (int l = 0; l < Lh; l++) {
            int64_t tot = out[l * 2] + out[l * 2 + 1];
            for (int k = 0; k < PROBE_HIST_BINS; k++) tot += hc[l * PROBE_HIST_BINS + k];
            CHECK(tot == (int64_t)S * m.T * n * n, "histogram counts add up at layer %d: %lld", l, (long long)tot);
            CHECK(hc[l * PROBE_HIST_BINS + 200] == (int64_t)S * m.T * n, "ones in bin 200");
            CHECK(hc[l * PROBE_HIST_BINS + 100] == (int64_t)S * m.T * (n * n - n), "zeros in bin 100");
        }
    }
    probe_close(p);
    h5log_free(&log);
    model_free(&m);
    shard_close(&val);
}

/* probe_final on a model whose H_res varies per token, is far from I and whose column sums
 * are not 1 (hc), over more sequences than a batch: /final against statistics recomputed
 * here from the per-token matrices of a forward of each window on its own. */
static void test_final_matches_direct(void) {
    char vpath[600], err[256];
    make_shard("val_f", 1000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "hc", 3, 2, 16, 2, 0.5) != 0) return;
    const int S = 5, Lh = m.Lh, n = m.n, T = m.T, nn = n * n; /* B = 2: batches of 2, 2 and a padded 1 */
    const int K = T < PROBE_TOKENS_PER_SEQ ? T : PROBE_TOKENS_PER_SEQ;
    h5log log;
    h5log_init(&log);
    CHECK(probe_final(&m, &val, S, &log, 7, 0) == 0, "probe_final");
    const h5log_series *ws = series(&log, "/final/window"), *ti = series(&log, "/final/H_res_tokens_index");
    const double *Hf = last_row(&log, "/final/H_res"), *ctm = last_row(&log, "/final/composite_token_mean"),
                 *csx = last_row(&log, "/final/colsum_dev_max"), *rsx = last_row(&log, "/final/rowsum_dev_max"),
                 *csm = last_row(&log, "/final/colsum_dev_mean"), *rsm = last_row(&log, "/final/rowsum_dev_mean"),
                 *ct = last_row(&log, "/final/cum_spectral_norm_tokens");
    if (!ws || !ti || !Hf || !ctm || !csx || !rsx || !csm || !rsm || !ct) return;
    CHECK(ws->rows == 1 && ws->row_dims[0] == (size_t)S, "S windows");
    const int64_t *win = ws->data, *tidx = ti->data;
    const uint64_t W = (uint64_t)(val.count - 1) / (uint64_t)T; /* full windows of T inputs and their targets */
    double cs_max[8] = {0}, rs_max[8] = {0}, cs_mean[8] = {0}, rs_mean[8] = {0}, order_gap = 0;
    int *in = malloc_check((size_t)m.B * T * sizeof(int));
    for (int s = 0; s < S; s++) {
        uint64_t w = (2 * (uint64_t)s + 1) * W / (2 * (uint64_t)S);
        CHECK(win[s] == (int64_t)w, "window %d = %lld, want floor((2s+1)W/2S) = %llu", s, (long long)win[s],
              (unsigned long long)w);
        /* this sequence alone (in every slot of the batch) */
        for (int b = 0; b < m.B; b++)
            for (int t = 0; t < T; t++) in[b * T + t] = shard_token(&val, w * (uint64_t)T + (uint64_t)t);
        model_forward(&m, in, NULL, m.B);
        double mean_prod[64] = {0}, mean_rev[64] = {0}, Hmean[8 * 64] = {0};
        for (int t = 0; t < T; t++) {
            double P[64], Rv[64], Q[64], H[64];
            for (int i = 0; i < nn; i++) P[i] = Rv[i] = (i % (n + 1)) == 0;
            int k = -1;
            for (int q = 0; q < K; q++)
                if ((2 * q + 1) * T / (2 * K) == t) k = q;
            for (int l = 0; l < Lh; l++) {
                const real *Hr = model_hc_acts(&m, l).H + (size_t)t * nn;
                for (int i = 0; i < nn; i++) { H[i] = Hr[i]; Hmean[l * nn + i] += H[i] / T; }
                /* column and row sums of the per-token matrix */
                for (int i = 0; i < n; i++) {
                    double c = 0, r = 0;
                    for (int j = 0; j < n; j++) { c += H[j * n + i]; r += H[i * n + j]; }
                    cs_max[l] = fmax(cs_max[l], fabs(c - 1));
                    rs_max[l] = fmax(rs_max[l], fabs(r - 1));
                    cs_mean[l] += fabs(c - 1) / n / ((double)S * T);
                    rs_mean[l] += fabs(r - 1) / n / ((double)S * T);
                }
                /* P <- H_l P, by hand (row i of H times column j of P); Rv the reversed order */
                for (int i = 0; i < n; i++)
                    for (int j = 0; j < n; j++) {
                        double a = 0;
                        for (int q = 0; q < n; q++) a += H[i * n + q] * P[q * n + j];
                        Q[i * n + j] = a;
                    }
                memcpy(P, Q, (size_t)nn * sizeof(double));
                probe_matmul(Rv, H, Q, n);
                memcpy(Rv, Q, (size_t)nn * sizeof(double));
                if (k >= 0) {
                    size_t r = (size_t)s * K + k;
                    CHECK(tidx[r * 2] == s && tidx[r * 2 + 1] == t, "token index row %zu", r);
                    double sv[8], Pc[64];
                    memcpy(Pc, P, sizeof Pc);
                    sv_by_eig(Pc, n, n, sv);
                    CHECK_CLOSE(ct[r * Lh + l], sv[0], 1e-9, 1e-7,
                                "cum_spectral_norm_tokens seq %d token %d after %d sublayers", s, t, l + 1);
                }
            }
            for (int i = 0; i < nn; i++) {
                mean_prod[i] += P[i] / T;
                mean_rev[i] += Rv[i] / T;
            }
        }
        for (int i = 0; i < nn; i++) {
            CHECK_CLOSE(ctm[s * nn + i], mean_prod[i], 1e-12, 1e-10, "composite_token_mean seq %d entry %d", s, i);
            order_gap = fmax(order_gap, fabs(mean_prod[i] - mean_rev[i]));
        }
        for (int k = 0; k < Lh * nn; k++)
            CHECK_CLOSE(Hf[s * Lh * nn + k], Hmean[k], 1e-12, 1e-10, "/final/H_res seq %d entry %d", s, k);
    }
    CHECK(order_gap > 1e-2, "the test's matrices do not commute: product order matters (gap %g)", order_gap);
    for (int l = 0; l < Lh; l++) {
        CHECK(cs_max[l] > 0.05, "column sums of the test model's H_res are far from 1 at sublayer %d (%g)", l, cs_max[l]);
        CHECK_CLOSE(csx[l], cs_max[l], 1e-12, 1e-10, "colsum_dev_max sublayer %d", l);
        CHECK_CLOSE(rsx[l], rs_max[l], 1e-12, 1e-10, "rowsum_dev_max sublayer %d", l);
        CHECK_CLOSE(csm[l], cs_mean[l], 1e-12, 1e-10, "colsum_dev_mean sublayer %d", l);
        CHECK_CLOSE(rsm[l], rs_mean[l], 1e-12, 1e-10, "rowsum_dev_mean sublayer %d", l);
    }
    free(in);
    h5log_free(&log);
    model_free(&m);
    shard_close(&val);
}

/* rc: no frame, only the step, stream RMS and the Jacobian; the file says so */
static void test_rc_records_no_H(void) {
    char vpath[600], err[256];
    make_shard("val_d", 1000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "rc", 1, 1, 16, 2, 0) != 0) return;
    h5log log;
    h5log_init(&log);
    probe_state *p = probe_open(&m, &val, &log);
    probe_step(p, 1);
    CHECK(h5log_find(&log, "/probe/step") >= 0 && h5log_find(&log, "/probe/stream_rms") >= 0, "rc: step and rms");
    CHECK(h5log_find(&log, "/probe/H_res_mean") < 0, "rc: no H_res");
    CHECK(h5log_get_attr_str(&log, "/probe", "note") != NULL, "rc: the file says why");
    CHECK(probe_final(&m, &val, 3, &log, 1, 0) == 0, "rc: probe_final");
    CHECK(h5log_find(&log, "/final/H_res") < 0, "rc: no /final/H_res");
    CHECK(h5log_get_attr_str(&log, "/final", "note") != NULL, "rc: /final says why");
    const double *jr = last_row(&log, "/final/jacobian_norm_residual"), *j = last_row(&log, "/final/jacobian_norm");
    for (int s = 0; jr && j && s < 3; s++) {
        CHECK_CLOSE(jr[s], 1.0, 1e-6, 0, "rc without branches: the identity map");
        CHECK(isfinite(j[s]) && j[s] > 0, "rc full Jacobian norm %g", j[s]);
    }
    probe_close(p);
    h5log_free(&log);
    model_free(&m);
    shard_close(&val);
}

/* a run file with probes and /final: save, load, compare every dataset */
static void test_run_file_round_trip(void) {
    char vpath[600], err[256], rpath[600];
    make_shard("val_e", 1500, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    gpt_model m;
    if (build(&m, "mhc_lite", 3, 1, 8, 2, 0.3) != 0) return;
    h5log log, back;
    h5log_init(&log);
    h5log_init(&back);
    probe_state *p = probe_open(&m, &val, &log);
    for (int s = 1; s <= 3; s++) probe_step(p, s * 10);
    CHECK(probe_final(&m, &val, 4, &log, 30, 0) == 0, "probe_final");
    snprintf(rpath, sizeof rpath, "%s/probe_run.h5", tmp);
    CHECK(h5log_save(&log, rpath) == 0, "save");
    CHECK(h5log_load(&back, rpath, err, sizeof err) == 0, "load: %s", err);
    int probes = 0, finals = 0;
    for (int i = 0; i < log.n_series; i++) {
        const h5log_series *a = &log.series[i];
        int j = h5log_find(&back, a->path);
        CHECK(j >= 0, "%s missing after load", a->path);
        if (j < 0) continue;
        const h5log_series *b = &back.series[j];
        probes += !strncmp(a->path, "/probe/", 7);
        finals += !strncmp(a->path, "/final/", 7);
        CHECK(a->type == b->type && a->rows == b->rows && a->fixed == b->fixed && a->row_elems == b->row_elems,
              "%s: shape or type changed", a->path);
        size_t es = a->type == H5LOG_F32 ? 4 : 8;
        if (a->rows == b->rows && a->row_elems == b->row_elems)
            CHECK(!memcmp(a->data, b->data, a->rows * a->row_elems * es), "%s: data changed", a->path);
        CHECK(!strcmp(a->description, b->description) && a->description[0], "%s: description", a->path);
    }
    CHECK(probes == 17 && finals == 31, "every probe dataset present (%d /probe, %d /final)", probes, finals);
    const h5log_series *hm = series(&back, "/probe/H_res_mean");
    CHECK(hm && hm->rows == 3 && hm->row_rank == 3 && hm->row_dims[0] == 2 && hm->row_dims[1] == 3, "H_res_mean [3, 2, 3, 3]");
    CHECK(strstr(hm->description, "X_next = H_res . X") != NULL, "the convention is stated");
    CHECK(h5log_get_attr_str(&back, "/final", "H_res_convention") != NULL, "/final convention attribute");
    probe_close(p);
    h5log_free(&log);
    h5log_free(&back);
    model_free(&m);
    shard_close(&val);
}

/* inspect on run files whose H_res series is not [sublayers, n, n] with n <= 8 (edited
 * elsewhere, or corrupt): refused with the file named. With n = 9 the per-layer math
 * wrote past its [8 x 8] arrays; with rows of rank 1, n was 0 and an index -1 was read. */
static void test_inspect_foreign_shapes(void) {
    static const size_t shapes[2][3] = {{2, 9, 9}, {7, 0, 0}};
    static const int ranks[2] = {3, 1};
    for (int k = 0; k < 2; k++) {
        char dir[600], path[700];
        snprintf(dir, sizeof dir, "%s/foreign%d", tmp, k);
        mkdir_p(dir);
        snprintf(path, sizeof path, "%s/run.h5", dir);
        h5log log;
        h5log_init(&log);
        h5log_attr_str(&log, "/", "method", "s2hc");
        int st = h5log_series_add(&log, "/probe/step", H5LOG_I64, 0, NULL, "step", "");
        int hm = h5log_series_add(&log, "/probe/H_res_mean", H5LOG_F64, ranks[k], shapes[k], "H", "");
        double row[2 * 9 * 9];
        for (size_t i = 0; i < sizeof row / sizeof row[0]; i++) row[i] = 0.01 * (double)(i % 13);
        for (int64_t s = 1; s <= 2; s++) {
            h5log_append(&log, st, &s);
            h5log_append(&log, hm, row);
        }
        CHECK(h5log_save(&log, path) == 0, "save");
        h5log_free(&log);
        char *argv[] = {"inspect", dir, "--layer", "1", NULL};
        fprintf(stderr, "(an error about %s/run.h5's /probe/H_res_mean is expected here)\n", dir);
        CHECK(inspect_main(4, argv) == 1, "shape %d: refused", k);
        char *argv2[] = {"inspect", dir, NULL};
        CHECK(inspect_main(2, argv2) == 1, "shape %d: summary refused", k);
    }
}

/* ---- the numbers `s2hc inspect` prints ----------------------------------------------------- */

/* inspect_main's stdout into buf (NUL-terminated); its exit status. */
static int inspect_capture(int argc, char **argv, char *buf, size_t len) {
    return t_run_captured(inspect_main, argc, argv, buf, len);
}

/* The value of a long-format row (--layer --csv): ",<layer>,<quantity>,<i>,<j>," then the value. */
static double csv_long(const char *out, int layer, const char *q, int i, int j) {
    char key[96];
    snprintf(key, sizeof key, ",%d,%s,%d,%d,", layer, q, i, j);
    const char *p = strstr(out, key);
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* Field k (0-based, counted from the run's column) of the summary CSV row that holds key. */
static double csv_field(const char *out, const char *key, int k) {
    const char *p = strstr(out, key);
    if (!p) return NAN;
    while (p > out && p[-1] != '\n') p--;
    for (int i = 0; i < k; i++) {
        p = strpbrk(p, ",\n");
        if (!p || *p == '\n') return NAN;
        p++;
    }
    return *p == ',' || *p == '\n' ? NAN : strtod(p, NULL);
}

/* A run file of two /probe rows (steps 0 and 10) of a 2-sublayer, n = 3 model and a /final
 * group whose H_res_mean is the row of step 0: sublayer 1 of step 0 is A below, not doubly
 * stochastic (row sums 1.4 1.8 0.9, column sums 2.5 1.6 0), its largest off-diagonal entry
 * 0.4 and a larger negative one, -0.9; step 10 holds other matrices. */
static const double inspect_A[9] = {2.0, 0.3, -0.9,
                                    0.1, 1.5, 0.2,
                                    0.4, -0.2, 0.7};

static void write_inspect_run(const char *dir) {
    char path[700];
    mkdir_p(dir);
    snprintf(path, sizeof path, "%s/run.h5", dir);
    h5log log;
    h5log_init(&log);
    h5log_attr_str(&log, "/", "method", "s2hc");
    const size_t hd[3] = {2, 3, 3}, ld[1] = {2}, rd[1] = {3};
    int st = h5log_series_add(&log, "/probe/step", H5LOG_I64, 0, NULL, "step", "");
    int hm = h5log_series_add(&log, "/probe/H_res_mean", H5LOG_F64, 3, hd, "H", "");
    int rm = h5log_series_add(&log, "/probe/stream_rms", H5LOG_F64, 1, rd, "rms", "");
    int df = h5log_series_add(&log, "/probe/diag_frac_layer", H5LOG_F64, 1, ld, "diag frac", "");
    double H0[18], H10[18];
    for (int k = 0; k < 9; k++) {
        H0[k] = (k % 4 == 0) ? 1.0 : 0.0;  /* sublayer 0: the identity */
        H0[9 + k] = inspect_A[k];
        H10[k] = 0.5;
        H10[9 + k] = (k % 4 == 0) ? 0.25 : 0.375; /* doubly stochastic */
    }
    const double rms0[3] = {1, 2, 3}, rms10[3] = {4, 5, 6}, df0[2] = {0.25, 0.5}, df10[2] = {0.75, 1};
    int64_t s0 = 0, s10 = 10;
    h5log_append(&log, st, &s0);
    h5log_append(&log, hm, H0);
    h5log_append(&log, rm, rms0);
    h5log_append(&log, df, df0);
    h5log_append(&log, st, &s10);
    h5log_append(&log, hm, H10);
    h5log_append(&log, rm, rms10);
    h5log_append(&log, df, df10);
    const int64_t win[3] = {0, 1, 2};
    const double rms_f[3][3] = {{1, 2, 3}, {1, 2, 3}, {1, 2, 3}};
    const double jac[3] = {1, 2, 3}, jac_res[3] = {0.5, 0.25, 0.75};
    const size_t d3[1] = {3}, drms[2] = {3, 3};
    h5log_static_set(&log, "/final/window", H5LOG_I64, 1, d3, win, "windows");
    h5log_static_set(&log, "/final/H_res_mean", H5LOG_F64, 3, hd, H0, "H");
    h5log_static_set(&log, "/final/stream_rms", H5LOG_F64, 2, drms, rms_f, "rms");
    h5log_static_set(&log, "/final/jacobian_norm", H5LOG_F64, 1, d3, jac, "J");
    h5log_static_set(&log, "/final/jacobian_norm_residual", H5LOG_F64, 1, d3, jac_res, "J residual");
    h5log_attr_num(&log, "/final", "step", 10);
    CHECK(h5log_save(&log, path) == 0, "save %s", path);
    h5log_free(&log);
}

/* Every number of `inspect --layer 1 --step 0` (text and CSV), of the summary CSV and of
 * the Jacobian line, against values worked out here from the matrix written. */
static void test_inspect_numbers(void) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/inspect_numbers", tmp);
    write_inspect_run(dir);
    const double *A = inspect_A;
    /* by hand: row sums 1.4 1.8 0.9, column sums 2.5 1.6 0; trace 4.2 over sum |A| 6.3 */
    const double rs[3] = {1.4, 1.8, 0.9}, cs[3] = {2.5, 1.6, 0.0};
    const double share = 4.2 / 6.3, diag_mean = 4.2 / 3, off_max = 0.4;
    double sv[3], dev[3], D[9];
    sv_by_eig(A, 3, 3, sv);
    for (int k = 0; k < 9; k++) D[k] = A[k] - 1.0 / 3;
    sv_by_eig(D, 3, 3, dev);
    CHECK(sv[0] - sv[1] > 0.1 && sv[1] - sv[2] > 0.1, "distinct singular values %g %g %g", sv[0], sv[1], sv[2]);
    static char out[16384];

    char *a1[] = {"inspect", dir, "--layer", "1", "--step", "0", "--csv", NULL};
    CHECK(inspect_capture(7, a1, out, sizeof out) == 0, "--layer 1 --step 0 --csv");
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            CHECK_CLOSE(csv_long(out, 1, "H_res", i, j), A[i * 3 + j], 1e-12, 0, "csv H_res[%d,%d] of step 0", i, j);
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(csv_long(out, 1, "row_sum", i, -1), rs[i], 1e-9, 0, "csv row_sum %d", i);
        CHECK_CLOSE(csv_long(out, 1, "col_sum", -1, i), cs[i], 1e-9, 0, "csv col_sum %d", i);
        CHECK_CLOSE(csv_long(out, 1, "sv", i, -1), sv[i], 1e-7, 0, "csv sv %d", i);
        CHECK_CLOSE(csv_long(out, 1, "dev_sv", i, -1), dev[i], 1e-7, 0, "csv dev_sv %d", i);
    }
    CHECK_CLOSE(csv_long(out, 1, "diag_share", -1, -1), share, 1e-8, 0, "csv diag_share = trace / sum |H|");
    CHECK_CLOSE(csv_long(out, 1, "diag_frac", -1, -1), 0.5, 0, 0, "csv diag_frac of step 0");

    char *a2[] = {"inspect", dir, "--layer", "1", "--step", "0", "--no-color", NULL};
    CHECK(inspect_capture(7, a2, out, sizeof out) == 0, "--layer 1 --step 0");
    CHECK(strstr(out, "probe at step 0  sublayer 1 of 2") != NULL, "the header names step 0, sublayer 1:\n%s", out);
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "  out %-3d ", i);
        const char *p = strstr(out, key);
        double h[3] = {NAN, NAN, NAN}, r = NAN;
        CHECK(p && sscanf(p + strlen(key), "%lf %lf %lf | %lf", &h[0], &h[1], &h[2], &r) == 4, "row %d:\n%s", i, out);
        for (int j = 0; j < 3; j++) CHECK_CLOSE(h[j], A[i * 3 + j], 5e-5, 0, "text H_res[%d,%d]", i, j);
        CHECK_CLOSE(r, rs[i], 5e-5, 0, "text row sum %d (the column right of '|')", i);
    }
    const char *p = strstr(out, "  col sum ");
    double c[3] = {NAN, NAN, NAN};
    CHECK(p && sscanf(p + 10, "%lf %lf %lf", &c[0], &c[1], &c[2]) == 3, "col sum line:\n%s", out);
    for (int j = 0; j < 3; j++) CHECK_CLOSE(c[j], cs[j], 5e-5, 0, "text col sum %d", j);
    p = strstr(out, "singular values ");
    double s[3] = {NAN, NAN, NAN};
    CHECK(p && sscanf(p + 16, "%lf %lf %lf", &s[0], &s[1], &s[2]) == 3, "singular values line:\n%s", out);
    for (int i = 0; i < 3; i++) CHECK_CLOSE(s[i], sv[i], 5e-5, 0, "text sv %d", i);
    p = strstr(out, "diagonal share ");
    double sh = NAN, dm = NAN, om = NAN;
    CHECK(p && sscanf(p, "diagonal share %lf = trace / sum |H_res| (mean diagonal entry %lf, largest "
                         "off-diagonal %lf)", &sh, &dm, &om) == 3, "diagonal share line:\n%s", out);
    CHECK_CLOSE(sh, share, 5e-5, 0, "text diagonal share");
    CHECK_CLOSE(dm, diag_mean, 5e-5, 0, "text mean diagonal entry");
    CHECK_CLOSE(om, off_max, 5e-5, 0, "text largest off-diagonal (signed: 0.4, not |-0.9|)");

    /* the summary CSV at step 0: sublayer 1's row */
    char *a3[] = {"inspect", dir, "--step", "0", "--csv", NULL};
    CHECK(inspect_capture(5, a3, out, sizeof out) == 0, "--step 0 --csv");
    p = strstr(out, ",s2hc,0,1,0,mlp,");
    double f[6];
    for (int k = 0; k < 6; k++) f[k] = NAN;
    CHECK(p && sscanf(p + strlen(",s2hc,0,1,0,mlp,"), "%lf,%lf,%lf,%lf,%lf,%lf", &f[0], &f[1], &f[2], &f[3], &f[4],
                      &f[5]) == 6, "summary row of sublayer 1:\n%s", out);
    CHECK_CLOSE(f[0], diag_mean, 1e-8, 0, "summary diag_mean");
    CHECK_CLOSE(f[1], off_max, 1e-8, 0, "summary offdiag_max");
    CHECK_CLOSE(f[2], sv[0], 1e-7, 0, "summary sv_max");
    CHECK_CLOSE(f[3], sv[2], 1e-7, 0, "summary sv_min (the smallest of 3)");
    CHECK_CLOSE(f[4], dev[0], 1e-7, 0, "summary dev_sv_max");
    CHECK_CLOSE(f[5], dev[2], 1e-7, 0, "summary dev_sv_min");
    p = strstr(out, ",s2hc,0,0,0,attn,");
    CHECK(p && sscanf(p + strlen(",s2hc,0,0,0,attn,"), "%lf,%lf,%lf,%lf", &f[0], &f[1], &f[2], &f[3]) == 4,
          "summary row of sublayer 0:\n%s", out);
    CHECK(f[0] == 1 && f[1] == 0 && fabs(f[2] - 1) < 1e-9 && fabs(f[3] - 1) < 1e-9, "sublayer 0 (identity): %g %g %g %g",
          f[0], f[1], f[2], f[3]);
    /* the last two columns: ||H - I||_2 and the gain ||H_l ... H_0||_2 of the product so far */
    double AmI[9], P10[9], D10[9];
    for (int k = 0; k < 9; k++) AmI[k] = A[k] - (k % 4 == 0);
    sv_by_eig(AmI, 3, 3, D);
    CHECK_CLOSE(csv_field(out, ",s2hc,0,1,0,mlp,", 18), D[0], 1e-7, 0, "summary dist_identity of sublayer 1 = ||A - I||_2");
    CHECK_CLOSE(csv_field(out, ",s2hc,0,1,0,mlp,", 19), sv[0], 1e-7, 0, "summary composite_norm of sublayer 1 = ||A I||_2");
    CHECK_CLOSE(csv_field(out, ",s2hc,0,0,0,attn,", 18), 0, 1e-12, 0, "summary dist_identity of the identity");
    CHECK_CLOSE(csv_field(out, ",s2hc,0,0,0,attn,", 19), 1, 1e-9, 0, "summary composite_norm of the identity");
    /* step 10: H_0 all 0.5 (norm 1.5), H_1 doubly stochastic; the product is 0.5 everywhere */
    char *a6[] = {"inspect", dir, "--step", "10", "--csv", NULL};
    CHECK(inspect_capture(5, a6, out, sizeof out) == 0, "--step 10 --csv");
    for (int k = 0; k < 9; k++) P10[k] = 0.5, D10[k] = (k % 4 == 0) ? 0.25 - 1 : 0.375;
    sv_by_eig(P10, 3, 3, s);
    CHECK_CLOSE(csv_field(out, ",s2hc,10,0,0,attn,", 19), s[0], 1e-7, 0, "step 10: composite_norm of sublayer 0 = 1.5");
    CHECK_CLOSE(csv_field(out, ",s2hc,10,1,0,mlp,", 19), s[0], 1e-7, 0, "step 10: composite_norm of sublayer 1 = ||H_1 H_0||_2");
    sv_by_eig(D10, 3, 3, s);
    CHECK_CLOSE(csv_field(out, ",s2hc,10,1,0,mlp,", 18), s[0], 1e-7, 0, "step 10: dist_identity of sublayer 1");
    CHECK(strstr(out, ",end,,,,,,,,,,,,6,,\n") != NULL, "the end row keeps every column:\n%s", out);
    char *a8[] = {"inspect", dir, "--layer", "all", "--step", "0", "--csv", NULL};
    CHECK(inspect_capture(7, a8, out, sizeof out) == 0, "--layer all --step 0 --csv");
    CHECK(!strncmp(out, "run,method,step,layer,quantity,i,j,value\n", 41) && strstr(out + 1, "run,method") == NULL,
          "--layer all: one header:\n%s", out);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            CHECK_CLOSE(csv_long(out, 0, "H_res", i, j), i == j, 0, 0, "--layer all: sublayer 0's H_res[%d,%d]", i, j);
            CHECK_CLOSE(csv_long(out, 1, "H_res", i, j), A[i * 3 + j], 1e-12, 0, "--layer all: sublayer 1's H_res[%d,%d]",
                        i, j);
        }
    /* --method-compare of 20 runs (a grid's): no limit of 16 */
    char *a9[25] = {"inspect", "--method-compare", "--step", "0", "--csv"};
    for (int k = 5; k < 25; k++) a9[k] = dir;
    static char big[1 << 16];
    CHECK(inspect_capture(25, a9, big, sizeof big) == 0, "--method-compare of 20 runs");
    int lines = 0;
    for (const char *q = big; (q = strchr(q, '\n')); q++) lines++;
    CHECK(lines == 1 + 20 * 3, "a header and 3 rows of each of the 20 runs: %d lines", lines);
    char *a7[] = {"inspect", dir, "--step", "0", "--no-color", NULL};
    CHECK(inspect_capture(5, a7, out, sizeof out) == 0, "--step 0");
    CHECK(strstr(out, "   0.0000   1.0000\n") != NULL, "the text's |H-I| and |prod| of the identity, 1 as 1.0000:\n%s", out);

    /* --step 10 reads the other row */
    char *a4[] = {"inspect", dir, "--layer", "1", "--step", "10", "--csv", NULL};
    CHECK(inspect_capture(7, a4, out, sizeof out) == 0, "--layer 1 --step 10 --csv");
    CHECK_CLOSE(csv_long(out, 1, "H_res", 0, 1), 0.375, 0, 0, "step 10's H_res[0,1]");
    CHECK_CLOSE(csv_long(out, 1, "diag_frac", -1, -1), 1.0, 0, 0, "step 10's diag_frac");

    /* the Jacobian line of /final: full network mean 2 max 3, residual path mean 0.5 max 0.75 */
    char *a5[] = {"inspect", dir, "--step", "final", "--no-color", NULL};
    CHECK(inspect_capture(5, a5, out, sizeof out) == 0, "--step final");
    CHECK(strstr(out, "over 3 sequences: full network mean 2.0000 max 3.0000; residual path only mean 0.5000 max "
                      "0.7500\n") != NULL, "the Jacobian line:\n%s", out);
}

/* ---- the Jacobian -------------------------------------------------------------------------- */

/* Build J = d X_Lh / d X_0 of a one-sequence model row by row with the VJP, and compare its
 * top singular value with the power-iteration estimate. */
static void jacobian_vs_explicit(const char *method, int n, int branches) {
    gpt_model m;
    if (build(&m, method, n, 1, 8, 1, 0.5) != 0) return;
    const size_t D = (size_t)m.T * n * m.C;
    int in[8] = {3, 77, 120, 5, 9, 200, 41, 66};
    model_forward(&m, in, NULL, 1);
    real *X0 = malloc_check(D * sizeof(real)), *e = calloc_check(D, sizeof(real)), *row = malloc_check(D * sizeof(real));
    memcpy(X0, model_streams(&m, 0), D * sizeof(real));
    double *J = malloc_check(D * D * sizeof(double));
    model_streams_forward(&m, X0, branches);
    for (size_t i = 0; i < D; i++) {
        e[i] = 1;
        model_streams_backward(&m, e, row); /* row i of J = e_iᵀ J */
        e[i] = 0;
        for (size_t k = 0; k < D; k++) J[i * D + k] = row[k];
    }
    double *sv = malloc_check(D * sizeof(double)), *sv2 = malloc_check(D * sizeof(double));
    probe_svd(J, (int)D, (int)D, sv);
    sv_by_eig(J, (int)D, (int)D, sv2);
    CHECK_CLOSE(sv[0], sv2[0], 1e-9, 1e-9, "%s: explicit Jacobian, two SVD methods", method);
    real *G0 = malloc_check(m.n_params * sizeof(real));
    memcpy(G0, m.grads, m.n_params * sizeof(real));
    double est;
    /* the production settings first: within their tolerance */
    double est0;
    int it0 = probe_jacobian_norm(&m, X0, branches, PROBE_JAC_ITERS, PROBE_JAC_TOL, &est0, NULL);
    CHECK_CLOSE(est0, sv[0], 0, 5 * PROBE_JAC_TOL, "%s n=%d branches=%d: default settings (%d products)", method, n,
                branches, it0);
    CHECK(it0 <= PROBE_JAC_ITERS, "at most %d products", PROBE_JAC_ITERS);
    int it = probe_jacobian_norm(&m, X0, branches, 300, 1e-8, &est, NULL);
    CHECK_CLOSE(est, sv[0], 0, 1e-5, "%s n=%d branches=%d: estimate vs exact top singular value (second %.7f, "
                "%d products)", method, n, branches, sv[1], it);
    CHECK(est <= sv[0] * (1 + 1e-5), "the estimate is a lower bound (%g vs %g)", est, sv[0]);
    CHECK(!memcmp(G0, m.grads, m.n_params * sizeof(real)), "gradients restored");
    if (T_VERBOSE_ON())
        fprintf(stderr, "  %s n=%d branches=%d: |J| = %.7f (next %.7f), estimate %.7f in %d products (default: %.7f "
                "in %d)\n", method, n, branches, sv[0], sv[1], est, it, est0, it0);
    free(G0);
    free(sv);
    free(sv2);
    free(J);
    free(X0);
    free(e);
    free(row);
    model_free(&m);
}

static void test_jacobian(void) {
    /* identity without branches: the residual map is the identity, norm exactly 1 */
    gpt_model m;
    if (build(&m, "identity", 4, 2, 16, 3, 0.3) != 0) return;
    const size_t tot = (size_t)m.B * m.T * m.n * m.C;
    int in[24];
    for (int i = 0; i < 24; i++) in[i] = (i * 37) % 256;
    model_forward(&m, in, NULL, 3);
    real *X0 = malloc_check(tot * sizeof(real));
    memcpy(X0, model_streams(&m, 0), tot * sizeof(real));
    double s[3];
    probe_jacobian_norm(&m, X0, 0, PROBE_JAC_ITERS, PROBE_JAC_TOL, s, NULL);
    for (int b = 0; b < 3; b++) CHECK_CLOSE(s[b], 1.0, 1e-6, 0, "identity, no branches: sequence %d", b);
    free(X0);
    model_free(&m);
    jacobian_vs_explicit("mhc", 3, 1);
    jacobian_vs_explicit("mhc", 3, 0);
    jacobian_vs_explicit("hc", 2, 1);
    jacobian_vs_explicit("hc", 2, 0);
}

/* A 3-layer mhc model (n = 2, 8 wide) after a forward of two sequences, and its X_0 in
 * *X0 (allocated): what the estimate's tests below start from. 0 when built. */
static int jacobian_model(gpt_model *m, real **X0) {
    if (build(m, "mhc", 3, 1, 8, 2, 0.5) != 0) return -1;
    int in[16];
    for (int i = 0; i < 16; i++) in[i] = (i * 53) % 256;
    model_forward(m, in, NULL, 2);
    const size_t tot = (size_t)m->B * m->T * m->n * m->C;
    *X0 = malloc_check(tot * sizeof(real));
    memcpy(*X0, model_streams(m, 0), tot * sizeof(real));
    return 0;
}

/* probe_final's Jacobian covers the first Sj sequences, and only those: with a batch of
 * 2 Sj it ran over the whole first batch (Sj sequences more, whose values were never
 * recorded), at twice the cost and for as many products as the slowest of them took. Its
 * values and product counts are those of the estimate over the Sj sequences alone. */
static void test_final_jacobian_sequences(void) {
    char vpath[600], err[256];
    make_shard("val_j", 3000, vpath, sizeof vpath);
    data_shard val;
    CHECK(shard_open(&val, vpath, err, sizeof err) == 0, "%s", err);
    const int Sj = PROBE_JAC_SEQS, S = 2 * Sj;
    gpt_model m;
    if (build(&m, "mhc", 3, 2, 16, S, 0.5) != 0) return;
    h5log log;
    h5log_init(&log);
    CHECK(probe_final(&m, &val, S, &log, 1, 0) == 0, "probe_final");
    CHECK(m.B == S, "the model's buffer is the batch's again (B = %d)", m.B);
    const double *jn = last_row(&log, "/final/jacobian_norm"), *jr = last_row(&log, "/final/jacobian_norm_residual");
    const h5log_series *ji = series(&log, "/final/jacobian_iters");
    if (!jn || !jr || !ji) return;
    /* the estimate over the first Sj windows alone */
    const int T = m.T;
    uint64_t *win = malloc_check((size_t)S * sizeof(uint64_t));
    int *in = malloc_check((size_t)Sj * T * sizeof(int));
    probe_windows(&val, T, loader_eval_windows(&val, T), S, win); /* the first Sj of the S windows */
    probe_fill_inputs(&val, T, win, Sj, in);
    model_alloc_acts(&m, Sj);
    model_forward(&m, in, NULL, Sj);
    const size_t tot = (size_t)Sj * T * m.n * m.C;
    real *X0 = malloc_check(tot * sizeof(real));
    memcpy(X0, model_streams(&m, 0), tot * sizeof(real));
    double want[2][PROBE_JAC_SEQS];
    int it[2];
    for (int br = 0; br < 2; br++) it[br] = probe_jacobian_norm(&m, X0, br, PROBE_JAC_ITERS, PROBE_JAC_TOL, want[br], NULL);
    const int64_t *its = ji->data;
    for (int s = 0; s < Sj; s++) {
        CHECK(jn[s] == want[1][s], "jacobian_norm sequence %d: %.17g, over the Sj sequences %.17g", s, jn[s], want[1][s]);
        CHECK(jr[s] == want[0][s], "jacobian_norm_residual sequence %d: %.17g, over the Sj sequences %.17g", s, jr[s],
              want[0][s]);
        CHECK(its[s * 2] == it[1] && its[s * 2 + 1] == it[0], "jacobian_iters sequence %d: %lld, %lld; over the Sj "
              "sequences %d, %d", s, (long long)its[s * 2], (long long)its[s * 2 + 1], it[1], it[0]);
    }
    free(X0);
    free(in);
    free(win);
    h5log_free(&log);
    model_free(&m);
    shard_close(&val);
}

/* A signal during the estimate (SIGINT, or Slurm's SIGTERM, in training's final probe)
 * ends it at the next product: at the M preset each product is minutes of CPU, and up to
 * 2 x 60 of them ran on after the signal. */
static void test_jacobian_stops(void) {
    gpt_model m;
    real *X0;
    if (jacobian_model(&m, &X0) != 0) return;
    real *G0 = malloc_check(m.n_params * sizeof(real));
    memcpy(G0, m.grads, m.n_params * sizeof(real));
    double s[2];
    for (int branches = 0; branches < 2; branches++) {
        stop_signal = SIGINT;
        int it = probe_jacobian_norm(&m, X0, branches, PROBE_JAC_ITERS, PROBE_JAC_TOL, s, NULL);
        stop_signal = 0;
        CHECK(it == 0, "branches=%d: stopped before its first product (%d products)", branches, it);
        CHECK(!memcmp(G0, m.grads, m.n_params * sizeof(real)), "branches=%d: gradients restored", branches);
    }
    CHECK(probe_jacobian_norm(&m, X0, 1, PROBE_JAC_ITERS, PROBE_JAC_TOL, s, NULL) > 0, "without a signal it runs");
    free(X0);
    free(G0);
    model_free(&m);
}

/* The estimate ticks the caller's progress line at every product: the final probe's first
 * batch carries its whole Jacobian (13 s at 384 wide), and nothing was shown until it
 * ended. With the first line due at once (S2HC_TEST_PROGRESS_AFTER=0), a line appears
 * from inside the estimate, at the count the caller last gave. */
static void test_jacobian_progress(void) {
    gpt_model m;
    real *X0;
    if (jacobian_model(&m, &X0) != 0) return;
    char path[128], text[4096] = "";
    snprintf(path, sizeof path, "/tmp/s2hc-test-probes-progress-%d.txt", (int)getpid());
    fflush(stdout);
    const int saved = dup(STDOUT_FILENO);
    FILE *f = fopen(path, "w");
    if (saved < 0 || !f) {
        CHECK(0, "capture stdout into %s", path);
        return;
    }
    dup2(fileno(f), STDOUT_FILENO);
    setenv("S2HC_TEST_PROGRESS_AFTER", "0", 1);
    progress pr;
    progress_begin(&pr, "final probe", "sequences", 8, 1);
    pr.done = 3;
    double s[2];
    const int it = probe_jacobian_norm(&m, X0, 1, PROBE_JAC_ITERS, PROBE_JAC_TOL, s, &pr);
    progress_end(&pr);
    unsetenv("S2HC_TEST_PROGRESS_AFTER");
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    fclose(f);
    f = fopen(path, "r");
    if (f) {
        text[fread(text, 1, sizeof text - 1, f)] = 0;
        fclose(f);
    }
    remove(path);
    CHECK(it > 0, "the estimate ran (%d products)", it);
    CHECK(strstr(text, "final probe: 3/8 sequences (Jacobian: product 1, at most ") != NULL,
          "a progress line from inside the estimate, naming its product:\n%s", text);
    CHECK(pr.note[0] == '\0', "the note cleared on return: %s", pr.note);
    free(X0);
    model_free(&m);
}

int main(void) {
    T_NAME("test_probes");
    /* a fresh directory when run alone (t_setup_tmp): in /tmp itself two runs at once
       wrote the same val_a.bin, and shard_write failed in one */
    t_setup_tmp("probes", tmp, sizeof tmp);
    T_RUN(test_svd);
    T_RUN(test_composite);
    T_RUN(test_cosine);
    T_RUN(test_percentiles);
    T_RUN(test_histogram);
    T_RUN(test_diag_dominance);
    T_RUN(test_windows);
    T_RUN(test_probe_step_matches_direct);
    T_RUN(test_probe_is_read_only);
    T_RUN(test_probe_damaged_totals);
    T_RUN(test_identity_is_identity);
    T_RUN(test_final_matches_direct);
    T_RUN(test_rc_records_no_H);
    T_RUN(test_run_file_round_trip);
    T_RUN(test_inspect_foreign_shapes);
    T_RUN(test_inspect_numbers);
    T_RUN(test_jacobian);
    T_RUN(test_jacobian_stops);
    T_RUN(test_final_jacobian_sequences);
    T_RUN(test_jacobian_progress);
    if (!getenv("S2HC_KEEP_TEST_TMP")) remove_tree_now(tmp);
    return T_END();
}
