/* stats.c: the few statistics the report needs, in double, with no library beyond libm.
 * Paired t test (Student t through the regularised incomplete beta function), a
 * percentile bootstrap of the mean difference with a fixed seed (so the report is
 * reproducible), quantiles as numpy computes them, a tail moving average. */
#include "analysis.h"
#include "../harness/util.h"
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Bootstrap resamples and seed: fixed, so two reports of the same runs are identical. */
#define AN_BOOT_RESAMPLES 2000
#define AN_BOOT_SEED 0x9E3779B97F4A7C15ULL

/* Values past this magnitude are summed in units of the largest one: a blown-up run's
 * perplexity reaches ~1e308, where the sum of two and the square of a deviation of 1e155
 * or more overflow to inf. */
#define AN_MEAN_SCALE_FROM 1e150

int an_mean_std(const double *v, int n, double *mean, double *std) {
    double big = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) {
            k++;
            if (fabs(v[i]) > big) big = fabs(v[i]);
        }
    const double unit = big > AN_MEAN_SCALE_FROM ? big : 1.0; /* 1: the plain sums, bit for bit */
    double s = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) s += v[i] / unit;
    double m = k ? s / k : NAN, ss = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(v[i])) ss += (v[i] / unit - m) * (v[i] / unit - m);
    if (mean) *mean = m * unit;
    if (std) *std = k > 1 ? sqrt(ss / (k - 1)) * unit : 0.0;
    return k;
}

double an_tail_mean(const double *v, size_t n, size_t window, size_t *used) {
    size_t k = n < window ? n : window;
    if (used) *used = k;
    if (!k) return NAN;
    double s = 0;
    for (size_t i = n - k; i < n; i++) s += v[i];
    return s / (double)k;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double an_quantile(const double *v, size_t n, double q) {
    double *w = malloc((n ? n : 1) * sizeof *w);
    if (!w) return NAN;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(v[i])) w[m++] = v[i];
    double r = NAN;
    if (m) {
        qsort(w, m, sizeof *w, cmp_double);
        double pos = q * (double)(m - 1);
        size_t lo = (size_t)floor(pos), hi = lo + 1 < m ? lo + 1 : lo;
        r = w[lo] + (pos - (double)lo) * (w[hi] - w[lo]);
    }
    free(w);
    return r;
}

/* Continued fraction of the incomplete beta function (modified Lentz). */
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d; h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d; if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c; if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-15) break;
    }
    return h;
}

/* Regularised incomplete beta I_x(a, b). */
static double betai(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double lbt = lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x);
    if (x < (a + 1) / (a + b + 2)) return exp(lbt) * betacf(a, b, x) / a;
    return 1 - exp(lbt) * betacf(b, a, 1 - x) / b;
}

double an_t_cdf(double t, double df) {
    if (isnan(t) || !(df > 0)) return NAN;
    if (isinf(t)) return t > 0 ? 1 : 0;
    double tail = 0.5 * betai(df / 2, 0.5, df / (df + t * t)); /* P(T > |t|) */
    return t > 0 ? 1 - tail : tail;
}

double an_t_crit95(double df) {
    if (!(df > 0)) return NAN;
    double lo = 0, hi = 1000;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (an_t_cdf(mid, df) < 0.975) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

double an_t_quantile(double q, double df) {
    if (!(df > 0) || !(q > 0 && q < 1)) return NAN;
    double lo = -1000, hi = 1000;
    for (int i = 0; i < 200; i++) {
        double mid = 0.5 * (lo + hi);
        if (an_t_cdf(mid, df) < q) lo = mid; else hi = mid;
    }
    return 0.5 * (lo + hi);
}

int an_seeds_for_power(double d, double sd, double power, int cap) {
    if (!isfinite(d) || !isfinite(sd) || d == 0 || !(power > 0 && power < 1)) return 0;
    if (sd == 0) return 2;
    const double e = fabs(d) / sd;
    for (int n = 2; n <= cap; n++) {
        const double k = (an_t_quantile(0.975, n - 1) + an_t_quantile(power, n - 1)) / e;
        if ((double)n >= k * k) return n;
    }
    return cap + 1;
}

void an_holm(const double *p, int n, double *adj) {
    int *o = malloc_check((n > 0 ? (size_t)n : 1) * sizeof *o), m = 0;
    for (int i = 0; i < n; i++) {
        adj[i] = NAN;
        if (!isnan(p[i])) o[m++] = i;
    }
    for (int i = 1; i < m; i++) /* ascending p, insertion sort (a table's few rows) */
        for (int j = i; j > 0 && p[o[j]] < p[o[j - 1]]; j--) {
            const int t = o[j];
            o[j] = o[j - 1];
            o[j - 1] = t;
        }
    double run = 0;
    for (int k = 0; k < m; k++) {
        const double a = fmin(1.0, (double)(m - k) * p[o[k]]);
        if (a > run) run = a;
        adj[o[k]] = run;
    }
    free(o);
}

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void an_paired_test(const double *a, const double *b, int n, an_paired *out) {
    memset(out, 0, sizeof *out);
    double *d = calloc_check(n > 0 ? (size_t)n : 1, sizeof *d);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(a[i]) && isfinite(b[i])) d[k++] = a[i] - b[i];
    out->n = k;
    out->t = out->p = out->lo = out->hi = out->boot_lo = out->boot_hi = NAN;
    an_mean_std(d, k, &out->mean_diff, &out->sd_diff);
    if (k >= 2) {
        double se = out->sd_diff / sqrt((double)k), tc = an_t_crit95(k - 1);
        out->lo = out->mean_diff - tc * se;
        out->hi = out->mean_diff + tc * se;
        if (se > 0) {
            out->t = out->mean_diff / se;
            out->p = 2 * an_t_cdf(-fabs(out->t), k - 1);
        }
        double *means = malloc_check(AN_BOOT_RESAMPLES * sizeof *means);
        uint64_t s = AN_BOOT_SEED;
        for (int r = 0; r < AN_BOOT_RESAMPLES; r++) {
            double acc = 0;
            for (int i = 0; i < k; i++) acc += d[splitmix(&s) % (uint64_t)k];
            means[r] = acc / k;
        }
        out->boot_lo = an_quantile(means, AN_BOOT_RESAMPLES, 0.025);
        out->boot_hi = an_quantile(means, AN_BOOT_RESAMPLES, 0.975);
        free(means);
    }
    free(d);
}

const char *an_paired_verdict(const an_paired *p) {
    if (p->n == 0) return "no pairs";
    if (p->n == 1) return "1 seed, no interval";
    if (isnan(p->lo) || isnan(p->hi)) return "within noise";
    if (p->sd_diff == 0) return p->mean_diff < 0 ? "a lower (identical spread)" : p->mean_diff > 0 ? "a higher (identical spread)" : "equal";
    if (p->lo <= 0 && p->hi >= 0) return "within noise";
    return p->mean_diff < 0 ? "a lower" : "a higher";
}
