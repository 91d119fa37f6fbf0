/* test_train.c: training end to end on a corpus the test makes itself.
 *  - the loss falls clearly within a couple of hundred steps;
 *  - the same config and seed twice: identical losses, bit for bit;
 *  - stopping half-way and resuming gives final weights identical to an uninterrupted run;
 *  - the frame applies H_res as X_next = H_res . X (checked against an independent
 *    recomputation from the stored activations, with H_res far from the identity);
 *  - checkpoint round trip through the model's tensor table; a truncated one is refused;
 *  - the optimizer step, one region over all tensors, equals AdamW tensor by tensor, bit
 *    for bit, with one thread and with two.
 */
#include <hdf5.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "../harness/checkpoint.h"
#include "../harness/model.h"
#include "../harness/optim.h"
#include "../harness/presets.h"
#include "../probes/probes.h"
#include "../kernels/kernels.h"
#include <omp.h>
#include "../harness/run.h"
#include "../harness/util.h"
#include "t.h"

static char tmp[512];

/* A small deterministic corpus of English-like sentences: learnable structure. */
static void make_corpus(const char *dir) {
    static const char *subj[] = {"the cat", "a dog", "my friend", "the old man", "every child", "the river"};
    static const char *verb[] = {"sees", "likes", "follows", "finds", "remembers", "crosses"};
    static const char *obj[] = {"the house.", "a red ball.", "the long road.", "her garden.", "the bright moon."};
    size_t cap = 200000, len = 0;
    unsigned char *buf = malloc_check(cap);
    rng_t r;
    rng_seed(&r, 42);
    while (len + 64 < cap) {
        len += (size_t)snprintf((char *)buf + len, cap - len, "%s %s %s ", subj[rng_u64(&r) % 6],
                                verb[rng_u64(&r) % 6], obj[rng_u64(&r) % 5]);
    }
    char p[700];
    snprintf(p, sizeof p, "%s/synth/train.bin", dir);
    CHECK(shard_write(p, buf, len - 4000, 256, 1) == 0, "shard_write %s", p);
    snprintf(p, sizeof p, "%s/synth/val.bin", dir);
    CHECK(shard_write(p, buf + len - 4000, 4000, 256, 1) == 0, "shard_write %s", p);
    free(buf);
}

static void write_config(const char *path, const char *method, int n) {
    FILE *f = fopen_check(path, "w");
    fprintf(f,
            "model: {n_layer: 2, n_head: 2, n_embd: 32, block_size: 32, vocab: 256}\n"
            "residual: {method: %s, n_streams: %d}\n"
            "train: {batch: 8, steps: 40, lr: 0.003, min_lr: 0.0003, warmup: 5, eval_every: 0, eval_batches: 2,\n"
            "        ckpt_every: 0, seed: 5, threads: 2}\n"
            "data: {dir: %s/data, train: synth, ood: []}\n"
            "run: {out: %s/runs}\n"
            "probe: {every: 20, final_samples: 8}\n",
            method, n, tmp, tmp);
    fclose(f);
}

static int train_argv(const char *cfg, const char *name, const char *extra1, const char *extra2,
                      const char *extra3) {
    char set_name[128];
    snprintf(set_name, sizeof set_name, "run.name=%s", name);
    const char *argv[12] = {"train", cfg, "--quiet", "--set", set_name};
    int argc = 5;
    if (extra1) argv[argc++] = extra1;
    if (extra2) argv[argc++] = extra2;
    if (extra3) argv[argc++] = extra3;
    return train_main(argc, (char **)argv);
}

/* The identity n = 2 run NAME of TMP/resume.yaml, stopped after `stop` steps: cfg gets the
 * config's path, dir (unless NULL) the run directory's, 700 bytes each. */
static void stopped_run(const char *name, const char *stop, char *cfg, char *dir) {
    snprintf(cfg, 700, "%s/resume.yaml", tmp);
    if (dir) snprintf(dir, 700, "%s/runs/%s", tmp, name);
    write_config(cfg, "identity", 2);
    CHECK(train_argv(cfg, name, "--stop-after", stop, NULL) == RUN_INTERRUPTED, "stopped run %s", name);
}

/* A series of a run (e.g. "/train/loss") as a malloc'd array */
static double *read_series(const char *name, const char *series, size_t *n) {
    char p[700], err[256];
    snprintf(p, sizeof p, "%s/runs/%s/run.h5", tmp, name);
    h5log log;
    h5log_init(&log);
    if (h5log_load(&log, p, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        *n = 0;
        return NULL;
    }
    int s = h5log_find(&log, series);
    CHECK(s >= 0, "no %s in %s", series, p);
    if (s < 0) { h5log_free(&log); *n = 0; return NULL; }
    *n = log.series[s].rows;
    double *v = malloc_check(*n * sizeof(double));
    memcpy(v, log.series[s].data, *n * sizeof(double));
    h5log_free(&log);
    return v;
}

static double *read_losses(const char *name, size_t *n) { return read_series(name, "/train/loss", n); }

/* The big buffers' allocator: zeroed like calloc, 2 MB aligned from CALLOC_HUGE_MIN on
 * (the huge-page hint needs whole 2 MB pages), plain calloc below; writable to the end. */
static void test_calloc_huge(void) {
    const size_t sizes[] = {1000, CALLOC_HUGE_MIN / 4 - 1, CALLOC_HUGE_MIN / 4, CALLOC_HUGE_MIN / 4 * 3 + 5};
    for (int round = 0; round < 2; round++) /* the second round may get the first's memory back */
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            float *p = calloc_huge(sizes[k], sizeof(float));
            size_t nonzero = 0;
            for (size_t i = 0; i < sizes[k]; i++) nonzero += p[i] != 0;
            CHECK(nonzero == 0, "%zu floats: %zu not zero", sizes[k], nonzero);
            if (sizes[k] * sizeof(float) >= CALLOC_HUGE_MIN)
                CHECK((uintptr_t)p % ((size_t)2 << 20) == 0, "%zu floats at %p: not 2 MB aligned", sizes[k],
                      (void *)p);
            for (size_t i = 0; i < sizes[k]; i++) p[i] = -1.0f; /* dirty it for the next round */
            free(p);
        }
}

static void test_loss_falls(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/falls.yaml", tmp);
    write_config(cfg, "identity", 4);
    int rc = train_argv(cfg, "falls", "--set", "train.steps=150", NULL);
    CHECK(rc == 0, "train exit %d", rc);
    size_t n;
    double *l = read_losses("falls", &n);
    CHECK(n == 150, "%zu rows", n);
    if (n == 150) {
        double first = 0, last = 0;
        for (int i = 0; i < 10; i++) first += l[i] / 10, last += l[n - 1 - i] / 10;
        CHECK(first > 4.5, "initial loss %.3f should be near ln 256 = 5.55", first);
        CHECK(last < 2.2, "loss fell only from %.3f to %.3f", first, last);
    }
    free(l);
}

static void test_same_seed_same_losses(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/det.yaml", tmp);
    write_config(cfg, "identity", 3);
    CHECK(train_argv(cfg, "det_a", NULL, NULL, NULL) == 0, "run a");
    CHECK(train_argv(cfg, "det_b", NULL, NULL, NULL) == 0, "run b");
    size_t na, nb;
    double *a = read_losses("det_a", &na), *b = read_losses("det_b", &nb);
    CHECK(na == 40 && nb == 40, "%zu %zu rows", na, nb);
    if (na == nb && a && b) CHECK(memcmp(a, b, na * sizeof(double)) == 0, "losses differ between identical runs");
    free(a);
    free(b);
}

static int load_weights(const char *name, gpt_model *m) {
    char p[700], err[512];
    snprintf(p, sizeof p, "%s/runs/%s/ckpt.h5", tmp, name);
    int rc = run_load_weights(m, p, NULL, err, sizeof err);
    if (rc) CHECK(0, "%s", err);
    return rc;
}

static void test_resume_is_exact(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/resume.yaml", tmp);
    write_config(cfg, "identity", 2);
    CHECK(train_argv(cfg, "whole", NULL, NULL, NULL) == 0, "uninterrupted run");
    int rc = train_argv(cfg, "halves", "--stop-after", "17", NULL);
    CHECK(rc == RUN_INTERRUPTED, "--stop-after should exit %d, got %d", RUN_INTERRUPTED, rc);
    /* without --resume an existing run is refused */
    CHECK(train_argv(cfg, "halves", NULL, NULL, NULL) == RUN_USAGE, "an existing run must be refused");
    CHECK(train_argv(cfg, "halves", "--resume", NULL, NULL) == 0, "resume");
    s2hc_config c;
    CHECK(config_load(&c, cfg, NULL, 0) == 0, "config");
    gpt_model a, b;
    char err[256];
    model_build(&a, &c, err, sizeof err);
    model_build(&b, &c, err, sizeof err);
    if (load_weights("whole", &a) == 0 && load_weights("halves", &b) == 0)
        CHECK(memcmp(a.params, b.params, a.n_params * sizeof(real)) == 0,
              "resumed weights differ from the uninterrupted run");
    size_t na, nb;
    double *la = read_losses("whole", &na), *lb = read_losses("halves", &nb);
    CHECK(na == nb && na == 40, "rows %zu vs %zu", na, nb);
    if (na == nb && la && lb) CHECK(memcmp(la, lb, na * sizeof(double)) == 0, "loss curves differ after resume");
    free(la);
    free(lb);
    model_free(&a);
    model_free(&b);
}

/* stderr into path until stderr_back(the returned descriptor) */
static int stderr_to(const char *path) {
    fflush(stderr);
    const int saved = dup(2);
    CHECK(freopen(path, "w", stderr) != NULL, "stderr to %s", path);
    return saved;
}

static void stderr_back(int saved) {
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
}

/* The first n - 1 bytes of path's text into buf */
static const char *read_text(const char *path, char *buf, size_t n) {
    FILE *g = fopen_check(path, "r");
    buf[fread(buf, 1, n - 1, g)] = '\0';
    fclose(g);
    return buf;
}

static void test_truncated_checkpoint_refused(void) {
    char src[700], dst[700];
    snprintf(src, sizeof src, "%s/runs/whole/ckpt.h5", tmp);
    snprintf(dst, sizeof dst, "%s/runs/trunc/ckpt.h5", tmp);
    char d[700];
    snprintf(d, sizeof d, "%s/runs/trunc", tmp);
    mkdir_p(d);
    FILE *f = fopen(src, "rb");
    CHECK(f != NULL, "no checkpoint at %s", src);
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc_check((size_t)len);
    CHECK(fread(buf, 1, (size_t)len, f) == (size_t)len, "read");
    fclose(f);
    FILE *g = fopen_check(dst, "wb");
    fwrite(buf, 1, (size_t)len / 2, g);
    fclose(g);
    free(buf);
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/resume.yaml", tmp);
    s2hc_config c;
    config_load(&c, cfg, NULL, 0);
    gpt_model m;
    char err[256];
    model_build(&m, &c, err, sizeof err);
    int saved = stderr_to("/dev/null");
    int rc = train_argv(cfg, "trunc", "--resume", NULL, NULL);
    stderr_back(saved);
    CHECK(rc == RUN_FAILED, "resuming from a truncated checkpoint must fail (exit %d)", rc);
    model_free(&m);
}

/* A run file whose root attribute `processes` is damaged (1e300, no process count): the
 * resume takes it as absent (one process), as the grid does; it cast it to int (undefined
 * behaviour; INT_MIN here) and warned of a run of -2147483648 processes. */
