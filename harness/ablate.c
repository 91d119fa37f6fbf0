/* ablate.c: `s2hc ablate`: the loss of a trained model with a sublayer's H_res replaced
 * (harness/ablate.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ablate.h"
#include "run.h"
#include "../analysis/analysis.h"

const char *const ablate_kind_names[ABLATE_KINDS] = {"identity", "mean", "uniform", "branch"};
/* the table's heading of each kind's columns (narrow: over print_cells' narrow cells) */
static const char *const kind_heads[ABLATE_KINDS] = {"H_res := I", "H_res := mean", "H_res := 11^T/n",
                                                     "f := 0 (no branch)"};
static const char *const kind_heads_narrow[ABLATE_KINDS] = {"H_res := I", "H_res := mean", "H_res := 11^T/n",
                                                            "f := 0"};

void ablate_result_free(ablate_result *r) {
    free(r->Hmean);
    free(r->loss);
    free(r->delta);
    free(r->ci);
    memset(r, 0, sizeof *r);
}

/* The replacement of every sublayer's H_res for ablation `kind` (not branch) into fixed
 * (Lh, n, n). */
static void fill_fixed(const ablate_result *r, int kind, real *fixed) {
    const int n = r->n;
    for (int l = 0; l < r->Lh; l++)
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                const size_t k = ((size_t)l * n + i) * n + j;
                fixed[k] = kind == ABLATE_IDENTITY ? (real)(i == j)
                           : kind == ABLATE_UNIFORM ? (real)(1.0 / n)
                                                    : (real)r->Hmean[k];
            }
}

static int has_mean(const int *kinds, int n_kinds) {
    for (int q = 0; q < n_kinds; q++)
        if (kinds[q] == ABLATE_MEAN) return 1;
    return 0;
}

long ablate_cost(int Lh, const int *kinds, int n_kinds, int batches) {
    /* a forward: Lh + 1 (the head as one sublayer); a resume from sublayer l: Lh - l */
    const long whole = Lh + 1, resumes = (long)Lh * (Lh + 1) / 2 + Lh;
    return (long)batches * ((has_mean(kinds, n_kinds) ? 2 : 1) * whole + (long)n_kinds * resumes);
}

/* The ablations of batch b (its tokens in, targets tg), from the activations of its
 * unablated forward: sublayer l alone resumes that forward at l's write-back (nothing
 * before it changes), the last sublayer first, so that each finds the unablated
 * activations of the sublayers before it; then every sublayer at once, from sublayer 0's
 * write-back. Each kind in turn at each sublayer: a resume at l rewrites l's H_res (a
 * replacement) or its output f (branch), and what comes after; branch finds l's H_res as
 * the method made it (kept in hsave when the column starts, put back) and its f is put
 * back after it (from fsave). diff as in ablate_measure, loss summed into r->loss. */
static void ablate_batch(gpt_model *m, const int *tg, int b, const real *fixed, unsigned char *on, real *fsave,
                         real *hsave, const double *base_b, ablate_result *r, double *diff, progress *pr, long *done) {
    const int Lh = r->Lh, cols = Lh + 1, batches = r->batches;
    const size_t nn = (size_t)r->n * r->n, NC = (size_t)m->B * m->T * m->C, Nnn = (size_t)m->B * m->T * nn;
    for (int c = Lh - 1; c >= -1 && !stop_signal; c--) {
        const int col = c < 0 ? Lh : c, l = c < 0 ? 0 : c;
        hc_acts h = model_hc_acts(m, l);
        /* sublayer 0's H_res for `all` is the one kept at column 0, before its replacements */
        if (m->variant && c >= 0) memcpy(hsave, h.H, Nnn * sizeof *hsave);
        for (int k = 0; k < Lh; k++) on[k] = c < 0 || k == c;
        for (int q = 0; q < r->n_kinds && !stop_signal; q++) {
            const int branch = r->kinds[q] == ABLATE_BRANCH;
            if (branch) {
                if (m->variant) memcpy(h.H, hsave, Nnn * sizeof *hsave);
                memcpy(fsave, h.f, NC * sizeof *fsave);
                m->branch_off = on;
            } else {
                m->hres_fixed = fixed + (size_t)q * Lh * nn, m->hres_fixed_on = on;
            }
            const double lb = model_forward_resume(m, l, tg);
            m->hres_fixed = NULL, m->hres_fixed_on = NULL, m->branch_off = NULL;
            if (branch) memcpy(h.f, fsave, NC * sizeof *fsave);
            r->loss[q * cols + col] += lb;
            diff[(size_t)(q * cols + col) * batches + b] = lb - base_b[b];
            if (pr) progress_update(pr, *done += Lh - l);
        }
    }
}

