/* inspect.c: `s2hc inspect` (look at the residual matrices a run recorded) and `s2hc probe`
 * (run the end-of-training probe /final on a run's checkpoint).
 *
 *   s2hc inspect runs/<name> [--layer L] [--step last|final|N] [--csv]
 *   s2hc inspect runs/<name> --history QUANTITY [--layer L] [--csv]
 *   s2hc inspect --method-compare runs/a runs/b ... [--layer L] [--csv]
 *   s2hc probe runs/<name> [--samples S] [--batch B] [--data DIR]
 *
 * inspect reads run.h5 only (the /probe rows, or /final with --step final) and prints, for
 * one sublayer, the token-averaged H_res with its row and column sums, a heat map, its
 * singular values and those of H_res - J, the diagonal share, the streams' cosine
 * similarity and the per-token sum deviations; without --layer, one line per sublayer.
 * --csv prints the same as CSV (long format for one layer, one row per layer otherwise).
 * --history follows one of the summary's numbers over every probe step.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../probes/probes.h"
#include "ablate.h"
#include "checkpoint.h"
#include "run.h"
#include "util.h"

#if REAL_IS_DOUBLE
#error "s2hc probe loads float32 checkpoints into a float32 model"
#endif

/* ---- reading a run ------------------------------------------------------------------------ */

/* --layer all: every sublayer's view, one after the other (the long CSV of every matrix) */
#define INSPECT_ALL_LAYERS (-2)

typedef struct {
    char dir[RUN_DIR_MAX + 1], path[RUN_DIR_MAX + 16];
    h5log log;
    const char *method;
    int Lh, n, hc;
    /* the selected step */
    int is_final;
    long long step;
    size_t prow, prows;        /* probe row and row count */
    double *H;                 /* [Lh, n, n] */
    double *cos, *cosb, *dfrac, *csx, *rsx; /* [Lh], NaN where absent */
    double *rms;               /* [Lh + 1] or NULL */
} run_view;

static const h5log_series *find(const h5log *log, const char *path) {
    int i = h5log_find(log, path);
    return i >= 0 ? &log->series[i] : NULL;
}

/* Element k of a series, NaN past its end (the shapes come from the file). */
static double value_at(const h5log_series *s, size_t k) {
    if (!s || k >= s->rows * s->row_elems) return NAN;
    switch (s->type) {
    case H5LOG_F32: return ((const float *)s->data)[k];
    case H5LOG_F64: return ((const double *)s->data)[k];
    default: return (double)((const int64_t *)s->data)[k];
    }
}

/* Row `row` of a per-layer series of row_elems == count into out (NaN if absent). */
static void copy_row(const h5log *log, const char *path, size_t row, size_t count, double *out) {
    const h5log_series *s = find(log, path);
    for (size_t k = 0; k < count; k++) out[k] = NAN;
    if (!s || row >= s->rows || s->row_elems != count) return;
    for (size_t k = 0; k < count; k++) out[k] = value_at(s, row * s->row_elems + k);
}

/* Mean over the leading axis of a static [S, count] dataset. */
static void mean_rows(const h5log *log, const char *path, size_t count, double *out) {
    const h5log_series *s = find(log, path);
    for (size_t k = 0; k < count; k++) out[k] = NAN;
    if (!s || s->row_rank != 2 || s->row_dims[1] != count) return;
    size_t S = s->row_dims[0];
    for (size_t k = 0; k < count; k++) {
        double acc = 0;
        size_t cnt = 0;
        for (size_t i = 0; i < S; i++) {
            double v = value_at(s, i * count + k);
            if (!isnan(v)) { acc += v; cnt++; }
        }
        out[k] = cnt ? acc / (double)cnt : NAN;
    }
}

static void run_view_free(run_view *v) {
    h5log_free(&v->log);
    free(v->H);
    free(v->cos);
    free(v->cosb);
    free(v->dfrac);
    free(v->csx);
    free(v->rsx);
    free(v->rms);
}

/* Who `s2hc probe` says it is in the run's lock file (run_lock). */
#define PROBE_WHO "s2hc probe"

/* The error for a run file without the probes asked for: none at all (none), or no
 * /final. A run in use refuses `s2hc probe` until its holder ends, so that is said rather
 * than a command that would be refused now; and a holder that is `s2hc probe` writes
 * /final itself as it ends. */
static void say_no_probes(const run_view *v, int none) {
    const char *what = none ? "holds no probes (/probe or /final)" : "has no /final group";
    char holder[256];
    if (!run_in_use(v->dir, holder, sizeof holder)) {
        fprintf(stderr, "s2hc: error: %s %s; %srun `s2hc probe ", v->path, what,
                none ? "train with probe.every > 0 or " : "");
        sh_word_put(stderr, v->dir); /* a command to paste: the folder as one word */
        fputs("`\n", stderr);
        return;
    }
    fprintf(stderr, "s2hc: error: %s %s yet; the run is in use%s%s%s: ", v->path, what, holder[0] ? " (" : "", holder,
            holder[0] ? ")" : "");
    if (!strncmp(holder, PROBE_WHO " ", strlen(PROBE_WHO " ")))
        fprintf(stderr, "that probe writes /final as it ends\n");
    else {
        fputs("run `s2hc probe ", stderr);
        sh_word_put(stderr, v->dir);
        fputs("` once that has ended (a training with probe.final_samples > 0 writes /final itself as it ends)\n",
              stderr);
    }
}

/* The selected step's arrays (v->is_final, else /probe row v->prow) into v: allocated on
 * the first call, overwritten on the next (inspect --history reads every row in turn). */
