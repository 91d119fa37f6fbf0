/* attention.c: causal multi-head self-attention, parallel over (batch, head) pairs in
 * both directions. Every pair writes its own slice of the outputs, and each output value
 * is summed in an order fixed by the shapes alone, so results are bit-identical for any
 * thread count.
 *
 * Layout (see kernels.h): qkv (B, T, 3C) = q | k | v; head h uses channels
 * [h*hs, (h+1)*hs) of each part, hs = C/NH. Within one batch row b the head-h views
 * Q, K, V are (T, hs) matrices with row stride 3C; the output view O is (T, hs) with
 * row stride C; P = att[b, h] is (T, T) with row stride T.
 *
 * The products are this file's own register tiles, not BLAS: at the shapes of a head
 * (T of 64-1024 by hs of 16-128) a BLAS call spends as much time packing its operands
 * and zeroing or scaling its output as multiplying (docs/performance.md item 50). Two
 * tiles do all six products:
 * - att_abt, S = alpha A B^T (the scores Q K^T and dP = dO V^T): a few query rows by a
 *   few vectors of keys, over a copy of B transposed (keys along the vector lanes);
 *   causal, a tile stops at the key vector that holds its last row's diagonal.
 * - att_ab, O (+)= A B over k with the channels along the lanes (O = P V, dQ = dS K), or
 *   the same with A read down its columns (dK = dS^T Q, dV = P^T dO); causal, a tile of
 *   rows runs k over what its rows reach, so it reads a band of A just across the
 *   diagonal, where A is 0: P by the softmax, dS by its row loop below.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_blas.h"
#include "kernels/cpu/cpu_math.h"

#if CPU_NREGS >= 32
#define ATT_R 6    /* query rows of an att_abt tile: 6 x 4 accumulators, 4 key vectors, a broadcast */
#define ATT_NV 4   /* key vectors of an att_abt tile */
#define ATT_ACC 24 /* accumulators of an att_ab tile (rows x channel vectors) */
#define ATT_NC 4   /* most channel vectors of an att_ab tile */
#else
#define ATT_R 4
#define ATT_NV 3
#define ATT_ACC 12
#define ATT_NC 2
#endif
#define ATT_R2 12 /* most rows of an att_ab tile */
#define ATT_SLAB (128 * 1024) /* reals of A per chunk of att_ab's transposed passes: within L2 */
#define ATT_ROWS(nc) (ATT_ACC / (nc) < ATT_R2 ? ATT_ACC / (nc) : ATT_R2)

static void attention_check(const char *op, int B, int T, int C, int NH) {
    if (B < 0 || T < 0 || C <= 0 || NH <= 0 || C % NH != 0) cpu_fatal(op, "need C > 0 divisible by NH > 0");
    cpu_dim((size_t)3 * (size_t)C, op);
    cpu_dim((size_t)B * (size_t)NH, op);
}

/* This thread's scratch of at least n reals, kept for its next call (allocated at its
 * first call and when a larger one comes: no allocation in a training step after the
 * first), and freed when the thread exits (the key's destructor). */
static pthread_key_t att_key;
static pthread_once_t att_key_once = PTHREAD_ONCE_INIT;
static void att_key_create(void) {
    if (pthread_key_create(&att_key, free)) cpu_fatal("attention", "pthread_key_create failed");
}
static real *att_scratch(size_t n) {
    static _Thread_local real *buf;
    static _Thread_local size_t cap;
    if (n > cap) {
        pthread_once(&att_key_once, att_key_create);
        free(buf);
        size_t bytes = (n * sizeof(real) + 63) / 64 * 64;
        buf = aligned_alloc(64, bytes);
        if (!buf || pthread_setspecific(att_key, buf))
            cpu_fatal("attention", "out of memory for the per-thread scratch");
        cap = bytes / sizeof(real);
    }
    return buf;
}

/* r[0..CPU_VL) transposed in place (lane l of row i <-> lane i of row l): at each w,
 * the off-diagonal w x w blocks of every 2w x 2w block swap, two-source shuffles. */