static void test_resume_damaged_processes(void) {
    char cfg[700], run[700], log[700];
    stopped_run("procs", "17", cfg, NULL);
    snprintf(run, sizeof run, "%s/runs/procs/run.h5", tmp);
    snprintf(log, sizeof log, "%s/procs.err", tmp);
    hid_t f = H5Fopen(run, H5F_ACC_RDWR, H5P_DEFAULT);
    CHECK(f >= 0, "open %s", run);
    if (f < 0) return;
    const double huge = 1e300;
    hid_t sp = H5Screate(H5S_SCALAR);
    H5Adelete(f, "processes");
    hid_t a = H5Acreate2(f, "processes", H5T_IEEE_F64LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_DOUBLE, &huge) >= 0, "write processes = 1e300");
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    H5Fclose(f);
    int saved = stderr_to(log);
    int rc = train_argv(cfg, "procs", "--resume", NULL, NULL);
    stderr_back(saved);
    CHECK(rc == 0, "resume exits %d", rc);
    char text[4096];
    read_text(log, text, sizeof text);
    CHECK(!strstr(text, "processes") && !strstr(text, "-2147483648"), "stderr: %s", text);
}

/* A file's bytes, malloc'd (*len its length), NULL when it cannot be read */
static unsigned char *file_bytes(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc_check(n > 0 ? (size_t)n : 1);
    *len = fread(b, 1, n > 0 ? (size_t)n : 0, f);
    fclose(f);
    return b;
}

/* A stopped run whose run.h5 holds, where a later evaluation or the final probe logs, a
 * dataset of the other kind (a static /eval/val_loss, a series /final/sv: edited by
 * another tool) is refused by --resume before its first step, naming the file and the
 * dataset, and both files stay as they were. The refusal used to come at the final
 * evaluation (h5log's conflict), after the last step's checkpoint had rewritten them. So
 * is one whose /train/lr is gone: the resumed session started it afresh, its rows then
 * read as the first steps'. So is one whose /train/tokens_per_s was cut a row short, or
 * whose /train/loss holds a row more than /train/step (each row then another step's), and
 * one holding a static /eval/ood_loss/<corpus> or an /eval/val_loss of rows of two values. */
static void test_resume_layout_refused_first(void) {
    static const char *const what[] = {"/eval/val_loss", "/final/sv", "/train/lr", "/train/tokens_per_s",
                                       "/train/loss", "/eval/ood_loss/synth_ood", "/eval/val_loss"};
    for (int k = 0; k < 7; k++) {
        char name[32], cfg[700], dir[700], run[760], ckpt[760], log[760];
        snprintf(name, sizeof name, "layout%d", k);
        stopped_run(name, "17", cfg, dir);
        snprintf(run, sizeof run, "%s/run.h5", dir);
        snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
        snprintf(log, sizeof log, "%s/%s.err", tmp, name);
        hid_t f = H5Fopen(run, H5F_ACC_RDWR, H5P_DEFAULT);
        CHECK(f >= 0, "open %s", run);
        if (f < 0) return;
        if (k >= 2 && k <= 4) CHECK(H5Ldelete(f, what[k], H5P_DEFAULT) >= 0, "delete %s", what[k]);
        hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
        H5Pset_create_intermediate_group(lcpl, 1);
        const double v[18] = {1, 2, 3}; /* k 3, 4: a series of 16 rows, of 18 (/train/step: 17) */
        hsize_t rows[2] = {k == 3 ? 16 : k == 4 ? 18 : 3, 2}; /* k 6: rows of two values */
        hid_t sp = k == 0 || k == 5 ? H5Screate(H5S_SCALAR) : H5Screate_simple(k == 6 ? 2 : 1, rows, NULL);
        hid_t d = k == 2 ? -1 : H5Dcreate2(f, what[k], H5T_IEEE_F64LE, sp, lcpl, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(k == 2 || (d >= 0 && H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0), "write %s",
              what[k]);
        if (k == 1 || (k >= 3 && k != 5)) { /* a row_axis makes it a series */
            hid_t st = H5Tcopy(H5T_C_S1), ssp = H5Screate(H5S_SCALAR);
            H5Tset_size(st, H5T_VARIABLE);
            const char *axis = "rows";
            hid_t a = H5Acreate2(d, "row_axis", st, ssp, H5P_DEFAULT, H5P_DEFAULT);
            CHECK(a >= 0 && H5Awrite(a, st, &axis) >= 0, "row_axis");
            if (a >= 0) H5Aclose(a);
            H5Sclose(ssp);
            H5Tclose(st);
        }
        if (d >= 0) H5Dclose(d);
        H5Sclose(sp);
        H5Pclose(lcpl);
        H5Fclose(f);
        size_t rl0 = 0, cl0 = 0, rl1 = 0, cl1 = 0;
        unsigned char *r0 = file_bytes(run, &rl0), *c0 = file_bytes(ckpt, &cl0);
        int saved = stderr_to(log);
        const int rc = train_argv(cfg, name, "--resume", NULL, NULL);
        stderr_back(saved);
        char text[4096], want[900];
        read_text(log, text, sizeof text);
        if (k < 2 || k == 5)
            snprintf(want, sizeof want, "%s: %s is a %s", run, what[k], k != 1 ? "static dataset, not a series"
                                                                                 : "series, not a static dataset");
        else if (k == 6)
            snprintf(want, sizeof want, "%s: %s is a series of another type or row shape than this build logs", run,
                     what[k]);
        else snprintf(want, sizeof want, "%s: %s has %d rows where /train/step has 17, a row per step", run, what[k],
                      k == 2 ? 0 : k == 3 ? 16 : 18);
        CHECK(rc == RUN_FAILED && strstr(text, want), "resume with %s %s: exit %d, stderr: %s",
              k == 0 || k == 5 ? "a static" : k == 1 ? "a series" : k == 2 ? "no" : k == 3 ? "a short" : k == 4 ? "a long"
              : "a 2-D", what[k], rc,
              text);
        unsigned char *r1 = file_bytes(run, &rl1), *c1 = file_bytes(ckpt, &cl1);
        CHECK(r0 && r1 && rl0 == rl1 && !memcmp(r0, r1, rl0), "%s changed by the refused resume", run);
        CHECK(c0 && c1 && cl0 == cl1 && !memcmp(c0, c1, cl0), "%s changed by the refused resume", ckpt);
        free(r0);
        free(r1);
        free(c0);
        free(c1);
    }
}

/* run_open (eval, probe, sample, export) refuses a run file whose token_kind is neither
 * bytes nor ids, naming the file and the value: sample read such a run's model as text,
 * and export copied the value into its file. bytes and ids, the two train writes, open. */
static void test_run_open_token_kind(void) {
    char cfg[700], dir[700], run[760], log[760];
    stopped_run("kind", "5", cfg, dir);
    snprintf(run, sizeof run, "%s/run.h5", dir);
    snprintf(log, sizeof log, "%s/kind.err", tmp);
    static const char *const kinds[] = {"bytes", "words", "ids"};
    for (int k = 0; k < 3; k++) {
        hid_t f = H5Fopen(run, H5F_ACC_RDWR, H5P_DEFAULT);
        CHECK(f >= 0, "open %s", run);
        if (f < 0) return;
        hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
        H5Tset_size(st, H5T_VARIABLE);
        H5Tset_cset(st, H5T_CSET_UTF8);
        H5Adelete(f, "token_kind");
        hid_t a = H5Acreate2(f, "token_kind", st, sp, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(a >= 0 && H5Awrite(a, st, &kinds[k]) >= 0, "write token_kind");
        if (a >= 0) H5Aclose(a);
        H5Sclose(sp);
        H5Tclose(st);
        H5Fclose(f);
        s2hc_config c;
        gpt_model m;
        h5log l;
        int64_t step = -1;
        int saved = stderr_to(log);
        const int rc = run_open(dir, &c, &m, &l, &step);
        stderr_back(saved);
        if (rc == 0) {
            model_free(&m);
            h5log_free(&l);
        }
        char text[4096], want[900];
        read_text(log, text, sizeof text);
        snprintf(want, sizeof want, "%s: root attribute 'token_kind' is 'words', neither bytes nor ids", run);
        if (k != 1) CHECK(rc == 0 && step == 5, "token_kind %s: rc %d, step %lld: %s", kinds[k], rc, (long long)step, text);
        else CHECK(rc == 1 && strstr(text, want), "token_kind words: rc %d, stderr: %s", rc, text);
    }
}

/* The root attribute git_commits of a run file, malloc'd ("" when absent) */
static char *run_commits(const char *run) {
    char err[512];
    h5log log;
    h5log_init(&log);
    CHECK(h5log_load(&log, run, err, sizeof err) == 0, "%s", err);
    const char *c = h5log_get_attr_str(&log, "/", "git_commits");
    char *copy = strdup(c ? c : "");
    h5log_free(&log);
    return copy;
}

/* A run trained by another build (a run file of an older s2hc: another git_commit and no
 * git_commits) and resumed by this one: a warning that the steps from there need not be
 * bit for bit the older build's, and git_commits lists both builds in order; resumed again
 * by this build, neither warning nor a second entry. The resume used to go on in silence
 * and overwrite git_commit, so the run file no longer said which build trained its first
 * steps. */
static void test_resume_other_build(void) {
    char cfg[700], run[700], log[700], err[512], want[256];
    stopped_run("otherbuild", "10", cfg, NULL);
    snprintf(run, sizeof run, "%s/runs/otherbuild/run.h5", tmp);
    snprintf(log, sizeof log, "%s/otherbuild.err", tmp);
    char *c = run_commits(run);
    CHECK(!strcmp(c, s2hc_version()), "a new run's git_commits: '%s'", c);
    free(c);
    h5log l;
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == 0, "%s", err);
    h5log_attr_str(&l, "/", "git_commit", "0ld0000");
    h5log_attr_del(&l, "/", "git_commits");
    CHECK(h5log_save(&l, run) == 0, "save the older build's run file");
    h5log_free(&l);
    char text[4096];
    int saved = stderr_to(log);
    int rc = train_argv(cfg, "otherbuild", "--resume", "--stop-after", "10");
    stderr_back(saved);
    CHECK(rc == RUN_INTERRUPTED, "resume exits %d", rc);
    read_text(log, text, sizeof text);
    snprintf(want, sizeof want, "was trained by s2hc 0ld0000 and resumes with s2hc %s", s2hc_version());
    CHECK(strstr(text, "warning") && strstr(text, want), "stderr: %s", text);
    snprintf(want, sizeof want, "0ld0000 %s", s2hc_version());
    c = run_commits(run);
    CHECK(!strcmp(c, want), "git_commits '%s', not '%s'", c, want);
    free(c);
    saved = stderr_to(log);
    rc = train_argv(cfg, "otherbuild", "--resume", "--stop-after", "10");
    stderr_back(saved);
    CHECK(rc == RUN_INTERRUPTED, "second resume exits %d", rc);
    read_text(log, text, sizeof text);
    CHECK(!strstr(text, "trained by"), "stderr: %s", text);
    c = run_commits(run);
    CHECK(!strcmp(c, want), "git_commits '%s' after a resume by the same build", c);
    free(c);
    /* three builds, this one last: a resume by it adds none (the list's last entry is this
       build's, not its second) */
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == 0, "%s", err);
    snprintf(want, sizeof want, "0ld0000 0ld1111 %s", s2hc_version());
    h5log_attr_str(&l, "/", "git_commits", want);
    CHECK(h5log_save(&l, run) == 0, "save the run file of three builds");
    h5log_free(&l);
    saved = stderr_to(log);
    rc = train_argv(cfg, "otherbuild", "--resume", NULL, NULL);
    stderr_back(saved);
    CHECK(rc == 0, "third resume exits %d", rc);
    c = run_commits(run);
    CHECK(!strcmp(c, want), "git_commits '%s' after a resume by the last of three builds, not '%s'", c, want);
    free(c);
}

