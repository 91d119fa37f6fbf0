/* checkpoint.c: resumable training state in HDF5 (layout in checkpoint.h and
 * docs/runfile.md). One contiguous float32 dataset per tensor; groups track creation
 * order so h5py iterates /model in state_dict order. Root attributes carry the rest:
 * rng and loader_rng as uint64 so they round-trip exactly. */
#include "harness/checkpoint.h"

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/util.h"
#include "probes/h5_attr.h"
#include "probes/h5.h"

#define CKPT_FORMAT "s2hc-ckpt"
#define CKPT_VERSION 1          /* bump when the layout changes; old readers refuse */
#define CKPT_NAME_MAX 1024

/* ------------------------------------------------------------------ attributes */

/* A scalar integer attribute: file type ftype (e.g. H5T_STD_U64LE), memory type mtype. */
static int ck_attr_int(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *value) {
    hid_t sp = H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t a = H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a >= 0 && H5Awrite(a, mtype, value) >= 0 ? 0 : -1;
    if (a >= 0) H5Aclose(a);
    H5Sclose(sp);
    return rc;
}

/* Read a scalar string attribute as a malloc'd string; NULL if absent or not a string. */
static char *ck_read_str(hid_t obj, const char *name) {
    if (H5Aexists(obj, name) <= 0) return NULL;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return NULL;
    char *out = h5_attr_read_str(a);
    H5Aclose(a);
    return out;
}

/* Read a scalar integer attribute into *value (memory type mtype). 0, or -1 if absent,
 * not a scalar integer, or unreadable. */
static int ck_read_int(hid_t obj, const char *name, hid_t mtype, void *value) {
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t ft = H5Aget_type(a), sp = H5Aget_space(a);
    int rc = -1;
    if (ft >= 0 && sp >= 0 && H5Tget_class(ft) == H5T_INTEGER && h5_plain_number(ft) &&
        H5Sget_simple_extent_npoints(sp) == 1 && H5Aread(a, mtype, value) >= 0)
        rc = 0;
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    H5Aclose(a);
    return rc;
}

/* ------------------------------------------------------------------ save */

static size_t ck_numel(const ckpt_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->rank; d++) n *= t->shape[d];
    return n;
}

static int ck_group(hid_t f, const char *path, hid_t gcpl, const char *description) {
    hid_t g = H5Gcreate2(f, path, H5P_DEFAULT, gcpl, H5P_DEFAULT);
    if (g < 0) return -1;
    int rc = h5_attr_write_str(g, "description", description);
    H5Gclose(g);
    return rc;
}

