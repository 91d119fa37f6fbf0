/* bench.c: `s2hc bench`, training speed on this machine measured against its limit.
 *
 * Sections, in the order they run (docs/performance.md explains every column):
 *   machine    what the cores and the memory can do, in the kernels' own vectors: the FMA
 *              rate (independent chains in registers) and the rate of reading a buffer
 *              twice the size of the last-level cache, on one thread and on all.
 *   gemm       sgemm GFLOP/s through the linked BLAS: the linear layers of one training
 *              step of each preset (forward and both backward products, in the model's
 *              proportions) and a large square product. The model-shape rate is the
 *              limit that MFU is measured against.
 *   methods    for the tiny and small presets and every residual method at n = 4 (rc at
 *              n = 1): median step time, tokens/s, MFU and the step time over rc's.
 *              The models are built once and stepped in interleaved rounds, so a change
 *              of machine load hits every method alike; a method's overhead is the
 *              median over rounds of (its median step / rc's median step in that round).
 *   breakdown  one step of each method split by op (bench.h's categories), from
 *              model.c's timing hook, averaged over a few steps.
 *   streams    tokens/s and memory against n = 2..8 for mhc, mhc_lite, kromhc, s2hc at
 *              the small preset (Fig 7 left), with rc stepped beside each for a ratio.
 *   probes     training tokens/s through `s2hc train` with probes at their default
 *              interval and off (whole runs, alternated), and a direct timing of one
 *              probe_step against one step (needs prepared data; skipped in --quick).
 *
 * A step is what train.c does for one micro-batch: zero grads, forward, backward,
 * gradient norm, AdamW. Tokens are random (speed does not depend on them).
 *
 * Model FLOPs per token (the same for every method: the frame is overhead, not model):
 *   6 * (parameters in matmuls: 12 L C^2 + V C for the tied LM head) + 12 L T C
 * (attention: QK^T and PV, forward 4TC per layer, backward twice that; the causal mask
 * is not subtracted, as in PaLM's and nanoGPT's MFU). MFU = FLOPs/token * tokens/s /
 * the model-shape sgemm rate of the same preset measured in the same run.
 */
#include "bench.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <cblas.h>
#include "../kernels/kernels.h"
#include "../probes/probes.h"
#include "model.h"
#include "optim.h"
#include "presets.h"
#include "run.h"
#include "util.h"

const char *const prof_names[PROF_N] = {"matmul",   "attention",  "layernorm",  "gelu",
                                        "hc_frame", "hc_streams", "embed_loss", "optimizer"};

#define BENCH_N 4                 /* streams for the methods table */
#define BENCH_SEED 1234
#define BENCH_MEM_LIMIT_GB 6.0    /* streams sweep: skip configurations estimated above this */
#define BENCH_STREAM_BUDGET_S 4.0 /* streams sweep: stop stepping one configuration after this */

static const char *const bench_methods[] = {"rc",         "identity", "hc",   "mhc",      "mhc_lite",
                                            "kromhc",     "orthogonal", "s2hc", "s2hc_rot", NULL};
static const char *const sweep_methods[] = {"mhc", "mhc_lite", "kromhc", "s2hc", NULL};
#define BENCH_MAX_METHODS 16

typedef struct {
    int quick;
    int rounds, steps, warmup;  /* methods table: rounds x steps per method, warm-up first */
    int prof_steps;
    int sweep_steps;
    int probes;                 /* 1: run the probes section */
    int probe_steps;
    double mem_limit_gb;
    const char *csv_dir;
    const char *only_preset;    /* NULL: tiny and small */
    const char *methods[BENCH_MAX_METHODS + 1]; /* the methods table, rc first; NULL-ended */
    const char *sweep[BENCH_MAX_METHODS + 1];   /* the streams sweep; NULL-ended */
} bench_opts;

/* ---- small helpers ----------------------------------------------------------------- */

static double load1(void) {
    double l[3] = {0, 0, 0};
    if (getloadavg(l, 3) < 1) return -1;
    return l[0];
}

/* CPU seconds of all our threads (threads_cpu_seconds): under load the wall clock also
 * counts the time our threads wait for a core; this does not. */
static double cpu_seconds(void) { return threads_cpu_seconds(); }

