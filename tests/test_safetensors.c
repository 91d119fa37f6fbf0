/* test_safetensors.c: safetensors_write and safetensors_load (harness/safetensors.c):
 * a model's tensors through a file and back, bit for bit in f32 and as the nearest-even
 * bf16 in bf16; a plain residual model's weights under hyper-connections (the frame keeps
 * its init); F16 and nanoGPT's extra keys read; and every malformed file refused with the
 * file and the tensor named, the model untouched; the model of a file without metadata,
 * its config given (`s2hc sample FILE --config`). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "../harness/run.h"
#include "../harness/util.h"
#include "t.h"

static char tmp_root[1024];

static const char *tmp_path(const char *name) {
    static char buf[1200];
    if (!tmp_root[0]) t_setup_tmp("test_safetensors", tmp_root, sizeof tmp_root);
    snprintf(buf, sizeof buf, "%s/%s", tmp_root, name);
    return buf;
}

static void build_bias(gpt_model *m, const char *method, int n, int C, uint64_t seed, int bias) {
    s2hc_config c;
    config_defaults(&c);
    c.bias = bias;
    c.n_layer = 2;
    c.n_head = 2;
    c.n_embd = C;
    c.block_size = 16;
    snprintf(c.method, sizeof c.method, "%s", method);
    c.n_streams = n;
    snprintf(c.proj_init, sizeof c.proj_init, "normal"); /* W != 0: a lost tensor shows */
    char err[256];
    CHECK(model_build(m, &c, err, sizeof err) == 0, "%s", err);
    model_init(m, seed);
}

static void build(gpt_model *m, const char *method, int n, int C, uint64_t seed) {
    build_bias(m, method, n, C, seed, 1);
}

/* safetensors_write, checked: the size it returns is the file's, and the data starts
 * 8-byte aligned ((8 + header length) % 8 == 0, as the format asks). */
static int64_t written(const gpt_model *m, long long step, const char *path, int bf16) {
    const int64_t size = safetensors_write(m, step, path, bf16, NULL);
    CHECK(size > 0, "write %s", path);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size == size, "%s: %lld bytes, write said %lld", path,
          (long long)st.st_size, (long long)size);
    unsigned char l8[8] = {0};
    FILE *f = fopen(path, "rb");
    const size_t got = f ? fread(l8, 1, 8, f) : 0;
    if (f) fclose(f);
    uint64_t hlen = 0;
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)l8[k] << (8 * k);
    CHECK(got == 8 && (8 + hlen) % 8 == 0, "%s: header of %llu bytes: the data starts at byte %llu, not 8-aligned",
          path, (unsigned long long)hlen, (unsigned long long)(8 + hlen));
    return size;
}

/* a file of raw bytes: the 8-byte length, the header as given, then data */
static void write_raw(const char *path, const char *header, const void *data, size_t len) {
    FILE *f = fopen_check(path, "wb");
    const uint64_t n = strlen(header);
    unsigned char l8[8];
    for (int k = 0; k < 8; k++) l8[k] = (unsigned char)(n >> (8 * k));
    fwrite(l8, 1, 8, f);
    fwrite(header, 1, n, f);
    if (len) fwrite(data, 1, len, f);
    fclose(f);
}

static void test_round_trip(void) {
    gpt_model a, b;
    build(&a, "s2hc", 4, 32, 1);
    build(&b, "s2hc", 4, 32, 2);
    const char *p = tmp_path("a.safetensors");
    written(&a, 7, p, 0);
    int loaded, kept;
    char err[512];
    CHECK(safetensors_load(&b, p, &loaded, &kept, err, sizeof err) == 0, "%s", err);
    CHECK(loaded == a.n_tensors && kept == 0, "loaded %d, kept %d of %d", loaded, kept, a.n_tensors);
    CHECK(memcmp(a.params, b.params, a.n_params * sizeof(real)) == 0, "f32: not bit for bit");
    /* bf16: each value the nearest-even bf16 of a's */
    const char *q = tmp_path("a16.safetensors");
    written(&a, 7, q, 1);
    CHECK(safetensors_load(&b, q, &loaded, &kept, err, sizeof err) == 0, "%s", err);
    size_t bad = 0, moved = 0;
    for (size_t i = 0; i < a.n_params; i++) {
        uint32_t u;
        float x = a.params[i];
        memcpy(&u, &x, sizeof u);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        float r;
        memcpy(&r, &u, sizeof r);
        bad += b.params[i] != r;
        moved += b.params[i] != a.params[i];
    }
    CHECK(bad == 0 && moved > a.n_params / 2, "bf16: %zu values not the nearest even, %zu rounded", bad, moved);
    /* a NaN stays a NaN in bf16 (a payload in its low bits alone would round to infinity) */
    const param_info *lnf = model_find_param(&a, "transformer.ln_f.weight");
    const uint32_t nan_bits = 0x7f800001u;
    memcpy(&a.params[lnf->offset], &nan_bits, sizeof nan_bits);
    written(&a, 7, q, 1);
    CHECK(safetensors_load(&b, q, &loaded, &kept, err, sizeof err) != 0 &&
              strstr(err, "'transformer.ln_f.weight': value 0 is nan"),
          "bf16 of a NaN: %s", err);
    model_free(&a);
    model_free(&b);
}