/* The whole of file path as a malloc'd buffer (its size in *n) */
static char *read_whole(const char *path, size_t *n) {
    FILE *f = fopen_check(path, "rb");
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc_check((size_t)len + 1);
    *n = fread(b, 1, (size_t)len, f);
    fclose(f);
    return b;
}

/* A run of a newer build (its run file's format_version 2, then its checkpoint's version
 * 2, written through the HDF5 C API): every command that reads it refuses it, naming the
 * file, its version and the highest this build reads, exit 1, and leaves both files as
 * they were. The run file's format_version was written and never read: `--resume`,
 * `eval` and `probe` would have read such a file as their own and written it back. */
/* Overwrite the existing 64-bit integer attribute `name` on the root of an HDF5 file (a
 * newer build's version, a step past train.steps); 0 when written. */
static int set_root_i64(const char *path, const char *name, int64_t v) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0) return -1;
    hid_t a = H5Aopen(f, name, H5P_DEFAULT);
    const int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &v) >= 0;
    if (a >= 0) H5Aclose(a);
    H5Fclose(f);
    return ok ? 0 : -1;
}

static void test_newer_run_refused(void) {
    char cfg[700], dir[700], run[700], ckpt[700], log[700], text[4096], err[512];
    stopped_run("newer", "10", cfg, dir);
    snprintf(run, sizeof run, "%s/run.h5", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
    snprintf(log, sizeof log, "%s/newer.err", tmp);
    CHECK(set_root_i64(run, "format_version", 2) == 0, "format_version 2 into %s", run);
    size_t n0, n1;
    char *before = read_whole(run, &n0), *ck_before = read_whole(ckpt, &n1);
    const char *ev[] = {"eval", dir}, *pr[] = {"probe", dir}, *in[] = {"inspect", dir}, *ex[] = {"export", dir};
    int (*const mains[])(int, char **) = {eval_main, probe_main, inspect_main, export_main};
    const char **argvs[] = {ev, pr, in, ex};
    for (int k = -1; k < 4; k++) {
        const int saved = stderr_to(log);
        const int rc = k < 0 ? train_argv(cfg, "newer", "--resume", NULL, NULL) : mains[k](2, (char **)argvs[k]);
        stderr_back(saved);
        read_text(log, text, sizeof text);
        CHECK(rc == 1 && strstr(text, run) && strstr(text, "run file format version 2") &&
                  strstr(text, "reads up to version 1") && !strstr(text, "move the file away"),
              "%s: rc %d: %s", k < 0 ? "train --resume" : argvs[k][0], rc, text);
    }
    h5log l;
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == -2 && strstr(err, "format version 2"), "h5log_load: %s", err);
    h5log_free(&l);
    size_t m0, m1;
    char *after = read_whole(run, &m0), *ck_after = read_whole(ckpt, &m1);
    CHECK(m0 == n0 && !memcmp(before, after, n0), "the newer run file was rewritten");
    CHECK(m1 == n1 && !memcmp(ck_before, ck_after, n1), "the newer checkpoint was rewritten");
    free(after);
    free(ck_after);
    /* the run file back at version 1, the checkpoint at 2: refused by the checkpoint */
    CHECK(set_root_i64(run, "format_version", 1) == 0, "format_version 1 into %s", run);
    CHECK(set_root_i64(ckpt, "version", 2) == 0, "version 2 into %s", ckpt);
    free(before);
    before = read_whole(run, &n0);
    for (int k = -1; k < 2; k++) {
        const int saved = stderr_to(log);
        const int rc = k < 0 ? train_argv(cfg, "newer", "--resume", NULL, NULL) : mains[k](2, (char **)argvs[k]);
        stderr_back(saved);
        read_text(log, text, sizeof text);
        CHECK(rc == 1 && strstr(text, ckpt) && strstr(text, "checkpoint format version 2") &&
                  strstr(text, "reads version 1"), "%s: rc %d: %s", k < 0 ? "train --resume" : argvs[k][0], rc, text);
    }
    after = read_whole(run, &m0);
    CHECK(m0 == n0 && !memcmp(before, after, n0), "the run file of a newer checkpoint was rewritten");
    free(before);
    free(after);
    free(ck_before);
}

/* A corpus rebuilt under a run (`s2hc data prepare` of a newer build cuts the text
 * otherwise: other token counts): --resume refuses it (exit 2, the run's files as they
 * were), and so does `s2hc eval`, which would add another validation set's loss to the
 * run's /eval series, and `s2hc probe`, whose /final would be over other sequences; all
 * three went on in silence. A run file without train_tokens and
 * val_tokens (an older build's) resumes as before. */
static void test_resume_rebuilt_corpus(void) {
    char cfg[700], run[700], log[700], d2[700], p[800], err[512], dirset[800], dir[700];
    stopped_run("rebuilt", "10", cfg, dir);
    snprintf(run, sizeof run, "%s/run.h5", dir);
    snprintf(log, sizeof log, "%s/rebuilt.err", tmp);
    snprintf(d2, sizeof d2, "%s/data2/synth", tmp);
    snprintf(dirset, sizeof dirset, "data.dir=%s/data2", tmp);
    h5log l;
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == 0, "%s", err);
    CHECK(h5log_get_attr_num(&l, "/", "val_tokens") == 4000, "val_tokens %g", h5log_get_attr_num(&l, "/", "val_tokens"));
    const double train_n = h5log_get_attr_num(&l, "/", "train_tokens");
    CHECK(train_n > 100000, "train_tokens %g", train_n);
    h5log_free(&l);
    /* the same text, split at another byte */
    CHECK(mkdir_p(d2) == 0, "mkdir %s", d2);
    size_t n = (size_t)train_n + 4000;
    unsigned char *buf = malloc_check(n);
    for (size_t i = 0; i < n; i++) buf[i] = (unsigned char)('a' + i % 26);
    snprintf(p, sizeof p, "%s/train.bin", d2);
    CHECK(shard_write(p, buf, n - 3000, 256, 1) == 0, "shard_write %s", p);
    snprintf(p, sizeof p, "%s/val.bin", d2);
    CHECK(shard_write(p, buf + n - 3000, 3000, 256, 1) == 0, "shard_write %s", p);
    free(buf);
    char text[4096];
    int saved = stderr_to(log);
    int rc = train_argv(cfg, "rebuilt", "--resume", "--set", dirset);
    stderr_back(saved);
    read_text(log, text, sizeof text);
    CHECK(rc == RUN_USAGE && strstr(text, "cannot resume") && strstr(text, "and 4000 validation tokens") &&
              strstr(text, "and 3000 now"), "rc %d: %s", rc, text);
    size_t rows = 0;
    free(read_series("rebuilt", "/train/loss", &rows));
    CHECK(rows == 10, "the run file holds %zu rows after the refusal", rows);
    snprintf(p, sizeof p, "%s/data2", tmp);
    const char *ev[] = {"eval", dir, "--data", p};
    saved = stderr_to(log);
    rc = eval_main(4, (char **)ev);
    stderr_back(saved);
    read_text(log, text, sizeof text);
    CHECK(rc == 1 && strstr(text, "3000 tokens") && strstr(text, "validation set of 4000"), "eval rc %d: %s", rc, text);
    const char *pr[] = {"probe", dir, "--data", p};
    saved = stderr_to(log);
    rc = probe_main(4, (char **)pr);
    stderr_back(saved);
    read_text(log, text, sizeof text);
    CHECK(rc == 1 && strstr(text, "3000 tokens") && strstr(text, "validation set of 4000"), "probe rc %d: %s", rc, text);
    /* an older build's run file: nothing to check against */
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == 0, "%s", err);
    h5log_attr_del(&l, "/", "train_tokens");
    h5log_attr_del(&l, "/", "val_tokens");
    CHECK(h5log_save(&l, run) == 0, "save the older build's run file");
    h5log_free(&l);
    CHECK(train_argv(cfg, "rebuilt", "--resume", "--set", dirset) == 0, "an older run file resumes");
    h5log_init(&l);
    CHECK(h5log_load(&l, run, err, sizeof err) == 0, "%s", err);
    CHECK(h5log_get_attr_num(&l, "/", "val_tokens") == 3000, "val_tokens %g after the resume",
          h5log_get_attr_num(&l, "/", "val_tokens"));
    h5log_free(&l);
}

/* A checkpoint, then a run file, whose stored config is empty: refused as damaged, naming
 * the file (the checkpoint's had been read as every default and called "a checkpoint of
 * another run"; the run file's had built a default model) */
