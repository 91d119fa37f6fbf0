/* s2hc_rot: the pure-rotation control of s2hc: Sigma = I, so
 *   H_res = J + U_Z U_core V_core^T U_Z^T
 * keeps the mean and fixes every deviation singular value at 1 (H_res is orthogonal and
 * doubly "stochastic" in the signed sense: row and column sums 1). It isolates the value
 * of s2hc's selective attenuation. No Sigma slice: K = 2n + 2k, k = (n-1)(n-2)/2. At
 * init (b = 0) H_res = I exactly, so residual.init does not apply; residual.core
 * (cayley | expm) does. n = 2 has no angle at all: H_res = I. */
#include <stdio.h>
#include "residual.h"

static int s2hc_rot_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("s2hc_rot", n, err, errlen)) return -1;
    int expm = hc_option("s2hc_rot", "core", c->core, "cayley", "expm", err, errlen);
    if (expm < 0) return -1;
    int k = (n - 1) * (n - 2) / 2;
    s->method = HC_S2HC_ROT;
    s->n = n;
    s->K = HC_GATE_Z(n) + 2 * k;
    s->n_theta = HC_GATE_THETA(n) + 4 + 2 * k;
    s->cache = HC_S2HC_CACHE(n);   /* the cores and their tanh values (Sigma = I) */
    s->norm = HC_NORM_FLAT;
    s->core_expm = expm;
    return 0;
}

static int s2hc_rot_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    size_t kk = (size_t)(s->n - 1) * (s->n - 2) / 2;
    out[k++] = (hc_tensor){"tau_u", 1};
    out[k++] = (hc_tensor){"tau_v", 1};
    out[k++] = (hc_tensor){"gamma_u", 1};
    out[k++] = (hc_tensor){"gamma_v", 1};
    if (kk) {
        out[k++] = (hc_tensor){"b_u", kk};
        out[k++] = (hc_tensor){"b_v", kk};
    }
    return k;
}

static void s2hc_rot_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    const int n = s->n;
    const hc_s2hc_layout L = hc_s2hc_layout_of(n, 1);
    hc_gate_init(n, theta, block);
    real *th = theta + HC_GATE_THETA(n);
    th[L.tau_u] = th[L.tau_v] = (real)HC_GATE_ALPHA_INIT;
    th[L.gamma_u] = th[L.gamma_v] = (real)HC_ROT_GAMMA_INIT;
    for (int p = 0; p < 2 * L.k; p++) th[L.b_u + p] = 0;
}

/* gain nC + W ((2n + (n-1)(n-2)) x nC) + theta (2 + 2n + 4 + (n-1)(n-2)) */
static double s2hc_rot_aux(int n, double C) {
    double kk = (n - 1.0) * (n - 2.0);
    return n * C + (2.0 * n + kk) * n * C + 6 + 2.0 * n + kk;
}

const hc_variant hc_variant_s2hc_rot = {
    .name = "s2hc_rot",
    .id = HC_S2HC_ROT,
    .summary = "s2HC with Sigma = I: mean kept, pure rotation of the deviation (control)",
    .setup = s2hc_rot_setup,
    .teardown = NULL,
    .tensors = s2hc_rot_tensors,
    .init = s2hc_rot_init,
    .aux_params = s2hc_rot_aux,
};
