/* sample.h: text from a trained model, token by token (`s2hc sample RUN_DIR`). */
#ifndef S2HC_SAMPLE_H
#define S2HC_SAMPLE_H
#include <stdint.h>
#include "model.h"
#include "util.h"

typedef struct {
    double temperature; /* 0: the most likely token every time (greedy) */
    int top_k;          /* draw among the k most likely tokens only; 0: among all */
    int full_forward;   /* 1: every step a forward over the whole window, no cache of keys
                           and values (the reference the cached steps are checked against) */
} sample_opts;

/* One token from logits[0..V): with temperature 0 the most likely (the lowest index among
 * equals); else one drawn with probability softmax(logits / temperature), over the top_k
 * largest logits when top_k is in [1, V) (equals ordered by index). -1 when a logit is
 * not finite. */
int sample_pick(const real *logits, int V, const sample_opts *o, rng_t *rng);

/* B continuations of ntok tokens each of the same prompt (plen >= 1 tokens), token i of
 * continuation b into out[b * ntok + i]. At every step the model reads the last m->T
 * tokens of each sequence (the prompt and what follows it) and the next token comes from
 * the logits of the last: while the window has room, by model_decode's cache of keys and
 * values (each token's forward once); then by a forward over the window, whose positions
 * after the last hold a pad token, which a causal model never reads. Tokens are drawn among the first V of the vocabulary (V <= m->V);
 * continuation b from its own generator, seeded from (seed, b), so it does not depend on
 * B. progress (may be NULL) is called after every step with the steps done. 0, or -1
 * when the logits stopped being finite (out then holds the steps before that one). */
int sample_generate(gpt_model *m, int B, const int *prompt, int plen, int ntok, int V, const sample_opts *o,
                    uint64_t seed, int *out, void (*progress)(int done, void *ctx), void *ctx);

int sample_main(int argc, char **argv);

#endif
