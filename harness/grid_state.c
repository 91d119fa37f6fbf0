/* grid_state.c: what a grid knows of each point, all of it read from the point's run
 * directory (run.h5, ckpt.h5, the locks, grid.status: grid_inspect), and <out>/index.csv
 * written from it (grid_write_index); the atomic writes and grid.status the runner uses.
 */
#include "grid_internal.h"
#include "checkpoint.h"
#include "run.h"
#include "../probes/h5.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const grid_state_names[GS_N] = {"pending", "partial", "running", "finished", "failed",
                                            "diverged", "interrupted", "changed"};

/* Keys whose value never changes a run's numbers: a stored run and the grid may differ
 * in them (a moved data or runs directory, another thread count). */
static const char *const ignored_in_compare[] = {"run.out",          "data.dir",           "train.threads",
                                                 "train.log_every",  "run.backend",        "train.eval_every",
                                                 "train.eval_batches", "train.ckpt_every", "probe.every",
                                                 "probe.final_samples", "train.eval_ood", NULL};

/* ------------------------------------------------------------------------------------ */
/* Run directories: locks and state                                                      */
/* ------------------------------------------------------------------------------------ */

/* Locks are open file description locks (F_OFD_SETLK) on <dir>/.lock: like flock they
 * belong to the open file, so the child that inherits the descriptor keeps the point
 * locked for as long as it lives, even if the runner dies; unlike flock they can be
 * tested without taking them (F_OFD_GETLK), so --list never disturbs a runner. A child
 * keeps its own point's lock only: the others are close-on-exec and launch returns once
 * the child has exec'd. */
static int lock_cmd(int fd, int cmd, short type) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    int rc = fcntl(fd, cmd, &fl);
    if (cmd == F_OFD_GETLK) return rc == 0 ? fl.l_type != F_UNLCK : 0;
    return rc;
}

/* 1 when a runner holds the point's lock (.lock) or a command holds the run's own
 * (.train.lock: an `s2hc train` started by hand, an eval, a probe). */
static int dir_locked(const char *dir) {
    static const char *const names[] = {".lock", ".train.lock"};
    for (int k = 0; k < 2; k++) {
        char path[CFG_PATH + CFG_STR + 16];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        int r = lock_cmd(fd, F_OFD_GETLK, F_WRLCK);
        close(fd);
        if (r) return 1;
    }
    return 0;
}

/* The first key whose value differs between two configs (ignoring ignored_in_compare):
 * 0 when the same, 1 with "key: a (run) vs b (grid)" in diff. */
static int config_first_diff(const s2hc_config *run, const s2hc_config *grid, char *diff, size_t n) {
    char *a = config_to_yaml(run), *b = config_to_yaml(grid), section[GRID_KEY] = "";
    const char *pa = a, *pb = b;
    int found = 0;
    while (*pa && *pb && !found) {
        const char *ea = strchr(pa, '\n'), *eb = strchr(pb, '\n');
        size_t la = ea ? (size_t)(ea - pa) : strlen(pa), lb = eb ? (size_t)(eb - pb) : strlen(pb);
        if (la && pa[0] != ' ') snprintf(section, sizeof section, "%.*s", (int)(la - 1), pa);
        else if (la != lb || memcmp(pa, pb, la) != 0) {
            const char *colon = memchr(pa, ':', la);
            char key[GRID_KEY * 2];
            snprintf(key, sizeof key, "%s.%.*s", section, colon ? (int)(colon - pa - 2) : 0, pa + 2);
            int ignored = 0;
            for (int i = 0; ignored_in_compare[i]; i++) ignored |= !strcmp(ignored_in_compare[i], key);
            if (!ignored) {
                const char *cb = memchr(pb, ':', lb);
                int va = colon ? (int)(la - (size_t)(colon - pa) - 2) : 0;
                int vb = cb ? (int)(lb - (size_t)(cb - pb) - 2) : 0;
                snprintf(diff, n, "%s: %.*s (stored run) vs %.*s (grid)", key, va, colon ? colon + 2 : "", vb,
                         cb ? cb + 2 : "");
                found = 1;
            }
        }
        pa += la + (ea ? 1 : 0);
        pb += lb + (eb ? 1 : 0);
    }
    free(a);
    free(b);
    return found;
}

static double series_last(const h5log *log, const char *path) {
    int s = h5log_find(log, path);
    if (s < 0 || log->series[s].rows == 0) return NAN;
    const h5log_series *x = &log->series[s];
    size_t i = (x->rows - 1) * x->row_elems;
    if (x->type == H5LOG_F64) return ((const double *)x->data)[i];
    if (x->type == H5LOG_F32) return ((const float *)x->data)[i];
    return (double)((const int64_t *)x->data)[i];
}

