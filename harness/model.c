/* model.c: the GPT and its hyper-connection frame on the CPU (see model.h for the math).
 *
 * Layout of the work:
 *   param table   model_param_table(): every tensor's name, shape, offset, flags
 *   forward       embedding -> Lh sublayers (frame + attention or MLP) -> sum -> ln_f -> CE
 *   backward      the same in reverse; every op adds into its gradient, the step zeroes once
 *
 * Sublayer l (0..Lh-1) belongs to block l/2; even l is attention, odd l is the MLP.
 * For `rc` there is one stream and no frame: X_{l+1} = X_l + F(LN(X_l)).
 */
#include "model.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../kernels/kernels.h"
#include "util.h"

#define RMS_EPS 1e-6 /* RMSNorm of the streams before the coefficient projection */

/* ---- the parameter table ------------------------------------------------------------ */

typedef struct {
    param_info *v;
    int n, cap;
    size_t total, aux;
} ptable;

static param_info *pt_add(ptable *t, const char *name, int rank, size_t d0, size_t d1, int decay, int aux) {
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        param_info *nv = realloc(t->v, (size_t)t->cap * sizeof *nv);
        if (!nv) die(1, "out of memory building the parameter table");
        t->v = nv;
    }
    param_info *p = &t->v[t->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->rank = rank;
    p->shape[0] = d0;
    p->shape[1] = rank > 1 ? d1 : 0;
    p->numel = rank > 1 ? d0 * d1 : d0;
    p->offset = t->total;
    p->decay = decay;
    p->aux = aux;
    t->total += p->numel;
    if (aux) t->aux += p->numel;
    return p;
}

/* The method spec for a config (rc: method HC_RC, n = 1). */
static int spec_for(const s2hc_config *c, hc_spec *s, const hc_variant **var, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    *var = NULL;
    if (strcmp(c->method, "rc") == 0) {
        if (c->n_streams != 1) {
            snprintf(err, errlen, "residual.method rc has one stream; residual.n_streams must be 1 (got %d)",
                     c->n_streams);
            return -1;
        }
        s->method = HC_RC;
        s->n = 1;
        return 0;
    }
    const hc_variant *v = hc_variant_find(c->method);
    if (!v) {
        snprintf(err, errlen, "residual.method '%s' is not a known method", c->method);
        return -1;
    }
    if (v->setup(s, c, err, errlen) != 0) return -1;
    *var = v;
    return 0;
}

static void add_hc_tensors(ptable *t, const char *prefix, const hc_spec *s, const hc_variant *v, int C) {
    char name[PARAM_NAME];
    int n = s->n;
    size_t in = s->norm == HC_NORM_FLAT ? (size_t)n * C : (size_t)C;
    size_t out = s->norm == HC_NORM_FLAT ? (size_t)s->K : (size_t)(s->K / n);
    snprintf(name, sizeof name, "%s.norm.weight", prefix);
    pt_add(t, name, 1, in, 0, 0, 1);
    snprintf(name, sizeof name, "%s.proj.weight", prefix);
    pt_add(t, name, 2, out, in, 1, 1);
    hc_tensor ts[HC_MAX_TENSORS];
    int nt = v->tensors(s, ts);
    for (int i = 0; i < nt; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, ts[i].name);
        pt_add(t, name, 1, ts[i].size, 0, 0, 1);
    }
}

static int build_table(const s2hc_config *c, const hc_spec *s, const hc_variant *v, ptable *t) {
    size_t C = (size_t)c->n_embd, V = (size_t)c->vocab, T = (size_t)c->block_size;
    char name[PARAM_NAME];
    memset(t, 0, sizeof *t);
    pt_add(t, "transformer.wte.weight", 2, V, C, 1, 0);
    pt_add(t, "transformer.wpe.weight", 2, T, C, 1, 0);
    for (int l = 0; l < c->n_layer; l++) {
#define P(suffix, rank, d0, d1, decay)                                            \
    do {                                                                          \
        snprintf(name, sizeof name, "transformer.h.%d.%s", l, suffix);            \
        pt_add(t, name, rank, d0, d1, decay, 0);                                  \
    } while (0)
        P("ln_1.weight", 1, C, 0, 0);
        P("ln_1.bias", 1, C, 0, 0);
        P("attn.c_attn.weight", 2, 3 * C, C, 1);
        P("attn.c_attn.bias", 1, 3 * C, 0, 0);
        P("attn.c_proj.weight", 2, C, C, 1);
        P("attn.c_proj.bias", 1, C, 0, 0);
        P("ln_2.weight", 1, C, 0, 0);
        P("ln_2.bias", 1, C, 0, 0);
        P("mlp.c_fc.weight", 2, 4 * C, C, 1);
        P("mlp.c_fc.bias", 1, 4 * C, 0, 0);
        P("mlp.c_proj.weight", 2, C, 4 * C, 1);
        P("mlp.c_proj.bias", 1, C, 0, 0);
#undef P
        if (v) {
            snprintf(name, sizeof name, "transformer.h.%d.attn_hc", l);
            add_hc_tensors(t, name, s, v, (int)C);
            snprintf(name, sizeof name, "transformer.h.%d.mlp_hc", l);
            add_hc_tensors(t, name, s, v, (int)C);
        }
    }
    pt_add(t, "transformer.ln_f.weight", 1, C, 0, 0, 0);
    pt_add(t, "transformer.ln_f.bias", 1, C, 0, 0, 0);
    return 0;
}

