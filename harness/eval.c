/* eval.c: validation and out-of-domain perplexity; `s2hc eval RUN_DIR`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "checkpoint.h"
#include "run.h"
#include "util.h"

void eval_shard_batch(const data_shard *s, int b, int batches, int B, int T, int *in, int *tg) {
    const uint64_t span = s->count - (uint64_t)T - 1; /* last valid window start */
    const uint64_t total = (uint64_t)batches * B;
    for (int i = 0; i < B; i++) {
        uint64_t w = (uint64_t)b * B + i;
        uint64_t start = total > 1 ? (span * w) / (total - 1) : 0; /* evenly spaced windows */
        for (int t = 0; t < T; t++) {
            in[i * T + t] = shard_token(s, start + t);
            tg[i * T + t] = shard_token(s, start + t + 1);
        }
    }
}

/* eval_shard_loss, its batches counted into *done and shown by pr (may be NULL); NaN as
 * soon as stop_signal is set. */
static double shard_loss(gpt_model *m, const data_shard *s, int batches, int B, progress *pr, long *done) {
    const int T = m->T;
    if (s->count < (uint64_t)T + 1) return NAN;
    size_t N = (size_t)B * T;
    int *in = malloc_check(N * sizeof(int)), *tg = malloc_check(N * sizeof(int));
    double sum = 0;
    for (int b = 0; b < batches && !stop_signal; b++) {
        eval_shard_batch(s, b, batches, B, T, in, tg);
        sum += model_forward(m, in, tg, B);
        if (pr) progress_update(pr, ++*done);
    }
    free(in);
    free(tg);
    return stop_signal ? NAN : sum / batches;
}

double eval_shard_loss(gpt_model *m, const data_shard *s, int batches, int B, int verbose) {
    progress pr;
    long done = 0;
    progress_begin(&pr, "eval", "batches", batches, verbose);
    double l = shard_loss(m, s, batches, B, &pr, &done);
    progress_end(&pr);
    return l;
}

int eval_ood_open(const s2hc_config *c, const char *name, uint32_t want_kind, data_shard *s, char *err, size_t errlen) {
    char path[1200];
    /* an out-of-domain corpus is never trained on: its whole text is usable; train.bin
       (the larger part) when present */
    data_shard_path(path, sizeof path, c->data_dir, name, "train");
    if (!file_exists(path)) data_shard_path(path, sizeof path, c->data_dir, name, "val");
    if (shard_open(s, path, err, errlen) != 0) return -1;
    if (shard_fits(s, c->vocab, want_kind, err, errlen) != 0) {
        shard_close(s);
        return -1;
    }
    if (s->count < (uint64_t)c->block_size + 1) {
        snprintf(err, errlen, "%s: %llu tokens, fewer than block_size + 1 = %d", path, (unsigned long long)s->count,
                 c->block_size + 1);
        shard_close(s);
        return -1;
    }
    return 0;
}

int eval_ood_check(const s2hc_config *c, uint32_t want_kind, const char *source, const char *hint) {
    char err[1024];
    for (int i = 0; i < c->n_ood; i++) {
        data_shard o;
        if (eval_ood_open(c, c->ood[i], want_kind, &o, err, sizeof err) != 0) {
            fprintf(stderr, "s2hc: error: out-of-domain corpus '%s' (key 'data.ood' of %s): %s\n  (%s)\n", c->ood[i],
                    source, err, hint);
            return -1;
        }
        shard_close(&o);
    }
    return 0;
}

int run_val_rebuilt(const h5log *log, uint64_t val_count, const char *val_path, const char *run_path,
                    const char *consequence, char *err, size_t errlen) {
    const double was = h5log_get_attr_num(log, "/", "val_tokens");
    if (isnan(was) || was == (double)val_count) return 0;
    snprintf(err, errlen, "%s: %llu tokens, but %s trained with a validation set of %.0f (the corpus was rebuilt "
             "since, by `s2hc data prepare` of another version?): %s", val_path, (unsigned long long)val_count,
             run_path, was, consequence);
    return 1;
}

