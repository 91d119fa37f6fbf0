/* frame_bench.c: the hyper-connection frame's parts timed alone (`make bench-frame`).
 *
 * `s2hc bench` times whole steps, whose noise on a shared machine (±3 %) hides changes
 * of a millisecond or two in the frame; this program times the frame's own regions and
 * their parts, one thread, in nanoseconds per token and sublayer, so that a change to
 * the frame (harness/model.c's regions, the kernels of kernels/cpu/hc_frame.c and
 * hc_proj_bf16.c) can be measured before it is judged (docs/performance.md, log item 16
 * and "Where the time goes now"). It includes harness/model.c to reach its static
 * regions: what it times is the code the model runs.
 *
 *   cold   the streams are out of cache, as after a sublayer's own work in a step: a
 *          32 MB write between passes evicts them. Best of --reps, over the sublayers.
 *            forward region   write-back of sublayer l and coefficients of l + 1, by chunks
 *            backward region  everything hc_frame_in_backward does, its zeroing included
 *            write-back       X_{l+1} = H X_l + post f alone, and its rms
 *            dots + dX        the backward's dots and its dX pass alone (dX with the
 *                             projection's term dz W' and the previous sublayer's df)
 *            zeroing          the zeroing of the next sublayer's gradient scratch in one
 *                             pass (which the frame's region does for rc's kernels, a
 *                             piece per token: rc pays it too)
 *            floor fwd/bwd    the passes over the streams with nothing else (as the
 *                             bench's frame floor: no projection, no method)
 *   hot    the same parts over 256 tokens already in cache: what they cost as compute.
 *
 * With --stream-bf16 the cold forward and backward regions and the cold write-back run on
 * a twin model whose training step stored its streams in bf16 (residual.stream_precision);
 * the other parts, which run the same code on fp32 rows either way, on the fp32 model.
 *
 * The streams are in a training step's layout, channel blocks (kernels/cpu/hc_frame.c,
 * hc_xv); with --rows, stream by stream, as evaluations keep them.
 *
 * usage: frame_bench [--preset tiny|small] [--n N] [--methods a,b,...] [--reps R] [--bf16]
 *                    [--stream-bf16] [--rows]
 */
#include <time.h>
#include "../harness/model.c"
#include "../harness/config.h"
#include "../harness/presets.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float *junk;
static const size_t junk_n = (size_t)32 << 18; /* 32 MB of floats */
static int junk_round;
static void evict(void) { memset(junk, ++junk_round & 0x7f, junk_n * sizeof(float)); }

#define MIN_OF(best, expr)             \
    do {                               \
        double t0_ = cpu_now();        \
        expr;                          \
        double dt_ = cpu_now() - t0_;  \
        if (dt_ < (best)) best = dt_;  \
    } while (0)

typedef struct {
    double fwd, bwd, out, dotsdx, zero, floor_f, floor_b;         /* cold */
    double h_z, h_mf, h_read, h_out, h_dots, h_mb, h_dx, h_dw; /* hot */
} frame_times;

/* The floor's passes (bench.c's frame_floor_cpu) on the model's own buffers, sublayer l. */
static void floor_forward(const real *X, const real *f, real *Y, real *u, size_t N, int n, int C) {
    for (size_t t = 0; t < N; t++) {
        const real *x = X + t * n * C, *ff = f + t * C;
        real *y = Y + t * n * C, *ut = u + t * C;
        for (int i = 0; i < n; i++)
#pragma omp simd
            for (int c = 0; c < C; c++) y[i * C + c] = x[i * C + c] + ff[c];
#pragma omp simd
        for (int c = 0; c < C; c++) ut[c] = y[c];
        for (int i = 1; i < n; i++)
#pragma omp simd
            for (int c = 0; c < C; c++) ut[c] += y[i * C + c];
    }
}