int model_param_table(const s2hc_config *c, param_info **out, int *n_out, size_t *total, size_t *aux, char *err,
                      size_t errlen) {
    hc_spec s;
    const hc_variant *v;
    if (spec_for(c, &s, &v, err, errlen) != 0) return -1;
    ptable t;
    build_table(c, &s, v, &t);
    if (v && v->teardown) v->teardown(&s);
    *out = t.v;
    *n_out = t.n;
    if (total) *total = t.total;
    if (aux) *aux = t.aux;
    return 0;
}

/* ---- per-layer tensor pointers (resolved from the table by position) ----------------- */

/* Tensors of one block in table order: 12 base tensors, then the two frames. */
enum { B_LN1W, B_LN1B, B_QKVW, B_QKVB, B_PROJW, B_PROJB, B_LN2W, B_LN2B, B_FCW, B_FCB, B_FCPW, B_FCPB, B_NBASE };

typedef struct {
    int first;      /* index of the block's first tensor in the table */
    int hc_first[2];/* index of attn_hc / mlp_hc norm.weight (if any) */
} block_index;

static int tensors_per_frame(const gpt_model *m) {
    if (!m->variant) return 0;
    hc_tensor ts[HC_MAX_TENSORS];
    return 2 + m->variant->tensors(&m->spec, ts);
}

static real *P(const gpt_model *m, int idx) { return m->params + m->pinfo[idx].offset; }
static real *G(const gpt_model *m, int idx) { return m->grads + m->pinfo[idx].offset; }

static block_index block_at(const gpt_model *m, int l) {
    int per = B_NBASE + 2 * tensors_per_frame(m);
    block_index b;
    b.first = 2 + l * per;
    b.hc_first[0] = b.first + B_NBASE;
    b.hc_first[1] = b.first + B_NBASE + tensors_per_frame(m);
    return b;
}

/* ---- build, init, free ---------------------------------------------------------------- */

int model_build(gpt_model *m, const s2hc_config *c, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    if (spec_for(c, &m->spec, &m->variant, err, errlen) != 0) return -1;
    m->method = m->spec.method;
    m->L = c->n_layer;
    m->C = c->n_embd;
    m->NH = c->n_head;
    m->T = c->block_size;
    m->V = c->vocab;
    m->n = m->spec.n;
    m->Lh = 2 * m->L;
    ptable t;
    build_table(c, &m->spec, m->variant, &t);
    m->pinfo = t.v;
    m->n_tensors = t.n;
    m->n_params = t.total;
    m->n_aux = t.aux;
    m->params = calloc_check(m->n_params, sizeof(real));
    m->grads = calloc_check(m->n_params, sizeof(real));
    return 0;
}

void model_init(gpt_model *m, uint64_t seed) {
    rng_t r;
    rng_seed(&r, seed);
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * m->L);
    const int proj_normal = strcmp(m->cfg.proj_init, "normal") == 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const param_info *p = &m->pinfo[i];
        real *w = m->params + p->offset;
        const char *nm = p->name;
        size_t len = strlen(nm);
        int ends_weight = len > 7 && strcmp(nm + len - 7, ".weight") == 0;
        if (p->aux) {
            if (strstr(nm, ".proj.weight") && proj_normal)
                for (size_t k = 0; k < p->numel; k++) w[k] = (real)(std * rng_normal(&r));
            else
                memset(w, 0, p->numel * sizeof(real)); /* gain g = 0 (scale 1 + g), W = 0 */
        } else if (p->rank == 2) {
            double s = (strstr(nm, "c_proj.weight") != NULL) ? proj_std : std;
            for (size_t k = 0; k < p->numel; k++) w[k] = (real)(s * rng_normal(&r));
        } else if (ends_weight) {
            for (size_t k = 0; k < p->numel; k++) w[k] = 1; /* LayerNorm scale */
        } else {
            memset(w, 0, p->numel * sizeof(real)); /* biases */
        }
    }
    if (m->variant) {
        /* theta of each frame: the tensors after norm.weight and proj.weight are contiguous */
        for (int l = 0; l < m->L; l++) {
            block_index b = block_at(m, l);
            for (int s = 0; s < 2; s++) m->variant->init(&m->spec, &m->cfg, P(m, b.hc_first[s] + 2), l);
        }
    }
}

