/* safetensors.c: a run's weights as one safetensors file (`s2hc export`), such a file's
 * tensors as the start of a fresh run (train.init_from), and the model a file holds for
 * `s2hc sample FILE` and `s2hc eval FILE` (its metadata's config, or --config's for
 * another program's file).
 *
 * The safetensors layout: the header's length N as 8 little-endian bytes, N bytes of
 * JSON (per tensor its dtype, shape and [begin, end) byte offsets into the data that
 * follows; "__metadata__", a map of strings), then every tensor's values, little-endian
 * and row-major, back to back. The header is padded with spaces to a multiple of 8 so
 * the data starts aligned. libyaml reads the header (JSON is YAML's flow style).
 *
 * Names and shapes are the parameter table's: nanoGPT's state_dict keys for the GPT
 * (transformer.wte.weight, transformer.h.0.attn.c_attn.weight as (3 C, C), ...), plus
 * lm_head.weight, a copy of the tied embedding that nanoGPT's state_dict also holds.
 * The hyper-connection tensors keep their s2hc names and layouts
 * (transformer.h.<l>.attn_hc.proj.weight, ...; docs/runfile.md). The run's config, step,
 * method and the build's version go into the metadata, so the file alone says how to
 * rebuild the model.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>
#include "run.h"
#include "util.h"

static void export_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc export RUN_DIR [-o FILE] [--dtype f32|bf16]\n\n"
            "Write the weights of a run's checkpoint as one safetensors file (default\n"
            "RUN_DIR/model.safetensors), for PyTorch and every tool that reads the format.\n"
            "Tensor names are nanoGPT's state_dict keys (lm_head.weight included, a copy of\n"
            "the tied embedding); the hyper-connections keep their s2hc names. The metadata\n"
            "holds the run's config, step and method (docs/runfile.md). The file is written\n"
            "whole or not at all.\n"
            "  -o FILE        where to write it\n"
            "  --dtype T      f32 (default, the checkpoint's values) or bf16 (rounded to\n"
            "                 nearest even: half the size)\n\n"
            "example:\n"
            "  s2hc export runs/tiny-s2hc -o s2hc.safetensors\n");
}

/* x as bf16 bits, rounded to nearest, ties to even, as PyTorch's float-to-bfloat16
 * conversion; NaN stays a (quiet) NaN. */
