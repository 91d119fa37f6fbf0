/* train.c: `s2hc train CONFIG [--set a.b=v]... [--resume] [--force] [--quiet] [--stop-after N]`.
 *
 * One optimizer step: zero grads; grad_accum micro-batches of forward + backward;
 * global grad norm (NaN/inf -> the run is marked diverged, the last good checkpoint
 * kept); clip; AdamW at the scheduled lr; one row of /train in the run log.
 * Every eval_every steps: validation loss. Every ckpt_every steps and at the end:
 * run.h5, then ckpt.h5, each written atomically. SIGINT, SIGTERM or SIGHUP: finish the step,
 * save, exit 130, so `--resume` continues exactly.
 *
 * Launched as several processes (mpirun, srun: harness/dist.h), rank 0 does all of the
 * above that reads data or touches a file, and its decisions (resume point, stop,
 * divergence, exit status) are broadcast; every rank computes the gradient of its part
 * of each micro-batch and the parts are summed before the step.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../kernels/kernels.h"
#include "checkpoint.h"
#include "optim.h"
#include "../probes/probes.h"
#include "../kernels/cuda/model_cuda.h"
#include "dist.h"
#include "run.h"
#include "util.h"

void run_dir_of(const s2hc_config *c, char *buf, size_t len) {
    char name[CFG_STR + 64];
    config_run_name(c, name, sizeof name);
    snprintf(buf, len, "%s/%s", c->out_dir, name);
}

static void iso_now(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int run_dir_fits(const char *dir) {
    if (strlen(dir) <= RUN_DIR_MAX) return 1;
    fprintf(stderr, "s2hc: error: %.60s...: a run directory path of %zu bytes, longer than %d\n", dir, strlen(dir),
            RUN_DIR_MAX);
    return 0;
}

/* Lock <dir>/.train.lock (lock_file_try) for as long as `who` (a training, `s2hc eval`,
 * `s2hc probe`) may write the run's files: a second training into the same run directory,
 * or an evaluation that would write back a run file the training has moved past, is
 * refused instead of interleaving its saves with this one's. A grid holds <dir>/.lock,
 * another file, for its child. Returns the descriptor, or after a message -2 (in use) or
 * -1 (a path longer than RUN_DIR_MAX, or the lock file cannot be opened: a file where the
 * run directory should be). */
int run_lock(const char *dir, const char *who) {
    char path[RUN_DIR_MAX + 32];
    if (!run_dir_fits(dir)) return -1;
    snprintf(path, sizeof path, "%s/.train.lock", dir);
    return lock_file_take(path, dir, who, "stop it");
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: s2hc train CONFIG.yaml [--set KEY=VALUE]... [--resume | --extend] [--force] [--quiet]\n"
            "                  [--stop-after N]\n"
            "\n"
            "Train the model described by CONFIG.yaml and write runs/<name>/run.h5 and ckpt.h5.\n"
            "  --set KEY=VALUE  override any config key (same checks as the file), repeatable\n"
            "  --resume         continue from runs/<name>/ckpt.h5 (a fresh start if there is none)\n"
            "  --extend         --resume, and train.steps may be larger than the run's: a run (finished or not)\n"
            "                   goes on to the new length with its optimizer state and data order, its\n"
            "                   learning rate from here that of the new length's schedule (docs/runfile.md)\n"
            "  --force          discard an existing run of the same name and start over\n"
            "  --quiet          no progress line (errors and the summary only)\n"
            "  --stop-after N   stop after N steps of this invocation as if interrupted (saves; for tests)\n"
            "\n"
            "Across processes: `mpirun -np W s2hc train CONFIG` (or srun --mpi=pmix) trains one model on W\n"
            "processes, each the gradient of 1/W of every micro-batch (docs/distributed.md).\n"
            "\n"
            "example:\n"
            "  s2hc train experiments/tiny.yaml --set residual.method=s2hc --set train.steps=50 --set run.name=s2hc-50\n");
}

/* --extend: train.steps may grow on resume; train_extended_from is then the stored
 * length (0: not extended). */
static int train_extend, train_extended_from;

/* Keys that may change between a run and its resumption without changing its path
 * (train.steps is not one: the learning-rate schedule decays over it; --extend lets it
 * grow, check_resume_config). */
static void normalise_for_resume(s2hc_config *stored, const s2hc_config *now) {
    stored->eval_every = now->eval_every;
    stored->eval_batches = now->eval_batches;
    stored->eval_ood = now->eval_ood;
    stored->ckpt_every = now->ckpt_every;
    stored->log_every = now->log_every;
    stored->threads = now->threads;
    stored->probe_every = now->probe_every;
    stored->final_samples = now->final_samples;
    memcpy(stored->backend, now->backend, sizeof stored->backend);
    memcpy(stored->out_dir, now->out_dir, sizeof stored->out_dir); /* where the run is (moved, renamed) */
    memcpy(stored->name, now->name, sizeof stored->name);
    memcpy(stored->data_dir, now->data_dir, sizeof stored->data_dir);
}

/* Print the first differing line of two YAML texts. */
static void print_first_difference(const char *a, const char *b, const char *la_name, const char *lb_name) {
    while (*a || *b) {
        const char *ea = strchr(a, '\n'), *eb = strchr(b, '\n');
        size_t la = ea ? (size_t)(ea - a) : strlen(a), lb = eb ? (size_t)(eb - b) : strlen(b);
        if (la != lb || memcmp(a, b, la) != 0) {
            fprintf(stderr, "  %-7s %.*s\n  %-7s %.*s\n", la_name, (int)la, a, lb_name, (int)lb, b);
            return;
        }
        a += la + (ea ? 1 : 0);
        b += lb + (eb ? 1 : 0);
    }
}

/* 1 after a message if a file's stored config (its root attribute `config`) is empty: every
 * run stores its whole config, so that is damage (read as a config file, it would be every
 * default, and differ from the run's for no reason the run has). */
static int stored_config_empty(const char *yaml, const char *where) {
    if (yaml[strspn(yaml, " \t\r\n")]) return 0;
    fprintf(stderr, "s2hc: error: %s: its root attribute 'config' is empty (a damaged file?)\n", where);
    return 1;
}

/* 0 if the stored config (a file's, named by where) matches now up to the keys that may
 * change on resume; otherwise prints "s2hc: error: " head, then the first difference, and
 * returns -1. */
static int configs_agree(const char *stored_yaml, const s2hc_config *now, const char *now_yaml, const char *where,
                         const char *head, const char *stored_name, const char *now_name) {
    s2hc_config stored;
    if (stored_config_empty(stored_yaml, where) || config_from_yaml_text(&stored, stored_yaml, where) != 0) return -1;
    normalise_for_resume(&stored, now);
    char *a = config_to_yaml(&stored);
    int same = strcmp(a, now_yaml) == 0;
    if (!same) {
        fprintf(stderr, "s2hc: error: %s:\n", head);
        print_first_difference(a, now_yaml, stored_name, now_name);
    }
    free(a);
    return same ? 0 : -1;
}

/* 0 if the stored run config matches the current one up to the keys that may change on
 * resume; otherwise prints the first difference and returns -1. */
/* config_from_yaml_text without its messages (configs_agree says what is wrong): 1 if
 * the stored config reads. */
static int stored_config_quiet(const char *stored_yaml, const char *where, s2hc_config *stored) {
    char *msgs = NULL;
    size_t msgs_len = 0;
    FILE *was = config_messages;
    config_messages = open_memstream(&msgs, &msgs_len);
    const int read = config_messages && config_from_yaml_text(stored, stored_yaml, where) == 0;
    if (config_messages) fclose(config_messages);
    config_messages = was;
    free(msgs);
    return read;
}

static int check_resume_config(const char *stored_yaml, const s2hc_config *now, const char *now_yaml,
                               const char *where, const char *cfg_path) {
    if (train_extend) { /* train.steps alone may differ, and only grow */
        s2hc_config stored;
        if (stored_config_quiet(stored_yaml, where, &stored) && stored.steps != now->steps) {
            const int was = stored.steps;
            normalise_for_resume(&stored, now);
            stored.steps = now->steps;
            char *a = config_to_yaml(&stored);
            const int same = !strcmp(a, now_yaml);
            free(a);
            if (same && now->steps < was) {
                fprintf(stderr, "s2hc: error: %s: --extend: train.steps = %d is fewer than the run's %d (%s): a run is "
                        "extended, not cut short\n", cfg_path, now->steps, was, where);
                return -1;
            }
            if (same) {
                train_extended_from = was;
                return 0;
            }
        }
    }
    char head[2600];
    snprintf(head, sizeof head, "%s: the config differs from the run being resumed (%s); use --force to start over",
             cfg_path, where);
    if (configs_agree(stored_yaml, now, now_yaml, where, head, "run:", "config:") == 0) return 0;
    /* train.steps alone: a run to be trained further, which --resume cannot do; say what can */
    s2hc_config stored; /* a stored config that does not read was said above */
    if (stored_config_quiet(stored_yaml, where, &stored) && stored.steps != now->steps) {
        normalise_for_resume(&stored, now);
        stored.steps = now->steps;
        char *a = config_to_yaml(&stored);
        if (!strcmp(a, now_yaml)) {
            const char *slash = strrchr(where, '/');
            const int dl = slash ? (int)(slash - where) : 1;
            const char *d = slash ? where : ".";
            fprintf(stderr, "  (train.steps is the length the cosine schedule decays over. To train this run further,\n"
                    "  --extend instead of --resume: its optimizer state and data order go on, its learning\n"
                    "  rate from here that of the new length's schedule. Or from its weights alone: `s2hc export\n"
                    "  %.*s`, then a new run with --set train.init_from=%.*s/model.safetensors: a fresh\n"
                    "  optimizer, warm-up and schedule; docs/runfile.md)\n", dl, d, dl, d);
        }
        free(a);
    }
    return -1;
}

/* A step's bits depend on how its micro-batch is cut (train.parallel batch: one slice per
 * thread, W ranks of one thread cut it as one process of W threads) and, with ops, on the
 * thread count: a resumed run equals the uninterrupted one only with the same cut. So on
 * --resume, with train.threads 0, one process takes the thread count the run trained
 * with (its run file's root attribute `threads`); otherwise a different cut is said. */
