/* analyze.c: `s2hc analyze RUNS_OR_GRID_DIRS... -o OUT`. Loads every run, picks the cell
 * the figures show (the largest scale, docs when trained on it), writes OUT/data (figure
 * data, meta.gp, captions.tsv, summary.txt) and OUT/tables (tables and claims). */
#include "analysis.h"
#include "../harness/util.h"
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void analyze_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc analyze RUNS_OR_GRID_DIRS... -o OUT [-q]\n\n"
            "Read every run under the given paths (a run directory, a run.h5, or a directory of\n"
            "runs such as a grid's out dir) and write what the figures and tables show:\n"
            "  OUT/data/*.dat      plain columns for gnuplot (plots/*.gp read only these)\n"
            "  OUT/data/*.csv      the same with a header naming each column, for people\n"
            "  OUT/data/meta.gp, captions.tsv, summary.txt   what has data, each figure's\n"
            "                      measured numbers in words, the runs and seeds counted (for the report)\n"
            "  OUT/tables/*.{md,tex,html,csv}   Table 1, Table 2, ablation, recipes (a row per\n"
            "                      learning rate or schedule of a sweep), residual (the H_res of\n"
            "                      each method and n across depth, over seeds; per sublayer in\n"
            "                      data/hres_layers*.csv), pairs (every two methods paired by\n"
            "                      seed, and the seeds for 80 %% power), gradnorm (every run's\n"
            "                      gradient norm by method and recipe), throughput, runs,\n"
            "                      scales, and the\n"
            "                      claims with verdicts\n"
            "Runs with probe.every = 0 and train.eval_every = 0 (streams.yaml) count for\n"
            "throughput only. Repeated runs (the same config under another name) count once.\n"
            "  -o OUT   output directory (default out/analysis)\n"
            "  -q       quiet: no progress lines\n\n"
            "example:\n"
            "  s2hc analyze runs/paper runs/ablations runs/streams -o out/paper\n");
}

