/* model_cuda.h: the GPT of harness/model.c on an NVIDIA GPU, callable from C.
 *
 * The device model is built from a CPU model (gpt_model, for its config, parameter table
 * and method spec) and mirrors its data flow op by op. Parameters, gradients, AdamW
 * moments and activations live on the device; what crosses to the host is the loss of
 * each micro-batch, the gradient norm, and whatever the caller downloads on purpose
 * (parameters and moments for checkpoints, per-token H_res for probes).
 *
 * A training step with the device model (train.c):
 *     cuda_zero_grad(cm);
 *     for each micro-batch: loss += cuda_forward_backward(cm, inputs, targets, 1.0f / accum);
 *     gn = cuda_grad_norm(cm);
 *     cuda_step(cm, lr, gn, step + 1);
 * and before a checkpoint: cuda_download_params(cm, model) and cuda_download_optim(...).
 *
 * Built with nvcc (the .cu files of kernels/cuda) when the toolkit is found; the build then defines
 * S2HC_CUDA for the C code. Without it, the functions below are inline stubs that say
 * so: cuda_available() returns 0 and cuda_model_create() returns NULL with the reason,
 * so callers need no #ifdef. Any CUDA error after creation prints file and line and
 * exits(1) (llm.c's cudaCheck): the training loop never sees a half-failed step.
 */
#ifndef S2HC_MODEL_CUDA_H
#define S2HC_MODEL_CUDA_H
#include <math.h> /* before extern "C": C++'s math.h must not get C linkage */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "../../harness/model.h"

typedef struct cuda_model cuda_model;

#if defined(S2HC_CUDA) || defined(__CUDACC__)

/* Number of usable GPUs. With one, `name` gets e.g. "NVIDIA H200 (sm_90, 139.8 GiB)";
 * with none, the reason ("no GPU (no CUDA driver: ...)", "GPU ... is sm_80;
 * this build runs on sm_90 and newer"). Never fails hard. */
int cuda_available(char *name, size_t len);
/* Use GPU local_rank mod the GPUs present (a process of a training across processes, one
 * GPU each when there are as many); before cuda_available and cuda_model_create. */
void cuda_use_device(int local_rank);

/* Build the device model for micro-batches of B sequences: copies the parameter table
 * and the method spec from m, uploads m->params, zeroes gradients and AdamW moments,
 * allocates every activation once. bf16 = 1: matrix products with bf16 operands (fp32
 * master weights, fp32 accumulation, fp32 small-matrix math). Returns NULL with the reason
 * in err (no GPU, unsupported sizes, out of device memory). The caller frees with
 * cuda_model_free. */
cuda_model *cuda_model_create(const gpt_model *m, int B, int bf16, char *err, size_t errlen);
void cuda_model_free(cuda_model *cm);

/* Parameters: host m->params <-> device (the same table; m must be the model it was built from). */
void cuda_upload_params(cuda_model *cm, const gpt_model *m);
void cuda_download_params(cuda_model *cm, gpt_model *m);
/* Gradients device -> m->grads (for checks and probes). */
void cuda_download_grads(cuda_model *cm, gpt_model *m);
/* m->grads -> device (the gradients summed across processes). */
void cuda_upload_grads(cuda_model *cm, const gpt_model *m);
/* AdamW moments (n_params floats each, the CPU's adamw_state layout). */
void cuda_upload_optim(cuda_model *cm, const float *mom, const float *var);
void cuda_download_optim(cuda_model *cm, float *mom, float *var);

void cuda_zero_grad(cuda_model *cm);
/* Forward over inputs (B, T); returns the mean loss over targets >= 0 (targets may be
 * NULL: logits only, returns 0). Exits with a message on a token or target >= vocab. */
float cuda_forward(cuda_model *cm, const int *inputs, const int *targets);
/* Forward and backward: grads += d(mean loss)/d(params) * scale. Returns the mean loss. */
float cuda_forward_backward(cuda_model *cm, const int *inputs, const int *targets, float scale);
/* Global L2 norm of the gradients (sum of squares in double, fixed order). */
double cuda_grad_norm(cuda_model *cm);
/* One AdamW step with the model's config (betas, eps, weight decay on decay tensors or
 * all with decay_1d): gradients scaled by clip / grad_norm first when grad_norm > clip
 * (clip > 0). t: the 1-based step count (bias correction), as adamw_state.t after ++. */
void cuda_step(cuda_model *cm, double lr, double grad_norm, int t);

