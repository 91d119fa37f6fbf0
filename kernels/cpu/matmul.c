/* matmul.c: the linear layer, out = inp . W^T + bias, through BLAS.
 * W uses PyTorch's [out, in] layout (OC, C).
 *
 * Each call is one OpenMP region in which every thread runs single-threaded BLAS on its
 * own share of the output (OpenBLAS's OpenMP build runs one thread inside a region):
 * the forward by rows of out, with the bias added while those rows are in cache; the
 * backward by rows of dinp and by rows of dW and columns of dbias. One fork and join per
 * call instead of one per BLAS call plus one for the bias: on a loaded machine every
 * join waits for a thread to be scheduled (docs/performance.md). No share splits a
 * reduction, so results are bit-identical for a given thread count. Called from inside
 * another region, the call runs on the calling thread alone.
 */
#include <omp.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_blas.h"
#include "kernels/cpu/cpu_math.h"

/* Output channels per block of the bias gradient: 64 doubles of partial sums on the
 * stack, and a whole number of cache lines of dout per row. */
#define MATMUL_BIAS_BLOCK 64

/* [lo, hi) of `n` items for thread tid of nth, in units of `align` (the last takes the rest). */
static inline void share(int n, int tid, int nth, int align, int *lo, int *hi) {
    int units = (n + align - 1) / align;
    int u0 = (int)((long long)units * tid / nth), u1 = (int)((long long)units * (tid + 1) / nth);
    *lo = u0 * align < n ? u0 * align : n;
    *hi = u1 * align < n ? u1 * align : n;
}

/* A whole block of dbias's column sums over the N rows in order, in double, the sums in
 * registers (GCC's vectors of the scalar loop kept them on the stack): the same bits.
 * Returns 1; 0 in the double build, whose scalar loop does every block. */
static int bias_block(double *acc, const real *dout, size_t N, int OC, int o0) {
#if !REAL_IS_DOUBLE
    cpu_dlanes s[2 * MATMUL_BIAS_BLOCK / CPU_VL] = {{0}};
    for (size_t i = 0; i < N; i++)
#pragma GCC unroll 8
        for (int v = 0; v < MATMUL_BIAS_BLOCK / CPU_VL; v++)
            cpu_colsum_add(s + 2 * v, cpu_vload(dout + i * (size_t)OC + o0 + v * CPU_VL));
    memcpy(acc, s, sizeof s);
    return 1;
#else
    (void)acc, (void)dout, (void)N, (void)OC, (void)o0;
    return 0;
#endif
}

/* out (N, OC) = inp (N, C) . W^T (C, OC) + bias (OC); bias may be NULL. */
void matmul_forward(real *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC) {
    int n = cpu_dim(N, "matmul_forward");
    if (n == 0 || OC <= 0) return;
#pragma omp parallel
    {
        int r0, r1;
        share(n, omp_get_thread_num(), omp_get_num_threads(), 1, &r0, &r1);
        if (r1 > r0) {
            cpu_gemm(0, 1, r1 - r0, OC, C, 1, inp + (size_t)r0 * C, C, W, C, 0, out + (size_t)r0 * OC, OC);
            if (bias)
                for (int i = r0; i < r1; i++) {
                    real *restrict o = out + (size_t)i * OC;
#pragma omp simd
                    for (int j = 0; j < OC; j++) o[j] += bias[j];
                }
        }
    }
}

/* The same product for a few rows (decoding, model_decode), without BLAS, which packs the
 * whole of W for every call (10 ms for one row of a 768 x 2304 product, where reading W
 * takes ~0.3): each output one cpu_dot of a row of inp and a row of W, in double, so a
 * row's bits do not depend on N. Parallel over the output channels. */
void matmul_forward_rows(real *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC) {
    int n = cpu_dim(N, "matmul_forward_rows");
    if (n == 0 || OC <= 0) return;
#pragma omp parallel for schedule(static) if ((size_t)OC * C >= 65536)
    for (int j = 0; j < OC; j++) {
        const real *w = W + (size_t)j * C;
        for (int i = 0; i < n; i++)
            out[(size_t)i * OC + j] = (real)(cpu_dot(inp + (size_t)i * C, w, (size_t)C) + (bias ? bias[j] : 0));
    }
}

/* dinp (N, C) += dout (N, OC) . W (OC, C)          by rows of dinp
 * dW (OC, C)   += dout^T (OC, N) . inp (N, C)      by rows of dW (each sums all N tokens)
 * dbias (OC)   += sum over the N rows of dout:      by blocks of output channels, tokens in
 *                 order, in double: the sum order never depends on the threads. */
void matmul_backward(real *dinp, real *dW, real *dbias, const real *dout, const real *inp, const real *W,
                     size_t N, int C, int OC) {
    int n = cpu_dim(N, "matmul_backward");
    if (n == 0 || OC <= 0) return;
#pragma omp parallel
    {
        const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
        int lo, hi;
        if (dinp) {
            share(n, tid, nth, 1, &lo, &hi);
            if (hi > lo)
                cpu_gemm(0, 0, hi - lo, C, OC, 1, dout + (size_t)lo * OC, OC, W, C, 1, dinp + (size_t)lo * C, C);
        }
        if (dW) {
            share(OC, tid, nth, 1, &lo, &hi);
            if (hi > lo) cpu_gemm(1, 0, hi - lo, C, n, 1, dout + lo, OC, inp, C, 1, dW + (size_t)lo * C, C);
        }
        if (dbias) {
            share(OC, tid, nth, MATMUL_BIAS_BLOCK, &lo, &hi);
            for (int o0 = lo; o0 < hi; o0 += MATMUL_BIAS_BLOCK) {
                int len = hi - o0 < MATMUL_BIAS_BLOCK ? hi - o0 : MATMUL_BIAS_BLOCK;
                double acc[MATMUL_BIAS_BLOCK] = {0};
                if (len < MATMUL_BIAS_BLOCK || !bias_block(acc, dout, N, OC, o0))
                    for (size_t i = 0; i < N; i++) {
                        const real *d = dout + i * (size_t)OC + o0;
                        if (len == MATMUL_BIAS_BLOCK) /* a fixed trip count the compiler vectorises */
                            for (int j = 0; j < MATMUL_BIAS_BLOCK; j++) acc[j] += d[j];
                        else
                            for (int j = 0; j < len; j++) acc[j] += d[j];
                    }
                for (int j = 0; j < len; j++) dbias[o0 + j] += (real)acc[j];
            }
        }
    }
}
