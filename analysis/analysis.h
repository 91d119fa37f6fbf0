/* analysis.h: read run files, compute what every figure and table of the paper shows,
 * and write the report. Prefix an_.
 *
 *   s2hc analyze RUNS_OR_GRID_DIRS... -o OUT   plain data (OUT/data: .dat for gnuplot,
 *                                              .csv for people), tables (OUT/tables:
 *                                              .md, .tex, .html, .csv) and the claims
 *   gnuplot -e "dir='OUT'" plots/STEM.gp       one figure each: OUT/STEM.png and .svg
 *   s2hc report RUNS_OR_GRID_DIRS... -o OUT    analyze (unless --no-analyze), draw (unless
 *                                              --no-plots) and write OUT/index.html
 *
 * Files, one concept each:
 *   stats.c     mean ± std, moving average, quantiles, Student t, paired test, bootstrap
 *   runs.c      finding run files under directories, loading them, labels and grouping
 *   figures.c   the data files behind each figure
 *   tables.c    the tables (Markdown, LaTeX, HTML, CSV) and the claims with verdicts
 *   analyze.c   `s2hc analyze`
 *   report.c    `s2hc report`: the HTML page
 * docs/paper.md describes the chain, every figure, the presets and the budgets.
 */
#ifndef S2HC_ANALYSIS_H
#define S2HC_ANALYSIS_H
#include <stddef.h>
#include <stdio.h>
#include "../probes/h5.h"

/* `s2hc analyze` and `s2hc report`; argv[0] is the command name. Return the process exit
 * status: 0 ok, 1 failure, 2 usage error. */
int analyze_main(int argc, char **argv);
int runs_main(int argc, char **argv); /* analysis/list.c: s2hc runs */
int report_main(int argc, char **argv);

/* ---- statistics (stats.c) -------------------------------------------------------------- */

/* Mean and sample standard deviation (n - 1 in the denominator; 0 when n < 2) of the
 * finite values of v[0..n). Returns how many values were finite (mean NaN when none). */
int an_mean_std(const double *v, int n, double *mean, double *std);
/* Mean of the last `window` values of v[0..n) (all of them when n < window); *used gets
 * how many values were averaged. NaN when n = 0. */
double an_tail_mean(const double *v, size_t n, size_t window, size_t *used);
/* q-quantile (q in [0, 1]) of the finite values, linear interpolation between closest
 * ranks (numpy's default). Does not modify v. NaN when none is finite. */
double an_quantile(const double *v, size_t n, double q);
/* Student t: P(T <= t) for df degrees of freedom (regularised incomplete beta). */
double an_t_cdf(double t, double df);
/* Two-sided 97.5 % quantile of Student t with df degrees of freedom (for 95 % intervals). */
double an_t_crit95(double df);

/* The q-quantile (0 < q < 1) of Student t with df degrees of freedom; NaN outside. */
double an_t_quantile(double q, double df);
/* Seeds (pairs) a paired t test at 5 % two-sided needs to detect a mean difference d with
 * probability `power` when the differences have standard deviation sd: the smallest n with
 * n >= ((t_0.975,n-1 + t_power,n-1) sd / |d|)^2 (the normal approximation with t
 * quantiles; 10 at |d| = sd, 34 at |d| = sd / 2, as the noncentral t gives). 2 when sd is 0,
 * cap + 1 past cap, 0 when d is 0 or not finite. A planning number: d and sd measured on a
 * few seeds are themselves uncertain. */
int an_seeds_for_power(double d, double sd, double power, int cap);

/* Holm's step-down adjustment of the p values p[0..n) of n tests (NaN ones left out of the
 * count and NaN in adj): the k-th smallest times the number of tests left, at most 1,
 * never below an adjusted smaller one. Rejecting where adj < 0.05 keeps the chance of
 * any false rejection among the n below 5 %. */
void an_holm(const double *p, int n, double *adj);

/* A paired comparison of a against b over n pairs (d_i = a_i - b_i). */
typedef struct {
    int n;            /* pairs with both values finite */
    double mean_diff; /* mean of d */
    double sd_diff;   /* sample standard deviation of d (0 when n < 2) */
    double t, p;      /* paired t statistic and two-sided p value (NaN when n < 2 or sd = 0) */
    double lo, hi;    /* 95 % interval of the mean difference: t interval when n >= 2, else NaN */
    double boot_lo, boot_hi; /* 95 % percentile bootstrap interval of the mean difference
                                (2000 resamples, fixed seed; NaN when n < 2) */
} an_paired;
void an_paired_test(const double *a, const double *b, int n, an_paired *out);
/* Fewer pairs than this: the tables leave the bootstrap interval out (with 2-4 pairs the
 * percentile bootstrap is their range, far below its nominal 95 %). */