static uint16_t export_bf16(float x) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if ((b & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((b >> 16) | 0x40u);
    return (uint16_t)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

/* s as a JSON string: quotes, backslashes and control characters escaped */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* One tensor's header entry; *off advances past its bytes. */
static void json_tensor(FILE *f, const char *name, const char *dtype, int rank, const size_t *shape, size_t bytes,
                        size_t *off) {
    fputc(',', f);
    json_string(f, name);
    fprintf(f, ":{\"dtype\":\"%s\",\"shape\":[", dtype);
    for (int d = 0; d < rank; d++) fprintf(f, "%s%zu", d ? "," : "", shape[d]);
    fprintf(f, "],\"data_offsets\":[%zu,%zu]}", *off, *off + bytes);
    *off += bytes;
}

/* values as dtype's bytes at dst; returns the bytes written */
static size_t put_values(unsigned char *dst, const float *v, size_t n, int bf16) {
    if (!bf16) {
        memcpy(dst, v, n * sizeof(float));
        return n * sizeof(float);
    }
    for (size_t i = 0; i < n; i++) {
        const uint16_t h = export_bf16(v[i]);
        dst[2 * i] = (unsigned char)(h & 0xff);
        dst[2 * i + 1] = (unsigned char)(h >> 8);
    }
    return n * 2;
}

int export_main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *dtype = "f32";
    opt_seen seen = {.cmd = "export"};
    for (int i = 1, ended = 0; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) {
            if (dir) {
                fprintf(stderr, "s2hc: error: export: one run directory at a time ('%s', then '%s')\n", dir, argv[i]);
                return 2;
            }
            dir = argv[i];
            path_trim_slashes(argv[i]); /* runs/x/: its files runs/x/model.safetensors, not runs/x//... */
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            export_usage(stdout);
            return 0;
        } else if ((v = opt_once(&seen, argc, argv, &i, "-o", 0))) out = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--dtype", 1))) dtype = v;
        else {
            fprintf(stderr, "s2hc: error: export: unknown option '%s'%s\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            return 2;
        }
    }
    if (!dir) {
        export_usage(stderr);
        return 2;
    }
    if (strcmp(dtype, "f32") && strcmp(dtype, "bf16")) {
        fprintf(stderr, "s2hc: error: export: --dtype: expected f32 or bf16, got '%s'\n", dtype);
        return 2;
    }
    const int bf16 = !strcmp(dtype, "bf16");
    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t step = 0;
    if (run_open(dir, &cfg, &m, &log, &step) != 0) return 1;
    char kind[16] = ""; /* text or a tokenizer's ids (a run file older than the attribute: unknown) */
    const char *tk = h5log_get_attr_str(&log, "/", "token_kind");
    if (tk) snprintf(kind, sizeof kind, "%s", tk);
    h5log_free(&log);
    run_note_in_use(dir, "its checkpoint", (long long)step);
    char path[1024]; /* write_file_atomic's bound: path.tmp and its directory must fit too */
    const int plen = out ? snprintf(path, sizeof path, "%s", out) : snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (plen <= 0 || (size_t)plen + 5 > sizeof path || path[plen - 1] == '/') {
        fprintf(stderr, "s2hc: error: export: output path '%s%s' is empty, a directory or too long (< %zu bytes)\n",
                out ? out : dir, out ? "" : "/model.safetensors", sizeof path - 5);
        model_free(&m);
        return 2;
    }
    /* never over the run's own files (a safetensors file where its checkpoint was), any
       other HDF5 file (another run's), or what is not a plain file (a link, a device,
       a pipe: the rename would replace it) */
    static const char *const own[] = {"ckpt.h5", "run.h5"};
    struct stat so, sr;
    for (int k = 0; k < 2 && stat(path, &so) == 0; k++) {
        char rp[1200];
        snprintf(rp, sizeof rp, "%s/%s", dir, own[k]);
        if (stat(rp, &sr) == 0 && so.st_dev == sr.st_dev && so.st_ino == sr.st_ino) {
            fprintf(stderr, "s2hc: error: export: -o %s is the run's own %s\n", path, own[k]);
            model_free(&m);
            return 2;
        }
    }
    if (lstat(path, &so) == 0) {
        unsigned char sig[8] = {0};
        FILE *f = S_ISREG(so.st_mode) ? fopen(path, "rb") : NULL;
        int hdf5 = f && fread(sig, 1, 8, f) == 8 && memcmp(sig, "\x89HDF\r\n\x1a\n", 8) == 0;
        if (f) fclose(f);
        if (!S_ISREG(so.st_mode) || hdf5) {
            fprintf(stderr, "s2hc: error: export: -o %s exists and is %s; choose another path\n", path,
                    hdf5 ? "an HDF5 file (a run's ckpt.h5 or run.h5?), not a safetensors file"
                         : "not a regular file (a link, a device, a pipe?)");
            model_free(&m);
            return 2;
        }
    }

    const int64_t bytes = safetensors_write(&m, step, path, bf16, kind[0] ? kind : NULL);
    if (bytes >= 0)
        printf("wrote %s: %d tensors (%zu values) and lm_head.weight, %s, step %lld, %.1f MB\n", path, m.n_tensors,
               m.n_params, dtype, (long long)step, (double)bytes / 1e6);
    model_free(&m);
    return bytes >= 0 ? 0 : 1;
}

int64_t safetensors_write(const gpt_model *m, int64_t step, const char *path, int bf16, const char *token_kind) {
    const size_t esize = bf16 ? 2 : sizeof(float);
    /* the header: every table tensor in table order, then lm_head.weight */
    char *head = NULL;
    size_t head_len = 0, off = 0;
    FILE *h = open_memstream(&head, &head_len);
    if (!h) {
        fprintf(stderr, "s2hc: error: %s: out of memory\n", path);
        return -1;
    }
    char *yaml = config_to_yaml(&m->cfg);
    fputs("{\"__metadata__\":{\"format\":\"pt\",\"producer\":", h);
    json_string(h, "s2hc");
    fputs(",\"s2hc_version\":", h);
    json_string(h, s2hc_version());
    fprintf(h, ",\"step\":\"%lld\",\"method\":", (long long)step);
    json_string(h, m->cfg.method);
    if (token_kind) {
        fputs(",\"token_kind\":", h);
        json_string(h, token_kind);
    }
    fprintf(h, ",\"n_streams\":\"%d\",\"tied\":\"lm_head.weight=transformer.wte.weight\",\"config\":", m->n);
    json_string(h, yaml);
    fputc('}', h);
    free(yaml);
    const param_info *wte = NULL;
    for (int i = 0; i < m->n_tensors; i++) {
        const param_info *p = &m->pinfo[i];
        if (!strcmp(p->name, "transformer.wte.weight")) wte = p;
        json_tensor(h, p->name, bf16 ? "BF16" : "F32", p->rank, p->shape, p->numel * esize, &off);
    }
    if (wte) json_tensor(h, "lm_head.weight", bf16 ? "BF16" : "F32", wte->rank, wte->shape, wte->numel * esize, &off);
    fputc('}', h);
    while ((ftell(h) + 8) % 8) fputc(' ', h); /* the data starts 8-byte aligned */
    if (fclose(h) != 0 || !head) {
        fprintf(stderr, "s2hc: error: %s: out of memory\n", path);
        free(head);
        return -1;
    }
    /* the length and the header, then the data */
    unsigned char *file_head = malloc_check(8 + head_len);
    for (int k = 0; k < 8; k++) file_head[k] = (unsigned char)((uint64_t)head_len >> (8 * k));
    memcpy(file_head + 8, head, head_len);
    free(head);
    unsigned char *data = malloc_check(off ? off : 1);
    size_t at = 0;
    for (int i = 0; i < m->n_tensors; i++)
        at += put_values(data + at, m->params + m->pinfo[i].offset, m->pinfo[i].numel, bf16);
    if (wte) at += put_values(data + at, m->params + wte->offset, wte->numel, bf16);
    const int rc = write_file_atomic(path, file_head, 8 + head_len, data, off);
    free(file_head);
    free(data);
    return rc == 0 ? (int64_t)(8 + head_len + off) : -1;
}

/* ---- reading: train.init_from ------------------------------------------------------------ */

#define ST_MAX_HEADER (100u << 20) /* the format's own bound on the header */
#define ST_MAX_RANK 8

typedef struct {
    char name[PARAM_NAME + 64];
    char dtype[16];
    int rank;
    size_t shape[ST_MAX_RANK];
    uint64_t begin, end;
    int has_dtype, has_shape, has_offsets;
    int kind;       /* the dtype, once checked: ST_F32, ST_BF16, ST_F16, or 0 (not read) */
} st_entry;

enum { ST_F32 = 1, ST_BF16, ST_F16 };

static int st_kind(const char *dtype) {
    return !strcmp(dtype, "F32") ? ST_F32 : !strcmp(dtype, "BF16") ? ST_BF16 : !strcmp(dtype, "F16") ? ST_F16 : 0;
}

/* libyaml's error with where it happened: reader errors (bad UTF-8, control characters)
 * carry a byte offset, the scanner's and parser's a line and column */
static void st_yaml_error(const yaml_parser_t *p, const char *file, const char *tensor, char *err, size_t errlen) {
    char where[96];
    if (p->error == YAML_READER_ERROR)
        snprintf(where, sizeof where, "byte %zu of the JSON", p->problem_offset);
    else
        snprintf(where, sizeof where, "line %zu, column %zu of the JSON", p->problem_mark.line + 1,
                 p->problem_mark.column + 1);
    snprintf(err, errlen, "%s: header: %s%s%s%s (%s)", file, tensor ? "in tensor '" : "", tensor ? tensor : "",
             tensor ? "': " : "", p->problem ? p->problem : "does not parse", where);
}

#define ST_MAX_DEPTH 64 /* nesting in unknown keys: libyaml's scanner is quadratic in it */

/* a whole number from a scalar (shape entries, offsets) */
static int st_number(const char *s, uint64_t *v) {
    if (!*s || strspn(s, "0123456789") != strlen(s)) return -1; /* digits alone: no sign, no space */
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (*end || errno) return -1;
    *v = x;
    return 0;
}

/* JSON's UTF-16 surrogate escapes (\ud83d\ude00, an emoji as Python's json.dumps writes it)
 * are not YAML's: each becomes \u003f ('?', the same length) before libyaml reads the
 * header. Likewise the characters a JSON string may hold unescaped but YAML refuses raw
 * (DEL, the C1 controls but NEL, U+FFFE, U+FFFF; serde_json, which the safetensors library
 * writes headers with, leaves them so) become one '?' per byte. They can only occur inside
 * strings, and the loader reads no string of the metadata; a tensor name with one matches
 * no parameter either way. safetensors_metadata reads the header so too (a foreign file's
 * note with an emoji no longer hides its step), its strings then with '?' for those. */
static void st_surrogates(char *h, size_t len) {
    const unsigned char *u = (const unsigned char *)h;
    int in_str = 0;
    for (size_t i = 0; i < len; i++) {
        if (h[i] == '"') in_str = !in_str;
        if (!in_str) continue;
        if (u[i] == 0x7f) {
            h[i] = '?';
        } else if (u[i] == 0xc2 && i + 1 < len && u[i + 1] >= 0x80 && u[i + 1] <= 0x9f && u[i + 1] != 0x85) {
            h[i] = h[i + 1] = '?';
            i++;
        } else if (u[i] == 0xef && i + 2 < len && u[i + 1] == 0xbf && u[i + 2] >= 0xbe) {
            memset(h + i, '?', 3);
            i += 2;
        }
        if (h[i] != '\\' || i + 1 >= len) continue;
        if (h[i + 1] == 'u' && i + 5 < len && (h[i + 2] | 0x20) == 'd') {
            const char c = (char)(h[i + 3] | 0x20);
            if (c == '8' || c == '9' || (c >= 'a' && c <= 'f')) memcpy(h + i + 2, "003f", 4);
        }
        i++; /* past the escaped character: in "\\u...", a backslash then text */
    }
}

/* A list of whole numbers (the cursor on its SEQUENCE_START); -1 with err on anything else. */
static int st_numbers(yaml_parser_t *p, const char *file, const char *tensor, const char *key, uint64_t *out,
                      int cap, int *n, char *err, size_t errlen) {
    *n = 0;
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(p, &e)) {
            st_yaml_error(p, file, tensor, err, errlen);
            return -1;
        }
        const int t = e.type;
        if (t == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&e);
            return 0;
        }
        uint64_t v;
        /* JSON numbers: plain scalars ("64", a string, is not one) */
        const int bad = t != YAML_SCALAR_EVENT || e.data.scalar.style != YAML_PLAIN_SCALAR_STYLE || *n >= cap ||
                        st_number((const char *)e.data.scalar.value, &v) != 0;
        yaml_event_delete(&e);
        if (bad) {
            snprintf(err, errlen, "%s: header: tensor '%s': key '%s' must be a list of at most %d whole numbers", file,
                     tensor, key, cap);
            return -1;
        }
        out[(*n)++] = v;
    }
}

