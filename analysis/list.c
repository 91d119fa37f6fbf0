/*
 * s2hc runs: every run under the given folders, a line each: its method, scale and seed,
 * how far it got and in what state, its losses, speed and wall time. What a researcher
 * looks at before choosing what to analyse, resume or delete; nothing is written. The
 * numbers are analyze's (tables/runs), from the same loader (analysis/runs.c), but every
 * run is listed, a repeat of another's config too.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "analysis/analysis.h"
#include "harness/config.h"
#include "harness/grid_internal.h"
#include "harness/util.h"
#include "probes/h5.h"

static void runs_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc runs [RUNS_OR_DIRS...] [--sort val|train|tokens|step] [--diff] [--key K,...]\n"
            "                 [--csv]\n\n"
            "List every run under the given paths (run folders, run.h5 files, or folders of runs up\n"
            "to four levels deep, such as runs/, make paper's runs/small or a grid's out dir;\n"
            "default: runs), a line each: the method (variant), streams n, scale, corpus, seed, the\n"
            "last step logged of the configured steps, the status (finished, diverged, running:\n"
            "its training holds the run, stopped: it ended without finishing), the training loss\n"
            "(the mean of the last steps, as analyze's), the last validation loss and the step it\n"
            "was taken at, the median tokens/s and the wall time (a running one's: with the time\n"
            "left at its pace so far, as of its last save). A count of runs per status\n"
            "follows. Runs that repeat another's config are listed too. Nothing is written.\n"
            "  --sort KEY    val or train: lowest loss first; tokens: fastest first; step: furthest\n"
            "                first (runs without the value last); default: the order found (by path)\n"
            "  --diff        a column for every config key whose value differs between the runs\n"
            "                listed (a grid's swept keys, say), besides those shown (method, n,\n"
            "                corpus, seed); run.name and run.out are never compared\n"
            "  --key K,...   a column for each of these config keys (s2hc config lists them;\n"
            "                repeatable); with --diff's, 32 columns at most (a note counts the\n"
            "                keys left out)\n"
            "  --csv         CSV for scripts: run,variant,method,n,scale,corpus,seed,step,steps,status,\n"
            "                train_loss,val_loss,val_step,tokens_per_s,wall_s,eta_s (losses in full\n"
            "                precision, an empty field where a run has no value), then the --diff\n"
            "                and --key columns, each headed by its key\n\n"
            "examples:\n"
            "  s2hc runs\n"
            "  s2hc runs runs/paper --sort val\n"
            "  s2hc runs runs/lr_sensitivity --diff\n"
            "  s2hc runs runs/depth --csv > runs.csv\n");
}

typedef struct {
    const an_run *r;
    double step, train, val, val_step, tokens, wall, eta;
} row;

static int sort_key = 0; /* 0: the order found; 1 val, 2 train, 3 tokens, 4 step */

static double row_key(const row *x) {
    switch (sort_key) {
    case 1: return x->val;
    case 2: return x->train;
    case 3: return -x->tokens;
    case 4: return -x->step;
    }
    return 0;
}

