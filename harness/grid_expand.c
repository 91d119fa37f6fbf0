/* grid_expand.c: a grid's points (grid_expand): the product of the sweep, include
 * entries, exclude entries, overrides and pins, each point's config resolved and
 * validated, its name from the template; the swept keys and out-of-domain corpora over them.
 */
#include "grid_internal.h"
#include "presets.h"
#include <ctype.h>
#include <string.h>

#define GRID_MAX_POINTS 100000   /* a typo guard: a product larger than this is refused */

static int apply_kv(const grid_spec *g, s2hc_config *c, const grid_kv *kv) {
    char why[512];
    if (grid_set_quiet(c, kv->key, kv->val, why, sizeof why) == 0) return 0;
    grid_err(kv->line ? g->path : "--set", kv->line, kv->col, kv->key, "%s", why);
    return 2;
}

static int match(const grid_match *m, const s2hc_config *c, const char *preset) {
    for (int k = 0; k < m->n; k++) {
        int any = 0;
        for (int v = 0; v < m->keys[k].n && !any; v++)
            any = grid_same_value(c, preset, m->keys[k].key, m->keys[k].vals[v].val);
        if (!any) return 0;
    }
    return 1;
}

/* The resolved config of a point without its name: base, preset, set:, the point's
 * values, overrides, command-line pins. */
static int resolve(const grid_spec *g, const s2hc_config *base, grid_point *p) {
    p->cfg = *base;
    copy_str(p->preset, sizeof p->preset, g->preset);
    for (int i = 0; i < p->nvals; i++)
        if (!strcmp(p->vals[i].key, "preset")) copy_str(p->preset, sizeof p->preset, p->vals[i].val);
    if (p->preset[0] && preset_apply(&p->cfg, p->preset) != 0) {
        grid_err(g->path, 0, 0, "preset", "unknown preset '%s'", p->preset);
        return 2;
    }
    for (int i = 0; i < g->nset; i++)
        if (apply_kv(g, &p->cfg, &g->set[i])) return 2;
    for (int i = 0; i < p->nvals; i++)
        if (strcmp(p->vals[i].key, "preset") && apply_kv(g, &p->cfg, &p->vals[i])) return 2;
    config_resolve(&p->cfg); /* an override's when: sees the min_lr the point trains with */
    for (int o = 0; o < g->noverride; o++)
        if (match(&g->override[o].when, &p->cfg, p->preset))
            for (int i = 0; i < g->override[o].nset; i++)
                if (apply_kv(g, &p->cfg, &g->override[o].set[i])) return 2;
    for (int i = 0; i < g->npin; i++)
        if (apply_kv(g, &p->cfg, &g->pin[i])) return 2;
    config_resolve(&p->cfg);
    return 0;
}

/* A template value made fit for a directory name: lists joined by '+', anything but
 * [A-Za-z0-9_.+-] becomes '_'. */
static void name_piece(const char *v, char *out, size_t n) {
    char u[GRID_VAL];
    grid_unquote(v, u, sizeof u);
    size_t j = 0;
    for (size_t i = 0; u[i] && j + 1 < n; i++) {
        char ch = u[i];
        if (ch == '[' || ch == ']' || ch == ' ') continue;
        if (ch == ',') ch = '+';
        out[j++] = (isalnum((unsigned char)ch) || strchr("_.+-", ch)) ? ch : '_';
    }
    out[j] = '\0';
}

