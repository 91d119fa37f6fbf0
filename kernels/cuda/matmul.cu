/* matmul.cu: the context (cuBLAS handle, stream, scratch), error checks, and the linear
 * layer out = inp . W^T + bias through cuBLAS, in float32 or with bf16 operands.
 *
 * cuBLAS is column-major; a row-major (M, N) matrix is a column-major (N, M) one, so the
 * row-major product C = op(A) op(B) is issued as the column-major C^T = op(B)^T op(A)^T:
 * operands swapped, transposition flags kept (gemm_f32 below). */
#include "kernels/cuda/ops_cuda.cuh"

/* ---- errors and memory ------------------------------------------------------------------ */

void cuda_check_(cudaError_t e, const char *what, const char *file, int line) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "s2hc: CUDA error at %s:%d: %s: %s\n", file, line, what, cudaGetErrorString(e));
    fflush(stderr);
    exit(1);
}

static const char *cublas_name(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "unknown cuBLAS status";
    }
}

void cublas_check_(cublasStatus_t s, const char *what, const char *file, int line) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    fprintf(stderr, "s2hc: cuBLAS error at %s:%d: %s: %s (%d)\n", file, line, what, cublas_name(s), (int)s);
    fflush(stderr);
    exit(1);
}

void *cuda_malloc_zero_(size_t n, const char *file, int line) {
    if (n == 0) return NULL;
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, n);
    if (e != cudaSuccess) {
        fprintf(stderr, "s2hc: CUDA error at %s:%d: cudaMalloc of %.1f MiB: %s\n", file, line,
                (double)n / (1024.0 * 1024.0), cudaGetErrorString(e));
        fflush(stderr);
        exit(1);
    }
    cuda_check_(cudaMemset(p, 0, n), "cudaMemset", file, line);
    /* the memset runs on the legacy stream, which does not order our non-blocking streams */
    cuda_check_(cudaDeviceSynchronize(), "cudaDeviceSynchronize", file, line);
    return p;
}

/* ---- context ----------------------------------------------------------------------------- */

static __global__ void fill_kernel(float *x, float v, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = v;
}

void cuda_ctx_init(cuda_ctx *ctx, int use_bf16) {
    memset(ctx, 0, sizeof *ctx);
    ctx->use_bf16 = use_bf16;
    int dev = 0, v = 0;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev));
    ctx->sm_count = v;
    CUDA_CHECK(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    ctx->smem_optin = (size_t)v;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->blas));
    CUBLAS_CHECK(cublasSetStream(ctx->blas, ctx->stream));
    /* float32 products stay float32: no TF32 (the checks compare with the CPU at 1e-4). */
    CUBLAS_CHECK(cublasSetMathMode(ctx->blas, CUBLAS_DEFAULT_MATH));
}

/* Events are made as the marks need them, so that a stretch pays only for the events it
 * uses; cuda_profile_stop (model_cuda.cu) destroys them. */
void cuda_prof_mark(cuda_ctx *ctx, int cat) { cuda_prof_mark_op(ctx, cat, CUDA_PROF_NO_OP); }

void cuda_prof_mark_op(cuda_ctx *ctx, int cat, int op) {
    cuda_prof *p = ctx->prof;
    if (!p) return;
    if (p->n >= CUDA_PROF_MARKS) {
        p->overflow = 1;
        return;
    }
    if (p->n == p->made) {
        CUDA_CHECK(cudaEventCreate(&p->ev[p->n]));
        p->made++;
    }
    CUDA_CHECK(cudaEventRecord(p->ev[p->n], ctx->stream));
    p->cat[p->n] = (unsigned char)cat;
    p->op[p->n++] = (unsigned char)op;
}

void cuda_prof_free(cuda_ctx *ctx) {
    cuda_prof *p = ctx->prof;
    if (!p) return;
    for (int i = 0; i < p->made; i++) cudaEventDestroy(p->ev[i]);
    free(p);
    ctx->prof = NULL;
}

