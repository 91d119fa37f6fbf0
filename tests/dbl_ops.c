/* dbl_ops.c: every backward op of the CPU kernels (double build, -DS2HC_DOUBLE) against
 * central finite differences of a scalar loss, for every input and parameter gradient.
 *
 * The loss is L = sum(out * R) with a fixed random R, so dout = R (cross-entropy:
 * L = scale * sum(losses), whose dlogits the backward writes directly).
 * Step FD_EPS = 1e-6: the truncation error (eps^2 f''' ~ 1e-12) and the rounding error
 * (1e-16 |L| / eps ~ 1e-10 for |L| ~ 10) both stay far below the tolerance
 *   |analytic - fd| <= FD_ATOL + FD_RTOL max(|analytic|, |fd|),  FD_ATOL 1e-8, FD_RTOL 1e-6.
 * Gradients are O(0.01..1), so a wrong term of any consequence is caught. Measured: the
 * worst disagreement is about 5e-10 absolute, and every check still passes at
 * FD_ATOL 1e-9, FD_RTOL 1e-8.
 */
#include <omp.h>
#include <stdint.h>
#include "kernels/kernels.h"
#include "tests/t.h"

#if !REAL_IS_DOUBLE
#error "dbl_ops.c must be built with -DS2HC_DOUBLE"
#endif

#define FD_EPS 1e-6
#define FD_ATOL 1e-8
#define FD_RTOL 1e-6

