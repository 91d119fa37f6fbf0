/* model.c: the GPT and its hyper-connection frame on the CPU (see model.h for the math).
 * The frame's kernels (the streams' layout, the projection's products, the write-back, the
 * backward's per-token work) are kernels/cpu/hc_frame.c's; the frame's regions here run
 * them over the model's buffers.
 *
 * Layout of the work:
 *   param table   model_param_table(): every tensor's name, shape, offset, flags
 *   forward       embedding -> Lh sublayers (frame + attention or MLP) -> sum -> ln_f -> CE
 *   backward      the same in reverse; the ops add into the parameters' gradients, which the
 *                 step zeroes once (model_zero_grad); the scratch of a sublayer's activation
 *                 gradients, one set reused by every sublayer, is zeroed before each
 *                 sublayer's backward (zero_sublayer_scratch, or spread over the frame's
 *                 regions: hc_zero_cursor), and a few ops overwrite theirs (the cross-entropy,
 *                 layernorm_backward_set, the frame's dX)
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
#include "../kernels/cpu/hc_frame.h"
#include "bench.h"
#include "util.h"

/* model_amx_usable asks the kernel for the tiles' state (HC_AMX: kernels/cpu/hc_frame.h). */
#if HC_AMX
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ---- per-op timing (the bench's breakdown, bench.h) ---------------------------------- */

/* Off (NULL) unless the bench turns it on: each op boundary then costs one pointer test.
 * prof_tick(cat) charges the wall and CPU time (of all the threads, each read by itself:
 * threads_cpu_seconds) since the previous tick to cat. */
static double *prof_acc;
static double prof_last, prof_last_cpu;
void model_profile(double *acc) { prof_acc = acc; }
static double prof_cpu_now(void) { return threads_cpu_seconds(); }
static inline void prof_start(void) {
    if (!prof_acc) return;
    prof_last = now_seconds();
    prof_last_cpu = prof_cpu_now();
}
static inline void prof_tick(int cat) {
    if (!prof_acc) return;
    double t = now_seconds(), c = prof_cpu_now();
    prof_acc[cat] += t - prof_last;
    prof_acc[PROF_N + cat] += c - prof_last_cpu;
    prof_last = now_seconds(); /* the CPU clocks' own region not charged to the next op */
    prof_last_cpu = c;
}

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
#define PB(suffix, d0) /* a bias: only with model.bias */                           \
    do {                                                                          \
        if (c->bias) P(suffix, 1, d0, 0, 0);                                      \
    } while (0)
        P("ln_1.weight", 1, C, 0, 0);
        PB("ln_1.bias", C);
        P("attn.c_attn.weight", 2, 3 * C, C, 1);
        PB("attn.c_attn.bias", 3 * C);
        P("attn.c_proj.weight", 2, C, C, 1);
        PB("attn.c_proj.bias", C);
        P("ln_2.weight", 1, C, 0, 0);
        PB("ln_2.bias", C);
        P("mlp.c_fc.weight", 2, 4 * C, C, 1);
        PB("mlp.c_fc.bias", 4 * C);
        P("mlp.c_proj.weight", 2, C, 4 * C, 1);
        PB("mlp.c_proj.bias", C);
#undef PB
#undef P
        if (v) {
            snprintf(name, sizeof name, "transformer.h.%d.attn_hc", l);
            add_hc_tensors(t, name, s, v, (int)C);
            snprintf(name, sizeof name, "transformer.h.%d.mlp_hc", l);
            add_hc_tensors(t, name, s, v, (int)C);
        }
    }
    pt_add(t, "transformer.ln_f.weight", 1, C, 0, 0, 0);
    if (c->bias) pt_add(t, "transformer.ln_f.bias", 1, C, 0, 0, 0);
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

/* Tensors of one block in table order: 12 base tensors (6 without model.bias: the
 * weights alone, in the same order), then the two frames. */
enum { B_LN1W, B_LN1B, B_QKVW, B_QKVB, B_PROJW, B_PROJB, B_LN2W, B_LN2B, B_FCW, B_FCB, B_FCPW, B_FCPB, B_NBASE };

static int block_base(const gpt_model *m) { return m->cfg.bias ? B_NBASE : B_NBASE / 2; }

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
    const int base = block_base(m), per = base + 2 * tensors_per_frame(m);
    block_index b;
    b.first = 2 + l * per;
    b.hc_first[0] = b.first + base;
    b.hc_first[1] = b.first + base + tensors_per_frame(m);
    return b;
}

/* Base tensor k (B_*) of a block: its values and its gradient, NULL for a bias the model
 * does not have (the kernels skip a NULL bias and a NULL bias gradient). */
static int block_tensor(const gpt_model *m, block_index b, int k) {
    return m->cfg.bias ? b.first + k : (k & 1) ? -1 : b.first + k / 2;
}
static real *BP(const gpt_model *m, block_index b, int k) {
    const int i = block_tensor(m, b, k);
    return i < 0 ? NULL : m->params + m->pinfo[i].offset;
}
static real *BG(const gpt_model *m, block_index b, int k) {
    const int i = block_tensor(m, b, k);
    return i < 0 ? NULL : m->grads + m->pinfo[i].offset;
}
/* ln_f's weight, then its bias (-1 without model.bias): the table's last tensors */
static int lnf_weight(const gpt_model *m) { return m->n_tensors - (m->cfg.bias ? 2 : 1); }
static real *lnf_bias(const gpt_model *m, real *base) {
    return m->cfg.bias ? base + m->pinfo[m->n_tensors - 1].offset : NULL;
}

/* ---- build, init, free ---------------------------------------------------------------- */

int model_bf16_built(void) { return HC_BF16; }

const char *model_proj_products(const gpt_model *m) {
    return !m->proj_bf16 ? "fp32" : m->proj_amx ? "amx" : "vdpbf16ps";
}

int model_amx_built(void) { return HC_AMX; }

int model_amx_usable(void) {
#if HC_AMX
    static int state = -1; /* asked once per process: the grant holds for every thread */
    if (state < 0) {
        const char *e = getenv("S2HC_AMX");
        state = e && strcmp(e, "0") == 0 ? 0 : syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */,
                                                       18 /* XFEATURE_XTILEDATA */) == 0;
    }
    return state;
#else
    return 0;
#endif
}