void cuda_ctx_free(cuda_ctx *ctx) {
    if (!ctx->blas) return;
    cudaStreamSynchronize(ctx->stream);
    cuda_prof_free(ctx); /* a profile started and never stopped */
    cublasDestroy(ctx->blas);
    cudaStreamDestroy(ctx->stream);
    cudaFree(ctx->cvt_a);
    cudaFree(ctx->cvt_b);
    cudaFree(ctx->ones);
    cudaFree(ctx->part);
    cudaFree(ctx->dpart);
    cudaFree(ctx->att_D);
    cudaFree(ctx->hc_mat);
    cudaFree(ctx->hc_dth);
    memset(ctx, 0, sizeof *ctx);
}

#define GROW(ptr, have, want, type)                                          \
    do {                                                                     \
        if ((want) > (have)) {                                               \
            CUDA_CHECK(cudaStreamSynchronize(ctx->stream));                  \
            CUDA_CHECK(cudaFree(ptr));                                       \
            ptr = (type *)cuda_malloc_zero((size_t)(want) * sizeof(type));   \
            have = (want);                                                   \
        }                                                                    \
    } while (0)

void cuda_ctx_reserve(cuda_ctx *ctx, const cuda_scratch_need *need) {
    GROW(ctx->cvt_a, ctx->cvt_a_n, need->cvt_a, bf16);
    GROW(ctx->cvt_b, ctx->cvt_b_n, need->cvt_b, bf16);
    if (need->ones > ctx->ones_n) {
        GROW(ctx->ones, ctx->ones_n, need->ones, float);
        fill_kernel<<<cuda_blocks(ctx->ones_n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(ctx->ones, 1.0f,
                                                                                              ctx->ones_n);
        CUDA_LAUNCH_CHECK();
    }
    GROW(ctx->part, ctx->part_n, need->part, float);
    GROW(ctx->dpart, ctx->dpart_n, need->dpart, double);
    GROW(ctx->att_D, ctx->att_D_n, need->att_D, float);
    GROW(ctx->hc_mat, ctx->hc_mat_n, need->hc_mat, float);
    GROW(ctx->hc_dth, ctx->hc_dth_n, need->hc_dth, float);
}

/* ---- bf16 conversion ----------------------------------------------------------------------- */

static __global__ void to_bf16_kernel(bf16 *out, const float *in, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16_rn(in[i]);
}

/* four values per thread (n4 = n / 4, both aligned) */
static __global__ void to_bf16x4_kernel(bf16 *out, const float *in, size_t n4) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) st_bf16x4(out + 4 * i, ld_float4(in + 4 * i));
}

void cuda_to_bf16(cuda_ctx *ctx, bf16 *out, const float *in, size_t n) {
    if (n == 0) return;
    if (n % 4 == 0 && cuda_aligned16(in) && ((size_t)out & 7) == 0)
        to_bf16x4_kernel<<<cuda_blocks(n / 4, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, in, n / 4);
    else
        to_bf16_kernel<<<cuda_blocks(n, CUDA_THREADS), CUDA_THREADS, 0, ctx->stream>>>(out, in, n);
    CUDA_LAUNCH_CHECK();
}

/* ---- GEMM ------------------------------------------------------------------------------------ */

void gemm_f32(cuda_ctx *ctx, int transA, int transB, int M, int N, int K, float alpha, const float *A, int lda,
              const float *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasSgemm(ctx->blas, tb, ta, N, M, K, &alpha, B, ldb, A, lda, &beta, C, ldc));
}

