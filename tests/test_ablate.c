/* test_ablate.c: a sublayer's H_res replaced by a fixed matrix (model.h's hres_fixed,
 * `s2hc ablate`): the streams it writes against the write-back recomputed here from its
 * inputs, nothing before it moved; and ablate_measure's losses, averages, differences and
 * intervals against the same measured again here, loop by loop; the forward resumed at
 * a sublayer (model_forward_resume) against the whole forward. */
#include <signal.h>
#include <stdio.h>
#include "../harness/ablate.h"
#include "../harness/config.h"
#include "../harness/model.h"
#include "../harness/run.h"
#include "../harness/util.h"
#include "t.h"
#include "t_model.h"

/* A model of config c (a 2-layer one: 4 sublayers) with its parameters moved off their
 * init, so that every H_res mixes and differs from token to token; ablate_model: of
 * `method` at n streams, 2 layers of width 16. */
static int ablate_model_of(gpt_model *m, const s2hc_config *c) { return t_model_config(m, c, 21, 4, 1.0, 0.2); }
static int ablate_model(gpt_model *m, const char *method, int n) { return t_model(m, method, n, 2, 16, 21, 4, 1.0, 0.2); }

/* Replacing sublayer l's H_res by M: the streams up to X_l are the unablated forward's bit
 * for bit, the sublayer's H_res is M for every token, and X_{l+1} is M X_l + post f from
 * that forward's own X_l, post and f, recomputed here in double. */
static void test_fixed_writeback(void) {
    const char *methods[] = {"mhc", "s2hc", "hc", "kromhc", "mhc_lite", "orthogonal"};
    for (int mi = 0; mi < 6; mi++) {
        gpt_model m;
        if (ablate_model(&m, methods[mi], 4)) continue;
        const int B = 2, T = m.T, n = m.n, C = m.C, Lh = m.Lh;
        const size_t N = (size_t)B * T, nC = (size_t)n * C, nn = (size_t)n * n;
        int in[16], tg[16];
        rng_t r;
        rng_seed(&r, 9);
        for (size_t i = 0; i < N; i++) in[i] = (int)(rng_uniform(&r) * 256), tg[i] = (int)(rng_uniform(&r) * 256);
        model_alloc_acts(&m, B);
        const double base = model_forward(&m, in, tg, B);
        real *X0 = malloc_check((size_t)(Lh + 1) * N * nC * sizeof(real));
        for (int k = 0; k <= Lh; k++) memcpy(X0 + k * N * nC, model_streams(&m, k), N * nC * sizeof(real));
        real *fixed = calloc_check((size_t)Lh * nn, sizeof(real));
        unsigned char on[8] = {0};
        for (int l = 0; l < Lh; l++) {
            real *M = fixed + (size_t)l * nn;
            for (size_t k = 0; k < nn; k++) M[k] = (real)(rng_uniform(&r) - 0.3);
            memset(on, 0, sizeof on);
            on[l] = 1;
            m.hres_fixed = fixed, m.hres_fixed_on = on;
            const double loss = model_forward(&m, in, tg, B);
            m.hres_fixed = NULL, m.hres_fixed_on = NULL;
            CHECK(loss != base, "%s, sublayer %d: the loss did not move (%.9g)", methods[mi], l, loss);
            int same = 1;
            for (int k = 0; k <= l; k++)
                same &= !memcmp(X0 + k * N * nC, model_streams(&m, k), N * nC * sizeof(real));
            CHECK(same, "%s, sublayer %d: streams before its write-back moved", methods[mi], l);
            hc_acts h = model_hc_acts(&m, l);
            int hbad = 0;
            for (size_t t = 0; t < N; t++) hbad += memcmp(h.H + t * nn, M, nn * sizeof(real)) != 0;
            CHECK(!hbad, "%s, sublayer %d: %d tokens' H_res are not the fixed matrix", methods[mi], l, hbad);
            const real *X = model_streams(&m, l), *Y = model_streams(&m, l + 1);
            double worst = 0, moved = 0;
            for (size_t t = 0; t < N; t++)
                for (int i = 0; i < n; i++)
                    for (int c = 0; c < C; c++) {
                        double want = (double)h.post[t * n + i] * h.f[t * C + c];
                        for (int j = 0; j < n; j++) want += (double)M[i * n + j] * X[t * nC + (size_t)j * C + c];
                        const size_t k = t * nC + (size_t)i * C + c;
                        const double e = fabs(Y[k] - want) / (1 + fabs(want));
                        if (e > worst) worst = e;
                        moved += fabs(Y[k] - X0[(l + 1) * N * nC + k]);
                    }
            CHECK(worst < 1e-5, "%s, sublayer %d: X_{l+1} is off M X_l + post f by %.3g", methods[mi], l, worst);
            CHECK(moved > 1e-3, "%s, sublayer %d: X_{l+1} is the unablated one: a weak check", methods[mi], l);
        }
        free(fixed);
        free(X0);
        model_free(&m);
    }
}