int model_build(gpt_model *m, const s2hc_config *c, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    if (spec_for(c, &m->spec, &m->variant, err, errlen) != 0) return -1;
    m->proj_bf16 = m->variant && strcmp(c->proj_precision, "bf16") == 0;
    /* AMX takes up to 96 outputs a norm row (six tiles of sums) */
    m->proj_amx = m->proj_bf16 && model_amx_usable() &&
                  m->spec.K / (m->spec.norm == HC_NORM_FLAT ? 1 : m->spec.n) <= MODEL_AMX_MAX_OUTPUTS;
    m->stream_bf16 = m->variant && strcmp(c->stream_precision, "bf16") == 0;
    m->stream_blocks = 1;
    m->gelu_erf = strcmp(c->gelu, "erf") == 0;
    if (m->proj_bf16 && !HC_BF16) {
        snprintf(err, errlen,
                 "residual.proj_precision: bf16 needs AVX512_BF16, and this build has none (%s); use fp32",
                 REAL_IS_DOUBLE ? "the double-precision build" : "built for a CPU without it");
        return -1;
    }
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
    m->params = calloc_huge(m->n_params, sizeof(real));
    m->grads = calloc_huge(m->n_params, sizeof(real));
    if (m->variant && m->spec.norm == HC_NORM_FLAT) { /* the channel blocks' order of W's columns */
        const size_t nC = (size_t)m->n * (size_t)m->C;
        m->stream_cols = malloc_check(nC * sizeof *m->stream_cols);
        for (size_t q = 0; q < nC; q++) m->stream_cols[q] = (uint32_t)hc_xcol(m->n, m->C, q);
    }
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

/* Tokens per chunk of the frame's passes (below): per GEMM and per-token pass (32..128
 * measured alike); with bf16 streams, also the staging rows' (layout_grads). */
#define HC_CHUNK 64

/* Offsets of every activation inside m->acts, computed once per (config, B). */
typedef struct {
    size_t enc, streams, hc_rstd, hc_z, hc_pre, hc_post, hc_H, hc_cache, hc_u;
    size_t ln, ln_mean, ln_rstd, qkv, att, atty, fch, fchg, f;
    size_t xsum, lnf, lnf_mean, lnf_rstd, logits, probs, losses, total;
    /* per-sublayer strides */
    size_t s_streams, s_rstd, s_z, s_pre, s_H, s_cache, s_u, s_ln, s_ln1, s_qkv, s_att, s_atty, s_fch, s_f;
} act_layout;

/* gradient scratch layout */
typedef struct {
    size_t dX, hc_part, part_stride, part_bf16, part_stage, dz, du, df, dln, dqkv, datt, datty, dfch, dfchg, dxsum,
        dlnf, dlogits, total;
} grad_layout;

/* The bf16 parts of a thread's scratch (residual.proj_precision: bf16), in reals from
 * the part's bf16 region: the forward's W' (hc_scaled_weight_bf16), the dX pass's
 * (hc_scaled_weight_pairs_bf16), the rounded rows of hc_at_x_bf16 in the backward and of
 * hc_x_wt_bf16 in the forward, a group's dz pairs (hc_tokens_backward), and (with AMX
 * and one norm row per token) a group's dz W' (hc_dx_products_amx); each a multiple of 16
 * reals. */
typedef struct {
    size_t wf, wp, ax, zp, pz, total;
} hc_bf16_parts;
static hc_bf16_parts hc_bf16_parts_of(const gpt_model *m);

static act_layout layout_acts(const gpt_model *m, int B) {
    act_layout a;
    memset(&a, 0, sizeof a);
    size_t N = (size_t)B * m->T, C = m->C, n = m->n, Lh = m->Lh, NH = m->NH, T = m->T;
    int hc = m->variant != NULL;
    size_t K = hc ? (size_t)m->spec.K : 0, cs = hc ? (size_t)m->spec.cache : 0;
    size_t nr = hc ? (m->spec.norm == HC_NORM_STREAM ? n : 1) : 0;
    a.s_streams = N * n * C;
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
    TAKE(dX, N * n * C); /* the streams' gradient, X_Lh's then in place down to X_0's */
    TAKE(dz, N * K);
    TAKE(du, N * C);
    TAKE(df, N * C);
    TAKE(dln, N * C);
    TAKE(dqkv, N * 3 * C);
    TAKE(datt, (size_t)B * NH * T * T);
    TAKE(datty, N * C);
    TAKE(dfch, N * 4 * C);
    TAKE(dfchg, N * 4 * C);
    TAKE(dxsum, N * C);
    TAKE(dlnf, N * C);
    TAKE(dlogits, N * m->V);
    /* Last, so that no other offset depends on the thread count: the frame's per-thread
     * scratch [W' | M | dtheta] (hc_scratch), one part per thread at allocation. */
    size_t KD = !hc ? 0 : m->spec.norm == HC_NORM_FLAT ? K * n * C : K / n * C; /* Kr x D */
    const size_t fp32_part = hc ? (2 * KD + (size_t)m->spec.n_theta + 15) / 16 * 16 : 0;
    g.part_bf16 = hc && m->proj_bf16 ? fp32_part : 0; /* the bf16 region follows [W' | M | dtheta] */
    g.part_stride = fp32_part + (g.part_bf16 ? hc_bf16_parts_of(m).total : 0);
    if (hc && m->stream_bf16) { /* then, with bf16 streams, the staging rows (hc_stage_rows) */
        g.part_stage = g.part_stride;
        g.part_stride += ((size_t)HC_CHUNK * n * C + 15) / 16 * 16;
    }
    TAKE(hc_part, g.part_stride * (size_t)kernels_threads());
#undef TAKE
    g.total = o;
    return g;
}

/* Batch slices for a micro-batch of B (model_forward_backward): one per thread, when
 * train.parallel is batch, there are two or more threads and at least as many sequences;
 * else 1 (none). */
static int slices_for(const gpt_model *m, int B) {
    const int S = kernels_threads();
    return S > 1 && B >= S && strcmp(m->cfg.parallel, "ops") != 0 ? S : 1;
}

/* The activations and their gradients' buffers freed: the next forward allocates them
 * for its batch (model_forward's check of m->B). */
static void acts_release(gpt_model *m) {
    free(m->acts);
    free(m->grad_acts);
    free(m->inputs);
    free(m->targets);
    free(m->dtheta_thread);
    free(m->slice_grads);
    m->acts = m->grad_acts = m->dtheta_thread = m->slice_grads = NULL;
    m->inputs = m->targets = NULL;
    m->B = 0;
}

void model_alloc_acts(gpt_model *m, int B) {
    if (m->acts && m->B == B && m->n_slices == slices_for(m, B)) return;
    acts_release(m);
    m->B = B;
    act_layout a = layout_acts(m, B);
    grad_layout g = layout_grads(m, B);
    m->n_acts = a.total;
    m->n_grad_acts = g.total;
    /* batch slices (model_forward_backward): every activation and gradient buffer but the
     * frame's per-thread scratch is a multiple of B, so the slices' layouts tile the
     * batch's; each slice has its own scratch (S - 1 more here), and slices 1.. their own
     * parameter gradients (allocated at the first sliced step: not for evaluation) */
    const int S = slices_for(m, B);
    m->n_slices = S;
    m->slice_grads = NULL;
    m->acts = calloc_huge(a.total, sizeof(real));
    m->grad_acts = calloc_huge(g.total + (size_t)(S - 1) * (g.total - g.hc_part), sizeof(real));
    size_t N = (size_t)B * m->T;
    m->inputs = calloc_check(N, sizeof(int));
    m->targets = calloc_check(N, sizeof(int));
    m->dtheta_thread = calloc_check(1, sizeof(real)); /* unused: the partial sums live in grad_acts */
}

hc_acts model_hc_acts(const gpt_model *m, int l) {
    act_layout a = layout_acts(m, m->B);
    real *A = m->acts;
    hc_acts h;
    h.X = A + a.streams + (size_t)l * a.s_streams;
    h.xn = NULL; /* not kept: the frame folds the norm into the projection */
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
    free(m->slice_grads);
    free(m->pinfo);
    free(m->params);
    free(m->grads);
    free(m->acts);
    free(m->grad_acts);
    free(m->inputs);
    free(m->targets);
    free(m->dtheta_thread);
    free(m->stream_cols);
    memset(m, 0, sizeof *m);
}

/* ---- the hyper-connection frame --------------------------------------------------------- */

/* The frame in as few passes over the streams, and as few OpenMP regions, as it can
 * (docs/performance.md):
 *
 *   The norm is folded into the projection: with r = 1/rms(x) and W' = W diag(1 + g),
 *     z = (r x (1 + g)) W^T = r (x W'^T)
 *   so x' is never formed. Its backward, with dz the gradient of z and D the norm width:
 *     dx  = r dz W' - (r^2 / D)(dz . z) x
 *     dW += M diag(1 + g),  dg += column sums of M * W,  where M = (r dz)^T X (K x D).
 *
 *   Each thread owns a contiguous range of tokens, the same in every pass, and walks it
 *   in chunks of HC_CHUNK tokens: the chunk's product with W' (register tiles, one
 *   thread each: these skinny products are faster that way), then the per-token work on
 *   the same chunk while it is in cache. Each thread has its own copy of W' and its own
 *   partial sums (M, dtheta), in the tail of grad_acts.
 *
 *   forward:  one region between two sublayers, per chunk of 64 tokens: write-back of
 *             sublayer l (X' = H X + post f, and the rms of X'), then sublayer l + 1's
 *             coefficients (GEMM z = X' W'^T, z *= r, method forward, u = pre . X')
 *             while the chunk's rows of X' are in cache; the first region also writes
 *             X_0's copies of the embedding, the last the sum of X_Lh's streams
 *   backward: one region per sublayer: per chunk, per group of 16 tokens (while a
 *             token's dots run, the next token's rows and method cache prefetched):
 *             dpost, dH, dpre (dots with dY, X, f, du), method backward in lanes, dz *= r, then in one pass over
 *             the group, a few tokens at a time (each row of W' loaded serves them
 *             all): dX = H^T dY + pre du - c X + dz W' and the previous sublayer's
 *             df = post . dX (sublayer 0: the sum of dX's streams); per larger chunk
 *             the thread's M += dz^T X; after a barrier dW, dg from the threads' M.
 *             The last sublayer's df comes from a region of its own, which also
 *             writes dX_Lh's copies of the gradient of the streams' sum.
 *
 * The kernels these regions call (kernels/cpu/hc_frame.c) take pointers and sizes; the
 * regions here know the model: its parameter table, its activations and the scratch at
 * the end of grad_acts. Sums over threads (M, dtheta) are added in thread order:
 * bit-identical for a given thread count. */

#define HC_CHUNK_M 256               /* tokens per M = dz^T X product (64: slower; 256..all alike) */
_Static_assert(HC_CHUNK % HC_LANES == 0 && HC_CHUNK_M % HC_LANES == 0,
               "the frame's chunks start whole groups of HC_LANES tokens (hc_range)");
#define HC_CHUNK_W_MAX (256 * 1024)  /* larger W' (reals): one product per thread (W' read once) */
#define HC_COL_BLOCK 64              /* columns per task of the dW, dg update */

/* Norm rows of the streams: the flat norm has one row of n*C values per token; the
 * per-stream norm one row of C values per (token, stream). */
static inline int hc_rows_per_token(const gpt_model *m) { return m->spec.norm == HC_NORM_FLAT ? 1 : m->n; }

/* The frame's parameters of sublayer l (hc_params: kernels/cpu/hc_frame.h). */
static hc_params hc_params_of(const gpt_model *m, int l) {
    block_index b = block_at(m, l / 2);
    int pi = b.hc_first[l % 2];
    hc_params p = {P(m, pi), P(m, pi + 1), P(m, pi + 2), G(m, pi), G(m, pi + 1), G(m, pi + 2)};
    return p;
}

/* The frame's sizes for this model (hc_dims: kernels/cpu/hc_frame.h). */
static hc_dims hc_dims_of(const gpt_model *m) {
    hc_dims d;
    d.n = m->n;
    d.C = m->C;
    d.K = m->spec.K;
    d.rpt = hc_rows_per_token(m);
    d.Kr = d.K / d.rpt;
    d.nt = m->spec.n_theta;
    d.nC = (size_t)d.n * d.C;
    d.D = d.nC / (size_t)d.rpt;
    d.KD = (size_t)d.Kr * d.D;
    d.blk = m->stream_blk_on && d.rpt == 1;
    d.cols = d.blk ? m->stream_cols : NULL;
    return d;
}

static hc_bf16_parts hc_bf16_parts_of(const gpt_model *m) {
    const hc_dims d = hc_dims_of(m);
    const size_t nj = d.rpt == 1 ? (size_t)d.n : 1, C = (size_t)d.C, C0 = C / HC_VL * HC_VL;
    const size_t Kr = (size_t)d.Kr, Kp = (Kr + 1) / 2;
    const size_t ax = hc_at_x_bf16_scratch(d.Kr, d.D), xw = hc_x_wt_bf16_scratch(d.D); /* one region, both */
    size_t sz[5] = {hc_w_bf16_scratch(d.Kr, d.D), Kp * nj * C0 + Kr * nj * (C - C0), hc_max_size(ax, xw),
                    (size_t)HC_LANES * (size_t)d.rpt * Kp, 0};
    if (HC_AMX && d.rpt == 1) { /* the dX pass's products by tiles: W', dz, the products */
        const size_t kw = 16 * (size_t)hc_amx_kq(d.Kr), pr = hc_amx_pz_row(d.nC);
        sz[1] = hc_max_size(sz[1], pr * kw);
        sz[3] = hc_max_size(sz[3], 16 * kw);
        sz[4] = 16 * pr;
    }
    size_t o[5], t = 0;
    for (int i = 0; i < 5; i++) {
        o[i] = t;
        t += (sz[i] + 15) / 16 * 16;
    }
    hc_bf16_parts p = {o[0], o[1], o[2], o[3], o[4], t};
    return p;
}

/* Per-thread scratch in the tail of grad_acts: part p of `nparts` is [W' | M | dtheta]
 * (Kr*D, Kr*D, n_theta reals) at base + p * stride; W' by rows in the forward
 * (hc_scaled_weight), in dX's blocks in the backward (hc_scaled_weight_blocks). With
 * residual.proj_precision bf16, a bf16 region follows (hc_bf16_parts) whose W' copies and
 * scratch the products take instead. */
typedef struct {
    real *base;
    int nparts;
    size_t stride, bf16; /* bf16: the offset in a part of its bf16 region (hc_bf16_parts), 0 without */
    hc_bf16_parts bp;
    size_t stage;        /* the offset in a part of its staging rows (hc_stage_rows); 0: fp32 streams */
} hc_scratch;

/* The scratch allocated with the activations (layout_grads sizes it); stage only while
 * a training step stores the streams in bf16 (stream_bf16_on). */
static hc_scratch hc_scratch_of(const gpt_model *m, const grad_layout *gl) {
    hc_scratch s = {m->grad_acts + gl->hc_part, 0, gl->part_stride, gl->part_bf16, {0},
                    m->stream_bf16_on ? gl->part_stage : 0};
    if (s.bf16) s.bp = hc_bf16_parts_of(m);
    if (gl->part_stride) s.nparts = (int)((m->n_grad_acts - gl->hc_part) / gl->part_stride);
    return s;
}

/* Threads for a frame region: at most the parts allocated (the thread count may have
 * dropped since model_alloc_acts, never risen past it). */
static int hc_threads(const hc_scratch *s) { return kernels_threads() < s->nparts ? kernels_threads() : s->nparts; }

/* Tokens per chunk: HC_CHUNK, or the thread's whole range when W' is large (each chunk's
 * projection reads all of W' again, which past HC_CHUNK_W_MAX would cost more than the
 * chunk's work; set when OpenBLAS ran the projection and packed W' at every call), but
 * with bf16 streams (staged by chunk). */
static size_t hc_chunk(const hc_dims *d, const hc_scratch *s, size_t N) {
    return d->KD <= HC_CHUNK_W_MAX || s->stage ? HC_CHUNK : N;
}

static inline int hc_tid(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* Inside a region: this thread's staging rows (HC_CHUNK tokens' n C values, a chunk of X
 * in fp32) while the training step stores the streams in bf16; NULL with fp32 streams. */
static real *hc_stage_rows(const hc_scratch *s) {
    return s->stage ? s->base + (size_t)hc_tid() * s->stride + s->stage : NULL;
}

static inline int hc_nthreads(void) {
#ifdef _OPENMP
    return omp_get_num_threads();
#else
    return 1;
#endif
}

/* This thread's token range [t0, t1): contiguous, the same in every frame region, its
 * ends at multiples of HC_LANES (but N's): the method cache of every whole group of
 * HC_LANES tokens is kept in lanes (hc_forward_tokens), so the forward and the backward
 * must group the tokens alike, whatever the threads. */
static inline void hc_range(size_t N, size_t *t0, size_t *t1) {
    const size_t tid = (size_t)hc_tid(), nth = (size_t)hc_nthreads(), L = HC_LANES;
    *t0 = N * tid / nth / L * L;
    *t1 = tid + 1 == nth ? N : N * (tid + 1) / nth / L * L;
}

/* Coefficients and read-out of sublayer l for the chunk [c0, c1) (rstd in place), with
 * W' already in Wg and the chunk's rows of X_l at X: z = r (X W'^T), per-token method
 * math, u = sum_i pre[i] X[i]. xs: the scratch of hc_x_wt_bf16 (with proj_bf16). */
static void hc_in_chunk(const gpt_model *m, int l, const real *Wg, const real *X, size_t c0, size_t c1, real *xs) {
    hc_params p = hc_params_of(m, l);
    hc_acts h = model_hc_acts(m, l);
    hc_dims d = hc_dims_of(m);
    const int n = d.n, K = d.K, cs = m->spec.cache;
#if HC_BF16
    if (m->proj_bf16) hc_x_wt_bf16(h.z + c0 * K, X, Wg, (c1 - c0) * d.rpt, d.Kr, d.D, xs, m->proj_amx);
    else
#else
    (void)xs;
#endif
        hc_x_wt(h.z + c0 * K, X, Wg, (c1 - c0) * d.rpt, d.Kr, d.D);
    for (size_t t = c0; t < c1; t++) {
        real *z = h.z + t * K;
        for (int r = 0; r < d.rpt; r++) {
            const real rs = h.rstd[t * d.rpt + r];
            for (int k = 0; k < d.Kr; k++) z[r * d.Kr + k] *= rs;
        }
    }
    hc_forward_tokens(&m->spec, p.theta, h.z + c0 * K, (int)(c1 - c0), h.pre + c0 * n, h.post + c0 * n,
                      h.H + c0 * n * n, h.cache + c0 * cs);
    if (m->hres_fixed && m->hres_fixed_on[l]) /* s2hc ablate: one matrix for every token */
        for (size_t t = c0; t < c1; t++)
            memcpy(h.H + t * n * n, m->hres_fixed + (size_t)l * n * n, (size_t)n * n * sizeof(real));
    for (size_t t = c0; t < c1; t++) hc_combine(h.u + t * d.C, h.pre + t * n, X + (t - c0) * d.nC, n, d.C, d.blk);
}

/* The bf16 storage of X_l (l in [0, Lh]). */
static uint16_t *hc_streams_bf16(const gpt_model *m, int l) { return (uint16_t *)model_streams(m, l); }

/* Write-back of sublayer l for tokens [t0, t1): X_next[i] = sum_j H[i,j] X[j] + post[i] f;
 * with rstd_next, also the rstd of X_next's norm rows while they are in cache; with sum,
 * also sum = X_next[0] + ... + X_next[n-1] (the last sublayer: the input of the final
 * LayerNorm). With st, the staging rows (bf16 streams), X_l is read from its bf16
 * storage, and token t's row of X_next goes rounded to X_{l+1}'s bf16 storage and to
 * st + (t - t0) n C (Xnext unused). */
static void hc_out_range(const gpt_model *m, int l, real *Xnext, real *rstd_next, real *sum, size_t t0, size_t t1,
                         real *st) {
    hc_acts h = model_hc_acts(m, l);
    hc_dims d = hc_dims_of(m);
    const int n = d.n, C = d.C;
    const uint16_t *Xb = st ? hc_streams_bf16(m, l) : NULL;
    uint16_t *Yb = st ? hc_streams_bf16(m, l + 1) : NULL;
    for (size_t t = t0; t < t1; t++) {
        real *Y = st ? st + (t - t0) * d.nC : Xnext + t * d.nC;
        if (st) {
            hc_out_token(n, 1, C, d.blk, Xb + t * d.nC, h.f + t * C, h.H + t * n * n, h.post + t * n, Y);
            hc_bf16_narrow(Yb + t * d.nC, Y, d.nC);
        } else {
            hc_out_token(n, 0, C, d.blk, h.X + t * d.nC, h.f + t * C, h.H + t * n * n, h.post + t * n, Y);
            if (m->round_streams) hc_round_streams(Y, d.nC);
        }
        if (rstd_next)
            for (int r = 0; r < d.rpt; r++) rstd_next[t * d.rpt + r] = hc_rstd_of(Y + r * d.D, d.D);
        if (sum) hc_combine(sum + t * C, hc_ones, Y, n, C, d.blk);
    }
}

/* One region between sublayers: the write-back of sublayer l_out (l_out < 0: none, the
 * rstd of X_0 instead), then the coefficients and read-out of sublayer l_in (< 0: none),
 * chunk by chunk, so that the coefficient GEMM reads the rows of X_{l_in} the write-back
 * has just left in cache. The ends of the stack, when given: X_0 = n copies of enc (its
 * rows written before their rstd), and sum = the sum of X_Lh's streams (the last
 * write-back). */
static void hc_frames_forward(const gpt_model *m, int l_out, int l_in, const hc_scratch *s, size_t N, const real *enc,
                              real *sum) {
    hc_dims d = hc_dims_of(m);
    const size_t chunk = hc_chunk(&d, s, N);
#pragma omp parallel num_threads(hc_threads(s))
    {
        size_t t0, t1;
        hc_range(N, &t0, &t1);
        real *Wg = s->base + (size_t)hc_tid() * s->stride;
        real *xs = s->bf16 ? Wg + s->bf16 + s->bp.ax : NULL; /* the backward's hc_at_x_bf16 rows, free here */
        real *st = hc_stage_rows(s);
        real *Xnext = l_out >= 0 ? model_streams(m, l_out + 1) : NULL;
        real *rstd_in = l_in >= 0 ? model_hc_acts(m, l_in).rstd : NULL;
        if (l_in >= 0) {
            hc_params p = hc_params_of(m, l_in);
#if HC_BF16
            if (s->bf16) { /* W' in bf16 (hc_in_chunk takes it so with proj_bf16) */
                Wg += s->bf16 + s->bp.wf;
                hc_scaled_weight_bf16(Wg, &p, &d, m->proj_amx);
            } else
#endif
            {
                hc_scaled_weight(Wg, &p, &d);
                /* bf16 streams take W' in bf16 for z = X W'^T (as the cuda backend's do) */
                if (m->round_streams || st) hc_round_streams(Wg, (size_t)d.Kr * d.D);
            }
        }
        for (size_t c0 = t0; c0 < t1; c0 += chunk) {
            const size_t c1 = c0 + chunk < t1 ? c0 + chunk : t1;
            /* the chunk's rows of X_{l_in}: in the streams, or (bf16) in the staging rows */
            real *Xc = st ? st : model_streams(m, l_out + 1) + c0 * d.nC;
            if (l_out >= 0) {
                hc_out_range(m, l_out, Xnext, rstd_in, sum, c0, c1, st);
            } else {
                real *rstd = model_hc_acts(m, 0).rstd;
                uint16_t *Xb = st ? hc_streams_bf16(m, 0) + c0 * d.nC : NULL;
                if (enc)
                    for (size_t t = c0; t < c1; t++)
                        hc_spread(Xc + (t - c0) * d.nC, enc + t * d.C, d.n, d.C, d.blk);
                else if (st) /* X_0 as the caller left it, in bf16 */
                    hc_bf16_widen(Xc, Xb, (c1 - c0) * d.nC);
                if (enc && st) hc_bf16_narrow(Xb, Xc, (c1 - c0) * d.nC);
                else if (enc && m->round_streams) hc_round_streams(Xc, (c1 - c0) * d.nC);
                for (size_t r = 0; r < (c1 - c0) * d.rpt; r++) rstd[c0 * d.rpt + r] = hc_rstd_of(Xc + r * d.D, d.D);
            }
            if (l_in >= 0) hc_in_chunk(m, l_in, Wg, Xc, c0, c1, xs);
        }
    }
    prof_tick(PROF_HC_FRAME);
}

/* This thread's share of the gradient scratch that sublayer l's backward adds into (its
 * kernels add), as a cursor that zeroes it a piece at a time (hc_zero_next): the frame's
 * backward spreads it over its tokens (hc_tokens_backward), the rest zero it at once
 * (zero_sublayer_scratch). du, the LayerNorm's input gradient of the methods with a
 * frame, needs none: that LayerNorm writes it (layernorm_backward_set). */
static hc_zero_cursor hc_zero_share(const gpt_model *m, const grad_layout *gl, int l, size_t N) {
    real *D = m->grad_acts;
    const size_t C = (size_t)m->C, tid = (size_t)hc_tid(), nth = (size_t)hc_nthreads();
    const size_t off[3] = {gl->dln, l % 2 ? gl->dfchg : gl->datty, l % 2 ? gl->dfch : gl->dqkv};
    const size_t len[3] = {N * C, l % 2 ? 4 * N * C : N * C, l % 2 ? 4 * N * C : 3 * N * C};
    hc_zero_cursor z = {.k = 0};
    for (int k = 0; k < 3; k++) {
        const size_t lo = len[k] * tid / nth, hi = len[k] * (tid + 1) / nth;
        z.p[k] = D + off[k] + lo;
        z.left[k] = hi - lo;
    }
    return z;
}

/* Inside a region: zero this thread's share of sublayer l's gradient scratch. */
static void zero_sublayer_scratch(const gpt_model *m, const grad_layout *gl, int l, size_t N) {
    hc_zero_cursor z = hc_zero_share(m, gl, l, N);
    hc_zero_next(&z, SIZE_MAX);
}

/* One region: df = sum_i post[i] dY[i] (overwritten), the gradient into sublayer l's
 * output; and the scratch of sublayer l's backward zeroed. With g, first dY[i] = g for
 * every stream (the gradient of X_Lh from that of the sum of its streams). */
static void hc_frame_out_backward(const gpt_model *m, int l, real *dY, const real *g, real *df,
                                  const grad_layout *gl, size_t N) {
    hc_acts h = model_hc_acts(m, l);
    const int n = m->n, C = m->C, blk = hc_dims_of(m).blk;
#pragma omp parallel
    {
        size_t t0, t1;
        hc_range(N, &t0, &t1);
        for (size_t t = t0; t < t1; t++) {
            if (g) hc_spread(dY + t * n * C, g + t * C, n, C, blk);
            hc_combine(df + t * C, h.post + t * n, dY + t * n * C, n, C, blk);
        }
        zero_sublayer_scratch(m, gl, l, N);
    }
    prof_tick(PROF_HC_FRAME);
}

/* The dX pass's kind (hc_dx_kind: kernels/cpu/hc_frame.h) for this model. */
static hc_dx_kind hc_dx_kind_of(const gpt_model *m, const hc_dims *d) {
    if (!m->proj_bf16) return HC_DX_FP32;
    if (!m->proj_amx) return HC_DX_PAIRS;
    return d->rpt == 1 && d->Kr > 16 ? HC_DX_TILES : HC_DX_ROUNDED;
}

/* Where thread tid keeps W' for the dX pass: its part's fp32 W' (HC_DX_FP32, HC_DX_ROUNDED)
 * or its bf16 region's (the pairs or the tiles' layout). */
static real *hc_dx_weights_at(hc_dx_kind kind, const hc_scratch *s, int tid) {
    real *part = s->base + (size_t)tid * s->stride;
    return kind == HC_DX_PAIRS || kind == HC_DX_TILES ? part + s->bf16 + s->bp.wp : part;
}

/* The frame's backward for sublayer l, given dY (gradient of X_{l+1}) and du (gradient
 * of the read-out; NULL: zero): dX (overwritten; may be dY itself, as the model passes
 * it), dW, dg, dtheta (added). With df_prev, also df_prev = sum_i post_{l-1}[i] dX[i],
 * the gradient into sublayer l - 1's output, in the pass that writes dX, and the scratch of
 * sublayer l - 1's backward zeroed (gl). With dsum (sublayer 0), also dsum = the sum of
 * dX's streams (the gradient of the embedding that X_0 copies n times). dz (N, K) is
 * scratch. One region. */
static void hc_frame_in_backward(const gpt_model *m, int l, const real *dY, const real *du, real *dX, real *df_prev,
                                 real *dsum, real *dz, const hc_scratch *s, const grad_layout *gl, size_t N) {
    hc_params p = hc_params_of(m, l);
    hc_acts h = model_hc_acts(m, l);
    const real *post_prev = df_prev ? model_hc_acts(m, l - 1).post : NULL;
    hc_dims d = hc_dims_of(m);
    const size_t chunk = hc_chunk(&d, s, N), mchunk = s->stage ? chunk : chunk < N ? HC_CHUNK_M : N;
#pragma omp parallel num_threads(hc_threads(s))
    {
        const int nthr = hc_nthreads();
        real *part = s->base + (size_t)hc_tid() * s->stride, *myM = part + d.KD, *myth = myM + d.KD;
        real *bf = s->bf16 ? part + s->bf16 : NULL; /* the bf16 region (proj_bf16) */
        memset(myM, 0, (d.KD + (size_t)d.nt) * sizeof(real));
        const hc_dx_kind kind = hc_dx_kind_of(m, &d);
        real *Wb = hc_dx_weights_at(kind, s, hc_tid());
        hc_dx_weights(kind, Wb, &p, &d);
        real *pz = kind == HC_DX_TILES ? bf + s->bp.pz : NULL; /* the group's products (tiles) */
        /* dz's pairs (vdpbf16ps) or the tiles' A operand */
        uint32_t *zp = kind == HC_DX_PAIRS || kind == HC_DX_TILES ? (uint32_t *)(bf + s->bp.zp) : NULL;
        size_t t0, t1;
        hc_range(N, &t0, &t1);
        /* sublayer l - 1's scratch zeroed a piece per token (a multiple of 16 reals) while
           the tokens' work runs, not in a pass of its own (docs/performance.md, item 29) */
        hc_zero_cursor zc = {.k = 3};
        size_t zper = 0;
        if (df_prev) {
            zc = hc_zero_share(m, gl, l - 1, N);
            const size_t tot = zc.left[0] + zc.left[1] + zc.left[2];
            zper = t1 > t0 ? ((tot + (t1 - t0) - 1) / (t1 - t0) + 15) / 16 * 16 : 0;
        }
        for (size_t s0 = t0; s0 < t1; s0 += mchunk) {
            const size_t s1 = s0 + mchunk < t1 ? s0 + mchunk : t1;
            /* the rows of X_l for [s0, s1): in the streams, or widened from bf16 into the
               staging rows (then mchunk = chunk: one chunk) */
            real *rows = hc_stage_rows(s);
            const uint16_t *Xb = rows ? hc_streams_bf16(m, l) : NULL;
            real *Xs = rows ? rows : h.X + s0 * d.nC;
            for (size_t c0 = s0; c0 < s1; c0 += chunk) {
                const size_t c1 = c0 + chunk < s1 ? c0 + chunk : s1;
                /* with dX, df of l - 1 (or sublayer 0's dsum, which may be du itself: each
                   block of a token's du is read before its dsum is written); with bf16
                   streams the rows widened into the staging rows a token ahead of their use,
                   while a token's dots run (a pass of its own before the chunk had waited
                   on memory: log item 49) */
                hc_tokens_backward(&m->spec, &p, &h, &d, c0, c1, Xs + (c0 - s0) * d.nC, Xb ? Xb + c0 * d.nC : NULL, dY,
                                   du, dX, dz, Wb,
                                   df_prev ? post_prev : NULL, df_prev ? df_prev : dsum, myth, df_prev ? &zc : NULL,
                                   zper, zp, pz, kind == HC_DX_ROUNDED);
            }
            /* M += (r dz)^T X over the larger chunk (fewer, longer products: measured faster) */
#if HC_BF16
            if (bf) hc_at_x_bf16(myM, dz + s0 * d.K, Xs, (s1 - s0) * d.rpt, d.Kr, d.D, bf + s->bp.ax, m->proj_amx);
            else
#endif
                hc_at_x(myM, dz + s0 * d.K, Xs, (s1 - s0) * d.rpt, d.Kr, d.D);
        }
        if (df_prev) hc_zero_next(&zc, SIZE_MAX); /* what the tokens' pieces left */
#pragma omp barrier
        /* dW += (sum of M) diag(1 + g), dg += column sums of (sum of M) * W, by column
         * blocks; dtheta (other values) by thread 0 meanwhile: no barrier until the end */
        const size_t nblocks = (d.D + HC_COL_BLOCK - 1) / HC_COL_BLOCK;
#pragma omp for schedule(static) nowait
        for (size_t blk = 0; blk < nblocks; blk++) {
            const size_t j0 = blk * HC_COL_BLOCK, len = d.D - j0 < HC_COL_BLOCK ? d.D - j0 : HC_COL_BLOCK;
            real acc[HC_COL_BLOCK] = {0}, msum[HC_COL_BLOCK];
            for (int k = 0; k < d.Kr; k++) {
                const size_t o = (size_t)k * d.D + j0;
                for (size_t j = 0; j < len; j++) msum[j] = s->base[d.KD + o + j];
                for (int th = 1; th < nthr; th++)
                    for (size_t j = 0; j < len; j++) msum[j] += s->base[(size_t)th * s->stride + d.KD + o + j];
                for (size_t j = 0; j < len; j++) { /* M's columns in the streams' order: back to W's */
                    const size_t c = d.blk ? d.cols[j0 + j] : j0 + j, ow = (size_t)k * d.D + c;
                    p.dW[ow] += msum[j] * ((real)1 + p.g[c]);
                    acc[j] += msum[j] * p.W[ow];
                }
            }
            for (size_t j = 0; j < len; j++) p.dg[d.blk ? d.cols[j0 + j] : j0 + j] += acc[j];
        }
        if (hc_tid() == 0)
            for (int th = 0; th < nthr; th++) /* dtheta in thread order */
                for (int k = 0; k < d.nt; k++) p.dtheta[k] += s->base[(size_t)th * s->stride + 2 * d.KD + k];
    }
    prof_tick(PROF_HC_FRAME);
}

/* ---- forward -------------------------------------------------------------------------------- */

/* The Lh sublayers, from the streams in X_0 to X_Lh. branches = 0 replaces every sublayer
 * output f by 0 (the linear residual path H_res, still with dynamic coefficients). With a
 * frame, enc and xsum (or NULL) are its ends: X_0 = n copies of enc is written by the
 * first frame region (else X_0 is already there), xsum = the sum of X_Lh's streams by
 * the last. With kv (decoding): one token per sequence, at position pos, in the first B
 * rows of every buffer; attention reads the earlier tokens' keys and values from kv.
 * resume >= 0 (no kv): from sublayer resume's write-back (rc: its add) on, everything before
 * it (its coefficients, H_res and branch output included) as the last forward left it. */
static void sublayers_forward(gpt_model *m, int B, int branches, const real *enc, real *xsum, const model_kv *kv,
                              int pos, int resume) {
    act_layout a = layout_acts(m, B);
    grad_layout gl = layout_grads(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C, NH = m->NH;
    const size_t N = kv ? (size_t)B : (size_t)B * T;
    void (*const mm)(real *, const real *, const real *, const real *, size_t, int, int) =
        kv ? matmul_forward_rows : matmul_forward;
    hc_scratch hs = hc_scratch_of(m, &gl);
    if (m->variant && resume < 0) /* X_0 and its rms, sublayer 0's coefficients */
        hc_frames_forward(m, -1, 0, &hs, N, enc, NULL);
    for (int l = resume < 0 ? 0 : resume; l < m->Lh; l++) {
        int blk = l / 2, is_mlp = l % 2;
        block_index b = block_at(m, blk);
        hc_acts h = model_hc_acts(m, l);
        real *Xnext = A + a.streams + (size_t)(l + 1) * a.s_streams;
        real *ln = A + a.ln + l * a.s_ln, *mean = A + a.ln_mean + l * a.s_ln1, *rstd = A + a.ln_rstd + l * a.s_ln1;
        if (l == resume) {
            /* its branch output f as the last forward left it (model_forward_resume) */
        } else if (!branches || (m->branch_off && m->branch_off[l])) {
            memset(h.f, 0, N * C * sizeof(real));
        } else if (!is_mlp) {
            real *qkv = A + a.qkv + blk * a.s_qkv, *att = A + a.att + blk * a.s_att, *atty = A + a.atty + blk * a.s_atty;
            layernorm_forward(ln, mean, rstd, h.u, BP(m, b, B_LN1W), BP(m, b, B_LN1B), N, C);
            prof_tick(PROF_LAYERNORM);
            mm(qkv, ln, BP(m, b, B_QKVW), BP(m, b, B_QKVB), N, C, 3 * C);
            prof_tick(PROF_MATMUL);
            if (kv) {
                const size_t cache = (size_t)blk * B * kv->T * C; /* block blk's (B, T, C) */
                attention_decode(atty, qkv, kv->k + cache, kv->v + cache, B, pos, kv->T, C, NH);
            } else
                attention_forward(atty, att, qkv, B, T, C, NH);
            prof_tick(PROF_ATTENTION);
            mm(h.f, atty, BP(m, b, B_PROJW), BP(m, b, B_PROJB), N, C, C);
            prof_tick(PROF_MATMUL);
        } else {
            real *fch = A + a.fch + blk * a.s_fch, *fchg = A + a.fchg + blk * a.s_fch;
            layernorm_forward(ln, mean, rstd, h.u, BP(m, b, B_LN2W), BP(m, b, B_LN2B), N, C);
            prof_tick(PROF_LAYERNORM);
            mm(fch, ln, BP(m, b, B_FCW), BP(m, b, B_FCB), N, C, 4 * C);
            prof_tick(PROF_MATMUL);
            (m->gelu_erf ? gelu_erf_forward : gelu_forward)(fchg, fch, N * 4 * C);
            prof_tick(PROF_GELU);
            mm(h.f, fchg, BP(m, b, B_FCPW), BP(m, b, B_FCPB), N, 4 * C, C);
            prof_tick(PROF_MATMUL);
        }
        if (m->variant) {
            const int last = l + 1 == m->Lh; /* write-back, next coefficients (last: the sum) */
            hc_frames_forward(m, l, last ? -1 : l + 1, &hs, N, NULL, last ? xsum : NULL);
        } else {
#pragma omp parallel for simd schedule(static)
            for (size_t k = 0; k < N * C; k++) Xnext[k] = h.X[k] + h.f[k];
            prof_tick(PROF_EMBED_LOSS);
        }
    }
    m->branches = branches;
}

/* The final LayerNorm of xsum and the LM head's logits (N rows). */
static void head_forward(gpt_model *m, int B, size_t N, const model_kv *kv) {
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int lnf = lnf_weight(m);
    layernorm_forward(A + a.lnf, A + a.lnf_mean, A + a.lnf_rstd, A + a.xsum, P(m, lnf), lnf_bias(m, m->params), N,
                      m->C);
    prof_tick(PROF_LAYERNORM);
    (kv ? matmul_forward_rows : matmul_forward)(A + a.logits, A + a.lnf, P(m, 0), NULL, N, m->C, m->V);
    prof_tick(PROF_MATMUL);
}

/* The loss of the logits against targets (NULL: none, 0), the mean over the valid ones. */
static real forward_loss(gpt_model *m, const int *targets, size_t N) {
    act_layout a = layout_acts(m, m->B);
    real *A = m->acts;
    if (!targets) { m->mean_loss = 0; return 0; }
    crossentropy_forward(A + a.losses, A + a.probs, A + a.logits, targets, N, m->V);
    double s = 0;
    size_t cnt = 0;
    for (size_t t = 0; t < N; t++)
        if (targets[t] >= 0) { s += A[a.losses + t]; cnt++; }
    m->mean_loss = (real)(cnt ? s / (double)cnt : 0);
    prof_tick(PROF_EMBED_LOSS);
    return m->mean_loss;
}

/* rc: its one stream X_Lh copied into xsum, the final LayerNorm's input (N rows). */
static void rc_stream_out(gpt_model *m, int B, size_t N) {
    act_layout a = layout_acts(m, B);
    const size_t C = (size_t)m->C;
    const real *XL = m->acts + a.streams + (size_t)m->Lh * a.s_streams;
    real *xsum = m->acts + a.xsum;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) memcpy(xsum + t * C, XL + t * C, C * sizeof(real));
    prof_tick(PROF_HC_STREAMS);
}

/* From the embeddings in the activations' enc rows (N of them: B T, or B decoding with
 * kv) to the logits: the streams, the sublayers, the final LayerNorm and the LM head. */
static void forward_from_enc(gpt_model *m, int B, size_t N, const model_kv *kv, int pos) {
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int C = m->C;
    real *enc = A + a.enc, *X0 = A + a.streams, *xsum = A + a.xsum;
    if (m->variant) { /* the frame's first and last regions write X_0 and xsum */
        sublayers_forward(m, B, 1, enc, xsum, kv, pos, -1);
    } else { /* rc: one stream, copied in and out */
#pragma omp parallel for schedule(static)
        for (size_t t = 0; t < N; t++) memcpy(X0 + t * C, enc + t * C, (size_t)C * sizeof(real));
        prof_tick(PROF_HC_STREAMS);
        sublayers_forward(m, B, 1, NULL, NULL, kv, pos, -1);
        rc_stream_out(m, B, N);
    }
    head_forward(m, B, N, kv);
}

real model_forward(gpt_model *m, const int *inputs, const int *targets, int B) {
    if (!m->acts || m->B != B) model_alloc_acts(m, B);
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C;
    const size_t N = (size_t)B * T;
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));

    prof_start();
    encoder_forward(A + a.enc, inputs, P(m, 0), P(m, 1), B, T, C);
    prof_tick(PROF_EMBED_LOSS);
    forward_from_enc(m, B, N, NULL, 0);
    return forward_loss(m, targets, N);
}

