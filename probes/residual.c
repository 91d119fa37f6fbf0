/* residual.c: what the per-token residual matrices H_res look like, and the training-time
 * probe that records it every probe.every steps (paper Fig 1, 2, 3, 6 left, 8; v2 Fig 5).
 *
 * Per token and sublayer the model leaves H_res [n, n] (X_next = H_res · X, rows = output
 * streams) in its activation buffer. probe_acc_add walks them once and accumulates:
 * the token mean, diagonal dominance, row/column-sum deviation from 1, row maxima (for
 * percentiles), the entry histogram, the streams' cosine similarity (similarity.c) and
 * the streams' RMS. probe_step turns one probe batch into one row of every /probe series.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/util.h"
#include "probes/probes.h"

/* ---- small statistics ------------------------------------------------------------------ */

int probe_diag_dominant(const real *H, int n) {
    for (int i = 0; i < n; i++) {
        real d = H[i * n + i];
        for (int j = 0; j < n; j++)
            if (!(d >= H[i * n + j])) return 0; /* NaN anywhere in the row: not dominant */
    }
    return 1;
}

void probe_row_col_sums(const double *H, int n, double *rs, double *cs) {
    for (int i = 0; i < n; i++) {
        if (rs) rs[i] = 0;
        if (cs) cs[i] = 0;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (rs) rs[i] += H[i * n + j];
            if (cs) cs[j] += H[i * n + j];
        }
}

/* Quickselect: afterwards v[k] is the k-th smallest, v[0..k) <= v[k] <= v[k+1..n). */
static void select_k(float *v, long n, long k) {
    long lo = 0, hi = n - 1;
    while (hi > lo) {
        long mid = lo + (hi - lo) / 2;
        float a = v[lo], b = v[mid], c = v[hi]; /* median of three as the pivot */
        float pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        long i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        /* [lo, j] <= pivot <= [i, hi], and everything in (j, i) equals the pivot */
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return;
    }
}

double probe_percentile(float *v, size_t len, double q) {
    size_t m = 0;
    for (size_t i = 0; i < len; i++)
        if (isfinite(v[i])) v[m++] = v[i];
    if (m == 0) return NAN;
    if (q < 0) q = 0;
    if (q > 1) q = 1;
    double pos = q * (double)(m - 1);
    size_t k = (size_t)floor(pos);
    if (k > m - 1) k = m - 1;
    double frac = pos - (double)k;
    select_k(v, (long)m, (long)k);
    double lo = v[k];
    if (frac <= 0 || k + 1 >= m) return lo;
    float hi = v[k + 1];
    for (size_t i = k + 2; i < m; i++)
        if (v[i] < hi) hi = v[i];
    return lo + frac * ((double)hi - lo);
}

int probe_hist_bin(double v) {
    if (v < PROBE_HIST_LO) return -1;
    if (!(v < PROBE_HIST_HI)) return PROBE_HIST_BINS; /* also NaN */
    int k = (int)floor((v - PROBE_HIST_LO) * PROBE_HIST_BINS / (PROBE_HIST_HI - PROBE_HIST_LO));
    if (k < 0) k = 0;
    if (k >= PROBE_HIST_BINS) k = PROBE_HIST_BINS - 1;
    /* the bin the stored edges give (probe_hist_edges): v - LO rounds, next to an edge,
       to the other side of it (-1e-17 + 1 is 1) */
    while (k > 0 && v < PROBE_HIST_LO + (PROBE_HIST_HI - PROBE_HIST_LO) * k / PROBE_HIST_BINS) k--;
    while (k < PROBE_HIST_BINS - 1 && !(v < PROBE_HIST_LO + (PROBE_HIST_HI - PROBE_HIST_LO) * (k + 1) / PROBE_HIST_BINS)) k++;
    return k;
}

void probe_hist_edges(double *edges) {
    for (int k = 0; k <= PROBE_HIST_BINS; k++)
        edges[k] = PROBE_HIST_LO + (PROBE_HIST_HI - PROBE_HIST_LO) * k / PROBE_HIST_BINS;
}

/* ---- the accumulator ------------------------------------------------------------------- */

