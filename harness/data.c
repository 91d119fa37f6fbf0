/* data.c: corpora from Debian packages -> byte-level token shards, and the loader.
 *
 * Sections, in order:
 *   1. shards: open (mmap + validation), close, atomic write
 *   2. text helpers: growable buffer, normalisation, the 1 % split
 *   3. cleanup rules, one function per corpus family (exposed as data_* for tests)
 *   4. extraction: reading package files, running converters (in parallel workers)
 *   5. the corpus table and data_prepare (cache, missing packages, SOURCE.txt)
 *   6. the `s2hc data` command
 *   7. the loader
 * docs/data.md describes the corpora and every cleanup rule in words.
 */
#include "config.h"
#include "data.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "s2hc shards are little-endian and read in place; this host is not"
#endif

#define SHARD_MAGIC "S2HCTOK"          /* 7 chars + NUL = 8 bytes */
#define SHARD_VERSION 1u
#define SHARD_HEADER_BYTES 32
/* Bump whenever a cleanup rule or the split changes: cached corpora are then rebuilt.
 * Keep the form s2hc-data-N: a higher N is a newer build's (corpus_newer), which older
 * builds refuse to rebuild. */
#define DATA_CLEANUP_VERSION "s2hc-data-2"
#define DATA_VAL_PERMILLE 10           /* last 1 % of each source goes to val.bin */
#define DATA_MAX_JOBS 8                /* converter worker processes at most */
#define GCIDE_SPAN_MAX 100             /* longest \hyph*en*a*tion\ span removed */
#define GCIDE_PRON_MAX 200             /* longest (pronunciation) group removed */
#define GCIDE_BRACKET_MAX 120          /* longest [tag] examined */

/* ------------------------------------------------------------------------------ */
/* 1. Shards                                                                       */
/* ------------------------------------------------------------------------------ */

static uint32_t rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd_u64(const uint8_t *p) { return (uint64_t)rd_u32(p) | (uint64_t)rd_u32(p + 4) << 32; }
static void wr_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void wr_u64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

int shard_open(data_shard *s, const char *path, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    snprintf(s->path, sizeof s->path, "%s", path);
    /* O_NONBLOCK: a FIFO (or another special file) under a shard's name must not block
       the open; fstat below refuses it */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot open: %s%s", path, strerror(errno),
                 errno == ENOENT ? " (run `s2hc data prepare`)" : "");
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    if (size < SHARD_HEADER_BYTES) {
        snprintf(err, errlen, "%s: %zu bytes, shorter than the %d-byte shard header (truncated?)", path, size,
                 SHARD_HEADER_BYTES);
        close(fd);
        return -1;
    }
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) {
        snprintf(err, errlen, "%s: mmap failed: %s", path, strerror(errno));
        return -1;
    }
    const uint8_t *h = map;
    const char *why = NULL;
    char detail[256] = "";
    uint32_t version = rd_u32(h + 8), vocab = rd_u32(h + 12), bpt = rd_u32(h + 16), reserved = rd_u32(h + 20);
    uint64_t count = rd_u64(h + 24);
    if (memcmp(h, SHARD_MAGIC, 8) != 0) why = "not an s2hc token shard (bad magic)";
    else if (version != SHARD_VERSION) {
        snprintf(detail, sizeof detail, "shard format version %u, this build reads version %u", version, SHARD_VERSION);
    } else if (bpt != 1 && bpt != 2) {
        snprintf(detail, sizeof detail, "bytes per token is %u (must be 1 or 2)", bpt);
    } else if (vocab == 0 || (uint64_t)vocab > (1ull << (8 * bpt))) {
        snprintf(detail, sizeof detail, "vocab %u does not fit %u-byte tokens", vocab, bpt);
    } else if (reserved != 0) {
        why = "reserved header field is not 0 (corrupt header)";
    } else if (count > (UINT64_MAX - SHARD_HEADER_BYTES) / bpt ||
               (uint64_t)SHARD_HEADER_BYTES + count * bpt != (uint64_t)size) {
        snprintf(detail, sizeof detail, "file is %zu bytes but the header says %d + %llu x %u (truncated or corrupt)",
                 size, SHARD_HEADER_BYTES, (unsigned long long)count, bpt);
    }
    if (!why && detail[0]) why = detail;
    if (!why && vocab < (1u << (8 * bpt))) {
        /* every token must be < vocab, or an embedding lookup would read out of bounds */
        const uint8_t *t8 = h + SHARD_HEADER_BYTES;
        const uint16_t *t16 = (const uint16_t *)(const void *)(h + SHARD_HEADER_BYTES);
        for (uint64_t i = 0; i < count; i++) {
            unsigned t = bpt == 1 ? t8[i] : t16[i];
            if (t >= vocab) {
                snprintf(detail, sizeof detail, "token %llu is %u, outside the vocab of %u", (unsigned long long)i,
                         t, vocab);
                why = detail;
                break;
            }
        }
    }
    if (why) {
        snprintf(err, errlen, "%s: %s", path, why);
        munmap(map, size);
        return -1;
    }
    s->vocab = vocab;
    s->bytes_per_token = bpt;
    s->count = count;
    s->map = map;
    s->map_len = size;
    s->tokens = h + SHARD_HEADER_BYTES;
    return 0;
}

int shard_fits(const data_shard *s, int model_vocab, uint32_t want, char *err, size_t errlen) {
    if (want && s->vocab != (want & ~SHARD_IDS)) {
        snprintf(err, errlen, "%s: a vocabulary of %u tokens where the training corpus has %u (another tokenizer's ids)",
                 s->path, s->vocab, want & ~SHARD_IDS);
        return -1;
    }
    if (want && shard_kind(s) != want) {
        snprintf(err, errlen, "%s: %s, where the training corpus holds %s, of the same vocabulary (%u)", s->path,
                 want & SHARD_IDS ? "bytes of text" : "token ids (`data import --tokens uint16`)",
                 want & SHARD_IDS ? "a tokenizer's ids (`data import --tokens uint16`)" : "bytes of text", s->vocab);
        return -1;
    }
    if (s->vocab <= (uint32_t)model_vocab) return 0;
    /* a larger vocabulary than the model's: fine if every token is below the model's
       (ASCII text for a 128-token model); only then is the shard read through */
    for (uint64_t i = 0; i < s->count; i++) {
        const int t = shard_token(s, i);
        if (t >= model_vocab) {
            snprintf(err, errlen, "%s: token %llu is %d, outside the model's vocabulary of %d (key 'model.vocab'; the "
                     "corpus's is %u)", s->path, (unsigned long long)i, t, model_vocab, s->vocab);
            return -1;
        }
    }
    return 0;
}

void shard_close(data_shard *s) {
    if (s->map) munmap(s->map, s->map_len);
    s->map = NULL;
    s->tokens = NULL;
    s->map_len = 0;
    s->count = 0;
}

/* The shard's header and tokens to path.tmp (shard_write then renames it over path). */
static int shard_write_tmp(const char *path, const void *tokens, uint64_t count, uint32_t vocab,
                           uint32_t bytes_per_token) {
    if (bytes_per_token != 1 && bytes_per_token != 2) {
        fprintf(stderr, "s2hc: error: %s: bytes per token must be 1 or 2, not %u\n", path, bytes_per_token);
        return -1;
    }
    if (vocab == 0 || (uint64_t)vocab > (1ull << (8 * bytes_per_token))) {
        fprintf(stderr, "s2hc: error: %s: vocab %u does not fit %u-byte tokens\n", path, vocab, bytes_per_token);
        return -1;
    }
    uint8_t h[SHARD_HEADER_BYTES] = {0};
    memcpy(h, SHARD_MAGIC, 8);
    wr_u32(h + 8, SHARD_VERSION);
    wr_u32(h + 12, vocab);
    wr_u32(h + 16, bytes_per_token);
    wr_u32(h + 20, 0);
    wr_u64(h + 24, count);
    return write_file_tmp(path, h, sizeof h, tokens, (size_t)(count * bytes_per_token));
}

int shard_write(const char *path, const void *tokens, uint64_t count, uint32_t vocab, uint32_t bytes_per_token) {
    return shard_write_tmp(path, tokens, count, vocab, bytes_per_token) != 0 ? -1 : commit_file_tmp(path);
}

/* A corpus's two shards, both written before either replaces the old pair: a failure to
 * write either leaves the old corpus whole (each write gives its own message). The old
 * val.bin goes before the new train.bin takes its place, so a failure or a kill from
 * there to the last rename leaves a corpus without val.bin (refused by `train`, `bad` in
 * `data list`), never a train.bin and a val.bin of two different texts. 0 or -1. */
static int shard_pair_write(const char *tpath, const void *train, uint64_t nt, const char *vpath, const void *val,
                            uint64_t nv, uint32_t vocab, uint32_t bpt) {
    if (shard_write_tmp(tpath, train, nt, vocab, bpt) != 0) return -1;
    if (shard_write_tmp(vpath, val, nv, vocab, bpt) != 0) {
        drop_file_tmp(tpath);
        return -1;
    }
    if (unlink(vpath) != 0 && errno != ENOENT) {
        fprintf(stderr, "s2hc: error: cannot replace %s: %s\n", vpath, strerror(errno));
        drop_file_tmp(tpath);
        drop_file_tmp(vpath);
        return -1;
    }
    if (commit_file_tmp(tpath) != 0) {
        drop_file_tmp(vpath);
        return -1;
    }
    if (commit_file_tmp(vpath) != 0) {
        unlink(tpath);
        return -1;
    }
    return 0;
}

void data_shard_path(char *buf, size_t len, const char *data_dir, const char *corpus, const char *split) {
    snprintf(buf, len, "%s/%s/%s.bin", data_dir, corpus, split);
}

int data_dir_fits(const char *dir, const char *what) {
    const size_t n = strlen(dir);
    if (n < CFG_PATH) return 1;
    fprintf(stderr, "s2hc: error: %s: '%.60s...': a path of %zu bytes, longer than %d (the longest data.dir)\n", what,
            dir, n, CFG_PATH - 1);
    return 0;
}

/* ------------------------------------------------------------------------------ */
/* 2. Text helpers                                                                 */
/* ------------------------------------------------------------------------------ */

typedef struct {
    char *p;
    size_t n, cap;
} dbuf;

