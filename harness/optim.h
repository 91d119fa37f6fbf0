/* optim.h: AdamW over the model's tensors, the learning-rate schedule, clipping. */
#ifndef S2HC_OPTIM_H
#define S2HC_OPTIM_H
#include "model.h"

typedef struct {
    float *m, *v;   /* first and second moments, one per parameter (same layout as params) */
    size_t n;
    int t;          /* steps taken (bias correction) */
} adamw_state;

void optim_init(adamw_state *o, const gpt_model *model);
void optim_free(adamw_state *o);

/* Learning rate at optimizer step `step` (0-based): linear warm-up over `warmup` steps to
 * lr, then cosine decay to min_lr at the last step. */
double lr_at(const s2hc_config *c, int step);

/* Global L2 norm of the gradients. */
double grad_global_norm(const gpt_model *model);

/* One AdamW step: AdamW reads each gradient scaled by clip/norm when norm > clip (clip >
 * 0), in the same pass (the stored gradients are left unscaled). Weight decay applies to
 * tensors with decay = 1, or to all when cfg.decay_1d. */
void optim_step(adamw_state *o, gpt_model *model, double lr, double grad_norm);

#endif