/* A shard of `count` tokens in memory (bytes), for eval_shard_batch's windows. */
static data_shard memory_shard(uint8_t *tokens, uint64_t count, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    for (uint64_t i = 0; i < count; i++) tokens[i] = (uint8_t)(97 + rng_uniform(&r) * 26);
    data_shard s;
    memset(&s, 0, sizeof s);
    s.vocab = 256, s.bytes_per_token = 1, s.count = count, s.tokens = tokens;
    return s;
}

/* ablate_measure against the same quantities measured here: the unablated loss is
 * eval_shard_loss's, each sublayer's mean H_res the tokens' average, every (kind,
 * sublayer) loss that of a forward with the expected matrices set by hand, Δ the mean of
 * the batches' differences, its interval Student's t at 3 degrees of freedom (3.182446). */
static void test_measure(void) {
    gpt_model m;
    if (ablate_model(&m, "mhc", 4)) return;
    uint8_t tok[2000];
    const data_shard s = memory_shard(tok, sizeof tok, 3);
    const int B = 2, batches = 4, T = m.T, n = m.n, Lh = m.Lh, cols = Lh + 1;
    const size_t N = (size_t)B * T, nn = (size_t)n * n;
    /* branch between the others: its resumes zero a sublayer's f, which the next kind's
       resume at that sublayer must find as it was */
    const int kinds[4] = {ABLATE_UNIFORM, ABLATE_BRANCH, ABLATE_IDENTITY, ABLATE_MEAN};
    ablate_result r;
    CHECK(ablate_measure(&m, &s, NULL, kinds, 4, batches, B, &r, NULL) == 0, "measured");
    CHECK(!m.hres_fixed && !m.hres_fixed_on && !m.branch_off, "the model's H_res and branches left as they were");
    CHECK(r.base == eval_shard_loss(&m, &s, batches, B, 0), "the unablated loss is eval's: %.9g", r.base);
    int in[16], tg[16];
    double base_b[4], mean[4 * 16] = {0};
    for (int b = 0; b < batches; b++) {
        eval_shard_batch(&s, b, batches, B, T, in, tg);
        base_b[b] = model_forward(&m, in, tg, B);
        for (int l = 0; l < Lh; l++)
            for (size_t t = 0; t < N; t++)
                for (size_t k = 0; k < nn; k++) mean[l * nn + k] += model_hc_acts(&m, l).H[t * nn + k] / (double)(batches * N);
    }
    double spread = 0;
    for (size_t k = 0; k < (size_t)Lh * nn; k++) {
        CHECK_CLOSE(r.Hmean[k], mean[k], 1e-12, 1e-9, "mean H_res, entry %zu", k);
        spread += fabs(mean[k] - (k % nn % (n + 1) == 0));
    }
    CHECK(spread > 0.1, "the mean H_res is the identity (%.3g): a weak check", spread);
    real fixed[4 * 16];
    unsigned char on[4];
    double largest = 0;
    for (int q = 0; q < 4; q++) {
        for (int l = 0; l < Lh; l++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    fixed[(l * n + i) * n + j] = kinds[q] == ABLATE_IDENTITY ? (real)(i == j)
                                                 : kinds[q] == ABLATE_UNIFORM ? (real)(1.0 / n)
                                                                              : (real)r.Hmean[(l * n + i) * n + j];
        for (int c = 0; c < cols; c++) {
            for (int l = 0; l < Lh; l++) on[l] = c == Lh || c == l;
            if (kinds[q] == ABLATE_BRANCH) m.branch_off = on;
            else m.hres_fixed = fixed, m.hres_fixed_on = on;
            double d[4], ls = 0, dm = 0, ss = 0;
            for (int b = 0; b < batches; b++) {
                eval_shard_batch(&s, b, batches, B, T, in, tg);
                const double lb = model_forward(&m, in, tg, B);
                ls += lb;
                dm += d[b] = lb - base_b[b];
            }
            ls /= batches, dm /= batches; /* in ablate_measure's order: the same bits */
            m.hres_fixed = NULL, m.hres_fixed_on = NULL, m.branch_off = NULL;
            for (int b = 0; b < batches; b++) ss += (d[b] - dm) * (d[b] - dm);
            const double ci = 3.182446305284263 * sqrt(ss / 3) / 2;
            const int k = q * cols + c;
            CHECK(r.loss[k] == ls, "%s, column %d: the loss %.17g, whole forwards %.17g", ablate_kind_names[kinds[q]],
                  c, r.loss[k], ls);
            CHECK(r.delta[k] == dm, "%s, column %d: delta %.17g, whole forwards %.17g", ablate_kind_names[kinds[q]], c,
                  r.delta[k], dm);
            CHECK_CLOSE(r.ci[k], ci, 1e-12, 1e-6, "%s, column %d: the interval", ablate_kind_names[kinds[q]], c);
            if (fabs(dm) > largest) largest = fabs(dm);
        }
    }
    CHECK(largest > 1e-3, "no ablation moved the loss by more than %.3g: a weak check", largest);
    ablate_result_free(&r);
    /* one batch: no interval */
    CHECK(ablate_measure(&m, &s, NULL, kinds, 1, 1, B, &r, NULL) == 0 && isnan(r.ci[0]) && !isnan(r.delta[0]),
          "one batch: an interval of NaN, a difference");
    ablate_result_free(&r);
    model_free(&m);
    /* rc: branch, against whole forwards with its sublayers left out; its H_res is 1 */
    if (ablate_model(&m, "rc", 1)) return;
    const int br = ABLATE_BRANCH, rLh = m.Lh;
    CHECK(ablate_measure(&m, &s, NULL, &br, 1, batches, B, &r, NULL) == 0 && !m.branch_off, "rc measured");
    for (int k = 0; k < rLh; k++) CHECK(r.Hmean[k] == 1, "rc: H_mean[%d] = %g, not 1", k, r.Hmean[k]);
    for (int c = 0; c <= rLh; c++) {
        for (int l = 0; l < rLh; l++) on[l] = c == rLh || c == l;
        double ls = 0;
        for (int b = 0; b < batches; b++) {
            eval_shard_batch(&s, b, batches, B, T, in, tg);
            m.branch_off = NULL;
            const double base = model_forward(&m, in, tg, B);
            m.branch_off = on;
            const double lb = model_forward(&m, in, tg, B);
            ls += lb;
            CHECK(lb != base, "rc, column %d, batch %d: leaving the sublayer out moved nothing", c, b);
        }
        m.branch_off = NULL;
        ls /= batches;
        CHECK(r.loss[c] == ls, "rc, column %d: the loss %.17g, whole forwards %.17g", c, r.loss[c], ls);
    }
    ablate_result_free(&r);
    model_free(&m);
}

/* The mean from held-out batches (ablate --mean-from train): H_mean the average over the
 * other shard's batches, computed here; the unablated loss and every other kind the
 * in-sample measurement's, bit for bit; the mean's losses those of whole forwards with
 * the held-out H_mean, and not the in-sample ones. */
static void test_mean_held_out(void) {
    gpt_model m;
    if (ablate_model(&m, "s2hc", 4)) return;
    uint8_t tok[2000], other[1500];
    const data_shard s = memory_shard(tok, sizeof tok, 3), h = memory_shard(other, sizeof other, 11);
    const int B = 2, batches = 3, T = m.T, n = m.n, Lh = m.Lh, cols = Lh + 1;
    const size_t N = (size_t)B * T, nn = (size_t)n * n;
    const int kinds[3] = {ABLATE_MEAN, ABLATE_IDENTITY, ABLATE_BRANCH};
    ablate_result in_s, held;
    CHECK(ablate_measure(&m, &s, NULL, kinds, 3, batches, B, &in_s, NULL) == 0, "measured in sample");
    CHECK(ablate_measure(&m, &s, &h, kinds, 3, batches, B, &held, NULL) == 0, "measured held out");
    int in[16], tg[16];
    double mean[4 * 16] = {0}, moved = 0;
    for (int b = 0; b < batches; b++) {
        eval_shard_batch(&h, b, batches, B, T, in, tg);
        model_forward(&m, in, tg, B);
        for (int l = 0; l < Lh; l++)
            for (size_t t = 0; t < N; t++)
                for (size_t k = 0; k < nn; k++) mean[l * nn + k] += model_hc_acts(&m, l).H[t * nn + k] / (double)(batches * N);
    }
    for (size_t k = 0; k < (size_t)Lh * nn; k++) {
        CHECK_CLOSE(held.Hmean[k], mean[k], 1e-12, 1e-9, "held-out mean H_res, entry %zu", k);
        moved += fabs(held.Hmean[k] - in_s.Hmean[k]);
    }
    CHECK(moved > 1e-6, "the held-out mean is the in-sample one (%.3g): a weak check", moved);
    CHECK(held.base == in_s.base, "the unablated loss %.17g, in sample %.17g", held.base, in_s.base);
    for (int k = cols; k < 3 * cols; k++)
        CHECK(held.loss[k] == in_s.loss[k] && held.delta[k] == in_s.delta[k] && held.ci[k] == in_s.ci[k],
              "%s, column %d: not the in-sample measurement", ablate_kind_names[kinds[k / cols]], k % cols);
    real fixed[4 * 16];
    for (size_t k = 0; k < (size_t)Lh * nn; k++) fixed[k] = (real)held.Hmean[k];
    unsigned char on[4];
    for (int c = 0; c < cols; c++) {
        for (int l = 0; l < Lh; l++) on[l] = c == Lh || c == l;
        double ls = 0;
        for (int b = 0; b < batches; b++) {
            eval_shard_batch(&s, b, batches, B, T, in, tg);
            m.hres_fixed = fixed, m.hres_fixed_on = on;
            ls += model_forward(&m, in, tg, B);
            m.hres_fixed = NULL, m.hres_fixed_on = NULL;
        }
        ls /= batches;
        CHECK(held.loss[c] == ls, "mean, column %d: the loss %.17g, whole forwards %.17g", c, held.loss[c], ls);
        /* the first sublayer reads n copies of one vector and the last one's streams are
           summed: s2hc's rows and columns sum to 1, so any mean there leaves the loss within
           rounding (equal or not by the build's rounding) */
        if (c != 0 && c != Lh - 1) CHECK(held.loss[c] != in_s.loss[c], "mean, column %d: the in-sample loss", c);
    }
    ablate_result_free(&in_s);
    ablate_result_free(&held);
    /* without the mean among the kinds the other shard is not read: the in-sample numbers */
    CHECK(ablate_measure(&m, &s, &h, kinds + 1, 2, batches, B, &held, NULL) == 0 && held.base == eval_shard_loss(&m, &s, batches, B, 0),
          "no mean: the held-out shard ignored");
    ablate_result_free(&held);
    model_free(&m);
}

/* What the methods guarantee, seen through the ablations. `identity`'s H_res is I: H_res
 * := I changes no bit, 11^T/n does. The first sublayer reads n copies of the embedding, so
 * a replacement whose rows sum to 1 (I, 11^T/n) leaves its write-back as it was when the
 * method's rows sum to 1, and the last one's streams are summed, so one whose columns sum
 * to 1 leaves their sum when the method's columns do: both within rounding of the
 * unablated loss for the methods whose H_res keep both sums (mhc_lite, kromhc, s2hc,
 * s2hc_rot), one of them for mhc (Sinkhorn's last half-step makes one sum exact: columns
 * with row_col, the last sublayer; rows with col_row, the first), while the sublayers
 * between move it. docs/probes.md's "Ablations" says which. */
static void test_method_invariants(void) {
    uint8_t tok[2000];
    const data_shard s = memory_shard(tok, sizeof tok, 5);
    const int kinds[2] = {ABLATE_IDENTITY, ABLATE_UNIFORM};
    gpt_model m;
    ablate_result r;
    if (ablate_model(&m, "identity", 4) == 0) {
        CHECK(ablate_measure(&m, &s, NULL, kinds, 2, 3, 2, &r, NULL) == 0, "identity measured");
        const int cols = r.Lh + 1;
        for (int c = 0; c < cols; c++) {
            CHECK(r.delta[c] == 0 && r.loss[c] == r.base, "identity, column %d: H_res := I moved the loss by %.3g", c,
                  r.delta[c]);
            if (c > 0 && c < r.Lh - 1) CHECK(fabs(r.delta[cols + c]) > 1e-4, "identity, sublayer %d: 11^T/n moved "
                                         "the loss by only %.3g", c, r.delta[cols + c]);
        }
        ablate_result_free(&r);
        model_free(&m);
    }
    /* first, last: whether that end's row is zero (rows sum to 1, columns sum to 1) */
    static const struct { const char *method, *order; int n, first, last; } cases[] = {
        {"mhc_lite", NULL, 4, 1, 1},   {"mhc_lite", NULL, 5, 1, 1}, {"kromhc", NULL, 4, 1, 1},
        {"kromhc", NULL, 6, 1, 1},     {"s2hc", NULL, 4, 1, 1},     {"s2hc", NULL, 3, 1, 1},
        {"s2hc_rot", NULL, 4, 1, 1},   {"mhc", "row_col", 4, 0, 1}, {"mhc", "col_row", 4, 1, 0},
        {"hc", NULL, 4, 0, 0},         {"orthogonal", NULL, 4, 0, 0},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const char *meth = cases[ci].method;
        s2hc_config c;
        config_defaults(&c);
        c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.block_size = 8;
        snprintf(c.method, sizeof c.method, "%s", meth);
        if (cases[ci].order) snprintf(c.sinkhorn_order, sizeof c.sinkhorn_order, "%s", cases[ci].order);
        c.n_streams = cases[ci].n;
        if (ablate_model_of(&m, &c) != 0) continue;
        CHECK(ablate_measure(&m, &s, NULL, kinds, 2, 3, 2, &r, NULL) == 0, "%s measured", meth);
        const int cols = r.Lh + 1;
        const char *o = cases[ci].order ? cases[ci].order : "";
        for (int q = 0; q < 2; q++) {
            const double *d = r.delta + q * cols;
            const char *k = ablate_kind_names[kinds[q]];
            if (cases[ci].first) CHECK(fabs(d[0]) < 1e-5, "%s %s n = %d, %s: the first sublayer moved the loss by %.3g",
                                       meth, o, cases[ci].n, k, d[0]);
            else CHECK(fabs(d[0]) > 1e-4, "%s %s n = %d, %s: the first sublayer moved the loss by only %.3g: its rows "
                       "sum to 1?", meth, o, cases[ci].n, k, d[0]);
            if (cases[ci].last) CHECK(fabs(d[r.Lh - 1]) < 1e-5, "%s %s n = %d, %s: the last sublayer moved the loss "
                                      "by %.3g", meth, o, cases[ci].n, k, d[r.Lh - 1]);
            else CHECK(fabs(d[r.Lh - 1]) > 1e-4, "%s %s n = %d, %s: the last sublayer moved the loss by only %.3g: its "
                       "columns sum to 1?", meth, o, cases[ci].n, k, d[r.Lh - 1]);
            CHECK(fabs(d[1]) > 5e-4 || fabs(d[2]) > 5e-4, "%s n = %d, %s: the middle sublayers moved it by only "
                  "%.3g and %.3g: a weak check", meth, cases[ci].n, k, d[1], d[2]);
        }
        ablate_result_free(&r);
        model_free(&m);
    }
}

/* model_forward_resume (what ablate_measure runs) against whole forwards: after the
 * unablated forward, each sublayer from the last to the first, then all at once, resumed
 * with a random fixed H_res, or with the sublayer's output left out (branch_off), gives
 * the loss and the logits of a model_forward with the same hooks, bit for bit; sublayer by
 * sublayer in that order each resume finds the unablated activations before it. Every
 * method at n = 4, s2hc at n = 3, hc (its per-stream norm) at n = 3, kromhc at a prime n
 * (5), a model without biases and with the exact GELU, rc (branch alone), with the
 * streams' bf16 rounding and (where built) the bf16 projection. Then a resume at a
 * sublayer whose hres_fixed_on is 0: its H_res kept, a later one's fixed. */
static void test_resume(void) {
    static const struct { const char *method; int n, round, bf16, plain; } cases[] = {
        {"mhc", 4, 0, 0, 0},        {"s2hc", 4, 0, 0, 0}, {"s2hc", 3, 0, 0, 0},     {"mhc_lite", 4, 0, 0, 0},
        {"kromhc", 4, 0, 0, 0},     {"hc", 4, 0, 0, 0},   {"orthogonal", 4, 0, 0, 0}, {"s2hc_rot", 4, 0, 0, 0},
        {"identity", 4, 0, 0, 0},   {"s2hc", 4, 1, 0, 0}, {"mhc_lite", 4, 0, 1, 0}, {"s2hc", 4, 0, 1, 0},
        {"hc", 3, 0, 0, 0},         {"kromhc", 5, 0, 0, 0}, {"mhc", 2, 0, 0, 1},    {"rc", 1, 0, 0, 0},
    };
    int compared = 0, kept = 0;
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        if (cases[ci].bf16 && !model_bf16_built()) continue;
        gpt_model m;
        s2hc_config cfg;
        config_defaults(&cfg);
        cfg.n_layer = 2, cfg.n_head = 2, cfg.n_embd = 16, cfg.block_size = 8; /* ablate_model's */
        snprintf(cfg.method, sizeof cfg.method, "%s", cases[ci].method);
        cfg.n_streams = cases[ci].n;
        if (cases[ci].plain) cfg.bias = 0, snprintf(cfg.gelu, sizeof cfg.gelu, "erf"); /* nanoGPT's */
        if (ablate_model_of(&m, &cfg)) continue;
        m.round_streams = cases[ci].round, m.proj_bf16 = cases[ci].bf16;
        const int B = 2, T = m.T, n = m.n, Lh = m.Lh, V = m.V;
        const size_t N = (size_t)B * T, nn = (size_t)n * n, NV = N * V;
        int in[16], tg[16];
        rng_t r;
        rng_seed(&r, 40 + ci);
        for (size_t t = 0; t < N; t++) in[t] = (int)(rng_u64(&r) % V), tg[t] = (int)(rng_u64(&r) % V);
        tg[3] = -1; /* a target left out */
        real *fixed = malloc_check((size_t)Lh * nn * sizeof *fixed), *want = malloc_check(NV * sizeof *want);
        for (size_t k = 0; k < (size_t)Lh * nn; k++) fixed[k] = (real)(rng_uniform(&r) * 2 - 1);
        const double unablated = model_forward(&m, in, tg, B);
        for (int branch = !m.variant; branch < 2; branch++) {
            const char *what = branch ? "f := 0" : "H_res fixed";
            unsigned char on[8];
            double prev = NAN;
            for (int c = Lh - 1; c >= -1; c--) {
                const int l = c < 0 ? 0 : c;
                for (int k = 0; k < Lh; k++) on[k] = c < 0 || k == c;
                /* the whole forward, into want; then the unablated one again and the resumes
                   before this one, in the order ablate_measure takes them */
                if (branch) m.branch_off = on;
                else m.hres_fixed = fixed, m.hres_fixed_on = on;
                const double whole = model_forward(&m, in, tg, B);
                memcpy(want, model_logits(&m), NV * sizeof *want);
                m.hres_fixed = NULL, m.hres_fixed_on = NULL, m.branch_off = NULL;
                const double again = model_forward(&m, in, tg, B);
                CHECK(again == unablated, "%s: the unablated forward is not repeatable", cases[ci].method);
                for (int k = Lh - 1; k > l; k--) {
                    unsigned char one[8] = {0};
                    one[k] = 1;
                    if (branch) m.branch_off = one;
                    else m.hres_fixed = fixed, m.hres_fixed_on = one;
                    model_forward_resume(&m, k, tg);
                }
                if (branch) m.hres_fixed = NULL, m.hres_fixed_on = NULL, m.branch_off = on;
                else m.hres_fixed = fixed, m.hres_fixed_on = on, m.branch_off = NULL;
                const double got = model_forward_resume(&m, l, tg);
                m.hres_fixed = NULL, m.hres_fixed_on = NULL, m.branch_off = NULL;
                CHECK(got == whole, "%s n = %d%s%s, %s, %s %d: resumed %.9g, whole forward %.9g", cases[ci].method, n,
                      cases[ci].round ? " round" : "", cases[ci].bf16 ? " bf16" : "", what,
                      c < 0 ? "all from" : "sublayer", l, got, whole);
                CHECK(memcmp(model_logits(&m), want, NV * sizeof *want) == 0, "%s, %s, %s %d: the logits differ",
                      cases[ci].method, what, c < 0 ? "all from" : "sublayer", l);
                CHECK(got != unablated && got != prev, "%s, %s, column %d: the ablation moved nothing (%.9g): a weak "
                      "check", cases[ci].method, what, c, got);
                prev = got;
                compared++;
            }
        }
        /* sublayer Lh - 2 resumed with only the last one's matrix fixed: its own H_res the
           unablated forward's, as a whole forward with the same hres_fixed_on leaves it */
        if (m.variant) {
            unsigned char on[8] = {0};
            on[Lh - 1] = 1;
            m.hres_fixed = fixed, m.hres_fixed_on = on;
            const double whole = model_forward(&m, in, tg, B);
            memcpy(want, model_logits(&m), NV * sizeof *want);
            m.hres_fixed = NULL;
            model_forward(&m, in, tg, B);
            m.hres_fixed = fixed;
            const double got = model_forward_resume(&m, Lh - 2, tg);
            m.hres_fixed = NULL, m.hres_fixed_on = NULL;
            CHECK(got == whole && !memcmp(model_logits(&m), want, NV * sizeof *want),
                  "%s: resumed at sublayer %d (not fixed) %.9g, whole forward %.9g: its H_res replaced?",
                  cases[ci].method, Lh - 2, got, whole);
            kept++;
        }
        free(want);
        free(fixed);
        model_free(&m);
    }
    CHECK(compared >= 13 * 5 * 2 + 5 && kept >= 13, "only %d resumes compared, %d with a sublayer not fixed", compared,
          kept);
}

