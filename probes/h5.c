/* h5.c: the run log (h5log) in memory, its atomic save to HDF5 and its load back.
 *
 * On disk (docs/runfile.md is the reader's guide):
 *   series   chunked dataset [rows, row_dims...], maxdims [unlimited, row_dims...],
 *            attributes description, units (when set), row_axis (the path of the `step`
 *            series that indexes the rows, or "rows")
 *   static   dataset [dims...], chunked and extendable on its first axis as a series is
 *            (scalar dataspace for rank 0, contiguous when a slice holds no element),
 *            description, units; no row_axis attribute: that is how h5log_load tells
 *            the two apart
 *   strings  variable-length UTF-8 scalars (h5py returns them as str)
 *   numbers  integral values as int64, others as float64
 * Groups track link creation order, so a file reads back in the order it was logged.
 */
#include "probes/h5.h"
#include "probes/h5_attr.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/run.h"
#include "harness/util.h"

/* Target bytes per chunk of a series or static dataset; small ones get smaller chunks
 * (next power of two of their length on the first axis) so a short run does not pay
 * 64 KiB per dataset. */
#define H5LOG_CHUNK_BYTES 65536
#define H5LOG_MIN_CAP 16
/* h5log_load: a dataset larger than this must have its data in the file (chunks never
 * written read as fill values), at most H5LOG_MAX_RATIO times its stored bytes when
 * compressed (deflate's limit is about 1032:1) */
#define H5LOG_UNCHECKED_BYTES ((size_t)1 << 20)
#define H5LOG_MAX_RATIO 1100.0

/* Attribute names h5log writes itself on datasets; h5log_load does not copy them into
 * the attribute list (they live in the series fields or are recomputed on save). */
static const char *const h5log_reserved_[] = {"description", "units", "row_axis"};

/* ------------------------------------------------------------------ shared helpers */

void h5_quiet(void) { H5Eset_auto2(H5E_DEFAULT, NULL, NULL); }

/* 1 for the numbers the project writes and reads: IEEE floats of 4 or 8 bytes, integers
 * of 1, 2, 4 or 8. A corrupt file can declare a float of 1 032 bytes, and libhdf5's
 * conversion of such a type to a native one reads past its own buffer. */
int h5_plain_number(hid_t type) {
    if (type < 0) return 0;
    H5T_class_t cls = H5Tget_class(type);
    size_t sz = H5Tget_size(type);
    if (cls == H5T_FLOAT) return sz == 4 || sz == 8;
    if (cls == H5T_INTEGER) return sz == 1 || sz == 2 || sz == 4 || sz == 8;
    return 0;
}

typedef struct { char inner[256], outer[256]; } h5_walk_ctx;

/* Walking upward, the first entry is where the error was detected (the most specific
 * reason), the last the API call that failed (what was being done). */
static herr_t h5_walk_cb_(unsigned n, const H5E_error2_t *e, void *op) {
    h5_walk_ctx *c = op;
    if (!e->desc || !e->desc[0]) return 0;
    if (n == 0 || !c->inner[0]) snprintf(c->inner, sizeof c->inner, "%s", e->desc);
    snprintf(c->outer, sizeof c->outer, "%s", e->desc);
    return 0;
}

void h5_error_detail(char *buf, size_t len) {
    if (!len) return;
    h5_walk_ctx c;
    c.inner[0] = c.outer[0] = '\0';
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_walk_cb_, &c);
    if (c.outer[0] && strcmp(c.outer, c.inner) != 0) snprintf(buf, len, "%s: %s", c.outer, c.inner);
    else snprintf(buf, len, "%s", c.inner);
    for (char *p = buf; *p; p++) /* one line (HDF5's system error text holds a time stamp's newline) */
        if (*p == '\n' || *p == '\r') *p = ' ';
}

int h5_open_failed(const char *path, const char *what, char *err, size_t errlen) {
    char detail[256];
    h5_error_detail(detail, sizeof detail);
    if (strstr(detail, "unable to lock file")) {
        char held[32]; /* flock's answer for a lock held elsewhere; another errno is the file system's */
        snprintf(held, sizeof held, "errno = %d,", EWOULDBLOCK);
        if (strstr(detail, held))
            snprintf(err, errlen, "%s: another program has it open for writing (HDF5: %s); close it there, or set "
                     "HDF5_USE_FILE_LOCKING=FALSE to read it meanwhile", path, detail);
        else
            snprintf(err, errlen, "%s: the file system refused HDF5's file lock (HDF5: %s); set "
                     "HDF5_USE_FILE_LOCKING=FALSE to read it without one", path, detail);
        return -2;
    }
    snprintf(err, errlen, "%s: not a valid %s (truncated or corrupt?)%s%s%s", path, what, detail[0] ? " (HDF5: " : "",
             detail, detail[0] ? ")" : "");
    return -1;
}

int h5_check_file(const char *path, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a valid %s (not a regular file)", path, what);
        return -1;
    }
    if (st.st_size == 0) {
        snprintf(err, errlen, "%s: not a valid %s (empty file)", path, what);
        return -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    fclose(f);
    if (H5Fis_hdf5(path) <= 0) {
        snprintf(err, errlen, "%s: not a valid %s (not an HDF5 file: truncated, corrupt or foreign?)", path, what);
        return -1;
    }
    return 0;
}