int eval_table_width(const s2hc_config *c) {
    int w = EVAL_NAME_WIDTH;
    for (int i = 0; i < c->n_ood; i++)
        if ((int)strlen(c->ood[i]) > w) w = (int)strlen(c->ood[i]);
    return w;
}

void eval_print_header(FILE *f, int width) { fprintf(f, "  %-*s %8s %10s\n", width, "corpus", "loss", "ppl"); }

void eval_print_row(FILE *f, int width, const char *corpus, double loss) {
    const double ppl = exp(loss);
    if (ppl < 1e6) fprintf(f, "  %-*s %8.4f %10.3f\n", width, corpus, loss, ppl);
    else fprintf(f, "  %-*s %8.4f %10.3e\n", width, corpus, loss, ppl);
}

/* /eval/ood_loss/<name>, one row per /eval/step row: NaN rows for the evaluations that
 * did not score the corpus (before train.eval_ood was on, or an `s2hc eval --ood` of
 * others), then this evaluation's loss in the row /eval/step has just gained. */
static void ood_loss_row(h5log *log, const char *name, double loss) {
    char p1[300], d1[400];
    snprintf(p1, sizeof p1, "/eval/ood_loss/%s", name);
    snprintf(d1, sizeof d1, "loss on out-of-domain corpus %s at each /eval/step row (train.eval_ood; NaN: not "
             "evaluated then)", name);
    const int es = h5log_find(log, "/eval/step");
    const int si = h5log_series_add(log, p1, H5LOG_F64, 0, NULL, d1, "nats/token");
    const double nan_v = NAN;
    while (es >= 0 && log->series[si].rows + 1 < log->series[es].rows) h5log_append(log, si, &nan_v);
    h5log_append(log, si, &loss);
}

int eval_ood_losses(gpt_model *m, int B, uint32_t want_kind, double *loss, int verbose) {
    const s2hc_config *c = &m->cfg;
    progress pr;
    long done = 0;
    progress_begin(&pr, "eval out of domain", "batches", (long)c->eval_batches * c->n_ood, verbose);
    for (int i = 0; i < c->n_ood; i++) {
        data_shard s;
        char err[1024];
        loss[i] = NAN;
        if (stop_signal) break;
        if (eval_ood_open(c, c->ood[i], want_kind, &s, err, sizeof err) != 0) { /* checked at the start: gone since */
            progress_end(&pr);
            fprintf(stderr, "s2hc: warning: out-of-domain corpus '%s' skipped: %s\n", c->ood[i], err);
            done += c->eval_batches;
            continue;
        }
        loss[i] = shard_loss(m, &s, c->eval_batches, B, &pr, &done);
        shard_close(&s);
    }
    progress_end(&pr);
    return stop_signal ? -1 : 0;
}

void eval_ood_record(h5log *log, const s2hc_config *c, const double *loss) {
    for (int i = 0; i < c->n_ood; i++) ood_loss_row(log, c->ood[i], loss[i]);
}

/* eval_all's first line of the table: the step of a run's weights, or the file's and
 * its step when the file gives one. */
static void eval_print_title(const gpt_model *m, int64_t step, const eval_source *src, int B) {
    const s2hc_config *c = &m->cfg;
    if (!src) printf("eval at step %lld", (long long)step);
    else if (step >= 0) printf("eval of %s at step %lld", src->file, (long long)step);
    else printf("eval of %s, step not given", src->file);
    printf(" (%d x %d sequences of %d tokens per corpus)\n", c->eval_batches, B, m->T);
}

