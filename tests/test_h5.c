/* test_h5: the run log (probes/h5.c) and the checkpoint (harness/checkpoint.c).
 * Round trips must be exact (values, shapes, descriptions, attributes, RNG states);
 * truncated, empty, foreign and mismatched files must be refused with a message that
 * names the file (and the tensor). Files go under $S2HC_TEST_TMP (tests/run.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hdf5.h>

#include "harness/checkpoint.h"
#include "probes/h5.h"
#include "t.h"

static char tmpdir_[1024];
static int own_tmpdir_;

static const char *tmp_path(const char *name) {
    static char buf[8][1200];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir_, name);
    return buf[k];
}

static void setup_tmpdir(void) {
    const char *base = getenv("S2HC_TEST_TMP");
    if (base && base[0]) {
        snprintf(tmpdir_, sizeof tmpdir_, "%s/test_h5", base);
        mkdir(tmpdir_, 0755);
    } else {
        snprintf(tmpdir_, sizeof tmpdir_, "/tmp/s2hc-test_h5.XXXXXX");
        if (!mkdtemp(tmpdir_)) { perror("mkdtemp"); exit(1); }
        own_tmpdir_ = 1;
    }
}

static int exists(const char *p) { struct stat st; return stat(p, &st) == 0; }

static long file_size(const char *p) { struct stat st; return stat(p, &st) == 0 ? (long)st.st_size : -1; }

/* Copy the first `frac` of src's bytes to dst. */
static void copy_prefix(const char *src, const char *dst, double frac) {
    FILE *in = fopen(src, "rb"), *out = fopen(dst, "wb");
    if (!in || !out) { perror("copy_prefix"); exit(1); }
    long n = (long)(file_size(src) * frac);
    for (long i = 0; i < n; i++) {
        int c = fgetc(in);
        if (c == EOF) break;
        fputc(c, out);
    }
    fclose(in);
    fclose(out);
}

static void write_text(const char *p, const char *text) {
    FILE *f = fopen(p, "wb");
    if (!f) { perror(p); exit(1); }
    fputs(text, f);
    fclose(f);
}

/* ------------------------------------------------------------------ run log */

static const char *CONFIG_YAML = "model:\n  n_layer: 2\n  n_embd: 32\nmethod: s2hc   # σ²-HC, UTF-8\n";

/* A log like training writes: /train scalars, a [4,4] probe series, a static, attrs. */
static void build_log(h5log *log, int nsteps) {
    h5log_init(log);
    int st = h5log_series_add(log, "/train/step", H5LOG_I64, 0, NULL, "optimizer steps completed", "");
    int lo = h5log_series_add(log, "/train/loss", H5LOG_F32, 0, NULL, "training loss, mean over the batch", "nats");
    int lr = h5log_series_add(log, "/train/lr", H5LOG_F64, 0, NULL, "learning rate", "");
    size_t d44[2] = {4, 4};
    int ps = h5log_series_add(log, "/probe/step", H5LOG_I64, 0, NULL, "step of each probe row", "");
    int hm = h5log_series_add(log, "/probe/H_res_mean", H5LOG_F32, 2, d44,
                              "token-averaged H_res, X_next = H_res . X (rows are output streams)", "");
    h5log_series_add(log, "/eval/val_loss", H5LOG_F32, 0, NULL, "validation loss (never appended here)", "nats");
    for (int i = 0; i < nsteps; i++) {
        int64_t s = 10 * (i + 1);
        float l = 5.0f / (1.0f + (float)i) + 1e-7f * (float)i;
        double r = 6e-4 * (i + 1) / 3.0;
        h5log_append(log, st, &s);
        h5log_append(log, lo, &l);
        h5log_append(log, lr, &r);
        if (i % 3 == 0) {
            float h[16];
            for (int k = 0; k < 16; k++) h[k] = (float)(i * 16 + k) * 0.125f - 3.0f;
            h5log_append(log, ps, &s);
            h5log_append(log, hm, h);
        }
    }
    double comp[6] = {1.0, -2.5, 3.25, 1e-300, -0.0, 6.0};
    size_t d23[2] = {2, 3};
    h5log_static_set(log, "/final/composite", H5LOG_F64, 2, d23, comp, "composite H_res product [2, 3]");
    int64_t count = 1024;
    h5log_static_set(log, "/final/samples", H5LOG_I64, 0, NULL, &count, "validation samples");
    h5log_attr_str(log, "/", "config", CONFIG_YAML);
    h5log_attr_str(log, "/", "method", "s2hc");
    h5log_attr_num(log, "/", "n", 4);
    h5log_attr_num(log, "/", "seed", 1234567);
    h5log_attr_num(log, "/", "ratio", 0.3125);
    h5log_attr_num(log, "/", "neg", -1.5e-9);
    h5log_attr_str(log, "/train/loss", "note", "logged every step");
    h5log_attr_str(log, "/eval/ood", "corpora", "kjv,devil");   /* a group with no datasets */
    h5log_attr_num(log, "/probe", "every", 3);
}

static size_t esize(h5log_type t) { return t == H5LOG_F32 ? 4 : 8; }

/* same_order: the log was declared group by group, so the file's depth-first order
 * (creation order within each group) is the declaration order. */
static void check_logs_equal(const h5log *a, const h5log *b, int same_order) {
    CHECK(a->n_series == b->n_series, "series %d vs %d", a->n_series, b->n_series);
    for (int i = 0; i < a->n_series && i < b->n_series; i++) {
        const h5log_series *x = &a->series[i], *y = &b->series[i];
        if (same_order) CHECK(strcmp(x->path, y->path) == 0, "series %d: %s vs %s (order kept)", i, x->path, y->path);
        int j = h5log_find(b, x->path);
        CHECK(j >= 0, "%s missing after load", x->path);
        if (j < 0) continue;
        y = &b->series[j];
        CHECK(x->type == y->type, "%s type %d vs %d", x->path, x->type, y->type);
        CHECK(x->fixed == y->fixed, "%s fixed %d vs %d", x->path, x->fixed, y->fixed);
        CHECK(x->row_rank == y->row_rank, "%s row rank %d vs %d", x->path, x->row_rank, y->row_rank);
        for (int d = 0; d < x->row_rank && d < y->row_rank; d++)
            CHECK(x->row_dims[d] == y->row_dims[d], "%s dim %d", x->path, d);
        CHECK(x->row_elems == y->row_elems, "%s row elems", x->path);
        CHECK(x->rows == y->rows, "%s rows %zu vs %zu", x->path, x->rows, y->rows);
        CHECK(strcmp(x->description, y->description) == 0, "%s description '%s' vs '%s'", x->path, x->description,
              y->description);
        CHECK(strcmp(x->units, y->units) == 0, "%s units '%s' vs '%s'", x->path, x->units, y->units);
        if (x->rows == y->rows && x->row_elems == y->row_elems && x->type == y->type && x->rows)
            CHECK(memcmp(x->data, y->data, x->rows * x->row_elems * esize(x->type)) == 0, "%s data differs", x->path);
    }
    CHECK(a->n_attrs == b->n_attrs, "attrs %d vs %d", a->n_attrs, b->n_attrs);
    for (int i = 0; i < a->n_attrs; i++) {
        const h5log_attr *x = &a->attrs[i];
        const h5log_attr *y = NULL;
        for (int j = 0; j < b->n_attrs; j++)
            if (!strcmp(b->attrs[j].path, x->path) && !strcmp(b->attrs[j].name, x->name)) y = &b->attrs[j];
        CHECK(y != NULL, "attribute %s of %s missing after load", x->name, x->path);
        if (!y) continue;
        CHECK(x->is_string == y->is_string, "attribute %s of %s: string %d vs %d", x->name, x->path, x->is_string,
              y->is_string);
        if (x->is_string && y->is_string)
            CHECK(strcmp(x->str, y->str) == 0, "attribute %s of %s: '%s' vs '%s'", x->name, x->path, x->str, y->str);
        else
            CHECK(x->num == y->num, "attribute %s of %s: %.17g vs %.17g", x->name, x->path, x->num, y->num);
    }
}

