/* model.c: the GPT and its hyper-connection frame on the CPU (see model.h for the math).
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
#include "../kernels/cpu/cpu_math.h"
#include "bench.h"
#include "util.h"

#define RMS_EPS 1e-6 /* RMSNorm of the streams before the coefficient projection */

/* The frame's projection products with bf16 operands (residual.proj_precision: bf16):
 * built where the compiler targets AVX512_BF16 (-march=native on such a CPU), in float. */
#if !REAL_IS_DOUBLE && defined(__AVX512BF16__) && defined(__AVX512BW__)
#define HC_BF16 1
#include <immintrin.h>
#else
#define HC_BF16 0
#endif

/* The same products by AMX tiles (TDPBF16PS: a 16 x 16 fp32 tile += 16 x 32 by 32 x 16
 * bf16), where the build targets AMX-BF16 and the kernel grants the process its tile
 * state (model_amx_usable): the projection's operands rounded as with vdpbf16ps, the sums
 * in fp32 in the tiles' own order. */
#if HC_BF16 && defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define HC_AMX 1
#include <sys/syscall.h>
#include <unistd.h>
#else
#define HC_AMX 0
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

static inline size_t hc_xcol(int n, int C, size_t q);

int model_build(gpt_model *m, const s2hc_config *c, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    if (spec_for(c, &m->spec, &m->variant, err, errlen) != 0) return -1;
    m->proj_bf16 = m->variant && strcmp(c->proj_precision, "bf16") == 0;
    /* AMX takes up to 96 outputs a norm row (six tiles of sums) */
    m->proj_amx = m->proj_bf16 && model_amx_usable() &&
                  m->spec.K / (m->spec.norm == HC_NORM_FLAT ? 1 : m->spec.n) <= 96;
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

void model_alloc_acts(gpt_model *m, int B) {
    if (m->acts && m->B == B && m->n_slices == slices_for(m, B)) return;
    free(m->acts);
    free(m->grad_acts);
    free(m->inputs);
    free(m->targets);
    free(m->dtheta_thread);
    free(m->slice_grads);
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
 * The loops over channels use hc_vec, GCC's vector extension one register wide (cpu_vec:
 * 16 floats with AVX-512, 8 without; half that in the gradient-check build), and the tiles
 * that keep many accumulators are sized by the registers the target has (CPU_NREGS: 32 with
 * AVX-512, fewer elsewhere): accumulators stay in registers, and the lane of
 * an element is fixed by its index, so a reduction never depends on alignment or
 * threads. The frame's own loops (HC_FMA: the dots, dX, write-back, read-out, df, the
 * norm) and the tiles of the projection and of the dW product (hc_x_wt, hc_at_x) are
 * built with FMA contraction, like the BLAS they sit beside, and their scalar tails take
 * explicit FMAs (hc_fma_s); a channel always takes the same path (vector body or scalar
 * tail, fixed by C), so its bits do not depend on anything but the code. The per-token
 * method math (hc_math.h) is not contracted. Sums over threads (M, dtheta) are added in
 * thread order: bit-identical for a given thread count. */

#define HC_CHUNK_M 256               /* tokens per M = dz^T X product (64: slower; 256..all alike) */
_Static_assert(HC_CHUNK % HC_LANES == 0 && HC_CHUNK_M % HC_LANES == 0,
               "the frame's chunks start whole groups of HC_LANES tokens (hc_range)");
#define HC_CHUNK_W_MAX (256 * 1024)  /* larger W' (reals): one product per thread (W' read once) */
#define HC_COL_BLOCK 64              /* columns per task of the dW, dg update */

/* the fixed-lane vectors of the CPU kernels (kernels/cpu/cpu_math.h) */
typedef cpu_vec hc_vec;
#define HC_VL CPU_VL
#define hc_load cpu_vload
#define hc_store cpu_vstore
#define hc_vsum cpu_vsum
#define hc_vsum_many cpu_vsum_many

/* The frame's loops over channels, built with FMA contraction (the header comment). */
#ifdef __clang__ /* no such attribute: its fp pragma at the top of the function's body */
#define HC_FMA
#define HC_FMA_BODY _Pragma("clang fp contract(fast)")
#else
#define HC_FMA __attribute__((optimize("fp-contract=fast")))
#define HC_FMA_BODY
#endif

/* Weights of a plain sum of stream rows (hc_combine). */
static const real hc_ones[HC_MAX_N] = {1, 1, 1, 1, 1, 1, 1, 1};

/* v as it is, in a register, opaque to the compiler: it is neither folded into an FMA as
 * a memory operand nor fused with the products it is later added to. */
static inline __attribute__((always_inline)) hc_vec hc_opaque(hc_vec v) {
#ifdef __AVX__ /* a cpu_vec is one register (cpu_math.h) */
    __asm__("" : "+v"(v));
#endif
    return v;
}

/* a b + c rounded once. The scalar tails of the frame's loops take their products with it
 * rather than by contraction: with contraction, two instances of one loop (X in fp32 or in
 * bf16) have been built differently (one vectorised across the streams, its products then
 * added unfused) and so rounded a channel differently (tests/test_train). */
static inline __attribute__((always_inline)) real hc_fma_s(real a, real b, real c) {
#if REAL_IS_DOUBLE
    return __builtin_fma(a, b, c);
#else
    return __builtin_fmaf(a, b, c);
#endif
}

/* s in every lane, held in a register: GCC otherwise folds each use of a broadcast
 * coefficient into its FMA as a {1to16} memory operand, one load per FMA. (s - 0 is s
 * exactly, -0 included.) */
static inline __attribute__((always_inline)) hc_vec hc_splat(real s) { return hc_opaque(s - (hc_vec){0}); }

/* The end of a dot product kept in vector lanes: s, the lane sum of its accumulator
 * (blocks [0, c0); hc_vsum_many sums many accumulators at once), then a[c] b[c] for the
 * leftover channels c0 <= c < D, in order. */
static inline __attribute__((always_inline)) HC_FMA real hc_dot_tail(real s, const real *a, const real *b, size_t c0,
                                                                     size_t D) {
    HC_FMA_BODY
    for (size_t c = c0; c < D; c++) s = hc_fma_s(a[c], b[c], s);
    return s;
}

/* ---- the layout of a token's n streams ----
 * Rows (blk = 0): stream i's C values at i C .. i C + C - 1. Channel blocks (blk = 1, the
 * training steps' layout, model_forward_backward): the token's n x C values by blocks of
 * HC_VL channels, block b holding stream 0's HC_VL values of it, then stream 1's, ..,
 * stream n - 1's; then the channels past the last whole block (C0 = C rounded down to
 * HC_VL), stream by stream. The frame's loops read a block of channels of every stream
 * together (they mix the streams); in rows that is n runs of memory a row apart, which
 * the hardware's prefetchers follow badly, in blocks one run (docs/performance.md, log
 * item 40). The norm, the projection and dW sum over all n C values of a token and take
 * them in either order (W' is built in the streams' order, dW folded back); the per-
 * stream norm (hc) keeps rows. */
/* The offset of stream i's vector of channels c .. c + HC_VL - 1 (c a multiple of HC_VL,
 * c + HC_VL <= C) in a token's values. */
static inline size_t hc_xv(int blk, int n, int C, int i, int c) {
    return blk ? (size_t)c * (size_t)n + (size_t)i * HC_VL : (size_t)i * (size_t)C + (size_t)c;
}

/* The base of stream i's channels past the last whole block: channel c >= C0 is at
 * hc_xt(...) + c. */
static inline size_t hc_xt(int blk, int n, int C, int i) {
    const size_t C0 = (size_t)(C / HC_VL * HC_VL);
    return blk ? C0 * (size_t)n + (size_t)i * ((size_t)C - C0) - C0 : (size_t)i * (size_t)C;
}

/* The row index (stream j times C plus channel c) of the value at position q of a token's
 * values in channel blocks. */
static inline size_t hc_xcol(int n, int C, size_t q) {
    const size_t C0 = (size_t)(C / HC_VL * HC_VL), bn = (size_t)n * HC_VL;
    if (q < C0 * (size_t)n) {
        const size_t b = q / bn, r = q % bn;
        return r / HC_VL * (size_t)C + b * HC_VL + r % HC_VL;
    }
    const size_t r = q - C0 * (size_t)n, w = (size_t)C - C0;
    return r / w * (size_t)C + C0 + r % w;
}

/* Each of the n streams of a token's values y = x (C values). */
static void hc_spread(real *restrict y, const real *restrict x, int n, int C, int blk) {
    if (!blk) {
        for (int i = 0; i < n; i++) memcpy(y + (size_t)i * C, x, (size_t)C * sizeof(real));
        return;
    }
    const int C0 = C / HC_VL * HC_VL;
    for (int c = 0; c < C0; c += HC_VL)
        for (int i = 0; i < n; i++) memcpy(y + hc_xv(1, n, C, i, c), x + c, HC_VL * sizeof(real));
    if (C0 < C)
        for (int i = 0; i < n; i++) memcpy(y + hc_xt(1, n, C, i) + C0, x + C0, (size_t)(C - C0) * sizeof(real));
}

/* y = w[0] x[0] + w[1] x[1] + ... + w[m-1] x[m-1] (in that order), the m streams x[i] of a
 * token's values at x0 in the layout blk, y and x of C values. m is a constant in each
 * instance (hc_combine dispatches), the weights in registers. */
static inline __attribute__((always_inline)) HC_FMA void hc_combine_n(const int m, real *y, const real *w,
                                                                      const real *x0, int C, const int blk) {
    HC_FMA_BODY
    hc_vec wv[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < m; i++) wv[i] = hc_splat(w[i]);
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) {
        /* the first product rounded on its own, each later one fused into the sum */
        hc_vec v = hc_opaque(wv[0] * hc_load(x0 + hc_xv(blk, m, C, 0, c)));
#pragma GCC unroll 8
        for (int i = 1; i < m; i++) v += wv[i] * hc_load(x0 + hc_xv(blk, m, C, i, c));
        hc_store(y + c, v);
    }
    for (; c < C; c++) {
        real v = w[0] * x0[hc_xt(blk, m, C, 0) + c];
        for (int i = 1; i < m; i++) v = hc_fma_s(w[i], x0[hc_xt(blk, m, C, i) + c], v);
        y[c] = v;
    }
}

static HC_FMA void hc_combine(real *y, const real *w, const real *x0, int m, int C, int blk) {
    HC_FMA_BODY
    switch (m) {
#define HC_COMBINE_CASE(k) \
    case k:                                                      \
        if (blk) hc_combine_n(k, y, w, x0, C, 1);                \
        else hc_combine_n(k, y, w, x0, C, 0);                    \
        break;
        HC_COMBINE_CASE(1) HC_COMBINE_CASE(2) HC_COMBINE_CASE(3) HC_COMBINE_CASE(4)
        HC_COMBINE_CASE(5) HC_COMBINE_CASE(6) HC_COMBINE_CASE(7) HC_COMBINE_CASE(8)
#undef HC_COMBINE_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", m, HC_MAX_N);
    }
}

/* M (Kr, D) += A^T X over `rows` rows: A (rows, Kr), X (rows, D); the frame's dW product.
 * OpenBLAS packs X for every call, and with Kr <= 32 outputs the packing is most of the
 * time (docs/performance.md, log item 11). Here the rows go in blocks of 16 (their X
 * in L1), and for each block tiles of up to 8 rows of M by two vectors of columns are
 * loaded into registers, take the block's rows in order, and go back: every element
 * sums its rows in a fixed order, bit-identical for a given thread count. This and
 * hc_x_wt are built with FMA contraction (as BLAS is): it halves the tiles'
 * instructions, and no test compares these sums bit for bit with a scalar loop
 * (tests/test_frame compares them with sums in double, within float rounding). */
