/* real.h: the floating-point type of the CPU reference.
 *
 * The harness is built in float32. The gradient-check tests build the same sources a
 * second time with -DS2HC_DOUBLE, so that finite differences can be compared at 1e-6
 * instead of drowning in float32 rounding. Every CPU kernel, the model and the
 * per-token hyper-connection math use `real`, never `float` directly.
 */
#ifndef S2HC_REAL_H
#define S2HC_REAL_H

#ifdef S2HC_DOUBLE
typedef double real;
#define REAL_IS_DOUBLE 1
#define RSQRT(x) (1.0 / sqrt(x))
#define REXP exp
#define RLOG log
#define RTANH tanh
#define RFABS fabs
#define RSQRTV sqrt
#define REAL_EPS 1e-12
#else
typedef float real;
#define REAL_IS_DOUBLE 0
#define RSQRT(x) (1.0f / sqrtf(x))
#define REXP expf
#define RLOG logf
#define RTANH tanhf
#define RFABS fabsf
#define RSQRTV sqrtf
#define REAL_EPS 1e-6f
#endif

/* HOSTDEV marks per-token math that is compiled for both the CPU and the CUDA backend. */
#ifdef __CUDACC__
#define HOSTDEV __host__ __device__
#else
#define HOSTDEV
#endif

/* HC_FLATTEN: inline everything this function calls, so that a body written for a
 * run-time n and called with a constant n (a specialisation for the common n = 4) is
 * compiled for that constant: loops unrolled, strides folded. */
#if defined(__GNUC__)
#define HC_FLATTEN __attribute__((flatten))
#else
#define HC_FLATTEN
#endif

#endif