static void test_log_roundtrip(void) {
    h5log a, b;
    build_log(&a, 100);   /* 100 rows: several doublings of the row buffer */
    int hm = h5log_find(&a, "/probe/H_res_mean");
    CHECK(hm >= 0 && a.series[hm].rows == 34 && a.series[hm].row_elems == 16, "probe rows %zu",
          hm >= 0 ? a.series[hm].rows : 0);
    CHECK(h5log_find(&a, "/nope") == -1, "find of an absent path");
    /* re-declaring finds the same series */
    CHECK(h5log_series_add(&a, "/train/loss", H5LOG_F32, 0, NULL, NULL, NULL) == h5log_find(&a, "/train/loss"),
          "re-declare");
    const char *p = tmp_path("run.h5");
    CHECK(h5log_save(&a, p) == 0, "save");
    CHECK(!exists(tmp_path("run.h5.tmp")), "no .tmp left after save");
    h5log_init(&b);
    char err[512] = "";
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "load: %s", err);
    check_logs_equal(&a, &b, 1);
    CHECK(h5log_get_attr_str(&b, "/", "config") && !strcmp(h5log_get_attr_str(&b, "/", "config"), CONFIG_YAML),
          "config text");
    CHECK(h5log_get_attr_str(&b, "/", "n") == NULL, "a numeric attribute is not a string");
    int fc = h5log_find(&b, "/final/composite");
    CHECK(fc >= 0 && b.series[fc].fixed && b.series[fc].row_rank == 2 && b.series[fc].rows == 1, "static shape");
    /* a loaded log keeps growing like a fresh one */
    int lo = h5log_find(&b, "/train/loss");
    float v = 42.0f;
    for (int i = 0; i < 40; i++) h5log_append(&b, lo, &v);
    CHECK(b.series[lo].rows == 140 && ((float *)b.series[lo].data)[139] == 42.0f, "append after load");
    /* loading into a non-empty log is refused */
    CHECK(h5log_load(&b, p, err, sizeof err) == -1, "load into a non-empty log");
    /* an attribute removed from a loaded log is gone from the next save; the rest stay */
    int na = b.n_attrs;
    h5log_attr_del(&b, "/", "method");
    h5log_attr_del(&b, "/", "no_such_attribute");
    CHECK(b.n_attrs == na - 1, "one attribute removed: %d -> %d", na, b.n_attrs);
    CHECK(h5log_save(&b, p) == 0, "save after removing an attribute");
    h5log c;
    h5log_init(&c);
    CHECK(h5log_load(&c, p, err, sizeof err) == 0, "load: %s", err);
    CHECK(c.n_attrs == na - 1 && h5log_get_attr_str(&c, "/", "method") == NULL, "the removed attribute is not in the file");
    CHECK(h5log_get_attr_str(&c, "/", "config") && !strcmp(h5log_get_attr_str(&c, "/", "config"), CONFIG_YAML),
          "the other attributes are");
    h5log_free(&a);
    h5log_free(&b);
    h5log_free(&c);
}

static void test_log_static_replace(void) {
    h5log a;
    h5log_init(&a);
    float x[4] = {1, 2, 3, 4}, y[6] = {9, 8, 7, 6, 5, 4};
    size_t d4[1] = {4}, d23[2] = {2, 3};
    int i = h5log_static_set(&a, "/final/x", H5LOG_F32, 1, d4, x, "first");
    int j = h5log_static_set(&a, "/final/x", H5LOG_F32, 2, d23, y, "second");
    CHECK(i == j && a.n_series == 1, "replace keeps one slot");
    CHECK(a.series[j].row_rank == 2 && a.series[j].row_elems == 6 && a.series[j].rows == 1, "new shape");
    CHECK(memcmp(a.series[j].data, y, sizeof y) == 0 && !strcmp(a.series[j].description, "second"), "new data");
    h5log_attr_str(&a, "/final", "k", "one");
    h5log_attr_str(&a, "/final", "k", "two");
    CHECK(a.n_attrs == 1 && !strcmp(h5log_get_attr_str(&a, "/final", "k"), "two"), "attribute replaced");
    h5log_free(&a);
}

/* Static datasets with an axis (/final/...) are chunked and extendable on their first
 * axis like the series, with their shape, dtype and description kept; a scalar stays a
 * scalar. Checked through HDF5 itself, then by appending a slice as another tool would. */
static void check_layout(hid_t f, const char *path, int rank, const hsize_t *want_dims, hsize_t want_chunk0) {
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    CHECK(d >= 0, "open %s", path);
    if (d < 0) return;
    hid_t sp = H5Dget_space(d), dcpl = H5Dget_create_plist(d);
    hsize_t dims[8] = {0}, maxd[8] = {0}, chunk[8] = {0};
    CHECK(H5Sget_simple_extent_ndims(sp) == rank, "%s rank %d", path, H5Sget_simple_extent_ndims(sp));
    H5Sget_simple_extent_dims(sp, dims, maxd);
    CHECK(H5Pget_layout(dcpl) == H5D_CHUNKED, "%s is chunked (layout %d)", path, (int)H5Pget_layout(dcpl));
    CHECK(maxd[0] == H5S_UNLIMITED, "%s: maxdims[0] unlimited", path);
    for (int i = 0; i < rank; i++) CHECK(dims[i] == want_dims[i], "%s dim %d: %llu", path, i, (unsigned long long)dims[i]);
    for (int i = 1; i < rank; i++) CHECK(maxd[i] == dims[i], "%s: maxdims[%d] fixed", path, i);
    if (H5Pget_layout(dcpl) == H5D_CHUNKED) {
        CHECK(H5Pget_chunk(dcpl, rank, chunk) == rank, "%s chunk rank", path);
        CHECK(chunk[0] == want_chunk0, "%s chunk[0] %llu, wanted %llu", path, (unsigned long long)chunk[0],
              (unsigned long long)want_chunk0);
        for (int i = 1; i < rank; i++) CHECK(chunk[i] == dims[i], "%s: a chunk holds whole slices", path);
    }
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Dclose(d);
}