static void resume_threads(const s2hc_config *cfg, const char *run_path, const char *ckpt_path, int W, int quiet,
                           char *note, size_t note_len, int *was_cuda, int *was_W) {
    /* note: what to say once the resume is sure to happen (not for a finished run or a
       refused config), "" for nothing; a line for stdout, or from "s2hc: warning" one
       for stderr. *was_cuda: 1 for a run the cuda backend trained, 0 for the cpu's, -1
       unknown; *was_W: its process count (the backend is chosen later: resume_backend) */
    note[0] = '\0';
    *was_cuda = -1;
    *was_W = 1;
    if (!file_exists(run_path) || !file_exists(ckpt_path)) return;
    h5log old;
    char err[512];
    h5log_init(&old);
    if (h5log_load(&old, run_path, err, sizeof err) != 0) { h5log_free(&old); return; } /* said later */
    const double t = h5log_get_attr_num(&old, "/", "threads"), w = h5log_get_attr_num(&old, "/", "processes");
    const char *be = h5log_get_attr_str(&old, "/", "backend");
    const int gpu = be && !strcmp(be, "cuda");
    if (be) *was_cuda = gpu;
    /* a process count outside 1..65536 (none, or a damaged attribute) counts as one, as in
       the grid's index */
    const int W0 = w >= 1 && w <= 65536 ? (int)w : 1;
    *was_W = W0;
    h5log_free(&old);
    if (!(t >= 1 && t <= 4096) || gpu) return; /* a run file older than the attribute; a GPU's run */
    const int T0 = (int)t, batch = !strcmp(cfg->parallel, "batch");
    /* one process, train.threads 0: the run's cut (W0 ranks of one thread cut as W0 threads) */
    const int want = W0 == 1 ? T0 : T0 == 1 && batch ? W0 : 0;
    if (W == 1 && cfg->threads == 0 && want > 0) {
        if (want != kernels_threads()) {
#ifdef _OPENMP
            threads_set(want);
#endif
            const int cores = runtime_cpu_count();
            if (!quiet && kernels_threads() == want)
                snprintf(note, note_len, "threads: %d, as the run trained (a step's bits depend on its cut; "
                         "train.threads sets another)%s\n", want, want > cores ? ", more than the cores here: slower" : "");
        }
        if (kernels_threads() == want) return;
        /* fewer: OMP_THREAD_LIMIT; the warning below says the bits will differ */
    }
    const int T = kernels_threads();
    const int same = (W == W0 && T == T0) ||
                     (batch && (W == 1 || T == 1) && (W0 == 1 || T0 == 1) && W * T == W0 * T0);
    if (!same)
        snprintf(note, note_len, "s2hc: warning: the run trained with %d process%s of %d thread%s and resumes with %d "
                 "of %d: it goes on as the same model, but not bit for bit as it would have without the stop\n",
                 W0, W0 == 1 ? "" : "es", T0, T0 == 1 ? "" : "s", W, T);
}

/* The backend's half of resume_threads, once the backend is chosen: a run resumed on the
 * other backend, or on the cuda backend under another process count (each rank's part of
 * the micro-batch on its GPU, the parts' gradients summed in rank order), goes on as the
 * same model but not with the uninterrupted run's bits. */
static void resume_backend(int was_cuda, int W0, int now_cuda, int W) {
    if (was_cuda < 0) return; /* a run file without the attribute */
    if (was_cuda != now_cuda)
        fprintf(stderr, "s2hc: warning: the run trained on the %s backend and resumes on the %s: it goes on as the same "
                "model, but not bit for bit as it would have without the stop\n", was_cuda ? "cuda" : "cpu",
                now_cuda ? "cuda" : "cpu");
    else if (now_cuda && W != W0)
        fprintf(stderr, "s2hc: warning: the run trained on the cuda backend with %d process%s and resumes with %d: it goes "
                "on as the same model, but not bit for bit as it would have without the stop\n", W0,
                W0 == 1 ? "" : "es", W);
}

/* Root attribute `name`, a list separated by spaces, with `item` at its end unless it
 * ends so already; a file without the attribute starts it from `first` (may be NULL). */
static void attr_list_append(h5log *log, const char *name, const char *first, const char *item) {
    const char *had = h5log_get_attr_str(log, "/", name);
    if (!had) had = first;
    const char *last = had ? strrchr(had, ' ') : NULL;
    last = last ? last + 1 : had;
    if (!had || !*had) h5log_attr_str(log, "/", name, item);
    else if (strcmp(last, item) != 0) {
        const size_t len = strlen(had) + strlen(item) + 2;
        char *list = malloc_check(len);
        snprintf(list, len, "%s %s", had, item);
        h5log_attr_str(log, "/", name, list);
        free(list);
    } else if (!h5log_get_attr_str(log, "/", name)) h5log_attr_str(log, "/", name, had);
}

/* One evaluation during training: the validation loss, and with train.eval_ood the
 * out-of-domain corpora's into ood (*with_ood then 1). NaN once stop_signal is set. */
static double train_eval(gpt_model *m, const data_shard *val, const s2hc_config *c, int B, uint32_t kind,
                         double *ood, int *with_ood, int quiet) {
    double vl = eval_shard_loss(m, val, c->eval_batches, B, !quiet);
    *with_ood = c->eval_ood && c->n_ood > 0;
    if (*with_ood && !stop_signal && eval_ood_losses(m, B, kind, ood, !quiet) != 0) vl = NAN;
    return vl;
}

/* One row of the evaluations during training: /eval/step and /eval/val_loss, and with
 * train.eval_ood (ood not NULL) /eval/ood_loss/<corpus>. */
static void log_eval_row(h5log *log, const s2hc_config *c, int64_t step, double val_loss, const double *ood,
                         int quiet, int tty) {
    int es = h5log_series_add(log, "/eval/step", H5LOG_I64, 0, NULL, "optimizer step of each eval row", "");
    int ev = h5log_series_add(log, "/eval/val_loss", H5LOG_F64, 0, NULL,
                              "validation loss (held-out last 1% of the training corpus)", "nats/token");
    h5log_append(log, es, &step);
    h5log_append(log, ev, &val_loss);
    double mean = 0;
    if (ood) {
        eval_ood_record(log, c, ood);
        for (int i = 0; i < c->n_ood; i++) mean += ood[i] / c->n_ood;
    }
    if (!quiet && ood)
        printf("%sstep %lld: val loss %.4f, out of domain %.4f (mean of %d corpora)\n", tty ? "\n" : "",
               (long long)step, val_loss, mean, c->n_ood);
    else if (!quiet) printf("%sstep %lld: val loss %.4f\n", tty ? "\n" : "", (long long)step, val_loss);
}

typedef struct {
    int s_step, s_loss, s_lr, s_gnorm, s_tps;
} train_series;

static void declare_train_series(h5log *log, train_series *s) {
    s->s_step = h5log_series_add(log, "/train/step", H5LOG_I64, 0, NULL, "optimizer step (1-based) of each row", "");
    s->s_loss = h5log_series_add(log, "/train/loss", H5LOG_F64, 0, NULL,
                                 "training loss: mean cross-entropy over the step's micro-batches", "nats/token");
    s->s_lr = h5log_series_add(log, "/train/lr", H5LOG_F64, 0, NULL, "learning rate used for the step", "");
    s->s_gnorm = h5log_series_add(log, "/train/grad_norm", H5LOG_F64, 0, NULL,
                                  "global L2 norm of the gradient before clipping", "");
    s->s_tps = h5log_series_add(log, "/train/tokens_per_s", H5LOG_F64, 0, NULL,
                                "training throughput of the step (forward + backward + update); 0 on the row of a "
                                "diverged step", "tokens/s");
}

/* A resumed run's file against what this session logs into it later, checked before its
 * first step: /eval/step, /eval/val_loss and /eval/ood_loss/<corpus> series of scalar
 * rows (log_eval_row appends to them at each evaluation), everything under /final/ and
 * /eval/ood/ static (the final probe and evaluation replace them). A file holding one of
 * them in another kind, type or row shape (edited by another tool, another version's) is
 * refused here (-1, the message on stderr), as h5log refuses it, naming the file; found at
 * the first evaluation, it stopped the run after that step's checkpoint had already
 * rewritten run.h5 and ckpt.h5. So is a /train or /eval series with fewer or more rows
 * than its step series (checked too before the resume cuts the rows past the checkpoint,
 * which would cut a longer one to its step series' length). 0 when the file holds them as
 * this build logs them. */
static int check_logged_layout(const h5log *log) {
    for (int i = 0; i < log->n_series; i++) {
        const h5log_series *s = &log->series[i];
        const char *p = s->path;
        const int want_series = !strcmp(p, "/eval/step") || !strcmp(p, "/eval/val_loss") ||
                                !strncmp(p, "/eval/ood_loss/", 15);
        const int want_static = !strncmp(p, "/final/", 7) || !strncmp(p, "/eval/ood/", 10);
        const h5log_type type = !strcmp(p, "/eval/step") ? H5LOG_I64 : H5LOG_F64;
        const char *why = want_series && s->fixed                                   ? "is a static dataset, not a series"
                          : want_series && (s->type != type || s->row_rank != 0)    ? "is a series of another type or row "
                                                                                      "shape than this build logs"
                          : want_static && !s->fixed                                ? "is a series, not a static dataset"
                                                                                    : NULL;
        if (why) {
            fprintf(stderr, "s2hc: error: %s: %s %s (a run file of another s2hc version, or edited by another tool?)\n",
                    log->source[0] ? log->source : "run file", p, why);
            return -1;
        }
    }
    /* the series this session appends a row to at each step and evaluation, as many rows
       as their step series: one short (deleted, or cut by another tool) would go on a row
       behind, each of its rows then read as another step's */
    static const char *const rows[][2] = {{"/train/step", "/train/loss"},     {"/train/step", "/train/lr"},
                                          {"/train/step", "/train/grad_norm"}, {"/train/step", "/train/tokens_per_s"},
                                          {"/eval/step", "/eval/val_loss"}};
    for (size_t k = 0; k < sizeof rows / sizeof *rows; k++) {
        const int key = h5log_find(log, rows[k][0]), i = h5log_find(log, rows[k][1]);
        if (key < 0) continue;
        const size_t want = log->series[key].rows, got = i < 0 ? 0 : log->series[i].rows;
        if (got != want) {
            fprintf(stderr, "s2hc: error: %s: %s has %zu rows where %s has %zu, a row per step (edited by another "
                    "tool?)\n", log->source[0] ? log->source : "run file", rows[k][1], got, rows[k][0], want);
            return -1;
        }
    }
    return 0;
}

