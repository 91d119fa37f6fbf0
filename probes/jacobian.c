/* jacobian.c: how much the whole network can amplify a perturbation of its residual
 * streams: ||J||_2 for J = d X_Lh / d X_0 (final streams with respect to the initial
 * streams, all n streams as independent inputs), per sequence.
 *
 * Structure. With the branches on, attention mixes the tokens of a sequence but never two
 * sequences, so J is block-diagonal over the sequences of a batch. With the branches off
 * (every sublayer output f = 0) each token's streams evolve on their own,
 * X_{l+1,t} = H_res(X_{l,t}) X_{l,t}, so J is block-diagonal over tokens and a sequence's
 * norm is the largest of its tokens'. Every block is iterated at once (one batched
 * forward/backward serves them all) and normalised on its own.
 *
 * Products. J v: central difference of model_streams_forward,
 * (F(X0 + h v) - F(X0 - h v)) / 2h with h = delta ||X0_blk|| for a unit v (about 1e-5
 * relative error in float32 at delta = 2e-3). Jᵀ g: exact, model_streams_backward (VJP).
 *
 * Method: restarted Lanczos on JᵀJ with an exact read-out.
 *   - A cycle builds a Krylov basis of PROBE_JAC_BASIS vectors per block from its start
 *     vector y (Lanczos with full reorthogonalisation against the stored basis), then
 *     restarts from the top Ritz vector of the small tridiagonal matrix.
 *   - The first product of every cycle is g = J y, w = Jᵀ g, and rho = ||Jᵀ g|| / ||g||
 *     is computed exactly for that g, whatever error the finite difference left in g:
 *     rho <= ||J||_2 always (up to the float rounding of the VJP). The reported value is
 *     the largest rho seen: a true lower bound that converges to ||J||_2 (quadratically in
 *     the error of y).
 *   - Why not the plain power method: it converges like (sigma_2/sigma_1)^(2k), and for
 *     near-doubly-stochastic H_res the top singular values cluster near 1 (in a test case it
 *     was still 0.9 % low after 50 products; this converges to 1e-6 in 25). Why not plain
 *     Lanczos: its Ritz value is only as good as the finite-difference products and
 *     overshot ||J|| by 2e-4 in the tests.
 *   - Stops when no sequence's value (the largest rho of its blocks) moved by more than tol
 *     (relative) between two cycles, or after max_iters products, or at the next product
 *     once stop_signal is set (the values are then partial: probe_final writes nothing).
 *
 * Memory: (PROBE_JAC_BASIS + 4) copies of the batch's streams (B*T*n*C floats each).
 * model_streams_backward accumulates parameter gradients as a side effect: they are saved
 * and restored, so the probe leaves the model as it found it (the activation buffer aside).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/util.h"
#include "probes/probes.h"

static double dot_blk(const real *a, const real *b, size_t D) {
    double s = 0;
    for (size_t k = 0; k < D; k++) s += (double)a[k] * b[k];
    return s;
}

static void random_unit(rng_t *r, real *v, size_t D) {
    double s;
    do {
        for (size_t k = 0; k < D; k++) v[k] = (real)rng_normal(r);
        s = sqrt(dot_blk(v, v, D));
    } while (!(s > 0));
    for (size_t k = 0; k < D; k++) v[k] = (real)(v[k] / s);
}

/* Top eigenpair of a symmetric k x k matrix T (k <= PROBE_JAC_BASIS) by cyclic Jacobi:
 * returns the largest eigenvalue, its unit eigenvector in vec[k]. */
static double top_eigpair(const double *T, int k, double *vec) {
    double A[PROBE_JAC_BASIS * PROBE_JAC_BASIS], V[PROBE_JAC_BASIS * PROBE_JAC_BASIS];
    memcpy(A, T, (size_t)k * k * sizeof(double));
    for (int i = 0; i < k * k; i++) V[i] = (i % (k + 1)) == 0;
    for (int sweep = 0; sweep < 60; sweep++) {
        double off = 0, tot = 0;
        for (int i = 0; i < k; i++)
            for (int j = 0; j < k; j++) {
                tot += A[i * k + j] * A[i * k + j];
                if (i != j) off += A[i * k + j] * A[i * k + j];
            }
        if (off <= 1e-30 * tot) break;
        for (int p = 0; p < k - 1; p++)
            for (int q = p + 1; q < k; q++) {
                double apq = A[p * k + q];
                if (apq == 0) continue;
                double th = (A[q * k + q] - A[p * k + p]) / (2 * apq);
                double t = (th >= 0 ? 1.0 : -1.0) / (fabs(th) + sqrt(th * th + 1));
                double c = 1 / sqrt(t * t + 1), s = t * c;
                for (int i = 0; i < k; i++) { /* A <- A G, V <- V G */
                    double aip = A[i * k + p], aiq = A[i * k + q];
                    A[i * k + p] = c * aip - s * aiq;
                    A[i * k + q] = s * aip + c * aiq;
                    double vip = V[i * k + p], viq = V[i * k + q];
                    V[i * k + p] = c * vip - s * viq;
                    V[i * k + q] = s * vip + c * viq;
                }
                for (int i = 0; i < k; i++) { /* A <- Gᵀ A */
                    double api = A[p * k + i], aqi = A[q * k + i];
                    A[p * k + i] = c * api - s * aqi;
                    A[q * k + i] = s * api + c * aqi;
                }
            }
    }
    int best = 0;
    for (int i = 1; i < k; i++)
        if (A[i * k + i] > A[best * k + best]) best = i;
    for (int i = 0; i < k; i++) vec[i] = V[i * k + best];
    return A[best * k + best];
}

