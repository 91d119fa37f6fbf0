/* layernorm.c: LayerNorm over the last dimension C, with affine weight w and bias b.
 * Statistics are accumulated in double; the normalised value is then computed in `real`
 * from the saved mean and rstd, exactly as the backward recomputes it. */
#include <math.h>
#include "kernels/kernels.h"

#define LAYERNORM_EPS 1e-5       /* added to the biased variance */
#define LAYERNORM_BLOCK 64       /* channels per task of the dw, db reduction */

/* inp, out (N, C); w, b (C); mean, rstd (N) saved for the backward. */
void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                       size_t N, int C) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        const real *x = inp + i * (size_t)C;
        double s = 0;
        for (int c = 0; c < C; c++) s += x[c];
        double mu = s / C;
        double var = 0;
        for (int c = 0; c < C; c++) {
            double d = x[c] - mu;
            var += d * d;
        }
        var /= C; /* biased, as in PyTorch */
        real m = (real)mu, r = (real)(1.0 / sqrt(var + LAYERNORM_EPS));
        real *o = out + i * (size_t)C;
        for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        mean[i] = m;
        rstd[i] = r;
    }
}

/* With n = (x - mean) rstd and g = dout * w (per row):
 *   dinp += rstd (g - mean_c(g) - n mean_c(g n))
 *   dw   += sum_rows dout n,   db += sum_rows dout
 * dinp is parallel over rows; dw, db over blocks of channels (serial over rows), so no
 * two threads add into the same value and the order never depends on the threads. */
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, size_t N, int C) {
    if (dinp) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N; i++) {
            const real *x = inp + i * (size_t)C, *d = dout + i * (size_t)C;
            real m = mean[i], r = rstd[i];
            double gsum = 0, gnsum = 0;
            for (int c = 0; c < C; c++) {
                real g = d[c] * w[c];
                gsum += g;
                gnsum += g * ((x[c] - m) * r);
            }
            real gmean = (real)(gsum / C), gnmean = (real)(gnsum / C);
            real *di = dinp + i * (size_t)C;
            for (int c = 0; c < C; c++) {
                real nrm = (x[c] - m) * r;
                di[c] += r * (d[c] * w[c] - gmean - nrm * gnmean);
            }
        }
    }
    if (!dw && !db) return;
    int nblocks = (C + LAYERNORM_BLOCK - 1) / LAYERNORM_BLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * LAYERNORM_BLOCK;
        int len = C - c0 < LAYERNORM_BLOCK ? C - c0 : LAYERNORM_BLOCK;
        double aw[LAYERNORM_BLOCK] = {0}, ab[LAYERNORM_BLOCK] = {0};
        for (size_t i = 0; i < N; i++) {
            const real *x = inp + i * (size_t)C + c0, *d = dout + i * (size_t)C + c0;
            real m = mean[i], r = rstd[i];
            for (int j = 0; j < len; j++) {
                aw[j] += d[j] * ((x[j] - m) * r);
                ab[j] += d[j];
            }
        }
        for (int j = 0; j < len; j++) {
            if (dw) dw[c0 + j] += (real)aw[j];
            if (db) db[c0 + j] += (real)ab[j];
        }
    }
}