int ablate_measure(gpt_model *m, const data_shard *s, const data_shard *mean_src, const int *kinds, int n_kinds,
                   int batches, int B, ablate_result *r, progress *pr) {
    const int Lh = m->Lh, n = m->n, T = m->T, cols = Lh + 1;
    const size_t N = (size_t)B * T, nn = (size_t)n * n;
    memset(r, 0, sizeof *r);
    r->Lh = Lh, r->n = n, r->batches = batches, r->n_kinds = n_kinds;
    memcpy(r->kinds, kinds, (size_t)n_kinds * sizeof *kinds);
    r->Hmean = calloc_check((size_t)Lh * nn, sizeof *r->Hmean);
    r->loss = calloc_check((size_t)n_kinds * cols, sizeof *r->loss);
    r->delta = malloc_check((size_t)n_kinds * cols * sizeof *r->delta);
    r->ci = malloc_check((size_t)n_kinds * cols * sizeof *r->ci);
    /* diff[(q cols + c) batches + b]: ablation (q, c)'s batch loss minus the unablated one */
    double *base_b = malloc_check((size_t)batches * sizeof *base_b);
    double *diff = malloc_check((size_t)n_kinds * cols * batches * sizeof *diff);
    int *in = malloc_check(N * sizeof *in), *tg = malloc_check(N * sizeof *tg);
    real *fixed = malloc_check((size_t)n_kinds * Lh * nn * sizeof *fixed);
    real *fsave = malloc_check(N * m->C * sizeof *fsave), *hsave = malloc_check(N * nn * sizeof *hsave);
    unsigned char *on = malloc_check((size_t)Lh);
    model_alloc_acts(m, B);
    const int with_mean = has_mean(kinds, n_kinds);
    if (!with_mean) mean_src = NULL; /* no mean to take (an rc run: branch alone) */
    for (int q = 0; q < n_kinds; q++)
        if (kinds[q] == ABLATE_IDENTITY || kinds[q] == ABLATE_UNIFORM)
            fill_fixed(r, kinds[q], fixed + (size_t)q * Lh * nn);
    long done = 0;
    /* the first pass: every sublayer's H_res summed over the tokens of the mean's batches
       (mean_src's, else the scored ones); over the scored batches also their unablated
       losses (summed as eval_shard_loss sums them), and without the mean each batch's
       ablations at once */
    const data_shard *first = mean_src ? mean_src : s;
    double sum = 0;
    for (int b = 0; b < batches && !stop_signal; b++) {
        eval_shard_batch(first, b, batches, B, T, in, tg);
        const double lb = model_forward(m, in, tg, B);
        if (!mean_src) sum += base_b[b] = lb;
        for (int l = 0; l < Lh && m->variant; l++) {
            const real *H = model_hc_acts(m, l).H;
            double *acc = r->Hmean + (size_t)l * nn;
            for (size_t t = 0; t < N; t++)
                for (size_t k = 0; k < nn; k++) acc[k] += H[t * nn + k];
        }
        if (pr) progress_update(pr, done += Lh + 1);
        if (!with_mean) ablate_batch(m, tg, b, fixed, on, fsave, hsave, base_b, r, diff, pr, &done);
    }
    for (size_t k = 0; k < (size_t)Lh * nn; k++) r->Hmean[k] = m->variant ? r->Hmean[k] / ((double)batches * N) : 1;
    if (with_mean) { /* the mean known, each scored batch's unablated forward (again), then its ablations */
        for (int q = 0; q < n_kinds; q++)
            if (kinds[q] == ABLATE_MEAN) fill_fixed(r, kinds[q], fixed + (size_t)q * Lh * nn);
        for (int b = 0; b < batches && !stop_signal; b++) {
            eval_shard_batch(s, b, batches, B, T, in, tg);
            const double lb = model_forward(m, in, tg, B);
            if (mean_src) sum += base_b[b] = lb;
            if (pr) progress_update(pr, done += Lh + 1);
            ablate_batch(m, tg, b, fixed, on, fsave, hsave, base_b, r, diff, pr, &done);
        }
    }
    r->base = sum / batches;
    const double tq = batches > 1 ? an_t_quantile(0.975, batches - 1) : NAN;
    for (int k = 0; k < n_kinds * cols; k++) {
        const double *dk = diff + (size_t)k * batches;
        double ds = 0, ss = 0;
        for (int b = 0; b < batches; b++) ds += dk[b];
        const double d = ds / batches;
        for (int b = 0; b < batches; b++) ss += (dk[b] - d) * (dk[b] - d);
        r->loss[k] /= batches;
        r->delta[k] = d;
        r->ci[k] = batches > 1 ? tq * sqrt(ss / (batches - 1)) / sqrt((double)batches) : NAN;
    }
    free(on);
    free(fsave);
    free(hsave);
    free(fixed);
    free(tg);
    free(in);
    free(diff);
    free(base_b);
    if (stop_signal) {
        ablate_result_free(r);
        return -1;
    }
    return 0;
}

