/* test_grid.c: experiment grids without training: expansion (product order, include,
 * exclude, overrides, templates, presets, command-line pins), index stability when a
 * value is appended to the first sweep key, every validation error with its file, line,
 * column and key, point states read from run directories (finished, diverged, changed
 * in any compared config key, partial, failed, locked), the content of index.csv and the
 * array line of --slurm. The runner itself is tested by tests/cli/grid_cli.sh (real runs). */
#include "harness/grid.h"
#include "harness/grid_internal.h"
#include "harness/run.h"
#include "harness/util.h"
#include "probes/h5.h"
#include "tests/t.h"
#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp_dir[512];

static void setup_tmp(void) { t_setup_tmp("grid", tmp_dir, sizeof tmp_dir); }

/* Write text to tmp_dir/name; the full path goes to path. */
static void write_file(const char *name, const char *text, char *path, size_t len) {
    t_write_file(tmp_dir, name, text, path, len);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* grid_write_index, then runs/index.csv's text (malloc'd; NULL if it is missing) */
static char *index_csv(const grid_spec *g, const grid_point *p, int n) {
    CHECK(grid_write_index(g, p, n, NULL) == 0, "index written");
    char path[700];
    snprintf(path, sizeof path, "%s/runs/index.csv", tmp_dir);
    char *csv = read_text(path);
    CHECK(csv != NULL, "index.csv exists");
    return csv;
}

/* stderr of a call, through a file (fd 2 redirected around it). */
static char captured[16384];
static int saved_fd = -1;
static void capture_begin(void) {
    char p[600];
    snprintf(p, sizeof p, "%s/stderr.txt", tmp_dir);
    fflush(stderr);
    saved_fd = dup(2);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
}
static void capture_end(void) {
    char p[600];
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    snprintf(p, sizeof p, "%s/stderr.txt", tmp_dir);
    char *t = read_text(p);
    snprintf(captured, sizeof captured, "%s", t ? t : "");
    free(t);
}

/* The base config every grid of this file starts from. */
static const char *base_yaml = "model: {n_layer: 1, n_head: 2, n_embd: 16, block_size: 16}\n"
                               "residual: {method: identity, n_streams: 4}\n"
                               "train: {batch: 2, steps: 10, warmup: 1}\n"
                               "data: {train: main, ood: [synth, other]}\n";

/* Write the grid text (base.yaml next to it) and load + expand it. Returns the rc. */
static int load_grid(const char *name, const char *text, grid_spec *g, grid_point **pts, int *n,
                     const char *const *pins, int npins) {
    char bp[600], gp[600], out[640];
    write_file("base.yaml", base_yaml, bp, sizeof bp);
    write_file(name, text, gp, sizeof gp);
    snprintf(out, sizeof out, "%s/runs", tmp_dir);
    *pts = NULL;
    *n = 0;
    int rc = grid_load(g, gp, out, pins, npins);
    if (rc == 0) {
        rc = grid_expand(g, pts, n);
        if (rc) grid_free(g);
    }
    return rc;
}

