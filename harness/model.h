/* model.h: the GPT with its hyper-connection frame, forward and backward on the CPU.
 *
 * nanoGPT GPT-2 style: token + learned position embedding, pre-LayerNorm blocks, causal
 * multi-head attention, GELU MLP (4C), tied LM head, no dropout; biases in the linear
 * layers and LayerNorms unless model.bias is false, GELU's tanh form unless model.gelu is
 * erf (the two choices of nanoGPT's training script, the paper's base model). Every sublayer
 * (attention and MLP separately) has its own hyper-connection (Lh = 2 * n_layer):
 *
 *   x'    = RMSNorm(vec X) * (1 + g)          (or per stream for `hc`)
 *   z     = x' W^T                            (K outputs per token, one GEMM)
 *   pre, post, H_res = method(z, theta)       (kernels/hc_math.h, per token)
 *   u     = sum_i pre[i] X[i]
 *   f     = F(LN(u))                          (attention or MLP)
 *   X'[i] = sum_j H_res[i,j] X[j] + post[i] f
 *
 * Streams start as n copies of the embedding and are summed before ln_f. `rc` is the
 * plain residual (n = 1, X' = X + F(LN(X))).
 *
 * Memory (llm.c's discipline): one buffer for every parameter, one for their gradients,
 * one for activations, one for the activations' gradients (with the frame's per-thread
 * scratch at its end); with batch slices, one more for the parameter gradients of slices
 * 1..; a table of named tensors computed once from the config.
 */
#ifndef S2HC_MODEL_H
#define S2HC_MODEL_H
#include <stddef.h>
#include <stdint.h>
#include "config.h"
#include "residual/residual.h"
#include "../kernels/real.h"

#define PARAM_NAME 128

typedef struct {
    char name[PARAM_NAME]; /* nanoGPT state_dict key, e.g. transformer.h.0.attn.c_attn.weight */
    int rank;
    size_t shape[4];
    size_t numel, offset;  /* offset into the parameter buffer */
    int decay;             /* 1: 2-D weight (weight decay applies by default) */
    int aux;               /* 1: belongs to a hyper-connection (auxiliary parameter) */
} param_info;

/* Per-sublayer pointers into the activation buffer. */
typedef struct {
    real *X;       /* (N, n, C) input streams of this sublayer */
    real *xn;      /* NULL: x' is folded into the projection and never stored */
    real *rstd;    /* (N) or (N, n) for per-stream norm */
    real *z;       /* (N, K) projection */
    real *pre;     /* (N, n) */
    real *post;    /* (N, n) */
    real *H;       /* (N, n, n) per-token H_res */
    real *cache;   /* (N, spec.cache) */
    real *u;       /* (N, C) read-out fed to the sublayer */
    real *f;       /* (N, C) sublayer output */
} hc_acts;

