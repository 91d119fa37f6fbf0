/* selftest.cu: the CPU emulator's own check (tests/cli/emu_check.sh runs it).
 *
 * Each kernel exchanges values through shared memory; the "ok" ones order every exchange
 * with a barrier, the racy ones leave one out, as a kernel of kernels/cuda might; and
 * smem_limit checks the launch limits of dynamic shared memory. Built through cu2cpp.py
 * like the real kernels, so it also checks the rewrites.
 *
 *   emu_selftest            one line per kernel: "NAME right" or "NAME wrong", then
 *                           "selftest: N right, N wrong"
 *   emu_selftest --bad MODE one kernel that breaks a rule the emulator enforces (it must
 *                           abort and say which): returned-lane, divergent, mask
 *
 * The order comes from S2HC_EMU_ORDER (emu.h): the ok kernels must be right in every
 * order, each racy one wrong in the orders named next to it. cublas_args checks that the
 * emulator's cuBLAS refuses what cuBLAS refuses (a leading dimension too small). */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NT 64 /* two warps */

/* Each kernel comes in two forms, `full` choosing between them (uniform over the block, so
 * a barrier under it is legal): with the barrier the exchange needs, and with a weaker one
 * or none, as a kernel of kernels/cuda might have it. */

/* lanes swap through shared memory: a __syncwarp between write and read, or nothing
 * (wrong in every order: a lane reads before its partner writes) */
static __global__ void warp_swap(float *out, int full) {
    out += blockIdx.x * NT;
    extern __shared__ float s[];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    s[t] = (float)(t + 1);
    if (full) __syncwarp();
    out[t] = s[w * 32 + (31 - lane)];
}
/* the two warps swap halves: a __syncthreads between, or only a __syncwarp (the other warp
 * has not written yet, in every order) */
static __global__ void block_swap(float *out, int full) {
    out += blockIdx.x * NT;
    extern __shared__ float s[];
    const int t = threadIdx.x;
    s[t] = (float)(t + 1);
    if (full) __syncthreads();
    else __syncwarp();
    out[t] = s[NT - 1 - t];
}
/* the same with a static __shared__ array: every block computes the same values, so only
 * the emulator's NaN at each block's start keeps the previous block's (or launch's) values
 * from hiding the race */
static __global__ void static_swap(float *out, int full) {
    out += blockIdx.x * NT;
    __shared__ float s[NT];
    const int t = threadIdx.x;
    s[t] = (float)(t + 1);
    if (full) __syncthreads();
    else __syncwarp();
    out[t] = s[NT - 1 - t];
}
/* a buffer reused: read the other warp's half, then overwrite one's own half. Without the
 * barrier between, one warp overwrites before the other has read (asc and desc). */
static __global__ void reuse(float *out, int full) {
    out += blockIdx.x * NT;
    extern __shared__ float s[];
    const int t = threadIdx.x;
    s[t] = (float)(t + 1);
    __syncthreads();
    float v = s[(t + 32) % NT];
    if (full) __syncthreads();
    s[t] = (float)(100 + t);
    __syncthreads();
    out[t] = v + s[(t + 32) % NT];
}
/* a warp's staging area spans its neighbour's row, as in the attention kernels: warp w
 * writes row w, then (after a __syncwarp) reads it back; later it stages 64 values at
 * 64 w, over rows 2w and 2w + 1. With a __syncwarp instead of the __syncthreads before
 * the staging (the warp's own reads are done, the other warp's may not be), warp 0 can
 * stage over row 1 between warp 1's write and read: only a random order interleaves the
 * warps that finely. */
