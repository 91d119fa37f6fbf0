/* figures.c: the data behind every figure, one plain text file per curve or panel under
 * OUT/data/, plus OUT/data/meta.gp (gnuplot variables: which methods have data, layer
 * counts, labels) so each script in plots/ only draws. Matrices are written as
 * "column row value" triples (x = input stream j, y = output stream i). */
#include "analysis.h"
#include <dirent.h>
#include <errno.h>
#include <unistd.h>
#include "../harness/config.h"
#include "../harness/model.h"
#include "../harness/presets.h"
#include "../probes/probes.h"
#include "../harness/util.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Display cap of the gradient norm (paper Fig 5 clamps HC at 5). */
#define AN_GRAD_CLAMP 5.0

/* meta.gp's `var = "text"`, a quote and a backslash in it escaped for gnuplot's double
 * quotes; with shown, for text a figure prints as it is (a scale, a corpus, a recipe's
 * fields): the figures' terminals read titles and keys as enhanced text, where _ ^ @ & ~ {
 * } are markup (min_lr's l a subscript, +init@500's 5 overprinted), so each is escaped by
 * a backslash too. A string a script compares with the data's columns is written without
 * (scale_id, corpus_id). Only _ @ + . - reach here today (names are limited to letters,
 * digits and _ . + -; scales and recipes are built of them and numbers): a '\&', which
 * pngcairo draws, the svg terminal writes as a bare & that no XML reader takes. */
static void gp_string(FILE *meta, const char *var, const char *text, int shown) {
    fprintf(meta, "%s = \"", var);
    for (const char *q = text; *q; q++) {
        if (shown && strchr("_^@&~{}", *q)) fputs("\\\\", meta), fputc(*q, meta);
        else if (*q == '\\') fputs(shown ? "\\\\\\\\" : "\\\\", meta);
        else if (*q == '"') fputs("\\\"", meta);
        else fputc(*q, meta);
    }
    fputs("\"\n", meta);
}

static void gp_text(FILE *meta, const char *var, const char *text) { gp_string(meta, var, text, 1); }

/* Variants drawn in the H_res figures (Fig 1 left, 2, 6, 9, v2 Fig 5). */
static const char *const hres_variants[] = {"mhc", "mhc_lite", "kromhc", "s2hc", NULL};
/* Variants whose cost grows with n (Fig 7). */
static const char *const stream_variants[] = {"hc", "mhc", "mhc_lite", "kromhc", "s2hc", NULL};

int an_cell_runs(const an_runset *rs, const char *scale, const char *corpus, const char *variant, int n,
                 int *idx, int cap) {
    return an_cell_runs_steps(rs, scale, corpus, variant, n, 0, idx, cap);
}

int an_cell_runs_steps(const an_runset *rs, const char *scale, const char *corpus, const char *variant, int n,
                       int steps, int *idx, int cap) {
    int k = 0, *all = malloc_check((size_t)(rs->n > 0 ? rs->n : 1) * sizeof(int));
    for (int i = 0; i < rs->n; i++) {
        const an_run *r = &rs->r[i];
        if (r->bench) continue;
        if (scale && strcmp(r->scale, scale)) continue;
        if (corpus && strcmp(r->corpus, corpus)) continue;
        if (variant && strcmp(r->variant, variant)) continue;
        if (n && r->n != n) continue;
        if (steps && r->steps != steps) continue;
        all[k++] = i;
    }
    /* sort by seed (insertion sort, stable: runs of one seed in the order read), then the
       lowest cap of them */
    for (int a = 1; a < k; a++)
        for (int b = a; b > 0 && rs->r[all[b]].seed < rs->r[all[b - 1]].seed; b--) {
            int t = all[b]; all[b] = all[b - 1]; all[b - 1] = t;
        }
    if (k > cap) k = cap;
    memcpy(idx, all, (size_t)k * sizeof(int));
    free(all);
    return k;
}

/* The stream count n = 2..64 with the most runs in count[n], n = 4 of a tie with it (0:
 * none): the n the figures show. */
static int most_runs_n(const int count[65]) {
    int best = 0;
    for (int n = 2; n <= 64; n++)
        if (count[n] > (best ? count[best] : 0) || (count[n] && count[n] == count[best] && n == 4)) best = n;
    return best;
}

void an_pick_primary(an_ctx *c) {
    const an_runset *rs = c->rs;
    long best = -1;
    c->scale[0] = c->corpus[0] = 0;
    for (int i = 0; i < rs->n; i++) {
        const an_run *r = &rs->r[i];
        if (r->bench) continue;
        long size = (long)r->n_layer * r->n_embd * r->block_size;
        if (size > best) { best = size; snprintf(c->scale, sizeof c->scale, "%s", r->scale); }
    }
    for (int i = 0; i < rs->n; i++) {
        const an_run *r = &rs->r[i];
        if (r->bench || strcmp(r->scale, c->scale)) continue;
        if (!strcmp(r->corpus, "docs")) { snprintf(c->corpus, sizeof c->corpus, "docs"); break; }
        if (!c->corpus[0] || strcmp(r->corpus, c->corpus) < 0) snprintf(c->corpus, sizeof c->corpus, "%s", r->corpus);
    }
    int count[65] = {0};
    for (int i = 0; i < rs->n; i++) {
        const an_run *r = &rs->r[i];
        if (!r->bench && r->n > 1 && r->n <= 64 && !strcmp(r->scale, c->scale) && !strcmp(r->corpus, c->corpus))
            count[r->n]++;
    }
    c->n = most_runs_n(count);
}

/* Of the k runs idx (by seed), the first finished one, else the first. */
static int first_finished(const an_runset *rs, const int *idx, int k) {
    for (int i = 0; i < k; i++)
        if (!strcmp(rs->r[idx[i]].status, "finished")) return idx[i];
    return idx[0];
}

int an_rep_run(const an_ctx *c, const char *variant) {
    int idx[64];
    int k = c->n ? an_cell_runs(c->rs, c->scale, c->corpus, variant, c->n, idx, 64) : 0;
    if (k) return first_finished(c->rs, idx, k);
    k = an_cell_runs(c->rs, c->scale, c->corpus, variant, 0, idx, 64);
    if (k) return first_finished(c->rs, idx, k);
    /* the identity baseline alone may come from another corpus at the same scale (the
       ablation grid's); any other method outside the cell is not this figure's */
    if (strcmp(variant, "identity") != 0) return -1;
    k = an_cell_runs(c->rs, c->scale, NULL, variant, 0, idx, 64);
    return k ? first_finished(c->rs, idx, k) : -1;
}

int an_mkdirs(const char *path) { return mkdir_p(path); }

int an_out_check(const char *out) {
    if (strlen(out) <= AN_OUT_MAX) return 0;
    fprintf(stderr, "s2hc: error: -o %.60s...: a path of %zu bytes, longer than %d; nothing written\n", out, strlen(out),
            AN_OUT_MAX);
    return 2;
}

const char *an_out_who = "s2hc analyze";

int an_out_lock(const char *out) {
    static int fd = -1;
    if (fd >= 0) return 0; /* a report's own analysis */
    fd = out_dir_lock(out, an_out_who);
    return fd < 0;
}

int an_write_failures = 0;

FILE *an_open(const char *out, const char *sub, const char *name) {
    char dir[1024], p[1200];
    snprintf(dir, sizeof dir, "%s/%s", out, sub);
    an_mkdirs(dir);
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = tmp_stream_open(p); /* PATH.tmp until an_close */
    if (!f) {
        fprintf(stderr, "s2hc: error: cannot write %s: %s\n", p, strerror(errno));
        an_write_failures++;
    }
    return f;
}

/* The files this analysis wrote, relative to OUT ("data/fig1_ood.dat\n..."): the list
 * (OUT/.analyze-files) the next analysis into OUT reads at its end, to remove those it
 * did not write again. */
static char *an_made = NULL;
static size_t an_made_len = 0, an_made_cap = 0;

static void an_made_add(const char *path) {
    const size_t n = strlen(path) + 1;
    if (an_made_len + n + 1 > an_made_cap) {
        an_made_cap = (an_made_len + n + 1) * 2;
        char *m = realloc(an_made, an_made_cap);
        if (!m) die(1, "out of memory listing the analysis's files");
        an_made = m;
    }
    memcpy(an_made + an_made_len, path, n - 1);
    an_made_len += n;
    an_made[an_made_len - 1] = '\n';
    an_made[an_made_len] = '\0';
}

#define AN_MANIFEST ".analyze-files"

/* 1 when this analysis wrote SUB/NAME. */
static int an_made_has(const char *sub, const char *name) {
    char want[600];
    snprintf(want, sizeof want, "%s/%s\n", sub, name);
    for (const char *p = an_made; p && (p = strstr(p, want)); p++)
        if (p == an_made || p[-1] == '\n') return 1;
    return 0;
}

void an_outputs_begin(const char *out) {
    (void)out;
    an_made_len = 0;
    if (an_made) an_made[0] = '\0';
}

