/* cpu_math.h: internal to kernels/cpu. Small vectorisable helpers whose result never
 * depends on vectorisation, alignment or threads.
 *
 * cpu_expf: glibc's expf is a call the compiler cannot vectorise (3 ns an element here,
 *   most of GELU and of the softmax rows). This one is plain arithmetic without branches
 *   or calls, so `#pragma omp simd` loops vectorise it, and since -std=c11 turns off
 *   FMA contraction the vector and scalar code round identically.
 *   Method: x = n ln2 + r, |r| <= ln2/2; e^x = 2^n e^r, e^r by its Taylor series to r^7
 *   (truncation r^8/8! < 6e-9 relative, below float's 6e-8); 2^n built in the exponent
 *   bits. Measured max relative error 1.0e-7 (under 2 ulp) on every 7th float of
 *   [-87, 88]; test_ops checks 2e-7 on a sweep. Saturates instead of overflowing: x >= 88 gives
 *   e^88 = 1.65e38, x <= -87.33 gives FLT_MIN = 1.18e-38, never inf or 0. NaN in,
 *   NaN out.
 * CPU_EXP: cpu_expf in the float build, libm's exp in the double build (the gradient
 *   checks want full double precision).
 * cpu_sum, cpu_dot: double accumulation in CPU_LANES fixed lanes (element i goes to lane
 *   i % CPU_LANES, lanes added in order at the end): a fixed order, eight times shorter
 *   than one serial dependency chain; in the float build by vectors of doubles
 *   (cpu_dsum), the same bits.
 * cpu_vexpf, cpu_max, cpu_softmax_row: cpu_expf on whole vectors (the same bits), the
 *   largest of a row, and a row's softmax by both, whose loops GCC had left with half a
 *   register's lanes, a serial reduction of the maximum and scalar tails
 *   (docs/performance.md, log item 49).
 */
#ifndef S2HC_CPU_MATH_H
#define S2HC_CPU_MATH_H
#include <math.h>
#include <stdint.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h>
#endif
#include "kernels/real.h"

#define CPU_EXPF_HI 88.0f           /* e^88 < FLT_MAX; 88/ln2 rounds to n = 127 */
#define CPU_EXPF_LO (-87.3365447f)  /* ln(FLT_MIN): n = -126, the lowest normal exponent */
#define CPU_LANES 8

/* x > b ? b : x (below 0), or x < b ? b : x (below 1), by selecting bits: a comparison, not
 * fminf, so NaN passes through; and no branch, which GCC's jump threading would split
 * into copies of the whole function, one per clamped constant, and so keep an `omp simd`
 * loop of cpu_expf from vectorising (it did for every AVX2 target: log item 37). */
static inline float cpu_clampf(float x, float b, int below) {
    uint32_t xb, bb;
    memcpy(&xb, &x, sizeof xb);
    memcpy(&bb, &b, sizeof bb);
    const uint32_t take = -(uint32_t)(below ? x < b : x > b);
    xb = (xb & ~take) | (bb & take);
    memcpy(&x, &xb, sizeof x);
    return x;
}

/* cpu_expf's arithmetic between the clamps and 2^n, written once for the scalar function
 * and the vector one (cpu_vexpf), whose lanes must get the same bits: t holds n = round(x
 * / ln2) in its low mantissa bits (x plus 1.5 * 2^23), r = x - n ln2 with ln2 split so
 * that n * LN2_HI is exact (9 + 7 bits), p = e^r by its Taylor series to r^7. */
#define CPU_EXPF_REDUCE(x, t, n, r, p)                \
    do {                                              \
        t = (x) * 1.44269504088896341f + 12582912.0f; \
        n = t - 12582912.0f;                          \
        r = (x) - n * 0.693359375f;                   \
        r = r - n * -2.12194440e-4f;                  \
        p = r * (1.0f / 5040) + 1.0f / 720;           \
        p = p * r + 1.0f / 120;                       \
        p = p * r + 1.0f / 24;                        \
        p = p * r + 1.0f / 6;                         \
        p = p * r + 0.5f;                             \
        p = p * r + 1.0f;                             \
        p = p * r + 1.0f;                             \
    } while (0)