static void test_product_order(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("prod.yaml",
                       "base: base.yaml\n"
                       "set: {train.steps: 20}\n"
                       "sweep:\n"
                       "  residual.method: [hc, s2hc]\n"
                       "  train.seed: [1, 2, 3]\n"
                       "name: \"{residual.method}-s{train.seed}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0, "rc %d", rc);
    if (rc) return;
    CHECK(n == 6, "%d points", n);
    const char *want[] = {"hc-s1", "hc-s2", "hc-s3", "s2hc-s1", "s2hc-s2", "s2hc-s3"};
    for (int i = 0; i < n && i < 6; i++) {
        CHECK(p[i].index == i, "index %d at %d", p[i].index, i);
        CHECK(!strcmp(p[i].name, want[i]), "point %d is %s, wanted %s (last key fastest)", i, p[i].name, want[i]);
        CHECK(p[i].cfg.steps == 20, "set: applied (%d)", p[i].cfg.steps);
        CHECK(p[i].cfg.n_layer == 1, "base applied");
        CHECK(!strcmp(p[i].cfg.name, p[i].name), "run.name is the point name");
        CHECK(strstr(p[i].cfg.out_dir, "/runs") != NULL, "run.out is the grid's out (%s)", p[i].cfg.out_dir);
    }
    CHECK(p[4].cfg.seed == 2 && !strcmp(p[4].cfg.method, "s2hc"), "point 4 values");
    grid_points_free(p, n);
    grid_free(&g);
}

static void test_include_exclude_override(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("inc.yaml",
                       "base: base.yaml\n"
                       "sweep:\n"
                       "  residual.method: [hc, mhc, s2hc]\n"
                       "  train.seed: [1, 2]\n"
                       "exclude:\n"
                       "  - {residual.method: hc, train.seed: 2}\n"
                       "  - {residual.method: [mhc], train.seed: [2, 7]}\n"
                       "include:\n"
                       "  - {residual.method: rc, train.seed: [1, 2]}\n"
                       "  - {residual.method: s2hc, residual.core: expm, train.lr: 1e-3}\n"
                       "override:\n"
                       "  - when: {residual.method: rc}\n"
                       "    set: {residual.n_streams: 1}\n"
                       "  - when: {train.seed: 2}\n"
                       "    set: {train.steps: 30}\n"
                       "name: \"{residual.method}-{residual.core}-n{residual.n_streams}-s{train.seed}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0, "rc %d: %s", rc, "");
    if (rc) return;
    /* product: hc1 (hc2 out), mhc1 (mhc2 out), s2hc1, s2hc2; include: rc1, rc2, s2hc expm */
    const char *want[] = {"hc-cayley-n4-s1", "mhc-cayley-n4-s1", "s2hc-cayley-n4-s1", "s2hc-cayley-n4-s2",
                          "rc-cayley-n1-s1", "rc-cayley-n1-s2", "s2hc-expm-n4-s1337"};
    CHECK(n == 7, "%d points", n);
    for (int i = 0; i < n && i < 7; i++) {
        CHECK(!strcmp(p[i].name, want[i]), "point %d is %s, wanted %s", i, p[i].name, want[i]);
        CHECK(p[i].index == i, "indices are compact");
    }
    if (n == 7) {
        CHECK(p[4].cfg.n_streams == 1, "override gave rc one stream");
        CHECK(p[3].cfg.steps == 30 && p[2].cfg.steps == 10, "override by seed: %d %d", p[3].cfg.steps, p[2].cfg.steps);
        CHECK(p[5].cfg.steps == 30, "overrides apply to include entries too");
        CHECK(p[6].include == 1 && p[0].include == -1, "include entry recorded");
    }
    grid_points_free(p, n);
    grid_free(&g);
}

static void test_templates_and_presets(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("tmpl.yaml",
                       "base: base.yaml\n"
                       "sweep:\n"
                       "  preset: [tiny, small]\n"
                       "  data.ood: [[a, b], [c]]\n"
                       "override:\n"
                       "  - when: {preset: small}\n"
                       "    set: {train.steps: 77, train.warmup: 5}\n"
                       "name: \"p{index}-{preset}-{data.ood}-L{model.n_layer}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0, "rc %d", rc);
    if (rc) return;
    CHECK(n == 4, "%d points", n);
    if (n == 4) {
        CHECK(!strcmp(p[0].name, "p0-tiny-a+b-L2"), "name %s", p[0].name);
        CHECK(!strcmp(p[3].name, "p3-small-c-L4"), "name %s", p[3].name);
        CHECK(p[0].cfg.n_ood == 2 && !strcmp(p[0].cfg.ood[1], "b"), "list value");
        CHECK(!strcmp(p[2].preset, "small") && p[2].cfg.n_embd == 128, "preset small applied (%d)", p[2].cfg.n_embd);
        CHECK(p[2].cfg.steps == 77 && p[0].cfg.steps != 77, "override by preset");
    }
    grid_points_free(p, n);
    grid_free(&g);

    /* train.init_from names another grid's run by the point's values, as name: does */
    rc = load_grid("initf.yaml",
                   "base: base.yaml\n"
                   "set: {train.init_from: \"runs/base/{residual.method}-s{train.seed}-{data.ood}-{preset}/model.safetensors\"}\n"
                   "sweep:\n"
                   "  residual.method: [identity, s2hc]\n"
                   "  train.seed: [1, 2]\n",
                   &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 4, "rc %d n %d", rc, n);
    if (rc == 0 && n == 4) {
        CHECK(!strcmp(p[0].cfg.init_from, "runs/base/identity-s1-synth+other-none/model.safetensors"), "init_from %s",
              p[0].cfg.init_from);
        CHECK(!strcmp(p[3].cfg.init_from, "runs/base/s2hc-s2-synth+other-none/model.safetensors"), "init_from %s",
              p[3].cfg.init_from);
    }
    if (rc == 0) {
        grid_points_free(p, n);
        grid_free(&g);
    }

    /* the default template: method, n, seed and every other varying key */
    rc = load_grid("deft.yaml", "base: base.yaml\nsweep:\n  train.lr: [1e-3, 0.002]\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 2, "rc %d n %d", rc, n);
    if (rc == 0 && n == 2) {
        CHECK(!strcmp(p[0].name, "identity-n4-s1337-0.001"), "default name %s", p[0].name);
        CHECK(!strcmp(p[1].name, "identity-n4-s1337-0.002"), "default name %s", p[1].name);
    }
    if (rc == 0) { grid_points_free(p, n); grid_free(&g); }

    /* a preset sets the scale, not the base's optimizer keys */
    char wp[600];
    write_file("base_wd.yaml", "train: {weight_decay: 0.01, beta2: 0.99, clip: 0.5, eps: 1e-6}\n", wp, sizeof wp);
    rc = load_grid("wd.yaml", "base: base_wd.yaml\npreset: tiny\nsweep:\n  train.seed: [5]\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 1, "rc %d", rc);
    if (rc == 0) {
        CHECK(p[0].cfg.weight_decay == 0.01 && p[0].cfg.beta2 == 0.99 && p[0].cfg.clip == 0.5 && p[0].cfg.eps == 1e-6,
              "the base's weight_decay %g, beta2 %g, clip %g, eps %g under preset tiny", p[0].cfg.weight_decay,
              p[0].cfg.beta2, p[0].cfg.clip, p[0].cfg.eps);
        CHECK(p[0].cfg.n_embd == 64 && p[0].cfg.min_lr == p[0].cfg.lr / 10, "and the preset's scale and min_lr");
        grid_points_free(p, n);
        grid_free(&g);
    }

    /* train.min_lr_ratio in set: makes each point's min_lr follow its swept lr, over the
       preset's lr / 10; an override's train.min_lr replaces it for its points */
    rc = load_grid("ratio.yaml", "preset: tiny\nset: {train.min_lr_ratio: 0.05}\nsweep:\n  train.lr: [1e-3, 0.02]\n"
                   "override:\n  - when: {train.lr: 0.02}\n    set: {train.min_lr: 3e-4}\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 2, "rc %d n %d", rc, n);
    if (rc == 0 && n == 2) {
        CHECK(p[0].cfg.min_lr == 1e-3 * 0.05 && p[0].cfg.min_lr_ratio == 0.05, "lr 1e-3: min_lr %g", p[0].cfg.min_lr);
        CHECK(p[1].cfg.min_lr == 3e-4 && p[1].cfg.min_lr_ratio == 0, "lr 0.02, its override: min_lr %g ratio %g",
              p[1].cfg.min_lr, p[1].cfg.min_lr_ratio);
    }
    if (rc == 0) { grid_points_free(p, n); grid_free(&g); }
    /* an override's when: sees the resolved min_lr */
    rc = load_grid("ratio2.yaml", "set: {train.min_lr_ratio: 0.5}\nsweep:\n  train.lr: [1e-3, 0.02]\n"
                   "override:\n  - when: {train.min_lr: 0.01}\n    set: {train.steps: 170}\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 2, "rc %d n %d", rc, n);
    if (rc == 0 && n == 2)
        CHECK(p[0].cfg.steps != 170 && p[1].cfg.steps == 170, "when: train.min_lr 0.01 matched by lr 0.02 x 0.5: %d %d",
              p[0].cfg.steps, p[1].cfg.steps);
    if (rc == 0) { grid_points_free(p, n); grid_free(&g); }

    /* a top-level preset without a base */
    rc = load_grid("pre.yaml", "preset: tiny\nsweep:\n  train.seed: [5]\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 1, "rc %d", rc);
    if (rc == 0) {
        CHECK(p[0].cfg.n_layer == 2 && p[0].cfg.n_embd == 64, "preset tiny over the defaults");
        CHECK(!strcmp(p[0].name, "s2hc-n4-s5"), "name %s", p[0].name);
        grid_points_free(p, n);
        grid_free(&g);
    }
}

/* With the last key fastest, appending a value to the FIRST sweep key adds points after
 * every existing one: each old point keeps its index and name. */
static void test_index_stability(void) {
    grid_spec g1, g2;
    grid_point *a, *b;
    int na, nb;
    const char *head = "base: base.yaml\nsweep:\n";
    const char *tail = "  residual.n_streams: [2, 4]\n  train.seed: [1, 2, 3]\n"
                       "exclude: [{residual.n_streams: 2, train.seed: 3}]\n"
                       "name: \"{residual.method}-n{residual.n_streams}-s{train.seed}\"\n";
    char t1[1024], t2[1024];
    snprintf(t1, sizeof t1, "%s  residual.method: [hc, mhc]\n%s", head, tail);
    snprintf(t2, sizeof t2, "%s  residual.method: [hc, mhc, s2hc]\n%s", head, tail);
    int rc1 = load_grid("st1.yaml", t1, &g1, &a, &na, NULL, 0);
    int rc2 = load_grid("st2.yaml", t2, &g2, &b, &nb, NULL, 0);
    CHECK(rc1 == 0 && rc2 == 0, "rc %d %d", rc1, rc2);
    if (rc1 || rc2) return;
    CHECK(na == 10 && nb == 15, "%d and %d points", na, nb);
    for (int i = 0; i < na && i < nb; i++)
        CHECK(a[i].index == b[i].index && !strcmp(a[i].name, b[i].name), "point %d: %s became %s", i, a[i].name,
              b[i].name);
    for (int i = na; i < nb; i++) CHECK(!strcmp(b[i].cfg.method, "s2hc"), "new point %d is %s", i, b[i].name);
    grid_points_free(a, na);
    grid_points_free(b, nb);
    grid_free(&g1);
    grid_free(&g2);
}

static void test_pins(void) {
    grid_spec g;
    grid_point *p;
    int n;
    const char *text = "base: base.yaml\n"
                       "sweep:\n  preset: [tiny, small]\n  residual.method: [hc, s2hc]\n"
                       "include: [{preset: [tiny, small], residual.method: rc, residual.n_streams: 1}]\n"
                       "name: \"{preset}-{residual.method}\"\n";
    const char *pins[] = {"preset=small", "train.steps=5", "train.warmup=1"};
    int rc = load_grid("pin.yaml", text, &g, &p, &n, pins, 3);
    CHECK(rc == 0, "rc %d", rc);
    if (rc) return;
    CHECK(n == 3, "%d points", n);
    if (n == 3) {
        CHECK(!strcmp(p[0].name, "small-hc") && !strcmp(p[1].name, "small-s2hc") && !strcmp(p[2].name, "small-rc"),
              "pinned: %s %s %s", p[0].name, p[1].name, p[2].name);
        for (int i = 0; i < 3; i++) CHECK(p[i].cfg.steps == 5, "a pin on an unswept key applies last");
    }
    CHECK(g.nargs == 3, "pins kept for Slurm tasks");
    grid_points_free(p, n);
    grid_free(&g);
    const char *bad[] = {"train.stepz=5"};
    capture_begin();
    rc = load_grid("pin.yaml", text, &g, &p, &n, bad, 1);
    capture_end();
    CHECK(rc == 2, "a bad pin: rc %d", rc);
    CHECK(strstr(captured, "key 'train.stepz': not a config key (did you mean 'train.steps'?)") != NULL, "got: %s",
          captured);
}

/* Include entries are never excluded (an exclude that matches one leaves it), an exclude
 * or when: list matches any of its values (not just the first), and command-line pins
 * come after overrides. */
static void test_exclude_lists_and_pin_order(void) {
    grid_spec g;
    grid_point *p;
    int n;
    const char *pins[] = {"train.steps=5"};
    int rc = load_grid("exl.yaml",
                       "base: base.yaml\n"
                       "sweep:\n  residual.method: [hc, mhc]\n  train.seed: [1, 2]\n"
                       "exclude:\n"
                       "  - {residual.method: hc, train.seed: [7, 2]}\n"
                       "  - {residual.method: [mhc, rc]}\n"
                       "include: [{residual.method: rc, residual.n_streams: 1, train.seed: 2}]\n"
                       "override:\n"
                       "  - when: {train.seed: [9, 1]}\n"
                       "    set: {train.warmup: 3}\n"
                       "  - when: {residual.method: [rc, hc]}\n"
                       "    set: {train.steps: 30}\n"
                       "name: \"{residual.method}-s{train.seed}\"\n",
                       &g, &p, &n, pins, 1);
    CHECK(rc == 0, "rc %d", rc);
    if (rc) return;
    /* product: hc-s1 (hc-s2 out by the second value of [7, 2]; both mhc out); include: rc-s2 */
    CHECK(n == 2, "%d points: %s %s", n, n > 0 ? p[0].name : "", n > 1 ? p[1].name : "");
    if (n == 2) {
        CHECK(!strcmp(p[0].name, "hc-s1"), "point 0 is %s (an exclude list matches any of its values)", p[0].name);
        CHECK(!strcmp(p[1].name, "rc-s2") && p[1].include == 0,
              "point 1 is %s: an include entry an exclude matches is kept", p[1].name);
        CHECK(p[0].cfg.warmup == 3, "a when: list matches its second value (warmup %d)", p[0].cfg.warmup);
        CHECK(p[1].cfg.warmup == 1, "when: seed [9, 1] does not match seed 2 (warmup %d)", p[1].cfg.warmup);
        for (int i = 0; i < n; i++)
            CHECK(p[i].cfg.steps == 5, "%s: the pin train.steps=5 comes after the override's 30 (%d)", p[i].name,
                  p[i].cfg.steps);
    }
    grid_points_free(p, n);
    grid_free(&g);
}

/* Each bad grid: the exit code 2 and the exact "FILE:LINE:COL: key 'K': problem". */
static void expect_error(const char *text, const char *want) {
    grid_spec g;
    grid_point *p;
    int n;
    capture_begin();
    int rc = load_grid("bad.yaml", text, &g, &p, &n, NULL, 0);
    capture_end();
    CHECK(rc == 2, "rc %d for:\n%s", rc, text);
    CHECK(strstr(captured, want) != NULL, "wanted '%s', got: %s", want, captured);
    if (rc == 0) {
        grid_points_free(p, n);
        grid_free(&g);
    }
}

static void test_validation_errors(void) {
    expect_error("base: base.yaml\nsweep:\n  residual.method: [hc]\n  train.lrr: [1, 2]\n",
                 "bad.yaml:4:3: key 'train.lrr': not a config key (did you mean 'train.lr'?)");
    expect_error("base: base.yaml\nsweep:\n  lr: [0.1]\n", "bad.yaml:3:3: key 'lr': not a config key (did you mean 'train.lr'?)");
    expect_error("base: base.yaml\nset: {model.n_layers: 2}\nsweep: {train.seed: [1]}\n",
                 "bad.yaml:2:7: key 'model.n_layers': not a config key (did you mean 'model.n_layer'?)");
    expect_error("base: base.yaml\nsweep:\n  train.steps: [10, abc]\n", "bad.yaml:3:21: key 'train.steps': expected an integer");
    expect_error("base: base.yaml\nsweep:\n  residual.method: [hc, nope]\n", "bad.yaml:3:25: key 'residual.method':");
    expect_error("base: base.yaml\nsweep:\n  train.seed: 3\n", "bad.yaml:3:15: key 'train.seed': a sweep value must be a list");
    expect_error("base: base.yaml\nsweeps:\n  train.seed: [3]\n", "bad.yaml:2:1: unknown grid key 'sweeps'");
    expect_error("base: nothere.yaml\nsweep: {train.seed: [1]}\n", "bad.yaml:1:7: base: no such file");
    expect_error("preset: huge\nsweep: {train.seed: [1]}\n", "bad.yaml:1:9: key 'preset': unknown preset 'huge'");
    expect_error("base: base.yaml\nsweep: {train.seed: [1]}\nname: \"{train.sede}\"\n",
                 "bad.yaml:3:7: key 'train.sede': in name: not a config key (did you mean 'train.seed'?)");
    expect_error("base: base.yaml\nsweep: {train.seed: [1, 2]}\nname: fixed\n", "are both named 'fixed'");
    expect_error("base: base.yaml\nset: {train.init_from: \"r/{train.sede}/m.safetensors\"}\nsweep: {train.seed: [1, 2]}\n",
                 "key 'train.init_from': point 0: 'r/{train.sede}/m.safetensors': {train.sede} is not a config key");
    expect_error("base: base.yaml\nset: {train.init_from: \"r/{train.seed/m.safetensors\"}\nsweep: {train.seed: [1, 2]}\n",
                 "key 'train.init_from': point 0: 'r/{train.seed/m.safetensors': a '{' without its key and '}'");
    /* of two repeated names, the pair whose later point comes first (1 and 2, not 0 and 3) */
    expect_error("base: base.yaml\nsweep: {train.seed: [1, 2, 2, 1]}\n", "points 1 and 2 are the same run");
    expect_error("base: base.yaml\nsweep: {train.seed: [1, 2, 3, 1, 2]}\nname: \"s{train.seed}\"\n",
                 "points 0 and 3 are the same run ('s1')");
    expect_error("base: base.yaml\nsweep: {residual.method: [rc]}\n",
                 "point 0 (rc-n4-s1337): key 'residual.n_streams': residual.method rc is the single-stream residual");
    expect_error("base: base.yaml\nset: {run.name: x}\nsweep: {train.seed: [1]}\n",
                 "bad.yaml:2:7: key 'run.name': run names come from the grid's name: template");
    expect_error("base: base.yaml\nsweep:\n  train.seed: [1]\n  train.seed: [2]\n", "bad.yaml:4:3: key 'train.seed': duplicate key");
    expect_error("base: base.yaml\nsweep: {train.seed: [1]}\nslurm: {gpu: 1}\n", "bad.yaml:3:9: unknown slurm key");
    expect_error("base: base.yaml\nsweep: {train.seed: [1]}\nexclude: [{train.seed: 1}]\n", "the grid has no points");
    expect_error("base: base.yaml\nsweep: [1, 2]\n", "bad.yaml:2:8: sweep: must be a mapping");
    expect_error("base: base.yaml\nsweep:\n  train.seed: [1\n", "bad.yaml:");
    expect_error("base: base.yaml\nsweep:\n  train.lr: [0.1, !!str 1]\n", "bad.yaml:3:19: YAML tags (!!str, !!int, ...)");
    /* bad UTF-8: libyaml gives a byte offset, the message its line and column */
    expect_error("base: base.yaml\nsweep: {train.seed: [1]}\nname: \"a\xff\"\n", "bad.yaml:3:9: invalid leading UTF-8 octet (byte 0xff)");
}

/* The grid file's other shapes a hand-written grid gets wrong: each refused with rc 2 and
 * its file, line, column and (where there is one) key; and --set pins that are no KEY=VALUE
 * or name what the grid sets itself. */
static void test_validation_errors_shapes(void) {
    const char *S = "base: base.yaml\nsweep: {train.seed: [1]}\n"; /* lines 1-2 of most below */
    char t[1024];
#define WITH(rest) (snprintf(t, sizeof t, "%s%s", S, rest), t)
    expect_error("[1, 2]\n", "bad.yaml:1:1: a grid file is a mapping with sweep:, and base: or preset:");
    expect_error(WITH("base: base.yaml\n"), "bad.yaml:3:1: duplicate grid key 'base' (first at 1:1)");
    expect_error("base: [a.yaml]\nsweep: {train.seed: [1]}\n", "bad.yaml:1:7: base: expected a single value, got a list");
    expect_error(WITH("include: {train.seed: 2}\n"), "bad.yaml:3:10: include: expected a list of mappings");
    expect_error(WITH("exclude: 3\n"), "bad.yaml:3:10: exclude: expected a list of mappings");
    expect_error(WITH("override: {when: {train.seed: 1}}\n"),
                 "bad.yaml:3:11: override: expected a list of {when: {...}, set: {...}}");
    expect_error(WITH("override:\n  - when: {train.seed: 1}\n"),
                 "bad.yaml:4:5: override: each entry needs when: {...} and set: {...}");
    expect_error(WITH("override:\n  - when: {train.seed: 1}\n    set: {preset: tiny}\n"),
                 "bad.yaml:5:11: key 'preset': a preset cannot be set here (set it at the top level or sweep it)");
    expect_error("base: base.yaml\nsweep:\n  train.seed: {a: 1}\n",
                 "bad.yaml:3:15: key 'train.seed': a sweep value must be a list of alternatives, e.g. [1, 2]");
    expect_error(WITH("include:\n  - {train.seed: {a: 1}}\n"),
                 "bad.yaml:4:18: key 'train.seed': expected a value or a list of values, got a mapping");
    expect_error("base: base.yaml\nsweep:\n  train.seed: []\n", "bad.yaml:3:15: key 'train.seed': an empty list of values");
    expect_error(WITH("set: [train.lr]\n"), "bad.yaml:3:6: set: must be a mapping of config keys to values");
    expect_error(WITH("set:\n  train.lr: 0.1\n  train.lr: 0.2\n"), "bad.yaml:5:3: key 'train.lr': duplicate key (first at 4:13)");
    expect_error(WITH("set: {zzqqxxww.vv: 1}\n"), "bad.yaml:3:7: key 'zzqqxxww.vv': not a config key (`s2hc config` lists them)");
    expect_error(WITH("set: {run.out: elsewhere}\n"), "bad.yaml:3:7: key 'run.out': the runs directory is the grid's out: key");
    expect_error(WITH("set:\n  ? [train.lr]\n  : 1\n"), "bad.yaml:4:5: expected a config key such as train.lr");
    expect_error(WITH("set: {train.lr: {a: 1}}\n"), "bad.yaml:3:17: key 'train.lr': expected a single value, got a mapping");
    expect_error(WITH("set: {data.ood: [synth, [other]]}\n"),
                 "bad.yaml:3:25: key 'data.ood': expected a list of names, got a list as an item");
    expect_error(WITH("slurm: [1]\n"), "bad.yaml:3:8: slurm: expected a mapping (partition, time, gpus, cpus, mem,");
    expect_error(WITH("slurm: {cpus: many}\n"), "bad.yaml:3:15: slurm.cpus: expected a whole number in [0, 4096], got 'many'");
    expect_error(WITH("slurm: {gpus: 1025}\n"), "bad.yaml:3:15: slurm.gpus: expected a whole number in [0, 1024], got '1025'");
    expect_error(WITH("slurm: {time: [1]}\n"), "bad.yaml:3:15: slurm.time: expected a single value, got a list");
    expect_error(WITH("name: \"a}b\"\n"), "bad.yaml:3:7: name: a '}' without its '{'");
    expect_error(WITH("name: \"a{train.seed\"\n"), "bad.yaml:3:7: name: a '{' without its '}'");
    expect_error(WITH("name: \"a{}\"\n"), "bad.yaml:3:7: name: an empty {} (write {KEY}, {preset} or {index})");
    expect_error(WITH("name: \"x{run.out}\"\n"), "bad.yaml:3:7: key 'run.out': in name: set by the grid itself");
    /* nesting past the config's limit: refused before libyaml recurses through it */
    char deep[4096];
    int k = snprintf(deep, sizeof deep, "base: base.yaml\nsweep: {train.seed: [1]}\nset: {train.lr: ");
    for (int i = 0; i < CONFIG_YAML_MAX_DEPTH + 4; i++) deep[k++] = '[';
    deep[k++] = '1';
    for (int i = 0; i < CONFIG_YAML_MAX_DEPTH + 4; i++) deep[k++] = ']';
    snprintf(deep + k, sizeof deep - (size_t)k, "}\n");
    expect_error(deep, "bad.yaml:3:");
    CHECK(strstr(captured, "values nested more than 64 deep") != NULL, "deep nesting: %s", captured);
#undef WITH
    /* a product past 100000 points (50 x 50 x 50): refused as a likely typo, before expanding */
    static char big[4096];
    int b = snprintf(big, sizeof big, "base: base.yaml\nsweep:\n");
    const char *axes[] = {"train.seed", "train.steps", "train.eval_every"};
    for (int a = 0; a < 3; a++) {
        b += snprintf(big + b, sizeof big - (size_t)b, "  %s: [", axes[a]);
        for (int v = 1; v <= 50; v++) b += snprintf(big + b, sizeof big - (size_t)b, "%s%d", v > 1 ? ", " : "", 100 + v);
        b += snprintf(big + b, sizeof big - (size_t)b, "]\n");
    }
    expect_error(big, "bad.yaml:3:3: more than 100000 points: is a list too long?");
    /* --set pins: KEY=VALUE, a config key, not one the grid sets itself */
    const char *bad_pins[][2] = {
        {"train.steps", "--set train.steps: expected KEY=VALUE, e.g. --set train.steps=50 or --set preset=small"},
        {"=5", "--set =5: expected KEY=VALUE"},
        {"zzqqxxww.vv=1", "--set zzqqxxww.vv=1: key 'zzqqxxww.vv': not a config key"},
        {"run.name=x", "--set run.name=x: key 'run.name': set by the grid (name: template, out: or --out)"},
        {"run.out=/tmp/x", "--set run.out=/tmp/x: key 'run.out': set by the grid (name: template, out: or --out)"},
    };
    for (size_t i = 0; i < sizeof bad_pins / sizeof bad_pins[0]; i++) {
        grid_spec g;
        grid_point *p;
        int n;
        const char *pin[1] = {bad_pins[i][0]};
        capture_begin();
        int rc = load_grid("pins.yaml", S, &g, &p, &n, pin, 1);
        capture_end();
        CHECK(rc == 2, "--set %s: rc %d", pin[0], rc);
        CHECK(strstr(captured, bad_pins[i][1]) != NULL, "--set %s: wanted '%s', got: %s", pin[0], bad_pins[i][1], captured);
        if (rc == 0) {
            grid_points_free(p, n);
            grid_free(&g);
        }
    }
}

/* ---- run directories and index.csv ---------------------------------------------------- */

/* A run file as `s2hc train` leaves it: status, config, losses, throughput, OOD ppl.
 * fake_zero_tps_step > 0: that step's tokens/s row holds 0, as a diverged step's does
 * (docs/runfile.md). */
static int fake_zero_tps_step;
static int fake_no_config; /* 1: no config attribute, as a damaged file */
static double fake_ppl = 12.5;
static void fake_run(const grid_point *p, const char *status, const s2hc_config *stored, int steps, double loss) {
    char dir[1200], path[1300];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(path, sizeof path, "mkdir -p '%s'", dir);
    CHECK(system(path) == 0, "mkdir %s", dir);
    h5log log;
    h5log_init(&log);
    char *yaml = config_to_yaml(stored ? stored : &p->cfg);
    h5log_attr_str(&log, "/", "status", status);
    if (!fake_no_config) h5log_attr_str(&log, "/", "config", yaml);
    free(yaml);
    int ss = h5log_series_add(&log, "/train/step", H5LOG_I64, 0, NULL, "step", "");
    int sl = h5log_series_add(&log, "/train/loss", H5LOG_F64, 0, NULL, "loss", "");
    int st = h5log_series_add(&log, "/train/tokens_per_s", H5LOG_F64, 0, NULL, "tps", "");
    for (int i = 1; i <= steps; i++) {
        int64_t s = i;
        double l = loss + (steps - i), t = i == fake_zero_tps_step ? 0 : i % 2 ? 1000 : 3000;
        h5log_append(&log, ss, &s);
        h5log_append(&log, sl, &l);
        h5log_append(&log, st, &t);
    }
    int ev = h5log_series_add(&log, "/eval/val_loss", H5LOG_F64, 0, NULL, "val", "");
    double v = loss + 0.5;
    h5log_append(&log, ev, &v);
    size_t one = 1;
    h5log_static_set(&log, "/eval/ood/synth/ppl", H5LOG_F64, 0, &one, &fake_ppl, "ppl");
    snprintf(path, sizeof path, "%s/run.h5", dir);
    CHECK(h5log_save(&log, path) == 0, "save %s", path);
    h5log_free(&log);
}

static void touch(const grid_point *p, const char *leaf, const char *text) {
    char dir[1200], path[1300];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(path, sizeof path, "mkdir -p '%s'", dir);
    CHECK(system(path) == 0, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/%s", dir, leaf);
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

/* The row of index.csv whose name column is `name` (fields split at commas; no quoting
 * in these rows), or NULL. */
static int csv_row(const char *csv, const char *name, char fields[40][64]) {
    char want[80];
    snprintf(want, sizeof want, ",%s,", name);
    const char *l = strstr(csv, want);
    if (!l) return 0;
    while (l > csv && l[-1] != '\n') l--;
    int n = 0;
    size_t k = 0;
    for (; *l && *l != '\n' && n < 40; l++) {
        if (*l == ',') { fields[n++][k] = '\0'; k = 0; continue; }
        if (k < 63) fields[n][k++] = *l;
    }
    if (n < 40) fields[n++][k] = '\0';
    return n;
}

static void test_states_and_index(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("idx.yaml",
                       "base: base.yaml\n"
                       "sweep:\n  residual.method: [hc, mhc, s2hc, kromhc, mhc_lite, orthogonal]\n"
                       "name: \"{residual.method}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 6, "rc %d n %d", rc, n);
    if (rc) return;
    fake_run(&p[0], "finished", NULL, 10, 2.0);                  /* hc: finished */
    fake_run(&p[1], "diverged", NULL, 4, 9.0);                   /* mhc: diverged */
    s2hc_config other = p[2].cfg;
    other.lr = 0.5;
    fake_run(&p[2], "finished", &other, 10, 2.0);                /* s2hc: another lr */
    fake_run(&p[3], "running", NULL, 5, 3.0);                    /* kromhc: interrupted... */
    touch(&p[3], "ckpt.h5", "x");                                /* ...with a checkpoint */
    touch(&p[3], "grid.status", "state=interrupted\nexit_code=130\nwall_s=4.5\n");
    touch(&p[4], "grid.status", "state=failed\nexit_code=1\nwall_s=0.25\n"); /* mhc_lite: failed */
    /* orthogonal: pending, but locked by "another runner" */
    char dir[1200], lockp[1300];
    run_dir_of(&p[5].cfg, dir, sizeof dir);
    snprintf(lockp, sizeof lockp, "mkdir -p '%s'", dir);
    CHECK(system(lockp) == 0, "mkdir");
    snprintf(lockp, sizeof lockp, "%s/.lock", dir);
    int fd = open(lockp, O_RDWR | O_CREAT, 0644);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK(fd >= 0 && fcntl(fd, F_OFD_SETLK, &fl) == 0, "lock");

    const char *ood[GRID_MAX_OOD];
    int nood = grid_ood_names(p, n, ood);
    CHECK(nood == 2 && !strcmp(ood[0], "synth") && !strcmp(ood[1], "other"), "ood names %d", nood);
    grid_status st[6];
    memset(st, 0, sizeof st);
    for (int i = 0; i < 6; i++) grid_inspect(&p[i], ood, nood, &st[i]);
    CHECK(st[0].state == GS_FINISHED, "hc %s", grid_state_names[st[0].state]);
    /* the final train loss: the mean of the last tenth of 10 rows 2 + 9 .. 2 + 0 (run_loss_window) */
    CHECK(st[0].step == 10 && fabs(st[0].train_loss - 2.0) < 1e-12, "metrics %d %g", st[0].step, st[0].train_loss);
    CHECK(fabs(st[0].tokens_per_s - 2000) < 1e-9 && fabs(st[0].ood_ppl[0] - 12.5) < 1e-12 && isnan(st[0].ood_ppl[1]),
          "tps %g ppl %g", st[0].tokens_per_s, st[0].ood_ppl[0]);
    CHECK(st[1].state == GS_DIVERGED && st[1].exit_code == RUN_DIVERGED, "mhc %s", grid_state_names[st[1].state]);
    CHECK(st[2].state == GS_CHANGED && strstr(st[2].diff, "train.lr: 0.5 (stored run) vs 0.001 (grid)"), "s2hc %s: %s",
          grid_state_names[st[2].state], st[2].diff);
    CHECK(st[3].state == GS_INTERRUPTED && st[3].exit_code == 130 && st[3].wall_s == 4.5, "kromhc %s",
          grid_state_names[st[3].state]);
    CHECK(st[4].state == GS_FAILED && st[4].exit_code == 1, "mhc_lite %s", grid_state_names[st[4].state]);
    CHECK(st[5].state == GS_RUNNING, "orthogonal (locked) %s", grid_state_names[st[5].state]);
    /* the cache: an unchanged run.h5 is not read again, a rewritten one is */
    st[0].train_loss = -1;
    grid_inspect(&p[0], ood, nood, &st[0]);
    CHECK(st[0].train_loss == -1, "cached");
    usleep(20000);
    fake_run(&p[0], "finished", NULL, 12, 1.5);
    grid_inspect(&p[0], ood, nood, &st[0]);
    CHECK(st[0].step == 12 && fabs(st[0].train_loss - 2.0) < 1e-12, "reloaded: %d %g (the last 2 of 12 rows)", st[0].step,
          st[0].train_loss);

    char *csv = index_csv(&g, p, n);
    if (csv) {
        const char *hdr = "point,name,run_dir,state,exit_code,step,steps,final_train_loss,val_loss,ood_synth_ppl,"
                          "ood_other_ppl,tokens_per_s,wall_s,residual.method\n";
        CHECK(strncmp(csv, hdr, strlen(hdr)) == 0, "header: %.*s", (int)strcspn(csv, "\n"), csv);
        char f[40][64];
        int nf = csv_row(csv, "hc", f);
        CHECK(nf == 14, "%d fields", nf);
        if (nf == 14) {
            CHECK(!strcmp(f[0], "0") && !strcmp(f[3], "finished") && !strcmp(f[4], "0"), "hc row: %s %s %s", f[0], f[3], f[4]);
            CHECK(!strcmp(f[5], "12") && !strcmp(f[6], "10") && !strcmp(f[7], "2") && !strcmp(f[8], "2"),
                  "hc numbers: %s %s %s %s", f[5], f[6], f[7], f[8]);
            CHECK(!strcmp(f[9], "12.5") && !strcmp(f[10], "") && !strcmp(f[11], "2000") && !strcmp(f[13], "hc"),
                  "hc ppl/tps: %s %s %s %s", f[9], f[10], f[11], f[13]);
        }
        nf = csv_row(csv, "kromhc", f);
        CHECK(nf == 14 && !strcmp(f[3], "interrupted") && !strcmp(f[4], "130") && !strcmp(f[12], "4.5"),
              "kromhc row: %s %s %s", f[3], f[4], f[12]);
        nf = csv_row(csv, "mhc_lite", f);
        CHECK(nf == 14 && !strcmp(f[3], "failed") && !strcmp(f[4], "1") && !strcmp(f[7], ""), "mhc_lite row: %s %s",
              f[3], f[4]);
        nf = csv_row(csv, "s2hc", f);
        CHECK(nf == 14 && !strcmp(f[3], "changed"), "s2hc row: %s", f[3]);
        nf = csv_row(csv, "mhc", f);
        CHECK(nf == 14 && !strcmp(f[3], "diverged") && !strcmp(f[4], "3"), "mhc row: %s %s", f[3], f[4]);
        nf = csv_row(csv, "orthogonal", f);
        CHECK(nf == 14 && !strcmp(f[3], "running") && !strcmp(f[0], "5"), "orthogonal row: %s", f[3]);
        free(csv);
    }
    char cmd[800];
    snprintf(cmd, sizeof cmd, "ls %s/runs | grep -c tmp >/dev/null", tmp_dir);
    CHECK(system(cmd) != 0, "no temporary files left in the runs directory");
    close(fd);
    grid_points_free(p, n);
    grid_free(&g);
}

/* A point with a checkpoint and no record is partial; index.csv numbers have six
 * significant digits; tokens/s is the mean of the positive rows (a diverged step's row
 * holds 0); include entries' keys are columns of index.csv, with every point's value. */
static void test_partial_and_index_columns(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("part.yaml",
                       "base: base.yaml\n"
                       "sweep:\n  residual.method: [hc, mhc]\n"
                       "include: [{residual.method: rc, residual.n_streams: 1, train.lr: 0.002}]\n"
                       "name: \"part-{residual.method}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 3, "rc %d n %d", rc, n);
    if (rc) return;
    if (n != 3) { grid_points_free(p, n); grid_free(&g); return; }
    fake_zero_tps_step = 4;
    fake_ppl = INFINITY;                                /* exp of a loss past ~709 nats */
    fake_run(&p[0], "finished", NULL, 4, 2.123456789);  /* hc: tokens/s rows 1000 3000 1000 0 */
    fake_zero_tps_step = 0;
    fake_ppl = 12.5;
    fake_run(&p[1], "running", NULL, 3, 3.0);           /* mhc: stopped without a record... */
    touch(&p[1], "ckpt.h5", "x");                       /* ...with a checkpoint */
    const char *ood[GRID_MAX_OOD];
    int nood = grid_ood_names(p, n, ood);
    grid_status st[3];
    memset(st, 0, sizeof st);
    for (int i = 0; i < 3; i++) grid_inspect(&p[i], ood, nood, &st[i]);
    CHECK(st[0].state == GS_FINISHED, "hc %s", grid_state_names[st[0].state]);
    CHECK(fabs(st[0].tokens_per_s - 5000.0 / 3) < 1e-9, "tokens/s %g: the mean of the positive rows (%g)",
          st[0].tokens_per_s, 5000.0 / 3);
    CHECK(st[1].state == GS_PARTIAL, "mhc (checkpoint, no grid.status) %s", grid_state_names[st[1].state]);
    CHECK(st[2].state == GS_PENDING, "rc %s", grid_state_names[st[2].state]);

    char *csv = index_csv(&g, p, n);
    if (csv) {
        const char *hdr = "point,name,run_dir,state,exit_code,step,steps,final_train_loss,val_loss,ood_synth_ppl,"
                          "ood_other_ppl,tokens_per_s,wall_s,residual.method,residual.n_streams,train.lr\n";
        CHECK(strncmp(csv, hdr, strlen(hdr)) == 0, "header (the include entry's keys are columns): %.*s",
              (int)strcspn(csv, "\n"), csv);
        char f[40][64];
        int nf = csv_row(csv, "part-hc", f);
        CHECK(nf == 16, "%d fields", nf);
        if (nf == 16) {
            CHECK(!strcmp(f[7], "2.12346") && !strcmp(f[8], "2.62346"), "six significant digits: %s %s", f[7], f[8]);
            CHECK(!strcmp(f[11], "1666.67"), "tokens/s %s", f[11]);
            CHECK(!strcmp(f[9], "inf") && !strcmp(f[10], ""), "an infinite perplexity is inf, none is empty: '%s' '%s'",
                  f[9], f[10]);
            CHECK(!strcmp(f[13], "hc") && !strcmp(f[14], "4") && !strcmp(f[15], "0.001"), "hc values: %s %s %s",
                  f[13], f[14], f[15]);
        }
        nf = csv_row(csv, "part-mhc", f);
        CHECK(nf == 16 && !strcmp(f[3], "partial") && !strcmp(f[4], ""), "mhc row: %s %s", f[3], f[4]);
        nf = csv_row(csv, "part-rc", f);
        CHECK(nf == 16 && !strcmp(f[3], "pending") && !strcmp(f[13], "rc") && !strcmp(f[14], "1") &&
                  !strcmp(f[15], "0.002"),
              "rc row (the include entry's values): %s %s %s %s", f[3], f[13], f[14], f[15]);
        free(csv);
    }
    grid_points_free(p, n);
    grid_free(&g);
}

/* A swept value holding a quote or a comma is one CSV field: quoted, its quotes doubled
 * (RFC 4180), so a reader of index.csv sees the row's columns. */
static void test_index_quoting(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("quote.yaml",
                       "base: base.yaml\n"
                       "sweep:\n  train.init_from: ['a\"b,c.safetensors', 'd\"e.safetensors', plain.safetensors]\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 3, "rc %d n %d", rc, n);
    if (rc) return;
    char *csv = index_csv(&g, p, n);
    if (csv) {
        CHECK(strstr(csv, ",\"a\"\"b,c.safetensors\"\n") != NULL, "quote and comma: quoted, the quote doubled:\n%s", csv);
        CHECK(strstr(csv, ",\"d\"\"e.safetensors\"\n") != NULL, "a quote alone: quoted, doubled:\n%s", csv);
        CHECK(strstr(csv, ",plain.safetensors\n") != NULL, "a plain value as it is:\n%s", csv);
        free(csv);
    }
    grid_points_free(p, n);
    grid_free(&g);
}

/* --dry-run says what `s2hc train --resume` will do with a stopped point: resume it from
 * its checkpoint, or, when the checkpoint is a newer build's (version 2), fail at once
 * (it said "resume at step 3" for that one too). */
static void test_dry_run_newer_checkpoint(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("dry.yaml", "base: base.yaml\nsweep:\n  residual.method: [hc]\nname: \"dry-{residual.method}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 1, "rc %d n %d", rc, n);
    if (rc) return;
    fake_run(&p[0], "running", NULL, 3, 3.0);
    char dir[1200], ck[1300], gp[600], out[640], text[8192];
    run_dir_of(&p[0].cfg, dir, sizeof dir);
    snprintf(ck, sizeof ck, "%s/ckpt.h5", dir);
    /* the status holds the checkpoint's step (the ETA's), read again when the file changes */
    ckpt_meta meta = {.step = 2, .config_yaml = "model: {}\n"};
    CHECK(ckpt_save(ck, NULL, NULL, NULL, 0, &meta) == 0, "save %s", ck);
    grid_status s;
    memset(&s, 0, sizeof s);
    grid_inspect(&p[0], NULL, 0, &s);
    CHECK(s.have_ckpt && s.ckpt_step == 2 && s.step == 3, "have_ckpt %d ckpt_step %d step %d, want 1 2 3", s.have_ckpt,
          s.ckpt_step, s.step);
    remove(ck);
    grid_inspect(&p[0], NULL, 0, &s);
    CHECK(!s.have_ckpt && s.ckpt_step == -1, "no checkpoint: have_ckpt %d ckpt_step %d", s.have_ckpt, s.ckpt_step);
    meta.step = 3;
    CHECK(ckpt_save(ck, NULL, NULL, NULL, 0, &meta) == 0, "save %s", ck);
    grid_inspect(&p[0], NULL, 0, &s);
    CHECK(s.have_ckpt && s.ckpt_step == 3, "a new checkpoint: have_ckpt %d ckpt_step %d, want 1 3", s.have_ckpt,
          s.ckpt_step);
    /* one saved over it, as a training's next checkpoint replaces it (the file never gone
       between two inspections: the step above came back only after the removal reset the
       cache); its time set apart, as minutes between checkpoints would, not the clock's tick */
    meta.step = 5;
    CHECK(ckpt_save(ck, NULL, NULL, NULL, 0, &meta) == 0, "save %s", ck);
    struct stat sb0;
    CHECK(stat(ck, &sb0) == 0, "stat %s", ck);
    const struct timespec later[2] = {{sb0.st_atim.tv_sec + 60, 0}, {sb0.st_mtim.tv_sec + 60, 0}};
    CHECK(utimensat(AT_FDCWD, ck, later, 0) == 0, "utimensat %s", ck);
    grid_inspect(&p[0], NULL, 0, &s);
    CHECK(s.have_ckpt && s.ckpt_step == 5, "a checkpoint saved over the last: ckpt_step %d, want 5", s.ckpt_step);
    meta.step = 3; /* the run's own step again, for the dry run below */
    CHECK(ckpt_save(ck, NULL, NULL, NULL, 0, &meta) == 0, "save %s", ck);
    snprintf(gp, sizeof gp, "%s/dry.yaml", tmp_dir);
    snprintf(out, sizeof out, "%s/runs", tmp_dir);
    char *argv[] = {"grid", gp, "--out", out, "--dry-run", NULL};
    rc = t_run_captured(grid_main, 5, argv, text, sizeof text);
    CHECK(rc == 0 && strstr(text, "dry-hc: resume at step 3 of 10 (partial)") && strstr(text, "fail 0;"),
          "a checkpoint of this build: rc %d:\n%s", rc, text);
    hid_t f = H5Fopen(ck, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t a = H5Aopen(f, "version", H5P_DEFAULT);
    const int64_t two = 2;
    CHECK(a >= 0 && H5Awrite(a, H5T_NATIVE_INT64, &two) >= 0, "version 2 into %s", ck);
    H5Aclose(a);
    H5Fclose(f);
    rc = t_run_captured(grid_main, 5, argv, text, sizeof text);
    CHECK(rc == 0 && strstr(text, "dry-hc: fail: `s2hc train --resume` refuses it: ") &&
              strstr(text, "ckpt.h5: checkpoint format version 2, this build reads version 1") &&
              strstr(text, "would run 0 ") && strstr(text, "fail 1;"),
          "a newer build's checkpoint: rc %d:\n%s", rc, text);
    grid_points_free(p, n);
    grid_free(&g);
}

/* A grid file's path, its name and its base's path are used whole (the base beside it,
 * runs/<name>, the Slurm scripts' command and job names): past their bounds they are
 * refused by their length. They were cut: the Slurm array ran a grid file of the cut path,
 * two grids whose names shared 63 bytes shared runs/<name>, and a base beside a grid file
 * deep in the tree was "no such file". */
static void test_long_grid_paths(void) {
    char deep[1200], gp[1400], bp[1400];
    snprintf(deep, sizeof deep, "%s/deep", tmp_dir);
    while (strlen(deep) < 480) {
        size_t n = strlen(deep);
        snprintf(deep + n, sizeof deep - n, "/%0*d", 479 - (int)n < 200 ? 479 - (int)n : 200, 0);
    }
    CHECK(mkdir_p(deep) == 0, "mkdir %s", deep);
    const size_t dl = strlen(deep);
    CHECK(dl == 480, "a folder of %zu bytes", dl);
    /* a path past 511 bytes */
    char name[160];
    memset(name, 'g', 60);
    snprintf(name + 60, sizeof name - 60, ".yaml");
    snprintf(gp, sizeof gp, "%s/%s", deep, name);
    FILE *f = fopen(gp, "w");
    if (f) { fputs("sweep: {train.seed: [1, 2]}\n", f); fclose(f); }
    grid_spec g;
    int rc;
    capture_begin();
    rc = grid_load(&g, gp, NULL, NULL, 0);
    capture_end();
    CHECK(rc == 2 && strstr(captured, "grid file ") && strstr(captured, "a path of ") &&
              strstr(captured, "bytes, longer than 511"), "a grid file path of %zu bytes: rc %d: %s", strlen(gp), rc,
          captured);
    if (rc == 0) grid_free(&g);
    /* a name of 64 bytes before its extension */
    memset(name, 'n', 64);
    snprintf(name + 64, sizeof name - 64, ".yaml");
    write_file(name, "sweep: {train.seed: [1, 2]}\n", gp, sizeof gp);
    capture_begin();
    rc = grid_load(&g, gp, NULL, NULL, 0);
    capture_end();
    CHECK(rc == 2 && strstr(captured, "a name (the grid's name, without its extension) of 64 bytes, longer than 63"),
          "a grid name of 64 bytes: rc %d: %s", rc, captured);
    if (rc == 0) grid_free(&g);
    name[63] = '\0';
    snprintf(name + 63, sizeof name - 63, ".yaml");
    write_file(name, "sweep: {train.seed: [1, 2]}\n", gp, sizeof gp);
    rc = grid_load(&g, gp, NULL, NULL, 0);
    CHECK(rc == 0 && strlen(g.stem) == 63, "a grid name of 63 bytes: rc %d", rc);
    if (rc == 0) grid_free(&g);
    name[1] = '.'; /* a dot in it: the name is still whole (runs/<name>), not the part before that dot */
    write_file(name, "sweep: {train.seed: [1, 2]}\n", gp, sizeof gp);
    rc = grid_load(&g, gp, NULL, NULL, 0);
    CHECK(rc == 0 && strlen(g.stem) == 63 && !strncmp(g.stem, name, 63), "a grid name of 63 bytes with a dot: rc %d, "
          "stem '%s'", rc, rc == 0 ? g.stem : "");
    if (rc == 0) grid_free(&g);
    /* a base beside it whose path is past 511 bytes */
    char bname[120];
    memset(bname, 'b', 80);
    snprintf(bname + 80, sizeof bname - 80, ".yaml");
    snprintf(bp, sizeof bp, "%s/%s", deep, bname);
    f = fopen(bp, "w");
    if (f) { fputs(base_yaml, f); fclose(f); }
    snprintf(gp, sizeof gp, "%s/s.yaml", deep);
    f = fopen(gp, "w");
    if (f) { fprintf(f, "base: %s\nsweep: {train.seed: [1, 2]}\n", bname); fclose(f); }
    capture_begin();
    rc = grid_load(&g, gp, NULL, NULL, 0);
    capture_end();
    CHECK(rc == 2 && strstr(captured, "base: 'bbbb") && strstr(captured, "beside the grid file: a path of ") &&
              strstr(captured, "longer than 511"), "a base of %zu bytes: rc %d: %s", strlen(bp), rc, captured);
    if (rc == 0) grid_free(&g);
}

/* `--slurm` writes the array line with the array limit, down to 1 (one task at a time). */
static void test_slurm_array_limit(void) {
    char bp[600], gp[600], out[640], path[700];
    write_file("base.yaml", base_yaml, bp, sizeof bp);
    for (int lim = 0; lim <= 2; lim++) {
        char text[400], want[64];
        snprintf(text, sizeof text,
                 "base: base.yaml\nsweep: {train.seed: [1, 2, 3]}\nslurm: {array_limit: %d}\n", lim);
        write_file("slm.yaml", text, gp, sizeof gp);
        snprintf(out, sizeof out, "%s/slurm%d", tmp_dir, lim);
        char *argv[] = {"grid", gp, "--out", out, "--slurm", NULL};
        fflush(stdout);
        int saved = dup(1), fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        close(fd);
        int rc = grid_main(5, argv);
        fflush(stdout);
        dup2(saved, 1);
        close(saved);
        CHECK(rc == 0, "array_limit %d: --slurm rc %d", lim, rc);
        snprintf(path, sizeof path, "%s/slurm/array.sbatch", out);
        char *a = read_text(path);
        CHECK(a != NULL, "%s written", path);
        if (!a) continue;
        if (lim > 0) snprintf(want, sizeof want, "\n#SBATCH --array=0-2%%%d\n", lim);
        else snprintf(want, sizeof want, "\n#SBATCH --array=0-2\n");
        CHECK(strstr(a, want) != NULL, "array_limit %d: wanted '%s' in:\n%s", lim, want + 1, a);
        free(a);
    }
}

/* The keys a stored run may differ in (docs/grids.md, "Resume, changes, locks"); a stored
 * run that differs from the point in any other config key alone is changed. The keys come
 * from config_to_yaml (every key, schema order); for each, a value that config_set and
 * config_validate take and that changes that key alone (candidates: a few generic values,
 * then the schema's allowed values of an enum). */
static const char *const doc_ignored[] = {"run.out",          "data.dir",           "train.threads",
                                          "train.log_every",  "run.backend",        "train.eval_every",
                                          "train.eval_batches", "train.ckpt_every", "probe.every",
                                          "probe.final_samples", "train.eval_ood", NULL};

/* The "key: value" line of key in config_to_yaml text, or "" (out: n bytes). */
static void yaml_line_of(const char *yaml, const char *key, char *out, size_t n) {
    out[0] = '\0';
    char sec[64], line[1024];
    sec[0] = '\0';
    for (const char *l = yaml; *l;) {
        size_t len = strcspn(l, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        if (line[0] && line[0] != ' ') snprintf(sec, sizeof sec, "%.*s", (int)strcspn(line, ":"), line);
        else if (line[0]) {
            char k[200];
            snprintf(k, sizeof k, "%s.%.*s", sec, (int)strcspn(line + 2, ":"), line + 2);
            if (!strcmp(k, key)) { snprintf(out, n, "%s", line); return; }
        }
        l += len + (l[len] ? 1 : 0);
    }
}

static int yaml_lines_differing(const char *a, const char *b) {
    int d = 0;
    while (*a || *b) {
        size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
        d += la != lb || memcmp(a, b, la) != 0;
        a += la + (a[la] ? 1 : 0);
        b += lb + (b[lb] ? 1 : 0);
    }
    return d;
}

/* Another valid value of key in *c (changed in place); 0 when none was found. */
static int change_one_key(s2hc_config *c, const char *key, const char *schema) {
    const char *generic[] = {"2", "1", "3", "7", "0", "0.5", "0.25", "true", "false", "x9", "[x9]", "[]", NULL};
    char cands[40][64];
    int nc = 0;
    for (int i = 0; generic[i]; i++) snprintf(cands[nc++], 64, "%s", generic[i]);
    /* the schema's allowed values of the key: "  KEY  TYPE  DEFAULT  a | b | c" */
    char want[200];
    snprintf(want, sizeof want, "\n  %s ", key);
    const char *l = strstr(schema, want);
    if (l) {
        char line[600];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(l + 1, "\n"), l + 1);
        char *bar = strchr(line, '|');
        if (bar) {
            char *s = bar;
            while (s > line && s[-1] == ' ') s--;
            while (s > line && s[-1] != ' ') s--;
            for (char *tok = strtok(s, " |"); tok && nc < 40; tok = strtok(NULL, " |"))
                snprintf(cands[nc++], 64, "%s", tok);
        }
    }
    char *orig = config_to_yaml(c);
    int found = 0;
    for (int i = 0; i < nc && !found; i++) {
        s2hc_config t = *c;
        char a[300];
        snprintf(a, sizeof a, "%s=%s", key, cands[i]);
        capture_begin();
        int bad = config_set(&t, a) || config_validate(&t, "test");
        capture_end();
        if (bad) continue;
        char *y = config_to_yaml(&t);
        char la[1024], lb[1024];
        yaml_line_of(orig, key, la, sizeof la);
        yaml_line_of(y, key, lb, sizeof lb);
        if (la[0] && strcmp(la, lb) && yaml_lines_differing(orig, y) == 1) { *c = t; found = 1; }
        free(y);
    }
    free(orig);
    return found;
}

static void test_changed_every_key(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("chg.yaml", "base: base.yaml\nsweep: {train.seed: [1]}\nname: chg\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 1, "rc %d n %d", rc, n);
    if (rc) return;
    char *schema = NULL;
    size_t slen = 0;
    FILE *sf = open_memstream(&schema, &slen);
    config_print_schema(sf);
    fclose(sf);
    char *yaml = config_to_yaml(&p[0].cfg);
    const char *ood[GRID_MAX_OOD];
    int nood = grid_ood_names(p, n, ood);
    int nkeys = 0, nignored = 0;
    char sec[64], line[1024];
    sec[0] = '\0';
    for (const char *l = yaml; *l;) {
        size_t len = strcspn(l, "\n");
        snprintf(line, sizeof line, "%.*s", (int)len, l);
        l += len + (l[len] ? 1 : 0);
        if (!line[0]) continue;
        if (line[0] != ' ') { snprintf(sec, sizeof sec, "%.*s", (int)strcspn(line, ":"), line); continue; }
        char key[200];
        snprintf(key, sizeof key, "%s.%.*s", sec, (int)strcspn(line + 2, ":"), line + 2);
        int ignored = 0;
        for (int i = 0; doc_ignored[i]; i++) ignored |= !strcmp(doc_ignored[i], key);
        s2hc_config stored = p[0].cfg;
        if (!change_one_key(&stored, key, schema)) {
            CHECK(0, "key %s: no other valid value found to test it with", key);
            continue;
        }
        usleep(2000); /* a new mtime, although the cache is not used here (st zeroed) */
        fake_run(&p[0], "finished", &stored, 10, 2.0);
        grid_status st;
        memset(&st, 0, sizeof st);
        grid_inspect(&p[0], ood, nood, &st);
        char want[220];
        /* a stored ratio reads back resolved: its min_lr differs first, in schema order */
        snprintf(want, sizeof want, "%s: ", strcmp(key, "train.min_lr_ratio") ? key : "train.min_lr");
        if (ignored) {
            nignored++;
            CHECK(st.state == GS_FINISHED, "a stored run differing only in %s (ignored) is %s: %s", key,
                  grid_state_names[st.state], st.diff);
        } else {
            nkeys++;
            CHECK(st.state == GS_CHANGED && strncmp(st.diff, want, strlen(want)) == 0,
                  "a stored run differing only in %s is %s (diff '%s')", key, grid_state_names[st.state], st.diff);
        }
    }
    CHECK(nignored == 11, "%d ignored keys found in the config", nignored);
    CHECK(nkeys > 35, "only %d keys compared", nkeys);
    CHECK(nkeys + nignored + 1 <= GRID_MAX_SWEPT, "%d keys and preset: more than --list's %d columns of swept keys",
          nkeys + nignored, GRID_MAX_SWEPT);
    free(yaml);
    free(schema);
    grid_points_free(p, n);
    grid_free(&g);
}

/* Whether c's train.init_from is the model.safetensors that `s2hc export` writes in run
 * bc's directory. */
static int starts_from_export_of(const s2hc_config *c, const s2hc_config *bc) {
    char want[CFG_PATH + 32];
    run_dir_of(bc, want, sizeof want);
    snprintf(want + strlen(want), sizeof want - strlen(want), "/model.safetensors");
    return !strcmp(c->init_from, want);
}

/* The grids in experiments/ load and expand (run from the repository root); each
 * upcycling study's second stage starts every point from the exported weights of its own
 * seed's first-stage rc run (the run directory the first grid gives that point, its
 * model.safetensors), rc with one stream, the frames with four. */
static void test_shipped_grids(void) {
    const char *files[] = {"experiments/smoke.yaml",         "experiments/paper.yaml",
                           "experiments/ablations.yaml",     "experiments/streams.yaml",
                           "experiments/upcycle_base.yaml",  "experiments/upcycle.yaml",
                           "experiments/upcycle_long_base.yaml", "experiments/upcycle_long.yaml",
                           "experiments/ood_steps.yaml",     "experiments/ood_steps_cont.yaml",
                           "experiments/hres_streams.yaml",  "experiments/sphere.yaml",
                           "experiments/lr_sensitivity.yaml"};
    const int npoints[] = {0, 72, 0, 0, 9, 12, 3, 9, 18, 9, 42, 60, 40}; /* 0: any number */
    const int base_steps[] = {0, 0, 0, 0, 0, 1000, 0, 3000, 0, 0, 0, 0, 0}; /* second stages: their base's rc steps */
    enum { NF = sizeof files / sizeof files[0] };
    grid_spec g[NF];
    grid_point *p[NF];
    int n[NF], ok[NF];
    for (int i = 0; i < NF; i++) {
        n[i] = 0;
        ok[i] = 0;
        if (access(files[i], R_OK) != 0) continue; /* run from elsewhere */
        int rc = grid_load(&g[i], files[i], NULL, NULL, 0);
        if (rc == 0) rc = grid_expand(&g[i], &p[i], &n[i]);
        CHECK(rc == 0 && n[i] > 0 && (!npoints[i] || n[i] == npoints[i]), "%s: rc %d, %d points", files[i], rc, n[i]);
        ok[i] = rc == 0;
    }
    for (int i = 1; i < NF; i++) {
        if (!base_steps[i] || !ok[i] || !ok[i - 1]) continue;
        for (int k = 0; k < n[i]; k++) {
            const s2hc_config *c = &p[i][k].cfg;
            int found = 0;
            for (int b = 0; b < n[i - 1]; b++) {
                const s2hc_config *bc = &p[i - 1][b].cfg;
                found |= !strcmp(bc->method, "rc") && bc->steps == base_steps[i] && bc->seed == c->seed &&
                         starts_from_export_of(c, bc);
            }
            CHECK(found && c->steps == 1000 && c->n_streams == (strcmp(c->method, "rc") ? 4 : 1),
                  "%s: point %s: init_from '%s' (%s), %d steps, n %d", files[i], p[i][k].name, c->init_from,
                  found ? "its seed's first-stage rc run" : "no first-stage rc run of its seed", c->steps,
                  c->n_streams);
        }
    }
    /* ood_steps_cont.yaml: every point goes on from the 1000-step run of its own method and
       seed in ood_steps.yaml, for 1000 steps */
    int cont = 0;
    while (strcmp(files[cont], "experiments/ood_steps_cont.yaml")) cont++;
    for (int k = 0, i = cont; ok[i] && ok[i - 1] && k < n[i]; k++) {
        const s2hc_config *c = &p[i][k].cfg;
        int found = 0;
        for (int b = 0; b < n[i - 1]; b++) {
            const s2hc_config *bc = &p[i - 1][b].cfg;
            found |= !strcmp(bc->method, c->method) && bc->steps == 1000 && bc->seed == c->seed &&
                     bc->n_streams == c->n_streams && starts_from_export_of(c, bc);
        }
        CHECK(found && c->steps == 1000, "%s: point %s: init_from '%s' (%s), %d steps", files[i], p[i][k].name,
              c->init_from, found ? "its own first-stage run" : "not its method's and seed's 1000-step run", c->steps);
    }
    /* streams.yaml counts for throughput only (no probe, no eval during training) and runs no
       end-of-training probe, whose Jacobian at n = 7's permutation mixtures took longer than
       the grid's whole training */
    for (int k = 0, i = 3; ok[i] && k < n[i]; k++) {
        const s2hc_config *c = &p[i][k].cfg;
        CHECK(c->probe_every == 0 && c->eval_every == 0 && c->final_samples == 0,
              "streams.yaml: point %s: probe.every %d, train.eval_every %d, probe.final_samples %d", p[i][k].name,
              c->probe_every, c->eval_every, c->final_samples);
    }
    /* the learning-rate sweeps (sphere.yaml, lr_sensitivity.yaml): every point decays to
       its own lr / 10, rc with one stream */
    for (int i = NF - 2; i < NF; i++)
        for (int k = 0; ok[i] && k < n[i]; k++) {
            const s2hc_config *c = &p[i][k].cfg;
            CHECK(fabs(c->min_lr - c->lr / 10) < 1e-12 * c->lr && c->n_streams == (strcmp(c->method, "rc") ? 4 : 1),
                  "%s: point %s: lr %g, min_lr %g, n %d", files[i], p[i][k].name, c->lr, c->min_lr, c->n_streams);
        }
    for (int i = 0; i < NF; i++)
        if (ok[i]) {
            grid_points_free(p[i], n[i]);
            grid_free(&g[i]);
        }
}

/* A runner over the n points p of g, with n zeroed statuses and slots (the ETA's tests). */
static void runner_init(grid_runner *r, const grid_spec *g, const grid_point *p, int n, grid_status *st,
                        grid_slot *slot) {
    memset(st, 0, (size_t)n * sizeof *st);
    memset(slot, 0, (size_t)n * sizeof *slot);
    memset(r, 0, sizeof *r);
    r->g = g;
    r->pts = p;
    r->n = n;
    r->st = st;
    r->slot = slot;
}

/* The progress line's ETA: unknown before a point finished; then the queued points' work
 * left and a running point's share at its start less its time since, at the finished
 * points' rate, over -j. A point resumed half-way through that has run 10 s of its 50
 * needs 40, whatever an earlier runner recorded of it (the ETA read its whole run's time
 * less the recorded part: minutes for a point resumed near its end by hand). */
static void test_eta(void) {
    grid_spec g;
    grid_point *p = NULL;
    int n = 0;
    int rc = load_grid("eta.yaml", "base: base.yaml\nsweep:\n  train.seed: [1, 2, 3]\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 3, "rc %d n %d", rc, n);
    if (rc || n != 3) return;
    grid_status st[3];
    grid_slot slot[3];
    int queue[1] = {2};
    grid_runner r;
    runner_init(&r, &g, p, 3, st, slot);
    r.queue = queue;
    r.nq = 1;
    r.j = 2;
    const double W = grid_point_work(&p[0].cfg), now = 1000;
    CHECK(W > 0, "work %g", W);
    CHECK(isnan(grid_eta_seconds(&r, now)), "no point finished: unknown");
    st[0].state = GS_FINISHED; /* 100 s for its work */
    r.wall_sum = 100;
    r.work_sum = W;
    r.wall_n = 1;
    st[1].state = GS_RUNNING; /* started at step 5 of 10, 10 s ago, 15 s recorded of earlier runs */
    slot[1].pid = 12345;
    slot[1].t_start = now - 10;
    slot[1].share = 0.5;
    slot[1].wall_before = 15;
    st[2].state = GS_PENDING; /* queued: all of its work */
    st[2].steps = 10;
    double eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - (40 + 100) / 2.0) < 1e-9, "eta %g, want (40 + 100) / 2", eta);
    slot[1].t_start = now - 80; /* past its share: none left, not a negative */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 100 / 2.0) < 1e-9, "eta %g, want 50", eta);
    st[2].state = GS_PARTIAL; /* queued with a checkpoint at step 4 of 10: 60 % left */
    st[2].step = 4;
    st[2].have_ckpt = 1;
    st[2].ckpt_step = 4;
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 60 / 2.0) < 1e-9, "eta %g, want 30", eta);
    st[2].step = 7; /* killed at step 7, its checkpoint at 4: it trains steps 5..7 again */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 60 / 2.0) < 1e-9, "eta %g, want 30 (from the checkpoint's step, not run.h5's)", eta);
    st[2].ckpt_step = -1; /* a checkpoint that cannot be read: run.h5's step, as grid_resume_step */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 30 / 2.0) < 1e-9, "eta %g, want 15 (an unreadable checkpoint: run.h5's step 7)", eta);
    st[2].have_ckpt = 0; /* no checkpoint: it starts again from step 0 */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 100 / 2.0) < 1e-9, "eta %g, want 50 (no checkpoint: from step 0)", eta);
    st[2].have_ckpt = 1;
    st[2].ckpt_step = 4;
    st[2].step = 4;
    st[2].state = GS_CHANGED; /* train.steps grown to 10, its checkpoint at 4: all of it (--force)... */
    st[2].longer = 1;
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 100 / 2.0) < 1e-9, "eta %g, want 50 (rerun from step 0)", eta);
    r.extend = 1; /* ... or, with --extend, the 60 % past its checkpoint */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 60 / 2.0) < 1e-9, "eta %g, want 30 (extended from step 4)", eta);
    r.extend = 0;
    st[2].longer = 0;
    st[2].state = GS_INTERRUPTED; /* a stopped point queued again: counted once */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 60 / 2.0) < 1e-9, "eta %g, want 30 (queued and stopped: once)", eta);
    r.nq = 0; /* stopped and not queued (a signal stopped the runner): still left */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta - 60 / 2.0) < 1e-9, "eta %g, want 30 (a stopped point is left)", eta);
    st[2].state = GS_FAILED; /* failed: not run again */
    eta = grid_eta_seconds(&r, now);
    CHECK(fabs(eta) < 1e-9, "eta %g, want 0 (a failed point is not left)", eta);
    /* the share left from a step: all of it from step 0 (or of no steps) */
    static const int from[] = {0, 4, 9, 5}, steps[] = {10, 10, 10, 0};
    static const double left[] = {1, 0.6, 0.1, 1};
    for (int i = 0; i < 4; i++)
        CHECK(fabs(grid_work_left(from[i], steps[i]) - left[i]) < 1e-12, "grid_work_left(%d, %d) = %g, want %g",
              from[i], steps[i], grid_work_left(from[i], steps[i]), left[i]);
    /* a point's work: its tokens (steps x batch x grad_accum x block_size) times the multiply-adds
       per token: 12 C^2 a block (attention's q, k, v and output 4 C^2, the MLP's 8 C^2), 2 T C
       for its scores and mix, C x vocab for the head. 10 x 4 x 1 x 32 = 1280 tokens at C = 32,
       T = 32, 2 blocks, vocab 256: 2 (12288 + 2048) + 8192 = 36864 each, 47185920 in all;
       twice that with grad_accum 2; at C = 64, 2 (49152 + 4096) + 16384 = 122880 a token */
    s2hc_config c;
    config_defaults(&c);
    c.n_embd = 32;
    c.block_size = 32;
    c.n_layer = 2;
    c.vocab = 256;
    c.steps = 10;
    c.batch = 4;
    c.grad_accum = 1;
    CHECK(grid_point_work(&c) == 47185920.0, "work %.17g, want 47185920", grid_point_work(&c));
    c.grad_accum = 2;
    CHECK(grid_point_work(&c) == 2 * 47185920.0, "grad_accum 2: work %.17g, want 94371840", grid_point_work(&c));
    c.grad_accum = 1;
    c.n_embd = 64;
    CHECK(grid_point_work(&c) == 1280 * 122880.0, "C = 64: work %.17g, want 157286400", grid_point_work(&c));
    grid_points_free(p, n);
    grid_free(&g);
}

