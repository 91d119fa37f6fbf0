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
 * last a whole number of vectors (nv (id + 1) / nt < nv for all but the last: inside n). */
static void gelu_share(size_t n, size_t *lo, size_t *hi) {
    const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
    const size_t nv = (n + CPU_VL - 1) / CPU_VL;
    *lo = nv * id / nt * CPU_VL;
    *hi = id + 1 == nt ? n : nv * (id + 1) / nt * CPU_VL;
}

/* The four elementwise ops, each as one step on a whole vector at i and one on element
 * i. gelu_run (inside each op's region) takes this thread's share in whole vectors, then
 * a scalar tail. In the float build the vectors are cpu_vec (one register wide, where
 * GCC's own vectorisation picks half a register on some CPUs: 15-25 % slower here,
 * docs/performance.md item 49) with cpu_vexpf; each expression below is written once for
 * both (a macro over the element type's exp), so a vector's lanes get the scalar tail's
 * bits. The double build (gradient checks) runs the scalar step alone. */
typedef struct {
    real *out;
    const real *inp, *fwd, *dout;
} gelu_args;
typedef void (*gelu_step)(const gelu_args *, size_t);

#if REAL_IS_DOUBLE
#define GELU_V(step) NULL
#else
#define GELU_V(step) step
#endif

static inline __attribute__((always_inline)) void gelu_run(size_t N, const gelu_args *shared, gelu_step vec,
                                                          gelu_step one) {
    /* this thread's own copy of the pointers: the steps' stores (through memcpy) could
       alias the shared one, which every step would then load again, from a line of the
       first thread's stack that its own spills write (2 threads: 20 % slower backward) */
    const gelu_args a = *shared;
    size_t i, hi;
    gelu_share(N, &i, &hi);
#if !REAL_IS_DOUBLE
    for (; i + CPU_VL <= hi; i += CPU_VL) vec(&a, i);
#else
    (void)vec;
#endif
    for (; i < hi; i++) one(&a, i);
}

/* The vector step and the scalar step of an op whose element is out = EXPR(x, EXP, f, d)
 * (out += with ADD) of x = inp[i], f = fwd[i] and d = dout[i] (those the expression
 * names: the others are never read). */
#define GELU_STEP_ONE(name, ADD, EXPR)                                \
    static inline void name##_one(const gelu_args *a, size_t i) {    \
        const real x = a->inp[i];                                     \
        const real v = EXPR(x, CPU_EXP, a->fwd[i], a->dout[i]);       \
        a->out[i] = ADD ? a->out[i] + v : v;                          \
    }
#if REAL_IS_DOUBLE
#define GELU_STEPS(name, ADD, EXPR) GELU_STEP_ONE(name, ADD, EXPR)
#else
#define GELU_STEPS(name, ADD, EXPR)                                                           \
    GELU_STEP_ONE(name, ADD, EXPR)                                                            \
    static inline void name##_vec(const gelu_args *a, size_t i) {                            \
        const cpu_vec x = cpu_vload(a->inp + i);                                              \
        const cpu_vec v = EXPR(x, cpu_vexpf, cpu_vload(a->fwd + i), cpu_vload(a->dout + i)); \
        cpu_vstore(a->out + i, ADD ? cpu_vload(a->out + i) + v : v);                          \
    }
#endif

/* gelu(x) = x sigmoid(2u), u = k (x + a x^3). */
#define GELU_TANH(x, EXP, f, d) ((x) / (1 + EXP(-(real)(2 * GELU_K) * ((x) + (real)GELU_A * (x) * (x) * (x)))))
GELU_STEPS(gelu_tanh_fwd, 0, GELU_TANH)

/* With s = sigmoid(2u), tanh(u) = 2s - 1 and 1 - tanh(u)^2 = 4 s (1 - s):
 *   d gelu/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) du/dx = s + 2 x s (1 - s) k (1 + 3 a x^2),
 * times dout, added into dinp. */
