/* runs.c: find run files, load them, name them. A run is described by its root
 * attributes and its resolved config (the `config` attribute, parsed with the harness's
 * own reader), so the analysis never guesses from directory names. */
#include "analysis.h"
#include "../harness/config.h"
#include "../harness/presets.h"
#include "../harness/util.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *const an_method_order[] = {"rc",        "identity",  "hc",         "mhc",
                                       "mhc_lite",  "kromhc",    "orthogonal", "orthogonal+expm",
                                       "s2hc",      "s2hc_rot",  "s2hc+expm",  "s2hc+exact",
                                       "s2hc+expm+exact", "s2hc_rot+expm", NULL};

const char *an_pretty(const char *v) {
    static const struct { const char *id, *name; } names[] = {
        {"rc", "RC"}, {"identity", "identity"}, {"hc", "HC"}, {"mhc", "mHC"}, {"mhc_lite", "mHC-lite"},
        {"kromhc", "KromHC"}, {"orthogonal", "orthogonal"}, {"s2hc", "s²HC"}, {"s2hc_rot", "s²HC-rot"},
        {"s2hc+expm", "s²HC (expm core)"}, {"s2hc+exact", "s²HC (exact init)"},
        {"s2hc+expm+exact", "s²HC (expm, exact init)"}, {"s2hc_rot+expm", "s²HC-rot (expm)"},
        {"orthogonal+expm", "orthogonal (expm)"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(names[i].id, v)) return names[i].name;
    return v;
}

void an_label(const char *v, char *buf, size_t len) {
    char base[64];
    snprintf(base, sizeof base, "%s", v);
    char *plus = strchr(base, '+');
    if (plus) *plus = 0;
    snprintf(buf, len, "%s%s", an_pretty(base), plus ? strchr(v, '+') : "");
}

/* The config text without the keys that do not change what a run trains (its name, where
 * it is written, its threads and backend, how often it saves, logs, evaluates and
 * probes): two runs with equal keys are repeats of one seed, and count once. */
static char *config_key(const char *yaml) {
    size_t n = strlen(yaml);
    char *k = malloc_check(n + 1), *o = k;
    const char *p = yaml;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) + 1 : strlen(p);
        const char *q = p;
        while (*q == ' ') q++;
        static const char *const drop[] = {"name:", "out:", "threads:", "backend:", "ckpt_every:", "log_every:",
                                           "eval_every:", "every:", NULL};
        int keep = 1;
        for (int d = 0; drop[d] && keep; d++) keep = strncmp(q, drop[d], strlen(drop[d])) != 0;
        if (keep) {
            memcpy(o, p, len);
            o += len;
        }
        p += len;
    }
    *o = 0;
    return k;
}

static int is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}
static int is_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static void scale_label(const s2hc_config *c, char *out, size_t len) {
    for (int i = 0; preset_names[i]; i++) {
        s2hc_config p = *c;
        if (preset_apply(&p, preset_names[i]) != 0) continue;
        if (p.n_layer == c->n_layer && p.n_embd == c->n_embd && p.block_size == c->block_size &&
            p.n_head == c->n_head) {
            snprintf(out, len, "%s", preset_names[i]);
            return;
        }
    }
    snprintf(out, len, "L%d-C%d-T%d", c->n_layer, c->n_embd, c->block_size);
}