static double median(double *v, int n) {
    if (n <= 0) return NAN;
    double *s = malloc_check((size_t)n * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && s[j - 1] > s[j]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    double r = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return r;
}

static double minimum(const double *v, int n) {
    double m = INFINITY;
    for (int i = 0; i < n; i++) m = v[i] < m ? v[i] : m;
    return m;
}

/* Current resident set (MB) from /proc/self/statm; the peak is the kernel's high-water
 * mark (VmHWM), which the sweep resets before each configuration (rss_peak_reset), else
 * getrusage's maxrss (process-wide: it only grows). */
static double rss_now_mb(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1;
    long size = 0, res = 0;
    int ok = fscanf(f, "%ld %ld", &size, &res) == 2;
    fclose(f);
    return ok ? (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : -1;
}

static double rss_peak_mb(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f) {
        char line[256];
        long kb = -1;
        while (fgets(line, sizeof line, f))
            if (sscanf(line, "VmHWM: %ld kB", &kb) == 1) break;
        fclose(f);
        if (kb >= 0) return (double)kb / 1024.0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

/* Reset the high-water mark to the current resident set (Linux: "5" to clear_refs), so
 * that the next rss_peak_mb is the peak since now; what the allocator still holds of
 * freed buffers is returned first. 0 when done. */
static int rss_peak_reset(void) {
#ifdef __GLIBC__
    malloc_trim(0); /* the previous configuration's freed buffers back to the kernel first */
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* CSV files that could not be written: the bench then says so at its end and exits 1 */
static int csv_failed;

/* The longest --csv folder: its files' paths (folder/name.csv) fit csv_open's buffer whole. */
#define BENCH_CSV_DIR_MAX 1024

static FILE *csv_open(const bench_opts *o, const char *name, const char *header) {
    if (!o->csv_dir) return NULL;
    char p[BENCH_CSV_DIR_MAX + 64];
    snprintf(p, sizeof p, "%s/%s", o->csv_dir, name);
    FILE *f = tmp_stream_open(p); /* PATH.tmp until csv_close: a failed write keeps an earlier run's file */
    if (!f) {
        fprintf(stderr, "s2hc: error: bench: cannot write %s: %s\n", p, strerror(errno));
        csv_failed++;
        return NULL;
    }
    fprintf(f, "%s\n", header);
    return f;
}

/* Close a csv_open file: checked, renamed into place, or counted in csv_failed. NULL: nothing. */
static void csv_close(FILE *f) {
    if (!f) return;
    char path[1300];
    snprintf(path, sizeof path, "%s", tmp_stream_path(f) ? tmp_stream_path(f) : "?");
    if (tmp_stream_commit(f) != 0) {
        fprintf(stderr, "s2hc: error: bench: cannot write %s: %s\n", path, strerror(errno));
        csv_failed++;
    }
}

/* ---- the config of one benchmarked model -------------------------------------------- */

/* --proj-bf16: every method's projection products with bf16 operands (residual.proj_precision) */
static int bench_proj_bf16;
/* --stream-bf16: every method's streams stored in bf16 in the training steps (residual.stream_precision) */
static int bench_stream_bf16;

static int bench_config(s2hc_config *c, const char *preset, const char *method, int n) {
    config_defaults(c);
    if (preset_apply(c, preset) != 0) return -1;
    snprintf(c->method, sizeof c->method, "%s", method);
    if (bench_proj_bf16) snprintf(c->proj_precision, sizeof c->proj_precision, "bf16");
    if (bench_stream_bf16) snprintf(c->stream_precision, sizeof c->stream_precision, "bf16");
    c->n_streams = strcmp(method, "rc") == 0 ? 1 : n;
    c->grad_accum = 1;
    c->seed = BENCH_SEED;
    return 0;
}

/* 6 * (matmul parameters) + attention, per token (see the top of the file). */
static double model_flops_per_token(const s2hc_config *c) {
    double L = c->n_layer, C = c->n_embd, T = c->block_size, V = c->vocab;
    return 6.0 * (12.0 * L * C * C + V * C) + 12.0 * L * T * C;
}

/* ---- gemm: the machine's limit -------------------------------------------------------- */

typedef struct {
    int ta, tb, M, N, K;
} gemm_shape;

/* Inside a parallel region: how many threads share it, and which this one is. */
static void thread_share(int *nth, int *tid) {
#ifdef _OPENMP
    *nth = omp_get_num_threads();
    *tid = omp_get_thread_num();
#else
    *nth = 1, *tid = 0;
#endif
}

/* One product C += op(A) op(B), row-major. split = 0: one call, OpenBLAS's own threads;
 * split = 1: the way kernels/cpu/matmul.c calls it, each OpenMP thread a single-threaded
 * call on its share of C's rows (often faster for the model's thin shapes). */
static void gemm_run(const gemm_shape *g, const float *A, const float *B, float *C, int split) {
    const int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
    const enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
    if (!split) {
        cblas_sgemm(CblasRowMajor, ta, tb, g->M, g->N, g->K, 1.0f, A, lda, B, ldb, 1.0f, C, g->N);
        return;
    }
#pragma omp parallel
    {
        int nth, tid;
        thread_share(&nth, &tid);
        int lo = (int)((long long)g->M * tid / nth), hi = (int)((long long)g->M * (tid + 1) / nth);
        if (hi > lo)
            cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, g->N, g->K, 1.0f, g->ta ? A + lo : A + (size_t)lo * lda, lda,
                        B, ldb, 1.0f, C + (size_t)lo * g->N, g->N);
    }
}

/* The largest A, B and C of a list of products, in floats: the buffers' sizes. */
static void gemm_sizes(const gemm_shape *s, int ns, size_t *amax, size_t *bmax, size_t *cmax) {
    *amax = *bmax = *cmax = 0;
    for (int i = 0; i < ns; i++) {
        size_t a = (size_t)s[i].M * s[i].K, b = (size_t)s[i].K * s[i].N, c = (size_t)s[i].M * s[i].N;
        *amax = a > *amax ? a : *amax;
        *bmax = b > *bmax ? b : *bmax;
        *cmax = c > *cmax ? c : *cmax;
    }
}

/* Time `reps` repetitions of a list of products, each product both ways (gemm_run) and
 * the faster one counted: the best this BLAS does on these shapes. Wall seconds of each
 * repetition into t[], process CPU seconds into cpu[] (may be NULL; the CPU time of the
 * way counted). Buffers are sized for the largest product. */
static void gemm_time(const gemm_shape *s, int ns, int reps, double *t, double *cpu) {
    size_t amax, bmax, cmax;
    gemm_sizes(s, ns, &amax, &bmax, &cmax);
    float *A = malloc_check(amax * sizeof(float)), *B = malloc_check(bmax * sizeof(float)),
          *C = malloc_check(cmax * sizeof(float));
    rng_t r;
    rng_seed(&r, 7);
    for (size_t i = 0; i < amax; i++) A[i] = (float)(rng_uniform(&r) - 0.5);
    for (size_t i = 0; i < bmax; i++) B[i] = (float)(rng_uniform(&r) - 0.5);
    memset(C, 0, cmax * sizeof(float));
    for (int rep = -1; rep < reps; rep++) { /* rep -1 warms up (threads, caches) */
        double tw = 0, tc = 0;
        for (int i = 0; i < ns; i++) {
            double w[2], c[2];
            for (int split = 0; split < 2; split++) {
                /* the CPU clocks' own region (a wake-up under passive waiting)
                   outside the wall interval */
                double c0 = cpu_seconds(), t0 = now_seconds();
                gemm_run(&s[i], A, B, C, split);
                w[split] = now_seconds() - t0;
                c[split] = cpu_seconds() - c0;
            }
            int best = w[1] < w[0];
            tw += w[best];
            tc += c[best];
        }
        if (rep >= 0) {
            t[rep] = tw;
            if (cpu) cpu[rep] = tc;
        }
    }
    free(A);
    free(B);
    free(C);
}

/* The products as a training step by batch slices runs them: one parallel region, each
 * thread its own slice of the tokens in every product in turn, single-threaded calls,
 * no barrier between products (count[i] times product i). A forward or input-gradient
 * product (ta = 0) takes the slice's rows of the output; a weight gradient (ta = 1,
 * dW = dout^T in over the tokens) the slice's share of the sum, K, into the thread's own
 * copy of dW, as each slice has its own gradient buffers (their sum, once a step, is not a
 * product and is left out). Every thread writes its own output buffer. One warm-up, then
 * the wall and process CPU seconds of one pass. For small shapes this beats gemm_time's
 * region per product (a fork and join each), and the step beat gemm_time's limit (an MFU
 * over 100 %) while the limit was timed that way alone. */
static void gemm_time_sliced(const gemm_shape *s, const int *count, int ns, double *t, double *cpu) {
    size_t amax, bmax, cmax;
    gemm_sizes(s, ns, &amax, &bmax, &cmax);
    int nthr = 1;
#ifdef _OPENMP
    nthr = omp_get_max_threads();
#endif
    cmax = (cmax + 15) / 16 * 16; /* each thread's buffer on its own cache lines */
    float *A = calloc_check(amax, sizeof(float)), *B = calloc_check(bmax, sizeof(float)),
          *C = calloc_check(cmax * (size_t)nthr, sizeof(float));
    for (int rep = 0; rep < 2; rep++) {
        double c0 = cpu_seconds(), t0 = now_seconds();
#pragma omp parallel
        {
            int nth, tid;
            thread_share(&nth, &tid);
            float *Ct = C + (size_t)tid * cmax;
            for (int i = 0; i < ns; i++) {
                const gemm_shape *g = &s[i];
                const int lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
                const enum CBLAS_TRANSPOSE ta = g->ta ? CblasTrans : CblasNoTrans, tb = g->tb ? CblasTrans : CblasNoTrans;
                const int T = g->ta ? g->K : g->M; /* the tokens: K of a weight gradient, else M */
                const int lo = (int)((long long)T * tid / nth), hi = (int)((long long)T * (tid + 1) / nth);
                for (int k = 0; k < count[i] && hi > lo; k++) {
                    if (g->ta) /* dW [M x N] += A[lo:hi]^T B[lo:hi]: the slice's tokens */
                        cblas_sgemm(CblasRowMajor, ta, tb, g->M, g->N, hi - lo, 1.0f, A + (size_t)lo * lda, lda,
                                    B + (size_t)lo * ldb, ldb, 1.0f, Ct, g->N);
                    else
                        cblas_sgemm(CblasRowMajor, ta, tb, hi - lo, g->N, g->K, 1.0f, A + (size_t)lo * lda, lda, B,
                                    ldb, 1.0f, Ct, g->N);
                }
            }
        }
        *t = now_seconds() - t0;
        *cpu = cpu_seconds() - c0;
    }
    free(A);
    free(B);
    free(C);
}

static double gemm_flops(const gemm_shape *s, int ns) {
    double f = 0;
    for (int i = 0; i < ns; i++) f += 2.0 * s[i].M * s[i].N * s[i].K;
    return f;
}

/* The linear layers of one training step of a config: per layer qkv, attn proj, fc, mlp
 * proj; once the LM head. Forward out = in W^T (N, OC, C); backward dinp = dout W
 * (N, C, OC) and dW = dout^T in (OC, C, N). Returns the count (<= 15). */
static int model_gemms(const s2hc_config *c, gemm_shape *s, int *per_layer) {
    int N = c->batch * c->block_size, C = c->n_embd, V = c->vocab;
    int oc[5] = {3 * C, C, 4 * C, C, V}, ic[5] = {C, C, C, 4 * C, C};
    int k = 0;
    for (int i = 0; i < 5; i++) {
        s[k++] = (gemm_shape){0, 1, N, oc[i], ic[i]};
        s[k++] = (gemm_shape){0, 0, N, ic[i], oc[i]};
        s[k++] = (gemm_shape){1, 0, oc[i], ic[i], N};
    }
    *per_layer = 12; /* the first 12 products repeat L times, the LM head's 3 once */
    return k;
}

typedef struct {
    double square, square_best;        /* GFLOP/s, 1024^3 (median, best) */
    double model[2], model_best[2];    /* per preset (tiny, small): the step's linear layers */
} gemm_limits;

static const char *const bench_presets[] = {"tiny", "small"};

/* The buffer the memory rate reads: twice the last-level cache (a step's data does not
 * stay there either), at least 256 MB and at most 1 GB. */
#define BENCH_READ_MIN_MB 256
#define BENCH_READ_MAX_MB 1024

/* One rate on one thread, and on nt threads when there are more. */
static void machine_line(const char *what, double one, int nt, double all, const char *unit) {
    printf("  %-44s 1 thread %7.1f", what, one);
    if (nt > 1) printf("   %d threads %7.1f", nt, all);
    printf(" %s\n", unit);
}

static void section_machine(FILE *csv) {
    const int nt = kernels_threads();
    const size_t l3 = cpu_cache_bytes(3), l2 = cpu_cache_bytes(2), llc = l3 ? l3 : l2;
    size_t mb = 2 * (llc >> 20);
    if (mb < BENCH_READ_MIN_MB) mb = BENCH_READ_MIN_MB;
    if (mb > BENCH_READ_MAX_MB) mb = BENCH_READ_MAX_MB;
    const size_t n = (mb << 20) / sizeof(real);
    real *x = malloc(n * sizeof(real));
    printf("\n== the cores and the memory ==\n");
    const double f1 = kernels_fma_rate(1), fn = nt > 1 ? kernels_fma_rate(nt) : f1;
    machine_line("FMA, the kernels' vectors, in registers", f1, nt, fn, "GFLOP/s");
    if (csv) {
        fprintf(csv, "fma,1,%.2f,GFLOP/s,0,%.2f\n", f1, load1());
        if (nt > 1) fprintf(csv, "fma,%d,%.2f,GFLOP/s,0,%.2f\n", nt, fn, load1());
    }
    if (!x) { /* the rest of the bench needs far less than this */
        printf("  reading %zu MB: not measured (no memory for the buffer)\n", mb);
        return;
    }
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = (real)1; /* written: real pages, each thread's share in its own cache */
    const double r1 = kernels_read_rate(x, n, 1), rn = nt > 1 ? kernels_read_rate(x, n, nt) : r1;
    char label[96];
    if (llc)
        snprintf(label, sizeof label, "reading %zu MB (the last cache: %zu MB)", mb, llc >> 20);
    else
        snprintf(label, sizeof label, "reading %zu MB", mb);
    machine_line(label, r1, nt, rn, "GB/s");
    if (csv) {
        fprintf(csv, "read,1,%.2f,GB/s,%zu,%.2f\n", r1, mb, load1());
        if (nt > 1) fprintf(csv, "read,%d,%.2f,GB/s,%zu,%.2f\n", nt, rn, mb, load1());
    }
    free(x);
}

static void section_gemm(const bench_opts *o, gemm_limits *g, FILE *csv) {
    int reps = o->quick ? 5 : 15;
    double t[64];
    printf("\n== sgemm through %s (core %s, %d thread%s) ==\n", "OpenBLAS", openblas_get_corename(),
           openblas_get_num_threads(), openblas_get_num_threads() == 1 ? "" : "s");
    /* the rows' labels first: the column fits the longest (small's "(N=2048)" label had
       pushed its numbers two columns right) */
    char label[2][64];
    int wl = 34;
    for (int p = 0; p < 2; p++) {
        s2hc_config c;
        bench_config(&c, bench_presets[p], "rc", 1);
        snprintf(label[p], sizeof label[p], "%s: step's linear layers (N=%d)", bench_presets[p], c.batch * c.block_size);
        if ((int)strlen(label[p]) > wl) wl = (int)strlen(label[p]);
    }
    printf("  %-*s %10s %10s\n", wl, "shape", "median", "best");
    int S = o->quick ? 512 : 1024;
    gemm_shape sq = {0, 0, S, S, S};
    gemm_time(&sq, 1, reps, t, NULL);
    double f = gemm_flops(&sq, 1);
    g->square = f / median(t, reps) / 1e9;
    g->square_best = f / minimum(t, reps) / 1e9;
    printf("  %-*s %10.1f %10.1f GFLOP/s\n", wl, S == 1024 ? "square 1024^3" : "square 512^3", g->square, g->square_best);
    if (csv) fprintf(csv, "square,%d,%d,%d,%.2f,%.2f,%.2f\n", S, S, S, g->square, g->square_best, load1());
    for (int p = 0; p < 2; p++) {
        s2hc_config c;
        bench_config(&c, bench_presets[p], "rc", 1);
        gemm_shape s[16];
        int per_layer, ns = model_gemms(&c, s, &per_layer);
        /* each product alone (for the CSV), then the step's mix in proportion */
        double tot_t = 0, tot_t_best = 0, tot_f = 0;
        for (int i = 0; i < ns; i++) {
            gemm_time(&s[i], 1, reps, t, NULL);
            double fi = gemm_flops(&s[i], 1), mult = i < per_layer ? c.n_layer : 1;
            double med = median(t, reps), best = minimum(t, reps);
            tot_t += mult * med;
            tot_t_best += mult * best;
            tot_f += mult * fi;
            if (csv)
                fprintf(csv, "%s:%s%s,%d,%d,%d,%.2f,%.2f,%.2f\n", bench_presets[p], s[i].ta ? "T" : "N",
                        s[i].tb ? "T" : "N", s[i].M, s[i].N, s[i].K, fi / med / 1e9, fi / best / 1e9, load1());
        }
        g->model[p] = tot_f / tot_t / 1e9;
        g->model_best[p] = tot_f / tot_t_best / 1e9;
        printf("  %-*s %10.1f %10.1f GFLOP/s\n", wl, label[p], g->model[p], g->model_best[p]);
        if (csv)
            fprintf(csv, "%s:step,%d,0,0,%.2f,%.2f,%.2f\n", bench_presets[p], c.batch * c.block_size, g->model[p],
                    g->model_best[p], load1());
    }
}

/* ---- a model under the bench ----------------------------------------------------------- */

typedef struct {
    s2hc_config cfg;
    gpt_model m;
    adamw_state opt;
    int *inputs, *targets;
    int ok;
    double *times, *cpu; /* every timed step: wall and CPU seconds */
    int ntimes, cap;
    double *round_med, *round_cpu; /* per round: median step, wall and CPU */
    double last_cpu;     /* CPU seconds of the last bench_step */
} bench_model;

static int bench_model_open(bench_model *b, const char *preset, const char *method, int n, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    bench_config(&b->cfg, preset, method, n);
    if (model_build(&b->m, &b->cfg, err, errlen) != 0) return -1;
    model_init(&b->m, BENCH_SEED);
    model_alloc_acts(&b->m, b->cfg.batch);
    optim_init(&b->opt, &b->m);
    size_t N = (size_t)b->cfg.batch * b->cfg.block_size;
    b->inputs = malloc_check(N * sizeof(int));
    b->targets = malloc_check(N * sizeof(int));
    rng_t r;
    rng_seed(&r, BENCH_SEED + 1);
    for (size_t i = 0; i < N; i++) {
        b->inputs[i] = (int)(rng_u64(&r) % (uint64_t)b->cfg.vocab);
        b->targets[i] = (int)(rng_u64(&r) % (uint64_t)b->cfg.vocab);
    }
    b->ok = 1;
    return 0;
}

static void bench_model_close(bench_model *b) {
    if (!b->ok) return;
    optim_free(&b->opt);
    model_free(&b->m);
    free(b->inputs);
    free(b->targets);
    free(b->times);
    free(b->cpu);
    free(b->round_med);
    free(b->round_cpu);
    memset(b, 0, sizeof *b);
}

/* One training step (train.c's, one micro-batch); returns its seconds. With prof, the
 * model's ops and the optimizer accumulate into prof[2 * PROF_N] (wall, then CPU). */
static double bench_step(bench_model *b, double *prof) {
    gpt_model *m = &b->m;
    double c0 = cpu_seconds(), t0 = now_seconds();
    model_profile(prof);
    model_zero_grad(m);
    model_forward_backward(m, b->inputs, b->targets, b->cfg.batch, 1); /* with prof: the op-parallel step */
    model_profile(NULL);
    double t1 = now_seconds(), c1 = cpu_seconds(), t1b = now_seconds(); /* t1b: after c1's region */
    double gn = grad_global_norm(m);
    optim_step(&b->opt, m, 1e-4, gn);
    double t2 = now_seconds();
    double c2 = cpu_seconds();
    b->last_cpu = c2 - c0;
    if (prof) {
        prof[PROF_OPTIM] += t2 - t1b;
        prof[PROF_N + PROF_OPTIM] += c2 - c1;
    }
    return (t1 - t0) + (t2 - t1b);
}

static void bench_record(bench_model *b, double t) {
    if (b->ntimes == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        double *nt = realloc(b->times, (size_t)b->cap * sizeof *nt), *nc = realloc(b->cpu, (size_t)b->cap * sizeof *nc);
        if (!nt || !nc) die(1, "out of memory");
        b->times = nt;
        b->cpu = nc;
    }
    b->cpu[b->ntimes] = b->last_cpu;
    b->times[b->ntimes++] = t;
}

/* Bytes of the model's own buffers: parameters, gradients (the batch slices' too),
 * AdamW m and v, activations and their gradient scratch. */
static double bench_model_mb(const gpt_model *m) {
    const double slices = m->n_slices > 1 ? m->n_slices - 1 : 0;
    return ((double)m->n_params * (4 + slices) * sizeof(real) + (double)(m->n_acts + m->n_grad_acts) * sizeof(real)) /
           1048576.0;
}

/* The method column of the methods table and its breakdown, and of the streams sweep:
 * this wide, or as wide as the longest method of the run's list (known before the first
 * row: orthogonal's 10 letters had pushed its sweep rows one column right). */
#define BENCH_METHOD_WIDTH 11
#define BENCH_SWEEP_WIDTH 9
static int name_width(const char *const *names, int least) {
    int w = least;
    for (int i = 0; names[i]; i++)
        if ((int)strlen(names[i]) > w) w = (int)strlen(names[i]);
    return w;
}

/* ---- methods: every method at n = 4, interleaved rounds ------------------------------- */

typedef struct {
    double step_ms, cpu_ms, tok_s, mfu, mfu_cpu, mfu_square, overhead, overhead_lo, overhead_hi, overhead_cpu;
} method_result;

/* CPU seconds of the calling thread (the per-token math runs on one). */
static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double maximum(const double *v, int n) {
    double m = -INFINITY;
    for (int i = 0; i < n; i++) m = v[i] > m ? v[i] : m;
    return m;
}

/* Per-token method math (hc_math.h) on one core: ns per token for forward and backward,
 * on random coefficients z ~ N(0, 1), through the many-token calls the frame makes
 * (mhc in vector lanes); thread CPU time, best of 5. */
static void method_math_ns(const gpt_model *m, double *fwd_ns, double *bwd_ns) {
    *fwd_ns = *bwd_ns = 0;
    if (!m->variant) return;
    const hc_spec *s = &m->spec;
    const int n = s->n, K = s->K, reps = 512;
    /* theta of the first frame: the tensors after its norm gain and projection */
    const param_info *gain = model_find_param(m, "transformer.h.0.attn_hc.norm.weight");
    const real *theta = m->params + gain[2].offset;
    real *z = malloc_check((size_t)reps * K * sizeof(real)), *dz = malloc_check((size_t)reps * K * sizeof(real));
    real *cache = calloc_check((size_t)reps * s->cache + 1, sizeof(real));
    real *dth = calloc_check((size_t)s->n_theta, sizeof(real));
    real *io = malloc_check((size_t)reps * (4 * n + 2 * n * n) * sizeof(real));
    real *pre = io, *post = pre + reps * n, *H = post + reps * n, *dpre = H + (size_t)reps * n * n,
         *dpost = dpre + reps * n, *dH = dpost + reps * n;
    rng_t r;
    rng_seed(&r, 11);
    for (int i = 0; i < reps * K; i++) z[i] = (real)rng_normal(&r);
    for (int i = 0; i < reps * (2 * n + n * n); i++) dpre[i] = (real)rng_normal(&r);
    double best_f = INFINITY, best_b = INFINITY;
    for (int rep = 0; rep < 5; rep++) { /* the best of 5: a loaded machine only adds time */
        double t0 = thread_cpu_seconds();
        hc_forward_tokens(s, theta, z, reps, pre, post, H, cache);
        double t1 = thread_cpu_seconds();
        hc_backward_tokens(s, theta, z, cache, reps, dpre, dpost, dH, dz, dth);
        double t2 = thread_cpu_seconds();
        best_f = t1 - t0 < best_f ? t1 - t0 : best_f;
        best_b = t2 - t1 < best_b ? t2 - t1 : best_b;
    }
    *fwd_ns = best_f / reps * 1e9;
    *bwd_ns = best_b / reps * 1e9;
    free(z);
    free(dz);
    free(cache);
    free(dth);
    free(io);
}

/* out (C) = sum of the n rows (C each) at rows. */
static void floor_row_sum(float *out, const float *rows, size_t n, size_t C) {
#pragma omp simd
    for (size_t j = 0; j < C; j++) out[j] = rows[j];
    for (size_t i = 1; i < n; i++)
#pragma omp simd
        for (size_t j = 0; j < C; j++) out[j] += rows[i * C + j];
}

/* The frame's floor: CPU seconds per step of its passes over the streams alone, the
 * least any implementation must move (no projection, no method math, no dots beyond
 * one per row), at this machine's memory speed: per sublayer the forward reads X_l and
 * f and writes X_{l+1} and u; the backward reads dY, X_l, f and du and writes dX (in
 * place over dY) and df. A 32 MB write between passes stands for the sublayer's own
 * work, which evicts the streams from cache as in a real step. One thread; best of 3.
 * With xb the streams X are bf16 (--stream-bf16; stored by truncation: the bytes, not
 * the rounding), their gradients fp32 as in the model. */
static volatile float frame_floor_sink;

static inline float floor_bf16_get(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

static inline uint16_t floor_bf16_put(float v) {
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)(u >> 16);
}

/* The bytes frame_floor_cpu's passes read and write in one step (a line's read for
 * ownership before its first write not counted). */
static double frame_floor_bytes(const s2hc_config *c, int n, int xb) {
    const double N = (double)c->batch * c->block_size, C = c->n_embd, nC = n * C, x = xb ? 2 : 4;
    const double fwd = nC * x + C * 4 + nC * x + C * 4;       /* X_l, f; X_{l+1}, u */
    const double bwd = 3 * C * 4 + nC * x + 2 * nC * 4;       /* du, f, df; X_l; dY read and written */
    return 2.0 * c->n_layer * N * (fwd + bwd);
}

static double frame_floor_cpu(const s2hc_config *c, int n, int xb) {
    const size_t N = (size_t)c->batch * c->block_size, C = (size_t)c->n_embd, nC = (size_t)n * C;
    const int Lh = 2 * c->n_layer;
    const size_t S = N * nC, junk_n = (size_t)32 << 18; /* 32 MB of floats */
    /* the model's own allocator: the same pages as a step's streams */
    float *X = calloc_huge((size_t)(Lh + 1) * S, xb ? sizeof(uint16_t) : sizeof(float));
    uint16_t *Xh = (uint16_t *)X;
    float *f = calloc_huge((size_t)Lh * N * C, sizeof(float)), *row = calloc_huge(nC, sizeof(float));
    float *dY = calloc_huge(S, sizeof(float)), *u = calloc_huge(N * C, sizeof(float));
    float *df = calloc_huge(N * C, sizeof(float)), *junk = calloc_huge(junk_n, sizeof(float));
    double best = INFINITY;
    for (int rep = 0; rep < 3; rep++) {
        double t = 0;
        for (int l = 0; l < Lh; l++) {
            memset(junk, rep + l, junk_n * sizeof(float));
            double t0 = thread_cpu_seconds();
            const float *fl = f + (size_t)l * N * C;
            for (size_t k = 0; k < N; k++) {
                const float *ff = fl + k * C;
                float *uk = u + k * C;
                if (xb) {
                    const uint16_t *x = Xh + (size_t)l * S + k * nC;
                    uint16_t *y = Xh + (size_t)(l + 1) * S + k * nC;
                    for (size_t i = 0; i < (size_t)n; i++)
#pragma omp simd
                        for (size_t j = 0; j < C; j++) row[i * C + j] = floor_bf16_get(x[i * C + j]) + ff[j];
#pragma omp simd
                    for (size_t j = 0; j < nC; j++) y[j] = floor_bf16_put(row[j]);
                    floor_row_sum(uk, row, (size_t)n, C);
                    continue;
                }
                const float *x = X + (size_t)l * S + k * nC;
                float *y = X + (size_t)(l + 1) * S + k * nC;
                for (size_t i = 0; i < (size_t)n; i++)
#pragma omp simd
                    for (size_t j = 0; j < C; j++) y[i * C + j] = x[i * C + j] + ff[j];
                floor_row_sum(uk, y, (size_t)n, C);
            }
            t += thread_cpu_seconds() - t0;
        }
        for (int l = Lh - 1; l >= 0; l--) {
            memset(junk, rep + l + 1, junk_n * sizeof(float));
            double t0 = thread_cpu_seconds();
            const float *fl = f + (size_t)l * N * C;
            for (size_t k = 0; k < N; k++) {
                const float *ff = fl + k * C, *du = u + k * C;
                float *dy = dY + k * nC, *d = df + k * C, a = 0;
#pragma omp simd reduction(+ : a)
                for (size_t j = 0; j < C; j++) a += du[j] * ff[j];
                if (xb) {
                    const uint16_t *xh = Xh + (size_t)l * S + k * nC;
#pragma omp simd
                    for (size_t j = 0; j < nC; j++) dy[j] = dy[j] + a * floor_bf16_get(xh[j]);
                } else {
                    const float *x = X + (size_t)l * S + k * nC;
                    for (size_t i = 0; i < (size_t)n; i++)
#pragma omp simd
                        for (size_t j = 0; j < C; j++) dy[i * C + j] = dy[i * C + j] + a * x[i * C + j];
                }
                floor_row_sum(d, dy, (size_t)n, C);
            }
            t += thread_cpu_seconds() - t0;
        }
        best = t < best ? t : best;
    }
    frame_floor_sink = dY[0] + df[0]; /* the passes' results are used: none is dropped */
    free(X);
    free(f);
    free(dY);
    free(u);
    free(df);
    free(junk);
    free(row);
    return best;
}

static void section_methods(const bench_opts *o, const char *preset, const gemm_limits *g, FILE *csv,
                            FILE *bcsv, method_result *res_out) {
    const char *const *names = o->methods;
    int nm = 0;
    while (names[nm]) nm++;
    const int wm = name_width(names, BENCH_METHOD_WIDTH);
    bench_model *bm = calloc_check((size_t)nm, sizeof *bm);
    char err[512];
    for (int i = 0; i < nm; i++)
        if (bench_model_open(&bm[i], preset, names[i], BENCH_N, err, sizeof err) != 0)
            fprintf(stderr, "s2hc: bench: %s: %s (skipped)\n", names[i], err);
    if (!bm[0].ok) die(1, "bench: rc does not build");
    s2hc_config c0;
    bench_config(&c0, preset, "rc", 1);
    const size_t N = (size_t)c0.batch * c0.block_size;
    const double fpt = model_flops_per_token(&c0);
    gemm_shape gs[16];
    int per_layer, ngs = model_gemms(&c0, gs, &per_layer);
    double gflop_step = 0; /* the step's linear layers, as in section_gemm */
    for (int i = 0; i < ngs; i++) gflop_step += gemm_flops(&gs[i], 1) * (i < per_layer ? c0.n_layer : 1) / 1e9;
    double l_start = load1();
    for (int i = 0; i < nm; i++) {
        if (!bm[i].ok) continue;
        bm[i].round_med = calloc_check((size_t)o->rounds, sizeof(double));
        bm[i].round_cpu = calloc_check((size_t)o->rounds, sizeof(double));
        for (int w = 0; w < o->warmup; w++) bench_step(&bm[i], NULL);
    }
    /* Rounds: the step's GEMMs once (this round's limit), then each method `steps` steps,
     * starting at a different method each round. */
    double *rt = malloc_check((size_t)o->steps * sizeof *rt), *rc = malloc_check((size_t)o->steps * sizeof *rc);
    double *gemm_rate = malloc_check((size_t)o->rounds * sizeof *gemm_rate);
    double *gemm_rate_cpu = malloc_check((size_t)o->rounds * sizeof *gemm_rate_cpu);
    const double nthr = kernels_threads();
    /* the table comes after the last round: meanwhile a progress line (util.h), one unit
       per method and round */
    int nok = 0;
    for (int i = 0; i < nm; i++) nok += bm[i].ok;
    char what[64];
    snprintf(what, sizeof what, "  %s preset", preset);
    progress pr;
    progress_begin(&pr, what, "method rounds", (long)o->rounds * nok, 1);
    long done = 0;
    for (int r = 0; r < o->rounds; r++) {
        double tg = 0, cg = 0, tk[1], ck[1], ts, cs;
        int count[16];
        for (int i = 0; i < ngs; i++) {
            gemm_time(&gs[i], 1, 1, tk, ck);
            count[i] = i < per_layer ? c0.n_layer : 1;
            tg += tk[0] * count[i];
            cg += ck[0] * count[i];
        }
        gemm_time_sliced(gs, count, ngs, &ts, &cs); /* the step's own way: the limit is the faster */
        if (ts < tg) tg = ts, cg = cs;
        gemm_rate[r] = gflop_step / tg;
        gemm_rate_cpu[r] = gflop_step / (cg / nthr);
        for (int k = 0; k < nm; k++) {
            int i = (k + r) % nm;
            if (!bm[i].ok) continue;
            bench_step(&bm[i], NULL); /* one untimed step: caches after the previous model */
            for (int s = 0; s < o->steps; s++) {
                rt[s] = bench_step(&bm[i], NULL);
                rc[s] = bm[i].last_cpu;
                bench_record(&bm[i], rt[s]);
            }
            bm[i].round_med[r] = median(rt, o->steps);
            bm[i].round_cpu[r] = median(rc, o->steps);
            progress_update(&pr, ++done);
        }
    }
    progress_end(&pr);
    free(rt);
    free(rc);
    double l_end = load1();
    printf("\n== %s preset: L=%d C=%d heads=%d T=%d B=%d, %.2f MFLOP/token, %d threads, %d rounds x %d steps "
           "(load %.2f -> %.2f) ==\n",
           preset, c0.n_layer, c0.n_embd, c0.n_head, c0.block_size, c0.batch, fpt / 1e6, kernels_threads(), o->rounds,
           o->steps, l_start, l_end);
    printf("  GEMM limit of this preset's linear layers, timed in every round: median %.1f GFLOP/s "
           "(%.1f-%.1f); from CPU time %.1f\n",
           median(gemm_rate, o->rounds), minimum(gemm_rate, o->rounds), maximum(gemm_rate, o->rounds),
           median(gemm_rate_cpu, o->rounds));
    printf("  %-*s %2s %8s %8s %9s %6s %18s | %8s %6s %8s | %7s %7s\n", wm, "method", "n", "params", "step ms",
           "tokens/s", "MFU", "x rc wall (range)", "cpu ms", "MFU", "x rc cpu", "math us", "mem MB");
    double *ratio = malloc_check((size_t)o->rounds * sizeof *ratio), *rcpu = malloc_check((size_t)o->rounds * sizeof *rcpu);
    double *mfu = malloc_check((size_t)o->rounds * sizeof *mfu), *mfuc = malloc_check((size_t)o->rounds * sizeof *mfuc);
    for (int i = 0; i < nm; i++) {
        method_result *R = &res_out[i];
        memset(R, 0, sizeof *R);
        if (!bm[i].ok) continue;
        double med = median(bm[i].times, bm[i].ntimes);
        for (int r = 0; r < o->rounds; r++) {
            ratio[r] = bm[i].round_med[r] / bm[0].round_med[r];
            rcpu[r] = bm[i].round_cpu[r] / bm[0].round_cpu[r];
            mfu[r] = fpt * (double)N / bm[i].round_med[r] / (gemm_rate[r] * 1e9);
            mfuc[r] = fpt * (double)N / (bm[i].round_cpu[r] / nthr) / (gemm_rate_cpu[r] * 1e9);
        }
        double fns, bns;
        method_math_ns(&bm[i].m, &fns, &bns);
        R->step_ms = med * 1e3;
        R->cpu_ms = median(bm[i].cpu, bm[i].ntimes) * 1e3;
        R->tok_s = (double)N / med;
        R->mfu = median(mfu, o->rounds);
        R->mfu_cpu = median(mfuc, o->rounds);
        R->mfu_square = fpt * R->tok_s / (g->square * 1e9);
        R->overhead = median(ratio, o->rounds);
        R->overhead_lo = minimum(ratio, o->rounds);
        R->overhead_hi = maximum(ratio, o->rounds);
        R->overhead_cpu = median(rcpu, o->rounds);
        char range[40];
        snprintf(range, sizeof range, "%.3f (%.2f-%.2f)", R->overhead, R->overhead_lo, R->overhead_hi);
        printf("  %-*s %2d %8zu %8.2f %9.0f %5.1f%% %18s | %8.2f %5.1f%% %8.3f | %7.2f %7.1f\n", wm, names[i],
               bm[i].m.n, bm[i].m.n_params, R->step_ms, R->tok_s, 100 * R->mfu, range, R->cpu_ms, 100 * R->mfu_cpu,
               R->overhead_cpu, (fns + bns) / 1e3, bench_model_mb(&bm[i].m));
        if (csv)
            fprintf(csv,
                    "%s,%s,%d,%d,%zu,%zu,%.0f,%.4f,%.4f,%.4f,%.1f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.1f,%.1f,%.1f,%.1f,"
                    "%.2f,%d,%d,%.2f,%.2f,%s,%s,%s\n",
                    preset, names[i], bm[i].m.n, kernels_threads(), bm[i].m.n_params, bm[i].m.n_aux, fpt,
                    R->step_ms, minimum(bm[i].times, bm[i].ntimes) * 1e3, R->cpu_ms, R->tok_s, R->mfu, R->mfu_cpu,
                    R->mfu_square, R->overhead, R->overhead_lo, R->overhead_hi, R->overhead_cpu, fns, bns,
                    median(gemm_rate, o->rounds), median(gemm_rate_cpu, o->rounds), bench_model_mb(&bm[i].m),
                    o->rounds, o->steps, l_start, l_end, bm[i].m.proj_bf16 ? "bf16" : "fp32",
                    bm[i].m.stream_bf16 ? "bf16" : "fp32", model_proj_products(&bm[i].m));
    }
    int id = -1; /* identity: the streams and their gates with no mixing math */
    for (int i = 1; i < nm; i++)
        if (bm[i].ok && !strcmp(names[i], "identity")) id = i;
    if (id > 0 && nm > 2) {
        printf("  x identity wall (the same rounds): what each method costs beyond carrying n = %d streams\n   ",
               BENCH_N);
        for (int i = 1; i < nm; i++) {
            if (!bm[i].ok || i == id) continue;
            for (int r = 0; r < o->rounds; r++) ratio[r] = bm[i].round_med[r] / bm[id].round_med[r];
            printf(" %s %.3f", names[i], median(ratio, o->rounds));
        }
        printf("\n");
    }
    free(ratio);
    free(rcpu);
    free(mfu);
    free(mfuc);
    free(gemm_rate);
    free(gemm_rate_cpu);

    /* breakdown: a few profiled steps per method, wall and CPU time per category */
    const size_t P2 = 2 * PROF_N;
    double *prof = calloc_check((size_t)nm * P2, sizeof(double));
    double *tot = calloc_check((size_t)nm * 2, sizeof(double));
    for (int i = 0; i < nm; i++) {
        if (!bm[i].ok) continue;
        for (int s = 0; s < o->prof_steps; s++) {
            tot[2 * i] += bench_step(&bm[i], prof + (size_t)i * P2);
            tot[2 * i + 1] += bm[i].last_cpu;
        }
        for (size_t k = 0; k < P2; k++) prof[(size_t)i * P2 + k] /= o->prof_steps;
        tot[2 * i] /= o->prof_steps;
        tot[2 * i + 1] /= o->prof_steps;
    }
    for (int kind = 0; kind < 2; kind++) {
        printf("\n  one step by op, %s ms (%s preset, mean of %d profiled steps, every op split over the threads)\n",
               kind ? "CPU (all threads)" : "wall", preset, o->prof_steps);
        printf("  %-*s", wm, "method");
        for (int k = 0; k < PROF_N; k++) printf(" %9.9s", prof_names[k]);
        printf(" %9s %9s\n", "other", "total");
        for (int i = 0; i < nm; i++) {
            if (!bm[i].ok) continue;
            const double *p = prof + (size_t)i * P2 + (size_t)kind * PROF_N, T = tot[2 * i + kind];
            double sum = 0;
            printf("  %-*s", wm, names[i]);
            for (int k = 0; k < PROF_N; k++) {
                printf(" %9.2f", p[k] * 1e3);
                sum += p[k];
            }
            printf(" %9.2f %9.2f\n", (T - sum) * 1e3, T * 1e3);
        }
    }
    const char *sp = bench_stream_bf16 ? "bf16" : "fp32";
    if (bcsv)
        for (int i = 0; i < nm; i++) {
            if (!bm[i].ok) continue;
            const double *p = prof + (size_t)i * P2;
            double sw = 0, sc = 0;
            for (int k = 0; k < PROF_N; k++) {
                fprintf(bcsv, "%s,%s,%d,%s,%.4f,%.4f,%.4f,step_wall,ops,%s,,\n", preset, names[i], bm[i].m.n,
                        prof_names[k], p[k] * 1e3, p[PROF_N + k] * 1e3, p[k] / tot[2 * i], sp);
                sw += p[k];
                sc += p[PROF_N + k];
            }
            fprintf(bcsv, "%s,%s,%d,other,%.4f,%.4f,%.4f,step_wall,ops,%s,,\n", preset, names[i], bm[i].m.n,
                    (tot[2 * i] - sw) * 1e3, (tot[2 * i + 1] - sc) * 1e3, (tot[2 * i] - sw) / tot[2 * i], sp);
            fprintf(bcsv, "%s,%s,%d,total,%.4f,%.4f,1,step_wall,ops,%s,,\n", preset, names[i], bm[i].m.n,
                    tot[2 * i] * 1e3, tot[2 * i + 1] * 1e3, sp);
        }
    if (bm[0].ok) { /* the frame's floor against rc's step, both in CPU time */
        const double fl = frame_floor_cpu(&c0, BENCH_N, bench_stream_bf16), rc_cpu = tot[1];
        const double mb = frame_floor_bytes(&c0, BENCH_N, bench_stream_bf16) / 1e6;
        printf("\n  frame floor: its passes over the n = %d streams%s alone (no projection, no method math), one\n"
               "  thread: %.1f ms CPU per step = %.1f%% of rc's step (%.1f ms CPU): no method can cost less over rc\n"
               "  (%.0f MB read and written a step: %.1f GB/s)\n",
               BENCH_N, bench_stream_bf16 ? " (bf16)" : "", fl * 1e3, 100 * fl / rc_cpu, rc_cpu * 1e3, mb,
               mb / 1e3 / fl);
        if (bcsv)
            fprintf(bcsv, "%s,frame_floor,%d,floor,,%.4f,%.4f,rc_step_cpu,one_thread,%s,%.1f,%.2f\n", preset, BENCH_N,
                    fl * 1e3, fl / rc_cpu, sp, mb, mb / 1e3 / fl);
    }
    free(prof);
    free(tot);
    for (int i = 0; i < nm; i++) bench_model_close(&bm[i]);
    free(bm);
}

/* ---- streams: n = 2..8 ----------------------------------------------------------------- */

/* A rough upper estimate of a configuration's memory (MB) before building it: the
 * parameter table gives the parameters; the activations are dominated by (Lh + 1)
 * copies of the streams and, per sublayer, the projection z and its gradient. */
static double sweep_estimate_mb(const s2hc_config *c) {
    param_info *pi = NULL;
    int nt = 0;
    size_t total = 0, aux = 0;
    char err[256];
    if (model_param_table(c, &pi, &nt, &total, &aux, err, sizeof err) != 0) return -1;
    free(pi);
    /* K from the projection's shape: aux per sublayer ~ K * n * C + ... */
    double Lh = 2.0 * c->n_layer, nC = (double)c->n_streams * c->n_embd;
    double K = (double)aux / Lh / nC;
    double N = (double)c->batch * c->block_size;
    double acts = N * ((3 * Lh + 6) * nC + (Lh + 1) * K + 20.0 * Lh * c->n_embd) +
                  (double)c->batch * c->n_head * c->block_size * c->block_size * (c->n_layer + 1);
    return ((double)total * 4 + acts) * sizeof(real) / 1048576.0;
}

static void section_streams(const bench_opts *o, FILE *csv) {
    const char *preset = o->only_preset ? o->only_preset : "small";
    const char *const *sweep = o->sweep;
    const int ws = name_width(sweep, BENCH_SWEEP_WIDTH);
    if (!sweep[0]) { /* --methods rc: nothing to sweep */
        printf("\n== streams: none of --methods has streams to sweep (rc is n = 1); the sweep runs mhc, "
               "mhc_lite, kromhc and s2hc by default ==\n");
        return;
    }
    s2hc_config c0;
    bench_config(&c0, preset, "rc", 1);
    const size_t N = (size_t)c0.batch * c0.block_size;
    char err[512];
    bench_model rc;
    if (bench_model_open(&rc, preset, "rc", 1, err, sizeof err) != 0) return;
    bench_step(&rc, NULL);
    printf("\n== streams: %s preset, tokens/s and memory against n (Fig 7 left) ==\n", preset);
    printf("  %-*s %2s %10s %9s %9s %8s %8s %8s %10s %10s %9s %6s\n", ws, "method", "n", "aux", "step ms", "tokens/s",
           "x rc", "cpu ms", "x rc cpu", "model MB", "rss MB", "peak MB", "load");
    int peak_global = 0; /* the high-water mark could not be reset: peak MB is the process's */
    double *t = malloc_check((size_t)(o->sweep_steps + 4) * sizeof *t);
    double *tr = malloc_check((size_t)(o->sweep_steps + 4) * sizeof *tr);
    double *c = malloc_check((size_t)(o->sweep_steps + 4) * sizeof *c);
    double *cr = malloc_check((size_t)(o->sweep_steps + 4) * sizeof *cr);
    for (int mi = 0; sweep[mi]; mi++) {
        for (int n = 2; n <= 8; n++) {
            s2hc_config sc;
            bench_config(&sc, preset, sweep[mi], n);
            double est = sweep_estimate_mb(&sc);
            if (est < 0 || est > o->mem_limit_gb * 1024) {
                printf("  %-*s %2d  skipped: about %.1f GB (limit %.1f GB, --mem-limit)\n", ws, sweep[mi], n,
                       est / 1024, o->mem_limit_gb);
                if (csv)
                    fprintf(csv, "%s,%s,%d,,,,,,,,%.1f,,,,0,skipped\n", preset, sweep[mi], n, est);
                continue;
            }
            if (rss_peak_reset() != 0) peak_global = 1;
            bench_model b;
            if (bench_model_open(&b, preset, sweep[mi], n, err, sizeof err) != 0) {
                printf("  %-*s %2d  skipped: %s\n", ws, sweep[mi], n, err);
                continue;
            }
            bench_step(&b, NULL); /* warm-up: first touch of the buffers */
            int k = 0;
            double t0 = now_seconds();
            /* alternate rc and the configuration step by step: the ratio sees the same load */
            while (k < o->sweep_steps && (k < 2 || now_seconds() - t0 < BENCH_STREAM_BUDGET_S)) {
                tr[k] = bench_step(&rc, NULL);
                cr[k] = rc.last_cpu;
                t[k] = bench_step(&b, NULL);
                c[k] = b.last_cpu;
                k++;
            }
            double med = median(t, k), medrc = median(tr, k), mc = median(c, k), mcr = median(cr, k);
            double mb = bench_model_mb(&b.m), rss = rss_now_mb(), peak = rss_peak_mb(), l = load1();
            printf("  %-*s %2d %10zu %9.2f %9.0f %8.3f %8.2f %8.3f %10.1f %10.1f %9.1f %6.2f\n", ws, sweep[mi], n,
                   b.m.n_aux, med * 1e3, (double)N / med, med / medrc, mc * 1e3, mc / mcr, mb, rss, peak, l);
            if (csv)
                fprintf(csv, "%s,%s,%d,%zu,%zu,%.4f,%.1f,%.4f,%.4f,%.4f,%.1f,%.1f,%.1f,%.2f,%d,ok\n", preset,
                        sweep[mi], n, b.m.n_params, b.m.n_aux, med * 1e3, (double)N / med, med / medrc,
                        mc * 1e3, mc / mcr, mb, rss, peak, l, k);
            bench_model_close(&b);
        }
    }
    printf("  peak MB: the process's resident peak while each configuration ran (rc's model open too)%s\n",
           peak_global ? ";\n  here the kernel would not reset it (/proc/self/clear_refs): the process's peak so far" : "");
    free(t);
    free(tr);
    free(c);
    free(cr);
    bench_model_close(&rc);
}

/* ---- probes: `s2hc train` with probes at the default interval and off ------------------ */

/* The probes section's folder while it exists (probes_tmpdir_set, raised once the path is
 * whole): what a signal's bench_on_signal removes */
static char probes_tmpdir[CFG_PATH - 5];
static volatile sig_atomic_t probes_tmpdir_set;

static void bench_on_signal(int sig);

/* In the probes section, before and between its training runs (which install train's
 * own handler, setting stop_signal too): a Ctrl-C, SIGTERM or SIGHUP sets stop_signal, the
 * section removes its folder and the bench exits 130; a second one ends it at once
 * (bench_on_signal, train's handler's next too: stop_signals_then). */
static void bench_on_probes_signal(int sig) {
    static const char msg[] = "\ns2hc: bench: stopping the probes section (again to stop at once)\n";
    stop_signal_first(sig, bench_on_signal, msg, sizeof msg - 1);
}

/* Tests only: S2HC_TEST_BENCH_PAUSE_RUN=K makes the probes section's training run K
 * (1..4) wait, after a line saying so, for a signal (60 s at most), then 1 s more, just
 * before it starts: the moment after the section's last look at stop_signal. With
 * S2HC_TEST_BENCH_PAUSE_AGAIN set (not empty) it waits up to 60 s for a second signal
 * instead, which ends the bench: a test sends it once it has read the first one's
 * message, which on a loaded machine can take over a second. */
static void probes_test_pause(int run) {
    const char *e = getenv("S2HC_TEST_BENCH_PAUSE_RUN"), *again = getenv("S2HC_TEST_BENCH_PAUSE_AGAIN");
    if (!e || atoi(e) != run) return;
    printf("  (test) training run %d waits for a signal\n", run);
    fflush(stdout);
    double until = now_seconds() + 60;
    for (int signalled = 0; now_seconds() < until;) {
        if (stop_signal && !signalled) signalled = 1, until = now_seconds() + (again && again[0] ? 60 : 1);
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* `s2hc train` for `steps` steps of s2hc n = 4 at a preset on the docs corpus with
 * probe.every = every and a one-sequence final probe: its wall and process CPU seconds.
 * Returns 0, or -1 if it could not run. */
static int probe_run(const char *tmpdir, const char *preset, int steps, int every, double *wall, double *cpu) {
    static int runs = 0;
    char set_steps[64], set_out[2 * CFG_PATH + 16], set_every[64], cfg_path[800];
    snprintf(cfg_path, sizeof cfg_path, "%s/bench.yaml", tmpdir);
    FILE *f = fopen(cfg_path, "w");
    if (!f) return -1;
    fprintf(f, "residual: {method: s2hc, n_streams: 4}\ntrain: {eval_every: 0, eval_batches: 1, ckpt_every: 0}\n"
               "data: {ood: []}\n");
    fclose(f);
    snprintf(set_steps, sizeof set_steps, "train.steps=%d", steps);
    /* a YAML single-quoted scalar: a ' #' or ': ' in TMPDIR stays in the path */
    size_t j = (size_t)snprintf(set_out, sizeof set_out, "run.out='");
    for (const char *c = tmpdir; *c; c++) {
        if (*c == '\'') set_out[j++] = '\'';
        set_out[j++] = *c;
    }
    snprintf(set_out + j, sizeof set_out - j, "/runs'");
    snprintf(set_every, sizeof set_every, "probe.every=%d", every);
    /* the preset's sizes, written out (config keys, not the preset table) */
    s2hc_config sm;
    bench_config(&sm, preset, "s2hc", BENCH_N);
    char k1[64], k2[64], k3[64], k4[64], k5[64];
    snprintf(k1, sizeof k1, "model.n_layer=%d", sm.n_layer);
    snprintf(k2, sizeof k2, "model.n_head=%d", sm.n_head);
    snprintf(k3, sizeof k3, "model.n_embd=%d", sm.n_embd);
    snprintf(k4, sizeof k4, "model.block_size=%d", sm.block_size);
    snprintf(k5, sizeof k5, "train.batch=%d", sm.batch);
    const char *argv[] = {"train", cfg_path, "--quiet", "--force", "--set", set_steps, "--set", set_out, "--set",
                          set_every, "--set", k1, "--set", k2, "--set", k3, "--set", k4, "--set", k5, "--set",
                          "probe.final_samples=1", "--set", "train.warmup=0", NULL};
    int argc = 24;
    probes_test_pause(++runs);
    double c0 = cpu_seconds(), t0 = now_seconds();
    /* the training's summary line is not the bench's: its stdout to /dev/null (errors stay on stderr) */
    fflush(stdout);
    const int saved = dup(STDOUT_FILENO), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved >= 0 && null >= 0) dup2(null, STDOUT_FILENO);
    int rc = train_main(argc, (char **)argv);
    fflush(stdout);
    if (saved >= 0 && null >= 0) dup2(saved, STDOUT_FILENO);
    if (saved >= 0) close(saved);
    if (null >= 0) close(null);
    *wall = now_seconds() - t0;
    *cpu = cpu_seconds() - c0;
    return rc == 0 ? 0 : -1;
}

/* The probes section; -1 when a Ctrl-C, SIGTERM or SIGHUP stopped it (stop_signal: its
 * own handler, then the training runs'), its rows then not meant to be kept. */
static int section_probes(const bench_opts *o, FILE *csv) {
    const char *preset = o->only_preset ? o->only_preset : "small";
    s2hc_config c;
    config_defaults(&c);
    char shard[1200];
    data_shard_path(shard, sizeof shard, c.data_dir, c.train_corpus, "train");
    const int every = o->probe_steps;
    printf("\n== probes: s2hc n=4, %s preset, `s2hc train` with probe.every=%d vs 0 ==\n", preset, every);
    if (!file_exists(shard)) {
        printf("  skipped: %s is missing (run `s2hc data prepare`)\n", shard);
        return 0;
    }
    /* from here a signal only stops the section (stop_signal), which removes its folder */
    stop_signals_to(bench_on_probes_signal);
    /* the runs' folder under TMPDIR, as the user's other tools put theirs (a job's own
       scratch on a cluster), else /tmp */
    const char *tmp_root = getenv("TMPDIR");
    if (!tmp_root || !tmp_root[0]) tmp_root = "/tmp";
    char tmpdir[sizeof probes_tmpdir]; /* TMPDIR/s2hc-bench.XXXXXX/runs is the runs' run.out, < CFG_PATH bytes */
    int made = 0;
    if (snprintf(tmpdir, sizeof tmpdir, "%s/s2hc-bench.XXXXXX", tmp_root) >= (int)sizeof tmpdir)
        printf("  skipped: TMPDIR %.60s... is too long for the runs' folder (%zu bytes)\n", tmp_root, strlen(tmp_root));
    else if (!mkdtemp(tmpdir))
        printf("  skipped: cannot make a temporary folder %s: %s\n", tmpdir, strerror(errno));
    else
        made = 1;
    if (!made) {
        stop_signals_to(bench_on_signal);
        return stop_signal ? -1 : 0;
    }
    memcpy(probes_tmpdir, tmpdir, sizeof tmpdir);
    atomic_signal_fence(memory_order_seq_cst);
    probes_tmpdir_set = 1;
    /* Runs of 2 * `every` steps (so probes run at steps 0, every and 2 * every), probes
     * on and off, alternated twice; the faster of each pair counts (a loaded machine only
     * adds time). The fixed costs (start, final eval and probe of one sequence, the
     * checkpoint) are the same in both, so the ratio is the probes' cost. */
    const int steps = 2 * every;
    double w[4], cp[4];
    int bad = 0;
    for (int k = 0; k < 4 && !stop_signal; k++) { /* a signal, in a run or between two: stop */
        bad |= probe_run(tmpdir, preset, steps, k % 2 ? 0 : every, &w[k], &cp[k]);
    }
    probes_tmpdir_set = 0;
    remove_tree_now(tmpdir);
    if (stop_signal) return -1;
    if (bad) {
        printf("  skipped: `s2hc train` failed\n");
        return 0;
    }
    s2hc_config sm;
    bench_config(&sm, preset, "s2hc", BENCH_N);
    const double N = (double)sm.batch * sm.block_size, nthr = kernels_threads();
    /* per step: wall, and CPU spread over the threads (what the step would take with a
     * core per thread; a loaded machine disturbs it much less) */
    double on_w = (w[0] < w[2] ? w[0] : w[2]) / steps, off_w = (w[1] < w[3] ? w[1] : w[3]) / steps;
    double on_c = (cp[0] < cp[2] ? cp[0] : cp[2]) / steps / nthr, off_c = (cp[1] < cp[3] ? cp[1] : cp[3]) / steps / nthr;
    printf("  %-14s %12s %12s %14s %14s   (whole `s2hc train` runs of %d steps)\n", "", "wall ms/step", "tokens/s",
           "cpu/thr ms/step", "tokens/s (cpu)", steps);
    printf("  %-14s %12.2f %12.0f %14.2f %14.0f\n", "probes on", on_w * 1e3, N / on_w, on_c * 1e3, N / on_c);
    printf("  %-14s %12.2f %12.0f %14.2f %14.0f\n", "probes off", off_w * 1e3, N / off_w, off_c * 1e3, N / off_c);
    printf("  probes cost %.1f%% of the training time (wall), %.1f%% (CPU), at one probe per %d steps\n",
           100 * (on_w / off_w - 1), 100 * (on_c / off_c - 1), every);
    if (csv) {
        fprintf(csv, "%s,s2hc,4,%d,train,%.4f,%.1f,%.4f,%.1f,%.2f\n", preset, every, on_w * 1e3, N / on_w,
                on_c * 1e3, N / on_c, load1());
        fprintf(csv, "%s,s2hc,4,0,train,%.4f,%.1f,%.4f,%.1f,%.2f\n", preset, off_w * 1e3, N / off_w, off_c * 1e3,
                N / off_c, load1());
    }

    /* Direct: the median of training steps and of probe_step calls on the same model, in
     * process (medians shrug off the load that the totals above collect). */
    bench_model b;
    char err[512], vpath[1200];
    data_shard val;
    data_shard_path(vpath, sizeof vpath, c.data_dir, c.train_corpus, "val");
    if (bench_model_open(&b, preset, "s2hc", BENCH_N, err, sizeof err) != 0 ||
        shard_open(&val, vpath, err, sizeof err) != 0) {
        printf("  direct: skipped (%s)\n", err);
        return 0;
    }
    h5log log;
    h5log_init(&log);
    probe_state *ps = probe_open(&b.m, &val, &log);
    if (ps) {
        enum { REPS = 7 };
        double st[REPS], sc[REPS], pt[REPS], pc[REPS];
        bench_step(&b, NULL);
        probe_step(ps, 0);
        for (int r = 0; r < REPS; r++) {
            st[r] = bench_step(&b, NULL);
            sc[r] = b.last_cpu;
            double c0 = cpu_seconds(), t0 = now_seconds();
            probe_step(ps, r + 1);
            pt[r] = now_seconds() - t0;
            pc[r] = cpu_seconds() - c0;
        }
        double ms = median(st, REPS), mp = median(pt, REPS), mcs = median(sc, REPS), mcp = median(pc, REPS);
        double on = (every * ms + mp) / every;
        printf("  direct: step %.2f ms, one probe_step %.2f ms wall (%.2f ms CPU, %.1f steps' worth); "
               "at probe.every=%d: %.0f vs %.0f tokens/s (probes %.1f%%)\n",
               ms * 1e3, mp * 1e3, mcp * 1e3, mcp / mcs, every, N / on, N / ms, 100 * (mcp / mcs) / every);
        if (csv) {
            fprintf(csv, "%s,s2hc,4,%d,direct,%.4f,%.1f,%.4f,%.1f,%.2f\n", preset, every, on * 1e3, N / on,
                    (every * mcs + mcp) / every / nthr * 1e3, N / ((every * mcs + mcp) / every / nthr), load1());
            fprintf(csv, "%s,s2hc,4,0,direct,%.4f,%.1f,%.4f,%.1f,%.2f\n", preset, ms * 1e3, N / ms, mcs / nthr * 1e3,
                    N / (mcs / nthr), load1());
        }
        probe_close(ps);
    }
    h5log_free(&log);
    shard_close(&val);
    bench_model_close(&b);
    return stop_signal ? -1 : 0;
}

/* ---- the command ------------------------------------------------------------------------- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: s2hc bench [--quick] [--csv DIR|none] [--preset tiny|small] [--rounds R] [--steps S]\n"
            "                  [--threads N] [--mem-limit GB] [--probe-steps S]\n"
            "                  [--methods M1,M2,...] [--no-methods] [--no-streams] [--no-probes] [--proj-bf16]\n"
            "                  [--stream-bf16]\n"
            "\n"
            "Measure training speed against the machine's limit: the cores' FMA rate and the memory's\n"
            "read rate, sgemm GFLOP/s, tokens/s and MFU of every residual method at n = 4 (tiny and\n"
            "small presets), each method's step time over rc's, a breakdown of one step by op,\n"
            "tokens/s and memory against n = 2..8. Prints the tables and writes them as CSV (machine,\n"
            "gemm, bench, breakdown, streams, probes .csv); every column is explained in\n"
            "docs/performance.md.\n"
            "  --quick         fewer repetitions, no probes section unless --probe-steps is given\n"
            "                  (one to three minutes on 2 cores, with the machine's load)\n"
            "  --csv DIR       where the CSV files go (default out/bench; 'none' for no files)\n"
            "  --preset P      only this preset for the methods table and the sweep\n"
            "  --rounds R      interleaved rounds per method (default 5, quick 2)\n"
            "  --steps S       timed steps per method per round (default 5, quick 3)\n"
            "  --threads N     OpenMP threads (default: all cores)\n"
            "  --mem-limit GB  skip sweep configurations estimated above this (default %.0f)\n"
            "  --methods LIST  these methods only (comma-separated; rc is always measured, as the\n"
            "                  baseline of the ratios); the sweep then takes the listed methods\n"
            "  --no-methods, --no-streams, --no-probes   skip that section\n"
            "  --probe-steps S probe interval of the probes section (default: probe.every)\n"
            "  --proj-bf16     every method's projection products with bf16 operands\n"
            "                  (residual.proj_precision: bf16; rc has none)\n"
            "  --stream-bf16   every method's streams stored in bf16 in the training steps\n"
            "                  (residual.stream_precision: bf16; rc has none)\n"
            RUNTIME_SPIN_VAR " is " RUNTIME_SPIN " unless you set it or OMP_WAIT_POLICY (docs/performance.md).\n"
            "\n"
            "example:\n"
            "  s2hc bench --quick --csv out/bench\n",
            BENCH_MEM_LIMIT_GB);
}

/* The value of bench's option `name` at argv[*i] (opt_arg): the next word, unless that
 * is an option ("--csv --quick"; "-1" is a value, refused as one), or --name=VALUE;
 * NULL when there is none or it is empty. Each is given once (opt_seen_take). */
static const char *bench_arg(opt_seen *seen, int argc, char **argv, int *i, const char *name) {
    const int at = *i;
    const char *v = opt_arg(argc, argv, i, name, *i + 1 < argc && strncmp(argv[*i + 1], "--", 2) != 0);
    if (v && !*v) {
        *i = at;
        return NULL;
    }
    if (v) opt_seen_take(seen, name, v);
    return v;
}

/* A positive whole number for option `opt`, or a message and 0. */
static int bench_count(const char *opt, const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1000000) {
        fprintf(stderr, "s2hc: error: bench: %s: expected a whole number >= 1, got '%s'\n", opt, s);
        return 0;
    }
    *out = (int)v;
    return 1;
}

/* --methods LIST: the methods table's methods (rc first, added when not listed: the
 * ratios are over it) and the streams sweep's (every listed method but rc). A name that
 * is not a residual method is an error naming it and the methods there are. */
static int bench_method_list(const char *list, bench_opts *o) {
    char buf[512];
    if (strlen(list) >= sizeof buf) {
        fprintf(stderr, "s2hc: error: bench: --methods: list too long\n");
        return 0;
    }
    snprintf(buf, sizeof buf, "%s", list);
    int nm = 1, ns = 0;
    o->methods[0] = "rc";
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (!strcmp(tok, "rc")) continue;
        const hc_variant *v = hc_variant_find(tok);
        if (!v) {
            fprintf(stderr, "s2hc: error: bench: --methods: unknown method '%s' (methods: rc", tok);
            for (int i = 0; hc_variants[i]; i++) fprintf(stderr, ", %s", hc_variants[i]->name);
            fprintf(stderr, ")\n");
            return 0;
        }
        int dup = 0;
        for (int i = 0; i < nm; i++) dup |= !strcmp(o->methods[i], v->name);
        if (dup) continue;
        if (nm == BENCH_MAX_METHODS) {
            fprintf(stderr, "s2hc: error: bench: --methods: more than %d methods\n", BENCH_MAX_METHODS);
            return 0;
        }
        o->methods[nm++] = v->name;
        o->sweep[ns++] = v->name;
    }
    o->methods[nm] = NULL;
    o->sweep[ns] = NULL;
    return 1;
}

/* Ctrl-C, SIGTERM or SIGHUP (outside the probes section, which stops at its next safe
 * point: bench_on_probes_signal): the CSV files being written are dropped, each earlier
 * run's file stays, and the bench ends at once with 130, as an interrupted train or grid
 * does. */
static void bench_on_signal(int sig) {
    (void)sig;
    tmp_streams_unlink();
    if (probes_tmpdir_set) remove_tree_now(probes_tmpdir); /* a second signal in the probes section */
    static const char msg[] = "\ns2hc: bench: interrupted; the CSV files of the sections not finished are not written\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(130);
}

int bench_main(int argc, char **argv) {
    /* each row as it is measured, into a log or a pipe too (`s2hc bench | tee bench.txt`):
       fully buffered, the rows of minutes of measuring came out at once, 4 KiB at a time */
    setvbuf(stdout, NULL, _IOLBF, 0);
    bench_opts o;
    memset(&o, 0, sizeof o);
    o.csv_dir = "out/bench";
    o.mem_limit_gb = BENCH_MEM_LIMIT_GB;
    o.probes = 1;
    for (int i = 0; bench_methods[i]; i++) o.methods[i] = bench_methods[i];
    for (int i = 0; sweep_methods[i]; i++) o.sweep[i] = sweep_methods[i];
    int rounds = 0, steps = 0, threads = 0, streams = 1, methods = 1, probe_steps = 0;
    opt_seen seen = {.cmd = "bench"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        const int more = i + 1 < argc && argv[i + 1][0] != '\0' && strncmp(argv[i + 1], "--", 2) != 0;
        if (opt_kind(a, &ended) < 0) continue;
        if (ended || (a[0] != '-' || !a[1])) { /* bench takes no operand */
            fprintf(stderr, "s2hc: error: bench: unexpected argument '%s' (bench takes options only)\n", a);
            usage(stderr);
            return 2;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 0; }
        else if (!strcmp(a, "--quick")) o.quick = 1;
        else if ((v = bench_arg(&seen, argc, argv, &i, "--csv"))) o.csv_dir = v;
        else if ((v = bench_arg(&seen, argc, argv, &i, "--preset"))) o.only_preset = v;
        else if ((v = bench_arg(&seen, argc, argv, &i, "--rounds"))) { if (!bench_count("--rounds", v, &rounds)) return 2; }
        else if ((v = bench_arg(&seen, argc, argv, &i, "--steps"))) { if (!bench_count("--steps", v, &steps)) return 2; }
        else if ((v = bench_arg(&seen, argc, argv, &i, "--threads"))) { if (!bench_count("--threads", v, &threads)) return 2; }
        else if ((v = bench_arg(&seen, argc, argv, &i, "--mem-limit"))) {
            char *end;
            o.mem_limit_gb = strtod(v, &end);
            if (end == v || *end || !(o.mem_limit_gb > 0)) {
                fprintf(stderr, "s2hc: error: bench: --mem-limit: expected a number of GB > 0, got '%s'\n", v);
                return 2;
            }
        }
        else if (!strcmp(a, "--no-streams")) streams = 0;
        else if (!strcmp(a, "--no-methods")) methods = 0;
        else if ((v = bench_arg(&seen, argc, argv, &i, "--probe-steps"))) {
            if (!bench_count("--probe-steps", v, &probe_steps)) return 2;
        }
        else if (!strcmp(a, "--no-probes")) o.probes = 0;
        else if (!strcmp(a, "--proj-bf16")) {
            if (!model_bf16_built()) {
                fprintf(stderr, "s2hc: error: bench: --proj-bf16 needs AVX512_BF16, and this build has none\n");
                return 2;
            }
            bench_proj_bf16 = 1;
        }
        else if (!strcmp(a, "--stream-bf16")) bench_stream_bf16 = 1;
        else if ((v = bench_arg(&seen, argc, argv, &i, "--methods"))) { if (!bench_method_list(v, &o)) return 2; }
        else {
            fprintf(stderr, "s2hc: error: bench: unknown or incomplete option '%s'%s\n", a,
                    i + 1 < argc && !more ? " (its value is missing or is an option)" : "");
            usage(stderr);
            return 2;
        }
    }
    if (o.only_preset && strcmp(o.only_preset, "tiny") && strcmp(o.only_preset, "small")) {
        fprintf(stderr, "s2hc: error: bench: --preset must be tiny or small (got '%s')\n", o.only_preset);
        return 2;
    }
    if (!strcmp(o.csv_dir, "none")) o.csv_dir = NULL;
    if (o.csv_dir && strlen(o.csv_dir) > BENCH_CSV_DIR_MAX) { /* csv_open's paths: cut, they would be other files */
        fprintf(stderr, "s2hc: error: bench: --csv '%.60s...': a path of %zu bytes, longer than %d\n", o.csv_dir,
                strlen(o.csv_dir), BENCH_CSV_DIR_MAX);
        return 2;
    }
    o.rounds = rounds > 0 ? rounds : o.quick ? 2 : 5;
    o.steps = steps > 0 ? steps : o.quick ? 3 : 5;
    o.warmup = 2;
    o.prof_steps = o.quick ? 2 : 5;
    o.sweep_steps = o.quick ? 3 : 8;
    s2hc_config dflt;
    config_defaults(&dflt);
    o.probe_steps = probe_steps > 0 ? probe_steps : dflt.probe_every > 0 ? dflt.probe_every : 100;
    if (o.quick && !probe_steps) o.probes = 0; /* --quick --probe-steps S: the probes section asked for */
#ifdef _OPENMP
    if (threads > 0) threads_set(threads);
#endif
    /* OpenBLAS follows OpenMP's count at its next call; told now, the gemm header's count
       is the one its products run with */
    if (threads > 0) openblas_set_num_threads(threads);
    if (o.csv_dir && mkdir_p(o.csv_dir) != 0) {
        fprintf(stderr, "s2hc: error: bench: cannot create %s: %s\n", o.csv_dir, strerror(errno));
        return 1;
    }
    struct stat cst;
    if (o.csv_dir && (stat(o.csv_dir, &cst) != 0 || !S_ISDIR(cst.st_mode))) {
        fprintf(stderr, "s2hc: error: bench: --csv %s is not a directory\n", o.csv_dir);
        return 1;
    }
    /* one bench at a time writes into a --csv folder (they would replace each other's
       .tmp files; two at once also time each other's load) */
    if (o.csv_dir && out_dir_lock(o.csv_dir, "s2hc bench") < 0) return 1;
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv(RUNTIME_SPIN_VAR), *pb = getenv("OMP_PROC_BIND"),
               *ct = getenv("OPENBLAS_CORETYPE");
    printf("s2hc bench %s: %d thread%s, OMP_WAIT_POLICY=%s " RUNTIME_SPIN_VAR "=%s OMP_PROC_BIND=%s OPENBLAS_CORETYPE=%s, "
           "load %.2f\n",
           s2hc_version(), kernels_threads(), kernels_threads() == 1 ? "" : "s", wp ? wp : "(unset)", sc ? sc : "(unset)", pb ? pb : "(unset)",
           ct ? ct : "(unset)", load1());
    char cpu[128];
    printf("cpu: %s; kernels built for %s\n", cpu_model_name(cpu, sizeof cpu), kernels_vectors());
    if (bench_proj_bf16)
        printf("projection products: bf16 operands, fp32 sums (--proj-bf16), by %s\n",
               model_amx_usable() ? "AMX tiles (S2HC_AMX=0: by vdpbf16ps)" : "vdpbf16ps");
    if (bench_stream_bf16) printf("streams: stored in bf16 in the training steps (--stream-bf16)\n");
    const char *blas_note = openblas_coretype_advice();
    if (blas_note) printf("note: %s\n", blas_note);

    stop_signals_to(bench_on_signal);
    stop_signals_then(bench_on_signal); /* a second signal while the probes section trains */

    FILE *mcsv = csv_open(&o, "machine.csv", "what,threads,rate,unit,buffer_mb,load1");
    section_machine(mcsv);
    csv_close(mcsv);

    FILE *gcsv = csv_open(&o, "gemm.csv", "shape,M,N,K,gflops_median,gflops_best,load1");
    gemm_limits g;
    section_gemm(&o, &g, gcsv);
    csv_close(gcsv);

    /* the methods' files only when that section runs: --no-methods leaves an earlier
       run's bench.csv and breakdown.csv as they are, as the other sections' flags do */
    FILE *csv = !methods ? NULL : csv_open(&o, "bench.csv",
                         "preset,method,n,threads,params,aux_params,flops_per_token,step_ms_median,step_ms_min,"
                         "cpu_ms_median,tokens_per_s,mfu,mfu_cpu,mfu_square,overhead_vs_rc,overhead_min,"
                         "overhead_max,overhead_cpu,math_fwd_ns,math_bwd_ns,gemm_gflops_in_run,gemm_gflops_cpu,"
                         "model_mb,rounds,steps_per_round,load1_start,load1_end,proj_precision,"
                         "stream_precision,proj_products");
    FILE *bcsv = !methods ? NULL : csv_open(&o, "breakdown.csv", "preset,method,n,category,wall_ms_per_step,cpu_ms_per_step,fraction,fraction_of,"
                                                   "parallel,stream_precision,mb_per_step,gb_per_s");
    int nm = 0;
    while (o.methods[nm]) nm++;
    method_result *res = calloc_check((size_t)nm, sizeof *res);
    for (int p = 0; p < 2 && methods; p++) {
        if (o.only_preset && strcmp(o.only_preset, bench_presets[p])) continue;
        section_methods(&o, bench_presets[p], &g, csv, bcsv, res);
    }
    free(res);
    csv_close(csv);
    csv_close(bcsv);

    if (streams) {
        FILE *scsv = csv_open(&o, "streams.csv",
                              "preset,method,n,params,aux_params,step_ms_median,tokens_per_s,x_rc,cpu_ms_median,"
                              "x_rc_cpu,model_mb,rss_mb,peak_rss_mb,load1,steps,status");
        section_streams(&o, scsv);
        csv_close(scsv);
    }
    if (o.probes) {
        FILE *pcsv = csv_open(&o, "probes.csv", "preset,method,n,probe_every,how,wall_ms_per_step,tokens_per_s,"
                                          "cpu_ms_per_step_per_thread,tokens_per_s_cpu,load1");
        if (section_probes(&o, pcsv) != 0) { /* stopped: an earlier run's probes.csv stays */
            if (pcsv) tmp_stream_drop(pcsv);
            fprintf(stderr, "s2hc: bench: interrupted in the probes section (its training runs removed)%s\n",
                    o.csv_dir ? "; probes.csv not written" : "");
            return 130;
        }
        csv_close(pcsv);
    }
    if (csv_failed) {
        fprintf(stderr, "s2hc: error: bench: %d CSV file(s) could not be written in %s/ (above)\n", csv_failed,
                o.csv_dir);
        return 1;
    }
    if (o.csv_dir) printf("\nCSV written to %s/ (machine, gemm%s%s%s)\n", o.csv_dir, methods ? ", bench, breakdown" : "",
                          streams ? ", streams" : "", o.probes ? ", probes" : "");
    return 0;
}