/* ---- activations ---------------------------------------------------------------------- */

/* Offsets of every activation inside m->acts, computed once per (config, B). */
typedef struct {
    size_t enc, streams, hc_xn, hc_rstd, hc_z, hc_pre, hc_post, hc_H, hc_cache, hc_u;
    size_t ln, ln_mean, ln_rstd, qkv, att, atty, fch, fchg, f;
    size_t xsum, lnf, lnf_mean, lnf_rstd, logits, probs, losses, total;
    /* per-sublayer strides */
    size_t s_streams, s_xn, s_rstd, s_z, s_pre, s_H, s_cache, s_u, s_ln, s_ln1, s_qkv, s_att, s_atty, s_fch, s_f;
} act_layout;

/* gradient scratch layout */
typedef struct {
    size_t dX0, dX1, dxn, dz, du, df, dcoef, dln, dqkv, datt, datty, dfch, dfchg, dxsum, dlnf, dlogits, total;
} grad_layout;

static act_layout layout_acts(const gpt_model *m, int B) {
    act_layout a;
    memset(&a, 0, sizeof a);
    size_t N = (size_t)B * m->T, C = m->C, n = m->n, Lh = m->Lh, NH = m->NH, T = m->T;
    int hc = m->variant != NULL;
    size_t K = hc ? (size_t)m->spec.K : 0, cs = hc ? (size_t)m->spec.cache : 0;
    size_t nr = hc ? (m->spec.norm == HC_NORM_STREAM ? n : 1) : 0;
    a.s_streams = N * n * C;
    a.s_xn = hc ? N * n * C : 0;
    a.s_rstd = N * nr;
    a.s_z = N * K;
    a.s_pre = hc ? N * n : 0;
    a.s_H = hc ? N * n * n : 0;
    a.s_cache = N * cs;
    a.s_u = hc ? N * C : 0;
    a.s_ln = N * C;
    a.s_ln1 = N;
    a.s_qkv = N * 3 * C;
    a.s_att = (size_t)B * NH * T * T;
    a.s_atty = N * C;
    a.s_fch = N * 4 * C;
    a.s_f = N * C;
    size_t o = 0;
#define TAKE(field, size) do { a.field = o; o += (size); } while (0)
    TAKE(enc, N * C);
    TAKE(streams, (Lh + 1) * a.s_streams);
    TAKE(hc_xn, Lh * a.s_xn);
    TAKE(hc_rstd, Lh * a.s_rstd);
    TAKE(hc_z, Lh * a.s_z);
    TAKE(hc_pre, Lh * a.s_pre);
    TAKE(hc_post, Lh * a.s_pre);
    TAKE(hc_H, Lh * a.s_H);
    TAKE(hc_cache, Lh * a.s_cache);
    TAKE(hc_u, Lh * a.s_u);
    TAKE(ln, Lh * a.s_ln);
    TAKE(ln_mean, Lh * a.s_ln1);
    TAKE(ln_rstd, Lh * a.s_ln1);
    TAKE(qkv, m->L * a.s_qkv);
    TAKE(att, m->L * a.s_att);
    TAKE(atty, m->L * a.s_atty);
    TAKE(fch, m->L * a.s_fch);
    TAKE(fchg, m->L * a.s_fch);
    TAKE(f, Lh * a.s_f);
    TAKE(xsum, N * C);
    TAKE(lnf, N * C);
    TAKE(lnf_mean, N);
    TAKE(lnf_rstd, N);
    TAKE(logits, N * m->V);
    TAKE(probs, N * m->V);
    TAKE(losses, N);
#undef TAKE
    a.total = o;
    return a;
}

static grad_layout layout_grads(const gpt_model *m, int B) {
    grad_layout g;
    memset(&g, 0, sizeof g);
    size_t N = (size_t)B * m->T, C = m->C, n = m->n, NH = m->NH, T = m->T;
    int hc = m->variant != NULL;
    size_t K = hc ? (size_t)m->spec.K : 0;
    size_t o = 0;
#define TAKE(field, size) do { g.field = o; o += (size); } while (0)
    TAKE(dX0, N * n * C);
    TAKE(dX1, N * n * C);
    TAKE(dxn, hc ? N * n * C : 0);
    TAKE(dz, N * K);
    TAKE(du, N * C);
    TAKE(df, N * C);
    TAKE(dcoef, hc ? N * (2 * n + n * n) : 0);
    TAKE(dln, N * C);
    TAKE(dqkv, N * 3 * C);
    TAKE(datt, (size_t)B * NH * T * T);
    TAKE(datty, N * C);
    TAKE(dfch, N * 4 * C);
    TAKE(dfchg, N * 4 * C);
    TAKE(dxsum, N * C);
    TAKE(dlnf, N * C);
    TAKE(dlogits, N * m->V);
#undef TAKE
    g.total = o;
    return g;
}