int h5_commit_tmp(const char *tmp, const char *path) {
    int fd = open(tmp, O_RDONLY);
    if (fd < 0) goto fail;
    if (fsync(fd) != 0) { int e = errno; close(fd); errno = e; goto fail; }
    close(fd);
    if (rename(tmp, path) != 0) goto fail;
    /* make the rename itself durable; some file systems refuse fsync on a directory,
     * which costs only durability of the name, so it is not an error */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = '\0';
    else if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY);
    if (dfd >= 0) { (void)fsync(dfd); close(dfd); }
    return 0;
fail:;
    int e = errno;
    unlink(tmp);
    errno = e;
    return -1;
}

/* ------------------------------------------------------------------ the log in memory */

static size_t h5log_esize(h5log_type t) { return t == H5LOG_F32 ? 4 : 8; }

static void *realloc_or_die(void *p, size_t bytes) {
    void *q = realloc(p, bytes ? bytes : 1);
    if (!q) die(1, "out of memory growing the run log to %zu bytes", bytes);
    return q;
}

static void h5log_check_path(const char *what, const char *path) {
    size_t n = path ? strlen(path) : 0;
    if (n == 0 || path[0] != '/' || n >= sizeof(((h5log_series *)0)->path) ||
        (n > 1 && path[n - 1] == '/') || strstr(path, "//"))
        die(1, "h5log: bad %s path '%s' (absolute, no trailing or double '/', < 256 chars)",
            what, path ? path : "(null)");
}

/* A dataset that code declares one way and a loaded file holds another: exits like die(),
 * naming the file the log was loaded from (then it is the file's fault, not the code's). */