static inline __attribute__((always_inline)) void att_vtranspose(cpu_vec *r) {
    const cpu_ivec iota = CPU_IOTA;
#pragma GCC unroll 8
    for (int w = CPU_VL / 2; w >= 1; w /= 2) {
        const cpu_ivec hi = (iota & w) != 0;
        const cpu_ivec lo_m = iota + (hi & (CPU_VL - w)), hi_m = iota + w + (hi & (CPU_VL - w));
#pragma GCC unroll 16
        for (int i = 0; i < CPU_VL; i++) {
            if (i & w) continue;
            const cpu_vec a = r[i], b = r[i + w];
            r[i] = cpu_shuffle2(a, b, lo_m);
            r[i + w] = cpu_shuffle2(a, b, hi_m);
        }
    }
}

/* Bt (hs, Tp) = B^T for B (T, hs) with row stride ldb; keys T..Tp-1 zero. By blocks of
 * CPU_VL x CPU_VL in registers, the edges value by value. */
static void att_transpose(real *Bt, int Tp, const real *Bm, int ldb, int T, int hs) {
    const int T1 = T / CPU_VL * CPU_VL, h1 = hs / CPU_VL * CPU_VL;
    for (int j = 0; j < T1; j += CPU_VL)
        for (int d = 0; d < h1; d += CPU_VL) {
            cpu_vec r[CPU_VL];
            for (int i = 0; i < CPU_VL; i++) r[i] = cpu_vload(Bm + (size_t)(j + i) * ldb + d);
            att_vtranspose(r);
            for (int i = 0; i < CPU_VL; i++) cpu_vstore(Bt + (size_t)(d + i) * Tp + j, r[i]);
        }
    for (int d = 0; d < hs; d++) {
        real *row = Bt + (size_t)d * Tp;
        for (int j = d < h1 ? T1 : 0; j < T; j++) row[j] = Bm[(size_t)j * ldb + d];
        for (int j = T; j < Tp; j++) row[j] = 0;
    }
}

/* Store the first `lanes` of v (all of them when lanes >= CPU_VL). */
static inline void att_store(real *p, cpu_vec v, int lanes) {
    if (lanes >= CPU_VL) cpu_vstore(p, v);
    else memcpy(p, &v, (size_t)lanes * sizeof(real));
}

CPU_CONTRACT_FAST
/* One tile of S = alpha A Bt over key vectors [j, j + nv VL): rows a[0..ATT_R) (rows past
 * nrows repeat the last and are not stored), lanes past T not stored. */
static inline __attribute__((always_inline)) void att_abt_tile(const int nv, real *S, int lds, const real *const *a,
                                                               const real *Bt, int Tp, int hs, int j, real alpha,
                                                               int nrows, int T) {
    cpu_vec acc[ATT_R][ATT_NV];
#pragma GCC unroll 8
    for (int r = 0; r < ATT_R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) acc[r][v] = (cpu_vec){0};
    const real *b = Bt + j;
    for (int d = 0; d < hs; d++, b += Tp) {
        cpu_vec bv[ATT_NV];
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++) bv[v] = cpu_vload(b + v * CPU_VL);
#pragma GCC unroll 8
        for (int r = 0; r < ATT_R; r++) {
            const real ar = a[r][d];
#pragma GCC unroll 4
            for (int v = 0; v < nv; v++) acc[r][v] += ar * bv[v];
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < ATT_R; r++) {
        if (r >= nrows) break;
#pragma GCC unroll 4
        for (int v = 0; v < nv; v++)
            att_store(S + (size_t)r * lds + j + v * CPU_VL, alpha * acc[r][v], T - j - v * CPU_VL);
    }
}

/* The tiles of one block of score rows, key vectors [0, nvec). */
static void att_abt_rows(real *Si, int lds, const real *const *a, const real *Bt, int Tp, int hs, int nvec,
                         real alpha, int nrows, int T) {
    int v = 0;
    for (; v + ATT_NV <= nvec; v += ATT_NV) att_abt_tile(ATT_NV, Si, lds, a, Bt, Tp, hs, v * CPU_VL, alpha, nrows, T);
    for (; v < nvec; v++) att_abt_tile(1, Si, lds, a, Bt, Tp, hs, v * CPU_VL, alpha, nrows, T);
}
CPU_CONTRACT_END

/* S rows [0, T) (row stride lds) = alpha A B^T on and below the diagonal, A (T, hs) with
 * row stride lda, Bt = B^T as att_transpose made it. Each row also gets values right of
 * its diagonal up to the end of the tile's last key vector (never past T), which the
 * callers overwrite. */
