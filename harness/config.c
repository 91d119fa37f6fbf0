/* config.c: the schema table, the strict YAML reader, --set overrides, cross-field
 * validation and the YAML writer.
 *
 * One table (cfg_keys below) holds every key: dotted name, type, struct member, default,
 * range, allowed values and help text. Everything else is driven by that table:
 * defaults, parsing, range checks, `s2hc help config`, docs/config.md and the resolved
 * YAML stored in run files. Adding a key is one line here plus the struct member.
 *
 * Errors: one line on stderr,
 *   s2hc: error: FILE:LINE:COL: key 'train.lr': <problem>
 * and return code 2. Every entry point works on a copy and commits only on success, so
 * a failed call leaves the caller's struct untouched.
 */
#include "config.h"
#include "util.h"
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* ------------------------------------------------------------------------------------ */
/* The schema                                                                            */
/* ------------------------------------------------------------------------------------ */

typedef enum {
    K_INT,   /* int */
    K_BOOL,  /* int holding 0/1, written true/false */
    K_U64,   /* uint64_t */
    K_REAL,  /* double */
    K_ENUM,  /* char[size], one of `allowed` */
    K_NAME,  /* char[size], free name: [A-Za-z0-9_.+-], not starting with '.' or '-' */
    K_PATH,  /* char[size], any printable text */
    K_LIST   /* char[max][size] of names + an int count */
} key_type;

typedef struct {
    const char *key;            /* dotted name: "train.lr" */
    const char *field;          /* the struct member: "lr" */
    key_type type;
    size_t off, size;           /* member offset; string buffer size (K_LIST: one item) */
    size_t count_off;           /* K_LIST: offset of the item count */
    const char *def;            /* default, as YAML scalar text (K_LIST: comma list) */
    double lo, hi;              /* numeric range; K_NAME/K_PATH: lo = min length; K_LIST: hi = max items */
    int lo_open, hi_open;       /* bound excluded: (lo, hi) instead of [lo, hi] */
    const char *const *allowed; /* K_ENUM: NULL-terminated */
    const char *help;
} cfg_key;

#define MEMBER(f) .field = #f, .off = offsetof(s2hc_config, f), .size = sizeof(((s2hc_config *)0)->f)
#define KINT(k, f, d, a, b, h) {.key = k, MEMBER(f), .type = K_INT, .def = d, .lo = a, .hi = b, .help = h}
#define KBOOL(k, f, d, h) {.key = k, MEMBER(f), .type = K_BOOL, .def = d, .lo = 0, .hi = 1, .help = h}
#define KU64(k, f, d, h) {.key = k, MEMBER(f), .type = K_U64, .def = d, .help = h}
#define KREAL(k, f, d, a, ao, b, bo, h) \
    {.key = k, MEMBER(f), .type = K_REAL, .def = d, .lo = a, .lo_open = ao, .hi = b, .hi_open = bo, .help = h}
#define KENUM(k, f, d, vals, h) {.key = k, MEMBER(f), .type = K_ENUM, .def = d, .allowed = vals, .help = h}
#define KNAME(k, f, d, minlen, h) {.key = k, MEMBER(f), .type = K_NAME, .def = d, .lo = minlen, .help = h}
#define KPATH(k, f, d, h) {.key = k, MEMBER(f), .type = K_PATH, .def = d, .lo = 1, .help = h}

static const char *const methods[] = {"rc", "identity", "hc", "mhc", "mhc_lite", "kromhc",
                                      "orthogonal", "s2hc", "s2hc_rot", NULL};
static const char *const sinkhorn_orders[] = {"row_col", "col_row", NULL};
static const char *const lite_offsets[] = {"fixed", "scaled", NULL};
static const char *const cores[] = {"cayley", "expm", NULL};
static const char *const inits[] = {"tanh4", "exact", NULL};
static const char *const proj_inits[] = {"zero", "normal", NULL};
static const char *const proj_precisions[] = {"fp32", "bf16", NULL};
static const char *const backends[] = {"auto", "cpu", "cuda", NULL};
static const char *const precisions[] = {"fp32", "bf16", NULL};
static const char *const parallels[] = {"batch", "ops", NULL};
static const char *const gelus[] = {"tanh", "erf", NULL};

static const char *const sections[] = {"model", "residual", "train", "data", "run", "probe", NULL};

/* A key added here takes a default that keeps what the builds before it did: their
 * readers skip it in a stored config (config_from_yaml_text). A run that sets it to
 * change what the model computes must be refused by them instead: such a run's file
 * then carries a higher format_version (RUN_FORMAT_VERSION, docs/runfile.md). */