/* The logits (B*T, V) of the last forward -> host. */
void cuda_download_logits(cuda_model *cm, float *logits);
/* Per-token coefficients of sublayer l (0 <= l < Lh) of the last forward -> host:
 * pre, post (B*T, n), H (B*T, n, n) in the X_next = H X convention; any may be NULL.
 * Returns 0, or -1 for rc (no frame) or l out of range. */
int cuda_download_hc(cuda_model *cm, int l, float *pre, float *post, float *H);
/* Streams entering sublayer l (l = Lh: the final streams), (B*T, n, C) -> host. */
int cuda_download_streams(cuda_model *cm, int l, float *X);

/* Bytes of device memory the model holds; 1 when it runs its products in bf16. */
size_t cuda_model_bytes(const cuda_model *cm);
int cuda_model_bf16(const cuda_model *cm);
/* 1 when attention runs on tensor cores (bf16 and head size 32, 64 or 128). */
int cuda_model_attention_tc(const cuda_model *cm);
/* Wait for the device (timing). */
void cuda_synchronize(cuda_model *cm);

/* The device time of a stretch of calls by kind of op: cuda_profile_start, then e.g. one
 * training step (cuda_zero_grad, cuda_forward_backward, cuda_grad_norm, cuda_step), then
 * cuda_profile_stop fills ms[CUDA_PROF_N] (cuda_profile_name(k) names category k) and
 * returns their sum in ms, or -1 when the stretch had more ops than it could time. Timing
 * puts an event after every op, which costs the device next to nothing. */
enum {
    CUDA_PROF_MATMUL,    /* the linear layers and the LM head, forward and backward */
    CUDA_PROF_ATTENTION, /* attention forward and backward */
    CUDA_PROF_LAYERNORM,
    CUDA_PROF_GELU,
    CUDA_PROF_EMBED,     /* embedding, cross-entropy and the loss to the host */
    CUDA_PROF_STREAMS,   /* the residual streams: rc's adds; the frame's read-out,
                            write-back, their backward, the stack's ends */
    CUDA_PROF_HC_PROJ,   /* the frame's coefficient projection: z, dX = dz W', dW, dg */
    CUDA_PROF_HC_MATH,   /* the methods' per-token math (hc_math.h), forward and backward */
    CUDA_PROF_ZERO,      /* zeroing of the parameters' gradients (cuda_zero_grad) */
    CUDA_PROF_OPTIM,     /* gradient norm and AdamW */
    CUDA_PROF_N
};
/* The finer split of the same stretch: each linear layer's products (forward and
 * backward), attention, and the frame's ops one by one (each also counts under its
 * category above). */
enum {
    CUDA_OP_MM_QKV,       /* the attention's input projection C -> 3C */
    CUDA_OP_MM_ATTPROJ,   /* the attention's output projection C -> C */
    CUDA_OP_MM_FC,        /* the MLP's C -> 4C */
    CUDA_OP_MM_FCPROJ,    /* the MLP's 4C -> C */
    CUDA_OP_MM_LMHEAD,    /* the LM head C -> V */
    CUDA_OP_ATT_FWD,      /* attention forward (the tiles' kernel) */
    CUDA_OP_ATT_BWD,      /* attention backward (rowsum(dO o O), the key and query kernels) */
    CUDA_OP_HC_Z,         /* the frame: z = X W'^T (W' and the product) */
    CUDA_OP_HC_COEF_FWD,  /* the per-token forward (hc_math.h) */
    CUDA_OP_HC_READOUT,   /* u = sum_i pre_i X_i */
    CUDA_OP_HC_WRITEBACK, /* X' = H X + post f, and the next frame's rms */
    CUDA_OP_HC_OUT_BWD,   /* df, dpost, dH */
    CUDA_OP_HC_DPRE,      /* dpre */
    CUDA_OP_HC_COEF_BWD,  /* the per-token backward, the theta gradients' sum */
    CUDA_OP_HC_IN_PROJ,   /* split input backward: dX = dz W', G = dz^T X, dW, dg */
    CUDA_OP_HC_IN_BWD,    /* split input backward: dX += H^T dY + pre du - s X */
    CUDA_OP_HC_FUSED,     /* fused input backward (S2HC_CUDA_FRAME=fused), dW and dg */
    CUDA_OP_N
};
void cuda_profile_start(cuda_model *cm);
double cuda_profile_stop(cuda_model *cm, double ms[CUDA_PROF_N]);
/* cuda_profile_stop that also gives each named op's time (op_ms) and how many times it
 * ran (op_calls; one call may be several launches); either may be NULL */
double cuda_profile_stop_ops(cuda_model *cm, double ms[CUDA_PROF_N], double op_ms[CUDA_OP_N],
                             int op_calls[CUDA_OP_N]);
const char *cuda_profile_name(int k);
const char *cuda_profile_op_name(int k);

