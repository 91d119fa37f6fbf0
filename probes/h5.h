/* h5.h: the one HDF5 writer and reader of the project.
 *
 * Two kinds of file:
 *  - the run file runs/<name>/run.h5: a log of named series (one row per step, per eval
 *    or per probe), held in memory while training and saved atomically (temp file +
 *    rename) at every checkpoint and at the end (and by `s2hc eval` and `s2hc probe`,
 *    which add their results), so the file on disk is always a complete, readable HDF5
 *    file however training is killed. Series are stored as datasets of shape
 *    [rows, row_dims...] with a `description` attribute (and `units` where they have
 *    one). Static datasets (written once, e.g. /final/...) are series
 *    with one row whose leading dimension is dropped on disk. Every dataset with an axis,
 *    static or not, is chunked and extendable on its first axis (docs/runfile.md).
 *  - the checkpoint (checkpoint.h).
 */
#ifndef S2HC_H5_H
#define S2HC_H5_H
#include <stddef.h>
#include <stdint.h>

#define H5LOG_MAX_RANK 4

/* The run file's layout version, its root attribute `format_version` (written by
 * harness/train.c). Bump it only for a change that a build reading the current version
 * would misread (docs/runfile.md, "Files of other versions"): h5log_load refuses a file
 * of a higher version, naming it, so an older build never reads, resumes or rewrites a
 * newer build's run. Additions within the conventions need no bump. */
#define RUN_FORMAT_VERSION 1

typedef enum { H5LOG_F32 = 0, H5LOG_F64 = 1, H5LOG_I64 = 2 } h5log_type;

typedef struct {
    char path[256];          /* "/train/loss" */
    char description[512];
    char units[32];
    h5log_type type;
    int row_rank;            /* rank of one row (0 for scalars) */
    size_t row_dims[H5LOG_MAX_RANK];
    size_t row_elems;        /* product of row_dims */
    int fixed;               /* 1: a static dataset (exactly one row, stored without the row axis) */
    size_t rows, cap;
    void *data;              /* rows * row_elems elements of `type` */
} h5log_series;

typedef struct {
    char path[256];          /* object the attribute is on ("/" or a group/dataset) */
    char name[64];
    int is_string;
    char *str;
    double num;
} h5log_attr;

typedef struct {
    h5log_series *series; int n_series, cap_series;
    h5log_attr *attrs; int n_attrs, cap_attrs;
    char source[1200];       /* the file h5log_load read, "" for a new log: named when code
                                declares a dataset that the file holds in another shape */
} h5log;

void h5log_init(h5log *log);
void h5log_free(h5log *log);

/* Declare (or find, if it exists with the same shape and type) a series. Returns its
 * index. row_rank 0 means scalar rows. Parent groups are created on save. A non-NULL
 * description/units replaces the stored one. Programming errors exit via die(): a bad
 * path, the same path with another shape or type, a dataset inside another dataset (named
 * with the file's path when the log was loaded from one). */
int h5log_series_add(h5log *log, const char *path, h5log_type type, int row_rank,
                     const size_t *row_dims, const char *description, const char *units);
/* A static dataset: one row; replaces previous contents. */
int h5log_static_set(h5log *log, const char *path, h5log_type type, int rank, const size_t *dims,
                     const void *data, const char *description);
/* Append one row (row_elems elements of the series type). */
void h5log_append(h5log *log, int series, const void *row);
/* Find a series by path, -1 if absent. */
int h5log_find(const h5log *log, const char *path);
/* Set a string or numeric attribute on an object path (replaces). */
void h5log_attr_str(h5log *log, const char *obj, const char *name, const char *value);
void h5log_attr_num(h5log *log, const char *obj, const char *name, double value);
const char *h5log_get_attr_str(const h5log *log, const char *obj, const char *name);
/* A numeric attribute's value; NaN when it is absent or a string. */
double h5log_get_attr_num(const h5log *log, const char *obj, const char *name);
/* Remove an attribute (nothing when absent); the next save writes the file without it. */
void h5log_attr_del(h5log *log, const char *obj, const char *name);

