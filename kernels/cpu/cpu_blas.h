/* cpu_blas.h: internal to kernels/cpu. Row-major BLAS calls in the precision of `real`,
 * and the fatal-error helper of the CPU ops.
 *
 * OpenBLAS takes dimensions as int: cpu_dim() stops the run, with a message, on a size
 * that does not fit instead of letting it wrap. Called inside an OpenMP parallel region,
 * the OpenMP build of OpenBLAS runs single-threaded, which is what the per-(b, h)
 * attention loops want.
 */
#ifndef S2HC_CPU_BLAS_H
#define S2HC_CPU_BLAS_H
#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels/real.h"

/* Print "s2hc: kernels: <op>: <what>" and abort: a caller broke an op's contract. */
static inline void cpu_fatal(const char *op, const char *what) {
    fprintf(stderr, "s2hc: kernels: %s: %s\n", op, what);
    fflush(stderr);
    abort();
}

/* n as an int for BLAS; fatal when it does not fit. */
static inline int cpu_dim(size_t n, const char *op) {
    if (n > (size_t)INT_MAX) cpu_fatal(op, "dimension does not fit in a BLAS int");
    return (int)n;
}

/* C (M, N) = alpha op(A) op(B) + beta C, row-major; op(X) = X^T when transX != 0.
 * lda, ldb, ldc are row strides in elements. */
static inline void cpu_gemm(int transA, int transB, int M, int N, int K, real alpha, const real *A, int lda,
                            const real *B, int ldb, real beta, real *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    enum CBLAS_TRANSPOSE ta = transA ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE tb = transB ? CblasTrans : CblasNoTrans;
#if REAL_IS_DOUBLE
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

/* B (M, N) = L B, with L (M, M) lower triangular (its upper triangle is never read). */
static inline void cpu_trmm_lower_left(int M, int N, const real *L, int ldl, real *B, int ldb) {
    if (M <= 0 || N <= 0) return;
#if REAL_IS_DOUBLE
    cblas_dtrmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, M, N, 1.0, L, ldl, B, ldb);
#else
    cblas_strmm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, M, N, 1.0f, L, ldl, B, ldb);
#endif
}

#endif