static __global__ void stage(float *out, int full) {
    out += blockIdx.x * NT;
    extern __shared__ float s[];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    s[w * 32 + lane] = (float)(t + 1);
    __syncwarp();
    float v = s[w * 32 + (31 - lane)];
    if (full) __syncthreads();
    else __syncwarp();
    float *st = s + w * 64;
    st[lane] = v;
    st[lane + 32] = v;
    __syncwarp();
    out[t] = st[31 - lane] + st[63 - lane];
}
/* a reduction by shuffles (as cuda_common.cuh's): every lane gets the warp's sum */
static __global__ void shuffle_sum_ok(float *out) {
    out += blockIdx.x * NT;
    const int t = threadIdx.x;
    float v = (float)(t + 1);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    out[t] = v;
}

/* dynamic shared memory past 48 KiB: refused unless cudaFuncSetAttribute raised the limit */
static __global__ void big_smem(float *out) {
    out += blockIdx.x * NT;
    extern __shared__ float s[];
    const int t = threadIdx.x;
    s[16000 + t] = (float)(t + 1);
    __syncthreads();
    out[t] = s[16000 + NT - 1 - t];
}

/* rules the emulator enforces */
static __global__ void bad_returned_lane(float *out) {
    const int t = threadIdx.x;
    if ((t & 31) == 5) return;
    out[t] = __shfl_xor_sync(0xffffffffu, (float)t, 1);
}
static __global__ void bad_divergent(float *out) {
    const int t = threadIdx.x;
    if ((t & 31) < 16)
        __syncwarp();
    else
        __syncthreads();
    out[t] = (float)t;
}
static __global__ void bad_mask(float *out) {
    const int t = threadIdx.x;
    __syncwarp((t & 31) < 16 ? 0x0000ffffu : 0xffffffffu);
    out[t] = (float)t;
}

/* expected values: what each kernel computes when every exchange is ordered */
static float expect(const char *name, int t) {
    const int lane = t & 31, w = t >> 5;
    if (!strncmp(name, "warp_swap", 9)) return (float)(w * 32 + (31 - lane) + 1);
    if (!strncmp(name, "block_swap", 10) || !strncmp(name, "static_swap", 11) || !strcmp(name, "smem_limit"))
        return (float)(NT - t);
    if (!strncmp(name, "reuse", 5)) return (float)((t + 32) % NT + 1 + 100 + (t + 32) % NT);
    if (!strncmp(name, "stage", 5)) return 2.0f * (float)(w * 32 + lane + 1);
    if (!strcmp(name, "shuffle_sum_ok")) return (float)(w * 32 * 32 + 32 * 33 / 2);
    return -1;
}

/* big_smem refused at 64 KiB without the attribute, an attribute past 227 KiB refused, then
 * run with the attribute set: 1 when all three hold */
static int smem_limit_run(float *d, int blocks) {
    const size_t big = 64 << 10;
    big_smem<<<blocks, NT, big>>>(d);
    int refused = cudaGetLastError() != cudaSuccess;
    int bad_attr = cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, 300000) != cudaSuccess;
    int set = cudaFuncSetAttribute(big_smem, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big) == cudaSuccess;
    if (!refused || !bad_attr || !set) return 0;
    big_smem<<<blocks, NT, big>>>(d);
    return cudaGetLastError() == cudaSuccess;
}

static int run(const char *name, int blocks) {
    float *d;
    size_t n = (size_t)blocks * NT;
    if (cudaMalloc((void **)&d, n * sizeof(float)) != cudaSuccess) return -1;
    size_t sm = 2 * NT * sizeof(float);
    const int full = strstr(name, "_ok") != NULL;
    if (!strcmp(name, "smem_limit")) {
        if (!smem_limit_run(d, blocks)) {
            cudaFree(d);
            return 0;
        }
    } else if (!strncmp(name, "warp_swap", 9)) warp_swap<<<blocks, NT, sm>>>(d, full);
    else if (!strncmp(name, "block_swap", 10)) block_swap<<<blocks, NT, sm>>>(d, full);
    /* twice: the second launch finds the first one's values in the array but for the NaN */
    else if (!strncmp(name, "static_swap", 11)) for (int k = 0; k < 2; k++) static_swap<<<blocks, NT>>>(d, full);
    else if (!strncmp(name, "reuse", 5)) reuse<<<blocks, NT, sm>>>(d, full);
    else if (!strncmp(name, "stage", 5)) stage<<<blocks, NT, sm>>>(d, full);
    else if (!strcmp(name, "shuffle_sum_ok")) shuffle_sum_ok<<<blocks, NT, sm>>>(d);
    else if (!strcmp(name, "returned-lane")) bad_returned_lane<<<1, NT>>>(d);
    else if (!strcmp(name, "divergent")) bad_divergent<<<1, NT>>>(d);
    else if (!strcmp(name, "mask")) bad_mask<<<1, NT>>>(d);
    else return -1;
    float h[64 * NT];
    cudaMemcpy(h, d, n * sizeof(float), cudaMemcpyDeviceToHost);
    cudaFree(d);
    int right = 1;
    for (size_t i = 0; i < n; i++)
        if (h[i] != expect(name, (int)(i % NT))) right = 0;
    return right;
}

