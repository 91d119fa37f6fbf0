/* layernorm.c: LayerNorm over the last dimension C, with affine weight w and bias b.
 * Row statistics are two-pass sums in fixed vector lanes (cpu_vec, cpu_math.h): the
 * mean first, then the mean square deviation from it, so an offset mean loses nothing.
 * The normalised value is computed from the saved mean and rstd, exactly as the
 * backward recomputes it. dw and db sum N rows in double. */
#include <math.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_math.h"

#define LAYERNORM_EPS 1e-5       /* added to the biased variance */
#define LAYERNORM_BLOCK 64       /* channels per task of the dw, db reduction */

/* sum of x[0..C) in fixed lanes */
static inline real ln_sum(const real *x, int C) {
    cpu_vec acc = {0};
    int c = 0;
    for (; c + CPU_VL <= C; c += CPU_VL) acc += cpu_vload(x + c);
    real s = cpu_vsum(acc);
    for (; c < C; c++) s += x[c];
    return s;
}

/* sum of (x[c] - m)^2 in fixed lanes */
static inline real ln_sqdev(const real *x, real m, int C) {
    cpu_vec acc = {0};
    int c = 0;
    for (; c + CPU_VL <= C; c += CPU_VL) {
        cpu_vec d = cpu_vload(x + c) - m;
        acc += d * d;
    }
    real s = cpu_vsum(acc);
    for (; c < C; c++) s += (x[c] - m) * (x[c] - m);
    return s;
}

/* inp, out (N, C); w, b (C), b may be NULL; mean, rstd (N) saved for the backward. */
void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                       size_t N, int C) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        const real *restrict x = inp + i * (size_t)C;
        real *restrict o = out + i * (size_t)C;
        real m = ln_sum(x, C) / (real)C;
        real var = ln_sqdev(x, m, C) / (real)C; /* biased, as in PyTorch */
        real r = (real)(1.0 / sqrt((double)var + LAYERNORM_EPS));
        if (b) {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        } else {
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] = (x[c] - m) * r * w[c];
        }
        mean[i] = m;
        rstd[i] = r;
    }
}

/* With n = (x - mean) rstd and g = dout * w (per row):
 *   dinp += rstd (g - mean_c(g) - n mean_c(g n))      (layernorm_backward_set: dinp =)
 *   dw   += sum_rows dout n,   db += sum_rows dout
 * One region: dinp by rows, then (without waiting) dw, db by blocks of channels, serial
 * over rows; no two threads add into the same value and no order depends on threads. */
static inline __attribute__((always_inline)) void ln_backward(const int add, real *dinp, real *dw, real *db,
                                                             const real *dout, const real *inp, const real *w,
                                                             const real *mean, const real *rstd, size_t N, int C) {
    const int nblocks = (dw || db) ? (C + LAYERNORM_BLOCK - 1) / LAYERNORM_BLOCK : 0;
#pragma omp parallel
    {
        if (dinp) {
#pragma omp for schedule(static) nowait
            for (size_t i = 0; i < N; i++) {
                const real *restrict x = inp + i * (size_t)C, *restrict d = dout + i * (size_t)C;
                real *restrict di = dinp + i * (size_t)C;
                const real m = mean[i], r = rstd[i];
                cpu_vec ag = {0}, agn = {0};
                int c = 0;
                for (; c + CPU_VL <= C; c += CPU_VL) {
                    cpu_vec g = cpu_vload(d + c) * cpu_vload(w + c);
                    ag += g;
                    agn += g * ((cpu_vload(x + c) - m) * r);
                }
                real gsum = cpu_vsum(ag), gnsum = cpu_vsum(agn);
                for (; c < C; c++) {
                    real g = d[c] * w[c];
                    gsum += g;
                    gnsum += g * ((x[c] - m) * r);
                }
                const real gmean = gsum / (real)C, gnmean = gnsum / (real)C;
#pragma omp simd
                for (int k = 0; k < C; k++) {
                    real nrm = (x[k] - m) * r;
                    const real v = r * (d[k] * w[k] - gmean - nrm * gnmean);
                    di[k] = add ? di[k] + v : v;
                }
            }
        }
#pragma omp for schedule(static)
        for (int blk = 0; blk < nblocks; blk++) {
            const int c0 = blk * LAYERNORM_BLOCK;
            const int len = C - c0 < LAYERNORM_BLOCK ? C - c0 : LAYERNORM_BLOCK;
            double aw[LAYERNORM_BLOCK] = {0}, ab[LAYERNORM_BLOCK] = {0};
            for (size_t i = 0; i < N; i++) {
                const real *restrict x = inp + i * (size_t)C + c0, *restrict d = dout + i * (size_t)C + c0;
                const real m = mean[i], r = rstd[i];
                if (len == LAYERNORM_BLOCK) { /* a fixed trip count the compiler vectorises */
                    for (int j = 0; j < LAYERNORM_BLOCK; j++) {
                        aw[j] += (double)(d[j] * ((x[j] - m) * r));
                        ab[j] += (double)d[j];
                    }
                } else {
                    for (int j = 0; j < len; j++) {
                        aw[j] += (double)(d[j] * ((x[j] - m) * r));
                        ab[j] += (double)d[j];
                    }
                }
            }
            for (int j = 0; j < len; j++) {
                if (dw) dw[c0 + j] += (real)aw[j];
                if (db) db[c0 + j] += (real)ab[j];
            }
        }
    }
}

void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, size_t N, int C) {
    ln_backward(1, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}

void layernorm_backward_set(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                            const real *mean, const real *rstd, size_t N, int C) {
    ln_backward(0, dinp, dw, db, dout, inp, w, mean, rstd, N, C);
}