#define AN_BOOT_MIN_PAIRS 5
/* "within noise" (the 95 % t interval holds 0), "a lower", "a higher", or "1 seed, no
 * interval" / "no pairs". Static string. */
const char *an_paired_verdict(const an_paired *p);

/* ---- runs (runs.c) ----------------------------------------------------------------------- */

/* A corpus name or a scale label, whole: data.train and data.ood names take up to 63 bytes
 * (CFG_STR), and two corpora cut to a shorter common prefix would share a cell. */
#define AN_NAME 64

typedef struct {
    char dir[1025];         /* the run directory (holds run.h5): up to 1024 bytes, as every
                               command that reads a run (RUN_DIR_MAX); a longer one is refused */
    char name[256];         /* its basename (a file name: at most 255 bytes) */
    char method[32];        /* residual.method */
    char variant[64];       /* method, plus "+expm" for the expm core (s2hc, s2hc_rot, orthogonal), "+exact" for s2hc's exact init */
    char corpus[AN_NAME];   /* data.train */
    char scale[AN_NAME];    /* the preset whose model size matches, else "L<l>-C<c>-T<t>"; then
                               "+nobias" (model.bias false), "+erf" (model.gelu erf), "+init" (train.init_from; "+init@S" when the
                               file was an export of step S) */
    char status[32];        /* root attribute status ("finished", "diverged", "running": its training holds
                               the lock; "stopped" for "running" without it) */
    int n;                  /* residual streams */
    uint64_t seed;          /* train.seed */
    int n_layer, n_embd, n_head, block_size, batch, grad_accum, steps, vocab;
    int probe_every, eval_every;
    double n_params, n_aux;
    double train_tokens;    /* root attribute train_tokens: the size of the corpus build the run
                               trained on (NAN in a run file older than the attribute) */
    int bench;              /* 1: no probes and no evals during training (a throughput run) */
    char *config_key;       /* the config without the keys that change nothing trained (name, out,
                               threads, backend, the ckpt, log, eval and probe cadences): repeat
                               detection */
    char recipe[200];       /* the optimisation: lr, min_lr, warmup, weight decay, batch, accumulation,
                               clipping, betas (runs pair in a comparison only with the same) */
    char options[160];      /* the method's own options that make no variant: sinkhorn_iters and order
                               (mhc), lite_offset and its value (mhc_lite, kromhc), proj_init, the
                               stream and projection precisions */
    char *config_yaml;      /* the whole config as config_to_yaml writes it (every key, defaults
                               filled: a run of an older build too), "section:\n  leaf: value" */
    h5log log;
} an_run;

typedef struct {
    an_run *r;
    int n, cap;
    int bad_paths; /* given paths that were missing, not runs or held no run, and run files that could not be read */
} an_runset;

/* Load every run under each path: a run directory (holds run.h5), a run.h5 file, or a
 * directory whose subdirectories (one level, or two for a directory of grids) hold runs.
 * Of repeated configs (equal but for the name, out dir, threads, backend and how often
 * the run saved, logged, evaluated and probed: the harness is deterministic) the
 * further-trained run counts, with a note. Returns the number of
 * runs loaded; a run file that cannot be read is skipped with a message, and a path that
 * is missing, not a run or holds none is said so and counted in rs->bad_paths. verbose:
 * the notes (a repeat, a skipped folder) and, past a few seconds, a progress line of the
 * reading on stderr; 0 (analyze -q) neither. The caller frees with an_runset_free. */
int an_runset_load(an_runset *rs, char *const *paths, int npaths, int verbose);
/* The same runs, every one (a repeat of another's config too), in folders up to four levels
 * below a path, with no warning about the set (s2hc runs: a listing, not a comparison). */
int an_runset_list(an_runset *rs, char *const *paths, int npaths);
/* Runs of one corpus name trained on different builds of it (their train_tokens differ:
 * `s2hc data prepare` of another version rebuilt it between them): a warning on f for each
 * such corpus, naming the sizes and a run of each (an_runset_load prints them on stderr).
 * Returns the number of such corpora. */