#if CPU_NREGS >= 32
#define HC_MT_K 8 /* 16 accumulators, two x vectors and a broadcast: 19 of 32 registers */
#else
#define HC_MT_K 6 /* 12 + 3 of 16 */
#endif
CPU_CONTRACT_FAST
static inline __attribute__((always_inline)) void hc_at_x_tile(const int kb, real *M, const real *A, const real *X,
                                                             size_t rows, int Kr, size_t D, size_t j, int nv) {
    hc_vec acc[HC_MT_K][2];
#pragma GCC unroll 8
    for (int k = 0; k < HC_MT_K; k++) {
        acc[k][0] = k < kb ? hc_load(M + (size_t)k * D + j) : (hc_vec){0};
        acc[k][1] = k < kb && nv == 2 ? hc_load(M + (size_t)k * D + j + HC_VL) : (hc_vec){0};
    }
    for (size_t t = 0; t < rows; t++) {
        const real *x = X + t * D + j, *a = A + t * (size_t)Kr;
        const hc_vec x0 = hc_load(x), x1 = nv == 2 ? hc_load(x + HC_VL) : x0;
#pragma GCC unroll 8
        for (int k = 0; k < kb; k++) {
            acc[k][0] += a[k] * x0;
            if (nv == 2) acc[k][1] += a[k] * x1;
        }
    }
#pragma GCC unroll 8
    for (int k = 0; k < kb; k++)
        for (int v = 0; v < nv; v++) hc_store(M + (size_t)k * D + j + (size_t)v * HC_VL, acc[k][v]);
}

static void hc_at_x_rows(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D) {
    for (int k0 = 0; k0 < Kr; k0 += HC_MT_K) {
        const int kb = Kr - k0 < HC_MT_K ? Kr - k0 : HC_MT_K;
        real *Mk = M + (size_t)k0 * D;
        const real *Ak = A + k0;
        size_t j = 0;
        for (; j + 2 * HC_VL <= D; j += 2 * HC_VL) switch (kb) {
#define HC_AT_X_CASE(c) \
            case c: hc_at_x_tile(c, Mk, Ak, X, rows, Kr, D, j, 2); break;
            HC_AT_X_CASE(1) HC_AT_X_CASE(2) HC_AT_X_CASE(3) HC_AT_X_CASE(4) HC_AT_X_CASE(5) HC_AT_X_CASE(6)
#if HC_MT_K > 6
            HC_AT_X_CASE(7) HC_AT_X_CASE(8)
#endif
#undef HC_AT_X_CASE
            }
        for (; j + HC_VL <= D; j += HC_VL) hc_at_x_tile(kb, Mk, Ak, X, rows, Kr, D, j, 1);
        for (; j < D; j++) /* columns past the last vector */
            for (int k = 0; k < kb; k++) {
                real s = 0;
                for (size_t t = 0; t < rows; t++) s += Ak[t * (size_t)Kr + k] * X[t * D + j];
                Mk[(size_t)k * D + j] += s;
            }
    }
}

/* Z = X W^T, (rows, Kr) from X (rows, D) and W (Kr, D): the frame's coefficient
 * projection z = X W'^T. OpenBLAS runs these shapes (K = 8..32 outputs, D = 128..1024)
 * at about half the FMA rate. Tiles of HC_XW_R rows by up to HC_XW_K outputs keep 24
 * accumulators in registers (12 with 16 registers; the SSE build's 8 register pairs
 * cannot hold them) while a tile's W rows (12 KB at D = 512: L1) meet every row of X;
 * the accumulators then sum their lanes together by the fixed tree
 * (hc_vsum_many, a tenth of the tile's time when each summed alone) and add the columns
 * past the last vector in order: bit-identical for a given thread count. */
#if CPU_NREGS >= 32
#define HC_XW_R 4 /* 24 accumulators, 4 x vectors, a w vector: 29 of 32 registers */
#define HC_XW_K 6
#else
#define HC_XW_R 2 /* 12 + 2 + 1 of 16 (3 x 4 measured 30 % slower: K = 17 left a tile of 1) */
#define HC_XW_K 6
#endif
static inline __attribute__((always_inline)) void hc_x_wt_tile(const int rb, const int kb, real *Z, const real *X,
                                                             const real *W, int Kr, size_t D) {
    hc_vec acc[HC_XW_R][HC_XW_K];
#pragma GCC unroll 4
    for (int r = 0; r < HC_XW_R; r++)
#pragma GCC unroll 6
        for (int k = 0; k < HC_XW_K; k++) acc[r][k] = (hc_vec){0};
    size_t j = 0;
    for (; j + HC_VL <= D; j += HC_VL) {
        hc_vec x[HC_XW_R] = {{0}};
#pragma GCC unroll 4
        for (int r = 0; r < rb; r++) x[r] = hc_load(X + (size_t)r * D + j);
#pragma GCC unroll 6
        for (int k = 0; k < kb; k++) {
            const hc_vec w = hc_opaque(hc_load(W + (size_t)k * D + j));
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) acc[r][k] += x[r] * w;
        }
    }
    real s[HC_XW_R * HC_XW_K];
    hc_vsum_many(HC_XW_R * HC_XW_K, &acc[0][0], s);
    for (int r = 0; r < rb; r++)
        for (int k = 0; k < kb; k++)
            Z[(size_t)r * Kr + k] = hc_dot_tail(s[r * HC_XW_K + k], X + (size_t)r * D, W + (size_t)k * D, j, D);
}

static void hc_x_wt(real *Z, const real *X, const real *W, size_t rows, int Kr, size_t D) {
    for (int k0 = 0; k0 < Kr; k0 += HC_XW_K) {
        const int kb = Kr - k0 < HC_XW_K ? Kr - k0 : HC_XW_K;
        const real *Wk = W + (size_t)k0 * D;
        size_t r0 = 0;
        for (; r0 + HC_XW_R <= rows; r0 += HC_XW_R) switch (kb) {
#define HC_X_WT_CASE(c)             case c: hc_x_wt_tile(HC_XW_R, c, Z + r0 * (size_t)Kr + k0, X + r0 * D, Wk, Kr, D); break;
            HC_X_WT_CASE(1) HC_X_WT_CASE(2) HC_X_WT_CASE(3) HC_X_WT_CASE(4) HC_X_WT_CASE(5) HC_X_WT_CASE(6)
#undef HC_X_WT_CASE
            }
        if (r0 < rows) hc_x_wt_tile((int)(rows - r0), kb, Z + r0 * (size_t)Kr + k0, X + r0 * D, Wk, Kr, D);
    }
}

/* Blocks of HC_MT_ROWS rows (32 KB of X at D = 512: L1) through every tile. */
#define HC_MT_ROWS 16
#define HC_MT_ROWS_BF 32 /* hc_at_x_bf16: rows per block (16 pairs), their rounded X 32 KB at D = 512 */
#define HC_MT_K_BF 12    /* hc_at_x_bf16: outputs per tile at most, the blocks of a row even */
static void hc_at_x(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D) {
    for (size_t r0 = 0; r0 < rows; r0 += HC_MT_ROWS) {
        const size_t nr = rows - r0 < HC_MT_ROWS ? rows - r0 : HC_MT_ROWS;
        hc_at_x_rows(M, A + r0 * (size_t)Kr, X + r0 * D, nr, Kr, D);
    }
}
CPU_CONTRACT_END

/* ---- the projection's products with bf16 operands (residual.proj_precision: bf16) ----
 * vdpbf16ps multiplies 32 pairs of bf16 values and adds each pair's two products into
 * one of 16 fp32 lanes: twice the multiply-adds of an fp32 FMA per instruction, at the
 * same rate on the AVX512_BF16 cores measured (docs/performance.md, log item 36). The
 * three products of the coefficient projection round their operands to bf16 (to nearest
 * even, as vcvtne2ps2bf16) and sum in fp32 in a fixed order: bit-identical for a given
 * thread count, and the products of two bf16 values are exact in fp32, so each sum is
 * within the float rounding of the sum of the rounded operands' products (tests/test_frame). */
/* Reals of a row of D values in bf16, padded to whole vectors of 32 (in reals: half). */
static inline size_t hc_bf16_row(size_t D) { return (D + 31) / 32 * 16; }

/* With AMX (HC_AMX, below): outputs in blocks of 16 (a tile's columns); hc_at_x_amx takes
 * rows in blocks of HC_AMX_ROWS (64 pairs: their rounded X 128 KB at D = 512, L2). The
 * scratch sizes below serve either kind of product. */
#define HC_AMX_ROWS 128
static inline int hc_amx_kt(int Kr) { return (Kr + 15) / 16; }
static inline size_t hc_max_size(size_t a, size_t b) { return a > b ? a : b; }

/* The dX pass's projection terms by AMX (one norm row per token): a group's products
 * dz W' (hc_dx_products_amx), a row of hc_amx_pz_row(nC) reals per token (rows, not
 * tiles side by side: in the streams' rows a stream's first position need not be a
 * multiple of 16); W' for them (hc_scaled_weight_dx_amx) is hc_amx_pz_row(nC) 16
 * hc_amx_kq(Kr) words; a group's dz in bf16, 16 rows of 16 hc_amx_kq(Kr) words. */
static inline size_t hc_amx_pz_row(size_t nC) { return (nC + 15) / 16 * 16; }
static inline int hc_amx_kq(int Kr) { return (Kr + 31) / 32; }

/* Scratch of hc_at_x_bf16, in reals: HC_MT_ROWS_BF / 2 pairs of rows of X (D words each)
 * and of A (Kr words each); with AMX, HC_AMX_ROWS / 2 pairs of X and A's pairs transposed
 * (16 hc_amx_kt(Kr) rows of HC_AMX_ROWS / 2 words). */
static inline size_t hc_at_x_bf16_scratch(int Kr, size_t D) {
    const size_t vnni = (size_t)HC_MT_ROWS_BF / 2 * (D + (size_t)Kr);
    return HC_AMX ? hc_max_size(vnni, (size_t)HC_AMX_ROWS / 2 * (D + (size_t)hc_amx_kt(Kr) * 16)) : vnni;
}

/* Scratch of hc_x_wt_bf16, in reals: HC_XW_R rows of X in bf16 (with AMX, 16 rows). */
static inline size_t hc_x_wt_bf16_scratch(size_t D) { return (size_t)(HC_AMX ? 16 : HC_XW_R) * hc_bf16_row(D); }

/* The forward's W' in bf16, in reals: Kr rows of hc_bf16_row(D) (with AMX, as B tiles:
 * hc_bf16_row(D) rows of 16 hc_amx_kt(Kr) words, hc_scaled_weight_amx). */
static inline size_t hc_w_bf16_scratch(int Kr, size_t D) {
    return hc_bf16_row(D) * (size_t)(HC_AMX ? hc_amx_kt(Kr) * 16 : Kr);
}

#if HC_BF16
typedef __m512bh hc_bh;

/* bf16 of x as its 16 bits, rounded to nearest even; NaN stays NaN, and a denormal becomes
 * a signed zero as vcvtne2ps2bf16 makes it. */
static inline uint32_t hc_bf16_bits(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (b >> 16) | 0x40u;
    if (!(b & 0x7f800000u)) return (b >> 16) & 0x8000u;
    return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

static inline float hc_bf16_value(uint32_t h) {
    const uint32_t b = h << 16;
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* x rounded to bf16, as a float (exactly: bf16 is float's upper half). */
static inline float hc_bf16_round(float x) { return hc_bf16_value(hc_bf16_bits(x)); }

/* The bf16 pair (a, b) in one 32-bit word, a in the low half: vdpbf16ps's element 2i. */
static inline uint32_t hc_bf16_pair(float a, float b) { return hc_bf16_bits(a) | hc_bf16_bits(b) << 16; }

/* 32 values x[0..w) (0 past w) as bf16, in order. */
static inline __attribute__((always_inline)) hc_bh hc_bf16_load32(const real *x, int w) {
    if (w >= 32) return _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x));
    const __mmask16 lo = (__mmask16)(w >= 16 ? 0xffffu : (1u << w) - 1u);
    const __mmask16 hi = (__mmask16)(w <= 16 ? 0u : (1u << (w - 16)) - 1u);
    return _mm512_cvtne2ps_pbh(_mm512_maskz_loadu_ps(hi, x + 16), _mm512_maskz_loadu_ps(lo, x));
}


/* x[0..n) rounded to bf16 in place (hc_bf16_round's values, 16 at a time). */
static inline void hc_bf16_round_n(real *x, size_t n) {
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 w = (__mmask16)(n - i >= 16 ? 0xffffu : (1u << (n - i)) - 1u);
        const __m256bh h = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(w, x + i));
        __m256i hb;
        memcpy(&hb, &h, sizeof hb);
        _mm512_mask_storeu_ps(x + i, w, (__m512)_mm512_slli_epi32(_mm512_cvtepu16_epi32(hb), 16));
    }
}

