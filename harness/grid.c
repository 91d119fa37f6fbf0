/* grid.c: `s2hc grid`: experiment grids from YAML (see grid.h and docs/grids.md); here
 * the command, --list and --dry-run.
 *
 * The flow: grid_load (grid_load.c) parses the grid file and checks every key and value
 * against the config schema; grid_expand (grid_expand.c) builds the points (product,
 * include, exclude, overrides, names) and validates each resolved config; then one of
 * --list, --dry-run, --slurm (grid_slurm.c) or the runner (grid_run.c). The runner starts
 * each point as a child `s2hc train <dir>/config.yaml --resume` with its output in
 * <dir>/train.log, holding an OFD lock on <dir>/.lock for the child's lifetime (the child
 * inherits it), and rewrites <out>/index.csv (grid_state.c) after every state change.
 * grid_internal.h lists the module's files and what they share.
 */
#include "checkpoint.h"
#include "grid_internal.h"
#include "run.h"
#include <limits.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------ */
/* --list and --dry-run                                                                  */
/* ------------------------------------------------------------------------------------ */

static int cores_available(void) {
    const char *s = getenv("SLURM_CPUS_PER_TASK");
    if (s && atoi(s) > 0) return atoi(s);
    return runtime_cpu_count();
}

static void print_counts(FILE *f, const grid_status *st, int n) {
    int c[GS_N] = {0};
    for (int i = 0; i < n; i++) c[st[i].state]++;
    fprintf(f, "%d point%s:", n, n == 1 ? "" : "s");
    const char *sep = " ";
    for (int s = 0; s < GS_N; s++)
        if (c[s]) {
            fprintf(f, "%s%d %s", sep, c[s], grid_state_names[s]);
            sep = ", ";
        }
    fputc('\n', f);
}

static int list_points(const grid_spec *g, const grid_point *pts, int n) {
    const char *ood[GRID_MAX_OOD], *keys[GRID_MAX_SWEPT];
    int nood = grid_ood_names(pts, n, ood), nkeys = grid_swept_keys(g, keys, GRID_MAX_SWEPT);
    grid_status *st = calloc_check((size_t)n, sizeof *st);
    int wn = 4, wk[GRID_MAX_SWEPT];
    for (int i = 0; i < n; i++) {
        grid_inspect(&pts[i], ood, nood, &st[i]);
        if ((int)strlen(pts[i].name) > wn) wn = (int)strlen(pts[i].name);
    }
    for (int k = 0; k < nkeys; k++) {
        wk[k] = (int)strlen(keys[k]);
        for (int i = 0; i < n; i++) {
            char v[GRID_VAL];
            grid_value_shown(&pts[i].cfg, pts[i].preset, keys[k], v, sizeof v);
            if ((int)strlen(v) > wk[k]) wk[k] = (int)strlen(v);
        }
    }
    printf("%5s  %-*s  %-11s  %13s", "index", wn, "name", "state", "step");
    for (int k = 0; k < nkeys; k++) printf("  %-*s", k + 1 < nkeys ? wk[k] : 0, keys[k]);
    printf("\n");
    for (int i = 0; i < n; i++) {
        char step[32];
        snprintf(step, sizeof step, "%d/%d", st[i].step, st[i].steps);
        printf("%5d  %-*s  %-11s  %13s", pts[i].index, wn, pts[i].name, grid_state_names[st[i].state], step);
        for (int k = 0; k < nkeys; k++) {
            char v[GRID_VAL];
            grid_value_shown(&pts[i].cfg, pts[i].preset, keys[k], v, sizeof v);
            printf("  %-*s", k + 1 < nkeys ? wk[k] : 0, v);
        }
        printf("\n");
    }
    print_counts(stdout, st, n);
    free(st);
    return 0;
}

static void run_dir_path(const grid_point *p, const char *leaf, char *out, size_t n) {
    char dir[CFG_PATH + CFG_STR + 2];
    run_dir_of(&p->cfg, dir, sizeof dir);
    snprintf(out, n, "%s%s%s", dir, leaf[0] ? "/" : "", leaf);
}

