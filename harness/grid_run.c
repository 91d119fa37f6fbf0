/* grid_run.c: the grid's runner: each point as a child `s2hc train <dir>/config.yaml
 * --resume` (-j N at a time) with its output in <dir>/train.log, holding an OFD lock on
 * <dir>/.lock for the child's lifetime (the child inherits it); a signal to the runner
 * passed on to the children (save and stop; again: killed); progress on the terminal;
 * grid.status and <out>/index.csv rewritten after every state change.
 */
#include "grid_internal.h"
#include "run.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRID_POLL_MS 100         /* how often the runner looks for finished children */
#define GRID_TTY_REFRESH_S 1.0   /* progress line refresh on a terminal */

static volatile sig_atomic_t g_grid_signal, g_grid_signals;
/* A SIGHUP after the first signal is not counted as "again": a terminal that closes sends
 * the runner two (the shell's and the kernel's), and the second would kill the points the
 * first asked to save (util.h, stop_signals_again_to). */
static void on_grid_signal(int s) {
    if (s == SIGHUP && g_grid_signals) return;
    g_grid_signal = s;
    g_grid_signals++;
}

static int count_state(const grid_runner *r, grid_state s) {
    int c = 0;
    for (int i = 0; i < r->n; i++) c += r->st[i].state == s && (!r->job_point || i == r->job_point - 1);
    return c;
}

double grid_point_work(const s2hc_config *c) {
    const double C = c->n_embd, T = c->block_size;
    const double tokens = (double)c->steps * c->batch * c->grad_accum * T;
    return tokens * (c->n_layer * (12 * C * C + 2 * T * C) + C * c->vocab);
}

double grid_work_left(int from, int steps) {
    return steps > 0 && from > 0 && from < steps ? 1.0 - (double)from / steps : 1.0;
}

/* The share of a point's work still to do: what the step it resumes from has not reached
 * (grid_resume_step: all of it for a changed point, which --force reruns from step 0,
 * unless --extend trains it further; a point killed between checkpoints trains the steps
 * logged past its checkpoint again). */
static double left_share(const grid_status *s, int extend) {
    return grid_work_left(grid_resume_step(s, extend), s->steps);
}

/* Seconds per unit of work for point i: its kind's, once a point of that kind finished
 * here, else that of every point finished here. */
static double point_rate(const grid_runner *r, int i) {
    const grid_kind *k = r->kind_of ? &r->kinds[r->kind_of[i]] : NULL;
    return k && k->work > 0 ? k->wall / k->work : r->wall_sum / r->work_sum;
}

void grid_kinds_setup(grid_runner *r) {
    r->kinds = calloc_check((size_t)(r->n > 0 ? r->n : 1), sizeof *r->kinds);
    r->kind_of = calloc_check((size_t)(r->n > 0 ? r->n : 1), sizeof *r->kind_of);
    r->nkinds = 0;
    for (int i = 0; i < r->n; i++) {
        const s2hc_config *c = &r->pts[i].cfg;
        int k = 0;
        while (k < r->nkinds && (r->kinds[k].n != c->n_streams || strcmp(r->kinds[k].method, c->method))) k++;
        if (k == r->nkinds) {
            copy_str(r->kinds[k].method, sizeof r->kinds[k].method, c->method);
            r->kinds[k].n = c->n_streams;
            r->nkinds++;
        }
        r->kind_of[i] = k;
    }
}

void grid_eta_add(grid_runner *r, int i, double wall) {
    const double work = grid_point_work(&r->pts[i].cfg);
    r->wall_sum += wall;
    r->work_sum += work;
    r->wall_n++;
    if (r->kind_of) {
        r->kinds[r->kind_of[i]].wall += wall;
        r->kinds[r->kind_of[i]].work += work;
    }
}