/* hc_x_wt with bf16 operands: Z = X W'^T, W' from hc_scaled_weight_bf16. Tiles of
 * HC_XW_R rows by HC_XW_K outputs as in fp32, over rows already in bf16 (xb: rows of
 * hc_bf16_row(D) reals, zeros past D, meeting W''s zero padding). */
static inline __attribute__((always_inline)) void hc_x_wt_bf16_tile(const int rb, const int kb, real *Z,
                                                                  const real *xb, const real *Wf, int Kr,
                                                                  size_t D) {
    const size_t rl = hc_bf16_row(D);
    __m512 acc[HC_XW_R][HC_XW_K];
#pragma GCC unroll 4
    for (int r = 0; r < HC_XW_R; r++)
#pragma GCC unroll 6
        for (int k = 0; k < HC_XW_K; k++) acc[r][k] = _mm512_setzero_ps();
    for (size_t j = 0; j < D; j += 32) {
        hc_bh x[HC_XW_R];
#pragma GCC unroll 4
        for (int r = 0; r < HC_XW_R; r++) memcpy(&x[r], xb + (size_t)(r < rb ? r : 0) * rl + j / 2, sizeof x[r]);
#pragma GCC unroll 6
        for (int k = 0; k < kb; k++) {
            hc_bh wv;
            memcpy(&wv, Wf + (size_t)k * rl + j / 2, sizeof wv);
#pragma GCC unroll 4
            for (int r = 0; r < rb; r++) acc[r][k] = _mm512_dpbf16_ps(acc[r][k], x[r], wv);
        }
    }
    real s[HC_XW_R * HC_XW_K];
    hc_vsum_many(HC_XW_R * HC_XW_K, (const hc_vec *)&acc[0][0], s);
    for (int r = 0; r < rb; r++)
        for (int k = 0; k < kb; k++) Z[(size_t)r * Kr + k] = s[r * HC_XW_K + k];
}

/* In a function of the vdpbf16ps products: with amx, call the AMX version instead and
 * return (a build without AMX compiles no call). */
#if HC_AMX
#define HC_AMX_OR(amx, call) \
    if (amx) {               \
        call;                \
        return;              \
    }
#else
#define HC_AMX_OR(amx, call) (void)(amx)
#endif

#if HC_AMX
static void hc_x_wt_amx(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc);
static void hc_at_x_amx(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc);
#endif

/* Each group of HC_XW_R rows of X is rounded to bf16 once, into sc (hc_x_wt_bf16_scratch
 * reals), then every block of outputs takes it: rounding a row per tile cost a conversion
 * per block of outputs (Kr / HC_XW_K of them) beside the tile's products. amx: by AMX
 * tiles instead (hc_x_wt_amx; Wf then from hc_scaled_weight_bf16 with amx). */
static void hc_x_wt_bf16(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc, int amx) {
    HC_AMX_OR(amx, hc_x_wt_amx(Z, X, Wf, rows, Kr, D, sc));
    const size_t rl = hc_bf16_row(D);
    for (size_t r0 = 0; r0 < rows; r0 += HC_XW_R) {
        const int rb = rows - r0 < HC_XW_R ? (int)(rows - r0) : HC_XW_R;
        for (int r = 0; r < rb; r++)
            for (size_t j = 0; j < D; j += 32) {
                const hc_bh v = hc_bf16_load32(X + (r0 + (size_t)r) * D + j, D - j < 32 ? (int)(D - j) : 32);
                memcpy(sc + (size_t)r * rl + j / 2, &v, sizeof v);
            }
        for (int k0 = 0; k0 < Kr; k0 += HC_XW_K) {
            const int kb = Kr - k0 < HC_XW_K ? Kr - k0 : HC_XW_K;
            const real *Wk = Wf + (size_t)k0 * rl;
            real *Zt = Z + r0 * (size_t)Kr + k0;
            if (rb < HC_XW_R) {
                hc_x_wt_bf16_tile(rb, kb, Zt, sc, Wk, Kr, D);
                continue;
            }
            switch (kb) {
#define HC_X_WT_BF_CASE(c) \
            case c: hc_x_wt_bf16_tile(HC_XW_R, c, Zt, sc, Wk, Kr, D); break;
            HC_X_WT_BF_CASE(1) HC_X_WT_BF_CASE(2) HC_X_WT_BF_CASE(3)
            HC_X_WT_BF_CASE(4) HC_X_WT_BF_CASE(5) HC_X_WT_BF_CASE(6)
#undef HC_X_WT_BF_CASE
            }
        }
    }
}

/* A tile of hc_at_x_bf16: kb outputs (rows of M from Mk) by nv vectors of 16 channels
 * from j, over the np pairs of rows in xp (X's, D words each) and ak (A's, Kr each). */
static inline __attribute__((always_inline)) void hc_at_x_bf16_tile(const int kb, const int nv, real *Mk,
                                                                   const uint32_t *ak, const uint32_t *xp,
                                                                   size_t np, int Kr, size_t D, size_t j) {
    __m512 acc[HC_MT_K_BF][2];
#pragma GCC unroll 12
    for (int k = 0; k < HC_MT_K_BF; k++) acc[k][0] = acc[k][1] = _mm512_setzero_ps(); /* kb constant: no trace */
#pragma GCC unroll 12
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) acc[k][v] = _mm512_loadu_ps(Mk + (size_t)k * D + j + (size_t)v * 16);
    for (size_t p = 0; p < np; p++) {
        hc_bh x[2];
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) memcpy(&x[v], xp + p * D + j + (size_t)v * 16, sizeof x[v]);
        const uint32_t *a = ak + p * (size_t)Kr;
#pragma GCC unroll 12
        for (int k = 0; k < kb; k++) {
            const hc_bh av = (hc_bh)_mm512_set1_epi32((int)a[k]);
#pragma GCC unroll 2
            for (int v = 0; v < nv; v++) acc[k][v] = _mm512_dpbf16_ps(acc[k][v], av, x[v]);
        }
    }
#pragma GCC unroll 12
    for (int k = 0; k < kb; k++)
#pragma GCC unroll 2
        for (int v = 0; v < nv; v++) _mm512_storeu_ps(Mk + (size_t)k * D + j + (size_t)v * 16, acc[k][v]);
}

/* The permute of hc_bf16_interleave: words 0..15 of vcvtne2ps2bf16(hi, lo) take lo[i]
 * and hi[i] side by side. */
static inline __m512i hc_bf16_ilv(void) {
    return _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6, 21, 5, 20, 4,
                            19, 3, 18, 2, 17, 1, 16, 0);
}

/* Rows lo and hi (16 values each) rounded to bf16 and interleaved value by value: word i
 * the pair (lo[i], hi[i]), lo in the low half (vdpbf16ps's element 2i). ilv: the permute. */
