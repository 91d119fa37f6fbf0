/* orthogonal: the orthogonal ablation. H_res = Cayley(skew(gamma tanh(tau z + b))) over the
 * full n x n space (core: expm uses the matrix exponential instead). Orthogonal, so
 * ||H||_2 = 1, but the mean of the streams is not kept (row and column sums are free).
 * Init: b = 0 (H = I), gamma 1, tau 0.01. */
#include <stdio.h>
#include "residual.h"

static int orthogonal_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("orthogonal", n, err, errlen)) return -1;
    int expm = hc_option("orthogonal", "core", c->core, "cayley", "expm", err, errlen);
    if (expm < 0) return -1;
    int k = n * (n - 1) / 2;
    s->method = HC_ORTHOGONAL;
    s->n = n;
    s->K = HC_GATE_Z(n) + k;
    s->n_theta = HC_GATE_THETA(n) + 2 + k;
    s->cache = HC_ROT_CACHE(n);    /* Q and its tanh values */
    s->norm = HC_NORM_FLAT;
    s->core_expm = expm;
    return 0;
}

static int orthogonal_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    out[k++] = (hc_tensor){"tau", 1};
    out[k++] = (hc_tensor){"gamma", 1};
    out[k++] = (hc_tensor){"b_res", (size_t)s->n * (s->n - 1) / 2};   /* skew upper triangle, row-major */
    return k;
}

static void orthogonal_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    const int n = s->n, g = HC_GATE_THETA(n);
    hc_gate_init(n, theta, block);
    theta[g] = (real)HC_GATE_ALPHA_INIT;
    theta[g + 1] = (real)HC_ROT_GAMMA_INIT;
    for (int p = 0; p < n * (n - 1) / 2; p++) theta[g + 2 + p] = 0;
}

/* gain nC + W ((2n + n(n-1)/2) x nC) + theta (2 + 2n + 2 + n(n-1)/2) */
static double orthogonal_aux(int n, double C) {
    double k = n * (n - 1) / 2.0;
    return n * C + (2.0 * n + k) * n * C + 4 + 2.0 * n + k;
}

const hc_variant hc_variant_orthogonal = {
    .name = "orthogonal",
    .id = HC_ORTHOGONAL,
    .summary = "orthogonal ablation: Cayley of a skew matrix over all n streams (mean not kept)",
    .setup = orthogonal_setup,
    .teardown = NULL,
    .tensors = orthogonal_tensors,
    .init = orthogonal_init,
    .aux_params = orthogonal_aux,
};
