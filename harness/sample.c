/* sample.c: text from a trained model, token by token; `s2hc sample RUN_DIR`.
 *
 * The models are byte-level: a prompt's bytes are its tokens and every token drawn is a
 * byte of the output. Each token is decoded once, at its position, against a cache of
 * the keys and values of those before it (model_decode), until the window of T tokens is
 * full; from then on each step runs the model's forward over the last T tokens of every
 * sequence. The next token is drawn from the logits at the last one. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <omp.h>
#include "run.h"
#include "sample.h"

typedef struct {
    real v;
    int i;
} sample_entry;

/* Larger logits first, equals by index. */
static int sample_entry_cmp(const void *a, const void *b) {
    const sample_entry *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    return x->i - y->i;
}

int sample_pick(const real *logits, int V, const sample_opts *o, rng_t *rng) {
    int best = 0;
    for (int i = 0; i < V; i++) {
        if (!isfinite((double)logits[i])) return -1;
        if (logits[i] > logits[best]) best = i;
    }
    if (o->temperature <= 0 || o->top_k == 1) return best;
    /* the candidates: every token, or the top_k largest */
    sample_entry *e = malloc_check((size_t)V * sizeof *e);
    for (int i = 0; i < V; i++) e[i] = (sample_entry){logits[i], i};
    int k = V;
    if (o->top_k > 0 && o->top_k < V) {
        qsort(e, (size_t)V, sizeof *e, sample_entry_cmp);
        k = o->top_k;
    }
    /* softmax(l / temperature) over them, in double, shifted by the largest */
    double *w = malloc_check((size_t)k * sizeof *w), total = 0;
    const double top = (double)logits[best];
    for (int j = 0; j < k; j++) total += w[j] = exp(((double)e[j].v - top) / o->temperature);
    const double u = rng_uniform(rng) * total;
    double cum = 0;
    int pick = e[k - 1].i;
    for (int j = 0; j < k; j++) {
        cum += w[j];
        if (u < cum) { pick = e[j].i; break; }
    }
    free(w);
    free(e);
    return pick;
}

int sample_generate(gpt_model *m, int B, const int *prompt, int plen, int ntok, int V, const sample_opts *o,
                    uint64_t seed, int *out, void (*progress)(int done, void *ctx), void *ctx) {
    const int T = m->T;
    const size_t N = (size_t)B * T;
    int *win = malloc_check(N * sizeof(int)), *in = malloc_check(N * sizeof(int));
    int *next = malloc_check((size_t)B * sizeof(int));
    rng_t *rng = malloc_check((size_t)B * sizeof *rng);
    /* every window starts as the last T tokens of the prompt */
    int len = plen < T ? plen : T;
    for (int b = 0; b < B; b++) {
        memcpy(win + (size_t)b * T, prompt + (plen - len), (size_t)len * sizeof(int));
        rng_seed(&rng[b], seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(b + 1)));
    }
    /* While the window has room, each token is decoded once, at its position, against the
       keys and values of those before it (model_decode): the prompt's, then each drawn
       one. Once the window is full it slides, every token's position moves, and each
       step is a forward over the whole window. */
    model_kv kv = {0};
    int cached = !o->full_forward && len < T;
    const real *logits = NULL;
    /* One sequence decodes on one thread: its products are a row each, bound by reading
       the weights, which two threads read no faster (an M-shaped model: 0.55 s for 32
       tokens either way), while each of the ~250 parallel regions of a token waits for the
       other thread to be scheduled when other work loads the cores (2-7 tokens/s against
       58, docs/performance.md item 56). The bits do not depend on the threads. */
    const int threads = omp_get_max_threads();
    int one = cached && B == 1 && threads > 1;
    if (one) threads_set(1);
    if (cached) {
        model_kv_alloc(&kv, m, B);
        for (int p = 0; p < len; p++) {
            for (int b = 0; b < B; b++) next[b] = win[(size_t)b * T + p];
            logits = model_decode(m, &kv, next, p);
        }
    }
    int status = 0;
    for (int i = 0; i < ntok; i++) {
        size_t stride = (size_t)m->V; /* between the sequences' rows of logits */
        if (!cached) {
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++) in[(size_t)b * T + t] = t < len ? win[(size_t)b * T + t] : 0;
            model_forward(m, in, NULL, B);
            logits = model_logits(m) + (size_t)(len - 1) * m->V;
            stride = (size_t)T * m->V;
        }
        for (int b = 0; b < B && status == 0; b++) {
            next[b] = sample_pick(logits + (size_t)b * stride, V, o, &rng[b]);
            if (next[b] < 0) status = -1;
        }
        if (status != 0) break;
        for (int b = 0; b < B; b++) {
            out[(size_t)b * ntok + i] = next[b];
            int *w = win + (size_t)b * T;
            if (len == T) memmove(w, w + 1, (size_t)(T - 1) * sizeof(int)); /* the oldest token leaves */
            w[len < T ? len : T - 1] = next[b];
        }
        if (cached && i + 1 < ntok) {
            if (len < T) logits = model_decode(m, &kv, next, len); /* at the drawn token's position */
            else {
                cached = 0;
                model_kv_free(&kv, m); /* whole windows from here, on every thread */
                if (one) threads_set(threads), one = 0;
            }
        }
        if (len < T) len++;
        if (progress) progress(i + 1, ctx);
    }
    model_kv_free(&kv, m);
    if (one) threads_set(threads);
    free(next);
    free(rng);
    free(in);
    free(win);
    return status;
}

