/* test_params.c: every method's closed auxiliary-parameter formula against the parameter
 * table (model_param_table, nothing allocated), the presets, and `s2hc params`.
 * The paper's check: C = 768 with 24 hyper-connected sublayers (preset M), mhc_lite at
 * n = 8 has 5.949e9 auxiliary parameters; the paper's 6.07B is that plus GPT-2 small's
 * 124.4M (the same model with the 50257-token vocabulary).
 * Also the exact CSV row `s2hc params` prints for one method and size, and dist_hash (the
 * hash of the parameters the MPI ranks compare): every single bit of a float changes it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../harness/dist.h"
#include "../harness/model.h"
#include "../harness/presets.h"
#include "t.h"

static size_t table_aux(s2hc_config *c, const char *method, int n, size_t *total) {
    param_info *pt = NULL;
    int np = 0;
    size_t tot = 0, aux = 0;
    char err[256];
    snprintf(c->method, sizeof c->method, "%s", method);
    c->n_streams = n;
    int rc = model_param_table(c, &pt, &np, &tot, &aux, err, sizeof err);
    CHECK(rc == 0, "model_param_table %s n=%d: %s", method, n, err);
    free(pt);
    if (total) *total = tot;
    return aux;
}

static void check_all(s2hc_config *c, const char *what) {
    for (int vi = 0; hc_variants[vi]; vi++)
        for (int n = 2; n <= HC_MAX_N; n++) {
            size_t aux = table_aux(c, hc_variants[vi]->name, n, NULL);
            double f = hc_variants[vi]->aux_params(n, c->n_embd) * 2.0 * c->n_layer;
            CHECK(f == (double)aux, "%s: %s n=%d formula %.0f vs table %zu", what, hc_variants[vi]->name, n, f, aux);
        }
}

static void test_formula_small(void) {
    s2hc_config c;
    config_defaults(&c);
    c.n_layer = 1; c.n_embd = 8; c.n_head = 2;
    check_all(&c, "C=8 L=1");
    CHECK(preset_apply(&c, "tiny") == 0, "tiny");
    check_all(&c, "tiny");
    CHECK(preset_apply(&c, "small") == 0, "small");
    check_all(&c, "small");
}

static void test_formula_M(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(preset_apply(&c, "M") == 0, "M");
    check_all(&c, "M");
    size_t total;
    size_t aux = table_aux(&c, "mhc_lite", 8, &total);
    printf("  mhc_lite n=8 at preset M (C 768, 24 sublayers): %zu auxiliary parameters (%.4gB), model total %zu\n",
           aux, aux / 1e9, total);
    CHECK(aux == 5948900808u, "mhc_lite n=8 exact count %zu", aux);
    /* GPT-2 small by hand: wte 50257 x 768, wpe 1024 x 768, 12 blocks of 12 C^2 + 13 C, ln_f 2 C */
    s2hc_config g = c;
    g.vocab = 50257;
    size_t gpt2;
    table_aux(&g, "rc", 1, &gpt2);
    CHECK(gpt2 == 50257u * 768 + 1024 * 768 + 12 * (12u * 768 * 768 + 13 * 768) + 2 * 768 && gpt2 == 124439808u,
          "GPT-2 small has %zu parameters", gpt2);
    /* nanoGPT's training script (bias = False): 11 C biases a block and ln_f's C gone; less
     * wpe, the 123.55M nanoGPT prints for it (123.65M with biases) */
    g.bias = 0;
    size_t nobias, nobias_aux = table_aux(&g, "s2hc", 4, NULL), with_aux = table_aux(&c, "s2hc", 4, NULL);
    table_aux(&g, "rc", 1, &nobias);
    CHECK(nobias == gpt2 - 12 * 11 * 768 - 768 && nobias - 1024 * 768 == 123551232u,
          "GPT-2 small without biases has %zu parameters", nobias);
    CHECK(nobias_aux == with_aux, "the biases changed the auxiliary count: %zu against %zu", nobias_aux, with_aux);
    CHECK(fabs((double)(aux + gpt2) - 6.07e9) < 0.005e9, "mhc_lite n=8 aux %zu + GPT-2 small %zu is not the paper's 6.07B",
          aux, gpt2);
    /* the per-sublayer formula by hand: gain 8*768 + W (16 + 40320) x 6144 + theta (3 + 16 + 40320) */
    double hand = 8.0 * 768 + (16.0 + 40320) * 6144 + 3 + 16 + 40320;
    CHECK(hand * 24 == (double)aux, "hand formula %.0f", hand * 24);
}

static void test_presets(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(preset_apply(&c, "nonesuch") == -1, "unknown preset accepted");
    CHECK(preset_apply(&c, "M") == 0, "M");
    CHECK(c.n_layer == 12 && c.n_head == 12 && c.n_embd == 768 && c.block_size == 1024, "M model");
    CHECK(c.batch == 8 && c.grad_accum == 16 && c.steps == 10000 && c.warmup == 200, "M train");
    CHECK(c.lr == 6e-4 && fabs(c.min_lr - 6e-5) < 1e-12 && c.weight_decay == 0.1, "M lr");
    CHECK(c.beta1 == 0.9 && c.beta2 == 0.95 && c.clip == 1.0, "M adam");
    CHECK(preset_apply(&c, "L") == 0, "L");
    CHECK(c.n_layer == 24 && c.n_head == 16 && c.n_embd == 1024 && c.grad_accum == 48 && c.lr == 3e-4, "L");
    CHECK(preset_apply(&c, "tiny") == 0 && c.n_layer == 2 && c.n_embd == 64 && c.block_size == 64, "tiny");
    CHECK(preset_apply(&c, "small") == 0 && c.n_layer == 4 && c.n_embd == 128 && c.block_size == 128, "small");
    int k = 0;
    for (; preset_names[k]; k++) CHECK(preset_apply(&c, preset_names[k]) == 0, "%s", preset_names[k]);
    CHECK(k == 4, "preset_names has %d entries", k);
    for (k = 0; preset_names[k]; k++) {   /* every preset is a valid config */
        config_defaults(&c);
        preset_apply(&c, preset_names[k]);
        CHECK(c.n_embd % c.n_head == 0, "%s: heads do not divide C", preset_names[k]);
    }
}