static void h5log_conflict(const h5log *log, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void h5log_conflict(const h5log *log, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (log->source[0])
        die(1, "%s: %s (a run file of another s2hc version, or edited by another tool?)", log->source, msg);
    die(1, "h5log: %s", msg);
}

static void h5log_set_text(char *dst, size_t cap, const char *src, const char *what, const char *path) {
    if (!src) return;
    if (strlen(src) >= cap) die(1, "h5log: %s of %s longer than %zu chars", what, path, cap - 1);
    snprintf(dst, cap, "%s", src);
}

void h5log_init(h5log *log) { memset(log, 0, sizeof *log); }

void h5log_free(h5log *log) {
    for (int i = 0; i < log->n_series; i++) free(log->series[i].data);
    for (int i = 0; i < log->n_attrs; i++) free(log->attrs[i].str);
    free(log->series);
    free(log->attrs);
    memset(log, 0, sizeof *log);
}

int h5log_find(const h5log *log, const char *path) {
    for (int i = 0; i < log->n_series; i++)
        if (strcmp(log->series[i].path, path) == 0) return i;
    return -1;
}

/* 1 if `a` is a strict path prefix of `b` ("/train/loss" of "/train/loss/x"). */
static int h5log_path_under(const char *a, const char *b) {
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && b[n] == '/';
}

/* A new, empty series slot with path, type and row shape set. */
static int h5log_new_series(h5log *log, const char *path, h5log_type type, int row_rank,
                            const size_t *row_dims, int fixed) {
    for (int i = 0; i < log->n_series; i++)   /* a dataset cannot hold children in HDF5 */
        if (h5log_path_under(log->series[i].path, path) || h5log_path_under(path, log->series[i].path))
            h5log_conflict(log, "%s and %s cannot both be datasets (one is inside the other)", path,
                           log->series[i].path);
    if (log->n_series == log->cap_series) {
        log->cap_series = log->cap_series ? 2 * log->cap_series : 16;
        log->series = realloc_or_die(log->series, (size_t)log->cap_series * sizeof *log->series);
    }
    h5log_series *s = &log->series[log->n_series];
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    s->type = type;
    s->row_rank = row_rank;
    s->row_elems = 1;
    for (int d = 0; d < row_rank; d++) {
        s->row_dims[d] = row_dims[d];
        s->row_elems *= row_dims[d];
    }
    s->fixed = fixed;
    return log->n_series++;
}

static int h5log_same_shape(const h5log_series *s, h5log_type type, int rank, const size_t *dims) {
    if (s->type != type || s->row_rank != rank) return 0;
    for (int d = 0; d < rank; d++)
        if (s->row_dims[d] != dims[d]) return 0;
    return 1;
}

int h5log_series_add(h5log *log, const char *path, h5log_type type, int row_rank,
                     const size_t *row_dims, const char *description, const char *units) {
    h5log_check_path("series", path);
    if (row_rank < 0 || row_rank > H5LOG_MAX_RANK) die(1, "h5log: %s: row rank %d", path, row_rank);
    for (int d = 0; d < row_rank; d++)
        if (row_dims[d] == 0) die(1, "h5log: %s: row dimension %d is 0", path, d);
    int i = h5log_find(log, path);
    if (i >= 0) {
        h5log_series *s = &log->series[i];
        if (s->fixed) h5log_conflict(log, "%s is a static dataset, not a series", path);
        if (!h5log_same_shape(s, type, row_rank, row_dims))
            h5log_conflict(log, "series %s re-declared with another type or row shape", path);
    } else {
        i = h5log_new_series(log, path, type, row_rank, row_dims, 0);
    }
    /* the code's current words win over those loaded from an older file */
    h5log_set_text(log->series[i].description, sizeof log->series[i].description, description, "description", path);
    h5log_set_text(log->series[i].units, sizeof log->series[i].units, units, "units", path);
    return i;
}

int h5log_static_set(h5log *log, const char *path, h5log_type type, int rank, const size_t *dims,
                     const void *data, const char *description) {
    h5log_check_path("dataset", path);
    if (rank < 0 || rank > H5LOG_MAX_RANK) die(1, "h5log: %s: rank %d", path, rank);
    int i = h5log_find(log, path);
    if (i >= 0 && !log->series[i].fixed) h5log_conflict(log, "%s is a series, not a static dataset", path);
    if (i >= 0 && !h5log_same_shape(&log->series[i], type, rank, dims)) {
        /* new shape: keep the slot (and its place in the file), reset its shape */
        h5log_series *s = &log->series[i];
        s->type = type;
        s->row_rank = rank;
        s->row_elems = 1;
        for (int d = 0; d < rank; d++) {
            s->row_dims[d] = dims[d];
            s->row_elems *= dims[d];
        }
        free(s->data);
        s->data = NULL;
        s->cap = 0;
    }
    if (i < 0) i = h5log_new_series(log, path, type, rank, dims, 1);
    h5log_series *s = &log->series[i];
    size_t bytes = s->row_elems * h5log_esize(type);
    if (s->cap < 1) {
        s->data = realloc_or_die(s->data, bytes);
        s->cap = 1;
    }
    if (bytes) memcpy(s->data, data, bytes);
    s->rows = 1;
    h5log_set_text(s->description, sizeof s->description, description, "description", path);
    return i;
}

void h5log_append(h5log *log, int series, const void *row) {
    if (series < 0 || series >= log->n_series) die(1, "h5log_append: no series %d", series);
    h5log_series *s = &log->series[series];
    if (s->fixed) die(1, "h5log_append: %s is a static dataset", s->path);
    size_t rb = s->row_elems * h5log_esize(s->type);
    if (s->rows == s->cap) {                       /* amortised: capacity doubles */
        size_t cap = s->cap ? 2 * s->cap : H5LOG_MIN_CAP;
        s->data = realloc_or_die(s->data, cap * rb);
        s->cap = cap;
    }
    memcpy((char *)s->data + s->rows * rb, row, rb);
    s->rows++;
}

static h5log_attr *h5log_attr_slot(h5log *log, const char *obj, const char *name) {
    h5log_check_path("object", obj);
    if (!name || !name[0] || strlen(name) >= sizeof(((h5log_attr *)0)->name))
        die(1, "h5log: bad attribute name on %s", obj);
    for (int i = 0; i < log->n_attrs; i++)
        if (strcmp(log->attrs[i].path, obj) == 0 && strcmp(log->attrs[i].name, name) == 0) {
            free(log->attrs[i].str);
            log->attrs[i].str = NULL;
            return &log->attrs[i];
        }
    if (log->n_attrs == log->cap_attrs) {
        log->cap_attrs = log->cap_attrs ? 2 * log->cap_attrs : 16;
        log->attrs = realloc_or_die(log->attrs, (size_t)log->cap_attrs * sizeof *log->attrs);
    }
    h5log_attr *a = &log->attrs[log->n_attrs++];
    memset(a, 0, sizeof *a);
    snprintf(a->path, sizeof a->path, "%s", obj);
    snprintf(a->name, sizeof a->name, "%s", name);
    return a;
}

void h5log_attr_str(h5log *log, const char *obj, const char *name, const char *value) {
    h5log_attr *a = h5log_attr_slot(log, obj, name);
    a->is_string = 1;
    a->num = 0;
    a->str = strdup(value ? value : "");
    if (!a->str) die(1, "out of memory copying attribute %s of %s", name, obj);
}

void h5log_attr_num(h5log *log, const char *obj, const char *name, double value) {
    h5log_attr *a = h5log_attr_slot(log, obj, name);
    a->is_string = 0;
    a->num = value;
}

void h5log_attr_del(h5log *log, const char *obj, const char *name) {
    for (int i = 0; i < log->n_attrs; i++)
        if (strcmp(log->attrs[i].path, obj) == 0 && strcmp(log->attrs[i].name, name) == 0) {
            free(log->attrs[i].str);
            memmove(&log->attrs[i], &log->attrs[i + 1], (size_t)(log->n_attrs - i - 1) * sizeof *log->attrs);
            log->n_attrs--;
            return;
        }
}

const char *h5log_get_attr_str(const h5log *log, const char *obj, const char *name) {
    for (int i = 0; i < log->n_attrs; i++)
        if (strcmp(log->attrs[i].path, obj) == 0 && strcmp(log->attrs[i].name, name) == 0)
            return log->attrs[i].is_string ? log->attrs[i].str : NULL;
    return NULL;
}

double h5log_get_attr_num(const h5log *log, const char *obj, const char *name) {
    for (int i = 0; i < log->n_attrs; i++)
        if (strcmp(log->attrs[i].path, obj) == 0 && strcmp(log->attrs[i].name, name) == 0)
            return log->attrs[i].is_string ? NAN : log->attrs[i].num;
    return NAN;
}

/* Element `e` of a series as a double (any type). */
static double h5log_value(const h5log_series *s, size_t e) {
    switch (s->type) {
    case H5LOG_F32: return ((const float *)s->data)[e];
    case H5LOG_F64: return ((const double *)s->data)[e];
    default: return (double)((const int64_t *)s->data)[e];
    }
}

/* Series in the group (at any depth) are taken to be row-aligned with the key series:
 * those with its row count lose exactly the rows whose key is > max_key; a series with
 * another row count (declared later in the run) is cut to the number of kept rows. */
double h5log_last(const h5log *log, const char *path) {
    const int k = h5log_find(log, path);
    if (k < 0 || log->series[k].rows == 0) return NAN;
    const h5log_series *s = &log->series[k];
    return h5log_value(s, (s->rows - 1) * s->row_elems);
}

double h5log_tail_mean(const h5log *log, const char *path, size_t window, size_t *used) {
    const int k = h5log_find(log, path);
    const size_t rows = k < 0 ? 0 : log->series[k].rows, n = rows < window ? rows : window;
    if (used) *used = n;
    if (n == 0) return NAN;
    const h5log_series *s = &log->series[k];
    double sum = 0;
    for (size_t r = rows - n; r < rows; r++) sum += h5log_value(s, r * s->row_elems);
    return sum / (double)n;
}

size_t run_loss_window(size_t rows) {
    const size_t tenth = (rows + 9) / 10;
    return tenth < 1 ? 1 : tenth < RUN_LOSS_WINDOW ? tenth : RUN_LOSS_WINDOW;
}

double h5log_final_train_loss(const h5log *log, size_t *used) {
    const int k = h5log_find(log, "/train/loss");
    return h5log_tail_mean(log, "/train/loss", run_loss_window(k < 0 ? 0 : log->series[k].rows), used);
}

int h5log_truncate_group(h5log *log, const char *group, const char *key_path, double max_key) {
    size_t gl = strlen(group);
    while (gl > 0 && group[gl - 1] == '/') gl--;       /* "/" and "/train/" work too */
    int k = h5log_find(log, key_path);
    if (k < 0 || log->series[k].fixed) {
        for (int i = 0; i < log->n_series; i++)
            if (!log->series[i].fixed && !strncmp(log->series[i].path, group, gl) && log->series[i].path[gl] == '/')
                return -1; /* rows that nothing says the step of */
        return 0;
    }
    const h5log_series *key = &log->series[k];
    size_t nrows = key->rows, nkeep = 0;
    unsigned char *keep = malloc_check(nrows);
    for (size_t r = 0; r < nrows; r++) {
        keep[r] = h5log_value(key, r * key->row_elems) <= max_key;
        nkeep += keep[r];
    }
    for (int i = 0; i < log->n_series; i++) {
        h5log_series *s = &log->series[i];
        if (s->fixed || strncmp(s->path, group, gl) != 0 || s->path[gl] != '/') continue;
        if (s->rows == nrows) {
            size_t rb = s->row_elems * h5log_esize(s->type), w = 0;
            for (size_t r = 0; r < nrows; r++) {
                if (!keep[r]) continue;
                if (w != r) memmove((char *)s->data + w * rb, (char *)s->data + r * rb, rb);
                w++;
            }
            s->rows = w;
        } else if (s->rows > nkeep) {
            s->rows = nkeep;
        }
    }
    free(keep);
    return 0;
}

/* ------------------------------------------------------------------ save */

static hid_t h5log_file_type(h5log_type t) {
    return t == H5LOG_F32 ? H5T_IEEE_F32LE : t == H5LOG_F64 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
}
static hid_t h5log_mem_type(h5log_type t) {
    return t == H5LOG_F32 ? H5T_NATIVE_FLOAT : t == H5LOG_F64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
}

int h5_attr_write_str(hid_t obj, const char *name, const char *value) {
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0) return -1;
    hid_t t = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR), a = H5I_INVALID_HID;
    int rc = -1;
    if (t < 0 || sp < 0 || H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, H5T_CSET_UTF8) < 0) goto done;
    a = H5Acreate2(obj, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
    if (a < 0) goto done;
    const char *v = value ? value : "";
    rc = H5Awrite(a, t, &v) < 0 ? -1 : 0;
done:
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return rc;
}

