/* grid_load.c: reading a grid file (grid_load: every key and value checked against the
 * config schema before anything runs; the command line's --set pins), and the helpers the
 * grid's files share for config values as YAML text and errors at the grid file's lines.
 */
#include "grid_internal.h"
#include "presets.h"
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ------------------------------------------------------------------------------------ */
/* Small helpers                                                                         */
/* ------------------------------------------------------------------------------------ */

/* The point of an error: "s2hc: error: FILE[:LINE:COL][: key 'K']: message". */
void grid_err(const char *file, int line, int col, const char *key, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "s2hc: error: %s", file);
    if (line > 0) fprintf(stderr, ":%d:%d", line, col);
    if (key) fprintf(stderr, ": key '%s'", key);
    fprintf(stderr, ": %s\n", msg);
}

void grid_capture_begin(grid_err_capture *c) {
    fflush(stderr);
    c->buf = NULL;
    c->len = 0;
    c->saved = stderr;
    c->mem = open_memstream(&c->buf, &c->len);
    if (c->mem) stderr = c->mem;
}

/* Ends the capture; copies the problem part of the message into why (may be NULL). */
void grid_capture_end(grid_err_capture *c, char *why, size_t n) {
    if (c->mem) {
        fclose(c->mem);
        stderr = c->saved;
    }
    const char *m = c->buf ? c->buf : "";
    const char *p = strstr(m, ": key '");
    if (p) p = strstr(p + 7, "': ");
    if (p) p += 3;
    else if ((p = strstr(m, "s2hc: error: "))) p += 13;
    else p = m;
    if (why) {
        copy_str(why, n, p);
        char *nl = strchr(why, '\n');
        if (nl) *nl = '\0';
    }
    free(c->buf);
    c->buf = NULL;
}

/* config_set(c, "key=val") quietly; 0, or 2 with the problem in why. */
int grid_set_quiet(s2hc_config *c, const char *key, const char *val, char *why, size_t n) {
    char a[GRID_KEY + GRID_VAL + 2];
    snprintf(a, sizeof a, "%s=%s", key, val);
    grid_err_capture cp;
    grid_capture_begin(&cp);
    int rc = config_set(c, a);
    grid_capture_end(&cp, why, n);
    return rc;
}

/* A key's value in config_to_yaml text ("section:\n  leaf: value\n"), as written there. */
int grid_flat_get(const char *yaml, const char *key, char *out, size_t n) {
    const char *dot = strchr(key, '.');
    if (!dot) return -1;
    size_t sl = (size_t)(dot - key);
    const char *leaf = dot + 1;
    size_t ll = strlen(leaf);
    int in = 0;
    for (const char *l = yaml; *l;) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len && l[0] != ' ') in = len == sl + 1 && strncmp(l, key, sl) == 0 && l[sl] == ':';
        else if (in && len >= ll + 4 && strncmp(l + 2, leaf, ll) == 0 && l[2 + ll] == ':' && l[3 + ll] == ' ') {
            size_t vl = len - ll - 4;
            if (vl >= n) vl = n - 1;
            memcpy(out, l + ll + 4, vl);
            out[vl] = '\0';
            return 0;
        }
        l += len + (e ? 1 : 0);
    }
    return -1;
}

/* A YAML value as shown to people: quotes and escapes removed ("[a, b]" stays). */
void grid_unquote(const char *v, char *out, size_t n) {
    size_t j = 0;
    if (v[0] != '"') {
        if (out != v) copy_str(out, n, v);
        return;
    }
    for (size_t i = 1; v[i] && v[i] != '"' && j + 1 < n; i++) { /* out may be v: j < i */
        if (v[i] == '\\' && v[i + 1]) i++;
        out[j++] = v[i];
    }
    out[j] = '\0';
}

/* The value of key (or "preset") in a point's config, as shown in index.csv and --list. */
void grid_value_shown(const s2hc_config *c, const char *preset, const char *key, char *out, size_t n) {
    if (!strcmp(key, "preset")) { copy_str(out, n, preset[0] ? preset : "none"); return; }
    char *y = config_to_yaml(c), raw[GRID_VAL];
    if (grid_flat_get(y, key, raw, sizeof raw) != 0) raw[0] = '\0';
    free(y);
    grid_unquote(raw, out, n);
}

/* Every config key in schema order ("model.n_layer", ...), from config_to_yaml of the
 * defaults, so the grid needs no copy of the schema. *keys is malloc'd. */
static int config_keys(char (**keys)[GRID_KEY]) {
    s2hc_config d;
    config_defaults(&d);
    char *y = config_to_yaml(&d), section[GRID_KEY] = "";
    int n = 0;
    *keys = NULL;
    for (char *l = y; *l;) {
        char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len && l[0] != ' ') {
            snprintf(section, sizeof section, "%.*s", (int)(len ? len - 1 : 0), l);
        } else if (len > 2) {
            const char *colon = memchr(l, ':', len);
            if (colon) {
                *keys = grow(*keys, n, sizeof **keys);
                snprintf((*keys)[n++], GRID_KEY, "%s.%.*s", section, (int)(colon - l - 2), l + 2);
            }
        }
        l += len + (e ? 1 : 0);
    }
    free(y);
    return n;
}

/* Is the key list-valued (data.ood)? Its default is written as a flow list. */
static int key_is_list(const char *key) {
    s2hc_config d;
    config_defaults(&d);
    char *y = config_to_yaml(&d), v[GRID_VAL];
    int r = grid_flat_get(y, key, v, sizeof v) == 0 && v[0] == '[';
    free(y);
    return r;
}

static int edit_distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    int d[64][64];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int c = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));
            if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

