/* layernorm.c: LayerNorm over the last dimension C, with affine weight w and bias b.
 * Row statistics are two-pass sums in fixed vector lanes (cpu_vec, cpu_math.h): the
 * mean first, then the mean square deviation from it, so an offset mean loses nothing.
 * The normalised value is computed from the saved mean and rstd, exactly as the
 * backward recomputes it. dw and db sum N rows in double. */
#include <math.h>
#include <string.h>
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
        int c = 0; /* whole registers (GCC's own vectors of this loop were half as wide), then the tail */
        if (b) {
            for (; c + CPU_VL <= C; c += CPU_VL)
                cpu_vstore(o + c, (cpu_vload(x + c) - m) * r * cpu_vload(w + c) + cpu_vload(b + c));
            for (; c < C; c++) o[c] = (x[c] - m) * r * w[c] + b[c];
        } else {
            for (; c + CPU_VL <= C; c += CPU_VL) cpu_vstore(o + c, (cpu_vload(x + c) - m) * r * cpu_vload(w + c));
            for (; c < C; c++) o[c] = (x[c] - m) * r * w[c];
        }
        mean[i] = m;
        rstd[i] = r;
    }
}

#if !REAL_IS_DOUBLE
/* One whole block of dw, db partial sums (returns 1): aw[j] += (double)(d n), ab[j] += (double)d over
 * the N rows in order, as the scalar loop adds them (each element its own sum, so the
 * same bits), the sums in registers: the block at once with 32 registers, by halves with
 * AVX2's 16. (GCC's own vectors of the scalar loop kept them on the stack.) */
#define LN_PARTS (CPU_NREGS >= 32 ? 1 : 2)
#define LN_PV (LAYERNORM_BLOCK / LN_PARTS / CPU_VL) /* cpu_vec of a part */
_Static_assert(LAYERNORM_BLOCK % (LN_PARTS * CPU_VL) == 0, "ln_dwdb_block: parts of whole vectors");
static int ln_dwdb_block(double *aw, double *ab, const real *dout, const real *inp, const real *mean,
                         const real *rstd, size_t N, int C, int c0) {
    for (int h = 0; h < LN_PARTS; h++) {
        cpu_dlanes sw[2 * LN_PV] = {{0}}, sb[2 * LN_PV] = {{0}};
        const int ch = c0 + h * LN_PV * CPU_VL;
        for (size_t i = 0; i < N; i++) {
            const real *x = inp + i * (size_t)C + ch, *d = dout + i * (size_t)C + ch;
            const real m = mean[i], r = rstd[i];
#pragma GCC unroll 8
            for (int v = 0; v < LN_PV; v++) {
                const cpu_vec dv = cpu_vload(d + v * CPU_VL);
                cpu_colsum_add(sw + 2 * v, dv * ((cpu_vload(x + v * CPU_VL) - m) * r));
                cpu_colsum_add(sb + 2 * v, dv);
            }
        }
        memcpy(aw + h * LN_PV * CPU_VL, sw, sizeof sw);
        memcpy(ab + h * LN_PV * CPU_VL, sb, sizeof sb);
    }
    return 1;
}
#else
/* The double build: the scalar loop does every block (returns 0: not done here). */
static int ln_dwdb_block(double *aw, double *ab, const real *dout, const real *inp, const real *mean,
                         const real *rstd, size_t N, int C, int c0) {
    (void)aw, (void)ab, (void)dout, (void)inp, (void)mean, (void)rstd, (void)N, (void)C, (void)c0;
    return 0;
}
#endif

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
                int k = 0; /* whole registers, then the tail (as the forward's last loop) */
                for (; k + CPU_VL <= C; k += CPU_VL) {
                    const cpu_vec nrm = (cpu_vload(x + k) - m) * r;
                    const cpu_vec v = r * (cpu_vload(d + k) * cpu_vload(w + k) - gmean - nrm * gnmean);
                    cpu_vstore(di + k, add ? cpu_vload(di + k) + v : v);
                }
                for (; k < C; k++) {
                    const real nrm = (x[k] - m) * r;
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
            if (len < LAYERNORM_BLOCK || !ln_dwdb_block(aw, ab, dout, inp, mean, rstd, N, C, c0))
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
