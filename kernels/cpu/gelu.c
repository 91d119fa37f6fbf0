/* gelu.c: GELU, tanh approximation as in GPT-2:
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