ckpt_tensor *run_ckpt_views(const gpt_model *m, float *base) {
    ckpt_tensor *t = calloc_check((size_t)m->n_tensors, sizeof *t);
    for (int i = 0; i < m->n_tensors; i++) {
        t[i].name = m->pinfo[i].name;
        t[i].rank = m->pinfo[i].rank;
        for (int k = 0; k < 4; k++) t[i].shape[k] = m->pinfo[i].shape[k];
        t[i].data = base + m->pinfo[i].offset;
    }
    return t;
}

/* run_load_weights, and the config the checkpoint was saved with (the caller frees it;
 * NULL when the file has none) */
static int load_weights_config(gpt_model *m, const char *ckpt_path, int64_t *step, char **config_yaml, char *err,
                               size_t errlen) {
    ckpt_tensor *t = run_ckpt_views(m, m->params);
    ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    int rc = ckpt_load(ckpt_path, t, NULL, NULL, m->n_tensors, &meta, err, errlen);
    free(t);
    if (config_yaml) *config_yaml = (char *)meta.config_yaml;
    else free((char *)meta.config_yaml);
    if (rc == 0 && meta.step > INT_MAX) { /* steps are counted in an int (train.steps) */
        snprintf(err, errlen, "%s: root attribute 'step' is %lld, past any train.steps (corrupt?)", ckpt_path,
                 (long long)meta.step);
        rc = -1;
    }
    if (rc == 0 && step) *step = meta.step;
    return rc;
}

int run_load_weights(gpt_model *m, const char *ckpt_path, int64_t *step, char *err, size_t errlen) {
    return load_weights_config(m, ckpt_path, step, NULL, err, errlen);
}

int run_in_use(const char *dir, char *holder, size_t holder_len) {
    char lockp[1200];
    snprintf(lockp, sizeof lockp, "%s/.train.lock", dir);
    return lock_file_held(lockp, holder, holder_len);
}

void run_note_in_use(const char *dir, const char *what, long long step) {
    char holder[256];
    if (run_in_use(dir, holder, sizeof holder))
        fprintf(stderr, "note: %s is in use%s%s%s: this is %s of step %lld, its last save\n", dir, holder[0] ? " (" : "",
                holder, holder[0] ? ")" : "", what, step);
}

int run_busy_unsaved(const char *dir) {
    char holder[256];
    if (!run_in_use(dir, holder, sizeof holder)) return 0;
    fprintf(stderr, "s2hc: error: %s is in use%s%s%s and has saved nothing yet; wait for its first save\n", dir,
            holder[0] ? " (" : "", holder, holder[0] ? ")" : "");
    return 1;
}

/* Training never saves a NaN or infinite weight or moment (a diverged run keeps its last
 * good checkpoint), nor a negative second moment (a running mean of squares): one in a
 * checkpoint is damage, and would become NaN losses, rows and files (AdamW's sqrt(v) of a
 * negative v, the run then marked diverged). 0, or -1 after naming the file, the tensor
 * and the element. The moments mom1 and mom2 (m and v) may be NULL. */