/* Every export's data starts 8-byte aligned, whatever the header's length: widths,
 * methods, stream counts, biases or none, f32 and bf16, steps of 1 to 10 digits; each
 * file reads back into a model of its kind. */
static void test_alignment(void) {
    static const struct { const char *method; int n; } kinds[] = {
        {"rc", 1}, {"s2hc", 4}, {"mhc", 3}, {"hc", 2}, {"mhc_lite", 2}, {"s2hc_rot", 5}};
    const int widths[] = {8, 16, 24, 40};
    const long long steps[] = {0, 7, 123, 45678, 1234567890};
    int files = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
            for (int bias = 0; bias <= 1; bias++) {
                gpt_model m, back;
                build_bias(&m, kinds[k].method, kinds[k].n, widths[w], 9 + w, bias);
                build_bias(&back, kinds[k].method, kinds[k].n, widths[w], 10 + w, bias);
                for (int bf16 = 0; bf16 <= 1; bf16++) {
                    char name[96];
                    const long long step = steps[(k + w + (size_t)bias + (size_t)bf16) % 5];
                    snprintf(name, sizeof name, "al_%s_%d_%d_%d.safetensors", kinds[k].method, widths[w], bias, bf16);
                    const char *p = tmp_path(name);
                    written(&m, step, p, bf16);
                    files++;
                    int loaded, kept;
                    char err[512];
                    CHECK(safetensors_load(&back, p, &loaded, &kept, err, sizeof err) == 0 && loaded == m.n_tensors,
                          "%s: %s", name, err);
                }
                model_free(&m);
                model_free(&back);
            }
    CHECK(files == 96, "%d files", files);
}

/* rc's weights under s2hc: the base tensors read, the frame's keep their init */
static void test_rc_under_hyper_connections(void) {
    gpt_model rc, hc, ref;
    build(&rc, "rc", 1, 32, 3);
    build(&hc, "s2hc", 4, 32, 4);
    build(&ref, "s2hc", 4, 32, 4);
    const char *p = tmp_path("rc.safetensors");
    written(&rc, 0, p, 0);
    int loaded, kept;
    char err[512];
    CHECK(safetensors_load(&hc, p, &loaded, &kept, err, sizeof err) == 0, "%s", err);
    CHECK(loaded == rc.n_tensors && loaded + kept == hc.n_tensors, "loaded %d kept %d", loaded, kept);
    for (int i = 0; i < hc.n_tensors; i++) {
        const param_info *t = &hc.pinfo[i], *s = model_find_param(&rc, t->name);
        const real *now = hc.params + t->offset;
        if (s)
            CHECK(!memcmp(now, rc.params + s->offset, t->numel * sizeof(real)), "%s: not rc's", t->name);
        else
            CHECK(t->aux && !memcmp(now, ref.params + t->offset, t->numel * sizeof(real)), "%s: not its init",
                  t->name);
    }
    /* the other way: the frame's tensors are not rc's parameters; rc unchanged */
    const char *q = tmp_path("hc.safetensors");
    written(&ref, 0, q, 0);
    real *before = malloc_check(rc.n_params * sizeof(real));
    memcpy(before, rc.params, rc.n_params * sizeof(real));
    CHECK(safetensors_load(&rc, q, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "attn_hc") &&
              strstr(err, "not a parameter of this model") && strstr(err, q),
          "an s2hc file into rc: %s", err);
    CHECK(!memcmp(before, rc.params, rc.n_params * sizeof(real)), "a refused file changed the model");
    free(before);
    model_free(&rc);
    model_free(&hc);
    model_free(&ref);
}