static inline __attribute__((always_inline)) __m512i hc_bf16_interleave(__m512i ilv, __m512 lo, __m512 hi) {
    return _mm512_permutexvar_epi16(ilv, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

/* The columns j >= j0 of M += A^T X over rows [r0, r0 + nr) (those past the last vector of
 * 16) with bf16 operands: the rounded products in fp32, row by row. */
static void hc_at_x_bf16_cols(real *M, const real *A, const real *X, size_t r0, size_t nr, int Kr, size_t D,
                              size_t j0) {
    for (size_t j = j0; j < D; j++)
        for (int k = 0; k < Kr; k++) {
            real s = 0;
            for (size_t t = r0; t < r0 + nr; t++) s += hc_bf16_round(A[t * (size_t)Kr + k]) * hc_bf16_round(X[t * D + j]);
            M[(size_t)k * D + j] += s;
        }
}

/* hc_at_x with bf16 operands: M += A^T X, the sum over rows taken two rows at a time (the
 * pair of a vdpbf16ps lane: rows 2p and 2p + 1, a zero row after an odd last one). Each
 * block of HC_MT_ROWS_BF rows is first rounded into sc (hc_at_x_bf16_scratch reals): X's
 * pairs interleaved channel by channel, [p][c][2], and A's, [p][k][2]; then tiles of up
 * to HC_MT_K_BF outputs (a row's outputs in even blocks) by 32 channels take the pairs
 * in order. Columns past the last vector of 16: the rounded products in fp32, row by
 * row. amx: by AMX tiles instead (hc_at_x_amx). */
static void hc_at_x_bf16(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc, int amx) {
    HC_AMX_OR(amx, hc_at_x_amx(M, A, X, rows, Kr, D, sc));
    const size_t D16 = D / 16 * 16;
    uint32_t *xp = (uint32_t *)sc, *ap = xp + (size_t)HC_MT_ROWS_BF / 2 * D;
    const __m512i ilv = hc_bf16_ilv();
    for (size_t r0 = 0; r0 < rows; r0 += HC_MT_ROWS_BF) {
        const size_t nr = rows - r0 < HC_MT_ROWS_BF ? rows - r0 : HC_MT_ROWS_BF, np = (nr + 1) / 2;
        for (size_t p = 0; p < np; p++) {
            const real *x0 = X + (r0 + 2 * p) * D, *a0 = A + (r0 + 2 * p) * (size_t)Kr;
            const int two = 2 * p + 1 < nr;
            const real *x1 = two ? x0 + D : NULL, *a1 = two ? a0 + Kr : NULL;
            for (int k0 = 0; k0 < Kr; k0 += 16) { /* A's pairs as X's below, 16 words at a time */
                const __mmask16 w = (__mmask16)(Kr - k0 >= 16 ? 0xffffu : (1u << (Kr - k0)) - 1u);
                const __m512 lo = _mm512_maskz_loadu_ps(w, a0 + k0);
                const __m512 hi = two ? _mm512_maskz_loadu_ps(w, a1 + k0) : _mm512_setzero_ps();
                _mm512_mask_storeu_epi32(ap + p * (size_t)Kr + k0, w, hc_bf16_interleave(ilv, lo, hi));
            }
            for (size_t c = 0; c < D16; c += 16) {
                const __m512 lo = _mm512_loadu_ps(x0 + c), hi = two ? _mm512_loadu_ps(x1 + c) : _mm512_setzero_ps();
                _mm512_storeu_si512(xp + p * D + c, hc_bf16_interleave(ilv, lo, hi));
            }
        }
        const int nblk = (Kr + HC_MT_K_BF - 1) / HC_MT_K_BF, kbs = (Kr + nblk - 1) / nblk; /* even blocks */
        for (int k0 = 0; k0 < Kr; k0 += kbs) {
            const int kb = Kr - k0 < kbs ? Kr - k0 : kbs;
            real *Mk = M + (size_t)k0 * D;
            const uint32_t *ak = ap + k0;
            size_t j = 0;
            switch (kb) {
#define HC_AT_X_BF_CASE(c)                                                                 \
            case c:                                                                        \
                for (; j + 32 <= D16; j += 32) hc_at_x_bf16_tile(c, 2, Mk, ak, xp, np, Kr, D, j); \
                if (j < D16) hc_at_x_bf16_tile(c, 1, Mk, ak, xp, np, Kr, D, j);           \
                break;
                HC_AT_X_BF_CASE(1) HC_AT_X_BF_CASE(2) HC_AT_X_BF_CASE(3) HC_AT_X_BF_CASE(4)
                HC_AT_X_BF_CASE(5) HC_AT_X_BF_CASE(6) HC_AT_X_BF_CASE(7) HC_AT_X_BF_CASE(8)
                HC_AT_X_BF_CASE(9) HC_AT_X_BF_CASE(10) HC_AT_X_BF_CASE(11) HC_AT_X_BF_CASE(12)
#undef HC_AT_X_BF_CASE
            }
        }
        hc_at_x_bf16_cols(M, A, X, r0, nr, Kr, D, D16);
    }
}
#endif

#if HC_AMX
/* ---- the same products by AMX tiles (m->proj_amx) ----------------------------------
 * Eight tile registers of 16 rows by 64 bytes (palette 1); TDPBF16PS adds into a 16 x 16
 * fp32 tile C the products of a 16 x 32 bf16 tile A (row-major) and a 32 x 16 bf16 tile B
 * kept as 16 rows of 16 pairs (B's rows 2i and 2i + 1 of a column side by side):
 * C[r][c] += sum over i of A[r][2i] B[i][c].lo + A[r][2i + 1] B[i][c].hi. Tiles 0..5 hold
 * sums (up to six blocks of 16 outputs: Kr <= 96), 6 the A operand, 7 the B (the dX
 * pass's products, hc_dx_products_amx: 0 the sums, 1..6 the A operands, 7 the B). A tile's
 * number is part of the instruction, so the loops over output blocks switch on it.
 * hc_x_wt_amx and hc_at_x_amx set the configuration on entry and release the tiles on
 * exit (the state then costs the kernel nothing at a context switch); the dX pass's
 * products leave both to hc_tokens_backward, once per chunk. */
#define HC_AMX_KT_MAX 6

static inline void hc_amx_begin(void) {
    struct __attribute__((packed, aligned(64))) {
        uint8_t palette, start_row, reserved[14];
        uint16_t colsb[16];
        uint8_t rows[16];
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) cfg.colsb[i] = 64, cfg.rows[i] = 16;
    _tile_loadconfig(&cfg);
}

#define HC_AMX_SWITCH(t, STMT)                                                              \
    switch (t) {                                                                            \
    case 0: STMT(0); break;                                                                 \
    case 1: STMT(1); break;                                                                 \
    case 2: STMT(2); break;                                                                 \
    case 3: STMT(3); break;                                                                 \
    case 4: STMT(4); break;                                                                 \
    default: STMT(5); break;                                                                \
    }
/* The same, tile 1 + t: the intrinsics paste the number into the instruction's text */
#define HC_AMX_SWITCH1(t, STMT)                                                             \
    switch (t) {                                                                            \
    case 0: STMT(1); break;                                                                 \
    case 1: STMT(2); break;                                                                 \
    case 2: STMT(3); break;                                                                 \
    case 3: STMT(4); break;                                                                 \
    case 4: STMT(5); break;                                                                 \
    default: STMT(6); break;                                                                \
    }

/* hc_x_wt_bf16 by tiles: Z = X W'^T, Wf from hc_scaled_weight_amx. Each block of 16 rows
 * of X is rounded into sc (16 rows of hc_bf16_row(D) reals, zero rows past the last), the
 * A operand 32 values at a time; the sums leave through a 16 x Kt * 16 buffer. */
static void hc_x_wt_amx(real *Z, const real *X, const real *Wf, size_t rows, int Kr, size_t D, real *sc) {
    const size_t rl = hc_bf16_row(D);
    const int Kt = hc_amx_kt(Kr), Kw = Kt * 16;
    float out[16 * HC_AMX_KT_MAX * 16];
    hc_amx_begin();
    for (size_t r0 = 0; r0 < rows; r0 += 16) {
        const int rb = rows - r0 < 16 ? (int)(rows - r0) : 16;
        for (int r = 0; r < rb; r++)
            for (size_t j = 0; j < D; j += 32) {
                const hc_bh v = hc_bf16_load32(X + (r0 + (size_t)r) * D + j, D - j < 32 ? (int)(D - j) : 32);
                memcpy(sc + (size_t)r * rl + j / 2, &v, sizeof v);
            }
        if (rb < 16) memset(sc + (size_t)rb * rl, 0, (size_t)(16 - rb) * rl * sizeof(real));
        for (int kt = 0; kt < Kt; kt++) {
#define HC_AMX_ZERO(t) _tile_zero(t)
            HC_AMX_SWITCH(kt, HC_AMX_ZERO)
#undef HC_AMX_ZERO
        }
        for (size_t q = 0; q < rl; q += 16) {
            _tile_loadd(6, sc + q, (long)(rl * sizeof(real)));
            for (int kt = 0; kt < Kt; kt++) {
                _tile_loadd(7, Wf + q * (size_t)Kw + (size_t)kt * 16, Kw * (long)sizeof(real));
#define HC_AMX_DP(t) _tile_dpbf16ps(t, 6, 7)
                HC_AMX_SWITCH(kt, HC_AMX_DP)
#undef HC_AMX_DP
            }
        }
        for (int kt = 0; kt < Kt; kt++) {
#define HC_AMX_OUT(t) _tile_stored(t, out + kt * 16, Kw * (long)sizeof(float))
            HC_AMX_SWITCH(kt, HC_AMX_OUT)
#undef HC_AMX_OUT
        }
        for (int r = 0; r < rb; r++) memcpy(Z + (r0 + (size_t)r) * Kr, out + r * Kw, (size_t)Kr * sizeof(real));
    }
    _tile_release();
}

/* hc_at_x_bf16 by tiles: M += A^T X over rows in pairs (a zero row after an odd last one).
 * Per block of HC_AMX_ROWS rows, in sc: X's pairs interleaved channel by channel, [p][c]
 * (the B operand: 16 pairs by 16 channels), and A's pairs transposed, [k][p] (the A
 * operand: 16 outputs by 16 pairs), zero past Kr and past the block's last pair; each
 * 16 x 16 block of M is loaded into a tile once per block of rows. A last block of outputs
 * short of 16 goes through a buffer (M has no rows past Kr). Columns past the last vector
 * of 16: the rounded products in fp32, row by row, as hc_at_x_bf16. */
static void hc_at_x_amx(real *M, const real *A, const real *X, size_t rows, int Kr, size_t D, real *sc) {
    const size_t D16 = D / 16 * 16, P = HC_AMX_ROWS / 2;
    const int Kt = hc_amx_kt(Kr), kl = Kr - (Kt - 1) * 16; /* outputs in the last block */
    uint32_t *xp = (uint32_t *)sc, *at = xp + P * D;
    const __m512i ilv = hc_bf16_ilv();
    float last[16 * 16];
    hc_amx_begin();
    for (size_t r0 = 0; r0 < rows; r0 += HC_AMX_ROWS) {
        const size_t nr = rows - r0 < HC_AMX_ROWS ? rows - r0 : HC_AMX_ROWS, np = (nr + 1) / 2;
        const size_t npt = (np + 15) / 16 * 16; /* pairs in whole tiles */
        memset(at, 0, (size_t)Kt * 16 * P * sizeof *at);
        for (size_t p = 0; p < np; p++) {
            const real *x0 = X + (r0 + 2 * p) * D, *a0 = A + (r0 + 2 * p) * (size_t)Kr;
            const int two = 2 * p + 1 < nr;
            const real *x1 = two ? x0 + D : NULL, *a1 = two ? a0 + Kr : NULL;
            for (int k = 0; k < Kr; k++) at[(size_t)k * P + p] = hc_bf16_pair(a0[k], two ? a1[k] : 0.0f);
            for (size_t c = 0; c < D16; c += 16) {
                const __m512 lo = _mm512_loadu_ps(x0 + c), hi = two ? _mm512_loadu_ps(x1 + c) : _mm512_setzero_ps();
                _mm512_storeu_si512(xp + p * D + c, hc_bf16_interleave(ilv, lo, hi));
            }
        }
        if (npt > np) memset(xp + np * D, 0, (npt - np) * D * sizeof *xp);
        for (size_t c = 0; c < D16; c += 16) {
            for (int kt = 0; kt < Kt; kt++) {
                const real *mk = M + (size_t)kt * 16 * D + c;
                if (kt == Kt - 1 && kl < 16) {
                    for (int r = 0; r < 16; r++)
                        if (r < kl) memcpy(last + r * 16, mk + (size_t)r * D, 16 * sizeof(float));
                        else memset(last + r * 16, 0, 16 * sizeof(float));
                    mk = last;
                }
                const long stride = mk == last ? 64 : (long)(D * sizeof(real));
#define HC_AMX_LOADC(t) _tile_loadd(t, mk, stride)
                HC_AMX_SWITCH(kt, HC_AMX_LOADC)
#undef HC_AMX_LOADC
            }
            for (size_t p = 0; p < npt; p += 16) {
                _tile_loadd(7, xp + p * D + c, (long)(D * sizeof(uint32_t)));
                for (int kt = 0; kt < Kt; kt++) {
                    _tile_loadd(6, at + (size_t)kt * 16 * P + p, (long)(P * sizeof(uint32_t)));
#define HC_AMX_DP(t) _tile_dpbf16ps(t, 6, 7)
                    HC_AMX_SWITCH(kt, HC_AMX_DP)
#undef HC_AMX_DP
                }
            }
            for (int kt = 0; kt < Kt; kt++) {
                const int part = kt == Kt - 1 && kl < 16;
                real *mk = part ? last : M + (size_t)kt * 16 * D + c;
                const long stride = part ? 64 : (long)(D * sizeof(real));
#define HC_AMX_STOREC(t) _tile_stored(t, mk, stride)
                HC_AMX_SWITCH(kt, HC_AMX_STOREC)
#undef HC_AMX_STOREC
                if (part)
                    for (int r = 0; r < kl; r++) memcpy(M + (size_t)(kt * 16 + r) * D + c, last + r * 16, 16 * sizeof(float));
            }
        }
        hc_at_x_bf16_cols(M, A, X, r0, nr, Kr, D, D16);
    }
    _tile_release();
}

/* The dX pass's projection terms of a group of g <= 16 tokens by tiles (one norm row per
 * token): pz[t][pos] = sum over k of dz[t][k] W'[k][pos], from dz (K = Kr per token)
 * rounded into za (16 rows of 16 Kq words: the A tiles, rows past g and values past Kr
 * zero) and Wp (hc_scaled_weight_dx_amx, the B tiles); rows of hc_amx_pz_row(nC) reals.
 * The caller has configured the tiles (hc_amx_begin, ~85 ns: once for many groups). */
static void hc_dx_products_amx(const real *dz, int g, int Kr, size_t nC, const real *Wp, uint32_t *za, real *pz) {
    const int Kq = hc_amx_kq(Kr);
    const size_t kw = 16 * (size_t)Kq, nb = hc_amx_pz_row(nC) / 16;
    for (int t = 0; t < 16; t++)
        for (int q = 0; q < Kq; q++) {
            const int w = t < g ? (Kr - 32 * q < 32 ? Kr - 32 * q : 32) : 0;
            const hc_bh v = w ? hc_bf16_load32(dz + (size_t)t * Kr + 32 * q, w) : (hc_bh)_mm512_setzero_ps();
            memcpy(za + (size_t)t * kw + 16 * (size_t)q, &v, sizeof v);
        }
    for (int q = 0; q < Kq; q++) {
#define HC_AMX_LOADA(t) _tile_loadd(t, za + 16 * q, (long)(kw * sizeof(uint32_t)))
        HC_AMX_SWITCH1(q, HC_AMX_LOADA)
#undef HC_AMX_LOADA
    }
    const uint32_t *wp = (const uint32_t *)Wp;
    for (size_t b = 0; b < nb; b++) {
        _tile_zero(0);
        for (int q = 0; q < Kq; q++) {
            _tile_loadd(7, wp + (b * kw + 16 * (size_t)q) * 16, 64);
#define HC_AMX_DPA(t) _tile_dpbf16ps(0, t, 7)
            HC_AMX_SWITCH1(q, HC_AMX_DPA)
#undef HC_AMX_DPA
        }
        _tile_stored(0, pz + 16 * b, (long)(nb * 16 * sizeof(real)));
    }
}
#undef HC_AMX_SWITCH
#undef HC_AMX_SWITCH1
#endif

/* An operand of the projection's products as they take it: itself, or rounded to bf16. */
static inline real hc_proj_operand(real x, int bf16) {
#if HC_BF16
    if (bf16) return hc_bf16_round(x);
#endif
    (void)bf16;
    return x;
}

/* Norm rows of the streams: the flat norm has one row of n*C values per token; the
 * per-stream norm one row of C values per (token, stream). */
static inline int hc_rows_per_token(const gpt_model *m) { return m->spec.norm == HC_NORM_FLAT ? 1 : m->n; }

/* 1 / sqrt(mean(x^2) + eps) of a norm row of D values. Four accumulators, each block of
 * 4 vectors in turn: one accumulator made a serial chain of D / 16 FMAs, the latency of
 * the write-back's loop (log item 33). */
static inline HC_FMA real hc_rstd_of(const real *x, size_t D) {
    HC_FMA_BODY
    hc_vec a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    size_t k = 0;
    for (; k + 4 * HC_VL <= D; k += 4 * HC_VL) {
        const hc_vec v0 = hc_load(x + k), v1 = hc_load(x + k + HC_VL);
        const hc_vec v2 = hc_load(x + k + 2 * HC_VL), v3 = hc_load(x + k + 3 * HC_VL);
        a0 += v0 * v0, a1 += v1 * v1, a2 += v2 * v2, a3 += v3 * v3;
    }
    for (; k + HC_VL <= D; k += HC_VL) { const hc_vec v = hc_load(x + k); a0 += v * v; }
    real ss = hc_vsum((a0 + a1) + (a2 + a3));
    for (; k < D; k++) ss = hc_fma_s(x[k], x[k], ss);
    if (!isfinite(ss)) { /* a float sum past 3.4e38 (an rms above ~1e19 / sqrt(D)): in double, where
                            finite values cannot overflow (else rstd 0 silently turned the
                            coefficients off); a row holding a NaN or inf stays so */
        double sd = 0;
        for (size_t i = 0; i < D; i++) sd += (double)x[i] * (double)x[i];
        return (real)(1.0 / sqrt(sd / (double)D + RMS_EPS));
    }
    return (real)(1.0 / sqrt((double)ss / (double)D + RMS_EPS));
}

/* The frame's parameters of sublayer l. */
typedef struct {
    const real *g, *W, *theta;
    real *dg, *dW, *dtheta;
} hc_params;

static hc_params hc_params_of(const gpt_model *m, int l) {
    block_index b = block_at(m, l / 2);
    int pi = b.hc_first[l % 2];
    hc_params p = {P(m, pi), P(m, pi + 1), P(m, pi + 2), G(m, pi), G(m, pi + 1), G(m, pi + 2)};
    return p;
}

/* Sizes of the frame's GEMMs: Kr outputs per norm row of D values. */
typedef struct {
    int n, C, K, rpt, Kr, nt;
    int blk; /* the streams in channel blocks (hc_xv): a training step's, with one norm row */
    const uint32_t *cols; /* then W's column of each position of a token's values (hc_xcol) */
    size_t D, nC, KD;
} hc_dims;

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

#if HC_BF16
/* The r dz of `count` tokens (K each, from dz) in bf16 pairs for the dX pass: per token
 * and norm row, Kp = ceil(Kr / 2) words, word q the pair (2q, 2q + 1) (0 past Kr). 32
 * values in order as bf16 are 16 such words: one conversion per 32 (hc_bf16_load32),
 * stored up to the row's last word. */
static void hc_dz_pairs_bf16(const hc_dims *d, const real *dz, int count, uint32_t *zp) {
    const int Kr = d->Kr, Kp = (Kr + 1) / 2;
    for (int i = 0; i < count * d->rpt; i++) {
        const real *z = dz + (size_t)i * Kr;
        uint32_t *o = zp + (size_t)i * Kp;
        for (int k0 = 0; k0 < Kr; k0 += 32) {
            const int w = Kr - k0 < 32 ? Kr - k0 : 32;
            const __mmask16 words = (__mmask16)((1u << ((w + 1) / 2)) - 1u);
            _mm512_mask_storeu_epi32(o + k0 / 2, words, (__m512i)hc_bf16_load32(z + k0, w));
        }
    }
}

#endif

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

/* W' = W diag(1 + g), (Kr, D), into this thread's copy. */
static void hc_scaled_weight(real *restrict Wg, const hc_params *p, const hc_dims *d) {
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        real *o = Wg + (size_t)k * d->D;
        for (size_t q = 0; q < d->D; q++) { /* its columns in the streams' order */
            const size_t j = d->blk ? d->cols[q] : q;
            o[q] = w[j] * ((real)1 + p->g[j]);
        }
    }
}

/* W' = W diag(1 + g) for the backward's dX pass, by blocks of HC_VL channels: block b's
 * columns of every row and stream side by side, [b][k][j][HC_VL] (j over the n streams
 * of a row with one norm row per token, else one), then the leftover channels,
 * [k][j][C - C0]. The pass walks each block's Kr * n vectors as one run of memory: in
 * rows of W', the same vectors lie at a stride of C reals, Kr * n lines that fall into a
 * few sets of L1 (32 lines of 512-byte stride share 8 of its 64 sets). */
static void hc_scaled_weight_blocks(real *restrict Wb, const hc_params *p, const hc_dims *d) {
    const int nj = d->rpt == 1 ? d->n : 1, C = d->C, C0 = C / HC_VL * HC_VL, Kr = d->Kr;
    for (int k = 0; k < Kr; k++)
        for (int j = 0; j < nj; j++) {
            const size_t col = (size_t)k * d->D + (size_t)j * C; /* row k, stream j's columns */
            const real *w = p->W + col, *g = p->g + (size_t)j * C;
            for (int c0 = 0; c0 < C0; c0 += HC_VL) {
                real *o = Wb + (((size_t)(c0 / HC_VL) * Kr + k) * nj + j) * HC_VL;
#pragma omp simd
                for (int v = 0; v < HC_VL; v++) o[v] = w[c0 + v] * ((real)1 + g[c0 + v]);
            }
            for (int c = C0; c < C; c++)
                Wb[(size_t)Kr * nj * C0 + ((size_t)k * nj + j) * (C - C0) + (c - C0)] = w[c] * ((real)1 + g[c]);
        }
}

#if HC_BF16
/* W' for the backward's dX pass with bf16 operands (hc_scaled_weight_blocks' values): the
 * rows in pairs, rows 2q and 2q + 1 (a zero row past Kr) side by side channel by channel
 * in 32-bit words, row 2q in the low half (vdpbf16ps's element 2i), by blocks of HC_VL
 * channels, [b][q][j][HC_VL]; then the leftover channels as hc_scaled_weight_blocks
 * keeps them, [k][j][C - C0], each value rounded to bf16. Kp = ceil(Kr / 2) pairs. */
static void hc_scaled_weight_pairs_bf16(real *restrict Wp, const hc_params *p, const hc_dims *d) {
    const int nj = d->rpt == 1 ? d->n : 1, C = d->C, C0 = C / HC_VL * HC_VL, Kr = d->Kr, Kp = (Kr + 1) / 2;
    uint32_t *o32 = (uint32_t *)Wp;
    for (int q = 0; q < Kp; q++)
        for (int j = 0; j < nj; j++) {
            const real *g = p->g + (size_t)j * C, *w0 = p->W + (size_t)(2 * q) * d->D + (size_t)j * C;
            const real *w1 = 2 * q + 1 < Kr ? w0 + d->D : NULL;
            _Static_assert(HC_VL == 16, "a block of the dX pass is one vector of 16 pairs");
            for (int c0 = 0; c0 < C0; c0 += HC_VL) { /* a conversion a block */
                const __m512 s1 = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_loadu_ps(g + c0));
                const __m512 lo = _mm512_mul_ps(_mm512_loadu_ps(w0 + c0), s1);
                const __m512 hi = w1 ? _mm512_mul_ps(_mm512_loadu_ps(w1 + c0), s1) : _mm512_setzero_ps();
                _mm512_storeu_si512(o32 + (((size_t)(c0 / HC_VL) * Kp + q) * nj + j) * HC_VL,
                                    hc_bf16_interleave(hc_bf16_ilv(), lo, hi));
            }
        }
    real *t = Wp + (size_t)Kp * nj * C0;
    for (int k = 0; k < Kr; k++)
        for (int j = 0; j < nj; j++) {
            const real *w = p->W + (size_t)k * d->D + (size_t)j * C, *g = p->g + (size_t)j * C;
            for (int c = C0; c < C; c++)
                t[((size_t)k * nj + j) * (C - C0) + (c - C0)] = hc_bf16_round(w[c] * ((real)1 + g[c]));
        }
}

