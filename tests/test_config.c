/* test_config.c: the configuration module: defaults, a full file, every error class with
 * its exact location and key, --set overrides, cross-field validation, the YAML round
 * trip (byte-identical struct), the schema printout, docs/config.md in sync with the
 * schema, experiments/tiny.yaml, a mutation fuzz over a valid file, and the advice printed
 * when OPENBLAS_CORETYPE selects kernels older than the CPU. */
#include "harness/config.h"
#include "harness/util.h"
#include "tests/t.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <termios.h>
#include <unistd.h>

/* ---- scratch files and stderr capture ------------------------------------------------ */

static char tmp_dir[512];

static void setup_tmp(void) { t_setup_tmp("config", tmp_dir, sizeof tmp_dir); }

/* Write text to tmp_dir/name; the full path goes to path. */
static void write_file(const char *name, const char *text, char *path, size_t len) {
    t_write_file(tmp_dir, name, text, path, len);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0) {
        n += got;
        if (n + 1 == cap) { cap *= 2; buf = realloc(buf, cap); }
    }
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* What a call printed on stderr: fd 2 goes to a pipe around the call (messages are one
 * line, far below the pipe's capacity, so the call never blocks). */
static char captured[8192];
static int saved_fd = -1, pipe_rd = -1;
static void capture_begin(void) {
    int p[2];
    if (pipe(p) != 0) { perror("pipe"); exit(1); }
    fflush(stderr);
    saved_fd = dup(2);
    dup2(p[1], 2);
    close(p[1]);
    pipe_rd = p[0];
}
static void capture_end(void) {
    fflush(stderr);
    dup2(saved_fd, 2); /* closes the last write end: the reader sees EOF */
    close(saved_fd);
    size_t n = 0;
    ssize_t got;
    while (n + 1 < sizeof captured && (got = read(pipe_rd, captured + n, sizeof captured - 1 - n)) > 0) n += (size_t)got;
    captured[n] = '\0';
    close(pipe_rd);
}
#define CAPTURE(rc, call) do { capture_begin(); rc = (call); capture_end(); } while (0)

static int count_lines(const char *s) {
    int n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Every key of the spec, in schema order. */
static const char *const all_keys[] = {
    "model.n_layer", "model.n_head", "model.n_embd", "model.block_size", "model.vocab",
    "model.bias", "model.gelu",
    "residual.method", "residual.n_streams", "residual.sinkhorn_iters", "residual.sinkhorn_order",
    "residual.lite_offset", "residual.lite_offset_value", "residual.core", "residual.init", "residual.proj_init",
    "residual.proj_precision", "residual.stream_precision",
    "train.batch", "train.grad_accum", "train.steps", "train.lr", "train.min_lr", "train.min_lr_ratio", "train.warmup",
    "train.weight_decay", "train.decay_1d", "train.beta1", "train.beta2", "train.eps", "train.clip",
    "train.seed", "train.eval_every", "train.eval_batches", "train.eval_ood", "train.ckpt_every", "train.log_every", "train.threads",
    "train.parallel", "train.init_from",
    "data.dir", "data.train", "data.ood", "run.name", "run.out", "run.backend", "run.precision", "probe.every",
    "probe.final_samples",
    NULL};

/* ---- defaults ------------------------------------------------------------------------ */

static void test_defaults(void) {
    s2hc_config c;
    config_defaults(&c);
    CHECK(c.n_layer == 4 && c.n_head == 4 && c.n_embd == 128 && c.block_size == 128 && c.vocab == 256, "model");
    CHECK(strcmp(c.method, "s2hc") == 0 && c.n_streams == 4 && c.sinkhorn_iters == 20, "residual");
    CHECK(strcmp(c.sinkhorn_order, "row_col") == 0 && strcmp(c.lite_offset, "fixed") == 0, "residual enums");
    CHECK(c.lite_offset_value == -8.0, "lite_offset_value %g", c.lite_offset_value);
    CHECK(strcmp(c.proj_precision, "fp32") == 0, "proj_precision %s", c.proj_precision);
    CHECK(strcmp(c.stream_precision, "fp32") == 0, "stream_precision %s", c.stream_precision);
    CHECK(strcmp(c.core, "cayley") == 0 && strcmp(c.init, "tanh4") == 0 && strcmp(c.proj_init, "zero") == 0, "s2hc");
    CHECK(c.batch == 16 && c.grad_accum == 1 && c.steps == 1000 && c.warmup == 100, "train ints");
    CHECK(c.lr == 1e-3 && c.min_lr == 1e-4 && c.weight_decay == 0.1 && c.decay_1d == 0, "train reals");
    CHECK(c.beta1 == 0.9 && c.beta2 == 0.95 && c.eps == 1e-8 && c.clip == 1.0, "adam");
    CHECK(c.seed == 1337 && c.eval_every == 250 && c.eval_batches == 8 && c.ckpt_every == 500, "cadence");
    CHECK(c.log_every == 10 && c.threads == 0, "log/threads");
    CHECK(strcmp(c.data_dir, "data") == 0 && strcmp(c.train_corpus, "docs") == 0, "data");
    CHECK(c.n_ood == 5, "n_ood %d", c.n_ood);
    const char *ood[] = {"perldoc", "manpages", "foldoc", "fortunes", "kjv"};
    for (int i = 0; i < 5 && i < c.n_ood; i++) CHECK(strcmp(c.ood[i], ood[i]) == 0, "ood[%d] %s", i, c.ood[i]);
    CHECK(c.name[0] == '\0' && strcmp(c.out_dir, "runs") == 0 && strcmp(c.backend, "auto") == 0, "run");
    CHECK(c.probe_every == 100 && c.final_samples == 256, "probe");
    CHECK(config_validate(&c, "defaults") == 0, "defaults must validate");

    /* config_load without a file is the defaults, byte for byte */
    s2hc_config d;
    memset(&d, 0x5A, sizeof d);
    int rc;
    CAPTURE(rc, config_load(&d, NULL, NULL, 0));
    CHECK(rc == 0 && memcmp(&c, &d, sizeof c) == 0, "config_load(NULL) rc %d: %s", rc, captured);

    char name[128];
    config_run_name(&c, name, sizeof name);
    CHECK(strcmp(name, "s2hc-n4-s1337") == 0, "derived run name %s", name);
    strcpy(c.name, "mine");
    config_run_name(&c, name, sizeof name);
    CHECK(strcmp(name, "mine") == 0, "explicit run name %s", name);
}

/* ---- a full valid file --------------------------------------------------------------- */

static const char *full_yaml =
    "# every key, none at its default\n"
    "model:\n"
    "  n_layer: 6\n  n_head: 3\n  n_embd: 96\n  block_size: 32\n  vocab: 512\n"
    "residual:\n"
    "  method: mhc_lite\n  n_streams: 3\n  sinkhorn_iters: 7\n  sinkhorn_order: col_row\n"
    "  lite_offset: scaled\n  lite_offset_value: -6.5\n  core: expm\n  init: exact\n  proj_init: normal\n"
    "train:\n"
    "  batch: 4\n  grad_accum: 2\n  steps: 50\n  lr: 6e-4\n  min_lr: 6.0e-5\n  warmup: 5\n"
    "  weight_decay: 0.0\n  decay_1d: true\n  beta1: 0.8\n  beta2: 0.99\n  eps: 1e-6\n  clip: 0\n"
    "  seed: 18446744073709551615\n  eval_every: 0\n  eval_batches: 3\n  ckpt_every: 0\n  log_every: 1\n"
    "  threads: 2\n"
    "data:\n"
    "  dir: /var/tmp/shards\n  train: gcide\n"
    "  ood:\n    - kjv\n    - \"foldoc\"\n"
    "run:\n  name: my-run_1.2\n  out: 'runs dir'\n  backend: cpu\n"
    "probe: {every: 0, final_samples: 1024}\n";

static void check_full(const s2hc_config *c) {
    CHECK(c->n_layer == 6 && c->n_head == 3 && c->n_embd == 96 && c->block_size == 32 && c->vocab == 512, "model");
    CHECK(strcmp(c->method, "mhc_lite") == 0 && c->n_streams == 3 && c->sinkhorn_iters == 7, "residual");
    CHECK(strcmp(c->sinkhorn_order, "col_row") == 0 && strcmp(c->lite_offset, "scaled") == 0, "orders");
    CHECK(c->lite_offset_value == -6.5 && strcmp(c->core, "expm") == 0 && strcmp(c->init, "exact") == 0, "s2hc");
    CHECK(strcmp(c->proj_init, "normal") == 0, "proj_init");
    CHECK(c->batch == 4 && c->grad_accum == 2 && c->steps == 50 && c->warmup == 5, "train ints");
    CHECK(c->lr == 6e-4 && c->min_lr == 6e-5 && c->weight_decay == 0.0 && c->decay_1d == 1, "train reals");
    CHECK(c->beta1 == 0.8 && c->beta2 == 0.99 && c->eps == 1e-6 && c->clip == 0.0, "adam");
    CHECK(c->seed == UINT64_MAX, "seed %" PRIu64, c->seed);
    CHECK(c->eval_every == 0 && c->eval_batches == 3 && c->ckpt_every == 0 && c->log_every == 1, "cadence");
    CHECK(c->threads == 2, "threads");
    CHECK(strcmp(c->data_dir, "/var/tmp/shards") == 0 && strcmp(c->train_corpus, "gcide") == 0, "data");
    CHECK(c->n_ood == 2 && strcmp(c->ood[0], "kjv") == 0 && strcmp(c->ood[1], "foldoc") == 0, "ood");
    CHECK(strcmp(c->name, "my-run_1.2") == 0 && strcmp(c->out_dir, "runs dir") == 0, "run");
    CHECK(strcmp(c->backend, "cpu") == 0 && c->probe_every == 0 && c->final_samples == 1024, "backend/probe");
}

static void test_full_file(void) {
    char path[600];
    write_file("full.yaml", full_yaml, path, sizeof path);
    s2hc_config c;
    int rc;
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0, "rc %d: %s", rc, captured);
    CHECK(captured[0] == '\0', "stderr not empty: %s", captured);
    check_full(&c);

    /* Other spellings of the same things: dotted keys at the top level, comma lists,
     * empty sections, an empty file, a file of comments. */
    write_file("dotted.yaml",
               "train.lr: 0.01\nmodel:\n  n_layer: 3\ndata.ood: kjv, foldoc,perldoc\nprobe:\nrun: ~\n", path,
               sizeof path);
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0, "rc %d: %s", rc, captured);
    CHECK(c.lr == 0.01 && c.n_layer == 3 && c.n_ood == 3 && strcmp(c.ood[2], "perldoc") == 0, "dotted/commas");
    write_file("emptylist.yaml", "data:\n  ood: []\n", path, sizeof path);
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0 && c.n_ood == 0, "empty list rc %d n_ood %d", rc, c.n_ood);

    s2hc_config d;
    config_defaults(&d);
    write_file("empty.yaml", "", path, sizeof path);
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0 && memcmp(&c, &d, sizeof c) == 0, "empty file: rc %d %s", rc, captured);
    write_file("comments.yaml", "# nothing here\n\n# at all\n", path, sizeof path);
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0 && memcmp(&c, &d, sizeof c) == 0, "comments only: rc %d %s", rc, captured);
}

