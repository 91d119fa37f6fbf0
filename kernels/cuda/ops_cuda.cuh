/* ops_cuda.cuh: the device ops, one per op of kernels/kernels.h, forward and backward side
 * by side with the same argument order as the CPU twin, plus the few fused ops the device
 * model uses. Every pointer is device memory unless its name starts with h_. Every op is
 * asynchronous on ctx->stream, except those that return a value to the host.
 *
 * Differences from the CPU op list, and why:
 *  - attention keeps no (B, NH, T, T) probability matrix: forward saves the per-row
 *    log-sum-exp lse (B, NH, T) and backward recomputes the scores tile by tile
 *    (FlashAttention-2 style; docs/cuda.md). Its backward also reads the forward output.
 *  - forward producers of a matrix-product operand (layernorm, gelu, attention) take an
 *    optional bf16 output (out_bf, NULL when not in bf16 mode): the next product reads it.
 *    layernorm's and gelu's fp32 output may then be NULL (the model keeps no fp32 copy of
 *    an output only products read: their backward reads the input).
 *  - matmul takes the bf16 copies of its operands when it has them (NULL: converted into
 *    scratch on the fly).
 *  - crossentropy_fused_cuda gives losses and dlogits in one pass (no probs).
 *  - encoder_backward_cuda takes the tokens grouped by id (encoder_group_tokens, host
 *    side), so dwte is summed per vocabulary row in token order: deterministic, no atomics.
 */
#ifndef S2HC_OPS_CUDA_CUH
#define S2HC_OPS_CUDA_CUH
#include "kernels/cuda/cuda_common.cuh"

/* ---- matrix products (matmul.cu) ---------------------------------------------------- */

/* Row-major C (M, N) = alpha op(A) op(B) + beta C; op(X) = X^T when transX. lda, ldb, ldc are
 * row strides. float32 (cublasSgemm, no TF32). */
void gemm_f32(cuda_ctx *ctx, int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc);
/* The same with bf16 operands and float32 C, float32 accumulation (cublasGemmEx). */
void gemm_bf16(cuda_ctx *ctx, int transA, int transB, int M, int N, int K, float alpha, const bf16 *A, int lda,
               const bf16 *B, int ldb, float beta, float *C, int ldc);

/* out (N, OC) = inp (N, C) . W^T (C, OC) + bias (OC); bias may be NULL. */
void matmul_forward_cuda(cuda_ctx *ctx, float *out, const float *inp, const bf16 *inp_bf, const float *W,
                         const bf16 *W_bf, const float *bias, size_t N, int C, int OC);
/* dinp (N, C) += dout . W;  dW (OC, C) += dout^T . inp;  dbias (OC) += column sums of dout. */
void matmul_backward_cuda(cuda_ctx *ctx, float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                          const bf16 *inp_bf, const float *W, const bf16 *W_bf, size_t N, int C, int OC);
/* The _set forms of the backward ops overwrite the input gradient (dinp, dqkv) instead of
 * adding into it, whatever it held (NaN included); the parameter gradients are still
 * added. They spare the model's backward a zeroing pass over each gradient scratch. */
void matmul_backward_set_cuda(cuda_ctx *ctx, float *dinp, float *dW, float *dbias, const float *dout,
                              const float *inp, const bf16 *inp_bf, const float *W, const bf16 *W_bf, size_t N, int C,
                              int OC);
/* bf16 mode, the _set form with dout already in bf16 (cuda_to_bf16_colsum's, which summed
 * dbias): the products alone; inp_bf and W_bf required. */
void matmul_backward_set_bf16_cuda(cuda_ctx *ctx, float *dinp, float *dW, const bf16 *dout_bf, const bf16 *inp_bf,
                                   const bf16 *W_bf, size_t N, int C, int OC);

/* ---- LayerNorm, GELU, embedding, cross-entropy, optimizer (ops.cu) --------------------- */

/* b may be NULL (no bias: model.bias false), and so may the backward's dw, db. */
void layernorm_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, float *mean, float *rstd, const float *inp,
                            const float *w, const float *b, size_t N, int C);
void layernorm_backward_cuda(cuda_ctx *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
                             const float *w, const float *mean, const float *rstd, size_t N, int C);
void layernorm_backward_set_cuda(cuda_ctx *ctx, float *dinp, float *dw, float *db, const float *dout,
                                 const float *inp, const float *w, const float *mean, const float *rstd, size_t N,
                                 int C);

/* GELU: exact = 1 for x Phi(x) (model.gelu: erf), 0 for GPT-2's tanh form. */
void gelu_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, const float *inp, size_t N, int exact);
/* bf16 mode's gradient into a product, dout (N, OC), in bf16 (out) with dbias += its column
 * sums (dbias NULL: none, model.bias false), in one read; with g non-NULL, first GELU's
 * backward (of the form exact names): out = bf16 of g'(g) dout (the MLP's fc layer, whose
 * fp32 gradient is then never stored). Returns 0, doing nothing, when the shape or the
 * scratch (ceil(N / CUDA_COLSUM_ROWS) OC floats of ctx->part) does not allow it (OC % 4,
 * alignment): the caller converts and sums apart. */