static const cfg_key cfg_keys[] = {
    /* model: nanoGPT GPT-2 style */
    KINT("model.n_layer", n_layer, "4", 1, 128, "transformer blocks; each has 2 hyper-connected sublayers (attention, MLP)"),
    KINT("model.n_head", n_head, "4", 1, 128, "attention heads; must divide model.n_embd"),
    KINT("model.n_embd", n_embd, "128", 1, 16384, "embedding width C"),
    KINT("model.block_size", block_size, "128", 1, 65536, "sequence length T in tokens"),
    KINT("model.vocab", vocab, "256", 2, 65536, "vocabulary size: 256 for the byte-level corpora; at least the ids of an imported token corpus (GPT-2: 50304)"),
    KBOOL("model.bias", bias, "true",
          "biases in the linear layers and LayerNorms, as GPT-2; false leaves them out, as nanoGPT's training script (the paper's base model) does"),
    KENUM("model.gelu", gelu, "tanh", gelus,
          "the MLP's GELU: tanh is GPT-2's approximation, erf the exact x Phi(x) (PyTorch's nn.GELU(), which nanoGPT and the paper's base model use)"),

    /* residual: the hyper-connection method */
    KENUM("residual.method", method, "s2hc", methods,
          "residual connection: rc is the plain single-stream residual, the others are hyper-connection variants"),
    KINT("residual.n_streams", n_streams, "4", 1, 8, "residual streams n; 1 for rc, at least 2 for every other method"),
    KINT("residual.sinkhorn_iters", sinkhorn_iters, "20", 1, 1000, "mhc: Sinkhorn-Knopp iterations"),
    KENUM("residual.sinkhorn_order", sinkhorn_order, "row_col", sinkhorn_orders,
          "mhc: row_col normalises rows then columns each iteration (column sums exact; the authors' code), col_row the opposite (the mHC paper's equation)"),
    KENUM("residual.lite_offset", lite_offset, "fixed", lite_offsets,
          "mhc_lite, kromhc: logit offset of the non-identity permutations: fixed uses lite_offset_value, scaled uses lite_offset_value - ln(n!) so the identity weight stays near 1 at large n"),
    KREAL("residual.lite_offset_value", lite_offset_value, "-8", -1000, 0, 1000, 0,
          "mhc_lite, kromhc: the base logit offset of the non-identity permutations"),
    KENUM("residual.core", core, "cayley", cores,
          "s2hc, s2hc_rot, orthogonal: map from skew-symmetric to orthogonal cores: cayley (the paper) or expm (matrix exponential, reaches every rotation)"),
    KENUM("residual.init", init, "tanh4", inits,
          "s2hc: tanh4 starts Sigma at tanh(4) = 0.99933 (the paper), exact starts at H_res = I exactly"),
    KENUM("residual.proj_init", proj_init, "zero", proj_inits,
          "initial projection W of the dynamic coefficients: zero (the paper) or normal N(0, 0.02) (the authors' training script for s2hc)"),
    KENUM("residual.proj_precision", proj_precision, "fp32", proj_precisions,
          "cpu: the coefficient projection's three products (z = x'W^T, dz W', dz^T x) in fp32, or with bf16 operands and fp32 sums (by AMX tiles where the CPU has them, Intel Sapphire Rapids and later, else by AVX512_BF16 dot products; docs/performance.md items 47 and 48 say where either is faster than fp32; the rest of the step stays fp32); a cpu option: refused with run.backend: cuda, whose projection is fp32"),
    KENUM("residual.stream_precision", stream_precision, "fp32", proj_precisions,
          "the n x C residual streams stored in fp32, or in bf16 in the training steps (half the bytes of the frame's passes over them; their gradients, every sum and the per-token math stay fp32, and the coefficient projection takes W' in bf16); evals and probes run fp32 streams"),

    /* train */
    KINT("train.batch", batch, "16", 1, 65536, "sequences per micro-batch (B)"),
    KINT("train.grad_accum", grad_accum, "1", 1, 4096, "micro-batches per optimizer step"),
    KINT("train.steps", steps, "1000", 1, INT_MAX, "optimizer steps"),
    KREAL("train.lr", lr, "1e-3", 0, 1, 10, 0, "peak learning rate (after warm-up; cosine decay to train.min_lr)"),
    KREAL("train.min_lr", min_lr, "1e-4", 0, 0, 10, 0, "final learning rate of the cosine decay; at most train.lr"),
    KREAL("train.min_lr_ratio", min_lr_ratio, "0", 0, 0, 1, 0,
          "the final learning rate as a fraction of train.lr: > 0 sets train.min_lr to train.lr x this, so it follows "
          "train.lr (a learning-rate sweep); 0: off, train.min_lr gives it. A later train.min_lr (--set, a grid's "
          "set:) turns it off; one file may not set both to different final rates"),
    KINT("train.warmup", warmup, "100", 0, INT_MAX, "linear warm-up steps; at most train.steps (equal: no decay)"),
    KREAL("train.weight_decay", weight_decay, "0.1", 0, 0, 10, 0, "AdamW decoupled weight decay"),
    KBOOL("train.decay_1d", decay_1d, "false",
          "false: weight decay on 2-D weight matrices only; true: on every tensor (biases, gains, HC scalars)"),
    KREAL("train.beta1", beta1, "0.9", 0, 0, 1, 1, "AdamW first-moment decay"),
    KREAL("train.beta2", beta2, "0.95", 0, 0, 1, 1, "AdamW second-moment decay"),
    KREAL("train.eps", eps, "1e-8", 0, 1, 1, 1, "AdamW epsilon"),
    KREAL("train.clip", clip, "1.0", 0, 0, 1e6, 0, "global gradient-norm clip; 0 turns clipping off"),
    KU64("train.seed", seed, "1337", "random seed: init, data order; on the CPU the same config, seed, build and thread count give the same losses bit for bit"),
    KINT("train.eval_every", eval_every, "250", 0, INT_MAX, "steps between validation evals; 0 = only at the end"),
    KINT("train.eval_batches", eval_batches, "8", 1, 1000000, "micro-batches per validation eval"),
    KBOOL("train.eval_ood", eval_ood, "false",
          "true: every eval during training scores the out-of-domain corpora (data.ood) too, over train.eval_batches "
          "each, as /eval/ood_loss/<corpus> beside /eval/val_loss (a trajectory; each eval then costs 1 + the "
          "corpora's count); false: they are scored at the end only"),
    KINT("train.ckpt_every", ckpt_every, "500", 0, INT_MAX, "steps between checkpoints; 0 = only at the end"),
    KINT("train.log_every", log_every, "10", 1, INT_MAX, "steps between progress lines when stdout is not a terminal"),
    KINT("train.threads", threads, "0", 0, 4096, "OpenMP threads; 0 = OMP_NUM_THREADS when set, else all cores (--resume: the count the run trained with)"),
    KENUM("train.parallel", parallel, "batch", parallels,
          "cpu, 2+ threads: batch = each thread runs the whole step on its slice of the micro-batch (no barrier "
          "between ops; 5-8 % faster on 2 cores), ops = every op split over the threads; bit-identical for a given "
          "thread count, not to each other"),
    {.key = "train.init_from", MEMBER(init_from), .type = K_PATH, .def = "", .lo = 0,
     .help = "a safetensors file (s2hc export's, or a nanoGPT state_dict's) whose tensors a fresh run starts from, by "
             "name; the model's other tensors keep their init (a plain residual model's weights under hyper-connections, "
             "say); empty: none. A resumed run reads its checkpoint instead"},

    /* data */
    KPATH("data.dir", data_dir, "data", "directory of prepared token shards (`s2hc data prepare` writes it)"),
    KNAME("data.train", train_corpus, "docs", 1, "training corpus: docs, gcide or any prepared corpus name"),
    {.key = "data.ood", .field = "ood", .type = K_LIST, .off = offsetof(s2hc_config, ood),
     .size = sizeof(((s2hc_config *)0)->ood[0]), .count_off = offsetof(s2hc_config, n_ood),
     .def = "perldoc,manpages,foldoc,fortunes,kjv", .lo = 0, .hi = CFG_MAX_OOD,
     .help = "out-of-domain corpora evaluated for perplexity at the end; [] for none"},

    /* run */
    KNAME("run.name", name, "", 0,
          "run directory name under run.out; empty: derived as <method>-n<n_streams>-s<seed> (e.g. s2hc-n4-s1337)"),
    KPATH("run.out", out_dir, "runs", "parent directory of run directories"),
    KENUM("run.backend", backend, "auto", backends, "compute backend: auto picks cuda when a GPU is usable, else cpu"),
    KENUM("run.precision", precision, "fp32", precisions,
          "cuda: fp32, or bf16 mixed precision (bf16 matmuls, fp32 master weights and small-matrix math); the cpu backend trains in fp32"),

    /* probe */
    KINT("probe.every", probe_every, "100", 0, INT_MAX, "steps between probes of H_res and the streams; 0 = off"),
    KINT("probe.final_samples", final_samples, "256", 0, 1000000, "validation sequences for the final probe (0 = off)"),
};
#define N_KEYS ((int)(sizeof cfg_keys / sizeof cfg_keys[0]))


/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                         */
/* ------------------------------------------------------------------------------------ */

static const cfg_key *key_find(const char *key) {
    for (int i = 0; i < N_KEYS; i++)
        if (strcmp(cfg_keys[i].key, key) == 0) return &cfg_keys[i];
    return NULL;
}

static const char *key_leaf(const char *key) {
    const char *d = strrchr(key, '.');
    return d ? d + 1 : key;
}

static void *member(s2hc_config *c, const cfg_key *k) { return (char *)c + k->off; }
static const void *cmember(const s2hc_config *c, const cfg_key *k) { return (const char *)c + k->off; }
static int *list_count(s2hc_config *c, const cfg_key *k) { return (int *)((char *)c + k->count_off); }
static int clist_count(const s2hc_config *c, const cfg_key *k) {
    return *(const int *)((const char *)c + k->count_off);
}

/* User text made safe to quote in a message: at most max bytes (cut at a UTF-8 character
 * boundary, "..." appended), control bytes shown as '?'; shown(): 48 bytes. */
static void shown_max(char *out, size_t outlen, const char *s, size_t n, size_t max) {
    size_t m = n > max ? max : n;
    while (m < n && m > 0 && ((unsigned char)s[m] & 0xC0) == 0x80) m--;
    size_t j = 0;
    for (size_t i = 0; i < m && j + 4 < outlen; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[j++] = (ch < 0x20 || ch == 0x7F) ? '?' : (char)ch;
    }
    if (m < n && j + 4 < outlen) { memcpy(out + j, "...", 3); j += 3; }
    out[j] = '\0';
}

static void shown(char *out, size_t outlen, const char *s, size_t n) { shown_max(out, outlen, s, n, 48); }

FILE *config_messages = NULL;

/* Print the one error line: "s2hc: error: SRC[:LINE:COL]: [key 'K': ]problem". */
static void report(const char *src, const yaml_mark_t *m, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void report(const char *src, const yaml_mark_t *m, const char *key, const char *fmt, ...) {
    char line[1536], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int n = snprintf(line, sizeof line, "s2hc: error: %s", src);
    if (m && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, ":%zu:%zu", m->line + 1, m->column + 1);
    if (key && n > 0 && (size_t)n < sizeof line) {
        char k[64];
        shown(k, sizeof k, key, strlen(key));
        n += snprintf(line + n, sizeof line - (size_t)n, ": key '%s'", k);
    }
    if (n > 0 && (size_t)n < sizeof line) snprintf(line + n, sizeof line - (size_t)n, ": %s", msg);
    fflush(stdout);
    fprintf(config_messages ? config_messages : stderr, "%s\n", line);
}

/* Optimal-string-alignment distance (a transposition costs 1). Long strings: 99. */
static int edit_distance(const char *a, const char *b) {
    enum { M = 64 };
    size_t la = strlen(a), lb = strlen(b);
    if (la >= M || lb >= M) return 99;
    int d[M + 1][M + 1];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] != b[j - 1];
            int v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v) v = d[i][j - 1] + 1;
            if (d[i - 1][j - 1] + cost < v) v = d[i - 1][j - 1] + cost;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

static int typo_limit(const char *s) {
    size_t n = strlen(s);
    return n <= 3 ? 1 : (n / 3 > 2 ? (int)(n / 3) : 2);
}

/* "model.nlayer" -> "model.n_layer"; "model.lr" -> "train.lr"; "lr" -> "train.lr";
 * "modle" -> "model"; "data.data_dir" -> "data.dir" (the struct member's name).
 * Returns a key or section name, or NULL when nothing is close. */