static void test_static_chunked(void) {
    h5log a, b;
    build_log(&a, 10);
    /* 1000 x 16 float64: 128 B a slice, so 512 slices (64 KiB) a chunk, two chunks */
    static double big[1000 * 16];
    for (int i = 0; i < 1000 * 16; i++) big[i] = i * 0.5;
    /* 200 x 96 float64: 768 B a slice; 85 slices fit in 64 KiB, so 64 a chunk */
    static double odd[200 * 96];
    size_t dbig[2] = {1000, 16}, dodd[2] = {200, 96}, d1[1] = {3};
    int64_t w[3] = {7, 8, 9};
    h5log_static_set(&a, "/final/big", H5LOG_F64, 2, dbig, big, "a static dataset larger than a chunk");
    h5log_static_set(&a, "/final/odd", H5LOG_F64, 2, dodd, odd, "a slice that does not divide 64 KiB");
    h5log_static_set(&a, "/final/window", H5LOG_I64, 1, d1, w, "a rank-1 static dataset");
    const char *p = tmp_path("static.h5");
    CHECK(h5log_save(&a, p) == 0, "save");
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0, "H5Fopen %s", p);
    if (f < 0) { h5log_free(&a); return; }
    check_layout(f, "/final/composite", 2, (hsize_t[]){2, 3}, 2);
    check_layout(f, "/final/big", 2, (hsize_t[]){1000, 16}, 512);
    check_layout(f, "/final/odd", 2, (hsize_t[]){200, 96}, 64);
    check_layout(f, "/final/window", 1, (hsize_t[]){3}, 4);
    hid_t d = H5Dopen2(f, "/final/samples", H5P_DEFAULT), sp = H5Dget_space(d);
    CHECK(H5Sget_simple_extent_type(sp) == H5S_SCALAR, "a scalar static dataset stays scalar");
    H5Sclose(sp);
    H5Dclose(d);
    d = H5Dopen2(f, "/final/window", H5P_DEFAULT);
    hid_t ty = H5Dget_type(d);
    CHECK(H5Tequal(ty, H5T_STD_I64LE) > 0, "dtype kept");
    H5Tclose(ty);
    /* append a slice as another tool would */
    hsize_t grown[1] = {4}, start[1] = {3}, one[1] = {1};
    int64_t extra = 10;
    CHECK(H5Dset_extent(d, grown) >= 0, "/final/window extends");
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(1, one, NULL);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, one, NULL);
    CHECK(H5Dwrite(d, H5T_NATIVE_INT64, ms, fs, H5P_DEFAULT, &extra) >= 0, "append a slice");
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(d);
    H5Fclose(f);
    /* the project's reader sees the same statics, descriptions and values */
    h5log_init(&b);
    char err[512] = "";
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "load: %s", err);
    int bi = h5log_find(&b, "/final/big"), wi = h5log_find(&b, "/final/window");
    CHECK(bi >= 0 && b.series[bi].fixed && b.series[bi].row_rank == 2 &&
              !memcmp(b.series[bi].data, big, sizeof big),
          "/final/big read back");
    CHECK(bi >= 0 && !strcmp(b.series[bi].description, "a static dataset larger than a chunk"), "description kept");
    CHECK(wi >= 0 && b.series[wi].fixed && b.series[wi].row_dims[0] == 4 && ((int64_t *)b.series[wi].data)[3] == 10,
          "the appended slice is read back");
    h5log_free(&a);
    h5log_free(&b);
}

static void test_truncate_group(void) {
    h5log a;
    build_log(&a, 10);   /* /train/step = 10..100, /probe/step = 10, 40, 70, 100 */
    size_t d2[1] = {2};
    int sub = h5log_series_add(&a, "/train/sub/x", H5LOG_F64, 1, d2, "a nested series", "");
    int late = h5log_series_add(&a, "/train/late", H5LOG_F32, 0, NULL, "declared late: fewer rows", "");
    for (int i = 0; i < 10; i++) {
        double r[2] = {i, -i};
        h5log_append(&a, sub, r);
        float f = (float)i;
        if (i >= 2) h5log_append(&a, late, &f);   /* 8 rows */
    }
    /* a group whose series have no key to align them by: refused, nothing cut */
    CHECK(h5log_truncate_group(&a, "/train", "/train/stepz", 55.0) == -1, "series without their key: -1");
    CHECK(a.series[h5log_find(&a, "/train/loss")].rows == 10, "and nothing cut");
    CHECK(h5log_truncate_group(&a, "/nothing", "/nothing/step", 55.0) == 0, "an empty group without a key: 0");
    CHECK(h5log_truncate_group(&a, "/train", "/train/step", 55.0) == 0, "truncate: 0");
    int st = h5log_find(&a, "/train/step"), lo = h5log_find(&a, "/train/loss");
    CHECK(a.series[st].rows == 5, "step rows %zu", a.series[st].rows);
    CHECK(a.series[lo].rows == 5 && a.series[h5log_find(&a, "/train/lr")].rows == 5, "loss/lr rows");
    CHECK(a.series[sub].rows == 5 && ((double *)a.series[sub].data)[9] == -4.0, "nested series cut, data kept");
    CHECK(a.series[late].rows == 5, "late series cut to the kept count (%zu)", a.series[late].rows);
    for (int i = 0; i < 5; i++) CHECK(((int64_t *)a.series[st].data)[i] == 10 * (i + 1), "step %d", i);
    CHECK(((float *)a.series[lo].data)[4] == 5.0f / 5.0f + 4e-7f, "loss value kept");
    CHECK(a.series[h5log_find(&a, "/probe/step")].rows == 4, "other groups untouched");
    CHECK(a.series[h5log_find(&a, "/final/composite")].rows == 1, "statics untouched");
    /* a key series that is not monotone: only the rows above max_key go */
    h5log_truncate_group(&a, "/probe", "/probe/step", 45.0);
    int ps = h5log_find(&a, "/probe/step"), hm = h5log_find(&a, "/probe/H_res_mean");
    CHECK(a.series[ps].rows == 2 && a.series[hm].rows == 2, "probe rows %zu", a.series[ps].rows);
    CHECK(((float *)a.series[hm].data)[16] == (float)(3 * 16) * 0.125f - 3.0f, "probe row 1 kept (step 40)");
    /* the truncated log saves and loads with the shorter series */
    h5log b;
    h5log_init(&b);
    char err[512] = "";
    const char *p = tmp_path("trunc.h5");
    CHECK(h5log_save(&a, p) == 0, "save");
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "load: %s", err);
    check_logs_equal(&a, &b, 0);
    h5log_free(&a);
    h5log_free(&b);
}

/* h5log_tail_mean: the last `window` rows (the final train loss), fewer when the series
 * is shorter, NaN when it has none. */
static void test_tail_mean(void) {
    h5log log;
    h5log_init(&log);
    size_t used = 7;
    CHECK(isnan(h5log_tail_mean(&log, "/train/loss", RUN_LOSS_WINDOW, &used)) && used == 0, "absent: NaN, 0 used");
    int s = h5log_series_add(&log, "/train/loss", H5LOG_F64, 0, NULL, "loss", "");
    for (int i = 0; i < 250; i++) {
        double v = i; /* rows 50..249 in the window: mean 149.5 */
        h5log_append(&log, s, &v);
    }
    double m = h5log_tail_mean(&log, "/train/loss", RUN_LOSS_WINDOW, &used);
    CHECK(m == 149.5 && used == 200, "the last 200 of 250 rows: %g over %zu", m, used);
    m = h5log_tail_mean(&log, "/train/loss", 1000, &used);
    CHECK(m == 124.5 && used == 250, "a window past the rows takes them all: %g over %zu", m, used);
    /* the final train loss of 250 rows: their last tenth, 25 (rows 225..249, mean 237) */
    m = h5log_final_train_loss(&log, &used);
    CHECK(m == 237 && used == 25, "the final train loss of 250 rows: %g over %zu", m, used);
    h5log_free(&log);
    /* 11 rows: a tenth rounded up, 2 (rows 9 and 10) */
    h5log_init(&log);
    s = h5log_series_add(&log, "/train/loss", H5LOG_F64, 0, NULL, "loss", "");
    for (int i = 0; i < 11; i++) {
        double v = i;
        h5log_append(&log, s, &v);
    }
    m = h5log_final_train_loss(&log, &used);
    CHECK(m == 9.5 && used == 2, "the final train loss of 11 rows: %g over %zu", m, used);
    h5log_free(&log);
    /* the window: a tenth of the rows, rounded up, from 1 to RUN_LOSS_WINDOW (the paper's 200
       steps of 10000) */
    static const size_t rows[] = {0, 1, 10, 11, 200, 1991, 1999, 2000, 2001, 100000};
    static const size_t want[] = {1, 1, 1, 2, 20, 200, 200, 200, 200, 200};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        CHECK(run_loss_window(rows[i]) == want[i], "run_loss_window(%zu) = %zu, want %zu", rows[i],
              run_loss_window(rows[i]), want[i]);
}

