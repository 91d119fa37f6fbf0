/* mhc: manifold-constrained HC (DeepSeek, arXiv 2512.24880). H_res = Sinkhorn-Knopp of
 * exp(alpha_res mat(z_res) + b_res), `sinkhorn_iters` iterations of row then column
 * normalisation (row_col: column sums exact, the authors' code) or the reverse (col_row:
 * row sums exact, the mHC paper's equation), in linear scalings when the logits' spread
 * allows and in the log domain above it. Init: b_res 0 on the diagonal, -8 off it. The
 * two forms, their cache and the backward are described in kernels/hc_math.h (mhc
 * section) and docs/methods.md. */
#include <stdio.h>
#include "residual.h"

static int mhc_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("mhc", n, err, errlen)) return -1;
    if (c->sinkhorn_iters < 1) {
        snprintf(err, errlen, "mhc: residual.sinkhorn_iters must be at least 1 (got %d)", c->sinkhorn_iters);
        return -1;
    }
    int order = hc_option("mhc", "sinkhorn_order", c->sinkhorn_order, "row_col", "col_row", err, errlen);
    if (order < 0) return -1;
    s->method = HC_MHC;
    s->n = n;
    s->K = HC_GATE_Z(n) + n * n;
    s->n_theta = HC_GATE_THETA(n) + 1 + n * n;
    s->sinkhorn_iters = c->sinkhorn_iters;
    s->sinkhorn_col_first = order;
    s->cache = 2 * c->sinkhorn_iters * n;   /* the potential vector after every half-step */
    s->norm = HC_NORM_FLAT;
    return 0;
}

static int mhc_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    out[k++] = (hc_tensor){"alpha_res", 1};
    out[k++] = (hc_tensor){"b_res", (size_t)s->n * s->n};   /* H convention, row-major */
    return k;
}

static void mhc_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    const int n = s->n, g = HC_GATE_THETA(n);
    hc_gate_init(n, theta, block);
    theta[g] = (real)HC_GATE_ALPHA_INIT;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) theta[g + 1 + i * n + j] = i == j ? 0 : (real)HC_MHC_OFFDIAG_BIAS;
}

/* gain nC + W ((2n + n^2) x nC) + theta (3 + 2n + n^2) */
static double mhc_aux(int n, double C) {
    double K = 2.0 * n + (double)n * n;
    return n * C + K * n * C + 3 + 2.0 * n + (double)n * n;
}

const hc_variant hc_variant_mhc = {
    .name = "mhc",
    .id = HC_MHC,
    .summary = "mHC (DeepSeek): Sinkhorn-Knopp (linear scalings; log domain for wide logits), 20 iterations, approximately doubly stochastic",
    .setup = mhc_setup,
    .teardown = NULL,
    .tensors = mhc_tensors,
    .init = mhc_init,
    .aux_params = mhc_aux,
};