double eval_all(gpt_model *m, h5log *log, int64_t step, int show, const eval_source *src, double *ood_loss) {
    const s2hc_config *c = &m->cfg;
    char path[1200], err[1024];
    data_shard s;
    double val = NAN;
    int B = m->B > 0 ? m->B : c->batch;
    const int verbose = show == EVAL_TABLE; /* the table, and the progress with it on stdout */
    const int width = eval_table_width(c); /* every corpus's name, before the first row */
    const int with_val = !(src && src->no_val);
    progress pr;
    long done = 0;
    progress_begin(&pr, "eval", "batches", (long)c->eval_batches * (with_val + c->n_ood), show != EVAL_QUIET);
    if (show == EVAL_CSV) progress_to(&pr, stderr);
    for (int i = 0; ood_loss && i < c->n_ood; i++) ood_loss[i] = NAN;
    uint32_t vocab = 0; /* the training corpus's kind (shard_kind), for the out-of-domain ones */
    data_shard_path(path, sizeof path, c->data_dir, c->train_corpus, "val");
    if (!with_val) {
        /* the caller said why */
    } else if (shard_open(&s, path, err, sizeof err) == 0 && shard_fits(&s, c->vocab, 0, err, sizeof err) == 0) {
        vocab = shard_kind(&s);
        val = shard_loss(m, &s, c->eval_batches, B, &pr, &done);
        shard_close(&s);
    } else {
        if (s.map) shard_close(&s);
        fprintf(stderr, "s2hc: warning: %s\n", err);
    }
    if (log) {
        int64_t s64 = step;
        int es = h5log_series_add(log, "/eval/step", H5LOG_I64, 0, NULL, "optimizer step of each eval row", "");
        int ev = h5log_series_add(log, "/eval/val_loss", H5LOG_F64, 0, NULL,
                                  "validation loss (held-out last 1% of the training corpus)", "nats/token");
        h5log_append(log, es, &s64);
        h5log_append(log, ev, &val);
    }
    progress_end(&pr);
    if (verbose && !stop_signal) { /* stopped: no table of a loss not computed */
        eval_print_title(m, step, src, B);
        eval_print_header(stdout, width);
        if (with_val) eval_print_row(stdout, width, "val", val);
    }
    for (int i = 0; i < c->n_ood && !stop_signal; i++) {
        const char *name = c->ood[i];
        if (eval_ood_open(c, name, vocab, &s, err, sizeof err) != 0) {
            progress_end(&pr);
            fprintf(stderr, "s2hc: warning: out-of-domain corpus '%s' skipped: %s\n", name, err);
            done += c->eval_batches;
            /* an earlier evaluation's numbers would read as this step's: NaN, "not evaluated" */
            char p1[300];
            size_t one = 1;
            double nan_v = NAN;
            const char *q[2] = {"loss", "ppl"};
            for (int k = 0; log && k < 2; k++) {
                snprintf(p1, sizeof p1, "/eval/ood/%s/%s", name, q[k]);
                int si = h5log_find(log, p1);
                if (si >= 0 && log->series[si].fixed && log->series[si].type == H5LOG_F64)
                    h5log_static_set(log, p1, H5LOG_F64, 0, &one, &nan_v, NULL);
            }
            continue;
        }
        double l = shard_loss(m, &s, c->eval_batches, B, &pr, &done);
        shard_close(&s);
        progress_end(&pr);
        if (stop_signal) break; /* no row of a corpus half evaluated */
        if (log) {
            if (c->eval_ood) ood_loss_row(log, name, l); /* the trajectory's last row */
            double ppl = exp(l);
            char p1[300], d1[300];
            size_t one = 1;
            snprintf(p1, sizeof p1, "/eval/ood/%s/loss", name);
            snprintf(d1, sizeof d1, "loss on out-of-domain corpus %s at the final step", name);
            h5log_static_set(log, p1, H5LOG_F64, 0, &one, &l, d1);
            snprintf(p1, sizeof p1, "/eval/ood/%s/ppl", name);
            snprintf(d1, sizeof d1, "perplexity exp(loss) per token on out-of-domain corpus %s (a byte for the "
                     "byte-level corpora)", name);
            h5log_static_set(log, p1, H5LOG_F64, 0, &one, &ppl, d1);
        }
        if (verbose) eval_print_row(stdout, width, name, l);
        if (ood_loss) ood_loss[i] = l;
    }
    if (log) h5log_attr_num(log, "/eval/ood", "step", (double)step);
    return val;
}