void model_alloc_acts(gpt_model *m, int B) {
    if (m->acts && m->B == B) return;
    free(m->acts);
    free(m->grad_acts);
    free(m->inputs);
    free(m->targets);
    free(m->dtheta_thread);
    m->B = B;
    act_layout a = layout_acts(m, B);
    grad_layout g = layout_grads(m, B);
    m->n_acts = a.total;
    m->n_grad_acts = g.total;
    m->acts = calloc_check(a.total, sizeof(real));
    m->grad_acts = calloc_check(g.total, sizeof(real));
    size_t N = (size_t)B * m->T;
    m->inputs = calloc_check(N, sizeof(int));
    m->targets = calloc_check(N, sizeof(int));
    int nth = kernels_threads();
    size_t nt = m->variant ? (size_t)m->spec.n_theta : 0;
    m->dtheta_thread = calloc_check((size_t)nth * nt + 1, sizeof(real));
}

hc_acts model_hc_acts(const gpt_model *m, int l) {
    act_layout a = layout_acts(m, m->B);
    real *A = m->acts;
    hc_acts h;
    h.X = A + a.streams + (size_t)l * a.s_streams;
    h.xn = A + a.hc_xn + (size_t)l * a.s_xn;
    h.rstd = A + a.hc_rstd + (size_t)l * a.s_rstd;
    h.z = A + a.hc_z + (size_t)l * a.s_z;
    h.pre = A + a.hc_pre + (size_t)l * a.s_pre;
    h.post = A + a.hc_post + (size_t)l * a.s_pre;
    h.H = A + a.hc_H + (size_t)l * a.s_H;
    h.cache = A + a.hc_cache + (size_t)l * a.s_cache;
    h.u = m->variant ? A + a.hc_u + (size_t)l * a.s_u : h.X;
    h.f = A + a.f + (size_t)l * a.s_f;
    return h;
}

const real *model_logits(const gpt_model *m) { return m->acts + layout_acts(m, m->B).logits; }

const param_info *model_find_param(const gpt_model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->pinfo[i].name, name) == 0) return &m->pinfo[i];
    return NULL;
}

void model_zero_grad(gpt_model *m) { memset(m->grads, 0, m->n_params * sizeof(real)); }

void model_free(gpt_model *m) {
    if (m->variant && m->variant->teardown) m->variant->teardown(&m->spec);
    free(m->pinfo);
    free(m->params);
    free(m->grads);
    free(m->acts);
    free(m->grad_acts);
    free(m->inputs);
    free(m->targets);
    free(m->dtheta_thread);
    memset(m, 0, sizeof *m);
}

/* ---- the hyper-connection frame --------------------------------------------------------- */

/* x' = X / rms * (1 + g). Flat: one rms over the n*C values of a token. Per stream: one rms
 * per stream over C, gain shared by the streams. X, xn (N, n, C); rstd (N) or (N, n). */
static void hc_norm_forward(const gpt_model *m, real *xn, real *rstd, const real *X, const real *g, size_t N) {
    const int n = m->n, C = m->C;
    const int flat = m->spec.norm == HC_NORM_FLAT;
    const size_t D = flat ? (size_t)n * C : (size_t)C;
    const size_t rows = flat ? N : N * n;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const real *x = X + r * D;
        real *y = xn + r * D;
        double ss = 0;
        for (size_t k = 0; k < D; k++) ss += (double)x[k] * x[k];
        real rs = (real)(1.0 / sqrt(ss / (double)D + RMS_EPS));
        rstd[r] = rs;
        for (size_t k = 0; k < D; k++) y[k] = x[k] * rs * ((real)1 + g[k]);
    }
}

/* Backward of hc_norm_forward: dX += ..., dg += ... (deterministic: dg by channel). */
static void hc_norm_backward(const gpt_model *m, real *dX, real *dg, const real *dxn, const real *X,
                             const real *rstd, const real *g, size_t N) {
    const int n = m->n, C = m->C;
    const int flat = m->spec.norm == HC_NORM_FLAT;
    const size_t D = flat ? (size_t)n * C : (size_t)C;
    const size_t rows = flat ? N : N * n;
#pragma omp parallel for schedule(static)
    for (size_t r = 0; r < rows; r++) {
        const real *x = X + r * D, *dy = dxn + r * D;
        real *dx = dX + r * D;
        real rs = rstd[r];
        double dot = 0; /* sum_k dyhat_k * yhat_k, yhat = x * rs, dyhat = dy * (1 + g) */
        for (size_t k = 0; k < D; k++) dot += (double)(dy[k] * ((real)1 + g[k])) * (x[k] * rs);
        real c = (real)(dot / (double)D);
        for (size_t k = 0; k < D; k++) dx[k] += rs * (dy[k] * ((real)1 + g[k]) - x[k] * rs * c);
    }
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < D; k++) {
        double acc = 0;
        for (size_t r = 0; r < rows; r++) acc += (double)dxn[r * D + k] * X[r * D + k] * rstd[r];
        dg[k] += (real)acc;
    }
}