int an_corpus_builds_warn(const an_runset *rs, FILE *f);
/* The most runs a table cell or figure takes of one method at one scale and corpus (the
 * callers' arrays of an_cell_runs): past it, the lowest seeds. */
#define AN_CELL_CAP 64
/* Methods with more than AN_CELL_CAP comparison runs at one scale and corpus (a large
 * sweep): a warning on f for each, naming the count and what is left out (an_runset_load
 * prints them on stderr). Returns the number of such cells. */
int an_cell_cap_warn(const an_runset *rs, FILE *f);
/* Whether the runs idx[0..k) of rs hold two of different builds of their corpus. */
int an_corpus_builds_differ(const an_runset *rs, const int *idx, int k);
void an_runset_free(an_runset *rs);
/* Load one run.h5 into r (fills every field). 0, or -1 with the reason in err. */
int an_run_load(an_run *r, const char *run_h5, char *err, size_t errlen);
void an_run_free(an_run *r);
/* A series by path or NULL. */
const h5log_series *an_series(const an_run *r, const char *path);
/* The full shape of a dataset into dims (H5LOG_MAX_RANK + 1 entries): [rows, row_dims...]
 * for a logged series, row_dims for a static one (/final/..., stored without the row
 * axis: one row holding the whole [S, ...] array). Returns the rank. */
int an_shape(const h5log_series *s, size_t *dims);
/* Element i of a series as a double (NaN when out of range). */
double an_series_get(const h5log_series *s, size_t i);
/* The whole series as doubles, malloc'd; *count gets rows * row_elems. NULL if absent. */
double *an_series_copy(const an_run *r, const char *path, size_t *count);
/* A scalar static dataset (or the last element of a series), NaN if absent. */
double an_scalar(const an_run *r, const char *path);

/* ---- numbers shared by the tables, the claims and the tests ---------------------------- */

/* Window of the final train loss: the paper's 200-step moving average (probes/h5.h). */
#define AN_LOSS_WINDOW RUN_LOSS_WINDOW
/* Final train loss: mean of the last AN_LOSS_WINDOW logged losses (*used: how many). */
double an_final_train_loss(const an_run *r, size_t *used);
/* The last validation loss (NaN if none). */
double an_final_val_loss(const an_run *r);
/* Median of /train/tokens_per_s over steps, the first step left out when there are more
 * than two (warm-up). NaN if none. */
double an_median_throughput(const an_run *r);
/* Largest |row or column sum - 1| over the per-token matrices of every sublayer of the
 * final probe (max of /final/colsum_dev_max, /final/rowsum_dev_max). NaN if absent. */
double an_final_sum_dev(const an_run *r, int columns);
/* Largest |column (or row) sum - 1| of the per-sequence composite products. */
double an_composite_sum_dev(const an_run *r, int columns);
/* Fraction of H_res entries (final probe histogram, every sublayer) below -thresh, and the
 * total count of entries. */
double an_negative_fraction(const an_run *r, double thresh, double *total);

/* ---- the pipeline (analyze.c, figures.c, tables.c) ------------------------------------ */

typedef struct {
    const char *out;        /* output directory */
    const an_runset *rs;
    FILE *log;              /* progress (stderr) */
    /* the primary cell for the figures: the largest scale, docs when present, and the
       stream count most of its hyper-connection runs have (ties: 4, else the smaller) */
    char scale[AN_NAME], corpus[AN_NAME];
    int n;
    /* what a figure's data says for its caption (captions.tsv), written by an_write_figures */
    char cap_hres_depth[1024];
    char cap_loss_depth[3072]; /* under report.c's caption line of 4096 */
    /* the depths loss_depth draws (its scales, fewest blocks first, ", "-separated in
       depth_scale_names; summary.txt's depth_scales and depth_scale_names): 0 when no two
       scales of the runs differ in depth alone, and the figure is not drawn */
    int depth_scales;
    char depth_scale_names[1024];
} an_ctx;

/* Write OUT/data/... for every figure. 0 or -1. */
int an_write_figures(an_ctx *c);
/* The comment line of a .dat file that names its columns, space-separated. */
#define AN_COLUMNS "# columns:"
/* For every OUT/data/NAME.dat with a columns line: NAME.csv, that header then its rows
 * (comments and gnuplot's blank separator lines left out). Returns how many. */