void probe_acc_init(probe_acc *a, const gpt_model *m, int want_hist, size_t rowmax_cap) {
    memset(a, 0, sizeof *a);
    a->Lh = m->Lh;
    a->n = m->n;
    a->C = m->C;
    a->hc = m->variant != NULL;
    size_t L = (size_t)a->Lh, n = (size_t)a->n;
    a->H_sum = calloc_check(L * n * n, sizeof(double));
    a->diag = calloc_check(L, sizeof(int64_t));
    a->cs_max = calloc_check(L, sizeof(double));
    a->cs_sum = calloc_check(L, sizeof(double));
    a->rs_max = calloc_check(L, sizeof(double));
    a->rs_sum = calloc_check(L, sizeof(double));
    a->cos_b = calloc_check(L, sizeof(double));
    a->cos_a = calloc_check(L, sizeof(double));
    a->cos_nb = calloc_check(L, sizeof(int64_t));
    a->cos_na = calloc_check(L, sizeof(int64_t));
    a->rms_sq = calloc_check(L + 1, sizeof(double));
    if (want_hist && a->hc) a->hist = calloc_check(L * (PROBE_HIST_BINS + 2), sizeof(int64_t));
    if (rowmax_cap && a->hc) {
        a->rowmax = calloc_check(L * rowmax_cap, sizeof(float));
        a->rowmax_cap = rowmax_cap;
    }
}

void probe_acc_reset(probe_acc *a) {
    size_t L = (size_t)a->Lh, n = (size_t)a->n;
    a->tokens = 0;
    a->rowmax_len = 0;
    memset(a->H_sum, 0, L * n * n * sizeof(double));
    memset(a->diag, 0, L * sizeof(int64_t));
    memset(a->cs_max, 0, L * sizeof(double));
    memset(a->cs_sum, 0, L * sizeof(double));
    memset(a->rs_max, 0, L * sizeof(double));
    memset(a->rs_sum, 0, L * sizeof(double));
    memset(a->cos_b, 0, L * sizeof(double));
    memset(a->cos_a, 0, L * sizeof(double));
    memset(a->cos_nb, 0, L * sizeof(int64_t));
    memset(a->cos_na, 0, L * sizeof(int64_t));
    memset(a->rms_sq, 0, (L + 1) * sizeof(double));
    if (a->hist) memset(a->hist, 0, L * (PROBE_HIST_BINS + 2) * sizeof(int64_t));
}

void probe_acc_free(probe_acc *a) {
    free(a->H_sum);
    free(a->diag);
    free(a->cs_max);
    free(a->cs_sum);
    free(a->rs_max);
    free(a->rs_sum);
    free(a->cos_b);
    free(a->cos_a);
    free(a->cos_nb);
    free(a->cos_na);
    free(a->rms_sq);
    free(a->hist);
    free(a->rowmax);
    memset(a, 0, sizeof *a);
}

/* max over a token's n sums of |sum - 1| into *mx, their mean into *mean. */
static void sum_dev(const double *s, int n, double *mx, double *mean) {
    double m = 0, t = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(s[i] - 1);
        if (!(d <= m)) m = d; /* NaN propagates */
        t += d;
    }
    *mx = m;
    *mean = t / n;
}

void probe_acc_add(probe_acc *a, const gpt_model *m, size_t t0, size_t cnt) {
    const int Lh = a->Lh, n = a->n, C = a->C;
    if (a->rowmax && a->rowmax_len + cnt * (size_t)n > a->rowmax_cap)
        die(1, "probe: row-maximum buffer too small (%zu + %zu > %zu)", a->rowmax_len, cnt * (size_t)n,
            a->rowmax_cap);
    /* one layer per iteration (l = Lh: the final streams' RMS only): every output is
     * per layer, so the result does not depend on the thread count */
#pragma omp parallel for schedule(dynamic, 1)
    for (int l = 0; l <= Lh; l++) {
        const real *Xs = model_streams(m, l);
        double rms = 0;
        for (size_t t = t0; t < t0 + cnt; t++) {
            const real *x = Xs + t * (size_t)n * C;
            for (size_t k = 0; k < (size_t)n * C; k++) rms += (double)x[k] * x[k];
        }
        a->rms_sq[l] += rms;
        if (l == Lh || !a->hc) continue;
        hc_acts h = model_hc_acts(m, l);
        double *Hs = a->H_sum + (size_t)l * n * n;
        float *rmax = a->rowmax ? a->rowmax + (size_t)l * a->rowmax_cap + a->rowmax_len : NULL;
        int64_t *hist = a->hist ? a->hist + (size_t)l * (PROBE_HIST_BINS + 2) : NULL;
        for (size_t t = t0; t < t0 + cnt; t++) {
            const real *H = h.H + t * (size_t)n * n;
            double Hd[PROBE_MAX_N * PROBE_MAX_N], rs[PROBE_MAX_N], cs[PROBE_MAX_N], mx, mean;
            for (int k = 0; k < n * n; k++) {
                Hd[k] = H[k];
                Hs[k] += H[k];
                if (hist) hist[probe_hist_bin(H[k]) + 1]++;
            }
            a->diag[l] += probe_diag_dominant(H, n);
            probe_row_col_sums(Hd, n, rs, cs);
            sum_dev(cs, n, &mx, &mean);
            if (!(mx <= a->cs_max[l])) a->cs_max[l] = mx;
            a->cs_sum[l] += mean;
            sum_dev(rs, n, &mx, &mean);
            if (!(mx <= a->rs_max[l])) a->rs_max[l] = mx;
            a->rs_sum[l] += mean;
            if (rmax) {
                for (int i = 0; i < n; i++) {
                    real r = H[i * n];
                    for (int j = 1; j < n; j++)
                        if (H[i * n + j] > r) r = H[i * n + j];
                    *rmax++ = r;
                }
            }
            double before, after;
            probe_token_cos(h.X + t * (size_t)n * C, H, n, C, &before, &after);
            if (!isnan(before)) { a->cos_b[l] += before; a->cos_nb[l]++; }
            if (!isnan(after)) { a->cos_a[l] += after; a->cos_na[l]++; }
        }
    }
    a->tokens += cnt;
    if (a->rowmax) a->rowmax_len += cnt * (size_t)n;
}