static void test_save_twice_and_atomic(void) {
    h5log a, b;
    const char *p = tmp_path("twice.h5");
    char err[512] = "";
    build_log(&a, 5);
    CHECK(h5log_save(&a, p) == 0, "first save");
    long size1 = file_size(p);
    h5log_free(&a);
    build_log(&a, 300);
    CHECK(h5log_save(&a, p) == 0, "second save (overwrite)");
    CHECK(!exists(tmp_path("twice.h5.tmp")), "no .tmp left");
    CHECK(file_size(p) > size1, "file grew (%ld -> %ld)", size1, file_size(p));
    h5log_init(&b);
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "load: %s", err);
    check_logs_equal(&a, &b, 0);
    h5log_free(&b);

    /* a save that fails (here: the temporary file cannot be created) leaves the previous
     * complete file in place */
    const char *tmpp = tmp_path("twice.h5.tmp");
    CHECK(mkdir(tmpp, 0755) == 0, "mkdir %s", tmpp);
    fprintf(stderr, "(an error message about twice.h5 is expected here)\n");
    CHECK(h5log_save(&a, p) == -1, "save fails");
    rmdir(tmpp);
    h5log_init(&b);
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "previous file still loads: %s", err);
    int lo = h5log_find(&b, "/train/loss");
    CHECK(lo >= 0 && b.series[lo].rows == 300, "previous file intact");
    h5log_free(&b);
    /* a directory that does not exist */
    CHECK(h5log_save(&a, tmp_path("no/such/dir/run.h5")) == -1, "save into a missing directory fails");
    h5log_free(&a);
}

static void test_log_load_bad(void) {
    h5log b;
    h5log_init(&b);
    char err[512] = "";
    const char *txt = tmp_path("notes.txt");
    write_text(txt, "this is not an HDF5 file\n");
    CHECK(h5log_load(&b, txt, err, sizeof err) == -1, "text file refused");
    CHECK(strstr(err, txt) != NULL, "error names the file: %s", err);
    const char *missing = tmp_path("missing.h5");
    CHECK(h5log_load(&b, missing, err, sizeof err) == -1 && strstr(err, missing), "missing file: %s", err);
    h5log a;
    build_log(&a, 50);
    const char *p = tmp_path("whole.h5"), *half = tmp_path("half.h5");
    CHECK(h5log_save(&a, p) == 0, "save");
    copy_prefix(p, half, 0.5);
    CHECK(h5log_load(&b, half, err, sizeof err) == -1, "truncated run file refused");
    CHECK(strstr(err, half) != NULL, "error names the file: %s", err);
    CHECK(b.n_series == 0 && b.n_attrs == 0, "log left empty after a failed load");
    h5log_free(&a);
    h5log_free(&b);
}

/* The root attribute format_version: a newer build's run file (a higher version) is
 * refused before anything is read, naming the file, its version and the build's; so is
 * a value that is no version. A file of the build's version, or without the attribute,
 * loads. Things the reader does not know (a group, a dataset of a type it holds, an array
 * or compound attribute, a newer root attribute) are read or skipped, never refused: a
 * later build adds them without a new version. h5log_load never looked at the attribute,
 * so an older build read a newer build's run file as its own. */