/* F16 values, nanoGPT's lm_head copy and causal-mask buffer, metadata and unknown keys */
static void test_foreign_keys(void) {
    gpt_model m;
    build(&m, "rc", 1, 8, 5);
    const param_info *w = model_find_param(&m, "transformer.ln_f.weight");
    /* ln_f.weight (8) in F16: 1, -2, 0.5, 65504, 2^-24 (subnormal), -0, 3, 1.5 */
    const uint16_t h[8] = {0x3c00, 0xc000, 0x3800, 0x7bff, 0x0001, 0x8000, 0x4200, 0x3e00};
    const float want[8] = {1, -2, 0.5f, 65504, 5.9604644775390625e-8f, -0.0f, 3, 1.5f};
    unsigned char data[16 + 4];
    memcpy(data, h, sizeof h); /* little-endian host */
    const char *p = tmp_path("f16.safetensors");
    write_raw(p,
              "{\"__metadata__\":{\"format\":\"pt\",\"note\":\"a \\\"quoted\\\" \\u00e9 \\ud83d\\ude00 \\\\ud83d \\udfff \\uDBFF\"},"
              "\"transformer.ln_f.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16],\"extra\":[1,{}]},"
              "\"transformer.h.0.attn.bias\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[16,20]}}",
              data, sizeof data);
    int loaded, kept;
    char err[512];
    CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) == 0, "%s", err);
    CHECK(loaded == 1 && kept == m.n_tensors - 1, "loaded %d kept %d", loaded, kept);
    /* the metadata an s2hc export writes: its step (decimal; a run started from the file
       records it) and token kind; a file without them says none, one with JSON's surrogate
       escapes too (its metadata was refused, a step beside them lost) */
    char *yaml = NULL, kind[16];
    int64_t step = 0;
    CHECK(safetensors_metadata(p, &yaml, &step, kind, sizeof kind, err, sizeof err) == 0 && step == -1 && !yaml,
          "a header with JSON's surrogate escapes (which the load reads) reads for its metadata too: %s", err);
    const char *np = tmp_path("nostep.safetensors");
    write_raw(np,
              "{\"__metadata__\":{\"format\":\"pt\"},"
              "\"transformer.ln_f.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
              data, 16);
    CHECK(safetensors_metadata(np, &yaml, &step, kind, sizeof kind, err, sizeof err) == 0 && step == -1 && !yaml &&
              !kind[0], "no step, config or kind: %lld %s '%s'", (long long)step, err, kind);
    const char *sp = tmp_path("step.safetensors");
    write_raw(sp,
              "{\"__metadata__\":{\"step\":\"1234\",\"token_kind\":\"ids\",\"config\":\"model: {}\"},"
              "\"transformer.ln_f.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
              data, 16);
    CHECK(safetensors_metadata(sp, &yaml, &step, kind, sizeof kind, err, sizeof err) == 0 && step == 1234 && yaml &&
              !strcmp(yaml, "model: {}") && !strcmp(kind, "ids"),
          "step %lld, config '%s', kind '%s': %s", (long long)step, yaml ? yaml : "(none)", kind, err);
    free(yaml);
    yaml = NULL;
    /* another program's step that is no whole number of steps: none (it had read as step 0,
       and a run from the file was labelled +init@0) */
    static const char *const odd[] = {"final", "12k", "-3", "", "99999999999999999999", " 12", "+12"};
    for (int i = 0; i < 7; i++) {
        char hdr[300];
        snprintf(hdr, sizeof hdr,
                 "{\"__metadata__\":{\"step\":\"%s\"},"
                 "\"transformer.ln_f.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
                 odd[i]);
        const char *op = tmp_path("oddstep.safetensors");
        write_raw(op, hdr, data, 16);
        step = 0;
        CHECK(safetensors_metadata(op, &yaml, &step, kind, sizeof kind, err, sizeof err) == 0 && step == -1,
              "step \"%s\": %lld, want none (-1): %s", odd[i], (long long)step, err);
        free(yaml);
        yaml = NULL;
    }
    for (int k = 0; k < 8; k++)
        CHECK(m.params[w->offset + k] == want[k] && signbit(m.params[w->offset + k]) == signbit(want[k]),
              "F16 value %d: %g, want %g", k, (double)m.params[w->offset + k], (double)want[k]);
    /* characters a JSON string may hold raw but YAML may not (DEL, C1 controls, U+FFFE,
       U+FFFF), in the metadata and in a name (which then matches no parameter) */
    const char *r = tmp_path("raw.safetensors");
    write_raw(r,
              "{\"__metadata__\":{\"note\":\"del \x7f c1 \xc2\x80\xc2\x9f nel \xc2\x85 \xef\xbf\xbe\xef\xbf\xbf \\\\\"},"
              "\"transformer.ln_f.weight\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}",
              data, 16);
    CHECK(safetensors_load(&m, r, &loaded, &kept, err, sizeof err) == 0 && loaded == 1,
          "raw DEL, C1 and U+FFFE in the metadata: %s", err);
    /* lm_head.weight alone stands for the tied embedding */
    const param_info *e = model_find_param(&m, "transformer.wte.weight");
    float *emb = malloc_check(e->numel * sizeof(float));
    for (size_t k = 0; k < e->numel; k++) emb[k] = (float)k * 0.25f;
    char hdr[256];
    snprintf(hdr, sizeof hdr, "{\"lm_head.weight\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":[0,%zu]}}",
             e->shape[0], e->shape[1], e->numel * 4);
    const char *q = tmp_path("head.safetensors");
    write_raw(q, hdr, emb, e->numel * 4);
    CHECK(safetensors_load(&m, q, &loaded, &kept, err, sizeof err) == 0 && loaded == 1, "%s", err);
    CHECK(!memcmp(m.params + e->offset, emb, e->numel * sizeof(float)), "lm_head.weight did not set the embedding");
    free(emb);
    model_free(&m);
}