/* Skip one node whose start event e was just read (a mapping or sequence: to its end). */
static int st_skip(yaml_parser_t *p, const yaml_event_t *e, const char *file, const char *tensor, char *err,
                   size_t errlen) {
    if (e->type != YAML_MAPPING_START_EVENT && e->type != YAML_SEQUENCE_START_EVENT) return 0;
    int depth = 1;
    while (depth > 0) {
        yaml_event_t x;
        if (!yaml_parser_parse(p, &x)) {
            st_yaml_error(p, file, tensor, err, errlen);
            return -1;
        }
        if (x.type == YAML_MAPPING_START_EVENT || x.type == YAML_SEQUENCE_START_EVENT) depth++;
        if (depth > ST_MAX_DEPTH) {
            yaml_event_delete(&x);
            snprintf(err, errlen, "%s: header: %s%s%svalues nested more than %d deep", file,
                     tensor ? "tensor '" : "", tensor ? tensor : "", tensor ? "': " : "", ST_MAX_DEPTH);
            return -1;
        }
        if (x.type == YAML_MAPPING_END_EVENT || x.type == YAML_SEQUENCE_END_EVENT) depth--;
        yaml_event_delete(&x);
    }
    return 0;
}

/* 1 for "transformer.h.<digits>.attn.bias", nanoGPT's causal-mask buffer of each block. */
static int st_mask_name(const char *name, size_t len) {
    static const char pre[] = "transformer.h.", suf[] = ".attn.bias";
    const size_t lp = sizeof pre - 1, ls = sizeof suf - 1;
    if (len <= lp + ls || strncmp(name, pre, lp) || strcmp(name + len - ls, suf)) return 0;
    for (size_t i = lp; i < len - ls; i++)
        if (name[i] < '0' || name[i] > '9') return 0;
    return 1;
}

/* __metadata__'s entries, its MAPPING_START just read: JSON strings only, as the format
 * says (a number or a nested value there is refused, as PyTorch's reader refuses it). */
static int st_metadata(yaml_parser_t *p, const char *file, char *err, size_t errlen) {
    for (int i = 0;; i++) {
        yaml_event_t x;
        if (!yaml_parser_parse(p, &x)) {
            st_yaml_error(p, file, "__metadata__", err, errlen);
            return -1;
        }
        const int end = x.type == YAML_MAPPING_END_EVENT;
        const int str = x.type == YAML_SCALAR_EVENT && x.data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        yaml_event_delete(&x);
        if (end && i % 2 == 0) return 0;
        if (!str) {
            snprintf(err, errlen, "%s: header: __metadata__ must be a map of strings%s", file,
                     i % 2 ? " (a value is not a string)" : "");
            return -1;
        }
    }
}

static st_entry *st_grow(st_entry *v, int cap) {
    st_entry *w = realloc(v, (size_t)cap * sizeof *w);
    if (!w) {
        fprintf(stderr, "s2hc: error: out of memory reading a safetensors header\n");
        exit(1);
    }
    return w;
}

