/* composite.c: products of H_res over depth (paper Fig 6 middle and right, Fig 9) and the
 * end-of-training probe /final that gathers every statistic over S validation sequences.
 *
 * Forward order: sublayer 0 acts first, so the map of the residual path through the first
 * l sublayers is H_{l-1} ··· H_1 · H_0 (each H_res in the X_next = H_res · X convention).
 * Two composites are recorded per sequence, both documented in docs/probes.md:
 *   composite             the product of the sequence's token-averaged matrices
 *                         (H̄_{Lh-1} ··· H̄_0), what the paper draws;
 *   composite_token_mean  the token average of the per-token products
 *                         (mean_t H_{t,Lh-1} ··· H_{t,0}), what a token actually sees.
 * They differ when H_res varies across tokens (a product of means is not a mean of
 * products).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/util.h"
#include "probes/probes.h"

void probe_matmul(const double *A, const double *B, double *C, int n) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int k = 0; k < n; k++) s += A[i * n + k] * B[k * n + j];
            C[i * n + j] = s;
        }
}

void probe_composite(const double *H, int L, int n, double *P, double *cum) {
    double Q[PROBE_MAX_N * PROBE_MAX_N];
    const int nn = n * n;
    for (int i = 0; i < nn; i++) P[i] = (i % (n + 1)) == 0; /* identity */
    for (int l = 0; l < L; l++) {
        probe_matmul(H + (size_t)l * nn, P, Q, n); /* P <- H_l · P */
        memcpy(P, Q, (size_t)nn * sizeof(double));
        if (cum) cum[l] = probe_spectral_norm(P, n);
    }
}

/* ---- /final ------------------------------------------------------------------------------ */

static void put(h5log *log, const char *path, h5log_type type, int rank, size_t d0, size_t d1, size_t d2, size_t d3,
                const void *data, const char *desc) {
    size_t dims[4] = {d0, d1, d2, d3};
    h5log_static_set(log, path, type, rank, dims, data, desc);
}

