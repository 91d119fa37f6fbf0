/* config.h: the typed configuration of a run, read strictly from YAML.
 *
 * Every key lives in one schema table (config.c) with its type, range and help text.
 * The same table validates YAML files, `--set a.b=v` overrides and the keys of experiment
 * grids (config_key_known). Errors name the file, line, column and key, and exit with code 2
 * before anything is written.
 */
#ifndef S2HC_CONFIG_H
#define S2HC_CONFIG_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CFG_STR 64
#define CFG_PATH 512
#define CFG_MAX_OOD 8

typedef struct {
    /* model: nanoGPT GPT-2 style */
    int n_layer;          /* transformer blocks (each has 2 hyper-connected sublayers) */
    int n_head;
    int n_embd;           /* C */
    int block_size;       /* T, the sequence length */
    int vocab;            /* 256 for byte-level tokens */
    int bias;             /* 1: biases in the linear layers and LayerNorms (GPT-2); 0: none (nanoGPT's train.py) */
    char gelu[CFG_STR];   /* tanh (GPT-2's approximation) | erf (the exact GELU, PyTorch's nn.GELU()) */

    /* residual: the hyper-connection method */
    char method[CFG_STR]; /* rc | identity | hc | mhc | mhc_lite | kromhc | orthogonal | s2hc | s2hc_rot */
    int n_streams;        /* n (1 for rc) */
    int sinkhorn_iters;   /* mhc: Sinkhorn-Knopp iterations (20) */
    char sinkhorn_order[CFG_STR]; /* mhc: row_col (rows then columns each iteration; columns exact) | col_row */
    char lite_offset[CFG_STR];    /* mhc_lite, kromhc: fixed (-8) | scaled (-8 - ln(n!) so identity weight stays near 1) */
    double lite_offset_value;     /* the base offset, -8 */
    char core[CFG_STR];   /* s2hc, s2hc_rot, orthogonal: cayley | expm */
    char init[CFG_STR];   /* s2hc: tanh4 | exact */
    char proj_init[CFG_STR]; /* zero (the paper) | normal (the authors' script for s2hc: N(0, 0.02)) */
    char proj_precision[CFG_STR]; /* fp32 | bf16 (cpu: the frame's projection products with bf16 operands,
                                     by AMX tiles or AVX512_BF16; a cpu option: run.backend cuda refuses
                                     it, auto then picks the cpu) */
    char stream_precision[CFG_STR]; /* fp32 | bf16 (either backend: the n x C streams stored in bf16 in the
                                       training steps) */

    /* train */
    int batch;            /* B, sequences per micro-batch */
    int grad_accum;       /* micro-batches per optimizer step */
    int steps;            /* optimizer steps */
    double lr, min_lr;    /* peak and final learning rate (cosine decay) */
    double min_lr_ratio;  /* > 0: min_lr is lr x this (config_resolve), so it follows a swept lr; 0: off */
    int warmup;           /* linear warm-up steps */
    double weight_decay;
    int decay_1d;         /* 0: weight decay on 2-D weights only (default); 1: on every tensor */
    double beta1, beta2, eps;
    double clip;          /* global gradient-norm clip, 0 = off */
    uint64_t seed;
    int eval_every;       /* steps between validation evals (0 = only at the end) */
    int eval_batches;     /* micro-batches per validation eval */
    int eval_ood;         /* 1: the out-of-domain corpora at every eval during training too */
    int ckpt_every;       /* steps between checkpoints (0 = only at the end) */
    int log_every;        /* steps between progress lines when not a terminal */
    int threads;          /* OpenMP threads, 0 = OMP_NUM_THREADS when set, else all cores */
    char parallel[CFG_STR]; /* batch | ops: how a training step uses the threads (model_forward_backward) */
    char init_from[CFG_PATH]; /* "" (the init), or a safetensors file whose tensors a fresh run starts from */

    /* data */
    char data_dir[CFG_PATH];          /* where `s2hc data prepare` writes shards (data) */
    char train_corpus[CFG_STR];       /* docs | gcide | any prepared corpus name */
    char ood[CFG_MAX_OOD][CFG_STR];   /* out-of-domain corpora for perplexity */
    int n_ood;

    /* run */
    char name[CFG_STR];               /* run name; runs/<name>/ */
    char out_dir[CFG_PATH];           /* parent of run directories (runs) */
    char backend[CFG_STR];            /* auto | cpu | cuda */
    char precision[CFG_STR];          /* fp32 | bf16 (cuda only) */

    /* probe */
    int probe_every;                  /* steps between probes, 0 = off */
    int final_samples;                /* validation sequences for the final probe */
} s2hc_config;

/* Fill every field with its default (the schema's defaults). */
void config_defaults(s2hc_config *c);