/* Coefficients, read-out: z = x' W^T, per-token method math, u = sum_i pre[i] X[i]. */
static void hc_frame_in(const gpt_model *m, int l, size_t N) {
    block_index b = block_at(m, l / 2);
    int pi = b.hc_first[l % 2];
    const real *g = P(m, pi), *W = P(m, pi + 1), *theta = P(m, pi + 2);
    hc_acts h = model_hc_acts(m, l);
    const int n = m->n, C = m->C, K = m->spec.K, cs = m->spec.cache;
    hc_norm_forward(m, h.xn, h.rstd, h.X, g, N);
    if (m->spec.norm == HC_NORM_FLAT)
        matmul_forward(h.z, h.xn, W, NULL, N, n * C, K);
    else
        matmul_forward(h.z, h.xn, W, NULL, N * n, C, K / n);
    const hc_spec *spec = &m->spec;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        hc_forward(spec, theta, h.z + t * K, h.pre + t * n, h.post + t * n, h.H + t * n * n, h.cache + t * cs);
        const real *X = h.X + t * n * C;
        real *u = h.u + t * C;
        for (int c = 0; c < C; c++) u[c] = 0;
        for (int i = 0; i < n; i++) {
            real p = h.pre[t * n + i];
            const real *xi = X + (size_t)i * C;
            for (int c = 0; c < C; c++) u[c] += p * xi[c];
        }
    }
}

/* Write-back: X_next[i] = sum_j H[i,j] X[j] + post[i] f. */
static void hc_frame_out(const gpt_model *m, int l, real *Xnext, size_t N) {
    hc_acts h = model_hc_acts(m, l);
    const int n = m->n, C = m->C;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        const real *X = h.X + t * n * C, *H = h.H + t * n * n, *f = h.f + t * C;
        real *Y = Xnext + t * n * C;
        for (int i = 0; i < n; i++) {
            real *y = Y + (size_t)i * C;
            real q = h.post[t * n + i];
            for (int c = 0; c < C; c++) y[c] = q * f[c];
            for (int j = 0; j < n; j++) {
                real w = H[i * n + j];
                const real *xj = X + (size_t)j * C;
                for (int c = 0; c < C; c++) y[c] += w * xj[c];
            }
        }
    }
}

/* Backward of hc_frame_out: from dY (grad of X_next) -> dX (overwritten), df (overwritten),
 * dpost and dH into dcoef (N, 2n + n*n: [dpre | dpost | dH], dpre filled later). */
static void hc_frame_out_backward(const gpt_model *m, int l, const real *dY, real *dX, real *df, real *dcoef,
                                  size_t N) {
    hc_acts h = model_hc_acts(m, l);
    const int n = m->n, C = m->C, nc = 2 * n + n * n;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        const real *X = h.X + t * n * C, *H = h.H + t * n * n, *f = h.f + t * C, *dy = dY + t * n * C;
        real *dx = dX + t * n * C, *d = dcoef + t * nc, *dft = df + t * C;
        real *dpost = d + n, *dH = d + 2 * n;
        for (int c = 0; c < C; c++) dft[c] = 0;
        for (int j = 0; j < n; j++)
            for (int c = 0; c < C; c++) dx[(size_t)j * C + c] = 0;
        for (int i = 0; i < n; i++) {
            const real *dyi = dy + (size_t)i * C;
            real q = h.post[t * n + i];
            double sp = 0;
            for (int c = 0; c < C; c++) {
                sp += (double)dyi[c] * f[c];
                dft[c] += q * dyi[c];
            }
            dpost[i] = (real)sp;
            for (int j = 0; j < n; j++) {
                const real *xj = X + (size_t)j * C;
                real *dxj = dx + (size_t)j * C;
                real w = H[i * n + j];
                double s = 0;
                for (int c = 0; c < C; c++) {
                    s += (double)dyi[c] * xj[c];
                    dxj[c] += w * dyi[c];
                }
                dH[i * n + j] = (real)s;
            }
        }
    }
}

/* Backward of hc_frame_in: du -> dpre, dX += pre*du; per-token method backward -> dz, dtheta;
 * projection and norm backward -> dX, dW, dg. */
