#define _POSIX_C_SOURCE 200809L
#include "util.h"
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__SSE__)
#include <xmmintrin.h>
#define RUNTIME_HAVE_FTZ 1
#endif

void *malloc_check_(size_t size, const char *file, int line) {
    void *p = malloc(size ? size : 1);
    if (!p) {
        fprintf(stderr, "s2hc: error: out of memory allocating %zu bytes at %s:%d\n", size, file, line);
        exit(1);
    }
    return p;
}

void *calloc_check_(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "s2hc: error: out of memory allocating %zu x %zu bytes at %s:%d\n", n, size, file, line);
        exit(1);
    }
    return p;
}

void *calloc_huge_(size_t n, size_t size, const char *file, int line) {
    const size_t huge = (size_t)2 << 20, bytes = (n ? n : 1) * (size ? size : 1);
    if (bytes < CALLOC_HUGE_MIN) return calloc_check_(n, size, file, line);
    const size_t rounded = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, rounded)) {
        fprintf(stderr, "s2hc: error: out of memory allocating %zu x %zu bytes at %s:%d\n", n, size, file, line);
        exit(1);
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(p, rounded, MADV_HUGEPAGE); /* a hint: refused (THP off), the pages stay 4 KB */
#endif
    memset(p, 0, bytes);
    return p;
}

FILE *fopen_check_(const char *path, const char *mode, const char *file, int line) {
    FILE *f = fopen(path, mode);
    if (!f) {
        fprintf(stderr, "s2hc: error: cannot open %s (mode %s): %s [%s:%d]\n", path, mode, strerror(errno), file, line);
        exit(1);
    }
    return f;
}

void die(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("s2hc: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(code);
}

double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double threads_cpu_seconds(void) {
    double s = 0;
#pragma omp parallel reduction(+ : s)
    {
        struct timespec ts;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        s += (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    }
    return s;
}

/* The first line of a lock file (lock_file_claim's "who pid P on HOST since T") in holder. */
static void lock_holder_read(int fd, char *holder, size_t holder_len) {
    if (holder_len < 2) return;
    ssize_t k = pread(fd, holder, holder_len - 1, 0);
    holder[k > 0 ? k : 0] = '\0';
    holder[strcspn(holder, "\n")] = '\0';
}

/* An OFD write lock on the whole of fd's file: taken (F_OFD_SETLK: 0, or -1 with errno),
 * or looked for (F_OFD_GETLK: 1 when another open of the file holds one, else 0). */
static int ofd_lock(int fd, int cmd) {
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    if (cmd == F_OFD_GETLK) return fcntl(fd, cmd, &fl) == 0 && fl.l_type != F_UNLCK;
    return fcntl(fd, cmd, &fl);
}

int lock_file_try(const char *path, char *holder, size_t holder_len) {
    if (holder_len) holder[0] = '\0';
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    if (ofd_lock(fd, F_OFD_SETLK) == 0) return fd;
    lock_holder_read(fd, holder, holder_len);
    close(fd);
    return -2;
}

int lock_file_held(const char *path, char *holder, size_t holder_len) {
    if (holder_len) holder[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    const int held = ofd_lock(fd, F_OFD_GETLK);
    if (held) lock_holder_read(fd, holder, holder_len);
    close(fd);
    return held;
}

void host_and_time(char *host, size_t host_len, char *when, size_t when_len) {
    snprintf(host, host_len, "?");
    gethostname(host, host_len);
    host[host_len - 1] = '\0';
    time_t t = time(NULL);
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(when, when_len, "%Y-%m-%d %H:%M:%S", &tm);
}

void lock_file_claim(int fd, const char *who) {
    char host[64], when[32];
    host_and_time(host, sizeof host, when, sizeof when);
    if (ftruncate(fd, 0) == 0) dprintf(fd, "%s%spid %d on %s since %s\n", who, who[0] ? " " : "", (int)getpid(), host, when);
}

int lock_file_take(const char *path, const char *dir, const char *who, const char *advice) {
    char holder[160];
    int fd = lock_file_try(path, holder, sizeof holder);
    if (fd == -1) fprintf(stderr, "s2hc: error: cannot open %s: %s\n", path, strerror(errno));
    else if (fd == -2)
        fprintf(stderr, "s2hc: error: %s is in use%s%s%s; wait for it to end or %s\n", dir, holder[0] ? " (" : "", holder,
                holder[0] ? ")" : "", advice);
    else lock_file_claim(fd, who);
    return fd;
}

int out_dir_lock(const char *dir, const char *who) {
    char path[1200];
    if (snprintf(path, sizeof path, "%s/.output.lock", dir) >= (int)sizeof path) {
        fprintf(stderr, "s2hc: error: %.60s...: a folder path too long to lock\n", dir);
        return -1;
    }
    return lock_file_take(path, dir, who, "write into another folder");
}

long long step_from_double(double x) {
    if (!(x >= 0 && x <= 9007199254740992.0) || x != floor(x)) return -1;
    return (long long)x;
}

int mkdir_p(const char *path) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) { errno = ENAMETOOLONG; return -1; }
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return -1;
            buf[i] = c;
        }
    }
    return 0;
}

int file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void rng_seed(rng_t *r, uint64_t seed) {
    uint64_t x = seed;
    r->s = splitmix64(&x);
    if (r->s == 0) r->s = 0x2545F4914F6CDD1DULL;
}

