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
#include "harness/util.h"
#include "probes/h5.h"

static void runs_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc runs [RUNS_OR_DIRS...] [--sort val|train|tokens|step] [--csv]\n\n"
            "List every run under the given paths (run folders, run.h5 files, or folders of runs up\n"
            "to four levels deep, such as runs/, make paper's runs/small or a grid's out dir;\n"
            "default: runs), a line each: the method (variant), streams n, scale, corpus, seed, the\n"
            "last step logged of the configured steps, the status (finished, diverged, running:\n"
            "its training holds the run, stopped: it ended without finishing), the training loss\n"
            "(the mean of the last steps, as analyze's), the last validation loss and the step it\n"
            "was taken at, the median tokens/s and the wall time. A count of runs per status\n"
            "follows. Runs that repeat another's config are listed too. Nothing is written.\n"
            "  --sort KEY    val or train: lowest loss first; tokens: fastest first; step: furthest\n"
            "                first (runs without the value last); default: the order found (by path)\n"
            "  --csv         CSV for scripts: run,variant,method,n,scale,corpus,seed,step,steps,status,\n"
            "                train_loss,val_loss,val_step,tokens_per_s,wall_s (losses in full\n"
            "                precision, an empty field where a run has no value)\n\n"
            "examples:\n"
            "  s2hc runs\n"
            "  s2hc runs runs/paper --sort val\n"
            "  s2hc runs runs/depth --csv > runs.csv\n");
}

typedef struct {
    const an_run *r;
    double step, train, val, val_step, tokens, wall;
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

enum { NCOL = 12 };

int runs_main(int argc, char **argv) {
    int csv = 0;
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
        else if ((v = opt_arg(argc, argv, &i, "--sort", 0))) {
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
    }
    if (sort_key && rs.n > 1) qsort(rows, (size_t)rs.n, sizeof *rows, row_cmp);

    if (csv) {
        fputs("run,variant,method,n,scale,corpus,seed,step,steps,status,train_loss,val_loss,val_step,tokens_per_s,"
              "wall_s\n", stdout);
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
            const double rest[] = {x->train, x->val, x->val_step, x->tokens, x->wall};
            for (int k = 0; k < 5; k++) {
                putchar(',');
                if (isfinite(rest[k])) csv_num_put(stdout, rest[k]);
            }
            putchar('\n');
        }
    } else if (rs.n) {
        static const char *const head[NCOL] = {"run",    "method",     "n",        "scale",    "corpus",   "seed",
                                               "step",   "status",     "train loss", "val loss", "tokens/s", "wall"};
        static const int right[NCOL] = {0, 0, 1, 0, 0, 1, 1, 0, 1, 1, 1, 1};
        char(*cell)[NCOL][48] = calloc_check((size_t)rs.n, sizeof *cell);
        int width[NCOL];
        for (int k = 0; k < NCOL; k++) width[k] = text_width(head[k]);
        int wrun = width[0];
        for (int i = 0; i < rs.n; i++) {
            const row *x = &rows[i];
            const an_run *r = x->r;
            char(*c)[48] = cell[i];
            snprintf(c[1], 48, "%s", r->variant);
            snprintf(c[2], 48, "%d", r->n);
            snprintf(c[3], 48, "%s", r->scale);
            snprintf(c[4], 48, "%s", r->corpus);
            snprintf(c[5], 48, "%llu", (unsigned long long)r->seed);
            if (isfinite(x->step)) snprintf(c[6], 48, "%.0f/%d", x->step, r->steps);
            else snprintf(c[6], 48, "-/%d", r->steps);
            snprintf(c[7], 48, "%s", r->status);
            num(c[8], 48, x->train, "%.4f");
            if (isfinite(x->val) && isfinite(x->val_step)) snprintf(c[9], 48, "%.4f @%.0f", x->val, x->val_step);
            else num(c[9], 48, x->val, "%.4f");
            num(c[10], 48, x->tokens, "%.0f");
            if (isfinite(x->wall)) fmt_duration(x->wall, c[11], 48);
            else snprintf(c[11], 48, "-");
            const int w = text_width(r->dir);
            if (w > wrun) wrun = w;
            for (int k = 1; k < NCOL; k++) {
                const int wk = text_width(c[k]);
                if (wk > width[k]) width[k] = wk;
            }
        }
        width[0] = wrun;
        for (int i = -1; i < rs.n; i++) {
            for (int k = 0; k < NCOL; k++) {
                const char *t = i < 0 ? head[k] : k == 0 ? rows[i].r->dir : cell[i][k];
                const int pad = width[k] - text_width(t);
                if (k) fputs("  ", stdout);
                if (right[k]) printf("%*s%s", pad, "", t);
                else if (k < NCOL - 1) printf("%s%*s", t, pad, "");
                else fputs(t, stdout);
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
