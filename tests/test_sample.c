/* test_sample.c: drawing tokens (sample_pick) against the distribution it promises, and
 * continuations (sample_generate) against a plain re-computation of every step from the
 * whole sequence, through the sliding window. */
#include <omp.h>
#include "../harness/config.h"
#include "../harness/model.h"
#include "../harness/sample.h"
#include "../harness/util.h"
#include "t.h"
#include "t_model.h"

/* The most likely of V logits, the lowest index among equals. */
static int argmax(const real *l, int V) {
    int b = 0;
    for (int i = 1; i < V; i++)
        if (l[i] > l[b]) b = i;
    return b;
}

static void test_pick_greedy(void) {
    rng_t r;
    rng_seed(&r, 5);
    real l[300];
    for (int rep = 0; rep < 50; rep++) {
        const int V = 2 + rep * 5;
        for (int i = 0; i < V; i++) l[i] = (real)rng_normal(&r);
        if (rep % 3 == 0) l[V / 2] = l[V - 1] = (real)10; /* equal maxima: the lower index */
        const int want = argmax(l, V);
        const sample_opts greedy = {0, 0, 0}, one = {1.5, 1, 0};
        CHECK(sample_pick(l, V, &greedy, &r) == want, "temperature 0, V = %d", V);
        CHECK(sample_pick(l, V, &one, &r) == want, "top-k 1, V = %d", V);
    }
    l[3] = (real)NAN;
    const sample_opts o = {1, 0, 0};
    CHECK(sample_pick(l, 8, &o, &r) == -1, "a NaN logit is refused");
    l[3] = (real)INFINITY;
    CHECK(sample_pick(l, 8, &o, &r) == -1, "an infinite logit is refused");
}

/* Frequencies of many draws against softmax(l / temperature) over the top k: each within
 * 5 standard deviations of its probability, and nothing outside the top k ever drawn. */
static void check_freq(const real *l, int V, double temperature, int top_k, const double *p, const char *what) {
    enum { DRAWS = 200000 };
    int cnt[8] = {0};
    rng_t r;
    rng_seed(&r, 17);
    const sample_opts o = {temperature, top_k, 0};
    for (int d = 0; d < DRAWS; d++) {
        const int k = sample_pick(l, V, &o, &r);
        if (k >= 0 && k < V) cnt[k]++;
    }
    for (int i = 0; i < V; i++) {
        const double f = cnt[i] / (double)DRAWS, sd = sqrt(p[i] * (1 - p[i]) / DRAWS);
        if (p[i] == 0) CHECK(cnt[i] == 0, "%s: token %d drawn %d times, outside the top k", what, i, cnt[i]);
        else CHECK(fabs(f - p[i]) <= 5 * sd, "%s: token %d drawn %.5f of the time, wanted %.5f", what, i, f, p[i]);
    }
}

static void test_pick_distribution(void) {
    const real l[4] = {0, (real)log(2.0), (real)log(4.0), (real)log(3.0)};
    const double p1[4] = {1 / 10.0, 2 / 10.0, 4 / 10.0, 3 / 10.0};
    check_freq(l, 4, 1, 0, p1, "temperature 1");
    const double s = 1 + sqrt(2.0) + 2 + sqrt(3.0), p2[4] = {1 / s, sqrt(2.0) / s, 2 / s, sqrt(3.0) / s};
    check_freq(l, 4, 2, 0, p2, "temperature 2");
    const double p3[4] = {0, 0, 4 / 7.0, 3 / 7.0};
    check_freq(l, 4, 1, 2, p3, "top-k 2");
    const double q = 16 + 9 + 4, p4[4] = {0, 4 / q, 16 / q, 9 / q};
    check_freq(l, 4, 0.5, 3, p4, "temperature 0.5, top-k 3");
    check_freq(l, 4, 1, 4, p1, "top-k = V: every token");
    /* ties at the cut: equal logits rank by index, so top-k keeps the lowest indices */
    const real tie[4] = {5, 5, 5, 0};
    const double p5[4] = {0.5, 0.5, 0, 0};
    check_freq(tie, 4, 1, 2, p5, "three equal maxima, top-k 2");
    const real tie2[6] = {0, 3, 1, 3, 3, 3};
    const double p6[6] = {0, 1 / 3.0, 0, 1 / 3.0, 1 / 3.0, 0};
    check_freq(tie2, 6, 1, 3, p6, "four equal maxima, top-k 3");
}

/* A small model with its extra parameters moved off their init, so that its residual
 * matrices mix (an untouched s2hc starts near the identity). */