static void att_abt(real *S, int lds, const real *A, int lda, const real *Bt, int Tp, int T, int hs, real alpha) {
    for (int i0 = 0; i0 < T; i0 += ATT_R) {
        const int nrows = T - i0 < ATT_R ? T - i0 : ATT_R;
        const real *a[ATT_R];
        for (int r = 0; r < ATT_R; r++) a[r] = A + (size_t)(i0 + (r < nrows ? r : nrows - 1)) * lda;
        const int nvec = (i0 + nrows + CPU_VL - 1) / CPU_VL; /* key vectors up to the last row's diagonal */
        att_abt_rows(S + (size_t)i0 * lds, lds, a, Bt, Tp, hs, nvec, alpha, nrows, T);
    }
}

CPU_CONTRACT_FAST
/* One tile of att_ab: R rows a(r, .) = a[r][k * aks] for k in [k0, k1) by channels
 * [c, c + nc VL); rows past nrows repeat the last and are not stored. */
static inline __attribute__((always_inline)) void att_ab_tile(const int R, const int nc, real *O, int ldo,
                                                              const real *const *a, ptrdiff_t aks, const real *Bm,
                                                              int ldb, int k0, int k1, int c, int nrows, int add) {
    cpu_vec acc[ATT_R2][ATT_NC];
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
#pragma GCC unroll 4
        for (int v = 0; v < nc; v++) acc[r][v] = (cpu_vec){0};
    for (int k = k0; k < k1; k++) {
        cpu_vec bv[ATT_NC];
        const real *b = Bm + (size_t)k * ldb + c;
#pragma GCC unroll 4
        for (int v = 0; v < nc; v++) bv[v] = cpu_vload(b + v * CPU_VL);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const real ar = a[r][k * aks];
#pragma GCC unroll 4
            for (int v = 0; v < nc; v++) acc[r][v] += ar * bv[v];
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; r++) {
        if (r >= nrows) break;
#pragma GCC unroll 4
        for (int v = 0; v < nc; v++) {
            real *o = O + (size_t)r * ldo + c + v * CPU_VL;
            cpu_vstore(o, add ? cpu_vload(o) + acc[r][v] : acc[r][v]);
        }
    }
}

/* A tile of R rows of att_ab over all hs channels: chunks of nc0 vectors, then the
 * vectors left (fewer), then the channels short of a vector one by one. The chunks reuse
 * the tile's rows of A from L1. */
static inline __attribute__((always_inline)) void att_ab_rows(const int R, const int nc0, real *Oi, int ldo,
                                                              const real *const *a, ptrdiff_t ks, const real *Bm,
                                                              int ldb, int k0, int k1, int hs, int nrows, int add) {
    int c = 0;
    if (nc0)
        for (; c + nc0 * CPU_VL <= hs; c += nc0 * CPU_VL)
            att_ab_tile(R, nc0, Oi, ldo, a, ks, Bm, ldb, k0, k1, c, nrows, add);
    const int left = (hs - c) / CPU_VL; /* < nc0 */
    if (ATT_NC > 3 && nc0 > 3 && left == 3) att_ab_tile(R, 3, Oi, ldo, a, ks, Bm, ldb, k0, k1, c, nrows, add);
    if (ATT_NC > 2 && nc0 > 2 && left == 2) att_ab_tile(R, 2, Oi, ldo, a, ks, Bm, ldb, k0, k1, c, nrows, add);
    if (nc0 > 1 && left == 1) att_ab_tile(R, 1, Oi, ldo, a, ks, Bm, ldb, k0, k1, c, nrows, add);
    for (c += left * CPU_VL; c < hs; c++)
        for (int r = 0; r < nrows; r++) {
            real sum = 0;
            for (int k = k0; k < k1; k++) sum += a[r][k * ks] * Bm[(size_t)k * ldb + c];
            real *o = Oi + (size_t)r * ldo + c;
            *o = add ? *o + sum : sum;
        }
}

/* att_ab by tiles of R rows, nc0 channel vectors at a time. Transposed, k runs in chunks
 * of kc rows of A (all the tiles of a chunk, then the next chunk: A read down its
 * columns stays in L2), each tile's sums added into O chunk after chunk (so transposed,
 * att_ab adds). */