/* ---- every error class ---------------------------------------------------------------- */

typedef struct {
    const char *yaml;
    const char *loc;     /* "LINE:COL" */
    const char *key;     /* NULL for malformed YAML */
    const char *problem; /* a substring of the message */
} err_case;

static const err_case err_cases[] = {
    /* unknown keys and sections, with suggestions */
    {"train:\n  lrr: 0.1\n", "2:3", "train.lrr", "unknown key (did you mean 'train.lr'?)"},
    {"model:\n  lr: 0.1\n", "2:3", "model.lr", "unknown key (did you mean 'train.lr'?)"},
    {"model:\n  nlayer: 2\n", "2:3", "model.nlayer", "did you mean 'model.n_layer'?"},
    {"train:\n  warmup_steps: 2\n", "2:3", "train.warmup_steps", "did you mean 'train.warmup'?"},
    {"data:\n  data_dir: x\n", "2:3", "data.data_dir", "did you mean 'data.dir'?"},
    {"modle:\n  n_layer: 2\n", "1:1", "modle", "unknown section (did you mean 'model'?)"},
    {"model:\n  n_layer: 2\nsweep:\n  train.seed: [1, 2]\n", "3:1", "sweep", "a grid file's key, not a config section: run a grid with `s2hc grid"},
    {"preset: small\n", "1:1", "preset", "a grid file's key"},
    {"lr: 0.1\n", "1:1", "lr", "did you mean 'train.lr'?"},
    {"train:\n  frobnicate: 1\n", "2:3", "train.frobnicate", "unknown key (`s2hc help config` lists them)"},
    {"train.lrr: 1\n", "1:1", "train.lrr", "did you mean 'train.lr'?"},
    /* wrong types */
    {"model:\n  n_layer: abc\n", "2:12", "model.n_layer", "expected an integer, got 'abc'"},
    {"train:\n  steps: 1.5\n", "2:10", "train.steps", "expected an integer, got '1.5'"},
    {"train:\n  steps: \"5\"\n", "2:10", "train.steps", "expected an integer, got the quoted string \"5\""},
    {"train:\n  steps:\n", "2:9", "train.steps", "expected an integer, got nothing"},
    {"train:\n  lr: fast\n", "2:7", "train.lr", "expected a number, got 'fast'"},
    {"train:\n  lr: nan\n", "2:7", "train.lr", "expected a finite number"},
    {"train:\n  lr: 0x1p-10\n", "2:7", "train.lr", "expected a decimal number, got '0x1p-10'"},
    {"train:\n  lr: \"0.1\"\n", "2:7", "train.lr", "expected a number, got the quoted string \"0.1\""},
    {"train:\n  min_lr: '0'\n", "2:11", "train.min_lr", "expected a number, got the quoted string \"0\""},
    {"train:\n  weight_decay: 0X1\n", "2:17", "train.weight_decay", "expected a decimal number"},
    {"train:\n  decay_1d: maybe\n", "2:13", "train.decay_1d", "expected true or false, got 'maybe'"},
    {"train:\n  seed: -1\n", "2:9", "train.seed", "expected a non-negative integer, got '-1'"},
    {"train:\n  lr: [0.1, 0.2]\n", "2:7", "train.lr", "expected a single value, got a list"},
    {"train:\n  batch:\n    - 4\n", "3:5", "train.batch", "expected a single value, got a list"},
    {"train:\n  lr:\n    a: 1\n", "3:5", "train.lr", "expected a single value, got a mapping"},
    {"train: 5\n", "1:8", "train", "expected a mapping of keys, got a value"},
    {"data:\n  ood:\n    a: 1\n", "3:5", "data.ood", "expected a list of names, got a mapping"},
    {"data:\n  ood: [kjv, [a]]\n", "2:14", "data.ood", "got a list as item 2"},
    /* out of range */
    {"residual:\n  n_streams: 9\n", "2:14", "residual.n_streams", "9 is out of range: must be in 1..8"},
    {"model:\n  n_layer: 0\n", "2:12", "model.n_layer", "0 is out of range: must be in 1..128"},
    {"train:\n  steps: 99999999999999999999\n", "2:10", "train.steps", "out of range: must be at most 2147483647"},
    {"train:\n  steps: 2147483648\n", "2:10", "train.steps", "2147483648 is out of range: must be at most 2147483647"},
    {"train:\n  steps: 0\n", "2:10", "train.steps", "0 is out of range: must be >= 1"},
    {"train:\n  warmup: -99999999999999999999\n", "2:11", "train.warmup", "out of range: must be >= 0"},
    {"train:\n  lr: 0\n", "2:7", "train.lr", "0 is out of range: must be in (0, 10]"},
    {"train:\n  beta2: 1.0\n", "2:10", "train.beta2", "1 is out of range: must be in [0, 1)"},
    {"train:\n  lr: 1e999\n", "2:7", "train.lr", "out of range"},
    {"train:\n  seed: 18446744073709551616\n", "2:9", "train.seed", "out of range"},
    {"model:\n  vocab: 1\n", "2:10", "model.vocab", "must be in 2..65536"},
    /* enums, names, strings, lists */
    {"residual:\n  method: s3hc\n", "2:11", "residual.method",
     "'s3hc' is not one of: rc, identity, hc, mhc, mhc_lite, kromhc, orthogonal, s2hc, s2hc_rot"},
    {"run:\n  backend: gpu\n", "2:12", "run.backend", "'gpu' is not one of: auto, cpu, cuda"},
    {"residual:\n  method:\n", "2:10", "residual.method", "expected one of: rc,"},
    {"run:\n  name: ../etc\n", "2:9", "run.name", "is not a valid name"},
    {"run:\n  name: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "2:9", "run.name",
     "is too long: 72 bytes, at most 63"},
    {"run:\n  out: \"\"\n", "2:8", "run.out", "must not be empty"},
    {"run:\n  out: \"a\\x01b\"\n", "2:8", "run.out", "contains a control character"},
    {"data:\n  train: \"\"\n", "2:10", "data.train", "must not be empty"},
    {"data:\n  ood: [kjv, \"a b\"]\n", "2:14", "data.ood", "'a b' is not a valid name"},
    {"data:\n  ood: [kjv, foldoc, kjv]\n", "2:22", "data.ood", "'kjv' is listed twice"},
    {"data:\n  ood: [a, b, c, d, e, f, g, h, i]\n", "2:8", "data.ood", "too many items: at most 8"},
    {"data:\n  ood: a,,b\n", "2:8", "data.ood", "item 2 of the list is empty"},
    /* duplicates */
    {"train:\n  lr: 0.1\n  steps: 10\n  lr: 0.2\n", "4:3", "train.lr", "duplicate key (first set at 2:3)"},
    {"train:\n  lr: 0.1\ntrain.lr: 0.2\n", "3:1", "train.lr", "duplicate key (first set at 2:3)"},
    {"train:\n  lr: 0.1\ntrain:\n  steps: 10\n", "3:1", "train", "duplicate section (first at 1:1)"},
    /* malformed YAML: libyaml's problem at its line:col */
    {"train:\n  lr: 0.1\n steps: 5\n", "3:2", NULL, "did not find expected key"},
    {"train:\n  lr: [0.1\n", "3:1", NULL, "did not find expected ',' or ']'"},
    {"train:\n\tlr: 0.1\n", "2:1", NULL, "found character that cannot start any token"},
    {"train:\n  lr: \"0.1\n", "3:1", NULL, "found unexpected end of stream"},
    {"train:\n  lr: *x\n", "2:7", NULL, "found undefined alias"},
    {"run:\n  name: a\xff\n", "2:10", NULL, "invalid leading UTF-8 octet (byte 0xff)"},
    {"\xEF\xBB\xBFtrain: \xe9\n", "1:8", NULL, "UTF-8"},     /* the byte-order mark is not a column */
    {"train:\r  lr: \xe9\r", "2:7", NULL, "UTF-8"},           /* CR alone ends a line */
    {"train:\r\n  lr: \xe9\r\n", "2:8", NULL, "trailing UTF-8 octet (byte 0x0d)"}, /* CR LF one break */
    {"train:\n  lr: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
     "2:71", NULL, "values nested more than 64 deep"},
    /* an apostrophe inside a plain scalar opens no quote for the depth count */
    {"run:\n  name: o'brien\ntrain:\n  lr: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n", "4:71", NULL, "values nested more than 64 deep"},
    {"train:\n  lr: 0.1\n---\ntrain:\n  lr: 0.2\n", "4:1", NULL, "found a second one"},
    {"train:\n  lr: !!str 1\n", "2:7", NULL, "YAML tags (!!str, !!int, ...) have no use"},
    {"# \xc3\xa9t\xc3\xa9\ntrain:\n  lr: &a !!float 1\n", "3:7", NULL, "YAML tags"},
    {"\xEF\xBB\xBFtrain:\n  lr: !!str 1\n", "2:7", NULL, "YAML tags"},
    {"run:\n  name: !x tiny\n", "2:9", NULL, "YAML tags"},
    {"train:\n  lr: &a # a comment, then the tag\n    !!str 2e-3\n", "2:7", NULL, "YAML tags"},
    {"- model\n- train\n", "1:1", NULL, "expected a mapping of sections"},
    {"42\n", "1:1", NULL, "expected a mapping of sections"},
};