/* One line per figure: what we measured, in numbers (the report puts it in the caption). */
static void write_captions(an_ctx *c) {
    FILE *f = an_open(c->out, "data", "captions.tsv");
    if (!f) return;
    const an_runset *rs = c->rs;
    int ri;
    /* fig02: final row-max median and diag frac */
    fprintf(f, "fig02_rowmax\t");
    static const char *const hv[] = {"mhc", "mhc_lite", "kromhc", "s2hc", NULL};
    for (int i = 0; hv[i]; i++)
        if ((ri = an_rep_run(c, hv[i])) >= 0 && an_series(&rs->r[ri], "/probe/diag_frac"))
            fprintf(f, "%s: median row max %.3f, diagonal-dominant %.1f %% at step %.0f. ", an_pretty(hv[i]),
                    an_scalar(&rs->r[ri], "/probe/row_max_median"), 100 * an_scalar(&rs->r[ri], "/probe/diag_frac"),
                    an_scalar(&rs->r[ri], "/probe/step"));
    fprintf(f, "\n");
    /* fig05: median and max grad norm over every step, per method the figure draws (every
       method but the core and init variants, as fig_grad) */
    fprintf(f, "fig05_gradnorm\t");
    for (int i = 0; an_method_order[i]; i++) {
        const char *v = an_method_order[i];
        if (strchr(v, '+') || (ri = an_rep_run(c, v)) < 0) continue;
        size_t n = 0;
        double *g = an_series_copy(&rs->r[ri], "/train/grad_norm", &n), mx = 0;
        if (!g || !n) { free(g); continue; }
        for (size_t k = 0; k < n; k++) if (isfinite(g[k]) && g[k] > mx) mx = g[k];
        double med = an_quantile(g, n, 0.5);
        free(g);
        fprintf(f, "%s: median %.3g, max %.3g. ", an_pretty(v), med, mx);
    }
    fprintf(f, "\n");
    /* fig06: the range of the column and the row sums, per sublayer and of the composite
       (the paper's column sums, of the transpose, are our row sums: both are given) */
    fprintf(f, "fig06_colsums\t");
    for (int i = 0; hv[i]; i++)
        if ((ri = an_rep_run(c, hv[i])) >= 0 && an_series(&rs->r[ri], "/final/composite_colsum")) {
            static const char *const sp[4] = {"/final/H_res_colsum", "/final/H_res_rowsum", "/final/composite_colsum",
                                              "/final/composite_rowsum"};
            double lo[4], hi[4];
            for (int q = 0; q < 4; q++) {
                size_t n = 0;
                double *v = an_series_copy(&rs->r[ri], sp[q], &n);
                lo[q] = v ? an_quantile(v, n, 0) : NAN;
                hi[q] = v ? an_quantile(v, n, 1) : NAN;
                free(v);
            }
            fprintf(f, "%s: per-layer column sums in [%.4f, %.4f], row sums in [%.4f, %.4f]; composite columns "
                       "[%.4f, %.4f], rows [%.4f, %.4f]. ", an_pretty(hv[i]), lo[0], hi[0], lo[1], hi[1], lo[2], hi[2],
                    lo[3], hi[3]);
        }
    fprintf(f, "\n");
    /* fig07: which runs the throughput panel draws (fig_throughput): the throughput-only
       runs (a streams grid) where there are any, else the compared runs of the figures' scale */
    fprintf(f, "fig07_streams\t");
    {
        static const char *const tv[] = {"hc", "mhc", "mhc_lite", "kromhc", "s2hc", NULL};
        const char *scale = c->scale;
        int use_bench = 0, k = 0, nlo = 0, nhi = 0;
        for (int i = 0; i < rs->n && !use_bench; i++)
            if (rs->r[i].bench) { use_bench = 1; scale = rs->r[i].scale; }
        for (int i = 0; i < rs->n; i++) {
            const an_run *r = &rs->r[i];
            int known = 0;
            for (int vi = 0; tv[vi] && !known; vi++) known = !strcmp(r->variant, tv[vi]);
            if (!known || r->bench != use_bench || strcmp(r->scale, scale) || r->n < 2 || r->n > 8) continue;
            k++;
            if (!nlo || r->n < nlo) nlo = r->n;
            if (r->n > nhi) nhi = r->n;
        }
        if (!k) fprintf(f, "Left: no hyper-connection run at n = 2..8 to draw. ");
        else {
            char ns[32];
            if (nlo == nhi) snprintf(ns, sizeof ns, "n = %d", nlo);
            else snprintf(ns, sizeof ns, "n = %d..%d", nlo, nhi);
            if (use_bench) fprintf(f, "Left: %d throughput-only run%s at %s, %s. ", k, k == 1 ? "" : "s", scale, ns);
            else fprintf(f, "Left: no throughput-only run (a streams grid's); the %d compared run%s at %s, %s, every "
                            "corpus and recipe. ", k, k == 1 ? "" : "s", scale, ns);
        }
    }
    fprintf(f, "\n");
    /* fig08: negative share */
    fprintf(f, "fig08_entries\t");
    static const char *const ev[] = {"hc", "mhc", "mhc_lite", "kromhc", "s2hc", NULL};
    for (int i = 0; ev[i]; i++)
        if ((ri = an_rep_run(c, ev[i])) >= 0 && an_series(&rs->r[ri], "/final/hist_counts")) {
            double tot, fr = an_negative_fraction(&rs->r[ri], 0.01, &tot);
            fprintf(f, "%s: %.2f %% of entries below −0.01. ", an_pretty(ev[i]), 100 * fr);
        }
    fprintf(f, "\n");
    /* figv2_05: smallest nonzero-expected deviation sv of s2hc */
    fprintf(f, "figv2_05_devsv\t");
    for (int i = 0; hv[i]; i++)
        if ((ri = an_rep_run(c, hv[i])) >= 0) {
            const h5log_series *d = an_series(&rs->r[ri], "/final/dev_sv_mean");
            if (!d || d->row_rank < 2) continue;
            size_t Lh = d->row_dims[0], n = d->row_dims[1];
            double top = 0, last = 0;
            for (size_t l = 0; l < Lh; l++) {
                top += an_series_get(d, l * n) / (double)Lh;
                last = fmax(last, an_series_get(d, l * n + n - 1));
            }
            fprintf(f, "%s: mean largest deviation singular value %.3f, largest last one %.2e. ", an_pretty(hv[i]), top, last);
        }
    fprintf(f, "\n");
    /* hres_depth: the recipes it draws a line each of (fig_hres_depth) */
    if (c->cap_hres_depth[0]) fprintf(f, "hres_depth\t%s\n", c->cap_hres_depth);
    /* loss_depth: its depths, and each method's loss from the fewest blocks to the most */
    if (c->cap_loss_depth[0]) fprintf(f, "loss_depth\t%s\n", c->cap_loss_depth);
    an_close(f);
}