static void dbuf_reserve(dbuf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra + 1) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) die(1, "out of memory growing a text buffer to %zu bytes", cap);
    b->p = p;
    b->cap = cap;
}
static void dbuf_put(dbuf *b, const void *s, size_t n) {
    dbuf_reserve(b, n);
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}
static void dbuf_putc(dbuf *b, char c) { dbuf_put(b, &c, 1); }
static void dbuf_puts(dbuf *b, const char *s) { dbuf_put(b, s, strlen(s)); }
static void dbuf_printf(dbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void dbuf_printf(dbuf *b, const char *fmt, ...) {
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        dbuf_reserve(b, (size_t)n);
        vsnprintf(b->p + b->n, (size_t)n + 1, fmt, ap2);
        b->n += (size_t)n;
    }
    va_end(ap2);
}
static void dbuf_free(dbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

size_t data_normalise(const char *in, size_t n, char *out) {
    /* CRLF -> LF, trailing blanks cut, blank-line runs collapsed to one, leading and
     * trailing blank lines dropped, exactly one final newline (none for empty text). */
    size_t o = 0, i = 0;
    int pending_blank = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && in[e] != '\n') e++;
        size_t end = e;
        while (end > i && (in[end - 1] == ' ' || in[end - 1] == '\t' || in[end - 1] == '\r')) end--;
        if (end == i) {
            if (o > 0) pending_blank = 1;
        } else {
            if (pending_blank) out[o++] = '\n';
            pending_blank = 0;
            memmove(out + o, in + i, end - i);
            o += end - i;
            out[o++] = '\n';
        }
        i = e + 1;
    }
    return o;
}

/* Append a normalised document followed by one blank line (the document separator). */
static void put_document(dbuf *b, const char *text, size_t n) {
    dbuf_reserve(b, n + 2);
    size_t k = data_normalise(text, n, b->p + b->n);
    if (k == 0) return;
    b->n += k;
    b->p[b->n++] = '\n';
    b->p[b->n] = '\0';
}

size_t data_split_point(const char *text, size_t n) {
    size_t keep = 1000 - DATA_VAL_PERMILLE;
    size_t cut = n / 1000 * keep + n % 1000 * keep / 1000; /* floor(n * 0.99) without overflow */
    while (cut < n && cut > 0 && text[cut - 1] != '\n') cut++;
    return cut;
}

/* ------------------------------------------------------------------------------ */
/* 3. Cleanup rules (each maps text to text no longer than its input)              */
/* ------------------------------------------------------------------------------ */

int data_b64_decode(const char *s, size_t n, uint64_t *out) {
    /* dictd's index numbers: base 64, most significant digit first, alphabet
     * A-Z a-z 0-9 + / (so "A" = 0, "B" = 1, "BA" = 64). */
    static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint64_t v = 0;
    if (n == 0 || n > 10) return -1; /* 10 digits = 60 bits: more is not an offset */
    for (size_t i = 0; i < n; i++) {
        const char *p = s[i] ? strchr(alphabet, s[i]) : NULL;
        if (!p) return -1;
        v = v << 6 | (uint64_t)(p - alphabet);
    }
    *out = v;
    return 0;
}

static int is_blank_ch(char c) { return c == ' ' || c == '\t'; }

/* gcide source tags such as [1913 Webster], [WordNet 1.5 +PJC], [Webster 1913 Suppl.]:
 * every word is a source name or a number, joined by spaces, '+' or '&'. */
static int gcide_is_source_tag(const char *s, size_t n) {
    static const char *const words[] = {"Webster", "WordNet", "Suppl.", "PJC", "PJC.", "AS", "RDH", "RP", "GG",
                                        "Century", "Dict.", "Dict.,", "Dictionary", "sense", NULL};
    static const char *const sources[] = {"Webster", "WordNet", "PJC", "PJC.", "AS",
                                          "RDH",     "RP",      "GG",  "Century", NULL};
    int has_source = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && (s[i] == ' ' || s[i] == '+' || s[i] == '&')) i++;
        size_t j = i;
        while (j < n && s[j] != ' ' && s[j] != '+' && s[j] != '&') j++;
        if (j == i) break;
        int numeric = 1;
        for (size_t k = i; k < j; k++)
            if (!((s[k] >= '0' && s[k] <= '9') || s[k] == '.' || s[k] == ',')) numeric = 0;
        int known = numeric;
        for (int w = 0; !known && words[w]; w++)
            if (strlen(words[w]) == j - i && memcmp(words[w], s + i, j - i) == 0) known = 1;
        if (!known) return 0;
        for (int w = 0; sources[w]; w++)
            if (strlen(sources[w]) == j - i && memcmp(sources[w], s + i, j - i) == 0) has_source = 1;
        i = j;
    }
    return has_source;
}

/* gcide character codes: a letter or two with one mark before or after it, [a^]
 * (breve), [=e] (macron), [.a], ["o], [`e], ['e], [~n], [,c], [=ae], [oo^], [*a], are
 * the bare letters (a mark after the letters must be ^: [R.] and [It.] are labels);
 * a table of named codes maps to ASCII spellings (Greek letters to their names).
 * Returns 0 with the replacement in rep (>= 16 bytes), or -1 when it is not a code. */
static int gcide_code(const char *s, size_t n, char *rep) {
    static const char marks[] = "^=.\"`'~,-:*";
    static const struct { const char *code, *text; } named[] = {
        {"ae", "ae"},       {"AE", "AE"},       {"oe", "oe"},       {"OE", "OE"},     {"eth", "th"},
        {"thorn", "th"},    {"th", "th"},       {"yogh", "y"},      {"imac", "i"},    {"aum", "a"},
        {"asl", "a"},       {"ng", "ng"},       {"cced", "c"},      {"dsdot", "d"},   {"udd", "u"},
        {"add", "+"},       {"deg", "deg"},     {"root", ""},       {"sect", "S"},    {"frac12", "1/2"},
        {"frac14", "1/4"},  {"frac34", "3/4"},  {"frac13", "1/3"},  {"frac23", "2/3"}, {"frac18", "1/8"},
        {"alpha", "alpha"}, {"beta", "beta"},   {"gamma", "gamma"}, {"delta", "delta"}, {"Delta", "Delta"},
        {"epsilon", "epsilon"}, {"zeta", "zeta"}, {"eta", "eta"},   {"theta", "theta"}, {"iota", "iota"},
        {"kappa", "kappa"}, {"lambda", "lambda"}, {"mu", "mu"},     {"nu", "nu"},     {"xi", "xi"},
        {"omicron", "omicron"}, {"pi", "pi"},   {"rho", "rho"},     {"sigma", "sigma"}, {"Sigma", "Sigma"},
        {"tau", "tau"},     {"upsilon", "upsilon"}, {"phi", "phi"}, {"chi", "chi"},   {"psi", "psi"},
        {"omega", "omega"}, {"Omega", "Omega"}, {NULL, NULL}};
    for (int k = 0; named[k].code; k++)
        if (strlen(named[k].code) == n && memcmp(named[k].code, s, n) == 0) {
            strcpy(rep, named[k].text);
            return 0;
        }
    if (n < 2 || n > 3) return -1;
    size_t first = strchr(marks, s[0]) ? 1 : 0, last = n - (s[n - 1] == '^' ? 1 : 0); /* [R.] is a label */
    if (first + (n - last) != 1) return -1; /* exactly one mark, at one end */
    for (size_t k = first; k < last; k++)
        if (!((s[k] >= 'a' && s[k] <= 'z') || (s[k] >= 'A' && s[k] <= 'Z'))) return -1;
    memcpy(rep, s + first, last - first);
    rep[last - first] = '\0';
    return 0;
}

/* Does the (...) group starting at in[i] == '(' look like a pronunciation? Returns its
 * length (through the matching ')') or 0. */
static size_t gcide_pron_len(const char *in, size_t n, size_t i) {
    int depth = 0, marked = 0;
    for (size_t j = i; j < n && j - i < GCIDE_PRON_MAX; j++) {
        char c = in[j];
        if (c == '(') depth++;
        else if (c == ')' && --depth == 0) return marked ? j - i + 1 : 0;
        else if (c == '[' || c == '"' || c == '`' || c == '*') marked = 1;
    }
    return 0;
}

/* A one-line (...) group that is only a pronunciation, like (-d[u^]nd) or
 * (m[=e]l"[y^]*b[u^]g`): letters, letter codes, stress marks * " ` ' and - , or spaces,
 * no '.', and at least one stress mark or pronunciation-only code ([x^] breve, [=x]
 * macron, [-x], [.x], [imac], [aum]...). Returns its length or 0. */
static size_t gcide_pron_group(const char *in, size_t n, size_t i) {
    int marked = 0;
    for (size_t j = i + 1; j < n && j - i <= GCIDE_BRACKET_MAX; j++) {
        char c = in[j];
        if (c == ')') return marked ? j - i + 1 : 0;
        if (c == '[') {
            size_t k = j + 1;
            while (k < n && k - j <= 6 && in[k] != ']' && in[k] != '\n') k++;
            char rep[16];
            if (k >= n || in[k] != ']' || gcide_code(in + j + 1, k - j - 1, rep) != 0) return 0;
            const char *code = in + j + 1;
            size_t len = k - j - 1;
            if ((len >= 2 && len <= 3 && (strchr("^=-.", code[0]) || strchr("^=-.", code[len - 1]))) ||
                (len == 4 && (memcmp(code, "imac", 4) == 0)) || (len == 3 && (memcmp(code, "aum", 3) == 0)))
                marked = 1;
            j = k;
            continue;
        }
        if (c == '*' || c == '"' || c == '`') marked = 1;
        else if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '\'' || c == '-' || c == ',' ||
                   c == ' '))
            return 0;
    }
    return 0;
}

size_t data_gcide_clean(const char *in, size_t n, char *out) {
    size_t o = 0, line_start = 0;
    int line_had_text = 0, removed_on_line = 0;
    for (size_t i = 0; i < n;) {
        char c = in[i];
        if (c == '\n') {
            /* a line that only held removed markup disappears entirely */
            int blank_now = 1;
            for (size_t k = line_start; k < o; k++)
                if (!is_blank_ch(out[k])) blank_now = 0;
            if (blank_now && line_had_text && removed_on_line) o = line_start;
            else { while (o > line_start && is_blank_ch(out[o - 1])) o--; out[o++] = '\n'; }
            line_start = o;
            line_had_text = removed_on_line = 0;
            i++;
            continue;
        }
        if (!is_blank_ch(c)) line_had_text = 1;
        if (c == '\\') { /* \syl*la*bi*fied\ headword (may wrap): removed with one space before it */
            size_t j = i + 1;
            while (j < n && j - i <= GCIDE_SPAN_MAX && in[j] != '\\') j++; /* may wrap a line */
            if (j < n && in[j] == '\\' && j > i + 1) {
                if (o > line_start && out[o - 1] == ' ') o--;
                i = j + 1;
                removed_on_line = 1;
                size_t k = i;
                while (k < n && in[k] == ' ') k++;
                size_t p = (k < n && in[k] == '(') ? gcide_pron_len(in, n, k) : 0;
                if (p) i = k + p; /* a group spanning lines joins them */
                continue;
            }
        }
        if (c == '[') {
            size_t j = i + 1;
            while (j < n && j - i <= GCIDE_BRACKET_MAX && in[j] != ']' && in[j] != '[' && in[j] != '\n') j++;
            if (j < n && in[j] == ']') {
                char rep[16];
                if (gcide_is_source_tag(in + i + 1, j - i - 1)) {
                    while (o > line_start && out[o - 1] == ' ') o--;
                    i = j + 1;
                    removed_on_line = 1;
                    continue;
                }
                if (gcide_code(in + i + 1, j - i - 1, rep) == 0) {
                    size_t k = strlen(rep);
                    memcpy(out + o, rep, k);
                    o += k;
                    i = j + 1;
                    continue;
                }
            }
        }
        if (c == '(') { /* a bare pronunciation group, with one space before it */
            size_t p = gcide_pron_group(in, n, i);
            if (p) {
                if (o > line_start && out[o - 1] == ' ') o--;
                i += p;
                removed_on_line = 1;
                continue;
            }
        }
        if (c == '{' || c == '}') { i++; continue; } /* {cross-reference} braces */
        out[o++] = c;
        i++;
    }
    return o;
}

