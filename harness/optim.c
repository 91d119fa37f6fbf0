/* optim.c: AdamW, warm-up + cosine schedule, global-norm clipping. */
#include "optim.h"
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include "../kernels/kernels.h"
#include "util.h"

void optim_init(adamw_state *o, const gpt_model *model) {
    o->n = model->n_params;
    o->m = calloc_huge(o->n, sizeof(float));
    o->v = calloc_huge(o->n, sizeof(float));
    o->t = 0;
}

void optim_free(adamw_state *o) {
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

double lr_at(const s2hc_config *c, int step) {
    if (c->warmup > 0 && step < c->warmup) return c->lr * (double)(step + 1) / (double)c->warmup;
    int span = c->steps - c->warmup;
    if (span <= 0) return c->lr;                       /* warmup = steps: no decay */
    if (span == 1) return c->warmup > 0 ? c->min_lr : c->lr; /* after a warm-up, the decay's one step is its
                                                                 last; a run of one step trains at lr */
    double p = (double)(step - c->warmup) / (double)(span - 1);
    if (p > 1) p = 1;
    return c->min_lr + 0.5 * (c->lr - c->min_lr) * (1.0 + cos(M_PI * p));
}

double grad_global_norm(const gpt_model *model) { return sqrt(sumsq(model->grads, model->n_params)); }

/* Below this many parameters the step runs on the calling thread: a fork and join costs
 * more than the work. */
#define OPTIM_PAR_MIN 32768

/* One parallel region for all the tensors (a region per tensor cost more than AdamW
 * itself with OMP_WAIT_POLICY=passive): each thread takes a contiguous share of the
 * values, tensor boundaries wherever they fall. Elementwise: the same bits for any
 * thread count. */
void optim_step(adamw_state *o, gpt_model *model, double lr, double grad_norm) {
    const s2hc_config *c = &model->cfg;
    /* the clipping factor, applied as AdamW reads each gradient (no pass of its own over
       the gradients, which it leaves unscaled) */
    const float gscale = c->clip > 0 && grad_norm > c->clip ? (float)(c->clip / grad_norm) : 1.0f;
    o->t++;
    const float b1 = (float)c->beta1, b2 = (float)c->beta2, eps = (float)c->eps, flr = (float)lr;
    const float bc1 = adamw_bias_correction(b1, o->t), bc2 = adamw_bias_correction(b2, o->t);
    size_t total = 0;
    for (int i = 0; i < model->n_tensors; i++) total += model->pinfo[i].numel;
#pragma omp parallel if (total >= OPTIM_PAR_MIN)
    {
        const size_t nt = (size_t)omp_get_num_threads(), id = (size_t)omp_get_thread_num();
        const size_t lo = total * id / nt, hi = total * (id + 1) / nt;
        size_t start = 0; /* of tensor i in the concatenation */
        for (int i = 0; i < model->n_tensors && start < hi; i++) {
            const param_info *p = &model->pinfo[i];
            const size_t a = lo > start ? lo - start : 0, b = hi - start < p->numel ? hi - start : p->numel;
            if (a < b) {
                const size_t o0 = p->offset + a;
                const float wd = (p->decay || c->decay_1d) ? (float)c->weight_decay : 0.0f;
                adamw_update_span(model->params + o0, model->grads + o0, o->m + o0, o->v + o0, b - a, flr, b1, b2, eps,
                                  wd, bc1, bc2, gscale);
            }
            start += p->numel;
        }
    }
}