static void floor_backward(const real *X, const real *f, const real *du, real *dY, real *df, size_t N, int n, int C) {
    for (size_t t = 0; t < N; t++) {
        const real *x = X + t * n * C, *ff = f + t * C, *d = du + t * C;
        real *dy = dY + t * n * C, *o = df + t * C, a = 0;
#pragma omp simd reduction(+ : a)
        for (int c = 0; c < C; c++) a += d[c] * ff[c];
        a = a * (real)1e-9; /* keeps dY from growing over the repetitions */
        for (int i = 0; i < n; i++)
#pragma omp simd
            for (int c = 0; c < C; c++) dy[i * C + c] += a * x[i * C + c];
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] = dy[c];
        for (int i = 1; i < n; i++)
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] += dy[i * C + c];
    }
}

/* The three products as the model runs them: fp32, or with bf16 operands (--bf16). */

/* W' for the dX pass, reals: in dX's blocks, or its bf16 layouts */
static size_t fb_weights_dx_size(const hc_dims *d) {
    return hc_max_size(d->KD, hc_amx_pz_row(d->nC) * 16 * (size_t)hc_amx_kq(d->Kr));
}

/* The dX pass of g tokens from g0 as hc_tokens_backward runs it for its kind (hc_dx_kind_of):
 * with bf16 operands, dz's pairs first, or the group's products by tiles, or dz rounded. */
static void fb_tokens_dx(const gpt_model *m, const hc_scratch *hs, const hc_acts *h, const hc_dims *d, size_t g0,
                         int g, const real *dY, const real *du, real *dX, real *dz, const real *cj,
                         const real *pj, const real *Wb, const real *wsum, real *sum) {
    const hc_dx_kind kind = hc_dx_kind_of(m, d);
    uint32_t *zp = NULL;
    real *pz = NULL;
    switch (kind) {
#if HC_AMX
    case HC_DX_TILES:
        pz = hs->base + hs->bf16 + hs->bp.pz;
        hc_amx_begin(); /* per group here: hc_tokens_backward's once per chunk is ~5 ns a token less */
        hc_dx_products_amx(dz + g0 * d->K, g, d->Kr, d->nC, Wb, (uint32_t *)(hs->base + hs->bf16 + hs->bp.zp), pz);
        _tile_release();
        break;
    case HC_DX_ROUNDED: hc_bf16_round_n(dz + g0 * d->K, (size_t)g * d->K); break; /* the bench's own scratch */
#endif
#if HC_BF16
    case HC_DX_PAIRS:
        zp = (uint32_t *)(hs->base + hs->bf16 + hs->bp.zp);
        hc_dz_pairs_bf16(d, dz + g0 * d->K, g, zp);
        break;
#endif
    default: (void)hs;
    }
    hc_tokens_dx(h, d, g0, g, h->X + g0 * d->nC, dY, du, dX, dz, cj, pj, Wb, wsum, sum, zp, pz);
}

static void fb_x_wt(const gpt_model *m, const hc_scratch *hs, real *Z, const real *X, const real *Wg, size_t rows,
                    const hc_dims *d) {
#if HC_BF16
    if (m->proj_bf16) {
        real *bf = hs->base + hs->bf16;
        hc_x_wt_bf16(Z, X, bf + hs->bp.wf, rows, d->Kr, d->D, bf + hs->bp.ax, m->proj_amx);
        return;
    }
#endif
    (void)m, (void)hs;
    hc_x_wt(Z, X, Wg, rows, d->Kr, d->D);
}

static void fb_at_x(const gpt_model *m, const hc_scratch *hs, real *M, const real *A, const real *X, size_t rows,
                    const hc_dims *d) {
#if HC_BF16
    if (m->proj_bf16) { hc_at_x_bf16(M, A, X, rows, d->Kr, d->D, hs->base + hs->bf16 + hs->bp.ax, m->proj_amx); return; }
#endif
    (void)m, (void)hs;
    hc_at_x(M, A, X, rows, d->Kr, d->D);
}

