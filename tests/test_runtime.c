/* test_runtime.c: the process-wide settings s2hc and frame_bench make at start.
 *  - runtime_flush_denormals: a product below the smallest normal float is 0 afterwards,
 *    in the calling thread, in the threads of a team that already existed, and in threads
 *    a larger team creates later; before it, the same product is the subnormal it is
 *    (so the check can tell the two apart). Subnormal inputs still compare as
 *    themselves: a config value of 1e-310 is not read as 0.
 */
#include <float.h>
#include <omp.h>
#include <stdio.h>
#include "../harness/util.h"
#include "t.h"

static volatile float tiny_f = 1e-20f, sub_f = 1e-40f;
static volatile double sub_d = 4.9406564584124654e-324; /* the smallest subnormal double */

static void test_flush_denormals(void) {
#if defined(__x86_64__) || defined(__SSE__)
    threads_set(2);
    /* the default floating-point environment keeps subnormals, in a team of 2 that now
       exists and which the flush must reach */
    CHECK(runtime_denormals_flushed() == 0, "before the flush a product of 1e-20f by itself is not 0");
    const float before = tiny_f * tiny_f;
    CHECK(before > 0 && before < FLT_MIN, "1e-40f is subnormal before the flush: %g", (double)before);
    CHECK(runtime_flush_denormals() == 1, "x86-64 has the control");
    const float after = tiny_f * tiny_f;
    CHECK(after == 0.0f, "the calling thread flushes: %g", (double)after);
    CHECK(runtime_denormals_flushed() == 1, "every thread of the existing team of 2 flushes");
    threads_set(4); /* two threads more, created now: they take the setting from the thread that starts them */
    int team = 0;
#pragma omp parallel
#pragma omp single
    team = omp_get_num_threads();
    CHECK(team == 4, "a team of 4: %d", team);
    CHECK(runtime_denormals_flushed() == 1, "every thread of a team of 4 flushes");
    /* flush to zero, not denormals-are-zero: a subnormal that is already there compares as itself */
    CHECK(sub_d > 0.0 && sub_f > 0.0f, "subnormal inputs are not taken for 0");
    CHECK(sub_d * 2.0 == 0.0, "a double result that would be subnormal (1e-323) is 0: the flush covers doubles too");
#else
    CHECK(runtime_flush_denormals() == 0, "no flush control on this CPU: said so");
#endif
}

int main(void) {
    T_NAME("test_runtime");
    T_RUN(test_flush_denormals);
    return T_END();
}