static int view_read_row(run_view *v) {
    size_t L = (size_t)v->Lh, nn = (size_t)v->n * v->n;
    if (!v->rms) v->rms = malloc_check((L + 1) * sizeof(double));
    if (v->is_final) mean_rows(&v->log, "/final/stream_rms", L + 1, v->rms);
    else copy_row(&v->log, "/probe/stream_rms", v->prow, L + 1, v->rms);
    if (!v->hc) return 0;
    if (!v->H) {
        v->H = malloc_check(L * nn * sizeof(double));
        v->cos = malloc_check(L * sizeof(double));
        v->cosb = malloc_check(L * sizeof(double));
        v->dfrac = malloc_check(L * sizeof(double));
        v->csx = malloc_check(L * sizeof(double));
        v->rsx = malloc_check(L * sizeof(double));
    }
    if (v->is_final) {
        copy_row(&v->log, "/final/H_res_mean", 0, L * nn, v->H);
        mean_rows(&v->log, "/final/cos_sim", L, v->cos);
        mean_rows(&v->log, "/final/cos_sim_before", L, v->cosb);
        copy_row(&v->log, "/final/diag_frac", 0, L, v->dfrac);
        copy_row(&v->log, "/final/colsum_dev_max", 0, L, v->csx);
        copy_row(&v->log, "/final/rowsum_dev_max", 0, L, v->rsx);
    } else {
        copy_row(&v->log, "/probe/H_res_mean", v->prow, L * nn, v->H);
        copy_row(&v->log, "/probe/cos_sim", v->prow, L, v->cos);
        copy_row(&v->log, "/probe/cos_sim_before", v->prow, L, v->cosb);
        copy_row(&v->log, "/probe/diag_frac_layer", v->prow, L, v->dfrac);
        copy_row(&v->log, "/probe/colsum_dev_max", v->prow, L, v->csx);
        copy_row(&v->log, "/probe/rowsum_dev_max", v->prow, L, v->rsx);
    }
    return 0;
}

/* A run file's log, loaded into v->log (v->path and v->dir its names): the step selected
 * (last, final or a number) and its matrices read. 0, or 1 (2: a bad --step) with a
 * message. */
static int run_view_select(run_view *v, const char *step_sel) {
    /* another s2hc file given by its path (the checkpoint beside run.h5): said as such,
       not as a run without probes */
    const char *format = h5log_get_attr_str(&v->log, "/", "format");
    if (format && strcmp(format, "s2hc-run") != 0) {
        fprintf(stderr, "s2hc: error: %s is not a run file (its format is '%s'); give the run directory or its "
                "run.h5\n", v->path, format);
        return 1;
    }
    v->method = h5log_get_attr_str(&v->log, "/", "method");
    if (!v->method) v->method = "?";
    const h5log_series *ps = find(&v->log, "/probe/step"), *pH = find(&v->log, "/probe/H_res_mean"),
                       *fH = find(&v->log, "/final/H_res_mean");
    v->prows = ps ? ps->rows : 0;
    const h5log_series *shape = pH ? pH : fH;
    if (!shape) {
        v->hc = 0;
        v->Lh = 0;
        const h5log_series *r = find(&v->log, ps ? "/probe/stream_rms" : "/final/stream_rms");
        if (r && r->row_rank >= 1 && r->row_dims[r->row_rank - 1] >= 1 && r->row_dims[r->row_rank - 1] <= 1024)
            v->Lh = (int)(r->row_dims[r->row_rank - 1]) - 1;
        if (!ps && !r) {
            say_no_probes(v, 1);
            return 1;
        }
    } else {
        /* [sublayers, n, n] per row: n sizes the fixed arrays of the probes' math */
        if (shape->row_rank != 3 || shape->row_dims[1] != shape->row_dims[2] || shape->row_dims[1] < 1 ||
            shape->row_dims[1] > PROBE_MAX_N || shape->row_dims[0] < 1 || shape->row_dims[0] > 1024) {
            fprintf(stderr, "s2hc: error: %s: %s has rows of rank %d (", v->path, shape->path, shape->row_rank);
            for (int i = 0; i < shape->row_rank; i++) fprintf(stderr, "%s%zu", i ? " x " : "", shape->row_dims[i]);
            fprintf(stderr, "), not [sublayers, n, n] with n <= %d (corrupt, or not a run file of s2hc?)\n",
                    PROBE_MAX_N);
            return 1;
        }
        v->hc = 1;
        v->Lh = (int)shape->row_dims[0];
        v->n = (int)shape->row_dims[1];
    }
    /* which step */
    int want_final = step_sel && !strcmp(step_sel, "final");
    int want_last = !step_sel || !strcmp(step_sel, "last");
    if (want_last && v->prows == 0) want_final = 1;
    if (want_final) {
        if (!find(&v->log, "/final/window")) {
            say_no_probes(v, 0);
            return 1;
        }
        v->is_final = 1;
        v->step = -1;
        for (int i = 0; i < v->log.n_attrs; i++)
            if (!strcmp(v->log.attrs[i].path, "/final") && !strcmp(v->log.attrs[i].name, "step"))
                v->step = step_from_double(v->log.attrs[i].num);
    } else if (want_last) {
        v->prow = v->prows - 1;
        v->step = step_from_double(value_at(ps, v->prow));
    } else {
        char *end;
        errno = 0;
        long long want = strtoll(step_sel, &end, 10);
        if (*end || end == step_sel || want < 0 || errno == ERANGE) {
            fprintf(stderr, "s2hc: error: --step: expected last, final or a step number (0 or more), got '%s'\n",
                    step_sel);
            return 2;
        }
        size_t r = 0;
        int found = 0;
        for (; ps && r < ps->rows; r++)
            if (step_from_double(value_at(ps, r)) == want) { found = 1; break; }
        if (!found) {
            fprintf(stderr, "s2hc: error: %s: no probe at step %lld; probed steps:", v->path, want);
            for (size_t k = 0; ps && k < ps->rows; k++) fprintf(stderr, " %lld", step_from_double(value_at(ps, k)));
            if (!v->prows) /* probe.every 0: no /probe rows, only /final */
                fprintf(stderr, " none (the run was trained with probe.every 0); --step final reads /final");
            fprintf(stderr, "\n");
            return 1;
        }
        v->prow = r;
        v->step = want;
    }
    return view_read_row(v);
}