static void eval_usage(FILE *f) {
    fprintf(f, "usage: s2hc eval RUN_DIR|FILE.safetensors... [--batches N] [--data DIR] [--ood LIST] [--csv]\n"
               "                 [--config YAML [--set KEY=VALUE]...]\n"
               "\n"
               "Load RUN_DIR/ckpt.h5, evaluate the validation split and every out-of-domain corpus of\n"
               "the run's config, print the table and record it in RUN_DIR/run.h5 under /eval. Refused\n"
               "(exit 1) while a training, a probe or another eval writes the run. Several runs (a\n"
               "grid's, runs/grid/*) are evaluated in turn, each under a header; the exit is the worst.\n"
               "A file of `s2hc export` is evaluated from the file alone, as `s2hc sample` reads it (the\n"
               "model its metadata's config describes), and nothing is written: the validation split of\n"
               "the corpus it trained on when that corpus is prepared here (else a note, and the\n"
               "out-of-domain corpora only), and the out-of-domain corpora its config names; the table's\n"
               "first line names the file and its step (or \"step not given\"). Files and runs mix.\n"
               "  --batches N   micro-batches per corpus (default: the config's train.eval_batches)\n"
               "  --data DIR    where the prepared corpora are (default: the config's data.dir)\n"
               "  --ood LIST    these out-of-domain corpora instead of the config's data.ood, as the key\n"
               "                takes them (gcide,kjv or [gcide, kjv]; any prepared or imported corpus\n"
               "                but the training one); a run records each beside the others under /eval/ood\n"
               "  --csv         CSV for pandas instead of the tables (stdout holds nothing else; progress\n"
               "                and notes go to stderr): a header, then a row per run (or file) and corpus,\n"
               "                run,step,corpus,role,loss,ppl,batches,sequences,tokens: role val (the\n"
               "                training corpus's validation split) or ood; loss in nats per token and\n"
               "                ppl = exp(loss) in full precision; tokens = sequences x block_size scored;\n"
               "                step empty for a file that does not give it\n"
               "  --config YAML the model of safetensors files without s2hc metadata (a nanoGPT state_dict\n"
               "                saved by another program): its shape, method, n_streams, vocabulary and\n"
               "                data keys, read as `s2hc train` reads its config; every tensor that model\n"
               "                has must be in each file by name with its shape, and no other. The keys\n"
               "                that shape no tensor (model.n_head, model.gelu, the method's own such as\n"
               "                residual.sinkhorn_iters) are taken at the config's word: a note on stderr\n"
               "                names them with their values. Refused with a run or an export, which say\n"
               "                their own model (docs/runfile.md)\n"
               "  --set K=V     a key over --config's, as `s2hc train --set` (repeatable)\n"
               "\n"
               "examples:\n"
               "  s2hc eval runs/tiny\n"
               "  s2hc eval runs/tiny --ood gcide\n"
               "  s2hc eval runs/lr_sensitivity/*/ --ood gcide\n"
               "  s2hc eval runs/lr_sensitivity/*/ --csv > eval.csv\n"
               "  s2hc eval runs/tiny/model.safetensors runs/tiny --csv   # an exported file beside its run\n"
               "  s2hc eval nanogpt.safetensors --config nanogpt.yaml --ood gcide   # another program's file\n");
}

/* eval --csv's columns: one row per run (or model file) and corpus */
#define EVAL_CSV_HEADER "run,step,corpus,role,loss,ppl,batches,sequences,tokens\n"

/* The CSV rows of one evaluation (val: the validation loss, unless with_val is 0; ood[i]:
 * each out-of-domain corpus's), named `dir` (a run's folder or a model file), the step
 * empty when below 0 (a file that does not give it); the header first when *header is 0. */
static void eval_csv_rows(const char *dir, const gpt_model *m, int64_t step, int with_val, double val,
                          const double *ood, int *header) {
    const s2hc_config *c = &m->cfg;
    const long long batches = c->eval_batches, seqs = batches * (m->B > 0 ? m->B : c->batch), toks = seqs * m->T;
    if (!(*header)++) fputs(EVAL_CSV_HEADER, stdout);
    for (int i = with_val ? -1 : 0; i < c->n_ood; i++) {
        const double loss = i < 0 ? val : ood[i];
        csv_field_put(stdout, dir);
        putchar(',');
        if (step >= 0) printf("%lld", (long long)step);
        putchar(',');
        csv_field_put(stdout, i < 0 ? c->train_corpus : c->ood[i]);
        printf(",%s,", i < 0 ? "val" : "ood");
        csv_num_put(stdout, loss);
        putchar(',');
        csv_num_put(stdout, exp(loss));
        printf(",%lld,%lld,%lld\n", batches, seqs, toks);
    }
}