static inline __attribute__((always_inline)) void att_ab_pass(const int R, const int nc0, real *O, int ldo,
                                                              const real *A, int lda, int trans, const real *Bm,
                                                              int ldb, int T, int hs, int add, int kc) {
    const ptrdiff_t rs = trans ? 1 : lda, ks = trans ? lda : 1;
    for (int kb = 0; kb < T; kb += trans ? kc : T)
        for (int i0 = 0; i0 < (trans && kb + kc < T ? kb + kc : T); i0 += R) {
            const int nrows = T - i0 < R ? T - i0 : R;
            const int k0 = trans ? (i0 > kb ? i0 : kb) : 0, k1 = trans ? (kb + kc < T ? kb + kc : T) : i0 + nrows;
            const real *a[ATT_R2];
            for (int r = 0; r < R; r++) a[r] = A + (i0 + (r < nrows ? r : nrows - 1)) * rs;
            att_ab_rows(R, nc0, O + (size_t)i0 * ldo, ldo, a, ks, Bm, ldb, k0, k1, hs, nrows, add);
        }
}

/* O rows [0, T) of hs channels (row stride ldo) = (add: +=) A B, B (T, hs) with row
 * stride ldb, causal:
 *   lower (trans 0): O[i] = sum_{k <= i} A[i][k] B[k], A (T, T) row stride lda;
 *   upper (trans 1): O[j] = sum_{k >= j} A[k][j] B[k] (A read transposed).
 * Tiles of as many rows as the accumulators allow for the channel vectors of a chunk
 * (ATT_ROWS). A tile of rows runs k over its whole range of rows, so it reads A where k
 * and the row are on the wrong side of the diagonal by fewer than ATT_R2: the caller
 * keeps A 0 there. */
static void att_ab(real *O, int ldo, const real *A, int lda, int trans, const real *Bm, int ldb, int T, int hs,
                   int add) {
    if (trans && !add) cpu_fatal("attention", "att_ab: the transposed products add");
    const int kc = ATT_SLAB / T > ATT_R2 ? ATT_SLAB / T : ATT_R2; /* rows of A per chunk, transposed */
    const int nc0 = hs / CPU_VL < ATT_NC ? hs / CPU_VL : ATT_NC;
    if (ATT_NC >= 4 && nc0 == 4) att_ab_pass(ATT_ROWS(4), 4, O, ldo, A, lda, trans, Bm, ldb, T, hs, add, kc);
    if (ATT_NC >= 3 && nc0 == 3) att_ab_pass(ATT_ROWS(3), 3, O, ldo, A, lda, trans, Bm, ldb, T, hs, add, kc);
    if (nc0 == 2) att_ab_pass(ATT_ROWS(2), 2, O, ldo, A, lda, trans, Bm, ldb, T, hs, add, kc);
    if (nc0 == 1) att_ab_pass(ATT_ROWS(1), 1, O, ldo, A, lda, trans, Bm, ldb, T, hs, add, kc);
    if (nc0 == 0) att_ab_pass(ATT_R2, 0, O, ldo, A, lda, trans, Bm, ldb, T, hs, add, kc);
}

CPU_CONTRACT_END

/* S = scale Q K^T (on and below the diagonal, into P); P = row-wise softmax of S over
 * columns 0..t and 0 above the diagonal; O = P V. */
void attention_forward(real *out, real *att, const real *qkv, int B, int T, int C, int NH) {
    attention_check("attention_forward", B, T, C, NH);
    const int hs = C / NH, C3 = 3 * C, Tp = (T + CPU_VL - 1) / CPU_VL * CPU_VL;
    const real scale = (real)(1.0 / sqrt((double)hs));
    const int npairs = B * NH;
    if (T == 0 || npairs == 0) return;
#pragma omp parallel
    {
        real *Kt = att_scratch((size_t)hs * Tp);
#pragma omp for schedule(static)
        for (int bh = 0; bh < npairs; bh++) {
            const int b = bh / NH, h = bh % NH;
            const real *Q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const real *K = Q + C, *V = Q + 2 * (size_t)C;
            real *P = att + (size_t)bh * T * T;
            real *O = out + (size_t)b * T * C + (size_t)h * hs;
            att_transpose(Kt, Tp, K, C3, T, hs);
            att_abt(P, T, Q, C3, Kt, Tp, T, hs, scale);
            for (int t = 0; t < T; t++) cpu_softmax_row(P + (size_t)t * T, t + 1, T);
            att_ab(O, C, P, T, 0, V, C3, T, hs, 0);
        }
    }
}