/* The ETA by kind: the points of a method and n that finished give the rate of their kind
 * (rc's steps cost less than a frame method's), the others every finished point's. */
static void test_eta_kinds(void) {
    grid_spec g;
    grid_point *p = NULL;
    int n = 0;
    int rc = load_grid("eta-kinds.yaml",
                       "base: base.yaml\nsweep:\n  residual.method: [identity, s2hc]\n  residual.n_streams: [2, 4]\n"
                       "  train.seed: [1, 2]\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 8, "rc %d n %d", rc, n);
    if (rc || n != 8) return;
    grid_status st[8];
    grid_slot slot[8];
    int queue[2] = {-1, -1};
    grid_runner r;
    runner_init(&r, &g, p, 8, st, slot);
    grid_kinds_setup(&r);
    CHECK(r.nkinds == 4, "4 kinds of (method, n), got %d", r.nkinds);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            const int same = !strcmp(p[i].cfg.method, p[j].cfg.method) && p[i].cfg.n_streams == p[j].cfg.n_streams;
            CHECK((r.kind_of[i] == r.kind_of[j]) == same, "points %d (%s n %d) and %d (%s n %d): kinds %d and %d", i,
                  p[i].cfg.method, p[i].cfg.n_streams, j, p[j].cfg.method, p[j].cfg.n_streams, r.kind_of[i], r.kind_of[j]);
        }
    r.queue = queue;
    r.nq = 2;
    r.j = 1;
    const double W = grid_point_work(&p[0].cfg);
    CHECK(W > 0 && grid_point_work(&p[n - 1].cfg) == W, "the points' work alike");
    CHECK(isnan(grid_eta_seconds(&r, 1000)), "no point finished: unknown");
    /* point 0 finished in 100 s, and twice in 150 s a point of a third kind (a copy of point 0
       counted in no kind's rate here) */
    st[0].state = GS_FINISHED;
    grid_eta_add(&r, 0, 100);
    int *kind_of = r.kind_of;
    r.kind_of = NULL;
    grid_eta_add(&r, 0, 150);
    grid_eta_add(&r, 0, 150);
    r.kind_of = kind_of;
    CHECK(r.wall_n == 3 && r.wall_sum == 400 && r.work_sum == 3 * W, "three finished: %d, %g s", r.wall_n, r.wall_sum);
    for (int i = 1; i < n; i++) /* queued: another point of point 0's kind, and one of no finished kind */
        if (r.kind_of[i] == r.kind_of[0]) queue[0] = i;
        else queue[1] = i;
    double eta = grid_eta_seconds(&r, 1000);
    CHECK(fabs(eta - (100 + 400.0 / 3)) < 1e-9, "eta %g, want 100 (its kind's rate) + 133 (every point's)", eta);
    grid_eta_add(&r, queue[0], 50); /* its kind's second: 150 s for twice the work */
    eta = grid_eta_seconds(&r, 1000);
    CHECK(fabs(eta - (75 + 450.0 / 4)) < 1e-9, "eta %g, want 75 (its kind's rate) + 112.5 (every point's)", eta);
    /* a running point and a stopped one (not queued) of the kind with no finished point take
       every point's rate too (112.5 s for its work), not point 0's kind's (75) */
    const int other = queue[1];
    r.nq = 0;
    st[other].state = GS_RUNNING;
    slot[other].pid = 12345;
    slot[other].t_start = 1000;
    slot[other].share = 1;
    eta = grid_eta_seconds(&r, 1000);
    CHECK(fabs(eta - 112.5) < 1e-9, "a running point of no finished kind: eta %g, want 112.5", eta);
    slot[other].pid = 0;
    st[other].state = GS_INTERRUPTED;
    eta = grid_eta_seconds(&r, 1000);
    CHECK(fabs(eta - 112.5) < 1e-9, "a stopped point of no finished kind: eta %g, want 112.5", eta);
    free(r.kinds);
    free(r.kind_of);
    grid_points_free(p, n);
    grid_free(&g);
}

