/* probes.h: look inside every residual matrix and write what we see to the run file.
 *
 * Convention (the paper's and the code's): X_next = H_res · X with X [n, C] (one row per
 * stream), so H_res[i, j] is the weight of input stream j in output stream i; row sums are
 * what each output receives, column sums what each input gives. Every dataset the probes
 * write says so. docs/probes.md is the schema: every path, shape, dtype and meaning.
 *
 * Families, one per file:
 *   residual.c    per-token H_res statistics (token means, row maxima and percentiles,
 *                 diagonal dominance, row/column-sum deviation, entry histogram) and the
 *                 training-time probe (probe_open / probe_step / probe_close)
 *   spectra.c     singular values of small matrices (one-sided Jacobi)
 *   similarity.c  mean pairwise cosine similarity of the streams before/after mixing
 *   composite.c   products of H_res over depth, their column sums and cumulative spectral
 *                 norms, and the end-of-training probe (probe_final)
 *   jacobian.c    the spectral norm of d(final streams)/d(initial streams) by restarted
 *                 Lanczos on JᵀJ with an exact read-out (exact VJP, central-difference
 *                 JVP), with and without the branches
 *   harness/inspect.c   `s2hc inspect` and `s2hc probe`
 */
#ifndef S2HC_PROBES_H
#define S2HC_PROBES_H
#include <stddef.h>
#include <stdint.h>
#include "../harness/data.h"
#include "../harness/model.h"
#include "../harness/util.h"
#include "h5.h"

/* ---- the probe API used by the training loop ------------------------------------------ */

/* Tokens per sequence kept as raw per-token matrices in /final/H_res_tokens. */
#define PROBE_TOKENS_PER_SEQ 4
/* Sequences on which /final estimates the Jacobian norm (the first ones of the S). */
#define PROBE_JAC_SEQS 8
/* The Jacobian norm (jacobian.c): restarted Lanczos on JᵀJ, PROBE_JAC_BASIS Krylov vectors
 * per cycle, at most PROBE_JAC_ITERS products J^T J v in all, stopped earlier when no
 * sequence's value changed by more than PROBE_JAC_TOL (relative) between cycles. */
#define PROBE_JAC_BASIS 8
#define PROBE_JAC_ITERS 60
#define PROBE_JAC_TOL 1e-4
/* Central-difference step of the JVP, relative: h = PROBE_JAC_DELTA · ||X0_blk|| for a
 * unit vector. */
#ifndef PROBE_JAC_DELTA
#define PROBE_JAC_DELTA 2e-3
#endif
/* Histogram of H_res entries: PROBE_HIST_BINS equal bins on [LO, HI); entries outside
 * are counted in /final/hist_outside. Bin k = [LO + k·w, LO + (k+1)·w), w = 0.01. */
#define PROBE_HIST_LO (-1.0)
#define PROBE_HIST_HI 1.5
#define PROBE_HIST_BINS 250
/* Largest matrix the fixed-size small-matrix routines take (n <= HC_MAX_N). */
#define PROBE_MAX_N 8

/* Fixed probe batch: the same B_p sequences every time (evenly spaced windows of the
 * validation shard). */
typedef struct probe_state probe_state;

/* Declare every /probe series in `log` (or find them, on resume) and fix the probe batch.
 * m must have its activations allocated (model_alloc_acts) for the training micro-batch;
 * the probe batch is B_p = m->B sequences, so its forward reuses the activation buffer
 * without reallocating it. `val` and `log` must outlive
 * the state. Returns NULL (message on stderr) if the shard holds no full window; the
 * caller then trains without probes. The caller frees with probe_close. */
probe_state *probe_open(gpt_model *m, const data_shard *val, h5log *log);
/* Run a forward on the probe batch (with the model's activation buffer: call it after the
 * training step's backward) and append a row to every /probe series. Leaves parameters,
 * gradients and every RNG untouched. A NULL p does nothing. */