static int build(gpt_model *m, const char *method, int n) { return t_model(m, method, n, 2, 16, 3, 11, 1.0, 0.3); }

/* The logits after the last token of seq[0..len): the last T tokens at positions 0.., a
 * pad token (not generate's) after them, in both rows of a batch of 2. */
static const real *logits_after(gpt_model *m, const int *seq, int len, int *in) {
    const int T = m->T, ctx = len < T ? len : T;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++) in[b * T + t] = t < ctx ? seq[len - ctx + t] : 77;
    model_forward(m, in, NULL, 2);
    return model_logits(m) + (size_t)(ctx - 1) * m->V;
}

/* Greedy continuations equal the argmax of a fresh forward over the whole sequence at
 * every step, past the window's length (T = 8, 3 + 13 tokens); sampled ones are drawn
 * from the top k of those same logits, repeat with their seed, and do not depend on how
 * many are drawn beside them. */
static void test_generate(void) {
    const char *methods[] = {"rc", "s2hc", "mhc"};
    for (int mi = 0; mi < 3; mi++) {
        gpt_model m;
        if (build(&m, methods[mi], mi ? 4 : 1)) continue;
        const int prompt[3] = {10, 200, 33}, plen = 3, ntok = 13, V = m.V;
        int out[3 * 13], seq[16], in[16];
        const sample_opts greedy = {0, 0, 0};
        CHECK(sample_generate(&m, 2, prompt, plen, ntok, V, &greedy, 1, out, NULL, NULL) == 0, "%s", methods[mi]);
        memcpy(seq, prompt, sizeof prompt);
        int bad = 0, moved = 0;
        for (int i = 0; i < ntok; i++) {
            const real *l = logits_after(&m, seq, plen + i, in);
            const int want = argmax(l, V);
            bad += out[i] != want || out[ntok + i] != want;
            moved += i > 0 && out[i] != out[i - 1];
            seq[plen + i] = want;
        }
        CHECK(!bad, "%s: %d greedy tokens differ from the step's argmax", methods[mi], bad);
        CHECK(moved >= 2, "%s: the greedy continuation barely moves (%d changes): a weak check", methods[mi], moved);

        const sample_opts o = {1.5, 6, 0};
        int a[3 * 13], b[13], c[13];
        CHECK(sample_generate(&m, 3, prompt, plen, ntok, V, &o, 42, a, NULL, NULL) == 0, "%s", methods[mi]);
        CHECK(sample_generate(&m, 1, prompt, plen, ntok, V, &o, 42, b, NULL, NULL) == 0, "%s", methods[mi]);
        CHECK(sample_generate(&m, 1, prompt, plen, ntok, V, &o, 43, c, NULL, NULL) == 0, "%s", methods[mi]);
        CHECK(!memcmp(a, b, sizeof b), "%s: continuation 1 of 3 differs from the same seed's only one", methods[mi]);
        CHECK(memcmp(a, c, sizeof c), "%s: seeds 42 and 43 drew the same 13 tokens", methods[mi]);
        CHECK(memcmp(a, a + ntok, sizeof b) && memcmp(a + ntok, a + 2 * ntok, sizeof b),
              "%s: continuations 1, 2 and 3 share a generator", methods[mi]);
        for (int s = 0; s < 3; s++) {
            memcpy(seq, prompt, sizeof prompt);
            int outside = 0;
            for (int i = 0; i < ntok; i++) {
                const real *l = logits_after(&m, seq, plen + i, in);
                const int tok = a[s * ntok + i];
                int above = 0; /* logits ranked before tok (larger, or equal at a lower index) */
                for (int k = 0; k < V; k++) above += l[k] > l[tok] || (l[k] == l[tok] && k < tok);
                outside += above >= 6;
                seq[plen + i] = tok;
            }
            CHECK(!outside, "%s: continuation %d: %d of 13 tokens outside the step's top 6", methods[mi], s + 1, outside);
        }
        const sample_opts wide = {50, 0, 0};
        int d[13];
        CHECK(sample_generate(&m, 1, prompt, plen, ntok, 16, &wide, 7, d, NULL, NULL) == 0, "%s", methods[mi]);
        int past = 0;
        for (int i = 0; i < ntok; i++) past += d[i] < 0 || d[i] >= 16;
        CHECK(!past, "%s: %d tokens past the first 16 of the vocabulary", methods[mi], past);
        model_free(&m);
    }
}

/* A prompt longer than the window (T = 8): the model reads its LAST T tokens, so greedy
 * tokens equal the argmax after seq's last T at every step; the prompts are chosen so
 * that the first T tokens would give another first token. */
