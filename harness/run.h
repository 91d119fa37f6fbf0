/* run.h: training, evaluation and the run directory (runs/<name>/run.h5, ckpt.h5). */
#ifndef S2HC_RUN_H
#define S2HC_RUN_H
#include "config.h"
#include "data.h"
#include "model.h"
#include "../probes/h5.h"
#include "checkpoint.h"

/* Exit codes of `s2hc train` (also recorded by grids). */
enum { RUN_OK = 0, RUN_FAILED = 1, RUN_USAGE = 2, RUN_DIVERGED = 3, RUN_INTERRUPTED = 130 };

/* The run directory of a config: <out_dir>/<name>, the name derived as
 * "<method>-n<n_streams>-s<seed>" when run.name is empty. */
void run_dir_of(const s2hc_config *c, char *buf, size_t len);

/* Mean loss over `batches` micro-batches of B sequences taken at evenly spaced windows
 * of the shard (the same windows every time). Returns NaN if the shard is too small.
 * verbose: a progress line on stdout if it runs long (util.h's progress). */
double eval_shard_loss(gpt_model *m, const data_shard *s, int batches, int B, int verbose);
/* Micro-batch b of those `batches`: B windows of T + 1 tokens of s (at least T + 1 of
 * them), its inputs and targets (B T each), as eval_shard_loss reads them. */
void eval_shard_batch(const data_shard *s, int b, int batches, int B, int T, int *in, int *tg);

/* Whether run file `log` (of run_path) records a validation set of another size than the
 * val_count tokens of val_path (its root attribute val_tokens: the corpus rebuilt since,
 * by `s2hc data prepare` of another version): then 1, and err says so, ending with
 * `consequence`. 0 for the same size, or a run file older than the attribute. */
int run_val_rebuilt(const h5log *log, uint64_t val_count, const char *val_path, const char *run_path,
                    const char *consequence, char *err, size_t errlen);

/* eval's table: its corpus column EVAL_NAME_WIDTH wide, or as wide as the longest name
 * it will hold (eval_table_width: "val" and config c's out-of-domain corpora, names of up
 * to 63 bytes), so that every row's numbers start in the same column. The header row,
 * then one row per corpus: corpus, loss and perplexity, a perplexity past a million in
 * powers of ten (exp(345) has 150 digits). */
#define EVAL_NAME_WIDTH 12
int eval_table_width(const s2hc_config *c);
void eval_print_header(FILE *f, int width);
void eval_print_row(FILE *f, int width, const char *corpus, double loss);

/* What eval_all shows: nothing; progress lines and the table on stdout; progress lines on
 * stderr alone (`s2hc eval --csv`, whose stdout is the CSV its caller prints). */
enum { EVAL_QUIET, EVAL_TABLE, EVAL_CSV };
/* What eval_all evaluates when it is not a run's model: a model file's (`s2hc eval
 * FILE.safetensors`), whose table's first line names it, and whose training corpus may
 * not be prepared here. */
typedef struct {
    const char *file; /* named in the table's first line */
    int no_val;       /* 1: no validation split (its corpus is not here): the out-of-domain ones only */
} eval_source;
/* Evaluate the validation split and every out-of-domain corpus of the config, show them
 * (`show`, above) and record /eval/... in the log at `step` (log NULL: recorded nowhere,
 * as for a model file). src: NULL for a run's model ("eval at step N"), else the file's
 * (step < 0: "step not given"). Missing OOD corpora are reported and skipped. Returns the
 * validation loss (NaN with src->no_val); ood_loss (NULL, or room for the config's n_ood)
 * gets each out-of-domain corpus's loss, NaN for one skipped or not reached (a stop
 * signal). */
double eval_all(gpt_model *m, h5log *log, int64_t step, int show, const eval_source *src, double *ood_loss);
/* train.eval_ood: the loss of every out-of-domain corpus of m's config over
 * train.eval_batches micro-batches of B sequences, into loss[0..n_ood) (NaN for one that
 * no longer opens, said on stderr). verbose: a progress line. 0, or -1 once stop_signal
 * is set (the losses then incomplete: no row). */
int eval_ood_losses(gpt_model *m, int B, uint32_t want_kind, double *loss, int verbose);
/* Those losses as the newest row of /eval/ood_loss/<corpus>, after /eval/step's row. */
void eval_ood_record(h5log *log, const s2hc_config *c, const double *loss);
/* Open out-of-domain corpus `name` of config c as eval_all reads it (its train.bin, else
 * its val.bin, with at least one window of block_size + 1 tokens, and tokens the model
 * reads: shard_fits with the training corpus's kind want_kind, from shard_kind; 0 if not known).
 * 0, or -1 with the reason in err. */