#if HC_AMX
static void hc_scaled_weight_amx(real *restrict Wf, const hc_params *p, const hc_dims *d);
#endif

/* W' = W diag(1 + g) (hc_scaled_weight's values) in bf16, row by row, each row padded with
 * zeros to hc_bf16_row(D); amx: as hc_x_wt_amx's B tiles (hc_scaled_weight_amx). */
static void hc_scaled_weight_bf16(real *restrict Wf, const hc_params *p, const hc_dims *d, int amx) {
    HC_AMX_OR(amx, hc_scaled_weight_amx(Wf, p, d));
    const size_t rl = hc_bf16_row(d->D);
    real buf[32];
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        for (size_t j0 = 0; j0 < d->D; j0 += 32) {
            const int wn = d->D - j0 < 32 ? (int)(d->D - j0) : 32;
            for (int j = 0; j < wn; j++) { /* the columns in the streams' order */
                const size_t c = d->blk ? d->cols[j0 + (size_t)j] : j0 + (size_t)j;
                buf[j] = w[c] * ((real)1 + p->g[c]);
            }
            const hc_bh v = hc_bf16_load32(buf, wn);
            memcpy(Wf + (size_t)k * rl + j0 / 2, &v, sizeof v);
        }
    }
}

#if HC_AMX
/* W' = W diag(1 + g) (hc_scaled_weight's values) in bf16 as B tiles: word [q][k] the pair
 * (W'[k][2q], W'[k][2q + 1]), Kt * 16 words a row, q over hc_bf16_row(D) rows; zero past
 * Kr and past D. hc_w_bf16_scratch(Kr, D) reals. */
static void hc_scaled_weight_amx(real *restrict Wf, const hc_params *p, const hc_dims *d) {
    const size_t rl = hc_bf16_row(d->D), Kw = (size_t)hc_amx_kt(d->Kr) * 16;
    uint32_t *o = (uint32_t *)Wf;
    real buf[32];
    memset(o, 0, rl * Kw * sizeof *o);
    for (int k = 0; k < d->Kr; k++) {
        const real *w = p->W + (size_t)k * d->D;
        for (size_t j0 = 0; j0 < d->D; j0 += 32) { /* 32 values, 16 pairs, a conversion */
            const int wn = d->D - j0 < 32 ? (int)(d->D - j0) : 32;
            for (int j = 0; j < wn; j++) { /* the columns in the streams' order */
                const size_t c = d->blk ? d->cols[j0 + (size_t)j] : j0 + (size_t)j;
                buf[j] = w[c] * ((real)1 + p->g[c]);
            }
            const hc_bh v = hc_bf16_load32(buf, wn);
            uint32_t pr[16];
            memcpy(pr, &v, sizeof pr);
            for (int q = 0; q < (wn + 1) / 2; q++) o[(j0 / 2 + (size_t)q) * Kw + (size_t)k] = pr[q];
        }
    }
}

/* W' for the dX pass's products by tiles (one norm row per token): B tiles over the
 * positions of a token's values (the streams' order), [b][q][16]: word v of row q of
 * block b the pair (W'[2q][col], W'[2q + 1][col]) at position 16 b + v, rows q over
 * 16 hc_amx_kq(Kr) pairs of outputs; zero past Kr and past nC. */
static void hc_scaled_weight_dx_amx(real *restrict Wp, const hc_params *p, const hc_dims *d) {
    const size_t nb = hc_amx_pz_row(d->nC) / 16, nq = 16 * (size_t)hc_amx_kq(d->Kr);
    const __m512i ilv = hc_bf16_ilv();
    uint32_t *o = (uint32_t *)Wp;
    for (size_t b = 0; b < nb; b++)
        for (size_t q = 0; q < nq; q++) {
            real w[2][16] = {{0}}; /* rows 2q and 2q + 1 at the block's 16 positions */
            for (size_t e = 0; e < 2; e++) {
                const size_t k = 2 * q + e;
                if (k >= (size_t)d->Kr) continue;
                for (size_t v = 0; v < 16 && 16 * b + v < d->nC; v++) {
                    const size_t pos = 16 * b + v, c = d->blk ? d->cols[pos] : pos;
                    w[e][v] = p->W[k * d->D + c] * ((real)1 + p->g[c]);
                }
            }
            _mm512_storeu_si512(o + (b * nq + q) * 16,
                                hc_bf16_interleave(ilv, _mm512_loadu_ps(w[0]), _mm512_loadu_ps(w[1])));
        }
}
#endif

#endif

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
    for (size_t t = c0; t < c1; t++) hc_combine(h.u + t * d.C, h.pre + t * n, X + (t - c0) * d.nC, n, d.C, d.blk);
}

/* x rounded to the nearest bf16 value, ties to even (NaN stays NaN), as CUDA's
 * __float2bfloat16_rn: gpt_model.round_streams. Not hc_bf16_round: that one exists only in
 * AVX512_BF16 builds and flushes denormals to zero, as vcvtne2ps2bf16 does. */