/* Load `path` over the defaults, then apply each "a.b=v" in sets[0..nsets), then
 * config_validate. `path` may be NULL (defaults + overrides). c is written only on success.
 * On any error prints "s2hc: error: FILE:LINE:COL: key 'a.b': problem" to stderr and
 * returns 2 (the caller exits with it); returns 0 on success. Unknown keys, wrong types,
 * out-of-range values, malformed YAML and a missing file are all errors. */
int config_load(s2hc_config *c, const char *path, const char *const *sets, int nsets);
/* Where the loading's error lines go: stderr when NULL (the default). The ranks > 0 of a
 * launch collect them, to say only what rank 0 did not. */
extern FILE *config_messages;
/* config_load of a base that others complete (a grid's base): every key checked, the
 * cross-field checks left to the configs built on it. */
int config_load_base(s2hc_config *c, const char *path);

/* Apply one "a.b=v" override with the schema's checks ("--set" names the source). */
int config_set(s2hc_config *c, const char *assignment);

/* The keys that derive from others, after every layer is applied (a file, --set, a
 * preset, a grid's values): train.min_lr_ratio > 0 sets train.min_lr = train.lr x it.
 * config_load and config_from_yaml_text call it; code that changes a config's lr after
 * loading calls it again. */
void config_resolve(s2hc_config *c);

/* Cross-field checks after loading (n_embd % n_head, rc needs n_streams 1, ...). Prints
 * the problem naming the keys and returns 2, or 0. */
int config_validate(const s2hc_config *c, const char *source);
/* A new run's rule, not a stored config's (runs trained before it keep opening): data.ood
 * may not name data.train, whose text the model trained on. 0, or 2 after the message. */
int config_check_ood(const s2hc_config *c, const char *source);

/* The resolved configuration as YAML text (every key, schema order), malloc'd; the
 * caller frees. Loading this text back gives an identical struct. */
char *config_to_yaml(const s2hc_config *c);

/* Parse YAML text (as stored in a run file) into c; `source` names it in errors. A key or
 * section this build does not know is a newer build's: skipped with one warning naming
 * them (a config file or --set refuses it). A newer build keeps a run whose new keys
 * change what an older build would compute from older builds by the run file's
 * format_version (probes/h5.h), so such keys here are at values that change nothing. */
int config_from_yaml_text(s2hc_config *c, const char *text, const char *source);

/* The first node of a parsed YAML document that was written with an explicit tag
 * ("!!str 1", "&a !!int 2", "!x y"), found from the source text at each node's start;
 * NULL if none. Configs and grids refuse tags: a number given as "!!str 1" would
 * otherwise read as the plain 1. */
struct yaml_document_s;
struct yaml_node_s;
const struct yaml_node_s *config_yaml_tagged(const struct yaml_document_s *d, const char *text, size_t len);

/* libyaml's complaint about text as "problem (context at L:C)" in buf, and where it is in
 * *m; a reader error (bad UTF-8) gets its line and column from its byte offset. */
struct yaml_parser_s;
struct yaml_mark_s;
void config_yaml_problem(const struct yaml_parser_s *p, const char *text, size_t len, char *buf, size_t buflen,
                         struct yaml_mark_s *m, int with_marks);

/* 1 when text nests flow collections ([ and {) more than CONFIG_YAML_MAX_DEPTH deep,
 * with the 1-based line and column of the first bracket past that depth: libyaml's
 * loader takes time quadratic in the depth (a 2 MB file of brackets: minutes), so the
 * readers refuse such text before loading it. Brackets inside quotes or comments do not
 * count. */
#define CONFIG_YAML_MAX_DEPTH 64
int config_yaml_too_deep(const char *text, size_t len, int *line, int *col);

/* The method-specific keys (residual.sinkhorn_iters, core, ...) that c sets away from
 * their defaults but whose method c does not train, comma-separated in buf; their count.
 * Training says so in a note: they are recorded in the run file yet change nothing. */
int config_unused_keys(const s2hc_config *c, char *buf, size_t len);

/* Is `key` ("train.lr") a known config key? Used to validate grid sweeps. */
int config_key_known(const char *key);

/* Print the schema (every key, type, default, help) for `s2hc help config`. */
void config_print_schema(FILE *f);

/* The same schema as markdown tables, one per section (docs/config.md embeds it; a test
 * checks that the two agree). */
void config_print_schema_markdown(FILE *f);

/* A name as the config takes it for run.name and the corpora (data.train, data.ood):
 * 1..CFG_STR-1 bytes of letters, digits and _ . + -, not starting with . or -. 0, or -1
 * with the problem in err (`s2hc data import --name` checks its NAME with it). */
int config_name_check(const char *s, char *err, size_t errlen);

/* The run's directory name: c->name, or "<method>-n<n_streams>-s<seed>" when it is empty
 * (e.g. "s2hc-n4-s1337"). Every caller that names a run uses this one rule. */
void config_run_name(const s2hc_config *c, char *buf, size_t len);

#endif