/* The closest known key to a mistyped one (or its leaf: "lr" -> "train.lr"), or "". */
static void suggest_key(const char *bad, char *out, size_t n) {
    char(*keys)[GRID_KEY];
    int nk = config_keys(&keys), best = 99;
    out[0] = '\0';
    const char *bad_leaf = strrchr(bad, '.') ? strrchr(bad, '.') + 1 : bad;
    for (int i = 0; i <= nk; i++) {
        const char *k = i < nk ? keys[i] : "preset";
        const char *leaf = strrchr(k, '.') ? strrchr(k, '.') + 1 : k;
        int d = edit_distance(bad, k);
        int dl = edit_distance(bad_leaf, leaf) + (strchr(bad, '.') ? 1 : 0);
        if (dl < d) d = dl;
        if (d < best) { best = d; copy_str(out, n, k); }
    }
    int len = (int)strlen(bad_leaf);
    if (best > (len / 3 > 2 ? len / 3 : 2)) out[0] = '\0';
    free(keys);
}

static int is_preset_name(const char *s) {
    for (int i = 0; preset_names[i]; i++)
        if (!strcmp(preset_names[i], s)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------ */
/* Reading the grid file                                                                 */
/* ------------------------------------------------------------------------------------ */

typedef struct {
    grid_spec *g;
    yaml_document_t *d;
} gparse;

#define LINE(n) ((int)(n)->start_mark.line + 1)
#define COL(n) ((int)(n)->start_mark.column + 1)

static const char *kind_of(const yaml_node_t *n) {
    return n->type == YAML_MAPPING_NODE ? "a mapping" : n->type == YAML_SEQUENCE_NODE ? "a list" : "a value";
}

static int scalar_is(const yaml_node_t *n, const char *s) {
    return n->type == YAML_SCALAR_NODE && n->data.scalar.length == strlen(s) &&
           memcmp(n->data.scalar.value, s, n->data.scalar.length) == 0;
}

/* A scalar as text: plain as written, quoted ones re-quoted so config_set reads a string. */
static int scalar_text(const yaml_node_t *n, char *out, size_t len) {
    const char *s = (const char *)n->data.scalar.value;
    size_t sl = n->data.scalar.length, j = 0;
    if (memchr(s, '\0', sl)) return -1;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE) {
        if (sl >= len) return -1;
        memcpy(out, s, sl);
        out[sl] = '\0';
        return 0;
    }
    if (len < 3) return -1;
    out[j++] = '"';
    for (size_t i = 0; i < sl; i++) {
        if (s[i] == '"' || s[i] == '\\') {
            if (j + 3 >= len) return -1;
            out[j++] = '\\';
        }
        if (s[i] == '\n') {
            if (j + 3 >= len) return -1;
            out[j++] = '\\';
            out[j++] = 'n';
            continue;
        }
        if (j + 2 >= len) return -1;
        out[j++] = s[i];
    }
    out[j++] = '"';
    out[j] = '\0';
    return 0;
}

/* One value: a scalar, or (list_ok) a list of scalars written as a flow list. */
static int node_value(gparse *P, const yaml_node_t *n, const char *key, int list_ok, char *out, size_t len) {
    if (n->type == YAML_SCALAR_NODE) {
        if (scalar_text(n, out, len) == 0) return 0;
        grid_err(P->g->path, LINE(n), COL(n), key, "value too long (at most %zu bytes)", len - 3);
        return 2;
    }
    if (n->type != YAML_SEQUENCE_NODE || !list_ok) {
        grid_err(P->g->path, LINE(n), COL(n), key, "expected a single value, got %s", kind_of(n));
        return 2;
    }
    size_t j = 0;
    out[j++] = '[';
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        yaml_node_t *c = yaml_document_get_node(P->d, *it);
        char item[GRID_VAL];
        if (c->type != YAML_SCALAR_NODE) {
            grid_err(P->g->path, LINE(c), COL(c), key, "expected a list of names, got %s as an item", kind_of(c));
            return 2;
        }
        if (scalar_text(c, item, sizeof item) != 0 || j + strlen(item) + 4 >= len) {
            grid_err(P->g->path, LINE(n), COL(n), key, "value too long (at most %zu bytes)", len - 3);
            return 2;
        }
        j += (size_t)snprintf(out + j, len - j, "%s%s", it == n->data.sequence.items.start ? "" : ", ", item);
    }
    out[j++] = ']';
    out[j] = '\0';
    return 0;
}

/* A key in set/sweep/include/exclude/override: known, and one the grid may change. */
static int check_key(gparse *P, const yaml_node_t *kn, char *key, int preset_ok) {
    if (kn->type != YAML_SCALAR_NODE || kn->data.scalar.length >= GRID_KEY) {
        grid_err(P->g->path, LINE(kn), COL(kn), NULL, "expected a config key such as train.lr");
        return 2;
    }
    memcpy(key, kn->data.scalar.value, kn->data.scalar.length);
    key[kn->data.scalar.length] = '\0';
    if (!strcmp(key, "preset")) {
        if (preset_ok) return 0;
        grid_err(P->g->path, LINE(kn), COL(kn), key, "a preset cannot be set here (set it at the top level or sweep it)");
        return 2;
    }
    if (!config_key_known(key)) {
        char s[GRID_KEY];
        suggest_key(key, s, sizeof s);
        if (s[0]) grid_err(P->g->path, LINE(kn), COL(kn), key, "not a config key (did you mean '%s'?)", s);
        else grid_err(P->g->path, LINE(kn), COL(kn), key, "not a config key (`s2hc config` lists them)");
        return 2;
    }
    if (!strcmp(key, "run.name")) {
        grid_err(P->g->path, LINE(kn), COL(kn), key, "run names come from the grid's name: template");
        return 2;
    }
    if (!strcmp(key, "run.out")) {
        grid_err(P->g->path, LINE(kn), COL(kn), key, "the runs directory is the grid's out: key");
        return 2;
    }
    return 0;
}