size_t data_braces_clean(const char *in, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++)
        if (in[i] != '{' && in[i] != '}') out[o++] = in[i];
    return o;
}

size_t data_kjv_strip_refs(const char *in, size_t n, char *out) {
    /* At a line start: optional digit, letters, digits ':' digits, one space. */
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        if (j < n && in[j] >= '1' && in[j] <= '9') j++;
        size_t letters = j;
        while (j < n && ((in[j] >= 'A' && in[j] <= 'Z') || (in[j] >= 'a' && in[j] <= 'z'))) j++;
        int ok = j > letters;
        size_t d1 = j;
        while (ok && j < n && in[j] >= '0' && in[j] <= '9') j++;
        ok = ok && j > d1 && j < n && in[j] == ':';
        size_t d2 = ++j;
        while (ok && j < n && in[j] >= '0' && in[j] <= '9') j++;
        ok = ok && j > d2 && j < n && in[j] == ' ';
        if (ok) i = j + 1;
        while (i < n && in[i] != '\n') out[o++] = in[i++];
        if (i < n) out[o++] = in[i++];
    }
    return o;
}

static int starts_with(const char *s, size_t n, const char *prefix) {
    size_t k = strlen(prefix);
    return n >= k && memcmp(s, prefix, k) == 0;
}

/* An info index entry's location wrapped onto a line of its own: blanks, "(line",
 * blanks, digits, ")". */
static int info_line_ref(const char *l, size_t len) {
    size_t k = 0;
    while (k < len && l[k] == ' ') k++;
    if (k == 0 || !starts_with(l + k, len - k, "(line")) return 0;
    k += 5;
    while (k < len && l[k] == ' ') k++;
    size_t d = k;
    while (k < len && l[k] >= '0' && l[k] <= '9') k++;
    return k > d && k + 1 == len && l[k] == ')';
}

size_t data_info_clean(const char *in, size_t n, char *out) {
    /* GNU info: keep only nodes (text after a \x1f line whose next line starts with
     * "File: "), drop that header line, drop menu and index lines ("* ...:" at column
     * 0) with the "(line N)" that a long index entry wraps onto the next line, and turn
     * "*note TEXT: LABEL." into "TEXT" ("," after LABEL is kept). */
    size_t o = 0, i = 0;
    int in_node = 0, after_entry = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && in[e] != '\n') e++;
        const char *l = in + i;
        size_t len = e - i;
        size_t next = e < n ? e + 1 : e;
        if (len >= 1 && l[0] == '\x1f') {
            /* separator; the following line decides whether a node starts */
            size_t e2 = next;
            while (e2 < n && in[e2] != '\n') e2++;
            in_node = starts_with(in + next, e2 - next, "File: ");
            i = in_node ? (e2 < n ? e2 + 1 : e2) : next;
            continue;
        }
        if (!in_node || (len >= 2 && l[0] == '*' && l[1] == ' ' && memchr(l, ':', len))) {
            after_entry = in_node;
            i = next;
            continue;
        }
        if (after_entry && info_line_ref(l, len)) { /* a wrapped index entry's "(line N)" */
            after_entry = 0;
            i = next;
            continue;
        }
        after_entry = 0;
        /* copy the line, rewriting cross-references (which may continue on the next lines) */
        size_t j = i;
        while (j < e) {
            if (in[j] == '*' && (starts_with(in + j, n - j, "*note") || starts_with(in + j, n - j, "*Note")) &&
                j + 5 < n && (in[j + 5] == ' ' || in[j + 5] == '\n')) {
                size_t t = j + 6, colon = t;
                while (colon < n && colon - t < 200 && in[colon] != ':') colon++;
                if (colon < n && in[colon] == ':') {
                    size_t after = colon + 1, tend = colon;
                    if (after < n && in[after] == ':') { /* *note Node:: */
                        after++;
                    } else {
                        size_t k = after;
                        while (k < n && (in[k] == ' ' || in[k] == '\n')) k++;
                        size_t lab = k;
                        while (k < n && in[k] != '.' && in[k] != ',' && in[k] != ' ' && in[k] != '\n') k++;
                        if (k == lab || k >= n || (in[k] != '.' && in[k] != ',')) { out[o++] = in[j++]; continue; }
                        after = in[k] == '.' ? k + 1 : k; /* the label's '.' is syntax, a ',' is text */
                    }
                    if (in[j + 5] == '\n') out[o++] = '\n';
                    for (size_t q = t; q < tend; q++) out[o++] = in[q];
                    j = after;
                    if (j > e) { /* the reference spanned lines: continue from its end */
                        e = j;
                        while (e < n && in[e] != '\n') e++;
                        next = e < n ? e + 1 : e;
                    }
                    continue;
                }
            }
            out[o++] = in[j++];
        }
        if (e < n) out[o++] = '\n';
        i = next;
    }
    return o;
}

size_t data_rst_clean(const char *in, size_t n, char *out) {
    /* reStructuredText: drop ".. SPDX-License-Identifier:" comment lines only. */
    size_t o = 0, i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && in[e] != '\n') e++;
        size_t next = e < n ? e + 1 : e;
        if (!starts_with(in + i, e - i, ".. SPDX-License-Identifier:")) {
            memmove(out + o, in + i, next - i);
            o += next - i;
        }
        i = next;
    }
    return o;
}

size_t data_fortune_clean(const char *in, size_t n, char *out) {
    /* entries are separated by lines holding only "%": they become blank lines */
    size_t o = 0, i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && in[e] != '\n') e++;
        size_t next = e < n ? e + 1 : e;
        if (e - i == 1 && in[i] == '%') {
            out[o++] = '\n';
            out[o++] = '\n';
        } else {
            memmove(out + o, in + i, next - i);
            o += next - i;
        }
        i = next;
    }
    return o;
}

/* ------------------------------------------------------------------------------ */
/* 4. Extraction                                                                   */
/* ------------------------------------------------------------------------------ */

/* The root under which package files are looked for: S2HC_DATA_ROOT (tests) or "". */
static const char *data_root(void) {
    const char *r = getenv("S2HC_DATA_ROOT");
    return r ? r : "";
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Regular files (not symlinks) below dir whose names end with suffix; skip_top is a
 * top-level subdirectory to skip (or NULL). Unsorted. */
static void walk_files(const char *dir, const char *suffix, const char *skip_top, int depth, strlist *out) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char path[4096];
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || (de->d_name[1] == '.' && de->d_name[2] == '\0')))
            continue;
        if (depth == 0 && skip_top && strcmp(de->d_name, skip_top) == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat st;
        if (lstat(path, &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) walk_files(path, suffix, skip_top, depth + 1, out);
        else if (S_ISREG(st.st_mode) && has_suffix(de->d_name, suffix)) strlist_add(out, path);
    }
    closedir(d);
}

/* Sorted matches of root+pattern (regular files and directories, not symlinks). */
static void glob_files(const char *pattern, strlist *out) {
    char full[2048];
    snprintf(full, sizeof full, "%s%s", data_root(), pattern);
    glob_t g;
    if (glob(full, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc; i++) {
            struct stat st;
            if (lstat(g.gl_pathv[i], &st) == 0 && !S_ISLNK(st.st_mode)) strlist_add(out, g.gl_pathv[i]);
        }
    }
    globfree(&g);
    strlist_sort(out);
}

/* Single-quote s for /bin/sh. */
static void shell_quote(dbuf *b, const char *s) {
    dbuf_putc(b, '\'');
    for (; *s; s++) {
        if (*s == '\'') dbuf_puts(b, "'\\''");
        else dbuf_putc(b, *s);
    }
    dbuf_putc(b, '\'');
}

/* Run a shell command and append its stdout to out. Returns its exit status (or -1). */
static int run_capture(const char *cmd, dbuf *out) {
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, p)) > 0) dbuf_put(out, chunk, k);
    int st = pclose(p);
    return (st != -1 && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
}

/* Decompressed contents of a file (gzip when the name ends in .gz or .dz). */
static int read_file_text(const char *path, dbuf *out) {
    if (has_suffix(path, ".gz") || has_suffix(path, ".dz")) {
        dbuf cmd = {0};
        dbuf_puts(&cmd, "gzip -dc -- ");
        shell_quote(&cmd, path);
        int st = run_capture(cmd.p, out);
        dbuf_free(&cmd);
        return st == 0 ? 0 : -1;
    }
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    char chunk[65536];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) dbuf_put(out, chunk, k);
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : 0;
}

/* A converter turns one file into (un-normalised) text. Returns 0, 1 to skip the file
 * (e.g. a .so stub), -1 on failure. */
typedef int (*convert_fn)(const char *path, dbuf *text);

static int convert_rst(const char *path, dbuf *text) {
    if (read_file_text(path, text) != 0) return -1;
    text->n = data_rst_clean(text->p, text->n, text->p);
    return 0;
}

static int convert_pod(const char *path, dbuf *text) {
    dbuf cmd = {0};
    dbuf_puts(&cmd, "LC_ALL=C pod2text ");
    shell_quote(&cmd, path);
    dbuf_puts(&cmd, " 2>/dev/null");
    int st = run_capture(cmd.p, text);
    dbuf_free(&cmd);
    return st == 0 || text->n > 0 ? 0 : -1;
}

/* A page is a .so stub when its first line that is not a roff comment is ".so FILE". */
static int man_is_stub(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t e = i;
        while (e < n && s[e] != '\n') e++;
        if (!(starts_with(s + i, e - i, ".\\\"") || starts_with(s + i, e - i, "'\\\"") || e == i))
            return starts_with(s + i, e - i, ".so ");
        i = e + 1;
    }
    return 1; /* empty page */
}

static int convert_man(const char *path, dbuf *text) {
    dbuf src = {0};
    if (read_file_text(path, &src) != 0) { dbuf_free(&src); return -1; }
    int stub = man_is_stub(src.p, src.n);
    dbuf_free(&src);
    if (stub) return 1;
    dbuf cmd = {0};
    dbuf_puts(&cmd, "LC_ALL=C MANWIDTH=80 MAN_DISABLE_SECCOMP=1 man -E ascii --nh --nj -l ");
    shell_quote(&cmd, path);
    dbuf_puts(&cmd, " 2>/dev/null | col -bx");
    int st = run_capture(cmd.p, text);
    dbuf_free(&cmd);
    return st == 0 && text->n > 0 ? 0 : -1;
}

