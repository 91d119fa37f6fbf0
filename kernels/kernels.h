/* kernels.h: the op list of the CPU backend (the reference; CUDA mirrors it).
 *
 * Shapes are given in comments as (rows, cols), row-major. N = B*T tokens.
 * Linear weights use PyTorch's [out, in] layout: W is (OC, C).
 * Forward ops overwrite their outputs. Backward ops ADD into every gradient they are
 * given, but for the two marked below that write theirs (=); a NULL gradient pointer is
 * skipped. The training step zeroes the parameter gradients once a step and a
 * sublayer's activation-gradient scratch before that sublayer's backward.
 * Every loop that matters runs with OpenMP over disjoint outputs, so results are
 * bit-identical for a given thread count. Matrix products go through BLAS, but for
 * attention's per-head products (register tiles of its own, kernels/cpu/attention.c).
 */
#ifndef S2HC_KERNELS_H
#define S2HC_KERNELS_H
#include <stddef.h>
#include "real.h"

/* out (N, OC) = inp (N, C) . W^T (C, OC) + bias (OC); bias may be NULL. */
void matmul_forward(real *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC);
/* The same for a few rows (decoding): dot products in double, each row's bits independent
 * of N (the BLAS path's need not be), and no packing of W. */
void matmul_forward_rows(real *out, const real *inp, const real *W, const real *bias, size_t N, int C, int OC);
/* dinp (N, C) += dout . W;  dW (OC, C) += dout^T . inp;  dbias (OC) += column sums of dout. */
void matmul_backward(real *dinp, real *dW, real *dbias, const real *dout, const real *inp, const real *W,
                     size_t N, int C, int OC);

/* LayerNorm over C with affine w, b; mean and rstd (N) are saved for backward. eps 1e-5.
 * b may be NULL (no bias: model.bias false), and so may db. */
void layernorm_forward(real *out, real *mean, real *rstd, const real *inp, const real *w, const real *b,
                       size_t N, int C);
void layernorm_backward(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                        const real *mean, const real *rstd, size_t N, int C);
/* The same with dinp written (=) rather than added into: no zeroed buffer needed. */
void layernorm_backward_set(real *dinp, real *dw, real *db, const real *dout, const real *inp, const real *w,
                            const real *mean, const real *rstd, size_t N, int C);

/* Causal multi-head self-attention.
 * qkv (B, T, 3C) holds q | k | v, head h uses channels [h*hs, (h+1)*hs) of each, hs = C/NH.
 * out (B, T, C); att (B, NH, T, T) receives the softmax probabilities (row t uses
 * columns 0..t; the rest is left 0) and is kept for backward. Scale 1/sqrt(hs). */
void attention_forward(real *out, real *att, const real *qkv, int B, int T, int C, int NH);
/* One new token per sequence at position pos (decoding, `s2hc sample`): qkv (B, 3C) its
 * q | k | v; its k and v are stored at row pos of the caches kc and vc (B, T, C), whose
 * rows 0..pos-1 hold the earlier tokens', and out (B, C) = softmax(q K^T / sqrt(hs)) V over
 * rows 0..pos, head by head: what attention_forward gives at row pos, to rounding. */
void attention_decode(real *out, const real *qkv, real *kc, real *vc, int B, int pos, int T, int C, int NH);
/* dqkv (B, T, 3C) += gradient; datt_scratch is (B, NH, T, T) scratch (may be overwritten). */
void attention_backward(real *dqkv, real *datt_scratch, const real *dout, const real *qkv, const real *att,
                        int B, int T, int C, int NH);

/* GELU, tanh approximation (GPT-2). */
void gelu_forward(real *out, const real *inp, size_t N);
void gelu_backward(real *dinp, const real *inp, const real *dout, size_t N);
/* GELU, exact: x Phi(x) (model.gelu: erf; PyTorch's nn.GELU()). The backward reads the
 * forward's output out of the same inp too. */
void gelu_erf_forward(real *out, const real *inp, size_t N);
void gelu_erf_backward(real *dinp, const real *inp, const real *out, const real *dout, size_t N);

/* Token + position embedding: out (B, T, C) = wte[inp[b,t]] + wpe[t]. */
void encoder_forward(real *out, const int *inp, const real *wte, const real *wpe, int B, int T, int C);
/* dwte (V, C) += ..., dwpe (T, C) += ... ; deterministic (no atomics). */
void encoder_backward(real *dwte, real *dwpe, const real *dout, const int *inp, int B, int T, int C, int V);

/* Softmax cross-entropy. logits (N, V) -> probs (N, V), losses (N) = -log p[target].
 * A target < 0 is ignored (loss 0, no gradient). */
void crossentropy_forward(real *losses, real *probs, const real *logits, const int *targets, size_t N, int V);
/* dlogits (N, V) = (probs - onehot(target)) * scale, OVERWRITTEN, not added into. */
void crossentropy_backward(real *dlogits, const real *probs, const int *targets, real scale, size_t N, int V);

/* AdamW on float32 master weights, one tensor: decoupled weight decay wd*lr*p,
 * bias-corrected moments at step t (1-based). */
void adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                  float eps, float wd, int t);
/* The same on n values, on the calling thread, with the bias corrections bc = 1 - beta^t
 * given (adamw_bias_correction): for an optimizer that shares its tensors' values out
 * among the threads of one parallel region. The gradient is read as g * gscale (the
 * clipping factor, 1 for none; g itself is left as it is): the bits of scale_inplace(g,
 * gscale) then adamw_update, without the pass over g. */
void adamw_update_span(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2,
                       float eps, float wd, float bc1, float bc2, float gscale);
float adamw_bias_correction(float beta, int t);

/* Sum of squares of x (n), accumulated in double, deterministic for a given thread count. */
double sumsq(const real *x, size_t n);
/* x *= s */
void scale_inplace(real *x, real s, size_t n);

/* Threads: how many OpenMP threads the ops use. */
int kernels_threads(void);

/* The vectors this build's kernels use, in words: "16-lane float vectors (AVX-512, 32
 * registers)", "8-lane ... (AVX2, 16 registers)" or, where a vector is two 128-bit
 * registers, "8-lane ... (NEON, 16 pairs of 128-bit registers)" (kernels/cpu/cpu_math.h,
 * cpu_vec; SSE the same on x86-64 without AVX), for
 * the bench's header: the same code runs 2-3x apart on hosts of either kind. */
const char *kernels_vectors(void);

/* What the cores and the memory can do, measured in this build's vectors (s2hc bench):
 * the FMA rate in GFLOP/s of `threads` threads, each running independent chains of
 * multiply-adds in registers; and the rate in GB/s at which `threads` threads read x (n
 * values, each thread a contiguous share, summing them). Each the best of a few tries. */
double kernels_fma_rate(int threads);
double kernels_read_rate(const real *x, size_t n, int threads);

#endif