real model_forward_resume(gpt_model *m, int l, const int *targets) {
    const size_t N = (size_t)m->B * m->T, nn = (size_t)m->n * m->n;
    if (!m->acts || l < 0 || l >= m->Lh)
        die(70, "internal error: model_forward_resume at sublayer %d of %d (no forward before it)", l, m->Lh);
    if (targets) memcpy(m->targets, targets, N * sizeof(int));
    prof_start();
    hc_acts h = model_hc_acts(m, l);
    if (m->variant && m->hres_fixed && m->hres_fixed_on[l]) /* sublayer l's H_res, as hc_in_chunk sets it */
        for (size_t t = 0; t < N; t++) memcpy(h.H + t * nn, m->hres_fixed + (size_t)l * nn, nn * sizeof(real));
    if (m->branch_off && m->branch_off[l]) memset(h.f, 0, N * m->C * sizeof(real)); /* as sublayers_forward */
    sublayers_forward(m, m->B, m->branches, NULL, m->variant ? m->acts + layout_acts(m, m->B).xsum : NULL, NULL, 0,
                      l);
    if (!m->variant) rc_stream_out(m, m->B, N);
    head_forward(m, m->B, N, NULL);
    return forward_loss(m, targets, N);
}

void model_streams_forward(gpt_model *m, const real *X0, int branches) {
    act_layout a = layout_acts(m, m->B);
    memcpy(m->acts + a.streams, X0, a.s_streams * sizeof(real));
    sublayers_forward(m, m->B, branches, NULL, NULL, NULL, 0, -1);
}