static void test_generate_long_prompt(void) {
    gpt_model m;
    if (build(&m, "s2hc", 4)) return;
    const int T = m.T, V = m.V, ntok = 4;
    int in[16], out[2 * 4], seq[32], differs = 0;
    CHECK(T == 8, "T %d", T);
    for (int rep = 0; rep < 4; rep++) {
        const int plen = 9 + 5 * rep; /* 9, 14, 19, 24 */
        int prompt[24];
        for (int i = 0; i < plen; i++) prompt[i] = (37 * i + 11 * rep + 3) % 256;
        const sample_opts greedy = {0, 0, 0};
        CHECK(sample_generate(&m, 2, prompt, plen, ntok, V, &greedy, 1, out, NULL, NULL) == 0, "plen %d", plen);
        differs += argmax(logits_after(&m, prompt, T, in), V) != argmax(logits_after(&m, prompt, plen, in), V);
        memcpy(seq, prompt, (size_t)plen * sizeof(int));
        int bad = 0;
        for (int i = 0; i < ntok; i++) {
            const int want = argmax(logits_after(&m, seq, plen + i, in), V);
            bad += out[i] != want || out[ntok + i] != want;
            seq[plen + i] = want;
        }
        CHECK(!bad, "prompt of %d tokens: %d of %d greedy steps differ from the argmax after the last %d", plen,
              bad, ntok, T);
    }
    CHECK(differs >= 2, "only %d of 4 prompts tell their first %d tokens from their last: a weak check", differs, T);
    model_free(&m);
}

/* The progress callback sees every step, in order. */
static int steps_seen[32], n_seen;
static void count_steps(int done, void *ctx) {
    (void)ctx;
    if (n_seen < 32) steps_seen[n_seen++] = done;
}

static void test_generate_progress(void) {
    gpt_model m;
    if (build(&m, "s2hc", 2)) return;
    const int prompt[1] = {65};
    int out[2 * 5];
    const sample_opts o = {1, 0, 0};
    n_seen = 0;
    CHECK(sample_generate(&m, 2, prompt, 1, 5, m.V, &o, 1, out, count_steps, NULL) == 0, "generate");
    CHECK(n_seen == 5, "%d calls for 5 steps", n_seen);
    for (int i = 0; i < n_seen; i++) CHECK(steps_seen[i] == i + 1, "call %d said %d", i, steps_seen[i]);
    model_free(&m);
}

/* A model whose logits are NaN (a diverged run's checkpoint): the continuation stops at
 * once and says so. */
static void test_generate_refuses_nan(void) {
    gpt_model m;
    if (build(&m, "s2hc", 4)) return;
    const param_info *lnf = model_find_param(&m, "transformer.ln_f.weight");
    CHECK(lnf != NULL, "no ln_f.weight");
    if (lnf) m.params[lnf->offset] = (real)NAN;
    const int prompt[2] = {1, 2};
    int out[4] = {-7, -7, -7, -7};
    const sample_opts o = {1, 0, 0};
    n_seen = 0;
    CHECK(sample_generate(&m, 2, prompt, 2, 2, m.V, &o, 1, out, count_steps, NULL) == -1, "NaN logits accepted");
    CHECK(n_seen == 0, "progress called %d times for no step", n_seen);
    CHECK(out[0] == -7 && out[1] == -7 && out[2] == -7 && out[3] == -7, "tokens written for a failed step");
    model_free(&m);
}

/* The model's T at each step of a generation (ctx: the model). */
static int t_seen[32], n_t_seen;
static void record_t(int done, void *ctx) {
    (void)done;
    if (n_t_seen < 32) t_seen[n_t_seen++] = ((const gpt_model *)ctx)->T;
}

/* model_decode, token by token against the cache of keys and values, gives every
 * method's logits of a forward over the whole sequence at each position (3 sequences, T =
 * 8, to float rounding); and generation by it draws what generation by whole forwards
 * draws, greedy and sampled, before and after the window slides (3 + 9 tokens). */