void probe_step(probe_state *p, int step);
/* The /final group over `samples` validation sequences (evenly spaced windows; fewer if
 * the shard holds fewer), taken B = m->B at a time (8 if m has no activations yet), at
 * training step `step`, with its progress on stdout when show_progress. Replaces any
 * previous /final. Leaves parameters and gradients as they were. Returns 0, -1 with a
 * message on stderr (no full window in the shard), or -2 with nothing written when
 * stop_signal was set (harness/util.h). */
int probe_final(gpt_model *m, const data_shard *val, int samples, h5log *log, int step, int show_progress);
void probe_close(probe_state *p); /* NULL is fine */
/* Seconds spent in probe_step since probe_open, and (if fraction is not NULL) that share of
 * the wall time from probe_open to the end of the last probe_step: the probes' cost during
 * training, the value of /probe@time_fraction. 0 for NULL. */
double probe_session_seconds(const probe_state *p, double *fraction);

/* `s2hc inspect` and `s2hc probe` (harness/inspect.c); argv[0] is the command name.
 * Return the process exit status: 0 ok, 1 failure, 2 usage error. */
int inspect_main(int argc, char **argv);
int probe_main(int argc, char **argv);

/* ---- statistics, exported for the tests (row-major n x n matrices) --------------------- */

/* spectra.c: singular values of the rows x cols matrix A (any size), descending, into
 * sv[min(rows, cols)], by one-sided Jacobi (Hestenes) in double. Returns the number of
 * sweeps, or -1 if it did not converge (sv still holds the last estimate) or A holds a
 * NaN or infinity (sv is then all NaN). */
int probe_svd(const double *A, int rows, int cols, double *sv);
/* Largest singular value of an n x n matrix. */
double probe_spectral_norm(const double *A, int n);
/* Singular values of A and of A - J (J = ones/n), n x n, descending, into sv[n], dev[n]. */
void probe_sv_and_deviation(const double *A, int n, double *sv, double *dev);

/* residual.c */
/* 1 when every row's maximum sits on the diagonal: H[i,i] >= H[i,j] for all i, j (ties
 * count as diagonal, NaN as not). */
int probe_diag_dominant(const real *H, int n);
/* Row sums and column sums of H into rs[n], cs[n] (either may be NULL). */
void probe_row_col_sums(const double *H, int n, double *rs, double *cs);
/* The q-quantile (q in [0, 1]) of the finite values of v[0..len), linear interpolation
 * between closest ranks (numpy's default): position q·(m-1) among the m finite values in
 * ascending order. Reorders v. NaN if no value is finite. */
double probe_percentile(float *v, size_t len, double q);
/* Histogram bin of an entry: 0..PROBE_HIST_BINS-1, -1 below PROBE_HIST_LO, PROBE_HIST_BINS
 * at or above PROBE_HIST_HI (and for NaN). */
int probe_hist_bin(double v);
/* Bin edges, PROBE_HIST_BINS + 1 values. */
void probe_hist_edges(double *edges);

/* similarity.c */
/* Mean pairwise cosine similarity among the n rows of a Gram matrix G = X Xᵀ (n x n):
 * mean over pairs i < j of G[i,j] / sqrt(G[i,i] G[j,j]); pairs with a zero-norm stream
 * are skipped. Returns NaN when no pair is left (n = 1 or all zero). */
double probe_cos_from_gram(const double *G, int n);
/* For one token: X [n, C] streams, H [n, n]. Mean pairwise cosine similarity of the rows
 * of X (before) and of H·X (after mixing), through the Gram matrix. */
void probe_token_cos(const real *X, const real *H, int n, int C, double *before, double *after);

/* composite.c */
/* C = A · B, n x n (C may not alias A or B). */
void probe_matmul(const double *A, const double *B, double *C, int n);
/* P = H_{L-1} ··· H_1 · H_0 for H [L, n, n] (forward order: H_0 acts first); if cum is not
 * NULL, cum[l-1] = ||H_{l-1} ··· H_0||_2 for l = 1..L. */
void probe_composite(const double *H, int L, int n, double *P, double *cum);