static double series_mean_positive(const h5log *log, const char *path) {
    int s = h5log_find(log, path);
    if (s < 0 || log->series[s].type != H5LOG_F64) return NAN;
    const h5log_series *x = &log->series[s];
    double sum = 0;
    size_t k = 0;
    for (size_t i = 0; i < x->rows; i++) {
        double v = ((const double *)x->data)[i * x->row_elems];
        if (v > 0 && isfinite(v)) { sum += v; k++; }
    }
    return k ? sum / (double)k : NAN;
}

/* Write text to path atomically (path.tmp, fsync, rename). 0 or -1 with a message. */
int grid_write_atomic(const char *path, const char *text, size_t len) {
    char tmp[CFG_PATH * 2];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    int ok = fd >= 0;
    for (size_t off = 0; ok && off < len;) {
        ssize_t w = write(fd, text + off, len - off);
        if (w <= 0) ok = 0;
        else off += (size_t)w;
    }
    if (ok && fsync(fd) != 0) ok = 0;
    if (fd >= 0 && close(fd) != 0) ok = 0;
    if (ok && rename(tmp, path) != 0) ok = 0;
    if (!ok) {
        fprintf(stderr, "s2hc: error: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Remove the temporary files grid_write_atomic left in dir (index.csv.PID.tmp,
 * config.yaml.PID.tmp, grid.status.PID.tmp) when a runner died between writing and
 * renaming: those whose PID no longer runs. Called under the lock that orders the
 * writers of dir's files. */
void grid_remove_stale_tmps(const char *dir) {
    static const char *const ours[] = {"index.csv.", "config.yaml.", "grid.status.", NULL};
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        int mine = 0;
        for (int k = 0; ours[k] && !mine; k++) mine = !strncmp(e->d_name, ours[k], strlen(ours[k]));
        if (!mine || n < 7 || strcmp(e->d_name + n - 4, ".tmp") != 0) continue;
        const char *q = e->d_name + n - 4; /* back over the digits to the dot before them */
        const char *p = q;
        while (p > e->d_name && p[-1] >= '0' && p[-1] <= '9') p--;
        if (p == q || p == e->d_name || p[-1] != '.') continue;
        const long pid = strtol(p, NULL, 10);
        if (pid <= 0 || (kill((pid_t)pid, 0) != 0 && errno == ESRCH)) {
            char path[CFG_PATH + CFG_STR + 300];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
    }
    closedir(d);
}

/* grid.status's numbers, as grid_write_status writes them: a time in seconds (a wall time,
 * or the epoch seconds of a start) is a plain number from 0 to GRID_STATUS_MAX_SECONDS, an
 * exit code a whole number from 0 to 255. Anything else (a damaged or edited file: "1e300",
 * "nan", "-5", "12abc") counts as not recorded: NaN, -1. A time past the bound would be
 * summed into the wall time and written back ("%.3f" of 1e300 is 305 characters). */
#define GRID_STATUS_MAX_SECONDS 1e11
static double status_seconds(const char *v) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    return end != v && !*end && !errno && x >= 0 && x <= GRID_STATUS_MAX_SECONDS ? x : NAN;
}
static int status_exit_code(const char *v) {
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    return end != v && !*end && !errno && x >= 0 && x <= 255 ? (int)x : -1;
}

/* grid.status in a run directory: the grid's record of its last run of the point
 * ("state=failed exit_code=1 wall_s=12.5"), written by the runner after each run, and at
 * each start with started=<epoch seconds> added: still there after the run, it is a run
 * whose end nobody recorded (its runner was killed). */
void grid_read_status(const char *dir, int *state, int *exit_code, double *wall_s, double *started) {
    char path[CFG_PATH + CFG_STR + 16], line[256];
    snprintf(path, sizeof path, "%s/grid.status", dir);
    *state = -1;
    *exit_code = -1;
    *wall_s = NAN;
    *started = NAN;
    FILE *f = fopen(path, "r");
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        char *v = strchr(line, '=');
        if (!v) continue;
        *v++ = '\0';
        v[strcspn(v, "\r\n")] = '\0';
        if (!strcmp(line, "state"))
            for (int s = 0; s < GS_N; s++)
                if (!strcmp(v, grid_state_names[s])) *state = s;
        if (!strcmp(line, "exit_code")) *exit_code = status_exit_code(v);
        if (!strcmp(line, "wall_s")) *wall_s = status_seconds(v);
        if (!strcmp(line, "started")) *started = status_seconds(v);
    }
    fclose(f);
}

