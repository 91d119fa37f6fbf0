/* data.h: corpora from Debian packages -> byte-level token shards, and the loader.
 *
 * Shard file format (little-endian), version 1:
 *   offset 0  char[8]  magic "S2HCTOK\0"
 *          8  uint32   version (1)
 *         12  uint32   vocab size (256 for bytes)
 *         16  uint32   bytes per token (1 = uint8, 2 = uint16)
 *         20  uint32   reserved (0)
 *         24  uint64   token count
 *         32  ...      tokens
 * A shard whose size disagrees with its header is refused.
 *
 * Layout on disk: <data_dir>/<corpus>/train.bin and val.bin (the last 1 % of each
 * source document set goes to val), plus <data_dir>/<corpus>/SOURCE.txt describing the
 * packages, the cleanup and the byte counts.
 */
#ifndef S2HC_DATA_H
#define S2HC_DATA_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char path[1024];
    uint32_t vocab;
    uint32_t bytes_per_token;
    uint64_t count;
    void *map;          /* mmap of the whole file (or malloc'd copy) */
    size_t map_len;
    const uint8_t *tokens; /* points past the header */
} data_shard;

/* Open and validate a shard. Returns 0, or -1 with a message naming the file in err. */
int shard_open(data_shard *s, const char *path, char *err, size_t errlen);
void shard_close(data_shard *s);
/* What a shard's tokens are, as one number to compare corpora by: its vocabulary, with
 * SHARD_IDS set when they are a tokenizer's ids (2-byte tokens, `data import --tokens
 * uint16`) rather than bytes of text (1-byte tokens). */
#define SHARD_IDS 0x80000000u
static inline uint32_t shard_kind(const data_shard *s) {
    return s->vocab | (s->bytes_per_token == 1 ? 0u : SHARD_IDS);
}
/* Can a model of model_vocab tokens read shard s, in a run whose training corpus is of
 * kind `want` (shard_kind; 0: not known)? A token at or past model_vocab would index past
 * the embedding (the tokens are read only when the shard's vocabulary is the larger);
 * another vocabulary than the training corpus's is another tokenizer's ids, and ids are
 * not text even where the vocabularies agree. 0, or -1 with the message naming the file
 * and model.vocab in err. */
int shard_fits(const data_shard *s, int model_vocab, uint32_t want, char *err, size_t errlen);
/* Token i of the shard (uint8 or uint16). */
static inline int shard_token(const data_shard *s, uint64_t i) {
    return s->bytes_per_token == 1 ? (int)s->tokens[i]
                                   : (int)((const uint16_t *)(const void *)s->tokens)[i];
}

/* Write `count` tokens as a shard, atomically (temp file + rename). bytes_per_token 1 or 2.
 * Returns 0 or -1 (message on stderr). */
int shard_write(const char *path, const void *tokens, uint64_t count, uint32_t vocab, uint32_t bytes_per_token);

/* Names of the corpora `s2hc data prepare` knows, NULL-terminated:
 * docs, gcide (training); perldoc, manpages, foldoc, fortunes, kjv (out-of-domain). */
extern const char *const data_corpora[];

/* Prepare corpora into data_dir. `only` is NULL for all, else one corpus name. Cached:
 * a corpus whose shards exist and whose SOURCE.txt matches is skipped unless force.
 * Prints progress. A missing package names the package and `make deps`. Returns 0 on
 * success, 1 on failure (nothing half-written is left behind). */
int data_prepare(const char *data_dir, const char *only, int force, int verbose);

/* The loader: random windows of T+1 tokens from one shard, deterministic from a seed.
 * Its whole state is `rng` so a checkpoint restores it exactly. */
typedef struct {
    data_shard shard;
    uint64_t rng;       /* xorshift state */
} data_loader;

/* path of <data_dir>/<corpus>/<split>.bin into buf. */
void data_shard_path(char *buf, size_t len, const char *data_dir, const char *corpus, const char *split);
/* Whether a data folder given on the command line (`what`: "eval --data") fits where
 * data.dir does (at most CFG_PATH - 1 bytes); if not, 0 and an error naming the limit
 * on stderr (the path was cut to that length: another folder). */
int data_dir_fits(const char *dir, const char *what);

int loader_open(data_loader *l, const char *path, uint64_t seed, char *err, size_t errlen);
void loader_close(data_loader *l);
/* Fill inputs[B*T] and targets[B*T] (targets = inputs shifted by one). */
void loader_next(data_loader *l, int B, int T, int *inputs, int *targets);
/* Sequential, non-overlapping windows: window w covers tokens [w*T, w*T + T]. The probes
 * pick their sequences among them (the evaluations space windows of their own evenly over
 * the shard, harness/eval.c). Returns the number of full windows available. */
uint64_t loader_eval_windows(const data_shard *s, int T);
void loader_eval_batch(const data_shard *s, uint64_t first_window, int B, int T, int *inputs, int *targets);

/* ---- added by the data module ---- */

/* The `s2hc data` subcommand; argv[0] is "data". Returns the process exit status:
 * 0 ok, 1 failure (e.g. a missing package), 2 usage error. */
int data_main(int argc, char **argv);

/* "train" or "ood" for a corpus of data_corpora[], NULL for an unknown name. */
const char *data_corpus_role(const char *name);

/* Test hook: when the environment variable S2HC_DATA_ROOT=DIR is set, every package
 * file `prepare` reads (/usr/share/..., /usr/lib/bible.data, /var/lib/dpkg/info/...)
 * is looked up under DIR instead of /, like a chroot. Programs still come from PATH. */

/* The cleanup rules, exposed for tests (docs/data.md states each in words). Each maps
 * in[0..n) to out and returns the output length; out may equal in and must hold n + 1
 * bytes. */
size_t data_normalise(const char *in, size_t n, char *out);      /* CRLF, trailing blanks, blank runs */
size_t data_gcide_clean(const char *in, size_t n, char *out);    /* one gcide entry */
size_t data_braces_clean(const char *in, size_t n, char *out);   /* foldoc: drop { } */
size_t data_kjv_strip_refs(const char *in, size_t n, char *out); /* "Ge1:1 " at line starts */
size_t data_info_clean(const char *in, size_t n, char *out);     /* GNU info -> text */
size_t data_rst_clean(const char *in, size_t n, char *out);      /* drop SPDX comment lines */
size_t data_fortune_clean(const char *in, size_t n, char *out);  /* "%" lines -> blank lines */
/* dictd index number (base 64, alphabet A-Za-z0-9+/, most significant first).
 * Returns 0, or -1 on an empty, too long or invalid string. */
int data_b64_decode(const char *s, size_t n, uint64_t *out);
/* Where a source text of n bytes splits: floor(0.99 n) moved forward to a line start.
 * text[0, cut) is train, text[cut, n) is val. */
size_t data_split_point(const char *text, size_t n);

#endif