double grid_eta_seconds(const grid_runner *r, double now) {
    if (!(r->wall_n > 0 && r->work_sum > 0)) return NAN;
    /* seconds per unit of work from the finished points (each its whole run time), of the
       point's own kind once one of that kind has finished, else of all; a point left needs
       its work's share not yet done, a running point the share it started with less the
       time it has had since (a point resumed a step before its end needs a step's time,
       whether or not a runner recorded its earlier runs) */
    double work = 0;
    char *queued = calloc_check((size_t)(r->n > 0 ? r->n : 1), 1);
    for (int k = r->qi; k < r->nq; k++) {
        const int i = r->queue[k];
        queued[i] = 1;
        work += grid_point_work(&r->pts[i].cfg) * left_share(&r->st[i], r->extend) * point_rate(r, i);
    }
    for (int i = 0; i < r->n; i++) {
        if (r->st[i].state == GS_INTERRUPTED && r->slot[i].pid <= 0 && !queued[i]) /* stopped: left */
            work += grid_point_work(&r->pts[i].cfg) * left_share(&r->st[i], r->extend) * point_rate(r, i);
        if (r->slot[i].pid > 0)
            work += fmax(0, grid_point_work(&r->pts[i].cfg) * r->slot[i].share * point_rate(r, i) -
                                (now - r->slot[i].t_start));
    }
    free(queued);
    return work / (r->j > 0 ? r->j : 1);
}

void grid_status_text(const grid_runner *r, char *buf, size_t n) {
    int done = count_state(r, GS_FINISHED);
    int failed = count_state(r, GS_FAILED), diverged = count_state(r, GS_DIVERGED), refused = count_state(r, GS_CHANGED);
    /* a point a signal stopped is left too (the next runner resumes it), as the final
       summary counts it */
    int left = r->nq - r->qi + count_state(r, GS_INTERRUPTED);
    for (int k = r->qi; k < r->nq; k++) { /* a queued point counts as left, not as what an earlier run left it */
        const grid_state q = r->st[r->queue[k]].state;
        done -= q == GS_FINISHED;
        failed -= q == GS_FAILED;
        diverged -= q == GS_DIVERGED;
        refused -= q == GS_CHANGED;
        left -= q == GS_INTERRUPTED;
    }
    char eta[32] = "?", el[32];
    const double secs = grid_eta_seconds(r, now_seconds());
    if (!isnan(secs)) fmt_duration(secs, eta, sizeof eta);
    else if (left + r->running == 0) {
        copy_str(eta, sizeof eta, "0s");
    }
    fmt_duration(now_seconds() - r->t0, el, sizeof el);
    char more[64] = ""; /* as the final summary counts them: diverged and refused apart from failed */
    if (diverged || refused) snprintf(more, sizeof more, ", %d diverged, %d refused", diverged, refused);
    snprintf(buf, n, "%d/%d done, %d running, %d failed%s, %d left, %s elapsed, ETA %s", done, r->job_point ? 1 : r->n, r->running, failed,
             more, left, el, eta);
}

static void draw(grid_runner *r) {
    char s[256], line[400];
    grid_status_text(r, s, sizeof s);
    snprintf(line, sizeof line, "[grid %s] %s", r->g->stem, s);
    tty_line(stdout, line);
    r->last_draw = now_seconds();
}

