/* test_ops.c: the CPU kernels (float build) against naive references written here in
 * double: plain loops, attention with an explicit T x T score matrix, LayerNorm by its
 * definition, cross-entropy by log-sum-exp. Sizes are deliberately awkward (N = 37,
 * C = 24, NH = 3, T = 13) so that no vector width or block size divides them.
 * Also: causality, the "backward adds" rule, determinism, and a planted fault that
 * proves the comparison can fail. Gradients are checked by finite differences in
 * tests/dbl_ops.c (double build). */
#include <omp.h>
#include <stdint.h>
#include "kernels/cpu/cpu_math.h"
#include "kernels/kernels.h"
#include "tests/t.h"

/* Float forward ops against a double reference: |got - ref| <= ATOL + RTOL |ref|.
 * Values are O(1) sums of at most ~40 terms, so float rounding stays near 1e-6. */
#define FWD_ATOL 1e-5
#define FWD_RTOL 1e-5
/* "Backward adds": two calls against twice one call. Exact where a backward adds its
 * result once (x + x = 2x); the encoder adds a repeated token's rows one by one, so the
 * second call rounds differently: an absolute 1e-6 on O(1) terms covers that. A
 * backward that overwrote would be off by 100 %. */
#define ADD_ATOL 1e-6
#define ADD_RTOL 1e-6

/* ---- helpers ---- */

static uint64_t rng_state_ = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* xorshift64*, [0, 1) */
    rng_state_ ^= rng_state_ >> 12;
    rng_state_ ^= rng_state_ << 25;
    rng_state_ ^= rng_state_ >> 27;
    return (double)((rng_state_ * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static void fill(real *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = (real)(lo + (hi - lo) * urand());
}
static real *ralloc(size_t n) {
    real *p = calloc(n ? n : 1, sizeof(real));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static double *dalloc(size_t n) {
    double *p = calloc(n ? n : 1, sizeof(double));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}

/* Count the entries of got that differ from ref past atol + rtol |ref| (NaN always
 * differs); print the worst one unless quiet. The checker of every comparison here;
 * test_checker_catches_fault proves it can report a mismatch. */
static size_t mismatches(const char *what, const real *got, const double *ref, size_t n, double atol, double rtol,
                         int quiet) {
    size_t bad = 0, worst = 0;
    double worst_excess = -1;
    for (size_t i = 0; i < n; i++) {
        double g = got[i], r = ref[i], lim = atol + rtol * fabs(r), d = fabs(g - r);
        if (isnan(g) || isnan(r) || d > lim) {
            bad++;
            double ex = isnan(d) ? INFINITY : d - lim;
            if (ex > worst_excess) { worst_excess = ex; worst = i; }
        }
    }
    if (bad && !quiet)
        fprintf(stderr, "    %s: %zu of %zu differ; worst [%zu] got %.9g want %.9g\n", what, bad, n, worst,
                (double)got[worst], ref[worst]);
    return bad;
}
#define CHECK_REF(what, got, ref, n) \
    CHECK(mismatches(what, got, ref, n, FWD_ATOL, FWD_RTOL, 0) == 0, "%s differs from the reference", what)

/* ---- naive references (double) ---- */

static void ref_matmul(double *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC) {
    for (size_t i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double s = bias ? bias[o] : 0;
            for (int c = 0; c < C; c++) s += (double)inp[i * C + c] * W[(size_t)o * C + c];
            out[i * OC + o] = s;
        }
}

/* Scores S = q k^T / sqrt(hs) as a full T x T matrix, -inf above the diagonal,
 * softmax per row, out = P v. */
static void ref_attention(double *out, double *att, const real *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double *S = dalloc((size_t)T * T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const real *base = qkv + (size_t)b * T * 3 * C;
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    double s = 0;
                    for (int d = 0; d < hs; d++)
                        s += (double)base[(size_t)t * 3 * C + h * hs + d] * base[(size_t)j * 3 * C + C + h * hs + d];
                    S[t * T + j] = j <= t ? s / sqrt((double)hs) : -INFINITY;
                }
            double *P = att + ((size_t)b * NH + h) * T * T;
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, z = 0;
                for (int j = 0; j < T; j++) mx = fmax(mx, S[t * T + j]);
                for (int j = 0; j < T; j++) z += exp(S[t * T + j] - mx);
                for (int j = 0; j < T; j++) P[t * T + j] = exp(S[t * T + j] - mx) / z;
                for (int d = 0; d < hs; d++) {
                    double o = 0;
                    for (int j = 0; j < T; j++) o += P[t * T + j] * base[(size_t)j * 3 * C + 2 * C + h * hs + d];
                    out[((size_t)b * T + t) * C + h * hs + d] = o;
                }
            }
        }
    free(S);
}

/* ---- forward ops ---- */

static void test_matmul_forward(void) {
    size_t N = 37;
    int C = 24, OC = 40;
    real *inp = ralloc(N * C), *W = ralloc((size_t)OC * C), *bias = ralloc(OC), *out = ralloc(N * OC);
    double *ref = dalloc(N * OC);
    fill(inp, N * C, -1, 1);
    fill(W, (size_t)OC * C, -1, 1);
    fill(bias, OC, -1, 1);
    matmul_forward(out, inp, W, bias, N, C, OC);
    ref_matmul(ref, inp, W, bias, N, C, OC);
    CHECK_REF("matmul out", out, ref, N * OC);
    matmul_forward(out, inp, W, NULL, N, C, OC);
    ref_matmul(ref, inp, W, NULL, N, C, OC);
    CHECK_REF("matmul out (no bias)", out, ref, N * OC);
    free(inp); free(W); free(bias); free(out); free(ref);
}

/* The backward as products written out, so the float build is checked op by op too. */
static void test_matmul_backward(void) {
    size_t N = 37;
    int C = 24, OC = 40;
    real *inp = ralloc(N * C), *W = ralloc((size_t)OC * C), *dout = ralloc(N * OC);
    real *dinp = ralloc(N * C), *dW = ralloc((size_t)OC * C), *db = ralloc(OC);
    double *rinp = dalloc(N * C), *rW = dalloc((size_t)OC * C), *rb = dalloc(OC);
    fill(inp, N * C, -1, 1);
    fill(W, (size_t)OC * C, -1, 1);
    fill(dout, N * OC, -1, 1);
    matmul_backward(dinp, dW, db, dout, inp, W, N, C, OC);
    for (size_t i = 0; i < N; i++)
        for (int o = 0; o < OC; o++) {
            double d = dout[i * OC + o];
            rb[o] += d;
            for (int c = 0; c < C; c++) {
                rinp[i * C + c] += d * W[(size_t)o * C + c];
                rW[(size_t)o * C + c] += d * inp[i * C + c];
            }
        }
    CHECK_REF("matmul dinp", dinp, rinp, N * C);
    CHECK_REF("matmul dW", dW, rW, (size_t)OC * C);
    CHECK_REF("matmul dbias", db, rb, OC);
    /* NULL gradients are skipped; the others are still computed. */
    real *db2 = ralloc(OC);
    matmul_backward(NULL, NULL, db2, dout, inp, W, N, C, OC);
    CHECK_REF("matmul dbias alone", db2, rb, OC);
    free(inp); free(W); free(dout); free(dinp); free(dW); free(db); free(db2);
    free(rinp); free(rW); free(rb);
}

static void test_layernorm_forward(void) {
    size_t N = 37;
    int C = 24;
    real *inp = ralloc(N * C), *w = ralloc(C), *b = ralloc(C), *out = ralloc(N * C), *mean = ralloc(N),
         *rstd = ralloc(N);
    double *ref = dalloc(N * C), *rmean = dalloc(N), *rrstd = dalloc(N);
    fill(inp, N * C, 2, 5); /* an offset mean: a one-pass variance would lose digits */
    fill(w, C, 0.5, 1.5);
    fill(b, C, -0.5, 0.5);
    layernorm_forward(out, mean, rstd, inp, w, b, N, C);
    for (size_t i = 0; i < N; i++) {
        double mu = 0, var = 0;
        for (int c = 0; c < C; c++) mu += inp[i * C + c];
        mu /= C;
        for (int c = 0; c < C; c++) var += (inp[i * C + c] - mu) * (inp[i * C + c] - mu);
        var /= C; /* biased */
        rmean[i] = mu;
        rrstd[i] = 1 / sqrt(var + 1e-5);
        for (int c = 0; c < C; c++) ref[i * C + c] = (inp[i * C + c] - mu) * rrstd[i] * w[c] + b[c];
    }
    CHECK_REF("layernorm out", out, ref, N * C);
    CHECK_REF("layernorm mean", mean, rmean, N);
    CHECK_REF("layernorm rstd", rstd, rrstd, N);
    free(inp); free(w); free(b); free(out); free(mean); free(rstd); free(ref); free(rmean); free(rrstd);
}

static void check_attention_forward(int B, int T, int C, int NH) {
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    real *qkv = ralloc(nqkv), *out = ralloc(nout), *att = ralloc(natt);
    double *rout = dalloc(nout), *ratt = dalloc(natt);
    fill(qkv, nqkv, -2, 2);
    fill(att, natt, 7, 8); /* garbage: the forward must write every entry, zeros included */
    attention_forward(out, att, qkv, B, T, C, NH);
    ref_attention(rout, ratt, qkv, B, T, C, NH);
    CHECK_REF("attention out", out, rout, nout);
    CHECK_REF("attention att", att, ratt, natt);
    size_t nonzero_upper = 0;
    for (int bh = 0; bh < B * NH; bh++)
        for (int t = 0; t < T; t++)
            for (int j = t + 1; j < T; j++) nonzero_upper += att[((size_t)bh * T + t) * T + j] != 0;
    CHECK(nonzero_upper == 0, "%zu entries above the diagonal of att are not 0", nonzero_upper);
    free(qkv); free(out); free(att); free(rout); free(ratt);
}

/* T = 13 fits in one block of query rows; T = 150 is three blocks of 64, the last one
 * partial (attention.c's ATT_BLOCK). */
static void test_attention_forward(void) {
    check_attention_forward(2, 13, 24, 3);
    check_attention_forward(1, 150, 24, 3);
    /* T = 1: the single token attends to itself only, out = v. */
    int C = 24, NH = 3;
    real qkv[72], out[24], att[3]; /* att is (B, NH, T, T) = 3 values */
    fill(qkv, 72, -2, 2);
    attention_forward(out, att, qkv, 1, 1, C, NH);
    size_t diff = 0;
    for (int c = 0; c < C; c++) diff += out[c] != qkv[2 * C + c];
    CHECK(diff == 0 && att[0] == 1 && att[1] == 1 && att[2] == 1, "T=1: out != v (%zu) or att %g != 1", diff,
          (double)att[0]);
}

/* dqkv of loss = sum(dout * out) by the chain rule in double, from ref_attention's P:
 * dP = dO V^T, dS = P (dP - rowsum(P dP)) / sqrt(hs), dQ = dS K, dK = dS^T Q, dV = P^T dO. */
static void ref_attention_backward(double *dqkv, const real *dout, const real *qkv, int B, int T, int C, int NH) {
    int hs = C / NH;
    double *out = dalloc((size_t)B * T * C), *att = dalloc((size_t)B * NH * T * T), *dS = dalloc((size_t)T * T);
    ref_attention(out, att, qkv, B, T, C, NH);
    const double sc = 1 / sqrt((double)hs);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < NH; h++) {
            const real *base = qkv + (size_t)b * T * 3 * C, *dO = dout + (size_t)b * T * C + h * hs;
            const double *P = att + ((size_t)b * NH + h) * T * T;
            double *dq = dqkv + (size_t)b * T * 3 * C + h * hs, *dk = dq + C, *dv = dq + 2 * C;
            for (int t = 0; t < T; t++) {
                double rs = 0;
                for (int j = 0; j < T; j++) {
                    double dp = 0;
                    for (int d = 0; d < hs; d++)
                        dp += (double)dO[(size_t)t * C + d] * base[(size_t)j * 3 * C + 2 * C + h * hs + d];
                    dS[t * T + j] = dp;
                    rs += P[t * T + j] * dp;
                }
                for (int j = 0; j < T; j++) dS[t * T + j] = P[t * T + j] * (dS[t * T + j] - rs) * sc;
            }
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++)
                    for (int d = 0; d < hs; d++) {
                        dq[(size_t)t * 3 * C + d] += dS[t * T + j] * base[(size_t)j * 3 * C + C + h * hs + d];
                        dk[(size_t)j * 3 * C + d] += dS[t * T + j] * base[(size_t)t * 3 * C + h * hs + d];
                        dv[(size_t)j * 3 * C + d] += P[t * T + j] * dO[(size_t)t * C + d];
                    }
        }
    free(out); free(att); free(dS);
}

