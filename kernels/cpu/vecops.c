/* vecops.c: flat vector ops over whole parameter tensors: AdamW, the gradient norm's sum
 * of squares, in-place scaling; the thread count of the ops; and what the cores' FMA units
 * and the memory can do, in the kernels' own vectors (s2hc bench's first section). */
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
    /* the ISA, and whether a cpu_vec is one of its registers or (32 bytes on 16-byte
     * registers: NEON, SSE) a pair, CPU_NREGS counting pairs */
    const char *isa =
#if defined(__AVX512F__)
        "AVX-512";
#elif defined(__AVX2__)
        "AVX2";
#elif defined(__AVX__)
        "AVX";
#elif defined(__aarch64__)
        "NEON";
#elif defined(__x86_64__) || defined(__i386__)
        "SSE";
#else
        "generic";
#endif
    const int pairs =
#ifdef __AVX__
        0;
#else
        1;
#endif
    snprintf(buf, sizeof buf, "%d-lane %s vectors (%s, %d %s)", CPU_VL, REAL_IS_DOUBLE ? "double" : "float", isa,
             CPU_NREGS, pairs ? "pairs of 128-bit registers" : "registers");
    return buf;
}

/* ---- the machine's rates, for s2hc bench ---------------------------------------------- */

/* Independent chains of v = v a + b per thread: enough to cover an FMA's latency (4-5
 * cycles) on two FMA ports, with the two constants still in registers with 16 of them. */
#define FMA_CHAINS 10
#define FMA_ITERS 2000000L

/* Contracted to FMAs here alone (the build's -std=c11 contracts nothing). The chains
 * settle near b / (1 - a) = 0.1: no overflow, no denormals. */
CPU_CONTRACT_FAST
static real fma_chains(long iters, real seed) {
    const cpu_vec a = (cpu_vec){0} + (real)0.999999, b = (cpu_vec){0} + (real)1e-7;
    cpu_vec v[FMA_CHAINS];
#pragma GCC unroll 10
    for (int c = 0; c < FMA_CHAINS; c++) v[c] = (cpu_vec){0} + seed * (real)(c + 1);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 10
        for (int c = 0; c < FMA_CHAINS; c++) v[c] = v[c] * a + b;
    }
    real s = 0;
    for (int c = 0; c < FMA_CHAINS; c++)
        for (int j = 0; j < CPU_VL; j++) s += v[c][j];
    return s;
}
CPU_CONTRACT_END

double kernels_fma_rate(int threads) {
    double best = 0;
    volatile real sink = 0; /* the chains' results are used: nothing is left out */
    for (int r = 0; r < 5; r++) {
        real s = 0;
        const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : s)
        s += fma_chains(FMA_ITERS, (real)1e-3 * (real)(omp_get_thread_num() + 1));
        const double t = omp_get_wtime() - t0;
        sink += s;
        const double rate = 2.0 * FMA_CHAINS * CPU_VL * (double)FMA_ITERS * threads / t / 1e9;
        if (rate > best) best = rate;
    }
    (void)sink;
    return best;
}

/* Four accumulators: the loads, not the adds' latency, set the pace. */
static real read_sum(const real *x, size_t n) {
    cpu_vec s[4] = {{0}, {0}, {0}, {0}};
    const size_t n4 = n / (4 * CPU_VL) * (4 * CPU_VL);
    for (size_t i = 0; i < n4; i += 4 * CPU_VL)
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) s[k] += cpu_vload(x + i + (size_t)k * CPU_VL);
    real t = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < CPU_VL; j++) t += s[k][j];
    for (size_t i = n4; i < n; i++) t += x[i];
    return t;
}

double kernels_read_rate(const real *x, size_t n, int threads) {
    double best = 0;
    volatile real sink = 0;
    for (int r = 0; r < 3; r++) {
        real s = 0;
        const double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : s)
        {
            const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
            const size_t lo = n * id / nt, hi = n * (id + 1) / nt;
            s += read_sum(x + lo, hi - lo);
        }
        const double t = omp_get_wtime() - t0;
        sink += s;
        const double rate = (double)n * sizeof(real) / t / 1e9;
        if (rate > best) best = rate;
    }
    (void)sink;
    return best;
}