typedef struct {
    const char *tmpdir; /* scratch directory for worker outputs */
    int jobs;
    int verbose;
    char err[1024];
    uint64_t files;    /* documents (files or entries) that went into the text */
    uint64_t skipped;  /* files skipped (stubs) */
    uint64_t failed;   /* files whose converter failed (left out, reported) */
    char first_failed[512];
} extract_ctx;

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n);
        if (k < 0) { if (errno == EINTR) continue; return -1; }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Convert every file with fn in ctx->jobs worker processes and append the normalised
 * documents to out in list order (so the result does not depend on the worker count).
 * Worker w converts files w, w+jobs, ... and writes records (status int64, length
 * uint64, bytes) to its own file; the parent reads them back in order. Each worker also
 * writes a byte to a pipe per file done, which the parent counts into the progress line
 * "WHAT: K/N UNIT | elapsed | ETA" (util.h; with ctx->verbose). */
static int convert_files(const strlist *files, convert_fn fn, extract_ctx *ctx, dbuf *out, const char *what,
                         const char *unit) {
    int jobs = ctx->jobs < 1 ? 1 : ctx->jobs;
    if ((size_t)jobs > files->n) jobs = files->n ? (int)files->n : 1;
    pid_t pids[DATA_MAX_JOBS];
    char paths[DATA_MAX_JOBS][1100];
    int tick[2]; /* close-on-exec: the converters' programs never hold it open */
    if (pipe2(tick, O_CLOEXEC) != 0) die(1, "pipe failed: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    for (int w = 0; w < jobs; w++) {
        snprintf(paths[w], sizeof paths[w], "%s/worker-%d", ctx->tmpdir, w);
        pids[w] = fork();
        if (pids[w] < 0) die(1, "fork failed: %s", strerror(errno));
        if (pids[w] == 0) {
            /* a prepare stopped by a signal takes its workers with it */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent) _exit(5);
            close(tick[0]);
            runtime_unbind(); /* the workers spread over every CPU, not the first place's */
            int fd = open(paths[w], O_WRONLY | O_CREAT | O_TRUNC, 0666);
            if (fd < 0) _exit(3);
            dbuf text = {0}, norm = {0};
            for (size_t i = (size_t)w; i < files->n; i += (size_t)jobs) {
                text.n = 0;
                int64_t st = fn(files->v[i], &text);
                norm.n = 0;
                dbuf_reserve(&norm, text.n + 1);
                uint64_t len = st == 0 ? data_normalise(text.p ? text.p : "", text.n, norm.p) : 0;
                if (write_all(fd, &st, sizeof st) || write_all(fd, &len, sizeof len) || write_all(fd, norm.p, len))
                    _exit(4);
                if (write_all(tick[1], "", 1)) _exit(4);
            }
            _exit(close(fd) == 0 ? 0 : 4);
        }
    }
    close(tick[1]);
    progress pr;
    progress_begin(&pr, what, unit, (long)files->n, ctx->verbose);
    long done = 0;
    char buf[256];
    for (;;) { /* until every worker has ended (the pipe's last writer gone) */
        const ssize_t k = read(tick[0], buf, sizeof buf);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) break;
        done += k;
        progress_update(&pr, done);
    }
    progress_end(&pr);
    close(tick[0]);
    int failed = 0;
    for (int w = 0; w < jobs; w++) {
        int st;
        while (waitpid(pids[w], &st, 0) < 0 && errno == EINTR) {}
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    FILE *fp[DATA_MAX_JOBS] = {0};
    for (int w = 0; w < jobs && !failed; w++)
        if (!(fp[w] = fopen(paths[w], "rb"))) failed = 1;
    for (size_t i = 0; i < files->n && !failed; i++) {
        FILE *f = fp[i % (size_t)jobs];
        int64_t st;
        uint64_t len;
        if (fread(&st, sizeof st, 1, f) != 1 || fread(&len, sizeof len, 1, f) != 1) { failed = 1; break; }
        if (st < 0) {
            if (ctx->failed++ == 0) snprintf(ctx->first_failed, sizeof ctx->first_failed, "%s", files->v[i]);
            continue;
        }
        if (st == 1) { ctx->skipped++; continue; }
        dbuf_reserve(out, len + 1);
        if (len && fread(out->p + out->n, 1, len, f) != len) { failed = 1; break; }
        if (len) {
            out->n += len;
            out->p[out->n++] = '\n';
            out->p[out->n] = '\0';
            ctx->files++;
        }
    }
    for (int w = 0; w < jobs; w++) {
        if (fp[w]) fclose(fp[w]);
        unlink(paths[w]);
    }
    if (failed) snprintf(ctx->err, sizeof ctx->err, "a converter worker failed (scratch dir %s)", ctx->tmpdir);
    return failed ? -1 : 0;
}

/* The dictd dictionaries: entries in file order, located through NAME.index; the
 * 00-database-* entries (and any entry overlapping an earlier one) are dropped. */
typedef struct {
    uint64_t off, len;
    int meta; /* a 00-database-* entry */
} dict_entry;
static int cmp_entry(const void *a, const void *b) {
    const dict_entry *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    if (x->len != y->len) return x->len > y->len ? -1 : 1; /* longest first */
    return y->meta - x->meta;                             /* meta first */
}

static int extract_dict(const char *name, size_t (*clean)(const char *, size_t, char *), extract_ctx *ctx,
                        dbuf *out) {
    char ipath[2048], dpath[2048];
    snprintf(ipath, sizeof ipath, "%s/usr/share/dictd/%s.index", data_root(), name);
    snprintf(dpath, sizeof dpath, "%s/usr/share/dictd/%s.dict.dz", data_root(), name);
    dbuf idx = {0}, dict = {0};
    if (read_file_text(ipath, &idx) != 0 || read_file_text(dpath, &dict) != 0) {
        snprintf(ctx->err, sizeof ctx->err, "cannot read %.480s or %.480s", ipath, dpath);
        dbuf_free(&idx);
        dbuf_free(&dict);
        return -1;
    }
    dict_entry *ents = NULL;
    size_t ne = 0, cap = 0, lineno = 0;
    int bad = 0;
    for (size_t i = 0; i < idx.n && !bad;) {
        size_t e = i;
        while (e < idx.n && idx.p[e] != '\n') e++;
        lineno++;
        const char *l = idx.p + i;
        size_t len = e - i;
        i = e + 1;
        if (len == 0) continue;
        const char *t2 = memrchr(l, '\t', len);
        const char *t1 = t2 ? memrchr(l, '\t', (size_t)(t2 - l)) : NULL;
        dict_entry d;
        if (!t1 || data_b64_decode(t1 + 1, (size_t)(t2 - t1 - 1), &d.off) != 0 ||
            data_b64_decode(t2 + 1, (size_t)(l + len - t2 - 1), &d.len) != 0 || d.off + d.len > dict.n) {
            snprintf(ctx->err, sizeof ctx->err, "%.900s:%zu: malformed index line", ipath, lineno);
            bad = 1;
            break;
        }
        /* metadata entries are dropped with their aliases (e.g. 00-gcide-url): see below */
        d.meta = starts_with(l, (size_t)(t1 - l), "00-database-") || starts_with(l, (size_t)(t1 - l), "00database");
        if (ne == cap) {
            cap = cap ? 2 * cap : 4096;
            dict_entry *p = realloc(ents, cap * sizeof *p);
            if (!p) die(1, "out of memory reading %s", ipath);
            ents = p;
        }
        ents[ne++] = d;
    }
    if (!bad) {
        if (ne > 1) qsort(ents, ne, sizeof *ents, cmp_entry); /* ents is NULL when the index has no line */
        uint64_t end = 0;
        char *tmp = malloc_check(dict.n + 1);
        for (size_t k = 0; k < ne; k++) {
            if (ents[k].off < end || ents[k].len == 0) continue; /* same definition, another headword */
            end = ents[k].off + ents[k].len;
            if (ents[k].meta) continue;
            size_t m = clean(dict.p + ents[k].off, (size_t)ents[k].len, tmp);
            size_t before = out->n;
            put_document(out, tmp, m);
            if (out->n > before) ctx->files++;
        }
        free(tmp);
    }
    free(ents);
    dbuf_free(&idx);
    dbuf_free(&dict);
    return bad ? -1 : 0;
}

static int ex_gcide(extract_ctx *ctx, dbuf *out) { return extract_dict("gcide", data_gcide_clean, ctx, out); }
static int ex_foldoc(extract_ctx *ctx, dbuf *out) { return extract_dict("foldoc", data_braces_clean, ctx, out); }

static int ex_linuxdoc(extract_ctx *ctx, dbuf *out) {
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/usr/share/doc/linux-doc-6.1/Documentation", data_root());
    strlist files = {0};
    walk_files(dir, ".rst.gz", "translations", 0, &files);
    strlist_sort(&files);
    if (ctx->verbose) {
        printf("    linux-doc-6.1: %zu .rst.gz files, %d workers\n", files.n, ctx->jobs);
        fflush(stdout);
    }
    int rc = convert_files(&files, convert_rst, ctx, out, "    linux-doc-6.1", "files");
    strlist_free(&files);
    return rc;
}

static int ex_pyinfo(extract_ctx *ctx, dbuf *out) {
    strlist files = {0};
    glob_files("/usr/share/info/python3.11.info*.gz", &files);
    int rc = 0;
    for (size_t i = 0; i < files.n && rc == 0; i++) {
        dbuf raw = {0};
        if (read_file_text(files.v[i], &raw) != 0) {
            snprintf(ctx->err, sizeof ctx->err, "cannot read %s", files.v[i]);
            rc = -1;
        } else {
            raw.n = data_info_clean(raw.p, raw.n, raw.p);
            put_document(out, raw.p, raw.n);
            ctx->files++;
        }
        dbuf_free(&raw);
    }
    strlist_free(&files);
    return rc;
}

static int ex_perldoc(extract_ctx *ctx, dbuf *out) {
    strlist files = {0};
    glob_files("/usr/share/perl/5.*.*/pod/*.pod", &files);
    if (ctx->verbose) {
        printf("    perl-doc: %zu pods through pod2text, %d workers\n", files.n, ctx->jobs);
        fflush(stdout);
    }
    int rc = convert_files(&files, convert_pod, ctx, out, "    perl-doc", "pods");
    strlist_free(&files);
    return rc;
}