/* attention.c's tiles (query rows by key vectors; rows by 1-4 channel vectors) at head
 * sizes of one to five vectors of 16 lanes (16, 32, 48, 64, 80: every pass of att_ab
 * with AVX-512; with AVX2's 8 lanes, 2-10 vectors), one not a whole number of vectors
 * (40: the channels short of a vector one by one) and one short of any (8), T both a
 * multiple of the vector width and not (the stores of a last, partial key vector), and
 * T = 400, where the transposed products take A in two chunks of rows (ATT_SLAB):
 * forward against ref_attention, and the backward, added into a dqkv that held values,
 * against ref_attention_backward. */
static void check_attention_tiles(int B, int T, int C, int NH) {
    check_attention_forward(B, T, C, NH);
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    real *qkv = ralloc(nqkv), *out = ralloc(nout), *att = ralloc(natt), *dout = ralloc(nout), *dqkv = ralloc(nqkv),
         *scratch = ralloc(natt);
    double *ref = dalloc(nqkv);
    fill(qkv, nqkv, -2, 2);
    fill(dout, nout, -1, 1);
    fill(dqkv, nqkv, -1, 1);
    fill(scratch, natt, 7, 8); /* garbage: the backward must not read scratch it did not write */
    for (size_t i = 0; i < nqkv; i++) ref[i] = dqkv[i];
    attention_forward(out, att, qkv, B, T, C, NH);
    attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    ref_attention_backward(ref, dout, qkv, B, T, C, NH);
    char what[64];
    snprintf(what, sizeof what, "attention dqkv (T %d, hs %d)", T, C / NH);
    CHECK_REF(what, dqkv, ref, nqkv);
    free(qkv); free(out); free(att); free(dout); free(dqkv); free(scratch); free(ref);
}
static void test_attention_tiles(void) {
    check_attention_tiles(1, 64, 64, 2);  /* hs 32, T a multiple of 16 */
    check_attention_tiles(2, 45, 96, 3);  /* hs 32, a partial last key vector */
    check_attention_tiles(1, 37, 80, 5);  /* hs 16 */
    check_attention_tiles(1, 50, 144, 3); /* hs 48 */
    check_attention_tiles(1, 29, 120, 3); /* hs 40 */
    check_attention_tiles(1, 40, 128, 2); /* hs 64 */
    check_attention_tiles(1, 23, 160, 2); /* hs 80 */
    check_attention_tiles(1, 400, 32, 2); /* dK and dV in two chunks of rows, a tile across their border */
    check_attention_tiles(1, 13, 24, 3);  /* hs 8: channels by scalar loops only */
}