int an_outputs_end(const char *out) {
    /* the previous analysis's files this one did not write (another run set's methods)
       go, unless a write failed: then nothing is removed, and the list keeps them for the
       next analysis to remove */
    char mp[1200];
    snprintf(mp, sizeof mp, "%s/" AN_MANIFEST, out);
    size_t len = 0;
    char *old = read_text_file(mp, &len);
    for (char *line = old, *nl; line && *line; line = nl + 1) {
        nl = strchr(line, '\n');
        if (!nl) break;
        *nl = '\0';
        const char *slash = strchr(line, '/');
        /* only what an analysis writes: data/NAME or tables/NAME */
        const int ours = slash && !strchr(slash + 1, '/') && strcmp(slash + 1, "..") && strcmp(slash + 1, ".") &&
                         (!strncmp(line, "data/", 5) || !strncmp(line, "tables/", 7));
        if (!ours) continue;
        *(char *)slash = '\0';
        const int made = an_made_has(line, slash + 1);
        *(char *)slash = '/';
        if (made) continue;
        if (an_write_failures) an_made_add(line);
        else {
            char p[1400];
            snprintf(p, sizeof p, "%s/%s", out, line);
            unlink(p);
        }
    }
    free(old);
    return write_file_atomic(mp, an_made ? an_made : "", an_made_len, NULL, 0);
}

int an_close(FILE *f) {
    const char *tp = tmp_stream_path(f);
    if (!tp) return fclose(f);
    char path[1300];
    snprintf(path, sizeof path, "%s", tp);
    if (tmp_stream_commit(f) != 0) {
        fprintf(stderr, "s2hc: error: cannot write %s: %s\n", path, strerror(errno));
        an_write_failures++;
        return -1;
    }
    const char *rel = strrchr(path, '/'); /* SUB/NAME */
    while (rel && rel > path && rel[-1] != '/') rel--;
    an_made_add(rel ? rel : path);
    return 0;
}

/* "column row value" for an n x n matrix (row-major), blank line between rows. */
static void write_cells(FILE *f, const double *H, int n) {
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++) fprintf(f, "%d %d %.6g\n", j, i, H[i * n + j]);
        fprintf(f, "\n");
    }
}

/* Row sums at x = n (right of the matrix), column sums at y = n (below it). */
static void write_sums(FILE *f, const double *H, int n) {
    for (int i = 0; i < n; i++) {
        double s = 0;
        for (int j = 0; j < n; j++) s += H[i * n + j];
        fprintf(f, "%d %d %.4f\n", n, i, s);
    }
    for (int j = 0; j < n; j++) {
        double s = 0;
        for (int i = 0; i < n; i++) s += H[i * n + j];
        fprintf(f, "%d %d %.4f\n", j, n, s);
    }
}

/* The line that names a .dat file's columns (an_write_csvs makes its .csv from it). */
static void columns(FILE *f, const char *names) { fprintf(f, "%s %s\n", AN_COLUMNS, names); }

/* Append " v" to a space-separated list. */
static void list_add(char *list, size_t len, const char *v) {
    size_t l = strlen(list);
    snprintf(list + l, len - l, "%s%s", l ? " " : "", v);
}


/* ---- Fig 1 left, Fig 9: heat maps --------------------------------------------------- */

static void fig_heatmaps(an_ctx *c, FILE *meta) {
    char list[256] = "", labels[512] = "";
    int mid_layer = -1, n_show = 0, depths[4] = {0, 0, 0, 0}, Lh_seen = 0;
    for (int vi = 0; hres_variants[vi]; vi++) {
        int ri = an_rep_run(c, hres_variants[vi]);
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *hm = an_series(r, "/final/H_res_mean"), *hs = an_series(r, "/final/H_res"),
                           *cp = an_series(r, "/final/composite");
        if (!hm || !hs || !cp) continue;
        int n = r->n, Lh = (int)(hm->row_elems / (size_t)(n * n));
        if (Lh < 1) continue;
        if (n_show && n != n_show) { /* the panels share one n x n grid (hres_n) */
            fprintf(c->log, "s2hc analyze: Fig 1, 9: %s's run has n = %d, the others n = %d; left out\n", r->variant, n, n_show);
            continue;
        }
        Lh_seen = Lh;
        list_add(list, sizeof list, hres_variants[vi]);
        char lab[64];
        an_label(hres_variants[vi], lab, sizeof lab);
        list_add(labels, sizeof labels, lab);
        n_show = n;
        /* Fig 1 left: the token mean over every final-probe sequence at the middle sublayer */
        mid_layer = Lh / 2;
        double H[64];
        char name[128];
        for (int e = 0; e < n * n; e++) H[e] = an_series_get(hm, (size_t)mid_layer * n * n + e);
        snprintf(name, sizeof name, "fig1_hres_%s.dat", hres_variants[vi]);
        FILE *f = an_open(c->out, "data", name);
        if (!f) continue;
        fprintf(f, "# %s: token-averaged H_res (/final/H_res_mean) of sublayer l = %d (0-based, as `s2hc inspect "
                   "--layer` and Fig 9) of 0..%d, run %s\n"
                   "# column j (input stream), row i (output stream), H_res[i,j]\n", r->variant, mid_layer, Lh - 1,
                r->dir);
        columns(f, "j i h_res");
        write_cells(f, H, n);
        an_close(f);
        /* Fig 9: sequence 0's token-averaged matrices at four depths, and its composite */
        depths[0] = 0;
        depths[1] = Lh >= 4 ? (Lh * 1) / 4 : (Lh > 1 ? 1 : 0);
        depths[2] = Lh >= 4 ? (Lh * 3) / 4 - 1 : (Lh > 2 ? 2 : Lh - 1);
        depths[3] = Lh - 1;
        /* The paper's l in {1, 6, 18, 23}: 0-based, as its composite prod_{l=0}^{23} H_{23-l} is */
        if (Lh == 24) { depths[0] = 1; depths[1] = 6; depths[2] = 18; depths[3] = 23; }
        for (int k = 0; k < 5; k++) {
            if (k < 4)
                for (int e = 0; e < n * n; e++) H[e] = an_series_get(hs, (size_t)depths[k] * n * n + e);
            else
                for (int e = 0; e < n * n; e++) H[e] = an_series_get(cp, (size_t)e);
            snprintf(name, sizeof name, "fig9_%s_%d.dat", hres_variants[vi], k);
            if (!(f = an_open(c->out, "data", name))) continue;
            fprintf(f, "# %s, validation sequence 0 (token-averaged), %s; column row value\n", r->variant,
                    k < 4 ? "one sublayer" : "composite H_{Lh-1}...H_0");
            columns(f, "j i h_res");
            write_cells(f, H, n);
            an_close(f);
            snprintf(name, sizeof name, "fig9_%s_%d_sums.dat", hres_variants[vi], k);
            if (!(f = an_open(c->out, "data", name))) continue;
            fprintf(f, "# row sums at x = n, column sums at y = n\n");
            columns(f, "x y sum");
            write_sums(f, H, n);
            an_close(f);
        }
    }
    fprintf(meta, "hres_methods = \"%s\"\nhres_labels = \"%s\"\nhres_n = %d\nfig1_layer = %d\nLh = %d\n", list,
            labels, n_show, mid_layer, Lh_seen); /* 0-based l, as fig9_depths */
    fprintf(meta, "fig9_depths = \"%d %d %d %d\"\n", depths[0], depths[1], depths[2], depths[3]); /* 0-based l */
}

/* ---- Fig 1 middle: OOD perplexity relative to RC ----------------------------------- */

/* OOD corpora of a run (the groups under /eval/ood), into names[k][AN_NAME]. */
static int ood_corpora(const an_run *r, char names[][AN_NAME], int cap) {
    int k = 0;
    for (int i = 0; i < r->log.n_series && k < cap; i++) {
        const char *p = r->log.series[i].path;
        if (strncmp(p, "/eval/ood/", 10)) continue;
        const char *end = strrchr(p, '/');
        if (!end || strcmp(end, "/ppl")) continue;
        int len = (int)(end - (p + 10));
        if (len <= 0 || len >= AN_NAME) continue;
        memcpy(names[k], p + 10, (size_t)len);
        names[k][len] = 0;
        k++;
    }
    return k;
}

/* A variant's out-of-domain perplexity on `corpus` over RC's, as Table 2 pairs them: the
 * geometric mean over the cell's runs of `steps` steps and optimisation recipe `recipe`
 * (NULL: any) of PPL / PPL(RC) of the same seed and recipe (both finished); NaN without a
 * pair. Means over unpaired seeds could disagree with Table 2 in sign when the methods'
 * seeds differ (one diverged, say). */
static double cell_ood_ratio(const an_ctx *c, const char *variant, const char *corpus, int steps, const char *recipe) {
    int ia[64], ib[64];
    const int na = an_cell_runs_steps(c->rs, c->scale, c->corpus, variant, 0, steps, ia, 64),
              nb = an_cell_runs_steps(c->rs, c->scale, c->corpus, "rc", 0, steps, ib, 64);
    char p[128];
    snprintf(p, sizeof p, "/eval/ood/%s/ppl", corpus);
    double sum = 0;
    int n = 0;
    for (int i = 0; i < na; i++) {
        if (recipe && strcmp(c->rs->r[ia[i]].recipe, recipe)) continue;
        for (int j = 0; j < nb; j++)
            if (an_pairable(&c->rs->r[ia[i]], &c->rs->r[ib[j]])) {
                const double x = an_scalar(&c->rs->r[ia[i]], p), y = an_scalar(&c->rs->r[ib[j]], p);
                if (isfinite(x) && x > 0 && isfinite(y) && y > 0) {
                    sum += log(x / y);
                    n++;
                }
                break;
            }
    }
    return n ? exp(sum / n) : NAN;
}