static int ck_write_tensor(hid_t f, const char *group, const ckpt_tensor *p, const float *data, char *detail,
                           size_t dlen) {
    char path[CKPT_NAME_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", group, p->name);
    hsize_t dims[4];
    for (int d = 0; d < p->rank; d++) dims[d] = p->shape[d];
    hid_t sp = p->rank ? H5Screate_simple(p->rank, dims, NULL) : H5Screate(H5S_SCALAR);
    if (sp < 0) return -1;
    hid_t d = H5Dcreate2(f, path, H5T_IEEE_F32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = -1;
    if (d >= 0) {
        rc = ck_numel(p) == 0 || H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0 ? 0 : -1;
    }
    if (rc < 0) h5_error_detail(detail, dlen);   /* before the closes clear the stack */
    if (d >= 0) H5Dclose(d);
    H5Sclose(sp);
    return rc;
}

static const char *ck_bad_name(const ckpt_tensor *t) {
    if (!t->name || !t->name[0]) return "empty name";
    if (strchr(t->name, '/')) return "'/' in the name";
    if (strcmp(t->name, ".") == 0 || strcmp(t->name, "..") == 0) return "name is '.' or '..'";
    if (strlen(t->name) >= CKPT_NAME_MAX) return "name too long";
    if (t->rank < 0 || t->rank > 4) return "rank outside 0..4";
    if (!t->data && ck_numel(t) > 0) return "no data";
    return NULL;
}

int ckpt_save(const char *path, const ckpt_tensor *params, const ckpt_tensor *m, const ckpt_tensor *v,
              int n, const ckpt_meta *meta) {
    h5_quiet();
    char tmp[4096], detail[256] = "", what[CKPT_NAME_MAX + 128] = "";
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        fprintf(stderr, "s2hc: error: %s: path too long\n", path);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        const char *why = ck_bad_name(&params[i]);
        if (why) {
            fprintf(stderr, "s2hc: error: %s: cannot save checkpoint: tensor %d ('%s'): %s\n", path, i,
                    params[i].name ? params[i].name : "(null)", why);
            return -1;
        }
        if ((m && !m[i].data) || (v && !v[i].data)) {
            fprintf(stderr, "s2hc: error: %s: cannot save checkpoint: no optimizer moment for '%s'\n", path,
                    params[i].name);
            return -1;
        }
    }
    int with_optim = m && v;
    ckpt_meta zero = {0};
    if (!meta) meta = &zero;

    hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS), f = H5I_INVALID_HID;
    if (gcpl < 0 || fapl < 0 || H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED) < 0 ||
        H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        snprintf(what, sizeof what, "cannot set up HDF5 property lists");
        goto fail;
    }
    tmp_file_claim(path); /* a stop signal from here on removes its .tmp (unregistered when none is free) */
    unlink(tmp);          /* created anew: a link there is never followed */
    f = H5Fcreate(tmp, H5F_ACC_EXCL, H5P_DEFAULT, fapl);
    if (f < 0) {
        h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot create the file");
        goto fail;
    }
    tmp_file_made(path);
    int64_t version = CKPT_VERSION, step = meta->step, nstreams = meta->n_streams;
    char method[sizeof meta->method + 1];
    snprintf(method, sizeof method, "%.*s", (int)sizeof meta->method, meta->method);
    if (h5_attr_write_str(f, "format", CKPT_FORMAT) < 0 ||
        ck_attr_int(f, "version", H5T_STD_I64LE, H5T_NATIVE_INT64, &version) < 0 ||
        ck_attr_int(f, "step", H5T_STD_I64LE, H5T_NATIVE_INT64, &step) < 0 ||
        ck_attr_int(f, "rng", H5T_STD_U64LE, H5T_NATIVE_UINT64, &meta->rng) < 0 ||
        ck_attr_int(f, "loader_rng", H5T_STD_U64LE, H5T_NATIVE_UINT64, &meta->loader_rng) < 0 ||
        h5_attr_write_str(f, "config", meta->config_yaml) < 0 ||
        h5_attr_write_str(f, "method", method) < 0 ||
        ck_attr_int(f, "n_streams", H5T_STD_I64LE, H5T_NATIVE_INT64, &nstreams) < 0 ||
        h5_attr_write_str(f, "description",
                          "s2hc training checkpoint: /model holds the parameters (nanoGPT state_dict names, "
                          "PyTorch [out, in] layout, float32); /optim/m and /optim/v the AdamW moments") < 0) {
        h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot write the root attributes");
        goto fail;
    }
    if (ck_group(f, "/model", gcpl, "parameters by state_dict name, float32, PyTorch layout") < 0 ||
        (with_optim && (ck_group(f, "/optim", gcpl, "AdamW state") < 0 ||
                        ck_group(f, "/optim/m", gcpl, "AdamW first moment, one dataset per parameter") < 0 ||
                        ck_group(f, "/optim/v", gcpl, "AdamW second moment, one dataset per parameter") < 0))) {
        h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot create the groups");
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        const char *bad = NULL;
        if (ck_write_tensor(f, "/model", &params[i], params[i].data, detail, sizeof detail) < 0) bad = "/model";
        else if (with_optim && ck_write_tensor(f, "/optim/m", &params[i], m[i].data, detail, sizeof detail) < 0)
            bad = "/optim/m";
        else if (with_optim && ck_write_tensor(f, "/optim/v", &params[i], v[i].data, detail, sizeof detail) < 0)
            bad = "/optim/v";
        if (bad) {
            snprintf(what, sizeof what, "cannot write tensor %s/%s", bad, params[i].name);
            goto fail;
        }
    }
    /* closed even when the flush failed; the flush's reason (EFBIG, ENOSPC) is the one to say */
    herr_t fl = H5Fflush(f, H5F_SCOPE_GLOBAL);
    if (fl < 0) h5_error_detail(detail, sizeof detail);
    herr_t cl = H5Fclose(f);
    f = H5I_INVALID_HID;
    if (fl < 0 || cl < 0) {
        if (fl >= 0) h5_error_detail(detail, sizeof detail);
        snprintf(what, sizeof what, "cannot flush and close the file");
        goto fail;
    }
    H5Pclose(gcpl);
    H5Pclose(fapl);
    const int committed = h5_commit_tmp(tmp, path);
    tmp_file_release(path);
    if (committed < 0) {
        fprintf(stderr, "s2hc: error: %s: cannot save checkpoint (fsync/rename of %s): %s\n", path, tmp,
                strerror(errno));
        return -1;
    }
    return 0;