static void test_open_empty_config(void) {
    char cfg[700], dir[700], ckpt[700], run[700], log[700];
    stopped_run("nocfg", "3", cfg, dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
    snprintf(run, sizeof run, "%s/run.h5", dir);
    snprintf(log, sizeof log, "%s/nocfg.err", tmp);
    for (int k = 0; k < 2; k++) {
        const char *file = k ? run : ckpt, *blank = k ? "" : " \n"; /* white space alone is empty too */
        hid_t f = H5Fopen(file, H5F_ACC_RDWR, H5P_DEFAULT), sp = H5Screate(H5S_SCALAR), t = H5Tcopy(H5T_C_S1);
        H5Tset_size(t, k ? 1 : 2);
        H5Adelete(f, "config");
        hid_t a = H5Acreate2(f, "config", t, sp, H5P_DEFAULT, H5P_DEFAULT);
        CHECK(a >= 0 && H5Awrite(a, t, blank) >= 0, "write an empty config into %s", file);
        if (a >= 0) H5Aclose(a);
        H5Tclose(t);
        H5Sclose(sp);
        H5Fclose(f);
        s2hc_config c;
        gpt_model m;
        h5log l2;
        int64_t step;
        int saved = stderr_to(log);
        const int rc = run_open(dir, &c, &m, &l2, &step);
        stderr_back(saved);
        CHECK(rc != 0, "an empty config in %s is refused", file);
        if (rc == 0) { model_free(&m); h5log_free(&l2); }
        char text[4096];
        read_text(log, text, sizeof text);
        CHECK(strstr(text, file) && strstr(text, "root attribute 'config' is empty"), "says so: %s", text);
    }
}

/* A checkpoint whose step is past train.steps (damage: no run of this config saves one):
 * --resume refuses it, naming the file, and the run's files stay as they were. */
static void test_resume_step_past_steps(void) {
    char cfg[700], ckpt[700], log[700];
    stopped_run("past", "3", cfg, NULL);
    snprintf(ckpt, sizeof ckpt, "%s/runs/past/ckpt.h5", tmp);
    snprintf(log, sizeof log, "%s/past.err", tmp);
    CHECK(set_root_i64(ckpt, "step", 41) == 0, "step 41 into %s", ckpt); /* train.steps is 40 */
    int saved = stderr_to(log);
    const int rc = train_argv(cfg, "past", "--resume", NULL, NULL);
    stderr_back(saved);
    char text[4096];
    read_text(log, text, sizeof text);
    CHECK(rc == RUN_FAILED && strstr(text, ckpt) && strstr(text, "checkpoint at step 41, past train.steps = 40"),
          "rc %d: %s", rc, text);
}

/* A run file whose config was damaged into a large model (n_embd 1024, 8 layers: 100M
 * parameters) beside a checkpoint of the small one: run_open (eval, probe, sample,
 * export) refuses it by the checkpoint's shapes before allocating the model; it
 * allocated and zeroed parameters and gradients (800 MB) first. */
static void test_open_damaged_config(void) {
    char cfg[700], dir[700], run[700], err[512];
    stopped_run("bigcfg", "5", cfg, dir);
    snprintf(run, sizeof run, "%s/run.h5", dir);
    h5log log;
    h5log_init(&log);
    CHECK(h5log_load(&log, run, err, sizeof err) == 0, "%s", err);
    const char *yaml = h5log_get_attr_str(&log, "/", "config");
    const char *l = yaml ? strstr(yaml, "n_layer: 2\n") : NULL, *e = yaml ? strstr(yaml, "n_embd: 32\n") : NULL;
    CHECK(l && e && l < e, "the stored config names n_layer 2, then n_embd 32");
    if (!l || !e || l > e) { h5log_free(&log); return; }
    const size_t len = strlen(yaml) + 8;
    char *fixed = malloc_check(len);
    snprintf(fixed, len, "%.*sn_layer: 8\n%.*sn_embd: 1024\n%s", (int)(l - yaml), yaml, (int)(e - (l + 11)), l + 11,
             e + 11);
    h5log_attr_str(&log, "/", "config", fixed);
    free(fixed);
    CHECK(h5log_save(&log, run) == 0, "save the damaged run file");
    h5log_free(&log);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const long before = ru.ru_maxrss;
    s2hc_config c;
    gpt_model m;
    h5log l2;
    int64_t step;
    int saved = stderr_to("/dev/null");
    const int rc = run_open(dir, &c, &m, &l2, &step);
    stderr_back(saved);
    CHECK(rc != 0, "a checkpoint of another shape is refused");
    if (rc == 0) { model_free(&m); h5log_free(&l2); }
    getrusage(RUSAGE_SELF, &ru);
    CHECK(ru.ru_maxrss - before < 100 * 1024, "the refusal took %ld MB", (ru.ru_maxrss - before) / 1024);
}

/* X_next = H . X + post * f, recomputed independently in double from the stored
 * activations, for every registered method at n = 3 and n = 4; H is pushed far from I by
 * large random frame weights. Two blocks: the first sublayer's streams are all copies
 * of the embedding, where any H with the same row sums (H or its transpose, for every
 * doubly stochastic method) gives the same X_next; the later sublayers' streams differ,
 * so there a transposed or never-applied H shows (checked by planting a transpose: every
 * method but identity, and kromhc at n = 4 whose 2x2 (x) 2x2 H is symmetric, fails). */
static void test_frame_applies_H_as_rows_are_outputs(void) {
    const char *methods[16];
    size_t n_methods = 0;
    for (int i = 0; hc_variants[i] && n_methods < 16; i++) methods[n_methods++] = hc_variants[i]->name;
    CHECK(n_methods >= 8, "only %zu methods registered", n_methods);
    for (size_t run = 0; run < 2 * n_methods; run++) { /* every method at n = 3, then at n = 4 */
        size_t mi = run % n_methods;
        s2hc_config c;
        config_defaults(&c);
        c.n_layer = 2; c.n_head = 2; c.n_embd = 16; c.block_size = 8;
        snprintf(c.method, sizeof c.method, "%s", methods[mi]);
        c.n_streams = run < n_methods ? 3 : 4;
        gpt_model m;
        char err[256];
        CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
        model_init(&m, 3);
        rng_t r;
        rng_seed(&r, 11);
        for (int i = 0; i < m.n_tensors; i++)
            if (m.pinfo[i].aux)
                for (size_t k = 0; k < m.pinfo[i].numel; k++) m.params[m.pinfo[i].offset + k] += (real)(2.0 * rng_normal(&r));
        int in[16];
        for (int i = 0; i < 16; i++) in[i] = (int)(rng_u64(&r) % 256);
        model_alloc_acts(&m, 2);
        model_forward(&m, in, NULL, 2);
        const int n = m.n, C = m.C;
        double offdiag = 0, worst = 0;
        for (int l = 0; l < m.Lh; l++) {
            hc_acts h = model_hc_acts(&m, l), hn = model_hc_acts(&m, l + 1 < m.Lh ? l + 1 : l);
            if (l + 1 >= m.Lh) break; /* the next sublayer's input is this one's output */
            for (int t = 0; t < 16; t++)
                for (int i = 0; i < n; i++) {
                    for (int j = 0; j < n; j++) if (i != j) offdiag += fabs(h.H[(t * n + i) * n + j]);
                    for (int cc = 0; cc < C; cc++) {
                        double y = h.post[t * n + i] * h.f[t * C + cc];
                        for (int j = 0; j < n; j++) y += (double)h.H[(t * n + i) * n + j] * h.X[(t * n + j) * C + cc];
                        double e = fabs(y - hn.X[(t * n + i) * C + cc]);
                        if (e > worst) worst = e;
                    }
                }
        }
        CHECK(worst < 1e-4, "%s n=%d: X_next differs from H.X + post f by %.3g", methods[mi], n, worst);
        if (strcmp(methods[mi], "identity") != 0)
            CHECK(offdiag > 1e-2, "%s n=%d: H stayed diagonal (%.3g); the test would not see a transpose", methods[mi], n,
                  offdiag);
        model_free(&m);
    }
}

/* A micro-batch by slices (model_forward_backward, one slice of the batch per thread):
 * the loss and every gradient as model_forward + model_backward within float rounding
 * (the sums over tokens are split differently), slices of unequal size (B = 5 over 2
 * threads) and ignored targets included; the same bits twice; with one thread, fewer
 * sequences than threads or train.parallel = ops, the very bits of the two calls; and
 * the gradients added to what was there (accumulation over micro-batches). */
/* Two identical small models (2 layers, 32 wide, T tokens; z != 0: every path of the
 * frame) of `method` for the step tests, built and initialised from `seed`. */
/* method "NAME/nanogpt": nanoGPT's base model (model.bias false, model.gelu erf) */
static void twin_models(const char *method, int T, const char *parallel, uint64_t seed, gpt_model *a, gpt_model *b) {
    s2hc_config c;
    config_defaults(&c);
    c.n_layer = 2; c.n_head = 2; c.n_embd = 32; c.block_size = T;
    snprintf(c.method, sizeof c.method, "%s", method);
    char *base = strchr(c.method, '/');
    if (base && !strcmp(base, "/nanogpt")) {
        *base = 0;
        c.bias = 0;
        snprintf(c.gelu, sizeof c.gelu, "erf");
    }
    c.n_streams = strcmp(c.method, "rc") ? 4 : 1;
    snprintf(c.proj_init, sizeof c.proj_init, "normal");
    snprintf(c.parallel, sizeof c.parallel, "%s", parallel);
    char err[256];
    CHECK(model_build(a, &c, err, sizeof err) == 0, "%s", err);
    CHECK(model_build(b, &c, err, sizeof err) == 0, "%s", err);
    model_init(a, seed);
    model_init(b, seed);
}

/* N random byte tokens and targets (with ignore, every seventh target from the fourth
 * ignored); free both. */
static void random_tokens(size_t N, uint64_t seed, int ignore, int **in, int **tg) {
    *in = malloc_check(N * sizeof(int));
    *tg = malloc_check(N * sizeof(int));
    rng_t r;
    rng_seed(&r, seed);
    for (size_t i = 0; i < N; i++) {
        (*in)[i] = (int)(rng_u64(&r) % 256);
        (*tg)[i] = ignore && i % 7 == 3 ? -1 : (int)(rng_u64(&r) % 256);
    }
}

static void sliced_case(const char *method, int B, int threads, const char *parallel) {
    gpt_model a, b;
    twin_models(method, 16, parallel, 5, &a, &b);
    const size_t N = (size_t)B * a.T, P = a.n_params;
    int *in, *tg;
    random_tokens(N, 17, 1, &in, &tg);
    omp_set_num_threads(threads);
    real *g1 = malloc_check(P * sizeof(real)), *g0 = malloc_check(P * sizeof(real));
    /* reference: the two calls, on top of a gradient already there, with the streams in
       the step's layout (channel blocks) */
    model_zero_grad(&a);
    for (size_t i = 0; i < P; i++) a.grads[i] = (real)(1e-3 * (double)(i % 13));
    a.stream_blk_on = a.stream_blocks;
    const real la = model_forward(&a, in, tg, B);
    model_backward(&a, 0.5);
    a.stream_blk_on = 0;
    for (size_t i = 0; i < P; i++) b.grads[i] = (real)(1e-3 * (double)(i % 13));
    const real lb = model_forward_backward(&b, in, tg, B, 0.5);
    memcpy(g1, b.grads, P * sizeof(real));
    for (size_t i = 0; i < P; i++) b.grads[i] = (real)(1e-3 * (double)(i % 13));
    const real lb2 = model_forward_backward(&b, in, tg, B, 0.5);
    CHECK(memcmp(g1, b.grads, P * sizeof(real)) == 0 && lb == lb2, "%s B=%d threads=%d: two calls differ", method, B,
          threads);
    double gmax = 0, worst = 0;
    for (size_t i = 0; i < P; i++) gmax = fmax(gmax, fabs((double)a.grads[i]));
    for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)a.grads[i] - (double)b.grads[i]));
    CHECK_CLOSE(la, lb, 0, 1e-5, "%s B=%d threads=%d: loss", method, B, threads);
    CHECK(worst <= 1e-5 * gmax, "%s B=%d threads=%d: gradients differ by %.3g (largest %.3g)", method, B, threads,
          worst, gmax);
    if (threads == 1 || B < threads || !strcmp(parallel, "ops")) {
        memcpy(g0, a.grads, P * sizeof(real));
        CHECK(memcmp(g0, b.grads, P * sizeof(real)) == 0 && la == lb, "%s B=%d threads=%d %s: not the two calls",
              method, B, threads, parallel);
    }
    free(g0);
    free(g1);
    free(in);
    free(tg);
    model_free(&a);
    model_free(&b);
}

static void test_sliced_step_is_the_step(void) {
    const int saved = omp_get_max_threads();
    const char *methods[] = {"rc", "s2hc", "mhc", "hc"};
    for (int i = 0; i < 4; i++) {
        sliced_case(methods[i], 4, 2, "batch");
        sliced_case(methods[i], 5, 2, "batch");
        sliced_case(methods[i], 3, 1, "batch");
    }
    sliced_case("s2hc", 2, 3, "batch"); /* fewer sequences than threads: the two calls */
    sliced_case("s2hc", 4, 2, "ops");   /* the op-parallel step, asked for */
    sliced_case("rc/nanogpt", 4, 2, "batch"); /* no bias tensors, the exact GELU */
    sliced_case("s2hc/nanogpt", 5, 2, "batch");
    omp_set_num_threads(saved);
}

/* The parts of a batch as the processes of a training across processes compute them
 * (model_forward_backward_part, harness/dist.h): W parts of one thread each, the first
 * adding into the running gradient, the others from zero, then summed in part order,
 * give the bits of model_forward_backward on W threads, loss included (ragged parts,
 * ignored targets, a gradient already there); a part with every target ignored adds
 * nothing and weighs nothing; and a part's share is of the whole batch's valid targets
 * (a part taken as its own batch differs). */
