#include "residual.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "../util.h"

extern const hc_variant hc_variant_identity;
extern const hc_variant hc_variant_hc;
extern const hc_variant hc_variant_mhc;
extern const hc_variant hc_variant_mhc_lite;
extern const hc_variant hc_variant_kromhc;
extern const hc_variant hc_variant_orthogonal;
extern const hc_variant hc_variant_s2hc;
extern const hc_variant hc_variant_s2hc_rot;

const hc_variant *const hc_variants[] = {
    &hc_variant_identity,
    &hc_variant_hc,
    &hc_variant_mhc,
    &hc_variant_mhc_lite,
    &hc_variant_kromhc,
    &hc_variant_orthogonal,
    &hc_variant_s2hc,
    &hc_variant_s2hc_rot,
    NULL,
};

const hc_variant *hc_variant_find(const char *name) {
    for (int i = 0; hc_variants[i]; i++)
        if (strcmp(hc_variants[i]->name, name) == 0) return hc_variants[i];
    return NULL;
}

int hc_gate_tensors(int n, hc_tensor *out) {
    out[0] = (hc_tensor){"alpha_pre", 1};
    out[1] = (hc_tensor){"alpha_post", 1};
    out[2] = (hc_tensor){"b_pre", (size_t)n};
    out[3] = (hc_tensor){"b_post", (size_t)n};
    return 4;
}

void hc_gate_init(int n, real *theta, int block) {
    theta[0] = (real)HC_GATE_ALPHA_INIT;
    theta[1] = (real)HC_GATE_ALPHA_INIT;
    for (int i = 0; i < n; i++) {
        real b = (i == block % n) ? (real)HC_GATE_BIAS_ON : (real)HC_GATE_BIAS_OFF;
        theta[2 + i] = b;
        theta[2 + n + i] = b;
    }
}

int hc_check_n(const char *method, int n, char *err, size_t errlen) {
    if (n >= 2 && n <= HC_MAX_N) return 0;
    snprintf(err, errlen, "%s needs 2 <= n_streams <= %d (got %d)", method, HC_MAX_N, n);
    return -1;
}

int hc_option(const char *method, const char *key, const char *value, const char *a, const char *b, char *err,
              size_t errlen) {
    if (value[0] == '\0' || strcmp(value, a) == 0) return 0;
    if (strcmp(value, b) == 0) return 1;
    snprintf(err, errlen, "%s: residual.%s must be %s or %s (got '%s')", method, key, a, b, value);
    return -1;
}

unsigned char *hc_perms_alloc(int m) {
    size_t np = (size_t)hc_factorial(m);
    unsigned char *t = malloc_check(np * (size_t)m);
    unsigned char p[HC_MAX_N];
    for (int i = 0; i < m; i++) p[i] = (unsigned char)i;
    for (size_t k = 0; k < np; k++) {
        memcpy(t + k * (size_t)m, p, (size_t)m);
        /* next permutation in lexicographic order */
        int i = m - 2;
        while (i >= 0 && p[i] >= p[i + 1]) i--;
        if (i < 0) break;
        int j = m - 1;
        while (p[j] <= p[i]) j--;
        unsigned char x = p[i]; p[i] = p[j]; p[j] = x;
        for (int a = i + 1, b = m - 1; a < b; a++, b--) { x = p[a]; p[a] = p[b]; p[b] = x; }
    }
    return t;
}

double hc_lite_offset(const s2hc_config *c, int m) {
    double off = c->lite_offset_value;
    if (strcmp(c->lite_offset, "scaled") == 0) off -= lgamma(m + 1.0);
    return off;
}

double hc_lite_identity_weight(int m, double offset) {
    return 1.0 / (1.0 + (hc_factorial(m) - 1.0) * exp(offset));
}

int hc_kromhc_factorise(int n, int *f) {
    switch (n) {
    case 4: f[0] = 2; f[1] = 2; return 2;
    case 6: f[0] = 2; f[1] = 3; return 2;
    case 8: f[0] = 2; f[1] = 2; f[2] = 2; return 3;
    case 2: case 3: case 5: case 7: f[0] = n; return 1;
    default: return 0;
    }
}

const char *hc_kromhc_factor_string(int n, char *buf, size_t len) {
    int f[4], nf = hc_kromhc_factorise(n, f);
    size_t at = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < nf && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, i ? "x%d" : "%d", f[i]);
    return buf;
}