/* Does the value fit its key? (preset: a known preset; else config_set on the defaults) */
static int check_value(const char *file, const grid_kv *kv) {
    if (!strcmp(kv->key, "preset")) {
        if (is_preset_name(kv->val)) return 0;
        char all[128] = "";
        for (int i = 0; preset_names[i]; i++) {
            strncat(all, i ? ", " : "", sizeof all - strlen(all) - 1);
            strncat(all, preset_names[i], sizeof all - strlen(all) - 1);
        }
        grid_err(file, kv->line, kv->col, "preset", "unknown preset '%s' (the presets are %s)", kv->val, all);
        return 2;
    }
    s2hc_config d;
    config_defaults(&d);
    char why[512];
    if (grid_set_quiet(&d, kv->key, kv->val, why, sizeof why) == 0) return 0;
    grid_err(file, kv->line, kv->col, kv->key, "%s", why);
    return 2;
}

/* A value or a list of alternatives into ax (sweep: must be a list). For list-valued
 * keys (data.ood) a list of names is one value and a list of lists is alternatives. */
static int parse_alts(gparse *P, const yaml_node_t *kn, const yaml_node_t *vn, grid_axis *ax, int sweep,
                      int preset_ok) {
    memset(ax, 0, sizeof *ax);
    if (check_key(P, kn, ax->key, preset_ok)) return 2;
    ax->line = LINE(kn);
    ax->col = COL(kn);
    int is_list = strcmp(ax->key, "preset") != 0 && key_is_list(ax->key);
    const yaml_node_t *items[1] = {vn};
    int nitems = 1, from_seq = 0;
    if (vn->type == YAML_SEQUENCE_NODE) {
        int all_scalar = 1;
        for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top; it++)
            if (yaml_document_get_node(P->d, *it)->type != YAML_SCALAR_NODE) all_scalar = 0;
        from_seq = sweep || !is_list || !all_scalar;
    } else if (sweep) {
        grid_err(P->g->path, LINE(vn), COL(vn), ax->key, "a sweep value must be a list of alternatives, e.g. [1, 2]");
        return 2;
    }
    if (vn->type == YAML_MAPPING_NODE) {
        grid_err(P->g->path, LINE(vn), COL(vn), ax->key, "expected a value or a list of values, got a mapping");
        return 2;
    }
    if (from_seq) {
        nitems = (int)(vn->data.sequence.items.top - vn->data.sequence.items.start);
        if (nitems == 0) {
            grid_err(P->g->path, LINE(vn), COL(vn), ax->key, "an empty list of values");
            return 2;
        }
    }
    for (int i = 0; i < nitems; i++) {
        const yaml_node_t *v = from_seq ? yaml_document_get_node(P->d, vn->data.sequence.items.start[i]) : items[0];
        ax->vals = grow(ax->vals, ax->n, sizeof *ax->vals);
        grid_kv *kv = &ax->vals[ax->n++];
        memset(kv, 0, sizeof *kv);
        copy_str(kv->key, sizeof kv->key, ax->key);
        kv->line = LINE(v);
        kv->col = COL(v);
        if (node_value(P, v, ax->key, is_list, kv->val, sizeof kv->val)) return 2;
        if (!strcmp(ax->key, "preset")) grid_unquote(kv->val, kv->val, sizeof kv->val);
        if (check_value(P->g->path, kv)) return 2;
    }
    return 0;
}

/* A mapping of key: value (set:, an override's set:). */
static int parse_kvs(gparse *P, const yaml_node_t *m, grid_kv **out, int *n, int preset_ok, const char *what) {
    if (m->type != YAML_MAPPING_NODE) {
        grid_err(P->g->path, LINE(m), COL(m), NULL, "%s must be a mapping of config keys to values", what);
        return 2;
    }
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(P->d, pr->key), *vn = yaml_document_get_node(P->d, pr->value);
        grid_kv kv;
        memset(&kv, 0, sizeof kv);
        if (check_key(P, kn, kv.key, preset_ok)) return 2;
        for (int i = 0; i < *n; i++)
            if (!strcmp((*out)[i].key, kv.key)) {
                grid_err(P->g->path, LINE(kn), COL(kn), kv.key, "duplicate key (first at %d:%d)", (*out)[i].line,
                     (*out)[i].col);
                return 2;
            }
        kv.line = LINE(vn);
        kv.col = COL(vn);
        int is_list = strcmp(kv.key, "preset") != 0 && key_is_list(kv.key);
        if (node_value(P, vn, kv.key, is_list, kv.val, sizeof kv.val)) return 2;
        if (!strcmp(kv.key, "preset")) grid_unquote(kv.val, kv.val, sizeof kv.val);
        if (check_value(P->g->path, &kv)) return 2;
        *out = grow(*out, *n, sizeof **out);
        (*out)[(*n)++] = kv;
    }
    return 0;
}

/* A mapping of key: value-or-alternatives (sweep:, include entries, exclude entries,
 * an override's when:). */