int cuda_to_bf16_colsum(cuda_ctx *ctx, bf16 *out, float *dbias, const float *x, const float *g, int exact, size_t N,
                        int OC);
void gelu_backward_cuda(cuda_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t N, int exact);
void gelu_backward_set_cuda(cuda_ctx *ctx, float *dinp, const float *inp, const float *dout, size_t N, int exact);

void encoder_forward_cuda(cuda_ctx *ctx, float *out, const int *inp, const float *wte, const float *wpe, int B, int T,
                          int C);
/* Host side: group the N token positions by id, in position order. order (N) lists the
 * positions, ids (*n_ids) the distinct ids present in increasing order, starts (*n_ids + 1)
 * where each id's positions begin in order. Returns -1 on an id outside [0, V), else 0. */
int encoder_group_tokens(const int *h_inp, size_t N, int V, int *h_order, int *h_ids, int *h_starts, int *n_ids);
/* dwte[id] += sum of dout over the positions of id (in order); dwpe[t] += sum_b dout[b, t].
 * order, ids, starts: the device copies of encoder_group_tokens' output. */
void encoder_backward_cuda(cuda_ctx *ctx, float *dwte, float *dwpe, const float *dout, const int *order,
                           const int *ids, const int *starts, int n_ids, int B, int T, int C);

void crossentropy_forward_cuda(cuda_ctx *ctx, float *losses, float *probs, const float *logits, const int *targets,
                               size_t N, int V);
/* dlogits (N, V) = (probs - onehot(target)) * scale, OVERWRITTEN (as on the CPU). */
void crossentropy_backward_cuda(cuda_ctx *ctx, float *dlogits, const float *probs, const int *targets, float scale,
                                size_t N, int V);
/* Both at once without probs: losses (N), and dlogits (overwritten) when not NULL. */
void crossentropy_fused_cuda(cuda_ctx *ctx, float *losses, float *dlogits, const float *logits, const int *targets,
                             float scale, size_t N, int V);

/* AdamW on one tensor, as adamw_update (bias corrections computed on the host in double). */
void adamw_update_cuda(cuda_ctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
                       float beta2, float eps, float wd, int t);
/* AdamW on the whole parameter buffer in one launch: tensor k spans
 * [seg_start[k], seg_start[k+1]) with weight decay seg_wd[k] (device arrays, nseg tensors).
 * Gradients are read as g * gscale (the clip factor, as scale_inplace then adamw_update
 * on the CPU). p_bf (may be NULL) receives the bf16 copy of the updated parameters. */
void adamw_all_cuda(cuda_ctx *ctx, float *p, bf16 *p_bf, const float *g, float *m, float *v, size_t n,
                    const size_t *seg_start, const float *seg_wd, int nseg, float lr, float beta1, float beta2,
                    float eps, float gscale, int t);

/* Sum of squares in double, fixed order; synchronises and returns to the host. Uses
 * CUDA_SUMSQ_BLOCKS + 1 doubles of ctx->dpart. */
#define CUDA_SUMSQ_BLOCKS 1024
/* Rows per partial sum of the column reductions (layernorm_backward_cuda needs
 * 2 ceil(N / CUDA_COLSUM_ROWS) C floats of ctx->part). */
#define CUDA_COLSUM_ROWS 64
double sumsq_cuda(cuda_ctx *ctx, const float *x, size_t n);
void scale_inplace_cuda(cuda_ctx *ctx, float *x, float s, size_t n);

/* Small helpers of the model. */
void add_cuda(cuda_ctx *ctx, float *out, const float *a, const float *b, size_t n);   /* out = a + b */
/* dst (C) += column sums of src (rows, C), rows in order (deterministic). */
void colsum_add_cuda(cuda_ctx *ctx, float *dst, const float *src, size_t rows, size_t C);

/* ---- attention (attention.cu) ------------------------------------------------------------ */

/* qkv (B, T, 3C) = q | k | v; out (B, T, C); lse (B, NH, T) saved for backward.
 * Causal, scale 1/sqrt(hs), hs = C / NH <= ATT_MAX_HS. bf16 mode with hs % 16 == 0 uses
 * tensor cores (bf16 operands, fp32 softmax and accumulation); otherwise fp32 CUDA cores. */
#define ATT_MAX_HS 128
void attention_forward_cuda(cuda_ctx *ctx, float *out, bf16 *out_bf, float *lse, const float *qkv, int B, int T,
                            int C, int NH);
/* dqkv (B, T, 3C) += gradient, from dout (B, T, C) and the forward's out and lse. */
void attention_backward_cuda(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                             const float *lse, int B, int T, int C, int NH);
void attention_backward_set_cuda(cuda_ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
                                 const float *lse, int B, int T, int C, int NH);
/* 1 when the tensor-core path would be used for these sizes in this ctx. */
int attention_uses_tensor_cores(const cuda_ctx *ctx, int C, int NH);

#endif
