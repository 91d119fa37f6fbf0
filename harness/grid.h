/* grid.h: experiment grids. `s2hc grid G.yaml` expands a sweep over config keys into
 * points, runs every point that has not finished (-j N at a time, each in its own child
 * process, resumable, one lock per run directory), keeps <out>/index.csv and writes a
 * Slurm job array for clusters; grid_internal.h lists the files behind it. docs/grids.md
 * is the user's guide; the grid file:
 *
 *   base: tiny.yaml                 # a config, relative to the grid file (or preset: small)
 *   set: {train.steps: 300}         # fixed overrides
 *   sweep:                          # the Cartesian product, last key fastest
 *     residual.method: [hc, mhc, s2hc]
 *     train.seed: [1, 2]
 *   include: [{residual.method: rc, residual.n_streams: 1, train.seed: [1, 2]}]
 *   exclude: [{residual.method: hc, train.seed: 2}]
 *   override: [{when: {preset: small}, set: {train.steps: 500}}]
 *   name: "{residual.method}-n{residual.n_streams}-s{train.seed}"
 *   out: runs/mygrid
 *   slurm: {partition: gpu, time: "04:00:00", gpus: 1, cpus: 8, array_limit: 4}
 */
#ifndef S2HC_GRID_H
#define S2HC_GRID_H
#include <stddef.h>
#include <sys/types.h>
#include "config.h"

#define GRID_KEY 64   /* a config key ("train.lr") or the pseudo-key "preset" */
#define GRID_VAL 320  /* a value as YAML text, the way `--set KEY=VALUE` takes it */
#define GRID_MAX_OOD 32 /* distinct out-of-domain corpora over a grid's points */
#define GRID_MAX_SWEPT 64 /* distinct swept keys: config keys and preset, each once (test_grid holds the
                             schema under it), so --list and index.csv have a column for every one */

/* One key = value, with where it was written (line/col 1-based; 0 = command line). */
typedef struct {
    char key[GRID_KEY];
    char val[GRID_VAL];
    int line, col;
} grid_kv;

/* One swept key and its alternatives (each with its own position). */
typedef struct {
    char key[GRID_KEY];
    int line, col;
    int n;
    grid_kv *vals;
} grid_axis;

/* A product of axes: the sweep, or one include entry. */
typedef struct {
    int n;
    grid_axis *axes;
    int line, col;
} grid_block;

/* An exclude entry or an override's `when`: every key must match one of its values. */
typedef struct {
    int n;
    grid_axis *keys;
    int line, col;
} grid_match;

typedef struct {
    grid_match when;
    int nset;
    grid_kv *set;
} grid_override;

typedef struct {
    char partition[64], time[32], mem[32];
    int gpus, cpus, array_limit; /* 0 = not given */
    int nextra, nsetup;
    char (*extra)[256]; /* extra #SBATCH lines ("--account=x" or "#SBATCH --account=x") */
    char (*setup)[256]; /* shell lines run before the task (module load ...) */
} grid_slurm;

typedef struct {
    char path[CFG_PATH];     /* the grid file as given */
    char stem[CFG_STR];      /* its name without directory and .yaml */
    char base[CFG_PATH];     /* resolved base config path; "" = the defaults */
    char preset[CFG_STR];    /* grid-wide preset; "" = none */
    int nset;
    grid_kv *set;
    grid_block sweep;
    int ninclude, nexclude, noverride;
    int ninclude_given;      /* include entries in the file, before --set dropped any */
    grid_block *include;
    grid_match *exclude;
    grid_override *override;
    char name_tmpl[256];
    int name_line, name_col;
    char out[CFG_PATH];      /* the grid's runs directory: out:, --out, or runs/<stem> */
    grid_slurm slurm;
    char launch[512];        /* launch: the command each point's `s2hc train` runs under ("": none) */
    int npin;                /* command-line --set K=V not pinning a swept key: applied last */
    grid_kv *pin;
    int nargs;               /* the command-line --set/--out arguments, kept for Slurm tasks */
    char (*args)[GRID_VAL + GRID_KEY + 8];
} grid_spec;

/* One point of the grid: its index, run name and resolved, validated config. */
typedef struct {
    int index;
    int include;             /* -1: a point of the product; else the include entry */
    char name[CFG_STR];
    char preset[CFG_STR];    /* "" = none */
    int nvals;               /* the point's own values (sweep or include keys) */
    grid_kv *vals;
    s2hc_config cfg;         /* run.name and run.out set; train.threads set at launch */
} grid_point;