/* A key of the layouts the API passes between the program and the backend (gpt_model and
 * what it holds, the profile's arrays), computed where this header is compiled: the
 * library's (cuda_backend_abi) must equal the program's, or the library was built from
 * other sources, and kernels/cuda/cuda_dl.c refuses it rather than read a model wrongly. */
static inline unsigned long long cuda_abi_key(void) {
    const size_t v[] = {sizeof(gpt_model), sizeof(s2hc_config), sizeof(hc_spec), sizeof(param_info),
                        offsetof(gpt_model, cfg), offsetof(gpt_model, spec), offsetof(gpt_model, pinfo),
                        offsetof(gpt_model, params), offsetof(gpt_model, B), offsetof(gpt_model, round_streams),
                        CUDA_PROF_N, CUDA_OP_N, sizeof(real)};
    unsigned long long h = 1469598103934665603ull; /* FNV-1a over the values */
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) h = (h ^ v[i]) * 1099511628211ull;
    return h;
}
unsigned long long cuda_backend_abi(void);

#else /* built without CUDA: stubs, so callers need no #ifdef */

static inline int cuda_available(char *name, size_t len) {
    if (name && len) snprintf(name, len, "this build has no CUDA backend (nvcc was not found at build time)");
    return 0;
}
static inline cuda_model *cuda_model_create(const gpt_model *m, int B, int bf16, char *err, size_t errlen) {
    (void)m; (void)B; (void)bf16;
    if (err && errlen) snprintf(err, errlen, "this build has no CUDA backend (nvcc was not found at build time)");
    return NULL;
}
static inline void cuda_model_free(cuda_model *cm) { (void)cm; }
/* never reached: no cuda_model can exist in this build */
static inline void cuda_upload_params(cuda_model *cm, const gpt_model *m) { (void)cm; (void)m; }
static inline void cuda_download_params(cuda_model *cm, gpt_model *m) { (void)cm; (void)m; }
static inline void cuda_download_grads(cuda_model *cm, gpt_model *m) { (void)cm; (void)m; }
static inline void cuda_upload_grads(cuda_model *cm, const gpt_model *m) { (void)cm; (void)m; }
static inline void cuda_use_device(int local_rank) { (void)local_rank; }
static inline void cuda_upload_optim(cuda_model *cm, const float *a, const float *b) { (void)cm; (void)a; (void)b; }
static inline void cuda_download_optim(cuda_model *cm, float *a, float *b) { (void)cm; (void)a; (void)b; }
static inline void cuda_zero_grad(cuda_model *cm) { (void)cm; }
static inline float cuda_forward(cuda_model *cm, const int *i, const int *t) { (void)cm; (void)i; (void)t; return 0; }
static inline float cuda_forward_backward(cuda_model *cm, const int *i, const int *t, float s) {
    (void)cm; (void)i; (void)t; (void)s;
    return 0;
}
static inline double cuda_grad_norm(cuda_model *cm) { (void)cm; return 0; }
static inline void cuda_step(cuda_model *cm, double lr, double gn, int t) { (void)cm; (void)lr; (void)gn; (void)t; }
static inline void cuda_download_logits(cuda_model *cm, float *x) { (void)cm; (void)x; }
static inline int cuda_download_hc(cuda_model *cm, int l, float *a, float *b, float *c) {
    (void)cm; (void)l; (void)a; (void)b; (void)c;
    return -1;
}
static inline int cuda_download_streams(cuda_model *cm, int l, float *X) { (void)cm; (void)l; (void)X; return -1; }
static inline size_t cuda_model_bytes(const cuda_model *cm) { (void)cm; return 0; }
static inline int cuda_model_bf16(const cuda_model *cm) { (void)cm; return 0; }
static inline int cuda_model_attention_tc(const cuda_model *cm) { (void)cm; return 0; }
static inline void cuda_synchronize(cuda_model *cm) { (void)cm; }
enum { CUDA_PROF_N = 10, CUDA_OP_N = 17 };
static inline void cuda_profile_start(cuda_model *cm) { (void)cm; }
static inline double cuda_profile_stop(cuda_model *cm, double *ms) { (void)cm; (void)ms; return -1; }
static inline double cuda_profile_stop_ops(cuda_model *cm, double *ms, double *op_ms, int *op_calls) {
    (void)cm; (void)ms; (void)op_ms; (void)op_calls;
    return -1;
}
static inline const char *cuda_profile_name(int k) { (void)k; return ""; }
static inline const char *cuda_profile_op_name(int k) { (void)k; return ""; }

#endif

#ifdef __cplusplus
}
#endif

#endif