static inline float cpu_expf(float x) {
    x = cpu_clampf(x, CPU_EXPF_HI, 0);
    x = cpu_clampf(x, CPU_EXPF_LO, 1);
    /* n = round(x / ln2): adding 1.5 * 2^23 leaves the rounded integer in the low
     * mantissa bits of t. */
    float t, n, r, p;
    CPU_EXPF_REDUCE(x, t, n, r, p);
    uint32_t tb, sb;
    memcpy(&tb, &t, sizeof tb);
    sb = (tb - 0x4B400000u + 127u) << 23; /* (n + 127) in the exponent field: 2^n */
    float scale;
    memcpy(&scale, &sb, sizeof scale);
    return p * scale;
}

#if REAL_IS_DOUBLE
#define CPU_EXP(x) exp(x)
#else
#define CPU_EXP(x) cpu_expf(x)
#endif

/* ---- fixed-lane vectors ----------------------------------------------------------------
 * cpu_vec is GCC's vector extension over CPU_VB bytes: one register of the widest
 * vectors the build's target has (64 bytes, 16 floats, with AVX-512; 32 bytes, 8 floats,
 * with AVX2; a pair of 128-bit registers elsewhere: SSE on x86-64 without AVX, as the CUDA
 * check's portable reference build, and NEON on aarch64, whose 32 registers hold 16 such
 * pairs; the 8 lanes of AVX2, so both sum in its lanes), or 8 / 4 doubles in the
 * gradient-check build. An
 * accumulator of this type stays in a register, and element k of a row always lands in
 * lane k % CPU_VL, so a reduction gives the same bits whatever the alignment or the thread
 * count (a build for another vector width sums in other lanes: bit-identical per build,
 * as -march=native makes it anyway). A vector wider than the target's registers is not
 * an option: GCC lowers it through the stack, and the frame's loops ran 7-17x slower so
 * (docs/performance.md, log item 37). CPU_NREGS is how many such registers the target
 * has, for the tiles that keep many accumulators (kernels/cpu/hc_frame.c). Multiply and
 * add are separate operations (no FMA contraction under -std=c11), as in the scalar tails. */
#ifdef __AVX512F__
#define CPU_VB 64
#define CPU_NREGS 32
#else
#define CPU_VB 32
#if defined(__AVX__) || defined(__aarch64__)
#define CPU_NREGS 16
#else /* SSE: 16 registers, 8 pairs */
#define CPU_NREGS 8
#endif
#endif
typedef real cpu_vec __attribute__((vector_size(CPU_VB)));
#if REAL_IS_DOUBLE
#define CPU_VL (CPU_VB / 8)
#else
#define CPU_VL (CPU_VB / 4)
#endif
_Static_assert(CPU_VL * sizeof(real) == CPU_VB, "CPU_VL: lanes of a cpu_vec");
#if REAL_IS_DOUBLE
typedef long long cpu_ivec __attribute__((vector_size(CPU_VB)));
#else
typedef int cpu_ivec __attribute__((vector_size(CPU_VB)));
#endif
#if CPU_VL == 16
#define CPU_IOTA {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
#elif CPU_VL == 8
#define CPU_IOTA {0, 1, 2, 3, 4, 5, 6, 7}
#else
#define CPU_IOTA {0, 1, 2, 3}
#endif
#pragma GCC diagnostic ignored "-Wpsabi" /* vectors passed by value: all inlined */

/* FMA contraction from CPU_CONTRACT_FAST to CPU_CONTRACT_END (the rest of the build has
 * none, -std=c11 with GCC, -ffp-contract=off with clang): GCC's optimize pragma, clang's
 * fp pragma. */
#ifdef __clang__
#define CPU_CONTRACT_FAST _Pragma("clang fp contract(fast)")
#define CPU_CONTRACT_END _Pragma("clang fp contract(off)")
#else
#define CPU_CONTRACT_FAST _Pragma("GCC push_options") _Pragma("GCC optimize(\"fp-contract=fast\")")
#define CPU_CONTRACT_END _Pragma("GCC pop_options")
#endif