static void test_decode(void) {
    const char *methods[] = {"rc", "hc", "mhc", "mhc_lite", "kromhc", "orthogonal", "identity", "s2hc", "s2hc_rot"};
    for (int mi = 0; mi < 9; mi++) {
        gpt_model m;
        if (build(&m, methods[mi], mi ? 4 : 1)) continue;
        const int T = m.T, V = m.V, B = 3;
        int in[3 * 8], tok[3];
        for (int i = 0; i < B * T; i++) in[i] = (29 * i + 7 * mi + 5) % 256;
        model_forward(&m, in, NULL, B);
        real *full = malloc((size_t)B * T * V * sizeof(real));
        memcpy(full, model_logits(&m), (size_t)B * T * V * sizeof(real));
        model_kv kv;
        const size_t whole = m.n_acts; /* B windows' activations */
        model_kv_alloc(&kv, &m, B);
        CHECK(m.n_acts * (size_t)T <= whole, "%s: decoding holds %zu activations, B windows %zu", methods[mi], m.n_acts,
              whole);
        double worst = 0, scale = 0;
        for (int t = 0; t < T; t++) {
            for (int b = 0; b < B; b++) tok[b] = in[b * T + t];
            const real *l = model_decode(&m, &kv, tok, t);
            for (int b = 0; b < B; b++)
                for (int v = 0; v < V; v++) {
                    const double want = full[((size_t)b * T + t) * V + v], d = fabs(l[(size_t)b * V + v] - want);
                    if (d > worst) worst = d;
                    if (fabs(want) > scale) scale = fabs(want);
                }
        }
        CHECK(scale > 0.1 && worst <= 1e-4 * scale, "%s: decoded logits differ from the forward's by %.3g (largest %.3g)",
              methods[mi], worst, scale);
        model_kv_free(&kv, &m);
        CHECK(m.T == T, "%s: T %d after the cache, not %d", methods[mi], m.T, T);
        free(full);
        const int prompt[3] = {10, 200, 33}, ntok = 9;
        int a[2 * 9], b[2 * 9];
        const sample_opts opts[2] = {{0, 0, 0}, {1.5, 6, 0}};
        for (int k = 0; k < 2; k++) {
            sample_opts whole = opts[k];
            whole.full_forward = 1;
            n_t_seen = 0;
            CHECK(sample_generate(&m, 2, prompt, 3, ntok, V, &opts[k], 5, a, record_t, &m) == 0, "%s", methods[mi]);
            /* one token's activations while the drawn token still fits the window (3 + i <=
               T after step i: it is decoded at its position), whole windows once it slides */
            int wrong_t = n_t_seen != ntok;
            for (int i = 1; i <= n_t_seen; i++) wrong_t += t_seen[i - 1] != (3 + i <= T ? 1 : T);
            CHECK(!wrong_t, "%s: the cached generation's T differs at %d of %d steps", methods[mi], wrong_t, ntok);
            n_t_seen = 0;
            CHECK(sample_generate(&m, 2, prompt, 3, ntok, V, &whole, 5, b, record_t, &m) == 0, "%s", methods[mi]);
            wrong_t = n_t_seen != ntok;
            for (int i = 0; i < n_t_seen; i++) wrong_t += t_seen[i] != T;
            CHECK(!wrong_t, "%s: full_forward's generation holds no whole windows at %d of %d steps", methods[mi],
                  wrong_t, ntok);
            CHECK(!memcmp(a, b, sizeof a), "%s, temperature %g: the cached steps drew other tokens than whole forwards",
                  methods[mi], opts[k].temperature);
        }
        /* one sequence decodes on one thread, then gives the caller its threads back,
           whether the window slid (ntok tokens) or not (2) */
        const int threads = omp_get_max_threads();
        threads_set(2);
        sample_opts whole1 = opts[1];
        whole1.full_forward = 1;
        for (int nt = 2; nt <= ntok; nt += ntok - 2) {
            CHECK(sample_generate(&m, 1, prompt, 3, nt, V, &opts[1], 9, a, NULL, NULL) == 0, "%s", methods[mi]);
            CHECK(omp_get_max_threads() == 2, "%s, %d tokens: %d threads after one sequence's decoding, not 2",
                  methods[mi], nt, omp_get_max_threads());
            CHECK(sample_generate(&m, 1, prompt, 3, nt, V, &whole1, 9, b, NULL, NULL) == 0, "%s", methods[mi]);
            CHECK(!memcmp(a, b, (size_t)nt * sizeof *a), "%s, %d tokens: one sequence's cached steps drew other "
                  "tokens than whole forwards on 2 threads", methods[mi], nt);
        }
        threads_set(threads);
        model_free(&m);
    }
}

int main(void) {
    T_NAME("test_sample");
    T_RUN(test_pick_greedy);
    T_RUN(test_pick_distribution);
    T_RUN(test_generate);
    T_RUN(test_generate_long_prompt);
    T_RUN(test_generate_progress);
    T_RUN(test_generate_refuses_nan);
    T_RUN(test_decode);
    return T_END();
}
