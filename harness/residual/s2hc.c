/* s2hc: spectral-sphere-constrained hyper-connections (the paper, arXiv 2603.20896).
 *   H_res = J + U_Z U_core Sigma V_core^T U_Z^T,   J = 11^T / n,
 * U_Z the truncated Helmert basis of the zero-sum subspace, U_core and V_core Cayley (or
 * expm) rotations of skew(gamma tanh(tau z + b)), Sigma = diag(sigma(tau_s z_s + b_s)).
 * Row and column sums are exactly 1 and ||H_res||_2 = max(1, max |Sigma_ii|) = 1.
 * One projection with (n-1)^2 outputs after the gates: [k for U | k for V | n-1 for Sigma],
 * k = (n-1)(n-2)/2. The math (forward and backward) is in kernels/hc_math.h.
 *
 * init: tanh4 (the paper): b_s = 4, Sigma = tanh 4 = 0.99933, so at n = 4 H_res has
 *   0.999497 on the diagonal and 1.68e-4 off it.
 * init: exact (ours): the same b_s = 4, but sigma(u) = fold(tanh(u) / tanh 4), where fold
 *   reflects values above 1 (below -1) back under it: x -> 2 - x (-2 - x). At init
 *   u = 4 exactly, sigma = 1 exactly and H_res = I exactly (the cores are exactly I too).
 *   Why a fold: a smooth map bounded by 1 has zero gradient wherever it reaches 1, so any
 *   smooth Sigma map with H = I at init freezes Sigma for good (its parameters never get
 *   a gradient). More generally, at an orthogonal point the spectral ball's tangent cone
 *   contains no line along "shrink Sigma", so no smooth parametrisation can move there
 *   at first order. The fold keeps the paper's geometry (same bias, the tanh4 slope
 *   scaled by 1 / tanh 4 = 1.00067) and puts a kink exactly where init sits; there the
 *   inner branch's derivative, 1.34e-3, is used. A step that asks for Sigma > 1 crosses
 *   the kink and lands on the mirrored branch, whose gradient points back: Sigma then
 *   hovers at 1 - O(lr * 1.3e-3), the projected-gradient behaviour at an active bound,
 *   and nowhere is the slope zero (no dead zone, unlike a clamp min(1, x)).
 *   tests/test_variants.c checks H = I exactly at init and a non-zero gradient for b_s. */
#include <stdio.h>
#include "residual.h"

static int s2hc_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("s2hc", n, err, errlen)) return -1;
    int expm = hc_option("s2hc", "core", c->core, "cayley", "expm", err, errlen);
    if (expm < 0) return -1;
    int exact = hc_option("s2hc", "init", c->init, "tanh4", "exact", err, errlen);
    if (exact < 0) return -1;
    int d = n - 1;
    s->method = HC_S2HC;
    s->n = n;
    s->K = HC_GATE_Z(n) + d * d;               /* 2k + d = d^2 */
    s->n_theta = HC_GATE_THETA(n) + 5 + d * d;
    s->cache = HC_S2HC_CACHE(n);               /* the cores, their tanh values, Sigma */
    s->norm = HC_NORM_FLAT;
    s->core_expm = expm;
    s->exact_init = exact;
    return 0;
}

static int s2hc_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    size_t d = (size_t)s->n - 1, kk = d * (d - 1) / 2;
    out[k++] = (hc_tensor){"tau_u", 1};
    out[k++] = (hc_tensor){"tau_v", 1};
    out[k++] = (hc_tensor){"tau_s", 1};
    out[k++] = (hc_tensor){"gamma_u", 1};
    out[k++] = (hc_tensor){"gamma_v", 1};
    if (kk) {                                   /* n = 2: 1 x 1 cores, no angles */
        out[k++] = (hc_tensor){"b_u", kk};
        out[k++] = (hc_tensor){"b_v", kk};
    }
    out[k++] = (hc_tensor){"b_s", d};
    return k;
}

static void s2hc_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    const int n = s->n;
    const hc_s2hc_layout L = hc_s2hc_layout_of(n, 0);
    hc_gate_init(n, theta, block);
    real *th = theta + HC_GATE_THETA(n);
    th[L.tau_u] = th[L.tau_v] = th[L.tau_s] = (real)HC_GATE_ALPHA_INIT;
    th[L.gamma_u] = th[L.gamma_v] = (real)HC_ROT_GAMMA_INIT;
    for (int p = 0; p < 2 * L.k; p++) th[L.b_u + p] = 0;   /* b_u, b_v: cores = I */
    for (int i = 0; i < L.d; i++) th[L.b_s + i] = (real)HC_S2HC_SIGMA_BIAS;
}

/* gain nC + W ((2n + (n-1)^2) x nC) + theta (2 + 2n + 5 + (n-1)^2) */
static double s2hc_aux(int n, double C) {
    double d2 = (n - 1.0) * (n - 1.0);
    return n * C + (2.0 * n + d2) * n * C + 7 + 2.0 * n + d2;
}

const hc_variant hc_variant_s2hc = {
    .name = "s2hc",
    .id = HC_S2HC,
    .summary = "s2HC (the paper): J + U_Z U Sigma V^T U_Z^T, mean kept, spectral norm exactly 1",
    .setup = s2hc_setup,
    .teardown = NULL,
    .tensors = s2hc_tensors,
    .init = s2hc_init,
    .aux_params = s2hc_aux,
};