static uint64_t rng_state_ = 0x2545F4914F6CDD1Dull;
static double urand(void) { /* xorshift64*, [0, 1) */
    rng_state_ ^= rng_state_ >> 12;
    rng_state_ ^= rng_state_ << 25;
    rng_state_ ^= rng_state_ >> 27;
    return (double)((rng_state_ * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static void fill(real *x, size_t n, double lo, double hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * urand();
}
static real *ralloc(size_t n) {
    real *p = calloc(n ? n : 1, sizeof(real));
    if (!p) { fprintf(stderr, "out of memory\n"); exit(2); }
    return p;
}
static double dot(const real *a, const real *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* The loss of the op under test at the current values of its inputs. */
typedef double (*loss_fn)(void *ctx);

/* Compare grad (n) with central differences of loss() in each entry of x (n), which is
 * restored afterwards. Returns the number of entries past tolerance and prints the worst
 * unless quiet. The planted-fault test proves it reports a wrong gradient. The forwards
 * run on one thread (the gradient, computed before, on the default count): each op's
 * parallel region on a few dozen numbers cost a team of two on a loaded 2-core machine
 * far more than the arithmetic (the test 3-5 s against 0.3-0.7 at a load of 4-6). */
static size_t fd_mismatches(const char *what, loss_fn loss, void *ctx, real *x, const real *grad, size_t n,
                            int quiet) {
    size_t bad = 0, worst = 0;
    double worst_excess = -1, worst_fd = 0;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    for (size_t i = 0; i < n; i++) {
        real saved = x[i];
        x[i] = saved + FD_EPS;
        double lp = loss(ctx);
        x[i] = saved - FD_EPS;
        double lm = loss(ctx);
        x[i] = saved;
        double fd = (lp - lm) / (2 * FD_EPS), a = grad[i];
        double lim = FD_ATOL + FD_RTOL * fmax(fabs(a), fabs(fd)), d = fabs(a - fd);
        if (!(d <= lim)) {
            bad++;
            if (!(d - lim <= worst_excess)) { worst_excess = d - lim; worst = i; worst_fd = fd; }
        }
    }
    omp_set_num_threads(threads);
    if (bad && !quiet)
        fprintf(stderr, "    %s: %zu of %zu differ; worst [%zu] analytic %.12g fd %.12g\n", what, bad, n, worst,
                grad[worst], worst_fd);
    return bad;
}
#define CHECK_FD(what, loss, ctx, x, grad, n) \
    CHECK(fd_mismatches(what, loss, ctx, x, grad, n, 0) == 0, "%s disagrees with finite differences", what)

/* ---- matmul ---- */

typedef struct { real *inp, *W, *bias, *out, *R; size_t N; int C, OC; } mm_ctx;
static double mm_loss(void *p) {
    mm_ctx *c = p;
    matmul_forward(c->out, c->inp, c->W, c->bias, c->N, c->C, c->OC);
    return dot(c->out, c->R, c->N * c->OC);
}
static void test_matmul_grad(void) {
    mm_ctx c = {.N = 7, .C = 5, .OC = 6};
    size_t N = c.N;
    c.inp = ralloc(N * c.C); c.W = ralloc((size_t)c.OC * c.C); c.bias = ralloc(c.OC);
    c.out = ralloc(N * c.OC); c.R = ralloc(N * c.OC);
    fill(c.inp, N * c.C, -1, 1); fill(c.W, (size_t)c.OC * c.C, -1, 1); fill(c.bias, c.OC, -1, 1);
    fill(c.R, N * c.OC, -1, 1);
    real *dinp = ralloc(N * c.C), *dW = ralloc((size_t)c.OC * c.C), *db = ralloc(c.OC);
    matmul_backward(dinp, dW, db, c.R, c.inp, c.W, N, c.C, c.OC);
    CHECK_FD("matmul dinp", mm_loss, &c, c.inp, dinp, N * c.C);
    CHECK_FD("matmul dW", mm_loss, &c, c.W, dW, (size_t)c.OC * c.C);
    CHECK_FD("matmul dbias", mm_loss, &c, c.bias, db, c.OC);
    free(c.inp); free(c.W); free(c.bias); free(c.out); free(c.R); free(dinp); free(dW); free(db);
}

/* ---- layernorm ---- */

typedef struct { real *inp, *w, *b, *out, *mean, *rstd, *R; size_t N; int C; } ln_ctx;
static double ln_loss(void *p) {
    ln_ctx *c = p;
    layernorm_forward(c->out, c->mean, c->rstd, c->inp, c->w, c->b, c->N, c->C);
    return dot(c->out, c->R, c->N * c->C);
}
static void test_layernorm_grad(void) {
    ln_ctx c = {.N = 6, .C = 9};
    size_t N = c.N, n = N * c.C;
    c.inp = ralloc(n); c.w = ralloc(c.C); c.b = ralloc(c.C); c.out = ralloc(n);
    c.mean = ralloc(N); c.rstd = ralloc(N); c.R = ralloc(n);
    fill(c.inp, n, -1, 2); fill(c.w, c.C, 0.5, 1.5); fill(c.b, c.C, -0.5, 0.5); fill(c.R, n, -1, 1);
    ln_loss(&c); /* mean, rstd at the point of the backward */
    real *dinp = ralloc(n), *dw = ralloc(c.C), *db = ralloc(c.C);
    layernorm_backward(dinp, dw, db, c.R, c.inp, c.w, c.mean, c.rstd, N, c.C);
    CHECK_FD("layernorm dinp", ln_loss, &c, c.inp, dinp, n);
    CHECK_FD("layernorm dw", ln_loss, &c, c.w, dw, c.C);
    CHECK_FD("layernorm db", ln_loss, &c, c.b, db, c.C);
    /* without a bias (model.bias false): b and db NULL */
    real *keep = c.b;
    c.b = NULL;
    ln_loss(&c);
    for (size_t k = 0; k < n; k++) dinp[k] = 0;
    for (int k = 0; k < c.C; k++) dw[k] = 0;
    layernorm_backward(dinp, dw, NULL, c.R, c.inp, c.w, c.mean, c.rstd, N, c.C);
    CHECK_FD("layernorm dinp, no bias", ln_loss, &c, c.inp, dinp, n);
    CHECK_FD("layernorm dw, no bias", ln_loss, &c, c.w, dw, c.C);
    c.b = keep;
    free(c.inp); free(c.w); free(c.b); free(c.out); free(c.mean); free(c.rstd); free(c.R);
    free(dinp); free(dw); free(db);
}

/* ---- attention ---- */

typedef struct { real *qkv, *out, *att, *R; int B, T, C, NH; } at_ctx;
static double at_loss(void *p) {
    at_ctx *c = p;
    attention_forward(c->out, c->att, c->qkv, c->B, c->T, c->C, c->NH);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}
static void check_attention_grad(int B, int T, int C, int NH) {
    at_ctx c = {.B = B, .T = T, .C = C, .NH = NH};
    size_t nqkv = (size_t)c.B * c.T * 3 * c.C, nout = (size_t)c.B * c.T * c.C,
           natt = (size_t)c.B * c.NH * c.T * c.T;
    c.qkv = ralloc(nqkv); c.out = ralloc(nout); c.att = ralloc(natt); c.R = ralloc(nout);
    fill(c.qkv, nqkv, -1.5, 1.5); fill(c.R, nout, -1, 1);
    at_loss(&c);
    real *dqkv = ralloc(nqkv), *scratch = ralloc(natt);
    attention_backward(dqkv, scratch, c.R, c.qkv, c.att, c.B, c.T, c.C, c.NH);
    CHECK_FD("attention dqkv", at_loss, &c, c.qkv, dqkv, nqkv);
    free(c.qkv); free(c.out); free(c.att); free(c.R); free(dqkv); free(scratch);
}
/* attention.c's tiles in the double build (4 or 8 lanes): T = 5 inside one tile of
 * rows; T = 70 over many, the last partial; hs = 2 channels one by one only; hs = 24
 * and 40, three and five vectors of 8 (six and ten of 4); T = 29 and 17 a partial last
 * key vector. */
static void test_attention_grad(void) {
    check_attention_grad(2, 5, 6, 3);
    check_attention_grad(1, 70, 4, 2);
    check_attention_grad(1, 29, 48, 2);
    check_attention_grad(1, 17, 80, 2);
}

/* ---- gelu ---- */

typedef struct { real *inp, *out, *R; size_t N; int exact; } ge_ctx;
static double ge_loss(void *p) {
    ge_ctx *c = p;
    (c->exact ? gelu_erf_forward : gelu_forward)(c->out, c->inp, c->N);
    return dot(c->out, c->R, c->N);
}
/* exact: the erf form (model.gelu: erf) */
static void check_gelu_grad(int exact) {
    ge_ctx c = {.N = 41, .exact = exact};
    c.inp = ralloc(c.N); c.out = ralloc(c.N); c.R = ralloc(c.N);
    fill(c.inp, c.N, -5, 5); fill(c.R, c.N, -1, 1);
    c.inp[0] = 0;
    real *dinp = ralloc(c.N);
    ge_loss(&c); /* the output at the point of the backward (the erf form reads it) */
    if (exact)
        gelu_erf_backward(dinp, c.inp, c.out, c.R, c.N);
    else
        gelu_backward(dinp, c.inp, c.R, c.N);
    CHECK_FD(exact ? "exact gelu dinp" : "gelu dinp", ge_loss, &c, c.inp, dinp, c.N);
    free(c.inp); free(c.out); free(c.R); free(dinp);
}
static void test_gelu_grad(void) {
    check_gelu_grad(0);
    check_gelu_grad(1);
}

/* ---- encoder ---- */

typedef struct { real *wte, *wpe, *out, *R; int *inp; int B, T, C; } en_ctx;
static double en_loss(void *p) {
    en_ctx *c = p;
    encoder_forward(c->out, c->inp, c->wte, c->wpe, c->B, c->T, c->C);
    return dot(c->out, c->R, (size_t)c->B * c->T * c->C);
}
static void test_encoder_grad(void) {
    int tok[8] = {3, 1, 3, 0, 3, 4, 1, 3}; /* repeats, and id 2 unused (zero gradient) */
    en_ctx c = {.B = 2, .T = 4, .C = 5, .inp = tok};
    int V = 5;
    size_t nout = (size_t)c.B * c.T * c.C;
    c.wte = ralloc((size_t)V * c.C); c.wpe = ralloc((size_t)c.T * c.C); c.out = ralloc(nout); c.R = ralloc(nout);
    fill(c.wte, (size_t)V * c.C, -1, 1); fill(c.wpe, (size_t)c.T * c.C, -1, 1); fill(c.R, nout, -1, 1);
    real *dwte = ralloc((size_t)V * c.C), *dwpe = ralloc((size_t)c.T * c.C);
    encoder_backward(dwte, dwpe, c.R, tok, c.B, c.T, c.C, V);
    CHECK_FD("encoder dwte", en_loss, &c, c.wte, dwte, (size_t)V * c.C);
    CHECK_FD("encoder dwpe", en_loss, &c, c.wpe, dwpe, (size_t)c.T * c.C);
    free(c.wte); free(c.wpe); free(c.out); free(c.R); free(dwte); free(dwpe);
}

/* ---- cross-entropy ---- */

typedef struct { real *logits, *probs, *losses; int *tg; real scale; size_t N; int V; } ce_ctx;
static double ce_loss(void *p) {
    ce_ctx *c = p;
    crossentropy_forward(c->losses, c->probs, c->logits, c->tg, c->N, c->V);
    double s = 0;
    for (size_t n = 0; n < c->N; n++) s += c->losses[n];
    return c->scale * s;
}
static void test_crossentropy_grad(void) {
    int tg[5] = {2, -1, 0, 6, 2}; /* -1 ignored: its row must get no gradient */
    ce_ctx c = {.tg = tg, .scale = 0.2, .N = 5, .V = 7};
    size_t n = c.N * c.V;
    c.logits = ralloc(n); c.probs = ralloc(n); c.losses = ralloc(c.N);
    fill(c.logits, n, -3, 3);
    ce_loss(&c);
    real *dl = ralloc(n);
    crossentropy_backward(dl, c.probs, tg, c.scale, c.N, c.V);
    CHECK_FD("crossentropy dlogits", ce_loss, &c, c.logits, dl, n);
    free(c.logits); free(c.probs); free(c.losses); free(dl);
}

/* ---- the planted fault ---- */

/* A correct gradient with one entry moved by 1e-5 (10x the tolerance at that size) and
 * the gradient of the wrong input (dW for dinp, both 5 x 5) must be reported by the
 * same checker; else every pass above is worthless. */
static void test_fd_checker_catches_fault(void) {
    mm_ctx c = {.N = 5, .C = 5, .OC = 5};
    size_t n = 25;
    c.inp = ralloc(n); c.W = ralloc(n); c.bias = ralloc(5); c.out = ralloc(n); c.R = ralloc(n);
    fill(c.inp, n, -1, 1); fill(c.W, n, -1, 1); fill(c.bias, 5, -1, 1); fill(c.R, n, -1, 1);
    real *dinp = ralloc(n), *dW = ralloc(n);
    matmul_backward(dinp, dW, NULL, c.R, c.inp, c.W, c.N, c.C, c.OC);
    CHECK(fd_mismatches("good", mm_loss, &c, c.W, dW, n, 1) == 0, "the correct gradient must pass");
    dW[7] += 1e-5;
    CHECK(fd_mismatches("perturbed", mm_loss, &c, c.W, dW, n, 1) == 1,
          "a gradient entry off by 1e-5 was not caught exactly once");
    CHECK(fd_mismatches("swapped", mm_loss, &c, c.inp, dW, n, 1) > 0, "dW passed off as dinp was not caught");
    free(c.inp); free(c.W); free(c.bias); free(c.out); free(c.R); free(dinp); free(dW);
}

int main(void) {
    T_NAME("dbl_ops");
    T_RUN(test_matmul_grad);
    T_RUN(test_layernorm_grad);
    T_RUN(test_attention_grad);
    T_RUN(test_gelu_grad);
    T_RUN(test_encoder_grad);
    T_RUN(test_crossentropy_grad);
    T_RUN(test_fd_checker_catches_fault);
    return T_END();
}
