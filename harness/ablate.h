/* ablate.h: how much a trained model's loss rests on its residual mixing and on each of
 * its sublayers (`s2hc ablate`).
 *
 * Each hyper-connection sublayer's per-token H_res is replaced, for every token, by a
 * fixed matrix (the identity: no mixing; its own average over the tokens: no dynamics;
 * the uniform J = 11^T / n: complete mixing), or the sublayer's output is left out (any
 * method, rc included), one sublayer at a time and then every sublayer at once, and the
 * loss is measured on the same micro-batches as the unablated model's: the difference,
 * batch by batch, is a paired measurement, its Student t interval over the batches the
 * noise of the sequences drawn. Read-only: nothing of the run changes. */
#ifndef S2HC_ABLATE_H
#define S2HC_ABLATE_H
#include "data.h"
#include "model.h"
#include "util.h"

/* The first three replace H_res; branch sets the sublayer's output f to 0 (the sublayer
 * left out: X_{l+1} = H_res X_l, for rc X_{l+1} = X_l), the one rc has. */
typedef enum { ABLATE_IDENTITY, ABLATE_MEAN, ABLATE_UNIFORM, ABLATE_BRANCH, ABLATE_KINDS } ablate_kind;

/* "identity", "mean", "uniform", "branch" */
extern const char *const ablate_kind_names[ABLATE_KINDS];

typedef struct {
    int Lh, n, batches, n_kinds;
    int kinds[ABLATE_KINDS];
    double base;   /* the unablated mean loss over the batches */
    double *Hmean; /* (Lh, n, n): each sublayer's H_res averaged over every token of the batches,
                      or of the mean's own (ablate_measure's mean_src); rc: 1, its X_{l+1} = X_l + f */
    /* (n_kinds, Lh + 1), column Lh every sublayer at once: the mean loss over the batches;
       the mean over the batches of (ablated - unablated) batch loss, and the half-width of
       its 95 % Student t interval (NaN for one batch) */
    double *loss, *delta, *ci;
} ablate_result;

/* Measure the ablations `kinds` (n_kinds of them, each once) of model m (rc: branch
 * alone) over `batches` micro-batches of B sequences of s,
 * the windows eval_shard_batch takes; m's activations for B sequences are allocated here.
 * mean_src: NULL, the mean H_res is averaged over those same batches; else over `batches`
 * micro-batches of mean_src (held out: another split than s's), when the mean is among
 * the kinds (without it mean_src is not read). pr (may be NULL): advanced to ablate_cost in all. 0, or -1 when
 * stop_signal cut it short (r then freed). m is left as it was. */
int ablate_measure(gpt_model *m, const data_shard *s, const data_shard *mean_src, const int *kinds, int n_kinds,
                   int batches, int B, ablate_result *r, progress *pr);
void ablate_result_free(ablate_result *r);
/* ablate_measure's work, in sublayer forwards (the head counted as one), as it advances
 * its progress: each batch's unablated forward (twice with the mean: once before the mean
 * is known, or once on the mean's own batches), and its ablations, each resuming that
 * forward at the sublayer ablated. */
long ablate_cost(int Lh, const int *kinds, int n_kinds, int batches);

int ablate_main(int argc, char **argv);

#endif