static int time_method(const char *preset, const char *method, int n, int reps, int bf16, int sbf16, int rows,
                       frame_times *r) {
    s2hc_config c;
    config_defaults(&c);
    if (bf16) snprintf(c.proj_precision, sizeof c.proj_precision, "bf16");
    if (preset_apply(&c, preset)) {
        fprintf(stderr, "frame_bench: unknown preset '%s' (tiny, small)\n", preset);
        return 1;
    }
    snprintf(c.method, sizeof c.method, "%s", method);
    c.n_streams = strcmp(method, "rc") ? n : 1; /* rc builds, then is refused below */
    gpt_model m;
    char err[512];
    if (model_build(&m, &c, err, sizeof err)) {
        fprintf(stderr, "frame_bench: %s: %s\n", method, err);
        return 1;
    }
    if (!m.variant) {
        fprintf(stderr, "frame_bench: %s has no hyper-connection frame\n", method);
        model_free(&m);
        return 1;
    }
    model_init(&m, 1);
    const int B = c.batch;
    const size_t N = (size_t)B * m.T;
    int *in = malloc_check(N * sizeof(int)), *tg = malloc_check(N * sizeof(int));
    for (size_t i = 0; i < N; i++) {
        in[i] = (int)(i * 7 % (size_t)m.V);
        tg[i] = (int)(i * 13 % (size_t)m.V);
    }
    model_forward(&m, in, tg, B); /* activations, coefficients, gradients: real values */
    model_zero_grad(&m);
    model_backward(&m, 1);
    grad_layout gl = layout_grads(&m, B);
    hc_scratch hs = hc_scratch_of(&m, &gl);
    real *dY = m.grad_acts + gl.dX, *du = m.grad_acts + gl.du, *df = m.grad_acts + gl.df, *dz = m.grad_acts + gl.dz;
    /* the cold regions' model: m, or (--stream-bf16) its twin after a step with bf16 streams */
    gpt_model mb, *mc = &m;
    if (sbf16) {
        snprintf(c.stream_precision, sizeof c.stream_precision, "bf16");
        if (model_build(&mb, &c, err, sizeof err)) die(1, "frame_bench: %s: %s", method, err);
        model_init(&mb, 1);
        model_zero_grad(&mb);
        model_forward_backward(&mb, in, tg, B, 1); /* one thread: the two calls, streams in bf16 */
        mb.stream_bf16_on = 1;
        mc = &mb;
    }
    /* the streams in a training step's layout (channel blocks), or (--rows) stream by stream */
    m.stream_blk_on = mc->stream_blk_on = !rows;
    grad_layout glc = layout_grads(mc, B);
    hc_scratch hsc = hc_scratch_of(mc, &glc);
    real *stc = hsc.base + hsc.stage; /* the staging rows of thread 0 */
    real *dYc = mc->grad_acts + glc.dX, *duc = mc->grad_acts + glc.du, *dfc = mc->grad_acts + glc.df;
    real *dzc = mc->grad_acts + glc.dz;
    const int L = m.Lh - 1; /* sublayers 1 .. Lh - 1 backward, 0 .. Lh - 2 forward */
    hc_dims d = hc_dims_of(&m);
    memset(r, 0, sizeof *r);

    /* cold: the regions and passes, summed over the sublayers, best of reps */
    double b[7];
    for (int k = 0; k < 7; k++) b[k] = INFINITY;
    for (int rep = 0; rep < reps; rep++) {
        double s[7] = {0};
        for (int l = 0; l < L; l++) {
            double t0;
            evict();
            t0 = cpu_now();
            hc_frames_forward(mc, l, l + 1, &hsc, N, NULL, NULL);
            s[0] += cpu_now() - t0;
            evict();
            t0 = cpu_now();
            hc_frame_in_backward(mc, l + 1, dYc, duc, dYc, dfc, NULL, dzc, &hsc, &glc, N);
            s[1] += cpu_now() - t0;
            evict();
            t0 = cpu_now();
            for (size_t c0 = 0; c0 < N; c0 += HC_CHUNK) /* by chunks: the staging rows hold one */
                hc_out_range(mc, l, model_streams(mc, l + 1), model_hc_acts(mc, l + 1).rstd, NULL, c0,
                             c0 + HC_CHUNK < N ? c0 + HC_CHUNK : N, sbf16 ? stc : NULL);
            s[2] += cpu_now() - t0;
            hc_acts h = model_hc_acts(&m, l + 1), a0 = model_hc_acts(&m, l);
            real dpre[HC_MAX_N], dpost[HC_MAX_N], dH[HC_MM], cj[HC_LANES * HC_MAX_N], pj[HC_LANES * HC_MAX_N];
            const hc_params pl = hc_params_of(&m, l + 1);
            real *Wbl = hc_dx_weights_at(hc_dx_kind_of(&m, &d), &hs, 0); /* where the model keeps it */
            hc_dx_weights(hc_dx_kind_of(&m, &d), Wbl, &pl, &d); /* sublayer l + 1's W' for dX's term */
            evict();
            t0 = cpu_now();
            for (size_t g0 = 0; g0 < N; g0 += HC_LANES) {
                const int g = N - g0 < HC_LANES ? (int)(N - g0) : HC_LANES;
                for (int i = 0; i < g; i++) {
                    hc_token_grads(&h, &d, g0 + i, h.X + (g0 + i) * d.nC, dY, du, dH, dpost, dpre);
                    hc_token_dx_coefs(&h, &d, g0 + i, 1, dz, cj + i * d.n, pj + i * d.n);
                }
                fb_tokens_dx(&m, &hs, &h, &d, g0, g, dY, du, dY, dz, cj, pj, Wbl, a0.post, df);
            }
            s[3] += cpu_now() - t0;
            evict();
            t0 = cpu_now();
            zero_sublayer_scratch(&m, &gl, l, N);
            s[4] += cpu_now() - t0;
        }
        for (int k = 0; k < 5; k++) b[k] = s[k] < b[k] ? s[k] : b[k];
    }
    /* hot: 256 tokens (or all) in cache, best of many */
    const size_t NT = N < 256 ? N : 256;
    const int lanes = hc_lanes(&m.spec), K = d.K, cs = m.spec.cache;
    hc_acts h = model_hc_acts(&m, 1), h0 = model_hc_acts(&m, 0);
    hc_params p = hc_params_of(&m, 1);
    real *Wg = hs.base, *myM = Wg + d.KD, *myth = myM + d.KD;
    real dpre[HC_LANES * HC_MAX_N], dpost[HC_LANES * HC_MAX_N], dH[HC_LANES * HC_MM];
    real cj[HC_LANES * HC_MAX_N], pj[HC_LANES * HC_MAX_N];
    double hb[8];
    for (int k = 0; k < 8; k++) hb[k] = INFINITY;
    hc_scaled_weight(Wg, &p, &d);
#if HC_BF16
    if (m.proj_bf16) hc_scaled_weight_bf16(hs.base + hs.bf16 + hs.bp.wf, &p, &d, m.proj_amx);
#endif
    real *Wb = malloc_check(fb_weights_dx_size(&d) * sizeof(real)); /* W' for dX */
    hc_dx_weights(hc_dx_kind_of(&m, &d), Wb, &p, &d);
    for (int rep = 0; rep < 20 * reps; rep++) {
        MIN_OF(hb[0], for (size_t c0 = 0; c0 < NT; c0 += HC_CHUNK) {
            const size_t c1 = c0 + HC_CHUNK < NT ? c0 + HC_CHUNK : NT;
            fb_x_wt(&m, &hs, h.z + c0 * K, h.X + c0 * d.nC, Wg, (c1 - c0) * d.rpt, &d);
        });
        MIN_OF(hb[1], hc_forward_tokens(&m.spec, p.theta, h.z, (int)NT, h.pre, h.post, h.H, h.cache));
        MIN_OF(hb[2], for (size_t t = 0; t < NT; t++) hc_combine(h.u + t * d.C, h.pre + t * d.n, h.X + t * d.nC, d.n,
                                                                  d.C, d.blk));
        MIN_OF(hb[3], hc_out_range(&m, 1, model_streams(&m, 2), model_hc_acts(&m, 2).rstd, NULL, 0, NT, NULL));
        MIN_OF(hb[4], for (size_t g0 = 0; g0 < NT; g0 += (size_t)lanes) for (int i = 0; i < lanes; i++)
                          hc_token_grads(&h, &d, g0 + i, h.X + (g0 + i) * d.nC, dY, du, dH + i * d.n * d.n,
                                         dpost + i * d.n, dpre + i * d.n));
        MIN_OF(hb[5], for (size_t g0 = 0; g0 < NT; g0 += (size_t)lanes)
                          hc_backward_tokens(&m.spec, p.theta, h.z + g0 * K, h.cache + g0 * cs, lanes, dpre, dpost, dH,
                                             dz + g0 * K, myth));
        MIN_OF(hb[6], for (size_t g0 = 0; g0 < NT; g0 += (size_t)lanes) {
            for (int i = 0; i < lanes; i++) hc_token_dx_coefs(&h, &d, g0 + i, 1, dz, cj + i * d.n, pj + i * d.n);
            fb_tokens_dx(&m, &hs, &h, &d, g0, lanes, dY, du, dY, dz, cj, pj, Wb, h0.post, df);
        });
        MIN_OF(hb[7], fb_at_x(&m, &hs, myM, dz, h.X, NT * d.rpt, &d));
    }
    /* the floor last: it writes over the model's streams and gradients */
    for (int rep = 0; rep < reps; rep++) {
        double s5 = 0, s6 = 0;
        for (int l = 0; l < L; l++) {
            hc_acts a = model_hc_acts(&m, l), a1 = model_hc_acts(&m, l + 1);
            evict();
            double t0 = cpu_now();
            floor_forward(a.X, a.f, model_streams(&m, l + 1), a1.u, N, d.n, d.C);
            s5 += cpu_now() - t0;
            evict();
            t0 = cpu_now();
            floor_backward(a1.X, a1.f, du, dY, df, N, d.n, d.C);
            s6 += cpu_now() - t0;
        }
        b[5] = s5 < b[5] ? s5 : b[5];
        b[6] = s6 < b[6] ? s6 : b[6];
    }
    const double cold = 1e9 / ((double)L * (double)N), hot = 1e9 / (double)NT;
    r->fwd = b[0] * cold, r->bwd = b[1] * cold, r->out = b[2] * cold, r->dotsdx = b[3] * cold, r->zero = b[4] * cold;
    r->floor_f = b[5] * cold, r->floor_b = b[6] * cold;
    double *hv[8] = {&r->h_z, &r->h_mf, &r->h_read, &r->h_out, &r->h_dots, &r->h_mb, &r->h_dx, &r->h_dw};
    for (int k = 0; k < 8; k++) *hv[k] = hb[k] * hot;
    printf("%-11s %3d %5.0f %5.0f | %6.0f %6.0f %6.0f %6.0f %6.0f | %6.0f %6.0f | %5.0f %6.0f %5.0f %5.0f %5.0f | %5.0f %6.0f %5.0f %5.0f\n",
           method, K, r->floor_f, r->floor_b, r->fwd, r->bwd, r->out, r->dotsdx, r->zero, r->fwd - r->floor_f,
           r->bwd - r->zero - r->floor_b, r->h_out, r->h_z, r->h_mf, r->h_read, r->h_out + r->h_z + r->h_mf + r->h_read,
           r->h_dots, r->h_mb, r->h_dx, r->h_dw);
    fflush(stdout);
    free(Wb);
    free(in);
    free(tg);
    model_free(&m);
    if (sbf16) model_free(&mb);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f, "usage: frame_bench [--preset tiny|small] [--n N] [--methods a,b,...] [--reps R] [--bf16]\n"
               "                   [--stream-bf16] [--rows]\n"
               "The hyper-connection frame's regions and their parts timed alone, one thread, in ns per token\n"
               "and sublayer (tools/frame_bench.c and docs/performance.md explain every column).\n"
               "  --preset P    model shape (default small)\n"
               "  --n N         streams (default 4)\n"
               "  --methods M   comma-separated residual methods (default identity,hc,mhc,s2hc)\n"
               "  --reps R      repetitions, the best kept (default 5)\n"
               "  --bf16        the projection's products with bf16 operands (residual.proj_precision: bf16)\n"
               "  --stream-bf16 the cold regions and write-back with the streams in bf16\n"
               "                (residual.stream_precision: bf16)\n"
               "  --rows        the streams stream by stream (as evaluations keep them), not in the\n"
               "                training steps' channel blocks\n");
}