/* Man pages a package installed, from dpkg's file list (sections 1-9, no symlinks). */
static int ex_manpages_of(const char *pkg, extract_ctx *ctx, dbuf *out) {
    char list[2048];
    snprintf(list, sizeof list, "%s/var/lib/dpkg/info/%s.list", data_root(), pkg);
    dbuf l = {0};
    if (read_file_text(list, &l) != 0) {
        snprintf(ctx->err, sizeof ctx->err, "cannot read %.900s", list);
        dbuf_free(&l);
        return -1;
    }
    strlist files = {0};
    char path[4096];
    for (char *s = l.p, *e; s && *s; s = e ? e + 1 : NULL) {
        e = strchr(s, '\n');
        if (e) *e = '\0';
        if (strncmp(s, "/usr/share/man/man", 18) != 0 || !(s[18] >= '1' && s[18] <= '9') || s[19] != '/') continue;
        snprintf(path, sizeof path, "%s%s", data_root(), s);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISREG(st.st_mode)) strlist_add(&files, path);
    }
    dbuf_free(&l);
    strlist_sort(&files);
    if (ctx->verbose) {
        printf("    %s: rendering %zu pages with man, %d workers\n", pkg, files.n, ctx->jobs);
        fflush(stdout);
    }
    char what[64];
    snprintf(what, sizeof what, "    %s", pkg);
    int rc = convert_files(&files, convert_man, ctx, out, what, "pages");
    strlist_free(&files);
    return rc;
}
static int ex_manpages(extract_ctx *ctx, dbuf *out) { return ex_manpages_of("manpages", ctx, out); }
static int ex_manpages_dev(extract_ctx *ctx, dbuf *out) { return ex_manpages_of("manpages-dev", ctx, out); }

static int ex_fortunes(extract_ctx *ctx, dbuf *out) {
    strlist all = {0};
    glob_files("/usr/share/games/fortunes/*", &all);
    int rc = 0;
    for (size_t i = 0; i < all.n && rc == 0; i++) {
        struct stat st;
        if (has_suffix(all.v[i], ".dat") || has_suffix(all.v[i], ".u8") || stat(all.v[i], &st) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        dbuf raw = {0};
        if (read_file_text(all.v[i], &raw) != 0) {
            snprintf(ctx->err, sizeof ctx->err, "cannot read %s", all.v[i]);
            rc = -1;
        } else {
            raw.n = data_fortune_clean(raw.p, raw.n, raw.p);
            put_document(out, raw.p, raw.n);
            ctx->files++;
        }
        dbuf_free(&raw);
    }
    strlist_free(&all);
    return rc;
}

static int ex_kjv(extract_ctx *ctx, dbuf *out) {
    dbuf cmd = {0}, raw = {0};
    char dir[2048];
    snprintf(dir, sizeof dir, "%s/usr/lib", data_root());
    dbuf_puts(&cmd, "bible -f -p ");
    shell_quote(&cmd, dir);
    dbuf_puts(&cmd, " gen1:1-rev22:21 </dev/null 2>/dev/null");
    int st = run_capture(cmd.p, &raw);
    int rc = 0;
    if (st != 0 || raw.n == 0) {
        snprintf(ctx->err, sizeof ctx->err, "`%s` failed (status %d)", cmd.p, st);
        rc = -1;
    } else {
        raw.n = data_kjv_strip_refs(raw.p, raw.n, raw.p);
        put_document(out, raw.p, raw.n);
        ctx->files = 1; /* the whole Bible is one document */
    }
    dbuf_free(&cmd);
    dbuf_free(&raw);
    return rc;
}

/* ------------------------------------------------------------------------------ */
/* 5. The corpus table and data_prepare                                            */
/* ------------------------------------------------------------------------------ */

typedef struct {
    const char *package;  /* the Debian package the text comes from */
    const char *probe;    /* glob (under the root) that must match when it is installed */
    const char *tool;     /* program run on PATH, or NULL */
    const char *tool_pkg; /* package providing it (its version goes into SOURCE.txt too) */
    const char *from;     /* what is read, for SOURCE.txt */
    const char *cleanup;  /* what is done to it, for SOURCE.txt */
    int (*extract)(extract_ctx *ctx, dbuf *out);
} source_spec;

#define MAX_SOURCES 2
typedef struct {
    const char *name;
    const char *role; /* "train" or "ood" */
    source_spec src[MAX_SOURCES];
} corpus_spec;

static const corpus_spec corpus_table[] = {
    {"docs", "train",
     {{"linux-doc-6.1", "/usr/share/doc/linux-doc-6.1/Documentation/index.rst.gz", "gzip", "gzip",
       "/usr/share/doc/linux-doc-6.1/Documentation/**/*.rst.gz, skipping translations/",
       "reStructuredText kept as is; `.. SPDX-License-Identifier:` lines dropped", ex_linuxdoc},
      {"python3.11-doc", "/usr/share/info/python3.11.info*.gz", "gzip", "gzip",
       "/usr/share/info/python3.11.info*.gz (GNU info)",
       "info node headers, tag tables, menus and index lines dropped; *note X: label. -> X", ex_pyinfo}}},
    {"gcide", "train",
     {{"dict-gcide", "/usr/share/dictd/gcide.index", "gzip", "gzip",
       "/usr/share/dictd/gcide.dict.dz entries in file order via gcide.index",
       "00-database-* dropped; source tags like [1913 Webster] removed; \\hy*phen*a*tion\\ and its "
       "(pronunciation) removed; [a^]-style letter codes -> letters; {braces} removed",
       ex_gcide}}},
    {"perldoc", "ood",
     {{"perl-doc", "/usr/share/perl/5.*.*/pod/perlfunc.pod", "pod2text", "perl",
       "/usr/share/perl/5.*.*/pod/*.pod", "rendered with `LC_ALL=C pod2text FILE`", ex_perldoc}}},
    {"manpages", "ood",
     {{"manpages", "/var/lib/dpkg/info/manpages.list", "man", "man-db",
       "man pages listed in /var/lib/dpkg/info/manpages.list (sections 1-9)",
       "symlinks and .so stubs skipped; `MANWIDTH=80 man -E ascii --nh --nj -l FILE | col -bx`", ex_manpages},
      {"manpages-dev", "/var/lib/dpkg/info/manpages-dev.list", "col", "bsdextrautils",
       "man pages listed in /var/lib/dpkg/info/manpages-dev.list (sections 1-9)",
       "symlinks and .so stubs skipped; `MANWIDTH=80 man -E ascii --nh --nj -l FILE | col -bx`",
       ex_manpages_dev}}},
    {"foldoc", "ood",
     {{"dict-foldoc", "/usr/share/dictd/foldoc.index", "gzip", "gzip",
       "/usr/share/dictd/foldoc.dict.dz entries in file order via foldoc.index",
       "00-database-* dropped; {cross-reference} braces removed", ex_foldoc}}},
    {"fortunes", "ood",
     /* no program needed; tool_pkg only lists fortunes-min's version in SOURCE.txt */
     {{"fortunes", "/usr/share/games/fortunes/science", NULL, "fortunes-min",
       "/usr/share/games/fortunes/* except *.dat and *.u8 (fortunes, fortunes-min)",
       "`%` separator lines -> blank lines", ex_fortunes}}},
    {"kjv", "ood",
     {{"bible-kjv-text", "/usr/lib/bible.data", "bible", "bible-kjv",
       "`bible -f -p /usr/lib gen1:1-rev22:21 </dev/null`", "verse references like `Ge1:1 ` stripped", ex_kjv}}},
};
#define N_CORPORA (sizeof corpus_table / sizeof corpus_table[0])

const char *const data_corpora[] = {"docs", "gcide", "perldoc", "manpages", "foldoc", "fortunes", "kjv", NULL};

static const corpus_spec *find_corpus(const char *name) {
    for (size_t i = 0; i < N_CORPORA; i++)
        if (strcmp(corpus_table[i].name, name) == 0) return &corpus_table[i];
    return NULL;
}

const char *data_corpus_role(const char *name) {
    const corpus_spec *c = find_corpus(name);
    return c ? c->role : NULL;
}

static int on_path(const char *prog) {
    const char *path = getenv("PATH");
    if (!path || !*path) path = "/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        snprintf(buf, sizeof buf, "%.*s/%s", (int)n, p, prog);
        if (access(buf, X_OK) == 0) return 1;
        p += n + (e ? 1 : 0);
    }
    return 0;
}

static int glob_exists(const char *pattern) {
    strlist l = {0};
    glob_files(pattern, &l);
    int found = l.n > 0;
    strlist_free(&l);
    return found;
}

/* Append "pkg (why)" lines for every missing package of corpus c to msg; returns count. */
static int check_sources(const corpus_spec *c, dbuf *msg) {
    int missing = 0;
    for (int s = 0; s < MAX_SOURCES && c->src[s].package; s++) {
        const source_spec *src = &c->src[s];
        if (!glob_exists(src->probe)) {
            dbuf_printf(msg, "  corpus %s needs the Debian package %s (not found: %s%s)\n", c->name, src->package,
                        data_root(), src->probe);
            missing++;
        }
        if (src->tool && !on_path(src->tool)) {
            dbuf_printf(msg, "  corpus %s needs the Debian package %s (program `%s` not on PATH)\n", c->name,
                        src->tool_pkg, src->tool);
            missing++;
        }
    }
    return missing;
}

/* The cleanup-version line of a SOURCE.txt, or "" when unreadable. */
static void read_cleanup_version(const char *path, char *buf, size_t len) {
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "cleanup-version: ", 17) == 0) {
            line[strcspn(line, "\r\n")] = '\0';
            size_t k = strlen(line + 17);
            if (k >= len) k = len - 1;
            memcpy(buf, line + 17, k);
            buf[k] = '\0';
            break;
        }
    fclose(f);
}

/* N of a cleanup version "s2hc-data-N"; 0 when it is not one. */
static long cleanup_number(const char *ver) {
    if (strncmp(ver, "s2hc-data-", 10) != 0) return 0;
    char *end;
    const long n = strtol(ver + 10, &end, 10);
    return *end == '\0' && n > 0 ? n : 0;
}

/* Was corpus `name` in data_dir prepared by a newer build (a higher cleanup version, into
 * ver)? Rebuilt by this one, it would hold other text than that build's runs trained on. */
static int corpus_newer(const char *data_dir, const char *name, char *ver, size_t len) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s/SOURCE.txt", data_dir, name);
    read_cleanup_version(path, ver, len);
    return cleanup_number(ver) > cleanup_number(DATA_CLEANUP_VERSION);
}

/* Is corpus c prepared and current in data_dir? Fills sizes when it is. */
static int corpus_cached(const char *data_dir, const char *name, uint64_t *train, uint64_t *val) {
    char path[1200], ver[128];
    snprintf(path, sizeof path, "%s/%s/SOURCE.txt", data_dir, name);
    read_cleanup_version(path, ver, sizeof ver);
    if (strcmp(ver, DATA_CLEANUP_VERSION) != 0) return 0;
    const char *splits[2] = {"train", "val"};
    uint64_t *sizes[2] = {train, val};
    for (int k = 0; k < 2; k++) {
        data_shard s;
        char err[1400];
        data_shard_path(path, sizeof path, data_dir, name, splits[k]);
        if (shard_open(&s, path, err, sizeof err) != 0) return 0;
        if (sizes[k]) *sizes[k] = s.count;
        shard_close(&s);
    }
    return 1;
}