/* state < 0: none recorded yet; started: NaN after a run, its start while it runs. */
int grid_write_status(const char *dir, int state, int exit_code, double wall_s, double started) {
    char path[CFG_PATH + CFG_STR + 16], text[256];
    snprintf(path, sizeof path, "%s/grid.status", dir);
    int n = snprintf(text, sizeof text, "# written by s2hc grid at each start and end of a run of this point\n");
    if (state >= 0) n += snprintf(text + n, sizeof text - (size_t)n, "state=%s\n", grid_state_names[state]);
    if (exit_code >= 0) n += snprintf(text + n, sizeof text - (size_t)n, "exit_code=%d\n", exit_code);
    /* only what grid_read_status reads back: each line then fits text */
    if (wall_s >= 0 && wall_s <= GRID_STATUS_MAX_SECONDS)
        n += snprintf(text + n, sizeof text - (size_t)n, "wall_s=%.3f\n", wall_s);
    if (started >= 0 && started <= GRID_STATUS_MAX_SECONDS)
        n += snprintf(text + n, sizeof text - (size_t)n, "started=%.3f\n", started);
    return grid_write_atomic(path, text, (size_t)n);
}

/* When path was last modified (epoch seconds), NaN if it cannot be read. */
static double mtime_seconds(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return NAN;
    return (double)sb.st_mtim.tv_sec + 1e-9 * (double)sb.st_mtim.tv_nsec;
}

/* Load run.h5 into the status cache: metrics, and h5_kind from its status attribute and
 * the comparison of its stored config with the point's. */
/* What run.h5 says of a point, as none: before it is read, and when it is gone. */
static void run_file_fields_clear(grid_status *st) {
    st->step = 0;
    st->train_loss = st->val_loss = st->tokens_per_s = NAN;
    for (int i = 0; i < GRID_MAX_OOD; i++) st->ood_ppl[i] = NAN;
    st->diff[0] = '\0';
    st->longer = st->stored_finished = 0;
    st->train_tokens = st->val_tokens = NAN;
}

static void load_run_file(const grid_point *p, const char *path, const char *const *ood, int nood, grid_status *st) {
    run_file_fields_clear(st);
    st->h5_kind = 4;
    h5log log;
    h5log_init(&log);
    char err[512];
    if (h5log_load(&log, path, err, sizeof err) != 0) {
        snprintf(st->diff, sizeof st->diff, "%s", err);
    } else {
        const char *status = h5log_get_attr_str(&log, "/", "status");
        const char *yaml = h5log_get_attr_str(&log, "/", "config");
        double step = series_last(&log, "/train/step");
        long long sv = step_from_double(step);
        st->step = sv < 0 || sv > INT_MAX ? 0 : (int)sv;
        st->train_loss = h5log_final_train_loss(&log, NULL);
        st->val_loss = series_last(&log, "/eval/val_loss");
        st->tokens_per_s = series_mean_positive(&log, "/train/tokens_per_s");
        for (int i = 0; i < nood && i < GRID_MAX_OOD; i++) {
            char q[300];
            snprintf(q, sizeof q, "/eval/ood/%s/ppl", ood[i]);
            st->ood_ppl[i] = series_last(&log, q);
        }
        st->stored_finished = status && !strcmp(status, "finished");
        st->h5_kind = st->stored_finished ? 1 : status && !strcmp(status, "diverged") ? 2 : 3;
        const double t = h5log_get_attr_num(&log, "/", "threads"), w = h5log_get_attr_num(&log, "/", "processes");
        st->threads_used = t >= 1 && t <= 4096 ? (int)t : 0;
        st->processes_used = w >= 1 && w <= 65536 ? (int)w : 0;
        st->train_tokens = h5log_get_attr_num(&log, "/", "train_tokens");
        st->val_tokens = h5log_get_attr_num(&log, "/", "val_tokens");
        if (!yaml) { /* a run file without its config: damaged, or not `s2hc train`'s; never counted finished */
            snprintf(st->diff, sizeof st->diff, "its run.h5 holds no config (root attribute config): damaged, or not "
                     "written by s2hc train");
            st->h5_kind = 5;
        } else {
            s2hc_config stored;
            grid_err_capture cp;
            char why[400];
            grid_capture_begin(&cp);
            int bad = config_from_yaml_text(&stored, yaml, path);
            grid_capture_end(&cp, why, sizeof why);
            if (bad) {
                snprintf(st->diff, sizeof st->diff, "its stored config cannot be read: %s", why);
                st->h5_kind = 5;
            } else if (config_first_diff(&stored, &p->cfg, st->diff, sizeof st->diff)) {
                /* a diverged run is never trained further: --extend would go on from its last
                   checkpoint under another schedule and record it finished, its divergence
                   left in run.h5's `divergences` alone; --force reruns it */
                const int diverged = st->h5_kind == 2;
                st->h5_kind = 5;
                char other[512];
                const int was = stored.steps;
                stored.steps = p->cfg.steps;
                st->longer = was < p->cfg.steps && !config_first_diff(&stored, &p->cfg, other, sizeof other);
                if (diverged && st->longer) {
                    st->longer = 0;
                    const size_t dl = strlen(st->diff);
                    snprintf(st->diff + dl, sizeof st->diff - dl, "; the run diverged at step %d, which --extend "
                             "does not train further", st->step);
                }
            }
        }
    }
    h5log_free(&log);
}