/* Open runs/<name>/run.h5 (or a run.h5 path) and select the step. 0, or 1 with a message. */
static int run_view_open(run_view *v, const char *arg, const char *step_sel) {
    memset(v, 0, sizeof *v);
    h5log_init(&v->log);
    size_t len = strlen(arg);
    int given_file = len > 3 && !strcmp(arg + len - 3, ".h5");
    if (!run_dir_fits(arg)) return 1; /* a file's path too: its folder is the run's */
    if (given_file) { /* the file, and its folder for the names and the commands suggested */
        snprintf(v->path, sizeof v->path, "%s", arg);
        parent_dir(v->dir, sizeof v->dir, arg);
    } else {
        snprintf(v->dir, sizeof v->dir, "%s", arg);
        while (strlen(v->dir) > 1 && v->dir[strlen(v->dir) - 1] == '/') v->dir[strlen(v->dir) - 1] = '\0';
        snprintf(v->path, sizeof v->path, "%s/run.h5", v->dir);
    }
    char err[1024];
    if (!file_exists(v->path) && !given_file && run_busy_unsaved(v->dir)) return 1;
    if (h5log_load(&v->log, v->path, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        return 1;
    }
    const double last = h5log_last(&v->log, "/train/step");
    if (!isnan(last)) run_note_in_use(v->dir, "its run file", (long long)last);
    return run_view_select(v, step_sel);
}

/* ---- printing ------------------------------------------------------------------------------ */

typedef struct {
    int csv, color, unicode;
} out_style;

static const char *kind_of(int l) { return l % 2 ? "mlp" : "attn"; }

static void step_text(const run_view *v, char *buf, size_t len) {
    if (v->is_final) snprintf(buf, len, "final");
    else if (v->step < 0) snprintf(buf, len, "?"); /* the file's step is not a step count */
    else snprintf(buf, len, "%lld", v->step);
}

/* ANSI 256-colour background for v / scale in [-1, 1]: white at 0, red positive, blue negative. */
static int color_of(double t) {
    if (isnan(t)) return 244;
    if (t > 1) t = 1;
    if (t < -1) t = -1;
    int g = (int)lround(5 * (1 - fabs(t)));
    return t >= 0 ? 16 + 36 * 5 + 6 * g + g : 16 + 36 * g + 6 * g + 5;
}

static const char *shade_of(double t) {
    static const char *const glyph[] = {"  ", "\u2591\u2591", "\u2592\u2592", "\u2593\u2593", "\u2588\u2588"};
    if (isnan(t)) return "??";
    double a = fabs(t);
    int k = a >= 0.8 ? 4 : a >= 0.6 ? 3 : a >= 0.4 ? 2 : a >= 0.15 ? 1 : 0;
    return glyph[k];
}

typedef struct {
    double sv[PROBE_MAX_N], dev[PROBE_MAX_N], rs[PROBE_MAX_N], cs[PROBE_MAX_N];
    double diag_mean, offdiag_max, diag_share;
    double dist_identity; /* ||H_res - I||_2 */
} layer_stats;

static void layer_stats_of(const run_view *v, int l, layer_stats *s) {
    const int n = v->n;
    const double *H = v->H + (size_t)l * n * n;
    probe_sv_and_deviation(H, n, s->sv, s->dev);
    probe_row_col_sums(H, n, s->rs, s->cs);
    double tr = 0, abs_sum = 0, off = -INFINITY;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double x = H[i * n + j];
            abs_sum += fabs(x);
            if (i == j) tr += x;
            else if (x > off) off = x;
        }
    s->diag_mean = tr / n;
    s->offdiag_max = off;
    double D[PROBE_MAX_N * PROBE_MAX_N];
    for (int k = 0; k < n * n; k++) D[k] = H[k] - (k % (n + 1) == 0);
    s->dist_identity = probe_spectral_norm(D, n);
    s->diag_share = abs_sum > 0 ? tr / abs_sum : NAN;
}

/* A CSV row's first fields, "run,method,step," (the run's folder and the method quoted as
 * CSV quotes them: a folder may hold a comma or a quote). */
static void csv_lead(const run_view *v, const char *stp) {
    csv_field_put(stdout, v->dir);
    putchar(',');
    csv_field_put(stdout, v->method);
    printf(",%s,", stp);
}

/* Sublayer l's recorded ablations (s2hc ablate --record: /ablate/delta and ci95, rows
 * identity, mean, uniform and, from the fifty-sixth session, branch; columns the
 * sublayers, then all): each measured one's rise and interval into delta[k], ci[k] (NaN:
 * not measured). 0 when the run holds a record of this model's sublayers, else -1. */
static int ablation_of(const run_view *v, int l, double delta[ABLATE_KINDS], double ci[ABLATE_KINDS]) {
    const h5log_series *d = find(&v->log, "/ablate/delta"), *c = find(&v->log, "/ablate/ci95");
    for (int k = 0; k < ABLATE_KINDS; k++) delta[k] = ci[k] = NAN;
    if (!d || !c || d->row_rank != 2 || c->row_rank != 2 || d->row_dims[1] != (size_t)v->Lh + 1 ||
        c->row_dims[1] != d->row_dims[1] || c->row_dims[0] != d->row_dims[0] || d->row_dims[0] > ABLATE_KINDS)
        return -1;
    for (size_t k = 0; k < d->row_dims[0]; k++) {
        delta[k] = value_at(d, k * d->row_dims[1] + (size_t)l);
        ci[k] = value_at(c, k * c->row_dims[1] + (size_t)l);
    }
    return 0;
}

/* The text view's lines of sublayer l's recorded ablations, if any. */
static void print_ablation(const run_view *v, int l) {
    static const char *const heads[ABLATE_KINDS] = {"H_res := I", "H_res := its token mean", "H_res := 11^T/n",
                                                    "its output f := 0"};
    double delta[ABLATE_KINDS], ci[ABLATE_KINDS];
    if (ablation_of(v, l, delta, ci) != 0) return;
    const double step = h5log_get_attr_num(&v->log, "/ablate", "step");
    const double batches = h5log_get_attr_num(&v->log, "/ablate", "batches");
    printf("validation loss's rise when ablated (s2hc ablate --record");
    if (!isnan(step)) printf(", step %.0f", step);
    if (!isnan(batches)) printf(", %.0f batches", batches);
    const char *mean_from = h5log_get_attr_str(&v->log, "/ablate", "mean_from");
    if (!isnan(delta[ABLATE_MEAN]) && mean_from && !strcmp(mean_from, "train"))
        printf(", the mean over the training split's");
    printf("):\n");
    for (int k = 0; k < ABLATE_KINDS; k++) {
        if (isnan(delta[k])) continue;
        printf("  %-24s ", heads[k]);
        signed_put(stdout, delta[k], 0, 5);
        if (!isnan(ci[k])) printf(" ± %.5f", ci[k]);
        putchar('\n');
    }
}