static void test_log_load_format_version(void) {
    char err[512] = "";
    const char *p = tmp_path("version.h5");
    const double vals[] = {NAN, 1, 2, 1.5, 0, 1e300};
    const int ok[] = {1, 1, 0, 0, 0, 0};
    for (int k = 0; k < 6; k++) {
        h5log a, b;
        build_log(&a, 5);
        if (!isnan(vals[k])) h5log_attr_num(&a, "/", "format_version", vals[k]);
        h5log_attr_str(&a, "/", "git_commit", "f00d123");
        CHECK(h5log_save(&a, p) == 0, "save");
        h5log_free(&a);
        h5log_init(&b);
        err[0] = '\0';
        const int rc = h5log_load(&b, p, err, sizeof err);
        CHECK(rc == (ok[k] ? 0 : -2), "format_version %g: rc %d (%s)", vals[k], rc, err);
        if (!ok[k]) CHECK(strstr(err, p) && strstr(err, "up to version 1") && b.n_series == 0, "%g: %s", vals[k], err);
        if (vals[k] == 2)
            CHECK(strstr(err, "run file format version 2 (written by s2hc f00d123)"), "names the writer: %s", err);
        h5log_free(&b);
    }
    /* a string in its place */
    h5log a, b;
    build_log(&a, 5);
    h5log_attr_str(&a, "/", "format_version", "2");
    CHECK(h5log_save(&a, p) == 0, "save");
    h5log_free(&a);
    h5log_init(&b);
    CHECK(h5log_load(&b, p, err, sizeof err) == -2 && strstr(err, "not a version number"), "a string: %s", err);
    h5log_free(&b);
    /* additions of a later build, at version 1 */
    build_log(&a, 5);
    h5log_attr_num(&a, "/", "format_version", 1);
    CHECK(h5log_save(&a, p) == 0, "save");
    h5log_free(&a);
    hid_t f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
    hsize_t three = 3;
    hid_t sp = H5Screate_simple(1, &three, NULL), s1 = H5Screate(H5S_SCALAR);
    const double arr[3] = {1, 2, 3};
    hid_t at = H5Acreate2(f, "newer_array", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(at >= 0 && H5Awrite(at, H5T_NATIVE_DOUBLE, arr) >= 0, "array attribute");
    H5Aclose(at);
    hid_t ct = H5Tcreate(H5T_COMPOUND, 16);
    H5Tinsert(ct, "a", 0, H5T_NATIVE_DOUBLE);
    H5Tinsert(ct, "b", 8, H5T_NATIVE_DOUBLE);
    at = H5Acreate2(f, "newer_compound", ct, s1, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(at >= 0 && H5Awrite(at, ct, arr) >= 0, "compound attribute");
    H5Aclose(at);
    H5Tclose(ct);
    hid_t g = H5Gcreate2(f, "/newer", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(g, "x", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, arr) >= 0, "a newer dataset");
    H5Dclose(d);
    H5Gclose(g);
    H5Sclose(sp);
    H5Sclose(s1);
    H5Fclose(f);
    h5log_init(&b);
    CHECK(h5log_load(&b, p, err, sizeof err) == 0, "a newer build's additions: %s", err);
    CHECK(h5log_find(&b, "/newer/x") >= 0 && h5log_find(&b, "/train/loss") >= 0, "read whole");
    h5log_free(&b);
}

/* A dataset whose extent is 2^61 + 1 float64 elements, none of them stored (chunked,
 * never written): its size in bytes wraps to 8. h5log_load refuses it; it read it into an
 * 8-byte buffer, and the next save wrote from that buffer (heap corruption). */
/* A small run log saved as `name` in the test's folder, then opened for writing (to
 * damage it); its path in *path. */
static hid_t saved_log_open(const char *name, const char **path) {
    h5log a;
    build_log(&a, 3);
    *path = tmp_path(name);
    CHECK(h5log_save(&a, *path) == 0, "save %s", name);
    h5log_free(&a);
    return H5Fopen(*path, H5F_ACC_RDWR, H5P_DEFAULT);
}

/* A 1-D chunked dataset of n elements at path, none of them written (fill_never: not even
 * fill values on read) */
static void add_unwritten(hid_t f, const char *path, hid_t type, hsize_t n, hsize_t chunk, int fill_never) {
    hsize_t dims[1] = {n}, maxd[1] = {H5S_UNLIMITED}, ch[1] = {chunk};
    hid_t sp = H5Screate_simple(1, dims, maxd), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 1, ch);
    if (fill_never) H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    hid_t d = H5Dcreate2(f, path, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    CHECK(d >= 0, "create %s", path);
    if (d >= 0) H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
}

static void test_log_load_huge_shape(void) {
    h5log b;
    const char *p;
    hid_t f = saved_log_open("huge.h5", &p);
    add_unwritten(f, "/final/huge", H5T_IEEE_F64LE, ((hsize_t)1 << 61) + 1, 1, 1);
    H5Fclose(f);
    h5log_init(&b);
    char err[512] = "";
    CHECK(h5log_load(&b, p, err, sizeof err) == -1, "a dataset of 2^61 + 1 elements is refused");
    CHECK(strstr(err, p) && strstr(err, "/final/huge") && strstr(err, "too large"), "error: %s", err);
    CHECK(b.n_series == 0, "log left empty");
    h5log_free(&b);
}

/* A dataset whose extent was damaged or grown without its data (chunks never written read
 * as fill values): 64 MiB declared in a file of a few kilobytes. h5log_load refuses it,
 * naming the file, instead of allocating and filling what the file does not hold. */
static void test_log_load_unwritten_extent(void) {
    h5log b;
    const char *p;
    hid_t f = saved_log_open("sparse.h5", &p);
    add_unwritten(f, "/final/sparse", H5T_IEEE_F32LE, (hsize_t)1 << 24, 1024, 0);
    H5Fclose(f);
    h5log_init(&b);
    char err[512] = "";
    CHECK(h5log_load(&b, p, err, sizeof err) == -1, "a dataset of 2^24 floats never written is refused");
    CHECK(strstr(err, p) && strstr(err, "/final/sparse") && strstr(err, "declares 67108864 bytes") &&
          strstr(err, "stores 0 bytes"), "error: %s", err);
    CHECK(b.n_series == 0, "log left empty");
    h5log_free(&b);
}

/* Numbers of odd widths and a series without rows, as a corrupt file declares them:
 * h5log_load refuses the dataset (libhdf5's conversion of a 1 032-byte float read past its
 * own buffer) and skips the attribute, instead of handing them to libhdf5 to convert. */
static void test_log_load_odd_types(void) {
    const char *cases[] = {"wide float", "wide integer", "scalar series"};
    const char *want[] = {"16-byte float", "16-byte integer", "is a scalar, not rows"};
    for (int c = 0; c < 3; c++) {
        h5log b;
        const char *p;
        hid_t f = saved_log_open("odd.h5", &p);
        hid_t t = H5Tcopy(c == 1 ? H5T_STD_I64LE : H5T_IEEE_F64LE);
        if (c < 2) CHECK(H5Tset_size(t, 16) >= 0, "a 16-byte type");
        hsize_t dims[1] = {3};
        hid_t sp = c == 2 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(f, "/final/odd", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d >= 0, "%s: create the dataset", cases[c]);
        if (c == 2) {
            hid_t asp = H5Screate(H5S_SCALAR);
            hid_t at = H5Acreate2(d, "row_axis", H5T_STD_I64LE, asp, H5P_DEFAULT, H5P_DEFAULT);
            long long zero = 0;
            H5Awrite(at, H5T_NATIVE_LLONG, &zero);
            H5Aclose(at);
            H5Sclose(asp);
        }
        /* the same type as a scalar attribute of the root: skipped, the rest loads */
        hid_t root = H5Gopen2(f, "/", H5P_DEFAULT), asp = H5Screate(H5S_SCALAR);
        hid_t at = H5Acreate2(root, "odd_attr", t, asp, H5P_DEFAULT, H5P_DEFAULT);
        unsigned char zeros[16] = {0};
        if (at >= 0) { H5Awrite(at, t, zeros); H5Aclose(at); }
        H5Sclose(asp);
        H5Gclose(root);
        if (d >= 0) H5Dclose(d);
        H5Sclose(sp);
        H5Tclose(t);
        H5Fclose(f);
        h5log_init(&b);
        char err[512] = "";
        CHECK(h5log_load(&b, p, err, sizeof err) == -1, "%s: refused", cases[c]);
        CHECK(strstr(err, p) && strstr(err, "/final/odd") && strstr(err, want[c]), "%s: error: %s", cases[c], err);
        h5log_free(&b);
        /* without the dataset, the attribute alone is skipped and the file loads */
        f = H5Fopen(p, H5F_ACC_RDWR, H5P_DEFAULT);
        H5Ldelete(f, "/final/odd", H5P_DEFAULT);
        H5Fclose(f);
        h5log_init(&b);
        int rc = h5log_load(&b, p, err, sizeof err);
        CHECK(rc == 0, "%s: the file without the dataset loads: %s", cases[c], rc ? err : "");
        int found = 0;
        for (int i = 0; i < b.n_attrs; i++) found |= !strcmp(b.attrs[i].name, "odd_attr");
        CHECK(c == 2 || !found, "%s: the odd attribute is skipped", cases[c]);
        h5log_free(&b);
    }
}

/* Code that declares a dataset a loaded run file holds in another type exits naming the
 * file (it said only "h5log: series ... re-declared", as for a bug in the code). */
static void test_log_conflict_names_file(void) {
    h5log a;
    h5log_init(&a);
    int lo = h5log_series_add(&a, "/train/loss", H5LOG_I64, 0, NULL, "loss as integers", "");
    int64_t one = 1;
    h5log_append(&a, lo, &one);
    const char *p = tmp_path("int-loss.h5"), *errf = tmp_path("conflict.err");
    CHECK(h5log_save(&a, p) == 0, "save");
    h5log_free(&a);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen(errf, "w", stderr)) _exit(99);
        h5log b;
        h5log_init(&b);
        char err[512];
        if (h5log_load(&b, p, err, sizeof err) != 0) _exit(98);
        h5log_series_add(&b, "/train/loss", H5LOG_F32, 0, NULL, "training loss", "nats");
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 1, "exits 1 (wait status %d)", status);
    char text[2048] = "";
    FILE *f = fopen(errf, "r");
    if (f) { size_t n = fread(text, 1, sizeof text - 1, f); text[n] = 0; fclose(f); }
    CHECK(strstr(text, p) && strstr(text, "/train/loss"), "the message names the file and the dataset: %s", text);
}