/* ---- the command ------------------------------------------------------------------------- */

static void ablate_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc ablate RUN_DIR|FILE.safetensors... [--what LIST] [--batches N] [--corpus NAME]\n"
            "                   [--mean-from scored|train] [--data DIR] [--csv] [--record]\n"
            "                   [--config YAML [--set KEY=VALUE]...]\n"
            "\n"
            "How much a trained model's loss rests on its residual mixing and on each sublayer: every\n"
            "hyper-connection sublayer's per-token H_res is replaced, for every token, by a fixed\n"
            "matrix, or the sublayer's output left out, one sublayer at a time and then every\n"
            "sublayer at once, and the loss is measured on the same micro-batches as the model's own.\n"
            "Each row gives the loss's rise (Δ loss) and the 95 %% Student t interval of that paired\n"
            "difference over the batches. Nothing is written unless --record.\n"
            "\n"
            "  --what LIST   the ablations, in order (default identity,mean):\n"
            "                  identity  H_res := I (the streams are not mixed)\n"
            "                  mean      H_res := its average over every token of the batches (the\n"
            "                            dynamic, per-token part removed; --mean-from)\n"
            "                  uniform   H_res := 11^T/n (every stream the streams' mean)\n"
            "                  branch    the sublayer's output f := 0 (X_{l+1} = H_res X_l: what the\n"
            "                            sublayer itself is worth; rc too)\n"
            "  --batches N   micro-batches of train.batch sequences (default: train.eval_batches); the\n"
            "                windows `s2hc eval` scores with the same N\n"
            "  --mean-from S where mean's H_res is averaged: scored (default), over the batches it is\n"
            "                scored on; train, over as many batches of the training corpus's training\n"
            "                split (held out from the sequences scored)\n"
            "  --corpus NAME score on prepared corpus NAME (out of domain: its whole text) instead of\n"
            "                the validation split of the training corpus\n"
            "  --data DIR    where the prepared corpora are (default: the config's data.dir)\n"
            "  --csv         a header row, then a row per replacement and sublayer (sublayer `all`:\n"
            "                every one at once), losses at full precision\n"
            "  --record      also write the result into the run's run.h5 under /ablate (replacing an\n"
            "                earlier one; the report's figure beyond_ablation draws it); refused while\n"
            "                the run trains, with --corpus, and for a model file\n"
            "  --config YAML, --set K=V  the model of a safetensors file without s2hc metadata, as\n"
            "                `s2hc eval` reads one\n"
            "\n"
            "rc has no H_res: its runs are measured with `branch` alone (the others passed over with a\n"
            "note); without `branch` in --what an rc run is an error alone, passed over with a note\n"
            "among several. Each ablation resumes each batch's unablated forward at the sublayer it\n"
            "ablates: about Lh / 2 + 1 forwards a batch (Lh sublayers), besides the unablated\n"
            "forward (twice with mean), times --batches.\n"
            "\n"
            "example:\n"
            "  s2hc ablate runs/tiny-s2hc --what identity,mean,uniform --batches 8\n"
            "  s2hc ablate --what branch runs/rc runs/s2hc   # each sublayer's worth, rc beside s2hc\n"
            "  s2hc ablate --record runs/small/paper/*/     # every run of a grid, kept for the report\n");
}