static const char *suggest(const char *s) {
    const char *dot = strrchr(s, '.');
    const char *leaf = dot ? dot + 1 : s;
    size_t sec_len = dot ? (size_t)(dot - s) : 0;
    const char *best = NULL;
    int best_cost = 1000;
    for (int i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        const char *kleaf = key_leaf(k->key);
        size_t kleaf_len = strlen(kleaf);
        int same_section = dot && (size_t)(kleaf - 1 - k->key) == sec_len && strncmp(s, k->key, sec_len) == 0;
        int cost = 1000;
        if (same_section) {
            int d = edit_distance(leaf, kleaf);
            if (d <= typo_limit(leaf)) cost = d;
        } else if (dot) {
            int d = edit_distance(s, k->key);
            if (d <= typo_limit(s)) cost = d;
        }
        if (strcmp(leaf, kleaf) == 0 || strcmp(leaf, k->field) == 0) cost = cost < 1 ? cost : 1;
        /* "warmup_steps" -> "warmup", "batch_size" -> "batch" */
        if (kleaf_len >= 4 && strncmp(leaf, kleaf, kleaf_len) == 0 && leaf[kleaf_len] == '_' && cost > 2) cost = 2;
        if (cost < best_cost) { best_cost = cost; best = k->key; }
    }
    if (!dot)
        for (int i = 0; sections[i]; i++) {
            int d = edit_distance(s, sections[i]);
            if (d <= typo_limit(s) && d < best_cost) { best_cost = d; best = sections[i]; }
        }
    return best;
}

static int section_find(const char *s) {
    for (int i = 0; sections[i]; i++)
        if (strcmp(sections[i], s) == 0) return i;
    return -1;
}

static void join_list(const char *const *v, const char *sep, char *out, size_t outlen) {
    size_t j = 0;
    out[0] = '\0';
    for (int i = 0; v[i]; i++) {
        int w = snprintf(out + j, outlen - j, "%s%s", i ? sep : "", v[i]);
        if (w < 0 || (size_t)w >= outlen - j) break;
        j += (size_t)w;
    }
}

/* Shortest "%.*g" that reads back to exactly v; no exponent for moderate magnitudes
 * (10, not 1e+01). */
static void shortest_g(double v, char *buf, size_t n) {
    int moderate = fabs(v) >= 1e-4 && fabs(v) < 1e15;
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, n, "%.*g", p, v);
        if (strtod(buf, NULL) == v && !(moderate && strchr(buf, 'e'))) return;
    }
    snprintf(buf, n, "%.17g", v);
}

/* shortest_g, always with a '.' so that every YAML reader (PyYAML included) sees a
 * float: 0.001, 1.0e-08, 1.0, -8.0. */
static void fmt_real(double v, char *buf, size_t n) {
    shortest_g(v, buf, n);
    if (!isfinite(v) || strchr(buf, '.')) return;
    char *e = strchr(buf, 'e');
    char tail[32] = "";
    if (e) { snprintf(tail, sizeof tail, "%s", e); *e = '\0'; }
    size_t l = strlen(buf);
    snprintf(buf + l, n - l, ".0%s", tail);
}

/* The allowed range of a numeric key, as text: "1..128", ">= 0", "(0, 10]". */
static void range_text(const cfg_key *k, char *buf, size_t n) {
    if (k->type == K_INT) {
        if (k->hi >= (double)INT_MAX) snprintf(buf, n, ">= %d", (int)k->lo);
        else snprintf(buf, n, "%d..%d", (int)k->lo, (int)k->hi);
    } else if (k->type == K_REAL) {
        char a[40], b[40];
        shortest_g(k->lo, a, sizeof a);
        shortest_g(k->hi, b, sizeof b);
        snprintf(buf, n, "%c%s, %s%c", k->lo_open ? '(' : '[', a, b, k->hi_open ? ')' : ']');
    } else if (k->type == K_U64) {
        snprintf(buf, n, "0..%" PRIu64, UINT64_MAX);
    } else {
        buf[0] = '\0';
    }
}

/* Problem with a text value for a string member, or NULL: NUL bytes, invalid UTF-8, or
 * characters a YAML file cannot hold literally (control characters, line separators),
 * so that config_to_yaml can always write it back. */
static const char *text_problem(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned char b = (unsigned char)s[i];
        uint32_t cp;
        size_t len;
        if (b == 0) return "contains a NUL byte";
        if (b < 0x80) { cp = b; len = 1; }
        else if ((b & 0xE0) == 0xC0) { cp = b & 0x1F; len = 2; }
        else if ((b & 0xF0) == 0xE0) { cp = b & 0x0F; len = 3; }
        else if ((b & 0xF8) == 0xF0) { cp = b & 0x07; len = 4; }
        else return "is not valid UTF-8";
        if (i + len > n) return "is not valid UTF-8";
        for (size_t j = 1; j < len; j++) {
            unsigned char cb = (unsigned char)s[i + j];
            if ((cb & 0xC0) != 0x80) return "is not valid UTF-8";
            cp = (cp << 6) | (cb & 0x3F);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return "is not valid UTF-8";
        if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF ||
            cp == 0xFFFE || cp == 0xFFFF)
            return "contains a control character";
        i += len;
    }
    return NULL;
}