static float hc_stream_bf16(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return x;
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

static void hc_round_streams(real *Y, size_t n) {
    for (size_t i = 0; i < n; i++) Y[i] = (real)hc_stream_bf16((float)Y[i]);
}

/* ---- the streams stored in bf16 (residual.stream_precision: bf16) ----
 * A training step with stream_bf16_on stores each X_l in bf16, in the first half of its
 * fp32 region (the layout stays fp32's: evals and probes run the same buffers in fp32),
 * which halves the bytes of the frame's passes over them. Every value is rounded as
 * round_streams rounds it. The write-back reads X_l's bf16 rows in its loop
 * (hc_out_token_n) and writes X_{l+1}'s rows in fp32 to the thread's staging rows, where
 * a pass rounds them and stores their bf16 (hc_bf16_narrow) and the next coefficients
 * read them; the backward widens a chunk's rows into the staging rows and runs the fp32
 * code on them. The same sums of the same values: the step's loss and gradients are
 * round_streams' bit for bit (tests/test_train). */
/* The bf16 storage of X_l (l in [0, Lh]). */
static uint16_t *hc_streams_bf16(const gpt_model *m, int l) { return (uint16_t *)model_streams(m, l); }

/* A bf16 value as a real, exactly: its bits are a float's high half. */
static inline real hc_bf16_get(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return (real)f;
}

/* y rounded to bf16 (as hc_stream_bf16: to nearest, ties to even; a NaN stays a NaN, quiet,
 * its payload's high bits kept), its bits stored at x; returns the rounded value. Written
 * apart from hc_stream_bf16 on purpose: round_streams is the reference this path is
 * checked against bit for bit (tests/test_train), and the GPU check holds that reference
 * to CUDA's rounding. */
static inline real hc_bf16_put(uint16_t *x, real y) {
    float f = (float)y;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t r = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    u = (u & 0x7fffffffu) > 0x7f800000u ? (u | 0x00400000u) & 0xffff0000u : r;
    *x = (uint16_t)(u >> 16);
    memcpy(&f, &u, sizeof f);
    return (real)f;
}

/* HC_VL bf16 values as a vector of reals (real may be double: the gradient-check build). */
typedef uint16_t hc_hvec __attribute__((vector_size(2 * HC_VL)));
typedef uint32_t hc_uvec __attribute__((vector_size(4 * HC_VL)));
typedef float hc_fvec __attribute__((vector_size(4 * HC_VL)));

static inline __attribute__((always_inline)) hc_vec hc_bf16_vget(const uint16_t *x) {
    hc_hvec h;
    memcpy(&h, x, sizeof h);
    const hc_uvec u = __builtin_convertvector(h, hc_uvec) << 16;
    return __builtin_convertvector((hc_fvec)u, hc_vec);
}

/* y = x widened to reals (in 512-bit vectors where the target has them: HC_WIDE). */
static HC_WIDE void hc_bf16_widen(real *restrict y, const uint16_t *restrict x, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = hc_bf16_get(x[i]);
}

/* y rounded to bf16 in place, its bits into x. */
static HC_WIDE void hc_bf16_narrow(uint16_t *restrict x, real *restrict y, size_t n) {
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] = hc_bf16_put(x + i, y[i]);
}

/* Write-back of one token: Y[i] = post[i] f + H[i,0] X[0] + ... + H[i,n-1] X[n-1] (in that
 * order). n is a constant in each instance (hc_out_token dispatches): a block of
 * channels of the n rows of X and of f is loaded once for the n rows of Y, and the
 * token's n^2 + n coefficients stay in registers. With xb (bf16 streams, also a
 * constant), X is the token's bf16 row, widened as it is loaded. (Rounding Y in this
 * loop too measured slower than a pass of its own, hc_bf16_narrow: its constants spill
 * the coefficients' registers; log item 38.) */
static inline __attribute__((always_inline)) HC_FMA void hc_out_token_n(const int n, const int xb, int C, const int blk,
                                                                        const void *X, const real *f,
                                                                        const real *H, const real *post, real *Y) {
    HC_FMA_BODY
    const real *Xf = (const real *)X;
    const uint16_t *Xh = (const uint16_t *)X;
    hc_vec hv[HC_MM], qv[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) {
        qv[i] = hc_splat(post[i]);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) hv[i * n + j] = hc_splat(H[i * n + j]);
    }
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) {
        hc_vec xv[HC_MAX_N];
#pragma GCC unroll 8
        for (int j = 0; j < n; j++)
            xv[j] = xb ? hc_bf16_vget(Xh + hc_xv(blk, n, C, j, c)) : hc_load(Xf + hc_xv(blk, n, C, j, c));
        const hc_vec fv = hc_load(f + c);
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) {
            hc_vec v = hc_opaque(qv[i] * fv); /* as in hc_combine_n */
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) v += hv[i * n + j] * xv[j];
            hc_store(Y + hc_xv(blk, n, C, i, c), v);
        }
    }
    for (; c < C; c++)
        for (int i = 0; i < n; i++) {
            real v = post[i] * f[c];
            for (int j = 0; j < n; j++) {
                const size_t o = hc_xt(blk, n, C, j) + (size_t)c;
                v = hc_fma_s(H[i * n + j], xb ? hc_bf16_get(Xh[o]) : Xf[o], v);
            }
            Y[hc_xt(blk, n, C, i) + (size_t)c] = v;
        }
}