static int parse_block(gparse *P, const yaml_node_t *m, grid_block *b, int sweep, int preset_ok, const char *what) {
    memset(b, 0, sizeof *b);
    b->line = LINE(m);
    b->col = COL(m);
    if (m->type != YAML_MAPPING_NODE) {
        grid_err(P->g->path, LINE(m), COL(m), NULL, "%s must be a mapping of config keys to %s", what,
             sweep ? "lists of values" : "values");
        return 2;
    }
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(P->d, pr->key), *vn = yaml_document_get_node(P->d, pr->value);
        b->axes = grow(b->axes, b->n, sizeof *b->axes);
        grid_axis *ax = &b->axes[b->n];
        int rc = parse_alts(P, kn, vn, ax, sweep, preset_ok);
        b->n++;
        if (rc) return rc;
        for (int i = 0; i < b->n - 1; i++)
            if (!strcmp(b->axes[i].key, ax->key)) {
                grid_err(P->g->path, ax->line, ax->col, ax->key, "duplicate key (first at %d:%d)", b->axes[i].line,
                     b->axes[i].col);
                return 2;
            }
    }
    return 0;
}

static int parse_scalar_field(gparse *P, const yaml_node_t *vn, const char *name, char *out, size_t len) {
    if (vn->type != YAML_SCALAR_NODE) {
        grid_err(P->g->path, LINE(vn), COL(vn), NULL, "%s: expected a single value, got %s", name, kind_of(vn));
        return 2;
    }
    if (vn->data.scalar.length >= len) {
        grid_err(P->g->path, LINE(vn), COL(vn), NULL, "%s: too long (at most %zu bytes)", name, len - 1);
        return 2;
    }
    memcpy(out, vn->data.scalar.value, vn->data.scalar.length);
    out[vn->data.scalar.length] = '\0';
    return 0;
}

/* A value written as it is after `#SBATCH --NAME=`: one word, since sbatch splits those
 * lines at whitespace, reads quotes and backslashes and ends them at a #. */
static int parse_sbatch_word(gparse *P, const yaml_node_t *vn, const char *name, char *out, size_t len) {
    int rc = parse_scalar_field(P, vn, name, out, len);
    if (rc == 0 && out[strcspn(out, " \t\r\n\"'\\#")]) {
        grid_err(P->g->path, LINE(vn), COL(vn), NULL, "%s: '%s': one word for #SBATCH (no spaces, quotes, \\ or #)", name,
             out);
        return 2;
    }
    return rc;
}