static void test_errors(void) {
    int n = (int)(sizeof err_cases / sizeof err_cases[0]);
    for (int i = 0; i < n; i++) {
        const err_case *e = &err_cases[i];
        char name[64], path[600], prefix[800];
        snprintf(name, sizeof name, "err%02d.yaml", i);
        write_file(name, e->yaml, path, sizeof path);
        s2hc_config c, before;
        memset(&c, 0xAB, sizeof c);
        memcpy(&before, &c, sizeof c);
        int rc;
        CAPTURE(rc, config_load(&c, path, NULL, 0));
        if (e->key) snprintf(prefix, sizeof prefix, "s2hc: error: %s:%s: key '%s': ", path, e->loc, e->key);
        else snprintf(prefix, sizeof prefix, "s2hc: error: %s:%s: ", path, e->loc);
        CHECK(rc == 2, "case %d: rc %d", i, rc);
        CHECK(strncmp(captured, prefix, strlen(prefix)) == 0, "case %d: want prefix \"%s\", got \"%s\"", i, prefix,
              captured);
        CHECK(strstr(captured, e->problem) != NULL, "case %d: want \"%s\" in \"%s\"", i, e->problem, captured);
        CHECK(count_lines(captured) == 1, "case %d: %d lines: %s", i, count_lines(captured), captured);
        CHECK(memcmp(&c, &before, sizeof c) == 0, "case %d: the struct was modified on error", i);
        if (strstr(e->problem, "help config")) CHECK(!strstr(captured, "did you mean"), "case %d: no suggestion", i);
    }
}

static void test_missing_file(void) {
    char path[600], want[800];
    snprintf(path, sizeof path, "%s/no-such-file.yaml", tmp_dir);
    s2hc_config c;
    int rc;
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    snprintf(want, sizeof want, "s2hc: error: %s: cannot read: %s\n", path, strerror(ENOENT));
    CHECK(rc == 2 && strcmp(captured, want) == 0, "rc %d: got \"%s\" want \"%s\"", rc, captured, want);
    CAPTURE(rc, config_load(&c, tmp_dir, NULL, 0));
    snprintf(want, sizeof want, "s2hc: error: %s: cannot read: %s\n", tmp_dir, strerror(EISDIR));
    CHECK(rc == 2 && strcmp(captured, want) == 0, "rc %d: got \"%s\" want \"%s\"", rc, captured, want);
}

/* ---- --set ----------------------------------------------------------------------------- */

