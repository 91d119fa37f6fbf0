/* emu.cpp: the CPU emulator's scheduler, runtime API and cuBLAS subset (see emu.h).
 *
 * Fibers: each CUDA thread of a block is a fiber with its own stack; a hand-written
 * x86-64 or aarch64 context switch (callee-saved registers and the stack pointer) makes a barrier
 * cost nanoseconds, so kernels with many shuffles stay usable. The scheduler runs the
 * fibers warp by warp, in an order S2HC_EMU_ORDER sets: each up to its next barrier (or
 * its end), a warp on through its warp barriers, and releases __syncthreads when every
 * live fiber waits there. */
#include "emu.h"
#include <time.h>
#include <vector>
#include "cublas_v2.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the CUDA emulator's context switch is written for x86-64 and aarch64"
#endif

thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;
thread_local void *emu_dyn_smem = NULL;
thread_local unsigned long emu_block_serial = 0;
thread_local double emu_xchg[1024];
thread_local double emu_xchg_full[2][1024];
thread_local unsigned char emu_shfl_count[1024];

/* emu_switch(from, to): save callee-saved registers on the current stack, store the stack
 * pointer in *from, load `to`, restore and return into the other context. */
extern "C" void emu_switch(void **from, void *to);
#if defined(__x86_64__)
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, @function
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_switch, .-emu_switch
)");
#else
/* AAPCS64: x19-x28, the frame pointer x29, the link register x30 (where ret returns to)
 * and the low halves of v8-v15 (d8-d15), in a 160-byte frame (sp stays 16-aligned). */
