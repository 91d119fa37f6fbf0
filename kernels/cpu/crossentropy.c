/* crossentropy.c: softmax cross-entropy over V classes per row. */
#include <math.h>
#include "kernels/kernels.h"
#include "kernels/cpu/cpu_blas.h"
#include "kernels/cpu/cpu_math.h"

/* probs (N, V) = softmax(logits) (max subtracted); losses (N) = log(sum) - (x_t - max),
 * which stays finite however small p[target] is. Target < 0: loss 0. Fatal on a
 * target >= V. */
void crossentropy_forward(real *losses, real *probs, const real *logits, const int *targets, size_t N, int V) {
    int bad = 0;
#pragma omp parallel for schedule(static) reduction(| : bad)
    for (size_t n = 0; n < N; n++) {
        const real *x = logits + n * V;
        real *p = probs + n * V;
        const real mx = cpu_max(x, (size_t)V);
        int v = 0;
#if !REAL_IS_DOUBLE
        for (; v + CPU_VL <= V; v += CPU_VL) cpu_vstore(p + v, cpu_vexpf(cpu_vload(x + v) - mx)); /* cpu_expf's bits */
#endif
        for (; v < V; v++) p[v] = CPU_EXP(x[v] - mx);
        double sum = cpu_sum(p, (size_t)V);
        real inv = (real)(1.0 / sum);
#pragma omp simd
        for (v = 0; v < V; v++) p[v] *= inv;
        int t = targets[n];
        if (t >= V) bad = 1;
        losses[n] = (t < 0 || t >= V) ? 0 : (real)(log(sum) - ((double)x[t] - mx));
    }
    if (bad) cpu_fatal("crossentropy_forward", "target >= V");
}

/* dlogits (N, V) = (probs - onehot(target)) * scale, overwritten; a row with target < 0
 * is set to 0. */
void crossentropy_backward(real *dlogits, const real *probs, const int *targets, real scale, size_t N, int V) {
#pragma omp parallel for schedule(static)
    for (size_t n = 0; n < N; n++) {
        const real *restrict p = probs + n * V;
        real *restrict d = dlogits + n * V;
        int t = targets[n];
        if (t < 0 || t >= V) {
            for (int v = 0; v < V; v++) d[v] = 0;
            continue;
        }
#pragma omp simd
        for (int v = 0; v < V; v++) d[v] = p[v] * scale;
        d[t] -= scale;
    }
}
