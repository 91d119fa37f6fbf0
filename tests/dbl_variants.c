/* dbl_variants.c: per-token gradient checks of every residual method in double.
 *
 * For every method (and every option that changes the math), n = 2..8, theta perturbed
 * away from its init (a moderate and a large regime), random z and random upstream
 * dpre, dpost, dH: the analytic dz and dtheta of hc_backward against central finite
 * differences of
 *     L = sum dpre . pre + sum dpost . post + sum dH . H_res,      eps = 1e-6.
 * Error per entry: |analytic - fd| / max(1, |analytic|, |fd|) (relative above 1, absolute
 * below: in double the central difference is good to ~1e-9 absolute at |L| ~ 10).
 * Tolerances per method are in the case table; every maximum is printed.
 * When K or n_theta exceeds FD_MAX_COORDS (mhc_lite at n >= 6, kromhc at n = 7) a random
 * sample of that many coordinates is checked.
 *
 * Also: dz is overwritten and dtheta accumulated (+=); a planted fault (dH transposed,
 * one dtheta entry's sign flipped) must be caught by the same comparison; the one-sided
 * derivative of s2hc's exact init at its kink; the invariants, tightly, in double.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../harness/residual/residual.h"
#include "../harness/util.h"
#include "t.h"

#define FD_EPS 1e-6
#define FD_MAX_COORDS 300

typedef struct {
    const char *label, *method, *order, *offset, *core, *init;
    int iters;
    double tol;
} vcase;

static const vcase cases[] = {
    {"identity", "identity", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"hc", "hc", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"mhc", "mhc", "row_col", "fixed", "cayley", "tanh4", 20, 1e-6},
    {"mhc/col_row", "mhc", "col_row", "fixed", "cayley", "tanh4", 20, 1e-6},
    {"mhc/iters3", "mhc", "row_col", "fixed", "cayley", "tanh4", 3, 1e-6},
    {"mhc_lite", "mhc_lite", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"kromhc", "kromhc", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"orthogonal", "orthogonal", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"orthogonal/expm", "orthogonal", "row_col", "fixed", "expm", "tanh4", 20, 1e-6},
    {"s2hc", "s2hc", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"s2hc/expm", "s2hc", "row_col", "fixed", "expm", "tanh4", 20, 1e-6},
    {"s2hc/exact", "s2hc", "row_col", "fixed", "cayley", "exact", 20, 1e-7},
    {"s2hc/expm+exact", "s2hc", "row_col", "fixed", "expm", "exact", 20, 1e-6},
    {"s2hc_rot", "s2hc_rot", "row_col", "fixed", "cayley", "tanh4", 20, 1e-7},
    {"s2hc_rot/expm", "s2hc_rot", "row_col", "fixed", "expm", "tanh4", 20, 1e-6},
};
#define N_CASES (int)(sizeof cases / sizeof cases[0])

static void case_config(s2hc_config *c, const vcase *vc, int n) {
    memset(c, 0, sizeof *c);
    snprintf(c->method, sizeof c->method, "%s", vc->method);
    c->n_streams = n;
    c->sinkhorn_iters = vc->iters;
    snprintf(c->sinkhorn_order, sizeof c->sinkhorn_order, "%s", vc->order);
    snprintf(c->lite_offset, sizeof c->lite_offset, "%s", vc->offset);
    c->lite_offset_value = -8;
    snprintf(c->core, sizeof c->core, "%s", vc->core);
    snprintf(c->init, sizeof c->init, "%s", vc->init);
}

/* A method instance with its buffers: theta, z, upstream gradients. */
typedef struct {
    const hc_variant *v;
    hc_spec s;
    s2hc_config c;
    real *theta, *z, *cache, *dpre, *dpost, *dH;
} inst;