/* The progress line's counts: a stopped point queued again is left once (not also as
 * stopped), a changed point queued to rerun is left and one not queued refused (said with
 * no point diverged too), and the ETA is "?" while a point runs before any finished here,
 * "0s" once nothing is left or running. */
static void test_status_text(void) {
    grid_spec g;
    grid_point *p = NULL;
    int n = 0;
    int rc = load_grid("status.yaml", "base: base.yaml\nsweep:\n  train.seed: [1, 2, 3]\n", &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 3, "rc %d n %d", rc, n);
    if (rc || n != 3) return;
    grid_status st[3];
    grid_slot slot[3];
    int queue[2] = {1, 2};
    grid_runner r;
    runner_init(&r, &g, p, 3, st, slot);
    r.t0 = now_seconds();
    r.j = 1;
    r.queue = queue;
    r.nq = 2;
    char text[256];
    st[0].state = GS_FINISHED;
    st[1].state = GS_INTERRUPTED; /* stopped, queued to resume */
    st[2].state = GS_CHANGED;     /* queued to rerun (--force) */
    grid_status_text(&r, text, sizeof text);
    CHECK(strstr(text, "1/3 done, 0 running, 0 failed, 2 left, ") != NULL && strstr(text, "ETA ?") != NULL &&
              strstr(text, "refused") == NULL,
          "two queued points left, each once: %s", text);
    r.nq = 1; /* the changed point not queued: refused */
    grid_status_text(&r, text, sizeof text);
    CHECK(strstr(text, "1/3 done, 0 running, 0 failed, 0 diverged, 1 refused, 1 left, ") != NULL,
          "a refused point counted: %s", text);
    r.nq = 0; /* point 1 running, point 2 failed: none left, none finished here yet */
    st[1].state = GS_RUNNING;
    st[2].state = GS_FAILED;
    r.running = 1;
    grid_status_text(&r, text, sizeof text);
    CHECK(strstr(text, "1/3 done, 1 running, 1 failed, 0 left, ") != NULL && strstr(text, "ETA ?") != NULL,
          "a point running, the ETA unknown: %s", text);
    st[1].state = GS_FINISHED;
    r.running = 0;
    grid_status_text(&r, text, sizeof text);
    CHECK(strstr(text, "2/3 done, 0 running, 1 failed, 0 left, ") != NULL && strstr(text, "ETA 0s") != NULL,
          "nothing left: ETA 0s: %s", text);
    grid_points_free(p, n);
    grid_free(&g);
}