static void print_layer(const run_view *v, int l, const out_style *st) {
    const int n = v->n;
    const double *H = v->H + (size_t)l * n * n;
    layer_stats s;
    layer_stats_of(v, l, &s);
    char stp[32];
    step_text(v, stp, sizeof stp);
    if (st->csv) {
#define ROW(q, i, j, val) (csv_lead(v, stp), printf("%d,%s,%d,%d,%.9g\n", l, q, i, j, val))
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) ROW("H_res", i, j, H[i * n + j]);
        for (int i = 0; i < n; i++) ROW("row_sum", i, -1, s.rs[i]);
        for (int j = 0; j < n; j++) ROW("col_sum", -1, j, s.cs[j]);
        for (int i = 0; i < n; i++) ROW("sv", i, -1, s.sv[i]);
        for (int i = 0; i < n; i++) ROW("dev_sv", i, -1, s.dev[i]);
        ROW("diag_share", -1, -1, s.diag_share);
        ROW("diag_frac", -1, -1, v->dfrac[l]);
        ROW("cos_before", -1, -1, v->cosb[l]);
        ROW("cos_after", -1, -1, v->cos[l]);
        ROW("colsum_dev_max", -1, -1, v->csx[l]);
        ROW("rowsum_dev_max", -1, -1, v->rsx[l]);
        double delta[ABLATE_KINDS], ci[ABLATE_KINDS];
        if (ablation_of(v, l, delta, ci) == 0)
            for (int k = 0; k < ABLATE_KINDS; k++) {
                if (isnan(delta[k])) continue;
                char q[64];
                snprintf(q, sizeof q, "ablate_%s", ablate_kind_names[k]);
                ROW(q, -1, -1, delta[k]);
                snprintf(q, sizeof q, "ablate_%s_ci95", ablate_kind_names[k]);
                ROW(q, -1, -1, ci[k]);
            }
#undef ROW
        return;
    }
    printf("%s  method %s  n = %d  %s%s  sublayer %d of %d (block %d, %s)\n", v->dir, v->method, n,
           v->is_final ? "final probe" : "probe at step ", v->is_final ? "" : stp, l, v->Lh, l / 2, kind_of(l));
    if (v->is_final && v->step >= 0) printf("  (the final probe was taken at step %lld)\n", v->step);
    printf("H_res averaged over tokens (X_next = H_res . X: row i = output stream i, column j = input stream j)\n");
    double scale = 1;
    for (int k = 0; k < n * n; k++)
        if (fabs(H[k]) > scale) scale = fabs(H[k]);
    printf("          ");
    for (int j = 0; j < n; j++) {
        char lab[16];
        snprintf(lab, sizeof lab, "in %d", j);
        printf(" %8s", lab);
    }
    printf(" | row sum%s\n", st->color ? "" : (st->unicode ? "   heat map" : ""));
    for (int i = 0; i < n; i++) {
        printf("  out %-3d ", i);
        for (int j = 0; j < n; j++) {
            double x = H[i * n + j];
            if (st->color) {
                int c = color_of(x / scale);
                printf(" \033[48;5;%dm\033[38;5;%dm%8.4f\033[0m", c, fabs(x / scale) > 0.6 ? 231 : 16, x);
            } else {
                printf(" %8.4f", x);
            }
        }
        printf(" | %7.4f", s.rs[i]);
        if (!st->color && st->unicode) {
            printf("   ");
            for (int j = 0; j < n; j++) printf("%s", shade_of(H[i * n + j] / scale));
        }
        printf("\n");
    }
    printf("  col sum ");
    for (int j = 0; j < n; j++) printf(" %8.4f", s.cs[j]);
    printf("\n");
    printf("singular values          ");
    for (int i = 0; i < n; i++) printf(" %.4f", s.sv[i]);
    printf("\ndeviation H_res - J sv   ");
    for (int i = 0; i < n; i++) printf(" %.4f", s.dev[i]);
    printf("\ndiagonal share            %.4f = trace / sum |H_res| (mean diagonal entry %.4f, largest "
           "off-diagonal %.4f)\n", s.diag_share, s.diag_mean, s.offdiag_max);
    printf("row maxima on diagonal    %.1f%% of the per-token matrices\n", 100 * v->dfrac[l]);
    printf("stream cosine similarity  %.4f before mixing, %.4f after (mean over stream pairs and tokens)\n", v->cosb[l],
           v->cos[l]);
    printf("per-token |sum - 1|       columns max %.3g, rows max %.3g\n", v->csx[l], v->rsx[l]);
    if (!st->color && st->unicode)
        printf("heat map: |entry| / %.3g:  \u2588\u2588 >= 0.8  \u2593\u2593 >= 0.6  \u2592\u2592 >= 0.4  "
               "\u2591\u2591 >= 0.15\n", scale);
    print_ablation(v, l);
}

/* One line on the Jacobian estimates of /final, if the view is of /final. */
static void print_jacobian(const run_view *v) {
    const h5log_series *j = find(&v->log, "/final/jacobian_norm"), *jr = find(&v->log, "/final/jacobian_norm_residual");
    if (!j || !jr || !v->is_final || j->row_rank != 1 || jr->rows * jr->row_elems < j->row_dims[0] || !j->row_dims[0])
        return;
    size_t S = j->row_dims[0];
    double sj = 0, sr = 0, mj = 0, mr = 0;
    for (size_t k = 0; k < S; k++) {
        double a = value_at(j, k), b = value_at(jr, k);
        sj += a;
        sr += b;
        mj = fmax(mj, a);
        mr = fmax(mr, b);
    }
    printf("Jacobian ||d X_final / d X_0||_2 over %zu sequences: full network mean %.4f max %.4f; residual path only "
           "mean %.4f max %.4f\n", S, sj / S, mj, sr / S, mr);
}

static void print_summary_header(const out_style *st) {
    if (st->csv)
        printf("run,method,step,layer,block,kind,diag_mean,offdiag_max,sv_max,sv_min,dev_sv_max,dev_sv_min,"
               "colsum_dev_max,rowsum_dev_max,cos_before,cos_after,diag_frac,stream_rms,dist_identity,"
               "composite_norm\n");
}