/* The most optimisation recipes Fig 1's bars tell apart (a bar per method and recipe). */
#define AN_OOD_RECIPES 3

static void fig_ood(an_ctx *c, FILE *meta) {
    int rc = an_rep_run(c, "rc");
    FILE *f = an_open(c->out, "data", "fig1_ood.dat");
    if (!f) return;
    /* one training length, the shown RC run's, as Table 2's rows and the other figures:
       the runs of a length sweep pooled would be no row of Table 2 */
    const int steps = rc >= 0 ? c->rs->r[rc].steps : 0;
    char corp[16][AN_NAME];
    int nc = rc >= 0 ? ood_corpora(&c->rs->r[rc], corp, 16) : 0;
    /* the cell's optimisation recipes at that length, learning rates ascending: a bar per
       method and recipe (a sweep's rates pooled would be no row of the table recipes) */
    int cell[256], lens[256];
    const int ncell = an_cell_runs(c->rs, c->scale, c->corpus, NULL, 0, cell, 256),
              nlen = an_cell_runs_steps(c->rs, c->scale, c->corpus, NULL, 0, steps, lens, 256);
    const char *recs[AN_OOD_RECIPES + 1];
    const int nrec = an_recipes(c->rs, lens, nlen, recs, AN_OOD_RECIPES + 1),
              R = nrec < AN_OOD_RECIPES ? nrec : AN_OOD_RECIPES;
    if (nrec > AN_OOD_RECIPES)
        fprintf(c->log, "s2hc analyze: Fig 1: more than %d optimisation recipes; its bars are of the first %d (learning "
                        "rates ascending), the table recipes has them all\n", AN_OOD_RECIPES, AN_OOD_RECIPES);
    const char *vs[16];
    int vq[16], nv = 0;
    for (int i = 0; an_method_order[i]; i++) {
        const char *v = an_method_order[i];
        /* the paper's methods only (the ablations have their own table) */
        if (strcmp(v, "hc") && strcmp(v, "mhc") && strcmp(v, "mhc_lite") && strcmp(v, "kromhc") && strcmp(v, "s2hc")) continue;
        int idx[4];
        if (an_cell_runs_steps(c->rs, c->scale, c->corpus, v, 0, steps, idx, 4) == 0) continue;
        /* a method and recipe without one finite ratio (diverged: inf; unfinished: no final
         * eval; no RC run of its seeds) would be a column of NaN, which gnuplot's histogram
         * refuses: leave it out */
        int any = 0;
        for (int q = 0; q < (R ? R : 1) && nv < 16; q++) {
            int finite = 0;
            for (int k = 0; k < nc && !finite; k++) finite = isfinite(cell_ood_ratio(c, v, corp[k], steps, R ? recs[q] : NULL));
            if (finite) vs[nv] = v, vq[nv++] = q, any = 1;
        }
        if (!any && nc) fprintf(c->log, "s2hc analyze: Fig 1: %s has no out-of-domain perplexity paired with RC's; left out\n", an_pretty(v));
    }
    /* the bars' recipes, named where the cell holds several: also when the bars drawn are
       of one of them alone (RC trained at one rate of a sweep), which the key then names */
    const int named = R > 1;
    char names[AN_OOD_RECIPES][200], words[AN_OOD_RECIPES][200];
    for (int q = 0; q < R; q++) {
        an_recipe_name(c->rs, cell, ncell, recs[q], names[q], sizeof names[q]);
        an_recipe_word(names[q], words[q], sizeof words[q]);
    }
    fprintf(f, "# perplexity of each method / perplexity of RC, per out-of-domain corpus (%s, trained on %s, %d steps): the "
            "geometric mean over seeds of each run's ratio to the RC run of its seed and recipe, finished runs, as Table 2's "
            "row of that length%s\n", c->scale, c->corpus, steps,
            named ? "; a column per method and optimisation recipe (method@recipe: the recipe's fields that differ)" : "");
    fprintf(f, "%s corpus", AN_COLUMNS);
    for (int j = 0; j < nv; j++) fprintf(f, named ? " %s@%s" : " %s", vs[j], words[vq[j]]);
    fprintf(f, "\n");
    int rows = 0;
    for (int k = 0; k < nc; k++) {
        double r[16];
        int all = 1;
        for (int j = 0; j < nv; j++) all &= isfinite(r[j] = cell_ood_ratio(c, vs[j], corp[k], steps, R ? recs[vq[j]] : NULL));
        if (!all) continue; /* a row with a gap: gnuplot's histogram takes none */
        fprintf(f, "%s", corp[k]);
        for (int j = 0; j < nv; j++) fprintf(f, " %.6g", r[j]);
        fprintf(f, "\n");
        rows++;
    }
    an_close(f);
    char labels[512] = "", ids[256] = "", rq[64] = "";
    for (int j = 0; j < nv; j++) {
        char lab[64], qs[8];
        an_label(vs[j], lab, sizeof lab);
        list_add(labels, sizeof labels, lab);
        list_add(ids, sizeof ids, vs[j]);
        snprintf(qs, sizeof qs, "%d", named ? vq[j] + 1 : 1);
        list_add(rq, sizeof rq, qs);
    }
    fprintf(meta, "ood_rows = %d\nood_cols = %d\nood_labels = \"%s\"\nood_methods = \"%s\"\n", rows, nv, labels, ids);
    /* the bars' recipes (ood_rq: column i's recipe, 1 with one) and their names */
    fprintf(meta, "ood_recipes = %d\nood_rq = \"%s\"\n", named ? R : 1, rq);
    for (int q = 0; named && q < R; q++) {
        char var[48];
        snprintf(var, sizeof var, "ood_recipe%d", q + 1);
        gp_text(meta, var, names[q]);
    }
}

/* ---- Fig 1 right, Fig 7 right: auxiliary parameters vs n ---------------------------- */

static void fig_params(an_ctx *c, FILE *meta) {
    /* the scale of the primary runs (their config), else small */
    s2hc_config cfg;
    config_defaults(&cfg);
    int ri = an_rep_run(c, "s2hc");
    if (ri < 0) ri = c->rs->n ? 0 : -1;
    if (ri >= 0) {
        cfg.n_layer = c->rs->r[ri].n_layer;
        cfg.n_embd = c->rs->r[ri].n_embd;
        cfg.n_head = c->rs->r[ri].n_head;
        cfg.block_size = c->rs->r[ri].block_size;
    } else preset_apply(&cfg, "small");
    FILE *f = an_open(c->out, "data", "params.dat");
    FILE *g = an_open(c->out, "data", "params.csv");
    if (!f || !g) { if (f) an_close(f); if (g) an_close(g); return; }
    fprintf(f, "# auxiliary (hyper-connection) parameters per method against n: C = %d, %d layers (%d sublayers);"
               " counted from the parameter table, as `s2hc params`\nn", cfg.n_embd, cfg.n_layer, 2 * cfg.n_layer);
    fprintf(g, "method,n,C,n_layer,aux_params,total_params\n");
    for (int vi = 0; stream_variants[vi]; vi++) fprintf(f, " %s", an_pretty(stream_variants[vi]));
    fprintf(f, "\n");
    for (int n = 2; n <= 8; n++) {
        fprintf(f, "%d", n);
        for (int vi = 0; stream_variants[vi]; vi++) {
            snprintf(cfg.method, sizeof cfg.method, "%s", stream_variants[vi]);
            cfg.n_streams = n;
            param_info *pt = NULL;
            int np = 0;
            size_t total = 0, aux = 0;
            char err[256];
            if (model_param_table(&cfg, &pt, &np, &total, &aux, err, sizeof err) != 0) {
                fprintf(f, " NaN");
                continue;
            }
            free(pt);
            fprintf(f, " %zu", aux);
            fprintf(g, "%s,%d,%d,%d,%zu,%zu\n", stream_variants[vi], n, cfg.n_embd, cfg.n_layer, aux, total);
        }
        fprintf(f, "\n");
    }
    an_close(f);
    an_close(g);
    fprintf(meta, "params_C = %d\nparams_layers = %d\n", cfg.n_embd, cfg.n_layer);
}

/* ---- Fig 2: row-wise max and diagonal dominance over training ---------------------- */