static void write_summary(an_ctx *c) {
    FILE *f = an_open(c->out, "data", "summary.txt");
    if (!f) return;
    int bench = 0, main_runs = 0, maxseeds = 0, minseeds = 1 << 30;
    for (int i = 0; i < c->rs->n; i++) { if (c->rs->r[i].bench) bench++; else main_runs++; }
    for (int vi = 0; an_method_order[vi]; vi++) {
        int idx[64];
        int k = an_cell_runs(c->rs, c->scale, c->corpus, an_method_order[vi], 0, idx, 64);
        if (!k) continue;
        /* seeds, not runs: runs of one seed under other learning rates, stream counts or
           lengths (a sweep) are one seed; an_cell_runs sorts by seed */
        int seeds = 0;
        for (int i = 0; i < k; i++) seeds += i == 0 || c->rs->r[idx[i]].seed != c->rs->r[idx[i - 1]].seed;
        if (seeds > maxseeds) maxseeds = seeds;
        if (seeds < minseeds) minseeds = seeds;
    }
    if (minseeds > maxseeds) minseeds = 0;
    fprintf(f, "scale=%s\ncorpus=%s\nruns=%d\ncomparison_runs=%d\nthroughput_runs=%d\nseeds_min=%d\nseeds_max=%d\n", c->scale,
            c->corpus, c->rs->n, main_runs, bench, minseeds, maxseeds);
    int ri = an_rep_run(c, "s2hc");
    if (ri < 0) ri = an_rep_run(c, "rc");
    for (int i = 0; i < c->rs->n && ri < 0; i++) /* neither: any run of the figures' cell */
        if (!c->rs->r[i].bench && !strcmp(c->rs->r[i].scale, c->scale) && !strcmp(c->rs->r[i].corpus, c->corpus)) ri = i;
    if (ri >= 0) {
        const an_run *r = &c->rs->r[ri];
        fprintf(f, "model=%d layers, %d heads, C = %d, T = %d, batch %d x %d, %d steps\n", r->n_layer, r->n_head, r->n_embd,
                r->block_size, r->batch, r->grad_accum, r->steps);
    }
    /* the run the figures show of each method (an_rep_run), by name, and how many
       optimisation recipes the cell's runs have: in a sweep (train.lr, say) the shown run is
       the first of its method's lowest seed, whatever its recipe, and the report says so */
    fprintf(f, "shown=");
    for (int vi = 0, k = 0; an_method_order[vi]; vi++) {
        const int i = an_rep_run(c, an_method_order[vi]);
        if (i < 0) continue;
        char lab[96];
        an_label(an_method_order[vi], lab, sizeof lab);
        fprintf(f, "%s%s %s", k++ ? ", " : "", lab, c->rs->r[i].name);
    }
    int recipes = 0;
    for (int i = 0; i < c->rs->n; i++) {
        const an_run *r = &c->rs->r[i];
        if (r->bench || strcmp(r->scale, c->scale) || strcmp(r->corpus, c->corpus)) continue;
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) {
            const an_run *o = &c->rs->r[j];
            seen = !o->bench && !strcmp(o->scale, c->scale) && !strcmp(o->corpus, c->corpus) && !strcmp(o->recipe, r->recipe);
        }
        recipes += !seen;
    }
    fprintf(f, "\nrecipes=%d\n", recipes);
    /* the stream count the figures show (an_pick_primary) and every n of the cell's
       hyper-connection runs (a grid over n: tables/residual compares them) */
    fprintf(f, "n=%d\nn_all=", c->n);
    for (int nn = 2, k = 0; nn <= 64; nn++)
        for (int i = 0; i < c->rs->n; i++) {
            const an_run *r = &c->rs->r[i];
            if (r->bench || r->n != nn || strcmp(r->scale, c->scale) || strcmp(r->corpus, c->corpus)) continue;
            fprintf(f, "%s%d", k++ ? ", " : "", nn);
            break;
        }
    fprintf(f, "\n");
    /* the depths the figure loss_depth draws (0: none, and the report leaves it out) */
    fprintf(f, "depth_scales=%d\ndepth_scale_names=%s\n", c->depth_scales, c->depth_scale_names);
    an_close(f);
}