static void package_versions(const corpus_spec *c, dbuf *out) {
    const char *pkgs[2 * MAX_SOURCES];
    int np = 0;
    for (int s = 0; s < MAX_SOURCES && c->src[s].package; s++) {
        const char *cand[2] = {c->src[s].package, c->src[s].tool_pkg};
        for (int k = 0; k < 2; k++) {
            int dup = !cand[k];
            for (int q = 0; q < np && !dup; q++) dup = strcmp(pkgs[q], cand[k]) == 0;
            if (!dup) pkgs[np++] = cand[k];
        }
    }
    dbuf cmd = {0};
    dbuf_puts(&cmd, "dpkg-query -W -f='${Package} ${Version}\\n'");
    for (int q = 0; q < np; q++) {
        dbuf_putc(&cmd, ' ');
        dbuf_puts(&cmd, pkgs[q]);
    }
    dbuf_puts(&cmd, " 2>/dev/null");
    run_capture(cmd.p, out);
    dbuf_free(&cmd);
}

static void remove_tree_files(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    char path[2048];
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(d);
    rmdir(dir);
}

static int data_jobs(void) {
    const char *e = getenv("S2HC_DATA_JOBS");
    long j = e ? strtol(e, NULL, 10) : runtime_cpu_count();
    if (j < 1) j = 1;
    if (j > DATA_MAX_JOBS) j = DATA_MAX_JOBS;
    return (int)j;
}

static void fmt_mb(char *buf, size_t len, uint64_t bytes) { snprintf(buf, len, "%.2f MB", (double)bytes / 1e6); }

/* Build one corpus: extract every source, split each, then remove SOURCE.txt, write the
 * shards (shard_pair_write: train.bin, then val.bin, into place) and SOURCE.txt last. */
static int prepare_one(const char *data_dir, const corpus_spec *c, int verbose) {
    double t0 = now_seconds();
    char tmpl[1200];
    snprintf(tmpl, sizeof tmpl, "%s/.prepare-%s-XXXXXX", data_dir, c->name);
    if (!mkdtemp(tmpl)) {
        fprintf(stderr, "s2hc: error: cannot create a scratch directory in %s: %s\n", data_dir, strerror(errno));
        return 1;
    }
    dbuf train = {0}, val = {0}, info = {0};
    int rc = 0;
    if (verbose) {
        printf("%s: building (%s)\n", c->name, c->role);
        fflush(stdout);
    }
    for (int s = 0; s < MAX_SOURCES && c->src[s].package && rc == 0; s++) {
        const source_spec *src = &c->src[s];
        extract_ctx ctx = {.tmpdir = tmpl, .jobs = data_jobs(), .verbose = verbose};
        dbuf text = {0};
        double ts = now_seconds();
        if (src->extract(&ctx, &text) != 0) {
            fprintf(stderr, "s2hc: error: corpus %s, package %s: %s\n", c->name, src->package,
                    ctx.err[0] ? ctx.err : "extraction failed");
            rc = 1;
        } else if (text.n == 0) {
            fprintf(stderr, "s2hc: error: corpus %s, package %s: no text extracted from %s%s\n", c->name,
                    src->package, data_root(), src->probe);
            rc = 1;
        } else {
            size_t cut = data_split_point(text.p, text.n);
            dbuf_put(&train, text.p, cut);
            dbuf_put(&val, text.p + cut, text.n - cut);
            char mb[32];
            fmt_mb(mb, sizeof mb, text.n);
            if (verbose) {
                printf("  %s: %llu documents, %s, %.1f s\n", src->package, (unsigned long long)ctx.files, mb,
                       now_seconds() - ts);
                if (ctx.failed)
                    printf("  %s: warning: %llu files failed to convert and were left out (first: %s)\n",
                           src->package, (unsigned long long)ctx.failed, ctx.first_failed);
                fflush(stdout);
            }
            dbuf_printf(&info, "source: %s\n  from: %s\n  cleanup: %s\n  documents: %llu", src->package, src->from,
                        src->cleanup, (unsigned long long)ctx.files);
            if (ctx.skipped) dbuf_printf(&info, " (%llu .so stubs skipped)", (unsigned long long)ctx.skipped);
            if (ctx.failed) dbuf_printf(&info, " (%llu failed to convert)", (unsigned long long)ctx.failed);
            dbuf_printf(&info, "\n  bytes: %zu (train %zu, val %zu)\n", text.n, cut, text.n - cut);
        }
        dbuf_free(&text);
    }
    remove_tree_files(tmpl);

    if (rc == 0) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s/SOURCE.txt", data_dir, c->name);
        unlink(path); /* shards without a current SOURCE.txt are never taken as cached */
        dbuf src = {0}, ver = {0};
        package_versions(c, &ver);
        dbuf_printf(&src,
                    "# %s: text for s2hc, written by `s2hc data prepare` (do not edit; --force rebuilds)\n"
                    "corpus: %s\nrole: %s\ncleanup-version: %s\n"
                    "format: S2HCTOK v1 shards, byte-level tokens (vocab 256, uint8)\n"
                    "split: the last 1%% of each source, cut at a line start, goes to val.bin\n"
                    "train-bytes: %zu\nval-bytes: %zu\n"
                    "documents: normalised (CRLF -> LF, trailing blanks cut, blank-line runs collapsed), "
                    "one blank line between documents\n",
                    c->name, c->name, c->role, DATA_CLEANUP_VERSION, train.n, val.n);
        dbuf_puts(&src, "packages:\n");
        for (char *s = ver.p, *e; s && *s; s = e ? e + 1 : NULL) {
            e = strchr(s, '\n');
            dbuf_printf(&src, "  %.*s\n", (int)(e ? e - s : (ptrdiff_t)strlen(s)), s);
        }
        dbuf_put(&src, info.p, info.n);
        char vpath[1200], tpath[1200];
        data_shard_path(vpath, sizeof vpath, data_dir, c->name, "val");
        data_shard_path(tpath, sizeof tpath, data_dir, c->name, "train");
        /* the pair (a failure leaves the old one, which the missing SOURCE.txt marks for
           rebuilding), SOURCE.txt last */
        if (shard_pair_write(tpath, train.p, train.n, vpath, val.p ? val.p : "", val.n, 256, 1) != 0 ||
            write_file_atomic(path, NULL, 0, src.p, src.n) != 0)
            rc = 1;
        dbuf_free(&src);
        dbuf_free(&ver);
        if (rc == 0 && verbose) {
            char mt[32], mv[32];
            fmt_mb(mt, sizeof mt, train.n);
            fmt_mb(mv, sizeof mv, val.n);
            printf("%s: done: train %s, val %s, %.1f s\n", c->name, mt, mv, now_seconds() - t0);
            fflush(stdout);
        }
    }
    dbuf_free(&train);
    dbuf_free(&val);
    dbuf_free(&info);
    return rc;
}

/* One writer at a time in a data folder: `prepare` and `import` write the shards through
 * fixed .tmp names. The lock's descriptor (close it to release), or -1 after a message. */
static int data_dir_lock(const char *data_dir, const char *who) {
    char lockp[1200];
    snprintf(lockp, sizeof lockp, "%s/.prepare.lock", data_dir);
    int fd = open(lockp, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
        lock_file_claim(fd, who);
        return fd;
    }
    if (fd >= 0 && errno == EWOULDBLOCK) {
        char holder[160];
        ssize_t k = pread(fd, holder, sizeof holder - 1, 0);
        holder[k > 0 ? k : 0] = '\0';
        holder[strcspn(holder, "\n")] = '\0';
        fprintf(stderr, "s2hc: error: another `s2hc data prepare` or `data import` is writing in %s%s%s%s; wait for it\n",
                data_dir, holder[0] ? " (" : "", holder, holder[0] ? ")" : "");
    } else
        fprintf(stderr, "s2hc: error: cannot lock %s: %s\n", lockp, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
}

int data_prepare(const char *data_dir, const char *only, int force, int verbose) {
    if (only && !find_corpus(only)) {
        fprintf(stderr, "s2hc: error: unknown corpus '%s'; known:", only);
        for (int i = 0; data_corpora[i]; i++) fprintf(stderr, " %s", data_corpora[i]);
        fputc('\n', stderr);
        return 1;
    }
    double t0 = now_seconds();
    /* which corpora need building, and are their packages installed? */
    int todo[N_CORPORA] = {0}, ntodo = 0, nnewer = 0;
    dbuf missing = {0};
    int nmissing = 0;
    for (size_t i = 0; i < N_CORPORA; i++) {
        const corpus_spec *c = &corpus_table[i];
        if (only && strcmp(only, c->name) != 0) continue;
        uint64_t nt = 0, nv = 0;
        if (!force && corpus_cached(data_dir, c->name, &nt, &nv)) {
            if (verbose) {
                char mt[32], mv[32];
                fmt_mb(mt, sizeof mt, nt);
                fmt_mb(mv, sizeof mv, nv);
                printf("%s: cached (train %s, val %s) in %s/%s\n", c->name, mt, mv, data_dir, c->name);
            }
            continue;
        }
        char ver[128];
        if (!force && corpus_newer(data_dir, c->name, ver, sizeof ver)) {
            fprintf(stderr, "s2hc: error: %s/%s was prepared by a newer s2hc (cleanup-version %s; this build's is %s): "
                    "rebuilt by this one it would hold other text than that build's runs trained on; prepare it with "
                    "that build, use another --dir, or --force to rebuild it with this one\n", data_dir, c->name, ver,
                    DATA_CLEANUP_VERSION);
            nnewer++;
            continue;
        }
        todo[i] = 1;
        ntodo++;
        nmissing += check_sources(c, &missing);
    }
    if (nnewer) { /* nothing built: the other corpora of the folder are that build's too */
        dbuf_free(&missing);
        return 1;
    }
    if (nmissing) {
        fprintf(stderr, "s2hc: error: missing Debian packages; run `make deps` (or apt-get install them):\n%s",
                missing.p);
        dbuf_free(&missing);
        return 1;
    }
    dbuf_free(&missing);
    if (ntodo && mkdir_p(data_dir) != 0) {
        fprintf(stderr, "s2hc: error: cannot create %s: %s\n", data_dir, strerror(errno));
        return 1;
    }
    /* one prepare at a time in a data folder (they would share the shards' .tmp files);
       holding the lock, every scratch folder left there is an interrupted prepare's */
    int lock_fd = -1;
    if (ntodo) {
        if ((lock_fd = data_dir_lock(data_dir, "s2hc data prepare")) < 0) return 1;
        DIR *d = opendir(data_dir);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL)
            if (strncmp(de->d_name, ".prepare-", 9) == 0) {
                char old[1200];
                snprintf(old, sizeof old, "%s/%s", data_dir, de->d_name);
                remove_tree_files(old);
            }
        if (d) closedir(d);
    }
    int rc = 0;
    for (size_t i = 0; i < N_CORPORA && rc == 0; i++)
        if (todo[i]) rc = prepare_one(data_dir, &corpus_table[i], verbose);
    if (lock_fd >= 0) close(lock_fd);
    if (verbose && ntodo && rc == 0)
        printf("data: %d %s built in %.1f s\n", ntodo, ntodo == 1 ? "corpus" : "corpora", now_seconds() - t0);
    fflush(stdout);
    return rc;
}