static void fig_rowmax(an_ctx *c, FILE *meta) {
    char list[256] = "";
    for (int vi = 0; hres_variants[vi]; vi++) {
        int ri = an_rep_run(c, hres_variants[vi]);
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *st = an_series(r, "/probe/step"), *p10 = an_series(r, "/probe/row_max_p10"),
                           *med = an_series(r, "/probe/row_max_median"), *p90 = an_series(r, "/probe/row_max_p90"),
                           *df = an_series(r, "/probe/diag_frac");
        if (!st || !st->rows || !p10 || !med || !p90 || !df) continue;
        char name[64];
        snprintf(name, sizeof name, "fig2_%s.dat", hres_variants[vi]);
        FILE *f = an_open(c->out, "data", name);
        if (!f) continue;
        list_add(list, sizeof list, hres_variants[vi]);
        fprintf(f, "# %s (%s): step, row-max p10, median, p90 over every row of every per-token H_res of every sublayer,"
                   " fraction of matrices whose row maxima all sit on the diagonal\n", r->variant,
                r->dir);
        columns(f, "step row_max_p10 row_max_median row_max_p90 diag_frac");
        for (size_t i = 0; i < st->rows; i++)
            fprintf(f, "%.0f %.6g %.6g %.6g %.6g\n", an_series_get(st, i), an_series_get(p10, i), an_series_get(med, i),
                    an_series_get(p90, i), an_series_get(df, i));
        an_close(f);
    }
    fprintf(meta, "fig2_methods = \"%s\"\n", list);
}

/* ---- Fig 3, 10, 11: stream cosine similarity per layer over training ---------------- */

static void fig_cos(an_ctx *c, FILE *meta) {
    static const char *const vs[] = {"identity", "mhc", "s2hc", "mhc_lite", NULL};
    double lo = 1;
    for (int vi = 0; vs[vi]; vi++) {
        int ri = an_rep_run(c, vs[vi]), ok = 0, Lh = 0;
        if (ri >= 0) {
            const an_run *r = &c->rs->r[ri];
            const h5log_series *st = an_series(r, "/probe/step"), *cs = an_series(r, "/probe/cos_sim");
            if (st && cs && st->rows && cs->rows == st->rows) {
                char name[64];
                snprintf(name, sizeof name, "fig3_cos_%s.dat", vs[vi]);
                FILE *f = an_open(c->out, "data", name);
                if (f) {
                    Lh = (int)cs->row_elems;
                    fprintf(f, "# %s (%s, %s, %s): step, then per sublayer the mean pairwise cosine similarity of the"
                               " streams after mixing (H_res . X)\n", r->variant, r->scale, r->corpus,
                            r->dir);
                    fprintf(f, "%s step", AN_COLUMNS);
                    for (int l = 0; l < Lh; l++) fprintf(f, " cos_sublayer%d", l + 1);
                    fprintf(f, "\n");
                    for (size_t i = 0; i < st->rows; i++) {
                        fprintf(f, "%.0f", an_series_get(st, i));
                        for (int l = 0; l < Lh; l++) {
                            double x = an_series_get(cs, i * (size_t)Lh + l);
                            if (isfinite(x) && x < lo) lo = x;
                            fprintf(f, " %.6g", x);
                        }
                        fprintf(f, "\n");
                    }
                    an_close(f);
                    ok = 1;
                }
            }
        }
        fprintf(meta, "cos_%s = %d\ncos_%s_Lh = %d\n", vs[vi], ok, vs[vi], Lh);
    }
    fprintf(meta, "cos_min = %.6g\n", lo);
}

/* ---- Fig 5: gradient norm ------------------------------------------------------------ */

static void fig_grad(an_ctx *c, FILE *meta) {
    char list[256] = "", labels[512] = "";
    double gmax_all = 0;
    for (int i = 0; an_method_order[i]; i++) {
        const char *v = an_method_order[i];
        if (strchr(v, '+')) continue; /* every method, as the paper's (the core and init variants in the tables) */
        const int ri = an_rep_run(c, v); /* the run the captions and the other figures describe */
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *st = an_series(r, "/train/step"), *g = an_series(r, "/train/grad_norm");
        if (!st || !g || !st->rows) continue;
        char name[64];
        snprintf(name, sizeof name, "fig5_%s.dat", v);
        FILE *f = an_open(c->out, "data", name);
        if (!f) continue;
        list_add(list, sizeof list, v);
        char lab[64];
        an_label(v, lab, sizeof lab);
        list_add(labels, sizeof labels, lab);
        fprintf(f, "# %s (%s): step, gradient norm before clipping clamped at %.0f for display, raw value\n", v,
                r->dir,
                AN_GRAD_CLAMP);
        columns(f, "step grad_norm_clamped grad_norm");
        for (size_t k = 0; k < st->rows; k++) {
            double x = an_series_get(g, k);
            if (isfinite(x) && x > gmax_all) gmax_all = x;
            fprintf(f, "%.0f %.6g %.6g\n", an_series_get(st, k), isfinite(x) ? fmin(x, AN_GRAD_CLAMP) : AN_GRAD_CLAMP, x);
        }
        an_close(f);
    }
    fprintf(meta, "fig5_methods = \"%s\"\nfig5_labels = \"%s\"\ngrad_clamp = %g\ngrad_max = %g\n", list, labels,
            AN_GRAD_CLAMP, gmax_all);
}

/* ---- Fig 6: column sums and the cumulative composite norm -------------------------- */

static void write_box(FILE *f, double x, const double *v, size_t n) {
    fprintf(f, "%g %.6g %.6g %.6g %.6g %.6g\n", x, an_quantile(v, n, 0), an_quantile(v, n, 0.25), an_quantile(v, n, 0.5),
            an_quantile(v, n, 0.75), an_quantile(v, n, 1));
}

/* Per-sublayer sum distributions (columns or rows) and the composite's, for one method. */
static void write_sums_fig(an_ctx *c, const an_run *r, const char *v, int k, int nv, int rows, FILE *fcomp) {
    const h5log_series *cs = an_series(r, rows ? "/final/H_res_rowsum" : "/final/H_res_colsum");
    size_t d[H5LOG_MAX_RANK + 1];
    if (!cs || an_shape(cs, d) != 3) return;
    size_t S = d[0], Lh = d[1], n = d[2];
    char name[64];
    snprintf(name, sizeof name, "fig6_%s_%s.dat", rows ? "rowsum" : "colsum", v);
    FILE *f = an_open(c->out, "data", name);
    if (!f) return;
    fprintf(f, "# %s: sublayer (offset per method for display), min, p25, median, p75, max of the %s sums of the %zu"
               " sequences' token-averaged H_res\n", r->variant, rows ? "row" : "column", S);
    columns(f, "sublayer_x min p25 median p75 max");
    double *w = malloc_check((S * n + 1) * sizeof *w);
    double off = nv > 1 ? -0.3 + 0.6 * k / (nv - 1) : 0;
    for (size_t l = 0; l < Lh; l++) {
        size_t m = 0;
        for (size_t s = 0; s < S; s++)
            for (size_t j = 0; j < n; j++) w[m++] = an_series_get(cs, (s * Lh + l) * n + j);
        write_box(f, (double)(l + 1) + off, w, m);
    }
    an_close(f);
    free(w);
    size_t m = 0;
    double *x = an_series_copy(r, rows ? "/final/composite_rowsum" : "/final/composite_colsum", &m);
    char lab[64];
    an_label(v, lab, sizeof lab);
    if (x && m)
        fprintf(fcomp, "%d %.6g %.6g %.6g %.6g %.6g %s\n", k, an_quantile(x, m, 0), an_quantile(x, m, 0.25),
                an_quantile(x, m, 0.5), an_quantile(x, m, 0.75), an_quantile(x, m, 1), lab);
    free(x);
}

static void fig_colsums(an_ctx *c, FILE *meta) {
    char list[256] = "";
    int k = 0, nv = 0;
    for (int vi = 0; hres_variants[vi]; vi++) {
        int ri = an_rep_run(c, hres_variants[vi]);
        if (ri >= 0 && an_series(&c->rs->r[ri], "/final/H_res_colsum")) nv++;
    }
    FILE *fc = an_open(c->out, "data", "fig6_composite.dat"), *fr = an_open(c->out, "data", "fig6_composite_rows.dat");
    if (!fc || !fr) { if (fc) an_close(fc); if (fr) an_close(fr); return; }
    fprintf(fc, "# index, min, p25, median, p75, max of the column sums of each sequence's composite product, method\n");
    fprintf(fr, "# index, min, p25, median, p75, max of the row sums of each sequence's composite product, method\n");
    columns(fc, "index min p25 median p75 max method");
    columns(fr, "index min p25 median p75 max method");
    for (int vi = 0; hres_variants[vi]; vi++) {
        int ri = an_rep_run(c, hres_variants[vi]);
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *cn = an_series(r, "/final/cum_spectral_norm");
        if (!an_series(r, "/final/H_res_colsum") || !cn) continue;
        list_add(list, sizeof list, hres_variants[vi]);
        write_sums_fig(c, r, hres_variants[vi], k, nv, 0, fc);
        write_sums_fig(c, r, hres_variants[vi], k, nv, 1, fr);
        char name[64];
        FILE *f;
        snprintf(name, sizeof name, "fig6_cumnorm_%s.dat", hres_variants[vi]);
        size_t d[H5LOG_MAX_RANK + 1];
        if (an_shape(cn, d) == 2 && (f = an_open(c->out, "data", name))) {
            size_t S = d[0], Lc = d[1]; /* [S, Lh] */
            double *v = malloc_check((S + 1) * sizeof *v);
            fprintf(f, "# %s: depth l (sublayers), mean and std over %zu sequences of ||H_l ... H_1||_2\n", r->variant, S);
            columns(f, "depth mean std");
            for (size_t l = 0; l < Lc; l++) {
                size_t cnt = 0;
                for (size_t s = 0; s < S; s++) v[cnt++] = an_series_get(cn, s * Lc + l);
                double mean, sd;
                an_mean_std(v, (int)cnt, &mean, &sd);
                fprintf(f, "%zu %.6g %.6g\n", l + 1, mean, sd);
            }
            free(v);
            an_close(f);
        }
        /* per-token worst deviations per sublayer (log scale in the figure) */
        const h5log_series *dc = an_series(r, "/final/colsum_dev_max"), *dr = an_series(r, "/final/rowsum_dev_max");
        snprintf(name, sizeof name, "fig6_sumdev_%s.dat", hres_variants[vi]);
        if (dc && dr && (f = an_open(c->out, "data", name))) {
            fprintf(f, "# %s: sublayer, max over every token of |column sum - 1|, of |row sum - 1| (per-token H_res)\n",
                    r->variant);
            columns(f, "sublayer colsum_dev_max rowsum_dev_max");
            for (size_t l = 0; l < dc->row_elems; l++)
                fprintf(f, "%zu %.6g %.6g\n", l + 1, an_series_get(dc, l), an_series_get(dr, l));
            an_close(f);
        }
        k++;
    }
    an_close(fc);
    an_close(fr);
    fprintf(meta, "fig6_methods = \"%s\"\n", list);
}