/* Each malformed file: refused, the message naming the file (and what), the model kept. */
static void refused(gpt_model *m, const char *name, const char *header, size_t data_len, const char *want) {
    const char *p = tmp_path(name);
    unsigned char *data = calloc_check(data_len + 1, 1);
    write_raw(p, header, data, data_len);
    free(data);
    real *before = malloc_check(m->n_params * sizeof(real));
    memcpy(before, m->params, m->n_params * sizeof(real));
    int loaded, kept;
    char err[512] = "";
    const int rc = safetensors_load(m, p, &loaded, &kept, err, sizeof err);
    CHECK(rc != 0 && strstr(err, p) && strstr(err, want), "%s: rc %d, '%s' (want '%s')", name, rc, err, want);
    CHECK(!memcmp(before, m->params, m->n_params * sizeof(real)), "%s: the model changed", name);
    free(before);
}

static void test_bad_files(void) {
    gpt_model m;
    build(&m, "rc", 1, 8, 6);
    /* a name with characters YAML refuses raw is read, and matches no parameter */
    refused(&m, "rawname.safetensors",
            "{\"transformer.ln_f\x7f\xc2\x9f\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[0,16]}}", 16,
            "tensor 'transformer.ln_f\?\?\?' is not a parameter of this model");
    char err[512];
    int loaded, kept;
    CHECK(safetensors_load(&m, tmp_path("absent.safetensors"), &loaded, &kept, err, sizeof err) != 0 &&
              strstr(err, "No such file"),
          "absent: %s", err);
    char h[512];
    refused(&m, "json.safetensors", "{\"a\": [1, 2", 0, "header");
    refused(&m, "array.safetensors", "[1, 2, 3]", 0, "not a JSON object of tensors");
    /* ln_f.weight (8 floats) described wrongly, one way each */
    static const struct { const char *name, *entry, *want; size_t data; } bad[] = {
        {"nooff", "\"dtype\":\"F32\",\"shape\":[8]", "lacks its data_offsets", 32},
        {"noshape", "\"dtype\":\"F32\",\"data_offsets\":[0,32]", "lacks its shape", 32},
        {"nodtype", "\"shape\":[8],\"data_offsets\":[0,32]", "lacks its dtype", 32},
        {"oneoff", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[32]", "must be [begin, end]", 32},
        {"rank9", "\"dtype\":\"F32\",\"shape\":[8,1,1,1,1,1,1,1,1],\"data_offsets\":[0,32]", "at most 8 whole numbers",
         32},
        {"huge", "\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,32]", "whole numbers", 32},
        {"shape", "\"dtype\":\"F32\",\"shape\":[9],\"data_offsets\":[0,36]",
         "has shape [9], the model's transformer.ln_f.weight is [8]", 36},
        {"short", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]", "truncated", 20},
        {"count", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,28]", "not 8 values of F32", 28},
        {"gap", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[4,36]", "leave a gap before byte 0", 36},
        {"left", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]", "ends at byte 32 of 40: bytes left over", 40},
        {"quoted", "\"dtype\":\"F32\",\"shape\":[\" 8\"],\"data_offsets\":[0,32]", "whole numbers", 32},
        {"string", "\"dtype\":\"F32\",\"shape\":[\"8\"],\"data_offsets\":[0,32]", "whole numbers", 32},
        {"stroff", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[\"0\",\"32\"]", "whole numbers", 32},
        {"deep", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32],\"x\":"
                 "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
                 "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
         "nested more than 64 deep", 32},
        {"dtype", "\"dtype\":\"I64\",\"shape\":[8],\"data_offsets\":[0,64]", "dtype I64", 64},
        {"neg", "\"dtype\":\"F32\",\"shape\":[-8],\"data_offsets\":[0,32]", "whole numbers", 32},
        {"order", "\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[32,0]", "begin <= end", 32},
        {"kind", "\"dtype\":[\"F32\"],\"shape\":[8],\"data_offsets\":[0,32]", "wrong kind of value", 32},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[64];
        snprintf(h, sizeof h, "{\"transformer.ln_f.weight\":{%s}}", bad[i].entry);
        snprintf(name, sizeof name, "%s.safetensors", bad[i].name);
        refused(&m, name, h, bad[i].data, bad[i].want);
    }
    refused(&m, "other.safetensors", "{\"model.layers.0.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
            4, "'model.layers.0.weight' is not a parameter of this model");
    /* nanoGPT's causal mask is skipped as a rank-4 buffer only: a rank-1 .attn.bias is
     * nobody's parameter, and ln_f.weight [8, 1] is not the model's [8] */
    refused(&m, "attnbias1.safetensors",
            "{\"transformer.h.0.attn.bias\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", 32,
            "tensor 'transformer.h.0.attn.bias' is not a parameter of this model");
    refused(&m, "attnbias3.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
            "\"transformer.h.1.attn.bias\":{\"dtype\":\"F32\",\"shape\":[1,1,1],\"data_offsets\":[32,36]}}",
            36, "tensor 'transformer.h.1.attn.bias' is not a parameter of this model");
    refused(&m, "rank2.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8,1],\"data_offsets\":[0,32]}}", 32,
            "tensor 'transformer.ln_f.weight' has shape [8, 1], the model's transformer.ln_f.weight is [8]");
    refused(&m, "rank2b.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[1,8],\"data_offsets\":[0,32]}}", 32,
            "has shape [1, 8], the model's transformer.ln_f.weight is [8]");
    /* __metadata__ holds strings only; a mask buffer's name is transformer.h.<digits>.attn.bias */
    refused(&m, "metanum.safetensors", "{\"__metadata__\":{\"step\":20}}", 0, "must be a map of strings");
    refused(&m, "metamap.safetensors", "{\"__metadata__\":{\"a\":{\"b\":\"c\"}}}", 0, "must be a map of strings");
    refused(&m, "garbagebias.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
            "\"garbage.attn.bias\":{\"dtype\":\"XYZ\",\"shape\":[1,1,1,1],\"data_offsets\":[32,36]}}",
            36, "tensor 'garbage.attn.bias' is not a parameter of this model");
    refused(&m, "empty.safetensors", "{}", 0, "none of its 0 tensors");
    /* JSON's \u0000 inside a name or a dtype: not the parameter's name cut short there, nor
     * F32 (the reference reader compares the whole strings) */
    refused(&m, "nulname.safetensors",
            "{\"transformer.ln_f.weight\\u0000x\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", 32,
            "a tensor name 'transformer.ln_f.weight...' holds a NUL character");
    refused(&m, "nuldtype.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\\u0000x\",\"shape\":[8],\"data_offsets\":[0,32]}}", 32,
            "tensor 'transformer.ln_f.weight': its dtype holds a NUL character");
    refused(&m, "twice.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
            "\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[32,64]}}",
            64, "appears twice");
    refused(&m, "overlap.safetensors",
            "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]},"
            "\"transformer.h.0.ln_1.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[16,48]}}",
            48, "overlap the tensor before at byte 32");
    refused(&m, "docs.safetensors", "{}\n--- {}", 0, "more than one document");
    /* nanoGPT's mask buffers have a block number: none, or a name, is not one */
    refused(&m, "maskempty.safetensors",
            "{\"transformer.h..attn.bias\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]}}", 4,
            "tensor 'transformer.h..attn.bias' is not a parameter of this model");
    refused(&m, "maskname.safetensors",
            "{\"transformer.h.x.attn.bias\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1],\"data_offsets\":[0,4]}}", 4,
            "tensor 'transformer.h.x.attn.bias' is not a parameter of this model");
    /* values nested 64 deep in an unknown key are read (skipped), 65 deep refused */
    {
        char deep[1024], name[64];
        for (int depth = 64; depth <= 65; depth++) {
            int k = snprintf(deep, sizeof deep,
                             "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32],\"x\":");
            for (int d = 0; d < depth; d++) deep[k++] = '[';
            for (int d = 0; d < depth; d++) deep[k++] = ']';
            snprintf(deep + k, sizeof deep - (size_t)k, "}}");
            snprintf(name, sizeof name, "deep%d.safetensors", depth);
            if (depth == 65) {
                refused(&m, name, deep, 32, "nested more than 64 deep");
                continue;
            }
            const char *p = tmp_path(name);
            float v[8] = {1, 1, 1, 1, 1, 1, 1, 1};
            write_raw(p, deep, v, sizeof v);
            CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) == 0, "64 deep: %s", err);
        }
    }
    /* a name of the reader's whole buffer (PARAM_NAME + 64 bytes), one byte more than it holds */
    {
        char longh[512], nm[PARAM_NAME + 64 + 1];
        memset(nm, 'a', sizeof nm - 1);
        nm[sizeof nm - 1] = '\0';
        snprintf(longh, sizeof longh, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", nm);
        char want[64];
        snprintf(want, sizeof want, "a tensor name of %zu bytes", sizeof nm - 1);
        refused(&m, "longname.safetensors", longh, 32, want);
    }
    /* infinities and NaN, F32 and F16, refused as values */
    {
        static const struct { const char *dtype; uint32_t bits; int bytes; const char *want; } nf[] = {
            {"F32", 0x7f800000u, 4, "value 0 is inf"}, {"F32", 0xff800000u, 4, "value 0 is -inf"},
            {"F16", 0x7c00u, 2, "value 0 is inf"},     {"F16", 0x7e00u, 2, "value 0 is nan"},
            {"F16", 0x7c01u, 2, "value 0 is nan"}};
        for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
            unsigned char v[32] = {0};
            for (int b = 0; b < nf[i].bytes; b++) v[b] = (unsigned char)(nf[i].bits >> (8 * b));
            char hh[256];
            snprintf(hh, sizeof hh, "{\"transformer.ln_f.weight\":{\"dtype\":\"%s\",\"shape\":[8],\"data_offsets\":[0,%d]}}",
                     nf[i].dtype, 8 * nf[i].bytes);
            const char *p = tmp_path("nonfinite.safetensors");
            write_raw(p, hh, v, (size_t)(8 * nf[i].bytes));
            CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, nf[i].want),
                  "%s %#x: %s", nf[i].dtype, nf[i].bits, err);
        }
    }
    /* a NaN weight: refused before a run would start from it */
    {
        const char *p = tmp_path("nan.safetensors");
        float v[8] = {1, 1, 1, NAN, 1, 1, 1, 1};
        write_raw(p, "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[8],\"data_offsets\":[0,32]}}", v,
                  sizeof v);
        CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "value 3 is nan"), "%s", err);
    }
    /* a FIFO: refused at once, not waited on */
    {
        const char *p = tmp_path("fifo.safetensors");
        unlink(p);
        CHECK(mkfifo(p, 0600) == 0, "mkfifo");
        CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "not a regular file"), "%s",
              err);
    }
    /* lm_head.weight beside a different wte: this model ties them */
    const param_info *e = model_find_param(&m, "transformer.wte.weight");
    snprintf(h, sizeof h,
             "{\"transformer.wte.weight\":{\"dtype\":\"F32\",\"shape\":[%zu,%zu],\"data_offsets\":[0,%zu]},"
             "\"lm_head.weight\":{\"dtype\":\"BF16\",\"shape\":[%zu,%zu],\"data_offsets\":[%zu,%zu]}}",
             e->shape[0], e->shape[1], e->numel * 4, e->shape[0], e->shape[1], e->numel * 4, e->numel * 6);
    {
        const char *p = tmp_path("untied.safetensors");
        unsigned char *data = calloc_check(e->numel * 6, 1);
        data[e->numel * 4 + 1] = 0x3f; /* lm_head[0] = 0.5 in bf16, wte all 0 */
        write_raw(p, h, data, e->numel * 6);
        free(data);
        CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "ties them"), "%s", err);
    }
    /* a header length past the file's end; a file shorter than 8 bytes */
    const char *p = tmp_path("len.safetensors");
    FILE *f = fopen_check(p, "wb");
    const unsigned char big[12] = {0xff, 0xff, 0, 0, 0, 0, 0, 0, '{', '}', ' ', ' '};
    fwrite(big, 1, sizeof big, f);
    fclose(f);
    CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "truncated"), "%s", err);
    f = fopen_check(p, "wb");
    fwrite(big, 1, 5, f);
    fclose(f);
    CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "no header length"), "%s", err);
    /* a header longer than the format's 100 MB bound, in a file long enough to hold it */
    f = fopen_check(p, "wb");
    const uint64_t over = (100u << 20) + 1;
    unsigned char l8[8];
    for (int k = 0; k < 8; k++) l8[k] = (unsigned char)(over >> (8 * k));
    fwrite(l8, 1, 8, f);
    fclose(f);
    CHECK(truncate(p, (off_t)(8 + over + 8)) == 0, "truncate");
    CHECK(safetensors_load(&m, p, &loaded, &kept, err, sizeof err) != 0 && strstr(err, "a header of 104857601 bytes"),
          "%s", err);
    unlink(p);
    model_free(&m);
}

