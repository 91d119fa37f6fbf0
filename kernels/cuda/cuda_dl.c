/* cuda_dl.c: the CUDA backend, loaded the first time a command asks for it.
 *
 * The backend (the .cu files of kernels/cuda) is built as a shared library, build/cuda/libs2hc_cuda.so,
 * with cuBLAS, cuBLASLt and the CUDA runtime behind it. Linked into bin/s2hc directly,
 * those libraries' start-up (their constructors, about 0.35 s of CPU here) ran in every
 * process: `s2hc version`, every config check, every trainer a grid starts, twice where
 * the command re-executes itself for its runtime settings (harness/util.c). bin/s2hc,
 * the tests and tools link this file instead: the functions of model_cuda.h, each of
 * which loads the library on its first call and calls the library's own.
 *
 * Nothing is loaded on a machine without the CUDA driver (libcuda.so.1): cuda_available()
 * says so and returns 0, as the runtime would have after the same start-up. Where the
 * driver is, or S2HC_CUDA_LIB names the library (the CPU emulator's build of it, say:
 * tests/cli/cuda_train_emu.sh), the library is looked for in order at
 *   $S2HC_CUDA_LIB                          (a path: for a binary moved away from its build)
 *   <the program's folder>/libs2hc_cuda.so
 *   <the program's folder>/../build/cuda/   (bin/s2hc)
 *   <the program's folder>/../cuda/         (the tests and tools in build/)
 *   the build's own build/cuda/ (S2HC_CUDA_SO, an absolute path)
 * and a library that is found but cannot be loaded (cuBLAS missing) is the reason given.
 * gpu_check and cuda_probe (mk/cuda.mk) link the backend itself. Compiled only where the
 * backend is built. */
#ifdef S2HC_CUDA
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/cuda/model_cuda.h"

#ifndef S2HC_CUDA_SO
#define S2HC_CUDA_SO ""
#endif

/* The functions that take a device model: return type, name, parameters, arguments. They
 * cannot be reached unless the library loaded (no device model exists otherwise). Those
 * that return nothing are listed apart: their wrappers have no `return f();`, which C
 * does not allow in a void function. */
#define CUDA_DL_MODEL_FUNCS(X)                                                                            \
    X(float, cuda_forward, (cuda_model * cm, const int *inputs, const int *targets), (cm, inputs, targets)) \
    X(float, cuda_forward_backward, (cuda_model * cm, const int *inputs, const int *targets, float scale), \
      (cm, inputs, targets, scale))                                                                       \
    X(double, cuda_grad_norm, (cuda_model * cm), (cm))                                                    \
    X(int, cuda_download_hc, (cuda_model * cm, int l, float *pre, float *post, float *H),                 \
      (cm, l, pre, post, H))                                                                              \
    X(int, cuda_download_streams, (cuda_model * cm, int l, float *X), (cm, l, X))                         \
    X(size_t, cuda_model_bytes, (const cuda_model *cm), (cm))                                             \
    X(int, cuda_model_bf16, (const cuda_model *cm), (cm))                                                 \
    X(int, cuda_model_attention_tc, (const cuda_model *cm), (cm))                                         \
    X(double, cuda_profile_stop, (cuda_model * cm, double ms[CUDA_PROF_N]), (cm, ms))                     \
    X(double, cuda_profile_stop_ops,                                                                      \
      (cuda_model * cm, double ms[CUDA_PROF_N], double op_ms[CUDA_OP_N], int op_calls[CUDA_OP_N]),        \
      (cm, ms, op_ms, op_calls))
#define CUDA_DL_MODEL_VOIDS(X)                                                                            \
    X(void, cuda_upload_params, (cuda_model * cm, const gpt_model *m), (cm, m))                                 \
    X(void, cuda_download_params, (cuda_model * cm, gpt_model *m), (cm, m))                                     \
    X(void, cuda_download_grads, (cuda_model * cm, gpt_model *m), (cm, m))                                      \
    X(void, cuda_upload_grads, (cuda_model * cm, const gpt_model *m), (cm, m))                                  \
    X(void, cuda_upload_optim, (cuda_model * cm, const float *mom, const float *var), (cm, mom, var))           \
    X(void, cuda_download_optim, (cuda_model * cm, float *mom, float *var), (cm, mom, var))                     \
    X(void, cuda_zero_grad, (cuda_model * cm), (cm))                                                            \
    X(void, cuda_step, (cuda_model * cm, double lr, double grad_norm, int t), (cm, lr, grad_norm, t))           \
    X(void, cuda_download_logits, (cuda_model * cm, float *logits), (cm, logits))                               \
    X(void, cuda_synchronize, (cuda_model * cm), (cm))                                                          \
    X(void, cuda_profile_start, (cuda_model * cm), (cm))
/* and the ones callable before a model exists, written out below */
#define CUDA_DL_OTHERS(X)                                                                                 \
    X(int, cuda_available, (char *name, size_t len), (name, len))                                         \
    X(cuda_model *, cuda_model_create, (const gpt_model *m, int B, int bf16, char *err, size_t errlen),    \
      (m, B, bf16, err, errlen))                                                                          \
    X(void, cuda_use_device, (int local_rank), (local_rank))                                              \
    X(void, cuda_model_free, (cuda_model * cm), (cm))                                                     \
    X(const char *, cuda_profile_name, (int k), (k))                                                      \
    X(const char *, cuda_profile_op_name, (int k), (k))