void probe_acc_merge(probe_acc *d, const probe_acc *s) {
    size_t L = (size_t)d->Lh, nn = (size_t)d->n * d->n;
    d->tokens += s->tokens;
    for (size_t k = 0; k < L * nn; k++) d->H_sum[k] += s->H_sum[k];
    for (size_t l = 0; l < L; l++) {
        d->diag[l] += s->diag[l];
        if (!(s->cs_max[l] <= d->cs_max[l])) d->cs_max[l] = s->cs_max[l];
        if (!(s->rs_max[l] <= d->rs_max[l])) d->rs_max[l] = s->rs_max[l];
        d->cs_sum[l] += s->cs_sum[l];
        d->rs_sum[l] += s->rs_sum[l];
        d->cos_b[l] += s->cos_b[l];
        d->cos_a[l] += s->cos_a[l];
        d->cos_nb[l] += s->cos_nb[l];
        d->cos_na[l] += s->cos_na[l];
    }
    for (size_t l = 0; l <= L; l++) d->rms_sq[l] += s->rms_sq[l];
    if (d->hist && s->hist)
        for (size_t k = 0; k < L * (PROBE_HIST_BINS + 2); k++) d->hist[k] += s->hist[k];
}

void probe_acc_mean(const probe_acc *a, int l, double *out) {
    size_t nn = (size_t)a->n * a->n;
    for (size_t k = 0; k < nn; k++) out[k] = a->tokens ? a->H_sum[l * nn + k] / (double)a->tokens : NAN;
}

double probe_acc_rms(const probe_acc *a, int l) {
    double cnt = (double)a->tokens * a->n * a->C;
    return cnt > 0 ? sqrt(a->rms_sq[l] / cnt) : NAN;
}

/* ---- probe batch windows --------------------------------------------------------------- */

void probe_windows(const data_shard *s, int T, uint64_t W, int k, uint64_t *win) {
    (void)s;
    (void)T;
    for (int i = 0; i < k; i++) win[i] = ((2 * (uint64_t)i + 1) * W) / (2 * (uint64_t)k);
}

void probe_fill_inputs(const data_shard *s, int T, const uint64_t *win, int k, int *inputs) {
    for (int i = 0; i < k; i++)
        for (int t = 0; t < T; t++) inputs[(size_t)i * T + t] = shard_token(s, win[i] * (uint64_t)T + (uint64_t)t);
}

/* ---- the training-time probe ----------------------------------------------------------- */

enum {
    S_STEP, S_H, S_P10, S_P50, S_P90, S_RML, S_DIAG, S_DIAGL, S_COS, S_COSB, S_SV, S_DEV,
    S_CSMAX, S_CSMEAN, S_RSMAX, S_RSMEAN, S_RMS, S_COUNT
};

struct probe_state {
    gpt_model *m;
    const data_shard *val;
    h5log *log;
    int B;
    uint64_t *win;
    int *inputs, *saved_inputs;
    probe_acc acc;
    int s[S_COUNT];
    double seconds;          /* every probe_step of the run, resumed sessions included */
    int64_t calls;
    double t_open, session;  /* wall clock at probe_open; probe seconds since then */
    double t_last;           /* wall clock at the end of the last probe_step */
};