static int inst_make(inst *I, const vcase *vc, int n) {
    char err[256];
    memset(I, 0, sizeof *I);
    case_config(&I->c, vc, n);
    I->v = hc_variant_find(vc->method);
    if (!I->v || I->v->setup(&I->s, &I->c, err, sizeof err) != 0) {
        fprintf(stderr, "setup %s n=%d: %s\n", vc->label, n, I->v ? err : "unknown method");
        return -1;
    }
    I->theta = calloc_check((size_t)I->s.n_theta, sizeof(real));
    I->z = calloc_check((size_t)I->s.K, sizeof(real));
    I->cache = calloc_check((size_t)I->s.cache + 1, sizeof(real));
    I->dpre = calloc_check((size_t)n, sizeof(real));
    I->dpost = calloc_check((size_t)n, sizeof(real));
    I->dH = calloc_check((size_t)n * n, sizeof(real));
    return 0;
}

static void inst_free(inst *I) {
    if (I->v && I->v->teardown) I->v->teardown(&I->s);
    free(I->theta); free(I->z); free(I->cache); free(I->dpre); free(I->dpost); free(I->dH);
}

/* theta = init + sd_theta N(0,1), z = sd_z N(0,1), upstream N(0,1). */
static void inst_randomise(inst *I, rng_t *r, double sd_theta, double sd_z) {
    const int n = I->s.n;
    I->v->init(&I->s, &I->c, I->theta, (int)(rng_u64(r) % 4));
    for (int i = 0; i < I->s.n_theta; i++) I->theta[i] += sd_theta * rng_normal(r);
    for (int i = 0; i < I->s.K; i++) I->z[i] = sd_z * rng_normal(r);
    for (int i = 0; i < n; i++) { I->dpre[i] = rng_normal(r); I->dpost[i] = rng_normal(r); }
    for (int i = 0; i < n * n; i++) I->dH[i] = rng_normal(r);
}

static double inst_loss(inst *I) {
    const int n = I->s.n;
    real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
    hc_forward(&I->s, I->theta, I->z, pre, post, H, I->cache);
    double L = 0;
    for (int i = 0; i < n; i++) L += I->dpre[i] * pre[i] + I->dpost[i] * post[i];
    for (int i = 0; i < n * n; i++) L += I->dH[i] * H[i];
    return L;
}

typedef void (*backward_fn)(const hc_spec *s, const real *theta, const real *z, const real *cache, const real *dpre,
                            const real *dpost, const real *dH, real *dz, real *dtheta);

static void bwd_true(const hc_spec *s, const real *theta, const real *z, const real *cache, const real *dpre,
                     const real *dpost, const real *dH, real *dz, real *dtheta) {
    hc_backward(s, theta, z, cache, dpre, dpost, dH, dz, dtheta);
}

/* planted fault 1: dH transposed on the way in */
static void bwd_transposed(const hc_spec *s, const real *theta, const real *z, const real *cache, const real *dpre,
                           const real *dpost, const real *dH, real *dz, real *dtheta) {
    real T[HC_MM];
    const int n = s->n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) T[i * n + j] = dH[j * n + i];
    hc_backward(s, theta, z, cache, dpre, dpost, T, dz, dtheta);
}

/* planted fault 2: the last theta entry's gradient has the wrong sign */
static void bwd_signflip(const hc_spec *s, const real *theta, const real *z, const real *cache, const real *dpre,
                         const real *dpost, const real *dH, real *dz, real *dtheta) {
    real keep = dtheta[s->n_theta - 1];
    hc_backward(s, theta, z, cache, dpre, dpost, dH, dz, dtheta);
    dtheta[s->n_theta - 1] = keep - (dtheta[s->n_theta - 1] - keep);
}

static double entry_err(double a, double f) {
    double m = fabs(a) > fabs(f) ? fabs(a) : fabs(f);
    if (m < 1) m = 1;
    double e = fabs(a - f) / m;
    return isnan(e) ? INFINITY : e;
}