/* Lanes of x picked by the lanes of m (cpu_shuffle1), or of the pair (x, y), x's lanes
 * first (cpu_shuffle2): GCC's shuffle by a mask vector. clang has none (its
 * __builtin_shufflevector takes constant indices): there the two-source permutes of
 * AVX-512 (vpermt2ps/pd, what GCC emits) and AVX2's one-source permute and a blend; lane
 * by lane in the AVX2 double build. */
#ifdef __clang__
static inline __attribute__((always_inline)) cpu_vec cpu_shuffle2(cpu_vec x, cpu_vec y, cpu_ivec m) {
#if CPU_VB == 64 && !REAL_IS_DOUBLE
    return (cpu_vec)_mm512_permutex2var_ps((__m512)x, (__m512i)m, (__m512)y);
#elif CPU_VB == 64
    return (cpu_vec)_mm512_permutex2var_pd((__m512d)x, (__m512i)m, (__m512d)y);
#elif !REAL_IS_DOUBLE
    const __m256i k = (__m256i)m;
    return (cpu_vec)_mm256_blendv_ps(_mm256_permutevar8x32_ps((__m256)x, k), _mm256_permutevar8x32_ps((__m256)y, k),
                                     (__m256)_mm256_slli_epi32(k, 28)); /* bit 3: y's lane */
#else
    cpu_vec r;
    for (int i = 0; i < CPU_VL; i++) {
        const int k = (int)(m[i] & (2 * CPU_VL - 1));
        r[i] = k < CPU_VL ? x[k] : y[k - CPU_VL];
    }
    return r;
#endif
}
#define cpu_shuffle1(x, m) cpu_shuffle2(x, x, m)
#else
#define cpu_shuffle2 __builtin_shuffle
#define cpu_shuffle1 __builtin_shuffle
#endif