static void print_summary(const run_view *v, const out_style *st) {
    char stp[32];
    step_text(v, stp, sizeof stp);
    const int n = v->n;
    if (!st->csv) {
        printf("%s  method %s  n = %d  %s%s", v->dir, v->method, v->hc ? n : 1, v->is_final ? "final probe" : "probe at step ",
               v->is_final ? "" : stp);
        if (!v->is_final) printf(" (row %zu of %zu)", v->prow + 1, v->prows);
        printf("\n");
        if (!v->hc) {
            printf("no hyper-connection frame (method %s, n = 1): no residual matrices; stream RMS entering each "
                   "sublayer:\n", v->method);
            for (int l = 0; l <= v->Lh; l++) printf("  sublayer %2d  %.4f%s\n", l, v->rms[l], l == v->Lh ? "  (final)" : "");
            print_jacobian(v);
            return;
        }
        printf("%5s %5s %4s  %7s %7s  %7s %7s  %7s %7s  %9s %9s  %6s %6s  %6s  %7s  %7s %8s\n", "layer", "block", "kind",
               "diag", "off max", "sv max", "sv min", "dev max", "dev min", "col dev", "row dev", "cos X", "cos HX", "diag%",
               "rms", "|H-I|", "|prod|");
    }
    if (!v->hc) {
        if (st->csv)
            for (int l = 0; l < v->Lh; l++) {
                csv_lead(v, stp);
                printf("%d,%d,%s,,,,,,,,,,,,%.9g,,\n", l, l / 2, kind_of(l), v->rms[l]);
            }
        if (st->csv) { /* the streams leaving the last sublayer: the text view's "(final)" */
            csv_lead(v, stp);
            printf("%d,,end,,,,,,,,,,,,%.9g,,\n", v->Lh, v->rms[v->Lh]);
        }
        return;
    }
    /* the gain of the residual path through sublayer l: ||H_l ... H_0||_2 of the matrices shown */
    double *cum = malloc_check((size_t)v->Lh * sizeof(double)), P[PROBE_MAX_N * PROBE_MAX_N];
    probe_composite(v->H, v->Lh, n, P, cum);
    for (int l = 0; l < v->Lh; l++) {
        layer_stats s;
        layer_stats_of(v, l, &s);
        if (st->csv) {
            csv_lead(v, stp);
            printf("%d,%d,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", l, l / 2,
                   kind_of(l), s.diag_mean, s.offdiag_max, s.sv[0], s.sv[n - 1], s.dev[0], s.dev[n - 1], v->csx[l],
                   v->rsx[l], v->cosb[l], v->cos[l], v->dfrac[l], v->rms[l], s.dist_identity, cum[l]);
        } else {
            printf("%5d %5d %4s  %7.4f %7.4f  %7.4f %7.4f  %7.4f %7.4f  %9.2e %9.2e  %6.3f %6.3f  %6.1f  %7.3f  %7.4f ", l,
                   l / 2, kind_of(l), s.diag_mean, s.offdiag_max, s.sv[0], s.sv[n - 1], s.dev[0], s.dev[n - 1],
                   v->csx[l], v->rsx[l], v->cosb[l], v->cos[l], 100 * v->dfrac[l], v->rms[l], s.dist_identity);
            if (cum[l] < 1e4) printf("%8.4f\n", cum[l]); /* 1.0000, not 1 */
            else printf("%8.3g\n", cum[l]);
        }
    }
    free(cum);
    if (st->csv) {
        csv_lead(v, stp);
        printf("%d,,end,,,,,,,,,,,,%.9g,,\n", v->Lh, v->rms[v->Lh]);
    } else
        printf("%5d %5s %4s  %*s%7.3f\n", v->Lh, "", "end", 95, "", v->rms[v->Lh]);
    if (!st->csv) {
        print_jacobian(v);
        printf("columns: diag = mean diagonal entry; sv / dev = singular values of H_res and H_res - J; col/row dev = "
               "max per-token |sum - 1|; cos X / cos HX = stream cosine similarity before / after mixing; diag%% = "
               "per-token matrices with every row maximum on the diagonal; end = the streams leaving the last sublayer; "
               "|H-I| = ||H_res - I||_2, the distance from the identity; |prod| = ||H_l ... H_1 H_0||_2, the gain of "
               "the residual path through sublayer l (the product of the matrices above)\n");
    }
}

/* ---- inspect --history: one quantity per sublayer, a row per probe step ------------------ */

enum { H_DIST, H_PROD, H_DIAG, H_OFFMAX, H_SVMAX, H_SVMIN, H_DEVMAX, H_COLDEV, H_ROWDEV, H_COSX, H_COSHX, H_DIAGPCT, H_RMS };

typedef struct {
    const char *name, *head, *what;
    int hc;  /* 1: needs the residual matrices (not rc's) */
    int exp; /* printed as %.2e (sums off by float rounding) */
} hist_q;

/* indexed by the enum above */
static const hist_q hist_qs[] = {
    [H_DIST] = {"dist", "|H-I|", "||H_res - I||_2, the distance from the identity", 1, 0},
    [H_PROD] = {"prod", "|prod|", "||H_l ... H_0||_2, the gain of the residual path through sublayer l", 1, 0},
    [H_DIAG] = {"diag", "diag", "the mean diagonal entry of H_res", 1, 0},
    [H_OFFMAX] = {"offmax", "off max", "the largest off-diagonal entry of H_res", 1, 0},
    [H_SVMAX] = {"svmax", "sv max", "the largest singular value of H_res", 1, 0},
    [H_SVMIN] = {"svmin", "sv min", "the smallest singular value of H_res", 1, 0},
    [H_DEVMAX] = {"devmax", "dev max", "the largest singular value of H_res - J", 1, 0},
    [H_COLDEV] = {"coldev", "col dev", "the largest per-token |column sum - 1|", 1, 1},
    [H_ROWDEV] = {"rowdev", "row dev", "the largest per-token |row sum - 1|", 1, 1},
    [H_COSX] = {"cosx", "cos X", "the streams' mean cosine similarity before mixing", 1, 0},
    [H_COSHX] = {"coshx", "cos HX", "the streams' mean cosine similarity after mixing", 1, 0},
    [H_DIAGPCT] = {"diagpct", "diag%", "the per-token matrices with every row maximum on the diagonal, in %", 1, 0},
    [H_RMS] = {"rms", "rms", "the streams' RMS entering each sublayer (end: leaving the last)", 0, 0},
};
#define N_HIST_Q ((int)(sizeof hist_qs / sizeof hist_qs[0]))

