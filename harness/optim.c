/* optim.c: AdamW, warm-up + cosine schedule, global-norm clipping. */
#include "optim.h"
#include <math.h>
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
    if (span <= 1) return c->lr;
    double p = (double)(step - c->warmup) / (double)(span - 1);
    if (p > 1) p = 1;
    return c->min_lr + 0.5 * (c->lr - c->min_lr) * (1.0 + cos(M_PI * p));
}

double grad_global_norm(const gpt_model *model) { return sqrt(sumsq(model->grads, model->n_params)); }

void optim_step(adamw_state *o, gpt_model *model, double lr, double grad_norm) {
    const s2hc_config *c = &model->cfg;
    if (c->clip > 0 && grad_norm > c->clip) scale_inplace(model->grads, (real)(c->clip / grad_norm), model->n_params);
    o->t++;
    for (int i = 0; i < model->n_tensors; i++) {
        const param_info *p = &model->pinfo[i];
        float wd = (p->decay || c->decay_1d) ? (float)c->weight_decay : 0.0f;
        adamw_update(model->params + p->offset, model->grads + p->offset, o->m + p->offset, o->v + p->offset,
                     p->numel, (float)lr, (float)c->beta1, (float)c->beta2, (float)c->eps, wd, o->t);
    }
}