static int parse_int_field(gparse *P, const yaml_node_t *vn, const char *name, int lo, int hi, int *out) {
    char buf[32], *end;
    if (parse_scalar_field(P, vn, name, buf, sizeof buf)) return 2;
    long v = strtol(buf, &end, 10);
    if (!buf[0] || *end || v < lo || v > hi) {
        grid_err(P->g->path, LINE(vn), COL(vn), NULL, "%s: expected a whole number in [%d, %d], got '%s'", name, lo, hi,
             buf);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static int parse_lines(gparse *P, const yaml_node_t *vn, const char *name, char (**out)[256], int *n) {
    const yaml_node_t *one[1] = {vn};
    int cnt = vn->type == YAML_SEQUENCE_NODE ? (int)(vn->data.sequence.items.top - vn->data.sequence.items.start) : 1;
    for (int i = 0; i < cnt; i++) {
        const yaml_node_t *it =
            vn->type == YAML_SEQUENCE_NODE ? yaml_document_get_node(P->d, vn->data.sequence.items.start[i]) : one[0];
        *out = grow(*out, *n, sizeof **out);
        if (parse_scalar_field(P, it, name, (*out)[*n], 256)) return 2;
        if (strpbrk((*out)[*n], "\r\n")) { /* one line each: a break would put a line of its own in the script */
            grid_err(P->g->path, LINE(it), COL(it), NULL, "%s: one line per item, without line breaks", name);
            return 2;
        }
        (*n)++;
    }
    return 0;
}

static int parse_slurm(gparse *P, const yaml_node_t *m) {
    grid_slurm *s = &P->g->slurm;
    if (m->type != YAML_MAPPING_NODE) {
        grid_err(P->g->path, LINE(m), COL(m), NULL, "slurm: expected a mapping (partition, time, gpus, cpus, mem, "
                                                "array_limit, extra, setup)");
        return 2;
    }
    for (yaml_node_pair_t *pr = m->data.mapping.pairs.start; pr < m->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(P->d, pr->key), *vn = yaml_document_get_node(P->d, pr->value);
        int rc;
        for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < pr; q++) {
            const yaml_node_t *qk = yaml_document_get_node(P->d, q->key);
            if (kn->type == YAML_SCALAR_NODE && qk->type == YAML_SCALAR_NODE &&
                !strcmp((const char *)kn->data.scalar.value, (const char *)qk->data.scalar.value)) {
                grid_err(P->g->path, LINE(kn), COL(kn), NULL, "slurm: duplicate key '%s' (first at %d:%d)",
                     (const char *)kn->data.scalar.value, LINE(qk), COL(qk));
                return 2;
            }
        }
        if (scalar_is(kn, "partition"))
            rc = parse_sbatch_word(P, vn, "slurm.partition", s->partition, sizeof s->partition);
        else if (scalar_is(kn, "time")) rc = parse_sbatch_word(P, vn, "slurm.time", s->time, sizeof s->time);
        else if (scalar_is(kn, "mem")) rc = parse_sbatch_word(P, vn, "slurm.mem", s->mem, sizeof s->mem);
        else if (scalar_is(kn, "gpus")) rc = parse_int_field(P, vn, "slurm.gpus", 0, 1024, &s->gpus);
        else if (scalar_is(kn, "cpus")) rc = parse_int_field(P, vn, "slurm.cpus", 0, 4096, &s->cpus);
        else if (scalar_is(kn, "array_limit"))
            rc = parse_int_field(P, vn, "slurm.array_limit", 0, 100000, &s->array_limit);
        else if (scalar_is(kn, "extra")) rc = parse_lines(P, vn, "slurm.extra", &s->extra, &s->nextra);
        else if (scalar_is(kn, "setup")) rc = parse_lines(P, vn, "slurm.setup", &s->setup, &s->nsetup);
        else {
            grid_err(P->g->path, LINE(kn), COL(kn), NULL,
                 "unknown slurm key '%s' (the keys are partition, time, gpus, cpus, mem, array_limit, extra, setup)",
                 kn->type == YAML_SCALAR_NODE ? (const char *)kn->data.scalar.value : "?");
            return 2;
        }
        if (rc) return rc;
    }
    return 0;
}

/* The name template: {key} for a config key, {preset} or {index}. */
static int check_template(const grid_spec *g) {
    for (const char *p = g->name_tmpl; *p; p++) {
        if (*p == '}') {
            grid_err(g->path, g->name_line, g->name_col, NULL, "name: a '}' without its '{'");
            return 2;
        }
        if (*p != '{') continue;
        const char *e = strchr(p, '}');
        if (!e || (size_t)(e - p - 1) >= GRID_KEY) {
            grid_err(g->path, g->name_line, g->name_col, NULL, "name: a '{' without its '}'");
            return 2;
        }
        char k[GRID_KEY];
        snprintf(k, sizeof k, "%.*s", (int)(e - p - 1), p + 1);
        if (!strcmp(k, "run.name") || !strcmp(k, "run.out")) {
            grid_err(g->path, g->name_line, g->name_col, k, "in name: set by the grid itself (name: and out:), not a point's value");
            return 2;
        }
        if (!k[0]) {
            grid_err(g->path, g->name_line, g->name_col, NULL, "name: an empty {} (write {KEY}, {preset} or {index})");
            return 2;
        }
        if (strcmp(k, "preset") && strcmp(k, "index") && !config_key_known(k)) {
            char s[GRID_KEY];
            suggest_key(k, s, sizeof s);
            grid_err(g->path, g->name_line, g->name_col, k, "in name: not a config key%s%s%s",
                 s[0] ? " (did you mean '" : "", s, s[0] ? "'?)" : "");
            return 2;
        }
        p = e;
    }
    return 0;
}

static int parse_root(gparse *P, const yaml_node_t *root) {
    grid_spec *g = P->g;
    if (!root || root->type != YAML_MAPPING_NODE) {
        grid_err(g->path, root ? LINE(root) : 0, root ? COL(root) : 0, NULL,
             "a grid file is a mapping with sweep:, and base: or preset: (see docs/grids.md)");
        return 2;
    }
    static const char *const top[] = {"base", "preset", "set", "sweep", "include", "exclude", "override",
                                      "name", "out", "slurm", "launch", NULL};
    int seen[16] = {0}, seen_line[16] = {0}, seen_col[16] = {0};
    char base[CFG_PATH] = "";
    int base_line = 0, base_col = 0;
    for (yaml_node_pair_t *pr = root->data.mapping.pairs.start; pr < root->data.mapping.pairs.top; pr++) {
        yaml_node_t *kn = yaml_document_get_node(P->d, pr->key), *vn = yaml_document_get_node(P->d, pr->value);
        int k = -1;
        for (int i = 0; top[i]; i++)
            if (scalar_is(kn, top[i])) k = i;
        if (k < 0) {
            char name[GRID_KEY] = "?";
            if (kn->type == YAML_SCALAR_NODE)
                snprintf(name, sizeof name, "%.*s", (int)kn->data.scalar.length, kn->data.scalar.value);
            char keys[256] = ""; /* the list above, so that the message names every key */
            for (int i = 0; top[i]; i++)
                snprintf(keys + strlen(keys), sizeof keys - strlen(keys), "%s%s", i ? ", " : "", top[i]);
            grid_err(g->path, LINE(kn), COL(kn), NULL,
                 "unknown grid key '%s' (the keys are %s; config keys go under set: or sweep:)", name, keys);
            return 2;
        }
        if (seen[k]) {
            grid_err(g->path, LINE(kn), COL(kn), NULL, "duplicate grid key '%s' (first at %d:%d)", top[k], seen_line[k],
                 seen_col[k]);
            return 2;
        }
        seen[k] = 1;
        seen_line[k] = LINE(kn);
        seen_col[k] = COL(kn);
        int rc = 0;
        switch (k) {
        case 0:
            rc = parse_scalar_field(P, vn, "base", base, sizeof base);
            base_line = LINE(vn);
            base_col = COL(vn);
            break;
        case 1: {
            grid_kv kv = {.key = "preset", .line = LINE(vn), .col = COL(vn)};
            rc = parse_scalar_field(P, vn, "preset", kv.val, sizeof kv.val);
            if (!rc) rc = check_value(g->path, &kv);
            if (!rc) copy_str(g->preset, sizeof g->preset, kv.val);
            break;
        }
        case 2: rc = parse_kvs(P, vn, &g->set, &g->nset, 1, "set:"); break;
        case 3: rc = parse_block(P, vn, &g->sweep, 1, 1, "sweep:"); break;
        case 4:
        case 5:
            if (vn->type != YAML_SEQUENCE_NODE) {
                grid_err(g->path, LINE(vn), COL(vn), NULL, "%s: expected a list of mappings", top[k]);
                return 2;
            }
            for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top; it++) {
                yaml_node_t *e = yaml_document_get_node(P->d, *it);
                if (k == 4) {
                    g->include = grow(g->include, g->ninclude, sizeof *g->include);
                    rc = parse_block(P, e, &g->include[g->ninclude++], 0, 1, "an include entry");
                } else {
                    g->exclude = grow(g->exclude, g->nexclude, sizeof *g->exclude);
                    grid_block b;
                    rc = parse_block(P, e, &b, 0, 1, "an exclude entry");
                    g->exclude[g->nexclude++] = (grid_match){b.n, b.axes, b.line, b.col};
                    if (!rc && b.n == 0) {
                        grid_err(g->path, b.line, b.col, NULL, "an empty exclude entry would exclude every point");
                        rc = 2;
                    }
                }
                if (rc) break;
            }
            break;
        case 6:
            if (vn->type != YAML_SEQUENCE_NODE) {
                grid_err(g->path, LINE(vn), COL(vn), NULL, "override: expected a list of {when: {...}, set: {...}}");
                return 2;
            }
            for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top && !rc; it++) {
                yaml_node_t *e = yaml_document_get_node(P->d, *it);
                g->override = grow(g->override, g->noverride, sizeof *g->override);
                grid_override *o = &g->override[g->noverride++];
                memset(o, 0, sizeof *o);
                const yaml_node_t *when = NULL, *set = NULL;
                if (e->type == YAML_MAPPING_NODE)
                    for (yaml_node_pair_t *q = e->data.mapping.pairs.start; q < e->data.mapping.pairs.top; q++) {
                        yaml_node_t *qk = yaml_document_get_node(P->d, q->key);
                        const yaml_node_t **slot = scalar_is(qk, "when") ? &when : scalar_is(qk, "set") ? &set : NULL;
                        if (!slot) {
                            grid_err(g->path, LINE(qk), COL(qk), NULL, "override: '%s': expected when: and set:",
                                 qk->type == YAML_SCALAR_NODE ? (const char *)qk->data.scalar.value : "?");
                            return 2;
                        }
                        if (*slot) {
                            grid_err(g->path, LINE(qk), COL(qk), NULL, "override: duplicate key '%s' in one entry (first at %d:%d)",
                                 (const char *)qk->data.scalar.value, LINE(*slot), COL(*slot));
                            return 2;
                        }
                        *slot = yaml_document_get_node(P->d, q->value);
                    }
                if (!when || !set) {
                    grid_err(g->path, LINE(e), COL(e), NULL, "override: each entry needs when: {...} and set: {...}");
                    return 2;
                }
                grid_block b;
                rc = parse_block(P, when, &b, 0, 1, "override when:");
                o->when = (grid_match){b.n, b.axes, b.line, b.col};
                if (!rc && b.n == 0) {
                    grid_err(g->path, b.line, b.col, NULL, "override: an empty when: would match every point (use set:)");
                    rc = 2;
                }
                if (!rc) rc = parse_kvs(P, set, &o->set, &o->nset, 0, "override set:");
            }
            break;
        case 7:
            rc = parse_scalar_field(P, vn, "name", g->name_tmpl, sizeof g->name_tmpl);
            g->name_line = LINE(vn);
            g->name_col = COL(vn);
            if (!rc) rc = check_template(g);
            break;
        case 8: rc = parse_scalar_field(P, vn, "out", g->out, sizeof g->out); break;
        case 9: rc = parse_slurm(P, vn); break;
        case 10:
            rc = parse_scalar_field(P, vn, "launch", g->launch, sizeof g->launch);
            if (!rc) { /* the child's argv holds 58 words of it */
                int words = 0;
                for (const char *q = g->launch; *q;) {
                    q += strspn(q, " \t");
                    if (*q) words++;
                    q += strcspn(q, " \t");
                }
                if (words > 58) {
                    grid_err(g->path, LINE(vn), COL(vn), "launch", "%d words; at most 58", words);
                    rc = 2;
                }
            }
            if (!rc && (strspn(g->launch, " \t") == strlen(g->launch) || strpbrk(g->launch, "'\"\\$`|;&<>"))) {
                grid_err(g->path, LINE(vn), COL(vn), "launch",
                     "expected a command and its arguments separated by spaces, without quotes or shell "
                     "syntax (e.g. \"mpirun -np 4\" or \"srun --mpi=pmix\")");
                rc = 2;
            }
            break;
        }
        if (rc) return rc;
    }
    /* a `preset` in set: is the grid's preset */
    for (int i = 0; i < g->nset; i++)
        if (!strcmp(g->set[i].key, "preset")) {
            copy_str(g->preset, sizeof g->preset, g->set[i].val);
            memmove(&g->set[i], &g->set[i + 1], (size_t)(g->nset - i - 1) * sizeof *g->set);
            g->nset--;
            i--;
        }
    /* base: relative to the grid file, else to the current directory */
    if (base[0]) {
        char dir[CFG_PATH];
        copy_str(dir, sizeof dir, g->path);
        char *slash = strrchr(dir, '/');
        if (base[0] != '/' && slash) {
            slash[1] = '\0';
            const int cut = (size_t)snprintf(g->base, sizeof g->base, "%s%s", dir, base) >= sizeof g->base;
            if (cut && !file_exists(base)) {
                grid_err(g->path, base_line, base_col, NULL, "base: '%s' beside the grid file: a path of %zu bytes, longer "
                     "than %zu", base, strlen(dir) + strlen(base), sizeof g->base - 1);
                return 2;
            }
            if ((cut || !file_exists(g->base)) && file_exists(base)) copy_str(g->base, sizeof g->base, base);
        } else {
            copy_str(g->base, sizeof g->base, base);
        }
        if (!file_exists(g->base)) {
            grid_err(g->path, base_line, base_col, NULL, "base: no such file '%s' (a path relative to the grid file)",
                 base);
            return 2;
        }
        struct stat bs;
        if (stat(g->base, &bs) == 0 && S_ISDIR(bs.st_mode)) {
            grid_err(g->path, base_line, base_col, NULL, "base: '%s' is a directory, not a config file", base);
            return 2;
        }
    }
    return 0;
}