/* Names (run.name, corpora) become directory and file names: keep them tame. */
static int name_ok(const char *s) {
    if (s[0] == '.' || s[0] == '-') return 0;
    for (const char *p = s; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.+-", *p)) return 0;
    return 1;
}
#define NAME_RULE "use letters, digits and _ . + - (not starting with . or -)"

int config_name_check(const char *s, char *err, size_t errlen) {
    size_t n = strlen(s);
    if (n == 0) snprintf(err, errlen, "must not be empty");
    else if (n >= CFG_STR) snprintf(err, errlen, "'%.40s...' is too long: %zu bytes, at most %d", s, n, CFG_STR - 1);
    else if (!name_ok(s)) snprintf(err, errlen, "'%s' is not a valid name: %s", s, NAME_RULE);
    else return 0;
    return -1;
}

/* ------------------------------------------------------------------------------------ */
/* Checking one key's stored value (used after every set and by config_validate)        */
/* ------------------------------------------------------------------------------------ */

/* "V is out of range: must be in 1..128"; an open-ended range says ">= 1", or, for a V
 * above it, its bound INT_MAX. Returns -1. */
static int int_range_error(const cfg_key *k, const char *v, int above, char *err, size_t errlen) {
    char r[64];
    range_text(k, r, sizeof r);
    if (above && k->hi >= (double)INT_MAX) snprintf(err, errlen, "%s is out of range: must be at most %d", v, INT_MAX);
    else snprintf(err, errlen, "%s is out of range: must be %s%s", v, k->hi >= (double)INT_MAX ? "" : "in ", r);
    return -1;
}

/* Returns 0, or -1 with the problem in err. */
static int check_key(const s2hc_config *c, const cfg_key *k, char *err, size_t errlen) {
    char r[64], v[64];
    switch (k->type) {
    case K_INT: {
        int x = *(const int *)cmember(c, k);
        if (x < k->lo || x > k->hi) {
            snprintf(v, sizeof v, "%d", x);
            return int_range_error(k, v, x > k->hi, err, errlen);
        }
        return 0;
    }
    case K_BOOL: {
        int x = *(const int *)cmember(c, k);
        if (x != 0 && x != 1) { snprintf(err, errlen, "must be true or false (it is %d)", x); return -1; }
        return 0;
    }
    case K_U64:
        return 0;
    case K_REAL: {
        double x = *(const double *)cmember(c, k);
        int bad = !isfinite(x) || x < k->lo || x > k->hi || (k->lo_open && x == k->lo) || (k->hi_open && x == k->hi);
        if (bad) {
            range_text(k, r, sizeof r);
            shortest_g(x, v, sizeof v);
            snprintf(err, errlen, "%s is out of range: must be in %s", v, r);
            return -1;
        }
        return 0;
    }
    case K_ENUM:
    case K_NAME:
    case K_PATH: {
        const char *s = cmember(c, k);
        size_t n = strnlen(s, k->size);
        if (n == k->size) { snprintf(err, errlen, "value is not terminated within %zu bytes", k->size); return -1; }
        const char *tp = text_problem(s, n);
        shown(v, sizeof v, s, n);
        if (tp) { snprintf(err, errlen, "'%s' %s", v, tp); return -1; }
        if (k->type == K_ENUM) {
            for (int i = 0; k->allowed[i]; i++)
                if (strcmp(s, k->allowed[i]) == 0) return 0;
            char all[256];
            join_list(k->allowed, ", ", all, sizeof all);
            snprintf(err, errlen, "'%s' is not one of: %s", v, all);
            return -1;
        }
        if (n < (size_t)k->lo) { snprintf(err, errlen, "must not be empty"); return -1; }
        if (k->type == K_NAME && n && !name_ok(s)) {
            snprintf(err, errlen, "'%s' is not a valid name: %s", v, NAME_RULE);
            return -1;
        }
        return 0;
    }
    case K_LIST: {
        int cnt = clist_count(c, k);
        if (cnt < 0 || cnt > (int)k->hi) {
            snprintf(err, errlen, "%d items: at most %d allowed", cnt, (int)k->hi);
            return -1;
        }
        const char *items = cmember(c, k);
        for (int i = 0; i < cnt; i++) {
            const char *s = items + (size_t)i * k->size;
            size_t n = strnlen(s, k->size);
            if (n == k->size) { snprintf(err, errlen, "item %d is not terminated within %zu bytes", i + 1, k->size); return -1; }
            shown(v, sizeof v, s, n);
            if (n == 0) { snprintf(err, errlen, "item %d is empty", i + 1); return -1; }
            if (!name_ok(s)) { snprintf(err, errlen, "'%s' is not a valid name: %s", v, NAME_RULE); return -1; }
            for (int j = 0; j < i; j++)
                if (strcmp(s, items + (size_t)j * k->size) == 0) {
                    snprintf(err, errlen, "'%s' is listed twice", v);
                    return -1;
                }
        }
        return 0;
    }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Setting one key from text                                                             */
/* ------------------------------------------------------------------------------------ */

/* A scalar as YAML gave it: its bytes and whether it was plain (unquoted). */
typedef struct {
    const char *s;
    size_t n;
    int plain;
} scalar_t;

static int scalar_is_null(scalar_t v) {
    if (!v.plain) return 0;
    return v.n == 0 || (v.n == 1 && v.s[0] == '~') ||
           (v.n == 4 && (!memcmp(v.s, "null", 4) || !memcmp(v.s, "Null", 4) || !memcmp(v.s, "NULL", 4)));
}

static int scalar_is(scalar_t v, const char *word) { return v.n == strlen(word) && memcmp(v.s, word, v.n) == 0; }

/* "expected an integer, got 'abc'" / "... got nothing" / "... got the quoted string "5"". */
static int type_error(scalar_t v, const char *expected, char *err, size_t errlen) {
    char sv[64];
    shown(sv, sizeof sv, v.s, v.n);
    if (scalar_is_null(v)) snprintf(err, errlen, "expected %s, got nothing", expected);
    else if (!v.plain) snprintf(err, errlen, "expected %s, got the quoted string \"%s\"", expected, sv);
    else snprintf(err, errlen, "expected %s, got '%s'", expected, sv);
    return -1;
}

/* Digits with an optional sign (signs: "+-", "+" or ""). Copies into buf as a C string. */
static int integer_text(scalar_t v, const char *signs, char *buf, size_t buflen) {
    if (!v.plain || v.n == 0 || v.n >= buflen) return 0;
    size_t i = 0;
    if (strchr(signs, v.s[0]) && v.s[0]) i = 1;
    if (i == v.n) return 0;
    for (; i < v.n; i++)
        if (!isdigit((unsigned char)v.s[i])) return 0;
    memcpy(buf, v.s, v.n);
    buf[v.n] = '\0';
    return 1;
}

/* Store a string into a fixed buffer (zero-filled so structs compare with memcmp). */
static int store_text(char *dst, size_t size, scalar_t v, char *err, size_t errlen) {
    char sv[64];
    const char *tp = text_problem(v.s, v.n);
    shown(sv, sizeof sv, v.s, v.n);
    if (tp) { snprintf(err, errlen, "'%s' %s", sv, tp); return -1; }
    if (v.n >= size) {
        snprintf(err, errlen, "'%s' is too long: %zu bytes, at most %zu", sv, v.n, size - 1);
        return -1;
    }
    memset(dst, 0, size);
    memcpy(dst, v.s, v.n);
    return 0;
}

/* Set a list key from its items. On error returns the index of the bad item (or -1 for
 * the list as a whole) through *bad. */
static int set_list(s2hc_config *c, const cfg_key *k, const scalar_t *items, int n, char *err, size_t errlen,
                    int *bad) {
    *bad = -1;
    if (n > (int)k->hi) {
        snprintf(err, errlen, "too many items: at most %d allowed", (int)k->hi);
        return -1;
    }
    char *dst = member(c, k);
    memset(dst, 0, (size_t)k->hi * k->size);
    *list_count(c, k) = 0;
    for (int i = 0; i < n; i++) {
        *bad = i;
        if (scalar_is_null(items[i]) || items[i].n == 0) {
            snprintf(err, errlen, "item %d of the list is empty", i + 1);
            return -1;
        }
        if (store_text(dst + (size_t)i * k->size, k->size, items[i], err, errlen)) return -1;
        *list_count(c, k) = i + 1;
        if (check_key(c, k, err, errlen)) return -1;
    }
    *bad = -1;
    return 0;
}

/* Split a plain "a, b,c" scalar into items (at most max). Returns the count, or max + 1
 * when there are more. A null scalar is the empty list. */
static int split_commas(scalar_t v, scalar_t *items, int max) {
    if (scalar_is_null(v)) return 0;
    int n = 0;
    size_t i = 0;
    for (;;) {
        size_t j = i;
        while (j < v.n && v.s[j] != ',') j++;
        size_t a = i, b = j;
        while (a < b && (v.s[a] == ' ' || v.s[a] == '\t')) a++;
        while (b > a && (v.s[b - 1] == ' ' || v.s[b - 1] == '\t')) b--;
        if (n == max) return max + 1;
        items[n++] = (scalar_t){v.s + a, b - a, 1};
        if (j >= v.n) break;
        i = j + 1;
    }
    return n;
}

/* Parse one scalar into key k (any type but K_LIST). Returns 0, or -1 with err. */
static int set_scalar(s2hc_config *c, const cfg_key *k, scalar_t v, char *err, size_t errlen) {
    char buf[512], r[64], sv[64]; /* buf: a number's digits (3e-4's exact value has 60) */
    shown(sv, sizeof sv, v.s, v.n);
    switch (k->type) {
    case K_INT: {
        if (!integer_text(v, "+-", buf, sizeof buf)) return type_error(v, "an integer", err, errlen);
        errno = 0;
        long long x = strtoll(buf, NULL, 10);
        if (errno == ERANGE || (double)x < k->lo || (double)x > k->hi)
            return int_range_error(k, sv, errno == ERANGE ? buf[0] != '-' : (double)x > k->hi, err, errlen);
        *(int *)member(c, k) = (int)x;
        break;
    }
    case K_BOOL: {
        int t = v.plain && (scalar_is(v, "true") || scalar_is(v, "True") || scalar_is(v, "TRUE") || scalar_is(v, "1"));
        int f = v.plain && (scalar_is(v, "false") || scalar_is(v, "False") || scalar_is(v, "FALSE") || scalar_is(v, "0"));
        if (!t && !f) return type_error(v, "true or false", err, errlen);
        *(int *)member(c, k) = t;
        break;
    }
    case K_U64: {
        if (!integer_text(v, "+", buf, sizeof buf)) return type_error(v, "a non-negative integer", err, errlen);
        errno = 0;
        unsigned long long x = strtoull(buf, NULL, 10);
        if (errno == ERANGE) {
            range_text(k, r, sizeof r);
            snprintf(err, errlen, "%s is out of range: must be in %s", sv, r);
            return -1;
        }
        *(uint64_t *)member(c, k) = (uint64_t)x;
        break;
    }
    case K_REAL: {
        if (!v.plain || v.n == 0 || v.n >= sizeof buf || isspace((unsigned char)v.s[0]))
            return type_error(v, "a number", err, errlen);
        memcpy(buf, v.s, v.n);
        buf[v.n] = '\0';
        char *end;
        errno = 0;
        double x = strtod(buf, &end);
        if (end == buf || *end != '\0') return type_error(v, "a number", err, errlen);
        if (!isfinite(x) && errno != ERANGE) return type_error(v, "a finite number", err, errlen);
        if (strspn(buf, "0123456789+-.eE") != v.n) return type_error(v, "a decimal number", err, errlen); /* 0x1p-3 */
        if (errno == ERANGE && x == 0) { /* underflow to 0; subnormals are kept */
            snprintf(err, errlen, "%s is too small for a double (it would be 0: write 0)", sv);
            return -1;
        }
        if (errno == ERANGE && isinf(x)) {
            range_text(k, r, sizeof r);
            snprintf(err, errlen, "%s is out of range: must be in %s", sv, r);
            return -1;
        }
        *(double *)member(c, k) = x == 0 ? 0.0 : x; /* -0 is 0 */
        break;
    }
    case K_ENUM:
        if (scalar_is_null(v)) {
            char all[256];
            join_list(k->allowed, ", ", all, sizeof all);
            snprintf(err, errlen, "expected one of: %s, got nothing", all);
            return -1;
        }
        /* fall through */
    case K_NAME:
    case K_PATH:
        if (scalar_is_null(v)) v.n = 0;
        if (store_text(member(c, k), k->size, v, err, errlen)) return -1;
        break;
    case K_LIST: {
        scalar_t items[CFG_MAX_OOD + 1];
        int bad, n = split_commas(v, items, CFG_MAX_OOD);
        return set_list(c, k, items, n, err, errlen, &bad);
    }
    }
    return check_key(c, k, err, errlen);
}

/* ------------------------------------------------------------------------------------ */
/* Reading YAML                                                                          */
/* ------------------------------------------------------------------------------------ */

static scalar_t node_scalar(const yaml_node_t *n) {
    return (scalar_t){(const char *)n->data.scalar.value, n->data.scalar.length,
                      n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE};
}

static int node_is_null(const yaml_node_t *n) { return n->type == YAML_SCALAR_NODE && scalar_is_null(node_scalar(n)); }

static const char *node_kind(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a value";
}

/* Set key k from a YAML node. Returns 0, or -1 with err and the position of the fault. */
static int set_from_node(s2hc_config *c, const cfg_key *k, yaml_document_t *d, yaml_node_t *v, char *err,
                         size_t errlen, yaml_mark_t *where) {
    *where = v->start_mark;
    if (k->type != K_LIST) {
        if (v->type != YAML_SCALAR_NODE) {
            snprintf(err, errlen, "expected a single value, got %s", node_kind(v));
            return -1;
        }
        return set_scalar(c, k, node_scalar(v), err, errlen);
    }
    if (v->type == YAML_SCALAR_NODE) return set_scalar(c, k, node_scalar(v), err, errlen);
    if (v->type == YAML_MAPPING_NODE) {
        snprintf(err, errlen, "expected a list of names, got a mapping");
        return -1;
    }
    int n = (int)(v->data.sequence.items.top - v->data.sequence.items.start);
    if (n > (int)k->hi) {
        snprintf(err, errlen, "too many items: at most %d allowed", (int)k->hi);
        return -1;
    }
    scalar_t items[CFG_MAX_OOD];
    for (int i = 0; i < n; i++) {
        yaml_node_t *it = yaml_document_get_node(d, v->data.sequence.items.start[i]);
        if (it->type != YAML_SCALAR_NODE) {
            *where = it->start_mark;
            snprintf(err, errlen, "expected a list of names, got %s as item %d", node_kind(it), i + 1);
            return -1;
        }
        items[i] = node_scalar(it);
    }
    int bad;
    if (set_list(c, k, items, n, err, errlen, &bad)) {
        if (bad >= 0) *where = yaml_document_get_node(d, v->data.sequence.items.start[bad])->start_mark;
        return -1;
    }
    return 0;
}

/* Where each key was first set in the current document (duplicate detection). */
typedef struct {
    int set;
    yaml_mark_t mark;
} seen_t;

/* A mapping key as a C string (keys are short names; anything odd is just unknown). */
static int key_text(const yaml_node_t *kn, char *buf, size_t buflen) {
    if (kn->type != YAML_SCALAR_NODE) return -1;
    scalar_t s = node_scalar(kn);
    if (s.n >= buflen) s.n = buflen - 1; /* too long for any key: stays unknown */
    memcpy(buf, s.s, s.n);
    buf[s.n] = '\0';
    for (size_t i = 0; i < s.n; i++)
        if (buf[i] == '\0') buf[i] = '?';
    return 0;
}

static void unknown_key(const char *src, const yaml_mark_t *m, const char *full, int is_section) {
    const char *s = suggest(full);
    char all[128];
    if (is_section) {
        join_list(sections, ", ", all, sizeof all);
        /* grid files' top-level keys that are no config section (grid_load.c's list, less
         * set/name/out, which read like a typo as much as a grid) */
        static const char *const grid_only[] = {"sweep", "preset", "base", "include", "exclude",
                                                "override", "slurm", "launch", NULL};
        for (int i = 0; grid_only[i]; i++)
            if (!strcmp(full, grid_only[i])) {
                char q[4 * 1024 + 3]; /* the command to paste: the file one shell word */
                const char *w = sh_word(q, sizeof q, src);
                report(src, m, full, "a grid file's key, not a config section: run a grid with `s2hc grid %s` "
                       "(docs/grids.md); the config sections are %s", *w ? w : src, all);
                return;
            }
        if (s) report(src, m, full, "unknown section (did you mean '%s'?); the sections are %s", s, all);
        else report(src, m, full, "unknown section; the sections are %s", all);
    } else {
        if (s) report(src, m, full, "unknown key (did you mean '%s'?)", s);
        else report(src, m, full, "unknown key (`s2hc help config` lists them)");
    }
}

/* A stored config's key (or section) that this build does not know: its name added to
 * the list `ignored` (names separated by ", ", cut at ilen with "..."). */
static void note_ignored(char *ignored, size_t ilen, const char *full) {
    const size_t n = strlen(ignored);
    if (n + 4 >= ilen) return; /* full: already ends in "..." */
    int w = snprintf(ignored + n, ilen - n, "%s%s", n ? ", " : "", full);
    if (w < 0 || (size_t)w >= ilen - n) snprintf(ignored + ilen - 4, 4, "...");
}

/* ignored: NULL for a config someone wrote (an unknown key is an error), else a stored
 * config's (run.h5, ckpt.h5): a key this build does not know is a newer build's, listed
 * in ignored and skipped (docs/runfile.md, "Files of other versions"). */
static int apply_key(s2hc_config *c, yaml_document_t *d, const char *full, yaml_node_t *kn, yaml_node_t *vn,
                     seen_t *seen, const char *src, char *ignored, size_t ilen) {
    const cfg_key *k = key_find(full);
    if (!k && ignored) {
        note_ignored(ignored, ilen, full);
        return 0;
    }
    if (!k) {
        unknown_key(src, &kn->start_mark, full, 0);
        return 2;
    }
    seen_t *s = &seen[k - cfg_keys];
    if (s->set) {
        report(src, &kn->start_mark, full, "duplicate key (first set at %zu:%zu)", s->mark.line + 1, s->mark.column + 1);
        return 2;
    }
    s->set = 1;
    s->mark = kn->start_mark;
    char err[512];
    yaml_mark_t where;
    if (set_from_node(c, k, d, vn, err, sizeof err, &where)) {
        report(src, &where, full, "%s", err);
        return 2;
    }
    return 0;
}

/* Apply a whole document: a mapping of sections, each a mapping of keys. A dotted key
 * at the top level ("train.lr: 3e-4") is accepted as well. */
static int apply_document(s2hc_config *c, yaml_document_t *d, const char *src, char *ignored, size_t ilen) {
    yaml_node_t *root = yaml_document_get_root_node(d);
    if (!root || node_is_null(root)) return 0;
    if (root->type != YAML_MAPPING_NODE) {
        char all[128];
        join_list(sections, ", ", all, sizeof all);
        report(src, &root->start_mark, NULL, "expected a mapping of sections (%s), got %s", all, node_kind(root));
        return 2;
    }
    seen_t seen[N_KEYS];
    seen_t sec_seen[sizeof sections / sizeof sections[0]];
    memset(seen, 0, sizeof seen);
    memset(sec_seen, 0, sizeof sec_seen);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = yaml_document_get_node(d, p->key), *vn = yaml_document_get_node(d, p->value);
        char name[128], full[256];
        if (key_text(kn, name, sizeof name)) {
            report(src, &kn->start_mark, NULL, "expected a section name, got %s", node_kind(kn));
            return 2;
        }
        if (strchr(name, '.')) {
            if (apply_key(c, d, name, kn, vn, seen, src, ignored, ilen)) return 2;
            continue;
        }
        int si = section_find(name);
        if (si < 0 && ignored) {
            note_ignored(ignored, ilen, name);
            continue;
        }
        if (si < 0) {
            unknown_key(src, &kn->start_mark, name, 1);
            return 2;
        }
        if (sec_seen[si].set) {
            report(src, &kn->start_mark, name, "duplicate section (first at %zu:%zu)", sec_seen[si].mark.line + 1,
                   sec_seen[si].mark.column + 1);
            return 2;
        }
        sec_seen[si].set = 1;
        sec_seen[si].mark = kn->start_mark;
        if (node_is_null(vn)) continue;
        if (vn->type != YAML_MAPPING_NODE) {
            report(src, &vn->start_mark, name, "expected a mapping of keys, got %s", node_kind(vn));
            return 2;
        }
        for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top; q++) {
            yaml_node_t *kk = yaml_document_get_node(d, q->key), *kv = yaml_document_get_node(d, q->value);
            char leaf[128];
            if (key_text(kk, leaf, sizeof leaf)) {
                report(src, &kk->start_mark, name, "expected a key name, got %s", node_kind(kk));
                return 2;
            }
            snprintf(full, sizeof full, "%s.%s", name, leaf);
            if (apply_key(c, d, full, kk, kv, seen, src, ignored, ilen)) return 2;
        }
    }
    /* both in one file: only as config_to_yaml writes them (a grid point's config.yaml, a
       run's stored config), min_lr resolved from the ratio, or with the ratio off */
    const seen_t *a = &seen[key_find("train.min_lr") - cfg_keys], *b = &seen[key_find("train.min_lr_ratio") - cfg_keys];
    if (!ignored && a->set && b->set && c->min_lr_ratio > 0 && c->min_lr != c->lr * c->min_lr_ratio) {
        const seen_t *later = a->mark.index > b->mark.index ? a : b;
        report(src, &later->mark, later == a ? "train.min_lr" : "train.min_lr_ratio",
               "set with %s (at %zu:%zu) to another final rate: set one, train.min_lr for a fixed final rate or "
               "train.min_lr_ratio for one that follows train.lr", later == a ? "train.min_lr_ratio" : "train.min_lr",
               (later == a ? b : a)->mark.line + 1, (later == a ? b : a)->mark.column + 1);
        return 2;
    }
    return 0;
}

/* libyaml's complaint as "problem (context at L:C)", and where it happened. A reader
 * error (bad UTF-8) carries a byte offset: turn it into a line and column. */
void config_yaml_problem(const yaml_parser_t *p, const char *text, size_t len, char *buf, size_t buflen,
                           yaml_mark_t *m, int with_marks) {
    *m = p->problem_mark;
    if (p->error == YAML_MEMORY_ERROR) {
        snprintf(buf, buflen, "out of memory while parsing YAML");
        return;
    }
    const char *problem = p->problem ? p->problem : "malformed YAML";
    if (p->error == YAML_READER_ERROR) {
        size_t off = p->problem_offset < len ? p->problem_offset : len;
        m->line = m->column = 0;
        /* as libyaml counts: after a byte-order mark, CR, LF and CR LF each one break */
        for (size_t i = len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0; i < off; i++) {
            if (text[i] == '\n' || (text[i] == '\r' && (i + 1 >= len || text[i + 1] != '\n'))) {
                m->line++;
                m->column = 0;
            } else if (text[i] != '\r' && ((unsigned char)text[i] & 0xC0) != 0x80) m->column++;
        }
        if (p->problem_value >= 0) snprintf(buf, buflen, "%s (byte 0x%02x)", problem, (unsigned)p->problem_value & 0xFF);
        else snprintf(buf, buflen, "%s", problem);
        return;
    }
    if (p->context && with_marks)
        snprintf(buf, buflen, "%s (%s at %zu:%zu)", problem, p->context, p->context_mark.line + 1,
                 p->context_mark.column + 1);
    else if (p->context)
        snprintf(buf, buflen, "%s (%s)", problem, p->context);
    else
        snprintf(buf, buflen, "%s", problem);
}

/* config.h: the source text at the node's start (its anchor, then its tag) tells `!!str 1`
 * from a plain `1`, to which the document API gives the same tag. libyaml's marks count
 * characters after any byte-order mark, not bytes: at[] maps one to the other. */
const yaml_node_t *config_yaml_tagged(const yaml_document_t *d, const char *text, size_t len) {
    size_t *at = malloc_check((len + 1) * sizeof *at), nc = 0;
    for (size_t i = len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3) ? 3 : 0; i < len; i++)
        if (((unsigned char)text[i] & 0xC0) != 0x80) at[nc++] = i;
    at[nc] = len;
    const yaml_node_t *found = NULL;
    for (const yaml_node_t *n = d->nodes.start; n < d->nodes.top && !found; n++) {
        size_t i = n->start_mark.index <= nc ? at[n->start_mark.index] : len;
        if (i < len && text[i] == '&') { /* an anchor first: "&a !!str 1", or "&a # c" and the tag below */
            while (i < len && !isspace((unsigned char)text[i])) i++;
            for (;;) {
                while (i < len && isspace((unsigned char)text[i])) i++;
                if (i >= len || text[i] != '#') break;
                while (i < len && text[i] != '\n' && text[i] != '\r') i++;
            }
        }
        if (i < len && text[i] == '!') found = n;
    }
    free(at);
    return found;
}