static void test_set(void) {
    s2hc_config c;
    config_defaults(&c);
    int rc;
    CAPTURE(rc, config_set(&c, "train.lr=3e-4"));
    CHECK(rc == 0 && c.lr == 3e-4, "lr rc %d %s", rc, captured);
    CAPTURE(rc, config_set(&c, "data.ood=[kjv, foldoc]"));
    CHECK(rc == 0 && c.n_ood == 2 && strcmp(c.ood[1], "foldoc") == 0, "flow list rc %d %s", rc, captured);
    CAPTURE(rc, config_set(&c, "data.ood=perldoc,kjv,fortunes"));
    CHECK(rc == 0 && c.n_ood == 3 && strcmp(c.ood[2], "fortunes") == 0, "comma list rc %d %s", rc, captured);
    CAPTURE(rc, config_set(&c, "data.ood=kjv"));
    CHECK(rc == 0 && c.n_ood == 1 && strcmp(c.ood[0], "kjv") == 0 && c.ood[1][0] == 0, "one item %d", c.n_ood);
    CAPTURE(rc, config_set(&c, "data.ood=[]"));
    CHECK(rc == 0 && c.n_ood == 0, "empty list %d", c.n_ood);
    CAPTURE(rc, config_set(&c, "train.decay_1d=true"));
    CHECK(rc == 0 && c.decay_1d == 1, "bool");
    CAPTURE(rc, config_set(&c, "train.seed=18446744073709551615"));
    CHECK(rc == 0 && c.seed == UINT64_MAX, "seed");
    CAPTURE(rc, config_set(&c, "run.name=abc"));
    CAPTURE(rc, config_set(&c, "run.name="));
    CHECK(rc == 0 && c.name[0] == '\0', "empty name rc %d", rc);
    CAPTURE(rc, config_set(&c, "run.out=\"with space: and # hash\""));
    CHECK(rc == 0 && strcmp(c.out_dir, "with space: and # hash") == 0, "quoted path: %s", c.out_dir);
    CAPTURE(rc, config_set(&c, "residual.method = hc"));
    CHECK(rc == 0 && strcmp(c.method, "hc") == 0, "spaces around '=' rc %d %s", rc, captured);
    /* 3e-4's exact decimal expansion (60 digits) is the number; -0 is 0 */
    CAPTURE(rc, config_set(&c, "train.lr=0.0002999999999999999737189393389513725196593441069126129150390625"));
    CHECK(rc == 0 && c.lr == 3e-4, "a long exact decimal: rc %d %s", rc, captured);
    CAPTURE(rc, config_set(&c, "train.clip=-0"));
    CHECK(rc == 0 && c.clip == 0 && !signbit(c.clip), "-0 stored as 0: rc %d, %g", rc, c.clip);

    static const struct {
        const char *set, *msg;
    } bad[] = {
        {"train.steps=abc", "s2hc: error: --set train.steps=abc: key 'train.steps': expected an integer, got 'abc'\n"},
        {"train.lrr=1", "s2hc: error: --set train.lrr=1: key 'train.lrr': unknown key (did you mean 'train.lr'?)\n"},
        {"train.lr", "s2hc: error: --set train.lr: expected KEY=VALUE, e.g. --set train.lr=3e-4\n"},
        {"=5", "s2hc: error: --set =5: expected KEY=VALUE, e.g. --set train.lr=3e-4\n"},
        {"train=1", "s2hc: error: --set train=1: key 'train': is a section: set one of its keys, e.g. --set train.batch=16\n"},
        {"train.lr=[1, 2]", "s2hc: error: --set train.lr=[1, 2]: key 'train.lr': expected a single value, got a list\n"},
        {"run.name=a: b", "s2hc: error: --set run.name=a: b: key 'run.name': expected a single value, got a mapping\n"},
        {"residual.n_streams=0",
         "s2hc: error: --set residual.n_streams=0: key 'residual.n_streams': 0 is out of range: must be in 1..8\n"},
        {"residual.method=s3hc", "s2hc: error: --set residual.method=s3hc: key 'residual.method': 's3hc' is not one of: "
                                 "rc, identity, hc, mhc, mhc_lite, kromhc, orthogonal, s2hc, s2hc_rot\n"},
        {"data.ood=[a,", "s2hc: error: --set data.ood=[a,: key 'data.ood': cannot parse the value: "},
        {"train.lr=!!str 1", "s2hc: error: --set train.lr=!!str 1: key 'train.lr': YAML tags (!!str, !!int, ...) have no "
                             "use in a value: write the value alone\n"},
        {"data.ood=a,a", "s2hc: error: --set data.ood=a,a: key 'data.ood': 'a' is listed twice\n"},
        {"train.steps=1\n2", "s2hc: error: --set train.steps=1?2: key 'train.steps': "},
        {"train.min_lr=1e-400", "s2hc: error: --set train.min_lr=1e-400: key 'train.min_lr': 1e-400 is too small for a "
                                "double (it would be 0: write 0)\n"},
        {"train.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1",
         "s2hc: error: --set train.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa=1: key 'train.aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...': "
         "unknown key (see `s2hc config`)\n"},
        {"train.lr=\"0.1\"", "s2hc: error: --set train.lr=\"0.1\": key 'train.lr': expected a number, got the quoted "
                             "string \"0.1\"\n"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s2hc_config before;
        memcpy(&before, &c, sizeof c);
        CAPTURE(rc, config_set(&c, bad[i].set));
        CHECK(rc == 2, "%s: rc %d", bad[i].set, rc);
        CHECK(strncmp(captured, bad[i].msg, strlen(bad[i].msg)) == 0, "%s:\n got  %s want %s", bad[i].set, captured,
              bad[i].msg);
        CHECK(count_lines(captured) == 1, "%s: %d lines", bad[i].set, count_lines(captured));
        CHECK(memcmp(&c, &before, sizeof c) == 0, "%s: struct modified on error", bad[i].set);
    }
}

static void test_load_with_sets(void) {
    char path[600];
    write_file("sets.yaml", "train:\n  steps: 40\n  warmup: 5\n  lr: 0.01\nresidual:\n  method: rc\n  n_streams: 1\n", path,
               sizeof path);
    s2hc_config c;
    int rc;
    const char *ok[] = {"train.steps=10", "train.steps=20", "model.n_layer=3"};
    CAPTURE(rc, config_load(&c, path, ok, 3));
    CHECK(rc == 0, "rc %d %s", rc, captured);
    CHECK(c.steps == 20 && c.lr == 0.01 && c.n_layer == 3 && strcmp(c.method, "rc") == 0, "overrides in order");

    /* an override error: the struct is untouched and the message names --set */
    s2hc_config before;
    memset(&c, 0x11, sizeof c);
    memcpy(&before, &c, sizeof c);
    const char *bad[] = {"train.steps=10", "train.steps=abc"};
    CAPTURE(rc, config_load(&c, path, bad, 2));
    CHECK(rc == 2 && strstr(captured, "s2hc: error: --set train.steps=abc: key 'train.steps': expected an integer"),
          "rc %d: %s", rc, captured);
    CHECK(memcmp(&c, &before, sizeof c) == 0, "struct modified on error");

    /* validation runs after the overrides: rc with 4 streams */
    const char *cross[] = {"residual.n_streams=4"};
    CAPTURE(rc, config_load(&c, path, cross, 1));
    CHECK(rc == 2 && strstr(captured, "key 'residual.n_streams'") && strstr(captured, "rc"), "rc %d: %s", rc, captured);
    CHECK(strstr(captured, path) != NULL, "names the file: %s", captured);
    /* ... and a set can repair what the file broke */
    write_file("broken.yaml", "model:\n  n_embd: 100\n  n_head: 3\n", path, sizeof path);
    const char *fix[] = {"model.n_head=4"};
    CAPTURE(rc, config_load(&c, path, fix, 1));
    CHECK(rc == 0 && c.n_embd == 100 && c.n_head == 4, "rc %d: %s", rc, captured);
}

/* Spellings the docs promise: comma lists with blanks around the commas, and 1/0 as
 * booleans, through --set and through a file. */
static void test_spellings(void) {
    s2hc_config c;
    config_defaults(&c);
    int rc;
    CAPTURE(rc, config_set(&c, "data.ood=kjv , foldoc"));
    CHECK(rc == 0 && c.n_ood == 2, "blanks around a comma: rc %d n_ood %d %s", rc, c.n_ood, captured);
    CHECK(strcmp(c.ood[0], "kjv") == 0 && strcmp(c.ood[1], "foldoc") == 0, "items '%s' '%s'", c.ood[0], c.ood[1]);
    CAPTURE(rc, config_set(&c, "data.ood=perldoc\t,kjv  ,  fortunes  "));
    CHECK(rc == 0 && c.n_ood == 3 && strcmp(c.ood[0], "perldoc") == 0 && strcmp(c.ood[1], "kjv") == 0 &&
              strcmp(c.ood[2], "fortunes") == 0,
          "tabs and blanks: rc %d n_ood %d %s", rc, c.n_ood, captured);
    char path[600];
    write_file("commas.yaml", "data:\n  ood: kjv , foldoc\n", path, sizeof path);
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0 && c.n_ood == 2 && strcmp(c.ood[0], "kjv") == 0 && strcmp(c.ood[1], "foldoc") == 0,
          "file: rc %d n_ood %d '%s' %s", rc, c.n_ood, c.ood[0], captured);

    /* booleans: 0 then 1 (model.bias defaults to true, train.decay_1d to false) */
    static const char *const bools[] = {"model.bias", "train.decay_1d"};
    for (int b = 0; b < 2; b++) {
        int *field = b == 0 ? &c.bias : &c.decay_1d;
        for (int v = 0; v <= 1; v++) {
            for (int first = 0; first <= 1; first++) {
                char set[64];
                config_defaults(&c);
                *field = first; /* start from the other value too */
                snprintf(set, sizeof set, "%s=%d", bools[b], v);
                CAPTURE(rc, config_set(&c, set));
                CHECK(rc == 0 && *field == v, "--set %s: rc %d value %d %s", set, rc, *field, captured);
            }
            char yaml[96];
            const char *dot = strchr(bools[b], '.');
            snprintf(yaml, sizeof yaml, "%.*s:\n  %s: %d\n", (int)(dot - bools[b]), bools[b], dot + 1, v);
            write_file("bool.yaml", yaml, path, sizeof path);
            CAPTURE(rc, config_load(&c, path, NULL, 0));
            CHECK(rc == 0 && *field == v, "file %s: %d: rc %d value %d %s", bools[b], v, rc, *field, captured);
        }
    }
}

/* Every int key of the schema (read from config_print_schema's "LO..HI" column) takes its
 * bounds, through --set and a file, and refuses HI + 1 with the range in the message; the
 * ">= LO" keys take INT_MAX. */
static void test_int_bounds(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_schema(f);
    fclose(f);
    int n = 0, saw_streams = 0, saw_layer = 0, saw_accum = 0;
    for (const char *p = buf; *p; p += strcspn(p, "\n") + (p[strcspn(p, "\n")] != 0)) {
        char line[256], key[64], type[16], def[32], range[64];
        long long lo, hi;
        snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p); /* one line: sscanf skips newlines */
        if (sscanf(line, " %63s %15s %31s %63s", key, type, def, range) != 4 || strcmp(type, "int") != 0) continue;
        if (!strcmp(range, ">=")) { /* no upper bound but the int's: INT_MAX is taken, one more is not */
            s2hc_config c;
            config_defaults(&c);
            char set[96];
            int rc;
            snprintf(set, sizeof set, "%s=2147483647", key);
            CAPTURE(rc, config_set(&c, set));
            CHECK(rc == 0, "--set %s: rc %d %s", set, rc, captured);
            snprintf(set, sizeof set, "%s=2147483648", key);
            CAPTURE(rc, config_set(&c, set));
            CHECK(rc == 2 && strstr(captured, "must be at most 2147483647"), "--set %s: rc %d %s", set, rc, captured);
            continue;
        }
        if (sscanf(range, "%lld..%lld", &lo, &hi) != 2) continue;
        n++;
        saw_streams |= !strcmp(key, "residual.n_streams") && hi == 8;
        saw_layer |= !strcmp(key, "model.n_layer");
        saw_accum |= !strcmp(key, "train.grad_accum");
        const char *dot = strchr(key, '.');
        for (int which = 0; which < 3; which++) {
            long long v = which == 0 ? lo : which == 1 ? hi : hi + 1;
            s2hc_config c;
            config_defaults(&c);
            char set[96], yaml[128], path[600], want[160];
            snprintf(set, sizeof set, "%s=%lld", key, v);
            int rc;
            CAPTURE(rc, config_set(&c, set));
            if (which < 2) CHECK(rc == 0, "--set %s (the bound of %s): rc %d %s", set, range, rc, captured);
            else {
                snprintf(want, sizeof want, "%lld is out of range: must be in %s", v, range);
                CHECK(rc == 2 && strstr(captured, want), "--set %s: rc %d %s", set, rc, captured);
            }
            /* a file, with what the cross-field checks need (n_embd 1 with 1 head, 1 stream
             * with rc) */
            snprintf(yaml, sizeof yaml, "%.*s:\n  %s: %lld\n", (int)(dot - key), key, dot + 1, v);
            write_file("bound.yaml", yaml, path, sizeof path);
            const char *fix[1] = {NULL};
            if (!strcmp(key, "model.n_embd")) fix[0] = "model.n_head=1";
            if (!strcmp(key, "residual.n_streams") && v == 1) fix[0] = "residual.method=rc";
            const int fixn = fix[0] != NULL;
            CAPTURE(rc, config_load(&c, path, fix, fixn));
            if (which < 2) CHECK(rc == 0, "file %s = %lld: rc %d %s", key, v, rc, captured);
            else CHECK(rc == 2 && strstr(captured, want), "file %s = %lld: rc %d %s", key, v, rc, captured);
        }
    }
    CHECK(n >= 12 && saw_streams && saw_layer && saw_accum, "parsed %d int keys with a range from the schema", n);
    free(buf);
}

/* ---- cross-field validation ------------------------------------------------------------ */