/* The header's tensors (malloc'd, *n of them); -1 with err naming the file and tensor. */
static int st_parse_header(const char *hdr, size_t len, const char *file, st_entry **out, int *n, char *err,
                           size_t errlen) {
    yaml_parser_t p;
    yaml_parser_initialize(&p);
    yaml_parser_set_input_string(&p, (const unsigned char *)hdr, len);
    int cap = 64, cnt = 0, depth = 0, rc = -1, docs = 0;
    st_entry *v = malloc_check((size_t)cap * sizeof *v);
    st_entry *cur = NULL;
    char key[64] = "";
    for (;;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            st_yaml_error(&p, file, depth >= 2 && cur ? cur->name : NULL, err, errlen);
            break;
        }
        const yaml_event_type_t t = e.type;
        const char *val = t == YAML_SCALAR_EVENT ? (const char *)e.data.scalar.value : NULL;
        int fail = 0, stop = 0;
        if (val && depth >= 1 && strlen(val) != e.data.scalar.length) {
            /* a "\u0000" in a name or key: the C string would end there, and
               "transformer.ln_f.weight\u0000x" be read as the parameter's name */
            snprintf(err, errlen, "%s: header: %s '%.40s...' holds a NUL character (\\u0000)", file,
                     depth == 1 ? "a tensor name" : "a key", val);
            fail = 2;
        } else if (t == YAML_STREAM_END_EVENT) {
            stop = 1;
            rc = depth == 0 ? 0 : -1;
        } else if (t == YAML_MAPPING_START_EVENT && depth == 0) {
            depth = 1;
        } else if (t == YAML_MAPPING_END_EVENT && depth == 1) {
            depth = 0;
        } else if (depth == 1 && val) { /* a tensor's name, or __metadata__ */
            if (!strcmp(val, "__metadata__")) {
                yaml_event_t m; /* yaml_parser_parse zeroes it first, so it can always be deleted */
                if (!yaml_parser_parse(&p, &m)) {
                    st_yaml_error(&p, file, "__metadata__", err, errlen);
                    fail = 2;
                } else if (m.type != YAML_MAPPING_START_EVENT) {
                    snprintf(err, errlen, "%s: header: __metadata__ must be a map of strings", file);
                    fail = 2;
                } else if (st_metadata(&p, file, err, errlen) != 0) {
                    fail = 2;
                }
                yaml_event_delete(&m);
            } else {
                if (cnt == cap) v = st_grow(v, cap *= 2);
                cur = &v[cnt++];
                memset(cur, 0, sizeof *cur);
                if (strlen(val) >= sizeof cur->name) {
                    snprintf(err, errlen, "%s: header: a tensor name of %zu bytes ('%.40s...')", file, strlen(val), val);
                    fail = 2;
                } else {
                    snprintf(cur->name, sizeof cur->name, "%s", val);
                    yaml_event_t m;
                    if (!yaml_parser_parse(&p, &m)) {
                        st_yaml_error(&p, file, cur->name, err, errlen);
                        fail = 2;
                    } else if (m.type != YAML_MAPPING_START_EVENT) {
                        snprintf(err, errlen, "%s: header: tensor '%s' is not a map of dtype, shape, data_offsets", file,
                                 cur->name);
                        fail = 2;
                    }
                    yaml_event_delete(&m);
                    if (!fail) depth = 2;
                }
            }
        } else if (depth == 2 && val) { /* a key of the current tensor */
            snprintf(key, sizeof key, "%s", val);
            yaml_event_t m;
            if (!yaml_parser_parse(&p, &m)) {
                st_yaml_error(&p, file, cur->name, err, errlen);
                fail = 2;
            } else if (!strcmp(key, "dtype") && m.type == YAML_SCALAR_EVENT &&
                       strlen((const char *)m.data.scalar.value) != m.data.scalar.length) {
                snprintf(err, errlen, "%s: header: tensor '%s': its dtype holds a NUL character (\\u0000)", file,
                         cur->name);
                fail = 2;
            } else if (!strcmp(key, "dtype") && m.type == YAML_SCALAR_EVENT) {
                snprintf(cur->dtype, sizeof cur->dtype, "%s", (const char *)m.data.scalar.value);
                cur->has_dtype = 1;
            } else if ((!strcmp(key, "shape") || !strcmp(key, "data_offsets")) && m.type == YAML_SEQUENCE_START_EVENT) {
                uint64_t nums[ST_MAX_RANK];
                int k;
                const int is_shape = !strcmp(key, "shape");
                if (st_numbers(&p, file, cur->name, key, nums, is_shape ? ST_MAX_RANK : 2, &k, err, errlen) != 0)
                    fail = 2;
                else if (is_shape) {
                    cur->rank = k;
                    for (int d = 0; d < k; d++) cur->shape[d] = (size_t)nums[d];
                    cur->has_shape = 1;
                } else if (k != 2 || nums[0] > nums[1]) {
                    snprintf(err, errlen, "%s: header: tensor '%s': data_offsets must be [begin, end], begin <= end",
                             file, cur->name);
                    fail = 2;
                } else {
                    cur->begin = nums[0];
                    cur->end = nums[1];
                    cur->has_offsets = 1;
                }
            } else if (!strcmp(key, "dtype") || !strcmp(key, "shape") || !strcmp(key, "data_offsets")) {
                snprintf(err, errlen, "%s: header: tensor '%s': key '%s' has the wrong kind of value", file, cur->name,
                         key);
                fail = 2;
            } else if (st_skip(&p, &m, file, cur->name, err, errlen) != 0) {
                fail = 2;
            }
            yaml_event_delete(&m);
        } else if (t == YAML_MAPPING_END_EVENT && depth == 2) {
            if (!cur->has_dtype || !cur->has_shape || !cur->has_offsets) {
                snprintf(err, errlen, "%s: header: tensor '%s' lacks %s", file, cur->name,
                         !cur->has_dtype ? "its dtype" : !cur->has_shape ? "its shape" : "its data_offsets");
                fail = 2;
            }
            depth = 1;
        } else if (t == YAML_DOCUMENT_START_EVENT && docs++ > 0) {
            snprintf(err, errlen, "%s: header: more than one document (not a JSON object)", file);
            fail = 2;
        } else if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
        } else {
            snprintf(err, errlen, "%s: header: not a JSON object of tensors", file);
            fail = 2;
        }
        yaml_event_delete(&e);
        if (fail || stop) break;
    }
    yaml_parser_delete(&p);
    if (rc != 0) {
        if (!err[0]) snprintf(err, errlen, "%s: header: not a JSON object of tensors", file);
        free(v);
        return -1;
    }
    *out = v;
    *n = cnt;
    return 0;
}

/* a shape as "a, b, c" (rank 0: "") */
static void st_shape_str(const size_t *shape, int rank, char *buf, size_t len) {
    buf[0] = 0;
    for (int d = 0; d < rank; d++) snprintf(buf + strlen(buf), len - strlen(buf), "%s%zu", d ? ", " : "", shape[d]);
}

