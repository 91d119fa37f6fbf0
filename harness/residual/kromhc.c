/* kromhc: KromHC (arXiv 2601.21579). H_res = F_0 (x) F_1 (x) ..., each factor an
 * mHC-lite permutation mixture of size i_f with n = prod i_f: n = 4 -> 2x2, 6 -> 2x3,
 * 8 -> 2x2x2; a prime n (2, 3, 5, 7) has the single factor n, so kromhc is then exactly
 * mhc_lite. A 2 x 2 factor is the 2-permutation softmax [[p, 1-p], [1-p, p]].
 * theta = [gates, alpha_res (shared by the factors), b_res (sum_f i_f! logit biases,
 * factor after factor)]. Init per factor: identity-permutation logit 0, the others the
 * lite offset of that factor (fixed: lite_offset_value; scaled: minus ln(i_f!)). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "residual.h"
#include "../util.h"

static int kromhc_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("kromhc", n, err, errlen)) return -1;
    if (hc_option("kromhc", "lite_offset", c->lite_offset, "fixed", "scaled", err, errlen) < 0) return -1;
    s->method = HC_KROMHC;
    s->n = n;
    s->n_factors = hc_kromhc_factorise(n, s->factors);
    size_t bytes = 0;
    int logits = 0;
    for (int f = 0; f < s->n_factors; f++) {
        int np = hc_factorial(s->factors[f]);
        logits += np;
        bytes += (size_t)np * s->factors[f];
    }
    unsigned char *t = malloc_check(bytes), *at = t;
    for (int f = 0; f < s->n_factors; f++) {
        int m = s->factors[f];
        size_t sz = (size_t)hc_factorial(m) * m;
        unsigned char *p = hc_perms_alloc(m);
        memcpy(at, p, sz);
        free(p);
        at += sz;
    }
    s->perms = t;
    s->n_perms = logits;
    s->K = HC_GATE_Z(n) + logits;
    s->n_theta = HC_GATE_THETA(n) + 1 + logits;
    s->cache = 0;
    s->norm = HC_NORM_FLAT;
    return 0;
}

static void kromhc_teardown(hc_spec *s) {
    free((void *)s->perms);
    s->perms = NULL;
}

static int kromhc_tensors(const hc_spec *s, hc_tensor *out) {
    int k = hc_gate_tensors(s->n, out);
    out[k++] = (hc_tensor){"alpha_res", 1};
    out[k++] = (hc_tensor){"b_res", (size_t)s->n_perms};   /* factor 0's i_0! biases, then factor 1's, ... */
    return k;
}

static void kromhc_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    const int n = s->n, g = HC_GATE_THETA(n);
    hc_gate_init(n, theta, block);
    theta[g] = (real)HC_GATE_ALPHA_INIT;
    real *b = theta + g + 1;
    for (int f = 0; f < s->n_factors; f++) {
        int np = hc_factorial(s->factors[f]);
        real off = (real)hc_lite_offset(c, s->factors[f]);
        for (int k = 0; k < np; k++) b[k] = k == 0 ? 0 : off;
        b += np;
    }
}

/* gain nC + W ((2n + sum i_f!) x nC) + theta (3 + 2n + sum i_f!) */
static double kromhc_aux(int n, double C) {
    int f[4], nf = hc_kromhc_factorise(n, f);
    double logits = 0;
    for (int i = 0; i < nf; i++) logits += hc_factorial(f[i]);
    return n * C + (2.0 * n + logits) * n * C + 3 + 2.0 * n + logits;
}

const hc_variant hc_variant_kromhc = {
    .name = "kromhc",
    .id = HC_KROMHC,
    .summary = "KromHC: Kronecker product of small mHC-lite factors (4=2x2, 6=2x3, 8=2x2x2; prime n = mhc_lite)",
    .setup = kromhc_setup,
    .teardown = kromhc_teardown,
    .tensors = kromhc_tensors,
    .init = kromhc_init,
    .aux_params = kromhc_aux,
};