int main(int argc, char **argv) {
    runtime_env_fixup(argv);
    runtime_flush_denormals();
    const char *preset = "small", *methods = "identity,hc,mhc,s2hc";
    int n = 4, reps = 5, bf16 = 0, sbf16 = 0, rows = 0;
    for (int i = 1; i < argc; i++) {
        const int more = i + 1 < argc;
        char *end = NULL;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--preset") && more) {
            preset = argv[++i];
        } else if (!strcmp(argv[i], "--bf16")) {
            bf16 = 1;
        } else if (!strcmp(argv[i], "--stream-bf16")) {
            sbf16 = 1;
        } else if (!strcmp(argv[i], "--rows")) {
            rows = 1;
        } else if (!strcmp(argv[i], "--methods") && more) {
            methods = argv[++i];
        } else if ((!strcmp(argv[i], "--n") || !strcmp(argv[i], "--reps")) && more) {
            const char *opt = argv[i];
            long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end || v < 1 || v > (opt[2] == 'n' ? HC_MAX_N : 1000)) {
                fprintf(stderr, "frame_bench: %s: expected a whole number in 1..%d, got '%s'\n", opt,
                        opt[2] == 'n' ? HC_MAX_N : 1000, argv[i]);
                return 2;
            }
            if (opt[2] == 'n') n = (int)v;
            else reps = (int)v;
        } else {
            usage(stderr);
            return 2;
        }
    }
    /* the preset and every method name checked before anything is timed: a typo at the
       end of the list is not found after minutes of the others */
    s2hc_config pc;
    config_defaults(&pc);
    if (preset_apply(&pc, preset)) {
        fprintf(stderr, "frame_bench: --preset: unknown preset '%s' (tiny, small)\n", preset);
        return 2;
    }
    char check[512];
    int count = 0;
    snprintf(check, sizeof check, "%s", methods);
    for (char *save = NULL, *tok = strtok_r(check, ",", &save); tok; tok = strtok_r(NULL, ",", &save), count++)
        if (strcmp(tok, "rc") && !hc_variant_find(tok)) {
            fprintf(stderr, "frame_bench: --methods: unknown method '%s'\n", tok);
            return 2;
        }
    if (!count) {
        fprintf(stderr, "frame_bench: --methods: no method in '%s'\n", methods);
        return 2;
    }
    omp_set_num_threads(1); /* model_alloc_acts sizes the frame scratch for this */
    junk = calloc_huge(junk_n, sizeof(float));
    printf("frame_bench: preset %s, n = %d, one thread, ns per token and sublayer (best of %d)%s%s%s\n", preset, n,
           reps, !bf16 ? "" : model_amx_usable() ? ", projection products in bf16 by AMX tiles" : ", projection products in bf16", sbf16 ? ", cold regions with bf16 streams" : "",
           rows ? ", streams in rows" : "");
    printf("%-11s %3s %11s | %-34s | %-13s | %-29s | %s\n", "", "", "floor", "cold", "cold over floor",
           "hot forward", "hot backward");
    printf("%-11s %3s %5s %5s | %6s %6s %6s %6s %6s | %6s %6s | %5s %6s %5s %5s %5s | %5s %6s %5s %5s\n",
           "method", "K", "fwd", "bwd", "fwd", "bwd", "wback", "dotsdX", "zero", "fwd", "bwd-z", "wback", "zGEMM",
           "meth", "read", "sum", "dots", "meth", "dX", "dW");
    char list[512];
    snprintf(list, sizeof list, "%s", methods);
    int status = 0;
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        frame_times r;
        status |= time_method(preset, tok, n, reps, bf16, sbf16, rows, &r);
    }
    free(junk);
    return status;
}