int probe_final(gpt_model *m, const data_shard *val, int samples, h5log *log, int step, int show_progress) {
    double t_start = now_seconds();
    const int T = m->T;
    uint64_t W = loader_eval_windows(val, T);
    if (W == 0) {
        fprintf(stderr, "s2hc: error: %s: no full window of %d tokens for the final probe\n", val->path, T);
        return -1;
    }
    int S = samples < 1 ? 1 : samples;
    if ((uint64_t)S > W) {
        fprintf(stderr, "s2hc: warning: %s holds %llu windows of %d tokens: the final probe uses %llu sequences, "
                        "not %d\n", val->path, (unsigned long long)W, T, (unsigned long long)W, samples);
        S = (int)W;
    }
    if (!m->acts) model_alloc_acts(m, 8);
    const int B = m->B, Lh = m->Lh, n = m->n, C = m->C, hc = m->variant != NULL;
    const size_t nn = (size_t)n * n, L = (size_t)Lh, Ss = (size_t)S;
    const int K = T < PROBE_TOKENS_PER_SEQ ? T : PROBE_TOKENS_PER_SEQ;
    const int Sj = S < PROBE_JAC_SEQS ? S : PROBE_JAC_SEQS;
    const size_t Sk = Ss * K;
    real saved_loss = m->mean_loss;
    double t_jac = 0;

    uint64_t *win = malloc_check(Ss * sizeof(uint64_t));
    uint64_t *bw = malloc_check((size_t)B * sizeof(uint64_t));
    probe_windows(val, T, W, S, win);
    int *inputs = malloc_check((size_t)B * T * sizeof(int));
    const int Bj = B < Sj ? B : Sj; /* the most sequences a Jacobian estimate takes at once */
    real *X0 = malloc_check((size_t)Bj * T * n * C * sizeof(real));
    int64_t *win64 = malloc_check(Ss * sizeof(int64_t));
    double *rms = malloc_check(Ss * (L + 1) * sizeof(double));
    double *jac = malloc_check((size_t)Sj * sizeof(double)), *jac_res = malloc_check((size_t)Sj * sizeof(double));
    int64_t *jac_it = malloc_check((size_t)Sj * 2 * sizeof(int64_t));
    double *sig = malloc_check((size_t)Bj * sizeof(double));
    /* residual-matrix outputs (hc only) */
    double *Hseq = NULL, *colsum = NULL, *rowsum = NULL, *sv = NULL, *dev = NULL, *comp = NULL, *comp_cs = NULL,
           *comp_rs = NULL, *comp_tok = NULL, *cum = NULL, *tokcum = NULL, *cos = NULL, *cosb = NULL, *Pt = NULL;
    float *tokH = NULL;
    int64_t *tokidx = NULL;
    if (hc) {
        Hseq = malloc_check(Ss * L * nn * sizeof(double));
        colsum = malloc_check(Ss * L * n * sizeof(double));
        rowsum = malloc_check(Ss * L * n * sizeof(double));
        sv = malloc_check(Ss * L * n * sizeof(double));
        dev = malloc_check(Ss * L * n * sizeof(double));
        comp = malloc_check(Ss * nn * sizeof(double));
        comp_cs = malloc_check(Ss * n * sizeof(double));
        comp_rs = malloc_check(Ss * n * sizeof(double));
        comp_tok = malloc_check(Ss * nn * sizeof(double));
        cum = malloc_check(Ss * L * sizeof(double));
        tokcum = malloc_check(Sk * L * sizeof(double));
        cos = malloc_check(Ss * L * sizeof(double));
        cosb = malloc_check(Ss * L * sizeof(double));
        tokH = malloc_check(Sk * L * nn * sizeof(float));
        tokidx = malloc_check(Sk * 2 * sizeof(int64_t));
        Pt = malloc_check((size_t)T * nn * sizeof(double));
    }
    probe_acc glob, seq;
    probe_acc_init(&glob, m, 1, 0);
    probe_acc_init(&seq, m, 1, 0);

    progress pr;
    progress_begin(&pr, "final probe", "sequences", S, show_progress);
    const int jb_total = (Sj + B - 1) / B; /* batches with a Jacobian: ~10x the others' time */
    for (int s0 = 0; s0 < S && !stop_signal; s0 += B) {
        const int jb_done = (s0 < Sj ? s0 : Sj + B - 1) / B;
        pr.skip = t_jac;
        pr.extra = jb_done ? t_jac / jb_done * (jb_total - jb_done) : 0;
        progress_update(&pr, s0);
        int nb = S - s0 < B ? S - s0 : B;
        for (int b = 0; b < B; b++) bw[b] = win[s0 + (b < nb ? b : nb - 1)]; /* pad with the last */
        probe_fill_inputs(val, T, bw, B, inputs);
        model_forward(m, inputs, NULL, B);
        for (int b = 0; b < nb; b++) {
            const size_t s = (size_t)s0 + b;
            win64[s] = (int64_t)win[s];
            probe_acc_reset(&seq);
            probe_acc_add(&seq, m, (size_t)b * T, (size_t)T);
            probe_acc_merge(&glob, &seq);
            for (int l = 0; l <= Lh; l++) rms[s * (L + 1) + l] = probe_acc_rms(&seq, l);
            if (!hc) continue;
            double *Hs = Hseq + s * L * nn;
            for (int l = 0; l < Lh; l++) {
                probe_acc_mean(&seq, l, Hs + l * nn);
                probe_row_col_sums(Hs + l * nn, n, rowsum + (s * L + l) * n, colsum + (s * L + l) * n);
                probe_sv_and_deviation(Hs + l * nn, n, sv + (s * L + l) * n, dev + (s * L + l) * n);
                cos[s * L + l] = seq.cos_na[l] ? seq.cos_a[l] / (double)seq.cos_na[l] : NAN;
                cosb[s * L + l] = seq.cos_nb[l] ? seq.cos_b[l] / (double)seq.cos_nb[l] : NAN;
            }
            probe_composite(Hs, Lh, n, comp + s * nn, cum + s * L);
            probe_row_col_sums(comp + s * nn, n, comp_rs + s * n, comp_cs + s * n);
            /* per-token products (tokens are independent: parallel, then summed in order) */
#pragma omp parallel for schedule(static)
            for (int t = 0; t < T; t++) {
                double H[PROBE_MAX_N * PROBE_MAX_N], Q[PROBE_MAX_N * PROBE_MAX_N];
                double *P = Pt + (size_t)t * nn;
                for (size_t i = 0; i < nn; i++) P[i] = (i % (n + 1)) == 0;
                int k = -1; /* subsample slot of this token, if any */
                for (int q = 0; q < K; q++)
                    if ((2 * q + 1) * T / (2 * K) == t) k = q;
                for (int l = 0; l < Lh; l++) {
                    const real *Hr = model_hc_acts(m, l).H + ((size_t)b * T + t) * nn;
                    for (size_t i = 0; i < nn; i++) H[i] = Hr[i];
                    probe_matmul(H, P, Q, n);
                    memcpy(P, Q, nn * sizeof(double));
                    if (k >= 0) {
                        size_t r = s * K + k;
                        for (size_t i = 0; i < nn; i++) tokH[(r * L + l) * nn + i] = Hr[i];
                        tokcum[r * L + l] = probe_spectral_norm(P, n);
                        tokidx[r * 2] = (int64_t)s;
                        tokidx[r * 2 + 1] = t;
                    }
                }
            }
            double *ct = comp_tok + s * nn;
            for (size_t i = 0; i < nn; i++) ct[i] = 0;
            for (int t = 0; t < T; t++)
                for (size_t i = 0; i < nn; i++) ct[i] += Pt[(size_t)t * nn + i];
            for (size_t i = 0; i < nn; i++) ct[i] /= T;
        }
        if (s0 < Sj) {
            /* the Jacobian of this batch's sequences among the first Sj, over those alone
               (overwrites the activations): a batch's other sequences and its padding were
               half its cost at B = 16 and drew out its iterations, the values they
               recorded were never used. The sequences come first in the streams' rows. */
            double tj = now_seconds();
            const int nj = Sj - s0 < nb ? Sj - s0 : nb;
            memcpy(X0, model_streams(m, 0), (size_t)nj * T * n * C * sizeof(real));
            if (nj != B) model_alloc_acts(m, nj); /* the next batch's forward takes B again */
            int it1 = probe_jacobian_norm(m, X0, 1, PROBE_JAC_ITERS, PROBE_JAC_TOL, sig, &pr);
            for (int b = 0; b < nj; b++) {
                jac[s0 + b] = sig[b];
                jac_it[(s0 + b) * 2] = it1;
            }
            int it0 = probe_jacobian_norm(m, X0, 0, PROBE_JAC_ITERS, PROBE_JAC_TOL, sig, &pr);
            for (int b = 0; b < nj; b++) {
                jac_res[s0 + b] = sig[b];
                jac_it[(s0 + b) * 2 + 1] = it0;
            }
            t_jac += now_seconds() - tj;
        }
    }

    progress_end(&pr);
    if (m->B != B) model_alloc_acts(m, B); /* the buffer of B sequences, as the caller gave it */
    int rc = 0;
    if (stop_signal) { /* stopped (training's final probe): nothing written */
        rc = -2;
        goto done;
    }

    /* ---- write /final ---- */
    put(log, "/final/window", H5LOG_I64, 1, Ss, 0, 0, 0, win64,
        "[S] validation window of each sequence: tokens [w*T, w*T + T) of the validation shard (S evenly spaced "
        "windows)");
    put(log, "/final/stream_rms", H5LOG_F64, 2, Ss, L + 1, 0, 0, rms,
        "[S, Lh+1] per sequence, RMS of the residual streams entering sublayer l (l = Lh: the final streams)");
    put(log, "/final/jacobian_norm", H5LOG_F64, 1, (size_t)Sj, 0, 0, 0, jac,
        "[Sj] per sequence (the first Sj of the S), spectral norm of d(final streams)/d(initial streams) over the "
        "whole sequence (T*n*C inputs and outputs), full network (branches on). Restarted Lanczos on J^T J (JVP by "
        "central differences, exact VJP); the value is the largest exact read-out ||J^T g|| / ||g||, a lower bound "
        "that converges to ||J||_2 (docs/probes.md)");
    put(log, "/final/jacobian_norm_residual", H5LOG_F64, 1, (size_t)Sj, 0, 0, 0, jac_res,
        "[Sj] as jacobian_norm with every sublayer output set to 0 (branches off): the residual path H_res with "
        "its dynamic, state-dependent coefficients; tokens are then independent and the value is the largest "
        "token's norm");
    put(log, "/final/jacobian_iters", H5LOG_I64, 2, (size_t)Sj, 2, 0, 0, jac_it,
        "[Sj, 2] products J^T J v used for jacobian_norm and jacobian_norm_residual (per batch of sequences; "
        "the attribute /final@jacobian_max_iters is the cap)");
    if (hc) {
        double *Hm = malloc_check(L * nn * sizeof(double)), *svm = malloc_check(L * n * sizeof(double)),
               *devm = malloc_check(L * n * sizeof(double)), *edges = malloc_check((PROBE_HIST_BINS + 1) * sizeof(double));
        double *df = malloc_check(L * sizeof(double)), *csx = malloc_check(L * sizeof(double)),
               *csm = malloc_check(L * sizeof(double)), *rsx = malloc_check(L * sizeof(double)),
               *rsm = malloc_check(L * sizeof(double));
        int64_t *hc_counts = malloc_check(L * PROBE_HIST_BINS * sizeof(int64_t)), *hc_out = malloc_check(L * 2 * sizeof(int64_t));
        for (int l = 0; l < Lh; l++) {
            probe_acc_mean(&glob, l, Hm + l * nn);
            probe_sv_and_deviation(Hm + l * nn, n, svm + (size_t)l * n, devm + (size_t)l * n);
            df[l] = (double)glob.diag[l] / (double)glob.tokens;
            csx[l] = glob.cs_max[l];
            csm[l] = glob.cs_sum[l] / (double)glob.tokens;
            rsx[l] = glob.rs_max[l];
            rsm[l] = glob.rs_sum[l] / (double)glob.tokens;
            const int64_t *h = glob.hist + (size_t)l * (PROBE_HIST_BINS + 2);
            memcpy(hc_counts + (size_t)l * PROBE_HIST_BINS, h + 1, PROBE_HIST_BINS * sizeof(int64_t));
            hc_out[l * 2] = h[0];
            hc_out[l * 2 + 1] = h[PROBE_HIST_BINS + 1];
        }
        probe_hist_edges(edges);
        put(log, "/final/H_res", H5LOG_F64, 4, Ss, L, n, n, Hseq,
            "[S, Lh, n, n] per sequence and sublayer, H_res averaged over the sequence's T tokens (paper Fig 1, 9). "
            PROBE_CONVENTION);
        put(log, "/final/H_res_colsum", H5LOG_F64, 3, Ss, L, n, 0, colsum,
            "[S, Lh, n] column sums sum_i H_res[i, j] of /final/H_res (what each input stream gives; Fig 6 left)");
        put(log, "/final/H_res_rowsum", H5LOG_F64, 3, Ss, L, n, 0, rowsum,
            "[S, Lh, n] row sums sum_j H_res[i, j] of /final/H_res (what each output stream receives)");
        put(log, "/final/sv", H5LOG_F64, 3, Ss, L, n, 0, sv,
            "[S, Lh, n] singular values, descending, of each sequence's token-averaged H_res");
        put(log, "/final/dev_sv", H5LOG_F64, 3, Ss, L, n, 0, dev,
            "[S, Lh, n] singular values, descending, of /final/H_res - J (J = ones(n, n) / n), per sequence (v2 Fig 5)");
        put(log, "/final/H_res_mean", H5LOG_F64, 3, L, n, n, 0, Hm,
            "[Lh, n, n] H_res averaged over every token of every sequence. " PROBE_CONVENTION);
        put(log, "/final/sv_mean", H5LOG_F64, 2, L, n, 0, 0, svm,
            "[Lh, n] singular values, descending, of /final/H_res_mean");
        put(log, "/final/dev_sv_mean", H5LOG_F64, 2, L, n, 0, 0, devm,
            "[Lh, n] singular values, descending, of /final/H_res_mean - J (the deviation part)");
        put(log, "/final/H_res_tokens", H5LOG_F32, 4, Sk, L, n, n, tokH,
            "[S*K, Lh, n, n] raw per-token H_res (float32, as the model computed them) of K tokens per sequence at "
            "positions floor((2k+1) T / (2K)), k < K; /final/H_res_tokens_index names them. " PROBE_CONVENTION);
        put(log, "/final/H_res_tokens_index", H5LOG_I64, 2, Sk, 2, 0, 0, tokidx,
            "[S*K, 2] (sequence index into /final/window, token position) of each row of /final/H_res_tokens");
        put(log, "/final/composite", H5LOG_F64, 3, Ss, n, n, 0, comp,
            "[S, n, n] per sequence, the product of its token-averaged matrices over all sublayers in forward order, "
            "H_{Lh-1} ... H_1 H_0 (H_0 acts first; Fig 6 middle, Fig 9). " PROBE_CONVENTION);
        put(log, "/final/composite_colsum", H5LOG_F64, 2, Ss, n, 0, 0, comp_cs,
            "[S, n] column sums of /final/composite (Fig 6 middle)");
        put(log, "/final/composite_rowsum", H5LOG_F64, 2, Ss, n, 0, 0, comp_rs, "[S, n] row sums of /final/composite");
        put(log, "/final/composite_token_mean", H5LOG_F64, 3, Ss, n, n, 0, comp_tok,
            "[S, n, n] per sequence, the mean over its tokens of the per-token products H_{t,Lh-1} ... H_{t,0} (what "
            "a token's residual path does; differs from /final/composite when H_res varies across tokens). "
            PROBE_CONVENTION);
        put(log, "/final/cum_spectral_norm", H5LOG_F64, 2, Ss, L, 0, 0, cum,
            "[S, Lh] per sequence, column l-1 = spectral norm of the cumulative composite H_{l-1} ... H_0 of the "
            "token-averaged matrices over the first l sublayers, l = 1..Lh (Fig 6 right)");
        put(log, "/final/cum_spectral_norm_tokens", H5LOG_F64, 2, Sk, L, 0, 0, tokcum,
            "[S*K, Lh] the same for the per-token products H_{t,l-1} ... H_{t,0} of the tokens of "
            "/final/H_res_tokens_index");
        put(log, "/final/cos_sim", H5LOG_F64, 2, Ss, L, 0, 0, cos,
            "[S, Lh] per sequence and sublayer, mean pairwise cosine similarity among the n rows of H_res . X (after "
            "mixing), averaged over pairs and tokens");
        put(log, "/final/cos_sim_before", H5LOG_F64, 2, Ss, L, 0, 0, cosb,
            "[S, Lh] the same for the streams X entering the sublayer (before mixing)");
        put(log, "/final/diag_frac", H5LOG_F64, 1, L, 0, 0, 0, df,
            "[Lh] fraction of per-token H_res (all tokens of all sequences) whose row maxima all sit on the diagonal");
        put(log, "/final/colsum_dev_max", H5LOG_F64, 1, L, 0, 0, 0, csx,
            "[Lh] max over all tokens and columns of |sum_i H_res[i, j] - 1| (per-token matrices)");
        put(log, "/final/colsum_dev_mean", H5LOG_F64, 1, L, 0, 0, 0, csm,
            "[Lh] mean over all tokens and columns of |sum_i H_res[i, j] - 1|");
        put(log, "/final/rowsum_dev_max", H5LOG_F64, 1, L, 0, 0, 0, rsx,
            "[Lh] max over all tokens and rows of |sum_j H_res[i, j] - 1| (per-token matrices)");
        put(log, "/final/rowsum_dev_mean", H5LOG_F64, 1, L, 0, 0, 0, rsm,
            "[Lh] mean over all tokens and rows of |sum_j H_res[i, j] - 1|");
        put(log, "/final/hist_edges", H5LOG_F64, 1, PROBE_HIST_BINS + 1, 0, 0, 0, edges,
            "[B+1] bin edges of the H_res entry histogram: B equal bins of width 0.01 on [-1, 1.5), bin k = "
            "[edge k, edge k+1)");
        put(log, "/final/hist_counts", H5LOG_I64, 2, L, PROBE_HIST_BINS, 0, 0, hc_counts,
            "[Lh, B] per sublayer, how many entries H_res[i, j] of the per-token matrices of all S*T tokens fall in "
            "each bin of /final/hist_edges (Fig 8)");
        put(log, "/final/hist_outside", H5LOG_I64, 2, L, 2, 0, 0, hc_out,
            "[Lh, 2] per sublayer, entries below the first edge and at or above the last (NaN counts as above); "
            "with hist_counts they add up to S*T*n*n");
        free(Hm); free(svm); free(devm); free(edges); free(df); free(csx); free(csm); free(rsx); free(rsm);
        free(hc_counts); free(hc_out);
    }
    char buf[512];
    snprintf(buf, sizeof buf,
             "end-of-training probe over S = %d validation sequences of %d tokens (evenly spaced windows) at step %d; "
             "see docs/probes.md", S, T, step);
    h5log_attr_str(log, "/final", "description", buf);
    h5log_attr_str(log, "/final", "H_res_convention", PROBE_CONVENTION);
    h5log_attr_num(log, "/final", "step", step);
    h5log_attr_num(log, "/final", "samples", S);
    h5log_attr_num(log, "/final", "samples_requested", samples);
    h5log_attr_num(log, "/final", "sequence_length", T);
    h5log_attr_num(log, "/final", "tokens_per_sequence_kept", K);
    h5log_attr_num(log, "/final", "jacobian_sequences", Sj);
    h5log_attr_num(log, "/final", "jacobian_max_iters", PROBE_JAC_ITERS);
    h5log_attr_num(log, "/final", "jacobian_tol", PROBE_JAC_TOL);
    h5log_attr_num(log, "/final", "jacobian_jvp_step", PROBE_JAC_DELTA);
    if (!hc)
        h5log_attr_str(log, "/final", "note",
                       "method rc has no hyper-connection frame (n = 1): no residual-matrix statistics are recorded, "
                       "only the windows, the stream RMS and the Jacobian norms");
    h5log_attr_num(log, "/final", "seconds", now_seconds() - t_start);
    h5log_attr_num(log, "/final", "seconds_jacobian", t_jac);

done:
    probe_acc_free(&glob);
    probe_acc_free(&seq);
    free(win); free(bw); free(inputs); free(X0); free(win64); free(rms); free(jac); free(jac_res); free(jac_it); free(sig);
    free(Hseq); free(colsum); free(rowsum); free(sv); free(dev); free(comp); free(comp_cs); free(comp_rs);
    free(comp_tok); free(cum); free(tokcum); free(cos); free(cosb); free(tokH); free(tokidx); free(Pt);
    m->mean_loss = saved_loss;
    return rc;
}