/* ablate_measure's progress ends at ablate_cost, which is per batch the unablated forward
 * (Lh + 1 with the head; twice with the mean) and per replacement the resumes from every
 * sublayer l (Lh - l each) and from 0 for all (Lh): at Lh = 4, 5 + 14 a replacement. */
static void test_progress(void) {
    gpt_model m;
    if (ablate_model(&m, "s2hc", 3)) return;
    uint8_t tok[2000];
    const data_shard s = memory_shard(tok, sizeof tok, 7);
    static const struct { int kinds[3], n_kinds; long cost; } cases[] = {
        {{ABLATE_UNIFORM}, 1, 3 * (5 + 14)},
        {{ABLATE_IDENTITY, ABLATE_MEAN}, 2, 3 * (2 * 5 + 2 * 14)},
        {{ABLATE_MEAN, ABLATE_IDENTITY, ABLATE_UNIFORM}, 3, 3 * (2 * 5 + 3 * 14)},
    };
    FILE *sink = fopen("/dev/null", "w");
    CHECK(m.Lh == 4 && sink, "a model of 4 sublayers (%d), /dev/null open", m.Lh);
    for (size_t ci = 0; sink && ci < sizeof cases / sizeof cases[0]; ci++) {
        const long cost = ablate_cost(m.Lh, cases[ci].kinds, cases[ci].n_kinds, 3);
        CHECK(cost == cases[ci].cost, "case %zu: ablate_cost %ld, %ld wanted", ci, cost, cases[ci].cost);
        progress pr;
        progress_begin(&pr, "ablate", "sublayers", cost, 1);
        progress_to(&pr, sink);
        ablate_result r;
        CHECK(ablate_measure(&m, &s, NULL, cases[ci].kinds, cases[ci].n_kinds, 3, 2, &r, &pr) == 0, "case %zu measured", ci);
        CHECK(pr.done == cost, "case %zu: the progress ends at %ld of %ld", ci, pr.done, cost);
        ablate_result_free(&r);
    }
    if (sink) fclose(sink);
    model_free(&m);
}

