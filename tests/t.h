/* t.h: the test harness of s2hc, a header only.
 *
 *   static void test_something(void) { CHECK(x == 1, "x was %d", x); }
 *   int main(void) { T_RUN(test_something); return T_END(); }
 *
 * A test case passes when none of its CHECKs failed. T_END prints
 * "<binary>: N passed, N failed" and returns non-zero on any failure; tests/run.sh adds
 * up every binary and ends with the plain "N passed, N failed" line.
 */
#ifndef S2HC_T_H
#define S2HC_T_H
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int t_case_failed_, t_passed_, t_failed_, t_checks_, t_ended_;
static const char *t_prog_ = "test";

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        t_checks_++;                                                              \
        if (!(cond)) {                                                            \
            t_case_failed_ = 1;                                                   \
            fprintf(stderr, "  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                         \
            fputc('\n', stderr);                                                  \
        }                                                                         \
    } while (0)

/* A command's main (params_main, inspect_main, ...) with its stdout in buf (NUL-terminated,
 * cut at len - 1 bytes); returns its exit status. */
static inline int t_run_captured(int (*main_fn)(int, char **), int argc, char **argv, char *buf, size_t len) {
    fflush(stdout);
    FILE *keep = stdout;
    stdout = tmpfile();
    if (!stdout) { stdout = keep; perror("tmpfile"); exit(1); }
    int rc = main_fn(argc, argv);
    fflush(stdout);
    rewind(stdout);
    size_t k = fread(buf, 1, len - 1, stdout);
    buf[k] = '\0';
    fclose(stdout);
    stdout = keep;
    return rc;
}

/* |a - b| <= atol + rtol * max(|a|, |b|); NaN never passes. */
#define CHECK_CLOSE(a, b, atol, rtol, ...)                                                    \
    do {                                                                                      \
        double ta_ = (double)(a), tb_ = (double)(b);                                          \
        double tm_ = fabs(ta_) > fabs(tb_) ? fabs(ta_) : fabs(tb_);                           \
        int ok_ = !isnan(ta_) && !isnan(tb_) && fabs(ta_ - tb_) <= (atol) + (rtol) * tm_;     \
        CHECK(ok_, "%.10g vs %.10g (diff %.3g): ", ta_, tb_, fabs(ta_ - tb_));               \
        if (!ok_) { fprintf(stderr, "    "); fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } \
    } while (0)

#define T_RUN(fn)                                                                 \
    do {                                                                          \
        t_case_failed_ = 0;                                                       \
        fn();                                                                     \
        if (t_case_failed_) { t_failed_++; fprintf(stderr, "FAILED %s\n", #fn); } \
        else { t_passed_++; if (getenv("T_VERBOSE")) fprintf(stderr, "ok %s\n", #fn); } \
    } while (0)

#define T_END() t_end_()
static inline int t_end_(void) {
    t_ended_ = 1;
    printf("%s: %d passed, %d failed (%d checks)\n", t_prog_, t_passed_, t_failed_, t_checks_);
    fflush(stdout);
    return t_failed_ ? 1 : 0;
}
#define T_NAME(s) (t_prog_ = (s))

/* A scratch directory for one test binary: $S2HC_TEST_TMP/<sub> (set by tests/run.sh,
 * which removes it), else a fresh /tmp/s2hc-test-<sub>.XXXXXX, removed at exit when every
 * case passed, and kept, named on stderr, when one failed or the binary stopped before
 * T_END (an exit(1) or die() on the way): a binary run by hand leaves nothing behind but
 * what there is to look at. Only the process that made it removes it: a child forked by
 * the code under test runs the atexit handlers too when it exits. S2HC_KEEP_TEST_TMP=1
 * keeps it whatever the result. */
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>
static char t_tmp_made_[512];
static pid_t t_tmp_owner_;
static inline int t_rm_entry_(const char *path, const struct stat *sb, int type, struct FTW *ftw) {
    (void)sb, (void)type, (void)ftw;
    return remove(path) != 0 ? -1 : 0;
}
static inline void t_tmp_cleanup_(void) {
    if (!t_tmp_made_[0] || getpid() != t_tmp_owner_ || access(t_tmp_made_, F_OK) != 0) return; /* or removed by the test */
    if (t_failed_ || !t_ended_ || getenv("S2HC_KEEP_TEST_TMP"))
        fprintf(stderr, "%s: its scratch directory %s is kept for a look\n", t_prog_, t_tmp_made_);
    else if (nftw(t_tmp_made_, t_rm_entry_, 16, FTW_DEPTH | FTW_PHYS) != 0)
        fprintf(stderr, "%s: could not remove its scratch directory %s\n", t_prog_, t_tmp_made_);
}
static inline void t_setup_tmp(const char *sub, char *dir, size_t len) {
    const char *t = getenv("S2HC_TEST_TMP");
    if (t && *t) {
        snprintf(dir, len, "%s/%s", t, sub);
        mkdir(dir, 0700);
    } else {
        snprintf(dir, len, "/tmp/s2hc-test-%s.XXXXXX", sub);
        if (!mkdtemp(dir)) { perror("mkdtemp"); exit(1); }
        if (!t_tmp_made_[0]) {
            snprintf(t_tmp_made_, sizeof t_tmp_made_, "%s", dir);
            t_tmp_owner_ = getpid();
            atexit(t_tmp_cleanup_);
        }
    }
}

/* Write text to dir/name; the full path goes to path. Exits on failure. */
static inline void t_write_file(const char *dir, const char *name, const char *text, char *path, size_t len) {
    snprintf(path, len, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

#endif
