/* spectra.c: singular values of small matrices (H_res, its deviation H_res - J, products of
 * them) by one-sided Jacobi (Hestenes), in double.
 *
 * One-sided Jacobi rotates pairs of columns of A until every pair is orthogonal; the
 * column norms are then the singular values. It needs no bidiagonalisation, is accurate to
 * a few ulps relative to ||A|| for every singular value, and is short enough to read whole.
 * The tests check it against an independent method (eigenvalues of AᵀA by the symmetric
 * Jacobi eigen-solver, and power iteration).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/util.h"
#include "probes/probes.h"

#define SVD_MAX_SWEEPS 100
#define SVD_EPS 1e-15
#define SVD_STACK 64 /* elements held on the stack (8 x 8) before falling back to malloc */

static int cmp_desc(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

int probe_svd(const double *A, int rows, int cols, double *sv) {
    /* work on the tall orientation: U is m x k with m >= k, stored column-major */
    int k0 = rows < cols ? rows : cols;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        if (!isfinite(A[i])) { /* a diverged matrix: no singular values */
            for (int j = 0; j < k0; j++) sv[j] = NAN;
            return -1;
        }
    int tall = rows >= cols;
    int m = tall ? rows : cols, k = tall ? cols : rows;
    double stack[SVD_STACK];
    size_t need = (size_t)m * k;
    double *U = need <= SVD_STACK ? stack : malloc_check(need * sizeof(double));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++) {
            double v = A[(size_t)i * cols + j];
            if (tall) U[(size_t)j * m + i] = v; /* column j of A */
            else U[(size_t)i * m + j] = v;      /* column i of Aᵀ = row i of A */
        }
    int sweeps = 0, converged = 0;
    while (!converged && sweeps < SVD_MAX_SWEEPS) {
        converged = 1;
        sweeps++;
        for (int p = 0; p < k - 1; p++)
            for (int q = p + 1; q < k; q++) {
                double *up = U + (size_t)p * m, *uq = U + (size_t)q * m;
                double alpha = 0, beta = 0, gamma = 0;
                for (int i = 0; i < m; i++) {
                    alpha += up[i] * up[i];
                    beta += uq[i] * uq[i];
                    gamma += up[i] * uq[i];
                }
                if (gamma == 0 || fabs(gamma) <= SVD_EPS * sqrt(alpha * beta)) continue;
                converged = 0;
                /* the rotation that zeroes the (p, q) entry of UᵀU */
                double zeta = (beta - alpha) / (2 * gamma);
                double t = (zeta >= 0 ? 1.0 : -1.0) / (fabs(zeta) + sqrt(1 + zeta * zeta));
                double c = 1 / sqrt(1 + t * t), s = c * t;
                for (int i = 0; i < m; i++) {
                    double a = up[i], b = uq[i];
                    up[i] = c * a - s * b;
                    uq[i] = s * a + c * b;
                }
            }
    }
    for (int j = 0; j < k; j++) {
        double s2 = 0;
        for (int i = 0; i < m; i++) s2 += U[(size_t)j * m + i] * U[(size_t)j * m + i];
        sv[j] = sqrt(s2);
    }
    qsort(sv, (size_t)k, sizeof(double), cmp_desc);
    if (U != stack) free(U);
    return converged ? sweeps : -1;
}

double probe_spectral_norm(const double *A, int n) {
    double sv[PROBE_MAX_N];
    double *s = n <= PROBE_MAX_N ? sv : malloc_check((size_t)n * sizeof(double));
    probe_svd(A, n, n, s);
    double top = s[0];
    if (s != sv) free(s);
    return top;
}

void probe_sv_and_deviation(const double *A, int n, double *sv, double *dev) {
    double D[PROBE_MAX_N * PROBE_MAX_N];
    double j = 1.0 / n;
    for (int i = 0; i < n * n; i++) D[i] = A[i] - j;
    probe_svd(A, n, n, sv);
    probe_svd(D, n, n, dev);
}