static void parts_case(const char *method, int B, int W) {
    gpt_model a, b;
    twin_models(method, 16, "batch", 9, &a, &b);
    const int T = a.T;
    const size_t N = (size_t)B * T, P = a.n_params;
    int *in, *tg;
    random_tokens(N, 23, 1, &in, &tg);
    size_t whole = 0;
    for (size_t t = 0; t < N; t++) whole += tg[t] >= 0;
    for (size_t i = 0; i < P; i++) a.grads[i] = b.grads[i] = (real)(1e-3 * (double)(i % 11));
    omp_set_num_threads(W);
    const real la = model_forward_backward(&a, in, tg, B, 0.25);
    omp_set_num_threads(1);
    real *sum = malloc_check(P * sizeof(real)), *first = malloc_check(P * sizeof(real));
    double loss = 0;
    for (int r = 0; r < W; r++) {
        const int b0 = (int)((long)B * r / W), b1 = (int)((long)B * (r + 1) / W);
        if (r) model_zero_grad(&b);
        loss += model_forward_backward_part(&b, in + (size_t)b0 * T, tg + (size_t)b0 * T, b1 - b0, 0.25, whole);
        if (!r) memcpy(sum, b.grads, P * sizeof(real));
        else
            for (size_t i = 0; i < P; i++) sum[i] += b.grads[i];
        if (!r) memcpy(first, b.grads, P * sizeof(real));
    }
    CHECK(memcmp(sum, a.grads, P * sizeof(real)) == 0, "%s B=%d: %d parts summed are not %d threads' bits", method,
          B, W, W);
    CHECK((real)loss == la, "%s B=%d: the parts' losses sum to %.9g, %d threads give %.9g", method, B,
          (double)(real)loss, W, (double)la);
    /* the first part as a batch of its own (whole = its own valid targets): the step of
       model_forward_backward over it alone, and not its share of the whole batch */
    const int b1 = B / W;
    const size_t cnt = model_valid_targets(tg, (size_t)b1 * T);
    for (size_t i = 0; i < P; i++) b.grads[i] = (real)(1e-3 * (double)(i % 11));
    const double own = model_forward_backward_part(&b, in, tg, b1, 0.25, cnt);
    memcpy(sum, b.grads, P * sizeof(real));
    for (size_t i = 0; i < P; i++) b.grads[i] = (real)(1e-3 * (double)(i % 11));
    const real alone = model_forward_backward(&b, in, tg, b1, 0.25);
    CHECK(memcmp(sum, b.grads, P * sizeof(real)) == 0 && (real)own == alone,
          "%s: a part with whole = its own targets is not the step over it alone", method);
    CHECK(memcmp(first, sum, P * sizeof(real)) != 0 && cnt < whole, "%s: a part's gradient ignores its share",
          method);
    /* every target of a part ignored: no gradient, no loss */
    for (size_t t = 0; t < (size_t)b1 * T; t++) tg[t] = -1;
    memcpy(first, b.grads, P * sizeof(real));
    const double none = model_forward_backward_part(&b, in, tg, b1, 0.25, whole);
    CHECK(none == 0 && memcmp(first, b.grads, P * sizeof(real)) == 0, "%s: a part without targets added %.3g", method,
          none);
    free(sum);
    free(first);
    free(in);
    free(tg);
    model_free(&a);
    model_free(&b);
}

static void test_parts_are_the_sliced_step(void) {
    const int saved = omp_get_max_threads();
    const char *methods[] = {"rc", "s2hc", "mhc_lite"};
    for (int i = 0; i < 3; i++) {
        parts_case(methods[i], 4, 2);
        parts_case(methods[i], 8, 3);
    }
    omp_set_num_threads(saved);
}

/* Every method trains with a falling loss (issue: variants). */
/* The method cache of a whole group of 16 tokens is kept in the lanes' layout, so the
 * frame's forward and backward must group the tokens alike whatever their threads
 * (hc_range ends at multiples of 16). Here N = 3 x 37 = 111 tokens (a ragged last
 * group) go forward on one thread count and backward on another (1 and 3: ranges from
 * 0 and from 32, 64; 3 and 2), for every method with a cache: the loss and gradients
 * equal the one-thread step's within float rounding. Ranges split at N t / threads
 * (37, 74) would read the cache of tokens 37.. as groups it was not written in (tried:
 * every method here fails). */
static void test_frame_groups_any_threads(void) {
    const int saved = omp_get_max_threads();
    const char *methods[] = {"mhc", "s2hc", "s2hc_rot", "orthogonal"};
    const int splits[][2] = {{1, 3}, {3, 1}, {3, 2}};
    for (int mi = 0; mi < 4; mi++) {
        gpt_model a, b;
        twin_models(methods[mi], 37, "ops", 9, &a, &b);
        for (int t = 0; t < a.n_tensors; t++) /* the scales 0.01 -> 1: tokens' coefficients differ */
            if (strstr(a.pinfo[t].name, "alpha_") || strstr(a.pinfo[t].name, ".tau"))
                for (size_t i = 0; i < a.pinfo[t].numel; i++) {
                    a.params[a.pinfo[t].offset + i] *= 100;
                    b.params[b.pinfo[t].offset + i] *= 100;
                }
        const int B = 3;
        const size_t N = (size_t)B * a.T, P = a.n_params;
        int *in, *tg;
        random_tokens(N, 23, 0, &in, &tg);
        omp_set_num_threads(1);
        model_zero_grad(&a);
        const real la = model_forward(&a, in, tg, B);
        model_backward(&a, 1);
        double gmax = 0;
        for (size_t i = 0; i < P; i++) gmax = fmax(gmax, fabs((double)a.grads[i]));
        omp_set_num_threads(3);
        model_alloc_acts(&b, B); /* the frame's scratch for 3 threads (its regions take up to that many) */
        for (int k = 0; k < 3; k++) {
            omp_set_num_threads(splits[k][0]);
            model_zero_grad(&b);
            const real lb = model_forward(&b, in, tg, B);
            omp_set_num_threads(splits[k][1]);
            model_backward(&b, 1);
            double worst = 0;
            for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)a.grads[i] - (double)b.grads[i]));
            CHECK(la == lb, "%s: forward on %d threads: loss %.9g, one thread %.9g", methods[mi], splits[k][0],
                  (double)lb, (double)la);
            CHECK(worst <= 1e-5 * gmax, "%s: forward on %d threads, backward on %d: gradients differ by %.3g "
                  "(largest %.3g)", methods[mi], splits[k][0], splits[k][1], worst, gmax);
        }
        free(in);
        free(tg);
        model_free(&a);
        model_free(&b);
    }
    omp_set_num_threads(saved);
}

/* residual.proj_precision: bf16, the step with the projection's three products in bf16
 * against the fp32 step of the same model: the loss and every gradient tensor within
 * bf16's rounding of their own scale, yet not the fp32 gradients' bits; the bf16 step the
 * same bits run twice. The projections' weights x 30, so that their terms (z's, dz W' in the
 * streams' gradient, dW) weigh in every gradient. s2hc (one norm row per token), hc (a
 * norm row per stream), mhc_lite (K = 32); T = 37 with B = 3: groups left over; C = 32
 * and 36 (channels past the last vector, which each product takes apart); kromhc (K =
 * 12, one norm row). Where AMX is usable, both kinds of product: by vdpbf16ps, then by
 * tiles (and, at Kr <= 16, dX's term by the fp32 loop on rounded operands), each tiles'
 * step against the vdpbf16ps step too: the same rounded operands' products summed in
 * another order, so far closer to each other than to fp32 (an operand left unrounded
 * would not be). */
static void test_proj_bf16_step(void) {
    const char *methods[] = {"s2hc", "hc", "mhc_lite", "kromhc"};
    enum { NM = 4 };
    for (int mc = 0; mc < (model_amx_usable() ? 4 : 2) * NM; mc++) {
        const int mi = mc % NM, C = mc / NM % 2 ? 36 : 32, amx = mc >= 2 * NM;
        s2hc_config c;
        config_defaults(&c);
        c.n_layer = 2; c.n_head = 2; c.n_embd = C; c.block_size = 37;
        snprintf(c.method, sizeof c.method, "%s", methods[mi]);
        c.n_streams = 4;
        snprintf(c.proj_init, sizeof c.proj_init, "normal");
        gpt_model a, b, b2, v;
        char err[256];
        CHECK(model_build(&a, &c, err, sizeof err) == 0, "%s", err);
        snprintf(c.proj_precision, sizeof c.proj_precision, "bf16");
        if (!model_bf16_built()) {
            CHECK(model_build(&b, &c, err, sizeof err) != 0 && strstr(err, "AVX512_BF16"),
                  "without AVX512_BF16, proj_precision bf16 must be refused by name: %s", err);
            model_free(&a);
            return;
        }
        CHECK(model_build(&b, &c, err, sizeof err) == 0, "%s", err);
        CHECK(model_build(&b2, &c, err, sizeof err) == 0, "%s", err);
        CHECK(b.proj_amx == model_amx_usable(), "proj_amx %d, model_amx_usable %d", b.proj_amx, model_amx_usable());
        CHECK(model_build(&v, &c, err, sizeof err) == 0, "%s", err);
        b.proj_amx = b2.proj_amx = amx;
        v.proj_amx = 0;
        gpt_model *ms[4] = {&a, &b, &b2, &v};
        for (int k = 0; k < 4; k++) {
            model_init(ms[k], 3);
            for (int t = 0; t < ms[k]->n_tensors; t++)
                if (strstr(ms[k]->pinfo[t].name, "proj.weight"))
                    for (size_t i = 0; i < ms[k]->pinfo[t].numel; i++) ms[k]->params[ms[k]->pinfo[t].offset + i] *= 30;
        }
        const int B = 3;
        const size_t N = (size_t)B * a.T;
        int *in, *tg;
        random_tokens(N, 41, 0, &in, &tg);
        real loss[4];
        for (int k = 0; k < 4; k++) {
            model_zero_grad(ms[k]);
            loss[k] = model_forward(ms[k], in, tg, B);
            model_backward(ms[k], 1);
        }
        CHECK(fabs((double)loss[0] - (double)loss[1]) <= 1e-2 * fabs((double)loss[0]), /* may be the same bits */
              "%s%s C=%d: loss bf16 %.9g, fp32 %.9g", methods[mi], amx ? " (AMX)" : "", C, (double)loss[1], (double)loss[0]);
        CHECK(loss[1] == loss[2] && memcmp(b.grads, b2.grads, b.n_params * sizeof(real)) == 0,
              "%s%s C=%d: the bf16 step differs between two runs", methods[mi], amx ? " (AMX)" : "", C);
        double gmax = 0, worst_rel = 0;
        int off = 0, differ = 0;
        for (size_t i = 0; i < a.n_params; i++) gmax = fmax(gmax, fabs((double)a.grads[i]));
        for (int t = 0; t < a.n_tensors; t++) {
            const real *ga = a.grads + a.pinfo[t].offset, *gb = b.grads + b.pinfo[t].offset;
            double scale = 1e-3 * gmax, diff = 0;
            for (size_t i = 0; i < a.pinfo[t].numel; i++) scale = fmax(scale, fabs((double)ga[i]));
            for (size_t i = 0; i < a.pinfo[t].numel; i++) {
                diff = fmax(diff, fabs((double)ga[i] - (double)gb[i]));
                differ |= ga[i] != gb[i];
            }
            worst_rel = fmax(worst_rel, diff / scale);
            if (diff > 0.1 * scale && off++ < 3)
                CHECK(0, "%s%s C=%d: %s: bf16 gradient off by %.3g of its scale %.3g", methods[mi], amx ? " (AMX)" : "", C,
                      a.pinfo[t].name,
                      diff / scale, scale);
        }
        CHECK(off == 0 && differ, "%s%s C=%d: %d gradient tensors off (worst %.3g of scale); any bits differ: %d",
              methods[mi], amx ? " (AMX)" : "", C, off, worst_rel, differ);
        printf("  %s%s C=%d: bf16 projection against fp32: loss %.3g relative, gradients %.3g of scale\n", methods[mi],
               amx ? " (AMX)" : "", C,
               fabs((double)loss[0] - (double)loss[1]) / fabs((double)loss[0]), worst_rel);
        if (amx) { /* the tiles' step against the vdpbf16ps step, against the fp32 step */
            double dv = 0, da = 0;
            for (size_t i = 0; i < a.n_params; i++) {
                dv = fmax(dv, fabs((double)b.grads[i] - (double)v.grads[i]));
                da = fmax(da, fabs((double)b.grads[i] - (double)a.grads[i]));
            }
            CHECK(dv <= 0.05 * da, "%s (AMX) C=%d: gradients %.3g from the vdpbf16ps step's, %.3g from fp32's: not "
                  "the same rounded operands", methods[mi], C, dv, da);
            printf("    against the vdpbf16ps step: %.3g of the distance to fp32\n", dv / da);
        }
        free(in);
        free(tg);
        for (int k = 0; k < 4; k++) model_free(ms[k]);
    }
}