static int hist_find(const char *name) {
    for (int q = 0; q < N_HIST_Q; q++)
        if (!strcmp(name, hist_qs[q].name)) return q;
    return -1;
}

/* Quantity q of sublayer l at the row v holds (cum: the composites' norms, for prod). */
static double hist_value(const run_view *v, int q, int l, const double *cum) {
    switch (q) {
    case H_RMS: return v->rms[l];
    case H_PROD: return cum[l];
    case H_COLDEV: return v->csx[l];
    case H_ROWDEV: return v->rsx[l];
    case H_COSX: return v->cosb[l];
    case H_COSHX: return v->cos[l];
    case H_DIAGPCT: return 100 * v->dfrac[l];
    }
    layer_stats st; /* the matrix's own numbers */
    layer_stats_of(v, l, &st);
    switch (q) {
    case H_DIST: return st.dist_identity;
    case H_DIAG: return st.diag_mean;
    case H_OFFMAX: return st.offdiag_max;
    case H_SVMAX: return st.sv[0];
    case H_SVMIN: return st.sv[v->n - 1];
    }
    return st.dev[0]; /* H_DEVMAX */
}

/* The table of quantity q: a row per /probe step, then the /final probe's where there is
 * one; a column per sublayer (layer >= 0: that one alone). 0, or 1 with a message. */
static int print_history(run_view *v, int q, int layer, const out_style *st, int *header) {
    const hist_q *h = &hist_qs[q];
    if (h->hc && !v->hc) {
        fprintf(stderr, "s2hc: error: %s: method %s has no residual matrices (n = 1): --history rms is the one "
                "quantity it has\n", v->path, v->method);
        return 1;
    }
    const int cols = h->hc ? v->Lh : v->Lh + 1; /* rms: the streams leaving the last sublayer too */
    if (layer >= cols) { /* rms: column Lh, the streams leaving the last sublayer, too */
        char end[80] = "";
        if (!h->hc) snprintf(end, sizeof end, "; --history rms: %d too, the streams leaving the last", v->Lh);
        fprintf(stderr, "s2hc: error: --layer %d: %s has sublayers 0..%d%s\n", layer, v->path, v->Lh - 1, end);
        return 2;
    }
    const int has_final = find(&v->log, "/final/window") != NULL, rows = (int)v->prows + has_final;
    if (!rows) {
        say_no_probes(v, 1);
        return 1;
    }
    const int l0 = layer >= 0 ? layer : 0, l1 = layer >= 0 ? layer + 1 : cols;
    if (st->csv && !(*header)++) printf("run,method,step,layer,quantity,value\n"); /* not before an error */
    if (!st->csv) {
        printf("%s  method %s  n = %d  %s: %s, per sublayer, %zu probe step%s%s\n", v->dir, v->method,
               v->hc ? v->n : 1, h->head, h->what, v->prows, v->prows == 1 ? "" : "s",
               has_final ? " and the final probe" : "");
        printf("%7s", "step");
        for (int l = l0; l < l1; l++) {
            char c[24];
            snprintf(c, sizeof c, "%d %s", l, l == v->Lh ? "end" : kind_of(l));
            printf("  %9s", c);
        }
        printf("\n");
    }
    double *cum = malloc_check((size_t)(v->Lh > 0 ? v->Lh : 1) * sizeof(double)),
           P[PROBE_MAX_N * PROBE_MAX_N];
    const h5log_series *ps = find(&v->log, "/probe/step");
    for (int r = 0; r < rows; r++) {
        v->is_final = r == (int)v->prows;
        v->prow = v->is_final ? 0 : (size_t)r;
        v->step = v->is_final ? -1 : step_from_double(value_at(ps, v->prow));
        view_read_row(v);
        if (v->hc) probe_composite(v->H, v->Lh, v->n, P, cum);
        char stp[32];
        step_text(v, stp, sizeof stp);
        if (!st->csv) printf("%7s", stp);
        for (int l = l0; l < l1; l++) {
            const double x = hist_value(v, q, l, cum);
            if (st->csv) {
                csv_lead(v, stp);
                printf("%d,%s,%.9g\n", l, h->name, x);
            } else if (h->exp || (fabs(x) >= 1e5 && isfinite(x)))
                printf("  %9.2e", x);
            else
                printf("  %9.4f", x);
        }
        if (!st->csv) printf("\n");
    }
    free(cum);
    return 0;
}

static void inspect_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc inspect RUN_DIR [--layer L] [--step last|final|N] [--csv] [--color|--no-color]\n"
            "       s2hc inspect RUN_DIR --history QUANTITY [--layer L] [--csv]\n"
            "       s2hc inspect --method-compare RUN_DIR RUN_DIR... [--layer L] [--step ...|--history Q] [--csv]\n"
            "\n"
            "Show the residual matrices H_res a run recorded in RUN_DIR/run.h5.\n"
            "  --layer L     one sublayer (0-based; 2 per block: 2b = attention, 2b+1 = MLP): its token-averaged\n"
            "                H_res with row and column sums and a heat map, singular values of H_res and of\n"
            "                H_res - J, the diagonal share, stream cosine similarity, per-token sum deviation.\n"
            "                --layer all: that view of every sublayer (with --csv: every matrix, long format).\n"
            "                Without --layer: one line per sublayer.\n"
            "  --step S      last (default: the last /probe row), final (the /final group, over S sequences)\n"
            "                or the step N of a /probe row\n"
            "  --history Q   one quantity of the summary over training: a row per probe step (and the\n"
            "                final probe), a column per sublayer (--layer L: that one). Q is one of dist\n"
            "                (|H-I|), prod (|prod|), diag, offmax, svmax, svmin, devmax, coldev, rowdev,\n"
            "                cosx, coshx, diagpct, rms (rms alone for rc); --csv: the long format\n"
            "                run,method,step,layer,quantity,value\n"
            "  --method-compare RUN...  the same view for several runs, one after the other\n"
            "  --csv         CSV for pandas: one row per sublayer, or (with --layer) the long format\n"
            "                run,method,step,layer,quantity,i,j,value\n"
            "  --color / --no-color     ANSI colour heat map (default: when stdout is a terminal, TERM is not dumb\n"
            "                           and NO_COLOR is unset or empty)\n"
            "\n"
            "examples:\n"
            "  s2hc inspect runs/tiny\n"
            "  s2hc inspect runs/tiny --layer 3 --step final\n"
            "  s2hc inspect --method-compare runs/tiny runs/tiny-s2hc --layer 1\n"
            "  s2hc inspect runs/tiny-s2hc --history dist\n"
            "  s2hc inspect runs/tiny --csv > layers.csv\n"
            "  s2hc inspect runs/tiny --layer all --step final --csv > matrices.csv\n");
}