static double attr_num(const h5log *log, const char *obj, const char *name, double dflt) {
    for (int i = 0; i < log->n_attrs; i++)
        if (!log->attrs[i].is_string && !strcmp(log->attrs[i].path, obj) && !strcmp(log->attrs[i].name, name))
            return log->attrs[i].num;
    return dflt;
}

probe_state *probe_open(gpt_model *m, const data_shard *val, h5log *log) {
    if (!m->acts || m->B < 1) die(1, "probe_open: the model has no activation buffer (model_alloc_acts first)");
    uint64_t W = loader_eval_windows(val, m->T);
    if (W == 0) {
        fprintf(stderr, "s2hc: warning: %s: no full window of %d tokens: training without probes\n", val->path, m->T);
        return NULL;
    }
    probe_state *p = calloc_check(1, sizeof *p);
    p->m = m;
    p->val = val;
    p->log = log;
    p->B = m->B;
    size_t N = (size_t)p->B * m->T;
    p->win = calloc_check((size_t)p->B, sizeof(uint64_t));
    p->inputs = calloc_check(N, sizeof(int));
    p->saved_inputs = calloc_check(N, sizeof(int));
    probe_windows(val, m->T, W, p->B, p->win);
    probe_fill_inputs(val, m->T, p->win, p->B, p->inputs);
    probe_acc_init(&p->acc, m, 0, N * (size_t)m->n);

    const size_t Lh = (size_t)m->Lh, n = (size_t)m->n;
    const size_t d_lnn[3] = {Lh, n, n}, d_ln[2] = {Lh, n}, d_l3[2] = {Lh, 3}, d_l[1] = {Lh}, d_l1[1] = {Lh + 1};
    for (int k = 0; k < S_COUNT; k++) p->s[k] = -1;
    p->s[S_STEP] = h5log_series_add(log, "/probe/step", H5LOG_I64, 0, NULL,
                                    "optimizer step after which each probe row was taken (the row axis of /probe)", "");
    p->s[S_RMS] = h5log_series_add(
        log, "/probe/stream_rms", H5LOG_F64, 1, d_l1,
        "[Lh+1] RMS over tokens, streams and channels of the residual streams entering sublayer l (l = Lh: the "
        "final streams before the stream sum), on the probe batch",
        "");
    if (m->variant) {
        p->s[S_H] = h5log_series_add(
            log, "/probe/H_res_mean", H5LOG_F64, 3, d_lnn,
            "[Lh, n, n] per sublayer, H_res averaged over every token of the probe batch. " PROBE_CONVENTION, "");
        p->s[S_P10] = h5log_series_add(log, "/probe/row_max_p10", H5LOG_F64, 0, NULL,
                                       "10th percentile of the row maxima max_j H_res[i, j] over every row of every "
                                       "per-token H_res of every sublayer (linear interpolation between ranks)", "");
        p->s[S_P50] = h5log_series_add(log, "/probe/row_max_median", H5LOG_F64, 0, NULL,
                                       "median of the row maxima max_j H_res[i, j] over every row of every per-token "
                                       "H_res of every sublayer (paper Fig 2)", "");
        p->s[S_P90] = h5log_series_add(log, "/probe/row_max_p90", H5LOG_F64, 0, NULL,
                                       "90th percentile of the row maxima max_j H_res[i, j] over every row of every "
                                       "per-token H_res of every sublayer", "");
        p->s[S_RML] = h5log_series_add(log, "/probe/row_max_layer", H5LOG_F64, 2, d_l3,
                                       "[Lh, 3] per sublayer: 10th percentile, median and 90th percentile of the row "
                                       "maxima of its per-token H_res", "");
        p->s[S_DIAG] = h5log_series_add(log, "/probe/diag_frac", H5LOG_F64, 0, NULL,
                                        "fraction of per-token H_res (all tokens, all sublayers) whose row maxima all "
                                        "sit on the diagonal: H[i,i] >= H[i,j] for every i, j (paper Fig 2)", "");
        p->s[S_DIAGL] = h5log_series_add(log, "/probe/diag_frac_layer", H5LOG_F64, 1, d_l,
                                         "[Lh] per sublayer: fraction of its per-token H_res whose row maxima all sit "
                                         "on the diagonal", "");
        p->s[S_COS] = h5log_series_add(
            log, "/probe/cos_sim", H5LOG_F64, 1, d_l,
            "[Lh] per sublayer: mean pairwise cosine similarity among the n rows of H_res . X (the streams after "
            "mixing, before the branch output is added), averaged over pairs i < j and tokens (paper Fig 3)", "");
        p->s[S_COSB] = h5log_series_add(
            log, "/probe/cos_sim_before", H5LOG_F64, 1, d_l,
            "[Lh] per sublayer: mean pairwise cosine similarity among the n streams X entering it (before mixing)", "");
        p->s[S_SV] = h5log_series_add(log, "/probe/sv", H5LOG_F64, 2, d_ln,
                                      "[Lh, n] singular values, descending, of the token-averaged H_res of each "
                                      "sublayer (/probe/H_res_mean)", "");
        p->s[S_DEV] = h5log_series_add(log, "/probe/dev_sv", H5LOG_F64, 2, d_ln,
                                       "[Lh, n] singular values, descending, of H_res_mean - J (J = ones(n, n) / n, "
                                       "the deviation part; v2 Fig 5); the last is 0 when rows or columns sum to 1",
                                       "");
        p->s[S_CSMAX] = h5log_series_add(log, "/probe/colsum_dev_max", H5LOG_F64, 1, d_l,
                                         "[Lh] max over tokens and columns of |sum_i H_res[i, j] - 1| (per-token "
                                         "matrices)", "");
        p->s[S_CSMEAN] = h5log_series_add(log, "/probe/colsum_dev_mean", H5LOG_F64, 1, d_l,
                                          "[Lh] mean over tokens and columns of |sum_i H_res[i, j] - 1|", "");
        p->s[S_RSMAX] = h5log_series_add(log, "/probe/rowsum_dev_max", H5LOG_F64, 1, d_l,
                                         "[Lh] max over tokens and rows of |sum_j H_res[i, j] - 1| (per-token "
                                         "matrices)", "");
        p->s[S_RSMEAN] = h5log_series_add(log, "/probe/rowsum_dev_mean", H5LOG_F64, 1, d_l,
                                          "[Lh] mean over tokens and rows of |sum_j H_res[i, j] - 1|", "");
    }
    char buf[512];
    snprintf(buf, sizeof buf,
             "probes over training: every probe.every steps, one forward on a fixed batch of %d validation "
             "sequences of %d tokens (evenly spaced windows), one row per probe; see docs/probes.md",
             p->B, m->T);
    h5log_attr_str(log, "/probe", "description", buf);
    h5log_attr_str(log, "/probe", "H_res_convention", PROBE_CONVENTION);
    h5log_attr_num(log, "/probe", "batch_sequences", p->B);
    h5log_attr_num(log, "/probe", "sequence_length", m->T);
    if (!m->variant)
        h5log_attr_str(log, "/probe", "note",
                       "method rc has no hyper-connection frame (n = 1): no residual-matrix statistics are recorded, "
                       "only /probe/step and /probe/stream_rms");
    p->t_open = now_seconds();
    /* the totals of the sessions before this one (a resumed run); a value no build wrote (a
       damaged or edited file: negative, NaN, not a whole count, past 2^53) starts them over */
    p->seconds = attr_num(log, "/probe", "seconds_total", 0);
    if (!isfinite(p->seconds) || p->seconds < 0) p->seconds = 0;
    const double calls = attr_num(log, "/probe", "calls", 0);
    p->calls = calls >= 0 && calls <= 9007199254740992.0 && calls == floor(calls) ? (int64_t)calls : 0;
    return p;
}