/* Point states, in index.csv and --list. */
typedef enum {
    GS_PENDING = 0,  /* nothing on disk */
    GS_PARTIAL,      /* a checkpoint to resume from */
    GS_RUNNING,      /* locked by a runner (this one or another) */
    GS_FINISHED,
    GS_FAILED,       /* the run exited with an error */
    GS_DIVERGED,     /* the loss became NaN/inf; run.h5 says so */
    GS_INTERRUPTED,  /* stopped by a signal; resumable */
    GS_CHANGED,      /* the stored run has another config: refused (rerun with --force) */
    GS_N
} grid_state;
extern const char *const grid_state_names[GS_N];

/* What is known about a point, all of it read from its run directory: run.h5, ckpt.h5,
 * the lock, and grid.status (state, exit code and total wall time of the grid's last
 * run of the point, written by the runner). index.csv is a function of these files. */
typedef struct {
    grid_state state;
    int exit_code;           /* of the grid's last run of the point, -1 unknown */
    double wall_s;           /* total wall time of the grid's runs of the point, NaN unknown */
    int step, steps;         /* last logged step / train.steps */
    double train_loss, val_loss, tokens_per_s; /* NaN when absent */
    double ood_ppl[GRID_MAX_OOD]; /* one per corpus of grid_ood_names (NaN when absent) */
    char diff[512];          /* GS_CHANGED: the first differing key; h5_kind 4: why run.h5 is refused */
    int longer;              /* GS_CHANGED by a larger train.steps alone: `train --extend` can train it further */
    int stored_finished;     /* run.h5's status is "finished" (cached with it) */
    int have_ckpt;           /* ckpt.h5 exists (at the last inspection) */
    int ckpt_step;           /* the step ckpt.h5 was saved at, -1 when there is none or it cannot be read */
    double train_tokens, val_tokens; /* run.h5's root attributes: its corpus's sizes; NaN unknown */
    int threads_used, processes_used; /* run.h5's root attributes `threads`, `processes`; 0 unknown */
    int start_failed;        /* this runner could not start it (its directory, lock, config or log): failed */
    /* cache: run.h5 is read again only when its mtime or size changed */
    long long h5_mtime_ns, h5_size;
    long long ckpt_mtime_ns, ckpt_size; /* ckpt.h5's, read again when either changes */
    int h5_kind;             /* 0 none, 1 finished, 2 diverged, 3 running, 4 unreadable, 5 changed */
} grid_status;

/* Parse and check a grid file: every key against the config schema, every value against
 * its key's type, before anything runs. `out` (NULL = from the file) replaces the runs
 * directory; pins are command-line "K=V": a swept key is pinned to V (include entries
 * that give K another value are dropped), any other key is applied to every point last.
 * Returns 0, or 2 after printing "s2hc: error: FILE:LINE:COL: key 'K': problem". */
int grid_load(grid_spec *g, const char *path, const char *out, const char *const *pins, int npins);
void grid_free(grid_spec *g);

/* Expand into points (product in index order, then include entries), each config fully
 * resolved and validated, names from the template and distinct. *pts is malloc'd (free
 * with grid_points_free). Returns 0, or 2 after printing the problem. */
int grid_expand(const grid_spec *g, grid_point **pts, int *npts);
void grid_points_free(grid_point *pts, int n);

/* The distinct out-of-domain corpora of the points, in order of appearance (index.csv
 * has one ppl column per name; at most GRID_MAX_OOD). Returns the count; the names point
 * into the points. */
int grid_ood_names(const grid_point *pts, int n, const char **names);

/* Read a point's run directory into st: state (pending, partial, running when locked,
 * finished, diverged, changed when the stored config differs from the point's; failed or
 * interrupted as grid.status recorded), step, losses, throughput, OOD perplexities
 * (ood/nood as from grid_ood_names). Start st zeroed; pass it again to reuse its cache.
 * Never fails: an unreadable run file reads as pending/partial. */
void grid_inspect(const grid_point *p, const char *const *ood, int nood, grid_status *st);

/* Write <out>/index.csv atomically: one row per point from grid_inspect (st: n zeroed
 * or previously filled records, refreshed here; NULL for scratch ones). A lock on
 * <out>/.index.lock serialises concurrent writers. Returns 0 or -1 (message on stderr). */
int grid_write_index(const grid_spec *g, const grid_point *pts, int n, grid_status *st);

/* `s2hc grid G.yaml [-j N] [--list] [--job I] [--dry-run] [--force] [--slurm [--submit]]
 * [--out DIR] [--set K=V]...` (argv[0] = "grid"). Returns: 0 when every point finished;
 * the number of failed, diverged or refused points (at most 100); 2 for a bad grid or
 * usage; 130 when interrupted. */
int grid_main(int argc, char **argv);

#endif
