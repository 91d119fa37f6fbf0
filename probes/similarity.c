/* similarity.c: how alike the n residual streams of a token are (paper Fig 3, 10, 11).
 *
 * For one token with streams X [n, C], the mean pairwise cosine similarity is
 *     mean over i < j of <x_i, x_j> / (||x_i|| ||x_j||).
 * "After mixing" uses the rows of Y = H_res · X (the residual part of the next streams,
 * before the branch output is added). Both come from the Gram matrix G = X Xᵀ in double:
 * Y Yᵀ = H G Hᵀ, so the mixed streams are never formed (n(n+1)/2 dot products of length C
 * per token instead of n² C multiply-adds for Y and n²C/2 more for its Gram matrix).
 */
#include <math.h>

#include "probes/probes.h"

double probe_cos_from_gram(const double *G, int n) {
    double s = 0;
    int cnt = 0;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            double d = G[i * n + i] * G[j * n + j];
            if (!(d > 0)) continue; /* a zero stream has no direction */
            s += G[i * n + j] / sqrt(d);
            cnt++;
        }
    return cnt ? s / cnt : NAN;
}

void probe_token_cos(const real *X, const real *H, int n, int C, double *before, double *after) {
    double G[PROBE_MAX_N * PROBE_MAX_N] = {0}, HG[PROBE_MAX_N * PROBE_MAX_N], Y[PROBE_MAX_N * PROBE_MAX_N] = {0};
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) {
            const real *a = X + (size_t)i * C, *b = X + (size_t)j * C;
            double s = 0;
            for (int c = 0; c < C; c++) s += (double)a[c] * b[c];
            G[i * n + j] = G[j * n + i] = s;
        }
    *before = probe_cos_from_gram(G, n);
    /* Y Yᵀ = H G Hᵀ */
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += (double)H[i * n + k] * G[k * n + j];
            HG[i * n + j] = s;
        }
    for (int i = 0; i < n; i++)
        for (int j = i; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += HG[i * n + k] * (double)H[j * n + k];
            Y[i * n + j] = Y[j * n + i] = s;
        }
    *after = probe_cos_from_gram(Y, n);
}