int eval_ood_open(const s2hc_config *c, const char *name, uint32_t want_kind, data_shard *s, char *err, size_t errlen);
/* The validation split of cfg's training corpus (its path into path), opened as eval_all
 * reads it: tokens the model reads and at least one window of block_size + 1 (fewer would
 * be a NaN loss). 0, or -1 with the reason in err and nothing left open. */
int eval_val_open(const s2hc_config *cfg, data_shard *val, char *path, size_t pathlen, char *err, size_t errlen);
/* A corpus of the kind of tokens a model file's model was trained on (of_ids: a
 * tokenizer's ids, else bytes of text): 0, or -1 with err naming the corpus's file. The
 * training corpus's kind (shard_fits' want) says it for a run; a file whose training
 * corpus is not here says it by its metadata. */
int eval_kind_fits(const data_shard *s, int of_ids, const char *file, char *err, size_t errlen);
/* Every out-of-domain corpus of c opened and closed again, before anything is evaluated or
 * written: 0, or -1 after an error naming the first that fails, the key and `source`
 * (the config's file), then the line `hint`. */
int eval_ood_check(const s2hc_config *c, uint32_t want_kind, const char *source, const char *hint);

/* Views of a model-shaped buffer (params, or an AdamW moment) as checkpoint tensors,
 * named and shaped from the parameter table; malloc'd, the caller frees. */
ckpt_tensor *run_ckpt_views(const gpt_model *m, float *base);
/* Load a checkpoint's weights (not the optimizer state) into m. 0, or -1 with the reason
 * (naming the file and tensor) in err; *step (may be NULL) gets the checkpoint's step. */
int run_load_weights(gpt_model *m, const char *ckpt_path, int64_t *step, char *err, size_t errlen);

/* The longest run directory the commands that read one take (eval, probe, inspect, sample,
 * export): the paths of its files (.train.lock, run.h5.tmp, ...) fit their buffers whole.
 * Cut, they named other files: eval locked a stray file beside the run instead of its
 * .train.lock. run_dir_fits: 1, or 0 after saying so. */
#define RUN_DIR_MAX 1024
int run_dir_fits(const char *dir);
/* Open the run directory `dir` for reading: its run file into log (h5log_free it), the
 * config stored there into cfg, the model built from it (on the CPU, with the run's
 * train.threads when set) and the checkpoint's weights loaded, its step into *step (may
 * be NULL). 0, or 1 after printing the error (naming the file) with nothing left open. */
int run_open(const char *dir, s2hc_config *cfg, gpt_model *m, h5log *log, int64_t *step);
/* 1 after a message when a command holds dir's lock (a training) and dir has no
 * checkpoint or run file yet to read; else 0. */
int run_busy_unsaved(const char *dir);
/* 1 when a command (a training, eval, probe) holds dir's .train.lock, its line ("s2hc
 * train pid P on HOST since TIME") in holder; tested, never taken (lock_file_held). */
int run_in_use(const char *dir, char *holder, size_t holder_len);
/* For a command that read a run in use (a live training): "note: DIR is in use (HOLDER):
 * this is WHAT of step STEP, its last save" on stderr; nothing when it is not in use. */
void run_note_in_use(const char *dir, const char *what, long long step);
/* run_open for a command that writes the run file back (`s2hc eval`, `s2hc probe`): first
 * the run's lock (run_lock), so that it neither writes back a run file that a training
 * has moved past nor races another such command; *lock_fd holds it until the caller
 * closes it (-1 on failure). Refused, with a message naming the holder, while the run is
 * in use. */
int run_open_locked(const char *dir, const char *who, int *lock_fd, s2hc_config *cfg, gpt_model *m, h5log *log,
                    int64_t *step);
/* `s2hc eval` and `s2hc probe` over several runs (the points of a grid in runs/grid/NAME): one(dir, ctx)
 * for each in turn under a "== DIR (k/n) ==" header on `head` (stdout, or stderr for a
 * command whose stdout is a CSV) when there are several, every one
 * tried after one fails, until a stop signal; the worst exit. A grid's folder of Slurm
 * scripts (a directory named slurm holding submit.sh, which that glob matches too) is
 * passed over with a note on stderr when there are several. */
int runs_each(const char *const *dirs, int ndirs, FILE *head, int (*one)(const char *dir, void *ctx), void *ctx);
/* Lock <dir>/.train.lock for `who` ("s2hc train", ...): the descriptor, or after a
 * message -2 naming the holder when another process has it, -1 when the lock file cannot
 * be opened. */