/* A finished run file without its config (damaged, or not s2hc train's) is not taken as
 * the point's finished run: changed, saying why, so the grid neither skips nor retrains it
 * unasked. */
static void test_run_file_without_config(void) {
    grid_spec g;
    grid_point *p;
    int n;
    int rc = load_grid("noconf.yaml", "base: base.yaml\nsweep:\n  residual.method: [kromhc]\nname: \"noconf-{residual.method}\"\n",
                       &g, &p, &n, NULL, 0);
    CHECK(rc == 0 && n == 1, "rc %d n %d", rc, n);
    if (rc) return;
    const char *ood[GRID_MAX_OOD];
    const int nood = grid_ood_names(p, n, ood);
    grid_status st;
    memset(&st, 0, sizeof st);
    fake_run(&p[0], "finished", NULL, 10, 2.0);
    grid_inspect(&p[0], ood, nood, &st);
    CHECK(st.state == GS_FINISHED, "with its config: %s (%s)", grid_state_names[st.state], st.diff);
    usleep(20000);
    fake_no_config = 1;
    fake_run(&p[0], "finished", NULL, 10, 2.0);
    fake_no_config = 0;
    grid_inspect(&p[0], ood, nood, &st);
    CHECK(st.state == GS_CHANGED && strstr(st.diff, "holds no config (root attribute config)"),
          "a run.h5 without its config: %s (%s)", grid_state_names[st.state], st.diff);
    grid_points_free(p, n);
    grid_free(&g);
}