int config_yaml_too_deep(const char *text, size_t len, int *line, int *col) {
    int depth = 0, l = 1, c = 0;
    char quote = 0;
    for (size_t i = 0; i < len; i++) {
        const char ch = text[i];
        c++;
        if (ch == '\n') { l++; c = 0; continue; }
        if (quote) {
            if (ch == '\\' && quote == '"') { i++; c++; }
            else if (ch == quote) quote = 0;
            continue;
        }
        /* a quote opens a quoted scalar only where a token starts (o'brien is plain) */
        const char prev = i ? text[i - 1] : ' ';
        if ((ch == '"' || ch == '\'') && (isspace((unsigned char)prev) || strchr("[{,:-?", prev))) quote = ch;
        else if (ch == '#' && (i == 0 || isspace((unsigned char)text[i - 1]))) {
            while (i + 1 < len && text[i + 1] != '\n') i++;
        } else if (ch == '[' || ch == '{') {
            if (++depth > CONFIG_YAML_MAX_DEPTH) {
                *line = l, *col = c;
                return 1;
            }
        } else if ((ch == ']' || ch == '}') && depth > 0) depth--;
    }
    return 0;
}

/* Parse text (one YAML document) and apply it to c. Returns 0 or 2 (reported). */
static int apply_text(s2hc_config *c, const char *text, size_t len, const char *src, char *ignored, size_t ilen) {
    yaml_parser_t p;
    yaml_document_t d;
    char problem[512];
    yaml_mark_t m;
    if (!yaml_parser_initialize(&p)) die(1, "out of memory (yaml_parser_initialize)");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING); /* a UTF-16 file is not read as one */
    int rc = 0, dl, dc;
    if (config_yaml_too_deep(text, len, &dl, &dc)) {
        m.line = (size_t)dl - 1, m.column = (size_t)dc - 1;
        report(src, &m, NULL, "values nested more than %d deep", CONFIG_YAML_MAX_DEPTH);
        yaml_parser_delete(&p);
        return 2;
    }
    if (!yaml_parser_load(&p, &d)) {
        config_yaml_problem(&p, text, len, problem, sizeof problem, &m, 1);
        report(src, &m, NULL, "%s", problem);
        yaml_parser_delete(&p);
        return 2;
    }
    int empty = yaml_document_get_root_node(&d) == NULL;
    const yaml_node_t *tagged = config_yaml_tagged(&d, text, len);
    if (tagged) {
        report(src, &tagged->start_mark, NULL, "YAML tags (!!str, !!int, ...) have no use in a config: write the value alone");
        yaml_document_delete(&d);
        yaml_parser_delete(&p);
        return 2;
    }
    rc = apply_document(c, &d, src, ignored, ilen);
    yaml_document_delete(&d);
    if (rc == 0 && !empty) {
        /* A second document (after "---") is a mistake, not something to ignore. */
        if (!yaml_parser_load(&p, &d)) {
            config_yaml_problem(&p, text, len, problem, sizeof problem, &m, 1);
            report(src, &m, NULL, "%s", problem);
            rc = 2;
        } else {
            yaml_node_t *r = yaml_document_get_root_node(&d);
            if (r) {
                report(src, &r->start_mark, NULL, "a config holds one YAML document; found a second one");
                rc = 2;
            }
            yaml_document_delete(&d);
        }
    }
    yaml_parser_delete(&p);
    return rc;
}