static int make_name(const grid_spec *g, grid_point *p) {
    char *y = config_to_yaml(&p->cfg), buf[512];
    size_t j = 0;
    for (const char *t = g->name_tmpl; *t && j + 1 < sizeof buf; t++) {
        if (*t != '{') { buf[j++] = *t; continue; }
        const char *e = strchr(t, '}');
        char k[GRID_KEY], v[GRID_VAL], piece[GRID_VAL];
        snprintf(k, sizeof k, "%.*s", (int)(e - t - 1), t + 1);
        if (!strcmp(k, "preset")) copy_str(v, sizeof v, p->preset[0] ? p->preset : "none");
        else if (!strcmp(k, "index")) snprintf(v, sizeof v, "%d", p->index);
        else if (grid_flat_get(y, k, v, sizeof v) != 0) v[0] = '\0';
        name_piece(v, piece, sizeof piece);
        j += (size_t)snprintf(buf + j, sizeof buf - j, "%s", piece);
        if (j >= sizeof buf) j = sizeof buf - 1;
        t = e;
    }
    buf[j] = '\0';
    free(y);
    /* the template's own text (a space, a '/', a leading '-') is refused at name:'s line,
       as the values it takes in are made fit by name_piece */
    char why[160];
    if (strlen(buf) >= sizeof p->name || !buf[0] || config_name_check(buf, why, sizeof why) < 0) {
        grid_err(g->path, g->name_line, g->name_col, NULL, "name: point %d gets the name '%s': %s", p->index, buf,
             !buf[0] ? "empty" : strlen(buf) >= sizeof p->name ? "too long (at most 63 characters)"
             : "use letters, digits and _ . + - (not starting with . or -): run names are folder names");
        return 2;
    }
    copy_str(p->name, sizeof p->name, buf);
    copy_str(p->cfg.name, sizeof p->cfg.name, buf);
    copy_str(p->cfg.out_dir, sizeof p->cfg.out_dir, g->out);
    return 0;
}

/* train.init_from may name another run by the point's values, as the name template does
 * ("runs/base/{residual.method}-s{train.seed}/model.safetensors"): each {key} becomes the
 * point's resolved value of a config key (or {preset}), made fit for a name as there. */
static int fill_init_from(const grid_spec *g, grid_point *p) {
    if (!strchr(p->cfg.init_from, '{')) return 0;
    char tmpl[sizeof p->cfg.init_from], buf[sizeof p->cfg.init_from], *y = config_to_yaml(&p->cfg);
    copy_str(tmpl, sizeof tmpl, p->cfg.init_from);
    size_t j = 0;
    int rc = 0;
    for (const char *t = tmpl; *t && !rc; t++) {
        if (*t != '{') {
            if (j + 1 < sizeof buf) buf[j] = *t;
            j++;
            continue;
        }
        const char *e = strchr(t, '}');
        char k[GRID_KEY], v[GRID_VAL], piece[GRID_VAL];
        if (!e || e - t - 1 <= 0 || (size_t)(e - t - 1) >= sizeof k) {
            grid_err(g->path, 0, 0, "train.init_from", "point %d: '%s': a '{' without its key and '}'", p->index, tmpl);
            rc = 2;
            break;
        }
        snprintf(k, sizeof k, "%.*s", (int)(e - t - 1), t + 1);
        if (!strcmp(k, "preset")) copy_str(v, sizeof v, p->preset[0] ? p->preset : "none");
        else if (!config_key_known(k) || !strcmp(k, "train.init_from") || grid_flat_get(y, k, v, sizeof v) != 0) {
            grid_err(g->path, 0, 0, "train.init_from", "point %d: '%s': {%s} is not a config key whose value can be put "
                     "in the path (see `s2hc config`)", p->index, tmpl, k);
            rc = 2;
            break;
        }
        name_piece(v, piece, sizeof piece);
        for (const char *c = piece; *c; c++, j++)
            if (j + 1 < sizeof buf) buf[j] = *c;
        t = e;
    }
    if (!rc && j + 1 > sizeof buf) {
        grid_err(g->path, 0, 0, "train.init_from", "point %d: '%s' makes a path of %zu bytes, longer than %zu", p->index,
                 tmpl, j, sizeof buf - 1);
        rc = 2;
    }
    if (!rc) {
        buf[j] = '\0';
        copy_str(p->cfg.init_from, sizeof p->cfg.init_from, buf);
    }
    free(y);
    return rc;
}

