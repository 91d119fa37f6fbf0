/* dbl_model.c: whole-model gradient check in double precision.
 *
 * For rc and every registered residual method, a tiny GPT (2 blocks = 4 hyper-connected
 * sublayers) with every parameter perturbed away from its init is differentiated by
 * model_backward and by central finite differences of model_forward, on sampled entries
 * of EVERY parameter tensor (all entries of the small ones). Built with -DS2HC_DOUBLE.
 *
 * Tolerance: |analytic - fd| <= 1e-8 + 1e-5 * max(|analytic|, |fd|), eps = 1e-5. In
 * double the truncation error of the central difference is ~eps^2 and rounding ~1e-11,
 * so anything above 1e-6 relative is a wrong derivative, not noise.
 *
 * The gradient under test runs on the default thread count; the finite differences'
 * forwards (two per entry checked, ~22 000 in all) on one thread: each opens tens of
 * parallel regions on a model of a few hundred numbers, and a team of two on a loaded
 * 2-core machine waited for its second thread at every one (the test took 17-96 s
 * against 2-5 s at a load of 4-6). The reference then comes from the one-thread path,
 * the gradient from the team's (a gradient one thread of the team leaves out fails).
 */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../harness/model.h"
#include "../harness/util.h"
#include "t.h"

#define FD_EPS 1e-5
#define FD_ATOL 1e-8
#define FD_RTOL 1e-5

static void tiny_config(s2hc_config *c, const char *method, int n) {
    memset(c, 0, sizeof *c);
    c->n_layer = 2;
    c->n_head = 2;
    c->n_embd = 8;
    c->block_size = 5;
    c->vocab = 11;
    c->bias = 1;
    snprintf(c->gelu, sizeof c->gelu, "tanh");
    snprintf(c->method, sizeof c->method, "%s", method);
    c->n_streams = n;
    c->sinkhorn_iters = 20;
    snprintf(c->sinkhorn_order, sizeof c->sinkhorn_order, "row_col");
    snprintf(c->lite_offset, sizeof c->lite_offset, "fixed");
    c->lite_offset_value = -8;
    snprintf(c->core, sizeof c->core, "cayley");
    snprintf(c->init, sizeof c->init, "tanh4");
    snprintf(c->proj_init, sizeof c->proj_init, "zero");
    c->batch = 2;
    c->seed = 7;
}

/* Perturb every parameter so no derivative is trivially zero (W = 0 and alpha = 0.01 at
 * init would hide a wrong dW). Large-ish noise on the frame, small on the rest. */
static void perturb(gpt_model *m, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const param_info *p = &m->pinfo[i];
        double s = p->aux ? 0.3 : 0.1;
        for (size_t k = 0; k < p->numel; k++) m->params[p->offset + k] += s * rng_normal(&r);
    }
}

static double loss_at(gpt_model *m, const int *in, const int *tg) { return model_forward(m, in, tg, m->B); }

