/* vecops.c: flat vector ops over whole parameter tensors: AdamW, the gradient norm's sum
 * of squares, in-place scaling; and the thread count of the ops. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_math.h"

/* sumsq always splits x into this many contiguous chunks, whatever the thread count,
 * and adds the chunk sums in chunk order: the result is the same for any thread count.
 * A chunk's sum is cpu_dot's: 8 accumulators in double, in a fixed order. */
#define SUMSQ_CHUNKS 256
/* Elementwise ops on fewer values run on the calling thread: a fork and join costs more
 * than the work (biases, norm gains, hyper-connection scalars: most tensors by count). */
#define VECOPS_PAR_MIN 32768

/* g = g_stored * gscale (the clipping factor: x * 1 is x, bit for bit)
 * m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  mhat = m/bc1;  vhat = v/bc2
 * p -= lr (mhat / (sqrt(vhat) + eps) + wd p)   (decoupled weight decay)
 * on the calling thread. In vector code: this file is built with -fno-math-errno
 * (Makefile), without which the compiler keeps sqrtf scalar; scalar divisions and
 * square roots made AdamW ~9 ns per parameter (docs/performance.md, log item 28). Vector
 * sqrt and division round as the scalar ones do and nothing is contracted: the same
 * bits (tests/test_ops). */
void adamw_update_span(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                       float eps, float wd, float bc1, float bc2, float gscale) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) {
        float gi = g[i] * gscale;
        float mi = beta1 * m[i] + (1.0f - beta1) * gi;
        float vi = beta2 * v[i] + (1.0f - beta2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        float mhat = mi / bc1, vhat = vi / bc2;
        p[i] -= lr * (mhat / (sqrtf(vhat) + eps) + wd * p[i]);
    }
}

void adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float wd, int t) {
    const float bc1 = adamw_bias_correction(beta1, t), bc2 = adamw_bias_correction(beta2, t);
#pragma omp parallel if (n >= VECOPS_PAR_MIN)
    {
        const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        const size_t lo = n * id / nt, hi = n * (id + 1) / nt;
        adamw_update_span(p + lo, g + lo, m + lo, v + lo, hi - lo, lr, beta1, beta2, eps, wd, bc1, bc2, 1.0f);
    }
}

float adamw_bias_correction(float beta, int t) { return (float)(1.0 - pow(beta, t)); }

double sumsq(const real *x, size_t n) {
    double part[SUMSQ_CHUNKS];
#pragma omp parallel for schedule(static)
    for (int k = 0; k < SUMSQ_CHUNKS; k++) {
        size_t i0 = n / SUMSQ_CHUNKS * k + (n % SUMSQ_CHUNKS) * k / SUMSQ_CHUNKS;
        size_t i1 = n / SUMSQ_CHUNKS * (k + 1) + (n % SUMSQ_CHUNKS) * (k + 1) / SUMSQ_CHUNKS;
        part[k] = cpu_dot(x + i0, x + i0, i1 - i0); /* its 8 lanes in double, by whole vectors */
    }
    double total = 0;
    for (int k = 0; k < SUMSQ_CHUNKS; k++) total += part[k];
    return total;
}

void scale_inplace(real *x, real s, size_t n) {
#pragma omp parallel for simd schedule(static) if (n >= VECOPS_PAR_MIN)
    for (size_t i = 0; i < n; i++) x[i] *= s;
}

int kernels_threads(void) { return omp_get_max_threads(); }

const char *kernels_vectors(void) {
    static char buf[96];
    const char *isa =
#if defined(__AVX512F__)
        "AVX-512";
#elif defined(__AVX2__)
        "AVX2";
#elif defined(__AVX__)
        "AVX";
#else
        "SSE";
#endif
    snprintf(buf, sizeof buf, "%d-lane %s vectors (%s, %d registers)", CPU_VL, REAL_IS_DOUBLE ? "double" : "float", isa,
             CPU_NREGS);
    return buf;
}