/* half-precision bits as a float (subnormals, infinities and NaN included) */
static float st_half(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1f, man = h & 0x3ffu;
    uint32_t b;
    if (ex == 0x1f) b = sign | 0x7f800000u | (man << 13);
    else if (ex) b = sign | ((ex + 112u) << 23) | (man << 13);
    else if (!man) b = sign;
    else { /* subnormal: man 2^-24 */
        float f = (float)man * 5.9604644775390625e-8f;
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* value k of a tensor's little-endian bytes as a float */
static float st_value(const unsigned char *raw, size_t k, int kind) {
    float f;
    if (kind == ST_F32) {
        const unsigned char *q = raw + 4 * k;
        const uint32_t b = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        memcpy(&f, &b, sizeof f);
        return f;
    }
    const uint16_t h = (uint16_t)(raw[2 * k] | raw[2 * k + 1] << 8);
    if (kind == ST_F16) return st_half(h);
    const uint32_t b = (uint32_t)h << 16;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* the file's bytes [off, off + len) at dst */
static int st_read(int fd, void *dst, size_t len, uint64_t off) {
    unsigned char *d = dst;
    while (len) {
        ssize_t r = pread(fd, d, len, (off_t)off);
        if (r <= 0) return -1;
        d += r;
        len -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int st_by_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : x->end < y->end ? -1 : x->end > y->end;
}

/* The format's rule: the tensors' byte ranges tile the data exactly, from 0 to its end
 * (no gap, no overlap, nothing after), as the reference reader requires. */
static int st_ranges(st_entry *e, int n, uint64_t data_len, const char *file, char *err, size_t errlen) {
    const st_entry **o = malloc_check((size_t)(n ? n : 1) * sizeof *o);
    for (int i = 0; i < n; i++) o[i] = &e[i];
    qsort(o, (size_t)n, sizeof *o, st_by_begin);
    uint64_t at = 0;
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        if (o[i]->begin != at) {
            snprintf(err, errlen, "%s: tensor '%s': bytes [%llu, %llu) %s byte %llu, where the one before ends", file,
                     o[i]->name, (unsigned long long)o[i]->begin, (unsigned long long)o[i]->end,
                     o[i]->begin > at ? "leave a gap before" : "overlap the tensor before at", (unsigned long long)at);
            rc = -1;
        }
        at = o[i]->end;
    }
    if (rc == 0 && at != data_len) {
        snprintf(err, errlen, "%s: the tensors' data ends at byte %llu of %llu: %s", file, (unsigned long long)at,
                 (unsigned long long)data_len, at > data_len ? "the file is cut short (truncated?)" : "bytes left over");
        rc = -1;
    }
    free(o);
    return rc;
}

/* safetensors_load, and *first_kept (when not NULL) the index in m->pinfo of the first of
 * m's tensors the file lacks (-1: none), for a caller that needs every one of them. */
static int st_load(gpt_model *m, const char *path, int *loaded, int *kept, int *first_kept, char *err,
                   size_t errlen) {
    *loaded = *kept = 0;
    if (first_kept) *first_kept = -1;
    err[0] = 0;
    const int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO must not block here */
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: %s", path, fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0) close(fd);
        return -1;
    }
    unsigned char len8[8];
    uint64_t hlen = 0;
    if ((uint64_t)st.st_size < 8 || st_read(fd, len8, 8, 0) != 0) {
        snprintf(err, errlen, "%s: %lld bytes: not a safetensors file (no header length)", path, (long long)st.st_size);
        close(fd);
        return -1;
    }
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)len8[k] << (8 * k);
    if (hlen > ST_MAX_HEADER || hlen > (uint64_t)st.st_size - 8) {
        snprintf(err, errlen, "%s: a header of %llu bytes in a file of %lld: not a safetensors file (or truncated)",
                 path, (unsigned long long)hlen, (long long)st.st_size);
        close(fd);
        return -1;
    }
    char *hdr = malloc_check((size_t)hlen + 1);
    st_entry *e = NULL;
    int n = 0, rc = -1;
    if (st_read(fd, hdr, (size_t)hlen, 8) != 0) snprintf(err, errlen, "%s: cannot read its header", path);
    else {
        hdr[hlen] = 0;
        st_surrogates(hdr, (size_t)hlen);
        rc = st_parse_header(hdr, (size_t)hlen, path, &e, &n, err, errlen);
    }
    free(hdr);
    if (rc != 0) {
        close(fd);
        return -1;
    }
    const uint64_t data_off = 8 + hlen, data_len = (uint64_t)st.st_size - data_off;
    if (st_ranges(e, n, data_len, path, err, errlen) != 0) {
        free(e);
        close(fd);
        return -1;
    }
    /* every tensor checked before any is read: the model's values change only when all fit */
    const param_info *wte = model_find_param(m, "transformer.wte.weight");
    const param_info **dst = malloc_check((size_t)(n ? n : 1) * sizeof *dst);
    for (int i = 0; i < n && rc == 0; i++) {
        st_entry *t = &e[i];
        t->kind = st_kind(t->dtype);
        const size_t esz = t->kind == ST_F32 ? 4 : t->kind ? 2 : 0;
        const param_info *p = model_find_param(m, t->name);
        const int lm_head = !p && !strcmp(t->name, "lm_head.weight");
        if (lm_head) p = wte; /* nanoGPT's tied copy: checked against wte below */
        const size_t nlen = strlen(t->name);
        dst[i] = p;
        if (!p && t->rank == 4 && st_mask_name(t->name, nlen)) {
            continue; /* nanoGPT's causal mask, a buffer */
        } else if (!p) {
            snprintf(err, errlen, "%s: tensor '%s' is not a parameter of this model (method %s, n = %d%s)", path,
                     t->name, m->cfg.method, m->n, m->cfg.bias ? "" : ", model.bias false");
            rc = -1;
        } else if (!esz) {
            snprintf(err, errlen, "%s: tensor '%s' has dtype %s; F32, BF16 and F16 are read", path, t->name, t->dtype);
            rc = -1;
        } else {
            size_t numel = 1;
            int same = t->rank == p->rank;
            for (int d = 0; d < t->rank; d++) numel *= t->shape[d];
            for (int d = 0; same && d < p->rank; d++) same = t->shape[d] == p->shape[d];
            if (!same) {
                char a[96], b[96];
                st_shape_str(t->shape, t->rank, a, sizeof a);
                st_shape_str(p->shape, p->rank, b, sizeof b);
                snprintf(err, errlen, "%s: tensor '%s' has shape [%s], the model's %s is [%s]", path, t->name, a,
                         p->name, b);
                rc = -1;
            } else if (t->end > data_len || t->end - t->begin != (uint64_t)numel * esz) {
                snprintf(err, errlen, "%s: tensor '%s': bytes [%llu, %llu) of %llu: not %zu values of %s (truncated?)",
                         path, t->name, (unsigned long long)t->begin, (unsigned long long)t->end,
                         (unsigned long long)data_len, numel, t->dtype);
                rc = -1;
            }
        }
        for (int j = 0; j < i && rc == 0; j++)
            if (!strcmp(e[j].name, t->name)) {
                snprintf(err, errlen, "%s: tensor '%s' appears twice", path, t->name);
                rc = -1;
            }
    }
    /* read into a copy of the parameters; the model takes it only when every tensor read */
    real *vals = NULL, *head = NULL;
    char *seen = NULL;
    if (rc == 0) {
        vals = malloc_check(m->n_params * sizeof *vals);
        memcpy(vals, m->params, m->n_params * sizeof *vals);
        seen = calloc_check((size_t)m->n_tensors, 1);
    }
    for (int i = 0; i < n && rc == 0; i++) {
        const st_entry *t = &e[i];
        const param_info *p = dst[i];
        if (!p) continue;
        const int lm_head = p == wte && !strcmp(t->name, "lm_head.weight");
        const size_t esz = t->kind == ST_F32 ? 4 : 2;
        unsigned char *raw = malloc_check(p->numel * esz + 1);
        if (st_read(fd, raw, p->numel * esz, data_off + t->begin) != 0) {
            snprintf(err, errlen, "%s: cannot read tensor '%s'", path, t->name);
            rc = -1;
        } else {
            real *out = lm_head ? (head = malloc_check(p->numel * sizeof *head)) : vals + p->offset;
            for (size_t k = 0; k < p->numel; k++) {
                const float f = st_value(raw, k, t->kind);
                if (!isfinite(f)) {
                    snprintf(err, errlen, "%s: tensor '%s': value %zu is %g (only finite values start a run)", path,
                             t->name, k, (double)f);
                    rc = -1;
                    break;
                }
                out[k] = (real)f;
            }
            if (rc == 0 && !lm_head) seen[p - m->pinfo] = 1;
        }
        free(raw);
    }
    /* lm_head.weight is transformer.wte.weight in a model that ties them: the same values */
    if (rc == 0 && head && wte) {
        const real *w = vals + wte->offset;
        if (!seen[wte - m->pinfo]) {
            memcpy(vals + wte->offset, head, wte->numel * sizeof *head); /* the tied pair under its other name */
            seen[wte - m->pinfo] = 1;
        } else if (memcmp(w, head, wte->numel * sizeof *head) != 0) {
            snprintf(err, errlen, "%s: lm_head.weight differs from transformer.wte.weight: this model ties them", path);
            rc = -1;
        }
    }
    if (rc == 0) {
        for (int i = 0; i < m->n_tensors; i++) {
            *loaded += seen[i], *kept += !seen[i];
            if (first_kept && !seen[i] && *first_kept < 0) *first_kept = i;
        }
        if (*loaded == 0) {
            snprintf(err, errlen, "%s: none of its %d tensors is a parameter of this model", path, n);
            rc = -1;
        } else memcpy(m->params, vals, m->n_params * sizeof *vals);
    }
    free(vals);
    free(head);
    free(seen);
    free(dst);
    free(e);
    close(fd);
    return rc;
}

int safetensors_load(gpt_model *m, const char *path, int *loaded, int *kept, char *err, size_t errlen) {
    return st_load(m, path, loaded, kept, NULL, err, errlen);
}

/* ---- reading: the model of a file (`s2hc sample FILE`, `s2hc eval FILE`) ----------------- */

/* __metadata__'s "config" and "step" of an s2hc export, the parser just past its
 * MAPPING_START: *yaml malloc'd (NULL when absent), *step (-1 when absent or not a whole number of
 * steps: another program's "final"). */
static int st_metadata_config(yaml_parser_t *p, const char *file, char **yaml, long long *step, char *kind,
                              size_t kindlen, char *err, size_t errlen) {
    char key[32] = "";
    for (int i = 0;; i++) {
        yaml_event_t x;
        if (!yaml_parser_parse(p, &x)) {
            st_yaml_error(p, file, "__metadata__", err, errlen);
            return -1;
        }
        if (x.type == YAML_MAPPING_END_EVENT && i % 2 == 0) {
            yaml_event_delete(&x);
            return 0;
        }
        if (x.type != YAML_SCALAR_EVENT) {
            yaml_event_delete(&x);
            snprintf(err, errlen, "%s: header: __metadata__ must be a map of strings", file);
            return -1;
        }
        const char *v = (const char *)x.data.scalar.value;
        if (i % 2 == 0) snprintf(key, sizeof key, "%s", v);
        else if (!strcmp(key, "config") && strlen(v) != x.data.scalar.length) {
            /* a "\u0000" in it: the C string would end there, and the rest of the config be
               taken at its defaults */
            yaml_event_delete(&x);
            snprintf(err, errlen, "%s: header: __metadata__ config holds a NUL character (\\u0000)", file);
            return -1;
        } else if (!strcmp(key, "config") && !*yaml && !(*yaml = strdup(v))) die(1, "out of memory");
        else if (!strcmp(key, "step")) { /* a whole number of steps, else none (another program's "final") */
            char *end;
            errno = 0;
            const long long k = strtoll(v, &end, 10);
            *step = isdigit((unsigned char)v[0]) && !*end && !errno ? k : -1; /* not " 12", "+12" */
        }
        else if (!strcmp(key, "token_kind")) snprintf(kind, kindlen, "%s", v);
        yaml_event_delete(&x);
    }
}

int safetensors_metadata(const char *path, char **yaml, int64_t *step, char *token_kind, size_t kindlen, char *err,
                         size_t errlen) {
    err[0] = 0;
    *yaml = NULL;
    *step = -1;
    if (kindlen) token_kind[0] = 0;
    FILE *f = fopen(path, "rb");
    unsigned char len8[8];
    uint64_t hlen = 0;
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (fread(len8, 1, 8, f) != 8) {
        fclose(f);
        snprintf(err, errlen, "%s: not a safetensors file (no header length)", path);
        return -1;
    }
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)len8[k] << (8 * k);
    char *hdr = hlen <= ST_MAX_HEADER ? malloc_check((size_t)hlen + 1) : NULL;
    if (!hdr || fread(hdr, 1, (size_t)hlen, f) != (size_t)hlen) {
        fclose(f);
        free(hdr);
        snprintf(err, errlen, "%s: not a safetensors file (a header of %llu bytes it does not hold)", path,
                 (unsigned long long)hlen);
        return -1;
    }
    fclose(f);
    hdr[hlen] = 0;
    st_surrogates(hdr, (size_t)hlen);
    /* the top-level map: __metadata__'s config and step, every tensor skipped (a load
       reads and checks them) */
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) die(1, "out of memory (yaml_parser_initialize)");
    yaml_parser_set_input_string(&p, (const unsigned char *)hdr, (size_t)hlen);
    long long st = -1;
    int rc = 0, depth = 0, is_meta = 0;
    for (int done = 0; !done && rc == 0;) {
        yaml_event_t x;
        if (!yaml_parser_parse(&p, &x)) {
            st_yaml_error(&p, path, NULL, err, errlen);
            rc = -1;
            break;
        }
        if (x.type == YAML_STREAM_END_EVENT || (depth == 1 && x.type == YAML_MAPPING_END_EVENT)) done = 1;
        else if (depth == 0 && x.type == YAML_MAPPING_START_EVENT) depth = 1;
        else if (depth == 1 && x.type == YAML_SCALAR_EVENT) is_meta = !strcmp((const char *)x.data.scalar.value, "__metadata__");
        else if (depth == 1 && is_meta && x.type == YAML_MAPPING_START_EVENT)
            rc = st_metadata_config(&p, path, yaml, &st, token_kind, kindlen, err, errlen);
        else if (depth == 1) rc = st_skip(&p, &x, path, NULL, err, errlen);
        if (depth == 1 && x.type != YAML_SCALAR_EVENT) is_meta = 0;
        yaml_event_delete(&x);
    }
    yaml_parser_delete(&p);
    free(hdr);
    if (rc != 0) {
        free(*yaml);
        *yaml = NULL;
        return -1;
    }
    *step = st;
    return 0;
}

