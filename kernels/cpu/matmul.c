/* matmul.c: the linear layer, out = inp . W^T + bias, through BLAS.
 * W uses PyTorch's [out, in] layout (OC, C). */
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_blas.h"

/* Output channels per task of the bias gradient: 64 doubles of partial sums on the stack,
 * and a whole number of cache lines of dout per row. */
#define MATMUL_BIAS_BLOCK 64

/* out (N, OC) = inp (N, C) . W^T (C, OC) + bias (OC); bias may be NULL. */
void matmul_forward(real *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC) {
    int n = cpu_dim(N, "matmul_forward");
    if (n == 0 || OC <= 0) return;
    cpu_gemm(0, 1, n, OC, C, 1, inp, C, W, C, 0, out, OC);
    if (!bias) return;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        real *o = out + i * (size_t)OC;
        for (int j = 0; j < OC; j++) o[j] += bias[j];
    }
}

/* dinp (N, C) += dout (N, OC) . W (OC, C)
 * dW (OC, C)   += dout^T (OC, N) . inp (N, C)
 * dbias (OC)   += sum over the N rows of dout: parallel over blocks of output channels,
 *                 serial over tokens, so the sum order never depends on the threads. */
void matmul_backward(real *dinp, real *dW, real *dbias, const real *dout, const real *inp, const real *W,
                     size_t N, int C, int OC) {
    int n = cpu_dim(N, "matmul_backward");
    if (n == 0 || OC <= 0) return;
    if (dinp) cpu_gemm(0, 0, n, C, OC, 1, dout, OC, W, C, 1, dinp, C);
    if (dW) cpu_gemm(1, 0, OC, C, n, 1, dout, OC, inp, C, 1, dW, C);
    if (!dbias) return;
    int nblocks = (OC + MATMUL_BIAS_BLOCK - 1) / MATMUL_BIAS_BLOCK;
#pragma omp parallel for schedule(static)
    for (int blk = 0; blk < nblocks; blk++) {
        int o0 = blk * MATMUL_BIAS_BLOCK;
        int len = OC - o0 < MATMUL_BIAS_BLOCK ? OC - o0 : MATMUL_BIAS_BLOCK;
        double acc[MATMUL_BIAS_BLOCK] = {0};
        for (size_t i = 0; i < N; i++) {
            const real *d = dout + i * (size_t)OC + o0;
            for (int j = 0; j < len; j++) acc[j] += d[j];
        }
        for (int j = 0; j < len; j++) dbias[o0 + j] += (real)acc[j];
    }
}