/* ascending by the key, runs without it (NaN) last; ties keep the order found */
static int row_cmp(const void *a, const void *b) {
    const row *x = a, *y = b;
    const double kx = row_key(x), ky = row_key(y);
    if (isnan(kx) != isnan(ky)) return isnan(kx) ? 1 : -1;
    if (!isnan(kx) && kx != ky) return kx < ky ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

static void num(char *buf, size_t len, double x, const char *fmt) {
    if (isfinite(x)) snprintf(buf, len, fmt, x);
    else snprintf(buf, len, "-");
}

/* The value of key ("section.leaf") in config_to_yaml's text, unquoted; "" when absent. */
static void key_value(const char *yaml, const char *key, char *out, size_t n) {
    char raw[1024];
    if (grid_flat_get(yaml, key, raw, sizeof raw) != 0) { out[0] = '\0'; return; }
    grid_unquote(raw, out, n);
}

/* The keys to show as columns: those asked for (--key), then, with --diff, every key whose
 * value differs between the runs, in config_to_yaml's order (the first run's text lists
 * them all), but the name, the out dir and the keys the table shows already; at most cap,
 * *dropped the count of differing keys past it. */
static int pick_keys(const an_runset *rs, int diff, char (*keys)[64], int nkeys, int cap, int *dropped) {
    static const char *const shown[] = {"run.name", "run.out", "residual.method", "residual.n_streams", "data.train",
                                        "train.seed", NULL};
    *dropped = 0;
    if (!diff || rs->n < 2) return nkeys;
    char section[64] = "";
    for (const char *l = rs->r[0].config_yaml; l && *l;) {
        const char *e = strchr(l, '\n');
        const size_t len = e ? (size_t)(e - l) : strlen(l);
        const char *colon = memchr(l, ':', len);
        char key[64] = "";
        if (colon && l[0] != ' ') snprintf(section, sizeof section, "%.*s", (int)(colon - l), l);
        else if (colon && len > 2) snprintf(key, sizeof key, "%s.%.*s", section, (int)(colon - l - 2), l + 2);
        l += len + (e ? 1 : 0);
        if (!key[0]) continue;
        int skip = 0;
        for (int k = 0; shown[k] && !skip; k++) skip = !strcmp(key, shown[k]);
        for (int k = 0; k < nkeys && !skip; k++) skip = !strcmp(key, keys[k]);
        if (skip) continue;
        char a[1024], b[1024];
        key_value(rs->r[0].config_yaml, key, a, sizeof a);
        for (int i = 1; i < rs->n; i++) {
            key_value(rs->r[i].config_yaml, key, b, sizeof b);
            if (strcmp(a, b)) {
                if (nkeys < cap) snprintf(keys[nkeys++], 64, "%s", key);
                else (*dropped)++;
                break;
            }
        }
    }
    return nkeys;
}

enum { NCOL = 12 };

/* A table cell's bytes: room for a whole name of an_run (variant, scale, corpus: below 64
 * bytes each), as the columns are sized to the longest one (a --diff or --key value longer
 * than 40 bytes is cut, "..." after it). */
#define CELL 96
_Static_assert(CELL > AN_NAME && CELL > sizeof((an_run *)0)->variant, "a cell holds a whole name");

#define MAX_KEYS 32

int runs_main(int argc, char **argv) {
    int csv = 0, diff = 0, nkeys = 0;
    opt_seen seen = {.cmd = "runs"};
    char keys[MAX_KEYS][64];
    char **paths = calloc_check((size_t)argc + 1, sizeof *paths);
    int np = 0;
    sort_key = 0;
    for (int i = 1, ended = 0; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) paths[np++] = argv[i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { runs_usage(stdout); free(paths); return 0; }
        else if (!strcmp(argv[i], "--csv")) csv = 1;
        else if (!strcmp(argv[i], "--diff")) diff = 1;
        else if ((v = opt_arg(argc, argv, &i, "--key", 0))) {
            for (const char *q = v; *q;) { /* K1,K2,... */
                const size_t len = strcspn(q, ",");
                char k[64];
                snprintf(k, sizeof k, "%.*s", (int)len, q);
                if (len >= sizeof k || !config_key_known(k)) {
                    fprintf(stderr, "s2hc: error: --key '%.*s': not a config key (s2hc config lists them)\n", (int)len, q);
                    free(paths);
                    return 2;
                }
                if (nkeys == MAX_KEYS) {
                    fprintf(stderr, "s2hc: error: --key: at most %d keys\n", MAX_KEYS);
                    free(paths);
                    return 2;
                }
                int dup = 0; /* a key named twice: one column */
                for (int j = 0; j < nkeys && !dup; j++) dup = !strcmp(keys[j], k);
                if (!dup) snprintf(keys[nkeys++], 64, "%s", k);
                q += len + (q[len] == ',');
            }
        }
        else if ((v = opt_once(&seen, argc, argv, &i, "--sort", 0))) {
            static const char *const keys[] = {"val", "train", "tokens", "step"};
            sort_key = 0;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, keys[k])) sort_key = k + 1;
            if (!sort_key) {
                fprintf(stderr, "s2hc: error: --sort '%s': one of val, train, tokens, step\n", v);
                free(paths);
                return 2;
            }
        } else {
            fprintf(stderr, "s2hc: error: unknown option '%s'%s\n\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            runs_usage(stderr);
            free(paths);
            return 2;
        }
    }
    static char def[] = "runs";
    if (!np) {
        struct stat st;
        if (stat(def, &st) != 0) { /* run.out's default, not here: say what to give */
            fprintf(stderr, "s2hc: error: no folder runs/ here (run.out's default): name the folders of your runs, "
                    "s2hc runs DIR...\n");
            free(paths);
            return 1;
        }
        paths[np++] = def;
    }
    an_runset rs;
    an_runset_list(&rs, paths, np);
    free(paths);
    row *rows = calloc_check((size_t)rs.n + 1, sizeof *rows);
    for (int i = 0; i < rs.n; i++) {
        const an_run *r = &rs.r[i];
        row *x = &rows[i];
        x->r = r;
        x->step = h5log_last(&r->log, "/train/step");
        x->train = an_final_train_loss(r, NULL);
        x->val = an_final_val_loss(r);
        x->val_step = isfinite(x->val) ? an_scalar(r, "/eval/step") : NAN;
        x->tokens = an_median_throughput(r);
        x->wall = h5log_get_attr_num(&r->log, "/", "wall_seconds");
        /* a training in progress: its steps left at the pace of its steps so far (evaluations
           and probes included), both as of its last save */
        x->eta = !strcmp(r->status, "running") && x->step > 0 && x->wall > 0 && r->steps >= x->step
                     ? (r->steps - x->step) * x->wall / x->step
                     : NAN;
    }
    if (sort_key && rs.n > 1) qsort(rows, (size_t)rs.n, sizeof *rows, row_cmp);
    int dropped;
    nkeys = pick_keys(&rs, diff, keys, nkeys, MAX_KEYS, &dropped);
    if (dropped) /* said, not cut silently */
        fprintf(stderr, "s2hc: note: --diff: %d more config key%s differ%s between the runs than the %d columns "
                "shown (--key names fewer, or the keys to see)\n", dropped, dropped == 1 ? "" : "s",
                dropped == 1 ? "s" : "", MAX_KEYS);
    char val[1024];

    if (csv && rs.n) { /* no header when no run could be read: nothing a script would take for data */
        fputs("run,variant,method,n,scale,corpus,seed,step,steps,status,train_loss,val_loss,val_step,tokens_per_s,"
              "wall_s,eta_s", stdout);
        for (int k = 0; k < nkeys; k++) {
            putchar(',');
            csv_field_put(stdout, keys[k]);
        }
        putchar('\n');
        for (int i = 0; i < rs.n; i++) {
            const row *x = &rows[i];
            const an_run *r = x->r;
            const char *text[] = {r->dir, r->variant, r->method};
            for (int k = 0; k < 3; k++) {
                csv_field_put(stdout, text[k]);
                putchar(',');
            }
            printf("%d,", r->n);
            csv_field_put(stdout, r->scale);
            putchar(',');
            csv_field_put(stdout, r->corpus);
            printf(",%llu,", (unsigned long long)r->seed);
            const double nums[] = {x->step, r->steps};
            for (int k = 0; k < 2; k++) {
                if (isfinite(nums[k])) printf("%.0f", nums[k]);
                putchar(',');
            }
            csv_field_put(stdout, r->status);
            const double rest[] = {x->train, x->val, x->val_step, x->tokens, x->wall, x->eta};
            for (int k = 0; k < 6; k++) {
                putchar(',');
                if (isfinite(rest[k])) csv_num_put(stdout, rest[k]);
            }
            for (int k = 0; k < nkeys; k++) {
                putchar(',');
                key_value(r->config_yaml, keys[k], val, sizeof val);
                csv_field_put(stdout, val);
            }
            putchar('\n');
        }
    } else if (rs.n) {
        static const char *const head[NCOL] = {"run",    "method",     "n",        "scale",    "corpus",   "seed",
                                               "step",   "status",     "train loss", "val loss", "tokens/s", "wall"};
        static const int right[NCOL] = {0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1};
        const int ncol = NCOL + nkeys;
        char(*cell)[NCOL + MAX_KEYS][CELL] = calloc_check((size_t)rs.n, sizeof *cell);
        int width[NCOL + MAX_KEYS];
        for (int k = 0; k < ncol; k++) width[k] = text_width(k < NCOL ? head[k] : keys[k - NCOL]);
        int wrun = width[0];
        for (int i = 0; i < rs.n; i++) {
            const row *x = &rows[i];
            const an_run *r = x->r;
            char(*c)[CELL] = cell[i];
            snprintf(c[1], CELL, "%s", r->variant);
            snprintf(c[2], CELL, "%d", r->n);
            snprintf(c[3], CELL, "%s", r->scale);
            snprintf(c[4], CELL, "%s", r->corpus);
            snprintf(c[5], CELL, "%llu", (unsigned long long)r->seed);
            if (isfinite(x->step)) snprintf(c[6], CELL, "%.0f/%d", x->step, r->steps);
            else snprintf(c[6], CELL, "-/%d", r->steps);
            snprintf(c[7], CELL, "%s", r->status);
            num(c[8], CELL, x->train, "%.4f");
            if (isfinite(x->val) && isfinite(x->val_step)) snprintf(c[9], CELL, "%.4f @%.0f", x->val, x->val_step);
            else num(c[9], CELL, x->val, "%.4f");
            num(c[10], CELL, x->tokens, "%.0f");
            if (isfinite(x->wall)) fmt_duration(x->wall, c[11], CELL);
            else snprintf(c[11], CELL, "-");
            if (isfinite(x->eta)) { /* "3m10s, ~1h02m left" */
                char left[32];
                fmt_duration(x->eta, left, sizeof left);
                const size_t l = strlen(c[11]);
                snprintf(c[11] + l, CELL - l, ", ~%s left", left);
            }
            for (int k = 0; k < nkeys; k++) { /* a value longer than 40 bytes cut, "..." after it (--csv: whole) */
                key_value(r->config_yaml, keys[k], val, sizeof val);
                if (strlen(val) > 40) { /* cut between characters, not inside one (a UTF-8 path) */
                    int cut = 37;
                    while (cut > 0 && ((unsigned char)val[cut] & 0xC0) == 0x80) cut--;
                    snprintf(c[NCOL + k], CELL, "%.*s...", cut, val);
                }
                else snprintf(c[NCOL + k], CELL, "%s", val[0] ? val : "-");
            }
            const int w = text_width(r->dir);
            if (w > wrun) wrun = w;
            for (int k = 1; k < ncol; k++) {
                const int wk = text_width(c[k]);
                if (wk > width[k]) width[k] = wk;
            }
        }
        width[0] = wrun;
        for (int i = -1; i < rs.n; i++) {
            for (int k = 0; k < ncol; k++) {
                const char *t = i < 0 ? (k < NCOL ? head[k] : keys[k - NCOL]) : k == 0 ? rows[i].r->dir : cell[i][k];
                const int pad = width[k] - text_width(t);
                if (k) fputs("  ", stdout);
                if (k >= NCOL || right[k]) printf("%*s%s", pad, "", t);
                else printf("%s%*s", t, pad, "");
            }
            putchar('\n');
        }
        free(cell);
        /* the count per status, in the order first seen */
        printf("%d run%s:", rs.n, rs.n == 1 ? "" : "s");
        for (int i = 0; i < rs.n; i++) {
            int seen = 0, k = 0;
            for (int j = 0; j < rs.n; j++) {
                if (!strcmp(rows[j].r->status, rows[i].r->status)) {
                    if (j < i) seen = 1;
                    k++;
                }
            }
            if (!seen) printf("%s %d %s", i ? "," : "", k, rows[i].r->status);
        }
        putchar('\n');
    }
    fflush(stdout);
    const int bad = rs.bad_paths, n = rs.n;
    free(rows);
    an_runset_free(&rs);
    if (bad) /* each said above: the runs that could be read are listed */
        fprintf(stderr, "s2hc: error: %d of the given paths hold no run or a run file that cannot be read (above)\n",
                bad);
    return n && !bad ? 0 : 1;
}