int probe_jacobian_norm(gpt_model *m, const real *X0, int branches, int max_iters, double tol, double *sigma,
                        progress *pr) {
    const int B = m->B, Lh = m->Lh;
    const size_t total = (size_t)B * m->T * m->n * m->C;
    const size_t nblk = branches ? (size_t)B : (size_t)B * m->T, D = total / nblk, per_seq = nblk / (size_t)B;
    const int Kb = D < PROBE_JAC_BASIS ? (int)D : PROBE_JAC_BASIS;
    if (max_iters < 2) max_iters = 2;
    real *grads = malloc_check(m->n_params * sizeof(real));
    memcpy(grads, m->grads, m->n_params * sizeof(real));
    real saved_loss = m->mean_loss;
    real *V = malloc_check((size_t)Kb * total * sizeof(real)); /* basis vector j of block b: V + j*total + b*D */
    real *g = malloc_check(total * sizeof(real)), *w = malloc_check(total * sizeof(real));
    real *Xp = malloc_check(total * sizeof(real)), *Yp = malloc_check(total * sizeof(real));
    double *alpha = calloc_check(nblk * Kb, sizeof(double)), *beta = calloc_check(nblk * Kb, sizeof(double));
    double *best = calloc_check(nblk, sizeof(double)), *rho_prev = calloc_check(nblk, sizeof(double));
    double *h = malloc_check(nblk * sizeof(double)), *gscale = malloc_check(nblk * sizeof(double));
    int *kb = malloc_check(nblk * sizeof(int)); /* basis vectors of each block in this cycle */
    rng_t r;
    rng_seed(&r, PROBE_JAC_SEED);
    for (size_t b = 0; b < nblk; b++) {
        random_unit(&r, V + b * D, D);
        double nx = sqrt(dot_blk(X0 + b * D, X0 + b * D, D));
        h[b] = PROBE_JAC_DELTA * (nx > 0 ? nx : 1.0);
    }
    int steps = 0, cycle = 0, finished = 0;
    while (!finished) {
        for (size_t b = 0; b < nblk; b++) kb[b] = 1;
        int j = 0;
        for (; j < Kb; j++) {
            if (stop_signal) { /* SIGINT or SIGTERM: no more products (the caller writes nothing) */
                finished = 1;
                break;
            }
            if (pr) { /* the first batch's products give its line no count to move: say how far it is */
                snprintf(pr->note, sizeof pr->note, "Jacobian%s: product %d, at most %d",
                         branches ? "" : " of the residual path", steps + 1, max_iters);
                progress_tick(pr);
            }
            const real *vj = V + (size_t)j * total;
            /* g = J v_j (a block whose basis stopped growing takes v = 0: g = 0) */
            for (size_t b = 0; b < nblk; b++)
                for (size_t q = b * D; q < (b + 1) * D; q++) {
                    real s = j < kb[b] ? (real)(h[b] * vj[q]) : 0;
                    Xp[q] = X0[q] + s;
                }
            model_streams_forward(m, Xp, branches);
            memcpy(Yp, model_streams(m, Lh), total * sizeof(real));
            for (size_t b = 0; b < nblk; b++)
                for (size_t q = b * D; q < (b + 1) * D; q++) Xp[q] = X0[q] - (j < kb[b] ? (real)(h[b] * vj[q]) : 0);
            model_streams_forward(m, Xp, branches);
            const real *Ym = model_streams(m, Lh);
            /* g = J v in units of gscale[b] per block (its largest entry 1): J^T J v in float
               overflowed past ||J|| ~ 1e19 (a run blowing up), and the read-out went NaN */
            for (size_t b = 0; b < nblk; b++) {
                double mx = 0;
                for (size_t q = b * D; q < (b + 1) * D && j < kb[b]; q++) {
                    const double d = fabs(((double)Yp[q] - (double)Ym[q]) / (2 * h[b]));
                    if (d > mx) mx = d;
                }
                gscale[b] = mx > 0 && isfinite(mx) ? mx : 1;
                for (size_t q = b * D; q < (b + 1) * D; q++)
                    g[q] = j < kb[b] ? (real)(((double)Yp[q] - (double)Ym[q]) / (2 * h[b]) / gscale[b]) : 0;
            }
            /* w = Jᵀ g, exact (so J^T J v = gscale w) */
            model_streams_forward(m, X0, branches);
            model_streams_backward(m, g, w);
            steps++;
            if (j == 0) { /* the exact read-out at the cycle's start vector */
                for (size_t b = 0; b < nblk; b++) {
                    double ng = sqrt(dot_blk(g + b * D, g + b * D, D)), nw = sqrt(dot_blk(w + b * D, w + b * D, D));
                    double rho = ng > 0 ? nw / ng : 0;
                    if (isnan(rho) || rho > best[b] || isnan(best[b])) best[b] = rho;
                }
                /* converged when no sequence's value (the largest of its blocks) moved */
                int converged = cycle > 0;
                for (int s = 0; s < B; s++) {
                    double mx = 0;
                    for (size_t b = (size_t)s * per_seq; b < (size_t)(s + 1) * per_seq; b++)
                        if (!(best[b] <= mx)) mx = best[b];
                    if (!(fabs(mx - rho_prev[s]) <= tol * mx)) converged = 0;
                    rho_prev[s] = mx;
                }
                if (converged || steps >= max_iters) {
                    finished = 1;
                    break;
                }
            }
            /* the Lanczos step: alpha_j, then w orthogonalised against the basis, beta_j */
            for (size_t b = 0; b < nblk; b++) {
                if (j >= kb[b]) continue;
                real *wb = w + b * D;
                alpha[b * Kb + j] = gscale[b] * dot_blk(V + (size_t)j * total + b * D, wb, D);
                for (int pass = 0; pass < 2; pass++) /* classical Gram-Schmidt, twice (in w's units) */
                    for (int i = 0; i <= j; i++) {
                        const real *vi = V + (size_t)i * total + b * D;
                        double c = dot_blk(vi, wb, D);
                        for (size_t q = 0; q < D; q++) wb[q] -= (real)(c * vi[q]);
                    }
                double bn = sqrt(dot_blk(wb, wb, D));
                beta[b * Kb + j] = gscale[b] * bn;
                if (j + 1 < Kb && beta[b * Kb + j] > 1e-9 * fabs(alpha[b * Kb + j]) && isfinite(bn)) {
                    real *vn = V + (size_t)(j + 1) * total + b * D;
                    for (size_t q = 0; q < D; q++) vn[q] = (real)(wb[q] / bn);
                    kb[b] = j + 2;
                }
            }
            if (steps >= max_iters - 1) { /* keep one product for the final read-out */
                j++;
                break;
            }
        }
        if (finished) break;
        /* restart every block from its top Ritz vector y = sum_i s_i v_i (into V[0]) */
        for (size_t b = 0; b < nblk; b++) {
            int k = kb[b] < j ? kb[b] : j;
            double T[PROBE_JAC_BASIS * PROBE_JAC_BASIS] = {0}, s[PROBE_JAC_BASIS];
            for (int i = 0; i < k; i++) {
                T[i * k + i] = alpha[b * Kb + i];
                if (i + 1 < k) T[i * k + i + 1] = T[(i + 1) * k + i] = beta[b * Kb + i];
            }
            double th = top_eigpair(T, k, s);
            real *y = g + b * D;
            for (size_t q = 0; q < D; q++) {
                double acc = 0;
                for (int i = 0; i < k; i++) acc += s[i] * V[(size_t)i * total + b * D + q];
                y[q] = (real)acc;
            }
            double ny = sqrt(dot_blk(y, y, D));
            if (ny > 0 && isfinite(ny) && isfinite(th))
                for (size_t q = 0; q < D; q++) V[b * D + q] = (real)(y[q] / ny);
            /* else keep the previous start vector */
        }
        cycle++;
    }
    for (int s = 0; s < B; s++) {
        double mx = 0;
        for (size_t b = (size_t)s * per_seq; b < (size_t)(s + 1) * per_seq; b++) {
            if (isnan(best[b])) { mx = NAN; break; }
            if (best[b] > mx) mx = best[b];
        }
        sigma[s] = mx;
    }
    memcpy(m->grads, grads, m->n_params * sizeof(real));
    m->mean_loss = saved_loss;
    free(grads);
    free(V);
    free(g);
    free(w);
    free(Xp);
    free(Yp);
    free(alpha);
    free(beta);
    free(best);
    free(rho_prev);
    free(h);
    free(gscale);
    free(kb);
    if (pr) pr->note[0] = '\0';
    return steps;
}