/* safetensors_open_model with a given config (--config of `s2hc sample` and `s2hc eval`):
 * a file without metadata opens as that model, its values the file's; one tensor missing
 * is named with its shape and the count of the others; a file holding its own config is
 * refused as a usage error (-2), a file with neither config as an error (-1). */
static void test_open_given(void) {
    gpt_model m, back;
    build_bias(&m, "s2hc", 4, 8, 21, 0);
    const char *ex = tmp_path("given_export.safetensors");
    written(&m, 5, ex, 0);
    s2hc_config cfg;
    int64_t step = 0;
    char kind[16], err[1400];
    CHECK(safetensors_open_model(ex, &m.cfg, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == -2 &&
              strstr(err, ex) && strstr(err, "holds its own s2hc config"),
          "a config given with an export: '%s'", err);
    /* ln_f.weight alone, no metadata: without a config nothing says the model; with one,
       the first of the model's tensors the file lacks is named, with its shape */
    const param_info *w = model_find_param(&m, "transformer.ln_f.weight");
    char hdr[256];
    snprintf(hdr, sizeof hdr, "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}",
             w->numel, w->numel * 4);
    const char *one = tmp_path("given_one.safetensors");
    write_raw(one, hdr, m.params + w->offset, w->numel * 4);
    CHECK(safetensors_open_model(one, NULL, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == -1 &&
              strstr(err, "no s2hc config"), "no config at all: '%s'", err);
    char want[160];
    const param_info *first = &m.pinfo[0];
    snprintf(want, sizeof want, "tensor '%s' [%zu, %zu] of the model (method s2hc, n = 4, model.bias false) is not in "
             "the file, nor %d more of its tensors", first->name, first->shape[0], first->shape[1], m.n_tensors - 2);
    CHECK(first->rank == 2 && safetensors_open_model(one, &m.cfg, &cfg, &back, &step, kind, sizeof kind, err,
                                                     sizeof err) == -1 && strstr(err, one) && strstr(err, want),
          "one tensor of %d: '%s', want '%s'", m.n_tensors, err, want);
    /* every tensor, in reverse order, no metadata: the model itself, bit for bit */
    size_t cap = 256 + (size_t)m.n_tensors * 200, at = 0;
    char *h = malloc_check(cap);
    float *vals = malloc_check(m.n_params * sizeof *vals);
    int len = snprintf(h, cap, "{");
    for (int i = m.n_tensors - 1; i >= 0; i--) {
        const param_info *p = &m.pinfo[i];
        char shape[64] = "";
        for (int d = 0; d < p->rank; d++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%zu", d ? "," : "", p->shape[d]);
        len += snprintf(h + len, cap - (size_t)len, "%s\"%s\":{\"dtype\":\"F32\",\"shape\":[%s],\"data_offsets\":[%zu,%zu]}",
                        i == m.n_tensors - 1 ? "" : ",", p->name, shape, at * 4, (at + p->numel) * 4);
        for (size_t k = 0; k < p->numel; k++) vals[at + k] = (float)m.params[p->offset + k];
        at += p->numel;
    }
    snprintf(h + len, cap - (size_t)len, "}");
    const char *all = tmp_path("given_all.safetensors");
    write_raw(all, h, vals, at * 4);
    CHECK(safetensors_open_model(all, &m.cfg, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == 0, "%s", err);
    CHECK(step == -1 && !kind[0] && back.n_params == m.n_params && !strcmp(cfg.method, "s2hc") &&
              !memcmp(back.params, m.params, m.n_params * sizeof *m.params),
          "a file without metadata, its model given: step %lld, kind '%s', the values %s", (long long)step, kind,
          back.n_params == m.n_params && !memcmp(back.params, m.params, m.n_params * sizeof *m.params) ? "equal"
                                                                                                     : "differ");
    model_free(&back);
    free(vals);
    free(h);
    model_free(&m);
}

/* A config that says a model larger than the file's tensors can hold (2 bytes a value at
 * least) is refused before the model is built, naming the file and the sizes: a damaged
 * __metadata__ config of model.n_layer 128, n_embd 16384 had 412 G parameters and their
 * gradients allocated (an out-of-memory exit, or ASan's abort) before any shape was
 * compared. The same for a config given with a file without metadata; a file of the
 * config's model still opens. */
static void test_open_config_too_large(void) {
    gpt_model m, back;
    build(&m, "s2hc", 4, 8, 31);
    const s2hc_config own = m.cfg;
    m.cfg.n_layer = 128; /* the header's config alone: the tensors stay the 2-block model's */
    m.cfg.n_embd = 16384;
    const char *big = tmp_path("config_too_large.safetensors");
    written(&m, 3, big, 0);
    m.cfg = own;
    s2hc_config cfg;
    int64_t step = 0;
    char kind[16], err[1400];
    CHECK(safetensors_open_model(big, NULL, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == -1 &&
              strstr(err, big) && strstr(err, "the config in its __metadata__ is a model of 412650608640 parameters") &&
              strstr(err, "not that model's file"),
          "a metadata config of 412 G parameters over a small model's tensors: '%s'", err);
    const char *ok = tmp_path("config_fits.safetensors");
    written(&m, 3, ok, 0);
    CHECK(safetensors_open_model(ok, NULL, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == 0 &&
              back.n_params == m.n_params, "its own config: '%s'", err);
    model_free(&back);
    /* no metadata, a large config given (--config): the file's tensors of the small model
       (a small one is built, and its first tensor missing from the file named: test_open_given) */
    const param_info *w = model_find_param(&m, "transformer.ln_f.weight");
    char hdr[256];
    snprintf(hdr, sizeof hdr, "{\"transformer.ln_f.weight\":{\"dtype\":\"F32\",\"shape\":[%zu],\"data_offsets\":[0,%zu]}}",
             w->numel, w->numel * 4);
    const char *bare = tmp_path("config_given_large.safetensors");
    write_raw(bare, hdr, m.params + w->offset, w->numel * 4);
    s2hc_config given = own;
    given.n_layer = 128;
    given.n_embd = 16384;
    CHECK(safetensors_open_model(bare, &given, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == -1 &&
              strstr(err, bare) && strstr(err, "the config given is a model of") && strstr(err, "holds 32 bytes"),
          "a large config given: '%s'", err);
    model_free(&m);
}

/* token_kind in an export's __metadata__ says whether the model reads bytes of text or a
 * tokenizer's ids (sample's prompt, eval's corpora); export writes "bytes" or "ids", and
 * any other value (a damaged or edited file) is refused by name rather than read as text. */
static void test_token_kind_refused(void) {
    gpt_model m, back;
    build(&m, "mhc", 4, 8, 41);
    const char *const kinds[] = {"bytes", "ids", "words", ""};
    for (int k = 0; k < 4; k++) {
        char name[64];
        snprintf(name, sizeof name, "kind_%d.safetensors", k);
        char path[1200];
        snprintf(path, sizeof path, "%s", tmp_path(name));
        CHECK(safetensors_write(&m, 2, path, 0, kinds[k]) > 0, "write %s", path);
        s2hc_config cfg;
        int64_t step = 0;
        int of_ids = -1;
        char log[1300];
        snprintf(log, sizeof log, "%s.err", path);
        fflush(stderr);
        const int saved = dup(2), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        close(fd);
        const int rc = model_file_open(path, "eval", NULL, &cfg, &back, &step, &of_ids);
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        if (rc == 0) model_free(&back);
        FILE *f = fopen(log, "r");
        char text[2048] = "";
        if (f) { text[fread(text, 1, sizeof text - 1, f)] = 0; fclose(f); }
        if (k == 2)
            CHECK(rc == 1 && strstr(text, path) && strstr(text, "token_kind is 'words', neither bytes nor ids"),
                  "token_kind 'words': rc %d, stderr '%s'", rc, text);
        else
            CHECK(rc == 0 && of_ids == (k == 1), "token_kind '%s': rc %d, of_ids %d, stderr '%s'", kinds[k], rc, of_ids,
                  text);
    }
    model_free(&m);
}

/* The export `src` rewritten into `dst` with its __metadata__ config's JSON string value
 * replaced: by `value` (JSON text, without the quotes), or, with `append`, by the old
 * value followed by `value`. 0 on success. */
static int rewrite_config(const char *src, const char *dst, const char *value, int append) {
    FILE *f = fopen(src, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    const long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc_check((size_t)size);
    const size_t got = fread(b, 1, (size_t)size, f);
    fclose(f);
    uint64_t hlen = 0;
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)b[k] << (8 * k);
    if (got != (size_t)size || 8 + hlen > (uint64_t)size) { free(b); return -1; }
    char *hdr = malloc_check(hlen + 1);
    memcpy(hdr, b + 8, hlen);
    hdr[hlen] = 0;
    char *at = strstr(hdr, "\"config\":\"");
    if (!at) { free(hdr); free(b); return -1; }
    char *v = at + 10, *end = v;
    while (*end && *end != '"') end += *end == '\\' ? 2 : 1;   /* the closing quote */
    const size_t keep = append ? (size_t)(end - hdr) : (size_t)(v - hdr);
    const size_t nlen = keep + strlen(value) + strlen(end);
    char *n = malloc_check(nlen + 1);
    snprintf(n, nlen + 1, "%.*s%s%s", (int)keep, hdr, value, end);
    write_raw(dst, n, b + 8 + hlen, (size_t)size - 8 - hlen);
    free(n);
    free(hdr);
    free(b);
    return 0;
}

/* An export's __metadata__ config that is empty, or holds a NUL ("\u0000": the C string ends
 * there), is damage: refused by name. Read, the empty one was every default (another model
 * than the tensors', refused only when a shape differed), and the rest after a NUL dropped
 * silently (a config cut after its model keys loaded the rest at their defaults). */
static void test_metadata_config_damaged(void) {
    gpt_model m, back;
    build(&m, "s2hc", 4, 8, 51);
    char ex[1200], bad[1200];
    snprintf(ex, sizeof ex, "%s", tmp_path("meta_config.safetensors"));
    written(&m, 4, ex, 0);
    s2hc_config cfg;
    int64_t step = 0;
    char kind[16], err[1400];
    CHECK(safetensors_open_model(ex, NULL, &cfg, &back, &step, kind, sizeof kind, err, sizeof err) == 0, "%s", err);
    model_free(&back);
    static const struct { const char *value; int append; const char *want; } cases[] = {
        {"", 0, "its __metadata__ config is empty"},
        {" \\n ", 0, "its __metadata__ config is empty"},
        {"\\u0000train: {steps: 3}", 1, "__metadata__ config holds a NUL character"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        snprintf(bad, sizeof bad, "%s", tmp_path("meta_config_bad.safetensors"));
        CHECK(rewrite_config(ex, bad, cases[k].value, cases[k].append) == 0, "rewrite %s", ex);
        const int rc = safetensors_open_model(bad, NULL, &cfg, &back, &step, kind, sizeof kind, err, sizeof err);
        if (rc == 0) model_free(&back);
        CHECK(rc == -1 && strstr(err, bad) && strstr(err, cases[k].want), "config '%s'%s: rc %d, '%s'", cases[k].value,
              cases[k].append ? " appended" : "", rc, err);
    }
    model_free(&m);
}

int main(void) {
    T_NAME("test_safetensors");
    T_RUN(test_round_trip);
    T_RUN(test_alignment);
    T_RUN(test_rc_under_hyper_connections);
    T_RUN(test_foreign_keys);
    T_RUN(test_bad_files);
    T_RUN(test_open_given);
    T_RUN(test_open_config_too_large);
    T_RUN(test_token_kind_refused);
    T_RUN(test_metadata_config_damaged);
    return T_END();
}