/* The worst entry error of dz and dtheta (analytic from `bwd`) against central finite
 * differences. Checks every coordinate, or FD_MAX_COORDS random ones per vector (always
 * including the first 2n + 4 and the last 4). */
static double fd_compare(inst *I, backward_fn bwd, rng_t *r) {
    const int K = I->s.K, T = I->s.n_theta;
    real *dz = malloc_check((size_t)K * sizeof(real)), *dth = calloc_check((size_t)T, sizeof(real));
    inst_loss(I); /* fills the cache */
    bwd(&I->s, I->theta, I->z, I->cache, I->dpre, I->dpost, I->dH, dz, dth);
    double worst = 0;
    for (int which = 0; which < 2; which++) {
        real *x = which ? I->theta : I->z;
        const real *g = which ? dth : dz;
        int len = which ? T : K, head = 2 * I->s.n + 4;
        int cnt = len <= FD_MAX_COORDS ? len : FD_MAX_COORDS;
        for (int q = 0; q < cnt; q++) {
            int i = q;
            if (len > FD_MAX_COORDS) {
                if (q < head) i = q;
                else if (q >= cnt - 4) i = len - (cnt - q);
                else i = head + (int)(rng_u64(r) % (uint64_t)(len - head - 4));
            }
            real x0 = x[i];
            x[i] = x0 + FD_EPS;
            double lp = inst_loss(I);
            x[i] = x0 - FD_EPS;
            double lm = inst_loss(I);
            x[i] = x0;
            double e = entry_err(g[i], (lp - lm) / (2 * FD_EPS));
            if (e > worst) worst = e;
        }
    }
    free(dz);
    free(dth);
    return worst;
}

static void test_fd_all(void) {
    rng_t r;
    rng_seed(&r, 20240607);
    printf("  %-16s", "max FD error");
    for (int n = 2; n <= HC_MAX_N; n++) printf("    n=%d   ", n);
    printf("   tol\n");
    for (int ci = 0; ci < N_CASES; ci++) {
        const vcase *vc = &cases[ci];
        printf("  %-16s", vc->label);
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, vc, n) != 0) { CHECK(0, "setup %s n=%d", vc->label, n); continue; }
            double worst = 0;
            const double regimes[][2] = {{0.5, 1.0}, {0.5, 1.0}, {2.0, 3.0}, {2.0, 3.0}};
            int trials = I.s.K > 1000 ? 2 : 4;
            for (int t = 0; t < trials; t++) {
                int rg = I.s.K > 1000 ? 2 * t : t;
                inst_randomise(&I, &r, regimes[rg][0], regimes[rg][1]);
                double e = fd_compare(&I, bwd_true, &r);
                CHECK(e <= vc->tol, "%s n=%d trial %d: FD error %.3g > %.1g", vc->label, n, t, e, vc->tol);
                if (e > worst) worst = e;
            }
            printf("  %9.2e", worst);
            inst_free(&I);
        }
        printf("  %.0e\n", vc->tol);
    }
}

/* mhc's two forms of the iteration (linear scalings when the logits' spread is at most
 * HC_MHC_LINEAR_SPREAD, log-domain potentials above): the same H to rounding on logits
 * both can take, and each form's backward against finite differences on logits that
 * select it (the FD table above mostly exercises the linear form). */