/* The config's model against the file's size, before anything is allocated: every
 * parameter must be in the file, at 2 bytes a value at least (BF16, F16), so a file whose
 * tensors hold fewer bytes is not that model's, and a config damaged (or given) into a large
 * model would otherwise have its parameters and gradients allocated and zeroed (terabytes
 * for model.n_layer 128, n_embd 16384) before the tensors' shapes refuse it. A model whose
 * parameters and gradients take less than ST_PRECHECK_BYTES is built and its tensors
 * compared (st_load names the first one the file lacks or holds in another shape). 0, or -1
 * with the message in err (none when the table cannot be built: model_build says why). */
#define ST_PRECHECK_BYTES ((double)(256u << 20))
static int st_model_fits(const char *path, const s2hc_config *cfg, int given, char *err, size_t errlen) {
    param_info *pi = NULL;
    int n = 0;
    size_t total = 0;
    char terr[256];
    if (model_param_table(cfg, &pi, &n, &total, NULL, terr, sizeof terr) != 0) return 0;
    free(pi);
    struct stat sb;
    unsigned char len8[8];
    uint64_t hlen = 0;
    FILE *f = fopen(path, "rb");
    const int sized = f && fstat(fileno(f), &sb) == 0 && fread(len8, 1, 8, f) == 8;
    if (f) fclose(f);
    if (!sized) return 0; /* the load says why */
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)len8[k] << (8 * k);
    const uint64_t size = (uint64_t)sb.st_size, data = hlen <= size - 8 ? size - 8 - hlen : 0;
    if ((double)total * 2 <= (double)data || (double)total * 2 * sizeof(real) < ST_PRECHECK_BYTES) return 0;
    snprintf(err, errlen, "%s: %s is a model of %zu parameters (model.n_layer %d, n_embd %d, vocab %d, block_size %d), "
             "at least %.0f bytes at 2 bytes a value, and the file holds %llu bytes of tensors: not that model's file%s",
             path, given ? "the config given" : "the config in its __metadata__", total, cfg->n_layer, cfg->n_embd,
             cfg->vocab, cfg->block_size, (double)total * 2, (unsigned long long)data,
             given ? "" : " (a damaged or edited config?)");
    return -1;
}