/* ---- Fig 7 left: throughput vs n ---------------------------------------------------- */

static void fig_throughput(an_ctx *c, FILE *meta) {
    char list[256] = "", scale[AN_NAME] = "";
    /* the bench runs' scale (the most common among them); else the main runs' */
    int use_bench = 0;
    for (int i = 0; i < c->rs->n; i++)
        if (c->rs->r[i].bench) { use_bench = 1; snprintf(scale, sizeof scale, "%s", c->rs->r[i].scale); break; }
    if (!use_bench) snprintf(scale, sizeof scale, "%s", c->scale);
    for (int vi = 0; stream_variants[vi]; vi++) {
        double tp[9];
        int have = 0;
        for (int n = 2; n <= 8; n++) {
            double v[64];
            int k = 0;
            for (int i = 0; i < c->rs->n && k < 64; i++) {
                const an_run *r = &c->rs->r[i];
                if (r->bench != use_bench || strcmp(r->scale, scale) || strcmp(r->variant, stream_variants[vi]) || r->n != n)
                    continue;
                v[k++] = an_median_throughput(r);
            }
            double m = NAN;
            if (k) an_mean_std(v, k, &m, NULL);
            tp[n] = m;
            if (isfinite(m)) have++;
        }
        if (!have) continue;
        char name[64];
        snprintf(name, sizeof name, "fig7_tput_%s.dat", stream_variants[vi]);
        FILE *f = an_open(c->out, "data", name);
        if (!f) continue;
        list_add(list, sizeof list, stream_variants[vi]);
        fprintf(f, "# %s at %s: n, training tokens/s (median over steps, mean over runs)\n", stream_variants[vi], scale);
        columns(f, "n tokens_per_s");
        for (int n = 2; n <= 8; n++)
            if (isfinite(tp[n])) fprintf(f, "%d %.6g\n", n, tp[n]);
        an_close(f);
    }
    fprintf(meta, "fig7_methods = \"%s\"\n", list);
    gp_text(meta, "fig7_scale", scale);
}

/* ---- Fig 8: distribution of H_res entries ------------------------------------------- */

static void fig_hist(an_ctx *c, FILE *meta) {
    char list[256] = "";
    static const char *const vs[] = {"hc", "mhc", "mhc_lite", "kromhc", "s2hc", NULL};
    for (int vi = 0; vs[vi]; vi++) {
        int ri = an_rep_run(c, vs[vi]);
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *h = an_series(r, "/final/hist_counts"), *e = an_series(r, "/final/hist_edges");
        if (!h || !e || h->row_rank < 1 || !h->row_dims[h->row_rank - 1]) continue;
        size_t bins = h->row_dims[h->row_rank - 1], layers = h->row_elems / bins;
        double tot = 0;
        double *acc = calloc_check(bins, sizeof *acc);
        for (size_t l = 0; l < layers; l++)
            for (size_t b = 0; b < bins; b++) { acc[b] += an_series_get(h, l * bins + b); tot += an_series_get(h, l * bins + b); }
        /* the entries outside the bins' range (HC's, unbounded) count in the whole as well */
        const h5log_series *out = an_series(r, "/final/hist_outside");
        for (size_t k = 0; out && k < out->row_elems; k++) {
            const double x = an_series_get(out, k);
            if (isfinite(x)) tot += x;
        }
        char name[64];
        snprintf(name, sizeof name, "fig8_%s.dat", vs[vi]);
        FILE *f = an_open(c->out, "data", name);
        if (f && tot > 0) {
            list_add(list, sizeof list, vs[vi]);
            fprintf(f, "# %s: bin centre, fraction of all H_res entries (every token, every sublayer) in the bin\n", r->variant);
            columns(f, "bin_centre fraction");
            for (size_t b = 0; b < bins; b++)
                fprintf(f, "%.4f %.6g\n", 0.5 * (an_series_get(e, b) + an_series_get(e, b + 1)), acc[b] / tot);
        }
        if (f) an_close(f);
        free(acc);
    }
    fprintf(meta, "fig8_methods = \"%s\"\n", list);
}

/* ---- v2 Fig 5: deviation singular values per layer ---------------------------------- */

static void fig_devsv(an_ctx *c, FILE *meta) {
    char list[256] = "";
    int nmax = 0;
    for (int vi = 0; hres_variants[vi]; vi++) {
        int ri = an_rep_run(c, hres_variants[vi]);
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        const h5log_series *d = an_series(r, "/final/dev_sv_mean");
        if (!d || d->row_rank < 2) continue;
        size_t Lh = d->row_dims[0], n = d->row_dims[1];
        char name[64];
        snprintf(name, sizeof name, "figv2_5_%s.dat", hres_variants[vi]);
        FILE *f = an_open(c->out, "data", name);
        if (!f) continue;
        list_add(list, sizeof list, hres_variants[vi]);
        if ((int)n > nmax) nmax = (int)n;
        fprintf(f, "# %s: sublayer, singular values (descending) of H_res_mean - J, J = ones/n\n", r->variant);
        fprintf(f, "%s sublayer", AN_COLUMNS);
        for (size_t k = 0; k < n; k++) fprintf(f, " sv%zu", k + 1);
        fprintf(f, "\n");
        for (size_t l = 0; l < Lh; l++) {
            fprintf(f, "%zu", l + 1);
            for (size_t k = 0; k < n; k++) fprintf(f, " %.6g", an_series_get(d, l * n + k));
            fprintf(f, "\n");
        }
        an_close(f);
    }
    fprintf(meta, "devsv_methods = \"%s\"\ndevsv_n = %d\n", list, nmax);
}

/* ---- Beyond: Jacobian norms ---------------------------------------------------------- */

static void fig_jacobian(an_ctx *c, FILE *meta) {
    FILE *f = an_open(c->out, "data", "beyond_jacobian.dat");
    if (!f) return;
    fprintf(f, "# index, method, full-network ||dX_L/dX_0||_2 mean, std, residual path only mean, std, sequences\n");
    columns(f, "index method full_mean full_std residual_mean residual_std sequences");
    int k = 0;
    for (int i = 0; an_method_order[i]; i++) {
        const char *v = an_method_order[i];
        /* the run every other figure shows of the method (an_rep_run: the primary n, a
           finished one first); the ablation's variants may come from another corpus */
        int ri = an_rep_run(c, v), idx[AN_CELL_CAP], found = 0;
        if (ri < 0 && (!strcmp(v, "identity") || !strncmp(v, "orthogonal", 10) || !strncmp(v, "s2hc", 4))) {
            found = c->n ? an_cell_runs(c->rs, c->scale, NULL, v, c->n, idx, AN_CELL_CAP) : 0;
            if (!found) found = an_cell_runs(c->rs, c->scale, NULL, v, 0, idx, AN_CELL_CAP);
            if (found) ri = first_finished(c->rs, idx, found);
        }
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        size_t nf = 0, nr = 0;
        double *jf = an_series_copy(r, "/final/jacobian_norm", &nf), *jr = an_series_copy(r, "/final/jacobian_norm_residual", &nr);
        if (jf && jr && nf) {
            double mf, sf, mr, sr;
            an_mean_std(jf, (int)nf, &mf, &sf);
            an_mean_std(jr, (int)nr, &mr, &sr);
            char lab[64];
            an_label(v, lab, sizeof lab);
            fprintf(f, "%d %s %.6g %.6g %.6g %.6g %zu\n", k++, lab, mf, sf, mr, sr, nf);
        }
        free(jf);
        free(jr);
    }
    an_close(f);
    fprintf(meta, "jac_rows = %d\n", k);
}

/* ---- Beyond: what the mixing is worth (s2hc ablate --record) ------------------------- */

