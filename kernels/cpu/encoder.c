/* encoder.c: token + position embedding. */
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_blas.h"

/* Channels per task of the dwte scatter: 16 floats = one cache line, so two threads
 * never write the same line of a row when C is a multiple of 16. */
#define ENCODER_BLOCK 16

/* out (B, T, C) = wte[inp[b, t]] + wpe[t]; inp (B, T) token ids in [0, V). */
void encoder_forward(real *out, const int *inp, const real *wte, const real *wpe, int B, int T, int C) {
    size_t ntok = (size_t)B * T;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < ntok; i++) {
        const real *restrict e = wte + (size_t)inp[i] * C, *restrict p = wpe + (i % (size_t)T) * C;
        real *restrict o = out + i * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

/* dwpe[t] += sum_b dout[b, t]: parallel over positions, b in order.
 * dwte[inp[b, t]] += dout[b, t]: parallel over blocks of channels, tokens in order, so
 * repeated token ids add in the same order whatever the thread count.
 * Fatal on a token id outside [0, V). */
void encoder_backward(real *dwte, real *dwpe, const real *dout, const int *inp, int B, int T, int C, int V) {
    size_t ntok = (size_t)B * T;
    if (dwpe) {
#pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            real *restrict dp = dwpe + (size_t)t * C;
            for (int b = 0; b < B; b++) {
                const real *restrict d = dout + ((size_t)b * T + t) * C;
#pragma omp simd
                for (int c = 0; c < C; c++) dp[c] += d[c];
            }
        }
    }
    if (!dwte) return;
    for (size_t i = 0; i < ntok; i++)
        if (inp[i] < 0 || inp[i] >= V) cpu_fatal("encoder_backward", "token id outside [0, V)");
    int nblocks = (C + ENCODER_BLOCK - 1) / ENCODER_BLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int c0 = blk * ENCODER_BLOCK;
        int len = C - c0 < ENCODER_BLOCK ? C - c0 : ENCODER_BLOCK;
        for (size_t i = 0; i < ntok; i++) {
            real *restrict dw = dwte + (size_t)inp[i] * C + c0;
            const real *restrict d = dout + i * C + c0;
#pragma omp simd
            for (int j = 0; j < len; j++) dw[j] += d[j];
        }
    }
}