/* Returns the worst relative error seen; CHECKs each sampled entry. */
static double gradcheck(const char *method, int n, const char *opt_key, const char *opt_val) {
    s2hc_config c;
    tiny_config(&c, method, n);
    if (opt_key && !strcmp(opt_key, "core")) snprintf(c.core, sizeof c.core, "%s", opt_val);
    if (opt_key && !strcmp(opt_key, "init")) snprintf(c.init, sizeof c.init, "%s", opt_val);
    if (opt_key && !strcmp(opt_key, "n_embd")) c.n_embd = atoi(opt_val);
    if (opt_key && !strcmp(opt_key, "sinkhorn_order")) snprintf(c.sinkhorn_order, sizeof c.sinkhorn_order, "%s", opt_val);
    if (opt_key && !strcmp(opt_key, "base") && !strcmp(opt_val, "nanogpt")) { /* no biases, the exact GELU */
        c.bias = 0;
        snprintf(c.gelu, sizeof c.gelu, "erf");
    }
    gpt_model m;
    char err[256];
    if (model_build(&m, &c, err, sizeof err) != 0) {
        CHECK(0, "%s n=%d: model_build: %s", method, n, err);
        return INFINITY;
    }
    model_init(&m, c.seed);
    perturb(&m, 99);
    int B = c.batch, T = c.block_size;
    model_alloc_acts(&m, B);
    int in[64], tg[64];
    rng_t r;
    rng_seed(&r, 3);
    for (int i = 0; i < B * T; i++) {
        in[i] = (int)(rng_u64(&r) % (uint64_t)c.vocab);
        tg[i] = (int)(rng_u64(&r) % (uint64_t)c.vocab);
    }
    tg[3] = -1; /* an ignored target must not contribute */
    model_zero_grad(&m);
    loss_at(&m, in, tg);
    model_backward(&m, 1.0);
    double *g = malloc_check(m.n_params * sizeof(double));
    memcpy(g, m.grads, m.n_params * sizeof(double));
    double worst = 0;
    int checked = 0, bad = 0;
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1); /* the finite differences' forwards (see the top) */
    for (int i = 0; i < m.n_tensors; i++) {
        const param_info *p = &m.pinfo[i];
        size_t samples = p->numel <= 24 ? p->numel : 12;
        for (size_t s = 0; s < samples; s++) {
            size_t k = p->numel <= 24 ? s : (size_t)(rng_u64(&r) % p->numel);
            double *w = &m.params[p->offset + k];
            double w0 = *w;
            *w = w0 + FD_EPS;
            double lp = loss_at(&m, in, tg);
            *w = w0 - FD_EPS;
            double lm = loss_at(&m, in, tg);
            *w = w0;
            double fd = (lp - lm) / (2 * FD_EPS), an = g[p->offset + k];
            double diff = fabs(fd - an), mag = fmax(fabs(fd), fabs(an));
            double rel = diff / fmax(mag, 1e-12);
            if (mag > 1e-6 && rel > worst) worst = rel;
            checked++;
            if (!(diff <= FD_ATOL + FD_RTOL * mag)) {
                if (bad++ < 5)
                    CHECK(0, "%s n=%d %s%s: %s[%zu]: analytic %.10g vs finite difference %.10g", method, n,
                          opt_key ? opt_key : "", opt_val ? opt_val : "", p->name, k, an, fd);
                else
                    t_case_failed_ = 1;
            }
        }
    }
    omp_set_num_threads(threads);
    CHECK(checked > 0, "nothing checked");
    if (getenv("T_VERBOSE"))
        fprintf(stderr, "  %-10s n=%d %s%s%s: %d entries, worst relative error %.2e\n", method, n,
                opt_key ? opt_key : "", opt_key ? "=" : "", opt_val ? opt_val : "", checked, worst);
    free(g);
    model_free(&m);
    return worst;
}

static void test_rc(void) { gradcheck("rc", 1, NULL, NULL); }

static void test_every_method(void) {
    for (int i = 0; hc_variants[i]; i++) {
        const char *name = hc_variants[i]->name;
        /* mhc_lite has n! logits per token: keep n small; the rest at n = 4 and n = 3 */
        if (!strcmp(name, "mhc_lite")) {
            gradcheck(name, 3, NULL, NULL);
            continue;
        }
        gradcheck(name, 4, NULL, NULL);
        gradcheck(name, 3, NULL, NULL);
    }
}

static void test_method_options(void) {
    if (hc_variant_find("s2hc")) {
        gradcheck("s2hc", 4, "core", "expm");
        gradcheck("s2hc", 4, "init", "exact");
        gradcheck("s2hc", 5, NULL, NULL); /* LU path for the 4x4 cores */
    }
    if (hc_variant_find("mhc")) gradcheck("mhc", 4, "sinkhorn_order", "col_row");
    /* n C = 18 and 30 channels: not a multiple of the vector width, so the frame's
     * loops run their scalar tails */
    gradcheck("identity", 3, "n_embd", "6");
    if (hc_variant_find("s2hc")) gradcheck("s2hc", 5, "n_embd", "6");
}

/* nanoGPT's base model (model.bias false, model.gelu erf): rc and a frame */
static void test_nanogpt_base(void) {
    gradcheck("rc", 1, "base", "nanogpt");
    if (hc_variant_find("s2hc")) gradcheck("s2hc", 4, "base", "nanogpt");
    if (hc_variant_find("mhc")) gradcheck("mhc", 3, "base", "nanogpt");
}