/* ------------------------------------------------------------------------------ */
/* 6. The `s2hc data` command                                                      */
/* ------------------------------------------------------------------------------ */

static void data_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc data prepare [--dir DATA] [--only NAME] [--force] [--quiet]\n"
            "       s2hc data list [--dir DATA] [--csv]\n"
            "       s2hc data import FILE --name NAME [--val FILE] [--tokens uint16 --vocab V] [--dir DATA]\n"
            "                                          (your own text, or token ids, as a corpus)\n"
            "\n"
            "Turn text from installed Debian packages into byte-level token shards:\n"
            "DATA/<corpus>/train.bin, val.bin (the last 1%% of each source) and SOURCE.txt.\n"
            "Prepared corpora are cached; --force rebuilds. DATA defaults to ./data.\n"
            "Missing packages: run `make deps`.\n"
            "list shows every corpus with its role, state, train and val tokens and vocabulary;\n"
            "--csv prints them as CSV for pandas instead (corpus,role,state,train_tokens,val_tokens,\n"
            "vocab; a count empty where the table shows '-'), and the closing note on stderr.\n"
            "\n"
            "corpora:");
    for (size_t i = 0; i < N_CORPORA; i++) fprintf(f, " %s (%s)", corpus_table[i].name, corpus_table[i].role);
    fprintf(f,
            "\n\n"
            "examples:\n"
            "  s2hc data prepare                  # all corpora into ./data (about a minute)\n"
            "  s2hc data prepare --only kjv --dir /tmp/data\n"
            "  s2hc data list\n"
            "  s2hc data list --csv > corpora.csv\n"
            "  s2hc data import notes.txt --name notes   # then: --set data.train=notes\n"
            "  s2hc data import fineweb/train.bin --val fineweb/val.bin --tokens uint16 --vocab 50257 --name fineweb\n"
            "                                     # GPT-2 BPE ids (nanoGPT's prepare.py); then also --set model.vocab=50304\n");
}

/* A whole input file of `data import`: a regular file mapped read-only, anything else
 * (a pipe, /dev/stdin) read into memory. */
typedef struct {
    const uint8_t *p;
    size_t n;
    int mapped;
} import_src;