int grid_extend_lacks_ckpt(const grid_status *s) { return s->longer && s->stored_finished && !s->have_ckpt; }

int grid_extends(const grid_status *s, int extend) {
    return extend && s->state == GS_CHANGED && s->longer && !grid_extend_lacks_ckpt(s);
}

/* The step a point's training would start from: its checkpoint's (not run.h5's last row,
 * which runs ahead of it when the training failed or was killed between saves); 0 without
 * one or for a point rerun from the start; run.h5's step if the checkpoint cannot be read
 * (the training then says why). */
int grid_resume_step(const grid_status *s, int extend) {
    if (s->state == GS_CHANGED && !grid_extends(s, extend)) return 0;
    return !s->have_ckpt ? 0 : s->ckpt_step >= 0 ? s->ckpt_step : s->step;
}

/* Runs at a time: no more than the nrun points there are to run; their threads share
 * the cores, at most cap each (train.threads in the grid, 0: no cap). */
static void fit_jobs(int nrun, int cores, int cap, int *j, int *threads) {
    if (nrun <= 0 || nrun >= *j) return;
    *j = nrun;
    *threads = cores / *j > 0 ? cores / *j : 1;
    if (cap > 0 && *threads > cap) *threads = cap;
}

/* The largest train.threads of the points (0: none sets it): room for the point that
 * asks most; each point then runs with at most its own (launch). */
static int threads_cap(const grid_point *pts, int n) {
    int cap = 0;
    for (int i = 0; i < n; i++)
        if (pts[i].cfg.threads > cap) cap = pts[i].cfg.threads;
    return cap;
}

/* Whether `s2hc train --resume` would refuse the point at once, as it stands on disk: a
 * run.h5 it cannot load (a newer build's, or damaged: exit 1), a checkpoint of a newer
 * build (exit 1), or, with a checkpoint, a run.h5 whose corpus sizes are not the
 * corpus's now (rebuilt since: exit 2). 1 with the reason in why, else 0. */
static int resume_refused(const grid_point *p, const grid_status *s, char *why, size_t n) {
    if (s->h5_kind == 4) {
        snprintf(why, n, "%s", s->diff);
        return 1;
    }
    char ckpt[CFG_PATH + CFG_STR + 16];
    run_dir_path(p, "ckpt.h5", ckpt, sizeof ckpt);
    if (file_exists(ckpt) && ckpt_other_version(ckpt, why, n)) return 1;
    if (s->state == GS_CHANGED || isnan(s->train_tokens) || isnan(s->val_tokens) || !file_exists(ckpt)) return 0;
    char tp[1200], vp[1200], err[1024];
    data_shard t, v;
    data_shard_path(tp, sizeof tp, p->cfg.data_dir, p->cfg.train_corpus, "train");
    data_shard_path(vp, sizeof vp, p->cfg.data_dir, p->cfg.train_corpus, "val");
    if (shard_open(&t, tp, err, sizeof err) != 0) return 0; /* the training says why */
    if (shard_open(&v, vp, err, sizeof err) != 0) {
        shard_close(&t);
        return 0;
    }
    const int rebuilt = (double)t.count != s->train_tokens || (double)v.count != s->val_tokens;
    if (rebuilt)
        snprintf(why, n, "its run trained on a corpus '%s' of %.0f training and %.0f validation tokens; %s and val.bin "
                 "hold %llu and %llu now (rebuilt since)", p->cfg.train_corpus, s->train_tokens, s->val_tokens, tp,
                 (unsigned long long)t.count, (unsigned long long)v.count);
    shard_close(&t);
    shard_close(&v);
    return rebuilt;
}