/* ------------------------------------------------------------------------------------ */
/* Public API                                                                            */
/* ------------------------------------------------------------------------------------ */

int config_unused_keys(const s2hc_config *c, char *buf, size_t len) {
    s2hc_config d;
    config_defaults(&d);
    const char *m = c->method;
    const int mhc = !strcmp(m, "mhc"), lite = !strcmp(m, "mhc_lite") || !strcmp(m, "kromhc");
    const int core = !strcmp(m, "s2hc") || !strcmp(m, "s2hc_rot") || !strcmp(m, "orthogonal");
    const struct { const char *key; int set, used; } k[] = {
        {"residual.sinkhorn_iters", c->sinkhorn_iters != d.sinkhorn_iters, mhc},
        {"residual.sinkhorn_order", strcmp(c->sinkhorn_order, d.sinkhorn_order) != 0, mhc},
        {"residual.lite_offset", strcmp(c->lite_offset, d.lite_offset) != 0, lite},
        {"residual.lite_offset_value", c->lite_offset_value != d.lite_offset_value, lite},
        {"residual.core", strcmp(c->core, d.core) != 0, core},
        {"residual.init", strcmp(c->init, d.init) != 0, !strcmp(m, "s2hc")},
        {"residual.proj_init", strcmp(c->proj_init, d.proj_init) != 0, strcmp(m, "rc") != 0},
    };
    int n = 0;
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        if (k[i].set && !k[i].used) {
            int w = snprintf(buf + used, len > used ? len - used : 0, "%s%s", n ? ", " : "", k[i].key);
            if (w > 0) used = used + (size_t)w < len ? used + (size_t)w : len;
            n++;
        }
    return n;
}