int safetensors_open_model(const char *path, const s2hc_config *given, s2hc_config *cfg, gpt_model *m,
                           int64_t *step, char *token_kind, size_t kindlen, char *err, size_t errlen) {
    char *yaml = NULL;
    int64_t st = -1;
    *step = -1;
    if (safetensors_metadata(path, &yaml, &st, token_kind, kindlen, err, errlen) != 0) return -1;
    int rc = 0;
    if (yaml && given) {
        /* two descriptions of one model: the file's own is the one its tensors were saved
           from, and a config that agreed with it would change nothing */
        snprintf(err, errlen, "%s: its __metadata__ holds its own s2hc config (a file of `s2hc export`), which says "
                 "its model; --config is for a file without one (drop --config and --set)", path);
        rc = -2;
    } else if (!yaml && !given) {
        snprintf(err, errlen, "%s: no s2hc config in its __metadata__ (a file s2hc export did not write: it does not "
                 "say which model its tensors are, which `s2hc sample` and `s2hc eval` read from the 'config' entry "
                 "export writes there; give the model with --config YAML, or start a run from it, train.init_from)",
                 path);
        rc = -1;
    } else if (given) {
        *cfg = *given;
    } else if (!yaml[strspn(yaml, " \t\r\n")]) {
        /* export stores the whole config: an empty one is damage (read, it would be every
           default, another model than the tensors' for no reason the file has) */
        snprintf(err, errlen, "%s: its __metadata__ config is empty (a damaged file?)", path);
        rc = -1;
    } else if (config_from_yaml_text(cfg, yaml, path) != 0) {
        snprintf(err, errlen, "%s: its __metadata__ config does not load (above)", path);
        rc = -1;
    }
    free(yaml);
    if (rc != 0) return rc;
#ifdef _OPENMP
    if (cfg->threads > 0) threads_set(cfg->threads); /* as run_open: the run's own count */
#endif
    if (st_model_fits(path, cfg, given != NULL, err, errlen) != 0) return -1;
    char berr[512];
    if (model_build(m, cfg, berr, sizeof berr) != 0) {
        snprintf(err, errlen, "%s: %s", path, berr);
        return -1;
    }
    int loaded = 0, kept = 0, first = -1;
    if (st_load(m, path, &loaded, &kept, &first, err, errlen) != 0) {
        model_free(m);
        return -1;
    }
    if (kept > 0) { /* a tensor the file lacks would be its random init */
        const param_info *p = &m->pinfo[first];
        char shape[96], more[64] = "";
        st_shape_str(p->shape, p->rank, shape, sizeof shape);
        if (kept > 1) snprintf(more, sizeof more, ", nor %d more of its tensors", kept - 1);
        snprintf(err, errlen, "%s: tensor '%s' [%s] of the model (method %s, n = %d%s) is not in the file%s", path,
                 p->name, shape, m->cfg.method, m->n, m->cfg.bias ? "" : ", model.bias false", more);
        model_free(m);
        return -1;
    }
    *step = st;
    return 0;
}

/* The kind of tokens the training corpus of cfg holds, as far as it is prepared here
 * (data.dir/data.train/train.bin, else val.bin): 1 a tokenizer's ids, 0 bytes; -1 when
 * neither shard opens. */