void gemm_bf16(cuda_ctx *ctx, int transA, int transB, int M, int N, int K, float alpha, const bf16 *A, int lda,
               const bf16 *B, int ldb, float beta, float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    cublasOperation_t ta = transA ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_CHECK(cublasGemmEx(ctx->blas, tb, ta, N, M, K, &alpha, B, CUDA_R_16BF, ldb, A, CUDA_R_16BF, lda, &beta, C,
                              CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

/* ---- the linear layer ------------------------------------------------------------------------- */

/* out (N, OC) += bias (OC) broadcast over rows. Threads (x, y) of a block: x a column (of
 * four floats when vec: OC % 4 == 0 and both aligned), y a row; the grid's rows stride
 * down the matrix. (A thread per element took its column as i % OC, a 64-bit division
 * per element: more instructions than the element's bytes allow at the memory's rate.) */
static __global__ void add_bias_kernel(float *out, const float *bias, size_t N, int OC, int vec) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x, cols = vec ? OC / 4 : OC;
    if (c >= cols) return;
    const size_t step = (size_t)gridDim.y * blockDim.y;
    if (vec) {
        const float4 b = ld_float4(bias + 4 * c);
        for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < N; r += step) {
            float *p = out + r * OC + 4 * (size_t)c;
            const float4 v = ld_float4(p);
            st_float4(p, make_float4(v.x + b.x, v.y + b.y, v.z + b.z, v.w + b.w));
        }
    } else {
        const float b = bias[c];
        for (size_t r = (size_t)blockIdx.y * blockDim.y + threadIdx.y; r < N; r += step) out[r * OC + c] += b;
    }
}

static int dim_int(size_t n, const char *op) {
    if (n > 0x7fffffffu) {
        fprintf(stderr, "s2hc: kernels/cuda: %s: dimension %zu does not fit a cuBLAS int\n", op, n);
        exit(1);
    }
    return (int)n;
}

/* The bf16 view of x (n values): x_bf when given, else a conversion into `scratch`. */
static const bf16 *bf16_view(cuda_ctx *ctx, const float *x, const bf16 *x_bf, bf16 *scratch, size_t have, size_t n,
                             const char *op) {
    if (x_bf) return x_bf;
    if (n > have) {
        fprintf(stderr, "s2hc: kernels/cuda: %s: bf16 scratch too small (%zu < %zu): reserve it first\n", op, have,
                n);
        exit(1);
    }
    cuda_to_bf16(ctx, scratch, x, n);
    return scratch;
}

void matmul_forward_cuda(cuda_ctx *ctx, float *out, const float *inp, const bf16 *inp_bf, const float *W,
                         const bf16 *W_bf, const float *bias, size_t N, int C, int OC) {
    int n = dim_int(N, "matmul_forward_cuda");
    if (n == 0 || OC <= 0) return;
    if (ctx->use_bf16) {
        const bf16 *a = bf16_view(ctx, inp, inp_bf, ctx->cvt_a, ctx->cvt_a_n, N * (size_t)C, "matmul_forward_cuda");
        const bf16 *w = bf16_view(ctx, W, W_bf, ctx->cvt_b, ctx->cvt_b_n, (size_t)OC * C, "matmul_forward_cuda");
        gemm_bf16(ctx, 0, 1, n, OC, C, 1.0f, a, C, w, C, 0.0f, out, OC);
    } else {
        gemm_f32(ctx, 0, 1, n, OC, C, 1.0f, inp, C, W, C, 0.0f, out, OC);
    }
    if (bias) {
        const int vec = OC % 4 == 0 && cuda_aligned16(out) && cuda_aligned16(bias), cols = vec ? OC / 4 : OC;
        const size_t rows = (N + 7) / 8;
        dim3 grid((unsigned)((cols + 31) / 32), (unsigned)(rows < 65535 ? rows : 65535)), block(32, 8);
        add_bias_kernel<<<grid, block, 0, ctx->stream>>>(out, bias, N, OC, vec);
        CUDA_LAUNCH_CHECK();
    }
}

/* dinp (N, C) += dout (N, OC) . W (OC, C);  dW (OC, C) += dout^T . inp;  dbias += dout^T 1.
 * bf16 mode: dout is converted once into cvt_b (it is the B operand of the first product
 * and the A operand of the second), dbias summed in the same pass where it can be
 * (cuda_to_bf16_colsum; else a GEMV); inp's copy comes from the forward when it was kept. */
/* beta_in: 1 adds the input gradient into dinp, 0 overwrites it (the _set form) */
/* dout_bf (bf16 mode): dout already in bf16, its dbias summed by the caller (dout, dbias unused) */
static void matmul_backward_impl(cuda_ctx *ctx, float *dinp, float *dW, float *dbias, const float *dout,
                                 const bf16 *dout_bf, const float *inp, const bf16 *inp_bf, const float *W,
                                 const bf16 *W_bf, size_t N, int C, int OC, float beta_in) {
    int n = dim_int(N, "matmul_backward_cuda");
    if (n == 0 || OC <= 0) return;
    int dbias_done = 0;
    if (ctx->use_bf16) {
        const bf16 *d = ctx->cvt_b;
        if (dout_bf)
            d = dout_bf, dbias_done = 1;
        else if (dbias && N * (size_t)OC <= ctx->cvt_b_n &&
                 cuda_to_bf16_colsum(ctx, ctx->cvt_b, dbias, dout, NULL, 0, N, OC))
            dbias_done = 1;
        else
            d = bf16_view(ctx, dout, NULL, ctx->cvt_b, ctx->cvt_b_n, N * (size_t)OC, "matmul_backward_cuda");
        if (dinp) {
            /* W's bf16 copy: the model always has one; the op checks may not (then cvt_a) */
            const bf16 *w = bf16_view(ctx, W, W_bf, ctx->cvt_a, ctx->cvt_a_n, (size_t)OC * C, "matmul_backward_cuda");
            gemm_bf16(ctx, 0, 0, n, C, OC, 1.0f, d, OC, w, C, beta_in, dinp, C);
        }
        if (dW) {
            const bf16 *a = bf16_view(ctx, inp, inp_bf, ctx->cvt_a, ctx->cvt_a_n, N * (size_t)C, "matmul_backward_cuda");
            gemm_bf16(ctx, 1, 0, OC, C, n, 1.0f, d, OC, a, C, 1.0f, dW, C);
        }
    } else {
        if (dinp) gemm_f32(ctx, 0, 0, n, C, OC, 1.0f, dout, OC, W, C, beta_in, dinp, C);
        if (dW) gemm_f32(ctx, 1, 0, OC, C, n, 1.0f, dout, OC, inp, C, 1.0f, dW, C);
    }
    if (dbias && !dbias_done) {
        if (ctx->ones_n < N) {
            fprintf(stderr, "s2hc: kernels/cuda: matmul_backward_cuda: ones vector too short: reserve it first\n");
            exit(1);
        }
        /* column-major view of dout is (OC, N): dbias += dout_cm . ones (float32, fixed order) */
        const float one = 1.0f;
        CUBLAS_CHECK(cublasSgemv(ctx->blas, CUBLAS_OP_N, OC, n, &one, dout, OC, ctx->ones, 1, &one, dbias, 1));
    }
}

void matmul_backward_cuda(cuda_ctx *ctx, float *dinp, float *dW, float *dbias, const float *dout, const float *inp,
                          const bf16 *inp_bf, const float *W, const bf16 *W_bf, size_t N, int C, int OC) {
    matmul_backward_impl(ctx, dinp, dW, dbias, dout, NULL, inp, inp_bf, W, W_bf, N, C, OC, 1.0f);
}

void matmul_backward_set_cuda(cuda_ctx *ctx, float *dinp, float *dW, float *dbias, const float *dout,
                              const float *inp, const bf16 *inp_bf, const float *W, const bf16 *W_bf, size_t N, int C,
                              int OC) {
    matmul_backward_impl(ctx, dinp, dW, dbias, dout, NULL, inp, inp_bf, W, W_bf, N, C, OC, 0.0f);
}

void matmul_backward_set_bf16_cuda(cuda_ctx *ctx, float *dinp, float *dW, const bf16 *dout_bf, const bf16 *inp_bf,
                                   const bf16 *W_bf, size_t N, int C, int OC) {
    matmul_backward_impl(ctx, dinp, dW, NULL, NULL, dout_bf, NULL, inp_bf, NULL, W_bf, N, C, OC, 0.0f);
}