static void test_mhc_forms(void) {
    rng_t r;
    rng_seed(&r, 11);
    double worst_h = 0, worst_fd[2] = {0, 0};
    int seen[2] = {0, 0};
    for (int order = 0; order < 2; order++)
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, &cases[2 + order], n) != 0) { CHECK(0, "setup"); continue; }
            for (int t = 0; t < 6; t++) {
                inst_randomise(&I, &r, 0.5, 1.0);
                real Lg[HC_MM], H1[HC_MM], H2[HC_MM], mx;
                hc_mhc_logits(n, I.theta, I.z, Lg);
                CHECK(hc_mhc_linear(n, Lg, &mx), "n=%d: moderate logits took the log form", n);
                hc_mhc_sinkhorn_lin(&I.s, Lg, mx, H1, I.cache);
                hc_mhc_sinkhorn_log(&I.s, Lg, H2, I.cache);
                for (int i = 0; i < n * n; i++) worst_h = fmax(worst_h, fabs(H1[i] - H2[i]));
                /* each form through the whole forward/backward: alpha_res sets the spread */
                for (int form = 0; form < 2; form++) {
                    I.theta[HC_GATE_THETA(n)] = form ? 25.0 : 1.0;
                    hc_mhc_logits(n, I.theta, I.z, Lg);
                    int lin = hc_mhc_linear(n, Lg, &mx);
                    if (lin == form) continue;   /* this draw does not select the form */
                    seen[form]++;
                    double e = fd_compare(&I, bwd_true, &r);
                    CHECK(e <= 1e-6, "n=%d %s form: FD error %.3g", n, form ? "log" : "linear", e);
                    worst_fd[form] = fmax(worst_fd[form], e);
                }
            }
            inst_free(&I);
        }
    CHECK(worst_h <= 1e-12, "linear and log forms differ by %.3g", worst_h);
    CHECK(seen[0] >= 20 && seen[1] >= 20, "forms exercised: linear %d, log %d", seen[0], seen[1]);
    printf("  mhc forms: H linear vs log %.2e; FD linear %.2e (%d draws), log %.2e (%d draws)\n", worst_h,
           worst_fd[0], seen[0], worst_fd[1], seen[1]);
}

/* dz is overwritten (garbage in, same answer out); dtheta accumulates. */
static void test_overwrite_accumulate(void) {
    rng_t r;
    rng_seed(&r, 7);
    for (int ci = 0; ci < N_CASES; ci++) {
        inst I;
        if (inst_make(&I, &cases[ci], 4) != 0) { CHECK(0, "setup"); continue; }
        inst_randomise(&I, &r, 0.5, 1.0);
        inst_loss(&I);
        const int K = I.s.K, T = I.s.n_theta;
        real *dz1 = malloc_check((size_t)K * sizeof(real)), *dz2 = malloc_check((size_t)K * sizeof(real));
        real *t1 = calloc_check((size_t)T, sizeof(real)), *t2 = malloc_check((size_t)T * sizeof(real));
        for (int i = 0; i < K; i++) { dz1[i] = 0; dz2[i] = 1e30; }
        for (int i = 0; i < T; i++) t2[i] = 3.0;
        hc_backward(&I.s, I.theta, I.z, I.cache, I.dpre, I.dpost, I.dH, dz1, t1);
        hc_backward(&I.s, I.theta, I.z, I.cache, I.dpre, I.dpost, I.dH, dz2, t2);
        hc_backward(&I.s, I.theta, I.z, I.cache, I.dpre, I.dpost, I.dH, dz2, t2);
        double ez = 0, et = 0;
        for (int i = 0; i < K; i++) ez = fmax(ez, fabs(dz1[i] - dz2[i]));
        for (int i = 0; i < T; i++) et = fmax(et, fabs((t2[i] - 3.0) - 2 * t1[i]) / fmax(1, fabs(t1[i])));
        CHECK(ez == 0, "%s: dz depends on its old contents (diff %g)", cases[ci].label, ez);
        CHECK(et < 1e-12, "%s: dtheta does not accumulate with += (diff %g)", cases[ci].label, et);
        free(dz1); free(dz2); free(t1); free(t2);
        inst_free(&I);
    }
}

/* A wrong gradient must be caught by fd_compare: dH transposed, or one sign flipped.
 * n = 6: at n = 4 kromhc is 2x2 (x) 2x2 with symmetric factors, so H is symmetric and a
 * transposed dH gives the same (correct) gradient. */