/* Nonzero when s holds a control byte (below 0x20, or DEL). */
static int control_byte(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

int an_run_load(an_run *r, const char *run_h5, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    h5log_init(&r->log);
    const char *slash = strrchr(run_h5, '/');
    size_t dlen = slash ? (size_t)(slash - run_h5) : 1;
    /* a folder named with a trailing slash (runs/x/, as a shell completes it and a glob of a
       grid's run folders gives it) comes as runs/x//run.h5: its folder and name are runs/x
       and x, not runs/x/ and an empty name */
    while (slash && dlen > 1 && run_h5[dlen - 1] == '/') dlen--;
    if (dlen >= sizeof r->dir) { /* named in tables and messages: never cut */
        snprintf(err, errlen, "%.60s...: a run directory path of %zu bytes, longer than %zu", run_h5, dlen,
                 sizeof r->dir - 1);
        return -1;
    }
    if (h5log_load(&r->log, run_h5, err, errlen) != 0) return -1;
    if (slash) snprintf(r->dir, sizeof r->dir, "%.*s", (int)dlen, run_h5);
    else snprintf(r->dir, sizeof r->dir, ".");
    const char *base = strrchr(r->dir, '/');
    snprintf(r->name, sizeof r->name, "%s", base ? base + 1 : r->dir);
    if (!strcmp(r->name, ".") || !strcmp(r->name, "..")) { /* s2hc report . inside a run's folder */
        char *real = realpath(r->dir, NULL);
        const char *rb = real ? strrchr(real, '/') : NULL;
        if (rb && rb[1]) snprintf(r->name, sizeof r->name, "%s", rb + 1);
        free(real);
    }
    /* a folder name with a newline, tab or other control byte would break the line-based
       files the analysis writes (the .dat comments gnuplot reads, summary.txt, captions.tsv):
       refused, shown with '?' for each such byte */
    if (control_byte(r->dir) || control_byte(r->name)) {
        char shown[sizeof r->dir];
        const char *bad = control_byte(r->dir) ? r->dir : r->name;
        snprintf(shown, sizeof shown, "%s", bad);
        for (char *q = shown; *q; q++)
            if ((unsigned char)*q < 0x20 || *q == 0x7f) *q = '?';
        snprintf(err, errlen, "%s: a run directory with a control character in its name (a newline, tab, ...): "
                 "rename the folder", shown);
        h5log_free(&r->log);
        return -1;
    }
    const char *yaml = h5log_get_attr_str(&r->log, "/", "config");
    if (!yaml) {
        snprintf(err, errlen, "%s: no config attribute on / (not an s2hc run file?)", run_h5);
        h5log_free(&r->log);
        return -1;
    }
    s2hc_config c;
    config_defaults(&c);
    if (config_from_yaml_text(&c, yaml, run_h5) != 0) {
        snprintf(err, errlen, "%s: its config attribute does not parse", run_h5);
        h5log_free(&r->log);
        return -1;
    }
    snprintf(r->method, sizeof r->method, "%s", c.method);
    snprintf(r->corpus, sizeof r->corpus, "%s", c.train_corpus);
    snprintf(r->variant, sizeof r->variant, "%s", c.method);
    /* the options that change the math of s2hc, s2hc_rot (core) and orthogonal (core):
       every variant they make is in an_method_order */
    if (!strncmp(c.method, "s2hc", 4) || !strcmp(c.method, "orthogonal")) {
        if (strcmp(c.core, "cayley") != 0) strncat(r->variant, "+expm", sizeof r->variant - strlen(r->variant) - 1);
        if (!strcmp(c.method, "s2hc") && strcmp(c.init, "tanh4") != 0)
            strncat(r->variant, "+exact", sizeof r->variant - strlen(r->variant) - 1);
    }
    scale_label(&c, r->scale, sizeof r->scale);
    /* another base model (docs/paper.md) is another cell, never compared with the default's */
    if (!c.bias) strncat(r->scale, "+nobias", sizeof r->scale - strlen(r->scale) - 1);
    if (!strcmp(c.gelu, "erf")) strncat(r->scale, "+erf", sizeof r->scale - strlen(r->scale) - 1);
    if (c.init_from[0]) { /* a trained start: "+init@S" when the file said its step S */
        const double s = h5log_get_attr_num(&r->log, "/", "init_from_step");
        char tag[40] = "+init";
        if (s >= 0 && s < 1e15) snprintf(tag, sizeof tag, "+init@%.0f", s);
        strncat(r->scale, tag, sizeof r->scale - strlen(r->scale) - 1);
    }
    /* a run trained further (train --extend) learned under another schedule than a run of
       its train.steps from scratch (its lr rose where the first length's cosine ended):
       "+ext@N" for a first length N ("+ext@N,M" after two), a cell of its own; a list too
       long for a label (40 bytes) keeps its first lengths and ends in ",..." */
    const char *ext = h5log_get_attr_str(&r->log, "/", "extensions");
    if (ext && *ext) {
        char tag[512] = "+ext";
        size_t o = strlen(tag);
        for (const char *q = ext; *q && o < sizeof tag;) { /* each "N->M", space separated */
            const char *arrow = strstr(q, "->"), *sp = strchr(q, ' ');
            if (!arrow || (sp && sp < arrow)) break;
            o += (size_t)snprintf(tag + o, sizeof tag - o, "%c%.*s", o == 4 ? '@' : ',', (int)(arrow - q), q);
            if (!sp) break;
            q = sp + 1;
        }
        if (o >= 40) { /* cut after the last whole length that leaves room for ",..." */
            size_t cut = 35;
            while (cut > 4 && tag[cut] != ',') cut--;
            snprintf(tag + cut, sizeof tag - cut, ",...");
        }
        const size_t l = strlen(r->scale);
        if (o > 4) snprintf(r->scale + l, sizeof r->scale - l, "%s", tag);
    }
    const char *st = h5log_get_attr_str(&r->log, "/", "status");
    snprintf(r->status, sizeof r->status, "%s", st ? st : "unknown");
    /* "running" is what the file of a training says until it ends; one whose training
       no longer holds the run's lock was stopped (interrupted, killed) */
    char lockp[sizeof r->dir + 16];
    snprintf(lockp, sizeof lockp, "%s/.train.lock", r->dir);
    if (!strcmp(r->status, "running") && !lock_file_held(lockp, NULL, 0)) snprintf(r->status, sizeof r->status, "stopped");
    r->n = c.n_streams;
    r->seed = c.seed;
    r->n_layer = c.n_layer;
    r->n_embd = c.n_embd;
    r->n_head = c.n_head;
    r->block_size = c.block_size;
    r->vocab = c.vocab;
    r->batch = c.batch;
    r->grad_accum = c.grad_accum;
    r->steps = c.steps;
    r->probe_every = c.probe_every;
    r->eval_every = c.eval_every;
    r->n_params = h5log_get_attr_num(&r->log, "/", "n_params");
    r->n_aux = h5log_get_attr_num(&r->log, "/", "n_aux_params");
    r->train_tokens = h5log_get_attr_num(&r->log, "/", "train_tokens");
    r->bench = c.probe_every == 0 && c.eval_every == 0;
    snprintf(r->recipe, sizeof r->recipe, "lr %g, min_lr %g, warmup %d, weight_decay %g, batch %d, grad_accum %d, clip %g, "
             "betas %g/%g", c.lr, c.min_lr, c.warmup, c.weight_decay, c.batch, c.grad_accum, c.clip, c.beta1, c.beta2);
    size_t o = 0;
    if (!strcmp(c.method, "mhc"))
        o += (size_t)snprintf(r->options, sizeof r->options, "sinkhorn %d %s, ", c.sinkhorn_iters, c.sinkhorn_order);
    if (!strcmp(c.method, "mhc_lite") || !strcmp(c.method, "kromhc"))
        o += (size_t)snprintf(r->options, sizeof r->options, "lite_offset %s %g, ", c.lite_offset, c.lite_offset_value);
    if (strcmp(c.method, "rc") != 0)
        snprintf(r->options + o, sizeof r->options - o, "proj_init %s, precision %s/%s", c.proj_init,
                 c.stream_precision, c.proj_precision);
    r->config_key = config_key(yaml);
    r->config_yaml = config_to_yaml(&c);
    if (ext && *ext) { /* runs of one config extended otherwise (20->40; 20->30 30->40) trained otherwise */
        const size_t kl = strlen(r->config_key), el = strlen(ext);
        char *k = malloc_check(kl + el + 16);
        snprintf(k, kl + el + 16, "%sextensions: %s\n", r->config_key, ext);
        free(r->config_key);
        r->config_key = k;
    }
    return 0;
}

void an_run_free(an_run *r) {
    h5log_free(&r->log);
    free(r->config_key);
    free(r->config_yaml);
    r->config_key = r->config_yaml = NULL;
}

const h5log_series *an_series(const an_run *r, const char *path) {
    int i = h5log_find(&r->log, path);
    return i < 0 ? NULL : &r->log.series[i];
}

int an_shape(const h5log_series *s, size_t *dims) {
    int k = 0;
    if (!s->fixed) dims[k++] = s->rows;
    for (int i = 0; i < s->row_rank; i++) dims[k++] = s->row_dims[i];
    return k;
}

double an_series_get(const h5log_series *s, size_t i) {
    if (!s || i >= s->rows * s->row_elems) return NAN;
    switch (s->type) {
    case H5LOG_F32: return ((const float *)s->data)[i];
    case H5LOG_F64: return ((const double *)s->data)[i];
    default: return (double)((const int64_t *)s->data)[i];
    }
}

double *an_series_copy(const an_run *r, const char *path, size_t *count) {
    const h5log_series *s = an_series(r, path);
    if (count) *count = 0;
    if (!s) return NULL;
    size_t n = s->rows * s->row_elems;
    double *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return NULL;
    for (size_t i = 0; i < n; i++) v[i] = an_series_get(s, i);
    if (count) *count = n;
    return v;
}

double an_scalar(const an_run *r, const char *path) {
    const h5log_series *s = an_series(r, path);
    if (!s || !s->rows) return NAN;
    return an_series_get(s, s->rows * s->row_elems - 1);
}

/* ---- collecting runs ----------------------------------------------------------------- */

/* How far a run got, to choose between repeats: a finished run first, then the last step
 * it logged. */
static double run_progress(const an_run *r) {
    const double last = h5log_last(&r->log, "/train/step");
    return (strcmp(r->status, "finished") == 0 ? 1e18 : 0) + (isnan(last) ? 0 : last);
}

/* 0, or -1 after saying why the file cannot be read (counted in bad_paths: a report that
 * left a run out without a word would read as complete). */
static int add_run(an_runset *rs, const char *h5, int verbose, int keep) {
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 32;
        an_run *nr = realloc(rs->r, (size_t)rs->cap * sizeof *rs->r);
        if (!nr) die(1, "out of memory reading %s", h5);
        rs->r = nr;
    }
    char err[512];
    an_run *r = &rs->r[rs->n];
    if (an_run_load(r, h5, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        rs->bad_paths++;
        return -1;
    }
    for (int i = 0; i < rs->n && !keep; i++) {
        an_run *o = &rs->r[i];
        if (!strcmp(o->config_key, r->config_key)) { /* one of them counts: the further trained */
            const int take = run_progress(r) > run_progress(o);
            const an_run *kept = take ? r : o;
            if (verbose)
                fprintf(stderr, "s2hc analyze: %s repeats %s (the same config); using %s (%s, step %.0f)\n", r->dir,
                        o->dir, kept->dir, kept->status, h5log_last(&kept->log, "/train/step"));
            if (take) {
                an_run_free(o);
                *o = *r;
            } else {
                an_run_free(r);
            }
            return 0;
        }
    }
    rs->n++;
    return 0;
}

/* Run files in dir (depth 0: dir itself; then its subdirectories, up to `depth` levels). */
static void scan(strlist *l, const char *dir, int depth, int *found) {
    char *p = malloc_check(strlen(dir) + 260); /* dir/run.h5, or dir/ and a file name (at most 255 bytes) */
    sprintf(p, "%s/run.h5", dir);
    if (is_file(p)) { strlist_add(l, p); (*found)++; free(p); return; }
    DIR *d = depth > 0 ? opendir(dir) : NULL;
    if (!d) { free(p); return; }
    strlist names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') strlist_add(&names, e->d_name);
    closedir(d);
    strlist_sort(&names);
    for (size_t i = 0; i < names.n; i++) {
        sprintf(p, "%s/%.255s", dir, names.v[i]);
        if (is_dir(p)) scan(l, p, depth - 1, found);
    }
    strlist_free(&names);
    free(p);
}

/* keep: every run file found, repeats too, four folder levels down (s2hc runs lists them: runs/
 * holds make paper's runs/<preset>/<grid>/<point>/); else a repeat counts once, two levels down.
 * The files are found first, then read in that order, a progress line on stderr when that
 * takes more than a few seconds (hundreds of runs): for s2hc runs, and for analyze and
 * report when verbose (their -q promises no progress lines). */
static int load_paths(an_runset *rs, char *const *paths, int npaths, int verbose, int keep) {
    memset(rs, 0, sizeof *rs);
    strlist l = {0}; /* the run files found, read in this order */
    for (int i = 0; i < npaths; i++) {
        int found = 0;
        size_t len = strlen(paths[i]);
        if (is_file(paths[i]) && len >= 3 && !strcmp(paths[i] + len - 3, ".h5")) {
            strlist_add(&l, paths[i]);
            found = 1;
        } else if (is_dir(paths[i]) && grid_slurm_folder(paths[i])) {
            /* the same glob names the grid's folder of Slurm scripts */
            if (verbose) fprintf(stderr, "s2hc: %s: a grid's folder of Slurm scripts, not a run: skipped\n", paths[i]);
            continue;
        } else if (is_dir(paths[i])) {
            scan(&l, paths[i], keep ? 4 : 2, &found);
        } else if (is_file(paths[i]) && grid_index_file(paths[i])) {
            /* a glob over a grid's folder (s2hc report runs/grid/...) names its index too */
            if (verbose) fprintf(stderr, "s2hc: %s: a grid's index, not a run: skipped\n", paths[i]);
            continue;
        } else if (is_file(paths[i])) {
            fprintf(stderr, "s2hc: error: %s: not a run (a run directory, its run.h5, or a directory of runs)\n",
                    paths[i]);
            rs->bad_paths++;
            continue;
        } else {
            fprintf(stderr, "s2hc: error: %s: %s\n", paths[i], strerror(ENOENT));
            rs->bad_paths++;
            continue;
        }
        if (!found) {
            fprintf(stderr, "s2hc: error: %s: no run.h5 found in it or its subdirectories\n", paths[i]);
            rs->bad_paths++;
        }
    }
    progress pr;
    progress_begin(&pr, "reading runs", "run files", (long)l.n, verbose || keep);
    progress_to(&pr, stderr);
    for (size_t i = 0; i < l.n; i++) {
        add_run(rs, l.v[i], verbose, keep);
        progress_update(&pr, (long)i + 1);
    }
    progress_end(&pr);
    strlist_free(&l);
    return rs->n;
}

int an_runset_load(an_runset *rs, char *const *paths, int npaths, int verbose) {
    load_paths(rs, paths, npaths, verbose, 0);
    an_corpus_builds_warn(rs, stderr);
    an_cell_cap_warn(rs, stderr);
    return rs->n;
}

int an_runset_list(an_runset *rs, char *const *paths, int npaths) { return load_paths(rs, paths, npaths, 0, 1); }

int an_cell_cap_warn(const an_runset *rs, FILE *f) {
    int cells = 0;
    for (int i = 0; i < rs->n; i++) {
        const an_run *a = &rs->r[i];
        if (a->bench) continue;
        int first = 1, k = 1; /* a is the first run of its cell; k its cell's runs */
        for (int j = 0; j < rs->n && first; j++) {
            const an_run *b = &rs->r[j];
            if (j == i || b->bench || strcmp(b->variant, a->variant) || strcmp(b->scale, a->scale) ||
                strcmp(b->corpus, a->corpus))
                continue;
            if (j < i) first = 0;
            else k++;
        }
        if (!first || k <= AN_CELL_CAP) continue;
        fprintf(f, "s2hc: warning: %s has %d runs at scale %s on corpus '%s', more than the %d a table cell or "
                "figure takes: they use the %d of the lowest seeds (analyse a sweep's parts apart to see every run)\n",
                a->variant, k, a->scale, a->corpus, AN_CELL_CAP, AN_CELL_CAP);
        cells++;
    }
    return cells;
}

int an_corpus_builds_warn(const an_runset *rs, FILE *f) {
    int corpora = 0;
    for (int i = 0; i < rs->n; i++) {
        const an_run *a = &rs->r[i];
        if (isnan(a->train_tokens)) continue;
        int first = 1; /* a is the first run of its corpus with a known size */
        for (int j = 0; j < i && first; j++)
            first = strcmp(rs->r[j].corpus, a->corpus) || isnan(rs->r[j].train_tokens);
        if (!first) continue;
        for (int j = i + 1; j < rs->n; j++) {
            const an_run *b = &rs->r[j];
            if (strcmp(b->corpus, a->corpus) || isnan(b->train_tokens) || b->train_tokens == a->train_tokens) continue;
            fprintf(f, "s2hc: warning: runs of corpus '%s' were trained on different builds of it (%.0f training "
                    "tokens in %s, %.0f in %s: `s2hc data prepare` of another version rebuilt it between them); "
                    "their losses are over other text and not comparable: analyse them apart, or retrain one "
                    "side\n", a->corpus, a->train_tokens, a->dir, b->train_tokens, b->dir);
            corpora++;
            break;
        }
    }
    return corpora;
}

int an_corpus_builds_differ(const an_runset *rs, const int *idx, int k) {
    for (int i = 0; i < k; i++)
        for (int j = i + 1; j < k; j++) {
            const double a = rs->r[idx[i]].train_tokens, b = rs->r[idx[j]].train_tokens;
            if (!isnan(a) && !isnan(b) && a != b) return 1;
        }
    return 0;
}
void an_runset_free(an_runset *rs) {
    for (int i = 0; i < rs->n; i++) an_run_free(&rs->r[i]);
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

/* ---- numbers per run ----------------------------------------------------------------- */

double an_final_train_loss(const an_run *r, size_t *used) {
    size_t n = 0;
    double *v = an_series_copy(r, "/train/loss", &n);
    double m = an_tail_mean(v, n, run_loss_window(n), used);
    free(v);
    return m;
}

double an_final_val_loss(const an_run *r) { return an_scalar(r, "/eval/val_loss"); }

double an_median_throughput(const an_run *r) {
    size_t n = 0;
    double *v = an_series_copy(r, "/train/tokens_per_s", &n);
    if (!v) return NAN;
    if (n && !(v[n - 1] > 0)) n--; /* a diverged run's last row: 0, no step was timed */
    double m = n > 2 ? an_quantile(v + 1, n - 1, 0.5) : an_quantile(v, n, 0.5);
    free(v);
    return m;
}

static double series_max(const an_run *r, const char *path) {
    size_t n = 0;
    double *v = an_series_copy(r, path, &n), m = NAN;
    for (size_t i = 0; v && i < n; i++)
        if (isfinite(v[i]) && (isnan(m) || v[i] > m)) m = v[i];
    free(v);
    return m;
}

double an_final_sum_dev(const an_run *r, int columns) {
    return series_max(r, columns ? "/final/colsum_dev_max" : "/final/rowsum_dev_max");
}

double an_composite_sum_dev(const an_run *r, int columns) {
    size_t n = 0;
    double *v = an_series_copy(r, columns ? "/final/composite_colsum" : "/final/composite_rowsum", &n), m = NAN;
    for (size_t i = 0; v && i < n; i++) {
        double d = fabs(v[i] - 1);
        if (isfinite(d) && (isnan(m) || d > m)) m = d;
    }
    free(v);
    return m;
}

double an_negative_fraction(const an_run *r, double thresh, double *total) {
    const h5log_series *h = an_series(r, "/final/hist_counts"), *e = an_series(r, "/final/hist_edges"),
                       *o = an_series(r, "/final/hist_outside");
    if (total) *total = 0;
    if (!h || !e || h->row_rank < 1 || !h->row_dims[h->row_rank - 1]) return NAN;
    size_t bins = h->row_dims[h->row_rank - 1], layers = h->row_elems / bins;
    double neg = 0, all = 0;
    for (size_t l = 0; l < layers; l++)
        for (size_t b = 0; b < bins; b++) {
            double c = an_series_get(h, l * bins + b);
            all += c;
            if (an_series_get(e, b + 1) <= -thresh) neg += c;
        }
    for (size_t l = 0; o && l < layers; l++) {
        neg += an_series_get(o, l * 2);
        all += an_series_get(o, l * 2) + an_series_get(o, l * 2 + 1);
    }
    if (total) *total = all;
    return all > 0 ? neg / all : NAN;
}