static int st_corpus_ids(const s2hc_config *cfg) {
    static const char *const splits[] = {"train", "val"};
    for (int i = 0; i < 2; i++) {
        char path[1200], err[256];
        data_shard s;
        data_shard_path(path, sizeof path, cfg->data_dir, cfg->train_corpus, splits[i]);
        if (!file_exists(path) || shard_open(&s, path, err, sizeof err) != 0) continue;
        const int ids = s.bytes_per_token != 1;
        shard_close(&s);
        return ids;
    }
    return -1;
}

int model_file_arg(const char *path, const char *who) {
    struct stat sb;
    const int found = stat(path, &sb) == 0;
    if (found && S_ISREG(sb.st_mode)) return 1;
    const size_t n = strlen(path), x = strlen(".safetensors");
    if (n > x && !strcmp(path + n - x, ".safetensors")) {
        /* an export not made yet, named as the file it is; a run folder whose name ends so
           (run.name: x.safetensors) is still a run folder when it holds a checkpoint */
        char *ck = malloc_check(n + sizeof "/ckpt.h5");
        snprintf(ck, n + sizeof "/ckpt.h5", "%s/ckpt.h5", path);
        const int run_dir = found && S_ISDIR(sb.st_mode) && file_exists(ck);
        free(ck);
        if (run_dir) return 0;
        fprintf(stderr, "s2hc: error: %s: %s: %s (`s2hc export RUN_DIR` writes RUN_DIR/model.safetensors)\n", who, path,
                found ? "not a file" : "no such file");
        return -1;
    }
    return 0;
}

int model_file_config(const char *who, const char *path, const char *const *sets, int nsets, s2hc_config *given) {
    if (nsets > 0 && !path) {
        fprintf(stderr, "s2hc: error: %s: --set changes the keys of --config YAML: give the config too (a file of "
                "`s2hc export` says its own model)\n", who);
        return 2;
    }
    return path ? config_load(given, path, sets, nsets) : 0;
}

int model_file_not_run(const char *dir, const char *who) {
    fprintf(stderr, "s2hc: error: %s: %s is a run directory, whose checkpoint says its own model: --config (and "
            "--set) are for a safetensors file without s2hc metadata\n", who, dir);
    return 2;
}

/* 1 when the parameter tables a and b have the same tensors: names, ranks and shapes. */
static int st_same_tables(const param_info *a, int na, const param_info *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++) {
        if (strcmp(a[i].name, b[i].name) || a[i].rank != b[i].rank) return 0;
        for (int r = 0; r < a[i].rank; r++)
            if (a[i].shape[r] != b[i].shape[r]) return 0;
    }
    return 1;
}

/* printf into buf at *at (of len bytes), *at moved past it; text past the end is cut. */
static void st_append(char *buf, size_t len, size_t *at, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void st_append(char *buf, size_t len, size_t *at, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    if (w > 0) *at = *at + (size_t)w < len ? *at + (size_t)w : len - 1;
}

/* The config keys of c's model that its tensors cannot confirm, as KEY=VALUE, comma-separated
 * in buf: model.n_head (c_attn is [3C, C] for any count of heads) and model.gelu always; the
 * method's own keys that change what it computes (mhc: residual.sinkhorn_iters and
 * sinkhorn_order; s2hc: residual.core and init; s2hc_rot, orthogonal: residual.core; the
 * keys that only init a model, residual.lite_offset and proj_init, change nothing read
 * from a file); residual.method too where another method has the same tensors, named and
 * shaped alike, at c's shape and streams (kromhc at a prime n is mhc_lite's). */
static void st_unconfirmed_keys(const s2hc_config *c, char *buf, size_t len) {
    const char *m = c->method;
    size_t at = 0;
    buf[0] = '\0';
    st_append(buf, len, &at, "model.n_head=%d, model.gelu=%s", c->n_head, c->gelu);
    if (!strcmp(m, "mhc"))
        st_append(buf, len, &at, ", residual.sinkhorn_iters=%d, residual.sinkhorn_order=%s", c->sinkhorn_iters,
                  c->sinkhorn_order);
    else if (!strcmp(m, "s2hc"))
        st_append(buf, len, &at, ", residual.core=%s, residual.init=%s", c->core, c->init);
    else if (!strcmp(m, "s2hc_rot") || !strcmp(m, "orthogonal"))
        st_append(buf, len, &at, ", residual.core=%s", c->core);
    param_info *mine;
    int nm;
    char err[256], twins[256] = "";
    size_t tn = 0;
    if (model_param_table(c, &mine, &nm, NULL, NULL, err, sizeof err) != 0) return;
    for (int k = -1; k < 0 || hc_variants[k]; k++) { /* rc, then every other method */
        s2hc_config o = *c;
        snprintf(o.method, sizeof o.method, "%s", k < 0 ? "rc" : hc_variants[k]->name);
        param_info *t;
        int nt;
        if (!strcmp(o.method, m) || model_param_table(&o, &t, &nt, NULL, NULL, err, sizeof err) != 0) continue;
        if (st_same_tables(mine, nm, t, nt)) st_append(twins, sizeof twins, &tn, "%s%s", tn ? ", " : "", o.method);
        free(t);
    }
    free(mine);
    if (tn) st_append(buf, len, &at, ", residual.method=%s (%s has the same tensors)", m, twins);
}

int model_file_open(const char *path, const char *who, const s2hc_config *given, s2hc_config *cfg, gpt_model *m,
                    int64_t *step, int *of_ids) {
    char err[1400], kind[16];
    const int rc = safetensors_open_model(path, given, cfg, m, step, kind, sizeof kind, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "s2hc: error: %s: %s\n", who, err);
        return rc == -2 ? 2 : 1;
    }
    if (kind[0] && strcmp(kind, "bytes") && strcmp(kind, "ids")) { /* export writes one of the two */
        fprintf(stderr, "s2hc: error: %s: %s: __metadata__ token_kind is '%s', neither bytes nor ids (a damaged or "
                "edited file?)\n", who, path, kind);
        model_free(m);
        return 1;
    }
    if (given) { /* opened: a file without s2hc metadata, --config's model */
        char keys[512];
        st_unconfirmed_keys(cfg, keys, sizeof keys);
        fprintf(stderr, "s2hc: note: %s: %s has no s2hc metadata; --config's keys that shape no tensor are taken at its "
                "word, unchecked against the file: %s\n", who, path, keys);
    }
    /* the metadata's token_kind; else (an export of an older build, another program's
       file) the given config's training corpus where it is prepared, else the vocabulary */
    *of_ids = m->V > 256;
    if (kind[0]) *of_ids = *of_ids || !strcmp(kind, "ids");
    else if (given) *of_ids = *of_ids || st_corpus_ids(cfg) == 1;
    return 0;
}