void config_defaults(s2hc_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        char err[256];
        if (set_scalar(c, k, (scalar_t){k->def, strlen(k->def), 1}, err, sizeof err)) {
            /* A bad default is a bug in the table above, caught by the first test. */
            fprintf(stderr, "s2hc: internal error: default of '%s': %s\n", k->key, err);
            abort();
        }
    }
}

/* "train" -> "train.batch=16": the first key of a section with its default. */
static const char *cfg_key_example(const char *section, char *buf, size_t len) {
    size_t sl = strlen(section);
    for (int i = 0; i < N_KEYS; i++)
        if (strncmp(cfg_keys[i].key, section, sl) == 0 && cfg_keys[i].key[sl] == '.') {
            snprintf(buf, len, "%s=%s", cfg_keys[i].key, cfg_keys[i].def);
            return buf;
        }
    return "section.key=value";
}

int config_set(s2hc_config *c, const char *assignment) {
    char src[640], shown_as[600];
    shown_max(shown_as, sizeof shown_as, assignment, strlen(assignment), 400); /* one line, whatever it holds */
    snprintf(src, sizeof src, "--set %s", shown_as);
    const char *eq = strchr(assignment, '=');
    if (!eq) {
        report(src, NULL, NULL, "expected KEY=VALUE, e.g. --set train.lr=3e-4");
        return 2;
    }
    char key[128];
    size_t kl = (size_t)(eq - assignment);
    while (kl > 0 && isspace((unsigned char)assignment[kl - 1])) kl--;
    if (kl == 0) {
        report(src, NULL, NULL, "expected KEY=VALUE, e.g. --set train.lr=3e-4");
        return 2;
    }
    if (kl >= sizeof key) { /* longer than any key */
        memcpy(key, assignment, sizeof key - 1);
        key[sizeof key - 1] = '\0';
        report(src, NULL, key, "unknown key (see `s2hc config`)");
        return 2;
    }
    memcpy(key, assignment, kl);
    key[kl] = '\0';
    const cfg_key *k = key_find(key);
    if (!k && section_find(key) >= 0) {
        char ex[160];
        report(src, NULL, key, "is a section: set one of its keys, e.g. --set %s", cfg_key_example(key, ex, sizeof ex));
        return 2;
    }
    if (!k) {
        unknown_key(src, NULL, key, 0);
        return 2;
    }
    /* The value is a YAML scalar (or flow list): parse it with libyaml as a document. */
    const char *val = eq + 1;
    size_t vlen = strlen(val);
    yaml_parser_t p;
    yaml_document_t d;
    char err[512];
    if (!yaml_parser_initialize(&p)) die(1, "out of memory (yaml_parser_initialize)");
    yaml_parser_set_input_string(&p, (const unsigned char *)val, vlen);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    int dl, dc;
    if (config_yaml_too_deep(val, vlen, &dl, &dc)) {
        report(src, NULL, key, "values nested more than %d deep", CONFIG_YAML_MAX_DEPTH);
        yaml_parser_delete(&p);
        return 2;
    }
    if (!yaml_parser_load(&p, &d)) {
        yaml_mark_t m;
        config_yaml_problem(&p, val, vlen, err, sizeof err, &m, 0);
        report(src, NULL, key, "cannot parse the value: %s", err);
        yaml_parser_delete(&p);
        return 2;
    }
    s2hc_config tmp;
    memcpy(&tmp, c, sizeof tmp);
    yaml_node_t *v = yaml_document_get_root_node(&d);
    int rc = 0;
    yaml_mark_t where;
    if (config_yaml_tagged(&d, val, vlen)) {
        snprintf(err, sizeof err, "YAML tags (!!str, !!int, ...) have no use in a value: write the value alone");
        rc = -1;
    } else if (v) rc = set_from_node(&tmp, k, &d, v, err, sizeof err, &where);
    else rc = set_scalar(&tmp, k, (scalar_t){"", 0, 1}, err, sizeof err);
    yaml_document_delete(&d);
    if (rc == 0 && v) { /* "a\n---\nb": the second document would be ignored */
        if (!yaml_parser_load(&p, &d)) {
            yaml_mark_t m;
            config_yaml_problem(&p, val, vlen, err, sizeof err, &m, 0);
            rc = -1;
        } else {
            if (yaml_document_get_root_node(&d)) {
                snprintf(err, sizeof err, "the value holds more than one YAML document");
                rc = -1;
            }
            yaml_document_delete(&d);
        }
    }
    yaml_parser_delete(&p);
    if (rc) {
        report(src, NULL, key, "%s", err);
        return 2;
    }
    if (k->off == offsetof(s2hc_config, min_lr)) tmp.min_lr_ratio = 0; /* a later layer's final rate, outright */
    memcpy(c, &tmp, sizeof tmp);
    return 0;
}

static int load_config(s2hc_config *c, const char *path, const char *const *sets, int nsets, int validate) {
    s2hc_config tmp;
    config_defaults(&tmp);
    if (path) {
        size_t len = 0;
        char *text = read_text_file(path, &len);
        if (!text) {
            const char *why = strerror(errno);
            fflush(stdout);
            fprintf(config_messages ? config_messages : stderr, "s2hc: error: %s: cannot read: %s\n", path, why);
            return 2;
        }
        int rc = apply_text(&tmp, text, len, path, NULL, 0);
        free(text);
        if (rc) return rc;
    }
    for (int i = 0; i < nsets; i++)
        if (config_set(&tmp, sets[i])) return 2;
    config_resolve(&tmp);
    char src[600];
    if (nsets > 0) snprintf(src, sizeof src, "%s with --set", path ? path : "defaults");
    else snprintf(src, sizeof src, "%s", path ? path : "defaults");
    if (validate && config_validate(&tmp, src)) return 2;
    memcpy(c, &tmp, sizeof tmp);
    return 0;
}

int config_load(s2hc_config *c, const char *path, const char *const *sets, int nsets) {
    return load_config(c, path, sets, nsets, 1);
}

int config_load_base(s2hc_config *c, const char *path) { return load_config(c, path, NULL, 0, 0); }

int config_from_yaml_text(s2hc_config *c, const char *text, const char *source) {
    s2hc_config tmp;
    config_defaults(&tmp);
    if (!source) source = "config text";
    char ignored[400] = "";
    if (apply_text(&tmp, text, strlen(text), source, ignored, sizeof ignored)) return 2;
    config_resolve(&tmp);
    if (config_validate(&tmp, source)) return 2;
    if (ignored[0]) { /* a newer build's keys, at values that keep what this build does: a run
                         that sets one otherwise has a higher format_version, refused first */
        fflush(stdout);
        fprintf(config_messages ? config_messages : stderr,
                "s2hc: warning: %s: ignoring %s, unknown to this build (a newer s2hc's; docs/runfile.md, \"Files "
                "of other versions\")\n", source, ignored);
    }
    memcpy(c, &tmp, sizeof tmp);
    return 0;
}

void config_resolve(s2hc_config *c) {
    if (c->min_lr_ratio > 0) c->min_lr = c->lr * c->min_lr_ratio;
}

int config_key_known(const char *key) { return key && key_find(key) != NULL; }

int config_check_ood(const s2hc_config *c, const char *source) {
    for (int i = 0; i < c->n_ood; i++)
        if (strcmp(c->ood[i], c->train_corpus) == 0) { /* it would be scored on the text it trained on */
            report(source ? source : "config", NULL, "data.ood", "'%s' is the training corpus (data.train); an "
                   "out-of-domain corpus must be another", c->ood[i]);
            return 2;
        }
    return 0;
}