static HC_FMA void hc_out_token(int n, int xb, int C, int blk, const void *X, const real *f, const real *H,
                                const real *post, real *Y) {
    HC_FMA_BODY
    switch (n * 4 + !!xb * 2 + !!blk) {
#define HC_OUT_CASE(k)                                                      \
    case 4 * k: hc_out_token_n(k, 0, C, 0, X, f, H, post, Y); break;        \
    case 4 * k + 1: hc_out_token_n(k, 0, C, 1, X, f, H, post, Y); break;    \
    case 4 * k + 2: hc_out_token_n(k, 1, C, 0, X, f, H, post, Y); break;    \
    case 4 * k + 3: hc_out_token_n(k, 1, C, 1, X, f, H, post, Y); break;
        HC_OUT_CASE(1) HC_OUT_CASE(2) HC_OUT_CASE(3) HC_OUT_CASE(4)
        HC_OUT_CASE(5) HC_OUT_CASE(6) HC_OUT_CASE(7) HC_OUT_CASE(8)
#undef HC_OUT_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

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
typedef struct {
    real *p[3];
    size_t left[3];
    int k;
} hc_zero_cursor;

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

/* Zero the next `count` reals of the share (all that is left: SIZE_MAX). */
static void hc_zero_next(hc_zero_cursor *z, size_t count) {
    while (count && z->k < 3) {
        const size_t c = count < z->left[z->k] ? count : z->left[z->k];
        memset(z->p[z->k], 0, c * sizeof(real));
        z->p[z->k] += c;
        z->left[z->k] -= c;
        count -= c;
        if (!z->left[z->k]) z->k++;
    }
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

/* The dots of one token's backward: dH[i][j] = dy_i . x_j, dpost[i] = dy_i . f,
 * dpre[i] = du . x_i (0 without du). n is a constant in each instance (hc_token_dots
 * dispatches), so the n + 1 accumulators of a row live in registers and dy_i is loaded
 * once per chunk of channels. */
static inline __attribute__((always_inline)) HC_FMA void hc_token_dots_n(const int n, int C, const int blk,
                                                                         const real *X,
                                                                         const real *dy, const real *f,
                                                                         const real *du, real *dH, real *dpost,
                                                                         real *dpre) {
    HC_FMA_BODY
    int c0 = C / HC_VL * HC_VL;
    if (n <= 4 && du && CPU_NREGS >= 32) {
        /* every dot of the token in one pass: n^2 + 2n accumulators (24 at n = 4: dH's,
         * dpost's, dpre's) in registers, each block of X, f, du and dy loaded once (with 16
         * registers they would live on the stack: the loops below instead). Each
         * accumulator takes its blocks in the same order as below, and their lanes are
         * summed together (hc_vsum_many): the same bits. */
        const int nn = n * n;
        hc_vec a[HC_MAX_N * (HC_MAX_N + 2)];
        real s[HC_MAX_N * (HC_MAX_N + 2)];
#pragma GCC unroll 24
        for (int k = 0; k < nn + 2 * n; k++) a[k] = (hc_vec){0};
        for (int c = 0; c < c0; c += HC_VL) {
            hc_vec xv[HC_MAX_N];
#pragma GCC unroll 4
            for (int j = 0; j < n; j++) xv[j] = hc_load(X + hc_xv(blk, n, C, j, c));
            const hc_vec fv = hc_load(f + c), uv = hc_load(du + c);
#pragma GCC unroll 4
            for (int i = 0; i < n; i++) {
                const hc_vec dv = hc_load(dy + hc_xv(blk, n, C, i, c));
#pragma GCC unroll 4
                for (int j = 0; j < n; j++) a[i * n + j] += dv * xv[j];
                a[nn + i] += dv * fv;
            }
#pragma GCC unroll 4
            for (int j = 0; j < n; j++) a[nn + n + j] += uv * xv[j];
        }
        hc_vsum_many(nn + 2 * n, a, s);
#pragma GCC unroll 4
        for (int i = 0; i < n; i++) {
            const real *dyi = dy + hc_xt(blk, n, C, i); /* its channels past c0 */
#pragma GCC unroll 4
            for (int j = 0; j < n; j++)
                dH[i * n + j] = hc_dot_tail(s[i * n + j], dyi, X + hc_xt(blk, n, C, j), c0, C);
            dpost[i] = hc_dot_tail(s[nn + i], dyi, f, c0, C);
        }
#pragma GCC unroll 4
        for (int j = 0; j < n; j++) dpre[j] = hc_dot_tail(s[nn + n + j], du, X + hc_xt(blk, n, C, j), c0, C);
        return;
    }
    for (int i = 0; i < n; i++) {
        const real *dyi = dy + hc_xt(blk, n, C, i);
        hc_vec acc[HC_MAX_N + 1];
        real s[HC_MAX_N + 1];
#pragma GCC unroll 9
        for (int j = 0; j <= n; j++) acc[j] = (hc_vec){0};
        for (int c = 0; c < c0; c += HC_VL) {
            const hc_vec dv = hc_load(dy + hc_xv(blk, n, C, i, c));
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) acc[j] += dv * hc_load(X + hc_xv(blk, n, C, j, c));
            acc[n] += dv * hc_load(f + c);
        }
        hc_vsum_many(n + 1, acc, s);
#pragma GCC unroll 8
        for (int j = 0; j < n; j++) dH[i * n + j] = hc_dot_tail(s[j], dyi, X + hc_xt(blk, n, C, j), c0, C);
        dpost[i] = hc_dot_tail(s[n], dyi, f, c0, C);
    }
    if (!du) {
        for (int i = 0; i < n; i++) dpre[i] = 0;
        return;
    }
    hc_vec acc[HC_MAX_N];
    real s[HC_MAX_N];
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) acc[i] = (hc_vec){0};
    for (int c = 0; c < c0; c += HC_VL) {
        const hc_vec dv = hc_load(du + c);
#pragma GCC unroll 8
        for (int i = 0; i < n; i++) acc[i] += dv * hc_load(X + hc_xv(blk, n, C, i, c));
    }
    hc_vsum_many(n, acc, s);
#pragma GCC unroll 8
    for (int i = 0; i < n; i++) dpre[i] = hc_dot_tail(s[i], du, X + hc_xt(blk, n, C, i), c0, C);
}

static HC_FMA void hc_token_dots(int n, int C, int blk, const real *X, const real *dy, const real *f, const real *du,
                                 real *dH, real *dpost, real *dpre) {
    HC_FMA_BODY
    switch (n) {
#define HC_DOTS_CASE(k) \
    case k:                                                                             \
        if (blk) hc_token_dots_n(k, C, 1, X, dy, f, du, dH, dpost, dpre);              \
        else hc_token_dots_n(k, C, 0, X, dy, f, du, dH, dpost, dpre);                  \
        break;
        HC_DOTS_CASE(1) HC_DOTS_CASE(2) HC_DOTS_CASE(3) HC_DOTS_CASE(4)
        HC_DOTS_CASE(5) HC_DOTS_CASE(6) HC_DOTS_CASE(7) HC_DOTS_CASE(8)
#undef HC_DOTS_CASE
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

/* The dots of token t's backward (hc_token_dots), its row of X at X, into dH, dpost, dpre. */
static inline void hc_token_grads(const hc_acts *h, const hc_dims *d, size_t t, const real *X, const real *dY,
                                  const real *du, real *dH, real *dpost, real *dpre) {
    hc_token_dots(d->n, d->C, d->blk, X, dY + t * d->nC, h->f + t * d->C, du ? du + t * d->C : NULL, dH,
                  dpost, dpre);
}

/* Token t after the method's backward has written its dz: the norm's own coefficient
 * of each stream, cj[j] = r^2 (dz . z) / D of stream j's norm row, pj[j] = pre[j] (0
 * without du), and dz *= r. */
static inline void hc_token_dx_coefs(const hc_acts *h, const hc_dims *d, size_t t, int has_du, real *dz, real *cj,
                                     real *pj) {
    const int n = d->n, K = d->K, rpt = d->rpt, Kr = d->Kr;
    const real *z = h->z + t * K;
    real *dzt = dz + t * K;
    real c[HC_MAX_N];
    for (int r = 0; r < rpt; r++) {
        const real rs = h->rstd[t * rpt + r];
        real dzz = 0;
        for (int k = 0; k < Kr; k++) dzz += dzt[r * Kr + k] * z[r * Kr + k];
        c[r] = rs * rs * dzz / (real)d->D;
        for (int k = 0; k < Kr; k++) dzt[r * Kr + k] *= rs;
    }
    for (int j = 0; j < n; j++) {
        cj[j] = c[rpt == 1 ? 0 : j];
        pj[j] = has_du ? h->pre[t * n + j] : 0;
    }
}

/* dX of TT tokens from t0, their rows of X from Xr, in one pass (the coefficients of
 * hc_token_dx_coefs in cj, pj, n per token): for each stream j,
 *   dx_j = pre_j du - c_j x_j + sum_i H_ij dy_i + sum_k (r dz)_k W'[k, cols of j]
 * the last sum being the projection's backward (W' is (Kr, D): stream j's columns are
 * jC.. of row 0's dz with one norm row per token, or all D = C of row j's), read from
 * Wb in the blocks of hc_scaled_weight_blocks. Each vector of W' loaded serves the TT
 * tokens. The first three terms go first, token by token, with
 * the token's n^2 coefficients H_ij in registers for all its blocks of channels up to 4
 * streams (beyond, one broadcast load each per block), into dX; the
 * projection's terms are then added block by block. n is a constant in each instance
 * (hc_tokens_dx dispatches). dX may be dY itself: each block of channels of a token
 * reads its n rows of dY before it writes any row of dX. With bf16 operands, zp holds the
 * tokens' dz in pairs for vdpbf16ps; or pz the projection's terms themselves, already
 * summed by AMX tiles (hc_dx_products_amx, rows of hc_amx_pz_row(nC)), added in place of
 * the Kr multiply-adds. */
static inline __attribute__((always_inline)) HC_FMA void hc_tokens_dx_n(const int n, const int TT, const int blk,
                                                                        const hc_acts *h,
                                                                        const hc_dims *d, size_t t0, const real *Xr,
                                                                        const real *dY, const real *du, real *dX,
                                                                        const real *dz, const real *cj, const real *pj,
                                                                        const real *Wb, const real *wsum,
                                                                        real *sum, const uint32_t *zp,
                                                                        const real *pz) {
    HC_FMA_BODY
    const int C = d->C, Kr = d->Kr, flat = d->rpt == 1, Kp = (Kr + 1) / 2;
    const size_t nC = d->nC, pzr = hc_amx_pz_row(nC);
    const real *X[4], *dy[4], *uu[4], *H[4], *zz[4], *ws[4];
    real *dx[4], *sm[4];
    for (int t = 0; t < TT; t++) {
        const size_t tt = t0 + (size_t)t;
        X[t] = Xr + (size_t)t * nC;
        dy[t] = dY + tt * nC;
        uu[t] = du ? du + tt * C : X[t]; /* with pj = 0 the term vanishes exactly */
        dx[t] = dX + tt * nC;
        H[t] = h->H + tt * (size_t)(n * n);
        zz[t] = dz + tt * (size_t)d->K;
        ws[t] = wsum ? wsum + tt * (size_t)n : hc_ones;
        sm[t] = sum ? sum + tt * C : NULL;
    }
    const int C0 = C / HC_VL * HC_VL;
    for (int t = 0; t < TT; t++) { /* the stream terms, token by token */
        hc_vec hv[16]; /* up to 4 streams, the n^2 coefficients in registers */
        if (n <= 4)
#pragma GCC unroll 16
            for (int e = 0; e < n * n; e++) hv[e] = hc_splat(H[t][e]);
        for (int c = 0; c < C0; c += HC_VL) {
            hc_vec dv[HC_MAX_N];
#pragma GCC unroll 8
            for (int i = 0; i < n; i++) dv[i] = hc_load(dy[t] + hc_xv(blk, n, C, i, c));
            const hc_vec uv = hc_load(uu[t] + c);
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) {
                hc_vec v = hc_opaque(pj[t * n + j] * uv) - cj[t * n + j] * hc_load(X[t] + hc_xv(blk, n, C, j, c));
#pragma GCC unroll 8
                for (int i = 0; i < n; i++) v += (n <= 4 ? hv[i * n + j] : H[t][i * n + j] - (hc_vec){0}) * dv[i];
                hc_store(dx[t] + hc_xv(blk, n, C, j, c), v);
            }
        }
    }
    const int nj = flat ? n : 1;
    int c = 0;
    for (; c + HC_VL <= C; c += HC_VL) { /* then the projection's terms, tile by tile */
        const real *wb = Wb + (size_t)(c / HC_VL) * Kr * nj * HC_VL; /* this block's W' */
        hc_vec acc[4][HC_MAX_N];
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) acc[t][j] = hc_load(dx[t] + hc_xv(blk, n, C, j, c));
#if HC_AMX
        if (pz) { /* by AMX tiles, already: the TT tokens' rows of pz (hc_dx_products_amx) */
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                for (int j = 0; j < n; j++) acc[t][j] += hc_load(pz + (size_t)t * pzr + hc_xv(blk, n, C, j, c));
        } else
#endif
#if HC_BF16
        if (zp) { /* bf16 operands: W' in pairs of rows (hc_scaled_weight_pairs_bf16), dz's
                     pairs of the TT tokens (their rows of Kp words from zp) */
            const uint32_t *wp = (const uint32_t *)Wb + (size_t)(c / HC_VL) * Kp * nj * HC_VL;
            for (int q = 0; q < Kp; q++) {
                if (flat) {
                    hc_bh w[HC_MAX_N];
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) memcpy(&w[j], wp + ((size_t)q * n + j) * HC_VL, sizeof w[j]);
#pragma GCC unroll 4
                    for (int t = 0; t < TT; t++) {
                        const hc_bh b = (hc_bh)_mm512_set1_epi32((int)zp[(size_t)t * Kp + q]);
#pragma GCC unroll 8
                        for (int j = 0; j < n; j++) acc[t][j] = (hc_vec)_mm512_dpbf16_ps((__m512)acc[t][j], b, w[j]);
                    }
                } else {
                    hc_bh w;
                    memcpy(&w, wp + (size_t)q * HC_VL, sizeof w);
#pragma GCC unroll 4
                    for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                        for (int j = 0; j < n; j++) {
                            const hc_bh b = (hc_bh)_mm512_set1_epi32((int)zp[((size_t)t * n + j) * Kp + q]);
                            acc[t][j] = (hc_vec)_mm512_dpbf16_ps((__m512)acc[t][j], b, w);
                        }
                }
            }
        } else
#endif
        if (flat) { /* one norm row: stream j's columns of W' row k, dz_k of the token */
            for (int k = 0; k < Kr; k++) {
                hc_vec w[HC_MAX_N];
#pragma GCC unroll 8
                for (int j = 0; j < n; j++) w[j] = hc_opaque(hc_load(wb + (size_t)(k * n + j) * HC_VL));
#pragma GCC unroll 4
                for (int t = 0; t < TT; t++) {
                    const hc_vec b = hc_splat(zz[t][k]);
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) acc[t][j] += b * w[j];
                }
            }
        } else { /* a norm row per stream: W' row k's columns c for every stream, dz of row j */
            for (int k = 0; k < Kr; k++) {
                const hc_vec w = hc_opaque(hc_load(wb + (size_t)k * HC_VL));
#pragma GCC unroll 4
                for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
                    for (int j = 0; j < n; j++) acc[t][j] += zz[t][j * Kr + k] * w;
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < TT; t++)
#pragma GCC unroll 8
            for (int j = 0; j < n; j++) hc_store(dx[t] + hc_xv(blk, n, C, j, c), acc[t][j]);
        if (sum) /* after the block's du was read: sum may be du itself */
#pragma GCC unroll 4
            for (int t = 0; t < TT; t++) {
                hc_vec v = hc_opaque(ws[t][0] * acc[t][0]);
#pragma GCC unroll 8
                for (int j = 1; j < n; j++) v += ws[t][j] * acc[t][j];
                hc_store(sm[t] + c, v);
            }
    }
    for (; c < C; c++)
        for (int t = 0; t < TT; t++) {
            real dvs[HC_MAX_N];
            for (int i = 0; i < n; i++) dvs[i] = dy[t][hc_xt(blk, n, C, i) + (size_t)c];
            for (int j = 0; j < n; j++) {
                real v = hc_fma_s(-cj[t * n + j], X[t][hc_xt(blk, n, C, j) + (size_t)c], pj[t * n + j] * uu[t][c]);
                for (int i = 0; i < n; i++) v = hc_fma_s(H[t][i * n + j], dvs[i], v);
                if (pz) {
                    v += pz[(size_t)t * pzr + hc_xt(blk, n, C, j) + (size_t)c];
                } else {
                    const real *w = Wb + (size_t)(zp ? Kp : Kr) * nj * C0 + (size_t)(flat ? j : 0) * (C - C0) + (c - C0);
                    const int zr = flat ? 0 : j * Kr;
                    for (int k = 0; k < Kr; k++)
                        v = hc_fma_s(hc_proj_operand(zz[t][zr + k], zp != NULL), w[(size_t)k * nj * (C - C0)], v);
                }
                dx[t][hc_xt(blk, n, C, j) + (size_t)c] = v;
            }
            if (sum) {
                real v = ws[t][0] * dx[t][hc_xt(blk, n, C, 0) + (size_t)c];
                for (int j = 1; j < n; j++) v = hc_fma_s(ws[t][j], dx[t][hc_xt(blk, n, C, j) + (size_t)c], v);
                sm[t][c] = v;
            }
        }
}

/* Tokens per tile of hc_tokens_dx: the TT n rows of dY a block of channels holds. */
#if CPU_NREGS >= 32
#define HC_DX_TILE(n) ((n) <= 4 ? 4 : 2) /* n <= 4: 16 accumulators, 4 W' vectors, a broadcast */
#else
#define HC_DX_TILE(n) ((n) <= 4 ? 2 : 1) /* 8 + 4 + 1 of 16 registers (1, 3, 4: slower) */
#endif

/* dX of the g tokens from t0, their rows of X from Xr (hc_tokens_dx_n), in tiles of
 * HC_DX_TILE(n) tokens and single tokens for the rest. cj, pj: n per token, from
 * hc_token_dx_coefs. */