/* Are two values of key the same once read into a config? (1e-3 and 0.001 are.) */
int grid_same_value(const s2hc_config *c, const char *preset, const char *key, const char *val) {
    if (!strcmp(key, "preset")) return !strcmp(preset, val);
    s2hc_config t = *c;
    if (grid_set_quiet(&t, key, val, NULL, 0)) return 0;
    char *a = config_to_yaml(c), *b = config_to_yaml(&t), va[GRID_VAL], vb[GRID_VAL];
    int same = grid_flat_get(a, key, va, sizeof va) == 0 && grid_flat_get(b, key, vb, sizeof vb) == 0 && !strcmp(va, vb);
    free(a);
    free(b);
    return same;
}

/* Command-line --set K=V: pin a swept key, filter include entries, or apply last. */
static int apply_pins(grid_spec *g, const char *const *pins, int npins) {
    for (int i = 0; i < npins; i++) {
        grid_kv kv;
        memset(&kv, 0, sizeof kv);
        const char *eq = strchr(pins[i], '=');
        size_t kl = eq ? (size_t)(eq - pins[i]) : 0;
        char src[GRID_VAL + 16];
        snprintf(src, sizeof src, "--set %s", pins[i]);
        if (!eq || kl == 0 || kl >= GRID_KEY || strlen(eq + 1) >= GRID_VAL) {
            grid_err(src, 0, 0, NULL, "expected KEY=VALUE, e.g. --set train.steps=50 or --set preset=small");
            return 2;
        }
        memcpy(kv.key, pins[i], kl);
        copy_str(kv.val, sizeof kv.val, eq + 1);
        if (strcmp(kv.key, "preset") && !config_key_known(kv.key)) {
            char s[GRID_KEY];
            suggest_key(kv.key, s, sizeof s);
            grid_err(src, 0, 0, kv.key, "not a config key%s%s%s", s[0] ? " (did you mean '" : "", s, s[0] ? "'?)" : "");
            return 2;
        }
        if (!strcmp(kv.key, "run.name") || !strcmp(kv.key, "run.out")) {
            grid_err(src, 0, 0, kv.key, "set by the grid (name: template, out: or --out)");
            return 2;
        }
        if (check_value(src, &kv)) return 2;
        s2hc_config d;
        config_defaults(&d);
        /* include entries giving the key other values are dropped */
        for (int e = 0; e < g->ninclude; e++) {
            grid_block *b = &g->include[e];
            for (int a = 0; a < b->n; a++) {
                grid_axis *ax = &b->axes[a];
                if (strcmp(ax->key, kv.key)) continue;
                int keep = 0;
                for (int v = 0; v < ax->n; v++) {
                    s2hc_config t = d;
                    if (strcmp(kv.key, "preset")) grid_set_quiet(&t, kv.key, kv.val, NULL, 0);
                    if (grid_same_value(&t, kv.val, kv.key, ax->vals[v].val)) ax->vals[keep++] = ax->vals[v];
                }
                ax->n = keep;
            }
        }
        int w = 0;
        for (int e = 0; e < g->ninclude; e++) {
            int empty = 0;
            for (int a = 0; a < g->include[e].n; a++) empty |= g->include[e].axes[a].n == 0;
            if (empty) {
                for (int a = 0; a < g->include[e].n; a++) free(g->include[e].axes[a].vals);
                free(g->include[e].axes);
            } else {
                g->include[w++] = g->include[e];
            }
        }
        g->ninclude = w;
        int swept = 0;
        for (int a = 0; a < g->sweep.n; a++)
            if (!strcmp(g->sweep.axes[a].key, kv.key)) {
                g->sweep.axes[a].n = 1;
                g->sweep.axes[a].vals[0] = kv;
                swept = 1;
            }
        /* a pinned swept key holds for every point of the invocation: include entries
           that leave it out get it too */
        for (int e = 0; swept && e < g->ninclude; e++) {
            grid_block *b = &g->include[e];
            int has = 0;
            for (int a = 0; a < b->n && !has; a++) has = !strcmp(b->axes[a].key, kv.key);
            if (has) continue;
            b->axes = grow(b->axes, b->n, sizeof *b->axes);
            grid_axis *ax = &b->axes[b->n++];
            memset(ax, 0, sizeof *ax);
            copy_str(ax->key, sizeof ax->key, kv.key);
            ax->n = 1;
            ax->vals = calloc_check(1, sizeof *ax->vals);
            ax->vals[0] = kv;
        }
        if (!swept && !strcmp(kv.key, "preset")) copy_str(g->preset, sizeof g->preset, kv.val);
        else if (!swept) {
            g->pin = grow(g->pin, g->npin, sizeof *g->pin);
            g->pin[g->npin++] = kv;
        }
    }
    return 0;
}