/* jacobian.c */
/* Spectral norm of J = d X_Lh / d X_0 at the streams X0 (B*T, n, C) of each of the m->B
 * sequences of the current activation batch. J is block-diagonal over sequences (over
 * tokens when branches = 0, which drops every sublayer output and leaves the residual
 * path). Restarted Lanczos on JᵀJ (JVP by central differences of model_streams_forward,
 * exact VJP by model_streams_backward); the value is the largest exact read-out
 * ||Jᵀ g|| / ||g|| at the cycles' Ritz vectors g = J y: a lower bound of ||J||_2 that
 * converges to it. sigma[B] receives one value per sequence; returns the number of
 * products JᵀJ v used (at most max_iters; fewer, the values partial, once stop_signal is
 * set: it stops at the next product). Parameters, gradients and m->mean_loss are
 * restored; the activation buffer is overwritten. pr (may be NULL) is ticked at every
 * product (progress_tick), its note naming the product ("Jacobian: product 12, at most
 * 200"; cleared on return), so that the caller's progress line keeps coming, and moving,
 * through a batch whose estimate takes many seconds. */
int probe_jacobian_norm(gpt_model *m, const real *X0, int branches, int max_iters, double tol, double *sigma,
                        progress *pr);


/* ---- shared by the probe files (not for callers) -------------------------------------- */

#define PROBE_JAC_SEED 0x5EED5EEDULL
#define PROBE_CONVENTION "X_next = H_res . X: H_res[i, j] is the weight of input stream j in output stream i (rows = output streams)"

/* Statistics of every sublayer accumulated over a set of tokens of the current forward. */
typedef struct {
    int Lh, n, C, hc;        /* hc = 0 for rc: only the stream RMS is accumulated */
    size_t tokens;           /* tokens added (the same for every layer) */
    double *H_sum;           /* [Lh, n, n] sum over tokens of H_res */
    int64_t *diag;           /* [Lh] per-token matrices whose row maxima all sit on the diagonal */
    double *cs_max, *cs_sum; /* [Lh] |column sum - 1|: max over tokens and columns; sum over tokens of the mean over columns */
    double *rs_max, *rs_sum; /* [Lh] the same for row sums */
    double *cos_b, *cos_a;   /* [Lh] sums over tokens of the mean pairwise cosine before / after mixing */
    int64_t *cos_nb, *cos_na;/* [Lh] tokens with a defined cosine */
    double *rms_sq;          /* [Lh + 1] sum of squares of the streams entering sublayer l (Lh: final) */
    int64_t *hist;           /* [Lh, PROBE_HIST_BINS + 2] (below, bins..., above) or NULL */
    float *rowmax;           /* [Lh, rowmax_cap] row maxima of every per-token matrix, or NULL */
    size_t rowmax_cap, rowmax_len; /* per layer */
} probe_acc;

void probe_acc_init(probe_acc *a, const gpt_model *m, int want_hist, size_t rowmax_cap);
void probe_acc_reset(probe_acc *a);
void probe_acc_free(probe_acc *a);
/* Add tokens [t0, t0 + cnt) of the last forward of m. */
void probe_acc_add(probe_acc *a, const gpt_model *m, size_t t0, size_t cnt);
/* dst += src (sums add, maxima take the max; row maxima are not merged). */
void probe_acc_merge(probe_acc *dst, const probe_acc *src);
/* Token mean of H_res of layer l into out[n*n]. */
void probe_acc_mean(const probe_acc *a, int l, double *out);
/* RMS of the streams entering sublayer l (l = Lh: final). */
double probe_acc_rms(const probe_acc *a, int l);

/* Window starts (in windows of T tokens) of k evenly spaced sequences among W:
 * w_i = floor((2i + 1) W / (2k)). Fills inputs [k, T] from the shard. */
void probe_windows(const data_shard *s, int T, uint64_t W, int k, uint64_t *win);
void probe_fill_inputs(const data_shard *s, int T, const uint64_t *win, int k, int *inputs);

#endif