/* h5dump must read the file and show the descriptions and the UTF-8 strings. */
static void test_h5dump(void) {
    if (system("command -v h5dump >/dev/null 2>&1") != 0) {
        fprintf(stderr, "  (h5dump not found: test_h5dump skipped)\n");
        return;
    }
    h5log a;
    build_log(&a, 20);
    const char *p = tmp_path("dump.h5"), *out = tmp_path("dump.txt");
    CHECK(h5log_save(&a, p) == 0, "save");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "h5dump -H '%s' > '%s' 2>&1", p, out);
    CHECK(system(cmd) == 0, "h5dump -H exits 0");
    snprintf(cmd, sizeof cmd, "h5dump -A '%s' > '%s' 2>&1", p, out);
    CHECK(system(cmd) == 0, "h5dump -A exits 0");
    FILE *f = fopen(out, "rb");
    static char text[1 << 20];
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f) fclose(f);
    CHECK(strstr(text, "training loss, mean over the batch") != NULL, "description readable in h5dump -A");
    CHECK(strstr(text, "\"/train/step\"") != NULL, "row_axis names the step series");
    CHECK(strstr(text, "H5S_UNLIMITED") != NULL, "series are extendable");
    h5log_free(&a);
}

/* ------------------------------------------------------------------ checkpoint */

enum { NT = 4 };
static const char *const TNAMES[NT] = {"transformer.wte.weight", "transformer.h.0.attn.c_attn.weight",
                                       "transformer.h.0.ln_1.bias", "transformer.h.0.hc.alpha"};
static const int TRANK[NT] = {2, 2, 1, 0};
static const size_t TSHAPE[NT][2] = {{256, 32}, {96, 32}, {32, 0}, {0, 0}};

typedef struct { ckpt_tensor p[NT], m[NT], v[NT]; } model_t;

static void model_make(model_t *md, uint32_t seed) {
    for (int i = 0; i < NT; i++) {
        ckpt_tensor *ts[3] = {&md->p[i], &md->m[i], &md->v[i]};
        size_t numel = 1;
        for (int d = 0; d < TRANK[i]; d++) numel *= TSHAPE[i][d];
        for (int k = 0; k < 3; k++) {
            ckpt_tensor *t = ts[k];
            memset(t, 0, sizeof *t);
            t->name = TNAMES[i];
            t->rank = TRANK[i];
            for (int d = 0; d < TRANK[i]; d++) t->shape[d] = TSHAPE[i][d];
            t->data = malloc(numel * sizeof(float));
            for (size_t e = 0; e < numel; e++) {
                seed = seed * 1664525u + 1013904223u;   /* arbitrary bit patterns, NaN included */
                uint32_t bits = seed ^ ((uint32_t)k << 30);
                memcpy(&t->data[e], &bits, 4);
            }
        }
    }
    float special[4] = {-0.0f, 1.0f / 0.0f, 1e-45f, -3.4028235e38f};
    memcpy(md->p[0].data, special, sizeof special);
}

static void model_free(model_t *md) {
    for (int i = 0; i < NT; i++) { free(md->p[i].data); free(md->m[i].data); free(md->v[i].data); }
}