/* The checker itself must be able to fail: corrupt one analytic gradient entry of a real
 * model and confirm the comparison would flag it (SQLite's planted-fault habit). */
static void test_planted_fault_is_caught(void) {
    s2hc_config c;
    tiny_config(&c, "rc", 1);
    gpt_model m;
    char err[256];
    CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
    model_init(&m, 1);
    model_alloc_acts(&m, c.batch);
    int in[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, tg[10] = {2, 3, 4, 5, 6, 7, 8, 9, 10, 0};
    model_zero_grad(&m);
    loss_at(&m, in, tg);
    model_backward(&m, 1.0);
    const param_info *p = model_find_param(&m, "transformer.h.1.mlp.c_fc.weight");
    CHECK(p != NULL, "tensor missing");
    size_t k = p->offset + 5;
    double an = m.grads[k] * 1.01 + 1e-6; /* the planted fault: 1 % off */
    double w0 = m.params[k];
    m.params[k] = w0 + FD_EPS;
    double lp = loss_at(&m, in, tg);
    m.params[k] = w0 - FD_EPS;
    double lm = loss_at(&m, in, tg);
    m.params[k] = w0;
    double fd = (lp - lm) / (2 * FD_EPS);
    double diff = fabs(fd - an), mag = fmax(fabs(fd), fabs(an));
    CHECK(!(diff <= FD_ATOL + FD_RTOL * mag), "a 1%% gradient error went unnoticed (%.10g vs %.10g)", an, fd);
    model_free(&m);
}

/* The streams-to-streams map used by the Jacobian probe: its VJP (model_streams_backward)
 * against central differences along a random direction, with and without branches. */
static void test_streams_vjp(void) {
    const char *methods[] = {"rc", "identity", "mhc", "s2hc", "hc"};
    for (size_t mi = 0; mi < sizeof methods / sizeof *methods; mi++) {
        if (strcmp(methods[mi], "rc") && !hc_variant_find(methods[mi])) continue;
        for (int br = 0; br <= 1; br++) {
            s2hc_config c;
            tiny_config(&c, methods[mi], strcmp(methods[mi], "rc") ? 3 : 1);
            gpt_model m;
            char err[256];
            CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
            model_init(&m, 5);
            perturb(&m, 6);
            model_alloc_acts(&m, c.batch);
            size_t sz = (size_t)c.batch * c.block_size * m.n * m.C;
            double *X0 = malloc_check(sz * sizeof(double)), *v = malloc_check(sz * sizeof(double));
            double *u = malloc_check(sz * sizeof(double)), *g = malloc_check(sz * sizeof(double));
            double *Xp = malloc_check(sz * sizeof(double));
            rng_t r;
            rng_seed(&r, 8);
            for (size_t k = 0; k < sz; k++) { X0[k] = rng_normal(&r); v[k] = rng_normal(&r); u[k] = rng_normal(&r); }
            model_streams_forward(&m, X0, br);
            model_streams_backward(&m, u, g);
            double an = 0;
            for (size_t k = 0; k < sz; k++) an += g[k] * v[k];
            double f[2];
            for (int sgn = 0; sgn < 2; sgn++) {
                for (size_t k = 0; k < sz; k++) Xp[k] = X0[k] + (sgn ? -FD_EPS : FD_EPS) * v[k];
                model_streams_forward(&m, Xp, br);
                const double *XL = model_streams(&m, m.Lh);
                f[sgn] = 0;
                for (size_t k = 0; k < sz; k++) f[sgn] += u[k] * XL[k];
            }
            double fd = (f[0] - f[1]) / (2 * FD_EPS);
            CHECK_CLOSE(an, fd, 1e-7, 1e-6, "%s branches=%d: <u, J v>", methods[mi], br);
            free(X0); free(v); free(u); free(g); free(Xp);
            model_free(&m);
        }
    }
}

int main(void) {
    T_NAME("dbl_model");
    T_RUN(test_planted_fault_is_caught);
    T_RUN(test_rc);
    T_RUN(test_every_method);
    T_RUN(test_method_options);
    T_RUN(test_nanogpt_base);
    T_RUN(test_streams_vjp);
    return T_END();
}