static void hc_frame_in_backward(const gpt_model *m, int l, const real *du, real *dX, real *dcoef, real *dz,
                                 real *dxn, size_t N) {
    block_index b = block_at(m, l / 2);
    int pi = b.hc_first[l % 2];
    const real *g = P(m, pi), *W = P(m, pi + 1), *theta = P(m, pi + 2);
    real *dg = G(m, pi), *dW = G(m, pi + 1), *dtheta = G(m, pi + 2);
    hc_acts h = model_hc_acts(m, l);
    const int n = m->n, C = m->C, K = m->spec.K, cs = m->spec.cache, nc = 2 * n + n * n;
    const int nt = m->spec.n_theta;
    const hc_spec *spec = &m->spec;
    int nth = kernels_threads();
    memset(m->dtheta_thread, 0, (size_t)nth * nt * sizeof(real));
    real *acc = m->dtheta_thread;
#pragma omp parallel num_threads(nth)
    {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        real *my = acc + (size_t)tid * nt;
#pragma omp for schedule(static)
        for (size_t t = 0; t < N; t++) {
            const real *X = h.X + t * n * C, *dut = du + t * C;
            real *dx = dX + t * n * C, *d = dcoef + t * nc;
            for (int i = 0; i < n; i++) {
                const real *xi = X + (size_t)i * C;
                real *dxi = dx + (size_t)i * C;
                real p = h.pre[t * n + i];
                double s = 0;
                for (int c = 0; c < C; c++) {
                    s += (double)dut[c] * xi[c];
                    dxi[c] += p * dut[c];
                }
                d[i] = (real)s;
            }
            hc_backward(spec, theta, h.z + t * K, h.cache + t * cs, d, d + n, d + 2 * n, dz + t * K, my);
        }
    }
    for (int th = 0; th < nth; th++) /* reduce in thread order: deterministic */
        for (int k = 0; k < nt; k++) dtheta[k] += acc[(size_t)th * nt + k];
    memset(dxn, 0, N * n * C * sizeof(real));
    if (m->spec.norm == HC_NORM_FLAT)
        matmul_backward(dxn, dW, NULL, dz, h.xn, W, N, n * C, K);
    else
        matmul_backward(dxn, dW, NULL, dz, h.xn, W, N * n, C, K / n);
    hc_norm_backward(m, dX, dg, dxn, h.X, h.rstd, g, N);
}

/* ---- forward -------------------------------------------------------------------------------- */

/* The Lh sublayers, from the streams already in X_0 to X_Lh. branches = 0 replaces every
 * sublayer output f by 0 (the linear residual path H_res, still with dynamic coefficients). */
static void sublayers_forward(gpt_model *m, int B, int branches) {
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C, NH = m->NH;
    const size_t N = (size_t)B * T;
    for (int l = 0; l < m->Lh; l++) {
        int blk = l / 2, is_mlp = l % 2;
        block_index b = block_at(m, blk);
        hc_acts h = model_hc_acts(m, l);
        real *Xnext = A + a.streams + (size_t)(l + 1) * a.s_streams;
        if (m->variant) hc_frame_in(m, l, N);
        real *ln = A + a.ln + l * a.s_ln, *mean = A + a.ln_mean + l * a.s_ln1, *rstd = A + a.ln_rstd + l * a.s_ln1;
        if (!branches) {
            memset(h.f, 0, N * C * sizeof(real));
        } else if (!is_mlp) {
            real *qkv = A + a.qkv + blk * a.s_qkv, *att = A + a.att + blk * a.s_att, *atty = A + a.atty + blk * a.s_atty;
            layernorm_forward(ln, mean, rstd, h.u, P(m, b.first + B_LN1W), P(m, b.first + B_LN1B), N, C);
            matmul_forward(qkv, ln, P(m, b.first + B_QKVW), P(m, b.first + B_QKVB), N, C, 3 * C);
            attention_forward(atty, att, qkv, B, T, C, NH);
            matmul_forward(h.f, atty, P(m, b.first + B_PROJW), P(m, b.first + B_PROJB), N, C, C);
        } else {
            real *fch = A + a.fch + blk * a.s_fch, *fchg = A + a.fchg + blk * a.s_fch;
            layernorm_forward(ln, mean, rstd, h.u, P(m, b.first + B_LN2W), P(m, b.first + B_LN2B), N, C);
            matmul_forward(fch, ln, P(m, b.first + B_FCW), P(m, b.first + B_FCB), N, C, 4 * C);
            gelu_forward(fchg, fch, N * 4 * C);
            matmul_forward(h.f, fchg, P(m, b.first + B_FCPW), P(m, b.first + B_FCPB), N, 4 * C, C);
        }
        if (m->variant) {
            hc_frame_out(m, l, Xnext, N);
        } else {
#pragma omp parallel for schedule(static)
            for (size_t k = 0; k < N * C; k++) Xnext[k] = h.X[k] + h.f[k];
        }
    }
    m->branches = branches;
}