/* data/beyond_ablation.dat: for each method of the figures' cell (scale, corpus, n; rc at
 * n = 1) whose runs hold /ablate (s2hc ablate --record), a row per sublayer l (from 1) and
 * the row l = 0 for every sublayer at once: the rise in validation loss with H_res := I,
 * with H_res := its token average, and with the sublayer's output left out (branch, rc's
 * one ablation), mean and std over the runs that measured it (their seeds), and how many.
 * A record of the fifty-fifth session has no branch row (NaN here). meta.gp:
 * ablate_methods (the variants with rows, drawn in that order), ablate_Lh,
 * ablate_all<j>_<p>: method j's row 0 in panel p (1: identity, 2: mean, 3: branch; NaN:
 * none), and ablate_in<p>: the j (from 1) of the methods with a number in panel p, the
 * lines it draws (a line of no point would be a gnuplot warning), and ablate_mean_from:
 * where the mean panel's matrices were averaged, "train" (every run's record
 * `--mean-from train`: held-out sequences), "scored" (every one over the sequences it
 * scored; a record without the attribute is one), "mixed", or "" (no mean measured).
 * plots/beyond_ablation.gp draws the three panels. */
static void fig_ablate(an_ctx *c, FILE *meta) {
    enum { PANELS = 3 };
    static const int row_of[PANELS] = {0, 1, 3}; /* /ablate's rows: identity, mean, (uniform,) branch */
    char list[512] = "", in[PANELS][128] = {"", "", ""};
    int Lh = 0, nm_count = 0, mean_train = 0, mean_scored = 0;
    FILE *f = an_open(c->out, "data", "beyond_ablation.dat");
    if (!f) return;
    fprintf(f, "# method, sublayer (from 1; 0: every sublayer at once), rise in validation loss with H_res := I mean "
               "and std over the runs, with H_res := its token average mean and std, with the sublayer's output "
               "left out mean and std, runs (s2hc ablate --record)\n");
    columns(f, "method sublayer identity_mean identity_std mean_mean mean_std branch_mean branch_std runs");
    for (int vi = 0; an_method_order[vi]; vi++) {
        const char *v = an_method_order[vi];
        const int is_rc = !strcmp(v, "rc");
        int idx[AN_CELL_CAP], have[AN_CELL_CAP], k = 0, cols = 0;
        const h5log_series *ds[AN_CELL_CAP]; /* have[j]'s /ablate/delta */
        const int found = an_cell_runs(c->rs, c->scale, c->corpus, v, is_rc ? 0 : c->n, idx, AN_CELL_CAP);
        for (int j = 0; j < found; j++) {
            const h5log_series *d = an_series(&c->rs->r[idx[j]], "/ablate/delta");
            if (!d || d->row_rank != 2 || (d->row_dims[0] != 3 && d->row_dims[0] != 4) || d->row_dims[1] < 2) continue;
            if (k && (int)d->row_dims[1] != cols) continue; /* one model size per cell */
            cols = (int)d->row_dims[1];
            ds[k] = d;
            have[k++] = idx[j];
            if (!isnan(an_series_get(d, (size_t)row_of[1] * cols + cols - 1))) { /* the mean measured */
                const char *mf = h5log_get_attr_str(&c->rs->r[idx[j]].log, "/ablate", "mean_from");
                if (mf && !strcmp(mf, "train")) mean_train++;
                else mean_scored++;
            }
        }
        if (!k || (!is_rc && c->rs->r[have[0]].n < 2)) continue;
        int any[PANELS] = {0, 0, 0};
        for (int l = 0; l < cols; l++) {
            const int col = l ? l - 1 : cols - 1; /* the file's column: sublayer l - 1, or all */
            double m[PANELS], sd[PANELS];
            int runs = 0;
            for (int p = 0; p < PANELS; p++) {
                double v_[AN_CELL_CAP];
                for (int j = 0; j < k; j++)
                    v_[j] = (size_t)row_of[p] < ds[j]->row_dims[0] ? an_series_get(ds[j], (size_t)row_of[p] * cols + col)
                                                                   : NAN;
                const int ok = an_mean_std(v_, k, &m[p], &sd[p]);
                if (ok > runs) runs = ok;
                if (!isnan(m[p])) any[p] = 1;
                else sd[p] = NAN; /* not measured: no spread either */
            }
            fprintf(f, "%s %d %.6g %.6g %.6g %.6g %.6g %.6g %d\n", v, l, m[0], sd[0], m[1], sd[1], m[2], sd[2], runs);
            if (l == 0) /* the key's "all" of each panel (gnuplot's NaN for none) */
                for (int p = 0; p < PANELS; p++) {
                    if (isnan(m[p])) fprintf(meta, "ablate_all%d_%d = NaN\n", nm_count + 1, p + 1);
                    else fprintf(meta, "ablate_all%d_%d = %.6g\n", nm_count + 1, p + 1, m[p]);
                }
        }
        nm_count++;
        for (int p = 0; p < PANELS; p++)
            if (any[p])
                snprintf(in[p] + strlen(in[p]), sizeof in[p] - strlen(in[p]), "%s%d", in[p][0] ? " " : "", nm_count);
        if (strlen(list) + strlen(v) + 2 < sizeof list) snprintf(list + strlen(list), sizeof list - strlen(list),
                                                                  "%s%s", list[0] ? " " : "", v);
        if (cols - 1 > Lh) Lh = cols - 1;
    }
    an_close(f);
    fprintf(meta, "ablate_methods = \"%s\"\nablate_Lh = %d\n", list, Lh);
    fprintf(meta, "ablate_mean_from = \"%s\"\n", mean_train && mean_scored ? "mixed" : mean_train ? "train"
                                                  : mean_scored ? "scored" : "");
    for (int p = 0; p < PANELS; p++) fprintf(meta, "ablate_in%d = \"%s\"\n", p + 1, in[p]);
}

/* ---- the residual matrices across depth and n (data/hres_layers_seeds.dat, tables.c) -- */

/* A run hres_depth draws: of the figures' scale and corpus, hyper-connected (2 <= n <=
 * PROBE_MAX_N), with final-probe matrices, trained for `steps` (0: any). */
static int hres_depth_run(const an_ctx *c, const an_run *r, int steps) {
    return !r->bench && !strcmp(r->scale, c->scale) && !strcmp(r->corpus, c->corpus) && r->n >= 2 &&
           r->n <= PROBE_MAX_N && (!steps || r->steps == steps) && an_series(r, "/final/H_res_mean");
}

/* Which methods, stream counts and optimisation recipes of the figures' cell have
 * final-probe matrices, and the training length drawn (the longest): plots/hres_depth.gp
 * draws, one panel per n, each method's ||H_l - I||_2 and ||H_l ... H_0||_2 against the
 * sublayer, mean ± std over seeds, a line per method and recipe, from the rows of
 * data/hres_layers_seeds.dat of that scale, corpus and length. meta.gp: the recipes'
 * names (hres_depth_recipe<q>, as the table residual names them) and words (the .dat's
 * recipe column, hres_depth_rword<q>), and per n the lines "method:q" there are data for. */