int an_write_csvs(const char *out);
/* Write OUT/tables/... and OUT/tables/claims.*. 0 or -1. */
int an_write_tables(an_ctx *c);
/* Pick the primary scale and corpus (see an_ctx). */
void an_pick_primary(an_ctx *c);
/* The runs of variant v in scale/corpus (non-bench), sorted by seed, into idx: the cap of
 * the lowest seeds where there are more (an_cell_cap_warn says so); returns the count.
 * NULL scale/corpus match any. */
int an_cell_runs(const an_runset *rs, const char *scale, const char *corpus, const char *variant, int n,
                 int *idx, int cap);
/* an_cell_runs of the runs trained for `steps` steps (train.steps; 0: any). */
int an_cell_runs_steps(const an_runset *rs, const char *scale, const char *corpus, const char *variant, int n,
                       int steps, int *idx, int cap);
/* The representative run of a variant for the figures: the lowest seed in the primary
 * cell at the primary n, else at any n (a finished run before one that is not); for
 * identity alone, else a run at the same scale on another corpus; -1 if none. */
int an_rep_run(const an_ctx *c, const char *variant);
/* Two runs a comparison may pair: the same seed, length and optimisation recipe, both
 * finished, and the same n unless one is single-stream (Tables 1 to 3, Fig 1's ratios). */
int an_pairable(const an_run *x, const an_run *y);

/* The optimisation recipes (an_run.recipe) of the runs idx[0..k), distinct, learning rates
 * ascending (ties: in idx's order), as the tables give their rows: pointers into rs into
 * out (at most cap); returns how many there are. */
int an_recipes(const an_runset *rs, const int *idx, int k, const char **out, int cap);
/* A recipe's name as the tables give it: its fields that differ among the runs idx[0..k)
 * ("lr 0.003, min_lr 0.0003"), "" when none does (one recipe). */
void an_recipe_name(const an_runset *rs, const int *idx, int k, const char *rec, char *buf, size_t len);
/* The same as one word for a .dat column and gnuplot: "lr=0.003;min_lr=0.0003", "-" for "". */
void an_recipe_word(const char *name, char *buf, size_t len);

/* Helpers to write files under OUT: fopen of OUT/sub/name (directories created); exits
 * through the caller's error path (NULL with a message). */
FILE *an_open(const char *out, const char *sub, const char *name);
/* The longest OUT `analyze` and `report` take: every file under it (OUT/data/NAME.tmp,
 * OUT/.analyze-files, the figures) then fits the writers' path buffers whole. Longer, the
 * folder's own name was cut to fit (data/ became OUT/dat/, tables/ OUT/tab/). */
#define AN_OUT_MAX 900
/* 0, or 2 after a message when out is longer than AN_OUT_MAX. */
int an_out_check(const char *out);
/* Close a file of an_open: checked, then renamed over OUT/SUB/NAME (a failed write leaves
 * the older file whole, says so and counts in an_write_failures; `analyze` then exits 1). */
int an_close(FILE *f);
extern int an_write_failures;
/* A Ctrl-C, SIGTERM or SIGHUP while analyze, or report's page, writes its files: the
 * .tmp of each file being written removed (the older file stays), exit 130 at once. */
void an_on_signal(int sig);
/* Around one analysis into OUT: begin starts the list of files it writes; end removes the
 * files the previous analysis there wrote (OUT/.analyze-files) that this one did not (a
 * user's own files stay; after a failed write nothing goes) and lists this one's. */
void an_outputs_begin(const char *out);
int an_outputs_end(const char *out);
int an_mkdirs(const char *path);
/* One analysis or report at a time in OUT (out_dir_lock on OUT/.output.lock, held until
 * the process ends, claimed for an_out_who): two would replace each other's files and
 * .tmp files, and remove each other's as an older analysis's. 0 once held (a report's
 * analysis finds it held), 1 after a message naming the holder (the command then exits 2,
 * nothing written). OUT must exist. */
int an_out_lock(const char *out);
extern const char *an_out_who; /* "s2hc analyze" (default), "s2hc report" */

/* Method display order and names. */
extern const char *const an_method_order[];
const char *an_pretty(const char *variant);
/* A label without spaces for figures: "s²HC+expm". */
void an_label(const char *variant, char *buf, size_t len);

#endif