real model_forward(gpt_model *m, const int *inputs, const int *targets, int B) {
    if (!m->acts || m->B != B) model_alloc_acts(m, B);
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C, n = m->n, V = m->V;
    const size_t N = (size_t)B * T;
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));

    real *enc = A + a.enc;
    encoder_forward(enc, inputs, P(m, 0), P(m, 1), B, T, C);
    real *X0 = A + a.streams; /* n copies of the embedding */
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++)
        for (int i = 0; i < n; i++) memcpy(X0 + (t * n + i) * C, enc + t * C, (size_t)C * sizeof(real));

    sublayers_forward(m, B, 1);
    real *XL = A + a.streams + (size_t)m->Lh * a.s_streams, *xsum = A + a.xsum;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        real *s = xsum + t * C;
        for (int c = 0; c < C; c++) s[c] = 0;
        for (int i = 0; i < n; i++)
            for (int c = 0; c < C; c++) s[c] += XL[(t * n + i) * C + c];
    }
    int lnf = m->n_tensors - 2;
    layernorm_forward(A + a.lnf, A + a.lnf_mean, A + a.lnf_rstd, xsum, P(m, lnf), P(m, lnf + 1), N, C);
    matmul_forward(A + a.logits, A + a.lnf, P(m, 0), NULL, N, C, V);
    if (!targets) { m->mean_loss = 0; return 0; }
    crossentropy_forward(A + a.losses, A + a.probs, A + a.logits, targets, N, V);
    double s = 0;
    size_t cnt = 0;
    for (size_t t = 0; t < N; t++)
        if (targets[t] >= 0) { s += A[a.losses + t]; cnt++; }
    m->mean_loss = (real)(cnt ? s / (double)cnt : 0);
    return m->mean_loss;
}

void model_streams_forward(gpt_model *m, const real *X0, int branches) {
    act_layout a = layout_acts(m, m->B);
    memcpy(m->acts + a.streams, X0, a.s_streams * sizeof(real));
    sublayers_forward(m, m->B, branches);
}