/* One line per event; on a terminal the progress line is redrawn below it. */
static void event(grid_runner *r, int counts, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void event(grid_runner *r, int counts, const char *fmt, ...) {
    char msg[1400], el[32], s[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fmt_duration(now_seconds() - r->t0, el, sizeof el);
    if (r->tty) printf("\r\033[K");
    printf("[%6s] %s", el, msg);
    if (counts && !r->tty) {
        grid_status_text(r, s, sizeof s);
        printf("  (%s)", s);
    }
    printf("\n");
    if (r->tty) draw(r);
    fflush(stdout);
}

/* Point i could not be started (its directory, lock, config, log, a pipe or the fork):
 * failed, counted, and said as "FAILED  #N name: why". */
static void start_failed(grid_runner *r, int i, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void start_failed(grid_runner *r, int i, const char *fmt, ...) {
    char why[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    r->st[i].state = GS_FAILED;
    r->failed++;
    r->slot[i].start_failed = r->st[i].start_failed = 1;
    event(r, 1, "FAILED  #%d %s: %s", r->pts[i].index, r->pts[i].name, why);
}

/* Lines of train.log written since off that say what went wrong (at most 4). */
static void surface_errors(grid_runner *r, const char *log, long off) {
    FILE *f = fopen(log, "r");
    if (!f) return;
    fseek(f, 0, SEEK_END);
    long end = ftell(f);
    if (end - off > 65536) off = end - 65536;
    fseek(f, off, SEEK_SET);
    char line[1024], last[3][1024] = {"", "", ""};
    int shown = 0, nl = 0, prev = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0]) continue;
        copy_str(last[nl % 3], sizeof last[0], line);
        nl++;
        /* an error line and the indented lines that continue it (not the indented lines
           of the resolved config that train prints first) */
        int is_err = strstr(line, "error") || strstr(line, "diverged");
        prev = (is_err || (prev && line[0] == ' ')) && shown < 4;
        if (prev) {
            if (r->tty) printf("\r\033[K");
            printf("           | %s\n", line);
            shown++;
        }
    }
    for (int k = shown ? 3 : 0; k < 3; k++) {
        const char *l = last[(nl + k) % 3];
        if (!l[0]) continue;
        if (r->tty) printf("\r\033[K");
        printf("           | %s\n", l);
    }
    fclose(f);
    printf("           | (the whole log: %s)\n", log);
    if (r->tty) draw(r);
    fflush(stdout);
}

static double epoch_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Try to start point i: lock, check again, write config.yaml, fork + exec train. */
static void launch(grid_runner *r, int i) {
    const grid_point *p = &r->pts[i];
    grid_status *s = &r->st[i];
    grid_slot *sl = &r->slot[i];
    char dir[CFG_PATH + CFG_STR + 2], lockp[sizeof dir + 16], cfgp[sizeof dir + 16], logp[sizeof dir + 16];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(lockp, sizeof lockp, "%s/.lock", dir);
    snprintf(cfgp, sizeof cfgp, "%s/config.yaml", dir);
    snprintf(logp, sizeof logp, "%s/train.log", dir);
    if (mkdir_p(dir) != 0) {
        start_failed(r, i, "cannot create %s: %s", dir, strerror(errno));
        return;
    }
    char who[128];
    int fd = lock_file_try(lockp, who, sizeof who);
    if (fd == -1) {
        start_failed(r, i, "cannot open %s: %s", lockp, strerror(errno));
        return;
    }
    if (fd >= 0) { /* the run's own lock too: a training started by hand, an eval or a probe of the point
                      (its child would refuse the run as in use, and the point would read failed) */
        char tl[sizeof dir + 16];
        snprintf(tl, sizeof tl, "%s/.train.lock", dir);
        const int tfd = lock_file_try(tl, who, sizeof who);
        if (tfd >= 0) close(tfd);
        if (tfd == -2) {
            close(fd);
            fd = -2;
        }
    }
    if (fd == -2) {
        s->state = GS_RUNNING;
        r->elsewhere++;
        event(r, 0, "skip    #%d %s: running elsewhere%s%s%s", p->index, p->name, who[0] ? " (" : "", who,
              who[0] ? ")" : "");
        return;
    }
    /* under the lock: a runner that held it may have finished the point meanwhile */
    grid_inspect_point(p, r->ood, r->nood, s, 0);
    if (s->state == GS_FINISHED || s->state == GS_DIVERGED) {
        close(fd);
        event(r, 0, "skip    #%d %s: %s meanwhile", p->index, p->name, grid_state_names[s->state]);
        return;
    }
    if (s->state == GS_CHANGED && !r->force && !grid_extends(s, r->extend)) {
        close(fd);
        r->refused++;
        char hint[1200];
        grid_extend_hint(p, s, hint, sizeof hint);
        event(r, 1, "REFUSED #%d %s: %s holds a run with another config (%s); rerun it with --force (discards it)%s",
              p->index, p->name, dir, s->diff, hint);
        return;
    }
    sl->extended = grid_extends(s, r->extend);
    sl->fresh = s->state == GS_CHANGED && !sl->extended;
    int from = grid_resume_step(s, r->extend);

    lock_file_claim(fd, "runner");
    grid_remove_stale_tmps(dir); /* a killed runner's config.yaml.PID.tmp or grid.status.PID.tmp */
    char host[64], when[32]; /* for train.log's header */
    host_and_time(host, sizeof host, when, sizeof when);

    /* a point resumed from its checkpoint keeps the thread count it trained with: a
       step's bits depend on how its micro-batch is cut (W ranks of one thread cut it as W
       threads), and the grid's share changes with the points left. One process takes the
       run's cut; under launch: each process its threads, the launch giving the ranks */
    int nthreads = r->threads;
    if (p->cfg.threads > 0 && nthreads > p->cfg.threads) nthreads = p->cfg.threads; /* its own train.threads */
    char ckptp[sizeof dir + 16];
    snprintf(ckptp, sizeof ckptp, "%s/ckpt.h5", dir);
    if (!sl->fresh && s->threads_used > 0 && file_exists(ckptp)) {
        const int W0 = s->processes_used > 0 ? s->processes_used : 1;
        const int want = r->g->launch[0] ? s->threads_used
                         : W0 == 1       ? s->threads_used
                         : s->threads_used == 1 && !strcmp(p->cfg.parallel, "batch") ? W0 : 0;
        if (want > 0) nthreads = want;
    }
    s2hc_config c = p->cfg;
    c.threads = nthreads;
    char *yaml = config_to_yaml(&c);
    int wrc = grid_write_atomic(cfgp, yaml, strlen(yaml));
    free(yaml);
    int logfd = open(logp, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
    if (wrc != 0 || logfd < 0) {
        close(fd);
        if (logfd >= 0) close(logfd);
        start_failed(r, i, "cannot write %s", wrc ? cfgp : logp);
        return;
    }
    sl->log_off = lseek(logfd, 0, SEEK_END);
    const char *mode = sl->fresh ? "--force" : sl->extended ? "--extend" : "--resume";
    char qcfg[4 * sizeof cfgp + 3]; /* the command as one would type it: the path one shell word */
    dprintf(logfd, "==== s2hc grid %s: point %d (%s) on %s, %s: %s%ss2hc train %s %s ====\n", r->g->path, p->index,
            p->name, host, when, r->g->launch, r->g->launch[0] ? " " : "", sh_word(qcfg, sizeof qcfg, cfgp), mode);

    /* the start in grid.status, the record kept: a runner killed before the run ends
       leaves it there, and the run then counts until its last write (a failure to write
       it is the run's end's to report) */
    int rec_state, rec_exit;
    double rec_wall, rec_started;
    grid_read_status(dir, &rec_state, &rec_exit, &rec_wall, &rec_started);
    /* a run started over (--force) counts its own time alone: the run it discards is gone */
    sl->wall_before = sl->fresh || isnan(s->wall_s) ? 0 : s->wall_s;
    grid_write_status(dir, rec_state, rec_exit, sl->fresh ? NAN : s->wall_s, epoch_seconds());

    char threads[16];
    snprintf(threads, sizeof threads, "%d", nthreads);
    /* tests only: the child waits this long between fork and exec, still with the
       runner's signal handlers (tests/cli/grid_cli.sh widens that window to show that
       nothing happens in it, and that a runner killed meanwhile leaves no training); the
       wait ends early once the runner is gone, so a test can hold the window open for as
       long as its kill may take on a loaded machine */
    const char *delay = getenv("S2HC_TEST_EXEC_DELAY_MS");
    long delay_ms = delay ? strtol(delay, NULL, 10) : 0;
    /* Between fork and exec the child holds a copy of every descriptor of the runner,
       the lock of each running sibling point included (they are O_CLOEXEC: exec closes
       them). An OFD lock lasts until its last descriptor closes, so a sibling that ends
       in that window stayed locked after reap closed the runner's copy: index.csv and the
       progress counts read it as running, another runner skipped it as running elsewhere.
       So the runner waits for the exec: `ready` is a close-on-exec pipe whose write end
       only the child keeps; read returns 0 once the child has exec'd (or exited), and
       until then the runner closes no lock. */
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        close(fd);
        close(logfd);
        start_failed(r, i, "pipe: %s", strerror(errno));
        return;
    }
    pid_t parent = getpid();
    fflush(stdout);
    fflush(stderr);
    /* SIGINT and SIGTERM stay blocked across fork until the child has its own
       dispositions: a SIGTERM from the runner's death that reached the child while it
       still had the runner's handler would only set the runner's flag, in the child's
       copy, and the training would then run to its end with the point locked. Blocked,
       it waits, and the default disposition ends the child before exec. */
    sigset_t stop_sigs, old_mask;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop_sigs, &old_mask);
    pid_t pid = fork();
    if (pid == 0) {
        /* the child: its own process group (the runner forwards signals), stopped with
           SIGTERM (save and exit) if the runner dies, the lock kept across exec */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(RUN_INTERRUPTED); /* it died before prctl */
        if (delay_ms > 0) { /* the test hook's wait: the runner's handlers, signals held */
            const double until = now_seconds() + (double)delay_ms / 1000;
            while (now_seconds() < until && getppid() == parent) {
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
        }
        /* SIGTERM is the runner's own way to ask the point to save: always the default;
           SIGINT and SIGHUP stay ignored if the runner started with them so (nohup, a
           background job: stop_signal_ignored), for the training to keep them so too */
        if (!stop_signal_ignored(SIGINT)) signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        if (!stop_signal_ignored(SIGHUP)) signal(SIGHUP, SIG_DFL);
        sigprocmask(SIG_SETMASK, &old_mask, NULL); /* a SIGTERM from its death since: the end */
        fcntl(fd, F_SETFD, 0);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0) dup2(devnull, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        setenv("OMP_NUM_THREADS", threads, 1);
        setenv("OPENBLAS_NUM_THREADS", threads, 1);
        runtime_unbind(); /* every CPU of the runner's, not its first place's */
        /* under the grid's launch: command (its words, then this s2hc), or s2hc alone */
        char words[sizeof r->g->launch], *argv[64];
        int na = 0;
        snprintf(words, sizeof words, "%s", r->g->launch);
        for (char *save = NULL, *w = strtok_r(words, " \t", &save); w && na < 59; w = strtok_r(NULL, " \t", &save))
            argv[na++] = w;
        argv[na] = na ? r->exe : (char *)"s2hc";
        na++;
        argv[na++] = (char *)"train";
        argv[na++] = cfgp;
        argv[na++] = (char *)mode;
        argv[na] = NULL;
        if (r->g->launch[0]) execvp(argv[0], argv);
        else execv(r->exe, argv);
        dprintf(2, "s2hc: error: grid: cannot run %s: %s\n", r->g->launch[0] ? argv[0] : r->exe, strerror(errno));
        _exit(127);
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);
    close(ready[1]);
    if (pid > 0) {
        char c;
        while (read(ready[0], &c, 1) < 0 && errno == EINTR) {}
    }
    close(ready[0]);
    close(logfd);
    if (pid < 0) {
        close(fd);
        start_failed(r, i, "fork: %s", strerror(errno));
        return;
    }
    sl->pid = pid;
    sl->lock_fd = fd;
    sl->t_start = now_seconds();
    sl->share = sl->fresh ? 1.0 : grid_work_left(from, p->cfg.steps);
    s->state = GS_RUNNING;
    r->running++;
    r->started++;
    if (sl->fresh)
        event(r, 0, "start   #%d %s (from step 0: --force, the config changed: %s)", p->index, p->name, s->diff);
    else if (sl->extended)
        event(r, 0, "extend  #%d %s from step %d to %d (--extend)", p->index, p->name, from, p->cfg.steps);
    else if (from > 0 && nthreads != r->threads)
        event(r, 0, "resume  #%d %s at step %d/%d (%d thread%s, as it trained)", p->index, p->name, from, p->cfg.steps,
              nthreads, nthreads == 1 ? "" : "s");
    else if (from > 0) event(r, 0, "resume  #%d %s at step %d/%d", p->index, p->name, from, p->cfg.steps);
    else event(r, 0, "start   #%d %s", p->index, p->name);
}

/* A child exited: record its state in grid.status and index.csv. */
static void reap(grid_runner *r, pid_t pid, int wstatus) {
    int i = 0;
    while (i < r->n && r->slot[i].pid != pid) i++;
    if (i == r->n) return;
    const grid_point *p = &r->pts[i];
    grid_status *s = &r->st[i];
    grid_slot *sl = &r->slot[i];
    double wall = now_seconds() - sl->t_start;
    int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    char dir[CFG_PATH + CFG_STR + 2], logp[sizeof dir + 16];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(logp, sizeof logp, "%s/train.log", dir);
    grid_inspect_point(p, r->ood, r->nood, s, 0);
    grid_state state;
    if (code == RUN_OK) state = s->state == GS_FINISHED ? GS_FINISHED : GS_FAILED;
    else if (code == RUN_DIVERGED) state = GS_DIVERGED;
    else if (code == RUN_INTERRUPTED || code == 128 + SIGINT || code == 128 + SIGTERM || r->stopping)
        state = GS_INTERRUPTED;
    else if (code == RUN_USAGE && s->state == GS_CHANGED) state = GS_CHANGED;
    else state = GS_FAILED;
    double total = sl->wall_before + wall;
    if (grid_write_status(dir, state, code, total, NAN) != 0) r->index_failed = 1;
    s->state = state;
    s->exit_code = code;
    s->wall_s = total;
    close(sl->lock_fd);
    sl->lock_fd = -1;
    sl->pid = 0;
    r->running--;
    char w[32];
    fmt_duration(wall, w, sizeof w);
    switch (state) {
    case GS_FINISHED:
        /* the point's whole run time: a resumed point's last few steps are not a run's
           time (the ETA after resuming a grid stopped near its points' ends read seconds) */
        grid_eta_add(r, i, total);
        event(r, 1, "done    #%d %s in %s: train loss %.4f, val loss %.4f, %.0f tok/s", p->index, p->name, w,
              s->train_loss, s->val_loss, s->tokens_per_s);
        break;
    case GS_INTERRUPTED:
        event(r, 1, "stopped #%d %s at step %d/%d after %s (resumable)", p->index, p->name, s->step, s->steps, w);
        break;
    case GS_DIVERGED:
        r->failed++;
        event(r, 1, "DIVERGED #%d %s at step %d after %s", p->index, p->name, s->step, w);
        surface_errors(r, logp, sl->log_off);
        break;
    default:
        r->failed++;
        event(r, 1, "FAILED  #%d %s (exit %d) after %s%s", p->index, p->name, code, w,
              code == 0 ? ": exited 0 but run.h5 does not say finished" : "");
        surface_errors(r, logp, sl->log_off);
        break;
    }
    if (grid_write_index(r->g, r->pts, r->n, r->st) != 0) r->index_failed = 1;
}

int grid_run_points(grid_runner *r) {
    struct sigaction sa, old_int, old_term, old_hup;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_grid_signal;
    sigemptyset(&sa.sa_mask);
    g_grid_signal = g_grid_signals = 0;
    /* SIGHUP (the terminal closed) as SIGTERM; each of the three left ignored if the
       runner started with it so (nohup, a background job: stop_signal_ignored) */
    sigaction(SIGINT, stop_signal_ignored(SIGINT) ? NULL : &sa, &old_int);
    sigaction(SIGTERM, stop_signal_ignored(SIGTERM) ? NULL : &sa, &old_term);
    sigaction(SIGHUP, stop_signal_ignored(SIGHUP) ? NULL : &sa, &old_hup);
    grid_kinds_setup(r);
    int stopping = 0, killed = 0;
    for (;;) {
        if (g_grid_signal && !stopping) {
            stopping = r->stopping = 1;
            event(r, 0, "signal %d: asking %d run%s to save and stop (again to kill)", (int)g_grid_signal, r->running,
                  r->running == 1 ? "" : "s");
            for (int i = 0; i < r->n; i++)
                if (r->slot[i].pid > 0) kill(r->slot[i].pid, SIGTERM);
        }
        if (g_grid_signals >= 2 && !killed) {
            killed = 1;
            for (int i = 0; i < r->n; i++)
                if (r->slot[i].pid > 0) kill(r->slot[i].pid, SIGKILL);
        }
        while (!stopping && r->running < r->j && r->qi < r->nq) launch(r, r->queue[r->qi++]);
        if (r->running == 0 && (stopping || r->qi >= r->nq)) break;
        int wstatus;
        pid_t pid = waitpid(-1, &wstatus, WNOHANG);
        if (pid > 0) {
            reap(r, pid, wstatus);
            continue;
        }
        if (pid < 0 && errno == ECHILD) break; /* cannot happen while running > 0 */
        struct timespec ts = {0, GRID_POLL_MS * 1000000L};
        nanosleep(&ts, NULL);
        if (r->tty && now_seconds() - r->last_draw >= GRID_TTY_REFRESH_S) draw(r);
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGHUP, &old_hup, NULL);
    free(r->kinds);
    free(r->kind_of);
    r->kinds = NULL;
    r->kind_of = NULL;
    return stopping;
}