/* A stream whose first write is a Ctrl-C (stop_signal set): the progress' first line. */
static ssize_t stop_on_write(void *c, const char *buf, size_t len) {
    (void)c, (void)buf;
    if (!stop_signal) stop_signal = SIGINT;
    return (ssize_t)len;
}

/* A Ctrl-C while ablate_measure runs (here at its first progress line, after the first
 * batch's unablated forward, with and without the mean's first pass): it stops there, -1,
 * the result freed (nothing to record), the model's H_res left to its method. */
static void test_stopped(void) {
    gpt_model m;
    if (ablate_model(&m, "mhc", 4)) return;
    uint8_t tok[2000];
    const data_shard s = memory_shard(tok, sizeof tok, 9);
    const int kinds[2] = {ABLATE_IDENTITY, ABLATE_MEAN};
    for (int nk = 1; nk <= 2; nk++) {
        const long cost = ablate_cost(m.Lh, kinds, nk, 3);
        FILE *f = fopencookie(NULL, "w", (cookie_io_functions_t){.write = stop_on_write});
        setvbuf(f, NULL, _IONBF, 0);
        progress pr;
        progress_begin(&pr, "ablate", "sublayers", cost, 1);
        progress_to(&pr, f);
        pr.last = -1e18; /* the first update shows a line */
        ablate_result r;
        const int st = ablate_measure(&m, &s, NULL, kinds, nk, 3, 2, &r, &pr);
        CHECK(stop_signal == SIGINT, "%d kinds: the progress showed no line", nk);
        stop_signal = 0;
        fclose(f);
        CHECK(st == -1 && !r.loss && !r.Hmean, "%d kinds: a stopped measure returned %d, its result %s", nk, st,
              r.loss ? "kept" : "freed");
        CHECK(pr.done == m.Lh + 1, "%d kinds: went on to %ld of %ld after the signal", nk, pr.done, cost);
        CHECK(!m.hres_fixed && !m.hres_fixed_on, "%d kinds: the model's H_res left fixed", nk);
    }
    model_free(&m);
}

int main(void) {
    T_NAME("test_ablate");
    T_RUN(test_resume);
    T_RUN(test_fixed_writeback);
    T_RUN(test_measure);
    T_RUN(test_mean_held_out);
    T_RUN(test_method_invariants);
    T_RUN(test_progress);
    T_RUN(test_stopped);
    return T_END();
}
