/* presets.c: the scale presets. M and L are the paper's Appendix G (nanoGPT GPT-2 M/L,
 * batch 8 x grad_accum 16 / 48, 10 000 steps); tiny and small are for CI and the CPU. */
#include "presets.h"
#include <string.h>

const char *const preset_names[] = {"tiny", "small", "M", "L", NULL};

typedef struct {
    const char *name;
    int n_layer, n_head, n_embd, block_size;
    int batch, grad_accum, steps, warmup;
    double lr;
} preset;

/* A preset sets these and min_lr = lr / 10, nothing else: the paper's weight decay 0.1,
 * betas 0.9 / 0.95 and clip 1 are the config's defaults, and a grid's base that changes
 * them keeps its values under a preset. */
static const preset presets[] = {
    /* name    L   H     C     T   B  acc  steps  warm  lr */
    {"tiny",   2,  2,   64,   64,  8,   1,   200,   20, 1e-3},
    {"small",  4,  4,  128,  128, 16,   1,  2000,  100, 1e-3},
    {"M",     12, 12,  768, 1024,  8,  16, 10000,  200, 6e-4},
    {"L",     24, 16, 1024, 1024,  8,  48, 10000,  200, 3e-4},
};

int preset_apply(s2hc_config *c, const char *name) {
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        const preset *p = &presets[i];
        if (strcmp(p->name, name) != 0) continue;
        c->n_layer = p->n_layer;
        c->n_head = p->n_head;
        c->n_embd = p->n_embd;
        c->block_size = p->block_size;
        c->batch = p->batch;
        c->grad_accum = p->grad_accum;
        c->steps = p->steps;
        c->warmup = p->warmup;
        c->lr = p->lr;
        c->min_lr = p->lr / 10;
        return 0;
    }
    return -1;
}