static void test_validate(void) {
    s2hc_config c;
    int rc;
    static const struct {
        const char *sets[3];
        const char *key, *msg;
    } cases[] = {
        {{"model.n_embd=100", "model.n_head=3"}, "model.n_embd", "100 is not divisible by model.n_head (3)"},
        {{"residual.method=rc"}, "residual.n_streams", "residual.method rc is the single-stream residual: needs n_streams 1, got 4"},
        {{"residual.n_streams=1"}, "residual.n_streams", "residual.method s2hc needs at least 2 streams, got 1"},
        {{"residual.method=mhc", "residual.n_streams=1"}, "residual.n_streams", "residual.method mhc needs at least 2 streams, got 1 (use rc for 1)"},
        {{"train.min_lr=0.01"}, "train.min_lr", "0.01 is larger than train.lr (0.001)"},
        {{"train.warmup=2000"}, "train.warmup", "2000 is larger than train.steps (1000)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_defaults(&c);
        for (int j = 0; j < 3 && cases[i].sets[j]; j++) CHECK(config_set(&c, cases[i].sets[j]) == 0, "set %zu", i);
        char want[300];
        snprintf(want, sizeof want, "s2hc: error: exp.yaml: key '%s': %s", cases[i].key, cases[i].msg);
        CAPTURE(rc, config_validate(&c, "exp.yaml"));
        CHECK(rc == 2 && strncmp(captured, want, strlen(want)) == 0, "case %zu rc %d:\n got  %s want %s", i, rc,
              captured, want);
        CHECK(count_lines(captured) == 1, "one line");
    }
    /* A struct filled by code gets the per-key checks too. */
    config_defaults(&c);
    c.n_layer = 0;
    CAPTURE(rc, config_validate(&c, NULL));
    CHECK(rc == 2 && strstr(captured, "s2hc: error: config: key 'model.n_layer': 0 is out of range"), "%s", captured);
    config_defaults(&c);
    strcpy(c.method, "foo");
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'residual.method': 'foo' is not one of"), "%s", captured);
    config_defaults(&c);
    memset(c.name, 'a', sizeof c.name);
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'run.name': value is not terminated"), "%s", captured);
    config_defaults(&c);
    c.n_ood = CFG_MAX_OOD + 1;
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'data.ood'"), "%s", captured);
    config_defaults(&c);
    c.lr = NAN;
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'train.lr'"), "%s", captured);

    /* what must pass: rc with 1 stream; every other method with 2..8 */
    static const char *methods[] = {"identity", "hc", "mhc", "mhc_lite", "kromhc", "orthogonal", "s2hc", "s2hc_rot"};
    config_defaults(&c);
    strcpy(c.method, "rc");
    c.n_streams = 1;
    CHECK(config_validate(&c, "x") == 0, "rc n=1");
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
        for (int n = 2; n <= 8; n++) {
            config_defaults(&c);
            memset(c.method, 0, sizeof c.method);
            strcpy(c.method, methods[m]);
            c.n_streams = n;
            CAPTURE(rc, config_validate(&c, "x"));
            CHECK(rc == 0, "%s n=%d: %s", methods[m], n, captured);
        }
    config_defaults(&c);
    c.min_lr = c.lr;
    c.warmup = c.steps;
    CHECK(config_validate(&c, "x") == 0, "min_lr == lr and warmup == steps are allowed");
    /* ... and the next double above lr is not */
    config_defaults(&c);
    c.min_lr = nextafter(c.lr, INFINITY);
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'train.min_lr'") && strstr(captured, "is larger than train.lr"),
          "min_lr one ulp above lr: rc %d %s", rc, captured);
    config_defaults(&c);
    c.lr = 0.5;
    c.min_lr = nextafter(0.5, INFINITY);
    CAPTURE(rc, config_validate(&c, "x"));
    CHECK(rc == 2 && strstr(captured, "key 'train.min_lr'"), "lr 0.5: rc %d %s", rc, captured);
    const char *eq[] = {"train.lr=0.25", "train.min_lr=0.25"};
    CAPTURE(rc, config_load(&c, NULL, eq, 2));
    CHECK(rc == 0 && c.min_lr == c.lr, "--set min_lr == lr: rc %d %s", rc, captured);
    const char *above[] = {"train.lr=0.25", "train.min_lr=0.25000000000000006"};
    CAPTURE(rc, config_load(&c, NULL, above, 2));
    CHECK(rc == 2 && strstr(captured, "key 'train.min_lr'"), "--set min_lr one ulp above lr: rc %d %s", rc, captured);
}

/* ---- round trip ------------------------------------------------------------------------ */

static void round_trip(const s2hc_config *c, const char *what) {
    char *y = config_to_yaml(c);
    s2hc_config d;
    memset(&d, 0xCD, sizeof d);
    int rc;
    CAPTURE(rc, config_from_yaml_text(&d, y, what));
    CHECK(rc == 0, "%s: rc %d: %s\n%s", what, rc, captured, y);
    if (rc == 0) {
        CHECK(memcmp(c, &d, sizeof d) == 0, "%s: struct differs after the round trip\n%s", what, y);
        char *y2 = config_to_yaml(&d);
        CHECK(strcmp(y, y2) == 0, "%s: text differs:\n%s\n---\n%s", what, y, y2);
        free(y2);
    }
    free(y);
}

static void test_round_trip(void) {
    s2hc_config c;
    config_defaults(&c);
    round_trip(&c, "defaults");

    char path[600];
    write_file("full_rt.yaml", full_yaml, path, sizeof path);
    CHECK(config_load(&c, path, NULL, 0) == 0, "load");
    round_trip(&c, "full");

    /* values that need care: awkward doubles, quoting, UTF-8, YAML look-alikes */
    config_defaults(&c);
    c.lr = 1.0 / 3.0;
    c.min_lr = 4.9406564584124654e-324; /* the smallest subnormal */
    c.weight_decay = 0.1 + 0.2;
    c.lite_offset_value = -8.0 - log(24.0);
    c.beta1 = 0.0;
    c.clip = 1e6;
    c.eps = nextafter(1.0, 0.0);
    c.seed = UINT64_MAX;
    strcpy(c.name, "123");
    strcpy(c.out_dir, "my runs/\"q\" #x: y \\ z");
    strcpy(c.data_dir, "/tmp/\xc3\xbcnic\xc3\xb8" "de dir");
    strcpy(c.train_corpus, "true");
    c.n_ood = 3;
    memset(c.ood, 0, sizeof c.ood); /* the struct compares with memcmp: no stale bytes */
    strcpy(c.ood[0], "null");
    strcpy(c.ood[1], "1e3");
    strcpy(c.ood[2], "yes");
    CHECK(config_validate(&c, "awkward") == 0, "awkward config is valid");
    round_trip(&c, "awkward");
    c.n_ood = 0;
    memset(c.ood, 0, sizeof c.ood);
    round_trip(&c, "no ood");
    memset(c.out_dir, 0, sizeof c.out_dir);
    memset(c.data_dir, 0, sizeof c.data_dir);
    strcpy(c.out_dir, "!runs");
    strcpy(c.data_dir, "&a !b");
    round_trip(&c, "paths that look like a tag or an anchor");

    /* random doubles (random bits, kept in range) keep every bit */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 2000; i++) {
        s ^= s << 13; s ^= s >> 7; s ^= s << 17;
        double u = (double)(s >> 11) / 9007199254740992.0; /* [0, 1) */
        config_defaults(&c);
        c.min_lr = 0;
        c.lr = u > 0 ? u * 10.0 : 1e-3;
        c.beta1 = u;
        c.lite_offset_value = (u - 0.5) * 2000.0;
        c.weight_decay = ldexp(u, -(int)(s % 900));
        char *y = config_to_yaml(&c);
        s2hc_config d;
        int rc = config_from_yaml_text(&d, y, "random");
        if (rc != 0 || memcmp(&c, &d, sizeof d) != 0) {
            CHECK(0, "random double %d did not round trip:\n%s", i, y);
            free(y);
            break;
        }
        free(y);
    }

    /* to_yaml writes every key once, in schema order */
    config_defaults(&c);
    char *y = config_to_yaml(&c);
    int n = 0;
    const char *p = y;
    for (int i = 0; all_keys[i]; i++, n++) {
        char sec[32], line[64];
        const char *dot = strchr(all_keys[i], '.');
        snprintf(sec, sizeof sec, "%.*s:\n", (int)(dot - all_keys[i]), all_keys[i]);
        snprintf(line, sizeof line, "\n  %s: ", dot + 1);
        const char *q = strstr(p, line);
        CHECK(q != NULL, "to_yaml: %s missing or out of order", all_keys[i]);
        if (q) p = q + 1;
        CHECK(strstr(y, sec) != NULL, "section of %s", all_keys[i]);
    }
    int key_lines = 0;
    for (const char *l = y; (l = strstr(l, "\n  ")); l++) key_lines++;
    CHECK(key_lines == n, "to_yaml has %d key lines, the spec %d", key_lines, n);
    free(y);

    /* from_yaml_text also reports errors with its source name */
    int rc;
    CAPTURE(rc, config_from_yaml_text(&c, "train:\n  lr: x\n", "run.h5:/config"));
    CHECK(rc == 2 && strstr(captured, "s2hc: error: run.h5:/config:2:7: key 'train.lr': expected a number"), "%s",
          captured);
    /* data.ood naming data.train: a new run's rule, so a stored config of a run trained
       before it still reads (its files keep opening), while a new config is refused */
    CAPTURE(rc, config_from_yaml_text(&c, "data:\n  train: synth\n  ood: [synth]\n", "run.h5:/config"));
    CHECK(rc == 0 && c.n_ood == 1, "a stored config with data.ood = data.train: rc %d %s", rc, captured);
    CAPTURE(rc, config_check_ood(&c, "new.yaml"));
    CHECK(rc == 2 && strstr(captured, "new.yaml: key 'data.ood': 'synth' is the training corpus"), "%s", captured);
    /* a newer build's keys and sections in a stored config (a run it resumed): skipped with
       one warning naming them; the known keys read. An older build refused the whole run
       file ("unknown key") and could no longer evaluate, probe, export or resume it. A config
       file keeps refusing them. */
    CAPTURE(rc, config_from_yaml_text(&c, "model:\n  n_layer: 3\n  newer_norm: rms\ntrain:\n  lr: 0.002\n"
                                          "newer: {a: [1, 2], b: {c: 1}}\ntrain.newer_clip: 2\n", "run.h5:/config"));
    CHECK(rc == 0 && c.n_layer == 3 && c.lr == 0.002, "stored config with a newer build's keys: rc %d %s", rc, captured);
    CHECK(strstr(captured, "s2hc: warning: run.h5:/config: ignoring model.newer_norm, newer, train.newer_clip, "
                           "unknown to this build") && count_lines(captured) == 1, "%s", captured);
    CAPTURE(rc, config_from_yaml_text(&c, "model:\n  n_layer: 3\n", "run.h5:/config"));
    CHECK(rc == 0 && !captured[0], "no warning without unknown keys: %s", captured);
    CAPTURE(rc, config_from_yaml_text(&c, "model:\n  newer_norm: [\n", "run.h5:/config"));
    CHECK(rc == 2, "a stored config that is no YAML is still refused: %s", captured);
    char cf[1024];
    write_file("newer.yaml", "model:\n  newer_norm: rms\n", cf, sizeof cf);
    CAPTURE(rc, config_load(&c, cf, NULL, 0));
    CHECK(rc == 2 && strstr(captured, "key 'model.newer_norm': unknown key"), "a config file: %s", captured);
}