/* Change the k and v of a future token: every earlier output and attention row must be
 * exactly unchanged, and later ones must change (so the change was seen at all).
 * Backward: with dout zero from token t0 on, the q, k, v of tokens >= t0 get no gradient. */
static void check_attention_causal(int B, int T, int C, int NH, int t0) {
    size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
    real *qkv = ralloc(nqkv), *out1 = ralloc(nout), *out2 = ralloc(nout), *att1 = ralloc(natt),
         *att2 = ralloc(natt);
    fill(qkv, nqkv, -2, 2);
    attention_forward(out1, att1, qkv, B, T, C, NH);
    for (int b = 0; b < B; b++)
        for (int c = C; c < 3 * C; c++) qkv[((size_t)b * T + t0) * 3 * C + c] += 3; /* k and v of t0 */
    attention_forward(out2, att2, qkv, B, T, C, NH);
    size_t early = (size_t)t0 * C;
    for (int b = 0; b < B; b++) {
        const real *o1 = out1 + (size_t)b * T * C, *o2 = out2 + (size_t)b * T * C;
        CHECK(memcmp(o1, o2, early * sizeof(real)) == 0, "batch %d: an output before t0 changed", b);
        CHECK(memcmp(o1 + early, o2 + early, (nout / B - early) * sizeof(real)) != 0,
              "batch %d: no output from t0 on changed", b);
        for (int h = 0; h < NH; h++) {
            size_t off = ((size_t)b * NH + h) * T * T;
            CHECK(memcmp(att1 + off, att2 + off, (size_t)t0 * T * sizeof(real)) == 0,
                  "batch %d head %d: an attention row before t0 changed", b, h);
        }
    }
    real *dout = ralloc(nout), *dqkv = ralloc(nqkv), *scratch = ralloc(natt);
    for (int b = 0; b < B; b++) fill(dout + (size_t)b * T * C, early, -1, 1); /* 0 from t0 on */
    attention_backward(dqkv, scratch, dout, qkv, att2, B, T, C, NH);
    size_t leaked = 0, nonzero = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < 3 * C; c++) {
                real g = dqkv[((size_t)b * T + t) * 3 * C + c];
                if (t >= t0) leaked += g != 0;
                else nonzero += g != 0;
            }
    CHECK(leaked == 0, "%zu gradients reached tokens >= t0 from outputs before t0", leaked);
    CHECK(nonzero > 0, "no gradient at all before t0");
    free(qkv); free(out1); free(out2); free(att1); free(att2); free(dout); free(dqkv); free(scratch);
}
static void test_attention_causal(void) {
    check_attention_causal(2, 11, 24, 3, 6);
    check_attention_causal(2, 150, 24, 3, 100); /* t0 inside the second block of 64 rows */
    check_attention_causal(1, 150, 24, 3, 64);  /* t0 the first row of a block */
}