#define GELU_TANH_SIG(x, EXP) (1 / (1 + EXP(-2 * (real)GELU_K * ((x) + (real)GELU_A * (x) * (x) * (x)))))
#define GELU_TANH_GRAD(s, x) ((s) + 2 * (x) * (s) * (1 - (s)) * (real)GELU_K * (1 + 3 * (real)GELU_A * (x) * (x)))
#define GELU_TANH_BWD(x, EXP, f, d) (GELU_TANH_GRAD(GELU_TANH_SIG(x, EXP), x) * (d))
GELU_STEPS(gelu_tanh_bwd, 1, GELU_TANH_BWD)

void gelu_forward(real *out, const real *inp, size_t N) {
    const gelu_args a = {out, inp, NULL, NULL};
#pragma omp parallel
    gelu_run(N, &a, GELU_V(gelu_tanh_fwd_vec), gelu_tanh_fwd_one);
}

void gelu_backward(real *dinp, const real *inp, const real *dout, size_t N) {
    const gelu_args a = {dinp, inp, NULL, dout};
#pragma omp parallel
    gelu_run(N, &a, GELU_V(gelu_tanh_bwd_vec), gelu_tanh_bwd_one);
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
#define GELU_ERFC_FIT(p, t)                  \
    do {                                     \
        p = (t) * 0.17087277f - 0.82215223f; \
        p = p * (t) + 1.48851587f;           \
        p = p * (t) - 1.13520398f;           \
        p = p * (t) + 0.27886807f;           \
        p = p * (t) - 0.18628806f;           \
        p = p * (t) + 0.09678418f;           \
        p = p * (t) + 0.37409196f;           \
        p = p * (t) + 1.00002368f;           \
        p = p * (t) - 1.26551223f;           \
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

static inline void gelu_erf_fwd_one(const gelu_args *a, size_t i) { a->out[i] = a->inp[i] * gelu_cdf(a->inp[i]); }
#if !REAL_IS_DOUBLE
static inline void gelu_erf_fwd_vec(const gelu_args *a, size_t i) {
    const cpu_vec x = cpu_vload(a->inp + i);
    cpu_vstore(a->out + i, x * gelu_vcdf(x));
}
#endif

void gelu_erf_forward(real *out, const real *inp, size_t N) {
    const gelu_args a = {out, inp, NULL, NULL};
#pragma omp parallel
    gelu_run(N, &a, GELU_V(gelu_erf_fwd_vec), gelu_erf_fwd_one);
}

/* d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2 / 2) / sqrt(2 pi), with Phi(x) read
 * back from the forward's output as out / x (Phi(0) = 1/2): one exp an element instead of
 * two and the fit's division, 0.81 -> 0.44 ns an element on 2 cores here (docs/
 * performance.md item 46). out / x is Phi to a rounding of each; where out underflows
 * (x < -13) both terms are below 1e-37. */
#define GELU_ERF_GRAD(x, cdf, EXP) ((cdf) + (x) * (real)GELU_RSQRT2PI * EXP(-(real)0.5 * (x) * (x)))
static inline void gelu_erf_bwd_one(const gelu_args *a, size_t i) {
    const real x = a->inp[i], cdf = x != 0 ? a->fwd[i] / x : (real)0.5;
    a->out[i] += GELU_ERF_GRAD(x, cdf, CPU_EXP) * a->dout[i];
}
#if !REAL_IS_DOUBLE
static inline void gelu_erf_bwd_vec(const gelu_args *a, size_t i) {
    const cpu_vec x = cpu_vload(a->inp + i), q = cpu_vload(a->fwd + i) / x;
    const cpu_ivec take = x != 0;
    const cpu_vec cdf = (cpu_vec)(((cpu_ivec)q & take) | ((cpu_ivec)((cpu_vec){0} + 0.5f) & ~take));
    cpu_vstore(a->out + i, cpu_vload(a->out + i) + GELU_ERF_GRAD(x, cdf, cpu_vexpf) * cpu_vload(a->dout + i));
}
#endif

void gelu_erf_backward(real *dinp, const real *inp, const real *out, const real *dout, size_t N) {
    const gelu_args a = {dinp, inp, out, dout};
#pragma omp parallel
    gelu_run(N, &a, GELU_V(gelu_erf_bwd_vec), gelu_erf_bwd_one);
}