asm(R"(
    .text
    .globl emu_switch
    .type emu_switch, %function
emu_switch:
    sub sp, sp, #160
    stp x19, x20, [sp, #0]
    stp x21, x22, [sp, #16]
    stp x23, x24, [sp, #32]
    stp x25, x26, [sp, #48]
    stp x27, x28, [sp, #64]
    stp x29, x30, [sp, #80]
    stp d8, d9, [sp, #96]
    stp d10, d11, [sp, #112]
    stp d12, d13, [sp, #128]
    stp d14, d15, [sp, #144]
    mov x9, sp
    str x9, [x0]
    mov sp, x1
    ldp x19, x20, [sp, #0]
    ldp x21, x22, [sp, #16]
    ldp x23, x24, [sp, #32]
    ldp x25, x26, [sp, #48]
    ldp x27, x28, [sp, #64]
    ldp x29, x30, [sp, #80]
    ldp d8, d9, [sp, #96]
    ldp d10, d11, [sp, #112]
    ldp d12, d13, [sp, #128]
    ldp d14, d15, [sp, #144]
    add sp, sp, #160
    ret
    .size emu_switch, .-emu_switch
)");
#endif

namespace {
enum { RUNNABLE = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3 };
struct fiber {
    void *sp;
    int state;
    unsigned x, y, z;
    unsigned mask; /* the lanes its __syncwarp / shuffle waits for */
};
const size_t STACK_BYTES = (size_t)256 << 10;
thread_local std::vector<fiber> fibers;
thread_local std::vector<char *> stacks;
thread_local void *sched_sp = NULL;
thread_local int cur = 0;
thread_local const std::function<void()> *body = NULL;
thread_local const char *kernel_name = "";
unsigned launch_seq = 0; /* launches so far (one host thread launches) */
void *fiber_stack(char *base);

/* The order fibers run in (S2HC_EMU_ORDER): asc (the default) runs the warps of a block
 * first to last, desc last to first with each warp's lanes from the highest; both run a
 * warp on through its __syncwarp's and shuffles up to the block's next __syncthreads
 * before the next warp starts. random[:SEED] runs a warp chosen at random up to its next
 * barrier of either kind, its lanes in a random order, then chooses again. A read of
 * another warp's (or lane's) write that no barrier orders sees the value from before it
 * in some of these orders; the check passes in all of them only if the kernels' barriers
 * order every exchange. */
enum order_kind { ORDER_ASC, ORDER_DESC, ORDER_RANDOM };
struct order_t {
    order_kind kind;
    uint64_t seed;
};
const order_t &order() {
    static const order_t o = [] {
        order_t r = {ORDER_ASC, 1};
        const char *e = getenv("S2HC_EMU_ORDER");
        char *end = NULL;
        if (!e || !strcmp(e, "asc"))
            r.kind = ORDER_ASC;
        else if (!strcmp(e, "desc"))
            r.kind = ORDER_DESC;
        else if (!strcmp(e, "random"))
            r.kind = ORDER_RANDOM;
        else if (!strncmp(e, "random:", 7) && (r.seed = strtoull(e + 7, &end, 10), end != e + 7 && !*end))
            r.kind = ORDER_RANDOM;
        else {
            fprintf(stderr, "emu: S2HC_EMU_ORDER is '%s'; expected asc, desc, random or random:SEED\n", e);
            exit(2);
        }
        return r;
    }();
    return o;
}
/* splitmix64: the random order's choices, seeded per block so that they do not depend on
 * which OpenMP thread runs the block */
uint64_t mix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

[[noreturn]] void emu_fail(const char *what, int t) {
    fprintf(stderr, "emu: kernel %s, block (%u %u %u), thread (%u %u %u): %s\n", kernel_name, blockIdx.x, blockIdx.y,
            blockIdx.z, fibers[t].x, fibers[t].y, fibers[t].z, what);
    abort();
}

/* Per warp, as bit masks of its lanes: those waiting at a __syncwarp / shuffle (and the
 * lanes that barrier names, the same for all of them), and those that have returned. A
 * lane's arrival or return updates them, so a warp barrier opens in a few instructions
 * however many lanes it names (a shuffle is one or two such barriers, emu.h). */
struct warp_state {
    unsigned waiting, need, done;
};
thread_local std::vector<warp_state> warps;

/* Release warp w's lanes from their __syncwarp / shuffle once every lane it names waits
 * there. A named lane that has returned or does not exist is an error (undefined on the
 * GPU); one waiting at __syncthreads instead waits for ever, found as a deadlock below. */
bool release_warp(int w, int nt, int t) {
    warp_state &ws = warps[w];
    if (!ws.waiting) return false;
    const int lanes = nt - w * 32 < 32 ? nt - w * 32 : 32;
    if (lanes < 32 && ws.need >> lanes) emu_fail("a __syncwarp / shuffle names a lane the block does not have", t);
    if (ws.need & ws.done) emu_fail("a __syncwarp / shuffle names a lane that has returned", t);
    if ((ws.waiting & ws.need) != ws.need) return false;
    for (unsigned m = ws.waiting; m; m &= m - 1) fibers[w * 32 + __builtin_ctz(m)].state = RUNNABLE;
    ws.waiting = 0;
    return true;
}

/* Run fiber t up to its next barrier or its end; true when that opened its warp's barrier. */
bool step(int t, int nt) {
    cur = t;
    threadIdx = dim3(fibers[t].x, fibers[t].y, fibers[t].z);
    emu_switch(&sched_sp, fibers[t].sp);
    const int w = t / 32;
    warp_state &ws = warps[w];
    switch (fibers[t].state) {
    case AT_WARP:
        if (ws.waiting && fibers[t].mask != ws.need)
            emu_fail("lanes of one warp wait at __syncwarp / shuffles with different masks", t);
        ws.waiting |= 1u << (t & 31);
        ws.need = fibers[t].mask;
        break;
    case DONE:
        ws.done |= 1u << (t & 31);
        break;
    default:
        return false;
    }
    return release_warp(w, nt, t);
}

/* asc / desc: every fiber in the order, each up to its next barrier; a warp whose barrier
 * opens is taken up again from its first lane (in the order) before the scan goes on. */
void run_in_order(int nt, bool desc) {
    for (int i = 0; i < nt;) {
        const int t = desc ? nt - 1 - i : i;
        if (fibers[t].state != RUNNABLE) {
            i++;
            continue;
        }
        if (step(t, nt)) {
            const int w = t / 32, first = desc ? (w * 32 + 31 < nt ? w * 32 + 31 : nt - 1) : w * 32;
            i = desc ? nt - 1 - first : first;
            continue;
        }
        i++;
    }
}

/* random: a warp with runnable lanes, chosen at random, runs them (in a random order) up to
 * their next barriers; then another choice, until none is runnable. */
void run_random(int nt, uint64_t *rng) {
    const int nw = (nt + 31) / 32;
    int ready[32], lanes[32];
    for (;;) {
        int nr = 0;
        for (int w = 0; w < nw; w++)
            for (int t = w * 32; t < nt && t < w * 32 + 32; t++)
                if (fibers[t].state == RUNNABLE) {
                    ready[nr++] = w;
                    break;
                }
        if (!nr) return;
        const int w = ready[mix(rng) % (uint64_t)nr];
        int nl = 0;
        for (int t = w * 32; t < nt && t < w * 32 + 32; t++)
            if (fibers[t].state == RUNNABLE) lanes[nl++] = t;
        for (int i = nl - 1; i > 0; i--) {
            int j = (int)(mix(rng) % (uint64_t)(i + 1)), x = lanes[i];
            lanes[i] = lanes[j];
            lanes[j] = x;
        }
        for (int i = 0; i < nl; i++)
            if (step(lanes[i], nt)) break;
    }
}

/* Run block number b of the launch on this OS thread. */
void run_block(size_t b, dim3 grid, dim3 block, size_t smem, const std::function<void()> *f) {
    const int nt = (int)(block.x * block.y * block.z);
    while ((int)stacks.size() < nt) {
        char *s = (char *)malloc(STACK_BYTES);
        if (!s) abort();
        stacks.push_back(s);
    }
    fibers.resize(nt);
    warps.assign((nt + 31) / 32, warp_state{0, 0, 0});
    memset(emu_shfl_count, 0, (size_t)nt);
    thread_local std::vector<unsigned char> shm;
    if (shm.size() < smem + 256) shm.resize(smem + 256);
    unsigned char *dyn = (unsigned char *)(((uintptr_t)shm.data() + 127) & ~(uintptr_t)127);
    memset(dyn, 0xff, smem); /* uninitialised shared floats read as NaN */
    emu_dyn_smem = dyn;
    emu_block_serial++;
    body = f;
    gridDim = grid;
    blockDim = block;
    blockIdx = dim3((unsigned)(b % grid.x), (unsigned)(b / grid.x % grid.y), (unsigned)(b / ((size_t)grid.x * grid.y)));
    for (int t = 0; t < nt; t++) {
        fibers[t].sp = fiber_stack(stacks[t]);
        fibers[t].state = RUNNABLE;
        fibers[t].x = t % block.x;
        fibers[t].y = (t / block.x) % block.y;
        fibers[t].z = t / (block.x * block.y);
        fibers[t].mask = 0;
    }
    const order_t &ord = order();
    uint64_t rng = ord.seed * 0x2545f4914f6cdd1dull + ((uint64_t)launch_seq << 32) + b;
    for (;;) {
        if (ord.kind == ORDER_RANDOM)
            run_random(nt, &rng);
        else
            run_in_order(nt, ord.kind == ORDER_DESC);
        int live = 0;
        for (int t = 0; t < nt; t++) {
            if (fibers[t].state == DONE) continue;
            live++;
            if (fibers[t].state == AT_WARP)
                emu_fail("waits at a __syncwarp / shuffle that its warp's other lanes never reach (they wait at "
                         "__syncthreads or returned)",
                         t);
        }
        if (!live) break;
        for (int t = 0; t < nt; t++)
            if (fibers[t].state == AT_BLOCK) fibers[t].state = RUNNABLE;
    }
    emu_dyn_smem = NULL;
}

void fiber_start() {
    (*body)();
    fibers[cur].state = DONE;
    emu_switch(&fibers[cur].sp, sched_sp);
    __builtin_unreachable();
}

/* A fresh fiber: a stack that "returns" into fiber_start with the ABI's alignment. */
void *fiber_stack(char *base) {
    uintptr_t top = ((uintptr_t)(base + STACK_BYTES)) & ~(uintptr_t)15;
#if defined(__x86_64__)
    void **sp = (void **)(top - 64);
    for (int i = 0; i < 6; i++) sp[i] = NULL; /* r15 r14 r13 r12 rbx rbp */
    sp[6] = (void *)fiber_start;              /* emu_switch's ret lands here */
    sp[7] = NULL;
#else
    void **sp = (void **)(top - 160);
    for (int i = 0; i < 20; i++) sp[i] = NULL; /* x19-x28, x29, x30, d8-d15 */
    sp[11] = (void *)fiber_start;              /* x30: emu_switch's ret lands here */
#endif
    return sp;
}
}  // namespace

void emu_barrier(void) {
    fibers[cur].state = AT_BLOCK;
    emu_switch(&fibers[cur].sp, sched_sp);
}

void emu_warp_barrier(unsigned mask) {
    if (!(mask >> (cur & 31) & 1)) emu_fail("calls __syncwarp / a shuffle with a mask that leaves itself out", cur);
    fibers[cur].state = AT_WARP;
    fibers[cur].mask = mask;
    emu_switch(&fibers[cur].sp, sched_sp);
}

int emu_linear_tid(void) { return (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y); }

/* ---- profile (S2HC_EMU_PROFILE=1): seconds per kernel name and in the cuBLAS loops ---- */
#include <map>
#include <string>
static double now(void);
namespace {
struct profile {
    std::map<std::string, double> t;
    std::map<std::string, long> n;
    ~profile() {
        if (!getenv("S2HC_EMU_PROFILE")) return;
        for (auto &kv : t) fprintf(stderr, "emu profile: %-32s %8ld launches %9.3f s\n", kv.first.c_str(), n[kv.first], kv.second);
    }
} prof;
}  // namespace
static void prof_add(const char *name, double dt) {
    prof.t[name] += dt;
    prof.n[name]++;
}

/* Dynamic shared memory: the default limit, the most an H100 / H200 block may opt in to,
 * and each kernel's limit as cudaFuncSetAttribute set it. */
static const size_t SMEM_DEFAULT = 48 << 10, SMEM_OPTIN = 232448;
static std::map<const void *, size_t> smem_limit;
static cudaError_t last_error = cudaSuccess;

cudaError_t emu_set_smem_limit(const void *fn, int bytes) {
    if (bytes < 0 || (size_t)bytes > SMEM_OPTIN) return cudaErrorInvalidValue;
    smem_limit[fn] = (size_t)bytes;
    return cudaSuccess;
}

void emu_launch(const void *fn, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, const char *name,
                std::function<void()> f) {
    (void)stream; /* one stream of work: everything is in order anyway */
    double t0 = now();
    struct at_end {
        const char *name;
        double t0;
        ~at_end() { prof_add(name, now() - t0); }
    } timer{name, t0};
    const long nt = (long)block.x * block.y * block.z;
    if (nt <= 0 || nt > 1024 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535) {
        fprintf(stderr, "emu: kernel %s: a launch the GPU refuses: (%u %u %u) x (%u %u %u)\n", name, grid.x, grid.y,
                grid.z, block.x, block.y, block.z);
        last_error = cudaErrorInvalidConfiguration;
        return;
    }
    auto lim = smem_limit.find(fn);
    const size_t limit = lim == smem_limit.end() ? SMEM_DEFAULT : lim->second;
    if (smem > limit) {
        fprintf(stderr, "emu: kernel %s: %zu bytes of dynamic shared memory, its limit is %zu%s\n", name, smem, limit,
                lim == smem_limit.end() ? " (no cudaFuncSetAttribute raised it)" : "");
        last_error = cudaErrorInvalidValue;
        return;
    }
    const size_t nblocks = (size_t)grid.x * grid.y * grid.z;
    const std::function<void()> *fp = &f;
    const bool desc = order().kind == ORDER_DESC;
    launch_seq++;
#pragma omp parallel for schedule(dynamic, 1) if (nblocks > 1)
    for (size_t b = 0; b < nblocks; b++) {
        kernel_name = name;
        run_block(desc ? nblocks - 1 - b : b, grid, block, smem, fp);
    }
}

/* ---- runtime API ----------------------------------------------------------------------------- */

static int emu_no_gpu(void) { return getenv("S2HC_EMU_NO_GPU") != NULL; }

cudaError_t cudaGetDeviceCount(int *n) {
    if (emu_no_gpu()) return 35; /* cudaErrorInsufficientDriver, as on a machine without a driver */
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int dev) {
    (void)dev;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "CPU emulator (tests/gpu/emu)");
    p->major = 9;
    p->minor = 0;
    p->totalGlobalMem = (size_t)64 << 30;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : 101; }
cudaError_t cudaGetDevice(int *dev) {
    *dev = 0;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr a, int dev) {
    (void)dev;
    *v = a == cudaDevAttrMultiProcessorCount ? 132 : 232448;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) {
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case 35: return "CUDA driver version is insufficient for CUDA runtime version (emulated)";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    default: return "emulated CUDA error";
    }
}
cudaError_t cudaMalloc(void **p, size_t n) {
    size_t r = (n + 255) / 256 * 256;
    *p = aligned_alloc(256, r ? r : 256);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xff, r); /* as uninitialised device memory: NaN floats */
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
static size_t emu_stack_limit = 1024; /* the driver's default per-thread stack */
cudaError_t cudaDeviceGetLimit(size_t *v, cudaLimit l) {
    (void)l;
    *v = emu_stack_limit;
    return cudaSuccess;
}
cudaError_t cudaDeviceSetLimit(cudaLimit l, size_t v) {
    (void)l;
    emu_stack_limit = v;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    *free_b = (size_t)60 << 30;
    *total_b = (size_t)64 << 30;
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t n, cudaMemcpyKind k) {
    (void)k;
    if (n) memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st) {
    (void)st;
    return cudaMemcpy(d, s, n, k);
}
cudaError_t cudaMemset(void *d, int v, size_t n) {
    if (n) memset(d, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t n, cudaStream_t st) {
    (void)st;
    return cudaMemset(d, v, n);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags) {
    (void)flags;
    *s = (cudaStream_t)1;
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    (void)s;
    return cudaSuccess;
}
struct emu_event {
    double t;
};
static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) {
    *e = new emu_event{0};
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    (void)s;
    e->t = now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    (void)e;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    *ms = (float)((b->t - a->t) * 1e3);
    return cudaSuccess;
}

/* ---- cuBLAS ---------------------------------------------------------------------------------- */

cublasStatus_t cublasCreate(cublasHandle_t *h) {
    *h = (cublasHandle_t)1;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h) {
    (void)h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) {
    (void)h;
    (void)s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m) {
    (void)h;
    (void)m;
    return CUBLAS_STATUS_SUCCESS;
}

/* cuBLAS's own argument rules (column-major): a call that breaks them gets
 * CUBLAS_STATUS_INVALID_VALUE on a GPU, so it must here too */
static bool gemm_args_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc) {
    const int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    return m >= 0 && n >= 0 && k >= 0 && (ta == CUBLAS_OP_N || ta == CUBLAS_OP_T) &&
           (tb == CUBLAS_OP_N || tb == CUBLAS_OP_T) && lda >= (rows_a > 1 ? rows_a : 1) &&
           ldb >= (rows_b > 1 ? rows_b : 1) && ldc >= (m > 1 ? m : 1);
}

/* column-major C (m, n) = alpha op(A) op(B) + beta C, with element readers for A and B */
template <typename TA, typename TB>
static void gemm_ref(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, TA a, int lda, TB b,
                     int ldb, float beta, float *C, int ldc) {
#pragma omp parallel for schedule(static)
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float s = 0;
            for (int p = 0; p < k; p++) {
                float x = ta == CUBLAS_OP_N ? a((size_t)i + (size_t)p * lda) : a((size_t)p + (size_t)i * lda);
                float y = tb == CUBLAS_OP_N ? b((size_t)p + (size_t)j * ldb) : b((size_t)j + (size_t)p * ldb);
                s += x * y;
            }
            float *c = &C[(size_t)i + (size_t)j * ldc];
            *c = beta == 0.0f ? alpha * s : alpha * s + beta * *c;
        }
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc) {
    (void)h;
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    struct at_end {
        double t0;
        ~at_end() { prof_add("cublasSgemm", now() - t0); }
    } timer{now()};
    gemm_ref(ta, tb, m, n, k, *alpha, [A](size_t i) { return A[i]; }, lda, [B](size_t i) { return B[i]; }, ldb, *beta,
             C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B, cudaDataType bt,
                            int ldb, const void *beta, void *C, cudaDataType ct, int ldc, cublasComputeType_t comp,
                            cublasGemmAlgo_t algo) {
    (void)h;
    (void)comp;
    (void)algo;
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || ct != CUDA_R_32F) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    struct at_end {
        double t0;
        ~at_end() { prof_add("cublasGemmEx", now() - t0); }
    } timer{now()};
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
    gemm_ref(ta, tb, m, n, k, *(const float *)alpha, [a](size_t i) { return __bfloat162float(a[i]); }, lda,
             [b](size_t i) { return __bfloat162float(b[i]); }, ldb, *(const float *)beta, (float *)C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemv(cublasHandle_t h, cublasOperation_t t, int m, int n, const float *alpha, const float *A,
                           int lda, const float *x, int incx, const float *beta, float *y, int incy) {
    (void)h;
    if (t != CUBLAS_OP_N) return CUBLAS_STATUS_NOT_SUPPORTED;
    if (m < 0 || n < 0 || lda < (m > 1 ? m : 1) || incx == 0 || incy == 0) return CUBLAS_STATUS_INVALID_VALUE;
    for (int i = 0; i < m; i++) {
        float s = 0;
        for (int j = 0; j < n; j++) s += A[(size_t)i + (size_t)j * lda] * x[(size_t)j * incx];
        float *o = &y[(size_t)i * incy];
        *o = *beta == 0.0f ? *alpha * s : *alpha * s + *beta * *o;
    }
    return CUBLAS_STATUS_SUCCESS;
}
