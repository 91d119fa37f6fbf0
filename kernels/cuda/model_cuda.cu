/* model_cuda.cu: the GPT of harness/model.c on the device (model_cuda.h has the API).
 *
 * Mirrors model.c step for step: embedding -> Lh sublayers (frame in, LayerNorm,
 * attention or MLP, frame out) -> sum of streams -> ln_f -> tied LM head -> softmax
 * cross-entropy, and the same in reverse. The parameter table is the CPU model's
 * (tensors are found by name), so checkpoints, probes and the optimizer see one layout.
 *
 * Memory (llm.c's discipline): one device buffer each for parameters, gradients, the two
 * AdamW moments, activations and gradient scratch, laid out once at creation; nothing is
 * allocated inside a step. In bf16 mode there is also a bf16 copy of the parameters
 * (rewritten by the AdamW kernel) and bf16 copies of every activation that feeds a matrix
 * product (LayerNorm outputs, attention output, GELU output, ln_f output).
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cuda/hc_cuda.cuh"
#include "kernels/cuda/ops_cuda.cuh"
#include "kernels/cuda/model_cuda.h"

#define CUDA_MEM_MARGIN ((size_t)512 << 20) /* device memory left free for cuBLAS and the driver */
#define CUDA_ALIGN 64 /* elements: every matrix and activation starts on a 256-byte boundary */
#define CUDA_GRID_Y_MAX 65535 /* the largest gridDim.y */

static size_t align_up(size_t o) { return (o + CUDA_ALIGN - 1) / CUDA_ALIGN * CUDA_ALIGN; }

/* ---- layout ------------------------------------------------------------------------------------ */

/* Tensor indices of one block (and its two frames) in the parameter table. */
typedef struct {
    int ln1w, ln1b, qkvw, qkvb, projw, projb, ln2w, ln2b, fcw, fcb, fcpw, fcpb;
    int hc_norm[2], hc_proj[2];
    size_t hc_theta[2]; /* device offset of theta (contiguous after proj.weight) */
} block_params;

/* Offsets (elements) into the activation buffers, as model.c's act_layout. */
typedef struct {
    size_t enc, streams, rstd, z, pre, post, H, cache, u, ln, ln_mean, ln_rstd, qkv, lse, atty, fch, fchg, f;
    size_t xsum, lnf, lnf_mean, lnf_rstd, logits, losses, total;
    size_t s_streams, s_rstd, s_z, s_pre, s_H, s_cache, s_u, s_C, s_lse, s_qkv, s_fch;
    /* bf16 copies */
    size_t b_ln, b_atty, b_fchg, b_lnf, b_total;
    /* gradient scratch */
    size_t dX0, dX1, dz, du, df, dcoef, srow, dln, dqkv, datty, dfch, dfchg, dxsum, dlnf, dlogits, g_total;
} dev_layout;

struct cuda_model {
    cuda_ctx ctx;
    s2hc_config cfg;
    int L, C, NH, T, V, n, Lh, B, frame, nr;
    int gelu_erf;              /* model.gelu: erf (the exact GELU), else GPT-2's tanh form */
    int x_bf16;                /* residual.stream_precision: bf16 (frame methods): the streams stored in bf16,
                                  in the first half of each layer's float slot */
    size_t N;
    hc_spec spec;              /* device copy (perms in device memory) */
    int n_tensors;
    param_info *pinfo;         /* host copy of the table */
    size_t n_params;           /* the CPU buffer's length */
    size_t *doff;              /* device offset of each tensor: the CPU layout with every
                                  rank-2 tensor moved up to a 64-element boundary, so the
                                  GEMMs get aligned operands; rank-1 runs (theta) stay contiguous */
    size_t n_dev;              /* the device buffers' length (padding is zero and stays zero) */
    block_params *bp;
    int wte, wpe, lnfw, lnfb;
    float *params, *grads, *mom, *var;
    bf16 *params_bf;           /* bf16 mode only */
    size_t *seg_start;         /* AdamW segments (device): n_tensors + 1 */
    float *seg_wd;             /* weight decay per tensor (device) */
    dev_layout a;
    float *acts, *gacts;
    bf16 *acts_bf;
    int *d_tok, *h_tok;        /* inputs N | targets N | order N | ids V | starts V + 1 */
    float *h_losses;           /* pinned, N */
    int n_ids;
    size_t bytes;
};

static dev_layout layout_of(const cuda_model *cm) {
    dev_layout a;
    memset(&a, 0, sizeof a);
    const size_t N = cm->N, C = cm->C, n = cm->n, Lh = cm->Lh, L = cm->L, V = cm->V;
    const int fr = cm->frame;
    const size_t K = fr ? (size_t)cm->spec.K : 0, cs = fr ? (size_t)cm->spec.cache : 0, nr = fr ? cm->nr : 0;
    a.s_streams = N * n * C;
    a.s_rstd = N * nr;
    a.s_z = N * K;
    a.s_pre = fr ? N * n : 0;
    a.s_H = fr ? N * n * n : 0;
    a.s_cache = N * cs;
    a.s_u = fr ? N * C : 0;
    a.s_C = N * C;
    a.s_lse = (size_t)cm->B * cm->NH * cm->T;
    a.s_qkv = N * 3 * C;
    a.s_fch = N * 4 * C;
    const int b16 = cm->ctx.use_bf16; /* no fp32 copy of the outputs only products read (AF32) */
    size_t o = 0;
#define TAKE(field, size) do { o = align_up(o); a.field = o; o += (size); } while (0)
    TAKE(enc, fr ? N * C : 0);
    TAKE(streams, (Lh + 1) * a.s_streams);
    TAKE(rstd, (Lh + 1) * a.s_rstd);
    TAKE(z, Lh * a.s_z);
    TAKE(pre, Lh * a.s_pre);
    TAKE(post, Lh * a.s_pre);
    TAKE(H, Lh * a.s_H);
    TAKE(cache, Lh * a.s_cache);
    TAKE(u, Lh * a.s_u);
    TAKE(ln, b16 ? 0 : Lh * a.s_C);
    TAKE(ln_mean, Lh * N);
    TAKE(ln_rstd, Lh * N);
    TAKE(qkv, L * a.s_qkv);
    TAKE(lse, L * a.s_lse);
    TAKE(atty, L * a.s_C);
    TAKE(fch, L * a.s_fch);
    TAKE(fchg, b16 ? 0 : L * a.s_fch);
    TAKE(f, Lh * a.s_C);
    TAKE(xsum, fr ? N * C : 0);
    TAKE(lnf, b16 ? 0 : N * C);
    TAKE(lnf_mean, N);
    TAKE(lnf_rstd, N);
    TAKE(logits, N * V);
    TAKE(losses, N);
    a.total = o;
    o = 0;
    TAKE(b_ln, b16 ? Lh * a.s_C : 0);
    TAKE(b_atty, b16 ? L * a.s_C : 0);
    TAKE(b_fchg, b16 ? L * a.s_fch : 0);
    TAKE(b_lnf, b16 ? N * C : 0);
    a.b_total = o;
    o = 0;
    TAKE(dX0, N * n * C);
    TAKE(dX1, fr ? N * n * C : 0); /* rc's backward works in dX0 alone */
    TAKE(dz, N * K);
    TAKE(du, fr ? N * C : 0);
    TAKE(df, fr ? N * C : 0);
    TAKE(dcoef, fr ? N * (2 * n + n * n) : 0);
    TAKE(srow, N * nr);
    TAKE(dln, N * C);
    TAKE(dqkv, N * 3 * C);
    TAKE(datty, N * C);
    TAKE(dfch, N * 4 * C);
    TAKE(dfchg, N * 4 * C);
    TAKE(dxsum, fr ? N * C : 0);
    TAKE(dlnf, N * C);
    TAKE(dlogits, N * V);
#undef TAKE
    a.g_total = o;
    return a;
}