void model_kv_alloc(model_kv *kv, gpt_model *m, int B) {
    const size_t n = (size_t)m->L * (size_t)B * (size_t)m->T * (size_t)m->C;
    kv->k = malloc_check(n * sizeof(real));
    kv->v = malloc_check(n * sizeof(real));
    kv->B = B;
    kv->T = m->T;
    /* while decoding, the activations hold one token of each sequence (the model's T is 1:
       B rows), not B whole windows: an M model's 2 GB of them for one sequence */
    acts_release(m);
    m->T = 1;
    model_alloc_acts(m, B);
}

void model_kv_free(model_kv *kv, gpt_model *m) {
    if (kv->k && m->T != kv->T) { /* the windows' T again, for the next forward */
        acts_release(m);
        m->T = kv->T;
    }
    free(kv->k);
    free(kv->v);
    kv->k = kv->v = NULL;
}

const real *model_decode(gpt_model *m, model_kv *kv, const int *tokens, int pos) {
    const int B = kv->B, C = m->C;
    if (pos < 0 || pos >= kv->T) die(1, "model_decode: position %d outside 0..%d", pos, kv->T - 1);
    if (m->T != 1 && kv->T != 1) die(1, "model_decode: the model's activations are not model_kv_alloc's");
    act_layout a = layout_acts(m, B);
    real *enc = m->acts + a.enc;
    const real *wte = P(m, 0), *wpe = P(m, 1) + (size_t)pos * C;
    for (int b = 0; b < B; b++) { /* the token's embedding and its position's, as encoder_forward */
        if (tokens[b] < 0 || tokens[b] >= m->V) die(1, "model_decode: token %d outside 0..%d", tokens[b], m->V - 1);
        const real *e = wte + (size_t)tokens[b] * C;
        for (int c = 0; c < C; c++) enc[(size_t)b * C + c] = e[c] + wpe[c];
    }
    forward_from_enc(m, B, (size_t)B, kv, pos);
    return m->acts + a.logits;
}