static void test_planted_fault(void) {
    rng_t r;
    rng_seed(&r, 99);
    const char *methods[] = {"hc", "mhc", "mhc_lite", "kromhc", "orthogonal", "s2hc", "s2hc_rot"};
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
        const vcase *vc = NULL;
        for (int ci = 0; ci < N_CASES; ci++)
            if (!strcmp(cases[ci].label, methods[m])) vc = &cases[ci];
        inst I;
        if (!vc || inst_make(&I, vc, 6) != 0) { CHECK(0, "setup %s", methods[m]); continue; }
        inst_randomise(&I, &r, 0.5, 1.0);
        double ok = fd_compare(&I, bwd_true, &r);
        double tr = fd_compare(&I, bwd_transposed, &r);
        double sf = fd_compare(&I, bwd_signflip, &r);
        CHECK(ok <= vc->tol, "%s: true gradient rejected (%.3g)", methods[m], ok);
        CHECK(tr > 100 * vc->tol, "%s: transposed dH NOT caught (error %.3g)", methods[m], tr);
        CHECK(sf > 100 * vc->tol, "%s: flipped sign NOT caught (error %.3g)", methods[m], sf);
        printf("  planted fault %-10s true %.1e  transposed dH %.1e  sign flip %.1e\n", methods[m], ok, tr, sf);
        inst_free(&I);
    }
}

/* s2hc init exact: at init u = b_s = 4 sits on the fold's kink. The analytic gradient
 * is the inner branch's: it must equal the left-sided difference, be non-zero, and H is
 * exactly I there. */
static void test_exact_init_kink(void) {
    rng_t r;
    rng_seed(&r, 5);
    for (int ci = 0; ci < N_CASES; ci++) {
        if (strcmp(cases[ci].method, "s2hc") || strcmp(cases[ci].init, "exact")) continue;
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, &cases[ci], n) != 0) { CHECK(0, "setup"); continue; }
            I.v->init(&I.s, &I.c, I.theta, 0);
            for (int i = 0; i < n; i++) { I.dpre[i] = rng_normal(&r); I.dpost[i] = rng_normal(&r); }
            for (int i = 0; i < n * n; i++) I.dH[i] = rng_normal(&r);
            real *dz = malloc_check((size_t)I.s.K * sizeof(real));
            real *dth = calloc_check((size_t)I.s.n_theta, sizeof(real));
            inst_loss(&I); /* fills the cache */
            hc_backward(&I.s, I.theta, I.z, I.cache, I.dpre, I.dpost, I.dH, dz, dth);
            hc_s2hc_layout L = hc_s2hc_layout_of(n, 0);
            int bs = HC_GATE_THETA(n) + L.b_s;
            double gmax = 0;
            for (int i = 0; i < L.d; i++) {
                real x0 = I.theta[bs + i];
                double l0 = inst_loss(&I);
                I.theta[bs + i] = x0 - FD_EPS;
                double lm = inst_loss(&I);
                I.theta[bs + i] = x0;
                double left = (l0 - lm) / FD_EPS;
                CHECK_CLOSE(dth[bs + i], left, 1e-9, 1e-4, "%s n=%d b_s[%d] vs left difference", cases[ci].label, n, i);
                gmax = fmax(gmax, fabs(dth[bs + i]));
            }
            CHECK(gmax > 1e-6, "%s n=%d: the Sigma gradient at exact init is %g", cases[ci].label, n, gmax);
            free(dz);
            free(dth);
            inst_free(&I);
        }
    }
}

/* ---- invariants in double: tight tolerances ------------------------------------------ */

static double sum_err(int n, const real *H, int cols) {
    double e = 0;
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += cols ? H[j * n + i] : H[i * n + j];
        e = fmax(e, fabs(s - 1));
    }
    return e;
}

static double orth_err(int n, const real *H) {   /* max |H^T H - I| */
    double e = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += H[i * n + a] * H[i * n + b];
            e = fmax(e, fabs(s - (a == b)));
        }
    return e;
}

