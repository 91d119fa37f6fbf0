/* jacobian.c: how much the whole network can amplify a perturbation of its residual
 * streams: ||J||_2 for J = d X_Lh / d X_0 (final streams with respect to the initial
 * streams, all n streams as independent inputs), per sequence.
 *
 * J is block-diagonal over the sequences of a batch (attention mixes tokens only within a
 * sequence), so B power iterations run at once, one per sequence, each normalised on its
 * own block. An iteration is
 *     w = Jᵀ u                  exact: model_streams_backward (the VJP) at X_0
 *     sigma = ||w|| / ||u||     the estimate
 *     u <- J w                  central difference of model_streams_forward,
 *                               (F(X_0 + h w) - F(X_0 - h w)) / (2h), h = delta ||X_0|| / ||w||
 * so u follows the power iteration on J Jᵀ. Only the direction of u depends on the finite
 * difference; the reported value ||Jᵀ u|| / ||u|| is computed exactly for whatever u is,
 * hence it is a true lower bound of ||J||_2 that converges to it (an error e in the
 * direction of u changes it by O(e^2)). In float32 the central difference with delta = 2e-3
 * is accurate to about 1e-5 relative (rounding ~ eps/delta, truncation ~ delta^2).
 *
 * model_streams_backward accumulates parameter gradients as a side effect: they are saved
 * and restored, so the probe leaves the model as it found it (the activation buffer aside).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/util.h"
#include "probes/probes.h"

static double block_norm(const real *v, size_t D) {
    double s = 0;
    for (size_t k = 0; k < D; k++) s += (double)v[k] * v[k];
    return sqrt(s);
}

static void random_unit(rng_t *r, real *v, size_t D) {
    double s;
    do {
        for (size_t k = 0; k < D; k++) v[k] = (real)rng_normal(r);
        s = block_norm(v, D);
    } while (!(s > 0));
    for (size_t k = 0; k < D; k++) v[k] = (real)(v[k] / s);
}

int probe_jacobian_norm(gpt_model *m, const real *X0, int branches, int max_iters, double tol, double *sigma) {
    const int B = m->B, Lh = m->Lh;
    const size_t D = (size_t)m->T * m->n * m->C, total = (size_t)B * D;
    real *grads = malloc_check(m->n_params * sizeof(real));
    memcpy(grads, m->grads, m->n_params * sizeof(real));
    real saved_loss = m->mean_loss;
    real *u = malloc_check(total * sizeof(real)), *w = malloc_check(total * sizeof(real));
    real *Xp = malloc_check(total * sizeof(real)), *Yp = malloc_check(total * sizeof(real));
    double *prev = malloc_check((size_t)B * sizeof(double)), *h = malloc_check((size_t)B * sizeof(double));
    rng_t r;
    rng_seed(&r, PROBE_JAC_SEED);
    for (int b = 0; b < B; b++) {
        random_unit(&r, u + b * D, D);
        prev[b] = -1;
    }
    int it = 0;
    for (;;) {
        it++;
        model_streams_forward(m, X0, branches);
        model_streams_backward(m, u, w); /* w = Jᵀ u */
        int converged = it >= PROBE_JAC_MIN_ITERS;
        for (int b = 0; b < B; b++) {
            double nu = block_norm(u + b * D, D), nw = block_norm(w + b * D, D);
            sigma[b] = nu > 0 ? nw / nu : 0;
            if (!(fabs(sigma[b] - prev[b]) <= tol * sigma[b])) converged = 0;
            prev[b] = sigma[b];
        }
        if (converged || it >= max_iters) break;
        /* u <- J w by central differences, per sequence with its own relative step */
        for (int b = 0; b < B; b++) {
            double nw = block_norm(w + b * D, D), nx = block_norm(X0 + b * D, D);
            h[b] = nw > 0 ? PROBE_JAC_DELTA * (nx > 0 ? nx : 1.0) / nw : 0;
        }
        for (int b = 0; b < B; b++)
            for (size_t k = 0; k < D; k++) Xp[b * D + k] = X0[b * D + k] + (real)(h[b] * w[b * D + k]);
        model_streams_forward(m, Xp, branches);
        memcpy(Yp, model_streams(m, Lh), total * sizeof(real));
        for (int b = 0; b < B; b++)
            for (size_t k = 0; k < D; k++) Xp[b * D + k] = X0[b * D + k] - (real)(h[b] * w[b * D + k]);
        model_streams_forward(m, Xp, branches);
        const real *Ym = model_streams(m, Lh);
        for (int b = 0; b < B; b++) {
            real *ub = u + b * D;
            if (h[b] == 0) { /* Jᵀ u = 0: start this sequence again from a fresh direction */
                random_unit(&r, ub, D);
                continue;
            }
            for (size_t k = 0; k < D; k++) ub[k] = (real)((Yp[b * D + k] - Ym[b * D + k]) / (2 * h[b]));
            double s = block_norm(ub, D);
            if (s > 0 && isfinite(s))
                for (size_t k = 0; k < D; k++) ub[k] = (real)(ub[k] / s);
            else
                random_unit(&r, ub, D);
        }
    }
    memcpy(m->grads, grads, m->n_params * sizeof(real));
    m->mean_loss = saved_loss;
    free(grads);
    free(u);
    free(w);
    free(Xp);
    free(Yp);
    free(prev);
    free(h);
    return it;
}