/* eval's options on a model's config (cfg, and m's copy): --batches, --ood (the key's own
 * parse and checks, on that config: its data.train is known) and --data. 0, or 2 after
 * a usage error. */
static int eval_options_apply(s2hc_config *cfg, gpt_model *m, const char *data_dir, const char *ood, int batches) {
    if (batches > 0) cfg->eval_batches = m->cfg.eval_batches = batches;
    if (ood) {
        char set[1200];
        snprintf(set, sizeof set, "data.ood=%s", ood);
        s2hc_config with = *cfg;
        if (strlen(ood) > 1000 || config_set(&with, set) != 0 || config_check_ood(&with, "eval --ood") != 0) {
            if (strlen(ood) > 1000) fprintf(stderr, "s2hc: error: eval: --ood: a list of at most 1000 bytes\n");
            return 2;
        }
        memcpy(cfg->ood, with.ood, sizeof cfg->ood);
        cfg->n_ood = with.n_ood;
        memcpy(m->cfg.ood, with.ood, sizeof m->cfg.ood);
        m->cfg.n_ood = with.n_ood;
    }
    if (data_dir) {
        snprintf(cfg->data_dir, sizeof cfg->data_dir, "%s", data_dir);
        snprintf(m->cfg.data_dir, sizeof m->cfg.data_dir, "%s", data_dir);
    }
    return 0;
}

int eval_val_open(const s2hc_config *cfg, data_shard *val, char *path, size_t pathlen, char *err,
                         size_t errlen) {
    data_shard_path(path, pathlen, cfg->data_dir, cfg->train_corpus, "val");
    if (shard_open(val, path, err, errlen) != 0) return -1;
    if (shard_fits(val, cfg->vocab, 0, err, errlen) != 0) {
        shard_close(val);
        return -1;
    }
    if (val->count < (uint64_t)cfg->block_size + 1) {
        snprintf(err, errlen, "%s: %llu tokens, fewer than block_size + 1 = %d: no validation window", path,
                 (unsigned long long)val->count, cfg->block_size + 1);
        shard_close(val);
        return -1;
    }
    return 0;
}

/* `s2hc eval` of one run: 0, 1 (it could not be evaluated) or 2 (a usage error). With
 * csv, its rows of the CSV (the header first when *header is 0) once the run file is
 * saved, and no table. */
static int eval_one(const char *dir, const char *data_dir, const char *ood, int batches, int csv, int *header) {
    s2hc_config cfg;
    gpt_model m;
    h5log log;
    int64_t ckpt_step = 0;
    int lock_fd;
    if (run_open_locked(dir, "s2hc eval", &lock_fd, &cfg, &m, &log, &ckpt_step) != 0) return 1;
    if (eval_options_apply(&cfg, &m, data_dir, ood, batches) != 0) {
        model_free(&m);
        h5log_free(&log);
        close(lock_fd);
        return 2;
    }
    char runp[1200], val_path[1200], err[1024];
    snprintf(runp, sizeof runp, "%s/run.h5", dir);
    /* without the validation corpus there is nothing to evaluate: fail before the run
       file gets a NaN row */
    data_shard val;
    int bad = eval_val_open(&cfg, &val, val_path, sizeof val_path, err, sizeof err) != 0;
    /* the validation set the run was evaluated on while training: one rebuilt since would
       add a row of another set's loss to the run's /eval series */
    if (!bad)
        bad = run_val_rebuilt(&log, val.count, val_path, runp, "its loss would not be the run's validation loss", err,
                              sizeof err);
    uint32_t vocab = bad ? 0 : shard_kind(&val);
    if (val.map) shard_close(&val);
    if (bad) fprintf(stderr, "s2hc: error: %s\n  (the run's validation corpus; --data DIR if it lives elsewhere)\n", err);
    /* and every out-of-domain corpus, as training checks them before its first step: a
       corpus skipped here would leave its earlier numbers beside this evaluation's */
    if (!bad && eval_ood_check(&cfg, vocab, ood ? "eval --ood" : "the run's config",
                               "--data DIR if the corpora live elsewhere") != 0)
        bad = 1;
    if (bad) {
        model_free(&m);
        h5log_free(&log);
        close(lock_fd);
        return 1;
    }
    model_alloc_acts(&m, cfg.batch);
    double *ood_loss = malloc_check((size_t)(m.cfg.n_ood > 0 ? m.cfg.n_ood : 1) * sizeof *ood_loss);
    const double val_loss = eval_all(&m, &log, ckpt_step, csv ? EVAL_CSV : EVAL_TABLE, NULL, ood_loss);
    int rc = h5log_save(&log, runp) == 0 ? 0 : 1;
    if (csv && rc == 0 && !stop_signal) eval_csv_rows(dir, &m, ckpt_step, 1, val_loss, ood_loss, header);
    free(ood_loss);
    h5log_free(&log);
    model_free(&m);
    close(lock_fd);
    return rc;
}