/* Drop, from every series in the group `group` ("/train"), the rows whose value in
 * series `key_path` ("/train/step") is greater than `max_key`. Used on resume. Returns
 * 0, or -1 (nothing changed) when the group holds series but no key series to align
 * them by (a file edited by another tool). */
int h5log_truncate_group(h5log *log, const char *group, const char *key_path, double max_key);
/* The first element of series `path`'s last row; NaN when it is absent or empty. */
double h5log_last(const h5log *log, const char *path);
/* The final train loss of a run, wherever it is shown (train's summary, a grid's
 * index.csv, analyze's tables): the mean of its last /train/loss rows, this many, the
 * paper's 200-step moving average (one step's loss is one batch's, noisy), or a tenth of
 * the rows in a run of fewer than 2000 (a 200-step run's whole log would hold its
 * warm-up's losses): run_loss_window. */
#define RUN_LOSS_WINDOW 200
/* How many of a run's last `rows` /train/loss rows its final train loss averages:
 * RUN_LOSS_WINDOW, or rows / 10 rounded up when that is fewer (1 at least). */
size_t run_loss_window(size_t rows);
/* The final train loss of the run file `log` (NaN without /train/loss rows; *used, if not
 * NULL, how many rows it averages). */
double h5log_final_train_loss(const h5log *log, size_t *used);
/* The mean of the last `window` rows of series `path` (fewer when it has fewer; *used, if
 * not NULL, says how many), in the rows' order; NaN when it has none. */
double h5log_tail_mean(const h5log *log, const char *path, size_t window, size_t *used);

/* Write the whole log to `path` atomically (path.tmp, fsync, rename). 0 or -1 (message
 * on stderr naming the file). */
int h5log_save(const h5log *log, const char *path);
/* Read a run file written by h5log_save back into an empty log (every dataset becomes a
 * series; datasets without a `row_axis` attribute become static). 0, or -1 with err; -2
 * with err for a file not to be replaced: another program holds HDF5's lock on it
 * (h5_open_failed), or its root attribute `format_version` is above RUN_FORMAT_VERSION (a
 * newer build's run file) or not a whole number, refused before anything else is read. */
int h5log_load(h5log *log, const char *path, char *err, size_t errlen);

/* ---- helpers shared by h5.c and harness/checkpoint.c (no HDF5 types in this header) */

/* Turn off HDF5's automatic error printing; every caller prints its own message.
 * Idempotent and cheap: each entry point of h5.c and checkpoint.c calls it. */
void h5_quiet(void);
/* Copy HDF5's reason for the last failure into buf as "<what failed>: <why>" (the
 * outermost and innermost messages of the error stack, e.g. "unable to open file:
 * truncated file: eof = 1024, ..."), or "" if the stack is empty. Call right after the
 * failing call: the next HDF5 call clears the stack. */
void h5_error_detail(char *buf, size_t len);
/* The message for an H5Fopen of path that failed (call right after it), in err: "<path>:
 * not a valid <what> (truncated or corrupt?) (HDF5: ...)"; or, when HDF5 could not take
 * its file lock (another program, h5py's "r+" or "a" say, has the file open for writing),
 * that, and how to read it anyway (likewise when the file system refuses the lock: NFS
 * without its lock service). Returns -2 for a lock HDF5 could not take (the file may well
 * be whole), else -1. */
int h5_open_failed(const char *path, const char *what, char *err, size_t errlen);
/* Refuse, with a message "<path>: ..." in err, a file that cannot be read, is empty or is
 * not HDF5 at all; `what` names what was expected ("run file", "s2hc checkpoint").
 * Returns 0 when the file at least starts like an HDF5 file. */
int h5_check_file(const char *path, const char *what, char *err, size_t errlen);
/* Make the finished file `tmp` durable and move it onto `path`: fsync(tmp), rename,
 * fsync(directory). Returns 0, or -1 with errno set and `tmp` removed. */
int h5_commit_tmp(const char *tmp, const char *path);

#endif