fail:
    if (f >= 0) H5Fclose(f);
    if (gcpl >= 0) H5Pclose(gcpl);
    if (fapl >= 0) H5Pclose(fapl);
    unlink(tmp);
    tmp_file_release(path);
    fprintf(stderr, "s2hc: error: %s: cannot save checkpoint (writing %s): %s%s%s%s\n", path, tmp, what,
            detail[0] ? " (HDF5: " : "", detail, detail[0] ? ")" : "");
    return -1;
}

/* ------------------------------------------------------------------ load */

static void ck_shape_str(int rank, const size_t *dims, char *buf, size_t len) {
    size_t o = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < rank && o < len; d++)
        o += (size_t)snprintf(buf + o, len - o, "%s%zu", d ? ", " : "", dims[d]);
    if (o < len) snprintf(buf + o, len - o, "]");
}

/* 1 if path (relative to f) is a hard link: a tensor stored where its name says. ckpt_save
 * writes no other kind; a soft or external link (an edited file) would load other weights
 * under this tensor's name. */
static int ck_hard_link(hid_t f, const char *path) {
    H5L_info_t li;
    return H5Lget_info(f, path, &li, H5P_DEFAULT) >= 0 && li.type == H5L_TYPE_HARD;
}

/* Read tensor `p` (name and shape) from group `grp` into dst (NULL: check it only). */
static int ck_read_tensor(hid_t f, const char *file, const char *grp, const ckpt_tensor *p, float *dst,
                          char *err, size_t errlen) {
    char path[CKPT_NAME_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", grp, p->name);
    if (H5Lexists(f, path, H5P_DEFAULT) <= 0) {
        snprintf(err, errlen, "%s: tensor '%s' is missing from %s (a checkpoint of another model or config?)",
                 file, p->name, grp);
        return -1;
    }
    if (!ck_hard_link(f, grp) || !ck_hard_link(f, path)) {
        snprintf(err, errlen, "%s: %s is a link to another place or file, not a tensor stored there (an edited "
                 "checkpoint?)", file, ck_hard_link(f, grp) ? path : grp);
        return -1;
    }
    hid_t d = H5Dopen2(f, path, H5P_DEFAULT);
    if (d < 0) {
        snprintf(err, errlen, "%s: %s is not a dataset", file, path);
        return -1;
    }
    hid_t sp = H5Dget_space(d), t = H5Dget_type(d);
    int rc = -1, rank = sp >= 0 ? H5Sget_simple_extent_ndims(sp) : -1;
    hsize_t hd[H5S_MAX_RANK];
    if (rank < 0 || t < 0 || H5Sget_simple_extent_dims(sp, hd, NULL) < 0) {
        snprintf(err, errlen, "%s: cannot read the shape of %s (truncated or corrupt?)", file, path);
        goto done;
    }
    int same = rank == p->rank;
    size_t fd[H5S_MAX_RANK];
    for (int i = 0; i < rank; i++) {
        fd[i] = (size_t)hd[i];
        if (same && fd[i] != p->shape[i]) same = 0;
    }
    if (!same) {
        char a[128], b[128];
        ck_shape_str(rank, fd, a, sizeof a);
        ck_shape_str(p->rank, p->shape, b, sizeof b);
        snprintf(err, errlen, "%s: tensor '%s' in %s has shape %s in the file, the model expects %s", file, p->name,
                 grp, a, b);
        goto done;
    }
    if (H5Tget_class(t) != H5T_FLOAT || !h5_plain_number(t)) {
        snprintf(err, errlen, "%s: tensor %s is not a 4- or 8-byte float (corrupt?)", file, path);
        goto done;
    }
    if (dst && ck_numel(p) > 0 && H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, dst) < 0) {
        char detail[256];
        h5_error_detail(detail, sizeof detail);
        snprintf(err, errlen, "%s: cannot read tensor %s (truncated or corrupt?)%s%s%s", file, path,
                 detail[0] ? " (HDF5: " : "", detail, detail[0] ? ")" : "");
        goto done;
    }
    rc = 0;
done:
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    return rc;
}