int grid_load(grid_spec *g, const char *path, const char *out, const char *const *pins, int npins) {
    memset(g, 0, sizeof *g);
    /* the path and the name go whole into the base's path, runs/<name>, the Slurm
       scripts' command and job names: cut, they would be another file or another grid's */
    const char *b = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    const char *ext = strrchr(b, '.');
    const size_t stem_len = ext && ext != b ? (size_t)(ext - b) : strlen(b);
    if (strlen(path) >= sizeof g->path || stem_len >= sizeof g->stem) {
        fprintf(stderr, "s2hc: error: grid file %.60s...: %s of %zu bytes, longer than %zu\n", path,
                strlen(path) >= sizeof g->path ? "a path" : "a name (the grid's name, without its extension)",
                strlen(path) >= sizeof g->path ? strlen(path) : stem_len,
                strlen(path) >= sizeof g->path ? sizeof g->path - 1 : sizeof g->stem - 1);
        return 2;
    }
    copy_str(g->path, sizeof g->path, path);
    /* the name up to its extension (not to the last dot of a copy cut short: of a name of
       63 bytes, "a.bbb...bbb.yaml", that would be "a", another grid's) */
    snprintf(g->stem, sizeof g->stem, "%.*s", (int)stem_len, b);
    size_t len = 0;
    char *text = read_text_file(path, &len);
    if (!text) {
        grid_err(path, 0, 0, NULL, "cannot read: %s", strerror(errno));
        return 2;
    }
    yaml_parser_t p;
    yaml_document_t d;
    if (!yaml_parser_initialize(&p)) die(1, "out of memory (yaml_parser_initialize)");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    int rc = 0;
    const yaml_node_t *tagged;
    char problem[512];
    yaml_mark_t pm;
    int dl, dc;
    if (config_yaml_too_deep(text, len, &dl, &dc)) {
        grid_err(path, dl, dc, NULL, "values nested more than %d deep", CONFIG_YAML_MAX_DEPTH);
        rc = 2;
    } else if (!yaml_parser_load(&p, &d)) {
        config_yaml_problem(&p, text, len, problem, sizeof problem, &pm, 1);
        grid_err(path, (int)pm.line + 1, (int)pm.column + 1, NULL, "%s", problem);
        rc = 2;
    } else if ((tagged = config_yaml_tagged(&d, text, len))) {
        grid_err(path, (int)tagged->start_mark.line + 1, (int)tagged->start_mark.column + 1, NULL,
             "YAML tags (!!str, !!int, ...) have no use in a grid: write the value alone");
        yaml_document_delete(&d);
        rc = 2;
    } else {
        gparse P = {g, &d};
        rc = parse_root(&P, yaml_document_get_root_node(&d));
        yaml_document_delete(&d);
        /* a second document (after "---") would be ignored: refused, as in a config */
        if (rc == 0 && !yaml_parser_load(&p, &d)) {
            config_yaml_problem(&p, text, len, problem, sizeof problem, &pm, 1);
            grid_err(path, (int)pm.line + 1, (int)pm.column + 1, NULL, "%s", problem);
            rc = 2;
        } else if (rc == 0) {
            yaml_node_t *r2 = yaml_document_get_root_node(&d);
            if (r2) {
                grid_err(path, (int)r2->start_mark.line + 1, (int)r2->start_mark.column + 1, NULL,
                     "a grid file holds one YAML document; found a second one");
                rc = 2;
            }
            yaml_document_delete(&d);
        }
    }
    yaml_parser_delete(&p);
    free(text);
    if (rc) {
        grid_free(g);
        return rc;
    }
    if (out && strlen(out) >= sizeof g->out) { /* cut, it would name another folder */
        grid_err(g->path, 0, 0, NULL, "--out '%.60s...': a path of %zu bytes, longer than %zu", out, strlen(out),
             sizeof g->out - 1);
        grid_free(g);
        return 2;
    }
    if (out) copy_str(g->out, sizeof g->out, out);
    if (!g->out[0]) snprintf(g->out, sizeof g->out, "runs/%s", g->stem);
    if (!g->name_tmpl[0]) {
        /* default name: method, n and seed, then every other varying key's value */
        int m = snprintf(g->name_tmpl, sizeof g->name_tmpl, "{residual.method}-n{residual.n_streams}-s{train.seed}");
        for (int e = -1; e < g->ninclude; e++) {
            const grid_block *bl = e < 0 ? &g->sweep : &g->include[e];
            for (int a = 0; a < bl->n; a++) {
                const char *k = bl->axes[a].key;
                char tok[GRID_KEY + 4];
                snprintf(tok, sizeof tok, "{%s}", k);
                if (!strstr(g->name_tmpl, tok) && m + (int)strlen(tok) + 2 < (int)sizeof g->name_tmpl)
                    m += snprintf(g->name_tmpl + m, sizeof g->name_tmpl - (size_t)m, "-%s", tok);
            }
        }
    }
    for (int i = 0; i < npins; i++) {
        g->args = grow(g->args, g->nargs, sizeof *g->args);
        snprintf(g->args[g->nargs++], sizeof *g->args, "%s", pins[i]);
    }
    g->ninclude_given = g->ninclude;
    rc = apply_pins(g, pins, npins);
    if (rc) grid_free(g);
    return rc;
}

static void block_free(grid_block *b) {
    for (int a = 0; a < b->n; a++) free(b->axes[a].vals);
    free(b->axes);
}

void grid_free(grid_spec *g) {
    free(g->set);
    block_free(&g->sweep);
    for (int i = 0; i < g->ninclude; i++) block_free(&g->include[i]);
    free(g->include);
    for (int i = 0; i < g->nexclude; i++) {
        grid_block b = {g->exclude[i].n, g->exclude[i].keys, 0, 0};
        block_free(&b);
    }
    free(g->exclude);
    for (int i = 0; i < g->noverride; i++) {
        grid_block b = {g->override[i].when.n, g->override[i].when.keys, 0, 0};
        block_free(&b);
        free(g->override[i].set);
    }
    free(g->override);
    free(g->slurm.extra);
    free(g->slurm.setup);
    free(g->pin);
    free(g->args);
    memset(g, 0, sizeof *g);
}