real *model_streams(const gpt_model *m, int l) {
    act_layout a = layout_acts(m, m->B);
    return m->acts + a.streams + (size_t)l * a.s_streams;
}

/* ---- backward ------------------------------------------------------------------------------- */

/* Backward through the Lh sublayers: dY holds the gradient of X_Lh on entry (with g, a
 * frame and branches: n copies of g, which the first region writes) and that of X_0 on
 * return (each frame backward overwrites the gradient of X_{l+1} with that of X_l in
 * place: no second buffer to stream through); with dsum (a frame), also the sum of X_0's
 * streams' gradients. Parameter gradients accumulate. Honours the branches flag of the
 * last forward. */
static void sublayers_backward(gpt_model *m, real *dY, const real *g, real *dsum) {
    const int B = m->B, T = m->T, C = m->C, NH = m->NH;
    const size_t N = (size_t)B * T;
    act_layout a = layout_acts(m, B);
    grad_layout gl = layout_grads(m, B);
    real *A = m->acts, *D = m->grad_acts;
    const int hc = m->variant != NULL;
    real *dln = D + gl.dln;
    hc_scratch hs = hc_scratch_of(m, &gl);
    /* df of the last sublayer; each frame backward then computes the previous one's and
     * zeroes the previous one's scratch */
    if (hc && m->branches) hc_frame_out_backward(m, m->Lh - 1, dY, g, D + gl.df, &gl, N);
    for (int l = m->Lh - 1; l >= 0; l--) {
        int blk = l / 2, is_mlp = l % 2;
        block_index b = block_at(m, blk);
        hc_acts h = model_hc_acts(m, l);
        if (!m->branches) { /* f = 0: no gradient flows into the sublayer (rc: dX = dY) */
            if (hc) hc_frame_in_backward(m, l, dY, NULL, dY, NULL, l == 0 ? dsum : NULL, D + gl.dz, &hs, &gl, N);
            continue;
        }
        /* df: the gradient of the sublayer's output; dinp: that of its input. rc: both dY
         * itself, the LayerNorm adding its input gradient into dY in place (X_l = X_{l+1}
         * - f: dX = dY + ...); a frame: df, and du written, which its backward reads. */
        real *df = hc ? D + gl.df : dY, *dinp = hc ? D + gl.du : dY;
        void (*ln_backward)(real *, real *, real *, const real *, const real *, const real *, const real *,
                            const real *, size_t, int) = hc ? layernorm_backward_set : layernorm_backward;
        if (!hc) { /* the frame's regions zero this for the methods with one */
#pragma omp parallel
            zero_sublayer_scratch(m, &gl, l, N);
        }
        real *ln = A + a.ln + l * a.s_ln, *mean = A + a.ln_mean + l * a.s_ln1, *rstd = A + a.ln_rstd + l * a.s_ln1;
        if (!is_mlp) {
            real *qkv = A + a.qkv + blk * a.s_qkv, *att = A + a.att + blk * a.s_att, *atty = A + a.atty + blk * a.s_atty;
            real *datty = D + gl.datty, *dqkv = D + gl.dqkv;
            matmul_backward(datty, BG(m, b, B_PROJW), BG(m, b, B_PROJB), df, atty,
                            BP(m, b, B_PROJW), N, C, C);
            prof_tick(PROF_MATMUL);
            attention_backward(dqkv, D + gl.datt, datty, qkv, att, B, T, C, NH);
            prof_tick(PROF_ATTENTION);
            matmul_backward(dln, BG(m, b, B_QKVW), BG(m, b, B_QKVB), dqkv, ln, BP(m, b, B_QKVW), N,
                            C, 3 * C);
            prof_tick(PROF_MATMUL);
            ln_backward(dinp, BG(m, b, B_LN1W), BG(m, b, B_LN1B), dln, h.u, BP(m, b, B_LN1W),
                        mean, rstd, N, C);
            prof_tick(PROF_LAYERNORM);
        } else {
            real *fch = A + a.fch + blk * a.s_fch, *fchg = A + a.fchg + blk * a.s_fch;
            real *dfch = D + gl.dfch, *dfchg = D + gl.dfchg;
            matmul_backward(dfchg, BG(m, b, B_FCPW), BG(m, b, B_FCPB), df, fchg,
                            BP(m, b, B_FCPW), N, 4 * C, C);
            prof_tick(PROF_MATMUL);
            if (m->gelu_erf)
                gelu_erf_backward(dfch, fch, fchg, dfchg, N * 4 * C);
            else
                gelu_backward(dfch, fch, dfchg, N * 4 * C);
            prof_tick(PROF_GELU);
            matmul_backward(dln, BG(m, b, B_FCW), BG(m, b, B_FCB), dfch, ln, BP(m, b, B_FCW), N, C,
                            4 * C);
            prof_tick(PROF_MATMUL);
            ln_backward(dinp, BG(m, b, B_LN2W), BG(m, b, B_LN2B), dln, h.u, BP(m, b, B_LN2W),
                        mean, rstd, N, C);
            prof_tick(PROF_LAYERNORM);
        }
        if (hc)
            hc_frame_in_backward(m, l, dY, dinp, dY, l > 0 ? df : NULL, l == 0 ? dsum : NULL, D + gl.dz, &hs, &gl, N);
    }
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
    prof_start();

    real *dlogits = D + gl.dlogits, *dlnf = D + gl.dlnf, *dxsum = D + gl.dxsum;
    crossentropy_backward(dlogits, A + a.probs, m->targets, scale / (real)cnt, N, V);
    prof_tick(PROF_EMBED_LOSS);
    memset(dlnf, 0, N * C * sizeof(real));
    matmul_backward(dlnf, G(m, 0), NULL, dlogits, A + a.lnf, P(m, 0), N, C, V);
    prof_tick(PROF_MATMUL);
    const int lnf = lnf_weight(m);
    layernorm_backward_set(dxsum, G(m, lnf), lnf_bias(m, m->grads), dlnf, A + a.xsum, P(m, lnf), A + a.lnf_mean,
                           A + a.lnf_rstd, N, C);
    prof_tick(PROF_LAYERNORM);
    /* dY: the gradient of X_Lh = n copies of dxsum, then in place down to X_0's; denc (the
     * du buffer, free by then): the embedding's = the sum of dY's streams. With a frame
     * its regions write both as they pass (the copies in the first when it computes df). */
    real *dY = D + gl.dX, *denc = D + gl.du;
    const int in_frame = m->variant && m->branches;
    if (!in_frame) {
        const int blk = m->variant ? hc_dims_of(m).blk : 0;
#pragma omp parallel for schedule(static)
        for (size_t t = 0; t < N; t++) hc_spread(dY + t * n * C, dxsum + t * C, n, C, blk);
        prof_tick(PROF_HC_STREAMS);
    }
    sublayers_backward(m, dY, in_frame ? dxsum : NULL, m->variant ? denc : NULL);
    if (!m->variant) { /* rc: one stream */
#pragma omp parallel for schedule(static)
        for (size_t t = 0; t < N; t++) memcpy(denc + t * C, dY + t * C, (size_t)C * sizeof(real));
        prof_tick(PROF_HC_STREAMS);
    }
    encoder_backward(G(m, 0), G(m, 1), denc, m->inputs, B, T, C, V);
    prof_tick(PROF_EMBED_LOSS);
}