/* Integral values (|v| < 2^53) are stored as int64 so readers see 4, not 4.0. */
static int h5_attr_write_num(hid_t obj, const char *name, double v) {
    if (H5Aexists(obj, name) > 0 && H5Adelete(obj, name) < 0) return -1;
    int integral = isfinite(v) && v == floor(v) && fabs(v) < 9007199254740992.0;
    int64_t iv = integral ? (int64_t)v : 0;
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(obj, name, integral ? H5T_STD_I64LE : H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (a >= 0) {
        rc = integral ? H5Awrite(a, H5T_NATIVE_INT64, &iv) : H5Awrite(a, H5T_NATIVE_DOUBLE, &v);
        rc = rc < 0 ? -1 : 0;
        H5Aclose(a);
    }
    H5Sclose(sp);
    return rc;
}

/* Create every missing group along `path` ("/a/b" creates /a and /a/b). */
static int h5_ensure_groups(hid_t f, const char *path, hid_t gcpl) {
    char buf[sizeof(((h5log_series *)0)->path)];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (buf[1]) {
                htri_t ex = H5Lexists(f, buf, H5P_DEFAULT);
                if (ex < 0) return -1;
                if (!ex) {
                    hid_t g = H5Gcreate2(f, buf, H5P_DEFAULT, gcpl, H5P_DEFAULT);
                    if (g < 0) return -1;
                    H5Gclose(g);
                }
            }
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

/* The `row_axis` of a series: the nearest <ancestor>/step series with the same row
 * count (rows of both correspond one to one), else "rows". */
static void h5log_row_axis(const h5log *log, const h5log_series *s, char *out, size_t len) {
    char grp[sizeof s->path];
    snprintf(grp, sizeof grp, "%s", s->path);
    for (;;) {
        char *slash = strrchr(grp, '/');
        if (!slash) break;
        *slash = '\0';
        char cand[sizeof s->path + 8];
        snprintf(cand, sizeof cand, "%s/step", grp);
        int k = h5log_find(log, cand);
        if (k >= 0 && !log->series[k].fixed && log->series[k].rows == s->rows) {
            snprintf(out, len, "%s", cand);
            return;
        }
    }
    snprintf(out, len, "rows");
}

/* On failure the HDF5 reason goes to detail (before cleanup calls clear the stack). */
static int h5log_write_series(hid_t f, const h5log *log, const h5log_series *s, hid_t gcpl, char *detail,
                              size_t dlen) {
    char parent[sizeof s->path];
    snprintf(parent, sizeof parent, "%s", s->path);
    *strrchr(parent, '/') = '\0';
    if (parent[0] && h5_ensure_groups(f, parent, gcpl) < 0) {
        h5_error_detail(detail, dlen);
        return -1;
    }

    /* dims: the on-disk shape; a series gets the row axis in front, a static dataset
       keeps its own shape (a scalar dataspace when it has no axis) */
    hsize_t dims[H5LOG_MAX_RANK + 1], maxd[H5LOG_MAX_RANK + 1], chunk[H5LOG_MAX_RANK + 1];
    int rank = s->fixed ? s->row_rank : 1 + s->row_rank, rc = -1;
    hid_t sp = H5I_INVALID_HID, dcpl = H5P_DEFAULT, d = H5I_INVALID_HID;
    if (s->fixed) for (int i = 0; i < rank; i++) dims[i] = s->row_dims[i];
    else {
        dims[0] = s->rows;
        for (int i = 0; i < s->row_rank; i++) dims[i + 1] = s->row_dims[i];
    }
    /* Every dataset with an axis is chunked and extendable on its first axis (maxdims
       [H5S_UNLIMITED, dims[1..]]), static ones included: other tools may append to any
       of them. A chunk holds the whole of the other axes and a power of two of first-axis
       slices, at most H5LOG_CHUNK_BYTES (one slice if a slice is larger). A scalar cannot
       be chunked; nor can a slice with no element (HDF5 refuses a chunk dimension of 0):
       those stay contiguous. */
    size_t slice = h5log_esize(s->type);
    for (int i = 1; i < rank; i++) slice *= dims[i];
    if (rank == 0) {
        sp = H5Screate(H5S_SCALAR);
    } else if (slice == 0) {
        sp = H5Screate_simple(rank, dims, NULL);
    } else {
        hsize_t most = slice >= H5LOG_CHUNK_BYTES ? 1 : H5LOG_CHUNK_BYTES / slice, want = 1;
        while (want < dims[0] && want * 2 <= most) want *= 2;
        maxd[0] = H5S_UNLIMITED;
        chunk[0] = want;
        for (int i = 1; i < rank; i++) maxd[i] = chunk[i] = dims[i];
        sp = H5Screate_simple(rank, dims, maxd);
        dcpl = H5Pcreate(H5P_DATASET_CREATE);
        if (dcpl < 0 || H5Pset_chunk(dcpl, rank, chunk) < 0) goto done;
    }
    if (sp < 0) goto done;
    d = H5Dcreate2(f, s->path, h5log_file_type(s->type), sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (d < 0) goto done;
    if (s->rows > 0 && H5Dwrite(d, h5log_mem_type(s->type), H5S_ALL, H5S_ALL, H5P_DEFAULT, s->data) < 0)
        goto done;
    if (h5_attr_write_str(d, "description", s->description) < 0) goto done;
    if (s->units[0] && h5_attr_write_str(d, "units", s->units) < 0) goto done;
    if (!s->fixed) {
        char axis[sizeof s->path + 8];
        h5log_row_axis(log, s, axis, sizeof axis);
        if (h5_attr_write_str(d, "row_axis", axis) < 0) goto done;
    }
    rc = 0;
done:
    if (rc < 0) h5_error_detail(detail, dlen);
    if (d >= 0) H5Dclose(d);
    if (dcpl != H5P_DEFAULT && dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

static int h5log_write_attr(hid_t f, const h5log_attr *a, hid_t gcpl, char *detail, size_t dlen) {
    if (strcmp(a->path, "/") != 0) {
        htri_t ex = H5Lexists(f, a->path, H5P_DEFAULT);   /* fails if a parent is missing */
        if (ex <= 0 && h5_ensure_groups(f, a->path, gcpl) < 0) {
            h5_error_detail(detail, dlen);
            return -1;
        }
    }
    hid_t o = H5Oopen(f, a->path, H5P_DEFAULT);
    if (o < 0) {
        h5_error_detail(detail, dlen);
        return -1;
    }
    int rc = a->is_string ? h5_attr_write_str(o, a->name, a->str) : h5_attr_write_num(o, a->name, a->num);
    if (rc < 0) h5_error_detail(detail, dlen);
    H5Oclose(o);
    return rc;
}

int h5log_save(const h5log *log, const char *path) {
    h5_quiet();
    char tmp[4096], detail[256] = "", what[640] = "";
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "s2hc: error: %s: path too long\n", path);
        return -1;
    }
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), gcpl = H5Pcreate(H5P_GROUP_CREATE);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), f = H5I_INVALID_HID;
    unsigned order = H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED;
    if (fcpl < 0 || gcpl < 0 || fapl < 0 || H5Pset_link_creation_order(fcpl, order) < 0 ||
        H5Pset_link_creation_order(gcpl, order) < 0 || H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        snprintf(what, sizeof what, "cannot set up HDF5 property lists");
        goto fail;
    }
    tmp_file_claim(path); /* a stop signal from here on removes its .tmp (unregistered when none is free) */
    unlink(tmp);          /* created anew: a link there is never followed */
    f = H5Fcreate(tmp, H5F_ACC_EXCL, fcpl, fapl);
    if (f < 0) {
        h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot create the file");
        goto fail;
    }
    tmp_file_made(path);
    for (int i = 0; i < log->n_series; i++)
        if (h5log_write_series(f, log, &log->series[i], gcpl, detail, sizeof detail) < 0) {
            snprintf(what, sizeof what, "cannot write dataset %s", log->series[i].path);
            goto fail;
        }
    for (int i = 0; i < log->n_attrs; i++)
        if (h5log_write_attr(f, &log->attrs[i], gcpl, detail, sizeof detail) < 0) {
            snprintf(what, sizeof what, "cannot write attribute %s of %s", log->attrs[i].name, log->attrs[i].path);
            goto fail;
        }
    /* closed even when the flush failed; the flush's reason (EFBIG, ENOSPC) is the one to say */
    herr_t fl = H5Fflush(f, H5F_SCOPE_GLOBAL);
    if (fl < 0) h5_error_detail(detail, sizeof detail);
    herr_t cl = H5Fclose(f);
    if (fl < 0 || cl < 0) {
        f = H5I_INVALID_HID;
        if (fl >= 0) h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot flush and close the file");
        goto fail;
    }
    f = H5I_INVALID_HID;
    H5Pclose(fcpl);
    H5Pclose(gcpl);
    H5Pclose(fapl);
    const int committed = h5_commit_tmp(tmp, path);
    tmp_file_release(path);
    if (committed < 0) {
        fprintf(stderr, "s2hc: error: %s: cannot save run file (fsync/rename of %s): %s\n", path, tmp, strerror(errno));
        return -1;
    }
    return 0;
fail:
    if (f >= 0) H5Fclose(f);
    if (fcpl >= 0) H5Pclose(fcpl);
    if (gcpl >= 0) H5Pclose(gcpl);
    if (fapl >= 0) H5Pclose(fapl);
    unlink(tmp);
    tmp_file_release(path);
    fprintf(stderr, "s2hc: error: %s: cannot save run file (writing %s): %s%s%s%s\n", path, tmp, what,
            detail[0] ? " (HDF5: " : "", detail, detail[0] ? ")" : "");
    return -1;
}

/* ------------------------------------------------------------------ load */

char *h5_attr_read_str(hid_t a) {
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    char *out = NULL;
    if (ft < 0 || sp < 0 || H5Tget_class(ft) != H5T_STRING || H5Sget_simple_extent_npoints(sp) != 1) goto done;
    if (H5Tis_variable_str(ft) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        char *p = NULL;
        if (mt >= 0 && H5Tset_size(mt, H5T_VARIABLE) >= 0 && H5Tset_cset(mt, H5Tget_cset(ft)) >= 0 &&
            H5Aread(a, mt, &p) >= 0) {
            out = strdup(p ? p : "");
            if (p) H5free_memory(p);
        }
        if (mt >= 0) H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(ft);
        if (n == 0 || n > ((size_t)64 << 20)) goto done; /* no attribute of the project is that long */
        char *buf = calloc_check(n + 1, 1);
        if (H5Aread(a, ft, buf) >= 0) out = buf;        /* buf[n] stays '\0' */
        else free(buf);
    }
done:
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    return out;
}

/* The string attribute `name` of obj into dst (truncated to cap), "" if absent. */
static void h5_attr_get_text(hid_t obj, const char *name, char *dst, size_t cap) {
    dst[0] = '\0';
    if (H5Aexists(obj, name) <= 0) return;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return;
    char *s = h5_attr_read_str(a);
    H5Aclose(a);
    if (s) snprintf(dst, cap, "%s", s);
    free(s);
}

typedef struct {
    h5log *log;
    const char *file;
    char *err;
    size_t errlen;
    int failed;
    const char *obj;   /* object path whose attributes are being read */
    int is_dataset;
} h5log_load_ctx;

static herr_t h5log_load_attr_cb(hid_t obj, const char *name, const H5A_info_t *info, void *op) {
    h5log_load_ctx *c = op;
    (void)info;
    if (c->is_dataset)
        for (size_t i = 0; i < sizeof h5log_reserved_ / sizeof *h5log_reserved_; i++)
            if (strcmp(name, h5log_reserved_[i]) == 0) return 0;
    if (strlen(name) >= sizeof(((h5log_attr *)0)->name)) return 0;   /* not ours: skip */
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return 0;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    H5T_class_t cls = t >= 0 ? H5Tget_class(t) : H5T_NO_CLASS;
    if (cls == H5T_STRING) {
        char *s = h5_attr_read_str(a);
        if (s) h5log_attr_str(c->log, c->obj, name, s);
        free(s);
    } else if (h5_plain_number(t) && H5Sget_simple_extent_npoints(sp) == 1) {
        double v;
        if (H5Aread(a, H5T_NATIVE_DOUBLE, &v) >= 0) h5log_attr_num(c->log, c->obj, name, v);
    }   /* arrays and other types are not part of the run-file conventions: skipped */
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return 0;
}

static int h5log_load_dataset(h5log_load_ctx *c, hid_t d, const char *path) {
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    int rc = -1;
    if (t < 0 || sp < 0) goto io;
    H5T_class_t cls = H5Tget_class(t);
    size_t tsz = H5Tget_size(t);
    h5log_type type;
    if ((cls == H5T_FLOAT || cls == H5T_INTEGER) && !h5_plain_number(t)) {
        snprintf(c->err, c->errlen, "%s: dataset %s has a %zu-byte %s type (corrupt?): the run log holds 4- or "
                 "8-byte floats and integers of 1 to 8 bytes", c->file, path, tsz,
                 cls == H5T_FLOAT ? "float" : "integer");
        goto done;
    }
    if (cls == H5T_FLOAT && tsz == 4) type = H5LOG_F32;
    else if (cls == H5T_FLOAT) type = H5LOG_F64;
    else if (cls == H5T_INTEGER) type = H5LOG_I64;
    else {
        snprintf(c->err, c->errlen, "%s: dataset %s has a type the run log does not hold (not float or integer)",
                 c->file, path);
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(sp);
    hsize_t dims[H5S_MAX_RANK];
    if (rank < 0 || H5Sget_simple_extent_dims(sp, dims, NULL) < 0) goto io;
    int series = H5Aexists(d, "row_axis") > 0;
    if (series && rank < 1) {
        snprintf(c->err, c->errlen, "%s: series %s (it has a row_axis) is a scalar, not rows", c->file, path);
        goto done;
    }
    if (series ? rank - 1 > H5LOG_MAX_RANK : rank > H5LOG_MAX_RANK) {
        snprintf(c->err, c->errlen, "%s: dataset %s has rank %d, more than the run log holds", c->file, path, rank);
        goto done;
    }
    size_t rd[H5LOG_MAX_RANK] = {0};
    int rr = series ? rank - 1 : rank;
    for (int i = 0; i < rr; i++) rd[i] = dims[i + (series ? 1 : 0)];
    char desc[sizeof(((h5log_series *)0)->description)], units[sizeof(((h5log_series *)0)->units)];
    h5_attr_get_text(d, "description", desc, sizeof desc);
    h5_attr_get_text(d, "units", units, sizeof units);
    size_t rows = series ? dims[0] : 1, elems = rows, esz = h5log_esize(type), bytes = 0;
    for (int i = 0; series && i < rr; i++)
        if (rd[i] == 0) {
            snprintf(c->err, c->errlen, "%s: series %s has a zero row dimension", c->file, path);
            goto done;
        }
    /* the shape comes from the file: its size must not wrap (a dataset of 2^61 rows would
       get an 8-byte buffer), nor exceed what this process can hold */
    size_t row_elems = 1;
    int wraps = 0;
    for (int i = 0; i < rr; i++) wraps |= __builtin_mul_overflow(row_elems, rd[i], &row_elems);
    wraps |= __builtin_mul_overflow(rows, row_elems, &elems);
    wraps |= __builtin_mul_overflow(elems, esz, &bytes);
    wraps |= __builtin_mul_overflow(row_elems, esz, &(size_t){0});
    /* nor may it declare more data than the file holds of it: chunks never written read
       as fill values, so a damaged extent of a few bytes would otherwise take gigabytes
       of memory and minutes to load (compression allowed for: deflate's best ratio) */
    const hsize_t stored = H5Dget_storage_size(d);
    hid_t dcpl = H5Dget_create_plist(d);
    const int filtered = dcpl >= 0 && H5Pget_nfilters(dcpl) > 0;
    if (dcpl >= 0) H5Pclose(dcpl);
    size_t file_bytes = 0;
    const int absent = !wraps && !__builtin_mul_overflow(elems, tsz, &file_bytes) &&
                       file_bytes > H5LOG_UNCHECKED_BYTES &&
                       (double)file_bytes > (double)stored * (filtered ? H5LOG_MAX_RATIO : 1.0);
    if (absent) {
        snprintf(c->err, c->errlen, "%s: dataset %s declares %zu bytes (shape", c->file, path, file_bytes);
        for (int i = 0; i < rank; i++) {
            size_t l = strlen(c->err);
            snprintf(c->err + l, c->errlen - l, "%s%llu", i ? " x " : " ", (unsigned long long)dims[i]);
        }
        size_t l = strlen(c->err);
        snprintf(c->err + l, c->errlen - l, ") but the file stores %llu bytes of it (truncated or corrupt?)",
                 (unsigned long long)stored);
        goto done;
    }
    void *buf = wraps ? NULL : malloc(bytes ? bytes : 1);
    if (!buf) {
        snprintf(c->err, c->errlen, "%s: dataset %s is too large to load (shape", c->file, path);
        for (int i = 0; i < rank; i++) {
            size_t l = strlen(c->err);
            snprintf(c->err + l, c->errlen - l, "%s%llu", i ? " x " : " ", (unsigned long long)dims[i]);
        }
        size_t l = strlen(c->err);
        snprintf(c->err + l, c->errlen - l, "; corrupt?)");
        goto done;
    }
    if (elems && H5Dread(d, h5log_mem_type(type), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        goto io;
    }
    if (series) {
        int i = h5log_series_add(c->log, path, type, rr, rd, desc, units);
        h5log_series *s = &c->log->series[i];
        free(s->data);
        s->data = buf;                               /* exactly rows rows: appends grow it */
        s->rows = s->cap = rows;
    } else {
        int i = h5log_static_set(c->log, path, type, rr, rd, buf, desc);
        snprintf(c->log->series[i].units, sizeof c->log->series[i].units, "%s", units);
        free(buf);
    }
    rc = 0;
    goto done;
io:;
    char detail[256];
    h5_error_detail(detail, sizeof detail);
    snprintf(c->err, c->errlen, "%s: cannot read dataset %s (truncated or corrupt?)%s%s%s", c->file, path,
             detail[0] ? " (HDF5: " : "", detail, detail[0] ? ")" : "");
done:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    return rc;
}

static herr_t h5log_load_obj_cb(hid_t root, const char *name, const H5O_info_t *info, void *op) {
    h5log_load_ctx *c = op;
    char path[sizeof(((h5log_series *)0)->path)];
    if (strcmp(name, ".") == 0) snprintf(path, sizeof path, "/");
    else if (snprintf(path, sizeof path, "/%s", name) >= (int)sizeof path) {
        snprintf(c->err, c->errlen, "%s: object path /%s is longer than the run log holds", c->file, name);
        c->failed = 1;
        return -1;
    }
    if (info->type != H5O_TYPE_GROUP && info->type != H5O_TYPE_DATASET) return 0;   /* named types */
    hid_t o = H5Oopen(root, name, H5P_DEFAULT);
    if (o < 0) {
        char detail[256];
        h5_error_detail(detail, sizeof detail);
        snprintf(c->err, c->errlen, "%s: cannot open object %s (%s)", c->file, path, detail);
        c->failed = 1;
        return -1;
    }
    c->is_dataset = info->type == H5O_TYPE_DATASET;
    if (c->is_dataset && h5log_load_dataset(c, o, path) < 0) {
        H5Oclose(o);
        c->failed = 1;
        return -1;
    }
    c->obj = path;
    hsize_t idx = 0;
    H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, &idx, h5log_load_attr_cb, c);
    H5Oclose(o);
    return 0;
}

/* The root attribute format_version of run file f (path): 0 when absent or at most
 * RUN_FORMAT_VERSION; -1 with err for a newer build's file or a value that is no version
 * (which no build of s2hc wrote either). */
static int h5log_check_version(hid_t f, const char *path, char *err, size_t errlen) {
    if (H5Aexists(f, "format_version") <= 0) return 0; /* a file of another writer: its datasets decide */
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    hid_t t = a >= 0 ? H5Aget_type(a) : -1, sp = a >= 0 ? H5Aget_space(a) : -1;
    double v = NAN;
    if (t >= 0 && sp >= 0 && h5_plain_number(t) && H5Sget_simple_extent_npoints(sp) == 1 &&
        H5Aread(a, H5T_NATIVE_DOUBLE, &v) < 0)
        v = NAN;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    if (!(v >= 1 && v <= 1e9 && v == floor(v))) {
        snprintf(err, errlen, "%s: its root attribute format_version is not a version number (corrupt or edited?); "
                 "this build reads run files up to version %d", path, RUN_FORMAT_VERSION);
        return -1;
    }
    if (v <= RUN_FORMAT_VERSION) return 0;
    char by[128];
    h5_attr_get_text(f, "git_commit", by, sizeof by);
    snprintf(err, errlen, "%s: run file format version %.0f%s%s%s, this build (s2hc %s) reads up to version %d: read, "
             "resume or evaluate it with that build or a newer one", path, v, by[0] ? " (written by s2hc " : "", by,
             by[0] ? ")" : " (written by a newer s2hc)", s2hc_version(), RUN_FORMAT_VERSION);
    return -1;
}

int h5log_load(h5log *log, const char *path, char *err, size_t errlen) {
    h5_quiet();
    if (log->n_series || log->n_attrs) {
        snprintf(err, errlen, "%s: h5log_load needs an empty log", path);
        return -1;
    }
    if (h5_check_file(path, "run file", err, errlen) < 0) return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return h5_open_failed(path, "run file", err, errlen);
    if (h5log_check_version(f, path, err, errlen) < 0) {
        H5Fclose(f);
        return -2;
    }
    snprintf(log->source, sizeof log->source, "%s", path); /* named by a conflict with the code's datasets */
    h5log_load_ctx c = {log, path, err, errlen, 0, "/", 0};
    /* creation order keeps the logging order; files from other writers may lack the index */
    herr_t rc = H5Ovisit2(f, H5_INDEX_CRT_ORDER, H5_ITER_INC, h5log_load_obj_cb, &c, H5O_INFO_BASIC);
    if (rc < 0 && !c.failed) {
        h5log_free(log);
        h5log_init(log);
        snprintf(log->source, sizeof log->source, "%s", path);
        rc = H5Ovisit2(f, H5_INDEX_NAME, H5_ITER_INC, h5log_load_obj_cb, &c, H5O_INFO_BASIC);
    }
    if (rc < 0 && !c.failed) {
        char detail[256];
        h5_error_detail(detail, sizeof detail);
        snprintf(err, errlen, "%s: cannot walk the file's objects (truncated or corrupt?)%s%s%s", path,
                 detail[0] ? " (HDF5: " : "", detail, detail[0] ? ")" : "");
    }
    H5Fclose(f);
    if (rc < 0 || c.failed) {
        h5log_free(log);
        h5log_init(log);
        return -1;
    }
    return 0;
}