void attention_decode(real *out, const real *qkv, real *kc, real *vc, int B, int pos, int T, int C, int NH) {
    attention_check("attention_decode", B, T, C, NH);
    if (pos < 0 || pos >= T) cpu_fatal("attention_decode", "position outside 0..T-1");
    const int hs = C / NH, C3 = 3 * C, n = pos + 1, Tp = (T + CPU_VL - 1) / CPU_VL * CPU_VL;
    const real scale = (real)(1.0 / sqrt((double)hs));
    for (int b = 0; b < B; b++) { /* this token's k and v into the caches */
        memcpy(kc + ((size_t)b * T + pos) * C, qkv + (size_t)b * C3 + C, (size_t)C * sizeof(real));
        memcpy(vc + ((size_t)b * T + pos) * C, qkv + (size_t)b * C3 + 2 * (size_t)C, (size_t)C * sizeof(real));
    }
#pragma omp parallel for schedule(static) if (B * NH > 1 && (size_t)n * C > 65536)
    for (int bh = 0; bh < B * NH; bh++) {
        const int b = bh / NH, h = bh % NH;
        const real *q = qkv + (size_t)b * C3 + (size_t)h * hs;
        const real *K = kc + (size_t)b * T * C + (size_t)h * hs, *V = vc + (size_t)b * T * C + (size_t)h * hs;
        real *p = att_scratch((size_t)Tp), *o = out + (size_t)b * C + (size_t)h * hs;
        for (int j = 0; j < n; j++) p[j] = scale * (real)cpu_dot(q, K + (size_t)j * C, (size_t)hs);
        cpu_softmax_row(p, n, Tp);
        for (int c = 0; c < hs; c++) o[c] = 0;
        for (int j = 0; j < n; j++) {
            const real w = p[j], *v = V + (size_t)j * C;
#pragma omp simd
            for (int c = 0; c < hs; c++) o[c] += w * v[c];
        }
    }
}

/* With dO the head's slice of dout and dS the (T, T) scratch:
 *   dP  = dO V^T
 *   dS  = scale P (dP - rowsum(P dP))   (0 above the diagonal, where P is 0)
 *   dQ += dS K,   dK += dS^T Q,   dV += P^T dO */
void attention_backward(real *dqkv, real *datt_scratch, const real *dout, const real *qkv, const real *att,
                        int B, int T, int C, int NH) {
    attention_check("attention_backward", B, T, C, NH);
    const int hs = C / NH, C3 = 3 * C, Tp = (T + CPU_VL - 1) / CPU_VL * CPU_VL;
    const real scale = (real)(1.0 / sqrt((double)hs));
    const int npairs = B * NH;
    if (T == 0 || npairs == 0) return;
#pragma omp parallel
    {
        real *Vt = att_scratch((size_t)hs * Tp);
#pragma omp for schedule(static)
        for (int bh = 0; bh < npairs; bh++) {
            const int b = bh / NH, h = bh % NH;
            const size_t qoff = (size_t)b * T * C3 + (size_t)h * hs;
            const real *Q = qkv + qoff, *K = Q + C, *V = Q + 2 * (size_t)C;
            real *dQ = dqkv + qoff, *dK = dQ + C, *dV = dQ + 2 * (size_t)C;
            const real *P = att + (size_t)bh * T * T;
            real *dS = datt_scratch + (size_t)bh * T * T;
            const real *dO = dout + (size_t)b * T * C + (size_t)h * hs;

            att_transpose(Vt, Tp, V, C3, T, hs);
            att_abt(dS, T, dO, C, Vt, Tp, T, hs, 1); /* dP, then dS in place */
            for (int t = 0; t < T; t++) {
                const real *p = P + (size_t)t * T;
                real *d = dS + (size_t)t * T;
                const real s = (real)cpu_dot(p, d, (size_t)t + 1);
#pragma omp simd
                for (int j = 0; j <= t; j++) d[j] = scale * p[j] * (d[j] - s);
                const int z1 = t + ATT_R2 < T ? t + ATT_R2 : T; /* what att_ab's tiles read right of the diagonal */
                if (t + 1 < z1) memset(d + t + 1, 0, (size_t)(z1 - t - 1) * sizeof(real));
            }
            att_ab(dQ, C3, dS, T, 0, K, C3, T, hs, 1);
            att_ab(dK, C3, dS, T, 1, Q, C3, T, hs, 1);
            att_ab(dV, C3, P, T, 1, dO, C, T, hs, 1);
        }
    }
}