/* grid.status damaged or edited: a number no runner writes (a time past 1e11 s, negative,
 * NaN, with trailing text; an exit code outside 0..255) reads as not recorded, and what
 * grid_write_status writes stays a few short lines. A wall_s of 1e300 was summed into the
 * point's wall time and written back at the point's next start: "%.3f" of it ran past the
 * status text's buffer (a stack overflow, then 429 bytes of the stack in the file). */
static void test_status_file_damaged(void) {
    char dir[700], path[800];
    snprintf(dir, sizeof dir, "%s/status_damaged", tmp_dir);
    CHECK(mkdir(dir, 0755) == 0 || errno == EEXIST, "mkdir %s", dir);
    snprintf(path, sizeof path, "%s/grid.status", dir);
    static const char *const bad[] = {
        "state=failed\nexit_code=99999999999\nwall_s=1e300\nstarted=-1e300\n",
        "state=failed\nexit_code=-7\nwall_s=nan\nstarted=inf\n",
        "state=failed\nexit_code=12abc\nwall_s=-5\nstarted=1e12\n",
        "state=failed\nexit_code=\nwall_s=\nstarted=12.5x\n",
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "%s", path);
        if (!f) return;
        fputs(bad[k], f);
        fclose(f);
        int state, code;
        double wall, started;
        grid_read_status(dir, &state, &code, &wall, &started);
        CHECK(state == GS_FAILED && code == -1 && isnan(wall) && isnan(started),
              "case %zu: state %d, exit_code %d, wall_s %g, started %g: wanted failed, none recorded", k, state, code,
              wall, started);
    }
    /* a sound record reads back as written */
    CHECK(grid_write_status(dir, GS_FAILED, 1, 12.5, 1700000000.25) == 0, "write");
    int state, code;
    double wall, started;
    grid_read_status(dir, &state, &code, &wall, &started);
    CHECK(state == GS_FAILED && code == 1 && wall == 12.5 && started == 1700000000.25,
          "sound record: %d %d %g %g", state, code, wall, started);
    /* the bounds are a runner's values: exit code 0 and 255, a wall time of 0 (a point
       that ran in under a millisecond) and of 1e11 s */
    CHECK(grid_write_status(dir, GS_FINISHED, 0, 0.0, 1e11) == 0, "write the bounds");
    grid_read_status(dir, &state, &code, &wall, &started);
    CHECK(state == GS_FINISHED && code == 0 && wall == 0 && started == 1e11, "bounds: %d %d %g %g", state, code, wall,
          started);
    static const struct { const char *text; int code; } codes[] = {
        {"exit_code=255\n", 255}, {"exit_code=256\n", -1}, {"exit_code=0\n", 0}, {"exit_code=-1\n", -1}};
    for (size_t k = 0; k < sizeof codes / sizeof *codes; k++) {
        FILE *f = fopen(path, "w");
        CHECK(f != NULL, "%s", path);
        if (!f) return;
        fputs(codes[k].text, f);
        fclose(f);
        grid_read_status(dir, &state, &code, &wall, &started);
        CHECK(code == codes[k].code, "%s: exit code %d, wanted %d", codes[k].text, code, codes[k].code);
    }
    /* the writer leaves out a time no reader takes: the file stays its few short lines */
    CHECK(grid_write_status(dir, GS_FAILED, 1, 1e300, 1e300) == 0, "write 1e300");
    char *text = read_text(path);
    CHECK(text && strlen(text) < 200 && !strstr(text, "wall_s=") && !strstr(text, "started="),
          "grid.status written with wall_s 1e300: %zu bytes: %.300s", text ? strlen(text) : 0, text ? text : "");
    free(text);
}

int main(void) {
    T_NAME("test_grid");
    setup_tmp();
    T_RUN(test_product_order);
    T_RUN(test_include_exclude_override);
    T_RUN(test_templates_and_presets);
    T_RUN(test_index_stability);
    T_RUN(test_pins);
    T_RUN(test_validation_errors);
    T_RUN(test_validation_errors_shapes);
    T_RUN(test_exclude_lists_and_pin_order);
    T_RUN(test_states_and_index);
    T_RUN(test_partial_and_index_columns);
    T_RUN(test_index_quoting);
    T_RUN(test_slurm_array_limit);
    T_RUN(test_dry_run_newer_checkpoint);
    T_RUN(test_long_grid_paths);
    T_RUN(test_changed_every_key);
    T_RUN(test_shipped_grids);
    T_RUN(test_eta);
    T_RUN(test_eta_kinds);
    T_RUN(test_status_text);
    T_RUN(test_status_file_damaged);
    T_RUN(test_run_file_without_config);
    return T_END();
}