static HC_FMA void hc_tokens_dx(const hc_acts *h, const hc_dims *d, size_t t0, int g, const real *Xr, const real *dY,
                                const real *du, real *dX, const real *dz, const real *cj, const real *pj,
                                const real *Wb, const real *wsum, real *sum, const uint32_t *zp, const real *pz) {
    HC_FMA_BODY
    const size_t zrow = (size_t)d->rpt * (size_t)((d->Kr + 1) / 2); /* a token's words in zp */
    const size_t pzr = hc_amx_pz_row(d->nC);
    const int n = d->n;
    int i = 0;
    switch (n) {
#define HC_DX_RUN(k, b)                                                                                         \
        for (; i + HC_DX_TILE(k) <= g; i += HC_DX_TILE(k))                                                      \
            hc_tokens_dx_n(k, HC_DX_TILE(k), b, h, d, t0 + (size_t)i, Xr + (size_t)i * d->nC, dY, du, dX, dz,   \
                           cj + i * k, pj + i * k, Wb, wsum, sum, zp ? zp + (size_t)i * zrow : NULL,            \
                           pz ? pz + (size_t)i * pzr : NULL);                                                   \
        for (; i < g; i++)                                                                                      \
            hc_tokens_dx_n(k, 1, b, h, d, t0 + (size_t)i, Xr + (size_t)i * d->nC, dY, du, dX, dz, cj + i * k,   \
                           pj + i * k, Wb, wsum, sum, zp ? zp + (size_t)i * zrow : NULL, pz ? pz + (size_t)i * pzr : NULL);
#define HC_DX_CASE(k)                                                                                           \
    case k:                                                                                                     \
        if (d->blk) { HC_DX_RUN(k, 1) } else { HC_DX_RUN(k, 0) }                                                \
        break;
        HC_DX_CASE(1) HC_DX_CASE(2) HC_DX_CASE(3) HC_DX_CASE(4)
        HC_DX_CASE(5) HC_DX_CASE(6) HC_DX_CASE(7) HC_DX_CASE(8)
#undef HC_DX_CASE
#undef HC_DX_RUN
    default: die(1, "hyper-connection frame: n = %d streams is more than %d", n, HC_MAX_N);
    }
}

/* Ask for the len reals at p (write: for writing) ahead of their use. */
static inline void hc_prefetch(const real *p, size_t len, int write) {
    const char *b = (const char *)p, *e = (const char *)(p + len);
    if (write)
        for (; b < e; b += 64) __builtin_prefetch(b, 1);
    else
        for (; b < e; b += 64) __builtin_prefetch(b, 0);
}

/* How the dX pass takes the projection's term dz W': fp32 products; bf16 operands by
 * vdpbf16ps (W' in pairs of rows, each group's dz in pairs); by AMX tiles (one norm row per
 * token and Kr > 16: each group's products, hc_dx_products_amx); or, with AMX at Kr <= 16,
 * where the tiles' stores cost more than they save and vdpbf16ps runs at a quarter of the
 * FMA's rate (log item 47), the fp32 loop on W' and dz rounded to bf16 (their products are
 * exact in fp32). */
typedef enum { HC_DX_FP32, HC_DX_PAIRS, HC_DX_TILES, HC_DX_ROUNDED } hc_dx_kind;

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

/* W' = W diag(1 + g) for the dX pass, into Wb in the layout of its kind. */
static void hc_dx_weights(hc_dx_kind kind, real *Wb, const hc_params *p, const hc_dims *d) {
    switch (kind) {
#if HC_AMX
    case HC_DX_TILES: hc_scaled_weight_dx_amx(Wb, p, d); return;
    case HC_DX_ROUNDED:
        hc_scaled_weight_blocks(Wb, p, d);
        hc_bf16_round_n(Wb, d->KD);
        return;
#endif
#if HC_BF16
    case HC_DX_PAIRS: hc_scaled_weight_pairs_bf16(Wb, p, d); return;
#endif
    default: hc_scaled_weight_blocks(Wb, p, d);
    }
}

/* Tokens [t0, t1) of the frame's backward (their rows of X from Xr), hc_lanes() at a
 * time: the dots, the method's backward (dz, dtheta into my_dtheta), each token's
 * dz *= r and norm coefficients, then the group's dX pass (hc_tokens_dx, with
 * sum = wsum . dX when sum is given). While a token's dots run, the next token's rows
 * and method cache are prefetched: the hardware's streams restart at every 4 KB page,
 * a group reads its tokens' caches as 16 interleaved streams, and one token ahead
 * measured faster than a whole group ahead (docs/performance.md, log item 28); the dX
 * pass finds them in L2. Its rows of X and dY only in rows: in channel blocks each is
 * one run of memory, which the hardware follows, and the hints measured slower (item 40).
 * With Xb (bf16 streams), Xr is the staging rows, into which this widens the rows from
 * Xb a token ahead instead, in the same place. With zc, also zper more reals of the zeroing
 * zc walks, before each token's dots: its stores drain while the token's work runs.
 * zp: the bf16 scratch of a group's dz (hc_dz_pairs_bf16, or with pz the A tiles of
 * hc_dx_products_amx, whose products go to pz); dz_bf16: instead, each group's dz rounded
 * to bf16 in place for the fp32 loop (W' in Wb rounded alike). */
static void hc_tokens_backward(const gpt_model *m, const hc_params *p, const hc_acts *h, const hc_dims *d, size_t t0,
                               size_t t1, real *Xr, const uint16_t *Xb, const real *dY, const real *du,
                               real *dX, real *dz, const real *Wb, const real *wsum, real *sum, real *my_dtheta,
                               hc_zero_cursor *zc, size_t zper, uint32_t *zp, real *pz, int dz_bf16) {
    const int n = d->n, K = d->K, cs = m->spec.cache, lanes = hc_lanes(&m->spec);
    real dpre[HC_LANES * HC_MAX_N], dpost[HC_LANES * HC_MAX_N], dH[HC_LANES * HC_MM];
    real cj[HC_LANES * HC_MAX_N], pj[HC_LANES * HC_MAX_N];
#if HC_AMX
    if (pz) hc_amx_begin(); /* for every group's hc_dx_products_amx */
#endif
    if (Xb && t1 > t0) hc_bf16_widen(Xr, Xb, d->nC);
    for (size_t g0 = t0; g0 < t1; g0 += (size_t)lanes) {
        const int g = t1 - g0 < (size_t)lanes ? (int)(t1 - g0) : lanes;
        for (int i = 0; i < g; i++) {
            const size_t t = g0 + (size_t)i + 1; /* the next token's rows, while this one's dots run */
            if (t < t1) {
                if (Xb) hc_bf16_widen(Xr + (t - t0) * d->nC, Xb + (t - t0) * d->nC, d->nC);
                else if (!d->blk) { /* in channel blocks the hardware's prefetchers follow them */
                    hc_prefetch(Xr + (t - t0) * d->nC, d->nC, 0);
                    hc_prefetch(dY + t * d->nC, d->nC, 1);
                }
                hc_prefetch(h->f + t * d->C, d->C, 0);
                if (du) hc_prefetch(du + t * d->C, d->C, 0);
                if (cs) hc_prefetch(h->cache + t * cs, (size_t)cs, 0);
            }
            if (zc) hc_zero_next(zc, zper);
            hc_token_grads(h, d, g0 + i, Xr + (g0 + i - t0) * d->nC, dY, du, dH + i * n * n, dpost + i * n,
                           dpre + i * n);
        }
        hc_backward_tokens(&m->spec, p->theta, h->z + g0 * K, h->cache + g0 * cs, g, dpre, dpost, dH, dz + g0 * K,
                           my_dtheta);
        for (int i = 0; i < g; i++) hc_token_dx_coefs(h, d, g0 + i, du != NULL, dz, cj + i * n, pj + i * n);
#if HC_AMX
        if (pz) hc_dx_products_amx(dz + g0 * K, g, d->Kr, d->nC, Wb, zp, pz);
        else
#endif
#if HC_BF16
        if (zp) hc_dz_pairs_bf16(d, dz + g0 * K, g, zp);
        else if (dz_bf16) hc_bf16_round_n(dz + g0 * K, (size_t)g * K); /* dW rounds them again: the same */
#else
        (void)dz_bf16;
#endif
        hc_tokens_dx(h, d, g0, g, Xr + (g0 - t0) * d->nC, dY, du, dX, dz, cj, pj, Wb, wsum, sum, pz ? NULL : zp, pz);
    }
#if HC_AMX
    if (pz) _tile_release();
#endif
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
                hc_tokens_backward(m, &p, &h, &d, c0, c1, Xs + (c0 - s0) * d.nC, Xb ? Xb + c0 * d.nC : NULL, dY,
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
 * rows of every buffer; attention reads the earlier tokens' keys and values from kv. */
static void sublayers_forward(gpt_model *m, int B, int branches, const real *enc, real *xsum, const model_kv *kv,
                              int pos) {
    act_layout a = layout_acts(m, B);
    grad_layout gl = layout_grads(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C, NH = m->NH;
    const size_t N = kv ? (size_t)B : (size_t)B * T;
    void (*const mm)(real *, const real *, const real *, const real *, size_t, int, int) =
        kv ? matmul_forward_rows : matmul_forward;
    hc_scratch hs = hc_scratch_of(m, &gl);
    if (m->variant) hc_frames_forward(m, -1, 0, &hs, N, enc, NULL); /* X_0 and its rms, sublayer 0's coefficients */
    for (int l = 0; l < m->Lh; l++) {
        int blk = l / 2, is_mlp = l % 2;
        block_index b = block_at(m, blk);
        hc_acts h = model_hc_acts(m, l);
        real *Xnext = A + a.streams + (size_t)(l + 1) * a.s_streams;
        real *ln = A + a.ln + l * a.s_ln, *mean = A + a.ln_mean + l * a.s_ln1, *rstd = A + a.ln_rstd + l * a.s_ln1;
        if (!branches) {
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

/* From the embeddings in the activations' enc rows (N of them: B T, or B decoding with
 * kv) to the logits: the streams, the sublayers, the final LayerNorm and the LM head. */
static void forward_from_enc(gpt_model *m, int B, size_t N, const model_kv *kv, int pos) {
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int C = m->C, V = m->V;
    real *enc = A + a.enc, *X0 = A + a.streams, *xsum = A + a.xsum;
    if (m->variant) { /* the frame's first and last regions write X_0 and xsum */
        sublayers_forward(m, B, 1, enc, xsum, kv, pos);
    } else { /* rc: one stream, copied in and out */
#pragma omp parallel for schedule(static)
        for (size_t t = 0; t < N; t++) memcpy(X0 + t * C, enc + t * C, (size_t)C * sizeof(real));
        prof_tick(PROF_HC_STREAMS);
        sublayers_forward(m, B, 1, NULL, NULL, kv, pos);
        const real *XL = A + a.streams + (size_t)m->Lh * a.s_streams;
#pragma omp parallel for schedule(static)
        for (size_t t = 0; t < N; t++) memcpy(xsum + t * C, XL + t * C, (size_t)C * sizeof(real));
        prof_tick(PROF_HC_STREAMS);
    }
    const int lnf = lnf_weight(m);
    layernorm_forward(A + a.lnf, A + a.lnf_mean, A + a.lnf_rstd, xsum, P(m, lnf), lnf_bias(m, m->params), N, C);
    prof_tick(PROF_LAYERNORM);
    (kv ? matmul_forward_rows : matmul_forward)(A + a.logits, A + a.lnf, P(m, 0), NULL, N, C, V);
    prof_tick(PROF_MATMUL);
}

real model_forward(gpt_model *m, const int *inputs, const int *targets, int B) {
    if (!m->acts || m->B != B) model_alloc_acts(m, B);
    act_layout a = layout_acts(m, B);
    real *A = m->acts;
    const int T = m->T, C = m->C, V = m->V;
    const size_t N = (size_t)B * T;
    memcpy(m->inputs, inputs, N * sizeof(int));
    if (targets) memcpy(m->targets, targets, N * sizeof(int));

    prof_start();
    encoder_forward(A + a.enc, inputs, P(m, 0), P(m, 1), B, T, C);
    prof_tick(PROF_EMBED_LOSS);
    forward_from_enc(m, B, N, NULL, 0);
    if (!targets) { m->mean_loss = 0; return 0; }
    crossentropy_forward(A + a.losses, A + a.probs, A + a.logits, targets, N, V);
    double s = 0;
    size_t cnt = 0;
    for (size_t t = 0; t < N; t++)
        if (targets[t] >= 0) { s += A[a.losses + t]; cnt++; }
    m->mean_loss = (real)(cnt ? s / (double)cnt : 0);
    prof_tick(PROF_EMBED_LOSS);
    return m->mean_loss;
}

void model_streams_forward(gpt_model *m, const real *X0, int branches) {
    act_layout a = layout_acts(m, m->B);
    memcpy(m->acts + a.streams, X0, a.s_streams * sizeof(real));
    sublayers_forward(m, m->B, branches, NULL, NULL, NULL, 0);
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