static size_t numel_of(const ckpt_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

static ckpt_meta meta_make(void) {
    ckpt_meta m;
    memset(&m, 0, sizeof m);
    m.step = 123456789012LL;
    m.rng = 0xFFFFFFFFFFFFFFFFULL;
    m.loader_rng = 0x8000000000000001ULL;
    m.config_yaml = CONFIG_YAML;
    snprintf(m.method, sizeof m.method, "s2hc");
    m.n_streams = 4;
    return m;
}

static void test_ckpt_roundtrip(void) {
    model_t a, b;
    model_make(&a, 1);
    model_make(&b, 2);
    ckpt_meta meta = meta_make(), got;
    memset(&got, 0, sizeof got);
    const char *p = tmp_path("ckpt.h5");
    CHECK(ckpt_save(p, a.p, a.m, a.v, NT, &meta) == 0, "save");
    CHECK(!exists(tmp_path("ckpt.h5.tmp")), "no .tmp left");
    char err[512] = "";
    CHECK(ckpt_load(p, b.p, b.m, b.v, NT, &got, err, sizeof err) == 0, "load: %s", err);
    for (int i = 0; i < NT; i++) {
        size_t bytes = numel_of(&a.p[i]) * sizeof(float);
        CHECK(memcmp(a.p[i].data, b.p[i].data, bytes) == 0, "params %s bit-equal", TNAMES[i]);
        CHECK(memcmp(a.m[i].data, b.m[i].data, bytes) == 0, "m %s bit-equal", TNAMES[i]);
        CHECK(memcmp(a.v[i].data, b.v[i].data, bytes) == 0, "v %s bit-equal", TNAMES[i]);
    }
    CHECK(got.step == meta.step, "step %lld", (long long)got.step);
    CHECK(got.rng == meta.rng, "rng %llx", (unsigned long long)got.rng);
    CHECK(got.loader_rng == meta.loader_rng, "loader_rng %llx", (unsigned long long)got.loader_rng);
    CHECK(got.config_yaml && !strcmp(got.config_yaml, CONFIG_YAML), "config text");
    CHECK(!strcmp(got.method, "s2hc") && got.n_streams == 4, "method %s n %d", got.method, got.n_streams);
    free((char *)got.config_yaml);

    /* weights alone, no meta wanted */
    model_t c;
    model_make(&c, 3);
    CHECK(ckpt_load(p, c.p, NULL, NULL, NT, NULL, err, sizeof err) == 0, "weights-only load: %s", err);
    CHECK(memcmp(a.p[1].data, c.p[1].data, numel_of(&a.p[1]) * 4) == 0, "weights-only data");
    /* save twice: overwrite in place */
    meta.step = 7;
    CHECK(ckpt_save(p, c.p, c.m, c.v, NT, &meta) == 0, "second save");
    CHECK(ckpt_load(p, b.p, b.m, b.v, NT, &got, err, sizeof err) == 0, "reload: %s", err);
    CHECK(got.step == 7 && memcmp(c.m[0].data, b.m[0].data, numel_of(&c.m[0]) * 4) == 0, "second save read back");
    free((char *)got.config_yaml);

    /* a checkpoint without optimizer state: weights load, moments are refused */
    const char *w = tmp_path("weights.h5");
    CHECK(ckpt_save(w, a.p, NULL, NULL, NT, &meta) == 0, "weights-only save");
    CHECK(ckpt_load(w, b.p, NULL, NULL, NT, NULL, err, sizeof err) == 0, "weights-only file loads: %s", err);
    CHECK(ckpt_load(w, b.p, b.m, b.v, NT, &got, err, sizeof err) == -1, "moments from a weights-only file refused");
    CHECK(strstr(err, w) && strstr(err, "optim"), "error: %s", err);
    CHECK(got.config_yaml == NULL, "no config handed out on failure");
    model_free(&a);
    model_free(&b);
    model_free(&c);
}

static void test_ckpt_refuses_bad_files(void) {
    model_t a;
    model_make(&a, 5);
    ckpt_meta meta = meta_make(), got;
    char err[512] = "";
    const char *p = tmp_path("good.h5");
    CHECK(ckpt_save(p, a.p, a.m, a.v, NT, &meta) == 0, "save");

    const char *half = tmp_path("half.h5");
    copy_prefix(p, half, 0.5);
    CHECK(ckpt_load(half, a.p, a.m, a.v, NT, &got, err, sizeof err) == -1, "truncated refused");
    CHECK(strstr(err, half) != NULL, "names the file: %s", err);
    CHECK(strstr(err, "not a valid s2hc checkpoint") != NULL, "says why: %s", err);

    const char *tiny = tmp_path("tiny.h5");   /* only the superblock's first bytes */
    copy_prefix(p, tiny, 0.01);
    CHECK(ckpt_load(tiny, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1 && strstr(err, tiny), "1%%: %s", err);

    const char *empty = tmp_path("empty.h5");
    write_text(empty, "");
    CHECK(ckpt_load(empty, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1 && strstr(err, empty), "empty: %s", err);

    const char *txt = tmp_path("yaml.h5");
    write_text(txt, CONFIG_YAML);
    CHECK(ckpt_load(txt, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1, "not HDF5 refused");
    CHECK(strstr(err, txt) && strstr(err, "not an HDF5 file"), "error: %s", err);

    const char *none = tmp_path("does-not-exist.h5");
    CHECK(ckpt_load(none, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1 && strstr(err, none), "missing: %s", err);

    /* a negative step (resume started at step -5 and marked the run diverged) */
    ckpt_meta neg = meta_make();
    neg.step = -5;
    const char *ns = tmp_path("negative-step.h5");
    CHECK(ckpt_save(ns, a.p, a.m, a.v, NT, &neg) == 0, "save with step -5");
    CHECK(ckpt_load(ns, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1, "a negative step is refused");
    CHECK(strstr(err, ns) && strstr(err, "'step'"), "names file and attribute: %s", err);

    /* a version that is not a scalar integer (1.0 written by another tool): refused as
     * unreadable, not as "version 0" */
    const char *fv = tmp_path("float-version.h5");
    CHECK(ckpt_save(fv, a.p, a.m, a.v, NT, &meta) == 0, "save");
    hid_t f = H5Fopen(fv, H5F_ACC_RDWR, H5P_DEFAULT), sp = H5Screate(H5S_SCALAR);
    const double one = 1.0;
    H5Adelete(f, "version");
    hid_t at = H5Acreate2(f, "version", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(at >= 0 && H5Awrite(at, H5T_NATIVE_DOUBLE, &one) >= 0, "write version = 1.0");
    if (at >= 0) H5Aclose(at);
    H5Sclose(sp);
    H5Fclose(f);
    CHECK(ckpt_load(fv, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1, "a float version is refused");
    CHECK(strstr(err, fv) && strstr(err, "lacks a readable root attribute 'version'"), "says so: %s", err);

    /* links to elsewhere (an edited file): a tensor, then the whole /model group, soft-linked
       to the first moments; each would load other weights under the tensors' names */
    const char *soft = tmp_path("soft.h5");
    for (int k = 0; k < 2; k++) {
        CHECK(ckpt_save(soft, a.p, a.m, a.v, NT, &meta) == 0, "save");
        char from[200], to[200];
        snprintf(from, sizeof from, k ? "/model" : "/model/%s", TNAMES[0]);
        snprintf(to, sizeof to, k ? "/optim/m" : "/optim/m/%s", TNAMES[0]);
        hid_t f = H5Fopen(soft, H5F_ACC_RDWR, H5P_DEFAULT);
        CHECK(H5Ldelete(f, from, H5P_DEFAULT) >= 0 && H5Lcreate_soft(to, f, from, H5P_DEFAULT, H5P_DEFAULT) >= 0,
              "link %s to %s", from, to);
        H5Fclose(f);
        CHECK(ckpt_load(soft, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1, "a soft link refused (%s)", from);
        CHECK(strstr(err, soft) && strstr(err, from) && strstr(err, "is a link to another place"), "says so: %s", err);
    }

    /* ckpt_saved_step: the step of a good checkpoint, -1 for a negative one */
    CHECK(ckpt_saved_step(p) == meta.step && ckpt_saved_step(ns) == -1, "saved step: %lld, negative %lld",
          (long long)ckpt_saved_step(p), (long long)ckpt_saved_step(ns));

    /* a later format version, and a step that is an array of two: refused, named */
    const char *later = tmp_path("version2.h5");
    for (int k = 0; k < 2; k++) {
        CHECK(ckpt_save(later, a.p, a.m, a.v, NT, &meta) == 0, "save");
        hid_t g = H5Fopen(later, H5F_ACC_RDWR, H5P_DEFAULT);
        const long long two[2] = {2, 3};
        hsize_t dim = 2;
        hid_t asp = k ? H5Screate_simple(1, &dim, NULL) : H5Screate(H5S_SCALAR);
        H5Adelete(g, k ? "step" : "version");
        hid_t aa = H5Acreate2(g, k ? "step" : "version", H5T_STD_I64LE, asp, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(aa >= 0 && H5Awrite(aa, H5T_NATIVE_LLONG, two) >= 0, "write the attribute");
        if (aa >= 0) H5Aclose(aa);
        H5Sclose(asp);
        H5Fclose(g);
        CHECK(ckpt_load(later, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1 &&
                  strstr(err, k ? "lacks a readable root attribute 'step'" : "format version 2, this build reads version 1"),
              "%s: %s", k ? "an array step" : "version 2", err);
    }

    /* a tensor stored as a float of another width (16 bytes) is refused, named */
    const char *wide = tmp_path("wide-tensor.h5");
    CHECK(ckpt_save(wide, a.p, a.m, a.v, NT, &meta) == 0, "save");
    {
        hid_t g = H5Fopen(wide, H5F_ACC_RDWR, H5P_DEFAULT);
        char path[200];
        snprintf(path, sizeof path, "/model/%s", TNAMES[2]);
        H5Ldelete(g, path, H5P_DEFAULT);
        hid_t t = H5Tcopy(H5T_IEEE_F64LE);
        H5Tset_size(t, 16);
        hsize_t dims[1] = {TSHAPE[2][0]};
        hid_t dsp = H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(g, path, t, dsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d >= 0, "a 16-byte float dataset");
        if (d >= 0) H5Dclose(d);
        H5Sclose(dsp);
        H5Tclose(t);
        H5Fclose(g);
        CHECK(ckpt_load(wide, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1 && strstr(err, TNAMES[2]) &&
                  strstr(err, "not a 4- or 8-byte float"),
              "a 16-byte float tensor: %s", err);
    }

    /* a stale ckpt.h5.tmp, here a link to another file: replaced, the other file kept */
    const char *keep = tmp_path("keep.txt");
    char stale[1100];
    snprintf(stale, sizeof stale, "%s.tmp", p);
    write_text(keep, "keep");
    unlink(stale);
    CHECK(symlink(keep, stale) == 0, "symlink");
    CHECK(ckpt_save(p, a.p, a.m, a.v, NT, &meta) == 0 && !exists(stale), "saved past a link at .tmp");
    FILE *kf = fopen(keep, "rb");
    char kb[8] = "";
    CHECK(kf && fread(kb, 1, sizeof kb, kf) == 4 && !memcmp(kb, "keep", 4), "the link's target kept");
    if (kf) fclose(kf);

    /* a foreign HDF5 file (a run log) is not a checkpoint */
    h5log log;
    build_log(&log, 3);
    const char *run = tmp_path("foreign.h5");
    CHECK(h5log_save(&log, run) == 0, "save run log");
    h5log_free(&log);
    CHECK(ckpt_load(run, a.p, NULL, NULL, NT, NULL, err, sizeof err) == -1, "run file refused as checkpoint");
    CHECK(strstr(err, run) && strstr(err, "format"), "error: %s", err);
    model_free(&a);
}

static void test_ckpt_refuses_mismatch(void) {
    model_t a;
    model_make(&a, 9);
    ckpt_meta meta = meta_make();
    char err[512] = "";

    /* a tensor missing from the file */
    const char *p = tmp_path("missing-tensor.h5");
    CHECK(ckpt_save(p, a.p, a.m, a.v, NT - 1, &meta) == 0, "save without the last tensor");
    CHECK(ckpt_load(p, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1, "missing tensor refused");
    CHECK(strstr(err, p) && strstr(err, TNAMES[NT - 1]), "names file and tensor: %s", err);

    /* an extra tensor in the file */
    CHECK(ckpt_save(p, a.p, a.m, a.v, NT, &meta) == 0, "save all");
    CHECK(ckpt_load(p, a.p, a.m, a.v, NT - 1, NULL, err, sizeof err) == -1, "extra tensor refused");
    CHECK(strstr(err, TNAMES[NT - 1]), "names the stranger: %s", err);

    /* an extra tensor in /model alone (weights only), and in /optim/v alone */
    CHECK(ckpt_load(p, a.p, NULL, NULL, NT - 1, NULL, err, sizeof err) == -1 && strstr(err, TNAMES[NT - 1]) &&
              strstr(err, "/model"),
          "extra tensor in /model: %s", err);
    {
        const char *e = tmp_path("extra-moment.h5");
        CHECK(ckpt_save(e, a.p, a.m, a.v, NT, &meta) == 0, "save");
        hid_t g = H5Fopen(e, H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t dsp = H5Screate(H5S_SCALAR);
        hid_t d = H5Dcreate2(g, "/optim/v/stray", H5T_IEEE_F32LE, dsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(d >= 0, "a stray dataset in /optim/v");
        if (d >= 0) H5Dclose(d);
        H5Sclose(dsp);
        H5Fclose(g);
        CHECK(ckpt_load(e, a.p, a.m, a.v, NT, NULL, err, sizeof err) == -1 && strstr(err, "'stray' in /optim/v"),
              "extra tensor in /optim/v: %s", err);
        /* tensors with no data pointer are checked, not read */
        ckpt_tensor shapes[NT];
        for (int i = 0; i < NT; i++) shapes[i] = a.p[i], shapes[i].data = NULL;
        CHECK(ckpt_load(p, shapes, NULL, NULL, NT, NULL, err, sizeof err) == 0, "shapes checked alone: %s", err);
    }

    /* a wrong shape: the file has [96, 32], the model expects [32, 96] */
    const char *q = tmp_path("wrong-shape.h5");
    CHECK(ckpt_save(q, a.p, a.m, a.v, NT, &meta) == 0, "save");
    model_t b;
    model_make(&b, 10);
    b.p[1].shape[0] = 32;
    b.p[1].shape[1] = 96;
    CHECK(ckpt_load(q, b.p, NULL, NULL, NT, NULL, err, sizeof err) == -1, "wrong shape refused");
    CHECK(strstr(err, q) && strstr(err, TNAMES[1]) && strstr(err, "[96, 32]") && strstr(err, "[32, 96]"),
          "names tensor and both shapes: %s", err);
    b.p[1].shape[0] = 96;
    b.p[1].shape[1] = 32;
    b.p[2].rank = 2;   /* rank differs too */
    b.p[2].shape[1] = 1;
    CHECK(ckpt_load(q, b.p, NULL, NULL, NT, NULL, err, sizeof err) == -1 && strstr(err, TNAMES[2]), "rank: %s", err);
    b.p[2].rank = 1;

    /* names that cannot be HDF5 link names are refused on save */
    ckpt_tensor bad = a.p[0];
    bad.name = "transformer/wte";
    fprintf(stderr, "(an error message about 'transformer/wte' is expected here)\n");
    CHECK(ckpt_save(tmp_path("bad-name.h5"), &bad, NULL, NULL, 1, &meta) == -1, "slash in a name refused");
    CHECK(!exists(tmp_path("bad-name.h5")) && !exists(tmp_path("bad-name.h5.tmp")), "nothing written");
    fprintf(stderr, "(three more, about a long name, rank 5 and a moment without data, are expected)\n");
    /* a name of 1024 bytes and a rank of 5 are refused; a name of 1023 saves and loads; a
       tensor of no values needs no data; a second moment without data is refused */
    char longname[1025];
    memset(longname, 'w', 1024);
    longname[1024] = '\0';
    bad = a.p[2];
    bad.name = longname;
    CHECK(ckpt_save(tmp_path("long-name.h5"), &bad, NULL, NULL, 1, &meta) == -1, "a name of 1024 bytes refused");
    longname[1023] = '\0';
    CHECK(ckpt_save(tmp_path("long-name.h5"), &bad, NULL, NULL, 1, &meta) == 0 &&
              ckpt_load(tmp_path("long-name.h5"), &bad, NULL, NULL, 1, NULL, err, sizeof err) == 0,
          "a name of 1023 bytes: %s", err);
    bad = a.p[2];
    bad.rank = 5;
    for (int d = 0; d < 4; d++) bad.shape[d] = 1;
    CHECK(ckpt_save(tmp_path("rank5.h5"), &bad, NULL, NULL, 1, &meta) == -1, "rank 5 refused");
    bad = a.p[2];
    bad.shape[0] = 0;
    bad.data = NULL;
    CHECK(ckpt_save(tmp_path("empty-tensor.h5"), &bad, NULL, NULL, 1, &meta) == 0, "no values, no data: saved");
    ckpt_tensor mv[NT];
    memcpy(mv, a.v, sizeof mv);
    mv[1].data = NULL;
    CHECK(ckpt_save(tmp_path("no-v.h5"), a.p, a.m, mv, NT, &meta) == -1 && !exists(tmp_path("no-v.h5")),
          "a second moment without data refused");
    model_free(&a);
    model_free(&b);
}

int main(void) {
    T_NAME("test_h5");
    setup_tmpdir();
    T_RUN(test_log_roundtrip);
    T_RUN(test_log_static_replace);
    T_RUN(test_static_chunked);
    T_RUN(test_truncate_group);
    T_RUN(test_tail_mean);
    T_RUN(test_save_twice_and_atomic);
    T_RUN(test_log_load_bad);
    T_RUN(test_log_load_format_version);
    T_RUN(test_log_load_huge_shape);
    T_RUN(test_log_load_unwritten_extent);
    T_RUN(test_log_load_odd_types);
    T_RUN(test_log_conflict_names_file);
    T_RUN(test_h5dump);
    T_RUN(test_ckpt_roundtrip);
    T_RUN(test_ckpt_refuses_bad_files);
    T_RUN(test_ckpt_refuses_mismatch);
    if (own_tmpdir_) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir_);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir_);
    }
    return T_END();
}