int run_lock(const char *dir, const char *who);

int train_main(int argc, char **argv);
int eval_main(int argc, char **argv);
/* `s2hc export`: a run's weights as a safetensors file (harness/safetensors.c). */
int export_main(int argc, char **argv);
/* m's parameters as safetensors file `path` (f32, or bf16 rounded to nearest even),
 * written atomically, with its config, `step` and the run's token_kind (bytes | ids;
 * NULL: not written) in the metadata: the file's size, or -1 after a message naming the
 * file. */
int64_t safetensors_write(const gpt_model *m, int64_t step, const char *path, int bf16, const char *token_kind);
/* train.init_from: the tensors of safetensors file `path` into m's parameters, by name
 * (s2hc export's names, which are nanoGPT's state_dict keys; lm_head.weight must equal
 * transformer.wte.weight, and nanoGPT's causal-mask buffers are skipped). F32, BF16 or F16.
 * Every tensor of the file must be a parameter of m with its shape; m's tensors the file
 * lacks keep their values (*kept of them; *loaded read). m changes only when the whole
 * file reads: 0, or -1 with err naming the file and the tensor. */
int safetensors_load(gpt_model *m, const char *path, int *loaded, int *kept, char *err, size_t errlen);
/* The header's __metadata__ of a safetensors file: *yaml its config (malloc'd; NULL when
 * absent), *step its step (-1 when absent), token_kind its token_kind ("" when absent); no
 * tensor read. 0, or -1 with err naming the file. */
int safetensors_metadata(const char *path, char **yaml, int64_t *step, char *token_kind, size_t kindlen, char *err,
                         size_t errlen);
/* The model a safetensors file holds (`s2hc sample FILE`): built from the config in its
 * __metadata__ (an s2hc export), or from `given` for a file without one (another
 * program's nanoGPT state_dict, --config); every tensor from the file, by name (one the
 * file lacks is an error naming it, not its init; as safetensors_load, one the model
 * lacks or of another shape too). *step the metadata's (-1 when absent), token_kind its
 * token_kind ("" when absent). 0; -1 with err (m not built); -2 with err when `given`
 * comes with a file that holds its own config (a usage error). */
int safetensors_open_model(const char *path, const s2hc_config *given, s2hc_config *cfg, gpt_model *m,
                           int64_t *step, char *token_kind, size_t kindlen, char *err, size_t errlen);

/* A command's argument that may name a model file instead of a run directory (`s2hc
 * sample FILE`, `s2hc eval FILE`): 1 when `path` is a regular file (an export, read by
 * model_file_open), 0 when it is to be read as a run directory, -1 after an error naming
 * `who` and the path when it ends in .safetensors but is no file (an export not made
 * yet), unless it is a run folder so named that holds a checkpoint (0). */
int model_file_arg(const char *path, const char *who);
/* `--config YAML [--set KEY=VALUE]...` of `s2hc sample` and `s2hc eval`, the model of a
 * safetensors file without s2hc metadata: loaded into *given as `s2hc train` loads its
 * config (config_load: the same checks and messages); path NULL: none given, *given
 * untouched. 0, or 2 after the error (a --set without --config included). */
int model_file_config(const char *who, const char *path, const char *const *sets, int nsets, s2hc_config *given);
/* The error for --config given with run directory `dir` to command `who`: 2 (a usage
 * error), after the message. */
int model_file_not_run(const char *dir, const char *who);
/* safetensors_open_model for command `who` (given: --config's model, or NULL): 0, or 1
 * after an error naming `who` and the file (nothing left open), 2 when `given` comes
 * with a file that holds its own config. A file opened with `given` gets a note on stderr
 * naming the keys of its model that its tensors cannot confirm, with their values
 * (model.n_head, model.gelu, the method's own that change what it computes, the method
 * where another has the same tensors). *of_ids: 1 when the model reads a tokenizer's
 * ids (the metadata's token_kind; without it, the given config's training corpus where
 * it is prepared; a vocabulary past 256 always), 0 when it reads bytes of text. */
int model_file_open(const char *path, const char *who, const s2hc_config *given, s2hc_config *cfg, gpt_model *m,
                    int64_t *step, int *of_ids);

/* The version string (git commit of the build). */
const char *s2hc_version(void);
/* The code generation flags the build was made with (the Makefile's OPT: "-O2
 * -march=native" by default; `s2hc version -v`). */
const char *s2hc_build_opt(void);

#endif