real *model_streams(const gpt_model *m, int l) {
    act_layout a = layout_acts(m, m->B);
    return m->acts + a.streams + (size_t)l * a.s_streams;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* Backward through the Lh sublayers: dY holds the gradient of X_Lh on entry; dX is
 * scratch of the same size. Parameter gradients accumulate. Returns the buffer (dY or
 * dX) that holds the gradient of X_0. Honours the branches flag of the last forward. */
static real *sublayers_backward(gpt_model *m, real *dY, real *dX) {
    const int B = m->B, T = m->T, C = m->C, NH = m->NH;
    const size_t N = (size_t)B * T;
    act_layout a = layout_acts(m, B);
    grad_layout gl = layout_grads(m, B);
    real *A = m->acts, *D = m->grad_acts;
    real *du = D + gl.du, *df = D + gl.df, *dln = D + gl.dln;
    for (int l = m->Lh - 1; l >= 0; l--) {
        int blk = l / 2, is_mlp = l % 2;
        block_index b = block_at(m, blk);
        hc_acts h = model_hc_acts(m, l);
        if (m->variant) {
            hc_frame_out_backward(m, l, dY, dX, df, D + gl.dcoef, N);
        } else {
            memcpy(dX, dY, N * C * sizeof(real)); /* identity path */
            memcpy(df, dY, N * C * sizeof(real));
        }
        if (!m->branches) { /* f = 0: no gradient flows into the sublayer */
            if (m->variant) {
                memset(du, 0, N * C * sizeof(real));
                hc_frame_in_backward(m, l, du, dX, D + gl.dcoef, D + gl.dz, D + gl.dxn, N);
            }
            real *tmp = dY;
            dY = dX;
            dX = tmp;
            continue;
        }
        real *ln = A + a.ln + l * a.s_ln, *mean = A + a.ln_mean + l * a.s_ln1, *rstd = A + a.ln_rstd + l * a.s_ln1;
        memset(dln, 0, N * C * sizeof(real));
        if (!is_mlp) {
            real *qkv = A + a.qkv + blk * a.s_qkv, *att = A + a.att + blk * a.s_att, *atty = A + a.atty + blk * a.s_atty;
            real *datty = D + gl.datty, *dqkv = D + gl.dqkv;
            memset(datty, 0, N * C * sizeof(real));
            memset(dqkv, 0, N * 3 * C * sizeof(real));
            matmul_backward(datty, G(m, b.first + B_PROJW), G(m, b.first + B_PROJB), df, atty,
                            P(m, b.first + B_PROJW), N, C, C);
            attention_backward(dqkv, D + gl.datt, datty, qkv, att, B, T, C, NH);
            matmul_backward(dln, G(m, b.first + B_QKVW), G(m, b.first + B_QKVB), dqkv, ln, P(m, b.first + B_QKVW), N,
                            C, 3 * C);
            if (m->variant) {
                memset(du, 0, N * C * sizeof(real));
                layernorm_backward(du, G(m, b.first + B_LN1W), G(m, b.first + B_LN1B), dln, h.u,
                                   P(m, b.first + B_LN1W), mean, rstd, N, C);
            } else {
                layernorm_backward(dX, G(m, b.first + B_LN1W), G(m, b.first + B_LN1B), dln, h.u,
                                   P(m, b.first + B_LN1W), mean, rstd, N, C);
            }
        } else {
            real *fch = A + a.fch + blk * a.s_fch, *fchg = A + a.fchg + blk * a.s_fch;
            real *dfch = D + gl.dfch, *dfchg = D + gl.dfchg;
            memset(dfchg, 0, N * 4 * C * sizeof(real));
            memset(dfch, 0, N * 4 * C * sizeof(real));
            matmul_backward(dfchg, G(m, b.first + B_FCPW), G(m, b.first + B_FCPB), df, fchg,
                            P(m, b.first + B_FCPW), N, 4 * C, C);
            gelu_backward(dfch, fch, dfchg, N * 4 * C);
            matmul_backward(dln, G(m, b.first + B_FCW), G(m, b.first + B_FCB), dfch, ln, P(m, b.first + B_FCW), N, C,
                            4 * C);
            if (m->variant) {
                memset(du, 0, N * C * sizeof(real));
                layernorm_backward(du, G(m, b.first + B_LN2W), G(m, b.first + B_LN2B), dln, h.u,
                                   P(m, b.first + B_LN2W), mean, rstd, N, C);
            } else {
                layernorm_backward(dX, G(m, b.first + B_LN2W), G(m, b.first + B_LN2B), dln, h.u,
                                   P(m, b.first + B_LN2W), mean, rstd, N, C);
            }
        }
        if (m->variant) hc_frame_in_backward(m, l, du, dX, D + gl.dcoef, D + gl.dz, D + gl.dxn, N);
        real *tmp = dY; /* dX becomes the upstream gradient of the next (earlier) sublayer */
        dY = dX;
        dX = tmp;
    }
    return dY;
}

void model_backward(gpt_model *m, real scale) {
    const int B = m->B, T = m->T, C = m->C, n = m->n, V = m->V;
    const size_t N = (size_t)B * T;
    act_layout a = layout_acts(m, B);
    grad_layout gl = layout_grads(m, B);
    real *A = m->acts, *D = m->grad_acts;
    size_t cnt = 0;
    for (size_t t = 0; t < N; t++) cnt += m->targets[t] >= 0;
    if (!cnt) return;

    real *dlogits = D + gl.dlogits, *dlnf = D + gl.dlnf, *dxsum = D + gl.dxsum;
    crossentropy_backward(dlogits, A + a.probs, m->targets, scale / (real)cnt, N, V);
    memset(dlnf, 0, N * C * sizeof(real));
    matmul_backward(dlnf, G(m, 0), NULL, dlogits, A + a.lnf, P(m, 0), N, C, V);
    int lnf = m->n_tensors - 2;
    memset(dxsum, 0, N * C * sizeof(real));
    layernorm_backward(dxsum, G(m, lnf), G(m, lnf + 1), dlnf, A + a.xsum, P(m, lnf), A + a.lnf_mean,
                       A + a.lnf_rstd, N, C);
    real *dY = D + gl.dX0, *dX = D + gl.dX1; /* grad of X_{l+1}, grad of X_l */
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++)
        for (int i = 0; i < n; i++) memcpy(dY + (t * n + i) * C, dxsum + t * C, (size_t)C * sizeof(real));

    dY = sublayers_backward(m, dY, dX);
    /* dY is the gradient of X_0 = n copies of the embedding */
    real *denc = D + gl.du;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        real *d = denc + t * C;
        for (int c = 0; c < C; c++) d[c] = 0;
        for (int i = 0; i < n; i++)
            for (int c = 0; c < C; c++) d[c] += dY[(t * n + i) * C + c];
    }
    encoder_backward(G(m, 0), G(m, 1), denc, m->inputs, B, T, C, V);
}

void model_streams_backward(gpt_model *m, const real *dXL, real *dX0) {
    grad_layout gl = layout_grads(m, m->B);
    size_t sz = (size_t)m->B * m->T * m->n * m->C;
    real *dY = m->grad_acts + gl.dX0, *dX = m->grad_acts + gl.dX1;
    memcpy(dY, dXL, sz * sizeof(real));
    real *g = sublayers_backward(m, dY, dX);
    memcpy(dX0, g, sz * sizeof(real));
}