typedef struct {
    const char *data_dir, *corpus;
    int batches, csv, header, n_kinds;
    int mean_train; /* --mean-from train: the mean H_res over the training split's windows */
    int kinds[ABLATE_KINDS];
    const s2hc_config *given;
    int record;  /* --record: the result into the run file's /ablate */
    int several; /* more than one run given: an rc run is passed over with a note */
} ablate_opts;

/* --record: r into log's /ablate (replacing an earlier one whole): loss, delta and ci95
 * as (ABLATE_KINDS, Lh + 1) in ablate_kind_names' order, NaN rows for the replacements
 * not measured, H_mean (Lh, n, n), and the measurement's attributes. */
static void record(h5log *log, const ablate_result *r, int64_t step, const char *corpus, int B, int T,
                   int mean_train) {
    const int cols = r->Lh + 1;
    const size_t cells = (size_t)ABLATE_KINDS * cols;
    double *v = malloc_check(3 * cells * sizeof *v);
    for (size_t k = 0; k < 3 * cells; k++) v[k] = NAN;
    for (int q = 0; q < r->n_kinds; q++)
        for (int c = 0; c < cols; c++) {
            const size_t at = (size_t)r->kinds[q] * cols + c;
            v[at] = r->loss[q * cols + c];
            v[cells + at] = r->delta[q * cols + c];
            v[2 * cells + at] = r->ci[q * cols + c];
        }
    const size_t dims[2] = {ABLATE_KINDS, (size_t)cols}, hd[3] = {(size_t)r->Lh, (size_t)r->n, (size_t)r->n};
    h5log_static_set(log, "/ablate/loss", H5LOG_F64, 2, dims, v,
                     "validation loss with H_res replaced (rows identity, mean, uniform) or the sublayer's output "
                     "left out (row branch); NaN: not measured; column l sublayer l alone, column Lh every "
                     "sublayer at once");
    h5log_static_set(log, "/ablate/delta", H5LOG_F64, 2, dims, v + cells,
                     "mean over the batches of (ablated - unablated) batch loss, as /ablate/loss");
    h5log_static_set(log, "/ablate/ci95", H5LOG_F64, 2, dims, v + 2 * cells,
                     "half-width of the 95 % Student t interval of /ablate/delta over the batches (NaN with one batch)");
    h5log_static_set(log, "/ablate/H_mean", H5LOG_F64, 3, hd, r->Hmean,
                     "each sublayer's H_res averaged over every token of the batches, or of as many of the "
                     "training split's (attribute mean_from) (the replacement `mean`; rc: 1)");
    char kinds[64] = "";
    for (int q = 0; q < r->n_kinds; q++)
        snprintf(kinds + strlen(kinds), sizeof kinds - strlen(kinds), "%s%s", q ? "," : "", ablate_kind_names[r->kinds[q]]);
    h5log_attr_str(log, "/ablate", "description",
                   "s2hc ablate --record: the loss with each sublayer's H_res replaced by a fixed matrix for every "
                   "token, or its output left out (docs/probes.md, Ablations)");
    h5log_attr_str(log, "/ablate", "replacements", kinds);
    h5log_attr_str(log, "/ablate", "corpus", corpus);
    h5log_attr_num(log, "/ablate", "step", (double)step);
    h5log_attr_num(log, "/ablate", "batches", r->batches);
    h5log_attr_num(log, "/ablate", "sequences", (double)r->batches * B);
    h5log_attr_num(log, "/ablate", "tokens", (double)r->batches * B * T);
    h5log_attr_num(log, "/ablate", "base_loss", r->base);
    if (has_mean(r->kinds, r->n_kinds))
        h5log_attr_str(log, "/ablate", "mean_from", mean_train ? "train" : "scored");
    else
        h5log_attr_del(log, "/ablate", "mean_from"); /* an earlier record's */
    free(v);
}

