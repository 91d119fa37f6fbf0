/* params.c: `s2hc params`, the auxiliary parameter count of every method against n.
 *
 * For each method and n it builds the parameter table of the model WITHOUT allocating
 * tensors (model_param_table) and sums the tensors flagged aux (every sublayer's norm
 * gain, projection W and theta), then checks that sum against the method's closed
 * formula, aux_params(n, C) x Lh with Lh = 2 n_layer hyper-connected sublayers. Any
 * disagreement is printed and the command exits 1. This is the data of the paper's
 * Fig. 1 right / Fig. 7 right (auxiliary parameters vs n). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "model.h"
#include "presets.h"
#include "util.h"

static void params_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc params [--method NAME|all] [--n 2..8 | --n N] [--preset tiny|small|M|L]\n"
            "                   [--C WIDTH] [--layers L] [--csv]\n"
            "\n"
            "Auxiliary (hyper-connection) parameters per method and stream count n: the count\n"
            "from the parameter table (no tensors allocated) checked against each method's\n"
            "closed formula x 2 L sublayers; exits 1 if any differ.\n"
            "Defaults: --method all --n 2..8 --preset M (C = 768, 12 layers, 24 sublayers).\n"
            "\n"
            "example:\n"
            "  s2hc params                          # the paper's Fig. 1 right: mhc_lite n=8 = 5.95B\n"
            "  s2hc params --method s2hc --n 4 --preset L --csv\n");
}

/* "5.95B", "1.23M", "45.6K", "123" */
static void human(double x, char *buf, size_t len) {
    if (x >= 1e9) snprintf(buf, len, "%.2fB", x / 1e9);
    else if (x >= 1e6) snprintf(buf, len, "%.2fM", x / 1e6);
    else if (x >= 1e3) snprintf(buf, len, "%.1fK", x / 1e3);
    else snprintf(buf, len, "%.0f", x);
}

static int parse_int(const char *s, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 1 || v > 1000000) return -1;
    *out = (int)v;
    return 0;
}

/* "4" or "2..8" */
static int parse_range(const char *s, int *lo, int *hi) {
    const char *dots = strstr(s, "..");
    if (!dots) {
        if (parse_int(s, lo)) return -1;
        *hi = *lo;
        return 0;
    }
    char a[32];
    size_t la = (size_t)(dots - s);
    if (la == 0 || la >= sizeof a) return -1;
    memcpy(a, s, la);
    a[la] = '\0';
    if (parse_int(a, lo) || parse_int(dots + 2, hi) || *lo > *hi) return -1;
    return 0;
}

int params_main(int argc, char **argv) {
    const char *method = "all", *preset = "M";
    int n_lo = 2, n_hi = HC_MAX_N, C = 0, layers = 0, csv = 0;
    opt_seen seen = {.cmd = "params"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        if (opt_kind(a, &ended) < 0) continue;
        if (ended || a[0] != '-' || !a[1]) { /* params takes no operand */
            fprintf(stderr, "s2hc: error: params: unexpected argument '%s' (params takes options only)\n\n", a);
            params_usage(stderr);
            return 2;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { params_usage(stdout); return 0; }
        else if (!strcmp(a, "--csv")) csv = 1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--method", 1))) method = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--preset", 1))) preset = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--n", 1))) {
            if (parse_range(v, &n_lo, &n_hi) || n_lo < 2 || n_hi > HC_MAX_N) {
                fprintf(stderr, "s2hc: error: --n wants N or A..B within 2..%d (got '%s')\n", HC_MAX_N, v);
                return 2;
            }
        } else if ((v = opt_once(&seen, argc, argv, &i, "--C", 1))) {
            /* the ranges of model.n_embd and model.n_layer (s2hc config) */
            if (parse_int(v, &C) || C > 16384) {
                fprintf(stderr, "s2hc: error: --C wants a width in 1..16384 (model.n_embd; got '%s')\n", v);
                return 2;
            }
        } else if ((v = opt_once(&seen, argc, argv, &i, "--layers", 1))) {
            if (parse_int(v, &layers) || layers > 128) {
                fprintf(stderr, "s2hc: error: --layers wants 1..128 (model.n_layer; got '%s')\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "s2hc: error: unknown or incomplete argument '%s'\n\n", a);
            params_usage(stderr);
            return 2;
        }
    }
    s2hc_config c;
    config_defaults(&c);
    if (preset_apply(&c, preset) != 0) {
        fprintf(stderr, "s2hc: error: unknown preset '%s' (tiny, small, M, L)\n", preset);
        return 2;
    }
    if (C) c.n_embd = C;
    if (layers) c.n_layer = layers;
    const hc_variant *only = NULL;
    if (!strcmp(method, "rc")) {
        fprintf(stderr, "s2hc: error: rc is the plain residual: no auxiliary parameters to count (a "
                "hyper-connection method, or all)\n");
        return 2;
    }
    if (strcmp(method, "all") != 0 && !(only = hc_variant_find(method))) {
        fprintf(stderr, "s2hc: error: unknown method '%s' (s2hc methods lists them)\n", method);
        return 2;
    }
    const int Lh = 2 * c.n_layer;
    int bad = 0, wm = 12; /* the method column: 12 wide, or the longest method's name */
    for (int vi = 0; hc_variants[vi]; vi++)
        if ((int)strlen(hc_variants[vi]->name) > wm) wm = (int)strlen(hc_variants[vi]->name);
    double base = -1;
    if (csv) printf("method,n,C,n_layer,sublayers,aux_formula,aux_table,total_params\n");
    else {
        printf("auxiliary parameters, C = %d, %d layers (%d hyper-connected sublayers), %spreset %s\n", c.n_embd,
               c.n_layer, Lh, C || layers ? "vocabulary and context of " : "", preset);
        printf("%-*s", wm, "method");
        for (int n = n_lo; n <= n_hi; n++) printf(" %9s%d", "n=", n);
        printf("\n");
    }
    for (int vi = 0; hc_variants[vi]; vi++) {
        const hc_variant *v = hc_variants[vi];
        if (only && v != only) continue;
        if (!csv) printf("%-*s", wm, v->name);
        for (int n = n_lo; n <= n_hi; n++) {
            snprintf(c.method, sizeof c.method, "%s", v->name);
            c.n_streams = n;
            param_info *pt = NULL;
            int np = 0;
            size_t total = 0, aux = 0;
            char err[256];
            if (model_param_table(&c, &pt, &np, &total, &aux, err, sizeof err) != 0) {
                fprintf(stderr, "s2hc: error: %s n=%d: %s\n", v->name, n, err);
                free(pt);
                return 1;
            }
            free(pt);
            double formula = v->aux_params(n, (double)c.n_embd) * Lh;
            if (formula != (double)aux) {
                fprintf(stderr, "s2hc params: MISMATCH %s n=%d: closed formula %.0f, parameter table %zu\n", v->name,
                        n, formula, aux);
                bad = 1;
            }
            if (base < 0) base = (double)(total - aux);
            if (csv) {
                printf("%s,%d,%d,%d,%d,%.0f,%zu,%zu\n", v->name, n, c.n_embd, c.n_layer, Lh, formula, aux, total);
            } else {
                char h[32];
                human((double)aux, h, sizeof h);
                printf(" %10s", h);
            }
        }
        if (!csv) printf("\n");
    }
    if (!csv) {
        char h[32];
        human(base, h, sizeof h);
        printf("base model (not auxiliary, vocab %d): %s; every count above matches its closed formula%s\n", c.vocab,
               h, bad ? " EXCEPT the ones reported" : "");
    }
    return bad;
}