int eval_kind_fits(const data_shard *s, int of_ids, const char *file, char *err, size_t errlen) {
    const int ids = s->bytes_per_token != 1;
    if (ids == of_ids) return 0;
    snprintf(err, errlen, "%s: %s, but %s's model was trained on %s", s->path,
             ids ? "a tokenizer's ids (`data import --tokens uint16`)" : "bytes of text", file,
             of_ids ? "a tokenizer's ids" : "bytes of text");
    return -1;
}

/* `s2hc eval FILE.safetensors`: the model of an export (model_file_open, as `s2hc sample`
 * reads it; given: --config's, for a file without s2hc metadata), evaluated on the corpora
 * here and recorded nowhere. 0, 1 (it could not be evaluated) or 2 (a usage error); with
 * csv, its rows as eval_one's. */
static int eval_file(const char *path, const s2hc_config *given, const char *data_dir, const char *ood, int batches,
                     int csv, int *header) {
    s2hc_config cfg;
    gpt_model m;
    int64_t step = -1;
    int of_ids = 0;
    const int opened = model_file_open(path, "eval", given, &cfg, &m, &step, &of_ids);
    if (opened != 0) return opened;
    if (eval_options_apply(&cfg, &m, data_dir, ood, batches) != 0) {
        model_free(&m);
        return 2;
    }
    char val_path[1200], err[1024];
    const char *source = ood ? "eval --ood" : "the file's config";
    data_shard val;
    /* the training corpus's validation split, when that corpus is prepared here */
    data_shard_path(val_path, sizeof val_path, cfg.data_dir, cfg.train_corpus, "val");
    const int no_val = !file_exists(val_path);
    int bad = 0;
    uint32_t vocab = 0;
    if (no_val) {
        fprintf(stderr, "note: %s: its training corpus '%s' is not prepared in %s (no %s): its validation split is "
                "not evaluated, the out-of-domain corpora are (--data DIR where it is prepared)\n", path,
                cfg.train_corpus, cfg.data_dir, val_path);
    } else {
        bad = eval_val_open(&cfg, &val, val_path, sizeof val_path, err, sizeof err) != 0 ||
              eval_kind_fits(&val, of_ids, path, err, sizeof err) != 0;
        vocab = bad ? 0 : shard_kind(&val);
        if (val.map) shard_close(&val);
        if (bad)
            fprintf(stderr, "s2hc: error: %s\n  (the validation split of %s's training corpus; --data DIR if it "
                    "lives elsewhere)\n", err, path);
    }
    if (!bad && eval_ood_check(&cfg, vocab, source, "--data DIR if the corpora live elsewhere") != 0) bad = 1;
    /* without the training corpus, its kind of tokens (bytes or ids) is the metadata's */
    for (int i = 0; !bad && no_val && i < cfg.n_ood; i++) {
        data_shard o;
        if (eval_ood_open(&cfg, cfg.ood[i], 0, &o, err, sizeof err) != 0) continue; /* said above */
        if (eval_kind_fits(&o, of_ids, path, err, sizeof err) != 0) {
            fprintf(stderr, "s2hc: error: out-of-domain corpus '%s' (key 'data.ood' of %s): %s\n", cfg.ood[i], source,
                    err);
            bad = 1;
        }
        shard_close(&o);
    }
    if (!bad && no_val && cfg.n_ood == 0) {
        fprintf(stderr, "s2hc: error: eval: %s: nothing to evaluate: its training corpus is not prepared in %s and "
                "its config names no out-of-domain corpus (--data DIR, or --ood LIST)\n", path, cfg.data_dir);
        bad = 1;
    }
    if (bad) {
        model_free(&m);
        return 1;
    }
    model_alloc_acts(&m, cfg.batch);
    double *ood_loss = malloc_check((size_t)(m.cfg.n_ood > 0 ? m.cfg.n_ood : 1) * sizeof *ood_loss);
    const eval_source src = {path, no_val};
    const double val_loss = eval_all(&m, NULL, step, csv ? EVAL_CSV : EVAL_TABLE, &src, ood_loss);
    if (csv && !stop_signal) eval_csv_rows(path, &m, step, !no_val, val_loss, ood_loss, header);
    free(ood_loss);
    model_free(&m);
    return 0;
}