/* Describe a point's own values: "residual.method=hc train.seed=1". */
void grid_point_values_text(const grid_point *p, char *out, size_t n) {
    size_t j = 0;
    out[0] = '\0';
    for (int i = 0; i < p->nvals && j < n; i++)
        j += (size_t)snprintf(out + j, n - j, "%s%s=%s", i ? " " : "", p->vals[i].key, p->vals[i].val);
}

/* Append the points of one block (product, last key fastest). */
static int expand_block(const grid_spec *g, const s2hc_config *base, const grid_block *b, int include, int empty_ok,
                        grid_point **pts, int *np) {
    long total = 1;
    for (int a = 0; a < b->n; a++) {
        total *= b->axes[a].n;
        if (total > GRID_MAX_POINTS) {
            grid_err(g->path, b->line, b->col, NULL, "more than %d points: is a list too long?", GRID_MAX_POINTS);
            return 2;
        }
    }
    if (b->n == 0 && !empty_ok) total = 0;
    for (long idx = 0; idx < total; idx++) {
        grid_point p;
        memset(&p, 0, sizeof p);
        p.include = include;
        p.nvals = b->n;
        p.vals = calloc_check((size_t)(b->n ? b->n : 1), sizeof *p.vals);
        long r = idx;
        for (int a = b->n - 1; a >= 0; a--) {
            p.vals[a] = b->axes[a].vals[r % b->axes[a].n];
            r /= b->axes[a].n;
        }
        if (resolve(g, base, &p)) { free(p.vals); return 2; }
        int excluded = 0;
        for (int e = 0; include < 0 && e < g->nexclude && !excluded; e++)
            excluded = match(&g->exclude[e], &p.cfg, p.preset);
        if (excluded) { free(p.vals); continue; }
        p.index = *np;
        if (fill_init_from(g, &p) || make_name(g, &p)) { free(p.vals); return 2; }
        char src[CFG_PATH + 160];
        snprintf(src, sizeof src, "%s: point %d (%s)", g->path, p.index, p.name);
        if (config_validate(&p.cfg, src) || config_check_ood(&p.cfg, src)) {
            char v[1024];
            grid_point_values_text(&p, v, sizeof v);
            int own_preset = 0;
            for (int i = 0; i < p.nvals; i++) own_preset |= !strcmp(p.vals[i].key, "preset");
            fprintf(stderr, "  the point's values: %s%s%s\n", v[0] ? v : "(none)",
                    p.preset[0] && !own_preset ? "; the grid's preset " : "", own_preset ? "" : p.preset);
            free(p.vals);
            return 2;
        }
        *pts = grow(*pts, *np, sizeof **pts);
        (*pts)[(*np)++] = p;
    }
    return 0;
}

/* qsort_r of point indices by name, then index (grid_expand's check of names) */
static int by_name(const void *a, const void *b, void *pts) {
    const int x = *(const int *)a, y = *(const int *)b;
    const grid_point *p = pts;
    const int c = strcmp(p[x].name, p[y].name);
    return c ? c : (x > y) - (x < y);
}

