/* gelu.c: GELU in two forms.
 *
 * The tanh approximation, as in GPT-2:
 *   gelu(x) = x/2 (1 + tanh(u)),  u = k (x + a x^3),  k = sqrt(2/pi), a = 0.044715
 * computed through the identity (1 + tanh(u))/2 = sigmoid(2u) = 1 / (1 + exp(-2u)):
 * the same function without tanh: glibc's tanhf costs 15 ns an element here, while
 * CPU_EXP vectorises (cpu_math.h), and the sigmoid form has no cancellation. For large
 * |u| the saturated exp gives s = 1 (gelu = x) or s < 1e-38 (gelu ~ -0). */
#include <math.h>
#include <omp.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_math.h"

#define GELU_K 0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_A 0.044715

/* Elements [lo, hi) of n for this thread of the region: contiguous shares, each but the
 * last a whole number of vectors. */
static void gelu_share(size_t n, size_t *lo, size_t *hi) {
    const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    const size_t nv = (n + CPU_VL - 1) / CPU_VL;
    *lo = nv * id / nt * CPU_VL;
    *hi = id + 1 == nt ? n : nv * (id + 1) / nt * CPU_VL;
    if (*hi > n) *hi = n;
    if (*lo > n) *lo = n;
}

/* In the float build the loops below run on whole vectors (cpu_vec, one register wide,
 * where GCC's own vectorisation picks half a register on some CPUs: 15-20 % slower here,
 * docs/performance.md item 49), with cpu_vexpf: the same operations per element, the
 * same bits as the scalar tails. */
void gelu_forward(real *out, const real *inp, size_t N) {
    const real k2 = (real)(2 * GELU_K), a = (real)GELU_A;
#pragma omp parallel
    {
        size_t i, hi;
        gelu_share(N, &i, &hi);
#if !REAL_IS_DOUBLE
        for (; i + CPU_VL <= hi; i += CPU_VL) {
            const cpu_vec x = cpu_vload(inp + i);
            cpu_vstore(out + i, x / (1 + cpu_vexpf(-k2 * (x + a * x * x * x))));
        }
#endif
        for (; i < hi; i++) {
            real x = inp[i];
            out[i] = x / (1 + CPU_EXP(-k2 * (x + a * x * x * x)));
        }
    }
}

/* With s = sigmoid(2u), tanh(u) = 2s - 1 and 1 - tanh(u)^2 = 4 s (1 - s):
 *   d gelu/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) du/dx = s + 2 x s (1 - s) k (1 + 3 a x^2) */
void gelu_backward(real *dinp, const real *inp, const real *dout, size_t N) {
    const real k = (real)GELU_K, a = (real)GELU_A;
#pragma omp parallel
    {
        size_t i, hi;
        gelu_share(N, &i, &hi);
#if !REAL_IS_DOUBLE
        for (; i + CPU_VL <= hi; i += CPU_VL) {
            const cpu_vec x = cpu_vload(inp + i);
            const cpu_vec s = 1 / (1 + cpu_vexpf(-2 * k * (x + a * x * x * x)));
            const cpu_vec g = s + 2 * x * s * (1 - s) * k * (1 + 3 * a * x * x);
            cpu_vstore(dinp + i, cpu_vload(dinp + i) + g * cpu_vload(dout + i));
        }
#endif
        for (; i < hi; i++) {
            real x = inp[i];
            real s = 1 / (1 + CPU_EXP(-2 * k * (x + a * x * x * x)));
            real g = s + 2 * x * s * (1 - s) * k * (1 + 3 * a * x * x);
            dinp[i] += g * dout[i];
        }
    }
}

/* The exact GELU, x Phi(x), Phi the standard normal CDF (PyTorch's nn.GELU(), which
 * nanoGPT uses): Phi(x) = erfc(-x / sqrt 2) / 2. In the float build erfc comes from a
 * Chebyshev fit in exp (Press et al., Numerical Recipes, 2nd ed., sec. 6.2: relative
 * error under 1.2e-7 for every z >= 0), so Phi has a small relative error on both sides
 * (1 - erfc/2 for x >= 0, erfc/2 below: the tail keeps its digits), and the loop
 * vectorises through CPU_EXP as the tanh form's does; libm's erfc in the double build,
 * whose gradient checks want every digit. test_ops bounds the float form against libm. */