/* ---- availability ---------------------------------------------------------------------------------- */

static __global__ void probe_kernel(int *x) {
    if (x) *x = 1;
}

/* The GPU this process uses (cuda_use_device): one per process when several share a host. */
static int g_device = 0;

void cuda_use_device(int local_rank) {
    int count = 0;
    if (cudaGetDeviceCount(&count) == cudaSuccess && count > 0) g_device = local_rank % count;
    cudaGetLastError();
}

unsigned long long cuda_backend_abi(void) { return cuda_abi_key(); }

int cuda_available(char *name, size_t len) {
    char dummy[8];
    if (!name || !len) {
        name = dummy;
        len = sizeof dummy;
    }
    int count = 0; /* left untouched by a failing call (error 35 without a driver) */
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count <= 0) {
        snprintf(name, len, "no GPU (%s)", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        cudaGetLastError();
        return 0;
    }
    cudaDeviceProp p;
    e = cudaGetDeviceProperties(&p, g_device);
    if (e == cudaSuccess) e = cudaSetDevice(g_device);
    if (e != cudaSuccess) {
        snprintf(name, len, "no GPU (%s)", cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (p.major < 9) {
        snprintf(name, len, "no usable GPU: %s is sm_%d%d; this build runs on sm_90 and newer", p.name, p.major,
                 p.minor);
        return 0;
    }
    probe_kernel<<<1, 1>>>(NULL);
    e = cudaGetLastError();
    if (e == cudaSuccess) e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        snprintf(name, len, "no usable GPU: %s: %s", p.name, cudaGetErrorString(e));
        cudaGetLastError();
        return 0;
    }
    if (g_device)
        snprintf(name, len, "GPU %d, %s (sm_%d%d, %.1f GiB)", g_device, p.name, p.major, p.minor,
                 (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    else
        snprintf(name, len, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                 (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return count;
}

/* ---- creation ------------------------------------------------------------------------------------- */

static int find_tensor(const cuda_model *cm, const char *name) {
    for (int i = 0; i < cm->n_tensors; i++)
        if (strcmp(cm->pinfo[i].name, name) == 0) return i;
    return -1;
}

/* Resolve every tensor the forward needs by name; -1 with the missing name in err. */
static int resolve_params(cuda_model *cm, char *err, size_t errlen) {
    char nm[PARAM_NAME + 32];
#define FIND(dst, ...)                                                                    \
    do {                                                                                  \
        snprintf(nm, sizeof nm, __VA_ARGS__);                                             \
        if (((dst) = find_tensor(cm, nm)) < 0) {                                          \
            snprintf(err, errlen, "cuda: the parameter table has no tensor '%s'", nm);    \
            return -1;                                                                    \
        }                                                                                 \
    } while (0)
/* a bias: -1 without model.bias (PAR and GRD give NULL for it, which every op skips) */
#define FIND_BIAS(dst, ...)                                                               \
    do {                                                                                  \
        if (cm->cfg.bias)                                                                 \
            FIND(dst, __VA_ARGS__);                                                       \
        else                                                                              \
            (dst) = -1;                                                                   \
    } while (0)
    FIND(cm->wte, "transformer.wte.weight");
    FIND(cm->wpe, "transformer.wpe.weight");
    FIND(cm->lnfw, "transformer.ln_f.weight");
    FIND_BIAS(cm->lnfb, "transformer.ln_f.bias");
    for (int l = 0; l < cm->L; l++) {
        block_params *b = &cm->bp[l];
        FIND(b->ln1w, "transformer.h.%d.ln_1.weight", l);
        FIND_BIAS(b->ln1b, "transformer.h.%d.ln_1.bias", l);
        FIND(b->qkvw, "transformer.h.%d.attn.c_attn.weight", l);
        FIND_BIAS(b->qkvb, "transformer.h.%d.attn.c_attn.bias", l);
        FIND(b->projw, "transformer.h.%d.attn.c_proj.weight", l);
        FIND_BIAS(b->projb, "transformer.h.%d.attn.c_proj.bias", l);
        FIND(b->ln2w, "transformer.h.%d.ln_2.weight", l);
        FIND_BIAS(b->ln2b, "transformer.h.%d.ln_2.bias", l);
        FIND(b->fcw, "transformer.h.%d.mlp.c_fc.weight", l);
        FIND_BIAS(b->fcb, "transformer.h.%d.mlp.c_fc.bias", l);
        FIND(b->fcpw, "transformer.h.%d.mlp.c_proj.weight", l);
        FIND_BIAS(b->fcpb, "transformer.h.%d.mlp.c_proj.bias", l);
        if (!cm->frame) continue;
        for (int s = 0; s < 2; s++) {
            const char *which = s ? "mlp_hc" : "attn_hc";
            FIND(b->hc_norm[s], "transformer.h.%d.%s.norm.weight", l, which);
            FIND(b->hc_proj[s], "transformer.h.%d.%s.proj.weight", l, which);
            /* theta: the tensors after proj.weight with the same prefix, contiguous */
            const param_info *pw = &cm->pinfo[b->hc_proj[s]];
            size_t off = pw->offset + pw->numel, tot = 0;
            char prefix[PARAM_NAME + 32];
            snprintf(prefix, sizeof prefix, "transformer.h.%d.%s.", l, which);
            for (int i = b->hc_proj[s] + 1; i < cm->n_tensors; i++) {
                const param_info *p = &cm->pinfo[i];
                if (strncmp(p->name, prefix, strlen(prefix)) != 0) break;
                if (p->offset != off + tot) {
                    snprintf(err, errlen, "cuda: theta tensors of %s are not contiguous", prefix);
                    return -1;
                }
                tot += p->numel;
            }
            size_t want = cm->spec.norm == HC_NORM_STREAM ? (size_t)(cm->spec.K / cm->spec.n) * cm->C
                                                          : (size_t)cm->spec.K * cm->n * cm->C;
            if (tot != (size_t)cm->spec.n_theta || pw->numel != want) {
                snprintf(err, errlen, "cuda: frame tensors of %s do not match the method (theta %zu vs %d)", prefix,
                         tot, cm->spec.n_theta);
                return -1;
            }
            b->hc_theta[s] = cm->doff[b->hc_proj[s] + 1];
        }
    }
#undef FIND_BIAS
#undef FIND
    return 0;
}

static void scratch_of(const cuda_model *cm, cuda_scratch_need *need) {
    memset(need, 0, sizeof *need);
    const size_t N = cm->N, C = cm->C;
    size_t widest = 4 * C > (size_t)cm->V ? 4 * C : (size_t)cm->V;
    need->cvt_b = cm->ctx.use_bf16 ? N * widest : 0;  /* bf16 copy of a backward dout */
    need->ones = N;
    /* LayerNorm's dw and db; in bf16 mode a linear layer's dbias, up to 4 C columns */
    need->part = (cm->ctx.use_bf16 ? 4 : 2) * ((N + CUDA_COLSUM_ROWS - 1) / CUDA_COLSUM_ROWS) * C;
    need->dpart = CUDA_SUMSQ_BLOCKS + 1;
    need->att_D = (size_t)cm->B * cm->NH * cm->T;
    if (cm->frame) hc_scratch_need(&cm->spec, N, cm->C, cm->x_bf16, need);
}

static size_t scratch_bytes(const cuda_scratch_need *s) {
    return (s->cvt_a + s->cvt_b) * sizeof(bf16) + (s->ones + s->part + s->att_D + s->hc_mat + s->hc_dth) * sizeof(float) +
           s->dpart * sizeof(double);
}

cuda_model *cuda_model_create(const gpt_model *m, int B, int use_bf16, char *err, size_t errlen) {
    char gpu[256];
    if (cuda_available(gpu, sizeof gpu) <= 0) {
        snprintf(err, errlen, "%s", gpu);
        return NULL;
    }
    if (B <= 0 || m->T <= 0 || m->C <= 0 || m->NH <= 0 || m->C % m->NH != 0 || m->C / m->NH > ATT_MAX_HS) {
        snprintf(err, errlen, "cuda: unsupported sizes (B %d, T %d, C %d, n_head %d; head size at most %d)", B, m->T,
                 m->C, m->NH, ATT_MAX_HS);
        return NULL;
    }
    if ((size_t)B * m->T * (size_t)(m->n > 0 ? m->n : 1) > 0x7fffffffu) {
        snprintf(err, errlen, "cuda: B * T * n_streams does not fit a cuBLAS int");
        return NULL;
    }
    /* grid dimensions y: attention's B * n_head, the LayerNorm weights' row chunks */
    if ((size_t)B * m->NH > CUDA_GRID_Y_MAX ||
        ((size_t)B * m->T + CUDA_COLSUM_ROWS - 1) / CUDA_COLSUM_ROWS > CUDA_GRID_Y_MAX) {
        snprintf(err, errlen, "cuda: batch %d is too large for a launch grid (B * n_head and B * T / %d at most %d)",
                 B, CUDA_COLSUM_ROWS, CUDA_GRID_Y_MAX);
        return NULL;
    }
    CUDA_CHECK(cudaSetDevice(g_device));
    cuda_model *cm = (cuda_model *)calloc(1, sizeof *cm);
    if (!cm) {
        snprintf(err, errlen, "cuda: out of host memory");
        return NULL;
    }
    cm->cfg = m->cfg;
    cm->L = m->L;
    cm->C = m->C;
    cm->NH = m->NH;
    cm->T = m->T;
    cm->V = m->V;
    cm->Lh = m->Lh;
    cm->B = B;
    cm->N = (size_t)B * m->T;
    cm->frame = m->variant != NULL;
    cm->x_bf16 = cm->frame && !strcmp(m->cfg.stream_precision, "bf16");
    cm->gelu_erf = m->gelu_erf;
    cm->n = cm->frame ? m->spec.n : 1;
    cm->nr = cm->frame ? (m->spec.norm == HC_NORM_STREAM ? m->spec.n : 1) : 0;
    cm->spec = m->spec;
    cm->spec.perms = NULL; /* uploaded below, after every check that can fail */
    cm->n_tensors = m->n_tensors;
    cm->n_params = m->n_params;
    cm->pinfo = (param_info *)malloc((size_t)m->n_tensors * sizeof(param_info));
    cm->bp = (block_params *)calloc((size_t)(m->L > 0 ? m->L : 1), sizeof(block_params));
    if (!cm->pinfo || !cm->bp) {
        free(cm->pinfo);
        free(cm->bp);
        free(cm);
        snprintf(err, errlen, "cuda: out of host memory");
        return NULL;
    }
    memcpy(cm->pinfo, m->pinfo, (size_t)m->n_tensors * sizeof(param_info));
    cm->doff = (size_t *)malloc((size_t)(m->n_tensors + 1) * sizeof(size_t));
    if (!cm->doff) {
        fprintf(stderr, "s2hc: cuda: out of host memory\n");
        exit(1);
    }
    size_t o = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        if (m->pinfo[i].rank >= 2) o = align_up(o);
        cm->doff[i] = o;
        o += m->pinfo[i].numel;
    }
    cm->n_dev = align_up(o);
    cm->doff[m->n_tensors] = cm->n_dev;
    if (resolve_params(cm, err, errlen) != 0) {
        free(cm->pinfo);
        free(cm->doff);
        free(cm->bp);
        free(cm);
        return NULL;
    }
    cm->ctx.use_bf16 = use_bf16; /* layout_of and scratch_of read it before the context exists */
    cm->a = layout_of(cm);
    cuda_scratch_need need;
    scratch_of(cm, &need);
    const size_t P = cm->n_dev, N = cm->N;
    size_t tok = 3 * N + 2 * (size_t)cm->V + 1;
    cm->bytes = 4 * P * sizeof(float) + (use_bf16 ? P * sizeof(bf16) : 0) + cm->a.total * sizeof(float) +
                cm->a.b_total * sizeof(bf16) + cm->a.g_total * sizeof(float) + tok * sizeof(int) +
                scratch_bytes(&need) + (size_t)(cm->n_tensors + 1) * (sizeof(size_t) + sizeof(float));
    const size_t stack = cm->frame ? hc_frame_reserve_stack() : 0; /* reserved now, so that free_b counts it */
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    if (stack || cm->bytes + CUDA_MEM_MARGIN > free_b) {
        if (stack)
            snprintf(err, errlen, "cuda: %s could not reserve the frame kernels' stack (%zu bytes a thread, for every "
                     "thread it can hold) with %.2f GiB free; the model needs %.2f GiB more at batch %d", gpu, stack,
                     (double)free_b / (1 << 30), (double)cm->bytes / (1 << 30), B);
        else
            snprintf(err, errlen, "cuda: the model needs %.2f GiB of device memory at batch %d; %s has %.2f GiB free",
                     (double)cm->bytes / (1 << 30), B, gpu, (double)free_b / (1 << 30));
        free(cm->pinfo);
        free(cm->doff);
        free(cm->bp);
        free(cm);
        return NULL;
    }
    cuda_ctx_init(&cm->ctx, use_bf16);
    cuda_ctx_reserve(&cm->ctx, &need);
    if (cm->frame) hc_spec_to_device(&m->spec, &cm->spec);
    cm->params = (float *)cuda_malloc_zero(P * sizeof(float));
    cm->grads = (float *)cuda_malloc_zero(P * sizeof(float));
    cm->mom = (float *)cuda_malloc_zero(P * sizeof(float));
    cm->var = (float *)cuda_malloc_zero(P * sizeof(float));
    if (use_bf16) cm->params_bf = (bf16 *)cuda_malloc_zero(P * sizeof(bf16));
    cm->acts = (float *)cuda_malloc_zero(cm->a.total * sizeof(float));
    cm->acts_bf = (bf16 *)cuda_malloc_zero(cm->a.b_total * sizeof(bf16));
    cm->gacts = (float *)cuda_malloc_zero(cm->a.g_total * sizeof(float));
    cm->d_tok = (int *)cuda_malloc_zero(tok * sizeof(int));
    CUDA_CHECK(cudaMallocHost((void **)&cm->h_tok, tok * sizeof(int)));
    CUDA_CHECK(cudaMallocHost((void **)&cm->h_losses, N * sizeof(float)));
    /* AdamW segments: one per tensor */
    size_t *ss = (size_t *)malloc((size_t)(cm->n_tensors + 1) * sizeof(size_t));
    float *wd = (float *)malloc((size_t)(cm->n_tensors + 1) * sizeof(float));
    if (!ss || !wd) {
        fprintf(stderr, "s2hc: cuda: out of host memory\n");
        exit(1);
    }
    for (int i = 0; i < cm->n_tensors; i++) {
        ss[i] = cm->doff[i];
        wd[i] = (cm->pinfo[i].decay || cm->cfg.decay_1d) ? (float)cm->cfg.weight_decay : 0.0f;
    }
    ss[cm->n_tensors] = P;
    wd[cm->n_tensors] = 0;
    cm->seg_start = (size_t *)cuda_malloc_zero((size_t)(cm->n_tensors + 1) * sizeof(size_t));
    cm->seg_wd = (float *)cuda_malloc_zero((size_t)(cm->n_tensors + 1) * sizeof(float));
    CUDA_CHECK(cudaMemcpy(cm->seg_start, ss, (size_t)(cm->n_tensors + 1) * sizeof(size_t), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemcpy(cm->seg_wd, wd, (size_t)(cm->n_tensors + 1) * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaDeviceSynchronize()); /* pageable copies on the legacy stream: done before any kernel */
    free(ss);
    free(wd);
    cuda_upload_params(cm, m);
    return cm;
}

void cuda_model_free(cuda_model *cm) {
    if (!cm) return;
    cudaStreamSynchronize(cm->ctx.stream);
    if (cm->frame) hc_spec_free_device(&cm->spec);
    cudaFree(cm->params);
    cudaFree(cm->grads);
    cudaFree(cm->mom);
    cudaFree(cm->var);
    cudaFree(cm->params_bf);
    cudaFree(cm->acts);
    cudaFree(cm->acts_bf);
    cudaFree(cm->gacts);
    cudaFree(cm->d_tok);
    cudaFree(cm->seg_start);
    cudaFree(cm->seg_wd);
    cudaFreeHost(cm->h_tok);
    cudaFreeHost(cm->h_losses);
    cuda_ctx_free(&cm->ctx);
    free(cm->pinfo);
    free(cm->doff);
    free(cm->bp);
    free(cm);
}

/* ---- transfers ------------------------------------------------------------------------------------- */

/* Host (CPU layout, n_params) <-> device (padded layout), tensor by tensor. */
static void to_device(cuda_model *cm, float *dev, const float *host) {
    for (int i = 0; i < cm->n_tensors; i++)
        CUDA_CHECK(cudaMemcpyAsync(dev + cm->doff[i], host + cm->pinfo[i].offset, cm->pinfo[i].numel * sizeof(float),
                                   cudaMemcpyHostToDevice, cm->ctx.stream));
}
static void to_host(cuda_model *cm, float *host, const float *dev) {
    for (int i = 0; i < cm->n_tensors; i++)
        CUDA_CHECK(cudaMemcpyAsync(host + cm->pinfo[i].offset, dev + cm->doff[i], cm->pinfo[i].numel * sizeof(float),
                                   cudaMemcpyDeviceToHost, cm->ctx.stream));
}

void cuda_upload_params(cuda_model *cm, const gpt_model *m) {
    to_device(cm, cm->params, m->params);
    if (cm->params_bf) cuda_to_bf16(&cm->ctx, cm->params_bf, cm->params, cm->n_dev);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_download_params(cuda_model *cm, gpt_model *m) {
    to_host(cm, m->params, cm->params);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_download_grads(cuda_model *cm, gpt_model *m) {
    to_host(cm, m->grads, cm->grads);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_upload_grads(cuda_model *cm, const gpt_model *m) {
    to_device(cm, cm->grads, m->grads);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_upload_optim(cuda_model *cm, const float *mom, const float *var) {
    to_device(cm, cm->mom, mom);
    to_device(cm, cm->var, var);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_download_optim(cuda_model *cm, float *mom, float *var) {
    to_host(cm, mom, cm->mom);
    to_host(cm, var, cm->var);
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

void cuda_download_logits(cuda_model *cm, float *logits) {
    CUDA_CHECK(cudaMemcpyAsync(logits, cm->acts + cm->a.logits, cm->N * cm->V * sizeof(float), cudaMemcpyDeviceToHost,
                               cm->ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
}

int cuda_download_hc(cuda_model *cm, int l, float *pre, float *post, float *H) {
    if (!cm->frame || l < 0 || l >= cm->Lh) return -1;
    const dev_layout *a = &cm->a;
    cudaStream_t st = cm->ctx.stream;
    if (pre)
        CUDA_CHECK(cudaMemcpyAsync(pre, cm->acts + a->pre + l * a->s_pre, a->s_pre * sizeof(float),
                                   cudaMemcpyDeviceToHost, st));
    if (post)
        CUDA_CHECK(cudaMemcpyAsync(post, cm->acts + a->post + l * a->s_pre, a->s_pre * sizeof(float),
                                   cudaMemcpyDeviceToHost, st));
    if (H)
        CUDA_CHECK(cudaMemcpyAsync(H, cm->acts + a->H + l * a->s_H, a->s_H * sizeof(float), cudaMemcpyDeviceToHost,
                                   st));
    CUDA_CHECK(cudaStreamSynchronize(st));
    return 0;
}

int cuda_download_streams(cuda_model *cm, int l, float *X) {
    if (l < 0 || l > cm->Lh) return -1;
    const float *src = cm->acts + cm->a.streams + l * cm->a.s_streams;
    const size_t n = cm->a.s_streams;
    if (!cm->x_bf16) {
        CUDA_CHECK(cudaMemcpyAsync(X, src, n * sizeof(float), cudaMemcpyDeviceToHost, cm->ctx.stream));
        CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
        return 0;
    }
    /* bf16 streams: their n values fill the first half of the slot; widened on the host */
    bf16 *h = (bf16 *)malloc(n * sizeof(bf16));
    if (!h) return -1;
    CUDA_CHECK(cudaMemcpyAsync(h, src, n * sizeof(bf16), cudaMemcpyDeviceToHost, cm->ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream));
    for (size_t i = 0; i < n; i++) X[i] = __bfloat162float(h[i]);
    free(h);
    return 0;
}

size_t cuda_model_bytes(const cuda_model *cm) { return cm->bytes; }
int cuda_model_bf16(const cuda_model *cm) { return cm->ctx.use_bf16; }
int cuda_model_attention_tc(const cuda_model *cm) { return attention_uses_tensor_cores(&cm->ctx, cm->C, cm->NH); }
void cuda_synchronize(cuda_model *cm) { CUDA_CHECK(cudaStreamSynchronize(cm->ctx.stream)); }

/* ---- op timing (model_cuda.h) -------------------------------------------------------------- */

static const char *const prof_names[CUDA_PROF_N] = {"matmul", "attention", "layernorm", "gelu",  "emb+loss",
                                                    "streams", "hc proj",  "hc math",   "zeroing", "optimizer"};
const char *cuda_profile_name(int k) { return k >= 0 && k < CUDA_PROF_N ? prof_names[k] : "?"; }
static const char *const prof_op_names[CUDA_OP_N] = {
    "matmul qkv",  "matmul proj", "matmul fc",     "matmul fcproj", "matmul head", "attention fwd",
    "attention bwd", "hc z = X W'", "hc coef fwd", "hc read-out",   "hc write-back", "hc out bwd",
    "hc dpre",     "hc coef bwd", "hc in proj",    "hc in bwd",     "hc fused bwd"};
const char *cuda_profile_op_name(int k) { return k >= 0 && k < CUDA_OP_N ? prof_op_names[k] : "?"; }

void cuda_profile_start(cuda_model *cm) {
    cuda_ctx *ctx = &cm->ctx;
    if (!ctx->prof) {
        ctx->prof = (cuda_prof *)calloc(1, sizeof(cuda_prof));
        if (!ctx->prof) {
            fprintf(stderr, "s2hc: kernels/cuda: cuda_profile_start: out of host memory\n");
            exit(1);
        }
    }
    ctx->prof->n = 0;
    ctx->prof->overflow = 0;
    cuda_prof_mark(ctx, CUDA_PROF_N); /* the start: no category */
}

double cuda_profile_stop(cuda_model *cm, double ms[CUDA_PROF_N]) { return cuda_profile_stop_ops(cm, ms, NULL, NULL); }

double cuda_profile_stop_ops(cuda_model *cm, double ms[CUDA_PROF_N], double op_ms[CUDA_OP_N],
                             int op_calls[CUDA_OP_N]) {
    cuda_ctx *ctx = &cm->ctx;
    cuda_prof *p = ctx->prof;
    for (int k = 0; k < CUDA_PROF_N; k++) ms[k] = 0;
    for (int k = 0; k < CUDA_OP_N; k++) {
        if (op_ms) op_ms[k] = 0;
        if (op_calls) op_calls[k] = 0;
    }
    if (!p) return -1;
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    double total = 0;
    for (int i = 1; i < p->n; i++) {
        float t = 0;
        CUDA_CHECK(cudaEventElapsedTime(&t, p->ev[i - 1], p->ev[i]));
        ms[p->cat[i]] += t;
        total += t;
        if (p->op[i] < CUDA_OP_N) {
            if (op_ms) op_ms[p->op[i]] += t;
            if (op_calls) op_calls[p->op[i]]++;
        }
    }
    int overflow = p->overflow;
    cuda_prof_free(ctx);
    return overflow ? -1 : total;
}

/* ---- forward ------------------------------------------------------------------------------------- */

/* a tensor by its table index; NULL for -1 (a bias the model does not have) */
#define PAR(i) ((i) < 0 ? (float *)NULL : cm->params + cm->doff[i])
#define PBF(i) (cm->params_bf && (i) >= 0 ? cm->params_bf + cm->doff[i] : (const bf16 *)NULL)
#define GRD(i) ((i) < 0 ? (float *)NULL : cm->grads + cm->doff[i])
#define ACT(field) (cm->acts + cm->a.field)
#define GSC(field) (cm->gacts + cm->a.field)
#define ABF(field) (cm->ctx.use_bf16 ? cm->acts_bf + cm->a.field : (bf16 *)NULL)
/* An fp32 output that only matrix products read (LayerNorm's, GELU's): in bf16 mode the
 * products read its bf16 copy and the backward the op's input, so none is kept (NULL). */
#define AF32(field, off) (cm->ctx.use_bf16 ? (float *)NULL : ACT(field) + (off))

/* The frame of sublayer l (valid when cm->frame). */
static hc_frame_dev frame_of(cuda_model *cm, int l) {
    const dev_layout *a = &cm->a;
    const block_params *b = &cm->bp[l / 2];
    const int s = l % 2;
    hc_frame_dev fr;
    fr.g = PAR(b->hc_norm[s]);
    fr.W = PAR(b->hc_proj[s]);
    fr.theta = cm->params + b->hc_theta[s];
    fr.dg = GRD(b->hc_norm[s]);
    fr.dW = GRD(b->hc_proj[s]);
    fr.dtheta = cm->grads + b->hc_theta[s];
    fr.X = cm->acts + a->streams + l * a->s_streams;
    fr.x_bf16 = cm->x_bf16;
    fr.rstd = cm->acts + a->rstd + l * a->s_rstd;
    fr.z = cm->acts + a->z + l * a->s_z;
    fr.pre = cm->acts + a->pre + l * a->s_pre;
    fr.post = cm->acts + a->post + l * a->s_pre;
    fr.H = cm->acts + a->H + l * a->s_H;
    fr.cache = cm->acts + a->cache + l * a->s_cache;
    fr.u = cm->acts + a->u + l * a->s_u;
    fr.f = cm->acts + a->f + l * a->s_C;
    return fr;
}

/* Upload inputs and targets (and the token grouping of the embedding backward) in one copy.
 * Returns the number of targets >= 0. Exits on an id outside the vocabulary. */
static size_t upload_tokens(cuda_model *cm, const int *inputs, const int *targets) {
    const size_t N = cm->N;
    const int V = cm->V;
    int *h = cm->h_tok;
    memcpy(h, inputs, N * sizeof(int));
    size_t cnt = 0;
    for (size_t i = 0; i < N; i++) {
        int t = targets ? targets[i] : -1;
        if (t >= V) {
            fprintf(stderr, "s2hc: cuda: target %d at position %zu is outside the vocabulary (%d)\n", t, i, V);
            exit(1);
        }
        h[N + i] = t;
        cnt += t >= 0;
    }
    if (encoder_group_tokens(inputs, N, V, h + 2 * N, h + 3 * N, h + 3 * N + V, &cm->n_ids) != 0) {
        fprintf(stderr, "s2hc: cuda: a token id is outside [0, %d)\n", V);
        exit(1);
    }
    CUDA_CHECK(cudaMemcpyAsync(cm->d_tok, h, (3 * N + 2 * (size_t)V + 1) * sizeof(int), cudaMemcpyHostToDevice,
                               cm->ctx.stream));
    return cnt;
}

static float *xsum_of(cuda_model *cm) {
    return cm->frame ? ACT(xsum) : cm->acts + cm->a.streams + (size_t)cm->Lh * cm->a.s_streams;
}

/* After an op: its device time, when a profile runs (cuda_profile_start). */
#define MARK(cat) cuda_prof_mark(ctx, CUDA_PROF_##cat)

/* Forward; with dlogits != NULL the cross-entropy also writes d(loss)/d(logits) * scale. */
static float forward(cuda_model *cm, const int *inputs, const int *targets, int backward, float scale) {
    cuda_ctx *ctx = &cm->ctx;
    const dev_layout *a = &cm->a;
    const size_t N = cm->N;
    const int B = cm->B, T = cm->T, C = cm->C, NH = cm->NH, V = cm->V;
    size_t cnt = upload_tokens(cm, inputs, targets);
    const int *d_in = cm->d_tok, *d_tg = cm->d_tok + N;

    float *X0 = cm->acts + a->streams;
    if (cm->frame) {
        encoder_forward_cuda(ctx, ACT(enc), d_in, PAR(cm->wte), PAR(cm->wpe), B, T, C);
        MARK(EMBED);
        hc_streams_init_cuda(ctx, &cm->spec, X0, ACT(rstd), ACT(enc), N, C, cm->x_bf16);
        MARK(STREAMS);
    } else {
        encoder_forward_cuda(ctx, X0, d_in, PAR(cm->wte), PAR(cm->wpe), B, T, C);
        MARK(EMBED);
    }
    for (int l = 0; l < cm->Lh; l++) {
        const int blk = l / 2, is_mlp = l % 2;
        const block_params *b = &cm->bp[blk];
        float *X = cm->acts + a->streams + l * a->s_streams, *Xn = X + a->s_streams;
        hc_frame_dev fr;
        memset(&fr, 0, sizeof fr);
        const float *u = X;
        if (cm->frame) {
            fr = frame_of(cm, l);
            hc_frame_in_cuda(ctx, &cm->spec, &fr, N, C);
            u = fr.u;
        }
        float *ln = AF32(ln, l * a->s_C), *mean = ACT(ln_mean) + l * N, *rstd = ACT(ln_rstd) + l * N;
        bf16 *ln_bf = cm->ctx.use_bf16 ? ABF(b_ln) + l * a->s_C : NULL;
        float *f = ACT(f) + l * a->s_C;
        if (!is_mlp) {
            float *qkv = ACT(qkv) + blk * a->s_qkv, *lse = ACT(lse) + blk * a->s_lse, *atty = ACT(atty) + blk * a->s_C;
            bf16 *atty_bf = cm->ctx.use_bf16 ? ABF(b_atty) + blk * a->s_C : NULL;
            layernorm_forward_cuda(ctx, ln, ln_bf, mean, rstd, u, PAR(b->ln1w), PAR(b->ln1b), N, C);
            MARK(LAYERNORM);
            matmul_forward_cuda(ctx, qkv, ln, ln_bf, PAR(b->qkvw), PBF(b->qkvw), PAR(b->qkvb), N, C, 3 * C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_QKV);
            attention_forward_cuda(ctx, atty, atty_bf, lse, qkv, B, T, C, NH);
            cuda_prof_mark_op(ctx, CUDA_PROF_ATTENTION, CUDA_OP_ATT_FWD);
            matmul_forward_cuda(ctx, f, atty, atty_bf, PAR(b->projw), PBF(b->projw), PAR(b->projb), N, C, C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_ATTPROJ);
        } else {
            float *fch = ACT(fch) + blk * a->s_fch, *fchg = AF32(fchg, blk * a->s_fch);
            bf16 *fchg_bf = cm->ctx.use_bf16 ? ABF(b_fchg) + blk * a->s_fch : NULL;
            layernorm_forward_cuda(ctx, ln, ln_bf, mean, rstd, u, PAR(b->ln2w), PAR(b->ln2b), N, C);
            MARK(LAYERNORM);
            matmul_forward_cuda(ctx, fch, ln, ln_bf, PAR(b->fcw), PBF(b->fcw), PAR(b->fcb), N, C, 4 * C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_FC);
            gelu_forward_cuda(ctx, fchg, fchg_bf, fch, N * 4 * C, cm->gelu_erf);
            MARK(GELU);
            matmul_forward_cuda(ctx, f, fchg, fchg_bf, PAR(b->fcpw), PBF(b->fcpw), PAR(b->fcpb), N, 4 * C, C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_FCPROJ);
        }
        if (cm->frame) {
            float *rstd_next = cm->acts + a->rstd + (l + 1) * a->s_rstd;
            hc_frame_out_cuda(ctx, &cm->spec, &fr, Xn, rstd_next, N, C);
        } else {
            add_cuda(ctx, Xn, X, f, N * C);
            MARK(STREAMS);
        }
    }
    float *xsum = xsum_of(cm);
    if (cm->frame)
        hc_streams_sum_cuda(ctx, xsum, cm->acts + a->streams + (size_t)cm->Lh * a->s_streams, N, cm->n, C, cm->x_bf16);
    MARK(STREAMS);
    layernorm_forward_cuda(ctx, AF32(lnf, 0), ABF(b_lnf), ACT(lnf_mean), ACT(lnf_rstd), xsum, PAR(cm->lnfw), PAR(cm->lnfb),
                           N, C);
    MARK(LAYERNORM);
    matmul_forward_cuda(ctx, ACT(logits), AF32(lnf, 0), ABF(b_lnf), PAR(cm->wte), PBF(cm->wte), NULL, N, C, V);
    cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_LMHEAD);
    if (!targets) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        return 0;
    }
    float sc = cnt ? scale / (float)cnt : 0.0f;
    crossentropy_fused_cuda(ctx, ACT(losses), backward ? GSC(dlogits) : NULL, ACT(logits), d_tg, sc, N, V);
    CUDA_CHECK(cudaMemcpyAsync(cm->h_losses, ACT(losses), N * sizeof(float), cudaMemcpyDeviceToHost, ctx->stream));
    MARK(EMBED);
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    double s = 0;
    for (size_t t = 0; t < N; t++)
        if (cm->h_tok[N + t] >= 0) s += cm->h_losses[t];
    return (float)(cnt ? s / (double)cnt : 0.0);
}

/* ---- backward ------------------------------------------------------------------------------------ */

static void backward(cuda_model *cm) {
    cuda_ctx *ctx = &cm->ctx;
    const dev_layout *a = &cm->a;
    const size_t N = cm->N;
    const int B = cm->B, T = cm->T, C = cm->C, NH = cm->NH, V = cm->V;
    const int *order = cm->d_tok + 2 * N, *ids = cm->d_tok + 3 * N, *starts = cm->d_tok + 3 * N + V;

    /* Each gradient scratch below is written whole by the first op that fills it (the _set
     * forms), so none needs zeroing first. */
    float *dlnf = GSC(dlnf), *xsum = xsum_of(cm);
    matmul_backward_set_cuda(ctx, dlnf, GRD(cm->wte), NULL, GSC(dlogits), AF32(lnf, 0), ABF(b_lnf), PAR(cm->wte),
                             PBF(cm->wte), N, C, V);
    cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_LMHEAD);
    float *dY = GSC(dX0), *dX = GSC(dX1);
    if (cm->frame) {
        float *dxsum = GSC(dxsum);
        layernorm_backward_set_cuda(ctx, dxsum, GRD(cm->lnfw), GRD(cm->lnfb), dlnf, xsum, PAR(cm->lnfw),
                                    ACT(lnf_mean), ACT(lnf_rstd), N, C);
        MARK(LAYERNORM);
        hc_streams_init_cuda(ctx, &cm->spec, dY, NULL, dxsum, N, C, 0);
        MARK(STREAMS);
    } else {
        layernorm_backward_set_cuda(ctx, dY, GRD(cm->lnfw), GRD(cm->lnfb), dlnf, xsum, PAR(cm->lnfw), ACT(lnf_mean),
                                    ACT(lnf_rstd), N, C);
        MARK(LAYERNORM);
    }
    float *du = GSC(du), *dln = GSC(dln);
    for (int l = cm->Lh - 1; l >= 0; l--) {
        const int blk = l / 2, is_mlp = l % 2;
        const block_params *b = &cm->bp[blk];
        hc_frame_dev fr;
        memset(&fr, 0, sizeof fr);
        const float *df;
        if (cm->frame) {
            fr = frame_of(cm, l);
            hc_frame_out_backward_cuda(ctx, &cm->spec, &fr, dY, GSC(df), GSC(dcoef), N, C);
            df = GSC(df);
        } else {
            df = dY; /* X' = X + f: f and X both get dY; X's is dY plus what LayerNorm adds into it */
        }
        float *u = cm->frame ? fr.u : cm->acts + a->streams + l * a->s_streams;
        float *ln = AF32(ln, l * a->s_C), *mean = ACT(ln_mean) + l * N, *rstd = ACT(ln_rstd) + l * N;
        const bf16 *ln_bf = cm->ctx.use_bf16 ? ABF(b_ln) + l * a->s_C : NULL;
        /* where LayerNorm's input gradient goes: du, written whole (a frame), or dY itself,
         * added into in place once the sublayer's ops have read it as df (rc) */
        float *dinp = cm->frame ? du : dY;
        void (*ln_backward)(cuda_ctx *, float *, float *, float *, const float *, const float *, const float *,
                            const float *, const float *, size_t, int) =
            cm->frame ? layernorm_backward_set_cuda : layernorm_backward_cuda;
        if (!is_mlp) {
            float *qkv = ACT(qkv) + blk * a->s_qkv, *lse = ACT(lse) + blk * a->s_lse, *atty = ACT(atty) + blk * a->s_C;
            const bf16 *atty_bf = cm->ctx.use_bf16 ? ABF(b_atty) + blk * a->s_C : NULL;
            float *datty = GSC(datty), *dqkv = GSC(dqkv);
            matmul_backward_set_cuda(ctx, datty, GRD(b->projw), GRD(b->projb), df, atty, atty_bf, PAR(b->projw),
                                     PBF(b->projw), N, C, C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_ATTPROJ);
            attention_backward_set_cuda(ctx, dqkv, datty, qkv, atty, lse, B, T, C, NH);
            cuda_prof_mark_op(ctx, CUDA_PROF_ATTENTION, CUDA_OP_ATT_BWD);
            matmul_backward_set_cuda(ctx, dln, GRD(b->qkvw), GRD(b->qkvb), dqkv, ln, ln_bf, PAR(b->qkvw),
                                     PBF(b->qkvw), N, C, 3 * C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_QKV);
            ln_backward(ctx, dinp, GRD(b->ln1w), GRD(b->ln1b), dln, u, PAR(b->ln1w), mean, rstd, N, C);
            MARK(LAYERNORM);
        } else {
            float *fch = ACT(fch) + blk * a->s_fch, *fchg = AF32(fchg, blk * a->s_fch);
            const bf16 *fchg_bf = cm->ctx.use_bf16 ? ABF(b_fchg) + blk * a->s_fch : NULL;
            float *dfch = GSC(dfch), *dfchg = GSC(dfchg);
            matmul_backward_set_cuda(ctx, dfchg, GRD(b->fcpw), GRD(b->fcpb), df, fchg, fchg_bf, PAR(b->fcpw),
                                     PBF(b->fcpw), N, 4 * C, C);
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_FCPROJ);
            /* bf16 mode: GELU's backward straight into the fc product's bf16 operand (cvt_b),
               the fc bias's gradient summed in the same pass; no fp32 dfch */
            if (cm->ctx.use_bf16 && cuda_to_bf16_colsum(ctx, ctx->cvt_b, GRD(b->fcb), dfchg, fch, cm->gelu_erf, N, 4 * C)) {
                MARK(GELU);
                matmul_backward_set_bf16_cuda(ctx, dln, GRD(b->fcw), ctx->cvt_b, ln_bf, PBF(b->fcw), N, C, 4 * C);
            } else {
                gelu_backward_set_cuda(ctx, dfch, fch, dfchg, N * 4 * C, cm->gelu_erf);
                MARK(GELU);
                matmul_backward_set_cuda(ctx, dln, GRD(b->fcw), GRD(b->fcb), dfch, ln, ln_bf, PAR(b->fcw),
                                         PBF(b->fcw), N, C, 4 * C);
            }
            cuda_prof_mark_op(ctx, CUDA_PROF_MATMUL, CUDA_OP_MM_FC);
            ln_backward(ctx, dinp, GRD(b->ln2w), GRD(b->ln2b), dln, u, PAR(b->ln2w), mean, rstd, N, C);
            MARK(LAYERNORM);
        }
        if (cm->frame) {
            hc_frame_in_backward_cuda(ctx, &cm->spec, &fr, du, dY, dX, GSC(dcoef), GSC(dz), GSC(srow), N, C);
            float *tmp = dY; /* dX is the upstream gradient of the next (earlier) sublayer */
            dY = dX;
            dX = tmp;
        }
    }
    /* dY: the gradient of X_0 = n copies of the embedding */
    const float *denc = dY;
    if (cm->frame) {
        hc_streams_sum_cuda(ctx, du, dY, N, cm->n, C, 0);
        denc = du;
        MARK(STREAMS);
    }
    encoder_backward_cuda(ctx, GRD(cm->wte), GRD(cm->wpe), denc, order, ids, starts, cm->n_ids, B, T, C);
    MARK(EMBED);
}

/* ---- the public step ------------------------------------------------------------------------------ */

float cuda_forward(cuda_model *cm, const int *inputs, const int *targets) {
    return forward(cm, inputs, targets, 0, 1.0f);
}

float cuda_forward_backward(cuda_model *cm, const int *inputs, const int *targets, float scale) {
    float loss = forward(cm, inputs, targets, 1, scale);
    size_t cnt = 0;
    for (size_t t = 0; t < cm->N; t++) cnt += cm->h_tok[cm->N + t] >= 0;
    if (cnt) backward(cm);
    return loss;
}

void cuda_zero_grad(cuda_model *cm) {
    CUDA_CHECK(cudaMemsetAsync(cm->grads, 0, cm->n_dev * sizeof(float), cm->ctx.stream));
    cuda_prof_mark(&cm->ctx, CUDA_PROF_ZERO);
}

double cuda_grad_norm(cuda_model *cm) {
    double s = sumsq_cuda(&cm->ctx, cm->grads, cm->n_dev);
    cuda_prof_mark(&cm->ctx, CUDA_PROF_OPTIM);
    return sqrt(s);
}

void cuda_step(cuda_model *cm, double lr, double grad_norm, int t) {
    const s2hc_config *c = &cm->cfg;
    float gscale = (c->clip > 0 && grad_norm > c->clip) ? (float)(c->clip / grad_norm) : 1.0f;
    adamw_all_cuda(&cm->ctx, cm->params, cm->params_bf, cm->grads, cm->mom, cm->var, cm->n_dev, cm->seg_start,
                   cm->seg_wd, cm->n_tensors, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps, gscale, t);
    cuda_prof_mark(&cm->ctx, CUDA_PROF_OPTIM);
}