/* train.min_lr_ratio: the final rate follows train.lr through every layer; a later
 * train.min_lr turns it off; one file may not set both. */
static void test_min_lr_ratio(void) {
    char path[600], both[600];
    write_file("ratio.yaml", "train:\n  lr: 3e-3\n  min_lr_ratio: 0.1\n", path, sizeof path);
    s2hc_config c;
    int rc;
    CAPTURE(rc, config_load(&c, path, NULL, 0));
    CHECK(rc == 0 && c.min_lr == 3e-3 * 0.1 && c.min_lr_ratio == 0.1, "ratio: rc %d min_lr %g %s", rc, c.min_lr,
          captured);
    const char *lr[] = {"train.lr=0.02"};
    CAPTURE(rc, config_load(&c, path, lr, 1));
    CHECK(rc == 0 && c.min_lr == 0.02 * 0.1, "--set train.lr: min_lr %g follows it", c.min_lr);
    const char *fixed[] = {"train.lr=0.02", "train.min_lr=1e-5"};
    CAPTURE(rc, config_load(&c, path, fixed, 2));
    CHECK(rc == 0 && c.min_lr == 1e-5 && c.min_lr_ratio == 0, "--set train.min_lr turns the ratio off: %g %g",
          c.min_lr, c.min_lr_ratio);
    const char *again[] = {"train.min_lr=1e-5", "train.min_lr_ratio=0.5"};
    CAPTURE(rc, config_load(&c, path, again, 2));
    CHECK(rc == 0 && c.min_lr == 3e-3 * 0.5, "the later --set wins: %g", c.min_lr);
    /* a stored config holds both, consistent; it reads back to the same struct */
    CAPTURE(rc, config_load(&c, path, lr, 1));
    round_trip(&c, "min_lr_ratio");
    /* a ratio above 1 would decay above the peak */
    const char *big[] = {"train.min_lr_ratio=1.5"};
    CAPTURE(rc, config_load(&c, NULL, big, 1));
    CHECK(rc == 2 && strstr(captured, "key 'train.min_lr_ratio'"), "ratio 1.5: rc %d %s", rc, captured);
    const char *one[] = {"train.lr=0.3", "train.min_lr_ratio=1"};
    CAPTURE(rc, config_load(&c, NULL, one, 2));
    CHECK(rc == 0 && c.min_lr == c.lr, "ratio 1: a constant rate after warm-up: rc %d %s", rc, captured);
    /* one file setting both: refused at the later one, naming the earlier */
    write_file("both.yaml", "train:\n  min_lr: 1e-4\n  lr: 3e-3\n  min_lr_ratio: 0.1\n", both, sizeof both);
    CAPTURE(rc, config_load(&c, both, NULL, 0));
    CHECK(rc == 2 && strstr(captured, "both.yaml:4:3: key 'train.min_lr_ratio': set with train.min_lr (at 2:3)"),
          "both in one file: rc %d %s", rc, captured);
    write_file("both2.yaml", "train.min_lr_ratio: 0.1\ntrain:\n  min_lr: 5e-5\n", both, sizeof both);
    CAPTURE(rc, config_load(&c, both, NULL, 0));
    CHECK(rc == 2 && strstr(captured, "both2.yaml:3:3: key 'train.min_lr': set with train.min_lr_ratio (at 1:1)"),
          "both in one file, the other order: rc %d %s", rc, captured);
    /* ... but a file config_to_yaml wrote (a grid point's config.yaml) holds both, the
       final rate resolved from the ratio: it loads, to the same config, and a --set
       train.lr over it moves the final rate */
    CAPTURE(rc, config_load(&c, path, lr, 1));
    char *y = config_to_yaml(&c);
    write_file("written.yaml", y, both, sizeof both);
    free(y);
    s2hc_config w;
    CAPTURE(rc, config_load(&w, both, NULL, 0));
    CHECK(rc == 0 && memcmp(&w, &c, sizeof w) == 0, "config_to_yaml's file loads back: rc %d %s", rc, captured);
    const char *lr2[] = {"train.lr=0.04"};
    CAPTURE(rc, config_load(&w, both, lr2, 1));
    CHECK(rc == 0 && w.min_lr == 0.04 * 0.1, "and its ratio follows --set train.lr: %g", w.min_lr);
    /* with the ratio off, both keys are the plain min_lr */
    write_file("off.yaml", "train:\n  min_lr: 2e-4\n  min_lr_ratio: 0\n", both, sizeof both);
    CAPTURE(rc, config_load(&w, both, NULL, 0));
    CHECK(rc == 0 && w.min_lr == 2e-4, "ratio 0 beside min_lr: rc %d %s", rc, captured);
}

/* ---- keys, schema, docs, tiny.yaml ----------------------------------------------------- */

static void test_key_known(void) {
    for (int i = 0; all_keys[i]; i++) CHECK(config_key_known(all_keys[i]), "%s", all_keys[i]);
    const char *unknown[] = {"train", "lr", "train.lrr", "data.data_dir", "model.", ".lr", "", "train.lr ", NULL};
    for (int i = 0; unknown[i]; i++) CHECK(!config_key_known(unknown[i]), "'%s'", unknown[i]);
    CHECK(!config_key_known(NULL), "NULL");
}

static void test_schema_print(void) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_schema(f);
    fclose(f);
    for (int i = 0; all_keys[i]; i++) {
        char k[80];
        snprintf(k, sizeof k, "  %s ", all_keys[i]);
        CHECK(strstr(buf, k) != NULL, "schema lacks %s", all_keys[i]);
    }
    CHECK(strstr(buf, "rc | identity | hc | mhc | mhc_lite | kromhc | orthogonal | s2hc | s2hc_rot"), "enum values");
    CHECK(strstr(buf, "1..8") && strstr(buf, "(0, 10]"), "ranges");
    free(buf);
}

static void test_docs_in_sync(void) {
    char *doc = read_text("docs/config.md");
    CHECK(doc != NULL, "docs/config.md not found (run from the repository root)");
    if (!doc) return;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    config_print_schema_markdown(f);
    fclose(f);
    const char *b = strstr(doc, "<!-- schema:begin -->\n"), *e = strstr(doc, "<!-- schema:end -->");
    CHECK(b && e && e > b, "docs/config.md lacks the schema markers");
    if (b && e && e > b) {
        b += strlen("<!-- schema:begin -->\n");
        size_t n = (size_t)(e - b);
        int same = n == len && memcmp(b, buf, n) == 0;
        if (!same && getenv("S2HC_REGEN_DOCS")) {
            /* S2HC_REGEN_DOCS=1 build/tests/test_config: rewrite the table in place */
            FILE *o = fopen("docs/config.md", "wb");
            CHECK(o != NULL, "cannot write docs/config.md");
            if (o) {
                fwrite(doc, 1, (size_t)(b - doc), o);
                fwrite(buf, 1, len, o);
                fputs(e, o);
                fclose(o);
                fprintf(stderr, "test_config: rewrote the schema table of docs/config.md\n");
                same = 1;
            }
        }
        CHECK(same, "docs/config.md's table differs from config_print_schema_markdown(); regenerate it with "
                    "S2HC_REGEN_DOCS=1 build/tests/test_config");
    }
    for (int i = 0; all_keys[i]; i++) {
        char k[80];
        snprintf(k, sizeof k, "`%s`", all_keys[i]);
        CHECK(strstr(doc, k) != NULL, "docs lack %s", all_keys[i]);
    }
    free(buf);
    free(doc);
}