#define GELU_RSQRT2 0.70710678118654752440   /* 1 / sqrt 2 */
#define GELU_RSQRT2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */

/* The fit's polynomial in t, for the scalar gelu_cdf and the vector gelu_vcdf alike. */
#define GELU_ERFC_FIT(p, t)             \
    do {                                \
        p = (t) * 0.17087277f - 0.82215223f; \
        p = p * (t) + 1.48851587f;      \
        p = p * (t) - 1.13520398f;      \
        p = p * (t) + 0.27886807f;      \
        p = p * (t) - 0.18628806f;      \
        p = p * (t) + 0.09678418f;      \
        p = p * (t) + 0.37409196f;      \
        p = p * (t) + 1.00002368f;      \
        p = p * (t) - 1.26551223f;      \
    } while (0)

static inline real gelu_cdf(real x) {
#if REAL_IS_DOUBLE
    return 0.5 * erfc(-x * GELU_RSQRT2);
#else
    const float z = fabsf(x) * (float)GELU_RSQRT2, t = 1.0f / (1.0f + 0.5f * z);
    float p;
    GELU_ERFC_FIT(p, t);
    const float half = 0.5f * t * CPU_EXP(p - z * z); /* erfc(z) / 2 */
    return x >= 0 ? 1.0f - half : half;
#endif
}

#if !REAL_IS_DOUBLE
/* gelu_cdf on every lane, the same operations. */
static inline cpu_vec gelu_vcdf(cpu_vec x) {
    const cpu_ivec absmask = (cpu_ivec){0} + 0x7fffffff;
    const cpu_vec z = (cpu_vec)((cpu_ivec)x & absmask) * (float)GELU_RSQRT2, t = 1.0f / (1.0f + 0.5f * z);
    cpu_vec p;
    GELU_ERFC_FIT(p, t);
    const cpu_vec half = 0.5f * t * cpu_vexpf(p - z * z), upper = 1.0f - half;
    const cpu_ivec take = x >= 0;
    return (cpu_vec)(((cpu_ivec)upper & take) | ((cpu_ivec)half & ~take));
}
#endif

void gelu_erf_forward(real *out, const real *inp, size_t N) {
#pragma omp parallel
    {
        size_t i, hi;
        gelu_share(N, &i, &hi);
#if !REAL_IS_DOUBLE
        for (; i + CPU_VL <= hi; i += CPU_VL) {
            const cpu_vec x = cpu_vload(inp + i);
            cpu_vstore(out + i, x * gelu_vcdf(x));
        }
#endif
        for (; i < hi; i++) out[i] = inp[i] * gelu_cdf(inp[i]);
    }
}

/* d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), with Phi(x) read
 * back from the forward's output as out / x (Phi(0) = 1/2): one exp an element instead of
 * two and the fit's division, 0.81 -> 0.44 ns an element on 2 cores here (docs/
 * performance.md item 46). out / x is Phi to a rounding of each; where out underflows
 * (x < -13) both terms are below 1e-37. */
void gelu_erf_backward(real *dinp, const real *inp, const real *out, const real *dout, size_t N) {
    const real c = (real)GELU_RSQRT2PI;
#pragma omp parallel
    {
        size_t i, hi;
        gelu_share(N, &i, &hi);
#if !REAL_IS_DOUBLE
        for (; i + CPU_VL <= hi; i += CPU_VL) {
            const cpu_vec x = cpu_vload(inp + i), q = cpu_vload(out + i) / x;
            const cpu_ivec take = x != 0;
            const cpu_vec cdf = (cpu_vec)(((cpu_ivec)q & take) | ((cpu_ivec)((cpu_vec){0} + 0.5f) & ~take));
            const cpu_vec g = cdf + x * c * cpu_vexpf(-0.5f * x * x);
            cpu_vstore(dinp + i, cpu_vload(dinp + i) + g * cpu_vload(dout + i));
        }
#endif
        for (; i < hi; i++) {
            const real x = inp[i], cdf = x != 0 ? out[i] / x : (real)0.5;
            const real g = cdf + x * c * CPU_EXP(-(real)0.5 * x * x);
            dinp[i] += g * dout[i];
        }
    }
}