/* 1 when valid products run and each leading dimension below cuBLAS's minimum is refused
 * with CUBLAS_STATUS_INVALID_VALUE, as on a GPU (the emulator would compute with it) */
static int cublas_args(void) {
    cublasHandle_t h;
    cublasCreate(&h);
    static float A[64], B[64], C[64];
    const float one = 1, zero = 0;
    const cublasOperation_t N = CUBLAS_OP_N, T = CUBLAS_OP_T;
    /* C (3 x 2) = op(A) op(B), k = 4 */
    int right = cublasSgemm(h, N, N, 3, 2, 4, &one, A, 3, B, 4, &zero, C, 3) == CUBLAS_STATUS_SUCCESS &&
                cublasSgemm(h, T, T, 3, 2, 4, &one, A, 4, B, 2, &zero, C, 3) == CUBLAS_STATUS_SUCCESS &&
                cublasSgemm(h, N, N, 3, 2, 4, &one, A, 2, B, 4, &zero, C, 3) == CUBLAS_STATUS_INVALID_VALUE &&
                cublasSgemm(h, T, N, 3, 2, 4, &one, A, 3, B, 4, &zero, C, 3) == CUBLAS_STATUS_INVALID_VALUE &&
                cublasSgemm(h, N, N, 3, 2, 4, &one, A, 3, B, 3, &zero, C, 3) == CUBLAS_STATUS_INVALID_VALUE &&
                cublasSgemm(h, N, T, 3, 2, 4, &one, A, 3, B, 1, &zero, C, 3) == CUBLAS_STATUS_INVALID_VALUE &&
                cublasSgemm(h, N, N, 3, 2, 4, &one, A, 3, B, 4, &zero, C, 2) == CUBLAS_STATUS_INVALID_VALUE &&
                cublasSgemv(h, N, 3, 2, &one, A, 2, B, 1, &zero, C, 1) == CUBLAS_STATUS_INVALID_VALUE;
    cublasDestroy(h);
    return right;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--bad")) {
        int r = run(argv[2], 1);
        fprintf(stderr, "emu_selftest: --bad %s ran to its end (%d)\n", argv[2], r);
        return r < 0 ? 2 : 0;
    }
    static const char *names[] = {"warp_swap_ok",   "warp_swap_racy",        "block_swap_ok", "block_swap_warp_only",
                                  "static_swap_ok", "static_swap_warp_only", "reuse_ok",      "reuse_racy",
                                  "stage_ok",       "stage_racy",            "shuffle_sum_ok", "smem_limit"};
    int nr = 0, nw = 0;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        int r = run(names[k], 64);
        printf("%s %s\n", names[k], r == 1 ? "right" : "wrong");
        if (r == 1) nr++;
        else nw++;
    }
    const int cb = cublas_args();
    printf("cublas_args %s\n", cb ? "right" : "wrong");
    nr += cb;
    nw += !cb;
    printf("selftest: %d right, %d wrong\n", nr, nw);
    return 0;
}