static void test_tiny_yaml(void) {
    s2hc_config c;
    int rc;
    CAPTURE(rc, config_load(&c, "experiments/tiny.yaml", NULL, 0));
    CHECK(rc == 0, "rc %d: %s", rc, captured);
    CHECK(c.n_layer == 2 && c.n_head == 2 && c.n_embd == 64 && c.block_size == 64, "model");
    CHECK(strcmp(c.method, "identity") == 0 && c.n_streams == 4, "residual");
    CHECK(c.batch == 8 && c.steps == 200 && c.lr == 3e-3 && c.min_lr == 3e-4 && c.warmup == 20, "train");
    CHECK(c.eval_every == 100 && c.ckpt_every == 100 && c.probe_every == 50, "cadence");
    CHECK(strcmp(c.train_corpus, "docs") == 0 && strcmp(c.name, "tiny") == 0, "data/run");
    /* tiny runs every method: each must validate with its override */
    const char *m[] = {"residual.method=s2hc"};
    CAPTURE(rc, config_load(&c, "experiments/tiny.yaml", m, 1));
    CHECK(rc == 0, "tiny + s2hc: %s", captured);
}

/* ---- fuzz: mutations of a valid file give 0 (with at most a warning), or 2 with one well-formed line */

static void test_fuzz(void) {
    static const char alphabet[] = ":-[]{}\"'#&*!|>,. \n\tax9_\xff\xc3";
    size_t n = strlen(full_yaml);
    char *text = malloc(n + 1);
    uint64_t s = 12345;
    int accepted = 0, rejected = 0;
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(text, full_yaml, n + 1);
        int edits = 1 + (int)(iter % 3);
        for (int e = 0; e < edits; e++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            size_t pos = (size_t)(s % n);
            if ((s >> 32) % 8 == 0) text[pos] = '\0'; /* truncate */
            else text[pos] = alphabet[(s >> 40) % (sizeof alphabet - 1)];
        }
        s2hc_config c;
        int rc;
        CAPTURE(rc, config_from_yaml_text(&c, text, "fuzz"));
        if (rc == 0) accepted++;
        else rejected++;
        int ok = (rc == 0 && captured[0] == '\0') || /* a key renamed reads as a newer build's: one warning */
                 (rc == 0 && strncmp(captured, "s2hc: warning: fuzz: ignoring ", 30) == 0 && count_lines(captured) == 1) ||
                 (rc == 2 && strncmp(captured, "s2hc: error: fuzz", 17) == 0 && count_lines(captured) == 1);
        if (!ok) {
            CHECK(0, "iteration %d: rc %d, stderr \"%s\" for:\n%s", iter, rc, captured, text);
            break;
        }
    }
    CHECK(accepted > 0 && rejected > 0, "accepted %d rejected %d", accepted, rejected);
    free(text);
}

/* openblas_coretype_advice: a line exactly when OPENBLAS_CORETYPE names kernels older
 * than the CPU's widest vector extension (whatever this machine has), never for the
 * right kernels, an unknown name or no setting; the environment is restored after. */
static void test_blas_advice(void) {
    const char *was = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (was) snprintf(saved, sizeof saved, "%s", was);
    /* what the CPU has, asked here directly (cpu_vector_rank's answer is checked against it):
     * on x86 the compiler's CPU builtins; elsewhere none of the x86 kernels applies, and no
     * setting draws advice */
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    const int avx512 = __builtin_cpu_supports("avx512f"), avx2 = __builtin_cpu_supports("avx2");
#else
    const int avx512 = 0, avx2 = 0;
#endif
    CHECK(cpu_vector_rank() == (avx512 ? 4 : avx2 ? 3 : 0), "cpu_vector_rank %d (avx512f %d, avx2 %d)", cpu_vector_rank(),
          avx512, avx2);
    static const struct {
        const char *value;
        int older_than_avx2, older_than_avx512;
    } cases[] = {{"Prescott", 1, 1}, {"sandybridge", 1, 1}, {"Haswell", 0, 1}, {"ZEN", 0, 1},
                 {"SkylakeX", 0, 0}, {"Cooperlake", 0, 0},  {"NoSuchCore", 0, 0}, {"", 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("OPENBLAS_CORETYPE", cases[i].value, 1);
        const int want = avx512 ? cases[i].older_than_avx512 : avx2 ? cases[i].older_than_avx2 : 0;
        const char *a = openblas_coretype_advice();
        CHECK(!!a == want, "OPENBLAS_CORETYPE=%s: advice %s, expected %s", cases[i].value, a ? a : "(none)",
              want ? "a line" : "none");
        if (a) CHECK(strstr(a, cases[i].value) && strstr(a, avx512 ? "SkylakeX" : "Haswell"),
                     "the advice names the setting and the kernels to use: %s", a);
    }
    unsetenv("OPENBLAS_CORETYPE");
    CHECK(!openblas_coretype_advice(), "no advice without the variable");
    if (was) setenv("OPENBLAS_CORETYPE", saved, 1);
}

/* cpu_model_name_from: an x86 CPU's "model name"; an ARM CPU's implementer and part (its
 * /proc/cpuinfo has no model name), named where known; "unknown" for nothing. */
static void test_cpu_model_name(void) {
    static const struct {
        const char *cpuinfo, *want;
    } cases[] = {
        {"processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: fpu\n",
         "Intel(R) Xeon(R) Platinum 8480+"},
        {"processor\t: 0\nBogoMIPS\t: 2000.00\nFeatures\t: fp asimd sve2\nCPU implementer\t: 0x41\n"
         "CPU architecture: 8\nCPU variant\t: 0x0\nCPU part\t: 0xd4f\nCPU revision\t: 0\n\n"
         "processor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n",
         "Neoverse-V2 (ARM implementer 0x41, part 0xd4f)"},
        {"processor\t: 0\nCPU implementer\t: 0x61\nCPU part\t: 0x22\n", "ARM implementer 0x61, part 0x022"},
        {"processor\t: 0\n", "unknown"},
    };
    char buf[128];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        FILE *f = fmemopen((void *)cases[i].cpuinfo, strlen(cases[i].cpuinfo), "r");
        CHECK(f, "fmemopen");
        if (!f) continue;
        cpu_model_name_from(f, buf, sizeof buf);
        fclose(f);
        CHECK(!strcmp(buf, cases[i].want), "cpu_model_name_from case %zu: '%s', expected '%s'", i, buf, cases[i].want);
    }
    CHECK(!strcmp(cpu_model_name_from(NULL, buf, sizeof buf), "unknown"), "no file: %s", buf);
}

/* Step counts read from files as doubles: whole numbers in [0, 2^53] pass, anything a
 * corrupt file may hold (NaN, infinities, 1e300, negatives, fractions) gives -1 rather
 * than an undefined cast. */
static void test_step_from_double(void) {
    const double good[] = {0, 1, 1000, 9007199254740992.0};
    const double bad[] = {NAN, INFINITY, -INFINITY, 1e300, 9007199254740994.0, -1, -0.5, 2.5, 1e-300};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK(step_from_double(good[i]) == (long long)good[i], "%g -> %lld", good[i], step_from_double(good[i]));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(step_from_double(bad[i]) == -1, "%g -> %lld", bad[i], step_from_double(bad[i]));
}

/* csv_field_put(n) to a string (freed by the caller). */
static char *csv_text(const char *s, size_t n) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    csv_field_putn(f, s, n);
    fclose(f);
    return buf;
}

/* The one CSV quoting (index.csv, analyze's tables and data, eval/data list/inspect
 * --csv): a field as it is unless it holds a comma, a quote, a newline or a carriage
 * return, anywhere in its n bytes (the last one too); then in double quotes, each quote
 * doubled. Bytes past n are not the field's. */