/* ---- the command ---------------------------------------------------------------------- */

static void sample_usage(FILE *f) {
    fprintf(f, "usage: s2hc sample RUN_DIR|FILE.safetensors [--prompt TEXT | --prompt-file FILE]\n"
               "                   [--tokens N] [--temperature T] [--top-k K] [--count M] [--seed S] [--ids]\n"
               "                   [--config YAML [--set KEY=VALUE]...]\n"
               "\n"
               "Load RUN_DIR/ckpt.h5 (or a file of `s2hc export`: the model its metadata's config\n"
               "describes, with the file's weights) and continue the prompt (default: a newline) by N\n"
               "tokens (default 256), bytes drawn one at a time from the model's softmax at temperature\n"
               "T (default 1; 0: the most likely byte every time), among the K most likely only when\n"
               "K > 0 (default 0: all). The model reads the last block_size bytes at each step. With\n"
               "--count M, M continuations, each from its own seeded generator: continuation i is the\n"
               "same for any M >= i and the same --seed (default 1). The text goes to stdout (one\n"
               "continuation as it is made; several, each after a header line), the settings and speed\n"
               "to stderr.\n"
               "With --ids the prompt is token ids (decimal, separated by spaces or commas) and the\n"
               "output is ids too: for a model trained on a corpus of token ids (`data import\n"
               "--tokens uint16`), whose text only the tokenizer that made the corpus can spell.\n"
               "--config YAML gives the model of a safetensors file without s2hc metadata (a nanoGPT\n"
               "state_dict saved by another program: its shape, method, n_streams, vocabulary), read\n"
               "as `s2hc train` reads its config, each --set KEY=VALUE over it; every tensor that model\n"
               "has must be in the file by name with its shape, and no other (docs/runfile.md); the keys\n"
               "that shape no tensor (model.n_head, model.gelu, the method's own such as\n"
               "residual.sinkhorn_iters) are taken at the config's word, and a note on stderr names them\n"
               "with their values. A file of `s2hc export` says its own model: --config with it, or\n"
               "with a run, is refused.\n"
               "\n"
               "examples:\n"
               "  s2hc sample runs/tiny --prompt 'The kernel ' --tokens 200 --temperature 0.8 --top-k 40\n"
               "  s2hc export runs/tiny     # runs/tiny/model.safetensors, then text from that file alone:\n"
               "  s2hc sample runs/tiny/model.safetensors --prompt 'The kernel ' --temperature 0\n"
               "  s2hc sample nanogpt.safetensors --config nanogpt.yaml --prompt 'The kernel '  # nanoGPT's\n");
}

