/* gelu.c: GELU in two forms.
 *
 * The tanh approximation, as in GPT-2:
 *   gelu(x) = x/2 (1 + tanh(u)),  u = k (x + a x^3),  k = sqrt(2/pi), a = 0.044715
 * computed through the identity (1 + tanh(u))/2 = sigmoid(2u) = 1 / (1 + exp(-2u)):
 * the same function without tanh: glibc's tanhf costs 15 ns an element here, while
 * CPU_EXP vectorises (cpu_math.h), and the sigmoid form has no cancellation. For large
 * |u| the saturated exp gives s = 1 (gelu = x) or s < 1e-38 (gelu ~ -0). */
#include <math.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_math.h"

#define GELU_K 0.79788456080286535588 /* sqrt(2/pi) */
#define GELU_A 0.044715

void gelu_forward(real *out, const real *inp, size_t N) {
    const real k2 = (real)(2 * GELU_K), a = (real)GELU_A;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        out[i] = x / (1 + CPU_EXP(-k2 * (x + a * x * x * x)));
    }
}

/* With s = sigmoid(2u), tanh(u) = 2s - 1 and 1 - tanh(u)^2 = 4 s (1 - s):
 *   d gelu/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) du/dx = s + 2 x s (1 - s) k (1 + 3 a x^2) */
void gelu_backward(real *dinp, const real *inp, const real *dout, size_t N) {
    const real k = (real)GELU_K, a = (real)GELU_A;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) {
        real x = inp[i];
        real s = 1 / (1 + CPU_EXP(-2 * k * (x + a * x * x * x)));
        real g = s + 2 * x * s * (1 - s) * k * (1 + 3 * a * x * x);
        dinp[i] += g * dout[i];
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

static inline real gelu_cdf(real x) {
#if REAL_IS_DOUBLE
    return 0.5 * erfc(-x * GELU_RSQRT2);
#else
    const float z = fabsf(x) * (float)GELU_RSQRT2, t = 1.0f / (1.0f + 0.5f * z);
    float p = 0.17087277f;
    p = p * t - 0.82215223f;
    p = p * t + 1.48851587f;
    p = p * t - 1.13520398f;
    p = p * t + 0.27886807f;
    p = p * t - 0.18628806f;
    p = p * t + 0.09678418f;
    p = p * t + 0.37409196f;
    p = p * t + 1.00002368f;
    p = p * t - 1.26551223f;
    const float half = 0.5f * t * CPU_EXP(p - z * z); /* erfc(z) / 2 */
    return x >= 0 ? 1.0f - half : half;
#endif
}

void gelu_erf_forward(real *out, const real *inp, size_t N) {
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) out[i] = inp[i] * gelu_cdf(inp[i]);
}

/* d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), with Phi(x) read
 * back from the forward's output as out / x (Phi(0) = 1/2): one exp an element instead of
 * two and the fit's division, 0.81 -> 0.44 ns an element on 2 cores here (docs/
 * performance.md item 46). out / x is Phi to a rounding of each; where out underflows
 * (x < -13) both terms are below 1e-37. */
void gelu_erf_backward(real *dinp, const real *inp, const real *out, const real *dout, size_t N) {
    const real c = (real)GELU_RSQRT2PI;
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < N; i++) {
        const real x = inp[i], cdf = x != 0 ? out[i] / x : (real)0.5;
        const real g = cdf + x * c * CPU_EXP(-(real)0.5 * x * x);
        dinp[i] += g * dout[i];
    }
}