void an_on_signal(int sig) {
    (void)sig;
    tmp_streams_unlink();
    static const char msg[] = "\ns2hc: interrupted; the files being written are dropped, the older ones kept\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(130);
}

int analyze_main(int argc, char **argv) {
    const char *out = "out/analysis";
    int quiet = 0;
    opt_seen seen = {.cmd = "analyze"};
    char **paths = calloc_check((size_t)argc + 1, sizeof *paths);
    int np = 0;
    for (int i = 1, ended = 0; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) paths[np++] = argv[i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { analyze_usage(stdout); free(paths); return 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "-o", 0))) out = v;
        else if (!strcmp(argv[i], "-q")) quiet = 1;
        else {
            fprintf(stderr, "s2hc: error: unknown option '%s'%s\n\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            analyze_usage(stderr);
            free(paths);
            return 2;
        }
    }
    if (!np) {
        fprintf(stderr, "s2hc: error: no runs given\n\n");
        analyze_usage(stderr);
        free(paths);
        return 2;
    }
    if (an_out_check(out)) { free(paths); return 2; }
    stop_signals_to(an_on_signal);
    an_runset rs;
    int n = an_runset_load(&rs, paths, np, !quiet);
    free(paths);
    if (!n) {
        fprintf(stderr, "s2hc: error: no readable run files under the given paths\n");
        an_runset_free(&rs);
        return 1;
    }
    if (rs.bad_paths) { /* a mistyped run directory: not a report that silently leaves it out */
        fprintf(stderr, "s2hc: error: %d of the given paths or their run files cannot be read (above); nothing "
                "written\n", rs.bad_paths);
        an_runset_free(&rs);
        return 1;
    }
    struct stat st; /* -o names a directory this process can write into, made if need be */
    const char *why = an_mkdirs(out) != 0 || stat(out, &st) != 0 ? strerror(errno)
                      : !S_ISDIR(st.st_mode)                     ? "not a directory"
                      : access(out, W_OK) != 0                   ? strerror(errno)
                                                                 : NULL;
    if (why) {
        fprintf(stderr, "s2hc: error: cannot write into %s: %s\n", out, why);
        an_runset_free(&rs);
        return 1;
    }
    if (an_out_lock(out)) { /* refused, nothing written: as a usage error */
        an_runset_free(&rs);
        return 2;
    }
    an_ctx c = {.out = out, .rs = &rs, .log = stderr};
    an_pick_primary(&c);
    if (!quiet && c.scale[0])
        fprintf(stderr, "s2hc analyze: %d runs; figures from scale %s, corpus %s -> %s/data, %s/tables\n", n, c.scale,
                c.corpus, out, out);
    else if (!quiet)
        fprintf(stderr, "s2hc analyze: %d runs, all for throughput only -> %s/data, %s/tables\n", n, out, out);
    an_write_failures = 0;
    an_outputs_begin(out); /* at the end the previous analysis's other files go (another run set's) */
    int rc = an_write_figures(&c) | an_write_tables(&c);
    an_write_csvs(out); /* the numbers of the .dat files (the figures' and tables/recipes') for people */
    write_captions(&c);
    write_summary(&c);
    an_runset_free(&rs);
    if (an_outputs_end(out) != 0) an_write_failures++;
    if (an_write_failures) /* each said above; the files it did not replace are the older ones */
        fprintf(stderr, "s2hc: error: %d file(s) of %s could not be written (above)\n", an_write_failures, out);
    return rc || an_write_failures ? 1 : 0;
}
