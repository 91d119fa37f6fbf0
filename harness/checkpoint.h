/* checkpoint.h: resumable training state in HDF5.
 *
 * runs/<name>/ckpt.h5:
 *   /model/<name>       every parameter tensor, named like nanoGPT's state_dict
 *                       ("transformer.h.0.attn.c_attn.weight"), PyTorch [out, in] layout,
 *                       float32
 *   /optim/m/<name>, /optim/v/<name>   AdamW moments, same names and shapes
 *   /  attrs            format ("s2hc-ckpt"), version, step, rng state, loader state,
 *                       config (YAML text), method, n_streams
 * Written to ckpt.h5.tmp, flushed and renamed, so a crash never leaves a truncated
 * checkpoint in place. Loading checks every name and shape and refuses a truncated or
 * foreign file with a message naming the file and the tensor.
 */
#ifndef S2HC_CHECKPOINT_H
#define S2HC_CHECKPOINT_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *name;   /* state_dict key */
    int rank;
    size_t shape[4];
    float *data;        /* numel floats */
} ckpt_tensor;

typedef struct {
    int64_t step;           /* optimizer steps completed */
    uint64_t rng;           /* training RNG state */
    uint64_t loader_rng;    /* data loader state */
    const char *config_yaml;/* resolved config (save); on load: malloc'd copy, caller frees */
    char method[64];
    int n_streams;
} ckpt_meta;

/* Save params (and, if m and v are non-NULL, the AdamW moments, tensor for tensor with
 * params) atomically. Returns 0 or -1 (message on stderr).
 * m[i] and v[i] are stored under params[i].name with params[i]'s shape: only their data
 * pointers are read (same on load). A NULL meta saves step 0, zero RNG states, no config. */
int ckpt_save(const char *path, const ckpt_tensor *params, const ckpt_tensor *m, const ckpt_tensor *v,
              int n, const ckpt_meta *meta);

/* Load into the given tensors (names and shapes must match exactly; every tensor must be
 * present). m and v may be NULL to load the weights alone. A tensor whose data pointer is
 * NULL is checked (name, shape, type) but not read. meta->config_yaml becomes a
 * malloc'd string. Returns 0, or -1 with a message naming the file (and tensor) in err (-2:
 * another program holds HDF5's lock on the file, h5_open_failed). */
int ckpt_load(const char *path, const ckpt_tensor *params, ckpt_tensor *m, ckpt_tensor *v, int n,
              ckpt_meta *meta, char *err, size_t errlen);

/* The optimizer step a checkpoint was saved at (its root attribute `step`), or -1 if the
 * file cannot be read as an s2hc checkpoint. Reads no tensor. */
int64_t ckpt_saved_step(const char *path);
/* 1 when path is an s2hc checkpoint of another layout version than this build reads (a
 * newer build's), with err as ckpt_load would say it; else 0 (a file that cannot be
 * read as a checkpoint too: ckpt_load says why). */
int ckpt_other_version(const char *path, char *err, size_t errlen);

#endif
