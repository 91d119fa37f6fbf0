/* t_model.h: a small model for the tests that need one with weights off their init (an
 * untouched s2hc starts near the identity, an mhc's H_res alike for every token). Include
 * after t.h. */
#ifndef S2HC_T_MODEL_H
#define S2HC_T_MODEL_H
#include "../harness/config.h"
#include "../harness/model.h"
#include "../harness/util.h"

/* The model of config c, initialised from init_seed, then each parameter moved by a N(0,
 * 1) draw (from noise_seed, in the parameter table's order) times aux_noise for a
 * hyper-connection's and base_noise for the others' (a scale of 0: left, and nothing
 * drawn for it). 0, or -1 after a failed CHECK. */
static inline int t_model_config(gpt_model *m, const s2hc_config *c, uint64_t init_seed, uint64_t noise_seed,
                                 double aux_noise, double base_noise) {
    char err[256];
    if (model_build(m, c, err, sizeof err) != 0) {
        CHECK(0, "model_build %s: %s", c->method, err);
        return -1;
    }
    model_init(m, init_seed);
    rng_t r;
    rng_seed(&r, noise_seed);
    for (int i = 0; i < m->n_tensors; i++) {
        const double s = m->pinfo[i].aux ? aux_noise : base_noise;
        for (size_t k = 0; s > 0 && k < m->pinfo[i].numel; k++)
            m->params[m->pinfo[i].offset + k] += (real)(s * rng_normal(&r));
    }
    return 0;
}

/* t_model_config of `method` at n streams, `layers` layers of width C, 2 heads,
 * block_size 8, the other keys at their defaults. */
static inline int t_model(gpt_model *m, const char *method, int n, int layers, int C, uint64_t init_seed,
                          uint64_t noise_seed, double aux_noise, double base_noise) {
    s2hc_config c;
    config_defaults(&c);
    c.n_layer = layers, c.n_head = 2, c.n_embd = C, c.block_size = 8;
    snprintf(c.method, sizeof c.method, "%s", method);
    c.n_streams = n;
    return t_model_config(m, &c, init_seed, noise_seed, aux_noise, base_noise);
}

#endif
