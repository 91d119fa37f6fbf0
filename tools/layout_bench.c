/* layout_bench.c: what the layout of the n streams costs the frame's passes over them,
 * cold (`make bench-layout`).
 *
 * The frame stores a token's n streams one after another (stream i's C channels at
 * i C), and its loops read the n streams of a block of channels together, to mix them:
 * n short runs of lines 4 C bytes apart in every page, which the hardware's stream
 * prefetchers follow worse than one run. This program times the same pass, the
 * backward's floor (dY_i += a x_i for every stream i, then df = sum_i dY_i; a = du . f
 * per token), over sublayers evicted from cache, in two layouts:
 *
 *   rows      stream i of token t at (t n + i) C + c: the model's layout
 *   blocked   channels in blocks of 8, the n streams' blocks side by side: (t C/8 + c/8) 8 n
 *             + 8 i + c % 8, so the pass reads and writes one run of lines
 *
 * with X and dY in fp32, X in bf16 (residual.stream_precision: bf16) or both in bf16,
 * and with or without a software prefetch of the next token's rows (the model's
 * backward makes one). The numbers say what a change of layout would take off each
 * pass before it is made (docs/performance.md, log item 39).
 *
 * usage: layout_bench [--tokens N] [--n N] [--C C] [--sublayers L] [--reps R]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v8 __attribute__((vector_size(32)));
typedef uint32_t u8v __attribute__((vector_size(32)));
typedef uint16_t h8v __attribute__((vector_size(16)));

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static v8 ld_f(const float *p) {
    v8 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static void st_f(float *p, v8 v) { memcpy(p, &v, sizeof v); }
static v8 ld_h(const uint16_t *p) { /* bf16 widened: its bits are a float's high half */
    h8v h;
    memcpy(&h, p, sizeof h);
    const u8v u = __builtin_convertvector(h, u8v) << 16;
    v8 f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static void st_h(uint16_t *p, v8 v) { /* rounded to nearest even (finite values) */
    u8v u;
    memcpy(&u, &v, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const h8v h = __builtin_convertvector(u, h8v);
    memcpy(p, &h, sizeof h);
}

typedef struct {
    int n, C, blocked, xb, db, prefetch;
} pass_kind;

/* Offset of (stream i, channels c..c+7) within a token's n C values. */
static size_t at(const pass_kind *k, int i, int c) {
    return k->blocked ? ((size_t)(c / 8) * k->n + i) * 8 : (size_t)i * k->C + c;
}

static void prefetch_row(const void *p, size_t bytes) {
    for (const char *b = p, *e = b + bytes; b < e; b += 64) __builtin_prefetch(b, 0);
}

/* One sublayer's pass over N tokens. X and dY hold fp32 or bf16 (k->xb, k->db). */
static void pass(const pass_kind *k, size_t N, const void *X, const float *f, const float *du, void *dY, float *df) {
    const int n = k->n, C = k->C;
    const size_t nC = (size_t)n * C, xs = k->xb ? 2 : 4, ds = k->db ? 2 : 4;
    for (size_t t = 0; t < N; t++) {
        if (k->prefetch && t + 1 < N) {
            prefetch_row((const char *)X + (t + 1) * nC * xs, nC * xs);
            prefetch_row((const char *)dY + (t + 1) * nC * ds, nC * ds);
        }
        const float *ft = f + t * C, *ut = du + t * C;
        float a = 0;
        for (int c = 0; c < C; c++) a += ut[c] * ft[c];
        const v8 av = (v8){0} + a * 1e-9f; /* keeps dY from growing over the repetitions */
        for (int c = 0; c < C; c += 8) {
            v8 s = {0};
            for (int i = 0; i < n; i++) {
                const size_t o = t * nC + at(k, i, c);
                const v8 x = k->xb ? ld_h((const uint16_t *)X + o) : ld_f((const float *)X + o);
                v8 d = k->db ? ld_h((const uint16_t *)dY + o) : ld_f((float *)dY + o);
                d += av * x;
                if (k->db) st_h((uint16_t *)dY + o, d);
                else st_f((float *)dY + o, d);
                s += d;
            }
            st_f(df + t * C + c, s);
        }
    }
}

static void usage(FILE *o) {
    fprintf(o, "usage: layout_bench [--tokens N] [--n N] [--C C] [--sublayers L] [--reps R]\n"
               "\n"
               "Times the frame's backward floor (dY_i += a x_i, df = sum_i dY_i) over the streams of L\n"
               "sublayers evicted from cache, one thread, in ns per token and sublayer (best of R): the\n"
               "model's layout (a token's streams one after another) against channels in blocks of 8\n"
               "with the n streams' blocks side by side, in fp32 and bf16, with and without a prefetch\n"
               "of the next token. Defaults: the small preset's step, 2048 tokens, n = 4, C = 128, 8\n"
               "sublayers, 5 reps.\n"
               "\n"
               "example:\n"
               "  make bench-layout LAYOUT_ARGS=\"--n 8\"\n");
}

int main(int argc, char **argv) {
    long N = 2048, n = 4, C = 128, L = 8, reps = 5;
    for (int i = 1; i < argc; i++) {
        long *dst = !strcmp(argv[i], "--tokens") ? &N : !strcmp(argv[i], "--n") ? &n : !strcmp(argv[i], "--C") ? &C
                  : !strcmp(argv[i], "--sublayers") ? &L : !strcmp(argv[i], "--reps") ? &reps : NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        char *end = NULL;
        if (dst && i + 1 < argc) *dst = strtol(argv[++i], &end, 10);
        if (!dst || !end || *end || *dst < 1) {
            fprintf(stderr, "layout_bench: bad option or value '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (C % 8 || n > 64 || C > 65536 || N > 1 << 22 || L > 64 || reps > 1000) {
        fprintf(stderr, "layout_bench: C must be a multiple of 8 (and n <= 64, C <= 65536, tokens <= 4M, "
                        "sublayers <= 64, reps <= 1000)\n");
        return 2;
    }
    const size_t nC = (size_t)n * C, junk_n = (size_t)32 << 18; /* 32 MB between passes */
    float *X = malloc((size_t)L * N * nC * sizeof(float)), *f = malloc((size_t)L * N * C * sizeof(float));
    float *du = malloc((size_t)N * C * sizeof(float)), *dY = malloc((size_t)N * nC * sizeof(float));
    float *df = malloc((size_t)N * C * sizeof(float)), *junk = malloc(junk_n * sizeof(float));
    if (!X || !f || !du || !dY || !df || !junk) { fprintf(stderr, "layout_bench: out of memory\n"); return 1; }
    /* every page touched, values of order 1 (bf16 halves read as whatever they hold) */
    for (size_t k = 0; k < (size_t)L * N * nC; k++) X[k] = 0.5f + (float)(k % 7) * 0.125f;
    for (size_t k = 0; k < (size_t)L * N * C; k++) f[k] = 1.0f - (float)(k % 5) * 0.125f;
    for (size_t k = 0; k < (size_t)N * C; k++) du[k] = 0.25f, df[k] = 0;
    memset(dY, 0, (size_t)N * nC * sizeof(float));
    printf("layout_bench: the frame's backward floor over %ld sublayers of %ld tokens, n = %ld, C = %ld; cold, one "
           "thread, ns per token and sublayer (best of %ld)\n",
           L, N, n, C, reps);
    printf("  %-32s %9s %9s %11s\n", "layout", "fp32", "bf16 X", "bf16 X, dY");
    int round = 0;
    for (int blocked = 0; blocked < 2; blocked++)
        for (int prefetch = 0; prefetch < 2; prefetch++) {
            double ns[3];
            for (int prec = 0; prec < 3; prec++) {
                const pass_kind k = {(int)n, (int)C, blocked, prec >= 1, prec == 2, prefetch};
                double best = 1e30;
                memset(dY, 0, (size_t)N * nC * sizeof(float)); /* no fp32 read of another precision's bits */
                for (long r = 0; r < reps; r++) {
                    double s = 0;
                    for (long l = 0; l < L; l++) {
                        memset(junk, ++round & 0x7f, junk_n * sizeof(float));
                        const double t0 = cpu_now();
                        pass(&k, (size_t)N, X + (size_t)l * N * nC, f + (size_t)l * N * C, du, dY, df);
                        s += cpu_now() - t0;
                    }
                    if (s < best) best = s;
                }
                ns[prec] = 1e9 * best / ((double)L * (double)N);
            }
            char name[64];
            snprintf(name, sizeof name, "%s, %s", blocked ? "blocked" : "rows (the model's)",
                     prefetch ? "prefetch" : "no prefetch");
            printf("  %-32s %9.0f %9.0f %11.0f\n", name, ns[0], ns[1], ns[2]);
        }
    double chk = 0;
    for (size_t k = 0; k < (size_t)N * C; k++) chk += df[k];
    printf("  (checksum %.6g)\n", chk);
    free(X), free(f), free(du), free(dY), free(df), free(junk);
    return 0;
}
