/* hc: Zhu et al. dynamic Hyper-Connections (arXiv 2409.19606), unconstrained.
 * Per stream i the frame gives z_i = [pre, post, res_0..res_{n-1}] from that stream's own
 * RMS-normalised C-vector (HC_NORM_STREAM, W is [(n+2), C] shared by the streams):
 *   H_pre[i] = s_alpha tanh(z_i,pre) + pre_static[i]     (no sigmoid)
 *   H_post[i] = s_beta tanh(z_i,post) + post_static[i]
 *   H_res[j][i] = s_alpha tanh(z_i,res[j]) + res_static[j][i]   (column i from stream i)
 * Init: s_alpha = s_beta = 0.01, pre_static one-hot on block mod n, post_static 1,
 * res_static I. Nothing bounds H_res: products over depth can amplify (the paper's
 * exploding gradient norm); that is the point of running it. Math: kernels/hc_math.h. */
#include <stdio.h>
#include "residual.h"

static int hc_setup(hc_spec *s, const s2hc_config *c, char *err, size_t errlen) {
    int n = c->n_streams;
    if (hc_check_n("hc", n, err, errlen)) return -1;
    s->method = HC_HC;
    s->n = n;
    s->K = n * (n + 2);
    s->n_theta = 2 + 2 * n + n * n;
    s->cache = 0;
    s->norm = HC_NORM_STREAM;
    return 0;
}

static int hc_tensors(const hc_spec *s, hc_tensor *out) {
    size_t n = (size_t)s->n;
    out[0] = (hc_tensor){"s_alpha", 1};
    out[1] = (hc_tensor){"s_beta", 1};
    out[2] = (hc_tensor){"pre_static", n};
    out[3] = (hc_tensor){"post_static", n};
    out[4] = (hc_tensor){"res_static", n * n};   /* H convention: [out stream][in stream] */
    return 5;
}

static void hc_init(const hc_spec *s, const s2hc_config *c, real *theta, int block) {
    (void)c;
    const int n = s->n;
    theta[0] = (real)HC_HC_SCALE_INIT;
    theta[1] = (real)HC_HC_SCALE_INIT;
    for (int i = 0; i < n; i++) {
        theta[2 + i] = (real)(i == block % n);
        theta[2 + n + i] = 1;
        for (int j = 0; j < n; j++) theta[2 + 2 * n + i * n + j] = (real)(i == j);
    }
}

/* gain C (shared by the streams) + W ((n+2) x C) + theta (2 + 2n + n^2) */
static double hc_aux(int n, double C) { return C + (n + 2.0) * C + 2 + 2.0 * n + (double)n * n; }

const hc_variant hc_variant_hc = {
    .name = "hc",
    .id = HC_HC,
    .summary = "Hyper-Connections (Zhu et al.): static + s*tanh(dynamic), unconstrained",
    .setup = hc_setup,
    .teardown = NULL,
    .tensors = hc_tensors,
    .init = hc_init,
    .aux_params = hc_aux,
};