int config_validate(const s2hc_config *c, const char *source) {
    if (!source) source = "config";
    char err[512];
    /* Each key on its own: a struct filled by code gets the same checks as a file. */
    for (int i = 0; i < N_KEYS; i++)
        if (check_key(c, &cfg_keys[i], err, sizeof err)) {
            report(source, NULL, cfg_keys[i].key, "%s", err);
            return 2;
        }
    if (c->n_embd % c->n_head != 0) {
        report(source, NULL, "model.n_embd", "%d is not divisible by model.n_head (%d)", c->n_embd, c->n_head);
        return 2;
    }
    int rc_method = strcmp(c->method, "rc") == 0;
    if (rc_method && c->n_streams != 1) {
        report(source, NULL, "residual.n_streams",
               "residual.method rc is the single-stream residual: needs n_streams 1, got %d", c->n_streams);
        return 2;
    }
    if (!rc_method && c->n_streams < 2) {
        report(source, NULL, "residual.n_streams", "residual.method %s needs at least 2 streams, got %d (use rc for 1)",
               c->method, c->n_streams);
        return 2;
    }
    if (c->min_lr > c->lr) {
        char a[40], b[40];
        shortest_g(c->min_lr, a, sizeof a);
        shortest_g(c->lr, b, sizeof b);
        report(source, NULL, "train.min_lr", "%s is larger than train.lr (%s)", a, b);
        return 2;
    }
    if (c->warmup > c->steps) {
        report(source, NULL, "train.warmup", "%d is larger than train.steps (%d)", c->warmup, c->steps);
        return 2;
    }
    return 0;
}

/* Quote a string for YAML unless it is a plain word no reader can mistake for a number,
 * a boolean or null. */
static void put_string(FILE *f, const char *s, size_t size) {
    static const char *const special[] = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", NULL};
    size_t n = strnlen(s, size); /* never past the member, even in a struct that fails validation */
    int plain = n > 0 && (isalpha((unsigned char)s[0]) || s[0] == '/' || s[0] == '_');
    for (size_t i = 0; plain && i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("_./+-", s[i])) plain = 0;
    for (int i = 0; plain && special[i]; i++)
        if (strlen(special[i]) == n && strncasecmp(s, special[i], n) == 0) plain = 0;
    if (plain) { fwrite(s, 1, n, f); return; }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"' || s[i] == '\\') fputc('\\', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

/* One key's value as YAML (what config_to_yaml writes after "key: "). */
static void put_value(FILE *f, const s2hc_config *c, const cfg_key *k) {
    char buf[64];
    switch (k->type) {
    case K_INT: fprintf(f, "%d", *(const int *)cmember(c, k)); break;
    case K_BOOL: fputs(*(const int *)cmember(c, k) ? "true" : "false", f); break;
    case K_U64: fprintf(f, "%" PRIu64, *(const uint64_t *)cmember(c, k)); break;
    case K_REAL: fmt_real(*(const double *)cmember(c, k), buf, sizeof buf); fputs(buf, f); break;
    case K_ENUM:
    case K_NAME:
    case K_PATH: put_string(f, cmember(c, k), k->size); break;
    case K_LIST: {
        const char *items = cmember(c, k);
        fputc('[', f);
        int cnt = clist_count(c, k);
        cnt = cnt < 0 ? 0 : cnt > (int)k->hi ? (int)k->hi : cnt;
        for (int i = 0; i < cnt; i++) {
            if (i) fputs(", ", f);
            put_string(f, items + (size_t)i * k->size, k->size);
        }
        fputc(']', f);
        break;
    }
    }
}

char *config_to_yaml(const s2hc_config *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die(1, "out of memory (open_memstream)");
    const char *section = "";
    size_t sec_len = 0;
    for (int i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        const char *leaf = key_leaf(k->key);
        size_t sl = (size_t)(leaf - 1 - k->key);
        if (sl != sec_len || strncmp(section, k->key, sl) != 0) {
            fprintf(f, "%.*s:\n", (int)sl, k->key);
            section = k->key;
            sec_len = sl;
        }
        fprintf(f, "  %s: ", leaf);
        put_value(f, c, k);
        fputc('\n', f);
    }
    if (fclose(f) != 0 || !buf) die(1, "out of memory (config_to_yaml)");
    return buf;
}

void config_run_name(const s2hc_config *c, char *buf, size_t len) {
    if (c->name[0]) snprintf(buf, len, "%s", c->name);
    else snprintf(buf, len, "%s-n%d-s%" PRIu64, c->method, c->n_streams, c->seed);
}

static const char *type_name(const cfg_key *k) {
    switch (k->type) {
    case K_INT: return "int";
    case K_BOOL: return "bool";
    case K_U64: return "uint64";
    case K_REAL: return "float";
    case K_ENUM: return "enum";
    case K_NAME: return "name";
    case K_PATH: return "path";
    case K_LIST: return "list";
    }
    return "?";
}

/* Default as it would be written in YAML, and the allowed values or range. */
static void key_default_text(const cfg_key *k, char *buf, size_t n) {
    s2hc_config d;
    config_defaults(&d);
    char *p = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&p, &len);
    if (!f) die(1, "out of memory (open_memstream)");
    put_value(f, &d, k);
    fclose(f);
    snprintf(buf, n, "%s", p ? p : "");
    free(p);
}

static void key_allowed_text(const cfg_key *k, char *buf, size_t n) {
    switch (k->type) {
    case K_ENUM: join_list(k->allowed, " | ", buf, n); break;
    case K_BOOL: snprintf(buf, n, "true | false"); break;
    case K_NAME: snprintf(buf, n, "%s[A-Za-z0-9_.+-], < %zu bytes", k->lo > 0 ? "non-empty, " : "", k->size); break;
    case K_PATH: snprintf(buf, n, "%s< %zu bytes", k->lo > 0 ? "non-empty, " : "", k->size); break;
    case K_LIST: snprintf(buf, n, "up to %d names", (int)k->hi); break;
    default: range_text(k, buf, n); break;
    }
}

void config_print_schema(FILE *f) {
    fprintf(f, "Configuration keys (YAML sections, or --set section.key=value):\n");
    fprintf(f, "  %-27s %-7s %-12s %s\n", "KEY", "TYPE", "DEFAULT", "ALLOWED");
    const char *prev = "";
    size_t prev_len = 0;
    for (int i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        size_t sl = (size_t)(key_leaf(k->key) - 1 - k->key);
        if (sl != prev_len || strncmp(prev, k->key, sl) != 0) {
            fprintf(f, "\n");
            prev = k->key;
            prev_len = sl;
        }
        char def[256], allowed[256];
        key_default_text(k, def, sizeof def);
        key_allowed_text(k, allowed, sizeof allowed);
        if (strlen(def) > 12) fprintf(f, "  %-27s %-7s %s\n  %-27s %-7s %-12s %s\n", k->key, type_name(k), def, "", "", "", allowed);
        else fprintf(f, "  %-27s %-7s %-12s %s\n", k->key, type_name(k), def, allowed);
        /* help, wrapped at about 88 columns under the key */
        const char *h = k->help;
        while (*h) {
            size_t w = strlen(h);
            if (w > 80) {
                w = 80;
                while (w > 0 && h[w] != ' ') w--;
                if (w == 0) w = strlen(h);
            }
            fprintf(f, "      %.*s\n", (int)w, h);
            h += w;
            while (*h == ' ') h++;
        }
    }
}

/* Text in a markdown table cell: '|' would end the cell, '<' would open an HTML tag. */
static void md_cell(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '|') fputs("\\|", f);
        else if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else fputc(*s, f);
    }
}

void config_print_schema_markdown(FILE *f) {
    const char *prev = "";
    size_t prev_len = 0;
    for (int i = 0; i < N_KEYS; i++) {
        const cfg_key *k = &cfg_keys[i];
        size_t sl = (size_t)(key_leaf(k->key) - 1 - k->key);
        if (sl != prev_len || strncmp(prev, k->key, sl) != 0) {
            fprintf(f, "%s### `%.*s`\n\n", i ? "\n" : "", (int)sl, k->key);
            fprintf(f, "| key | type | default | allowed | meaning |\n|---|---|---|---|---|\n");
            prev = k->key;
            prev_len = sl;
        }
        char def[256], allowed[256];
        key_default_text(k, def, sizeof def);
        key_allowed_text(k, allowed, sizeof allowed);
        fprintf(f, "| `%s` | %s | `%s` | ", k->key, type_name(k), def);
        md_cell(f, allowed);
        fputs(" | ", f);
        md_cell(f, k->help);
        fputs(" |\n", f);
    }
}