void grid_extend_hint(const grid_point *p, const grid_status *st, char *buf, size_t n) {
    if (n) buf[0] = '\0';
    if (st->state != GS_CHANGED || !st->longer) return;
    char dir[CFG_PATH + CFG_STR + 2];
    run_dir_of(&p->cfg, dir, sizeof dir);
    if (grid_extend_lacks_ckpt(st)) {
        snprintf(buf, n, "; --extend cannot train it further: the run finished and %s/ckpt.h5, which --extend goes on "
                 "from, is missing (moved or deleted?)", dir);
        return;
    }
    char cfgp[sizeof dir + 16], qcfg[4 * sizeof cfgp + 3]; /* the command to paste: its path one shell word */
    snprintf(cfgp, sizeof cfgp, "%s/config.yaml", dir);
    snprintf(buf, n, "; or, only train.steps grown, --extend trains it further (this point alone: `s2hc train "
             "%s --extend --set train.steps=%d`)", sh_word(qcfg, sizeof qcfg, cfgp), p->cfg.steps);
}

void grid_inspect_point(const grid_point *p, const char *const *ood, int nood, grid_status *st, int probe_lock) {
    char dir[CFG_PATH + CFG_STR + 2], path[sizeof dir + 16], ckpt[sizeof dir + 16];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/run.h5", dir);
    snprintf(ckpt, sizeof ckpt, "%s/ckpt.h5", dir);
    st->steps = p->cfg.steps;
    struct stat sb;
    if (stat(path, &sb) == 0) {
        long long mt = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        if (st->h5_kind == 0 || st->h5_mtime_ns != mt || st->h5_size != (long long)sb.st_size)
            load_run_file(p, path, ood, nood, st);
        st->h5_mtime_ns = mt;
        st->h5_size = (long long)sb.st_size;
    } else {
        st->h5_kind = 0;
        run_file_fields_clear(st);
        st->threads_used = st->processes_used = 0;
    }
    const int have_ckpt = st->have_ckpt = stat(ckpt, &sb) == 0;
    if (!have_ckpt) {
        st->ckpt_step = -1;
        st->ckpt_mtime_ns = st->ckpt_size = 0;
    } else {
        const long long mt = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        if (st->ckpt_mtime_ns != mt || st->ckpt_size != (long long)sb.st_size) {
            const int64_t k = ckpt_saved_step(ckpt);
            st->ckpt_step = k < 0 ? -1 : k > INT_MAX ? INT_MAX : (int)k;
            st->ckpt_mtime_ns = mt;
            st->ckpt_size = (long long)sb.st_size;
        }
    }
    switch (st->h5_kind) {
    case 1: st->state = GS_FINISHED; break;
    case 2: st->state = GS_DIVERGED; break;
    case 5: st->state = GS_CHANGED; break;
    default: st->state = have_ckpt ? GS_PARTIAL : GS_PENDING; break;
    }
    int rec_state, rec_exit;
    double started;
    grid_read_status(dir, &rec_state, &rec_exit, &st->wall_s, &started);
    if (isfinite(started)) { /* a run with no end recorded: it lasted until its last line in
                                    train.log (not run.h5's time: `s2hc eval` and `probe` rewrite it) */
        char logp[sizeof dir + 16];
        snprintf(logp, sizeof logp, "%s/train.log", dir);
        const double end = mtime_seconds(logp);
        if (end > started) st->wall_s = (isnan(st->wall_s) ? 0 : st->wall_s) + (end - started);
    }
    if ((st->state == GS_PENDING || st->state == GS_PARTIAL) && (rec_state == GS_FAILED || rec_state == GS_INTERRUPTED))
        st->state = (grid_state)rec_state;
    st->exit_code = rec_exit;
    if (st->state == GS_FINISHED && rec_state != GS_FINISHED) st->exit_code = rec_exit < 0 ? RUN_OK : rec_exit;
    if (st->state == GS_DIVERGED && rec_exit < 0) st->exit_code = RUN_DIVERGED;
    /* a run directory that is not one (a file in its place): no run can start there */
    struct stat db;
    if (st->state == GS_PENDING && stat(dir, &db) == 0 && !S_ISDIR(db.st_mode)) st->state = GS_FAILED;
    if (st->start_failed && st->state != GS_FINISHED && st->state != GS_DIVERGED) st->state = GS_FAILED;
    if (probe_lock && dir_locked(dir)) st->state = GS_RUNNING;
}