/* Every tensor was found; refuse a group holding more (names the first stranger). */
static int ck_no_extra(hid_t f, const char *file, const char *grp, const ckpt_tensor *params, int n, char *err,
                       size_t errlen) {
    H5G_info_t gi;
    if (H5Gget_info_by_name(f, grp, &gi, H5P_DEFAULT) < 0) {
        snprintf(err, errlen, "%s: cannot list %s (truncated or corrupt?)", file, grp);
        return -1;
    }
    if (gi.nlinks == (hsize_t)n) return 0;
    for (hsize_t i = 0; i < gi.nlinks; i++) {
        char name[CKPT_NAME_MAX];
        if (H5Lget_name_by_idx(f, grp, H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0) continue;
        int known = 0;
        for (int k = 0; k < n && !known; k++) known = strcmp(name, params[k].name) == 0;
        if (!known) {
            snprintf(err, errlen, "%s: tensor '%s' in %s is not part of the model (a checkpoint of another config?)",
                     file, name, grp);
            return -1;
        }
    }
    return 0;
}

int64_t ckpt_saved_step(const char *path) {
    h5_quiet();
    char err[512];
    if (h5_check_file(path, "s2hc checkpoint", err, sizeof err) < 0) return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return -1;
    char *format = ck_read_str(f, "format");
    int64_t step = -1;
    if (!format || strcmp(format, CKPT_FORMAT) != 0 || ck_read_int(f, "step", H5T_NATIVE_INT64, &step) < 0 || step < 0)
        step = -1;
    free(format);
    H5Fclose(f);
    return step;
}

int ckpt_other_version(const char *path, char *err, size_t errlen) {
    h5_quiet();
    char e[512];
    if (h5_check_file(path, "s2hc checkpoint", e, sizeof e) < 0) return 0;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return 0;
    char *format = ck_read_str(f, "format");
    int64_t version = 0;
    const int other = format && strcmp(format, CKPT_FORMAT) == 0 &&
                      ck_read_int(f, "version", H5T_NATIVE_INT64, &version) == 0 && version != CKPT_VERSION;
    if (other)
        snprintf(err, errlen, "%s: checkpoint format version %lld, this build reads version %d", path,
                 (long long)version, CKPT_VERSION);
    free(format);
    H5Fclose(f);
    return other;
}

int ckpt_load(const char *path, const ckpt_tensor *params, ckpt_tensor *m, ckpt_tensor *v, int n,
              ckpt_meta *meta, char *err, size_t errlen) {
    h5_quiet();
    if (meta) meta->config_yaml = NULL;
    if (h5_check_file(path, "s2hc checkpoint", err, errlen) < 0) return -1;
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) return h5_open_failed(path, "s2hc checkpoint", err, errlen);
    int rc = -1;
    char *format = ck_read_str(f, "format"), *config = NULL, *method = NULL;
    int64_t version = 0, step = 0, nstreams = 0;
    uint64_t rng = 0, lrng = 0;
    if (!format || strcmp(format, CKPT_FORMAT) != 0) {
        snprintf(err, errlen, "%s: not an s2hc checkpoint (root attribute format is %s%s%s, expected '%s')", path,
                 format ? "'" : "", format ? format : "missing", format ? "'" : "", CKPT_FORMAT);
        goto done;
    }
    if (ck_read_int(f, "version", H5T_NATIVE_INT64, &version) < 0) {
        snprintf(err, errlen, "%s: checkpoint lacks a readable root attribute 'version' (a scalar integer; corrupt or "
                 "foreign?)", path);
        goto done;
    }
    if (version != CKPT_VERSION) {
        snprintf(err, errlen, "%s: checkpoint format version %lld, this build reads version %d", path,
                 (long long)version, CKPT_VERSION);
        goto done;
    }
    const char *missing = ck_read_int(f, "step", H5T_NATIVE_INT64, &step) < 0                ? "step"
                          : ck_read_int(f, "rng", H5T_NATIVE_UINT64, &rng) < 0               ? "rng"
                          : ck_read_int(f, "loader_rng", H5T_NATIVE_UINT64, &lrng) < 0       ? "loader_rng"
                          : ck_read_int(f, "n_streams", H5T_NATIVE_INT64, &nstreams) < 0     ? "n_streams"
                          : !(config = ck_read_str(f, "config"))                             ? "config"
                          : !(method = ck_read_str(f, "method"))                             ? "method"
                                                                                             : NULL;
    if (missing) {
        snprintf(err, errlen, "%s: checkpoint lacks a readable root attribute '%s' (corrupt or foreign?)", path, missing);
        goto done;
    }
    if (step < 0) {
        snprintf(err, errlen, "%s: root attribute 'step' is %lld, a negative step count (corrupt?)", path,
                 (long long)step);
        goto done;
    }
    if (H5Lexists(f, "/model", H5P_DEFAULT) <= 0) {
        snprintf(err, errlen, "%s: checkpoint has no /model group (corrupt?)", path);
        goto done;
    }
    for (int i = 0; i < n; i++)
        if (ck_read_tensor(f, path, "/model", &params[i], params[i].data, err, errlen) < 0) goto done;
    if (ck_no_extra(f, path, "/model", params, n, err, errlen) < 0) goto done;
    for (int k = 0; k < 2; k++) {
        ckpt_tensor *mom = k ? v : m;
        const char *grp = k ? "/optim/v" : "/optim/m";
        if (!mom) continue;
        if (H5Lexists(f, "/optim", H5P_DEFAULT) <= 0 || H5Lexists(f, grp, H5P_DEFAULT) <= 0) {
            snprintf(err, errlen, "%s: checkpoint has no optimizer state (%s missing)", path, grp);
            goto done;
        }
        for (int i = 0; i < n; i++)
            if (ck_read_tensor(f, path, grp, &params[i], mom[i].data, err, errlen) < 0) goto done;
        if (ck_no_extra(f, path, grp, params, n, err, errlen) < 0) goto done;
    }
    if (meta) {
        meta->step = step;
        meta->rng = rng;
        meta->loader_rng = lrng;
        meta->n_streams = (int)nstreams;
        snprintf(meta->method, sizeof meta->method, "%s", method);
        meta->config_yaml = config;
        config = NULL;
    }
    rc = 0;
done:
    free(format);
    free(config);
    free(method);
    H5Fclose(f);
    return rc;
}