static void test_gelu_forward(void) {
    size_t N = 1001;
    real *inp = ralloc(N), *out = ralloc(N);
    double *ref = dalloc(N);
    fill(inp, N, -6, 6);
    inp[0] = 0;
    inp[1] = 30; /* saturated tails: x and ~0, gradient 1 and ~0, no NaN */
    inp[2] = -30;
    gelu_forward(out, inp, N);
    for (size_t i = 0; i < N; i++) {
        double x = inp[i];
        ref[i] = 0.5 * x * (1 + tanh(sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    }
    CHECK_REF("gelu out", out, ref, N);
    CHECK(out[0] == 0, "gelu(0) = %g", (double)out[0]);
    real dx[3] = {0, 0, 0}, ones[3] = {1, 1, 1};
    gelu_backward(dx, inp, ones, 3);
    CHECK(dx[0] == (real)0.5 && dx[1] == 1 && fabs(dx[2]) < 1e-30, "gelu' at 0, 30, -30: %g %g %g",
          (double)dx[0], (double)dx[1], (double)dx[2]);
    free(inp); free(out); free(ref);
}

/* The exact GELU (model.gelu: erf) against libm in double, on a sweep that covers the
 * tails: relative error in the value (x Phi(x): its tail for x << 0 must keep its digits,
 * where 1 + erf would cancel), absolute in the slope Phi(x) + x phi(x), which crosses 0 at
 * x = -0.75. The float form's erfc is a fit (kernels/cpu/gelu.c, 1.2e-7 relative) times
 * exp(-x^2 / 2 + ...), whose exponent float rounds by ~x^2 / 2 ulp: the tail's relative
 * error grows as x^2 (1.4e-5 at x = -12, where the value is 2e-32), so the bound is
 * 1e-6 + 2e-7 x^2. A wrong coefficient or sign moves these by 1e-4 or more. */
static void test_gelu_erf(void) {
    const size_t N = 4001;
    real *inp = ralloc(N), *out = ralloc(N), *dx = ralloc(N), *ones = ralloc(N);
    for (size_t i = 0; i < N; i++) {
        inp[i] = (real)(-12.0 + 24.0 * (double)i / (double)(N - 1)); /* 0 at i = 2000 */
        dx[i] = 0;
        ones[i] = 1;
    }
    gelu_erf_forward(out, inp, N);
    gelu_erf_backward(dx, inp, out, ones, N);
    double worst_v = 0, worst_g = 0;
    for (size_t i = 0; i < N; i++) {
        const double x = inp[i], cdf = 0.5 * erfc(-x / sqrt(2.0));
        const double v = x * cdf, g = cdf + x * exp(-0.5 * x * x) / sqrt(2 * M_PI);
        if (v != 0) worst_v = fmax(worst_v, fabs(out[i] - v) / fabs(v) / (1e-6 + 2e-7 * x * x));
        worst_g = fmax(worst_g, fabs(dx[i] - g));
    }
    CHECK(out[2000] == 0 && dx[2000] == (real)0.5, "gelu(0) = %g, gelu'(0) = %g", (double)out[2000], (double)dx[2000]);
    CHECK(worst_v < 1, "exact gelu: relative error %.3g of its bound", worst_v);
    CHECK(worst_g < 1e-6, "exact gelu': absolute error %.3g", worst_g);
    CHECK(out[0] <= 0 && out[0] > -1e-29 && out[N - 1] == inp[N - 1], "tails: gelu(-12) = %g, gelu(12) = %g",
          (double)out[0], (double)out[N - 1]);
    /* the tanh form differs from it by up to ~1e-3: the two are not the same function */
    real *t = ralloc(N);
    gelu_forward(t, inp, N);
    double most = 0;
    for (size_t i = 0; i < N; i++) most = fmax(most, fabs(t[i] - out[i]));
    CHECK(most > 1e-4, "tanh and erf GELU agree to %.3g", most);
    if (getenv("T_VERBOSE"))
        fprintf(stderr, "  exact gelu: value %.3g of its bound, slope %.3g absolute; tanh form %.3g away\n", worst_v,
                worst_g, most);
    free(inp); free(out); free(dx); free(ones); free(t);
}

/* The backward's dw, db and matmul's dbias: column sums in double over the rows in
 * order, by vectors of doubles in whole blocks of 64 columns and by the scalar loop for
 * the rest. C = 160 is two whole blocks and a short one; each sum must be the bits of
 * the same arithmetic written out here (a column in the wrong lane, or sums reordered,
 * differ), and dinp must match its formula in double. */
static void test_layernorm_backward(void) {
    const size_t N = 37;
    const int C = 160;
    real *x = ralloc(N * C), *w = ralloc(C), *b = ralloc(C), *y = ralloc(N * C), *mean = ralloc(N), *rstd = ralloc(N);
    real *dout = ralloc(N * C), *dinp = ralloc(N * C), *dw = ralloc(C), *db = ralloc(C), *dbias = ralloc(C);
    double *rinp = dalloc(N * C);
    fill(x, N * C, -2, 2);
    fill(w, C, 0.5, 1.5);
    fill(b, C, -1, 1);
    fill(dout, N * C, -1, 1);
    layernorm_forward(y, mean, rstd, x, w, b, N, C);
    layernorm_backward(dinp, dw, db, dout, x, w, mean, rstd, N, C);
    matmul_backward(NULL, NULL, dbias, dout, x, w, N, 1, C);
    size_t bad_w = 0, bad_b = 0, bad_bias = 0;
    for (int c = 0; c < C; c++) {
        double aw = 0, ab = 0;
        for (size_t i = 0; i < N; i++) {
            const real d = dout[i * C + c];
            aw += (double)(d * ((x[i * C + c] - mean[i]) * rstd[i]));
            ab += (double)d;
        }
        bad_w += dw[c] != (real)aw;
        bad_b += db[c] != (real)ab;
        bad_bias += dbias[c] != (real)ab;
    }
    CHECK(bad_w == 0 && bad_b == 0, "layernorm dw, db: %zu and %zu of %d columns not the sums in row order", bad_w,
          bad_b, C);
    CHECK(bad_bias == 0, "matmul dbias: %zu of %d columns not the sums in row order", bad_bias, C);
    for (size_t i = 0; i < N; i++) {
        double g = 0, gn = 0;
        for (int c = 0; c < C; c++) {
            const double n = ((double)x[i * C + c] - mean[i]) * rstd[i], gc = (double)dout[i * C + c] * w[c];
            g += gc;
            gn += gc * n;
        }
        for (int c = 0; c < C; c++) {
            const double n = ((double)x[i * C + c] - mean[i]) * rstd[i];
            rinp[i * C + c] = rstd[i] * ((double)dout[i * C + c] * w[c] - g / C - n * gn / C);
        }
    }
    CHECK_REF("layernorm dinp", dinp, rinp, N * C);
    free(x); free(w); free(b); free(y); free(mean); free(rstd); free(dout); free(dinp); free(dw); free(db);
    free(dbias); free(rinp);
}

static void test_layernorm_no_bias(void) {
    const size_t N = 7;
    const int C = 37;
    real *inp = ralloc(N * C), *w = ralloc(C), *b = ralloc(C), *o1 = ralloc(N * C), *o2 = ralloc(N * C);
    real *mean = ralloc(N), *rstd = ralloc(N);
    fill(inp, N * C, -2, 2);
    fill(w, C, 0.5, 1.5);
    for (int c = 0; c < C; c++) b[c] = 0;
    layernorm_forward(o1, mean, rstd, inp, w, b, N, C);
    layernorm_forward(o2, mean, rstd, inp, w, NULL, N, C);
    CHECK(!memcmp(o1, o2, N * C * sizeof(real)), "LayerNorm without a bias is not the one with b = 0");
    free(inp); free(w); free(b); free(o1); free(o2); free(mean); free(rstd);
}

static void test_encoder_forward(void) {
    int B = 3, T = 5, C = 24, V = 11;
    int inp[15];
    for (int i = 0; i < B * T; i++) inp[i] = (int)(urand() * V);
    inp[0] = 0;
    inp[1] = V - 1;
    real *wte = ralloc((size_t)V * C), *wpe = ralloc((size_t)T * C), *out = ralloc((size_t)B * T * C);
    double *ref = dalloc((size_t)B * T * C);
    fill(wte, (size_t)V * C, -1, 1);
    fill(wpe, (size_t)T * C, -1, 1);
    encoder_forward(out, inp, wte, wpe, B, T, C);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int c = 0; c < C; c++)
                ref[((size_t)b * T + t) * C + c] = (double)wte[(size_t)inp[b * T + t] * C + c] + wpe[(size_t)t * C + c];
    CHECK_REF("encoder out", out, ref, (size_t)B * T * C);
    free(wte); free(wpe); free(out); free(ref);
}

/* Large logits (+-40, and one row at +-1000) check the max subtraction; a -1 target is
 * ignored (loss 0, dlogits row 0); the backward overwrites garbage. */
static void test_crossentropy(void) {
    size_t N = 7;
    int V = 37;
    int tg[7] = {0, 36, -1, 5, 17, -1, 2};
    real *logits = ralloc(N * V), *probs = ralloc(N * V), *losses = ralloc(N), *dl = ralloc(N * V);
    double *rp = dalloc(N * V), *rl = dalloc(N), *rd = dalloc(N * V);
    fill(logits, N * V, -40, 40);
    for (int v = 0; v < V; v++) logits[6 * V + v] = v == 2 ? 1000 : (v % 2 ? -1000 : 999);
    crossentropy_forward(losses, probs, logits, tg, N, V);
    real scale = (real)0.25;
    for (size_t n = 0; n < N; n++) {
        double mx = -INFINITY, z = 0;
        for (int v = 0; v < V; v++) mx = fmax(mx, logits[n * V + v]);
        for (int v = 0; v < V; v++) z += exp(logits[n * V + v] - mx);
        double lse = mx + log(z);
        for (int v = 0; v < V; v++) {
            rp[n * V + v] = exp(logits[n * V + v] - lse);
            rd[n * V + v] = tg[n] < 0 ? 0 : (rp[n * V + v] - (v == tg[n])) * scale;
        }
        rl[n] = tg[n] < 0 ? 0 : lse - logits[n * V + tg[n]];
    }
    CHECK_REF("crossentropy probs", probs, rp, N * V);
    CHECK_REF("crossentropy losses", losses, rl, N);
    CHECK(losses[2] == 0 && losses[5] == 0, "ignored targets give losses %g, %g", (double)losses[2],
          (double)losses[5]);
    for (size_t i = 0; i < N * V; i++) dl[i] = 123;
    crossentropy_backward(dl, probs, tg, scale, N, V);
    CHECK_REF("crossentropy dlogits", dl, rd, N * V);
    free(logits); free(probs); free(losses); free(dl); free(rp); free(rl); free(rd);
}

/* Two AdamW steps against the formula written out in double. */
static void test_adamw(void) {
    enum { n = 5 };
    float p[n] = {1, -2, 0.5f, 0, 3}, g[n] = {0.1f, -0.3f, 0, 2, -1e-4f}, m[n] = {0}, v[n] = {0};
    double rp[n], rm[n] = {0}, rv[n] = {0};
    const double lr = 1e-2, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    for (int i = 0; i < n; i++) rp[i] = p[i];
    for (int t = 1; t <= 2; t++) {
        adamw_update(p, g, m, v, n, (float)lr, (float)b1, (float)b2, (float)eps, (float)wd, t);
        for (int i = 0; i < n; i++) {
            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * (double)g[i] * g[i];
            double mhat = rm[i] / (1 - pow(b1, t)), vhat = rv[i] / (1 - pow(b2, t));
            rp[i] -= lr * (mhat / (sqrt(vhat) + eps) + wd * rp[i]);
        }
        for (int i = 0; i < n; i++) {
            CHECK_CLOSE(p[i], rp[i], 1e-6, 1e-6, "p[%d] after step %d", i, t);
            CHECK_CLOSE(m[i], rm[i], 1e-9, 1e-6, "m[%d] after step %d", i, t);
            CHECK_CLOSE(v[i], rv[i], 1e-12, 1e-6, "v[%d] after step %d", i, t);
        }
    }
    /* By hand, p[3] = 0 with a constant g = 2: the bias corrections make mhat = g and
     * vhat = g^2 exactly, so each step is p -= lr (u + wd p) with u = 2 / (2 + eps). */
    double u = 2 / (2 + eps), hand = 0;
    for (int t = 1; t <= 2; t++) hand -= lr * (u + wd * hand);
    CHECK_CLOSE(p[3], hand, 1e-7, 1e-6, "p[3] by hand");

    /* A tensor long enough for the threads and the vector code, and a length that leaves
     * a tail: the same bits as the formula in scalar float, one value at a time. */
    const size_t sizes[2] = {100003, 37};
    for (int k = 0; k < 2; k++) {
        const size_t N = sizes[k];
        float *P = malloc(N * sizeof *P), *Gr = malloc(N * sizeof *Gr), *M = calloc(N, sizeof *M),
              *Vv = calloc(N, sizeof *Vv), *sp = malloc(N * sizeof *sp), *sm = calloc(N, sizeof *sm),
              *sv = calloc(N, sizeof *sv);
        for (size_t i = 0; i < N; i++) P[i] = sp[i] = (float)(urand() * 4 - 2);
        size_t bad = 0;
        for (int t = 1; t <= 3; t++) {
            for (size_t i = 0; i < N; i++) Gr[i] = (float)((urand() - 0.5) * (i % 7 == 0 ? 1e-6 : 1));
            const float fb1 = 0.9f, fb2 = 0.95f, fl = 3e-3f, fe = 1e-8f, fw = 0.1f;
            adamw_update(P, Gr, M, Vv, N, fl, fb1, fb2, fe, fw, t);
            const float bc1 = (float)(1.0 - pow(fb1, t)), bc2 = (float)(1.0 - pow(fb2, t));
            for (size_t i = 0; i < N; i++) {
                float mi = fb1 * sm[i] + (1.0f - fb1) * Gr[i], vi = fb2 * sv[i] + (1.0f - fb2) * Gr[i] * Gr[i];
                sm[i] = mi, sv[i] = vi;
                sp[i] -= fl * ((mi / bc1) / (sqrtf(vi / bc2) + fe) + fw * sp[i]);
                bad += memcmp(&P[i], &sp[i], 4) || memcmp(&M[i], &sm[i], 4) || memcmp(&Vv[i], &sv[i], 4);
            }
        }
        CHECK(bad == 0, "adamw over %zu values: %zu differ in their bits from the scalar formula", N, bad);
        free(P); free(Gr); free(M); free(Vv); free(sp); free(sm); free(sv);
    }
}

static void test_sumsq_scale(void) {
    size_t n = 100003;
    real *x = ralloc(n);
    fill(x, n, -1, 1);
    double ref = 0;
    for (size_t i = 0; i < n; i++) ref += (double)x[i] * x[i];
    double s = sumsq(x, n);
    CHECK_CLOSE(s, ref, 0, 1e-12, "sumsq");
    CHECK(sumsq(x, 0) == 0, "sumsq of nothing");
    CHECK(sumsq(x, 3) == (double)x[0] * x[0] + (double)x[1] * x[1] + (double)x[2] * x[2], "sumsq of 3");
    int nt = omp_get_max_threads();
    omp_set_num_threads(1);
    double s1 = sumsq(x, n);
    omp_set_num_threads(3);
    double s3 = sumsq(x, n);
    omp_set_num_threads(nt);
    CHECK(s1 == s && s3 == s, "sumsq depends on the thread count: %.17g %.17g %.17g", s1, s3, s);
    CHECK(kernels_threads() == nt, "kernels_threads %d, omp %d", kernels_threads(), nt);
    real x0 = x[0], xl = x[n - 1];
    scale_inplace(x, (real)0.5, n);
    CHECK(x[0] == x0 * (real)0.5 && x[n - 1] == xl * (real)0.5, "scale_inplace");
    free(x);
}

/* The vectorisable exp of the CPU kernels (cpu_math.h) against libm in double on a
 * sweep of 2 million points, and its documented edges: saturation, NaN, exactness at 0. */
static void test_cpu_expf(void) {
    double worst = 0, worst_x = 0;
    const int n = 2000000;
    for (int i = 0; i <= n; i++) {
        float x = (float)(-87.0 + 175.0 * i / n);
        double e = exp((double)x), r = fabs(cpu_expf(x) - e) / e;
        if (!(r <= worst)) { worst = r; worst_x = x; }
    }
    CHECK(worst <= 2e-7, "cpu_expf: relative error %.3g at x = %.9g", worst, worst_x);
    CHECK(cpu_expf(0) == 1, "exp(0) = %.9g", (double)cpu_expf(0));
    CHECK(isnan(cpu_expf(NAN)), "NaN must propagate");
    CHECK(isfinite(cpu_expf(1000)) && cpu_expf(1000) > 1e38, "exp(1000) saturates to %g", (double)cpu_expf(1000));
    CHECK(cpu_expf(-1000) > 0 && cpu_expf(-1000) < 1.2e-38, "exp(-1000) saturates to %g", (double)cpu_expf(-1000));
    CHECK(cpu_expf(INFINITY) == cpu_expf(1000) && cpu_expf(-INFINITY) == cpu_expf(-1000), "infinite inputs");
}

/* cpu_vsum_many against cpu_vsum of each vector and against the documented tree written
 * out in scalars, bit for bit, for every count 1..40 (and the counts the frame inlines
 * as constants). The values span 2^-20..2^20 in both signs, so a sum in another order
 * rounds differently (checked: the plain left-to-right sum must differ somewhere). */
static void vsum_check(int m, const cpu_vec *a, const real *got, int *bad, int *order_matters) {
    for (int p = 0; p < m; p++) {
        real t[CPU_VL], seq = 0;
        memcpy(t, &a[p], sizeof t);
        for (int l = 0; l < CPU_VL; l++) seq += t[l];
        for (int w = CPU_VL / 2; w >= 1; w /= 2)
            for (int l = 0; l < w; l++) t[l] += t[l + w];
        const real one = cpu_vsum(a[p]);
        if (memcmp(&got[p], &one, sizeof one) || memcmp(&got[p], &t[0], sizeof t[0])) (*bad)++;
        if (seq != t[0]) (*order_matters)++;
    }
}

static void test_cpu_vsum_many(void) {
    enum { MAXM = 40 };
    cpu_vec a[MAXM];
    real got[MAXM];
    uint64_t st = 12345;
    int bad = 0, order_matters = 0;
    for (int p = 0; p < MAXM; p++)
        for (int l = 0; l < CPU_VL; l++) {
            st = st * 6364136223846793005ULL + 1442695040888963407ULL;
            const double u = (double)(st >> 11) / 9007199254740992.0;
            const int e = (int)(st >> 3 & 31) - 16;
            a[p][l] = (real)((st & 1 ? -1.0 : 1.0) * (1.0 + u) * ldexp(1.0, e));
        }
    for (int m = 1; m <= MAXM; m++) {
        memset(got, 0xff, sizeof got);
        cpu_vsum_many(m, a, got);
        vsum_check(m, a, got, &bad, &order_matters);
        for (int p = m; p < MAXM; p++) bad += !isnan(got[p]); /* nothing written past m */
    }
    /* the constant counts of the frame (dots at n = 2..4, the projection's 4 x 6 tile) */
    cpu_vsum_many(8, a, got), vsum_check(8, a, got, &bad, &order_matters);
    cpu_vsum_many(15, a, got), vsum_check(15, a, got, &bad, &order_matters);
    cpu_vsum_many(24, a, got), vsum_check(24, a, got, &bad, &order_matters);
    CHECK(bad == 0, "cpu_vsum_many: %d sums differ from cpu_vsum's tree (or were written past m)", bad);
    CHECK(order_matters > 0, "the test's values must make the order of the sum visible");
}

/* The float build's vector forms against the scalar code they replace, bit for bit:
 * cpu_vexpf against cpu_expf lane by lane (a sweep, the saturation points, NaN, the
 * infinities, zeros and subnormals); cpu_sum and cpu_dot against their documented order
 * written out in scalars (8 double lanes, element i into lane i % 8, the lanes added in
 * order), for every n up to 70 and some large ones, on values whose order of summing
 * shows (checked); cpu_max against the sequential maximum, NaN skipped unless first;
 * cpu_softmax_row against the scalar loops (the maximum, cpu_expf, the sum, the
 * division), its zeros past the row, for every length up to a row of T = 70 and rows
 * whose last vector does not fit. */
#if !REAL_IS_DOUBLE
static double ref_lane_sum(const float *a, const float *b, size_t n) {
    double acc[8] = {0}, s = 0;
    for (size_t i = 0; i < n; i++) acc[i % 8] += b ? (double)a[i] * b[i] : (double)a[i];
    for (int l = 0; l < 8; l++) s += acc[l];
    return s;
}

static float ref_max(const float *x, size_t n) {
    float m = x[0];
    for (size_t i = 1; i < n; i++) m = x[i] > m ? x[i] : m;
    return m;
}

static void ref_softmax_row(float *p, int len, int T) {
    const float mx = ref_max(p, (size_t)len);
    for (int j = 0; j < len; j++) p[j] = cpu_expf(p[j] - mx);
    const float inv = (float)(1.0 / ref_lane_sum(p, NULL, (size_t)len));
    for (int j = 0; j < len; j++) p[j] *= inv;
    for (int j = len; j < T; j++) p[j] = 0;
}

static void test_cpu_vector_forms(void) {
    uint64_t st = 777;
    int bad_exp = 0, bad_sum = 0, bad_dot = 0, bad_max = 0, bad_sm = 0, order_matters = 0;
    /* exp: a sweep of [-100, 100] and the special values, a vector at a time */
    enum { NE = 400000 };
    float *x = malloc(NE * sizeof(float));
    for (int i = 0; i < NE; i++) x[i] = (float)(-100.0 + 200.0 * i / NE);
    const float special[] = {0.0f, -0.0f, NAN, -NAN, INFINITY, -INFINITY, 88.0f, 88.1f, -87.3365447f, -87.34f,
                             1e-40f, -1e-40f, 1e-7f, -1e-7f, 0.5f * 0.693359375f, 3.4e38f, -3.4e38f};
    memcpy(x, special, sizeof special);
    for (int i = 0; i + CPU_VL <= NE; i += CPU_VL) {
        const cpu_vec e = cpu_vexpf(cpu_vload(x + i));
        for (int l = 0; l < CPU_VL; l++) {
            const float one = cpu_expf(x[i + l]), el = e[l];
            bad_exp += memcmp(&el, &one, sizeof one) != 0;
        }
    }
    /* sums, dots and maxima of every length up to 70, then some large ones */
    enum { NS = 5000 };
    float *a = malloc(NS * sizeof(float)), *b = malloc(NS * sizeof(float));
    for (int i = 0; i < NS; i++) {
        st = st * 6364136223846793005ULL + 1442695040888963407ULL;
        const double u = (double)(st >> 11) / 9007199254740992.0;
        a[i] = (float)((st & 1 ? -1.0 : 1.0) * (1.0 + u) * ldexp(1.0, (int)(st >> 3 & 63) - 32));
        b[i] = (float)(u - 0.4) * 3;
    }
    const size_t lens[] = {71, 127, 128, 129, 1000, 4099};
    for (size_t k = 0; k < 70 + sizeof lens / sizeof lens[0]; k++) {
        const size_t n = k < 70 ? k + 1 : lens[k - 70];
        for (size_t off = 0; off < 3; off++) { /* rows starting off the vectors' alignment */
            const double s = cpu_sum(a + off, n), d = cpu_dot(a + off, b + off, n);
            const double rs = ref_lane_sum(a + off, NULL, n), rd = ref_lane_sum(a + off, b + off, n);
            bad_sum += memcmp(&s, &rs, sizeof s) != 0;
            bad_dot += memcmp(&d, &rd, sizeof d) != 0;
            double seq = 0;
            for (size_t i = 0; i < n; i++) seq += a[off + i];
            order_matters += seq != rs;
            float m = cpu_max(a + off, n), rm = ref_max(a + off, n);
            bad_max += memcmp(&m, &rm, sizeof m) != 0;
        }
    }
    float nanrow[40];
    for (int i = 0; i < 40; i++) nanrow[i] = (float)i * (i % 3 ? 1 : -1);
    nanrow[17] = NAN, nanrow[33] = NAN; /* skipped: the maximum is 38 */
    bad_max += cpu_max(nanrow, 40) != 38.0f;
    nanrow[0] = NAN; /* first: the maximum is NaN */
    bad_max += !isnan(cpu_max(nanrow, 40));
    /* softmax rows: scores of either scale, every length of a row of 70 and of 16 (where
       the last vector fits), 37 (where it does not) */
    const int Ts[] = {70, 16, 37};
    for (int ti = 0; ti < 3; ti++) {
        const int T = Ts[ti];
        float got[80], want[80];
        for (int len = 1; len <= T; len++)
            for (int scale = 0; scale < 2; scale++) {
                for (int j = 0; j < T; j++) got[j] = want[j] = b[j + len] * (scale ? 30.0f : 1.0f);
                cpu_softmax_row(got, len, T);
                ref_softmax_row(want, len, T);
                bad_sm += memcmp(got, want, (size_t)T * sizeof(float)) != 0;
            }
    }
    CHECK(bad_exp == 0, "cpu_vexpf: %d lanes differ from cpu_expf", bad_exp);
    CHECK(bad_sum == 0 && bad_dot == 0, "cpu_sum / cpu_dot: %d / %d sums differ from the lane order", bad_sum, bad_dot);
    CHECK(order_matters > 0, "the test's values must make the order of the sum visible");
    CHECK(bad_max == 0, "cpu_max: %d maxima differ from the sequential one", bad_max);
    CHECK(bad_sm == 0, "cpu_softmax_row: %d rows differ from the scalar loops", bad_sm);
    free(x); free(a); free(b);
}

/* gelu_forward / gelu_backward and the exact GELU's, which run whole vectors and a scalar
 * tail over each thread's share, against their scalar expressions element by element, bit
 * for bit, on 1, 2 and 3 threads (shares ending off a vector) and special values. */
static void test_gelu_vector_bits(void) {
    const size_t N = 1001;
    real *x = ralloc(N), *y = ralloc(N), *dy = ralloc(N), *dx = ralloc(N), *e = ralloc(N), *de = ralloc(N);
    fill(x, N, -12, 12);
    fill(dy, N, -1, 1);
    const float special[] = {0.0f, -0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -90.0f, 90.0f, 3e38f};
    memcpy(x, special, sizeof special);
    const int nthr = omp_get_max_threads();
    int bad = 0;
    for (int th = 1; th <= 3; th++) {
        omp_set_num_threads(th);
        for (size_t i = 0; i < N; i++) dx[i] = de[i] = (real)(0.125 * (double)(i % 5));
        gelu_forward(y, x, N);
        gelu_backward(dx, x, dy, N);
        gelu_erf_forward(e, x, N);
        gelu_erf_backward(de, x, e, dy, N);
        const float k = 0.79788456080286535588f, k2 = (float)(2 * 0.79788456080286535588), a = 0.044715f;
        for (size_t i = 0; i < N; i++) {
            const float v = x[i], ry = v / (1 + cpu_expf(-k2 * (v + a * v * v * v)));
            const float s = 1 / (1 + cpu_expf(-2 * k * (v + a * v * v * v)));
            const float rdx = (float)(0.125 * (double)(i % 5)) + (s + 2 * v * s * (1 - s) * k * (1 + 3 * a * v * v)) * dy[i];
            const float z = fabsf(v) * 0.70710678118654752440f, t = 1.0f / (1.0f + 0.5f * z);
            float p = 0.17087277f;
            p = p * t - 0.82215223f, p = p * t + 1.48851587f, p = p * t - 1.13520398f, p = p * t + 0.27886807f;
            p = p * t - 0.18628806f, p = p * t + 0.09678418f, p = p * t + 0.37409196f, p = p * t + 1.00002368f;
            p = p * t - 1.26551223f;
            const float half = 0.5f * t * cpu_expf(p - z * z), re = v * (v >= 0 ? 1.0f - half : half);
            const float cdf = v != 0 ? e[i] / v : 0.5f;
            const float rde = (float)(0.125 * (double)(i % 5)) + (cdf + v * 0.39894228040143267794f * cpu_expf(-0.5f * v * v)) * dy[i];
            bad += memcmp(&y[i], &ry, sizeof ry) != 0;
            bad += memcmp(&dx[i], &rdx, sizeof rdx) != 0;
            bad += memcmp(&e[i], &re, sizeof re) != 0;
            bad += memcmp(&de[i], &rde, sizeof rde) != 0;
        }
    }
    omp_set_num_threads(nthr);
    CHECK(bad == 0, "gelu's vector loops: %d values differ from the scalar expressions", bad);
    free(x); free(y); free(dy); free(dx); free(e); free(de);
}
#endif

/* ---- backward rules ---- */

/* g2 after two calls == 2 * g1 after one (both from zero). */
static size_t not_doubled(const real *g1, const real *g2, size_t n) {
    double *twice = dalloc(n);
    for (size_t i = 0; i < n; i++) twice[i] = 2.0 * g1[i];
    size_t bad = mismatches("doubled", g2, twice, n, ADD_ATOL, ADD_RTOL, 0);
    free(twice);
    return bad;
}

static void test_backward_adds(void) {
    int B = 2, T = 9, C = 24, NH = 3, V = 13, OC = 40;
    size_t N = (size_t)B * T;
    real *x = ralloc(N * 3 * C), *W = ralloc((size_t)OC * C), *dout = ralloc(N * OC);
    real *g1[3], *g2[3];
    for (int k = 0; k < 3; k++) { g1[k] = ralloc(N * 3 * C + (size_t)V * C); g2[k] = ralloc(N * 3 * C + (size_t)V * C); }
    fill(x, N * 3 * C, -1, 1);
    fill(W, (size_t)OC * C, -1, 1);
    fill(dout, N * OC, -1, 1);
#define RESET()                                                                         \
    for (int k = 0; k < 3; k++) {                                                       \
        memset(g1[k], 0, (N * 3 * C + (size_t)V * C) * sizeof(real));                   \
        memset(g2[k], 0, (N * 3 * C + (size_t)V * C) * sizeof(real));                   \
    }
    RESET();
    matmul_backward(g1[0], g1[1], g1[2], dout, x, W, N, C, OC);
    for (int r = 0; r < 2; r++) matmul_backward(g2[0], g2[1], g2[2], dout, x, W, N, C, OC);
    CHECK(not_doubled(g1[0], g2[0], N * C) == 0, "matmul dinp");
    CHECK(not_doubled(g1[1], g2[1], (size_t)OC * C) == 0, "matmul dW");
    CHECK(not_doubled(g1[2], g2[2], OC) == 0, "matmul dbias");

    RESET();
    real *w = W, *mean = ralloc(N), *rstd = ralloc(N), *y = ralloc(N * C);
    layernorm_forward(y, mean, rstd, x, w, w + C, N, C);
    layernorm_backward(g1[0], g1[1], g1[2], dout, x, w, mean, rstd, N, C);
    for (int r = 0; r < 2; r++) layernorm_backward(g2[0], g2[1], g2[2], dout, x, w, mean, rstd, N, C);
    CHECK(not_doubled(g1[0], g2[0], N * C) == 0, "layernorm dinp");
    CHECK(not_doubled(g1[1], g2[1], C) == 0, "layernorm dw");
    CHECK(not_doubled(g1[2], g2[2], C) == 0, "layernorm db");
    /* layernorm_backward_set writes dinp over whatever is there (NaN here) with what
     * layernorm_backward adds to zero, and adds dw, db as it does */
    for (size_t i = 0; i < N * C; i++) g2[0][i] = (real)NAN;
    memset(g2[1], 0, C * sizeof(real));
    memset(g2[2], 0, C * sizeof(real));
    layernorm_backward_set(g2[0], g2[1], g2[2], dout, x, w, mean, rstd, N, C);
    size_t set_bad = 0;
    for (size_t i = 0; i < N * C; i++) set_bad += !(g2[0][i] == g1[0][i]);
    CHECK(set_bad == 0, "layernorm_backward_set dinp: %zu of %zu values differ", set_bad, N * C);
    CHECK(!memcmp(g2[1], g1[1], C * sizeof(real)) && !memcmp(g2[2], g1[2], C * sizeof(real)),
          "layernorm_backward_set dw, db");

    RESET();
    real *att = ralloc((size_t)B * NH * T * T), *scratch = ralloc((size_t)B * NH * T * T), *o = ralloc(N * C);
    attention_forward(o, att, x, B, T, C, NH);
    attention_backward(g1[0], scratch, dout, x, att, B, T, C, NH);
    for (int r = 0; r < 2; r++) attention_backward(g2[0], scratch, dout, x, att, B, T, C, NH);
    CHECK(not_doubled(g1[0], g2[0], N * 3 * C) == 0, "attention dqkv");

    RESET();
    gelu_backward(g1[0], x, dout, N * C);
    for (int r = 0; r < 2; r++) gelu_backward(g2[0], x, dout, N * C);
    CHECK(not_doubled(g1[0], g2[0], N * C) == 0, "gelu dinp");

    RESET();
    real *gx = ralloc(N * C);
    gelu_erf_forward(gx, x, N * C);
    gelu_erf_backward(g1[0], x, gx, dout, N * C);
    for (int r = 0; r < 2; r++) gelu_erf_backward(g2[0], x, gx, dout, N * C);
    free(gx);
    CHECK(not_doubled(g1[0], g2[0], N * C) == 0, "exact gelu dinp");

    RESET();
    int tok[18];
    for (size_t i = 0; i < N; i++) tok[i] = (int)(i * 7 % 5); /* repeated ids */
    encoder_backward(g1[0], g1[1], dout, tok, B, T, C, V);
    for (int r = 0; r < 2; r++) encoder_backward(g2[0], g2[1], dout, tok, B, T, C, V);
    CHECK(not_doubled(g1[0], g2[0], (size_t)V * C) == 0, "encoder dwte");
    CHECK(not_doubled(g1[1], g2[1], (size_t)T * C) == 0, "encoder dwpe");
#undef RESET
    for (int k = 0; k < 3; k++) { free(g1[k]); free(g2[k]); }
    free(x); free(W); free(dout); free(mean); free(rstd); free(y); free(att); free(scratch); free(o);
}

/* Two runs give bit-identical gradients; the non-BLAS reductions (encoder, LayerNorm
 * dw/db, matmul dbias) are also identical across thread counts by construction. */
static void test_determinism(void) {
    int B = 4, T = 97, C = 48, NH = 3, V = 7;
    size_t N = (size_t)B * T, nqkv = N * 3 * C, natt = (size_t)B * NH * T * T;
    real *qkv = ralloc(nqkv), *att = ralloc(natt), *out = ralloc(N * C), *dout = ralloc(N * C);
    real *s1 = ralloc(natt), *s2 = ralloc(natt), *d1 = ralloc(nqkv), *d2 = ralloc(nqkv);
    fill(qkv, nqkv, -2, 2);
    fill(dout, N * C, -1, 1);
    attention_forward(out, att, qkv, B, T, C, NH);
    attention_backward(d1, s1, dout, qkv, att, B, T, C, NH);
    attention_backward(d2, s2, dout, qkv, att, B, T, C, NH);
    CHECK(memcmp(d1, d2, nqkv * sizeof(real)) == 0, "attention dqkv differs between two runs");

    int *tok = malloc(N * sizeof(int));
    for (size_t i = 0; i < N; i++) tok[i] = (int)(urand() * 3); /* many repeats */
    real *w1 = ralloc((size_t)V * C), *w2 = ralloc((size_t)V * C), *p1 = ralloc((size_t)T * C),
         *p2 = ralloc((size_t)T * C);
    encoder_backward(w1, p1, dout, tok, B, T, C, V);
    encoder_backward(w2, p2, dout, tok, B, T, C, V);
    CHECK(memcmp(w1, w2, (size_t)V * C * sizeof(real)) == 0, "encoder dwte differs between two runs");
    CHECK(memcmp(p1, p2, (size_t)T * C * sizeof(real)) == 0, "encoder dwpe differs between two runs");

    int nt = omp_get_max_threads();
    real *m = ralloc(N), *r = ralloc(N), *lw = ralloc(C), *lb = ralloc(C), *a1 = ralloc(2 * C), *a2 = ralloc(2 * C);
    fill(lw, C, 0.5, 1.5);
    layernorm_forward(out, m, r, qkv, lw, lb, N, C);
    real *e1 = ralloc((size_t)V * C), *e2 = ralloc((size_t)V * C), *b1 = ralloc(C), *b2 = ralloc(C);
    omp_set_num_threads(1);
    encoder_backward(e1, NULL, dout, tok, B, T, C, V);
    layernorm_backward(NULL, a1, a1 + C, dout, qkv, lw, m, r, N, C);
    matmul_backward(NULL, NULL, b1, dout, qkv, lw, N, 1, C);
    omp_set_num_threads(nt > 1 ? nt : 3);
    encoder_backward(e2, NULL, dout, tok, B, T, C, V);
    layernorm_backward(NULL, a2, a2 + C, dout, qkv, lw, m, r, N, C);
    matmul_backward(NULL, NULL, b2, dout, qkv, lw, N, 1, C);
    omp_set_num_threads(nt);
    CHECK(memcmp(e1, e2, (size_t)V * C * sizeof(real)) == 0, "encoder dwte depends on the thread count");
    CHECK(memcmp(a1, a2, 2 * (size_t)C * sizeof(real)) == 0, "layernorm dw/db depend on the thread count");
    CHECK(memcmp(b1, b2, (size_t)C * sizeof(real)) == 0, "matmul dbias depends on the thread count");
    free(qkv); free(att); free(out); free(dout); free(s1); free(s2); free(d1); free(d2); free(tok);
    free(w1); free(w2); free(p1); free(p2); free(m); free(r); free(lw); free(lb); free(a1); free(a2);
    free(e1); free(e2); free(b1); free(b2);
}

/* The planted fault (SQLite's habit): a reference with a transposed weight, and one with
 * a single entry perturbed by 1e-4, must both be reported by the same checker every
 * other test relies on. If this test fails, the passes above mean nothing. */
static void test_checker_catches_fault(void) {
    size_t N = 37;
    int C = 24;
    real *inp = ralloc(N * C), *W = ralloc((size_t)C * C), *Wt = ralloc((size_t)C * C), *out = ralloc(N * C);
    double *ref = dalloc(N * C);
    fill(inp, N * C, -1, 1);
    fill(W, (size_t)C * C, -1, 1);
    for (int i = 0; i < C; i++)
        for (int j = 0; j < C; j++) Wt[i * C + j] = W[j * C + i];
    matmul_forward(out, inp, W, NULL, N, C, C);
    ref_matmul(ref, inp, W, NULL, N, C, C);
    CHECK(mismatches("good", out, ref, N * C, FWD_ATOL, FWD_RTOL, 1) == 0, "the correct reference must pass");
    ref_matmul(ref, inp, Wt, NULL, N, C, C);
    CHECK(mismatches("transposed", out, ref, N * C, FWD_ATOL, FWD_RTOL, 1) > 0,
          "a reference with W transposed was not caught");
    ref_matmul(ref, inp, W, NULL, N, C, C);
    ref[17] += 1e-4;
    CHECK(mismatches("perturbed", out, ref, N * C, FWD_ATOL, FWD_RTOL, 1) == 1,
          "a single entry off by 1e-4 was not caught exactly once");
    ref[17] = NAN;
    CHECK(mismatches("nan", out, ref, N * C, FWD_ATOL, FWD_RTOL, 1) == 1, "a NaN was not caught");
    free(inp); free(W); free(Wt); free(out); free(ref);
}

int main(void) {
    T_NAME("test_ops");
    T_RUN(test_matmul_forward);
    T_RUN(test_matmul_backward);
    T_RUN(test_layernorm_forward);
    T_RUN(test_attention_forward);
    T_RUN(test_attention_causal);
    T_RUN(test_attention_tiles);
    T_RUN(test_gelu_forward);
    T_RUN(test_gelu_erf);
    T_RUN(test_layernorm_no_bias);
    T_RUN(test_layernorm_backward);
    T_RUN(test_encoder_forward);
    T_RUN(test_crossentropy);
    T_RUN(test_adamw);
    T_RUN(test_sumsq_scale);
    T_RUN(test_cpu_expf);
    T_RUN(test_cpu_vsum_many);
#if !REAL_IS_DOUBLE
    T_RUN(test_cpu_vector_forms);
    T_RUN(test_gelu_vector_bits);
#endif
    T_RUN(test_backward_adds);
    T_RUN(test_determinism);
    T_RUN(test_checker_catches_fault);
    return T_END();
}