static void test_csv_field(void) {
    static const char *const cases[][2] = {
        {"plain", "plain"},       {"", ""},
        {"a,b", "\"a,b\""},       {"a\"b", "\"a\"\"b\""},
        {"\"", "\"\"\"\""},       {"two\nlines", "\"two\nlines\""},
        {"end\r", "\"end\r\""},   {"x,", "\"x,\""},
        {"my corp_1", "my corp_1"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = csv_text(cases[i][0], strlen(cases[i][0]));
        CHECK(!strcmp(got, cases[i][1]), "'%s' as CSV: '%s', not '%s'", cases[i][0], got, cases[i][1]);
        free(got);
    }
    char *got = csv_text("ab,c\"d", 2); /* the first 2 bytes: nothing to quote */
    CHECK(!strcmp(got, "ab"), "the first 2 bytes of ab,c\"d: '%s'", got);
    free(got);
    got = csv_text("a\"b,cd", 4);
    CHECK(!strcmp(got, "\"a\"\"b,\""), "the first 4 bytes of a\"b,cd: '%s'", got);
    free(got);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    csv_field_put(f, "r,1");
    fclose(f);
    CHECK(!strcmp(buf, "\"r,1\""), "csv_field_put of r,1: '%s'", buf);
    free(buf);
}

/* A number as a CSV field: the fewest of 15 to 17 significant digits that read back as
 * the same double (0.1 as 0.1, 0.1 + 0.2 needs 17); an infinity as inf or -inf; NaN as
 * an empty field. */
static void test_csv_num(void) {
    const double v[] = {0.1, 0.1 + 0.2, 1.0 / 3, 2.0 / 3, 3.2961538461538463, -1e-300, 6.786e149, 1e21, 0, 7};
    const char *want[] = {"0.1", "0.30000000000000004", NULL, NULL, NULL, "-1e-300", "6.786e+149", "1e+21",
                          "0", "7"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        csv_num_put(f, v[i]);
        fclose(f);
        CHECK(strtod(buf, NULL) == v[i], "%.17g written as '%s', which reads back as another number", v[i], buf);
        CHECK(!want[i] || !strcmp(buf, want[i]), "%.17g written as '%s', not '%s'", v[i], buf, want[i]);
        free(buf);
    }
    const double odd[] = {NAN, INFINITY, -INFINITY};
    const char *odd_want[] = {"", "inf", "-inf"};
    for (int i = 0; i < 3; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        csv_num_put(f, odd[i]);
        fclose(f);
        CHECK(!strcmp(buf, odd_want[i]), "%g written as '%s', not '%s'", odd[i], buf, odd_want[i]);
        free(buf);
    }
}

/* signed_put: printf's %+*.*f, but whatever rounds to zero shows as +0.0..., never -0.0... */
static void test_signed_put(void) {
    static const struct { double v; int w, dec; const char *want; } c[] = {
        {-1e-7, 9, 5, " +0.00000"}, {-0.0, 0, 5, "+0.00000"}, {-4.9e-6, 0, 5, "+0.00000"}, {-6e-6, 0, 5, "-0.00001"},
        {-4e-5, 8, 4, " +0.0000"}, {-6e-5, 8, 4, " -0.0001"}, {0.25, 9, 5, " +0.25000"}, {-12.5, 0, 1, "-12.5"},
        {-1e-9, 0, 0, "+0"}, {-0.7, 0, 0, "-1"}, {-10.0, 0, 3, "-10.000"}, {-0.04, 0, 1, "+0.0"}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        signed_put(f, c[i].v, c[i].w, c[i].dec);
        fclose(f);
        CHECK(!strcmp(buf, c[i].want), "%g (%d, %d): '%s', want '%s'", c[i].v, c[i].w, c[i].dec, buf, c[i].want);
        free(buf);
    }
}

/* Durations as the progress lines show them: seconds, then minutes from 60 s, hours from
 * 3600 s; a negative, NaN or absurd one (over 1e7 s) as "--". */
/* path_trim_slashes: a folder's trailing slashes go, "/" stays; grid_slurm_folder: a
 * folder named slurm holding submit.sh, with or without a trailing slash. */
static void test_path_slashes_and_slurm_folder(void) {
    static const struct { const char *in, *want; } c[] = {
        {"runs/x/", "runs/x"}, {"runs/x///", "runs/x"}, {"runs/x", "runs/x"}, {"/", "/"}, {"//", "/"}, {"", ""}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char buf[32];
        snprintf(buf, sizeof buf, "%s", c[i].in);
        path_trim_slashes(buf);
        CHECK(!strcmp(buf, c[i].want), "'%s': '%s', want '%s'", c[i].in, buf, c[i].want);
    }
    char dir[700], path[800];
    static const char *const names[] = {"slurm", "xslurm", "slurm-old", "empty/slurm"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(dir, sizeof dir, "%s/grid/%s", tmp_dir, names[i]);
        CHECK(mkdir_p(dir) == 0, "mkdir %s", dir);
        if (i == 3) continue; /* a slurm folder without submit.sh */
        snprintf(path, sizeof path, "%s/submit.sh", dir);
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "%s", path);
        if (f) fclose(f);
    }
    static const struct { const char *rel; int want; } g[] = {
        {"slurm", 1}, {"slurm/", 1}, {"slurm//", 1}, {"xslurm", 0}, {"slurm-old", 0}, {"empty/slurm", 0}, {"nowhere/slurm", 0}};
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++) {
        snprintf(dir, sizeof dir, "%s/grid/%s", tmp_dir, g[i].rel);
        CHECK(grid_slurm_folder(dir) == g[i].want, "grid_slurm_folder(.../%s) = %d, want %d", g[i].rel,
              grid_slurm_folder(dir), g[i].want);
    }
}

static void test_fmt_duration(void) {
    static const struct { double s; const char *want; } c[] = {
        {0, "0s"},         {59.4, "59s"},        {59.5, "1m00s"},     {60, "1m00s"}, {3599, "59m59s"},
        {3600, "1h00m"},   {3661, "1h01m"},      {1e7, "2777h46m"},   {1.1e7, "--"}, {-1, "--"},
        {NAN, "--"},       {INFINITY, "--"}};
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        char buf[16];
        fmt_duration(c[i].s, buf, sizeof buf);
        CHECK(!strcmp(buf, c[i].want), "%g s: '%s', want '%s'", c[i].s, buf, c[i].want);
    }
}

/* tty_line on a terminal of 12 columns (a pseudo-terminal): the text cut to 11 columns,
 * never inside a UTF-8 character, a wide character (CJK: two columns) counted as two and
 * a combining mark as none, so that the line never wraps (a wrapped line leaves a row
 * behind at every redraw). */
static void test_tty_line(void) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0) {
        printf("  (no pseudo-terminal: skipped)\n");
        if (master >= 0) close(master);
        return;
    }
    const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
    CHECK(slave >= 0, "the pseudo-terminal's other end: %s", strerror(errno));
    if (slave < 0) {
        close(master);
        return;
    }
    struct winsize ws = {.ws_row = 24, .ws_col = 12};
    CHECK(ioctl(slave, TIOCSWINSZ, &ws) == 0 && terminal_columns(slave) == 12, "12 columns");
    FILE *f = fdopen(slave, "w");
    static const struct { const char *text, *want; } c[] = {
        {"0123456789abcdef", "0123456789a"},
        {"short", "short"},
        {"[g \u5b9f\u9a13\u5b9f\u9a13\u5b9f] 1/2", "[g \u5b9f\u9a13\u5b9f\u9a13"}, /* 3 + 4 x 2 = 11 */
        {"\u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9!", "\u00e9t\u00e9 \u00e9t\u00e9 \u00e9t\u00e9"}, /* 2 bytes, 1 column */
        {"e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301", /* 12 */
         "e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301e\u0301"},
    };
    /* on 30 columns a line too wide keeps its last field (the ETA) whole, "..." before it;
       one whose last field leaves under 8 columns of the rest is cut as any other */
    static const struct { const char *text, *want; } c30[] = {
        {"step 1200/5000 | loss 3.2145 | ETA 12m30s", "step 1200/500... | ETA 12m30s"},
        {"[grid g] 1/4 done, 2 running, 1 left, ETA 1m", "[grid g] 1/4 done,..., ETA 1m"},
        {"a 0123456789012345678901234567890 | ETA x", "a 0123456789012345... | ETA x"},
        {"0123456789 | 0123456789 0123456789 ETA", "0123456789 | 0123456789 01234"},
    };
    for (size_t i = 0; f && i < sizeof c / sizeof c[0] + sizeof c30 / sizeof c30[0]; i++) {
        const int wide = i >= sizeof c / sizeof c[0];
        if (i == sizeof c / sizeof c[0]) {
            ws.ws_col = 30;
            CHECK(ioctl(slave, TIOCSWINSZ, &ws) == 0 && terminal_columns(slave) == 30, "30 columns");
        }
        const char *text = wide ? c30[i - sizeof c / sizeof c[0]].text : c[i].text;
        const char *want_text = wide ? c30[i - sizeof c / sizeof c[0]].want : c[i].want;
        tty_line(f, text);
        char got[256] = "", want[256];
        size_t n = 0;
        struct pollfd p = {.fd = master, .events = POLLIN};
        while (n < sizeof got - 1 && poll(&p, 1, 1000) > 0) {
            const ssize_t k = read(master, got + n, sizeof got - 1 - n);
            if (k <= 0) break;
            n += (size_t)k;
            if (n >= 3 && !memcmp(got + n - 3, "\033[K", 3)) break;
        }
        got[n] = '\0';
        snprintf(want, sizeof want, "\r%s\033[K", want_text);
        CHECK(!strcmp(got, want), "'%s': '%s', want '%s'", text, got + 1, want_text);
    }
    if (f) fclose(f);
    close(master);
}

int main(void) {
    T_NAME("test_config");
    setup_tmp();
    T_RUN(test_defaults);
    T_RUN(test_full_file);
    T_RUN(test_errors);
    T_RUN(test_missing_file);
    T_RUN(test_set);
    T_RUN(test_load_with_sets);
    T_RUN(test_spellings);
    T_RUN(test_int_bounds);
    T_RUN(test_validate);
    T_RUN(test_round_trip);
    T_RUN(test_min_lr_ratio);
    T_RUN(test_key_known);
    T_RUN(test_schema_print);
    T_RUN(test_docs_in_sync);
    T_RUN(test_tiny_yaml);
    T_RUN(test_fuzz);
    T_RUN(test_blas_advice);
    T_RUN(test_cpu_model_name);
    T_RUN(test_step_from_double);
    T_RUN(test_csv_field);
    T_RUN(test_csv_num);
    T_RUN(test_signed_put);
    T_RUN(test_fmt_duration);
    T_RUN(test_path_slashes_and_slurm_folder);
    T_RUN(test_tty_line);
    return T_END();
}