/* inspect_main with runs[] room for every argument (every run of a grid: --method-compare
 * with the shell's runs/grid/STAR/). */
static int inspect_with(int argc, char **argv, const char **runs) {
    int nruns = 0, layer = -1, compare = 0, force_color = -1, hist = -1;
    const char *step_sel = NULL;
    out_style st = {0, 0, 1};
    opt_seen seen = {.cmd = "inspect"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        const int kind = opt_kind(a, &ended);
        if (kind < 0) continue;
        if (kind > 0) {
            runs[nruns++] = a;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { inspect_usage(stdout); return 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--layer", 1)) && !strcmp(v, "all")) layer = INSPECT_ALL_LAYERS;
        else if (v) {
            char *end;
            errno = 0;
            long n = strtol(v, &end, 10);
            layer = n >= 0 && n <= INT_MAX && errno == 0 ? (int)n : -1; /* no wrap of 2^32 to 0 */
            if (end == v || *end || layer < 0) {
                fprintf(stderr, "s2hc: error: --layer: expected a sublayer index >= 0 or 'all', got '%s'\n", v);
                return 2;
            }
        } else if ((v = opt_once(&seen, argc, argv, &i, "--step", 1))) step_sel = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--history", 0))) {
            if ((hist = hist_find(v)) < 0) {
                fprintf(stderr, "s2hc: error: --history '%s': one of", v);
                for (int q = 0; q < N_HIST_Q; q++) fprintf(stderr, "%s %s", q ? "," : "", hist_qs[q].name);
                fprintf(stderr, "\n");
                return 2;
            }
        }
        else if (!strcmp(a, "--csv")) st.csv = 1;
        else if (!strcmp(a, "--color")) force_color = 1;
        else if (!strcmp(a, "--no-color")) force_color = 0;
        else if (!strcmp(a, "--method-compare")) compare = 1;
        else {
            fprintf(stderr, "s2hc: error: inspect: unknown option '%s'%s\n", a, i + 1 < argc ? "" : " (or its value is missing)");
            inspect_usage(stderr);
            return 2;
        }
    }
    if (nruns == 0 || (nruns > 1 && !compare)) {
        if (nruns > 1) fprintf(stderr, "s2hc: error: inspect: several runs need --method-compare\n");
        inspect_usage(stderr);
        return 2;
    }
    if (hist >= 0 && step_sel) {
        fprintf(stderr, "s2hc: error: inspect: --history reads every probe step; --step does not go with it\n");
        return 2;
    }
    const char *no_color = getenv("NO_COLOR"); /* no-color.org: set and not empty */
    st.color = force_color >= 0 ? force_color : (terminal_live(STDOUT_FILENO) && !(no_color && no_color[0]));
    if (st.csv) st.color = 0, st.unicode = 0;
    int rc = 0, header = !st.csv, shown = 0; /* the CSV header goes out with the first rows, not before an error */
    for (int r = 0; r < nruns; r++) {
        if (nruns > 1 && (grid_slurm_folder(runs[r]) || grid_index_file(runs[r]))) {
            fprintf(stderr, "note: %s: passed over: %s, not a run\n", runs[r],
                    grid_slurm_folder(runs[r]) ? "a grid's folder of Slurm scripts" : "a grid's index");
            continue;
        }
        run_view v;
        int e = run_view_open(&v, runs[r], step_sel);
        if (e) {
            run_view_free(&v);
            rc = e;
            continue;
        }
        /* a grid's rc point beside the others: no matrices to compare */
        const int matrices = hist >= 0 ? hist_qs[hist].hc : layer >= 0 || layer == INSPECT_ALL_LAYERS;
        if (matrices && !v.hc && nruns > 1) {
            fprintf(stderr, "note: %s: passed over: method %s has no residual matrices (n = 1)\n", v.path, v.method);
            run_view_free(&v);
            continue;
        }
        if (shown++ && !st.csv) printf("\n"); /* a blank line between runs, none before the first shown */
        if (hist >= 0) {
            const int e2 = print_history(&v, hist, layer, &st, &header);
            if (e2 > rc) rc = e2;
        } else if (layer >= 0 || layer == INSPECT_ALL_LAYERS) {
            if (!v.hc) {
                fprintf(stderr, "s2hc: error: %s: method %s has no residual matrices (n = 1)\n", v.path, v.method);
                rc = 1;
            } else if (layer >= v.Lh) {
                fprintf(stderr, "s2hc: error: --layer %d: %s has sublayers 0..%d\n", layer, v.path, v.Lh - 1);
                rc = 2;
            } else {
                if (!header++) printf("run,method,step,layer,quantity,i,j,value\n");
                for (int l = layer >= 0 ? layer : 0; l < (layer >= 0 ? layer + 1 : v.Lh); l++) {
                    if (l > (layer >= 0 ? layer : 0) && !st.csv) printf("\n");
                    print_layer(&v, l, &st);
                }
            }
        } else {
            if (!header++) print_summary_header(&st);
            print_summary(&v, &st);
        }
        run_view_free(&v);
    }
    return rc;
}

int inspect_main(int argc, char **argv) {
    const char **runs = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *runs);
    const int rc = inspect_with(argc, argv, runs);
    free(runs);
    return rc;
}