void grid_inspect(const grid_point *p, const char *const *ood, int nood, grid_status *st) {
    grid_inspect_point(p, ood, nood, st, 1);
}

/* ------------------------------------------------------------------------------------ */
/* index.csv                                                                             */
/* ------------------------------------------------------------------------------------ */

static void csv_field(FILE *f, const char *s, int first) {
    if (!first) fputc(',', f);
    csv_field_put(f, s);
}

/* A number with six significant digits; an infinity (a perplexity past exp's range) as
 * inf or -inf, which CSV readers parse; NaN (no value) as an empty field. */
static void csv_num(FILE *f, double v) {
    fputc(',', f);
    if (isfinite(v)) fprintf(f, "%.6g", v);
    else if (isinf(v)) fputs(v > 0 ? "inf" : "-inf", f);
}


int grid_write_index(const grid_spec *g, const grid_point *pts, int n, grid_status *st) {
    if (mkdir_p(g->out) != 0) {
        fprintf(stderr, "s2hc: error: cannot create %s: %s\n", g->out, strerror(errno));
        return -1;
    }
    grid_status *own = NULL;
    if (!st) st = own = calloc_check((size_t)n, sizeof *st);
    char lockp[CFG_PATH + 32], path[CFG_PATH + 32];
    snprintf(lockp, sizeof lockp, "%s/.index.lock", g->out);
    snprintf(path, sizeof path, "%s/index.csv", g->out);
    int lfd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd >= 0) lock_cmd(lfd, F_OFD_SETLKW, F_WRLCK);
    if (lfd >= 0) grid_remove_stale_tmps(g->out); /* a killed runner's index.csv.PID.tmp */
    const char *ood[GRID_MAX_OOD], *keys[GRID_MAX_SWEPT];
    int nood = grid_ood_names(pts, n, ood), nkeys = grid_swept_keys(g, keys, GRID_MAX_SWEPT);

    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) die(1, "out of memory (index.csv)");
    fputs("point,name,run_dir,state,exit_code,step,steps,final_train_loss,val_loss", f);
    for (int o = 0; o < nood; o++) fprintf(f, ",ood_%s_ppl", ood[o]);
    fputs(",tokens_per_s,wall_s", f);
    for (int k = 0; k < nkeys; k++) csv_field(f, keys[k], 0);
    fputc('\n', f);
    for (int i = 0; i < n; i++) {
        grid_status *s = &st[i];
        grid_inspect_point(&pts[i], ood, nood, s, 1);
        char dir[CFG_PATH + CFG_STR + 2], num[32];
        run_dir_of(&pts[i].cfg, dir, sizeof dir);
        fprintf(f, "%d", pts[i].index);
        csv_field(f, pts[i].name, 0);
        csv_field(f, dir, 0);
        csv_field(f, grid_state_names[s->state], 0);
        if (s->exit_code >= 0) snprintf(num, sizeof num, "%d", s->exit_code);
        else num[0] = '\0';
        csv_field(f, num, 0);
        fprintf(f, ",%d,%d", s->step, s->steps);
        csv_num(f, s->train_loss);
        csv_num(f, s->val_loss);
        for (int k = 0; k < nood; k++) csv_num(f, s->ood_ppl[k]);
        csv_num(f, s->tokens_per_s);
        csv_num(f, s->wall_s);
        for (int k = 0; k < nkeys; k++) {
            char v[GRID_VAL];
            grid_value_shown(&pts[i].cfg, pts[i].preset, keys[k], v, sizeof v);
            csv_field(f, v, 0);
        }
        fputc('\n', f);
    }
    fclose(f);
    int rc = grid_write_atomic(path, buf, len);
    free(buf);
    free(own);
    if (lfd >= 0) close(lfd); /* releases the index lock */
    return rc;
}