/* residual.stream_precision: bf16 on the cpu: a training step stores the streams in bf16
 * and must be, bit for bit, the step of the same model that rounds every value it writes
 * to the streams (and W') to bf16 but keeps them in fp32 (round_streams, the reference the
 * cuda backend is checked against): the loss and every gradient. It is not the fp32
 * step's loss; and model_forward on its own (evals, probes) runs fp32 streams again. Every
 * frame method at n = 4, one and two threads (the sliced step), C = 32 and 36 (channels
 * past the last vector), T = 37 (a ragged last group of tokens); n = 2 and 3 for s2hc;
 * with residual.proj_precision bf16 as well where the build has it (proj). */
/* The config of the streams' step tests: 2 layers, C wide, T = 37 (a ragged last group of
 * tokens), `method` at n streams, the projection in bf16 with proj. */
static void streams_case_config(s2hc_config *c, const char *method, int n, int C, int proj) {
    config_defaults(c);
    c->n_layer = 2; c->n_head = C % 2 ? 3 : 2; c->n_embd = C; c->block_size = 37;
    snprintf(c->method, sizeof c->method, "%s", method);
    c->n_streams = n;
    snprintf(c->proj_init, sizeof c->proj_init, "normal");
    if (proj) snprintf(c->proj_precision, sizeof c->proj_precision, "bf16");
}

/* model_init from seed, then the tokens' coefficients and projection terms made to weigh
 * (the gates' scales and the projection's weights enlarged). */
static void init_weighty(gpt_model *m, uint64_t seed) {
    model_init(m, seed);
    for (int t = 0; t < m->n_tensors; t++)
        for (size_t i = 0; i < m->pinfo[t].numel; i++) {
            real *v = m->params + m->pinfo[t].offset + i;
            if (strstr(m->pinfo[t].name, "alpha_") || strstr(m->pinfo[t].name, ".tau")) *v *= 100;
            if (strstr(m->pinfo[t].name, "proj.weight")) *v *= 30;
        }
}

static void stream_bf16_case(const char *method, int n, int C, int threads, int B, int proj) {
    s2hc_config c;
    streams_case_config(&c, method, n, C, proj);
    gpt_model a, b, f;
    char err[256];
    CHECK(model_build(&b, &c, err, sizeof err) == 0, "%s", err);
    CHECK(model_build(&f, &c, err, sizeof err) == 0, "%s", err);
    snprintf(c.stream_precision, sizeof c.stream_precision, "bf16");
    CHECK(model_build(&a, &c, err, sizeof err) == 0, "%s", err);
    CHECK(a.stream_bf16 && !b.stream_bf16, "%s: stream_precision bf16 not taken", method);
    b.round_streams = 1;
    gpt_model *ms[3] = {&a, &b, &f};
    for (int k = 0; k < 3; k++) init_weighty(ms[k], 7);
    const size_t N = (size_t)B * a.T, P = a.n_params;
    int *in, *tg;
    random_tokens(N, 43, 1, &in, &tg);
    omp_set_num_threads(threads);
    real loss[3];
    for (int k = 0; k < 3; k++) {
        model_zero_grad(ms[k]);
        loss[k] = model_forward_backward(ms[k], in, tg, B, 1);
    }
    int bad = 0;
    for (size_t i = 0; i < P; i++) bad += a.grads[i] != b.grads[i];
    CHECK(loss[0] == loss[1] && bad == 0,
          "%s n=%d C=%d threads=%d: bf16 streams against round_streams: loss %.9g vs %.9g, %d of %zu gradients differ",
          method, n, C, threads, (double)loss[0], (double)loss[1], bad, P);
    if (threads == 1) { /* one slice: the streams of the batch, in bf16, are the reference's values */
        const size_t len = N * (size_t)n * (size_t)C;
        size_t off = 0;
        for (int l = 0; l <= a.Lh; l++) {
            const uint16_t *xa = (const uint16_t *)model_streams(&a, l);
            const real *xb = model_streams(&b, l);
            for (size_t i = 0; i < len; i++) {
                const uint32_t u = (uint32_t)xa[i] << 16;
                float v;
                memcpy(&v, &u, sizeof v);
                off += v != xb[i];
            }
        }
        CHECK(off == 0, "%s n=%d: %zu values of the bf16 streams are not the reference's", method, n, off);
    }
    CHECK(loss[0] != loss[2], "%s n=%d: the bf16-stream step's loss is the fp32 step's (%.9g)", method, n,
          (double)loss[2]);
    CHECK(!a.stream_bf16_on, "%s: the step left its streams in bf16 for what follows", method);
    const real ea = model_forward(&a, in, tg, B), ef = model_forward(&f, in, tg, B);
    CHECK(ea == ef, "%s n=%d: model_forward after a bf16 step %.9g, the fp32 model's %.9g", method, n, (double)ea,
          (double)ef);
    free(in);
    free(tg);
    for (int k = 0; k < 3; k++) model_free(ms[k]);
}

static void test_stream_bf16_step(void) {
    const int saved = omp_get_max_threads();
    for (int i = 0; hc_variants[i]; i++) {
        stream_bf16_case(hc_variants[i]->name, 4, 32, 1, 3, 0);
        stream_bf16_case(hc_variants[i]->name, 4, 36, 2, 4, 0);
        stream_bf16_case(hc_variants[i]->name, 4, 44, 1, 4, 0); /* 12 channels past the vectors */
    }
    stream_bf16_case("s2hc", 2, 36, 2, 3, 0);
    stream_bf16_case("s2hc", 3, 32, 1, 2, 0);
    if (model_bf16_built()) { /* both options: a norm row per token (s2hc), per stream (hc) */
        stream_bf16_case("s2hc", 4, 36, 2, 4, 1);
        stream_bf16_case("hc", 4, 32, 1, 3, 1);
    }
    omp_set_num_threads(saved);
}

/* The training step's streams in channel blocks (the default, stream_blocks = 1) against
 * the same step with them in rows (stream_blocks = 0): the same loss and gradients within
 * float rounding (only the order of the sums over a token's n C values moves: the norm, the
 * projection, dW), and every stream X_l of the batch the rows' values at the positions of
 * stream_cols; model_forward on its own keeps rows (its loss the rows step's bits). Every
 * method at n = 4, C = 32 and 36 (channels past the last vector), one and two threads (the
 * streams compared with one: a slice's are its own); n = 2 and 3 for s2hc; the projection in
 * bf16 where the build has it. The check of the positions fails if the step keeps rows, if the
 * map is not the kernels' layout, or if any kernel reads a stream in the other layout.
 * With the projection in bf16 the two steps round their operands to bf16: X_0 is the same
 * in both, so sublayer 0's z and H agree to float rounding (checked as tightly as in fp32),
 * but from X_1 on a value that differs in its last fp32 bits may round to the neighbouring
 * bf16 value (2^-8 apart), and the streams and gradients then differ by bf16's size, not
 * float's: they are checked within 2e-2 of the largest (a permuted column of W' or dW
 * moves them by the size of its terms, tens of percent). */
static void stream_blocks_case(const char *method, int n, int C, int threads, int B, int proj) {
    s2hc_config c;
    streams_case_config(&c, method, n, C, proj);
    gpt_model a, b;
    char err[256];
    CHECK(model_build(&a, &c, err, sizeof err) == 0, "%s", err);
    CHECK(model_build(&b, &c, err, sizeof err) == 0, "%s", err);
    CHECK(a.stream_blocks == 1, "%s: the training steps' streams not in channel blocks by default", method);
    b.stream_blocks = 0;
    gpt_model *ms[2] = {&a, &b};
    for (int k = 0; k < 2; k++) init_weighty(ms[k], 9);
    const size_t N = (size_t)B * a.T, P = a.n_params, nC = (size_t)n * (size_t)C;
    int *in, *tg;
    random_tokens(N, 47, 1, &in, &tg);
    omp_set_num_threads(threads);
    real loss[2];
    for (int k = 0; k < 2; k++) {
        model_zero_grad(ms[k]);
        loss[k] = model_forward_backward(ms[k], in, tg, B, 1);
    }
    const double tol = proj ? 2e-2 : 1e-4; /* bf16's flips from X_1 on (above) */
    if (threads == 1) { /* one slice: the batch's coefficients; sublayer 0's inputs the same bits */
        const hc_acts ha = model_hc_acts(&a, 0), hb = model_hc_acts(&b, 0);
        const size_t sizes[2] = {N * (size_t)a.spec.K, N * (size_t)(n * n)};
        const real *va[2] = {ha.z, ha.H}, *vb[2] = {hb.z, hb.H};
        for (int v = 0; v < 2; v++) {
            double vmax = 0, verr = 0;
            for (size_t i = 0; i < sizes[v]; i++) {
                vmax = fmax(vmax, fabs((double)vb[v][i]));
                verr = fmax(verr, fabs((double)va[v][i] - (double)vb[v][i]));
            }
            CHECK(verr <= 1e-5 * vmax, "%s n=%d C=%d proj_bf16=%d: sublayer 0's %s, channel blocks against rows, "
                  "differ by %.3g (largest %.3g)", method, n, C, proj, v ? "H" : "z", verr, vmax);
        }
    }
    double gmax = 0, worst = 0;
    for (size_t i = 0; i < P; i++) gmax = fmax(gmax, fabs((double)b.grads[i]));
    for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)a.grads[i] - (double)b.grads[i]));
    CHECK_CLOSE(loss[0], loss[1], 0, 1e-5, "%s n=%d C=%d threads=%d: loss, channel blocks against rows", method, n,
                C, threads);
    CHECK(worst <= tol * gmax, "%s n=%d C=%d threads=%d proj_bf16=%d: gradients, channel blocks against rows, "
          "differ by %.3g (largest %.3g)", method, n, C, threads, proj, worst, gmax);
    const int flat = a.spec.norm == HC_NORM_FLAT;
    CHECK(flat == (a.stream_cols != NULL), "%s: the map of channel blocks with%s one norm row", method,
          flat ? "" : "out");
    double xmax = 0, xerr = 0, moved = 0;
    for (int l = 1; l <= (threads == 1 ? a.Lh : 0); l++) { /* one slice: the batch's streams */
        const real *xa = model_streams(&a, l), *xb = model_streams(&b, l);
        for (size_t t = 0; t < N; t++)
            for (size_t q = 0; q < nC; q++) {
                const size_t r = flat ? a.stream_cols[q] : q;
                xmax = fmax(xmax, fabs((double)xb[t * nC + r]));
                xerr = fmax(xerr, fabs((double)xa[t * nC + q] - (double)xb[t * nC + r]));
                moved = fmax(moved, fabs((double)xa[t * nC + q] - (double)xb[t * nC + q]));
            }
    }
    CHECK(xerr <= tol * xmax, "%s n=%d C=%d threads=%d proj_bf16=%d: the streams in channel blocks are not the "
          "rows' values at stream_cols (off by %.3g, largest %.3g)", method, n, C, threads, proj, xerr, xmax);
    if (flat && threads == 1) /* the streams differ from one another: rows would not pass for blocks */
        CHECK(moved > 1e-2 * xmax, "%s n=%d C=%d: the step's streams are in rows (%.3g)", method, n, C, moved);
    CHECK(!a.stream_blk_on, "%s: the step left its streams in channel blocks for what follows", method);
    const real ea = model_forward(&a, in, tg, B), eb = model_forward(&b, in, tg, B);
    CHECK(ea == eb, "%s n=%d: model_forward after a step %.9g, the rows model's %.9g", method, n, (double)ea,
          (double)eb);
    free(in);
    free(tg);
    for (int k = 0; k < 2; k++) model_free(ms[k]);
}