static inline cpu_vec cpu_vload(const real *p) {
    cpu_vec v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void cpu_vstore(real *p, cpu_vec v) { memcpy(p, &v, sizeof v); }

/* The lanes of v added as a fixed pairwise tree: lane l += lane l + w, w = VL/2 .. 1
 * (the partner of lane l is lane l ^ w; the masks fold to constants). */
static inline real cpu_vsum(cpu_vec v) {
    const cpu_ivec iota = CPU_IOTA;
#pragma GCC unroll 4
    for (int w = CPU_VL / 2; w >= 1; w /= 2) v += cpu_shuffle1(v, iota ^ w);
    return v[0];
}

/* One stage of cpu_vsum_many: x and y each hold runs of 2w lanes (CPU_VL / 2w runs, one
 * per vector summed); the result holds x's runs, then y's, each as w lanes, lane l of a
 * run + lane l + w. w (a constant where it is inlined) picks the masks: output lane l is
 * run l / w, element l % w, taken from index (l / w) 2w + l % w = l + (l & -w) of the
 * pair (x, y), and its partner w further on. */
static inline __attribute__((always_inline)) cpu_vec cpu_vsum_stage(cpu_vec x, cpu_vec y, const int w) {
    const cpu_ivec iota = CPU_IOTA, lo = iota + (iota & -w);
    return cpu_shuffle2(x, y, lo) + cpu_shuffle2(x, y, lo + w);
}

/* out[p] = cpu_vsum(a[p]) for p < m (a constant where it is inlined), the same bits: each
 * lane meets the same partner at each step of the tree. The m vectors, CPU_VL at a time,
 * go through the tree together, two vectors into one at each stage (a missing partner is
 * 0, whose lanes stay apart from the others'): after the last stage lane p of the one
 * vector is the sum of vector p. Two shuffles and an add for every pair, where m sums
 * one by one take log2(CPU_VL) shuffles and adds each: fewer operations by 4x at CPU_VL
 * vectors, where a token's two dozen dots spent more time in their sums than in their
 * products. */
static inline __attribute__((always_inline)) void cpu_vsum_many(const int m, const cpu_vec *a, real *out) {
#pragma GCC unroll 4
    for (int g0 = 0; g0 < m; g0 += CPU_VL) {
        const int cnt = m - g0 < CPU_VL ? m - g0 : CPU_VL;
        cpu_vec v[CPU_VL] = {{0}}; /* a constant m leaves no trace of the zeros */
        int k = cnt;
#pragma GCC unroll 16
        for (int i = 0; i < k; i++) v[i] = a[g0 + i];
#pragma GCC unroll 4
        for (int w = CPU_VL / 2; w >= 1; w /= 2) {
            const int h = (k + 1) / 2;
#pragma GCC unroll 8
            for (int i = 0; i < h; i++) v[i] = cpu_vsum_stage(v[2 * i], 2 * i + 1 < k ? v[2 * i + 1] : (cpu_vec){0}, w);
            k = h;
        }
        if (cnt == CPU_VL) memcpy(out + g0, &v[0], sizeof v[0]);
        else
#pragma GCC unroll 16
            for (int p = 0; p < cnt; p++) out[g0 + p] = v[0][p];
    }
}

/* ---- cpu_expf and max over vectors ------------------------------------------------------ */
#if !REAL_IS_DOUBLE
/* cpu_expf on every lane: the same operations in the same order (nothing is contracted
 * under -std=c11), so each lane holds the bits cpu_expf gives its element. */
static inline cpu_vec cpu_vexpf(cpu_vec x) {
    const cpu_ivec hi = (cpu_ivec)((cpu_vec){0} + CPU_EXPF_HI), lo = (cpu_ivec)((cpu_vec){0} + CPU_EXPF_LO);
    cpu_ivec xb = (cpu_ivec)x, take = x > CPU_EXPF_HI; /* cpu_clampf's selections, lane by lane */
    xb = (xb & ~take) | (hi & take);
    x = (cpu_vec)xb;
    take = x < CPU_EXPF_LO;
    xb = (xb & ~take) | (lo & take);
    x = (cpu_vec)xb;
    cpu_vec t, n, r, p;
    CPU_EXPF_REDUCE(x, t, n, r, p);
    const cpu_ivec sb = ((cpu_ivec)t - 0x4B400000 + 127) << 23;
    return p * (cpu_vec)sb;
}

/* cpu_sum's CPU_LANES = 8 double accumulators, as vectors: one of 8 doubles with AVX-512,
 * two of 4 otherwise (each one register). */
#if CPU_VL == 16
typedef double cpu_dlanes __attribute__((vector_size(64)));
#define CPU_DPARTS 1
#else
typedef double cpu_dlanes __attribute__((vector_size(32)));
#define CPU_DPARTS 2
#endif
typedef float cpu_fpart __attribute__((vector_size(sizeof(cpu_dlanes) / 2)));
_Static_assert(CPU_DPARTS * sizeof(cpu_dlanes) == CPU_LANES * sizeof(double), "cpu_dsum: cpu_sum's lanes");
typedef struct {
    cpu_dlanes l[CPU_DPARTS];
} cpu_dsum;

/* The two halves of v, each cpu_dlanes' count of floats. */
static inline void cpu_halves(cpu_vec v, cpu_fpart *lo, cpu_fpart *hi) {
#if CPU_VL == 16 && defined(__has_builtin) && __has_builtin(__builtin_shufflevector)
    *lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
    *hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
#elif CPU_VL == 8 && defined(__has_builtin) && __has_builtin(__builtin_shufflevector)
    *lo = __builtin_shufflevector(v, v, 0, 1, 2, 3);
    *hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
#else /* through memory (a spill and two loads where the builtin is missing) */
    memcpy(lo, &v, sizeof *lo);
    memcpy(hi, (const char *)&v + sizeof *lo, sizeof *hi);
#endif
}
_Static_assert(2 * sizeof(cpu_fpart) == CPU_VB, "cpu_halves: two parts of a cpu_vec");

/* x's floats as doubles (exact) in one instruction: GCC builds __builtin_convertvector
 * here as two conversions of half the width and an insert (its preference for 256-bit
 * vectors, and with AVX2 the same at 128 bits), 4 operations instead of 1. */
static inline cpu_dlanes cpu_widen(cpu_fpart x) {
#if CPU_VL == 16
    return (cpu_dlanes)_mm512_cvtps_pd((__m256)x);
#elif CPU_VL == 8 && defined(__AVX__)
    return (cpu_dlanes)_mm256_cvtps_pd((__m128)x);
#else
    return __builtin_convertvector(x, cpu_dlanes);
#endif
}

/* Column sums in double: s[0] += the first half of v, s[1] += the second, as doubles.
 * Element k of v lands in lane k of the pair (s[0], s[1]): CPU_VL columns keep one sum
 * each, added in the order of the calls, as a scalar loop over rows adds them. */
static inline void cpu_colsum_add(cpu_dlanes *s, cpu_vec v) {
    cpu_fpart lo, hi;
    cpu_halves(v, &lo, &hi);
    s[0] += cpu_widen(lo);
    s[1] += cpu_widen(hi);
}

/* Add v's CPU_VL floats, elements i0 .. i0 + CPU_VL of a sum with i0 a multiple of 8:
 * element i into lane i % 8 in double, in cpu_sum's order (the first half before the
 * second: the same lanes with AVX-512, the two parts otherwise). */
static inline void cpu_dsum_add(cpu_dsum *s, cpu_vec v) {
    cpu_fpart lo, hi;
    cpu_halves(v, &lo, &hi);
    s->l[0] += cpu_widen(lo);
    s->l[1 % CPU_DPARTS] += cpu_widen(hi);
}

/* Add the products a[i] b[i] of v's elements, in double (exact), as cpu_dsum_add. */
static inline void cpu_dsum_add_prod(cpu_dsum *s, cpu_vec a, cpu_vec b) {
    cpu_fpart alo, ahi, blo, bhi;
    cpu_halves(a, &alo, &ahi);
    cpu_halves(b, &blo, &bhi);
    s->l[0] += cpu_widen(alo) * cpu_widen(blo);
    s->l[1 % CPU_DPARTS] += cpu_widen(ahi) * cpu_widen(bhi);
}

/* Element i (lane i % 8) alone. */
static inline void cpu_dsum_add1(cpu_dsum *s, size_t i, double x) {
    const int per = CPU_LANES / CPU_DPARTS, k = (int)(i % CPU_LANES);
    s->l[k / per][k % per] += x;
}

/* The lanes added in order, as cpu_sum ends. */
static inline double cpu_dsum_total(const cpu_dsum *s) {
    double t = 0;
    for (int k = 0; k < CPU_LANES; k++) t += s->l[k / (CPU_LANES / CPU_DPARTS)][k % (CPU_LANES / CPU_DPARTS)];
    return t;
}

/* sum of x[0..n) in double, fixed lane order; the same bits as the scalar loops. */
static inline double cpu_sum(const real *x, size_t n) {
    cpu_dsum acc = {{{0}}};
    size_t i = 0;
    for (; i + CPU_VL <= n; i += CPU_VL) cpu_dsum_add(&acc, cpu_vload(x + i));
    for (; i < n; i++) cpu_dsum_add1(&acc, i, x[i]);
    return cpu_dsum_total(&acc);
}

/* sum of a[i] b[i] over [0, n) in double (each product exact), fixed lane order. */
static inline double cpu_dot(const real *a, const real *b, size_t n) {
    cpu_dsum acc = {{{0}}};
    size_t i = 0;
    for (; i + CPU_VL <= n; i += CPU_VL) cpu_dsum_add_prod(&acc, cpu_vload(a + i), cpu_vload(b + i));
    for (; i < n; i++) cpu_dsum_add1(&acc, i, (double)a[i] * b[i]);
    return cpu_dsum_total(&acc);
}
#else
/* sum of x[0..n) in double, fixed lane order. */
static inline double cpu_sum(const real *x, size_t n) {
    double acc[CPU_LANES] = {0};
    size_t i = 0;
    for (; i + CPU_LANES <= n; i += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) acc[l] += x[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += x[i];
    double s = 0;
    for (int l = 0; l < CPU_LANES; l++) s += acc[l];
    return s;
}

/* sum of a[i] b[i] over [0, n) in double, fixed lane order. */
static inline double cpu_dot(const real *a, const real *b, size_t n) {
    double acc[CPU_LANES] = {0};
    size_t i = 0;
    for (; i + CPU_LANES <= n; i += CPU_LANES)
        for (int l = 0; l < CPU_LANES; l++) acc[l] += (double)a[i + l] * b[i + l];
    for (int l = 0; i < n; i++, l++) acc[l] += (double)a[i] * b[i];
    double s = 0;
    for (int l = 0; l < CPU_LANES; l++) s += acc[l];
    return s;
}
#endif

/* a > m ? a : m in every lane (a NaN in a never enters) */
static inline cpu_vec cpu_vmax(cpu_vec m, cpu_vec a) {
    const cpu_ivec take = a > m;
    return (cpu_vec)(((cpu_ivec)m & ~take) | ((cpu_ivec)a & take));
}

/* The largest of x[0..n), n >= 1, as `m = x[0]; m = x[i] > m ? x[i] : m` finds it: NaN
 * only if x[0] is NaN (every lane starts from it and keeps it), a NaN elsewhere skipped.
 * Any order gives that value (for ties of 0 and -0, either sign; x - m is the same value
 * for both), so the lanes may run apart. */
static inline real cpu_max(const real *x, size_t n) {
    cpu_vec m0 = (cpu_vec){0} + x[0], m1 = m0;
    size_t i = 0;
    for (; i + 2 * CPU_VL <= n; i += 2 * CPU_VL) {
        m0 = cpu_vmax(m0, cpu_vload(x + i));
        m1 = cpu_vmax(m1, cpu_vload(x + i + CPU_VL));
    }
    if (i + CPU_VL <= n) {
        m0 = cpu_vmax(m0, cpu_vload(x + i));
        i += CPU_VL;
    }
    m0 = cpu_vmax(m0, m1);
    const cpu_ivec iota = CPU_IOTA;
#pragma GCC unroll 4
    for (int w = CPU_VL / 2; w >= 1; w /= 2) m0 = cpu_vmax(m0, cpu_shuffle1(m0, iota ^ w));
    real m = m0[0];
    for (; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

/* p[0..len) = softmax(p[0..len)) (the largest subtracted, exp, divided by the sum in
 * double in cpu_sum's fixed lanes), p[len..T) = 0: a row of attention's scores. In the
 * float build by whole vectors, the row's last one too where the row has room for it
 * (what it holds past len may be anything: those lanes are zeroed before they are summed,
 * and adding 0 leaves a lane's sum as it was; the memset covers them again). The same
 * bits as the scalar loops, cpu_expf and cpu_sum element by element (tests/test_ops). */
static inline void cpu_softmax_row(real *p, int len, int T) {
    const real mx = cpu_max(p, (size_t)len);
#if REAL_IS_DOUBLE
#pragma omp simd
    for (int j = 0; j < len; j++) p[j] = CPU_EXP(p[j] - mx);
    const real inv = (real)(1.0 / cpu_sum(p, (size_t)len));
#else
    cpu_dsum acc = {{{0}}};
    const cpu_ivec iota = CPU_IOTA;
    int j = 0;
    for (; j < len && j + CPU_VL <= T; j += CPU_VL) {
        cpu_vec e = cpu_vexpf(cpu_vload(p + j) - mx);
        if (j + CPU_VL > len) e = (cpu_vec)((cpu_ivec)e & (iota < len - j));
        cpu_dsum_add(&acc, e);
        cpu_vstore(p + j, e);
    }
    for (; j < len; j++) {
        p[j] = cpu_expf(p[j] - mx);
        cpu_dsum_add1(&acc, (size_t)j, p[j]);
    }
    const real inv = (real)(1.0 / cpu_dsum_total(&acc));
#endif
#pragma omp simd
    for (int i = 0; i < len; i++) p[i] *= inv;
    memset(p + len, 0, (size_t)(T - len) * sizeof(real));
}

#endif