static int run_params(int argc, const char **argv) {
    fflush(stdout);
    FILE *keep = stdout;
    stdout = fopen("/dev/null", "w");
    int rc = params_main(argc, (char **)argv);
    fclose(stdout);
    stdout = keep;
    return rc;
}

static void test_params_command(void) {
    const char *a1[] = {"params"};
    CHECK(run_params(1, a1) == 0, "s2hc params (all methods, n = 2..8, preset M)");
    const char *a2[] = {"params", "--method", "s2hc", "--n", "4", "--preset", "L", "--csv"};
    CHECK(run_params(8, a2) == 0, "s2hc params --method s2hc --n 4 --preset L --csv");
    const char *a3[] = {"params", "--C", "64", "--layers", "3", "--n", "2..5"};
    CHECK(run_params(7, a3) == 0, "custom sizes");
    const char *b1[] = {"params", "--method", "nonesuch"};
    CHECK(run_params(3, b1) == 2, "unknown method");
    const char *b2[] = {"params", "--n", "9"};
    CHECK(run_params(3, b2) == 2, "n out of range");
    const char *b3[] = {"params", "--n", "5..3"};
    CHECK(run_params(3, b3) == 2, "empty range");
    const char *b4[] = {"params", "--preset", "XL"};
    CHECK(run_params(3, b4) == 2, "unknown preset");
    const char *b5[] = {"params", "--bogus"};
    CHECK(run_params(2, b5) == 2, "unknown flag");
    const char *h[] = {"params", "--help"};
    CHECK(run_params(2, h) == 0, "--help");
}

/* `s2hc params --method s2hc --n 4 --C 64 --layers 3 --csv`, its whole output: 3 layers are
 * 6 sublayers of nC + K nC + n_theta = 256 + 17 * 256 + 24 = 4632 (docs/methods.md: s2hc
 * K = 2n + (n-1)^2, n_theta = 7 + 2n + (n-1)^2), and total_params the whole model's count. */
static void test_params_csv_row(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(preset_apply(&c, "M") == 0, "M"); /* the vocabulary and context of the default preset */
    c.n_embd = 64;
    c.n_layer = 3;
    size_t total;
    size_t aux = table_aux(&c, "s2hc", 4, &total);
    const size_t hand = 6 * (4 * 64 + 17 * 4 * 64 + 24);
    CHECK(aux == hand && hand == 27792, "table %zu, by hand %zu", aux, hand);
    char want[256], got[512];
    snprintf(want, sizeof want, "method,n,C,n_layer,sublayers,aux_formula,aux_table,total_params\n"
             "s2hc,4,64,3,6,%zu,%zu,%zu\n", hand, hand, total);
    const char *a[] = {"params", "--method", "s2hc", "--n", "4", "--C", "64", "--layers", "3", "--csv"};
    int rc = t_run_captured(params_main, 10, (char **)a, got, sizeof got);
    CHECK(rc == 0, "exit %d", rc);
    CHECK(!strcmp(got, want), "printed\n%swanted\n%s", got, want);
    CHECK(total > aux + 64 * 64, "total %zu holds the model besides the %zu auxiliary", total, aux);
}

/* dist_hash, the ranks' weight check: FNV-1a over each float's 32 bits. Any one bit of any
 * float (the lowest mantissa bit and the sign included) changes the hash, and so does the
 * count. */
static void test_dist_hash(void) {
    float x[5] = {1.0f, -0.0f, 3.14159f, 1e-30f, -2.5e7f};
    const uint64_t h0 = dist_hash(x, 5);
    uint64_t one = (0xcbf29ce484222325ULL ^ 0x3f800000u) * 0x100000001b3ULL; /* 1.0f's bits */
    CHECK(dist_hash(x, 1) == one, "FNV-1a of 1.0f: %016llx, not %016llx", (unsigned long long)dist_hash(x, 1),
          (unsigned long long)one);
    CHECK(dist_hash(x, 0) == 0xcbf29ce484222325ULL, "no floats: the offset basis");
    CHECK(dist_hash(x, 4) != h0, "the count is hashed");
    CHECK(dist_hash(x, 5) == h0, "the same floats, the same hash");
    int same = 0;
    for (int i = 0; i < 5; i++)
        for (int b = 0; b < 32; b++) {
            uint32_t w, keepw;
            memcpy(&keepw, x + i, 4);
            w = keepw ^ (1u << b);
            memcpy(x + i, &w, 4);
            uint64_t h = dist_hash(x, 5);
            memcpy(x + i, &keepw, 4);
            if (h == h0 && same++ < 8) CHECK(0, "bit %d of float %d does not change the hash", b, i);
        }
    CHECK(same == 0, "%d single-bit changes left the hash as it was", same);
    CHECK(dist_hash(x, 5) == h0, "restored");
}

int main(void) {
    T_NAME("test_params");
    T_RUN(test_formula_small);
    T_RUN(test_formula_M);
    T_RUN(test_presets);
    T_RUN(test_params_command);
    T_RUN(test_params_csv_row);
    T_RUN(test_dist_hash);
    return T_END();
}