static void fig_hres_depth(an_ctx *c, FILE *meta) {
    char list[256] = "", ns[64] = "";
    int steps = 0, have_n[PROBE_MAX_N + 1] = {0};
    for (int i = 0; i < c->rs->n; i++)
        if (hres_depth_run(c, &c->rs->r[i], 0) && c->rs->r[i].steps > steps) steps = c->rs->r[i].steps;
    for (int vi = 0; an_method_order[vi]; vi++) {
        int found = 0;
        for (int i = 0; i < c->rs->n; i++) {
            const an_run *r = &c->rs->r[i];
            if (!hres_depth_run(c, r, steps) || strcmp(r->variant, an_method_order[vi])) continue;
            have_n[r->n] = 1;
            found = 1;
        }
        if (found) list_add(list, sizeof list, an_method_order[vi]);
    }
    for (int n = 2; n <= PROBE_MAX_N; n++)
        if (have_n[n]) snprintf(ns + strlen(ns), sizeof ns - strlen(ns), "%s%d", ns[0] ? " " : "", n);
    /* the optimisation recipes among the runs drawn, learning rates ascending (a line each),
       named by their fields that differ among the cell's runs, as the table residual does */
    int *drawn = malloc_check((size_t)(c->rs->n > 0 ? c->rs->n : 1) * sizeof *drawn), nd = 0;
    for (int i = 0; i < c->rs->n; i++)
        if (hres_depth_run(c, &c->rs->r[i], steps)) drawn[nd++] = i;
    enum { RMAX = 8 };
    const char *recs[RMAX];
    const int nrec = an_recipes(c->rs, drawn, nd, recs, RMAX);
    if (nrec > RMAX)
        fprintf(c->log, "s2hc analyze: hres_depth: %d optimisation recipes, the figure draws the first %d (learning rates "
                        "ascending); the table residual has them all\n", nrec, RMAX);
    const int R = nrec < RMAX ? nrec : RMAX;
    int cell[256], ncell = an_cell_runs(c->rs, c->scale, c->corpus, NULL, 0, cell, 256);
    fprintf(meta, "hres_depth_methods = \"%s\"\nhres_depth_n = \"%s\"\nhres_depth_steps = %d\nhres_depth_recipes = %d\n",
            list, ns, steps, R);
    c->cap_hres_depth[0] = '\0';
    if (R > 1)
        snprintf(c->cap_hres_depth, sizeof c->cap_hres_depth, "The runs were trained with %d optimisation recipes: a line "
                 "per method and recipe (each recipe dashed its own way), named in the key by its fields that differ, as "
                 "the table residual names them:", nrec);
    for (int q = 0; q < R; q++) {
        char name[200], word[200];
        an_recipe_name(c->rs, cell, ncell, recs[q], name, sizeof name);
        an_recipe_word(name, word, sizeof word);
        char var[48];
        snprintf(var, sizeof var, "hres_depth_recipe%d", q + 1);
        gp_text(meta, var, name);
        fprintf(meta, "hres_depth_rword%d = \"%s\"\n", q + 1, word);
        if (R > 1) {
            const size_t o = strlen(c->cap_hres_depth);
            snprintf(c->cap_hres_depth + o, sizeof c->cap_hres_depth - o, "%s %s", q ? "," : "", name);
        }
    }
    if (R > 1) {
        const size_t o = strlen(c->cap_hres_depth);
        snprintf(c->cap_hres_depth + o, sizeof c->cap_hres_depth - o, "%s.",
                 nrec > R ? " (the first of them; the table residual has every one)" : "");
    }
    /* the methods of each n (a panel plots only those: mhc_lite has no n = 8 in a CPU grid),
       and the lines, method and recipe, it draws */
    for (int n = 2; n <= PROBE_MAX_N; n++) {
        if (!have_n[n]) continue;
        char ml[256] = "", lines[1024] = "";
        for (int vi = 0; an_method_order[vi]; vi++) {
            int has = 0;
            for (int q = 0; q < R; q++) {
                int hq = 0;
                for (int j = 0; j < nd && !hq; j++) {
                    const an_run *r = &c->rs->r[drawn[j]];
                    hq = r->n == n && !strcmp(r->variant, an_method_order[vi]) && !strcmp(r->recipe, recs[q]);
                }
                if (!hq) continue;
                char w[48];
                snprintf(w, sizeof w, "%s:%d", an_method_order[vi], q + 1);
                list_add(lines, sizeof lines, w);
                has = 1;
            }
            if (has) list_add(ml, sizeof ml, an_method_order[vi]);
        }
        fprintf(meta, "hres_depth_methods_n%d = \"%s\"\nhres_depth_lines_n%d = \"%s\"\n", n, ml, n, lines);
    }
    free(drawn);
}

/* ---- validation loss against depth (a sweep of model.n_layer) ------------------------- */

/* Two runs of one depth series: alike but for their depth (width, heads, context,
 * vocabulary and the scale's other marks, +nobias, +erf, +init, +ext), on one corpus for
 * one training length. */
static int same_but_depth(const an_run *a, const an_run *b) {
    const char *sa = strchr(a->scale, '+'), *sb = strchr(b->scale, '+');
    return !a->bench && !b->bench && a->n_embd == b->n_embd && a->n_head == b->n_head &&
           a->block_size == b->block_size && a->vocab == b->vocab && a->steps == b->steps &&
           !strcmp(a->corpus, b->corpus) && !strcmp(sa ? sa : "", sb ? sb : "");
}

/* The distinct n_layer of the runs idx[0..k), ascending, into d (at most cap); the count. */
static int depths_of(const an_runset *rs, const int *idx, int k, int *d, int cap) {
    int m = 0;
    for (int i = 0; i < k; i++) {
        const int v = rs->r[idx[i]].n_layer;
        int at = 0;
        while (at < m && d[at] < v) at++;
        if ((at < m && d[at] == v) || m == cap) continue;
        memmove(d + at + 1, d + at, (size_t)(m - at) * sizeof *d);
        d[at] = v;
        m++;
    }
    return m;
}

/* The most recipes (panels) and depths loss_depth draws. */
#define AN_DEPTH_RECIPES 6
#define AN_DEPTHS 32

/* data/loss_depth.dat: the final validation loss of each method against the number of
 * blocks, where two or more scales of the runs differ in depth alone (a sweep of
 * model.n_layer, experiments/depth.yaml): of the series with the most depths (ties: the
 * one of the figures' scale and corpus, else the first read), a row per recipe, method
 * and depth: the mean over the finished runs (seeds) and its 95 % Student t interval
 * (NaN with one run). Hyper-connected methods at the series' most common stream count
 * (ties: 4, else the smaller), RC (one stream) beside them. plots/loss_depth.gp draws a
 * panel per recipe. Nothing is written (and the report draws nothing) without such a
 * series. */
