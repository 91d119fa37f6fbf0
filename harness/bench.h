/* bench.h: `s2hc bench`, how fast training runs on this machine against its limit, and
 * the per-op timing hook of model.c that the bench's breakdown reads.
 *
 * The bench measures, in one run: the sgemm rate of the linked BLAS (model shapes and a
 * large square), training tokens/s and model FLOPs utilisation for the tiny and small
 * presets and every residual method at n = 4 (rc at n = 1), each method's step time
 * over rc's, tokens/s and memory against n = 2..8, and a time breakdown of one step by
 * op. It prints tables and writes them as CSV (docs/performance.md explains each column).
 */
#ifndef S2HC_BENCH_H
#define S2HC_BENCH_H

/* `s2hc bench [--quick] [--csv DIR] ...` (argv[0] = "bench"). Returns the exit code:
 * 0, 1 on a failure (a CSV that cannot be written), 2 on a usage error. */
int bench_main(int argc, char **argv);

/* Categories of the per-op timing of one training step. model.c attributes the wall
 * time of each op of model_forward / model_backward to one of them; the bench adds the
 * optimizer itself. */
enum {
    PROF_MATMUL,     /* the linear layers' GEMMs and biases, LM head included */
    PROF_ATTENTION,  /* causal attention (its small GEMMs and softmax) */
    PROF_LAYERNORM,  /* ln_1, ln_2, ln_f */
    PROF_GELU,
    PROF_HC_FRAME,   /* the frame: write-back X' = H X + post f, coefficients (projection
                        z = r X W'^T, per-token method math), read-out u = pre . X, and
                        their backward (fused: docs/performance.md) */
    PROF_HC_STREAMS, /* n copies of the embedding, the final sum, their backward, rms of X_0 */
    PROF_EMBED_LOSS, /* embedding, cross-entropy, rc's residual add */
    PROF_OPTIM,      /* gradient norm + AdamW (timed by the caller of optim_step) */
    PROF_N
};
extern const char *const prof_names[PROF_N];

/* Turn the per-op timing of model_forward / model_backward on or off (NULL, the
 * default: one pointer test per op). acc holds 2 * PROF_N seconds that accumulate: the
 * wall time of each category, then its CPU time summed over every thread of the process
 * (which a loaded machine disturbs much less). Not thread-safe; only the bench calls it. */
void model_profile(double *acc);

#endif