static int dry_run(const grid_spec *g, const grid_point *pts, int n, int force, int extend, int j, int threads) {
    const char *ood[GRID_MAX_OOD];
    int nood = grid_ood_names(pts, n, ood), would = 0, skip = 0, refuse = 0, fails = 0;
    int cores = cores_available();
    printf("grid %s: %d point%s in %s (%d cores)\n", g->path, n, n == 1 ? "" : "s", g->out, cores);
    for (int i = 0; i < n; i++) {
        grid_status st;
        memset(&st, 0, sizeof st);
        grid_inspect(&pts[i], ood, nood, &st);
        char action[1800], cfgp[CFG_PATH + 96], vals[1024];
        int runs = 0;
        switch (st.state) {
        case GS_FINISHED: snprintf(action, sizeof action, "skip: finished"); skip++; break;
        case GS_DIVERGED:
            snprintf(action, sizeof action, "skip: diverged at step %d (remove its directory to retry)", st.step);
            skip++;
            break;
        case GS_RUNNING: snprintf(action, sizeof action, "skip: running elsewhere (locked)"); skip++; break;
        case GS_CHANGED:
            if (grid_extends(&st, extend)) {
                snprintf(action, sizeof action, "extend from step %d to %d (--extend; %s)",
                         grid_resume_step(&st, extend), st.steps, st.diff);
                runs = 3;
            } else if (force) {
                snprintf(action, sizeof action, "run from step 0 (--force; the config changed: %s)", st.diff);
                runs = 2;
            } else {
                char hint[1200];
                grid_extend_hint(&pts[i], &st, hint, sizeof hint);
                snprintf(action, sizeof action, "refuse: the config changed (%s); --force reruns it%s", st.diff, hint);
                refuse++;
            }
            break;
        case GS_PARTIAL:
        case GS_INTERRUPTED:
        case GS_FAILED: {
            char why[1700];
            if (resume_refused(&pts[i], &st, why, sizeof why)) {
                snprintf(action, sizeof action, "fail: `s2hc train --resume` refuses it: %s", why);
                fails++;
                break;
            }
            int from = grid_resume_step(&st, extend);
            if (from > 0) snprintf(action, sizeof action, "resume at step %d of %d (%s)", from, st.steps,
                                   grid_state_names[st.state]);
            else snprintf(action, sizeof action, "run %d steps (%s before)", st.steps, grid_state_names[st.state]);
            runs = 1;
            break;
        }
        default: {
            char why[1700];
            if (resume_refused(&pts[i], &st, why, sizeof why)) {
                snprintf(action, sizeof action, "fail: `s2hc train --resume` refuses it: %s", why);
                fails++;
                break;
            }
            snprintf(action, sizeof action, "run %d steps", st.steps);
            runs = 1;
            break;
        }
        }
        would += runs > 0;
        printf("%5d  %s: %s\n", pts[i].index, pts[i].name, action);
        if (runs) {
            run_dir_path(&pts[i], "config.yaml", cfgp, sizeof cfgp);
            grid_point_values_text(&pts[i], vals, sizeof vals);
            int own = strstr(vals, "preset=") != NULL;
            /* --extend with the new length: the point's config.yaml holds the stored run's
               until the runner writes it (a dry run writes nothing), and that command by
               hand would find the run finished */
            char mode[64];
            if (runs == 3) snprintf(mode, sizeof mode, "--extend --set train.steps=%d", pts[i].cfg.steps);
            else snprintf(mode, sizeof mode, "%s", runs == 2 ? "--force" : "--resume");
            char qcfg[4 * sizeof cfgp + 3]; /* the path as one shell word: the command pasted runs it */
            printf("       %s%ss2hc train %s %s   # %s%s%s\n", g->launch, g->launch[0] ? " " : "", sh_word(qcfg, sizeof qcfg, cfgp),
                   mode, vals[0] ? vals : "the base config",
                   pts[i].preset[0] && !own ? "; preset " : "", own ? "" : pts[i].preset);
            if (runs == 2) { /* config.yaml holds the discarded run's until the runner writes the point's */
                printf("       (after writing the point's config.yaml over the stored run's; this point alone: ");
                grid_command(stdout, g, "s2hc", g->path, g->out);
                printf(" --job %d --force)\n", i);
            }
        }
    }
    fit_jobs(would, cores, threads_cap(pts, n), &j, &threads); /* as the run would */
    printf("dry run: would run %d (%d at a time, %d thread%s each), skip %d, refuse %d, fail %d; nothing was "
           "written\n", would, would ? j : 0, threads, threads == 1 ? "" : "s", skip, refuse, fails);
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* The command                                                                          */
/* ------------------------------------------------------------------------------------ */

static void usage(FILE *f) {
    fprintf(f,
            "usage: s2hc grid GRID.yaml [-j N] [--list] [--dry-run] [--job I] [--force] [--extend]\n"
            "                           [--slurm [--submit]] [--out DIR] [--set KEY=VALUE]...\n"
            "\n"
            "Expand the grid's sweep into points and train every point that has not finished,\n"
            "each in its own process with its log in <out>/<name>/train.log; <out>/index.csv\n"
            "lists every point with its state and results. Resume is the default: finished\n"
            "points are skipped, interrupted ones continue from their checkpoint.\n"
            "  -j N             points at a time (default: cores / train.threads, 1 thread each\n"
            "                   when train.threads is 0); each run gets cores / N threads\n"
            "  --list           the points with index, name, state and swept values\n"
            "  --dry-run        what would run, skip or be refused; writes nothing\n"
            "  --job I          run point I alone (a Slurm array task)\n"
            "  --force          rerun points whose stored run has another config (discards it)\n"
            "  --extend         train further the points whose stored run differs by a smaller\n"
            "                   train.steps alone (`s2hc train --extend`: its optimizer, data order\n"
            "                   and steps go on; the learning rate follows the new length's schedule)\n"
            "  --slurm          write <out>/slurm/{array,report}.sbatch and submit.sh\n"
            "  --submit         with --slurm: submit them (sbatch)\n"
            "  --out DIR        the runs directory (default: the grid's out:, else runs/<grid name>)\n"
            "  --set KEY=VALUE  pin a swept key to one value, or set a key for every point\n"
            "                   (KEY may be `preset`; repeatable)\n"
            "Exit code: 0 when every point finished; 1 when any is failed, diverged or refused\n"
            "(the summary line and index.csv say which); 2 for a bad grid; 130 when interrupted.\n"
            "\n"
            "examples:\n"
            "  s2hc grid experiments/paper.yaml --set preset=small --dry-run\n"
            "  s2hc grid experiments/streams.yaml -j 2\n"
            "  s2hc grid experiments/paper.yaml --set preset=M --slurm --submit\n");
}

int grid_main(int argc, char **argv) {
    const char *path = NULL, *out = NULL;
    const char **pins = calloc_check((size_t)argc + 1, sizeof *pins);
    int npins = 0, j = 0, list = 0, dry = 0, job = -1, force = 0, extend = 0, slurm = 0, submit = 0;
    opt_seen seen = {.cmd = "grid"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        const int kind = opt_kind(a, &ended);
        if (kind < 0) continue;
        if (kind > 0) {
            if (path) {
                fprintf(stderr, "s2hc: error: grid: one grid file only ('%s')\n", a);
                free(pins);
                return 2;
            }
            path = a;
        } else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); free(pins); return 0; }
        else if (!strcmp(a, "--list")) list = 1;
        else if (!strcmp(a, "--dry-run")) dry = 1;
        else if (!strcmp(a, "--force")) force = 1;
        else if (!strcmp(a, "--extend")) extend = 1;
        else if (!strcmp(a, "--slurm")) slurm = 1;
        else if (!strcmp(a, "--submit")) submit = 1;
        else if ((val = opt_arg(argc, argv, &i, "--jobs", 1)) || (val = opt_arg(argc, argv, &i, "-j", 1)) ||
                 (!strncmp(a, "-j", 2) && a[2] && (val = a + 2))) { /* -j N, -jN, --jobs N, --jobs=N */
            opt_seen_take(&seen, "-j/--jobs", val);
            char *end;
            long v = strtol(val, &end, 10);
            if (end == val || *end || v < 1 || v > INT_MAX) goto bad;
            j = (int)v;
        }
        else if ((val = opt_once(&seen, argc, argv, &i, "--job", 1))) {
            char *end;
            long v = strtol(val, &end, 10);
            if (!val[0] || *end || v < 0 || v > INT_MAX) goto bad;
            job = (int)v;
        } else if ((val = opt_once(&seen, argc, argv, &i, "--out", 1))) out = val;
        else if ((val = opt_arg(argc, argv, &i, "--set", 1))) pins[npins++] = val;
        else {
            fprintf(stderr, "s2hc: error: grid: unknown option or missing value: '%s'\n\n", a);
            usage(stderr);
            free(pins);
            return 2;
        }
        continue;
    bad:
        fprintf(stderr, "s2hc: error: grid: '%s' needs a number (got '%s')\n", a, val ? val : "");
        free(pins);
        return 2;
    }
    if (!path) { usage(stderr); free(pins); return 2; }
    if (submit && !slurm) {
        fprintf(stderr, "s2hc: error: grid: --submit goes with --slurm\n");
        free(pins);
        return 2;
    }
    if (list + dry + slurm > 1 || (job >= 0 && (list || dry || slurm))) { /* each would silently win over the other */
        char both[64];
        snprintf(both, sizeof both, "%s%s%s%s", list ? " --list" : "", dry ? " --dry-run" : "", slurm ? " --slurm" : "",
                 job >= 0 ? " --job" : "");
        fprintf(stderr, "s2hc: error: grid:%s: one at a time\n", both);
        free(pins);
        return 2;
    }
    grid_spec g;
    int rc = grid_load(&g, path, out, pins, npins);
    free(pins);
    grid_point *pts = NULL;
    int n = 0;
    if (rc == 0) rc = grid_expand(&g, &pts, &n);
    if (rc) { grid_free(&g); return 2; }
    if (job >= n) {
        fprintf(stderr, "s2hc: error: grid: --job %d: %s has %d point%s (0..%d)\n", job, path, n, n == 1 ? "" : "s",
                n - 1);
        grid_points_free(pts, n);
        grid_free(&g);
        return 2;
    }

    /* threads per run and runs at a time: N x threads <= cores */
    /* train.threads > 0 in the grid caps each run's threads */
    int cores = cores_available(), cap = threads_cap(pts, n), threads;
    if (job >= 0) { j = 1; threads = cores; }
    else if (j > 0) threads = cores / j > 0 ? cores / j : 1;
    else {
        threads = cap > 0 ? cap : 1;
        j = cores / threads > 0 ? cores / threads : 1;
    }
    if (cap > 0 && threads > cap) threads = cap;

    if (list || dry || slurm) {
        if (list) rc = list_points(&g, pts, n);
        else if (dry) rc = dry_run(&g, pts, n, force, extend, j, threads);
        else rc = grid_write_slurm(&g, n, submit, force, extend);
        grid_points_free(pts, n);
        grid_free(&g);
        return rc;
    }

    grid_runner r;
    memset(&r, 0, sizeof r);
    r.g = &g;
    r.pts = pts;
    r.n = n;
    r.st = calloc_check((size_t)n, sizeof *r.st);
    r.slot = calloc_check((size_t)n, sizeof *r.slot);
    r.queue = calloc_check((size_t)n, sizeof *r.queue);
    r.nood = grid_ood_names(pts, n, r.ood);
    r.force = force;
    r.extend = extend;
    r.job_point = job >= 0 ? job + 1 : 0; /* the other points are not this runner's: not refused, not left */
    r.tty = terminal_live(STDOUT_FILENO);
    r.t0 = now_seconds();
    ssize_t el = readlink("/proc/self/exe", r.exe, sizeof r.exe - 1);
    if (el <= 0) copy_str(r.exe, sizeof r.exe, "/proc/self/exe");
    else r.exe[el] = '\0';
    if (grid_write_index(&g, pts, n, r.st) != 0) {
        grid_points_free(pts, n);
        grid_free(&g);
        free(r.st);
        free(r.slot);
        free(r.queue);
        return 1;
    }
    int finished = 0, diverged = 0, busy = 0, refused = 0;
    for (int i = 0; i < n; i++) {
        if (job >= 0 && i != job) continue;
        switch (r.st[i].state) {
        case GS_FINISHED: finished++; break;
        case GS_DIVERGED: diverged++; break;
        case GS_RUNNING: busy++; break;
        case GS_CHANGED:
            if (force || grid_extends(&r.st[i], extend)) r.queue[r.nq++] = i;
            else refused++;
            break;
        default: r.queue[r.nq++] = i;
        }
    }
    /* the cores are shared by the points that will train: one that `s2hc train --resume`
       refuses at once is queued for its message, but takes no share (as --dry-run counts) */
    int nrun = 0;
    for (int k = 0; k < r.nq; k++) {
        char why[1700];
        const int i = r.queue[k];
        nrun += r.st[i].state == GS_CHANGED || !resume_refused(&pts[i], &r.st[i], why, sizeof why);
    }
    if (job < 0) fit_jobs(nrun, cores, cap, &j, &threads);
    r.j = j;
    r.threads = threads;
    int total = job >= 0 ? 1 : n;
    printf("grid %s: %d point%s in %s: %d to run, %d finished, %d diverged, %d running elsewhere, %d refused;\n"
           "  %d at a time, %d thread%s each (%d core%s)\n",
           path, total, total == 1 ? "" : "s", g.out, r.nq, finished, diverged, busy, refused, j, threads,
           threads == 1 ? "" : "s", cores, cores == 1 ? "" : "s");
    /* a runner started with SIGINT ignored keeps it so (grid_run_points), its points too: say
       how it stops instead, since a Ctrl-C or `kill -INT` would go unanswered */
    if (r.nq > 0 && stop_signal_ignored(SIGINT))
        printf("  SIGINT (Ctrl-C) is ignored: the runner started with it ignored (a script's background job), as "
               "its points do; stop it with SIGTERM (kill %ld)\n", (long)getpid());
    for (int i = 0; i < n; i++) {
        if ((job >= 0 && i != job) || r.st[i].state != GS_CHANGED || force || grid_extends(&r.st[i], extend)) continue;
        char dir[CFG_PATH + CFG_STR + 2];
        run_dir_of(&pts[i].cfg, dir, sizeof dir);
        char hint[1200];
        grid_extend_hint(&pts[i], &r.st[i], hint, sizeof hint);
        printf("  REFUSED #%d %s: %s holds a run with another config (%s); rerun it with --force (discards it)%s\n",
               pts[i].index, pts[i].name, dir, r.st[i].diff, hint);
    }
    fflush(stdout);
    int stopped = grid_run_points(&r);
    if (r.tty) printf("\r\033[K");
    if (grid_write_index(&g, pts, n, r.st) != 0) r.index_failed = 1;

    /* the outcome, from disk: every point, or the one --job point */
    int c[GS_N] = {0};
    for (int i = 0; i < n; i++)
        if (job < 0 || i == job) {
            grid_state st = r.st[i].state;
            if (r.slot[i].start_failed && st != GS_FINISHED && st != GS_DIVERGED) st = GS_FAILED;
            c[st]++;
        }
    int bad = c[GS_FAILED] + c[GS_DIVERGED] + c[GS_CHANGED];
    char el2[32];
    fmt_duration(now_seconds() - r.t0, el2, sizeof el2);
    printf("grid %s: %d/%d finished, %d failed, %d diverged, %d refused, %d left, %d running elsewhere; %s; "
           "index: %s/index.csv\n",
           g.stem, c[GS_FINISHED], total, c[GS_FAILED], c[GS_DIVERGED], c[GS_CHANGED],
           c[GS_INTERRUPTED] + c[GS_PARTIAL] + c[GS_PENDING], c[GS_RUNNING], el2, g.out);
    grid_points_free(pts, n);
    grid_free(&g);
    free(r.st);
    free(r.slot);
    free(r.queue);
    if (r.index_failed) /* each failure said above; the points' own files are whole */
        fprintf(stderr, "s2hc: error: the grid's index.csv or a point's grid.status could not be written (above)\n");
    if (stopped) return RUN_INTERRUPTED;
    return bad > 0 || r.index_failed ? RUN_FAILED : RUN_OK; /* not the count: 2 would read as a bad grid */
}
