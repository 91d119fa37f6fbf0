/* identity: n streams with dynamic pre/post gates and H_res fixed at I (the paper's
 * fixed-identity ablation; the streams never mix). */
#include <stdio.h>
#include "residual.h"

static int identity_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (n < 2 || n > HC_MAX_N) {
        snprintf(err, errlen, "identity needs 2 <= n_streams <= %d (got %d)", HC_MAX_N, n);
        return -1;
    }
    s->method = HC_IDENTITY;
    s->n = n;
    s->K = HC_GATE_Z(n);
    s->n_theta = HC_GATE_THETA(n);
    s->cache = 0;
    s->norm = HC_NORM_FLAT;
    return 0;
}

static int identity_tensors(const hc_spec *s, hc_tensor *out) { return hc_gate_tensors(s->n, out); }

static void identity_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    hc_gate_init(s->n, theta, block);
}

/* gain nC + W (2n x nC) + gates (2 + 2n) */
static double identity_aux(int n, double C) { return n * C + 2.0 * n * n * C + 2 + 2.0 * n; }

const hc_variant hc_variant_identity = {
    .name = "identity",
    .id = HC_IDENTITY,
    .summary = "n streams, dynamic sigmoid gates, H_res fixed at I (ablation)",
    .setup = identity_setup,
    .teardown = NULL,
    .tensors = identity_tensors,
    .init = identity_init,
    .aux_params = identity_aux,
};