static int ckpt_values_finite(const gpt_model *m, const real *params, const float *mom1, const float *mom2,
                              const char *file) {
    const void *arr[3] = {params, mom1, mom2};
    static const char *const what[3] = {"", " (its AdamW first moment)", " (its AdamW second moment)"};
    for (int a = 0; a < 3; a++) {
        if (!arr[a]) continue;
        for (int t = 0; t < m->n_tensors; t++) {
            const param_info *pi = &m->pinfo[t];
            for (size_t i = 0; i < pi->numel; i++) {
                const double x = a == 0 ? (double)params[pi->offset + i] : (double)((const float *)arr[a])[pi->offset + i];
                if (!isfinite(x)) {
                    fprintf(stderr, "s2hc: error: %s: tensor %s%s holds a non-finite value (%g at element %zu): the "
                            "file is damaged\n", file, pi->name, what[a], x, i);
                    return -1;
                }
                if (a == 2 && x < 0) {
                    fprintf(stderr, "s2hc: error: %s: tensor %s%s holds a negative value (%g at element %zu): the "
                            "file is damaged\n", file, pi->name, what[a], x, i);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* 1 when dir has a checkpoint; else 0 after saying so (and, for a run directory, what
 * its run file says of the run). */
static int run_has_ckpt(const char *dir) {
    char ckpt[1200], runp[1200], err[256];
    if (!run_dir_fits(dir)) return 0;
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
    if (file_exists(ckpt)) return 1;
    if (run_busy_unsaved(dir)) return 0;
    snprintf(runp, sizeof runp, "%s/run.h5", dir);
    h5log log;
    h5log_init(&log);
    const char *status = file_exists(runp) && h5log_load(&log, runp, err, sizeof err) == 0
                             ? h5log_get_attr_str(&log, "/", "status") : NULL;
    const double last = h5log_last(&log, "/train/step");
    /* a run that finished or trained past its first checkpoint had saved one (a diverged
       run keeps its last good one, if it reached one) */
    const char *ce = status ? h5log_get_attr_str(&log, "/", "config") : NULL;
    s2hc_config rc;
    const int every = ce && config_from_yaml_text(&rc, ce, runp) == 0 ? rc.ckpt_every : 0;
    if (status && (!strcmp(status, "finished") || (every > 0 && !isnan(last) && last > every)))
        fprintf(stderr, "s2hc: error: %s is missing (moved or deleted?): the run (status %s, last step %.0f) had "
                "saved one\n", ckpt, status, isnan(last) ? 0.0 : last);
    else if (status)
        fprintf(stderr, "s2hc: error: %s: no checkpoint: the run (status %s, last step %.0f) stopped before its first "
                "save\n", ckpt, status, isnan(last) ? 0.0 : last);
    else {
        /* a grid's point not yet trained holds its config.yaml alone */
        char cfgp[1200];
        snprintf(cfgp, sizeof cfgp, "%s/config.yaml", dir);
        if (!file_exists(runp) && file_exists(cfgp))
            fprintf(stderr, "s2hc: error: %s: not trained yet (config.yaml, no run.h5 or ckpt.h5: a grid's point not "
                    "yet run?)\n", dir);
        else fprintf(stderr, "s2hc: error: %s: no checkpoint (is this a run directory?)\n", ckpt);
    }
    h5log_free(&log);
    return 0;
}

/* The checkpoint's tensors against the config's parameter table, before any is
 * allocated: a run file whose config was damaged into a large model would otherwise have
 * its parameters and gradients allocated and zeroed (gigabytes) before the checkpoint's
 * shapes refused it. 0, or -1 with the message in err. */
static int ckpt_shapes_fit(const s2hc_config *cfg, const char *ckpt, char *err, size_t errlen) {
    param_info *pi = NULL;
    int n = 0;
    if (model_param_table(cfg, &pi, &n, NULL, NULL, err, errlen) != 0) return 0; /* model_build says why */
    ckpt_tensor *t = calloc_check((size_t)(n ? n : 1), sizeof *t);
    for (int i = 0; i < n; i++) {
        t[i].name = pi[i].name;
        t[i].rank = pi[i].rank;
        for (int k = 0; k < 4; k++) t[i].shape[k] = pi[i].shape[k];
    }
    const int rc = ckpt_load(ckpt, t, NULL, NULL, n, NULL, err, errlen);
    free(t);
    free(pi);
    return rc;
}

int run_open(const char *dir, s2hc_config *cfg, gpt_model *m, h5log *log, int64_t *step) {
    char ckpt[1200], runp[1200], err[1024];
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
    snprintf(runp, sizeof runp, "%s/run.h5", dir);
    if (!run_has_ckpt(dir)) return 1;
    h5log_init(log);
    if (h5log_load(log, runp, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        h5log_free(log);
        return 1;
    }
    /* the config lives in the run file's root attribute */
    const char *yaml = h5log_get_attr_str(log, "/", "config");
    if (!yaml) {
        fprintf(stderr, "s2hc: error: %s: no root attribute 'config' (not a run file of s2hc train?)\n", runp);
        h5log_free(log);
        return 1;
    }
    if (stored_config_empty(yaml, runp) || config_from_yaml_text(cfg, yaml, runp) != 0) {
        h5log_free(log);
        return 1;
    }
    /* what the model reads, text or a tokenizer's ids (sample, export): train writes one of
       the two; absent in a run file older than the attribute */
    const char *kind = h5log_get_attr_str(log, "/", "token_kind");
    if (kind && strcmp(kind, "bytes") && strcmp(kind, "ids")) {
        fprintf(stderr, "s2hc: error: %s: root attribute 'token_kind' is '%.40s', neither bytes nor ids (a damaged or "
                "edited run file?)\n", runp, kind);
        h5log_free(log);
        return 1;
    }
#ifdef _OPENMP
    if (cfg->threads > 0) threads_set(cfg->threads);
#endif
    if (ckpt_shapes_fit(cfg, ckpt, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        h5log_free(log);
        return 1;
    }
    if (model_build(m, cfg, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s: %s\n", runp, err);
        h5log_free(log);
        return 1;
    }
    char *ckpt_yaml = NULL;
    if (load_weights_config(m, ckpt, step, &ckpt_yaml, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        free(ckpt_yaml);
        model_free(m);
        h5log_free(log);
        return 1;
    }
    /* the checkpoint must be this run's: a checkpoint of another run with the same
       shapes (another seed, GELU, core, learning rate...) would load without a word and
       be evaluated, probed or exported under this run's name */
    int agree = 0;
    if (ckpt_yaml) {
        char head[2600], *now_yaml = config_to_yaml(cfg);
        snprintf(head, sizeof head, "%s holds a checkpoint of another run: its config differs from %s's", ckpt, runp);
        agree = configs_agree(ckpt_yaml, cfg, now_yaml, ckpt, head, "ckpt:", "run:");
        free(now_yaml);
        free(ckpt_yaml);
    }
    if (agree != 0) {
        model_free(m);
        h5log_free(log);
        return 1;
    }
    if (ckpt_values_finite(m, m->params, NULL, NULL, ckpt) != 0) {
        model_free(m);
        h5log_free(log);
        return 1;
    }
    return 0;
}

int runs_each(const char *const *dirs, int ndirs, FILE *head, int (*one)(const char *dir, void *ctx), void *ctx) {
    int rc = 0, nruns = 0, done = 0;
    /* a glob over a grid's runs names its folder of Slurm scripts (runs/grid/NAME/STAR/)
       and, without the trailing slash, its index.csv: passed over, and not numbered */
    char *skip = calloc_check((size_t)(ndirs > 0 ? ndirs : 1), 1);
    for (int k = 0; k < ndirs; k++) {
        skip[k] = ndirs > 1 && (grid_slurm_folder(dirs[k]) || grid_index_file(dirs[k]));
        nruns += !skip[k];
    }
    for (int k = 0; k < ndirs && !stop_signal; k++) {
        if (skip[k]) {
            fprintf(stderr, "note: %s: passed over: %s, not a run\n", dirs[k],
                    grid_slurm_folder(dirs[k]) ? "a grid's folder of Slurm scripts" : "a grid's index");
            continue;
        }
        done++;
        if (ndirs > 1) fprintf(head, "%s== %s (%d/%d) ==\n", done > 1 ? "\n" : "", dirs[k], done, nruns);
        fflush(head);
        char *dir = strdup(dirs[k]);
        if (!dir) die(1, "out of memory");
        path_trim_slashes(dir);
        const int r = one(dir, ctx);
        free(dir);
        if (r > rc) rc = r;
    }
    free(skip);
    return rc;
}

int run_open_locked(const char *dir, const char *who, int *lock_fd, s2hc_config *cfg, gpt_model *m, h5log *log,
                    int64_t *step) {
    *lock_fd = -1;
    if (!run_has_ckpt(dir)) return 1;
    const int fd = run_lock(dir, who);
    if (fd < 0) return 1;
    if (run_open(dir, cfg, m, log, step) != 0) {
        close(fd);
        return 1;
    }
    *lock_fd = fd;
    return 0;
}

static int save_state(const char *ckpt_path, const gpt_model *m, const adamw_state *o, int step, uint64_t rng,
                      uint64_t loader_rng, const char *yaml) {
    ckpt_tensor *p = run_ckpt_views(m, m->params), *mm = run_ckpt_views(m, o->m), *vv = run_ckpt_views(m, o->v);
    ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = step;
    meta.rng = rng;
    meta.loader_rng = loader_rng;
    meta.config_yaml = yaml;
    snprintf(meta.method, sizeof meta.method, "%s", m->cfg.method);
    meta.n_streams = m->n;
    int rc = ckpt_save(ckpt_path, p, mm, vv, m->n_tensors, &meta);
    free(p);
    free(mm);
    free(vv);
    return rc;
}

static void progress_line(int tty, int step, int steps, double loss, double lr, double gn, double tps, double eta) {
    char e[32];
    fmt_duration(eta, e, sizeof e);
    char line[256];
    const int digits = steps >= 10000 ? 5 : steps >= 1000 ? 4 : 3;
    snprintf(line, sizeof line, "step %*d/%d | loss %.4f | lr %.2e | grad norm %.3f | %.0f tok/s | ETA %s", digits,
             step, steps, loss, lr, gn, tps, e);
    const int cols = tty ? terminal_columns(STDOUT_FILENO) : 0;
    if (cols > 0 && (int)strlen(line) > cols - 1) /* a narrow terminal: loss, speed and ETA */
        snprintf(line, sizeof line, "step %*d/%d | loss %.4f | %.0f tok/s | ETA %s", digits, step, steps, loss, tps, e);
    if (tty) {
        tty_line(stdout, line); /* flushed */
    } else {
        printf("%s\n", line);
        fflush(stdout);
    }
}

static int train_run(const char *cfg_path, const char **sets, int nsets, int resume, int force, int quiet,
                     int stop_after);

int train_main(int argc, char **argv) {
    const char *cfg_path = NULL;
    const char *sets[256];
    int nsets = 0, resume = 0, force = 0, quiet = 0, stop_after = 0;
    opt_seen seen = {.cmd = "train"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) {
            if (cfg_path) {
                fprintf(stderr, "s2hc: error: train: one config file only ('%s')\n", argv[i]);
                return RUN_USAGE;
            }
            cfg_path = argv[i];
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { usage(stdout); return 0; }
        else if ((v = opt_arg(argc, argv, &i, "--set", 1))) {
            if (nsets == 256) { fprintf(stderr, "s2hc: error: train: more than 256 --set\n"); return RUN_USAGE; }
            sets[nsets++] = v;
        } else if (!strcmp(argv[i], "--resume")) resume = 1;
        else if (!strcmp(argv[i], "--extend")) resume = train_extend = 1;
        else if (!strcmp(argv[i], "--force")) force = 1;
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--stop-after", 1))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > INT_MAX) {
                fprintf(stderr, "s2hc: error: train: --stop-after: expected a whole number >= 1, got '%s'\n", v);
                return RUN_USAGE;
            }
            stop_after = (int)n;
        } else if (!strcmp(argv[i], "--set")) {
            fprintf(stderr, "s2hc: error: --set needs KEY=VALUE\n");
            return RUN_USAGE;
        } else {
            fprintf(stderr, "s2hc: error: train: unknown option '%s'%s\n", argv[i],
                    i + 1 < argc ? "" : " (or its value is missing)");
            usage(stderr);
            return RUN_USAGE;
        }
    }
    if (!cfg_path) { usage(stderr); return RUN_USAGE; }
    if (resume && force) {
        fprintf(stderr, "s2hc: error: train: --%s continues the run and --force discards it: one of the two\n",
                train_extend ? "extend" : "resume");
        return RUN_USAGE;
    }
    char derr[512];
    if (dist_init(&argc, &argv, derr, sizeof derr) != 0) {
        fprintf(stderr, "s2hc: error: train: %s\n", derr);
        dist_finalize();
        return RUN_USAGE;
    }
    int status = train_run(cfg_path, sets, nsets, resume, force, quiet || dist_rank() > 0, stop_after);
    dist_finalize();
    return status;
}

/* The rank's part of a micro-batch of B sequences: [B r / W, B (r + 1) / W), as
 * model_forward_backward cuts slices. */
static int part_start(int B, int r) { return (int)((long)B * r / dist_size()); }

/* Weights (and AdamW's moments) the same on every rank: a hash of each, compared with
 * rank 0's. A collective; 0, or -1 with the error printed by rank 0. */
static int check_ranks_agree(const gpt_model *m, const adamw_state *o) {
    int first;
    /* test hook (tests/cli/dist_cli.sh): S2HC_FAULT_RANK_BIT=r flips the lowest bit of rank r's
       first weight, a drift this check must report */
    const char *fb = getenv("S2HC_FAULT_RANK_BIT");
    if (fb && atoi(fb) == dist_rank()) {
        uint32_t w;
        memcpy(&w, m->params, sizeof w);
        w ^= 1;
        memcpy(m->params, &w, sizeof w);
    }
    uint64_t h = dist_hash(m->params, m->n_params) ^ (dist_hash(o->m, m->n_params) * 3) ^
                 (dist_hash(o->v, m->n_params) * 7);
    int bad = dist_disagree(h, &first);
    if (bad && dist_rank() == 0)
        fprintf(stderr, "s2hc: error: the weights of %d rank(s) differ from rank 0's (the first: rank %d); "
                "the ranks no longer train one model\n", bad, first);
    return bad ? -1 : 0;
}

/* Across processes: rank 0's micro-batch (N tokens) to every rank; returns its valid targets. */
static size_t share_batch(int *inputs, int *targets, size_t N) {
    dist_bcast(inputs, N * sizeof(int));
    dist_bcast(targets, N * sizeof(int));
    return model_valid_targets(targets, N);
}

/* The sum of every rank's `part`, added in rank order (the same on every rank). */
static double sum_parts(double part) {
    const int W = dist_size();
    double *all = malloc_check((size_t)W * sizeof *all), sum = 0;
    dist_gather_double(part, all);
    for (int r = 0; r < W; r++) sum += all[r];
    free(all);
    return sum;
}

/* One micro-batch of B sequences on the cpu, its gradient added into grads; returns its
 * mean loss. Across processes: rank 0's inputs and targets to every rank, this rank's
 * part (Bp sequences from b0), then the parts' gradients summed in rank order and their
 * losses added in the same order; rank 0's running sum is in grads, the other ranks'
 * parts start from zero. */
static double micro_batch(gpt_model *m, int *inputs, int *targets, int B, int b0, int Bp, real scale) {
    if (dist_size() == 1) return model_forward_backward(m, inputs, targets, B, scale);
    const size_t at = (size_t)b0 * m->T, whole = share_batch(inputs, targets, (size_t)B * m->T);
    if (dist_rank() > 0) model_zero_grad(m);
    const double part = model_forward_backward_part(m, inputs + at, targets + at, Bp, scale, whole);
    dist_sum(m->grads, m->n_params);
    return (real)sum_parts(part);
}

/* The same on the cuda backend, each rank's part on its GPU; its gradient stays there
 * (summed across the ranks once a step, cuda_sum_grads). cuda_forward_backward takes the
 * mean over its part's targets: scaled by the part's share of the batch's. */
static double cuda_micro_batch(cuda_model *cm, int *inputs, int *targets, int B, int T, int b0, int Bp,
                               double scale) {
    if (dist_size() == 1) return cuda_forward_backward(cm, inputs, targets, (float)scale);
    const size_t at = (size_t)b0 * T, whole = share_batch(inputs, targets, (size_t)B * T);
    const size_t cnt = model_valid_targets(targets + at, (size_t)Bp * T);
    const double share = whole ? (double)cnt / (double)whole : 0;
    const float loss = cuda_forward_backward(cm, inputs + at, targets + at, (float)(scale * share));
    return (float)sum_parts(cnt ? (double)loss * share : 0);
}

/* Across processes on the cuda backend: the ranks' gradients summed in rank order through
 * the host (model->grads), back on every GPU. */
static void cuda_sum_grads(cuda_model *cm, gpt_model *m) {
    if (dist_size() == 1) return;
    cuda_download_grads(cm, m);
    dist_sum(m->grads, m->n_params);
    cuda_upload_grads(cm, m);
}

static int train_run(const char *cfg_path, const char **sets, int nsets, int resume, int force, int quiet,
                     int stop_after) {
    /* stop_signal is not cleared here: a signal that came before this run (between two
       runs of one process, `s2hc bench`'s probes section) stops it at its first step */
    const int W = dist_size(), rank = dist_rank();
    int synced = 0; /* whether this rank has joined the agreement on the setup's status */

    /* every resource, so that each early exit below frees what was taken */
    data_loader loader;
    data_shard val;
    gpt_model model;
    adamw_state opt;
    h5log log;
    char *yaml = NULL;
    int *inputs = NULL, *targets = NULL;
    probe_state *probe = NULL;
    cuda_model *cm = NULL; /* the device model when training on a GPU */
    train_series ts;
    int status = RUN_OK, lock_fd = -1; /* rank 0: the run directory's lock */
    int stopped_after = 0; /* --stop-after stopped the run (stop_signal set by it, not by a signal) */
    memset(&ts, 0, sizeof ts);
    memset(&loader, 0, sizeof loader);
    memset(&val, 0, sizeof val);
    memset(&model, 0, sizeof model);
    memset(&opt, 0, sizeof opt);
    h5log_init(&log);

    s2hc_config cfg;
    /* every rank reads the config; what is wrong with it is said once, by rank 0, and by
       another rank only what rank 0 did not find (a different file or --set there) */
    char *msgs = NULL;
    size_t msgs_len = 0;
    if (rank > 0) config_messages = open_memstream(&msgs, &msgs_len);
    int rc = config_load(&cfg, cfg_path, sets, nsets);
    if (config_messages) {
        fclose(config_messages);
        config_messages = NULL;
    }
    if (W > 1) {
        int rc0 = rc;
        dist_bcast(&rc0, sizeof rc0);
        if (rank > 0 && rc && !rc0 && msgs) fputs(msgs, stderr);
    }
    free(msgs);
    if (rc) { status = rc; goto out; }
    if (cfg.threads > 0) {
#ifdef _OPENMP
        threads_set(cfg.threads);
#endif
    }

    char dir[CFG_PATH + CFG_STR + 2], run_path[sizeof dir + 16], ckpt_path[sizeof dir + 16];
    run_dir_of(&cfg, dir, sizeof dir);
    snprintf(run_path, sizeof run_path, "%s/run.h5", dir);
    snprintf(ckpt_path, sizeof ckpt_path, "%s/ckpt.h5", dir);
    char threads_note[400] = "";
    int was_cuda = -1, was_W = 1; /* the resumed run's backend and process count */
    if (rank == 0 && resume && !force)
        resume_threads(&cfg, run_path, ckpt_path, W, quiet, threads_note, sizeof threads_note, &was_cuda, &was_W);

    /* data first: a missing corpus fails before anything is written (rank 0 reads it) */
    char train_path[1200], val_path[1200], err[1024];
    int done = 0; /* rank 0: a finished run, nothing to do */
    const int B = cfg.batch, T = cfg.block_size;
    const size_t N = (size_t)B * T;
    if (B < W) {
        if (rank == 0)
            fprintf(stderr, "s2hc: error: %s: key 'train.batch' is %d, fewer sequences than the %d processes that "
                    "share each micro-batch\n", cfg_path, B, W);
        status = RUN_USAGE;
        goto out;
    }
    if (rank > 0) goto parts; /* the other ranks: the model, then the agreement below */
    /* a new run's rule (a run that has a checkpoint continues under its stored config) */
    if (!(resume && file_exists(ckpt_path)) && config_check_ood(&cfg, cfg_path)) {
        status = RUN_USAGE;
        goto out;
    }
    data_shard_path(train_path, sizeof train_path, cfg.data_dir, cfg.train_corpus, "train");
    data_shard_path(val_path, sizeof val_path, cfg.data_dir, cfg.train_corpus, "val");
    if (loader_open(&loader, train_path, cfg.seed ^ 0xD1B54A32D192ED03ULL, err, sizeof err) != 0) {
        if (data_corpus_role(cfg.train_corpus))
            fprintf(stderr, "s2hc: error: %s\n  (key 'data.train' = '%s'; run `s2hc data prepare` first)\n", err,
                    cfg.train_corpus);
        else /* an imported corpus: prepare does not make it */
            fprintf(stderr, "s2hc: error: %s\n  (key 'data.train' = '%s'; `s2hc data import FILE --name %s` makes "
                    "it; `s2hc data list` shows the corpora there are)\n", err, cfg.train_corpus, cfg.train_corpus);
        { status = RUN_FAILED; goto out; }
    }
    if (shard_fits(&loader.shard, cfg.vocab, 0, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n  (key 'data.train' = '%s' of %s)\n", err, cfg.train_corpus, cfg_path);
        status = RUN_USAGE;
        goto out;
    }
    if (shard_open(&val, val_path, err, sizeof err) != 0 ||
        shard_fits(&val, cfg.vocab, shard_kind(&loader.shard), err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s\n", err);
        status = RUN_FAILED;
        goto out;
    }
    if (loader.shard.count < (uint64_t)cfg.block_size + 1) {
        fprintf(stderr, "s2hc: error: %s: %llu tokens, fewer than block_size + 1 = %d: no training window (a larger "
                "corpus, or a smaller model.block_size)\n", train_path, (unsigned long long)loader.shard.count,
                cfg.block_size + 1);
        { status = RUN_FAILED; goto out; }
    }
    if (val.count < (uint64_t)cfg.block_size + 1) { /* every validation loss would be NaN */
        fprintf(stderr, "s2hc: error: %s: %llu tokens, fewer than block_size + 1 = %d: no validation window "
                "(a larger corpus, or a smaller model.block_size)\n", val_path, (unsigned long long)val.count,
                cfg.block_size + 1);
        { status = RUN_FAILED; goto out; }
    }
    if (eval_ood_check(&cfg, shard_kind(&loader.shard), cfg_path, "or leave it out of data.ood") != 0) { /* before any step */
        status = RUN_FAILED;
        goto out;
    }

parts:;
    rng_t rng;
    rng_seed(&rng, cfg.seed);
    if (model_build(&model, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "s2hc: error: %s: %s\n", cfg_path, err);
        { status = RUN_USAGE; goto out; }
    }
    optim_init(&opt, &model);
    model_init(&model, cfg.seed);
    yaml = config_to_yaml(&cfg);
    int start = 0, use_cuda = 0; /* use_cuda: rank 0's choice of the cuda backend across processes */
    int init_loaded = -1;        /* train.init_from: the tensors read (a fresh run) */
    int64_t init_step = -1;      /* and the step of the export they came from (-1: not said) */
    char gpu[256] = "";
    const int streams_bf16 = model.stream_bf16; /* residual.stream_precision bf16 of a frame method */
    if (rank > 0) goto agree;

    /* the lock before anything is read or removed (a new directory: when it is made) */
    if (file_exists(dir) && (lock_fd = run_lock(dir, "s2hc train")) < 0) { /* in use: usage; else I/O */
        status = lock_fd == -2 ? RUN_USAGE : RUN_FAILED;
        goto out;
    }
    int have_run = file_exists(run_path), have_ckpt = file_exists(ckpt_path);
    /* --force: the old run's files go only once every check below has passed (a usage
       error must not destroy them) */
    if (force) have_run = have_ckpt = 0;
    if (!resume && (have_run || have_ckpt)) {
        fprintf(stderr,
                "s2hc: error: %s already holds a run; use --resume to continue it or --force to start over\n",
                dir);
        { status = RUN_USAGE; goto out; }
    }
    if (resume && have_ckpt) {
        /* the config first (from the run file, saved with every checkpoint): a changed
           config is refused before any tensor is read. A run file that cannot be read is
           refused, not replaced: the next save would write a log holding none of its
           history (every /train, /eval, /probe row) */
        int lr = have_run ? h5log_load(&log, run_path, err, sizeof err) : 0;
        if (lr == -2) { /* a newer build's file, or one another program holds: nothing to move away */
            fprintf(stderr, "s2hc: error: cannot resume: %s\n", err);
            status = RUN_FAILED;
            goto out;
        }
        if (lr != 0) {
            fprintf(stderr, "s2hc: error: cannot resume: %s\n  (resuming would replace it with a log that lacks its "
                    "history: move the file away to resume from the checkpoint with a new log, or --force to start "
                    "over)\n", err);
            status = RUN_FAILED;
            goto out;
        }
        const char *stored_yaml = h5log_get_attr_str(&log, "/", "config");
        if (stored_yaml && check_resume_config(stored_yaml, &cfg, yaml, run_path, cfg_path) != 0) { status = RUN_USAGE; goto out; }
        ckpt_tensor *p = run_ckpt_views(&model, model.params), *mm = run_ckpt_views(&model, opt.m),
                    *vv = run_ckpt_views(&model, opt.v);
        ckpt_meta meta;
        memset(&meta, 0, sizeof meta);
        rc = ckpt_load(ckpt_path, p, mm, vv, model.n_tensors, &meta, err, sizeof err);
        free(p);
        free(mm);
        free(vv);
        if (rc != 0) {
            fprintf(stderr, "s2hc: error: cannot resume: %s\n", err);
            { status = RUN_FAILED; goto out; }
        }
        if (ckpt_values_finite(&model, model.params, opt.m, opt.v, ckpt_path) != 0) {
            free((char *)meta.config_yaml);
            status = RUN_FAILED;
            goto out;
        }
        rc = check_resume_config(meta.config_yaml, &cfg, yaml, ckpt_path, cfg_path);
        free((char *)meta.config_yaml);
        if (rc != 0) { status = RUN_USAGE; goto out; }
        if (meta.step > cfg.steps) { /* the configs agree on train.steps: no checkpoint of this run gets here */
            fprintf(stderr, "s2hc: error: cannot resume: %s: checkpoint at step %lld, past train.steps = %d (corrupt?)\n",
                    ckpt_path, (long long)meta.step, cfg.steps);
            status = RUN_FAILED;
            goto out;
        }
        start = (int)meta.step;
        rng.s = meta.rng;
        loader.rng = meta.loader_rng;
        opt.t = start;
        const char *was = h5log_get_attr_str(&log, "/", "status");
        if (start >= cfg.steps && was && !strcmp(was, "finished")) {
            /* nothing left to train; evaluating again would only append a duplicate eval
               row and overwrite the finished run's wall time (`s2hc eval` re-evaluates) */
            if (rank == 0) /* a summary: even with --quiet */
                printf("%s already finished at step %d (train.steps = %d); nothing to do\n", dir, start, cfg.steps);
            done = 1;
            goto agree;
        }
        /* the corpus it trained on: one rebuilt since (`s2hc data prepare` of a newer
           build, another cleanup version) would feed the rest of the run other windows
           and evaluate it on another validation set */
        const double was_t = h5log_get_attr_num(&log, "/", "train_tokens"),
                     was_v = h5log_get_attr_num(&log, "/", "val_tokens");
        if (!isnan(was_t) && !isnan(was_v) && (was_t != (double)loader.shard.count || was_v != (double)val.count)) {
            fprintf(stderr, "s2hc: error: cannot resume: %s trained on a corpus '%s' of %.0f training and %.0f "
                    "validation tokens; %s and val.bin hold %llu and %llu now (rebuilt since, by `s2hc data "
                    "prepare` of another version?): the run would go on with other data. Put back the corpus it "
                    "trained on (data.dir names another folder), or --force to start over\n", run_path,
                    cfg.train_corpus, was_t, was_v, train_path, (unsigned long long)loader.shard.count,
                    (unsigned long long)val.count);
            status = RUN_USAGE;
            goto out;
        }
        if (have_run && isnan(was_t) && !quiet)
            printf("note: %s does not record the size of its corpus (a run file of an older s2hc): the resume "
                   "cannot check that %s is still the corpus it trained on\n", run_path, train_path);
        /* before the rows past the checkpoint go: a series longer than its step series
           would be cut to it there, its rows then read as other steps' */
        if (check_logged_layout(&log) != 0) {
            status = RUN_FAILED;
            goto out;
        }
        static const char *const groups[] = {"/train", "/eval", "/probe"};
        for (int g = 0; g < 3; g++) {
            char key[32];
            snprintf(key, sizeof key, "%s/step", groups[g]);
            if (h5log_truncate_group(&log, groups[g], key, start) != 0) {
                fprintf(stderr, "s2hc: error: cannot resume: %s/run.h5: %s holds series but no %s to align them by "
                        "(edited by another tool?): move the file away to resume from the checkpoint with a new log, or "
                        "--force to start over\n", dir, groups[g], key);
                status = RUN_FAILED;
                goto out;
            }
        }
        /* run.h5 is saved before ckpt.h5, so its log reaches the checkpoint's step unless
           something else wrote it back from an older state */
        const double last = h5log_last(&log, "/train/step");
        if (start > 0 && !(last >= start))
            fprintf(stderr, "s2hc: warning: %s/run.h5: /train ends at step %.0f but the checkpoint is at step %d: "
                    "steps %.0f..%d are missing from the log (the run file was replaced by an older copy?); "
                    "resuming from the checkpoint\n", dir, isnan(last) ? 0.0 : last, start,
                    isnan(last) ? 1.0 : last + 1, start);
        if (train_extended_from > 0) { /* even with --quiet: the schedule changes here */
            s2hc_config was_cfg = cfg;
            was_cfg.steps = train_extended_from;
            printf("extending %s from %d to %d steps at step %d: the learning rate follows the schedule of %d steps "
                   "from here, %.4g (that of %d steps: %.4g)\n", dir, train_extended_from, cfg.steps, start, cfg.steps,
                   lr_at(&cfg, start), train_extended_from, lr_at(&was_cfg, start));
        } else if (!quiet) printf("resuming %s from step %d\n", dir, start);
        if (threads_note[0]) fputs(threads_note, strncmp(threads_note, "s2hc:", 5) ? stdout : stderr);
        /* a run trained by another build (an upgrade mid-run): its kernels may sum in
           another order, so the steps from here need not be the ones that build would
           have taken */
        const char *by = h5log_get_attr_str(&log, "/", "git_commit");
        if (rank == 0 && by && strcmp(by, s2hc_version()) != 0)
            fprintf(stderr, "s2hc: warning: %s/run.h5 was trained by s2hc %s and resumes with s2hc %s: it goes on "
                    "as the same model, but not bit for bit as that build would have where the kernels changed "
                    "between them (the run file's git_commits lists both)\n", dir, by, s2hc_version());
    } else if (resume) {
        /* a run file without a checkpoint (stopped before its first save, or the
           checkpoint moved away): the run starts again from step 0 and its log is
           rewritten, which is only the same run when the config is the same */
        if (have_run) {
            h5log old;
            h5log_init(&old);
            const int lr = h5log_load(&old, run_path, err, sizeof err);
            if (lr != 0) {
                fprintf(stderr, "s2hc: error: cannot resume: %s%s\n", err,
                        lr == -2 ? "" : "\n  (no checkpoint, and the run file cannot be read to check the config: "
                                        "--force to start over)");
                h5log_free(&old);
                status = RUN_FAILED;
                goto out;
            }
            const char *stored_yaml = h5log_get_attr_str(&old, "/", "config");
            rc = stored_yaml ? check_resume_config(stored_yaml, &cfg, yaml, run_path, cfg_path) : 0;
            /* a finished run had saved its checkpoint: without it, --extend would train a
               new run of the longer length from step 0 over the finished one's record */
            const char *st_was = h5log_get_attr_str(&old, "/", "status");
            const int finished_was = rc == 0 && train_extended_from > 0 && st_was && !strcmp(st_was, "finished");
            h5log_free(&old);
            if (rc != 0) { status = RUN_USAGE; goto out; }
            if (finished_was) {
                fprintf(stderr, "s2hc: error: cannot extend: %s/ckpt.h5 is missing (moved or deleted?): the run "
                        "finished its %d steps and had saved one, which --extend goes on from. Put it back, or "
                        "--force to train %d steps from scratch\n", dir, train_extended_from, cfg.steps);
                status = RUN_FAILED;
                goto out;
            }
        }
        if (!quiet) printf("no checkpoint in %s; starting from step 0\n", dir);
    }
    /* train.init_from: a fresh run starts from a file's tensors, read before anything is
       written (a resumed run has its checkpoint's) */
    if (start == 0 && cfg.init_from[0]) {
        int kept = 0;
        if (safetensors_load(&model, cfg.init_from, &init_loaded, &kept, err, sizeof err) != 0) {
            fprintf(stderr, "s2hc: error: key 'train.init_from' of %s: %s\n", cfg_path, err);
            { status = RUN_USAGE; goto out; }
        }
        /* the step of the export it came from (an s2hc export says; another file does not):
           analyze keeps runs started from different lengths in cells of their own */
        char *meta = NULL, kind[16];
        if (safetensors_metadata(cfg.init_from, &meta, &init_step, kind, sizeof kind, err, sizeof err) != 0) init_step = -1;
        free(meta);
        if (!quiet) {
            printf("init_from %s: %d tensors read, %d kept their initialisation", cfg.init_from, init_loaded, kept);
            if (init_step >= 0) printf(" (an export of step %lld)", (long long)init_step);
            printf("\n");
        }
    }
    /* the backend: cuda when asked for (a clear error without a usable GPU), or with auto
       when a GPU is usable; parameters and optimizer state then live on the device and
       are copied back for evals, probes and checkpoints */
    int want_cuda = !strcmp(cfg.backend, "cuda");
    if (model.proj_bf16 && want_cuda) {
        fprintf(stderr, "s2hc: error: %s: key 'residual.proj_precision' is bf16, a cpu option (the cuda backend runs "
                "the projection in fp32); set run.backend: cpu, or run.precision: bf16 for the cuda backend's "
                "mixed precision\n", cfg_path);
        { status = RUN_USAGE; goto out; }
    }
    if (W > 1 && (want_cuda || (!strcmp(cfg.backend, "auto") && !model.proj_bf16))) {
        /* across processes every rank builds its device model after the agreement below,
           on the GPU of its local rank; rank 0 looks at its own */
        cuda_use_device(dist_local_rank());
        if (cuda_available(gpu, sizeof gpu) > 0) use_cuda = 1;
        else if (want_cuda) {
            fprintf(stderr, "s2hc: error: %s: key 'run.backend' is cuda, but %s\n", cfg_path,
                    gpu[0] ? gpu : "no GPU is usable");
            { status = RUN_USAGE; goto out; }
        }
    } else if (W == 1 && (want_cuda || (!strcmp(cfg.backend, "auto") && !model.proj_bf16))) {
        if (cuda_available(gpu, sizeof gpu) > 0) {
            cm = cuda_model_create(&model, cfg.batch, !strcmp(cfg.precision, "bf16"), err, sizeof err);
            if (!cm && want_cuda) {
                fprintf(stderr, "s2hc: error: %s: key 'run.backend' is cuda: %s\n", cfg_path, err);
                { status = RUN_USAGE; goto out; }
            }
            if (!cm && !quiet) printf("backend: cpu (the GPU cannot take this model: %s)\n", err);
            if (cm && start > 0) cuda_upload_optim(cm, opt.m, opt.v);
        } else if (want_cuda) {
            fprintf(stderr, "s2hc: error: %s: key 'run.backend' is cuda, but %s\n", cfg_path,
                    gpu[0] ? gpu : "no GPU is usable");
            { status = RUN_USAGE; goto out; }
        }
    }
    if ((cm || use_cuda) && rank == 0 && cfg.vocab % 8) /* (the GPT-2 tokenizer's 50257: nanoGPT pads it to 50304) */
        fprintf(stderr, "s2hc: warning: model.vocab %d is not a multiple of 8: the GPU's products over the vocabulary "
                "lose their alignment and run slower; pad it to %d, as nanoGPT pads 50257 to 50304 (the extra tokens "
                "never occur, and their logits learn to vanish)\n",
                cfg.vocab, (cfg.vocab + 63) / 64 * 64);
    if (rank == 0 && start > 0) resume_backend(was_cuda, was_W, cm || use_cuda, W);
    if (!quiet) {
        if (cm || use_cuda) printf("backend: cuda on %s%s, %s\n", gpu, use_cuda ? " (rank 0's)" : "", cfg.precision);
        else if (!strcmp(cfg.backend, "auto"))
            printf("backend: cpu (auto: %s)\n", model.proj_bf16 ? "residual.proj_precision bf16 is a cpu option"
                                                 : gpu[0] ? gpu : "no GPU");
        if (model.proj_bf16)
            printf("projection: bf16 operands, fp32 sums, by %s (residual.proj_precision); the rest of the step in "
                   "fp32\n", model.proj_amx ? "AMX tiles" : "AVX512_BF16 dot products");
        if (!cm && !use_cuda && strcmp(cfg.precision, "fp32"))
            printf("precision: fp32 (run.precision %s is for the cuda backend; the cpu backend trains in fp32, "
                   "and the run file says so)\n", cfg.precision);
        char unused[256];
        if (config_unused_keys(&cfg, unused, sizeof unused))
            printf("note: method %s does not use %s (recorded in the run file, changes nothing)\n", cfg.method,
                   unused);
        if (!model.variant && (strcmp(cfg.proj_precision, "fp32") || strcmp(cfg.stream_precision, "fp32")))
            printf("note: method rc has no streams and no projection: residual.proj_precision and "
                   "stream_precision do nothing (the run file records fp32)\n");
        if (streams_bf16)
            printf("streams: stored in bf16 in the training steps (residual.stream_precision); their gradients and "
                   "every sum in fp32; evals and probes run fp32 streams\n");
    }
    /* the activations before anything is written: a model too large for memory (say
       model.block_size 65536) stops here, without a run directory */
    model_alloc_acts(&model, B);
    if (force) {
        unlink(run_path);
        unlink(ckpt_path);
    }
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "s2hc: error: cannot create %s: %s\n", dir, strerror(errno));
        { status = RUN_FAILED; goto out; }
    }
    if (lock_fd < 0 && (lock_fd = run_lock(dir, "s2hc train")) < 0) {
        status = lock_fd == -2 ? RUN_USAGE : RUN_FAILED;
        goto out;
    }

    /* run-file attributes */
    char when[32];
    iso_now(when, sizeof when);
    h5log_attr_str(&log, "/", "format", "s2hc-run");
    h5log_attr_num(&log, "/", "format_version", RUN_FORMAT_VERSION);
    h5log_attr_str(&log, "/", "config", yaml);
    h5log_attr_str(&log, "/", "method", cfg.method);
    h5log_attr_num(&log, "/", "n_streams", model.n);
    h5log_attr_num(&log, "/", "seed", (double)cfg.seed);
    /* git_commits: every build that trained the run, in order (a run file older than the
       attribute: its git_commit starts the list) */
    attr_list_append(&log, "git_commits", h5log_get_attr_str(&log, "/", "git_commit"), s2hc_version());
    h5log_attr_str(&log, "/", "git_commit", s2hc_version());
    if (train_extended_from > 0 && start > 0) {
        /* extensions: each "N->M" (train.steps before and after) in order; a resume of an
           extension stopped before its first checkpoint says the same again */
        char me[48];
        snprintf(me, sizeof me, "%d->%d", train_extended_from, cfg.steps);
        attr_list_append(&log, "extensions", NULL, me);
    }
    h5log_attr_num(&log, "/", "train_tokens", (double)loader.shard.count);
    /* what the tokens are: `sample` speaks text only to a model of bytes */
    h5log_attr_str(&log, "/", "token_kind", loader.shard.bytes_per_token == 1 ? "bytes" : "ids");
    h5log_attr_num(&log, "/", "val_tokens", (double)val.count);
    h5log_attr_str(&log, "/", "backend", cm || use_cuda ? "cuda" : "cpu");
    h5log_attr_str(&log, "/", "device", cm || use_cuda ? gpu : "cpu");
    h5log_attr_str(&log, "/", "precision", cm || use_cuda ? cfg.precision : "fp32");
    h5log_attr_str(&log, "/", "proj_precision", model.proj_bf16 ? "bf16" : "fp32");
    h5log_attr_str(&log, "/", "proj_products", model_proj_products(&model));
    h5log_attr_str(&log, "/", "stream_precision", streams_bf16 ? "bf16" : "fp32");
    if (isnan(h5log_get_attr_num(&log, "/", "processes")))
        h5log_attr_num(&log, "/", "processes", W); /* a new run's (a session that trains no step keeps the run's) */
    h5log_attr_num(&log, "/", "n_params", (double)model.n_params);
    h5log_attr_num(&log, "/", "n_aux_params", (double)model.n_aux);
    if (init_loaded >= 0) h5log_attr_num(&log, "/", "init_from_tensors", init_loaded);
    if (init_step >= 0) h5log_attr_num(&log, "/", "init_from_step", (double)init_step);
    h5log_attr_str(&log, "/", "H_res_convention",
                   "X_next = H_res . X: H_res[i, j] is the weight of input stream j in output stream i");
    char kron[32] = "";
    const char *kron_note = "n is prime: a single factor, so kromhc is exactly mhc_lite";
    int kron_prime = 0;
    if (!strcmp(cfg.method, "kromhc")) {
        /* the factorisation; a prime n has one factor, which makes kromhc mhc_lite */
        int f[4];
        hc_kromhc_factor_string(model.n, kron, sizeof kron);
        h5log_attr_str(&log, "/", "kromhc_factors", kron);
        kron_prime = hc_kromhc_factorise(model.n, f) == 1;
        if (kron_prime) h5log_attr_str(&log, "/", "kromhc_note", kron_note);
    }
    if (!h5log_get_attr_str(&log, "/", "started")) h5log_attr_str(&log, "/", "started", when);
    {
        /* a diverged run resumed: its marker goes with the status, and `divergences` keeps
           each step it diverged at, so that the finished run's record still says so (a step
           once when the run diverged there again on its next try: attr_list_append leaves
           a list that ends with the item as it is) */
        const char *was = h5log_get_attr_str(&log, "/", "status");
        const double dv = h5log_get_attr_num(&log, "/", "diverged_at_step");
        if (was && !strcmp(was, "diverged") && isfinite(dv) && dv >= 0) {
            char at[32];
            snprintf(at, sizeof at, "%.0f", dv);
            attr_list_append(&log, "divergences", NULL, at);
            if (dist_rank() == 0) /* every rank resumes it; one says so */
                fprintf(stderr, "s2hc: note: %s diverged at step %s; it goes on from its checkpoint at step %d (with the "
                        "same config, data and thread count it diverges again there, unless the fault was the "
                        "machine's); run.h5's `divergences` keeps the step\n", dir, at, start);
        }
    }
    h5log_attr_str(&log, "/", "status", "running");
    h5log_attr_del(&log, "/", "diverged_at_step");
    declare_train_series(&log, &ts);
    if (check_logged_layout(&log) != 0) { status = RUN_FAILED; goto out; }

    /* probes: residual matrices and streams on a fixed validation batch (rc: stream RMS and
       the Jacobian baseline only) */
    if (cfg.probe_every > 0) probe = probe_open(&model, &val, &log);
    if (probe && start == 0) probe_step(probe, 0);

    if (!quiet) {
        printf("s2hc %s | run %s\n", s2hc_version(), dir);
        printf("---- config ----\n%s----------------\n", yaml);
        printf("model: %zu parameters (%zu in hyper-connections), method %s, n = %d, %d thread%s\n", model.n_params,
               model.n_aux, cfg.method, model.n, kernels_threads(), kernels_threads() == 1 ? "" : "s");
        if (W > 1)
            printf("processes: %d (MPI); each micro-batch of %d sequences cut in %d parts of %d to %d, the "
                   "parts' gradients summed in rank order\n",
                   W, B, W, B / W, (B + W - 1) / W);
        const char *blas_note = openblas_coretype_advice();
        if (blas_note && !cm && !use_cuda) printf("note: %s\n", blas_note);
        if (kron[0]) printf("kromhc: factors %s%s%s%s\n", kron, kron_prime ? " (" : "", kron_prime ? kron_note : "",
                            kron_prime ? ")" : "");
    }

agree:
    /* every rank: the setup's status (any rank's failure stops all), then rank 0's resume
       point, its configuration (each rank's must be the same) and its weights */
    synced = 1;
    status = dist_max_int(status);
    if (status) goto out;
    {
        int hdr[2] = {start, done};
        dist_bcast(hdr, sizeof hdr);
        start = hdr[0];
        if (hdr[1]) goto out;
    }
    if (W > 1) {
        size_t len = strlen(yaml) + 1;
        dist_bcast(&len, sizeof len);
        char *y0 = malloc_check(len);
        if (rank == 0) memcpy(y0, yaml, len);
        dist_bcast(y0, len);
        const int differs = strcmp(y0, yaml) != 0;
        free(y0);
        if (differs)
            fprintf(stderr, "s2hc: error: rank %d resolved another configuration than rank 0 from %s and its --set "
                    "(every process must be given the same)\n", rank, cfg_path);
        status = dist_max_int(differs ? RUN_USAGE : RUN_OK);
        if (status) goto out;
        if (start > 0 || cfg.init_from[0]) { /* resumed, or started from a file: rank 0's weights and moments */
            dist_bcast(model.params, model.n_params * sizeof(real));
            dist_bcast(opt.m, model.n_params * sizeof(real));
            dist_bcast(opt.v, model.n_params * sizeof(real));
        }
        opt.t = start;
    }
    /* this rank's part of each micro-batch (all of it with one process) */
    const int b0 = part_start(B, rank), Bp = part_start(B, rank + 1) - b0;
    dist_bcast(&use_cuda, sizeof use_cuda);
    if (use_cuda) { /* across processes: each rank's device model, from the agreed weights */
        cuda_use_device(dist_local_rank());
        cm = cuda_model_create(&model, Bp, !strcmp(cfg.precision, "bf16"), err, sizeof err);
        if (!cm) fprintf(stderr, "s2hc: error: rank %d (local rank %d): %s\n", rank, dist_local_rank(), err);
        status = dist_max_int(cm ? RUN_OK : RUN_FAILED);
        if (status) goto out;
        if (start > 0) cuda_upload_optim(cm, opt.m, opt.v);
    }
    model_alloc_acts(&model, Bp);
    inputs = malloc_check(N * sizeof(int));
    targets = malloc_check(N * sizeof(int));
    /* (mpirun gives rank 0 a terminal even when its own output is piped: lines, then) */
    int tty = terminal_live(STDOUT_FILENO) && !quiet && W == 1;
    stop_signals_catch(rank == 0); /* said once, by rank 0 */
    /* stopped during an evaluation of the training (its checkpoint saved, its row not
       written): that evaluation first, of the same weights */
    int cut = 0;
    if (rank == 0 && start > 0 && start < cfg.steps && cfg.eval_every > 0 && start % cfg.eval_every == 0 &&
        !(h5log_last(&log, "/eval/step") >= start)) {
        double ood[CFG_MAX_OOD];
        int with_ood;
        double vl = train_eval(&model, &val, &cfg, B, shard_kind(&loader.shard), ood, &with_ood, quiet);
        if (stop_signal) cut = 1;
        else log_eval_row(&log, &cfg, start, vl, with_ood ? ood : NULL, quiet, 0);
    }
    dist_bcast(&cut, sizeof cut);
    if (cut) {
        if (rank == 0)
            fprintf(stderr, "s2hc: interrupted during the evaluation of step %d; --resume runs it\n", start);
        status = RUN_INTERRUPTED;
    }

    double t_start = now_seconds(), last_loss = NAN;
    /* wall_seconds: the run's wall time over every invocation, up to its last save */
    double wall0 = h5log_get_attr_num(&log, "/", "wall_seconds");
    if (!isfinite(wall0) || wall0 < 0) wall0 = 0;
    /* test hook: S2HC_FAULT_NAN_AT_STEP=k makes step k's loss NaN (the divergence path) */
    const char *fault = getenv("S2HC_FAULT_NAN_AT_STEP");
    int fault_step = fault ? atoi(fault) : -1;
    int steps_done_here = 0;
    int step = start;
    for (; step < cfg.steps && !cut; step++) {
        /* the cut of the batches this session trains with: recorded once it trains a step
           (a session that trains none, stopped during the evaluation it owed, leaves the
           run's own; resume_threads reads them) */
        if (rank == 0 && step == start) {
            h5log_attr_num(&log, "/", "processes", W);
            h5log_attr_num(&log, "/", "threads", kernels_threads());
        }
        double t0 = now_seconds();
        double loss = 0, gn;
        if (cm) {
            cuda_zero_grad(cm);
            for (int micro = 0; micro < cfg.grad_accum; micro++) {
                if (rank == 0) loader_next(&loader, B, T, inputs, targets);
                loss += cuda_micro_batch(cm, inputs, targets, B, T, b0, Bp, 1.0 / cfg.grad_accum);
            }
            cuda_sum_grads(cm, &model);
            gn = cuda_grad_norm(cm);
        } else {
            model_zero_grad(&model);
            for (int micro = 0; micro < cfg.grad_accum; micro++) {
                if (rank == 0) loader_next(&loader, B, T, inputs, targets);
                loss += micro_batch(&model, inputs, targets, B, b0, Bp, (real)(1.0 / cfg.grad_accum));
            }
            gn = grad_global_norm(&model);
        }
        loss /= cfg.grad_accum;
        if (step + 1 == fault_step) loss = NAN;
        {   /* rank 0's loss and norm, which every rank has computed alike: the same verdict */
            double lg[2] = {loss, gn};
            dist_bcast(lg, sizeof lg);
            loss = lg[0], gn = lg[1];
        }
        double lr = lr_at(&cfg, step);
        if (!isfinite(loss) || !isfinite(gn)) {
            status = RUN_DIVERGED;
            if (rank > 0) break;
            fprintf(stderr, "%ss2hc: step %d: %s is %s: the run diverged; %s\n", tty ? "\n" : "", step + 1,
                    isfinite(loss) ? "the gradient norm" : "the loss", isnan(isfinite(loss) ? gn : loss) ? "NaN" : "infinite",
                    file_exists(ckpt_path) ? "the last good checkpoint is kept" : "it had saved no checkpoint yet");
            int64_t s64 = step + 1;
            h5log_append(&log, ts.s_step, &s64);
            h5log_append(&log, ts.s_loss, &loss);
            h5log_append(&log, ts.s_lr, &lr);
            h5log_append(&log, ts.s_gnorm, &gn);
            double z = 0;
            h5log_append(&log, ts.s_tps, &z);
            h5log_attr_str(&log, "/", "status", "diverged");
            h5log_attr_num(&log, "/", "diverged_at_step", step + 1);
            break;
        }
        if (cm) {
            cuda_step(cm, lr, gn, step + 1);
            opt.t = step + 1;
        } else {
            optim_step(&opt, &model, lr, gn);
        }
        double dt = now_seconds() - t0;
        double tps = (double)N * cfg.grad_accum / dt;
        int64_t s64 = step + 1;
        last_loss = loss;
        steps_done_here++;
        int last = step + 1 == cfg.steps;
        if (stop_after > 0 && steps_done_here >= stop_after && !last && !stop_signal) {
            stop_signal = SIGTERM;
            stopped_after = 1;
        }
        /* a stop on any rank stops them all (mpirun passes a signal to every rank; one
           sent to a single rank's process stops the run too) */
        int stop = dist_max_int(stop_signal != 0);
        if (stop && !stop_signal) stop_signal = SIGTERM;
        /* and at the last step, before the final evaluation and probe (which change no
           weight): stopped or killed during them, --resume runs only them */
        int do_ckpt = (cfg.ckpt_every > 0 && (step + 1) % cfg.ckpt_every == 0) || last || stop;
        int on_host = 0; /* the device's weights and moments already downloaded this step */
        if (W > 1 && (do_ckpt || last)) {
            if (cm) { /* every rank's weights and moments on the host, to compare */
                on_host = 1;
                cuda_download_params(cm, &model);
                cuda_download_optim(cm, opt.m, opt.v);
            }
            if (check_ranks_agree(&model, &opt) != 0) {
                status = RUN_FAILED;
                break;
            }
        }
        if (rank == 0) { /* the log, the progress line, probes, evals and files */
            h5log_append(&log, ts.s_step, &s64);
            h5log_append(&log, ts.s_loss, &loss);
            h5log_append(&log, ts.s_lr, &lr);
            h5log_append(&log, ts.s_gnorm, &gn);
            h5log_append(&log, ts.s_tps, &tps);
            double elapsed = now_seconds() - t_start;
            double eta = elapsed / steps_done_here * (cfg.steps - step - 1);
            if (!quiet && (tty || (step + 1) % cfg.log_every == 0 || step == start || step + 1 == cfg.steps))
                progress_line(tty, step + 1, cfg.steps, loss, lr, gn, tps, eta);

            int do_probe = probe && ((step + 1) % cfg.probe_every == 0 || last);
            int do_eval = cfg.eval_every > 0 && (step + 1) % cfg.eval_every == 0 && !last;
            if (cm && !on_host && (do_probe || do_eval || do_ckpt || last)) { /* the host model for evals, probes, files */
                cuda_download_params(cm, &model);
                if (do_ckpt || last) cuda_download_optim(cm, opt.m, opt.v);
            }
            if (do_probe) probe_step(probe, step + 1);
            if (do_eval) {
                double ood[CFG_MAX_OOD];
                int with_ood;
                double vl = train_eval(&model, &val, &cfg, B, shard_kind(&loader.shard), ood, &with_ood, quiet);
                if (stop_signal) { /* cut short: no row; this step's checkpoint, and --resume evaluates it */
                    if (cm && !do_ckpt && !last) cuda_download_optim(cm, opt.m, opt.v);
                    do_ckpt = 1;
                    status = RUN_INTERRUPTED;
                } else log_eval_row(&log, &cfg, s64, vl, with_ood ? ood : NULL, quiet, tty);
            }
            /* run.h5 first: killed between the two saves, --resume drops the rows logged
               after the checkpoint it finds; the other order loses the rows since the
               last save (tests/cli/kill_cli.sh) */
            if (do_ckpt) h5log_attr_num(&log, "/", "wall_seconds", wall0 + now_seconds() - t_start);
            if (do_ckpt && (h5log_save(&log, run_path) != 0 ||
                            save_state(ckpt_path, &model, &opt, step + 1, rng.s, loader.rng, yaml) != 0))
                status = RUN_FAILED;
        }
        dist_bcast(&status, sizeof status); /* a failed save stops every rank */
        if (status == RUN_INTERRUPTED) stop = 1; /* rank 0's evaluation cut short by a signal */
        else if (status != RUN_OK) break;
        if (stop) {
            if (rank == 0 && (!quiet || stop_after == 0))
                fprintf(stderr, "%ss2hc: interrupted at step %d; saved; continue with --resume\n", tty ? "\n" : "",
                        step + 1);
            status = RUN_INTERRUPTED;
            step++;
            break;
        }
    }
    if (tty) printf("\n");

    if (status == RUN_OK && rank == 0) {
        model_alloc_acts(&model, B); /* the whole batch's sequences per eval batch, as one process has */
        eval_all(&model, &log, cfg.steps, quiet ? EVAL_QUIET : EVAL_TABLE, NULL, NULL);
        if (cfg.final_samples > 0 && !stop_signal) {
            double tp = now_seconds();
            uint64_t windows = loader_eval_windows(&val, model.T); /* fewer: probe_final says so */
            if (!quiet)
                printf("final probe over %llu validation sequences...\n",
                       (unsigned long long)(windows < (uint64_t)cfg.final_samples ? windows : (uint64_t)cfg.final_samples));
            if (probe_final(&model, &val, cfg.final_samples, &log, cfg.steps, !quiet) == 0 && !quiet)
                printf("final probe done in %.1fs\n", now_seconds() - tp);
        }
        if (stop_signal) { /* the final rows are dropped; the checkpoint of the last step stands */
            h5log_truncate_group(&log, "/eval", "/eval/step", cfg.steps - 1);
            fprintf(stderr, "s2hc: interrupted during the final evaluation and probe; the checkpoint of step %d is "
                    "saved; --resume runs them\n", cfg.steps);
            status = RUN_INTERRUPTED;
        } else {
            char fin[32];
            iso_now(fin, sizeof fin);
            h5log_attr_str(&log, "/", "status", "finished");
            h5log_attr_str(&log, "/", "finished", fin);
        }
    }
    if (rank == 0) h5log_attr_num(&log, "/", "wall_seconds", wall0 + now_seconds() - t_start);
    if (rank == 0 && h5log_save(&log, run_path) != 0) status = RUN_FAILED;
    dist_bcast(&status, sizeof status); /* every rank exits as rank 0 does */
    if (steps_done_here == 0) last_loss = h5log_last(&log, "/train/loss"); /* resumed for the final phase only */
    if (status == RUN_OK && rank == 0) { /* the summary: even with --quiet */
        size_t k = 0;
        const double mean = h5log_final_train_loss(&log, &k);
        if (k > 1)
            printf("done: %d steps, final train loss %.4f (the mean of the last %zu steps; the last step's %.4f), %s\n",
                   cfg.steps, mean, k, last_loss, run_path);
        else
            printf("done: %d steps, final train loss %.4f (the last step's), %s\n", cfg.steps, mean, run_path);
    }
    if (probe && !quiet && status == RUN_OK) {
        double frac, ps = probe_session_seconds(probe, &frac);
        /* milliseconds below a second: a short run's "0.0 s, 2.63 %" read as a contradiction */
        printf("probes: %.*f s, %.2f%% of the training's wall time (probe.every = %d; /probe@time_fraction)\n",
               ps < 0.9995 ? 3 : 1, ps, 100 * frac, cfg.probe_every);
    }

out:
    if (!synced) dist_max_int(status); /* an early exit: the other ranks learn of it at the agreement */
    if (probe) probe_close(probe);
    if (cm) cuda_model_free(cm);
    free(inputs);
    free(targets);
    free(yaml);
    h5log_free(&log);
    optim_free(&opt);
    model_free(&model);
    shard_close(&val);
    loader_close(&loader);
    if (lock_fd >= 0) close(lock_fd);
    if (stopped_after && stop_signal == SIGTERM) stop_signal = 0; /* its own: a later run in this process starts */
    return status;
}
