/* export.c: `s2hc export`, a run's weights as one safetensors file.
 *
 * The safetensors layout: the header's length N as 8 little-endian bytes, N bytes of
 * JSON (per tensor its dtype, shape and [begin, end) byte offsets into the data that
 * follows; "__metadata__", a map of strings), then every tensor's values, little-endian
 * and row-major, back to back. The header is padded with spaces to a multiple of 8 so
 * the data starts aligned.
 *
 * Names and shapes are the parameter table's: nanoGPT's state_dict keys for the GPT
 * (transformer.wte.weight, transformer.h.0.attn.c_attn.weight as (3 C, C), ...), plus
 * lm_head.weight, a copy of the tied embedding that nanoGPT's state_dict also holds.
 * The hyper-connection tensors keep their s2hc names and layouts
 * (transformer.h.<l>.attn_hc.proj.weight, ...; docs/runfile.md). The run's config, step,
 * method and the build's version go into the metadata, so the file alone says how to
 * rebuild the model.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
            "  s2hc export runs/s2hc-n4-s1337 -o s2hc.safetensors\n");
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
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            export_usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--dtype") && i + 1 < argc) dtype = argv[++i];
        else if (argv[i][0] == '-') {
            fprintf(stderr, "s2hc: error: export: unknown option '%s'%s\n", argv[i],
                    i + 1 < argc ? "" : " (or its value is missing)");
            return 2;
        } else if (dir) {
            fprintf(stderr, "s2hc: error: export: one run directory at a time ('%s', then '%s')\n", dir, argv[i]);
            return 2;
        } else dir = argv[i];
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
    const size_t esize = bf16 ? 2 : sizeof(float);

    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t step = 0;
    if (run_open(dir, &cfg, &m, &log, &step) != 0) return 1;
    h5log_free(&log);
    char path[1200];
    if (out) snprintf(path, sizeof path, "%s", out);
    else snprintf(path, sizeof path, "%s/model.safetensors", dir);

    /* the header: every table tensor in table order, then lm_head.weight */
    char *head = NULL;
    size_t head_len = 0, off = 0;
    FILE *h = open_memstream(&head, &head_len);
    if (!h) {
        fprintf(stderr, "s2hc: error: export: out of memory\n");
        model_free(&m);
        return 1;
    }
    char *yaml = config_to_yaml(&cfg);
    fputs("{\"__metadata__\":{\"format\":\"pt\",\"producer\":", h);
    json_string(h, "s2hc");
    fputs(",\"s2hc_version\":", h);
    json_string(h, s2hc_version());
    fprintf(h, ",\"step\":\"%lld\",\"method\":", (long long)step);
    json_string(h, cfg.method);
    fprintf(h, ",\"n_streams\":\"%d\",\"tied\":\"lm_head.weight=transformer.wte.weight\",\"config\":", m.n);
    json_string(h, yaml);
    fputc('}', h);
    free(yaml);
    const param_info *wte = NULL;
    for (int i = 0; i < m.n_tensors; i++) {
        const param_info *p = &m.pinfo[i];
        if (!strcmp(p->name, "transformer.wte.weight")) wte = p;
        json_tensor(h, p->name, bf16 ? "BF16" : "F32", p->rank, p->shape, p->numel * esize, &off);
    }
    if (wte) json_tensor(h, "lm_head.weight", bf16 ? "BF16" : "F32", wte->rank, wte->shape, wte->numel * esize, &off);
    fputc('}', h);
    while ((ftell(h) + 8) % 8) fputc(' ', h); /* the data starts 8-byte aligned */
    if (fclose(h) != 0 || !head) {
        fprintf(stderr, "s2hc: error: export: out of memory\n");
        free(head);
        model_free(&m);
        return 1;
    }

    /* the length and the header, then the data */
    unsigned char *file_head = malloc_check(8 + head_len);
    for (int k = 0; k < 8; k++) file_head[k] = (unsigned char)((uint64_t)head_len >> (8 * k));
    memcpy(file_head + 8, head, head_len);
    free(head);
    unsigned char *data = malloc_check(off ? off : 1);
    size_t at = 0;
    for (int i = 0; i < m.n_tensors; i++)
        at += put_values(data + at, m.params + m.pinfo[i].offset, m.pinfo[i].numel, bf16);
    if (wte) at += put_values(data + at, m.params + wte->offset, wte->numel, bf16);
    int rc = 0;
    if (at != off) {
        fprintf(stderr, "s2hc: error: export: %zu bytes of data against %zu in the header\n", at, off);
        rc = 1;
    } else if (write_file_atomic(path, file_head, 8 + head_len, data, off) != 0) {
        rc = 1;
    } else {
        printf("wrote %s: %d tensors (%zu values) and lm_head.weight, %s, step %lld, %.1f MB\n", path, m.n_tensors,
               m.n_params, dtype, (long long)step, (double)(8 + head_len + off) / 1e6);
    }
    free(file_head);
    free(data);
    model_free(&m);
    return rc;
}