#define ABLATE_CSV_HEADER \
    "run,step,corpus,role,ablation,sublayer,layer,kind,loss,base_loss,delta,ci95,batches,sequences,tokens,mean_from\n"

static void print_csv(const char *dir, int64_t step, const char *corpus, const char *role, const ablate_result *r,
                      int B, int T, int mean_train, int *header) {
    const int cols = r->Lh + 1;
    if (!(*header)++) fputs(ABLATE_CSV_HEADER, stdout);
    for (int q = 0; q < r->n_kinds; q++)
        for (int c = 0; c < cols; c++) {
            csv_field_put(stdout, dir);
            putchar(',');
            if (step >= 0) printf("%lld", (long long)step);
            putchar(',');
            csv_field_put(stdout, corpus);
            printf(",%s,%s,", role, ablate_kind_names[r->kinds[q]]);
            if (c == r->Lh) printf("all,,,");
            else printf("%d,%d,%s,", c, c / 2, c % 2 ? "mlp" : "attn");
            csv_num_put(stdout, r->loss[q * cols + c]);
            putchar(',');
            csv_num_put(stdout, r->base);
            putchar(',');
            csv_num_put(stdout, r->delta[q * cols + c]);
            putchar(',');
            csv_num_put(stdout, r->ci[q * cols + c]);
            printf(",%d,%lld,%lld,%s\n", r->batches, (long long)r->batches * B, (long long)r->batches * B * T,
                   r->kinds[q] != ABLATE_MEAN ? "" : mean_train ? "train" : "scored");
        }
}

/* One kind's two cells: Δ loss and its interval, 21 columns; narrow: 17, to 4 decimals
 * (print_table's four kinds within 90 columns). */
enum { TABLE_LEFT = 19, CELLS_WIDE = 21, TABLE_MAX = 90 };
static void print_cells(double d, double ci, int narrow) {
    const int wd = narrow ? 8 : 9, wc = narrow ? 7 : 8, dec = narrow ? 4 : 5;
    const double big = narrow ? 99.99995 : 99.999995; /* the largest that %.<dec>f keeps in its width */
    fputs(narrow ? " " : "   ", stdout);
    if (isnan(d)) printf("%*s", wd, "nan");
    else if (fabs(d) < big) signed_put(stdout, d, wd, dec);
    else printf("%+*.*e", wd, dec - 3, d); /* a diverged model's rise: still wd columns */
    if (isnan(ci)) printf(" %*s", wc, "");
    else if (ci < big) printf(" %*.*f", wc, dec, ci);
    else printf(" %*.*e", wc, dec - 3, ci);
}

static void print_table(const char *dir, int64_t step, const gpt_model *m, const char *corpus, const char *role,
                        const ablate_result *r, int B, int mean_train) {
    const int cols = r->Lh + 1;
    char st[40];
    if (step >= 0) snprintf(st, sizeof st, "at step %lld", (long long)step);
    else snprintf(st, sizeof st, "(step not given)");
    printf("ablate %s %s: %s, n = %d, %d sublayers; %s %s, %d x %d sequences of %d tokens\n", dir, st, m->cfg.method,
           m->n, r->Lh, corpus, role, r->batches, B, m->T);
    printf("loss %.5f unablated\n", r->base);
    if (mean_train)
        printf("mean: H_res averaged over %d x %d sequences of the training split (held out)\n", r->batches, B);
    putchar('\n');
    /* the narrow cells where the wide ones would pass 90 columns (four kinds) */
    const int narrow = TABLE_LEFT + r->n_kinds * CELLS_WIDE > TABLE_MAX;
    printf("%-19s", "");
    for (int q = 0; q < r->n_kinds; q++) { /* the last heading without the spaces after it */
        const char *head = (narrow ? kind_heads_narrow : kind_heads)[r->kinds[q]];
        if (q + 1 == r->n_kinds) printf(narrow ? " %s" : "   %s", head);
        else printf(narrow ? " %-16s" : "   %-18s", head);
    }
    printf("\n%-19s", "sublayer layer kind");
    for (int q = 0; q < r->n_kinds; q++) /* print_cells' 21 or 17 columns */
        printf(narrow ? "   Δ loss  ± 95 %%" : "      Δ loss   ± 95 %%");
    putchar('\n');
    for (int c = 0; c < cols; c++) {
        if (c < r->Lh) printf("%8d %5d %-4s", c, c / 2, c % 2 ? "mlp" : "attn");
        else printf("%8s %5s %-4s", "all", "", "");
        for (int q = 0; q < r->n_kinds; q++) print_cells(r->delta[q * cols + c], r->ci[q * cols + c], narrow);
        putchar('\n');
    }
    printf("\nΔ loss: the loss with that ablation of the sublayer (all: of every one), less the\n"
           "unablated loss on the same sequences; ± 95 %%: Student t over the micro-batches.\n");
    if (r->batches == 1) printf("One micro-batch gives no interval: --batches 2 or more for one.\n");
}