/* the library's functions, once loaded */
static struct {
#define FIELD(ret, name, params, args) ret(*name) params;
    CUDA_DL_MODEL_FUNCS(FIELD)
    CUDA_DL_MODEL_VOIDS(FIELD)
    CUDA_DL_OTHERS(FIELD)
#undef FIELD
} lib;
static int lib_state;        /* 0 not tried, 1 loaded, -1 not loadable (lib_why says why) */
static char lib_why[512];
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

/* dlopen the first candidate that exists (env: S2HC_CUDA_LIB, or NULL); NULL with lib_why
 * when none exists or the first that exists does not load */
static void *lib_open(const char *env) {
    char dir[4096] = "", cand[5][4200];
    int nc = 0;
    if (env) snprintf(cand[nc++], sizeof cand[0], "%s", env);
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n > 0) {
        dir[n] = 0;
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        snprintf(cand[nc++], sizeof cand[0], "%s/libs2hc_cuda.so", dir);
        snprintf(cand[nc++], sizeof cand[0], "%s/../build/cuda/libs2hc_cuda.so", dir);
        snprintf(cand[nc++], sizeof cand[0], "%s/../cuda/libs2hc_cuda.so", dir);
    }
    if (S2HC_CUDA_SO[0]) snprintf(cand[nc++], sizeof cand[0], "%s", S2HC_CUDA_SO);
    for (int i = 0; i < nc; i++) {
        if (access(cand[i], F_OK) != 0) {
            if (i == 0 && env) { /* a path the user named must be there */
                snprintf(lib_why, sizeof lib_why, "S2HC_CUDA_LIB is %s, which does not exist", env);
                return NULL;
            }
            continue;
        }
        void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(lib_why, sizeof lib_why, "the CUDA backend %s cannot be loaded: %s", cand[i], e ? e : "?");
        }
        return h;
    }
    snprintf(lib_why, sizeof lib_why, "the CUDA backend libs2hc_cuda.so was not found next to the program "
             "or at %s (set S2HC_CUDA_LIB to its path)", S2HC_CUDA_SO[0] ? S2HC_CUDA_SO : "build/cuda");
    return NULL;
}

static void lib_load(void) {
    lib_state = -1;
    /* the driver first: without it there is no GPU, and no need for cuBLAS's start-up
       (unless S2HC_CUDA_LIB names the library: it is then loaded as asked, and says
       itself whether a GPU is there; the CPU emulator's build of it has no driver) */
    const char *env = getenv("S2HC_CUDA_LIB");
    if (env && !env[0]) env = NULL;
    if (!env && !dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
        snprintf(lib_why, sizeof lib_why, "no GPU (no CUDA driver: libcuda.so.1 is not installed)");
        return;
    }
    void *h = lib_open(env);
    if (!h) return;
    const char *missing = NULL;
#define LOAD(ret, name, params, args)                                                                     \
    if (!(lib.name = (ret(*) params)dlsym(h, #name)) && !missing) missing = #name;
    CUDA_DL_MODEL_FUNCS(LOAD)
    CUDA_DL_MODEL_VOIDS(LOAD)
    CUDA_DL_OTHERS(LOAD)
#undef LOAD
    if (missing) {
        snprintf(lib_why, sizeof lib_why, "the CUDA backend lacks %s (a library of another build of s2hc?)", missing);
        return;
    }
    unsigned long long (*abi)(void) = (unsigned long long (*)(void))dlsym(h, "cuda_backend_abi");
    if (!abi || abi() != cuda_abi_key()) {
        snprintf(lib_why, sizeof lib_why, "the CUDA backend was built from other sources than this program "
                 "(its model layout differs; rebuild both with make, or set S2HC_CUDA_LIB to the right one)");
        return;
    }
    lib_state = 1;
}

static int lib_ready(void) {
    pthread_once(&lib_once, lib_load);
    return lib_state == 1;
}

/* a call that needs a device model, which cannot exist unless the library loaded */
static void lib_needed(const char *name) {
    fprintf(stderr, "s2hc: internal error: %s called, but %s\n", name, lib_why);
    exit(1);
}

int cuda_available(char *name, size_t len) {
    if (lib_ready()) return lib.cuda_available(name, len);
    if (name && len) snprintf(name, len, "%s", lib_why);
    return 0;
}
cuda_model *cuda_model_create(const gpt_model *m, int B, int bf16, char *err, size_t errlen) {
    if (lib_ready()) return lib.cuda_model_create(m, B, bf16, err, errlen);
    if (err && errlen) snprintf(err, errlen, "%s", lib_why);
    return NULL;
}
void cuda_use_device(int local_rank) {
    if (lib_ready()) lib.cuda_use_device(local_rank);
}
void cuda_model_free(cuda_model *cm) {
    if (cm) {
        if (!lib_ready()) lib_needed("cuda_model_free");
        lib.cuda_model_free(cm);
    }
}
const char *cuda_profile_name(int k) { return lib_ready() ? lib.cuda_profile_name(k) : ""; }
const char *cuda_profile_op_name(int k) { return lib_ready() ? lib.cuda_profile_op_name(k) : ""; }

/* the rest take a device model */
#define FORWARD(ret, name, params, args)                                                                  \
    ret name params {                                                                                     \
        if (!lib_ready()) lib_needed(#name);                                                              \
        return lib.name args;                                                                             \
    }
#define VFORWARD(ret, name, params, args)                                                                 \
    void name params {                                                                                    \
        if (!lib_ready()) lib_needed(#name);                                                              \
        lib.name args;                                                                                    \
    }
CUDA_DL_MODEL_FUNCS(FORWARD)
CUDA_DL_MODEL_VOIDS(VFORWARD)
#undef FORWARD
#undef VFORWARD
#endif