/* A number option's value, whole and in [lo, hi]; else an error naming the option. */
static int sample_num(const char *opt, const char *s, double lo, double hi, int whole, double *v) {
    char *end;
    errno = 0;
    const double x = strtod(s, &end);
    if (!whole && errno == ERANGE && fabs(x) <= DBL_MIN && !signbit(x)) errno = 0; /* an underflow (1e-400): 0 or subnormal */
    if (!*s || *end || errno || !isfinite(x) || x < lo || x > hi || (whole && x != floor(x)) ||
        strspn(s, "0123456789+-.eE") != strlen(s)) { /* decimal: not strtod's 0x10 */
        fprintf(stderr, "s2hc: error: sample: %s: expected %s in [%g, %g], got '%s'\n", opt,
                whole ? "a whole number" : "a number", lo, hi, s);
        return -1;
    }
    /* a whole number past 2^53 rounds in a double: refused, not rounded */
    if (whole && strspn(s, "0123456789") == strlen(s) && hi <= 9007199254740992.0) {
        errno = 0;
        const unsigned long long u = strtoull(s, NULL, 10);
        if (errno || u > (unsigned long long)hi) {
            fprintf(stderr, "s2hc: error: sample: %s: expected a whole number in [%g, %.0f], got '%s'\n", opt, lo, hi, s);
            return -1;
        }
    }
    *v = x;
    return 0;
}

/* The bytes of a file, malloc'd; NULL after an error naming it. */
static unsigned char *sample_read_file(const char *path, size_t *len) {
    /* a prompt is a few thousand tokens at most (the context crops it): past
       read_text_file's 64 MiB the file is a mistake (/dev/zero, a corpus), not a prompt */
    char *text = read_text_file(path, len);
    if (!text && errno == EFBIG)
        fprintf(stderr, "s2hc: error: sample: %s: over 64 MiB; a prompt file holds a prompt\n", path);
    else if (!text)
        fprintf(stderr, "s2hc: error: sample: %s: %s\n", path, strerror(errno));
    return (unsigned char *)text;
}

typedef struct {
    const int *out;
    int ntok, count, tty, ids;
    double t0, last;
} sample_show;

/* One token to stdout: its byte, or with --ids its id and a space. */
static void sample_put(int tok, int ids) {
    if (ids) printf("%d ", tok);
    else putchar(tok);
}

/* --ids: the prompt's decimal ids, each below V; -1 after an error naming the place. */
static int sample_parse_ids(const unsigned char *s, size_t n, int V, const char *src, int *ids, size_t *count) {
    size_t k = 0, i = 0;
    while (i < n) {
        if (isspace(s[i]) || s[i] == ',') { i++; continue; }
        long v = 0;
        size_t j = i;
        while (j < n && isdigit(s[j]) && v < 1000000) v = v * 10 + (s[j++] - '0');
        if (j == i || (j < n && !isspace(s[j]) && s[j] != ',') || v >= V) {
            fprintf(stderr, "s2hc: error: sample: %s: %s at offset %zu (--ids wants token ids 0..%d, separated by "
                    "spaces or commas)\n", src, j == i || v < V ? "not a token id" : "an id outside the model's vocabulary", i,
                    V - 1);
            return -1;
        }
        ids[k++] = (int)v;
        i = j;
    }
    *count = k;
    return 0;
}

/* After each step: one continuation goes out as it is made; several show a progress line
 * on stderr (stdout holds the text): rewritten in place every 0.5 s on a terminal, else (a
 * log) a line every PROGRESS_LOG_EVERY s once the sampling has run progress_after() s, as
 * util.h's progress lines. */
static void sample_progress(int done, void *ctx) {
    sample_show *s = ctx;
    if (s->count == 1) {
        sample_put(s->out[done - 1], s->ids);
        fflush(stdout);
        return;
    }
    const double now = now_seconds();
    if (s->tty ? now - s->last < 0.5 && done < s->ntok : now - s->last < PROGRESS_LOG_EVERY || done == s->ntok) return;
    s->last = now;
    const double rate = done * (double)s->count / (now - s->t0 > 1e-9 ? now - s->t0 : 1e-9);
    char eta[32];
    fmt_duration((s->ntok - done) * (double)s->count / rate, eta, sizeof eta);
    if (!s->tty) { /* the last one is said by the summary line */
        fprintf(stderr, "  %d/%d tokens x %d, %.0f tokens/s, ETA %s\n", done, s->ntok, s->count, rate, eta);
        return;
    }
    char line[256];
    snprintf(line, sizeof line, "  %d/%d tokens x %d, %.0f tokens/s, ETA %s", done, s->ntok, s->count, rate, eta);
    tty_line(stderr, line);
    if (done == s->ntok) fputc('\n', stderr);
}