typedef struct {
    s2hc_config cfg;
    int L, C, NH, T, V;   /* layers, width, heads, sequence, vocab */
    int n;                /* streams (1 for rc) */
    int Lh;               /* sublayers = 2L (hyper-connected unless rc) */
    int method;           /* enum hc_method (HC_RC for rc) */
    const hc_variant *variant; /* NULL for rc */
    hc_spec spec;

    param_info *pinfo;    /* n_tensors entries */
    int n_tensors;
    size_t n_params;      /* total */
    size_t n_aux;         /* hyper-connection parameters */
    real *params, *grads;

    /* activations (allocated for batch size B by model_alloc_acts) */
    int B;
    real *acts; size_t n_acts;
    real *grad_acts; size_t n_grad_acts;
    int *inputs, *targets;
    real *dtheta_thread;  /* unused (per-thread partial sums live in the tail of grad_acts) */
    int n_slices;         /* batch slices model_alloc_acts prepared for (1: none) */
    real *slice_grads;    /* (n_slices - 1) x n_params: the parameter gradients of slices 1..
                             (allocated by the first sliced step) */
    real mean_loss;
    int branches;         /* 1 unless the last forward was model_streams_forward(..., 0) */
    int gelu_erf;         /* model.gelu: erf (the exact GELU), else GPT-2's tanh form */
    int proj_bf16;        /* residual.proj_precision: bf16 (the frame's projection products) */
    int proj_amx;         /* with proj_bf16: the products by AMX tiles (model_amx_usable), else
                             by vdpbf16ps; the two sum in different orders (other bits) */
    int stream_bf16;      /* residual.stream_precision: bf16 with a frame: the training steps
                             (model_forward_backward) store the streams in bf16; model_forward and
                             model_backward called on their own (evals, probes) keep them in fp32 */
    int stream_bf16_on;   /* set by model_forward_backward for the step it runs (stream_bf16) */
    int stream_blocks;    /* 1 (model_build): the training steps keep each token's streams in
                             channel blocks (the frame's faster layout, kernels/cpu/hc_frame.c); model_forward
                             and model_backward called on their own keep them in rows, stream by
                             stream. 0: rows in the training steps too (tests compare the two) */
    int stream_blk_on;    /* set by model_forward_backward for the step it runs (stream_blocks) */
    uint32_t *stream_cols; /* with one norm row per token: the row index (stream times C plus
                              channel) of each position of a token's values in channel blocks */
    int round_streams;    /* 1: every value written to the streams is rounded to bf16 (to nearest,
                             ties to even) but stored in fp32: the numerics of stream_bf16 (and of
                             the cuda backend's), bit for bit, as a reference (tests/test_frame,
                             tests/gpu/check.cu set it; model_build leaves it 0) */
    const real *hres_fixed;   /* NULL (model_build), or (Lh, n, n): wherever hres_fixed_on[l] is
                                 non-zero, sublayer l's H_res is matrix l for every token of
                                 a forward, in place of its method's (`s2hc ablate`); the
                                 forward alone (a backward would not know it) */
    const unsigned char *hres_fixed_on; /* (Lh), with hres_fixed */
    const unsigned char *branch_off; /* NULL (model_build), or (Lh): wherever non-zero, sublayer
                                        l's output f is 0 in a forward (the sublayer not run:
                                        X_{l+1} = H_res X_l, rc's X_{l+1} = X_l; `s2hc ablate
                                        --what branch`); the forward alone */
} gpt_model;

/* 1 when this build has the frame's projection products with bf16 operands
 * (residual.proj_precision: bf16: a float build for a CPU with AVX512_BF16), else 0. */
int model_bf16_built(void);

/* 1 when residual.proj_precision: bf16 takes AMX tiles: this build targets AMX-BF16 (a
 * Sapphire Rapids or later Xeon with -march=native), the kernel grants the process the
 * tiles' state (asked once), and the environment does not say S2HC_AMX=0. Else 0: the
 * products by vdpbf16ps. */
int model_amx_usable(void);
/* 1 when this build has the AMX products (it targets AMX-BF16), whatever the kernel
 * grants and S2HC_AMX says. */
int model_amx_built(void);
/* The most outputs a norm row of the projection may have for the AMX products (six tiles
 * of 16 sums); a larger one (mhc_lite from n = 5) takes vdpbf16ps. */
#define MODEL_AMX_MAX_OUTPUTS 96

/* Which instructions took m's projection products: "fp32", "vdpbf16ps" or "amx" (the run
 * file's proj_products attribute and bench.csv's column). */
const char *model_proj_products(const gpt_model *m);

/* Build the parameter table for a config without allocating tensors: used by
 * `s2hc params` at the paper's sizes. *out is malloc'd (caller frees). Returns 0, or -1
 * with the reason in err. */
int model_param_table(const s2hc_config *c, param_info **out, int *n_out, size_t *total, size_t *aux,
                      char *err, size_t errlen);

/* Build a model (parameter table, parameter and gradient buffers, method spec). 0 or -1. */
int model_build(gpt_model *m, const s2hc_config *c, char *err, size_t errlen);
/* GPT-2 init from seed: weights N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
 * biases 0, LayerNorm weight 1; every hyper-connection by its method's init. */
void model_init(gpt_model *m, uint64_t seed);
/* Allocate activations for micro-batches of B sequences of length T. */
void model_alloc_acts(gpt_model *m, int B);
/* Forward over inputs (B, T). With targets, returns the mean loss (also in mean_loss);
 * targets may be NULL (then returns 0 and only logits exist). */
real model_forward(gpt_model *m, const int *inputs, const int *targets, int B);
/* The last forward again from sublayer l's write-back on (the residual add for rc), with
 * everything before it as that forward left it (sublayer l's coefficients and branch
 * output included), sublayer l's H_res set to hres_fixed's matrix l where hres_fixed_on[l]
 * and its output f to 0 where branch_off[l] (else both kept), the later sublayers run as
 * model_forward runs them (hres_fixed and branch_off included). Returns the mean loss
 * against targets (NULL: 0). Its loss and logits are, bit for bit, those of a
 * model_forward whose hooks are the last forward's before l and these from l on, at the
 * cost of the sublayers after l (`s2hc ablate`). */