static void test_stream_blocks_step(void) {
    const int saved = omp_get_max_threads();
    for (int i = 0; hc_variants[i]; i++) {
        stream_blocks_case(hc_variants[i]->name, 4, 36, 1, 3, 0);
        stream_blocks_case(hc_variants[i]->name, 4, 32, 2, 4, 0);
    }
    stream_blocks_case("s2hc", 2, 36, 2, 3, 0);
    stream_blocks_case("s2hc", 3, 20, 1, 2, 0);
    stream_blocks_case("mhc", 3, 33, 1, 2, 0); /* one channel past the last vector */
    if (model_bf16_built()) { /* the projection's products with bf16 operands: W' and dW permuted too */
        stream_blocks_case("s2hc", 4, 36, 1, 3, 1);
        stream_blocks_case("mhc_lite", 4, 32, 2, 4, 1);
    }
    omp_set_num_threads(saved);
}

static void test_every_method_trains(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/methods.yaml", tmp);
    write_config(cfg, "identity", 4);
    const char *names[16] = {"rc"};
    int k = 1;
    for (int i = 0; hc_variants[i]; i++) names[k++] = hc_variants[i]->name;
    for (int i = 0; i < k; i++) {
        char m[96], n[64], rn[64];
        snprintf(m, sizeof m, "residual.method=%s", names[i]);
        snprintf(n, sizeof n, "residual.n_streams=%d", strcmp(names[i], "rc") ? 4 : 1);
        snprintf(rn, sizeof rn, "m-%s", names[i]);
        const char *argv[] = {"train", cfg, "--quiet", "--set", m, "--set", n, "--set", "train.steps=60",
                              "--set", "run.name=", NULL};
        char setname[96];
        snprintf(setname, sizeof setname, "run.name=%s", rn);
        argv[10] = setname;
        int rc = train_main(11, (char **)argv);
        CHECK(rc == 0, "%s: train exit %d", names[i], rc);
        size_t rows;
        double *l = read_losses(rn, &rows);
        if (l && rows == 60) {
            double first = 0, last = 0;
            for (int j = 0; j < 5; j++) first += l[j] / 5, last += l[rows - 1 - j] / 5;
            CHECK(last < first - 1.0, "%s: loss fell only from %.3f to %.3f", names[i], first, last);
        }
        free(l);
    }
}

/* A NaN loss marks the run diverged, keeps the last good checkpoint, exits 3, no crash. */
static void test_divergence_is_recorded(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/diverge.yaml", tmp);
    write_config(cfg, "hc", 3);
    setenv("S2HC_FAULT_NAN_AT_STEP", "25", 1);
    int saved = dup(2);
    FILE *nul = freopen("/dev/null", "w", stderr);
    (void)nul;
    int rc = train_argv(cfg, "div", "--set", "train.ckpt_every=10", NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("S2HC_FAULT_NAN_AT_STEP");
    CHECK(rc == RUN_DIVERGED, "exit %d, wanted %d", rc, RUN_DIVERGED);
    char p[700], err[256];
    snprintf(p, sizeof p, "%s/runs/div/run.h5", tmp);
    h5log log;
    h5log_init(&log);
    CHECK(h5log_load(&log, p, err, sizeof err) == 0, "%s", err);
    const char *st = h5log_get_attr_str(&log, "/", "status");
    CHECK(st && !strcmp(st, "diverged"), "status %s", st ? st : "(none)");
    h5log_free(&log);
    /* the checkpoint is the last good one (step 20), and it loads */
    s2hc_config c;
    config_load(&c, cfg, NULL, 0);
    snprintf(c.method, sizeof c.method, "hc");
    gpt_model m;
    model_build(&m, &c, err, sizeof err);
    CHECK(load_weights("div", &m) == 0, "checkpoint of the last good state must load");
    model_free(&m);
    /* hc at a large learning rate: it may blow up, but the harness never crashes */
    rc = train_argv(cfg, "hc-hot", "--set", "train.lr=5", NULL);
    CHECK(rc == RUN_OK || rc == RUN_DIVERGED, "hc at lr 5: exit %d", rc);
}

/* optim_step shares all the tensors' values out among the threads of one region: with
 * one thread and with two it must give the bits of adamw_update applied tensor by tensor
 * (each with its own weight decay), parameters and both moments. */
static void test_optim_step_is_adamw_per_tensor(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(preset_apply(&c, "tiny") == 0, "tiny preset");
    snprintf(c.method, sizeof c.method, "s2hc");
    c.n_streams = 4;
    gpt_model m;
    char err[256];
    CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
    model_init(&m, 3);
    CHECK(m.n_params > 65536 && m.n_tensors > 10, "a model of many tensors: %zu values in %d", m.n_params,
          m.n_tensors);
    adamw_state o;
    optim_init(&o, &m);
    rng_t r;
    rng_seed(&r, 7);
    const size_t N = m.n_params, bytes = N * sizeof(float);
    for (size_t i = 0; i < N; i++) {
        m.grads[i] = (real)(rng_normal(&r) * 0.01);
        o.m[i] = (float)(rng_normal(&r) * 0.001);
        o.v[i] = (float)(rng_uniform(&r) * 1e-5);
    }
    float *p0 = malloc_check(bytes), *m0 = malloc_check(bytes), *v0 = malloc_check(bytes);
    float *rp = malloc_check(bytes), *rm = malloc_check(bytes), *rv = malloc_check(bytes);
    memcpy(p0, m.params, bytes), memcpy(m0, o.m, bytes), memcpy(v0, o.v, bytes);
    memcpy(rp, p0, bytes), memcpy(rm, m0, bytes), memcpy(rv, v0, bytes);
    const int t = 4;
    const double lr = 2e-3;
    int decayed = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const param_info *pi = &m.pinfo[i];
        const float wd = (pi->decay || c.decay_1d) ? (float)c.weight_decay : 0.0f;
        decayed += wd > 0;
        adamw_update(rp + pi->offset, m.grads + pi->offset, rm + pi->offset, rv + pi->offset, pi->numel, (float)lr,
                     (float)c.beta1, (float)c.beta2, (float)c.eps, wd, t);
    }
    CHECK(decayed > 0 && decayed < m.n_tensors, "tensors with and without decay: %d of %d", decayed, m.n_tensors);
    const int threads0 = omp_get_max_threads();
    for (int th = 1; th <= 2; th++) {
        omp_set_num_threads(th);
        memcpy(m.params, p0, bytes), memcpy(o.m, m0, bytes), memcpy(o.v, v0, bytes);
        o.t = t - 1;
        optim_step(&o, &m, lr, 0.5 * c.clip); /* under the clip: no scaling */
        CHECK(memcmp(m.params, rp, bytes) == 0, "%d thread(s): parameters differ from AdamW tensor by tensor", th);
        CHECK(memcmp(o.m, rm, bytes) == 0 && memcmp(o.v, rv, bytes) == 0,
              "%d thread(s): moments differ from AdamW tensor by tensor", th);
    }
    omp_set_num_threads(threads0);
    free(p0), free(m0), free(v0), free(rp), free(rm), free(rv);
    optim_free(&o);
    model_free(&m);
}

/* The schedule, by hand: warm-up (step + 1) / warmup of lr, then a cosine from lr at the
 * first step after it to min_lr at the last. */