uint64_t rng_u64(rng_t *r) {
    uint64_t x = r->s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    r->s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

double rng_uniform(rng_t *r) { return (double)(rng_u64(r) >> 11) * (1.0 / 9007199254740992.0); }

double rng_normal(rng_t *r) {
    double u1 = rng_uniform(r), u2 = rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void fmt_duration(double s, char *buf, size_t len) {
    if (!(s >= 0) || s > 1e7) { snprintf(buf, len, "--"); return; }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, len, "%ldh%02ldm", t / 3600, (t % 3600) / 60);
    else if (t >= 60) snprintf(buf, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, len, "%lds", t);
}

volatile sig_atomic_t stop_signal = 0;

/* The stop signals that were ignored when the process started (a bit each: 1 << signal
 * number), -1 until stop_signal_ignored first looks; they stay ignored. */
static volatile sig_atomic_t stop_ignored = -1;

int stop_signal_ignored(int sig) {
    if (stop_ignored < 0) {
        static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
        int bits = 0;
        for (int k = 0; k < 3; k++) {
            struct sigaction old;
            if (sigaction(sigs[k], NULL, &old) == 0 && old.sa_handler == SIG_IGN) bits |= 1 << sigs[k];
        }
        stop_ignored = bits;
    }
    return (stop_ignored >> sig) & 1;
}

void stop_signals_to(void (*h)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    if (!stop_signal_ignored(SIGINT)) sigaction(SIGINT, &sa, NULL);
    if (!stop_signal_ignored(SIGTERM)) sigaction(SIGTERM, &sa, NULL);
    if (!stop_signal_ignored(SIGHUP)) sigaction(SIGHUP, &sa, NULL);
}

void stop_signals_again_to(void (*h)(int)) {
    stop_signals_to(h);
    if (stop_signal_ignored(SIGHUP)) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGHUP, &sa, NULL);
}

static void on_sigpipe(int sig) { (void)sig; }

void sigpipe_survive(void) {
    struct sigaction sa, old;
    if (sigaction(SIGPIPE, NULL, &old) == 0 && old.sa_handler == SIG_IGN) return;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigpipe;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, NULL);
}

/* remove_tree_now's walk: the entry name in folder dirfd, and what it holds */
static void remove_tree_at(int dirfd, const char *name, int depth) {
    if (unlinkat(dirfd, name, 0) == 0 || depth > 8) return;
    const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    for (int pass = 0; pass < 2; pass++) { /* a second pass: entries a removal made getdents skip */
        char buf[2048] __attribute__((aligned(8)));
        long n;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
            for (long off = 0; off < n;) {
                const unsigned short reclen = *(const unsigned short *)(buf + off + 16); /* d_reclen */
                const char *e = buf + off + 19;                                          /* d_name */
                if (!(e[0] == '.' && (!e[1] || (e[1] == '.' && !e[2])))) remove_tree_at(fd, e, depth + 1);
                off += reclen;
            }
    }
    close(fd);
    unlinkat(dirfd, name, AT_REMOVEDIR);
}

void remove_tree_now(const char *path) { remove_tree_at(AT_FDCWD, path, 0); }

static volatile sig_atomic_t stop_say = 1;
static void (*volatile stop_then)(int) = stop_signal_clean;

void stop_signals_then(void (*h)(int)) { stop_then = h; }

void stop_signal_first(int sig, void (*next)(int), const char *msg, size_t len) {
    const int saved = errno; /* the interrupted code may be about to read it */
    stop_signal = sig;
    stop_signals_again_to(next);
    if (msg) {
        ssize_t w = write(STDERR_FILENO, msg, len);
        (void)w;
    }
    errno = saved;
}

static void on_stop_signal(int sig) {
    static const char msg[] = "\ns2hc: stopping at the next safe point (again to stop at once)\n";
    /* the second Ctrl-C or SIGTERM: the process ends */
    stop_signal_first(sig, stop_then, stop_say ? msg : NULL, sizeof msg - 1);
}

void stop_signals_catch(int say) {
    stop_say = say != 0;
    stop_signals_to(on_stop_signal);
}

double progress_after(void) {
    const char *test_after = getenv("S2HC_TEST_PROGRESS_AFTER"); /* tests only: the first line sooner */
    return test_after && *test_after ? atof(test_after) : PROGRESS_AFTER;
}

const char *opt_value(int argc, char **argv, int i) {
    return i + 1 < argc && argv[i + 1][0] != '-' ? argv[i + 1] : NULL;
}

int opt_kind(const char *arg, int *ended) {
    if (*ended) return 1;
    if (!strcmp(arg, "--")) {
        *ended = 1;
        return -1;
    }
    return arg[0] != '-' || !arg[1];
}

const char *opt_arg(int argc, char **argv, int *i, const char *name, int dash_ok) {
    const char *a = argv[*i];
    const size_t n = strlen(name);
    if (strncmp(a, name, n) != 0) return NULL;
    if (a[n] == '=') return a + n + 1;
    if (a[n] || *i + 1 >= argc || (!dash_ok && argv[*i + 1][0] == '-')) return NULL;
    return argv[++*i];
}

void opt_seen_take(opt_seen *seen, const char *name, const char *value) {
    for (int k = 0; k < seen->n; k++)
        if (!strcmp(seen->name[k], name))
            die(2, "%s: %s given twice ('%s', then '%s'): give it once", seen->cmd, name, seen->value[k], value);
    if (seen->n == OPT_SEEN_MAX) { /* more options of one value than a command has: a bug of its loop */
        fprintf(stderr, "s2hc: internal error: %s: more than %d options of one value\n", seen->cmd, OPT_SEEN_MAX);
        abort();
    }
    seen->name[seen->n] = name;
    seen->value[seen->n++] = value;
}