static void test_invariants_double(void) {
    rng_t r;
    rng_seed(&r, 11);
    const double regimes[][2] = {{0.5, 1.0}, {3.0, 5.0}};
    for (int ci = 0; ci < N_CASES; ci++) {
        const vcase *vc = &cases[ci];
        for (int n = 2; n <= HC_MAX_N; n++) {
            inst I;
            if (inst_make(&I, vc, n) != 0) { CHECK(0, "setup"); continue; }
            for (int t = 0; t < 20; t++) {
                inst_randomise(&I, &r, regimes[t % 2][0], regimes[t % 2][1]);
                real pre[HC_MAX_N], post[HC_MAX_N], H[HC_MM];
                hc_forward(&I.s, I.theta, I.z, pre, post, H, I.cache);
                int id = I.s.method;
                if (id == HC_S2HC || id == HC_S2HC_ROT || id == HC_MHC_LITE || id == HC_KROMHC) {
                    CHECK(sum_err(n, H, 0) < 1e-13, "%s n=%d row sums %g", vc->label, n, sum_err(n, H, 0));
                    CHECK(sum_err(n, H, 1) < 1e-13, "%s n=%d col sums %g", vc->label, n, sum_err(n, H, 1));
                }
                if (id == HC_MHC) {
                    int exact_cols = !I.s.sinkhorn_col_first;
                    CHECK(sum_err(n, H, exact_cols) < 1e-13, "%s n=%d exact side %g", vc->label, n,
                          sum_err(n, H, exact_cols));
                }
                if (id == HC_ORTHOGONAL || id == HC_S2HC_ROT)
                    CHECK(orth_err(n, H) < 1e-13, "%s n=%d H^T H - I %g", vc->label, n, orth_err(n, H));
                if (id == HC_MHC_LITE || id == HC_KROMHC || id == HC_MHC)
                    for (int i = 0; i < n * n; i++) CHECK(H[i] >= 0, "%s n=%d negative entry", vc->label, n);
            }
            inst_free(&I);
        }
    }
}

/* the expm core against closed forms: 2x2 rotation by angle a, 3x3 Rodrigues */
static void test_expm_closed_forms(void) {
    rng_t r;
    rng_seed(&r, 3);
    for (int t = 0; t < 50; t++) {
        real a = (real)(6 * rng_normal(&r)), A[4] = {0, a, -a, 0}, X[4];
        hc_expm_dual(2, A, NULL, X, NULL);
        CHECK_CLOSE(X[0], cos(a), 1e-13, 0, "expm 2x2 [0][0], a=%g", a);
        CHECK_CLOSE(X[1], sin(a), 1e-13, 0, "expm 2x2 [0][1], a=%g", a);
        CHECK_CLOSE(X[2], -sin(a), 1e-13, 0, "expm 2x2 [1][0], a=%g", a);
        real w[3] = {(real)(3 * rng_normal(&r)), (real)(3 * rng_normal(&r)), (real)(3 * rng_normal(&r))};
        real W[9] = {0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0}, R[9], W2[9];
        hc_expm_dual(3, W, NULL, R, NULL);
        double th = sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
        hc_mm(3, 3, 3, W, W, W2);
        for (int i = 0; i < 9; i++) {
            double ref = (i % 4 == 0) + sin(th) / th * W[i] + (1 - cos(th)) / (th * th) * W2[i];
            CHECK_CLOSE(R[i], ref, 1e-12, 0, "expm 3x3 Rodrigues entry %d, theta %g", i, th);
        }
    }
}

int main(void) {
    T_NAME("dbl_variants");
    T_RUN(test_fd_all);
    T_RUN(test_mhc_forms);
    T_RUN(test_overwrite_accumulate);
    T_RUN(test_planted_fault);
    T_RUN(test_exact_init_kink);
    T_RUN(test_invariants_double);
    T_RUN(test_expm_closed_forms);
    return T_END();
}