/* The corpus ablate scores, opened: the training corpus's validation split, or --corpus
 * NAME's whole text (eval's out-of-domain reading). 0, or 1 after an error. */
static int open_corpus(const char *dir, s2hc_config *cfg, const char *name, data_shard *s, const char **role) {
    char path[1200], err[1024];
    data_shard val;
    const int own = !name || !strcmp(name, cfg->train_corpus);
    const int have_val = eval_val_open(cfg, &val, path, sizeof path, err, sizeof err) == 0;
    if (own) {
        *role = "val";
        if (have_val) {
            *s = val;
            return 0;
        }
        fprintf(stderr, "s2hc: error: ablate: %s: %s\n  (the validation split of its training corpus; --data DIR "
                "where it is prepared, or --corpus NAME for another)\n", dir, err);
        return 1;
    }
    const uint32_t kind = have_val ? shard_kind(&val) : 0;
    if (have_val) shard_close(&val);
    *role = "ood"; /* its name checked by ablate_main */
    if (eval_ood_open(cfg, name, kind, s, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: ablate: --corpus %s: %s\n  (s2hc data list: the corpora prepared; --data DIR "
                "if they live elsewhere)\n", name, err);
        return 1;
    }
    return 0;
}

/* --mean-from train: the training split of the model's training corpus, opened as the
 * scored corpus s was (tokens of its kind, at least one window). 0, or 1 after an error. */
static int open_train_split(const char *dir, const s2hc_config *cfg, const data_shard *s, data_shard *t) {
    char path[1200], err[1400];
    data_shard_path(path, sizeof path, cfg->data_dir, cfg->train_corpus, "train");
    int bad = shard_open(t, path, err, sizeof err) != 0;
    if (!bad && shard_fits(t, cfg->vocab, shard_kind(s), err, sizeof err) != 0) bad = 2;
    if (!bad && t->count < (uint64_t)cfg->block_size + 1) {
        snprintf(err, sizeof err, "%s: %llu tokens, fewer than block_size + 1 = %d: no window", path,
                 (unsigned long long)t->count, cfg->block_size + 1);
        bad = 2;
    }
    if (!bad) return 0;
    if (bad == 2) shard_close(t);
    fprintf(stderr, "s2hc: error: ablate: %s: --mean-from train: %s\n  (the training split of corpus %s; --data DIR "
            "where it is prepared, or --mean-from scored)\n", dir, err, cfg->train_corpus);
    return 1;
}

static int ablate_one(const char *dir, void *ctx) {
    ablate_opts *o = ctx;
    const int file = model_file_arg(dir, "ablate");
    if (file < 0) return 1;
    if (!file && o->given) return model_file_not_run(dir, "ablate");
    if (file && o->record) {
        fprintf(stderr, "s2hc: error: ablate: --record writes into a run's run.h5; %s is a model file\n", dir);
        return 2;
    }
    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t step = -1;
    int lock_fd = -1;
    h5log_init(&log);
    int of_ids = 0; /* the model reads a tokenizer's ids, not bytes of text */
    if (file) {
        const int st = model_file_open(dir, "ablate", o->given, &cfg, &m, &step, &of_ids);
        if (st != 0) return st;
    } else {
        if (o->record ? run_open_locked(dir, "s2hc ablate", &lock_fd, &cfg, &m, &log, &step) != 0
                      : run_open(dir, &cfg, &m, &log, &step) != 0)
            return 1;
        const char *kind = h5log_get_attr_str(&log, "/", "token_kind"); /* as `s2hc sample` reads it */
        of_ids = (kind && !strcmp(kind, "ids")) || m.V > 256;
        if (!o->record) run_note_in_use(dir, "its checkpoint", (long long)step); /* read-only */
    }
    int rc = 0;
    /* the ablations this model has: rc only branch (no H_res) */
    int kinds[ABLATE_KINDS], n_kinds = 0;
    for (int q = 0; q < o->n_kinds; q++)
        if (m.variant || o->kinds[q] == ABLATE_BRANCH) kinds[n_kinds++] = o->kinds[q];
    if (!n_kinds) {
        if (o->several)
            fprintf(stderr, "note: ablate: %s passed over: method rc has one stream and no H_res (--what branch "
                    "measures its sublayers)\n", dir);
        else
            fprintf(stderr, "s2hc: error: ablate: %s: method rc has one stream and no H_res to replace (--what "
                    "branch measures its sublayers)\n", dir);
        rc = o->several ? 0 : 1;
        goto done;
    }
    if (n_kinds < o->n_kinds)
        fprintf(stderr, "note: ablate: %s: method rc has no H_res: branch alone measured\n", dir);
    if (o->data_dir) {
        snprintf(cfg.data_dir, sizeof cfg.data_dir, "%s", o->data_dir);
        snprintf(m.cfg.data_dir, sizeof m.cfg.data_dir, "%s", o->data_dir);
    }
    data_shard s;
    const char *role = "val";
    if (open_corpus(dir, &cfg, o->corpus, &s, &role) != 0) {
        rc = 1;
        goto done;
    }
    char runp[1200];
    snprintf(runp, sizeof runp, "%s/run.h5", dir);
    /* what `s2hc eval` refuses to score, refused here too: tokens of another kind than the
       model's, and a run's validation set rebuilt since it trained (then neither loss is
       the run's validation loss) */
    char err[1400];
    int bad = eval_kind_fits(&s, of_ids, dir, err, sizeof err) != 0;
    if (!bad && !strcmp(role, "val")) /* a model file's log is empty: no size to hold it to */
        bad = run_val_rebuilt(&log, s.count, s.path, dir, "its loss would not be the run's validation loss", err,
                              sizeof err);
    if (bad) {
        fprintf(stderr, "s2hc: error: ablate: %s\n  (--data DIR where the corpus the model read is prepared)\n", err);
        shard_close(&s);
        rc = 1;
        goto done;
    }
    data_shard train; /* --mean-from train's batches */
    const int mean_train = o->mean_train && has_mean(kinds, n_kinds);
    if (mean_train && open_train_split(dir, &cfg, &s, &train) != 0) {
        shard_close(&s);
        rc = 1;
        goto done;
    }
    const char *corpus = o->corpus ? o->corpus : cfg.train_corpus;
    const int batches = o->batches > 0 ? o->batches : cfg.eval_batches, B = cfg.batch;
    progress pr;
    progress_begin(&pr, "ablate", "sublayers", ablate_cost(m.Lh, kinds, n_kinds, batches), 1);
    if (o->csv) progress_to(&pr, stderr);
    ablate_result r;
    const int st = ablate_measure(&m, &s, mean_train ? &train : NULL, kinds, n_kinds, batches, B, &r, &pr);
    progress_end(&pr);
    shard_close(&s);
    if (mean_train) shard_close(&train);
    rc = st == 0 ? 0 : 130;
    if (st == 0 && o->record) {
        record(&log, &r, step, corpus, B, m.T, mean_train);
        if (h5log_save(&log, runp) != 0) rc = 1;
    }
    if (st == 0 && rc == 0) {
        if (o->csv) print_csv(dir, step, corpus, role, &r, B, m.T, mean_train, &o->header);
        else print_table(dir, step, &m, corpus, role, &r, B, mean_train);
        if (o->record) fprintf(o->csv ? stderr : stdout, "/ablate written to %s\n", runp);
    }
    if (st == 0) ablate_result_free(&r);
done:
    model_free(&m);
    h5log_free(&log);
    if (lock_fd >= 0) close(lock_fd);
    return rc;
}

/* --what's list into o->kinds: 0, or 2 after an error. */
static int parse_what(const char *v, ablate_opts *o) {
    o->n_kinds = 0;
    const char *p = v;
    for (;;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        int k = -1;
        for (int i = 0; i < ABLATE_KINDS; i++)
            if (strlen(ablate_kind_names[i]) == len && !strncmp(p, ablate_kind_names[i], len)) k = i;
        if (k < 0) {
            fprintf(stderr, "s2hc: error: ablate: --what: '%.*s' is not an ablation (identity, mean, uniform, "
                    "branch)\n",
                    (int)(len > 100 ? 100 : len), p);
            return 2;
        }
        for (int i = 0; i < o->n_kinds; i++)
            if (o->kinds[i] == k) {
                fprintf(stderr, "s2hc: error: ablate: --what: '%s' named twice\n", ablate_kind_names[k]);
                return 2;
            }
        o->kinds[o->n_kinds++] = k;
        if (!e) return 0;
        p = e + 1;
    }
}

int ablate_main(int argc, char **argv) {
    const char *config = NULL;
    const char **dirs = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *dirs);
    const char **sets = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *sets);
    ablate_opts o = {NULL, NULL, 0, 0, 0, 2, 0, {ABLATE_IDENTITY, ABLATE_MEAN}, NULL, 0, 0};
    int ndirs = 0, nsets = 0, rc = -1;
    opt_seen seen = {.cmd = "ablate"};
    for (int i = 1, ended = 0; i < argc && rc < 0; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) dirs[ndirs++] = argv[i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { ablate_usage(stdout); rc = 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--what", 0))) rc = parse_what(v, &o) ? 2 : -1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--batches", 1))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > 1000000) {
                fprintf(stderr, "s2hc: error: ablate: --batches: expected a whole number in 1..1000000, got '%s'\n", v);
                rc = 2;
            }
            o.batches = (int)n;
        }
        else if ((v = opt_once(&seen, argc, argv, &i, "--mean-from", 0))) {
            if (!strcmp(v, "train") || !strcmp(v, "scored")) o.mean_train = !strcmp(v, "train");
            else {
                fprintf(stderr, "s2hc: error: ablate: --mean-from: expected scored or train, got '%.100s'\n", v);
                rc = 2;
            }
        }
        else if ((v = opt_once(&seen, argc, argv, &i, "--corpus", 0))) o.corpus = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--data", 0))) o.data_dir = v;
        else if (!strcmp(argv[i], "--csv")) o.csv = 1;
        else if (!strcmp(argv[i], "--record")) o.record = 1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--config", 0))) config = v;
        else if ((v = opt_arg(argc, argv, &i, "--set", 1))) sets[nsets++] = v;
        else {
            fprintf(stderr, "s2hc: error: ablate: unknown option '%s'%s\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            rc = 2;
        }
    }
    s2hc_config given;
    if (rc < 0 && !ndirs) { ablate_usage(stderr); rc = 2; }
    if (rc < 0 && o.data_dir && !data_dir_fits(o.data_dir, "ablate --data")) rc = 2;
    char err[300];
    if (rc < 0 && o.corpus && config_name_check(o.corpus, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: ablate: --corpus: %s\n", err);
        rc = 2;
    }
    if (rc < 0 && model_file_config("ablate", config, sets, nsets, &given) != 0) rc = 2;
    if (rc < 0 && o.mean_train && !has_mean(o.kinds, o.n_kinds)) {
        fprintf(stderr, "s2hc: error: ablate: --mean-from train sets where the mean ablation's H_res is averaged; "
                "--what does not name mean\n");
        rc = 2;
    }
    if (rc < 0 && o.record && o.corpus) {
        fprintf(stderr, "s2hc: error: ablate: --record keeps the run's validation split's ablations; --corpus %s is "
                "not recorded (leave one out)\n", o.corpus);
        rc = 2;
    }
    if (rc < 0) {
        o.given = config ? &given : NULL;
        o.several = ndirs > 1;
        rc = runs_each(dirs, ndirs, o.csv ? stderr : stdout, ablate_one, &o);
    }
    free(sets);
    free(dirs);
    return rc;
}