typedef struct {
    const char *data_dir, *ood;
    int batches, csv, header; /* header: the CSV's header row is out */
    const s2hc_config *given; /* --config's model for the files, or NULL */
} eval_opts;

/* One argument of `s2hc eval`: a model file (an export) or a run directory. */
static int eval_run(const char *dir, void *ctx) {
    eval_opts *o = ctx;
    const int file = model_file_arg(dir, "eval");
    if (file < 0) return 1;
    if (file) return eval_file(dir, o->given, o->data_dir, o->ood, o->batches, o->csv, &o->header);
    if (o->given) return model_file_not_run(dir, "eval");
    return eval_one(dir, o->data_dir, o->ood, o->batches, o->csv, &o->header);
}

int eval_main(int argc, char **argv) {
    const char *data_dir = NULL, *ood = NULL, *config = NULL;
    const char **dirs = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *dirs);
    const char **sets = malloc_check((size_t)(argc > 0 ? argc : 1) * sizeof *sets);
    int batches = 0, ndirs = 0, csv = 0, nsets = 0, rc = -1;
    opt_seen seen = {.cmd = "eval"};
    for (int i = 1, ended = 0; i < argc && rc < 0; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) dirs[ndirs++] = argv[i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { eval_usage(stdout); rc = 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--batches", 1))) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > 1000000) {
                fprintf(stderr, "s2hc: error: eval: --batches: expected a whole number in 1..1000000, got '%s'\n", v);
                rc = 2;
            }
            batches = (int)n;
        }
        else if ((v = opt_once(&seen, argc, argv, &i, "--data", 0))) data_dir = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--ood", 0))) ood = v;
        else if (!strcmp(argv[i], "--csv")) csv = 1;
        else if ((v = opt_once(&seen, argc, argv, &i, "--config", 0))) config = v;
        else if ((v = opt_arg(argc, argv, &i, "--set", 1))) sets[nsets++] = v;
        else {
            fprintf(stderr, "s2hc: error: eval: unknown option '%s'%s\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            rc = 2;
        }
    }
    s2hc_config given; /* --config's model, for the files without s2hc metadata */
    if (rc < 0 && !ndirs) { eval_usage(stderr); rc = 2; }
    if (rc < 0 && data_dir && !data_dir_fits(data_dir, "eval --data")) rc = 2;
    if (rc < 0 && model_file_config("eval", config, sets, nsets, &given) != 0) rc = 2;
    if (rc < 0) {
        eval_opts o = {data_dir, ood, batches, csv, 0, config ? &given : NULL};
        rc = runs_each(dirs, ndirs, csv ? stderr : stdout, eval_run, &o);
    }
    free(sets);
    free(dirs);
    return rc;
}