void probe_step(probe_state *p, int step) {
    if (!p) return;
    double t0 = now_seconds();
    gpt_model *m = p->m;
    const int Lh = m->Lh, n = m->n;
    const size_t N = (size_t)p->B * m->T;
    real saved_loss = m->mean_loss;
    int same_batch = m->B == p->B; /* else model_forward reallocates for the probe batch */
    if (same_batch) memcpy(p->saved_inputs, m->inputs, N * sizeof(int));
    model_forward(m, p->inputs, NULL, p->B);

    probe_acc *a = &p->acc;
    probe_acc_reset(a);
    probe_acc_add(a, m, 0, N);

    h5log *log = p->log;
    int64_t s64 = step;
    h5log_append(log, p->s[S_STEP], &s64);
    double rms[Lh + 1];
    for (int l = 0; l <= Lh; l++) rms[l] = probe_acc_rms(a, l);
    h5log_append(log, p->s[S_RMS], rms);
    if (m->variant) {
        size_t nn = (size_t)n * n;
        double *Hm = malloc_check((size_t)Lh * nn * sizeof(double));
        double *sv = malloc_check((size_t)Lh * n * sizeof(double)), *dev = malloc_check((size_t)Lh * n * sizeof(double));
        double rml[Lh * 3], dfl[Lh], cos[Lh], cosb[Lh], csx[Lh], csm[Lh], rsx[Lh], rsm[Lh];
        int64_t diag = 0;
        for (int l = 0; l < Lh; l++) {
            probe_acc_mean(a, l, Hm + l * nn);
            probe_sv_and_deviation(Hm + l * nn, n, sv + (size_t)l * n, dev + (size_t)l * n);
            float *rm = a->rowmax + (size_t)l * a->rowmax_cap;
            rml[l * 3 + 0] = probe_percentile(rm, a->rowmax_len, 0.1);
            rml[l * 3 + 1] = probe_percentile(rm, a->rowmax_len, 0.5);
            rml[l * 3 + 2] = probe_percentile(rm, a->rowmax_len, 0.9);
            dfl[l] = (double)a->diag[l] / (double)a->tokens;
            diag += a->diag[l];
            cos[l] = a->cos_na[l] ? a->cos_a[l] / (double)a->cos_na[l] : NAN;
            cosb[l] = a->cos_nb[l] ? a->cos_b[l] / (double)a->cos_nb[l] : NAN;
            csx[l] = a->cs_max[l];
            csm[l] = a->cs_sum[l] / ((double)a->tokens);
            rsx[l] = a->rs_max[l];
            rsm[l] = a->rs_sum[l] / ((double)a->tokens);
        }
        /* pooled percentiles: the layers' segments are contiguous when the buffer is full */
        size_t total = 0;
        float *pool = a->rowmax;
        for (int l = 0; l < Lh; l++) {
            if (pool + total != a->rowmax + (size_t)l * a->rowmax_cap)
                memmove(pool + total, a->rowmax + (size_t)l * a->rowmax_cap, a->rowmax_len * sizeof(float));
            total += a->rowmax_len;
        }
        double p10 = probe_percentile(pool, total, 0.1), p50 = probe_percentile(pool, total, 0.5),
               p90 = probe_percentile(pool, total, 0.9);
        double df = (double)diag / ((double)a->tokens * Lh);
        h5log_append(log, p->s[S_H], Hm);
        h5log_append(log, p->s[S_P10], &p10);
        h5log_append(log, p->s[S_P50], &p50);
        h5log_append(log, p->s[S_P90], &p90);
        h5log_append(log, p->s[S_RML], rml);
        h5log_append(log, p->s[S_DIAG], &df);
        h5log_append(log, p->s[S_DIAGL], dfl);
        h5log_append(log, p->s[S_COS], cos);
        h5log_append(log, p->s[S_COSB], cosb);
        h5log_append(log, p->s[S_SV], sv);
        h5log_append(log, p->s[S_DEV], dev);
        h5log_append(log, p->s[S_CSMAX], csx);
        h5log_append(log, p->s[S_CSMEAN], csm);
        h5log_append(log, p->s[S_RSMAX], rsx);
        h5log_append(log, p->s[S_RSMEAN], rsm);
        free(Hm);
        free(sv);
        free(dev);
    }
    if (same_batch) memcpy(m->inputs, p->saved_inputs, N * sizeof(int));
    m->mean_loss = saved_loss;
    double t1 = now_seconds();
    p->seconds += t1 - t0;
    p->session += t1 - t0;
    p->calls++;
    p->t_last = t1;
    h5log_attr_num(log, "/probe", "seconds_total", p->seconds);
    h5log_attr_num(log, "/probe", "calls", (double)p->calls);
    h5log_attr_num(log, "/probe", "seconds_per_call", p->seconds / (double)p->calls);
    if (t1 > p->t_open) h5log_attr_num(log, "/probe", "time_fraction", p->session / (t1 - p->t_open));
}

double probe_session_seconds(const probe_state *p, double *fraction) {
    if (fraction) *fraction = 0;
    if (!p) return 0;
    double wall = p->t_last - p->t_open; /* the moment /probe@time_fraction is taken at */
    if (fraction && wall > 0) *fraction = p->session / wall;
    return p->session;
}

void probe_close(probe_state *p) {
    if (!p) return;
    probe_acc_free(&p->acc);
    free(p->win);
    free(p->inputs);
    free(p->saved_inputs);
    free(p);
}