static void fig_loss_depth(an_ctx *c, FILE *meta) {
    const an_runset *rs = c->rs;
    int best = -1, best_nd = 1, best_primary = 0;
    int *g = malloc_check((size_t)(rs->n > 0 ? rs->n : 1) * sizeof *g), d[AN_DEPTHS];
    c->depth_scales = 0;
    c->depth_scale_names[0] = c->cap_loss_depth[0] = '\0';
    for (int i = 0; i < rs->n; i++) {
        int first = !rs->r[i].bench, k = 0, primary = 0;
        for (int j = 0; j < i && first; j++) first = !same_but_depth(&rs->r[j], &rs->r[i]);
        if (!first) continue; /* its series was counted at its first run */
        for (int j = 0; j < rs->n; j++)
            if (same_but_depth(&rs->r[j], &rs->r[i])) {
                g[k++] = j;
                primary |= !strcmp(rs->r[j].scale, c->scale) && !strcmp(rs->r[j].corpus, c->corpus);
            }
        const int nd = depths_of(rs, g, k, d, AN_DEPTHS);
        if (nd > best_nd || (nd == best_nd && nd > 1 && primary && !best_primary)) {
            best = i;
            best_nd = nd;
            best_primary = primary;
        }
    }
    if (best < 0) { /* no depth sweep: no data, meta says so (the report leaves the figure out) */
        fprintf(meta, "loss_depth_recipes = 0\nloss_depth_depths = \"\"\n");
        free(g);
        return;
    }
    int k = 0;
    for (int j = 0; j < rs->n; j++)
        if (same_but_depth(&rs->r[j], &rs->r[best])) g[k++] = j;
    const int nd = depths_of(rs, g, k, d, AN_DEPTHS);
    /* the stream count of the series' hyper-connection runs (an_pick_primary's rule) */
    int count[65] = {0};
    for (int i = 0; i < k; i++)
        if (rs->r[g[i]].n > 1 && rs->r[g[i]].n <= 64) count[rs->r[g[i]].n]++;
    const int gn = most_runs_n(count);
    int other_n = 0;
    for (int i = 0; i < k; i++) other_n += rs->r[g[i]].n != 1 && rs->r[g[i]].n != gn;
    const an_run *r0 = &rs->r[g[0]];
    const char *recs[AN_DEPTH_RECIPES + 1];
    const int nrec = an_recipes(rs, g, k, recs, AN_DEPTH_RECIPES + 1), R = nrec < AN_DEPTH_RECIPES ? nrec : AN_DEPTH_RECIPES;
    if (nrec > AN_DEPTH_RECIPES)
        fprintf(c->log, "s2hc analyze: loss_depth: more than %d optimisation recipes, the figure draws the first %d "
                        "(learning rates ascending); the table recipes has them all\n", AN_DEPTH_RECIPES, AN_DEPTH_RECIPES);
    /* the scales of the depths, fewest blocks first */
    for (int q = 0; q < nd; q++)
        for (int i = 0; i < k; i++)
            if (rs->r[g[i]].n_layer == d[q]) {
                const size_t o = strlen(c->depth_scale_names);
                snprintf(c->depth_scale_names + o, sizeof c->depth_scale_names - o, "%s%s", q ? ", " : "", rs->r[g[i]].scale);
                break;
            }
    c->depth_scales = nd;
    FILE *f = an_open(c->out, "data", "loss_depth.dat");
    if (!f) { free(g); return; }
    fprintf(f, "# final validation loss against the number of blocks (model.n_layer; scales %s), C = %d, T = %d, "
               "trained on %s for %d steps: per optimisation recipe (recipe: its fields that differ, as one word, '-' "
               "with one), method and depth, the runs, those finished, and over the finished the mean, its sample std "
               "and 95 %% Student t interval (NaN with one run); hyper-connections at n = %d, RC at 1\n",
            c->depth_scale_names, r0->n_embd, r0->block_size, r0->corpus, r0->steps, gn);
    columns(f, "recipe_index recipe method n n_layer scale runs finished val_loss val_loss_std ci_lo ci_hi");
    size_t co = (size_t)snprintf(c->cap_loss_depth, sizeof c->cap_loss_depth,
                                 "%d depths (%s), C = %d, T = %d, trained on %s for %d steps, hyper-connections at "
                                 "n = %d; mean validation loss from %d to %d blocks", nd, c->depth_scale_names,
                                 r0->n_embd, r0->block_size, r0->corpus, r0->steps, gn, d[0], d[nd - 1]);
    int kmin = 1 << 30, kmax = 0, unfinished = 0;
    fprintf(meta, "loss_depth_recipes = %d\nloss_depth_depths = \"", R);
    for (int q = 0; q < nd; q++) fprintf(meta, "%s%d", q ? " " : "", d[q]);
    char where[300];
    snprintf(where, sizeof where, "C = %d, T = %d, %s, %d steps", r0->n_embd, r0->block_size, r0->corpus, r0->steps);
    fprintf(meta, "\"\nloss_depth_n = %d\n", gn);
    gp_text(meta, "loss_depth_where", where);
    for (int q = 0; q < R; q++) {
        char name[200], word[200], ml[256] = "";
        an_recipe_name(rs, g, k, recs[q], name, sizeof name);
        an_recipe_word(name, word, sizeof word);
        int nm = 0; /* the caption: "...blocks: lr 0.003: RC 2.520 → 2.564, HC ...; lr 0.03: ..." */
        if (R > 1 && co < sizeof c->cap_loss_depth)
            co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, "%s %s:", q ? ";" : ":", name);
        for (int vi = 0; an_method_order[vi]; vi++) {
            const char *v = an_method_order[vi];
            double first = NAN, last = NAN;
            int rows = 0;
            for (int q2 = 0; q2 < nd; q2++) {
                double val[AN_CELL_CAP];
                int runs = 0, fin = 0, rn = 0;
                const char *scale = "";
                for (int i = 0; i < k; i++) {
                    const an_run *r = &rs->r[g[i]];
                    if (strcmp(r->variant, v) || r->n_layer != d[q2] || (r->n != 1 && r->n != gn) || strcmp(r->recipe, recs[q]))
                        continue;
                    scale = r->scale;
                    rn = r->n;
                    runs++;
                    const double x = an_final_val_loss(r);
                    if (!strcmp(r->status, "finished") && isfinite(x) && fin < AN_CELL_CAP) val[fin++] = x;
                }
                unfinished += runs - fin;
                if (!fin) continue; /* no finished run at this depth: no point */
                double m, sd, lo = NAN, hi = NAN;
                an_mean_std(val, fin, &m, &sd);
                if (fin > 1) {
                    const double h = an_t_crit95(fin - 1) * sd / sqrt((double)fin);
                    lo = m - h;
                    hi = m + h;
                }
                fprintf(f, "%d %s %s %d %d %s %d %d %.6g", q + 1, word, v, rn, d[q2], scale, runs, fin, m);
                if (fin > 1) fprintf(f, " %.6g %.6g %.6g\n", sd, lo, hi);
                else fprintf(f, " NaN NaN NaN\n");
                if (!rows++) first = m;
                last = m;
                if (fin < kmin) kmin = fin;
                if (fin > kmax) kmax = fin;
            }
            if (!rows) continue;
            fprintf(f, "\n"); /* gnuplot: one line per method and recipe */
            list_add(ml, sizeof ml, v);
            if (co < sizeof c->cap_loss_depth)
                co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, "%s %s %.3f → %.3f",
                                       nm ? "," : R > 1 ? "" : ":", an_pretty(v), first, last);
            nm++;
        }
        char var[48];
        snprintf(var, sizeof var, "loss_depth_recipe%d", q + 1);
        gp_text(meta, var, name);
        fprintf(meta, "loss_depth_rword%d = \"%s\"\nloss_depth_methods_r%d = \"%s\"\n", q + 1, word, q + 1, ml);
    }
    an_close(f);
    if (co < sizeof c->cap_loss_depth && kmax > 0) {
        char per[32];
        if (kmin == kmax) snprintf(per, sizeof per, "%d", kmin);
        else snprintf(per, sizeof per, "%d–%d", kmin, kmax);
        co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, ". Finished runs (seeds) per point: %s", per);
    }
    if (co < sizeof c->cap_loss_depth && unfinished)
        co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, "; %d run%s that did not finish left out",
                               unfinished, unfinished == 1 ? "" : "s");
    if (co < sizeof c->cap_loss_depth && other_n)
        co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, "; %d run%s at another n left out (the "
                               "table recipes and Table 1 have them)", other_n, other_n == 1 ? "" : "s");
    if (co < sizeof c->cap_loss_depth && nrec > AN_DEPTH_RECIPES)
        co += (size_t)snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, "; the first %d recipes drawn",
                               AN_DEPTH_RECIPES);
    if (co < sizeof c->cap_loss_depth) snprintf(c->cap_loss_depth + co, sizeof c->cap_loss_depth - co, ".");
    free(g);
}

/* ---- loss curves (context for Table 1) ---------------------------------------------- */

static void fig_loss(an_ctx *c, FILE *meta) {
    char list[256] = "", labels[512] = "";
    for (int i = 0; an_method_order[i]; i++) {
        const char *v = an_method_order[i];
        int ri = an_rep_run(c, v); /* the run the captions and the other figures describe */
        if (ri >= 0 && strcmp(c->rs->r[ri].corpus, c->corpus)) ri = -1; /* another corpus's losses: another text */
        if (ri < 0) continue;
        const an_run *r = &c->rs->r[ri];
        size_t n = 0, ns = 0;
        double *loss = an_series_copy(r, "/train/loss", &n), *st = an_series_copy(r, "/train/step", &ns);
        if (ns < n) n = ns; /* rows of /train/step and /train/loss pair up (a file from elsewhere may differ) */
        if (!loss || !st || !n) { free(loss); free(st); continue; }
        char name[64];
        snprintf(name, sizeof name, "loss_%s.dat", v);
        FILE *f = an_open(c->out, "data", name);
        if (f) {
            list_add(list, sizeof list, v);
            char lab[64];
            an_label(v, lab, sizeof lab);
            list_add(labels, sizeof labels, lab);
            size_t w = n / 20 > 1 ? n / 20 : 1;
            fprintf(f, "# %s: step, train loss, moving average over %zu steps\n", v, w);
            columns(f, "step train_loss moving_average");
            double acc = 0;
            for (size_t k = 0; k < n; k++) {
                acc += loss[k];
                if (k >= w) acc -= loss[k - w];
                size_t cnt = k + 1 < w ? k + 1 : w;
                fprintf(f, "%.0f %.6g %.6g\n", st[k], loss[k], acc / (double)cnt);
            }
            an_close(f);
        }
        free(loss);
        free(st);
    }
    fprintf(meta, "loss_methods = \"%s\"\nloss_labels = \"%s\"\n", list, labels);
}

static void csv_put(FILE *f, const char *s, size_t n, int first) {
    if (!first) fputc(',', f);
    csv_field_putn(f, s, n);
}

/* One line's whitespace-separated words as a CSV row. */
static void csv_words(FILE *f, const char *s, const char *end) {
    int first = 1;
    while (s < end) {
        while (s < end && (*s == ' ' || *s == '\t')) s++;
        const char *w = s;
        while (s < end && *s != ' ' && *s != '\t') s++;
        if (s > w) { csv_put(f, w, (size_t)(s - w), first); first = 0; }
    }
    fputc('\n', f);
}

int an_write_csvs(const char *out) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/data", out);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int made = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 4, ".dat") || !an_made_has("data", e->d_name)) continue;
        char path[1400], name[300];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t len = 0;
        char *text = read_text_file(path, &len);
        if (!text) continue;
        const char *cols = strstr(text, AN_COLUMNS " ");
        if (cols && (cols == text || cols[-1] == '\n')) {
            snprintf(name, sizeof name, "%.*s.csv", (int)(n - 4), e->d_name);
            FILE *f = an_open(out, "data", name);
            if (f) {
                const char *h = cols + strlen(AN_COLUMNS);
                csv_words(f, h, strchr(h, '\n') ? strchr(h, '\n') : h + strlen(h));
                for (const char *l = text; *l;) {
                    const char *nl = strchr(l, '\n'), *end = nl ? nl : l + strlen(l);
                    if (*l != '#' && end > l + strspn(l, " \t")) csv_words(f, l, end);
                    l = nl ? nl + 1 : end;
                }
                an_close(f);
                made++;
            }
        }
        free(text);
    }
    closedir(d);
    return made;
}

int an_write_figures(an_ctx *c) {
    FILE *meta = an_open(c->out, "data", "meta.gp");
    if (!meta) return -1;
    fprintf(meta, "# written by s2hc analyze: what the figure scripts draw (lists of methods with data)\n");
    gp_text(meta, "scale", c->scale);
    gp_text(meta, "corpus", c->corpus);
    gp_string(meta, "scale_id", c->scale, 0);
    gp_string(meta, "corpus_id", c->corpus, 0);
    fig_heatmaps(c, meta);
    fig_ood(c, meta);
    fig_params(c, meta);
    fig_rowmax(c, meta);
    fig_cos(c, meta);
    fig_grad(c, meta);
    fig_colsums(c, meta);
    fig_throughput(c, meta);
    fig_hist(c, meta);
    fig_devsv(c, meta);
    fig_jacobian(c, meta);
    fig_ablate(c, meta);
    fig_hres_depth(c, meta);
    fig_loss_depth(c, meta);
    fig_loss(c, meta);
    an_close(meta);
    return 0;
}
