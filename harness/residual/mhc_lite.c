/* mhc_lite: mHC-lite (arXiv 2601.05732). H_res = sum over all n! permutation matrices of
 * softmax(alpha_res z_res + b_res)_k P_k: exactly doubly stochastic by construction.
 * Permutations in lexicographic order of (p(0), .., p(n-1)) with P[i][p(i)] = 1, the
 * identity first (spec->perms, allocated here, freed by teardown).
 * Init: b_res 0 for the identity, the lite offset for every other permutation:
 * lite_offset fixed -> lite_offset_value (-8), scaled -> lite_offset_value - ln(n!); the
 * identity weight at init is 1 / (1 + (n! - 1) e^offset) (table in docs/methods.md). */
#include <stdio.h>
#include <stdlib.h>
#include "residual.h"

static int mhc_lite_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("mhc_lite", n, err, errlen)) return -1;
    if (hc_option("mhc_lite", "lite_offset", c->lite_offset, "fixed", "scaled", err, errlen) < 0) return -1;
    int np = hc_factorial(n);
    s->method = HC_MHC_LITE;
    s->n = n;
    s->K = HC_GATE_Z(n) + np;
    s->n_theta = HC_GATE_THETA(n) + 1 + np;
    s->cache = 0;
    s->norm = HC_NORM_FLAT;
    s->n_factors = 1;
    s->factors[0] = n;
    s->n_perms = np;
    s->perms = hc_perms_alloc(n);
    return 0;
}

static void mhc_lite_teardown(hc_spec *s) {
    free((void *)s->perms);
    s->perms = NULL;
}

static int mhc_lite_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    out[k++] = (hc_tensor){"alpha_res", 1};
    out[k++] = (hc_tensor){"b_res", (size_t)s->n_perms};   /* one logit bias per permutation */
    return k;
}

static void mhc_lite_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    const int n = s->n, g = HC_GATE_THETA(n);
    hc_gate_init(n, theta, block);
    theta[g] = (real)HC_GATE_ALPHA_INIT;
    real off = (real)hc_lite_offset(c, n);
    for (int k = 0; k < s->n_perms; k++) theta[g + 1 + k] = k == 0 ? 0 : off;
}

/* gain nC + W ((2n + n!) x nC) + theta (3 + 2n + n!) */
static double mhc_lite_aux(int n, double C) {
    double f = hc_factorial(n), K = 2.0 * n + f;
    return n * C + K * n * C + 3 + 2.0 * n + f;
}

const hc_variant hc_variant_mhc_lite = {
    .name = "mhc_lite",
    .id = HC_MHC_LITE,
    .summary = "mHC-lite: softmax mixture of all n! permutation matrices, exactly doubly stochastic",
    .setup = mhc_lite_setup,
    .teardown = mhc_lite_teardown,
    .tensors = mhc_lite_tensors,
    .init = mhc_lite_init,
    .aux_params = mhc_lite_aux,
};