int sample_main(int argc, char **argv) {
    const char *dir = NULL, *prompt_text = NULL, *prompt_file = NULL, *config = NULL, *sets[256];
    double temperature = 1, top_k = 0, ntok = 256, count = 1, seed = 1;
    int ids = 0, nsets = 0;
    opt_seen seen = {.cmd = "sample"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        const int kind = opt_kind(a, &ended);
        if (kind < 0) continue;
        if (kind > 0) {
            if (dir) { fprintf(stderr, "s2hc: error: sample: one run directory only ('%s')\n", a); return 2; }
            dir = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { sample_usage(stdout); return 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--prompt", 1))) prompt_text = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--prompt-file", 1))) prompt_file = v;
        else if (!strcmp(a, "--ids")) ids = 1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--tokens", 1))) {
            if (sample_num("--tokens", v, 1, 1e6, 1, &ntok)) return 2;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--temperature", 1))) {
            if (sample_num("--temperature", v, 0, 1e6, 0, &temperature)) return 2;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--top-k", 1))) {
            if (sample_num("--top-k", v, 0, 65536, 1, &top_k)) return 2;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--count", 1))) {
            if (sample_num("--count", v, 1, 1024, 1, &count)) return 2;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--seed", 1))) {
            if (sample_num("--seed", v, 0, 9007199254740992.0, 1, &seed)) return 2;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--config", 0))) {
            config = v;
        } else if ((v = opt_arg(argc, argv, &i, "--set", 1))) {
            if (nsets == 256) { fprintf(stderr, "s2hc: error: sample: more than 256 --set\n"); return 2; }
            sets[nsets++] = v;
        } else {
            fprintf(stderr, "s2hc: error: sample: unknown option '%s'%s\n", a,
                    i + 1 < argc ? "" : " (or its value is missing)");
            sample_usage(stderr);
            return 2;
        }
    }
    if (!dir) { sample_usage(stderr); return 2; }
    s2hc_config given; /* --config's model, for a file without s2hc metadata */
    if (model_file_config("sample", config, sets, nsets, &given) != 0) return 2;
    if (ntok * count > 1e8) {
        fprintf(stderr, "s2hc: error: sample: --tokens %.0f x --count %.0f is more than 10^8 tokens\n", ntok, count);
        return 2;
    }
    if (prompt_text && prompt_file) {
        fprintf(stderr, "s2hc: error: sample: --prompt and --prompt-file: give one\n");
        return 2;
    }
    size_t plen;
    unsigned char *bytes;
    if (prompt_file) {
        if (!(bytes = sample_read_file(prompt_file, &plen))) return 1;
    } else {
        const char *p = prompt_text ? prompt_text : "\n";
        plen = strlen(p);
        bytes = malloc_check(plen + 1);
        memcpy(bytes, p, plen);
    }
    if (ids && !prompt_text && !prompt_file) {
        fprintf(stderr, "s2hc: error: sample: --ids needs a prompt of token ids (--prompt '464 3290' or --prompt-file)\n");
        free(bytes);
        return 2;
    }
    if (plen == 0) {
        fprintf(stderr, "s2hc: error: sample: %s is empty (the model needs at least one byte to go on from)\n",
                prompt_file ? prompt_file : "--prompt");
        free(bytes);
        return 2;
    }
    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t step = 0;
    const int from_file = model_file_arg(dir, "sample"); /* an export: its weights alone */
    int of_ids = 0;
    if (from_file < 0) { free(bytes); return 1; }
    if (!from_file && config) { free(bytes); return model_file_not_run(dir, "sample"); }
    if (from_file) {
        const int st = model_file_open(dir, "sample", config ? &given : NULL, &cfg, &m, &step, &of_ids);
        if (st != 0) { free(bytes); return st; }
    } else {
        if (run_open(dir, &cfg, &m, &log, &step) != 0) { free(bytes); return 1; }
        /* a model of a tokenizer's ids (a run file older than the attribute: by its vocabulary) */
        const char *kind = h5log_get_attr_str(&log, "/", "token_kind");
        of_ids = (kind && !strcmp(kind, "ids")) || m.V > 256;
        h5log_free(&log);
        run_note_in_use(dir, "its checkpoint", (long long)step);
    }
    const int V = ids || m.V < 256 ? m.V : 256; /* what a byte can say */
    int *prompt = malloc_check(plen * sizeof(int));
    int rc = 0;
    const char *src = prompt_file ? prompt_file : "--prompt";
    if (!ids && m.V > 256) {
        fprintf(stderr, "s2hc: error: sample: %s's model has a vocabulary of %d tokens, more than the 256 bytes of "
                "text: it reads token ids; give the prompt as ids with --ids\n", dir, m.V);
        rc = 2;
    } else if (!ids && of_ids) {
        fprintf(stderr, "s2hc: error: sample: %s's model was trained on token ids (a corpus imported with --tokens "
                "uint16), not bytes of text: give the prompt as ids with --ids\n", dir);
        rc = 2;
    } else if (ids && sample_parse_ids(bytes, plen, V, src, prompt, &plen) != 0) {
        rc = 2;
    } else if (ids && plen == 0) {
        fprintf(stderr, "s2hc: error: sample: %s holds no token id\n", src);
        rc = 2;
    }
    for (size_t i = 0; i < plen && rc == 0 && !ids; i++) {
        prompt[i] = bytes[i];
        if (bytes[i] >= V) {
            fprintf(stderr, "s2hc: error: sample: %s: byte 0x%02x at offset %zu is outside the model's vocabulary (%d tokens)\n",
                    src, bytes[i], i, m.V);
            rc = 2;
        }
    }
    const int n_tok = (int)ntok, n_seq = (int)count;
    int *out = rc ? NULL : malloc_check((size_t)n_seq * (size_t)n_tok * sizeof(int));
    if (rc == 0) {
        char topk[32], stepw[32];
        snprintf(topk, sizeof topk, top_k > 0 ? "%.0f" : "all", top_k);
        if (step >= 0) snprintf(stepw, sizeof stepw, "step %lld", (long long)step);
        else snprintf(stepw, sizeof stepw, "step not given"); /* another program's file */
        fprintf(stderr, "sampling %s (method %s, n = %d, %s, block_size %d): %d tokens x %d, temperature %g, "
                        "top-k %s, seed %.0f\n", dir, cfg.method, m.n, stepw, m.T, n_tok, n_seq, temperature,
                topk, seed);
        const sample_opts o = {temperature, (int)top_k, 0};
        sample_show show = {out, n_tok, n_seq, terminal_live(2), ids, now_seconds(), 0};
        if (!show.tty) show.last = show.t0 + progress_after() - PROGRESS_LOG_EVERY; /* the first log line */
        if (n_seq == 1)
            for (size_t i = 0; i < plen; i++) sample_put(prompt[i], ids);
        const int st = sample_generate(&m, n_seq, prompt, (int)plen, n_tok, V, &o, (uint64_t)seed, out,
                                       sample_progress, &show);
        if (n_seq == 1) {
            putchar('\n');
        } else if (st == 0) {
            for (int b = 0; b < n_seq; b++) {
                printf("--- sample %d of %d ---\n", b + 1, n_seq);
                for (size_t i = 0; i < plen; i++) sample_put(prompt[i], ids);
                for (int i = 0; i < n_tok; i++) sample_put(out[(size_t)b * n_tok + i], ids);
                putchar('\n');
            }
        }
        /* the text is the command's product: a write that failed (a full disk) fails it */
        const int werr = fflush(stdout) != 0 ? errno : ferror(stdout) ? EIO : 0;
        const double dt = now_seconds() - show.t0;
        if (werr) {
            fprintf(stderr, "s2hc: error: sample: cannot write the text to stdout: %s\n", strerror(werr));
            clearerr(stdout); /* said: main's check of stdout need not say it again */
            rc = 1;
        } else if (st != 0) {
            fprintf(stderr, "s2hc: error: sample: the model's logits are not finite (%s%s of a diverged run?)\n",
                    dir, from_file ? "" : "/ckpt.h5");
            rc = 1;
        } else {
            /* milliseconds below a tenth of a second (a small model's few tokens read "0.00 s") */
            fprintf(stderr, dt < 0.1 ? "%d tokens in %.2g ms (%.0f tokens/s)\n" : "%d tokens in %.2f s (%.0f tokens/s)\n",
                    n_tok * n_seq, dt < 0.1 ? 1e3 * dt : dt, n_tok * n_seq / (dt > 0 ? dt : 1e-9));
        }
    }
    free(out);
    free(prompt);
    free(bytes);
    model_free(&m);
    return rc;
}