real model_forward_resume(gpt_model *m, int l, const int *targets);
/* Backward of the last forward (with targets): grads += d(mean loss)/d(params) * scale. */
void model_backward(gpt_model *m, real scale);
void model_zero_grad(gpt_model *m);
/* One training micro-batch: model_forward then model_backward(scale), returns the mean
 * loss. With several threads and B >= threads, each thread runs the whole forward and
 * backward of its own slice of the batch (contiguous sequences; slice k's activations in
 * its share of the model's buffers, its parameter gradients in its own buffer, added
 * into grads in slice order): no barrier between ops. The same gradients as the two
 * calls up to float rounding; bit-identical for a given thread count. Otherwise (one
 * thread, B < threads, train.parallel = ops, no targets, called inside a parallel region,
 * nested parallelism allowed, the bench's per-op profile on) exactly the two calls. The
 * activations afterwards are the slices' (model_hc_acts and the logits are then not the
 * batch's: probes and eval run model_forward themselves). */
real model_forward_backward(gpt_model *m, const int *inputs, const int *targets, int B, real scale);
/* The valid targets (>= 0) among n. */
size_t model_valid_targets(const int *targets, size_t n);
/* The same step over B sequences that are one part of a larger batch whose targets hold
 * `whole` valid ones (>= 0), as one process of a training across processes runs it
 * (harness/dist.h): the gradient of the whole batch's mean loss restricted to this part,
 * times scale, added into grads; returns this part's loss times its share of the valid
 * targets (summed over its slices in slice order, in double); whole = 0 (no valid target
 * in the batch) adds nothing. The parts of a batch cut where its slices would be cut,
 * each on one thread, give, summed in order, the bits of one process with as many
 * threads. */
double model_forward_backward_part(gpt_model *m, const int *inputs, const int *targets, int B, real scale,
                                   size_t whole);
void model_free(gpt_model *m);

/* Find a tensor by name; NULL if absent. */
const param_info *model_find_param(const gpt_model *m, const char *name);
/* Per-sublayer activation pointers (valid after model_forward). l in [0, Lh). */
hc_acts model_hc_acts(const gpt_model *m, int l);
/* Run the Lh sublayers from given initial streams X0 (B*T, n, C) (the probes' Jacobian
 * estimate). branches = 0 sets every sublayer output f to 0, leaving the residual path
 * (H_res with its dynamic coefficients). Needs model_alloc_acts first. */
void model_streams_forward(gpt_model *m, const real *X0, int branches);
/* Streams entering sublayer l (l = Lh: the final streams), (B*T, n, C) after model_forward;
 * after a training step (model_forward_backward) each token's n C values are in channel
 * blocks (stream_blocks, stream_cols), with bf16 streams in bf16. */
real *model_streams(const gpt_model *m, int l);
/* Vector-Jacobian product of the last model_streams_forward: given dXL (B*T, n, C), the
 * gradient with respect to X0 into dX0. Parameter gradients accumulate as a side effect. */
void model_streams_backward(gpt_model *m, const real *dXL, real *dX0);
/* The logits (B*T, V) of the last forward. */
const real *model_logits(const gpt_model *m);

/* Decoding one token per sequence at a time (`s2hc sample`): every block's keys and
 * values (L, B, T, C each) of the tokens given so far, for B sequences. */
typedef struct {
    real *k, *v;
    int B, T; /* sequences, and the window's length (block_size) */
} model_kv;
/* The cache for B sequences; until model_kv_free the model's activations hold one token
 * of each (its T reads 1), for model_decode only. */
void model_kv_alloc(model_kv *kv, gpt_model *m, int B);
/* The cache freed (kv zeroed: a second call does nothing), the model's T restored: its
 * next forward allocates the activations of whole windows again. */
void model_kv_free(model_kv *kv, gpt_model *m);
/* tokens[b] (B of them) at position pos (0..T-1) of sequence b, once positions 0..pos-1
 * were given in order: its keys and values join kv, and the result is the logits (B, V)
 * of the next token, what model_forward gives at row pos of the same sequences to float
 * rounding (its own products, over B rows), at the cost of one token instead of T. In the
 * activations' first B rows: valid until the next forward. */
const real *model_decode(gpt_model *m, model_kv *kv, const int *tokens, int pos);

#endif