/* Slice k of S of a batch of B sequences: sequences [B k / S, B (k + 1) / S). */
static int slice_start(int B, int S, int k) { return (int)((long)B * k / S); }

size_t model_valid_targets(const int *targets, size_t n) {
    size_t c = 0;
    for (size_t t = 0; t < n; t++) c += targets[t] >= 0;
    return c;
}

/* model_forward_backward's step over B sequences that are a part of a larger batch with
 * `whole` valid targets (0: the part is the whole batch). Returns the part's loss times
 * its share of the valid targets, sum over its slices in slice order. */
static double forward_backward_part(gpt_model *m, const int *inputs, const int *targets, int B, real scale,
                                    size_t whole) {
    model_alloc_acts(m, B);
    const int S = m->n_slices, T = m->T;
    m->stream_bf16_on = m->stream_bf16; /* this step's streams in bf16 (the slices copy it) */
    m->stream_blk_on = m->stream_blocks; /* and in channel blocks (hc_xv) */
    if (S <= 1 || !targets || prof_acc || omp_in_parallel() || omp_get_max_active_levels() > 1) {
        const real loss = model_forward(m, inputs, targets, B);
        double part = loss;
        if (whole && targets) { /* as a slice below: this part's mean weighted by its share */
            const size_t cnt = model_valid_targets(targets, (size_t)B * T);
            if (cnt) model_backward(m, scale * (real)((double)cnt / (double)whole));
            part = (double)loss * (double)cnt / (double)whole;
        } else {
            model_backward(m, scale);
        }
        m->stream_bf16_on = m->stream_blk_on = 0;
        return part;
    }
    if (!m->slice_grads) m->slice_grads = calloc_huge((size_t)(S - 1) * m->n_params, sizeof(real));
    /* the slices' shares of the buffers, their valid targets and their models */
    gpt_model *sl = malloc_check((size_t)S * sizeof *sl);
    size_t *cnt = malloc_check((size_t)S * sizeof *cnt), total = 0, ao = 0, go = 0;
    for (int k = 0; k < S; k++) {
        const int b0 = slice_start(B, S, k), b1 = slice_start(B, S, k + 1);
        const size_t t0 = (size_t)b0 * T, t1 = (size_t)b1 * T;
        sl[k] = *m;
        sl[k].B = b1 - b0;
        sl[k].acts = m->acts + ao;
        sl[k].grad_acts = m->grad_acts + go;
        sl[k].n_acts = layout_acts(&sl[k], sl[k].B).total;
        sl[k].n_grad_acts = layout_grads(&sl[k], sl[k].B).total;
        sl[k].inputs = m->inputs + t0;
        sl[k].targets = m->targets + t0;
        sl[k].grads = k ? m->slice_grads + (size_t)(k - 1) * m->n_params : m->grads;
        ao += sl[k].n_acts;
        go += sl[k].n_grad_acts;
        cnt[k] = model_valid_targets(targets + t0, t1 - t0);
        total += cnt[k];
    }
    if (whole) total = whole;
    double *lk = malloc_check((size_t)S * sizeof *lk);
#pragma omp parallel num_threads(S)
    {
        const int tid = omp_get_thread_num(), nth = omp_get_num_threads();
        /* slice k on thread k (on fewer threads than asked, the rest in turn): inside
           this region every kernel's own region runs on this thread alone */
        for (int k = tid; k < S; k += nth) {
            gpt_model *q = &sl[k];
            const size_t t0 = (size_t)(q->inputs - m->inputs); /* the slice's first token */
            if (k) memset(q->grads, 0, m->n_params * sizeof(real));
            lk[k] = model_forward(q, inputs + t0, targets + t0, q->B);
            /* the batch mean: this slice's mean weighted by its share of the valid targets */
            if (cnt[k]) model_backward(q, scale * (real)((double)cnt[k] / (double)total));
        }
#pragma omp barrier
        /* grads += slices 1..S-1, in slice order, each thread a contiguous share */
        const size_t P = m->n_params, i0 = P * (size_t)tid / (size_t)nth, i1 = P * (size_t)(tid + 1) / (size_t)nth;
        for (int j = 1; j < S; j++) {
            const real *g = m->slice_grads + (size_t)(j - 1) * P;
#pragma omp simd
            for (size_t i = i0; i < i1; i++) m->grads[i] += g[i];
        }
    }
    double loss = 0;
    for (int k = 0; k < S; k++) loss += total ? (double)lk[k] * (double)cnt[k] / (double)total : 0;
    free(lk);
    free(sl);
    free(cnt);
    m->stream_bf16_on = m->stream_blk_on = 0;
    m->mean_loss = (real)loss;
    m->branches = 1;
    return loss;
}

real model_forward_backward(gpt_model *m, const int *inputs, const int *targets, int B, real scale) {
    const double loss = forward_backward_part(m, inputs, targets, B, scale, 0);
    return m->mean_loss = (real)loss;
}

double model_forward_backward_part(gpt_model *m, const int *inputs, const int *targets, int B, real scale,
                                   size_t whole) {
    return forward_backward_part(m, inputs, targets, B, scale, whole ? whole : 1);
}

void model_streams_backward(gpt_model *m, const real *dXL, real *dX0) {
    grad_layout gl = layout_grads(m, m->B);
    size_t sz = (size_t)m->B * m->T * m->n * m->C;
    real *dY = m->grad_acts + gl.dX;
    memcpy(dY, dXL, sz * sizeof(real));
    sublayers_backward(m, dY, NULL, NULL);
    memcpy(dX0, dY, sz * sizeof(real));
}