/* ---- s2hc probe ------------------------------------------------------------------------------ */

static void probe_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc probe RUN_DIR... [--samples S] [--batch B] [--data DIR]\n"
            "\n"
            "Run the end-of-training probe on the weights in RUN_DIR/ckpt.h5 and write the /final group of\n"
            "RUN_DIR/run.h5 (replacing any previous one; the file is saved atomically). Refused (exit 1)\n"
            "while a training, an eval or another probe writes the run. Several runs (a grid's,\n"
            "runs/grid/*) are probed in turn, each under a header; the exit is the worst.\n"
            "  --samples S   validation sequences (default: the run's probe.final_samples, or its\n"
            "                default when the run had it 0)\n"
            "  --batch B     sequences per forward pass (default: the run's train.batch)\n"
            "  --data DIR    where the prepared corpora are (default: the run's data.dir)\n"
            "\n"
            "example:\n"
            "  s2hc probe runs/tiny --samples 1024 && s2hc inspect runs/tiny --step final\n");
}

/* `s2hc probe` of one run: 0, or 1 (it could not be probed). */
static int probe_one(const char *dir, const char *data_dir, int samples, int batch);
typedef struct {
    const char *data_dir;
    int samples, batch;
} probe_opts;
static int probe_run(const char *dir, void *ctx) {
    const probe_opts *o = ctx;
    return probe_one(dir, o->data_dir, o->samples, o->batch);
}

int probe_main(int argc, char **argv) {
    const char *data_dir = NULL;
    const char **dirs = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *dirs);
    int samples = 0, batch = 0, ndirs = 0, rc = 2;
    opt_seen seen = {.cmd = "probe"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        const int kind = opt_kind(a, &ended);
        if (kind < 0) continue;
        if (kind > 0) dirs[ndirs++] = a;
        else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { probe_usage(stdout); rc = 0; goto done; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--samples", 1)) || (v = opt_once(&seen, argc, argv, &i, "--batch", 1))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > 1000000) {
                fprintf(stderr, "s2hc: error: %s: expected a whole number from 1 to 1000000, got '%s'\n",
                        strncmp(a, "--samples", 9) ? "--batch" : "--samples", v);
                goto done;
            }
            if (!strncmp(a, "--samples", 9)) samples = (int)n;
            else batch = (int)n;
        } else if ((v = opt_once(&seen, argc, argv, &i, "--data", 0))) data_dir = v;
        else {
            fprintf(stderr, "s2hc: error: probe: unknown option '%s'%s\n", a,
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            probe_usage(stderr);
            goto done;
        }
    }
    if (!ndirs) { probe_usage(stderr); goto done; }
    if (data_dir && !data_dir_fits(data_dir, "probe --data")) goto done;
    probe_opts o = {data_dir, samples, batch};
    rc = runs_each(dirs, ndirs, stdout, probe_run, &o);
done:
    free(dirs);
    return rc;
}

static int probe_one(const char *dir, const char *data_dir, int samples, int batch) {
    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t ckpt_step = 0;
    int lock_fd;
    if (run_open_locked(dir, PROBE_WHO, &lock_fd, &cfg, &m, &log, &ckpt_step) != 0) return 1;
    if (data_dir) {
        snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", data_dir);
        snprintf(m.cfg.data_dir, sizeof m.cfg.data_dir, "%s", data_dir);
    }
    char run_path[1100], err[1024];
    snprintf(run_path, sizeof run_path, "%s/run.h5", dir);
    int rc;
    char val_path[1200];
    data_shard_path(val_path, sizeof val_path, cfg.data_dir, cfg.train_corpus, "val");
    data_shard val;
    int bad = shard_open(&val, val_path, err, sizeof err) != 0 || shard_fits(&val, cfg.vocab, 0, err, sizeof err) != 0;
    /* the validation set the run trained with: one rebuilt since would give /final another
       set's sequences than the run's /probe and /eval */
    if (!bad)
        bad = run_val_rebuilt(&log, val.count, val_path, run_path,
                              "the probe would not be over the run's validation sequences", err, sizeof err);
    if (bad) {
        if (val.map) shard_close(&val);
        fprintf(stderr, "s2hc: error: %s\n  (the run's validation corpus; --data DIR if it lives elsewhere)\n", err);
        model_free(&m);
        h5log_free(&log);
        close(lock_fd);
        return 1;
    }
    model_alloc_acts(&m, batch > 0 ? batch : cfg.batch);
    if (samples <= 0) samples = cfg.final_samples;
    if (samples <= 0) { /* the run's final probe was off (0): the key's default, said so */
        s2hc_config d;
        config_defaults(&d);
        samples = d.final_samples;
        fprintf(stderr, "s2hc: note: the run's probe.final_samples is 0 (off); probing %d sequences, its default "
                "(--samples S for another number)\n", samples);
    }
    printf("probing %s (method %s, n = %d, step %lld) over %d validation sequences of %d tokens...\n", dir, cfg.method,
           m.n, (long long)ckpt_step, samples, m.T);
    fflush(stdout);
    double t0 = now_seconds();
    rc = probe_final(&m, &val, samples, &log, (int)ckpt_step, 1);
    if (rc == 0) rc = h5log_save(&log, run_path) != 0;
    else rc = 1;
    if (rc == 0) {
        printf("done in %.1f s: /final written to %s\n", now_seconds() - t0, run_path);
        /* the summary of the log just saved, from memory: a reading of the file could
           meet another command's (the lock is released first, as the summary needs none) */
        close(lock_fd);
        lock_fd = -1;
        run_view v;
        memset(&v, 0, sizeof v);
        snprintf(v.dir, sizeof v.dir, "%s", dir);
        snprintf(v.path, sizeof v.path, "%s", run_path);
        v.log = log; /* moved: the view frees it */
        h5log_init(&log);
        if (run_view_select(&v, "final") == 0) {
            out_style st = {0, 0, 0};
            print_summary(&v, &st);
        } else rc = 1;
        run_view_free(&v);
    }
    shard_close(&val);
    model_free(&m);
    h5log_free(&log);
    if (lock_fd >= 0) close(lock_fd);
    return rc;
}