int grid_expand(const grid_spec *g, grid_point **pts, int *npts) {
    *pts = NULL;
    *npts = 0;
    s2hc_config base;
    if (g->base[0]) {
        if (config_load_base(&base, g->base)) return 2; /* each point is checked whole */
    } else {
        config_defaults(&base);
    }
    int rc = expand_block(g, &base, &g->sweep, -1, g->ninclude_given == 0, pts, npts);
    for (int e = 0; !rc && e < g->ninclude; e++) rc = expand_block(g, &base, &g->include[e], e, 1, pts, npts);
    for (int i = 0; !rc && i < *npts; i++) /* the grid's own files in <out> */
        if (!strcmp((*pts)[i].name, "index.csv") || !strcmp((*pts)[i].name, "slurm")) {
            grid_err(g->path, g->name_line, g->name_col, NULL, "point %d is named '%s', which is the grid's own %s in its out "
                 "directory: another name", i, (*pts)[i].name, strcmp((*pts)[i].name, "slurm") ? "index" : "folder of scripts");
            rc = 2;
        }
    /* two points of one name: the first i with an earlier j of its name, as a pairwise
       scan would find, from the points sorted by name (a sweep may have 100 000) */
    int dup_i = -1, dup_j = -1;
    if (!rc && *npts > 1) {
        int *ord = malloc_check((size_t)*npts * sizeof *ord);
        for (int i = 0; i < *npts; i++) ord[i] = i;
        qsort_r(ord, (size_t)*npts, sizeof *ord, by_name, *pts);
        for (int k = 1; k < *npts; k++) /* a run of one name: its first two, in point order */
            if (!strcmp((*pts)[ord[k]].name, (*pts)[ord[k - 1]].name) &&
                (k < 2 || strcmp((*pts)[ord[k - 1]].name, (*pts)[ord[k - 2]].name)) && (dup_i < 0 || ord[k] < dup_i)) {
                dup_i = ord[k];
                dup_j = ord[k - 1];
            }
        free(ord);
    }
    if (!rc && dup_i >= 0) {
        const int i = dup_i, j = dup_j;
        char a[1024], b[1024];
        grid_point_values_text(&(*pts)[j], a, sizeof a);
        grid_point_values_text(&(*pts)[i], b, sizeof b);
        char *ya = config_to_yaml(&(*pts)[j].cfg), *yb = config_to_yaml(&(*pts)[i].cfg);
        const int same = !strcmp(ya, yb);
        free(ya);
        free(yb);
        if (same) /* no key tells them apart: the same run twice */
            grid_err(g->path, g->name_line, g->name_col, NULL,
                 "points %d and %d are the same run ('%s'): a value repeated in a sweep list, or an include "
                 "entry that repeats a point:\n  point %d: %s\n  point %d: %s",
                 j, i, (*pts)[i].name, j, a, i, b);
        else
            grid_err(g->path, g->name_line, g->name_col, NULL,
                 "points %d and %d are both named '%s': put the key that tells them apart in name:\n"
                 "  point %d: %s\n  point %d: %s",
                 j, i, (*pts)[i].name, j, a, i, b);
        rc = 2;
    }
    if (!rc && *npts == 0) {
        grid_err(g->path, 0, 0, NULL, "the grid has no points (%s)",
             g->ninclude_given > g->ninclude && !g->ninclude ? "--set gave a key another value than every include entry"
                                                            : "everything excluded?");
        rc = 2;
    }
    if (rc) {
        grid_points_free(*pts, *npts);
        *pts = NULL;
        *npts = 0;
    }
    return rc;
}

void grid_points_free(grid_point *pts, int n) {
    for (int i = 0; i < n; i++) free(pts[i].vals);
    free(pts);
}

int grid_ood_names(const grid_point *pts, int n, const char **names) {
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int o = 0; o < pts[i].cfg.n_ood; o++) {
            int seen = 0;
            for (int j = 0; j < k && !seen; j++) seen = !strcmp(names[j], pts[i].cfg.ood[o]);
            if (!seen && k < GRID_MAX_OOD) names[k++] = pts[i].cfg.ood[o];
        }
    return k;
}

/* The swept keys (sweep, then include keys), the columns of --list and index.csv. */
int grid_swept_keys(const grid_spec *g, const char **keys, int max) {
    int k = 0;
    for (int e = -1; e < g->ninclude; e++) {
        const grid_block *b = e < 0 ? &g->sweep : &g->include[e];
        for (int a = 0; a < b->n; a++) {
            int seen = 0;
            for (int j = 0; j < k && !seen; j++) seen = !strcmp(keys[j], b->axes[a].key);
            if (!seen && k < max) keys[k++] = b->axes[a].key;
        }
    }
    return k;
}
