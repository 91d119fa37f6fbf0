/* residual.h: the table of residual methods. A method is one file in harness/residual/
 * (shapes, parameter names, init, the closed parameter-count formula) plus its per-token
 * math in kernels/hc_math.h. Adding a method touches more than this folder: docs/methods.md,
 * "Adding a method". */
#ifndef S2HC_RESIDUAL_H
#define S2HC_RESIDUAL_H
#include <stddef.h>
#include "../config.h"
#include "../../kernels/hc_math.h"

#define HC_MAX_TENSORS 16

/* A named slice of theta: theta = concatenation of the tensors in order. */
typedef struct {
    const char *name;   /* "alpha_pre", "b_res", ... (checkpoint key suffix) */
    size_t size;
} hc_tensor;

typedef struct {
    const char *name;       /* config name: "mhc" */
    int id;                 /* enum hc_method */
    const char *summary;    /* one line for --help and the README */
    /* Fill spec (K, n_theta, cache, norm, options) from the config for n = c->n_streams.
     * Returns 0, or -1 with a reason in err (e.g. n out of range for the method). */
    int (*setup)(hc_spec *s, const s2hc_config *c, char *err, size_t errlen);
    /* Release what setup allocated (may be NULL). */
    void (*teardown)(hc_spec *s);
    /* Fill out[] with the named slices of theta; returns how many. Sizes sum to n_theta. */
    int (*tensors)(const hc_spec *s, hc_tensor *out);
    /* Initialise one sublayer's theta. block = transformer block index (the preferred
     * stream is block mod n). */
    void (*init)(const hc_spec *s, const s2hc_config *c, real *theta, int block);
    /* Closed formula: auxiliary parameters of one hyper-connected sublayer at width C
     * (norm gain + projection W + theta). Checked against the allocated buffers. */
    double (*aux_params)(int n, double C);
} hc_variant;

/* NULL-terminated table of every method except rc (which has no frame). */
extern const hc_variant *const hc_variants[];
const hc_variant *hc_variant_find(const char *name);

/* Shared helpers for methods with the mHC-style gates. */
int hc_gate_tensors(int n, hc_tensor *out);              /* alpha_pre, alpha_post, b_pre, b_post */
void hc_gate_init(int n, real *theta, int block);        /* alpha 0.01, b -1 / +1 on block mod n */

/* Shared helpers of the variant files (residual.c). */
/* 0 when 2 <= n <= HC_MAX_N, else -1 with "<method> needs 2 <= n_streams <= 8 (got n)". */
int hc_check_n(const char *method, int n, char *err, size_t errlen);
/* Parse a two-valued option: returns 0 for `a` (or ""), 1 for `b`, -1 (with err) else. */
int hc_option(const char *method, const char *key, const char *value, const char *a, const char *b, char *err,
              size_t errlen);
/* All m! permutations of 0..m-1 in lexicographic order (the identity first), m! * m bytes:
 * row k is the permutation p_k with P_k[i][p_k[i]] = 1. malloc'd; the caller frees.
 * m <= HC_MAX_N. */
unsigned char *hc_perms_alloc(int m);
/* The logit bias of every non-identity permutation of an m x m permutation mixture:
 * lite_offset fixed -> lite_offset_value; scaled -> lite_offset_value - ln(m!). */
double hc_lite_offset(const s2hc_config *c, int m);
/* Weight of the identity permutation at init (z = 0) for that offset:
 * 1 / (1 + (m! - 1) e^offset). */
double hc_lite_identity_weight(int m, double offset);

/* kromhc: the factor sizes of n (prod = n, 2 first): 4 -> 2x2, 6 -> 2x3, 8 -> 2x2x2, and
 * a prime n (2, 3, 5, 7) is one factor of size n (kromhc is then mhc_lite). Returns the
 * number of factors (0 if n is out of 2..HC_MAX_N). */
int hc_kromhc_factorise(int n, int *factors);
/* The factorisation as text for the run file, e.g. "2x2x2" or "5"; returns buf. */
const char *hc_kromhc_factor_string(int n, char *buf, size_t len);

#endif