static int import_map(const char *file, import_src *m) {
    memset(m, 0, sizeof *m);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int e = 0;
    if (fd < 0 || fstat(fd, &st) != 0) e = errno;
    else if (S_ISDIR(st.st_mode)) e = EISDIR;
    else if (S_ISREG(st.st_mode)) {
        m->n = (size_t)st.st_size;
        void *p = m->n ? mmap(NULL, m->n, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        if (p == MAP_FAILED) e = errno;
        else { m->p = p; m->mapped = m->n > 0; }
    } else {
        /* a pipe or a device is read into memory: at most half the machine's, so that
           /dev/zero or a runaway producer ends with a message, not the OOM killer */
        long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
        size_t most = pages > 0 && psz > 0 ? (size_t)pages * (size_t)psz / 2 : (size_t)1 << 32;
        size_t cap = 1 << 20;
        uint8_t *buf = malloc_check(cap);
        ssize_t got;
        while ((got = read(fd, buf + m->n, cap - m->n)) > 0 || (got < 0 && errno == EINTR)) {
            if (got < 0) continue;
            m->n += (size_t)got;
            if (m->n < cap) continue;
            if (cap >= most) {
                fprintf(stderr, "s2hc: error: %s: over %.1f GiB from a pipe or device (half this machine's "
                        "memory); save it to a file first (a file is mapped, not read into memory)\n", file,
                        (double)cap / (1 << 30));
                free(buf);
                close(fd);
                memset(m, 0, sizeof *m);
                return -1;
            }
            cap = cap * 2 < most ? cap * 2 : most + 1; /* one byte past the limit tells "over" */
            uint8_t *nb = realloc(buf, cap);
            if (!nb) die(1, "out of memory reading %s", file);
            buf = nb;
        }
        if (got < 0) { e = errno; free(buf); }
        else m->p = buf;
    }
    if (fd >= 0) close(fd);
    if (e) {
        fprintf(stderr, "s2hc: error: %s: cannot read: %s\n", file, strerror(e));
        memset(m, 0, sizeof *m);
        return -1;
    }
    return 0;
}

static void import_unmap(import_src *m) {
    if (m->mapped) munmap((void *)m->p, m->n);
    else free((void *)m->p);
    memset(m, 0, sizeof *m);
}

/* A file's tokens: its bytes (bpt 1), or little-endian uint16 ids below vocab (bpt 2,
 * nanoGPT's train.bin / val.bin). At least 1024 tokens. 0, or -1 with the message. */
static int import_check(const char *file, const import_src *m, uint32_t bpt, uint32_t vocab, uint64_t *count) {
    if (bpt == 2 && m->n % 2) {
        fprintf(stderr, "s2hc: error: %s: %zu bytes is not a whole number of uint16 tokens\n", file, m->n);
        return -1;
    }
    *count = m->n / bpt;
    if (*count < 1024) {
        fprintf(stderr, "s2hc: error: %s: %llu %s is too little for a corpus (at least 1024)\n", file,
                (unsigned long long)*count, bpt == 1 ? "bytes" : "tokens");
        return -1;
    }
    if (bpt == 2)
        for (uint64_t i = 0; i < *count; i++) {
            const unsigned t = (unsigned)m->p[2 * i] | (unsigned)m->p[2 * i + 1] << 8;
            if (t >= vocab) {
                fprintf(stderr, "s2hc: error: %s: token %llu is %u, not below --vocab %u\n", file,
                        (unsigned long long)i, t, vocab);
                return -1;
            }
        }
    return 0;
}

/* `s2hc data import FILE --name NAME [--val VALFILE] [--tokens uint16 --vocab V]`: a
 * file as a corpus. Its bytes are the tokens (text), or with --tokens uint16 it holds
 * token ids already (GPT-2 BPE from nanoGPT's prepare scripts, for instance). Without
 * --val the last 1 % goes to val.bin (text: cut at a line start); with it, VALFILE is
 * val.bin whole. Nothing is written unless both parts are good. */
static int data_import(const char *file, const char *valfile, const char *name, const char *dir, uint32_t bpt,
                       uint32_t vocab) {
    import_src src, vsrc = {0};
    uint64_t n = 0, nv = 0;
    if (import_map(file, &src) != 0) return 1;
    int rc = import_check(file, &src, bpt, vocab, &n);
    if (!rc && valfile) rc = import_map(valfile, &vsrc) || import_check(valfile, &vsrc, bpt, vocab, &nv);
    uint64_t cut = n;
    const uint8_t *val = vsrc.p;
    if (!rc && !valfile) {
        cut = bpt == 1 ? data_split_point((const char *)src.p, (size_t)n) : n;
        /* tokens, or no line start after the 99 % point, or one so late that less than half
           of the 1 % would be left (a long last line): cut at the 99 % point */
        if (cut == n || (n - cut) * 2 < n / 100) cut = n - n / 100;
        val = src.p + cut * bpt;
        nv = n - cut;
    }
    char path[1200], vpath[1200];
    snprintf(path, sizeof path, "%s/%s/train.bin", dir, name);
    snprintf(vpath, sizeof vpath, "%s/%s/val.bin", dir, name);
    int lock_fd = -1;
    if (!rc && mkdir_p(dir) != 0) {
        fprintf(stderr, "s2hc: error: cannot create %s: %s\n", dir, strerror(errno));
        rc = 1;
    }
    if (!rc && (lock_fd = data_dir_lock(dir, "s2hc data import")) < 0) rc = 1;
    if (!rc) rc = shard_pair_write(path, src.p, cut, vpath, val, nv, vocab, bpt) != 0;
    if (lock_fd >= 0) close(lock_fd);
    import_unmap(&src);
    import_unmap(&vsrc);
    if (rc) return 1;
    const char *unit = bpt == 1 ? "bytes" : "tokens";
    printf("imported %s%s%s as corpus '%s' in %s: %llu train and %llu val %s (vocab %u)\n", file,
           valfile ? " and " : "", valfile ? valfile : "", name, dir, (unsigned long long)cut, (unsigned long long)nv,
           unit, vocab);
    /* training needs one validation window of block_size + 1 tokens */
    if (nv <= 1024)
        printf("note: its validation part fits model.block_size up to %llu only (the M and L presets use 1024): "
               "more %s for longer sequences\n", (unsigned long long)nv - 1, bpt == 1 ? "text" : "tokens");
    if (vocab != 256)
        printf("note: train on it with --set model.vocab=%u or more (a multiple of 64 is faster, e.g. %u); its "
               "out-of-domain corpora must hold the same kind of tokens\n", vocab, (vocab + 63) / 64 * 64);
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* data list's corpus column: 12 wide, or as the longest name it shows */
#define LIST_NAME_WIDTH 12

/* One corpus of `data list`: its counts as printed ("-" where there are none). */
typedef struct {
    char *name;
    const char *role, *state;
    char train[24], val[24], vocab[16];
} list_row;

/* A count of data list's table as a CSV field: the number, or empty for its "-". */
static void list_csv_count(const char *v) {
    putchar(',');
    if (strcmp(v, "-") != 0) fputs(v, stdout);
}

/* The corpora of data_dir: the seven `prepare` makes, then every other folder holding
 * train.bin and val.bin (`data import`), with their token counts and vocabularies. All
 * rows are read first, so that the corpus column is as wide as the longest name (an
 * imported corpus's up to 63 bytes, a folder's more): each row's counts in the same
 * columns. csv: the same rows as CSV (a header; counts empty where the table has "-"),
 * the closing note on stderr. */
static int data_list(const char *data_dir, int csv) {
    list_row *rows = calloc_check(N_CORPORA, sizeof *rows);
    size_t nr = 0;
    for (size_t i = 0; i < N_CORPORA; i++) {
        const corpus_spec *c = &corpus_table[i];
        list_row *r = &rows[nr++];
        uint64_t nt = 0, nv = 0;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s/SOURCE.txt", data_dir, c->name);
        int ready = corpus_cached(data_dir, c->name, &nt, &nv);
        char ver[128];
        const int newer = !ready && corpus_newer(data_dir, c->name, ver, sizeof ver);
        if (!(r->name = strdup(c->name))) die(1, "out of memory listing %s", data_dir);
        r->role = c->role;
        r->state = ready ? "prepared" : newer ? "newer" : file_exists(path) ? "stale" : "missing";
        snprintf(r->train, sizeof r->train, ready ? "%llu" : "-", (unsigned long long)nt);
        snprintf(r->val, sizeof r->val, ready ? "%llu" : "-", (unsigned long long)nv);
        snprintf(r->vocab, sizeof r->vocab, "%s", ready ? "256" : "-");
    }
    DIR *d = opendir(data_dir);
    char **names = NULL;
    size_t nn = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char tp[1200], vp[1200];
        if (e->d_name[0] == '.' || find_corpus(e->d_name)) continue;
        data_shard_path(tp, sizeof tp, data_dir, e->d_name, "train");
        data_shard_path(vp, sizeof vp, data_dir, e->d_name, "val");
        if (!file_exists(tp) && !file_exists(vp)) continue;
        names = realloc(names, (nn + 1) * sizeof *names);
        if (!names || !(names[nn++] = strdup(e->d_name))) die(1, "out of memory listing %s", data_dir);
    }
    if (d) closedir(d);
    if (nn > 1) qsort(names, nn, sizeof *names, cmp_names);
    rows = realloc(rows, (N_CORPORA + nn) * sizeof *rows);
    if (!rows) die(1, "out of memory listing %s", data_dir);
    for (size_t i = 0; i < nn; i++) {
        data_shard t, v;
        char tp[1200], vp[1200], err[1400];
        list_row *r = &rows[nr++];
        data_shard_path(tp, sizeof tp, data_dir, names[i], "train");
        data_shard_path(vp, sizeof vp, data_dir, names[i], "val");
        int good = shard_open(&t, tp, err, sizeof err) == 0;
        if (good && (shard_open(&v, vp, err, sizeof err) != 0 || v.vocab != t.vocab)) {
            if (v.map) shard_close(&v);
            shard_close(&t);
            good = 0;
        }
        r->name = names[i]; /* the row's now */
        r->role = "own";
        r->state = good ? "imported" : "bad";
        snprintf(r->train, sizeof r->train, good ? "%llu" : "-", (unsigned long long)(good ? t.count : 0));
        snprintf(r->val, sizeof r->val, good ? "%llu" : "-", (unsigned long long)(good ? v.count : 0));
        snprintf(r->vocab, sizeof r->vocab, good ? "%u" : "-", good ? t.vocab : 0);
        if (good) { shard_close(&t); shard_close(&v); }
    }
    free(names);
    int w = LIST_NAME_WIDTH;
    for (size_t i = 0; i < nr; i++)
        if ((int)strlen(rows[i].name) > w) w = (int)strlen(rows[i].name);
    if (csv) printf("corpus,role,state,train_tokens,val_tokens,vocab\n");
    else printf("%-*s %-6s %-9s %13s %13s %6s\n", w, "corpus", "role", "state", "train tokens", "val tokens", "vocab");
    for (size_t i = 0; i < nr; i++) {
        const list_row *r = &rows[i];
        if (csv) {
            csv_field_put(stdout, r->name);
            printf(",%s,%s", r->role, r->state);
            list_csv_count(r->train);
            list_csv_count(r->val);
            list_csv_count(r->vocab);
            putchar('\n');
        } else
            printf("%-*s %-6s %-9s %13s %13s %6s\n", w, r->name, r->role, r->state, r->train, r->val, r->vocab);
        free(r->name);
    }
    free(rows);
    FILE *note = csv ? stderr : stdout; /* stdout holds the CSV alone */
    fprintf(note, "(in %s; `s2hc data prepare --dir ", data_dir);
    sh_word_put(note, data_dir); /* a command to paste: the folder as one word */
    fprintf(note, "` builds what is missing or stale; `own` corpora come from `s2hc data import`)\n");
    return 0;
}

int data_main(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        data_usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const char *cmd = argv[1], *dir = "data", *only = NULL;
    int force = 0, quiet = 0, csv = 0;
    int is_prepare = strcmp(cmd, "prepare") == 0, is_list = strcmp(cmd, "list") == 0;
    int is_import = strcmp(cmd, "import") == 0;
    const char *import_file = NULL, *import_name = NULL, *import_val = NULL, *import_tokens = NULL, *import_vocab = NULL;
    if (!is_prepare && !is_list && !is_import) {
        fprintf(stderr, "s2hc: error: unknown data command '%s'\n", cmd);
        data_usage(stderr);
        return 2;
    }
    char who[32]; /* "data prepare", for opt_once's message */
    snprintf(who, sizeof who, "data %s", cmd);
    opt_seen seen = {.cmd = who};
    for (int i = 2, ended = 0; i < argc; i++) {
        const char *a = argv[i], *v;
        const int kind = opt_kind(a, &ended);
        if (kind < 0) continue;
        if (kind > 0) {
            if (!is_import || import_file) {
                fprintf(stderr, "s2hc: error: data %s: unexpected argument '%s'\n", cmd, a);
                data_usage(stderr);
                return 2;
            }
            import_file = a;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { data_usage(stdout); return 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--dir", 0))) dir = v;
        else if (is_prepare && (v = opt_arg(argc, argv, &i, "--only", 1))) {
            if (only) { /* one corpus per prepare: a second would silently replace the first */
                fprintf(stderr, "s2hc: error: data prepare: --only names one corpus ('%s', then '%s'); run prepare "
                        "once per corpus, or without --only for all\n", only, v);
                return 2;
            }
            only = v;
        }
        else if (is_prepare && strcmp(a, "--force") == 0) force = 1;
        else if (is_prepare && strcmp(a, "--quiet") == 0) quiet = 1;
        else if (is_list && strcmp(a, "--csv") == 0) csv = 1;
        else if (is_import && (v = opt_once(&seen, argc, argv, &i, "--name", 1))) import_name = v;
        else if (is_import && (v = opt_once(&seen, argc, argv, &i, "--val", 1))) import_val = v;
        else if (is_import && (v = opt_once(&seen, argc, argv, &i, "--tokens", 1))) import_tokens = v;
        else if (is_import && (v = opt_once(&seen, argc, argv, &i, "--vocab", 1))) import_vocab = v;
        else {
            fprintf(stderr, "s2hc: error: data %s: unexpected argument '%s'%s\n", cmd, a,
                    a[0] == '-' && !opt_value(argc, argv, i) ? " (or its value is missing or is an option)" : "");
            data_usage(stderr);
            return 2;
        }
    }
    if (!*dir) {
        fprintf(stderr, "s2hc: error: data %s: --dir is empty (the data folder, `data` by default)\n", cmd);
        return 2;
    }
    char what[32];
    snprintf(what, sizeof what, "data %s --dir", cmd);
    if (!data_dir_fits(dir, what)) return 2;
    if (is_list) return data_list(dir, csv);
    if (is_import) {
        if (!import_file || !import_name) {
            fprintf(stderr, "s2hc: error: data import needs FILE and --name NAME\n");
            return 2;
        }
        char nerr[256];
        if (config_name_check(import_name, nerr, sizeof nerr) < 0) {
            fprintf(stderr, "s2hc: error: --name: %s (it becomes data.train or data.ood)\n", nerr);
            return 2;
        }
        if (find_corpus(import_name)) {
            fprintf(stderr, "s2hc: error: '%s' is a prepared corpus's name; pick another --name\n", import_name);
            return 2;
        }
        uint32_t bpt = 1, vocab = 256;
        if (import_tokens && strcmp(import_tokens, "uint16") != 0 && strcmp(import_tokens, "bytes") != 0) {
            fprintf(stderr, "s2hc: error: --tokens '%s': bytes (the default: the file is text) or uint16 (token ids)\n",
                    import_tokens);
            return 2;
        }
        if (import_tokens && !strcmp(import_tokens, "uint16")) {
            char *end = NULL;
            long v = import_vocab ? strtol(import_vocab, &end, 10) : 0;
            if (!import_vocab || *end || end == import_vocab || v < 2 || v > 65536) {
                fprintf(stderr, "s2hc: error: --tokens uint16 needs --vocab V, the tokenizer's vocabulary size in "
                        "2..65536 (GPT-2: 50257)%s%s%s\n", import_vocab ? "; got '" : "", import_vocab ? import_vocab : "",
                        import_vocab ? "'" : "");
                return 2;
            }
            bpt = 2;
            vocab = (uint32_t)v;
        } else if (import_vocab) {
            fprintf(stderr, "s2hc: error: --vocab goes with --tokens uint16 (a text file's vocabulary is its 256 bytes)\n");
            return 2;
        }
        return data_import(import_file, import_val, import_name, dir, bpt, vocab);
    }
    if (only && !find_corpus(only)) {
        fprintf(stderr, "s2hc: error: unknown corpus '%s'; known:", only);
        for (int i = 0; data_corpora[i]; i++) fprintf(stderr, " %s", data_corpora[i]);
        fputc('\n', stderr);
        return 2;
    }
    return data_prepare(dir, only, force, !quiet);
}

/* ------------------------------------------------------------------------------ */
/* 7. The loader                                                                   */
/* ------------------------------------------------------------------------------ */

int loader_open(data_loader *l, const char *path, uint64_t seed, char *err, size_t errlen) {
    memset(l, 0, sizeof *l);
    if (shard_open(&l->shard, path, err, errlen) != 0) return -1;
    rng_t r;
    rng_seed(&r, seed); /* never 0: xorshift would stick there */
    l->rng = r.s;
    return 0;
}

void loader_close(data_loader *l) { shard_close(&l->shard); }

/* Uniform integer in [0, n) by rejection (no modulo bias). */
static uint64_t loader_uniform(data_loader *l, uint64_t n) {
    rng_t r = {l->rng};
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, x;
    do x = rng_u64(&r);
    while (x >= limit);
    l->rng = r.s;
    return x % n;
}

void loader_next(data_loader *l, int B, int T, int *inputs, int *targets) {
    /* inputs, targets are (B, T); window b is tokens [start, start + T] of the shard */
    const data_shard *s = &l->shard;
    if (T < 1 || B < 1 || s->count < (uint64_t)T + 1)
        die(1, "%s: %llu tokens, too few for windows of T+1 = %d tokens", s->path, (unsigned long long)s->count,
            T + 1);
    uint64_t starts = s->count - (uint64_t)T; /* start in [0, count - T - 1] */
    for (int b = 0; b < B; b++) {
        uint64_t start = loader_uniform(l, starts);
        int *in = inputs + (size_t)b * (size_t)T, *tg = targets + (size_t)b * (size_t)T;
        for (int t = 0; t < T; t++) {
            in[t] = shard_token(s, start + (uint64_t)t);
            tg[t] = shard_token(s, start + (uint64_t)t + 1);
        }
    }
}

uint64_t loader_eval_windows(const data_shard *s, int T) {
    if (T < 1 || s->count < 1) return 0;
    return (s->count - 1) / (uint64_t)T;
}

void loader_eval_batch(const data_shard *s, uint64_t first_window, int B, int T, int *inputs, int *targets) {
    uint64_t nw = loader_eval_windows(s, T);
    if (first_window + (uint64_t)B > nw)
        die(1, "%s: eval windows %llu..%llu requested, only %llu of T=%d available", s->path,
            (unsigned long long)first_window, (unsigned long long)(first_window + (uint64_t)B - 1),
            (unsigned long long)nw, T);
    for (int b = 0; b < B; b++) {
        uint64_t start = (first_window + (uint64_t)b) * (uint64_t)T;
        int *in = inputs + (size_t)b * (size_t)T, *tg = targets + (size_t)b * (size_t)T;
        for (int t = 0; t < T; t++) {
            in[t] = shard_token(s, start + (uint64_t)t);
            tg[t] = shard_token(s, start + (uint64_t)t + 1);
        }
    }
}