static void test_lr_schedule(void) {
    s2hc_config c;
    config_defaults(&c);
    c.lr = 1.0, c.min_lr = 0.1, c.warmup = 4, c.steps = 15;
    const struct { int step; double lr; } want[] = {
        {0, 0.25}, {1, 0.5}, {3, 1.0}, {4, 1.0}, {9, 0.55}, {14, 0.1},
        {6, 0.1 + 0.45 * (1 + cos(M_PI * 0.2))}, {20, 0.1}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK(fabs(lr_at(&c, want[i].step) - want[i].lr) < 1e-12, "step %d: lr %.15g, want %.15g", want[i].step,
              lr_at(&c, want[i].step), want[i].lr);
    c.warmup = 0;
    CHECK(lr_at(&c, 0) == 1.0 && fabs(lr_at(&c, 14) - 0.1) < 1e-12, "no warm-up: %g at 0, %g at the last step",
          lr_at(&c, 0), lr_at(&c, 14));
    /* one step after the warm-up: it is the decay's last, at min_lr; none: the peak */
    c.warmup = 4, c.steps = 5;
    CHECK(lr_at(&c, 3) == 1.0 && lr_at(&c, 4) == 0.1, "steps = warmup + 1: %g, %g", lr_at(&c, 3), lr_at(&c, 4));
    c.steps = 4;
    CHECK(lr_at(&c, 3) == 1.0, "steps = warmup: %g at the last step", lr_at(&c, 3));
    c.warmup = 0, c.steps = 1;
    CHECK(lr_at(&c, 0) == 1.0, "one step, no warm-up: %g", lr_at(&c, 0));
}

/* Clipping: a gradient norm of 4 clip scales every gradient by 1/4 as AdamW reads it (the
 * reference scales a copy here and runs AdamW tensor by tensor), on one thread and on two,
 * and leaves the stored gradients as they were; under the clip nothing is scaled
 * (test_optim_step_is_adamw_per_tensor). */
static void test_optim_step_clips(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(preset_apply(&c, "tiny") == 0, "tiny preset");
    CHECK(c.clip > 0, "the default clip is on: %g", c.clip);
    gpt_model m;
    char err[256];
    CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
    model_init(&m, 3);
    adamw_state o;
    optim_init(&o, &m);
    rng_t r;
    rng_seed(&r, 8);
    const size_t N = m.n_params, bytes = N * sizeof(float);
    for (size_t i = 0; i < N; i++) m.grads[i] = (real)(rng_normal(&r) * 0.01);
    const double norm = 4 * c.clip;
    const float scale = (float)(c.clip / norm);
    float *rp = malloc_check(bytes), *rm = calloc(N, sizeof(float)), *rv = calloc(N, sizeof(float));
    float *g = malloc_check(bytes);
    memcpy(rp, m.params, bytes);
    for (size_t i = 0; i < N; i++) g[i] = m.grads[i] * scale;
    for (int i = 0; i < m.n_tensors; i++) {
        const param_info *pi = &m.pinfo[i];
        const float wd = (pi->decay || c.decay_1d) ? (float)c.weight_decay : 0.0f;
        adamw_update(rp + pi->offset, g + pi->offset, rm + pi->offset, rv + pi->offset, pi->numel, 1e-3f,
                     (float)c.beta1, (float)c.beta2, (float)c.eps, wd, 1);
    }
    CHECK(memcmp(g, m.grads, bytes) != 0, "the reference's gradients are scaled by %g", (double)scale);
    float *p0 = malloc_check(bytes), *g0 = malloc_check(bytes);
    memcpy(p0, m.params, bytes), memcpy(g0, m.grads, bytes);
    const int threads0 = omp_get_max_threads();
    for (int th = 1; th <= 2; th++) {
        omp_set_num_threads(th);
        memcpy(m.params, p0, bytes);
        memset(o.m, 0, bytes), memset(o.v, 0, bytes);
        o.t = 0;
        optim_step(&o, &m, 1e-3, norm);
        CHECK(memcmp(m.params, rp, bytes) == 0 && memcmp(o.m, rm, bytes) == 0 && memcmp(o.v, rv, bytes) == 0,
              "%d thread(s): a clipped step differs from AdamW on the gradients scaled by clip / norm = %g", th,
              (double)scale);
        CHECK(memcmp(m.grads, g0, bytes) == 0, "%d thread(s): the stored gradients were changed", th);
    }
    omp_set_num_threads(threads0);
    free(rp), free(rm), free(rv), free(g), free(p0), free(g0);
    optim_free(&o);
    model_free(&m);
}

/* train.grad_accum: a batch of 8 in one micro-batch and in two of 4 see the same windows
 * (the loader draws one per sequence, in order) and take the same steps: the gradient of
 * the mean loss over the 8 sequences, so the same losses and gradient norms up to float
 * rounding. */
static void test_grad_accum_is_the_batch(void) {
    char cfg[700];
    snprintf(cfg, sizeof cfg, "%s/accum.yaml", tmp);
    write_config(cfg, "s2hc", 4);
    const char *one[] = {"train", cfg, "--quiet", "--set", "train.steps=6", "--set", "train.batch=8",
                         "--set", "train.grad_accum=1", "--set", "run.name=accum1"};
    const char *two[] = {"train", cfg, "--quiet", "--set", "train.steps=6", "--set", "train.batch=4",
                         "--set", "train.grad_accum=2", "--set", "run.name=accum2"};
    CHECK(train_main(11, (char **)one) == 0, "batch 8, grad_accum 1");
    CHECK(train_main(11, (char **)two) == 0, "batch 4, grad_accum 2");
    const char *series[] = {"/train/loss", "/train/grad_norm"};
    for (int k = 0; k < 2; k++) {
        size_t na, nb;
        double *a = read_series("accum1", series[k], &na), *b = read_series("accum2", series[k], &nb);
        CHECK(na == 6 && nb == 6, "%s: %zu and %zu rows", series[k], na, nb);
        for (size_t i = 0; a && b && i < na && i < nb; i++)
            CHECK(fabs(a[i] - b[i]) <= 1e-4 * fabs(a[i]), "%s step %zu: %.7g (batch 8) vs %.7g (4 x 2)", series[k],
                  i, a[i], b[i]);
        free(a);
        free(b);
    }
}

/* eval's table row: the perplexity as exp(loss), in full up to a million, in powers of
 * ten past it (a blown-up run's 150 digits) */
static void test_eval_row(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    eval_print_row(f, EVAL_NAME_WIDTH, "val", log(20.0));
    eval_print_row(f, EVAL_NAME_WIDTH, "wiki", 345.0);
    fclose(f);
    CHECK(strstr(buf, "  val            2.9957     20.000\n") != NULL, "a plain perplexity:\n%s", buf);
    CHECK(strstr(buf, "  wiki         345.0000 6.786e+149\n") != NULL, "a huge perplexity in powers of ten:\n%s", buf);
    CHECK(len < 100, "two short lines: %zu bytes", len);
    free(buf);
}

/* eval's table with an out-of-domain corpus named in 63 bytes (data import's longest): the
 * corpus column as wide as that name, so that every row (the header's too, and one whose
 * perplexity is in powers of ten) has its loss and perplexity at the same columns; with
 * short names, the 12 columns it always had. */
static void test_eval_table_long_name(void) {
    s2hc_config c;
    config_defaults(&c);
    const char *lng = "an_out_of_domain_corpus_named_in_63_characters______________end";
    c.n_ood = 2;
    snprintf(c.ood[0], sizeof c.ood[0], "kjv");
    snprintf(c.ood[1], sizeof c.ood[1], "%s", lng);
    const int w = eval_table_width(&c);
    CHECK(w == 63, "the column fits the 63-byte name: %d", w);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    eval_print_header(f, w);
    eval_print_row(f, w, "val", 2.5);
    eval_print_row(f, w, "kjv", 3.25);
    eval_print_row(f, w, lng, 4.0);
    eval_print_row(f, w, "kjv", 345.0); /* a perplexity in powers of ten: the same columns */
    fclose(f);
    /* each line: 2 spaces, the name column, " %8.4f %10.3f": the numbers end at 2 + w + 20 */
    int lines = 0;
    for (char *l = buf, *e; (e = strchr(l, '\n')); l = e + 1, lines++) {
        CHECK(e - l == 2 + w + 20, "line %d is %d bytes, not %d (a column moved):\n%s", lines, (int)(e - l), 2 + w + 20,
              buf);
        CHECK(l[2 + w] == ' ' && l[2 + w + 1 + 8] == ' ', "line %d: the loss column starts at %d:\n%s", lines, 2 + w + 1,
              buf);
    }
    CHECK(lines == 5, "a header and 4 rows: %d lines", lines);
    CHECK(strstr(buf, "  val ") == buf + 2 + w + 20 + 1 && strstr(buf, "  2.5000     12.182\n") != NULL,
          "val's row, its numbers after the padded name:\n%s", buf);
    free(buf);
    c.n_ood = 1;
    CHECK(eval_table_width(&c) == EVAL_NAME_WIDTH, "short names: the 12 columns it always had (%d)",
          eval_table_width(&c));
}

/* eval_shard_loss: the mean cross-entropy of the next byte over evenly spaced windows
 * (start = span w / (windows - 1), span the last valid start), computed here from the
 * logits of one window at a time, in double. */
static void test_eval_loss_is_cross_entropy(void) {
    s2hc_config c;
    config_defaults(&c);
    c.n_layer = 2, c.n_head = 2, c.n_embd = 32, c.block_size = 16, c.vocab = 256, c.batch = 4;
    snprintf(c.method, sizeof c.method, "s2hc");
    c.n_streams = 4;
    gpt_model m;
    char err[512], p[700];
    CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
    model_init(&m, 11);
    model_alloc_acts(&m, 4);
    data_shard s;
    snprintf(p, sizeof p, "%s/data/synth/val.bin", tmp);
    CHECK(shard_open(&s, p, err, sizeof err) == 0, "%s", err);
    const int batches = 3, B = 4, T = c.block_size, V = c.vocab;
    const double got = eval_shard_loss(&m, &s, batches, B, 0);
    const uint64_t span = s.count - (uint64_t)T - 1, windows = (uint64_t)batches * B;
    double sum = 0;
    int in[64];
    for (uint64_t w = 0; w < windows; w++) {
        const uint64_t start = span * w / (windows - 1);
        for (int t = 0; t < T; t++) in[t] = shard_token(&s, start + t);
        model_forward(&m, in, NULL, 1);
        const real *lg = model_logits(&m);
        for (int t = 0; t < T; t++) {
            double mx = -INFINITY, z = 0;
            for (int v = 0; v < V; v++) mx = fmax(mx, lg[(size_t)t * V + v]);
            for (int v = 0; v < V; v++) z += exp(lg[(size_t)t * V + v] - mx);
            sum += mx + log(z) - lg[(size_t)t * V + shard_token(&s, start + t + 1)];
        }
    }
    const double want = sum / ((double)windows * T);
    CHECK(fabs(got - want) < 1e-5 * want, "eval_shard_loss %.8f, cross-entropy by hand %.8f", got, want);
    CHECK(span * (windows - 1) / (windows - 1) == span, "the last window starts at the last valid start");
    shard_close(&s);
    model_free(&m);
}

/* model_init: GPT-2's init, tensor by tensor (weights N(0, 0.02), the residual
 * projections c_proj N(0, 0.02 / sqrt(2 L)), LayerNorm scales 1, biases 0), and every
 * frame's method parameters from the method's init: the two frames of a block alike
 * (the init depends on the block only), and not all zero. */
static void test_model_init(void) {
    for (int mi = 0; hc_variants[mi]; mi++) {
        s2hc_config c;
        config_defaults(&c);
        c.n_layer = 3, c.n_head = 2, c.n_embd = 64, c.block_size = 16, c.vocab = 256;
        snprintf(c.method, sizeof c.method, "%s", hc_variants[mi]->name);
        c.n_streams = 4;
        gpt_model m;
        char err[256];
        CHECK(model_build(&m, &c, err, sizeof err) == 0, "%s", err);
        model_init(&m, 21);
        int checked = 0, thetas = 0;
        for (int i = 0; i < m.n_tensors; i++) {
            const param_info *pi = &m.pinfo[i];
            const real *w = m.params + pi->offset;
            const char *nm = pi->name;
            if (pi->aux) {
                const char *a = strstr(nm, "attn_hc.");
                if (!a || strstr(nm, ".norm.weight") || strstr(nm, ".proj.weight")) continue;
                char other[256];
                snprintf(other, sizeof other, "%.*smlp_hc.%s", (int)(a - nm), nm, a + 8);
                const param_info *q = model_find_param(&m, other);
                CHECK(q && q->numel == pi->numel, "%s: no %s like %s", c.method, other, nm);
                if (!q || q->numel != pi->numel) continue;
                CHECK(memcmp(w, m.params + q->offset, pi->numel * sizeof(real)) == 0, "%s: %s and %s differ at init",
                      c.method, nm, other);
                for (size_t k = 0; k < pi->numel; k++) thetas += w[k] != 0;
                continue;
            }
            if (mi > 0) continue; /* the base model's init is the same for every method */
            double s1 = 0, s2 = 0;
            for (size_t k = 0; k < pi->numel; k++) s1 += w[k], s2 += (double)w[k] * w[k];
            const double mean = s1 / pi->numel, sd = sqrt(s2 / pi->numel - mean * mean);
            const size_t len = strlen(nm);
            if (pi->rank == 2) {
                const double want = strstr(nm, "c_proj.weight") ? 0.02 / sqrt(2.0 * c.n_layer) : 0.02;
                CHECK(fabs(sd - want) < 0.05 * want && fabs(mean) < 0.1 * want, "%s: std %.5f mean %.5f, want %.5f",
                      nm, sd, mean, want);
            } else if (len > 7 && !strcmp(nm + len - 7, ".weight")) {
                CHECK(s1 == (double)pi->numel && sd == 0, "%s: LayerNorm scale not all 1", nm);
            } else {
                CHECK(s2 == 0, "%s: a bias not all 0", nm);
            }
            checked++;
        }
        if (mi == 0) CHECK(checked >= 6 * c.n_layer, "%d base tensors checked", checked);
        CHECK(thetas > 0, "%s: every method parameter is 0 at init", c.method);
        model_free(&m);
    }
}

int main(void) {
    T_NAME("test_train");
    t_setup_tmp("train", tmp, sizeof tmp); /* a fresh directory when run alone: runs never collide */
    char d[600];
    snprintf(d, sizeof d, "%s/data", tmp);
    mkdir_p(d);
    make_corpus(d);
    T_RUN(test_calloc_huge);
    T_RUN(test_optim_step_is_adamw_per_tensor);
    T_RUN(test_lr_schedule);
    T_RUN(test_optim_step_clips);
    T_RUN(test_model_init);
    T_RUN(test_eval_loss_is_cross_entropy);
    T_RUN(test_eval_row);
    T_RUN(test_eval_table_long_name);
    T_RUN(test_grad_accum_is_the_batch);
    T_RUN(test_frame_applies_H_as_rows_are_outputs);
    T_RUN(test_sliced_step_is_the_step);
    T_RUN(test_parts_are_the_sliced_step);
    T_RUN(test_frame_groups_any_threads);
    T_RUN(test_loss_falls);
    T_RUN(test_same_seed_same_losses);
    T_RUN(test_resume_is_exact);
    T_RUN(test_truncated_checkpoint_refused);
    T_RUN(test_resume_damaged_processes);
    T_RUN(test_resume_layout_refused_first);
    T_RUN(test_run_open_token_kind);
    T_RUN(test_resume_other_build);
    T_RUN(test_resume_rebuilt_corpus);
    T_RUN(test_newer_run_refused);
    T_RUN(test_open_damaged_config);
    T_RUN(test_open_empty_config);
    T_RUN(test_resume_step_past_steps);
    T_RUN(test_proj_bf16_step);
    T_RUN(test_stream_bf16_step);
    T_RUN(test_stream_blocks_step);
    T_RUN(test_every_method_trains);
    T_RUN(test_divergence_is_recorded);
    return T_END();
}