const char *opt_once(opt_seen *seen, int argc, char **argv, int *i, const char *name, int dash_ok) {
    const char *v = opt_arg(argc, argv, i, name, dash_ok);
    if (v) opt_seen_take(seen, name, v);
    return v;
}

int terminal_live(int fd) {
    const char *term = getenv("TERM");
    return isatty(fd) && term && term[0] && strcmp(term, "dumb") != 0;
}

int terminal_columns(int fd) {
    struct winsize ws;
    return ioctl(fd, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

/* The columns a terminal gives the character cp: none for a combining mark or a
 * zero-width one, two for an East Asian wide or fullwidth one (CJK, kana, Hangul,
 * fullwidth forms, most emoji), else one. */
static int char_columns(unsigned cp) {
    if ((cp >= 0x300 && cp <= 0x36F) || (cp >= 0x200B && cp <= 0x200F) || (cp >= 0xFE00 && cp <= 0xFE0F))
        return 0;
    if ((cp >= 0x1100 && cp <= 0x115F) || (cp >= 0x2E80 && cp <= 0x303E) || (cp >= 0x3041 && cp <= 0x33FF) ||
        (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0xA000 && cp <= 0xA4CF) ||
        (cp >= 0xAC00 && cp <= 0xD7A3) || (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0xFE30 && cp <= 0xFE4F) ||
        (cp >= 0xFF00 && cp <= 0xFF60) || (cp >= 0xFFE0 && cp <= 0xFFE6) || (cp >= 0x1F300 && cp <= 0x1F64F) ||
        (cp >= 0x1F900 && cp <= 0x1F9FF) || (cp >= 0x20000 && cp <= 0x3FFFD))
        return 2;
    return 1;
}

/* The bytes of text's first characters that take at most max columns (max < 0: all of
 * them), their columns in *shown; a character is never cut. */
static size_t text_columns(const char *text, int max, int *shown_out) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = 0;
    int shown = 0;
    while (s[n]) {
        size_t len = 1; /* a UTF-8 sequence whole (a byte that starts none: one column) */
        unsigned cp = s[n];
        if (cp >= 0xC0) {
            len = cp >= 0xF0 ? 4 : cp >= 0xE0 ? 3 : 2;
            cp &= 0x3Fu >> (len - 1);
            for (size_t k = 1; k < len; k++) {
                if ((s[n + k] & 0xC0) != 0x80) { /* cut short (the text's end included) */
                    len = 1, cp = '?';
                    break;
                }
                cp = cp << 6 | (s[n + k] & 0x3Fu);
            }
        }
        const int w = char_columns(cp);
        if (max >= 0 && shown + w > max) break;
        shown += w;
        n += len;
    }
    *shown_out = shown;
    return n;
}

void strlist_add(strlist *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        char **v = realloc(l->v, l->cap * sizeof *v);
        if (!v) die(1, "out of memory listing files");
        l->v = v;
    }
    size_t k = strlen(s) + 1;
    l->v[l->n] = malloc_check(k);
    memcpy(l->v[l->n++], s, k);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
void strlist_sort(strlist *l) {
    if (l->n > 1) qsort(l->v, l->n, sizeof *l->v, cmp_str);
}
void strlist_free(strlist *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

int text_width(const char *text) {
    int shown;
    text_columns(text, -1, &shown);
    return shown;
}

void tty_line(FILE *f, const char *text) {
    const int cols = terminal_columns(fileno(f)), room = cols - 1;
    int whole, head, tail_cols;
    text_columns(text, -1, &whole);
    if (cols <= 0 || whole <= room) {
        fprintf(f, "\r%s\033[K", text);
    } else {
        /* too wide: its last field (after its last " | " or ", ": the ETA) kept whole and
           the text before it cut, "..." between, where that leaves a few columns of it */
        const char *bar = NULL, *comma = NULL;
        for (const char *p = strstr(text, " | "); p; p = strstr(p + 1, " | ")) bar = p;
        for (const char *p = strstr(text, ", "); p; p = strstr(p + 1, ", ")) comma = p;
        const char *tail = bar > comma ? bar : comma;
        if (tail) text_columns(tail, -1, &tail_cols);
        if (tail && room - tail_cols - 3 >= 8)
            fprintf(f, "\r%.*s...%s\033[K", (int)text_columns(text, room - tail_cols - 3, &head), text, tail);
        else
            fprintf(f, "\r%.*s\033[K", (int)text_columns(text, room, &head), text);
    }
    fflush(f);
}

void progress_begin(progress *p, const char *what, const char *unit, long total, int enabled) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->unit = unit;
    p->total = total;
    p->enabled = enabled;
    p->out = stdout;
    p->tty = terminal_live(STDOUT_FILENO);
    p->t0 = now_seconds();
    p->last = p->t0 + progress_after() - (p->tty ? PROGRESS_TTY_EVERY : PROGRESS_LOG_EVERY);
}

void progress_to(progress *p, FILE *f) {
    p->out = f;
    p->tty = terminal_live(fileno(f));
    p->last = p->t0 + progress_after() - (p->tty ? PROGRESS_TTY_EVERY : PROGRESS_LOG_EVERY);
}

void progress_update(progress *p, long done) {
    if (!p->enabled) return;
    p->done = done;
    const double now = now_seconds();
    if (now - p->last < (p->tty ? PROGRESS_TTY_EVERY : PROGRESS_LOG_EVERY)) return;
    p->last = now;
    const double el = now - p->t0, eta = done > 0 ? (el - p->skip) / done * (double)(p->total - done) + p->extra : NAN;
    char e1[16], e2[16];
    fmt_duration(el, e1, sizeof e1);
    fmt_duration(eta, e2, sizeof e2);
    char line[512];
    snprintf(line, sizeof line, "%s: %ld/%ld %s%s%s%s | %s | ETA %s", p->what, done, p->total, p->unit,
             p->note[0] ? " (" : "", p->note, p->note[0] ? ")" : "", e1, e2);
    if (p->tty) {
        tty_line(p->out, line); /* flushed */
    } else {
        fprintf(p->out, "%s\n", line);
        fflush(p->out);
    }
    p->shown = 1;
}

void progress_tick(progress *p) {
    if (p) progress_update(p, p->done);
}

void progress_end(progress *p) {
    if (p->enabled && p->shown && p->tty) {
        fprintf(p->out, "\r\033[K");
        fflush(p->out);
    }
    p->shown = 0;
}

/* The vector extension of OpenBLAS 0.3.21's kernels by core name (OPENBLAS_CORETYPE):
 * 1 SSE, 2 AVX, 3 AVX2, 4 AVX-512; 0 for a name not listed. */
static int coretype_rank(const char *name) {
    static const struct {
        const char *name;
        int rank;
    } cores[] = {{"Katmai", 1},     {"Coppermine", 1},  {"Northwood", 1}, {"Prescott", 1},   {"Banias", 1},
                 {"Atom", 1},       {"Core2", 1},       {"Penryn", 1},    {"Dunnington", 1}, {"Nehalem", 1},
                 {"Athlon", 1},     {"Opteron", 1},     {"Opteron_SSE3", 1}, {"Barcelona", 1}, {"Nano", 1},
                 {"Bobcat", 1},     {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2}, {"Steamroller", 2},
                 {"Excavator", 2},  {"Haswell", 3},     {"Zen", 3},       {"SkylakeX", 4},   {"Cooperlake", 4},
                 {"SapphireRapids", 4}};
    for (size_t i = 0; i < sizeof cores / sizeof cores[0]; i++)
        if (!strcasecmp(name, cores[i].name)) return cores[i].rank;
    return 0;
}

/* This CPU's widest vector extension in coretype_rank's terms: 4 AVX-512, 3 AVX2, else 0
 * (older x86 CPUs, and other architectures: OpenBLAS's own detection on ARM, the x86
 * names meaning nothing there). */
int cpu_vector_rank(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") ? 4 : __builtin_cpu_supports("avx2") ? 3 : 0;
#else
    return 0;
#endif
}

const char *openblas_coretype_advice(void) {
    static char msg[320];
    const char *ct = getenv("OPENBLAS_CORETYPE");
    if (!ct || !*ct) return NULL;
    const int have = cpu_vector_rank();
    const int rank = coretype_rank(ct);
    if (!rank || rank >= have) return NULL;
    snprintf(msg, sizeof msg,
             "OPENBLAS_CORETYPE=%s (from the environment) selects %s kernels, but this CPU has %s: "
             "unset it (s2hc then sets %s) for faster matrix products",
             ct, rank == 1 ? "SSE" : rank == 2 ? "AVX" : "AVX2", have == 4 ? "AVX-512" : "AVX2",
             have == 4 ? "SkylakeX" : "Haswell");
    return msg;
}

/* The ARM cores a cluster's CPU nodes have (implementer 0x41, by part number). */
static const char *arm_core_name(unsigned long impl, unsigned long part) {
    static const struct {
        unsigned long part;
        const char *name;
    } parts[] = {{0xd0c, "Neoverse-N1"}, {0xd40, "Neoverse-V1"}, {0xd49, "Neoverse-N2"}, {0xd4f, "Neoverse-V2"},
                 {0xd8e, "Neoverse-N3"}, {0xd84, "Neoverse-V3"}};
    if (impl != 0x41) return NULL;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (parts[i].part == part) return parts[i].name;
    return NULL;
}

const char *cpu_model_name_from(FILE *f, char *buf, size_t len) {
    snprintf(buf, len, "unknown");
    if (!f) return buf;
    char line[512];
    long impl = -1, part = -1; /* an ARM CPU's lines (it has no model name) */
    while (fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (!v) continue;
        v++;
        while (*v == ' ' || *v == '\t') v++;
        if (!strncmp(line, "model name", 10)) {
            snprintf(buf, len, "%.*s", (int)strcspn(v, "\n"), v);
            return buf;
        }
        if (!strncmp(line, "CPU implementer", 15) && impl < 0) impl = strtol(v, NULL, 0);
        if (!strncmp(line, "CPU part", 8) && part < 0) part = strtol(v, NULL, 0);
    }
    if (impl >= 0 && part >= 0) {
        const char *name = arm_core_name((unsigned long)impl, (unsigned long)part);
        if (name) snprintf(buf, len, "%s (ARM implementer 0x%lx, part 0x%03lx)", name, impl, part);
        else snprintf(buf, len, "ARM implementer 0x%lx, part 0x%03lx", impl, part);
    }
    return buf;
}

const char *cpu_model_name(char *buf, size_t len) {
    FILE *f = fopen("/proc/cpuinfo", "r");
    cpu_model_name_from(f, buf, len);
    if (f) fclose(f);
    return buf;
}

size_t cpu_cache_bytes(int level) {
    for (int i = 0; i < 16; i++) {
        char path[96], buf[32];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        const int lv = fgets(buf, sizeof buf, f) ? atoi(buf) : -1;
        fclose(f);
        if (lv != level) continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (!(f = fopen(path, "r"))) return 0;
        size_t bytes = 0;
        if (fgets(buf, sizeof buf, f)) { /* "491520K", "2048K", "32M" */
            char *end;
            const unsigned long long v = strtoull(buf, &end, 10);
            bytes = (size_t)v * (*end == 'K' ? 1024 : *end == 'M' ? 1024 * 1024 : *end == 'G' ? 1024ull << 20 : 1);
        }
        fclose(f);
        return bytes;
    }
    return 0;
}

/* With OMP_PROC_BIND or OMP_PLACES set, libgomp binds the initial thread to the first
 * place as it loads, before main: the thread's own CPU mask is then one place, and a
 * process started from it (exec, or fork then exec) inherits that mask, counts one CPU
 * and runs one thread. The places together are the CPUs OpenMP found the process given. */
static int runtime_cpus(cpu_set_t *set) {
    CPU_ZERO(set);
    const int np = omp_get_num_places();
    if (np <= 0) return sched_getaffinity(0, sizeof *set, set) == 0 ? CPU_COUNT(set) : 0;
    int ids[CPU_SETSIZE]; /* no allocation: runtime_unbind runs between fork and exec */
    for (int p = 0; p < np; p++) {
        const int k = omp_get_place_num_procs(p);
        if (k <= 0 || k > CPU_SETSIZE) continue;
        omp_get_place_proc_ids(p, ids);
        for (int i = 0; i < k; i++)
            if (ids[i] >= 0 && ids[i] < CPU_SETSIZE) CPU_SET(ids[i], set);
    }
    return CPU_COUNT(set);
}

int runtime_cpu_count(void) {
    cpu_set_t set;
    const int n = runtime_cpus(&set);
    if (n > 0) return n;
    const long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

void runtime_unbind(void) {
    if (omp_get_num_places() <= 0) return; /* nothing bound */
    cpu_set_t set;
    if (runtime_cpus(&set) > 0) sched_setaffinity(0, sizeof set, &set);
}

void threads_set(int n) {
    const int lim = omp_get_thread_limit();
    omp_set_num_threads(n < lim ? n : lim);
}

int runtime_flush_denormals(void) {
#ifdef RUNTIME_HAVE_FTZ
    _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON);
#pragma omp parallel
    _mm_setcsr(_mm_getcsr() | _MM_FLUSH_ZERO_ON);
    return 1;
#else
    return 0;
#endif
}

/* read at run time: a product of constants would be computed by the compiler */
static volatile float runtime_tiny = 1e-20f;

int runtime_denormals_flushed(void) {
    int all = 1;
#pragma omp parallel reduction(&& : all)
    {
        const float a = runtime_tiny, p = a * a; /* 1e-40: subnormal, unless flushed */
        all = all && p == 0.0f;
    }
    return all;
}

/* Settings of the runtime libraries that are read when they load, before main, so they
 * are set here and the process re-executes itself once (S2HC_NO_REEXEC stops that):
 *   OPENBLAS_CORETYPE  OpenBLAS 0.3.21 does not recognise some recent CPUs and silently
 *                      falls back to SSE3 kernels (3-5x slower GEMMs); set on x86-64
 *                      CPUs with AVX2 or AVX-512 only (cpu_vector_rank): on older ones
 *                      and on ARM, OpenBLAS's own detection stands;
 *   GOMP_SPINCOUNT     3000 (when neither it nor OMP_WAIT_POLICY is set): a thread that
 *                      reaches the end of a parallel region spins that many times (a
 *                      `pause` each: ~0.04 ms on the build machine, 0.01-0.2 ms by CPU)
 *                      before it sleeps. A training step
 *                      opens ~100 regions; waking a sleeping thread cost ~50 us each on
 *                      a virtual machine (OMP_WAIT_POLICY=passive: ~5 ms per step, 5-8 %),
 *                      while libgomp's own default spin (300 000, milliseconds) lets a
 *                      thread steal the core its partner waits for on a loaded machine (up
 *                      to 4x slower). With more threads than cores libgomp cuts the spin to
 *                      100 itself (docs/performance.md, "Settings"). With libomp (a
 *                      clang build) KMP_BLOCKTIME=1 instead: 1 ms, its default 200.
 * A value the user set is kept (OMP_WAIT_POLICY=passive: no spin at all). Used by every
 * program of the project (harness/main.c, tools/).
 * OMP_DYNAMIC=true is overridden: a region's team must be the thread count the bits are
 * fixed by (a step's slices, the shares of every op), and a team of one under load made
 * OpenBLAS, called inside it, open a team of its own and wait forever for its threads. */
void runtime_env_fixup(char **argv) {
    /* the re-executed process: its standard error back (runtime_env_fixup's exec below) */
    const char *saved_err = getenv("S2HC_REEXEC_STDERR");
    if (saved_err) {
        const int fd = atoi(saved_err);
        if (fd > 2) {
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        unsetenv("S2HC_REEXEC_STDERR");
    }
    omp_set_dynamic(0);
    threads_set(omp_get_max_threads()); /* OMP_THREAD_LIMIT below OMP_NUM_THREADS */
    if (getenv("S2HC_NO_REEXEC")) return;
    int again = 0;
    if (!getenv("OMP_WAIT_POLICY") && !getenv(RUNTIME_SPIN_VAR)) {
        setenv(RUNTIME_SPIN_VAR, RUNTIME_SPIN, 1);
        again = 1;
    }
    if (!getenv("OPENBLAS_CORETYPE")) {
        const int have = cpu_vector_rank();
        const char *core = have == 4 ? "SkylakeX" : have == 3 ? "Haswell" : NULL;
        if (core) {
            setenv("OPENBLAS_CORETYPE", core, 1);
            again = 1;
        }
    }
    if (!again) return;
    setenv("S2HC_NO_REEXEC", "1", 1);
    runtime_unbind(); /* or the new process would see one place's CPUs and run one thread */
    /* The libraries' warnings as they load (libgomp's "Invalid value for environment
       variable OMP_NUM_THREADS") were printed once, by this process: the new one loads
       them with its standard error on /dev/null, kept on a descriptor that it restores
       first thing (above); they would say it twice. */
    const int err = fcntl(STDERR_FILENO, F_DUPFD, 3), null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (err >= 0 && null >= 0) {
        char num[16];
        snprintf(num, sizeof num, "%d", err);
        setenv("S2HC_REEXEC_STDERR", num, 1);
        fflush(stderr);
        dup2(null, STDERR_FILENO);
        execv("/proc/self/exe", argv);
        dup2(err, STDERR_FILENO); /* exec failed: this process's standard error back */
        unsetenv("S2HC_REEXEC_STDERR");
    } else {
        execv("/proc/self/exe", argv);
    }
    if (err >= 0) close(err);
    if (null >= 0) close(null);
    /* exec failed: carry on with the runtime's defaults */
}

void std_fds_reserve(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        const int got = open("/dev/null", O_RDONLY); /* the lowest free number: fd (those below are open) */
        if (got >= 0 && got != fd) close(got);
    }
}

char *read_text_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    const size_t most = (size_t)64 << 20; /* bytes of content; the buffer holds one more, the NUL */
    size_t cap = 4096, n = 0;
    char *buf = malloc_check(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (n > most) { free(buf); fclose(f); errno = EFBIG; return NULL; }
            cap = cap * 2 <= most ? cap * 2 : most + 2; /* most + 1 bytes of room tell "over" */
            char *nb = realloc(buf, cap);
            if (!nb) { free(buf); fclose(f); errno = ENOMEM; return NULL; }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (ferror(f)) {
        int e = errno ? errno : EIO;
        free(buf);
        fclose(f);
        errno = e;
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* the characters a shell takes literally (util.h's sh_word) */
static const char sh_plain[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./=:,+@%";

const char *sh_word(char *buf, size_t len, const char *s) {
    size_t j = 0;
    const int plain = *s && strspn(s, sh_plain) == strlen(s);
    if (!len) return buf;
    if (!plain) buf[j++] = '\'';
    for (; *s && j < len; s++) {
        const char *piece = !plain && *s == '\'' ? "'\\''" : NULL;
        size_t k = piece ? 4 : 1;
        if (j + k >= len) { j = len; break; }
        if (piece) memcpy(buf + j, piece, k);
        else buf[j] = *s;
        j += k;
    }
    if (!plain && j + 1 < len) buf[j++] = '\'';
    else if (!plain) j = len;
    if (j >= len) j = 0; /* too small: "" */
    buf[j] = '\0';
    return buf;
}

void sh_word_put(FILE *f, const char *s) {
    const size_t n = 4 * strlen(s) + 3; /* every character a '\'' four, and the quotes */
    char *w = malloc_check(n);
    fputs(sh_word(w, n, s), f);
    free(w);
}

void csv_field_putn(FILE *f, const char *s, size_t n) {
    int quote = 0;
    for (size_t i = 0; i < n && !quote; i++) quote = s[i] == ',' || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!quote) { fwrite(s, 1, n, f); return; }
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

void csv_field_put(FILE *f, const char *s) { csv_field_putn(f, s, strlen(s)); }

void csv_num_put(FILE *f, double v) {
    if (isnan(v)) return;
    if (isinf(v)) { fputs(v > 0 ? "inf" : "-inf", f); return; }
    char buf[40];
    for (int p = 15; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, v);
        if (strtod(buf, NULL) == v) break;
    }
    fputs(buf, f);
}

void signed_put(FILE *f, double v, int width, int dec) {
    char s[64];
    snprintf(s, sizeof s, "%+*.*f", width, dec, v);
    char *minus = strchr(s, '-');
    if (minus && strspn(s, " -0.") == strlen(s)) *minus = '+';
    fputs(s, f);
}

/* Parent directory of path into buf ("." when there is none). */
void parent_dir(char *buf, size_t len, const char *path) {
    snprintf(buf, len, "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash) snprintf(buf, len, ".");
    else if (slash == buf) buf[1] = '\0';
    else *slash = '\0';
}

/* The .tmp files being written, with their final paths (tmp_streams_unlink reads those
 * from a signal handler): tmp_stream_open's streams, and write_file_tmp's files (no
 * stream) until commit_file_tmp or drop_file_tmp. A slot is taken (`used`) with its names
 * before its .tmp is created and given back only once the .tmp is renamed or removed: a
 * signal in between finds the file registered, never a .tmp it does not know. */
#define TMP_STREAMS 32
static struct {
    volatile sig_atomic_t used;
    FILE *f;
    int lock_fd; /* tmp_create's lock on the .tmp, -1 for none */
    char path[1290];
    char tmp[1300];
} tmp_streams[TMP_STREAMS];

/* Take or give back slot: the names written before `used` says so (the handler reads
 * them once it does), `used` cleared only after the file it names is gone. */
static void tmp_slot_set(int slot, int used) {
    if (!used && tmp_streams[slot].lock_fd >= 0) { /* its file renamed or removed: the lock is let go */
        close(tmp_streams[slot].lock_fd);
        tmp_streams[slot].lock_fd = -1;
    }
    /* a fence of the CPU's, not the compiler's alone: the handler may run on another
       thread (an OpenMP worker's) and, on a weakly ordered CPU (aarch64), would otherwise
       see `used` before the names */
    atomic_thread_fence(memory_order_seq_cst);
    tmp_streams[slot].used = used;
    atomic_thread_fence(memory_order_seq_cst);
}

/* A free slot taken for path's .tmp (stream f, NULL for none), or -1 when none is free
 * or the path does not fit (errno set). */
static int tmp_slot_take(const char *path, FILE *f) {
    int slot = 0;
    while (slot < TMP_STREAMS && tmp_streams[slot].used) slot++;
    if (slot == TMP_STREAMS || strlen(path) >= sizeof tmp_streams[0].path) {
        errno = slot == TMP_STREAMS ? EMFILE : ENAMETOOLONG;
        return -1;
    }
    snprintf(tmp_streams[slot].path, sizeof tmp_streams[slot].path, "%s", path);
    snprintf(tmp_streams[slot].tmp, sizeof tmp_streams[slot].tmp, "%s.tmp", path);
    tmp_streams[slot].f = f;
    tmp_streams[slot].lock_fd = -1;
    tmp_slot_set(slot, 1); /* before the file exists: a signal from now on removes it */
    return slot;
}

/* Give back the slot of write_file_tmp's path.tmp, if it has one (its file renamed or removed). */
static void tmp_slot_release(const char *path) {
    for (int i = 0; i < TMP_STREAMS; i++)
        if (tmp_streams[i].used && !tmp_streams[i].f && !strcmp(tmp_streams[i].path, path)) {
            tmp_slot_set(i, 0);
            return;
        }
}

/* tests only: S2HC_TEST_TMP_PAUSE=NAME holds NAME.tmp open, just created, after a line
   saying so, until a signal (60 s at most) */
static void tmp_test_pause(const char *path, const char *tmp) {
    const char *hold = getenv("S2HC_TEST_TMP_PAUSE"), *base = strrchr(path, '/');
    if (!hold || !*hold || strcmp(base ? base + 1 : path, hold)) return;
    fprintf(stderr, "(test) %s open\n", tmp);
    for (const double until = now_seconds() + 60; !stop_signal && now_seconds() < until;) {
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* The file at tmp, found there by tmp_create: 1 when another writer holds it (its lock), else
 * removed (0; also when it is gone meanwhile) or -1 with unlink's errno (a folder of that
 * name, a folder this process may not change: no writer's, its own error). A file is
 * removed under its own lock and only while it is still the one at tmp: two writers that
 * both found one left by a killed writer cannot remove each other's new file for it. A
 * link (never followed), a folder, or a file this process may not open goes by its name. */
static int tmp_remove_stale(const char *tmp) {
    const int old = open(tmp, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC); /* a write lock needs O_RDWR */
    if (old < 0) return unlink(tmp) != 0 && errno != ENOENT ? -1 : 0;
    if (ofd_lock(old, F_OFD_SETLK) != 0 && (errno == EAGAIN || errno == EACCES)) {
        close(old);
        return 1;
    }
    struct stat found, named;
    int rc = 0;
    if (fstat(old, &found) == 0 && lstat(tmp, &named) == 0 && found.st_dev == named.st_dev &&
        found.st_ino == named.st_ino && unlink(tmp) != 0 && errno != ENOENT)
        rc = -1;
    const int e = errno;
    close(old);
    errno = e;
    return rc;
}

/* slot's .tmp (or tmp, for a writer without a slot) created anew for writing, and locked
 * until it is renamed or removed (the lock's descriptor in the slot): a .tmp another
 * process holds so is refused with EBUSY (two writers of one file removed each other's
 * .tmp, and one renamed the other's half-written file over the path), one left by a
 * process that died is replaced. A link or a pipe there is removed, never followed; one
 * that cannot be removed fails with unlink's errno. The descriptor, or -1 with errno.
 * Where the file system takes no locks, written unlocked. */
static int tmp_create(int slot, const char *tmp) {
    for (int tries = 0; tries < 4; tries++) {
        const int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0) {
            if (errno != EEXIST) return -1;
            const int stale = tmp_remove_stale(tmp);
            if (stale > 0) break;
            if (stale < 0) return -1;
            continue;
        }
        if (ofd_lock(fd, F_OFD_SETLK) != 0) return fd; /* no locks here (ENOLCK): as before them */
        /* still the file of that name: another writer may have taken it for a stale one
           and removed it between the create and the lock */
        struct stat mine, named;
        if (fstat(fd, &mine) != 0 || stat(tmp, &named) != 0 || mine.st_dev != named.st_dev ||
            mine.st_ino != named.st_ino) {
            close(fd);
            continue;
        }
        if (slot >= 0) tmp_streams[slot].lock_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* -1: unlocked at close */
        return fd;
    }
    errno = EBUSY;
    return -1;
}

/* The longest path write_file_tmp takes: its folder and path.tmp fit their buffers whole
 * (cut short, the folder made and the file written would be other ones). */
#define TMP_PATH_MAX 1023

int write_file_tmp(const char *path, const void *head, size_t head_len, const void *body, size_t body_len) {
    char dir[TMP_PATH_MAX + 1], tmp[TMP_PATH_MAX + 8];
    if (strlen(path) > TMP_PATH_MAX) {
        fprintf(stderr, "s2hc: error: cannot write %.60s...: a path of %zu bytes, longer than %d\n", path, strlen(path),
                TMP_PATH_MAX);
        errno = ENAMETOOLONG;
        return -1;
    }
    parent_dir(dir, sizeof dir, path);
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "s2hc: error: cannot create directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    /* registered before it exists, for a signal handler's tmp_streams_unlink (none free:
       written all the same) */
    const int slot = tmp_slot_take(path, NULL);
    const int fd = tmp_create(slot, tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        if (errno == EBUSY)
            fprintf(stderr, "s2hc: error: cannot write %s: another process is writing it now (%s is open)\n", path,
                    tmp);
        else fprintf(stderr, "s2hc: error: cannot write %s: %s\n", tmp, strerror(errno));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        if (slot >= 0) tmp_slot_set(slot, 0);
        return -1;
    }
    tmp_test_pause(path, tmp);
    int ok = (head_len == 0 || fwrite(head, 1, head_len, f) == head_len) &&
             (body_len == 0 || fwrite(body, 1, body_len, f) == body_len) && fflush(f) == 0 && fsync(fileno(f)) == 0;
    int saved = errno;
    if (fclose(f) != 0 && ok) { ok = 0; saved = errno; }
    if (!ok) {
        fprintf(stderr, "s2hc: error: writing %s failed: %s\n", path, strerror(saved));
        unlink(tmp);
        if (slot >= 0) tmp_slot_set(slot, 0);
        return -1;
    }
    return 0;
}

void drop_file_tmp(const char *path) {
    char tmp[TMP_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    unlink(tmp);
    tmp_slot_release(path);
}

int commit_file_tmp(const char *path) {
    char dir[TMP_PATH_MAX + 1], tmp[TMP_PATH_MAX + 8];
    parent_dir(dir, sizeof dir, path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (rename(tmp, path) != 0) {
        fprintf(stderr, "s2hc: error: writing %s failed: %s\n", path, strerror(errno));
        unlink(tmp);
        tmp_slot_release(path);
        return -1;
    }
    tmp_slot_release(path);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { fsync(dfd); close(dfd); }
    return 0;
}

FILE *tmp_stream_open(const char *path) {
    const int slot = tmp_slot_take(path, NULL);
    if (slot < 0) return NULL;
    const char *tmp = tmp_streams[slot].tmp;
    const int fd = tmp_create(slot, tmp);
    if (fd >= 0) tmp_test_pause(path, tmp);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        const int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        tmp_slot_set(slot, 0);
        errno = e;
        return NULL;
    }
    tmp_streams[slot].f = f;
    return f;
}

void tmp_streams_unlink(void) {
    for (int i = 0; i < TMP_STREAMS; i++)
        if (tmp_streams[i].used) {
            atomic_thread_fence(memory_order_acquire); /* the names written before `used` (tmp_slot_set) */
            unlink(tmp_streams[i].tmp);
        }
}

void stop_signal_clean(int sig) {
    tmp_streams_unlink();
    /* the default again, and the signal raised: pending while this handler blocks it, it
       ends the process as soon as the handler returns, with the status a shell expects */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    raise(sig);
}

int tmp_file_claim(const char *path) { return tmp_slot_take(path, NULL) < 0 ? -1 : 0; }

void tmp_file_made(const char *path) {
    char tmp[TMP_PATH_MAX + 8];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) < (int)sizeof tmp) tmp_test_pause(path, tmp);
}

void tmp_file_release(const char *path) { tmp_slot_release(path); }

const char *tmp_stream_path(const FILE *f) {
    for (int i = 0; i < TMP_STREAMS; i++)
        if (f && tmp_streams[i].used && tmp_streams[i].f == f) return tmp_streams[i].path;
    return NULL;
}

/* The slot of a tmp_stream_open stream, TMP_STREAMS when f is none */
static int tmp_slot_of(const FILE *f) {
    int slot = 0;
    while (slot < TMP_STREAMS && !(tmp_streams[slot].used && tmp_streams[slot].f == f)) slot++;
    return slot;
}

int tmp_stream_commit(FILE *f) {
    const int slot = tmp_slot_of(f);
    if (slot == TMP_STREAMS) return fclose(f);
    tmp_streams[slot].f = NULL;
    const char *path = tmp_streams[slot].path, *tmp = tmp_streams[slot].tmp;
    int bad = ferror(f) || fflush(f) != 0, e = errno;
    if (fclose(f) != 0 && !bad) bad = 1, e = errno;
    if (!bad && rename(tmp, path) != 0) bad = 1, e = errno;
    if (bad) unlink(tmp);
    tmp_slot_set(slot, 0); /* the .tmp renamed or removed */
    if (!bad) return 0;
    errno = e ? e : EIO;
    return -1;
}

void tmp_stream_drop(FILE *f) {
    const int slot = tmp_slot_of(f);
    if (slot == TMP_STREAMS) return;
    tmp_streams[slot].f = NULL;
    fclose(f);
    unlink(tmp_streams[slot].tmp);
    tmp_slot_set(slot, 0);
}

int write_file_atomic(const char *path, const void *head, size_t head_len, const void *body, size_t body_len) {
    return write_file_tmp(path, head, head_len, body, body_len) != 0 ? -1 : commit_file_tmp(path);
}

int grid_slurm_folder(const char *dir) {
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    const size_t base = n >= 5 ? n - 5 : 0;
    if (n < 5 || memcmp(dir + base, "slurm", 5) || (base > 0 && dir[base - 1] != '/')) return 0;
    char p[1200];
    snprintf(p, sizeof p, "%.*s/submit.sh", (int)n, dir);
    return access(p, F_OK) == 0;
}

int grid_index_file(const char *path) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    struct stat st;
    if (strcmp(b, "index.csv") != 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    char p[1200];
    snprintf(p, sizeof p, "%.*s.index.lock", (int)(b - path), path);
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

void path_trim_slashes(char *p) {
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
}
