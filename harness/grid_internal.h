/* grid_internal.h: what the files of the grid module share; other modules use grid.h.
 * The files, one concept each:
 *   grid_load.c    reading the grid file, and helpers for config values as text
 *   grid_expand.c  the points: product, include, exclude, overrides, names
 *   grid_state.c   the points' run directories: state, locks, grid.status, index.csv
 *   grid.c         the command (grid_main), --list and --dry-run
 *   grid_slurm.c   the Slurm scripts of --slurm
 *   grid_run.c     the runner: the points' children, signals, progress
 */
#ifndef S2HC_GRID_INTERNAL_H
#define S2HC_GRID_INTERNAL_H
#include "grid.h"
#include "util.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

static inline void *grow(void *p, int n, size_t size) {
    /* room for element n (0-based): capacity doubles at powers of two */
    if (n == 0 || (n & (n - 1)) == 0) {
        size_t cap = n == 0 ? 1 : (size_t)n * 2;
        p = realloc(p, cap * size);
        if (!p) die(1, "out of memory (grid)");
    }
    return p;
}

static inline void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/* grid_load.c */

/* The point of an error: "s2hc: error: FILE[:LINE:COL][: key 'K']: message". */
void grid_err(const char *file, int line, int col, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* config.c reports its own errors on stderr. To re-point them at the grid file, the
 * grid runs config_set with stderr captured (glibc's stderr is an assignable variable;
 * the grid is single-threaded) and keeps the problem text after "key '...': ". */
typedef struct {
    FILE *saved, *mem;
    char *buf;
    size_t len;
} grid_err_capture;
void grid_capture_begin(grid_err_capture *c);
/* Ends the capture; copies the problem part of the message into why (may be NULL). */
void grid_capture_end(grid_err_capture *c, char *why, size_t n);

/* config_set(c, "key=val") quietly; 0, or 2 with the problem in why. */
int grid_set_quiet(s2hc_config *c, const char *key, const char *val, char *why, size_t n);

/* A key's value in config_to_yaml text ("section:\n  leaf: value\n"), as written there. */
int grid_flat_get(const char *yaml, const char *key, char *out, size_t n);

/* A YAML value as shown to people: quotes and escapes removed ("[a, b]" stays). */
void grid_unquote(const char *v, char *out, size_t n);

/* The value of key (or "preset") in a point's config, as shown in index.csv and --list. */
void grid_value_shown(const s2hc_config *c, const char *preset, const char *key, char *out, size_t n);

/* Are two values of key the same once read into a config? (1e-3 and 0.001 are.) */
int grid_same_value(const s2hc_config *c, const char *preset, const char *key, const char *val);

/* grid_expand.c */

/* Describe a point's own values: "residual.method=hc train.seed=1". */
void grid_point_values_text(const grid_point *p, char *out, size_t n);

/* The swept keys (sweep, then include keys), the columns of --list and index.csv. */
int grid_swept_keys(const grid_spec *g, const char **keys, int max);

/* grid_state.c */

/* Write text to path atomically (path.tmp, fsync, rename). 0 or -1 with a message. */
int grid_write_atomic(const char *path, const char *text, size_t len);

/* Remove the temporary files grid_write_atomic left in dir by a runner that died between
 * writing and renaming (their PID no longer runs). Call under the lock that orders the
 * writers of dir's files. */
void grid_remove_stale_tmps(const char *dir);

/* A point's grid.status: state, exit code and wall time of the grid's last run of it
 * (state < 0, exit_code -1, NaN: none recorded); started: the start of a run whose end no
 * one recorded, else NaN. grid_write_status returns 0 or -1 with a message. */
void grid_read_status(const char *dir, int *state, int *exit_code, double *wall_s, double *started);
int grid_write_status(const char *dir, int state, int exit_code, double wall_s, double started);

/* grid_inspect, with probe_lock 0 for the runner that holds the point's lock itself (a
 * held lock then does not read as running). */
void grid_inspect_point(const grid_point *p, const char *const *ood, int nood, grid_status *st, int probe_lock);

/* grid.c */

/* The step a point's training would start from, by its last inspection (grid_inspect):
 * its checkpoint's, run.h5's last step when the checkpoint cannot be read; 0 without one,
 * and for a changed point unless extend trains it further. */
int grid_resume_step(const grid_status *s, int extend);
/* A point `s2hc grid --extend` trains further (`s2hc train --extend`): its stored run
 * differs by a smaller train.steps alone. */
int grid_extends(const grid_status *s, int extend);
/* A finished run changed by train.steps alone whose checkpoint is gone: `train --extend`
 * refuses it (it would train the longer run from step 0 over the finished one's record). */
int grid_extend_lacks_ckpt(const grid_status *s);
/* "; or, only train.steps grown, --extend trains it further (this point alone: `s2hc
 * train DIR/config.yaml --extend ...`)" for a point changed by a larger train.steps alone
 * (st->longer), else "". */
void grid_extend_hint(const grid_point *p, const grid_status *st, char *buf, size_t n);

/* grid_slurm.c */

/* <out>/slurm/{array.sbatch, report.sbatch, submit.sh} for the grid's n points, each task
 * `s2hc grid --job I` with --force and --extend as given; with submit, run submit.sh. 0,
 * or 1 after printing the problem. */
int grid_write_slurm(const grid_spec *g, int n, int submit, int force, int extend);
/* The words `EXE grid GPATH --out OUT [--set K=V]...` (the grid's pins), each quoted for
 * a shell where it needs it: every Slurm task's command, and a point's by hand. */
void grid_command(FILE *f, const grid_spec *g, const char *exe, const char *gpath, const char *out);

/* grid_run.c */

typedef struct {
    pid_t pid;        /* the child, 0 when none */
    int lock_fd;      /* held (and inherited by the child) while it runs */
    double t_start;
    double wall_before; /* the point's recorded wall time when the child started */
    long log_off;     /* train.log size when the child started: its own lines follow */
    int fresh;        /* started with --force */
    int extended;     /* started with --extend (train.steps grown) */
    double share;     /* the share of its work it had left when it started (from its checkpoint) */
    int start_failed; /* could not be started (its directory, lock, config or log): no grid.status
                         records that, so the outcome counts it from here */
} grid_slot;

/* A kind of point for the ETA: a method at a stream count, whose step costs differ (on a
 * CPU by up to a quarter over rc, docs/performance.md); wall and work of its points
 * finished by this runner. */
typedef struct {
    char method[32];
    int n;
    double wall, work;
} grid_kind;

typedef struct {
    const grid_spec *g;
    const grid_point *pts;
    int n;
    grid_status *st;
    grid_slot *slot;
    const char *ood[GRID_MAX_OOD];
    int nood;
    int j, threads, force, extend, tty;
    int job_point;    /* --job I: I + 1, the one point the progress line counts; 0: every point */
    int *queue, nq, qi;
    int running, started, failed, elsewhere, refused;
    int stopping;     /* a signal asked the runner to stop: children that die now were stopped */
    int index_failed; /* index.csv or a grid.status could not be written: the grid exits 1 */
    double wall_sum, t0, last_draw;
    double work_sum;  /* grid_point_work of the points whose wall times wall_sum adds */
    grid_kind *kinds; /* the points' kinds (grid_run_points sets them up) */
    int nkinds;
    int *kind_of;     /* each point's kind, an index into kinds */
    int wall_n;
    char exe[PATH_MAX];
} grid_runner;

/* A point's training work in its config's terms, for the ETA: the multiply-adds of its
 * steps (tokens x the blocks' products and attention, the logits), so that a point twice
 * as long or as wide counts so; the method's cost beyond rc is in the rate of its kind. */
double grid_point_work(const s2hc_config *c);
/* Count point i finished in `wall` seconds (its whole run time) in the ETA's rates: every
 * point's and its kind's (when grid_kinds_setup set them up). */
void grid_eta_add(grid_runner *r, int i, double wall);
/* The progress line's ETA in seconds at time `now` (now_seconds), or NaN before a point
 * has finished here: the work of the points queued, stopped and running (a running one
 * the share it started with, less the time it has had) at the rate of the finished
 * points (of the point's kind once one has finished), over -j. */
double grid_eta_seconds(const grid_runner *r, double now);
/* The progress line's counts into buf: "D/N done, R running, F failed[, V diverged, X
 * refused], L left, T elapsed, ETA E"; a queued point counts as left whatever an earlier
 * run left it (a stopped one once), N and the counts are --job's one point's under --job,
 * and the ETA is "?" until a point finished here ("0s" once nothing is left or running). */
void grid_status_text(const grid_runner *r, char *buf, size_t n);

/* The share of a point's work left when it resumes at step `from` of `steps`: 1 - from /
 * steps, or all of it (1) from step 0 or from a step not before its end. */
double grid_work_left(int from, int steps);
/* r->kinds and r->kind_of (malloc'd; grid_run_points frees them): the distinct (method,
 * n) of the points, in the order met. */
void grid_kinds_setup(grid_runner *r);

/* Start the queued points, -j at a time, until all have run or a signal stops the runner
 * (SIGINT, SIGTERM or SIGHUP: the children asked to save; again: killed). Returns 1 when
 * a signal stopped it, else 0. */
int grid_run_points(grid_runner *r);

#endif
