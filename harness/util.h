/* util.h: checked wrappers and small helpers shared by every module.
 * The *_check wrappers print the caller's file and line and exit(1) on failure, so the
 * main code stays readable and no return code is ignored (llm.c's habit). */
#ifndef S2HC_UTIL_H
#define S2HC_UTIL_H
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

void *malloc_check_(size_t size, const char *file, int line);
void *calloc_check_(size_t n, size_t size, const char *file, int line);
/* calloc_check for the big buffers a step streams through (activations, gradients,
 * parameters, optimizer moments): from CALLOC_HUGE_MIN bytes on, 2 MB aligned and marked
 * for transparent huge pages (madvise), so the streams' pages cost the TLB 512 times
 * fewer entries; where the kernel does not give huge pages it is plain zeroed memory.
 * Free with free(). docs/performance.md, log item 15. */
#define CALLOC_HUGE_MIN ((size_t)4 << 20)
void *calloc_huge_(size_t n, size_t size, const char *file, int line);
FILE *fopen_check_(const char *path, const char *mode, const char *file, int line);
#define malloc_check(sz) malloc_check_((sz), __FILE__, __LINE__)
#define calloc_check(n, sz) calloc_check_((n), (sz), __FILE__, __LINE__)
#define calloc_huge(n, sz) calloc_huge_((n), (sz), __FILE__, __LINE__)
#define fopen_check(p, m) fopen_check_((p), (m), __FILE__, __LINE__)

/* Set OPENBLAS_CORETYPE and the OpenMP runtime's spin (RUNTIME_SPIN_VAR) when unset and
 * re-execute the program once (the libraries read them when they load); call first thing
 * in main. util.c says why. A GCC build runs libgomp, whose spin is GOMP_SPINCOUNT; a
 * clang build libomp (the Makefile), whose spin is KMP_BLOCKTIME in milliseconds (0 is
 * none, 1 the shortest). */
#ifdef __clang__
#define RUNTIME_SPIN_VAR "KMP_BLOCKTIME"
#define RUNTIME_SPIN "1"
#else
#define RUNTIME_SPIN_VAR "GOMP_SPINCOUNT"
#define RUNTIME_SPIN "3000"
#endif
void runtime_env_fixup(char **argv);
/* Standard input, output or error closed by the caller (`s2hc train ... >&-`): the next
 * file opened would take its number, and what is printed there would land in that file
 * (train's progress lines in the run's .train.lock, a grid's in a point's .lock). Each
 * closed one is opened on /dev/null, read-only, so that it stays taken and a write to it
 * still fails as on a closed one (EBADF: `s2hc inspect --csv >&-` still says so). Call
 * first thing in main. */
void std_fds_reserve(void);
/* The CPUs the process was given, as OpenMP found them: with OMP_PROC_BIND or OMP_PLACES
 * set, the calling thread is bound to one place and its own mask counts that place only
 * (util.c). runtime_unbind gives the calling thread all of them again: for a child
 * process between fork and exec, or for work forked off that should not share one
 * place; it does nothing when OpenMP binds nothing. */
int runtime_cpu_count(void);
void runtime_unbind(void);
/* omp_set_num_threads(n), at most OMP_THREAD_LIMIT: a region's team is then the count
 * asked for (a smaller team of one had OpenBLAS, called inside it, wait forever for
 * threads of its own). runtime_env_fixup applies the limit to the default count too. */
void threads_set(int n);
/* Flush float and double results below the smallest normal number to zero (x86-64: the
 * FTZ bit of MXCSR; inputs that are already subnormal, a config's 1e-310, still compare
 * as they are), in the calling thread and every thread of the current team; threads
 * created later inherit it from the thread that starts them. A model trained at a high
 * learning rate makes subnormal attention probabilities and gradients, which the CPU
 * multiplies 10-100 times slower than normal numbers: a step took up to 7 times as long
 * (docs/performance.md item 59). Returns 0 where the CPU has no such control. s2hc and
 * frame_bench call it once, after runtime_env_fixup (the unit tests keep subnormals). */
int runtime_flush_denormals(void);
/* 1 when a product below the smallest normal float is 0 in every thread of a parallel
 * region of the current team (what `s2hc version -v` reports). */
int runtime_denormals_flushed(void);

/* NULL, or one line of advice when OPENBLAS_CORETYPE names kernels for an older vector
 * extension than this CPU has (e.g. Haswell's AVX2 on an AVX-512 CPU: sgemm 1.75x slower
 * on one build machine); printed by `s2hc train`, `s2hc bench` and `s2hc version -v`. */
const char *openblas_coretype_advice(void);
/* This CPU's widest vector extension, as OPENBLAS_CORETYPE's kernels count them: 4 for
 * AVX-512 (SkylakeX), 3 for AVX2 (Haswell), 0 for anything else (older x86-64 CPUs, ARM). */
int cpu_vector_rank(void);
/* The architecture this build is for (`s2hc version -v`; tests/cli/lib.sh's s2hc_arch). */
#if defined(__x86_64__)
#define S2HC_ARCH "x86_64"
#elif defined(__aarch64__)
#define S2HC_ARCH "aarch64"
#else
#define S2HC_ARCH "other"
#endif
/* The CPU's model name (/proc/cpuinfo's first "model name"; on ARM, which has none, the
 * first core's implementer and part, named where known: "Neoverse-V2 (ARM implementer
 * 0x41, part 0xd4f)"), or "unknown", in buf. cpu_model_name_from reads an open
 * /proc/cpuinfo (f may be NULL). */
const char *cpu_model_name(char *buf, size_t len);
const char *cpu_model_name_from(FILE *f, char *buf, size_t len);
/* The size in bytes of the first CPU's cache of this level (sysfs), 0 where unknown. */
size_t cpu_cache_bytes(int level);

/* Print "s2hc: error: ..." to stderr and exit with `code`. */
void die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Wall-clock seconds (monotonic). */
double now_seconds(void);
/* CPU seconds of the OpenMP threads (the calling one included), each reading its own
 * clock; call outside a parallel region. Linux adds a running thread's time to the
 * process clock (CLOCK_PROCESS_CPUTIME_ID) only at a scheduler tick or when it stops, so
 * over a few milliseconds a thread that spin-waits (GOMP_SPINCOUNT) goes missing from
 * it; a thread's own clock is exact when the thread reads it. */
double threads_cpu_seconds(void);

/* A step count read from a file as a double: the value when it is a whole number in
 * [0, 2^53], else -1 (a corrupt file's NaN or 1e300 cast to an integer is undefined). */
long long step_from_double(double x);

/* s as one word for /bin/sh, for a command that a message, log or script shows to be run
 * (a path with a space or a quote would split or open a quote when pasted): as it is when
 * every character is one a shell takes literally (letters, digits and _ - . / = : , + @ %),
 * else in single quotes, a quote in it as '\''. sh_word returns buf; a buf too small
 * holds "" (never a word cut short, whose quote would not close): 4 * strlen(s) + 3 bytes
 * are always enough. sh_word_put writes it to f. */
const char *sh_word(char *buf, size_t len, const char *s);
void sh_word_put(FILE *f, const char *s);
/* CSV (RFC 4180), the one quoting of every CSV the project writes (a grid's index.csv,
 * analyze's tables and data, eval/data list/inspect --csv): field n bytes of s as they are,
 * or in double quotes, each '"' doubled, when they hold a comma, a quote or a line break
 * (a run folder may hold any). csv_field_put: the whole string s. */
void csv_field_putn(FILE *f, const char *s, size_t n);
void csv_field_put(FILE *f, const char *s);
/* A number as a CSV field, in full: the fewest significant digits (15 to 17) that read
 * back as v exactly; an infinity as inf or -inf (which pandas and Python's float read);
 * NaN (no value) as an empty field. */
void csv_num_put(FILE *f, double v);
/* v as printf's "%+*.*f" (width, dec decimals), but a value that rounds to zero as +0.0...:
 * a fall too small to show reads as no change, not as "-0.00000". */
void signed_put(FILE *f, double v, int width, int dec);
/* mkdir -p. Returns 0 on success, -1 with errno set. */
int mkdir_p(const char *path);
/* The folder of path: "a/b" of "a/b/c", "/" of "/c", "." of "c". */
void parent_dir(char *buf, size_t len, const char *path);
/* One holder at a time of a lock file (the grid's <run>/.lock, train's <run>/.train.lock):
 * an open file description lock (F_OFD_SETLK), which
 * belongs to the open file, so it is released however the process ends and a child that
 * inherits the descriptor keeps it. Returns the descriptor (O_CLOEXEC) holding the lock;
 * -1 when the file cannot be opened (errno set); -2 when another open file holds it, with
 * the holder's line (lock_file_claim) in holder, "" when it wrote none. */
int lock_file_try(const char *path, char *holder, size_t holder_len);
/* 1 when another open file holds the lock file at path (lock_file_try's lock), with the
 * holder's line in holder; 0 when it is free or absent. Tested (F_OFD_GETLK), never
 * taken: a reader never makes a writer that starts meanwhile find the lock held, and
 * needs no write access to the file. */
int lock_file_held(const char *path, char *holder, size_t holder_len);
/* Write "WHO pid P on HOST since TIME" into the held lock file, for lock_file_try's
 * message to whoever finds it held. */
void lock_file_claim(int fd, const char *who);
/* lock_file_try on path, claimed for who when taken; else a message naming dir: "cannot
 * open PATH" (-1) or "DIR is in use (HOLDER); wait for it to end or ADVICE" (-2). The
 * run's .train.lock (run_lock) and an output folder's (out_dir_lock). */
int lock_file_take(const char *path, const char *dir, const char *who, const char *advice);
/* One writer at a time of an output folder (analyze's and report's -o, bench's --csv):
 * lock_file_try on DIR/.output.lock, claimed for who ("s2hc report"). The descriptor
 * (held until it is closed or the process ends), or < 0 after a message: -2 when another
 * process holds it ("DIR is in use (s2hc report pid P on HOST since TIME)"). */
int out_dir_lock(const char *dir, const char *who);
/* This machine's name and the local time as "YYYY-MM-DD HH:MM:SS". */
void host_and_time(char *host, size_t host_len, char *when, size_t when_len);
int file_exists(const char *path);

/* Deterministic RNG (splitmix64 seeding + xorshift64*). The whole state is one uint64
 * so it can be checkpointed. */
typedef struct { uint64_t s; } rng_t;
void rng_seed(rng_t *r, uint64_t seed);
uint64_t rng_u64(rng_t *r);
double rng_uniform(rng_t *r);            /* [0, 1) */
double rng_normal(rng_t *r);             /* N(0, 1), Box-Muller */

/* Format seconds as "1h02m" / "3m05s" / "12s". buf >= 16 bytes. */
void fmt_duration(double s, char *buf, size_t len);

/* Stopping on a signal. stop_signals_catch(say) makes SIGINT, SIGTERM and SIGHUP (the
 * terminal closed), each unless ignored when the process started (nohup's SIGHUP, a
 * background job's SIGINT: stop_signal_ignored), set stop_signal (the signal's number) and,
 * with say, say once on stderr that the process stops at the next safe point (the ranks
 * > 0 of a launch stay silent); the handler is reset by that first signal, so a second
 * Ctrl-C or SIGTERM ends the process at once (the run's files are written atomically, so
 * that loses no file), while a second SIGHUP is ignored (stop_signals_again_to). The loops that
 * can give up cleanly poll stop_signal: training after each step, its evaluations (the
 * periodic ones and the final one) between batches, and its final probe between batches
 * (the probe's Jacobian estimate between its products). Only training catches: in `s2hc
 * eval` and `s2hc probe` the same loops find it 0, and a signal ends the command
 * (stop_signal_clean, which main.c installs). 0 until a signal came (and in commands that
 * do not catch). */
extern volatile sig_atomic_t stop_signal;
void stop_signals_catch(int say);
/* SIGINT, SIGTERM and SIGHUP to handler h (a command's own handling; SIG_DFL, SIG_IGN
 * too), each only if the process did not start with it ignored (stop_signal_ignored);
 * async-signal-safe, so a handler may call it to change the next signal's. */
void stop_signals_to(void (*h)(int));
/* 1 when the stop signal sig (SIGINT, SIGTERM or SIGHUP) was ignored when the process
 * started: it then stays ignored, in the process and in what it starts (the POSIX
 * convention): SIGHUP under nohup, SIGINT in a job a non-interactive shell put in the
 * background (`s2hc train ... &` in a script, which a Ctrl-C meant for the script's
 * foreground command must not stop). The first call reads the dispositions: it comes
 * before any handler is set (stop_signals_to calls it first). Async-signal-safe after. */
int stop_signal_ignored(int sig);
/* After a command's first stop signal: SIGINT and SIGTERM to h (stop_signals_to), a
 * SIGHUP from then on ignored. A terminal that closes sends the foreground job two
 * (the shell passes its own on to its jobs, and the kernel's reaches the foreground
 * group): the second must not count as "again" and end at once what the first asked to
 * stop at its safe point. Async-signal-safe. */
void stop_signals_again_to(void (*h)(int));
/* The handler a second signal goes to once stop_signals_catch's has taken the first
 * (stop_signal_clean unless set: the .tmp files being written are removed and the process
 * ends by the signal); a command that runs trainings in process (bench) ends by its own,
 * which removes its files first. */
void stop_signals_then(void (*h)(int));
/* For the commands whose output is a log beside their product (train, grid, report):
 * SIGPIPE goes to a handler that does nothing, so that a write to a pipe whose reader is
 * gone fails with EPIPE and the command goes on, its output lost but not its work
 * (`s2hc train ... | tee log`: a terminal that closes kills tee, and train's next progress
 * line ended it unsaved). A caught signal is back to its default across exec: what the
 * command starts (a grid's points, gnuplot) gets the default. A SIGPIPE ignored when the
 * process started stays ignored. */
void sigpipe_survive(void);
/* rm -rf path with system calls alone (async-signal-safe: a signal handler may call it
 * before _exit); a tree at most 8 folders deep. */
void remove_tree_now(const char *path);

/* A long loop's progress on stdout (or stderr, progress_to): "WHAT: K/N UNITS | 12s | ETA 30s", shown only once
 * the loop has run 2 s; then rewritten in place about every second on a terminal, or a
 * line every 15 s when stdout is a file or a pipe. progress_begin(.., enabled = 0) shows
 * nothing; progress_end clears the terminal's line. */
#define PROGRESS_AFTER 2.0 /* seconds before the first line */
#define PROGRESS_TTY_EVERY 1.0
#define PROGRESS_LOG_EVERY 15.0
/* PROGRESS_AFTER, or S2HC_TEST_PROGRESS_AFTER's seconds (tests: the first line sooner);
 * for the commands whose progress goes elsewhere (sample's, on stderr) */
double progress_after(void);
/* argv[i + 1] as the value of the option argv[i], or NULL when there is none or it starts
 * with '-': another option (`report -o --no-plots` wrote its report into a folder named
 * --no-plots and drew the figures); a path that starts with '-' is written ./-name. */
const char *opt_value(int argc, char **argv, int i);
/* The rules every command's option loop shares (`s2hc train`, `s2hc grid`, ... alike).
 * opt_kind(arg, &ended), first for each argument (ended 0 at the loop's start): -1 for
 * POSIX's "--", which ends the options (the loop skips it); 1 for an operand: after the
 * "--" every argument is one, even one that starts with '-' (a run folder named -odd:
 * `s2hc inspect -- -odd`), before it one that does not start with '-' (or is "-" alone);
 * 0 for an option. */
int opt_kind(const char *arg, int *ended);
/* The value of the option `name` at argv[*i], given as `name VALUE` (*i moves on to it)
 * or as `name=VALUE`; NULL when argv[*i] is not that option, or its VALUE is missing,
 * or (unless dash_ok, for a value such as a prompt) is a word that starts with '-' (as
 * opt_value): the loop then reports argv[*i] as unknown or incomplete. */
const char *opt_arg(int argc, char **argv, int *i, const char *name, int dash_ok);
/* An option of one value is given once, in every command: a second occurrence (as
 * `name VALUE` or `name=VALUE`, either way) is refused, naming the option and both values,
 * never silently taken over the first (`eval --config a.yaml --config b.yaml` read b.yaml
 * alone). The options that repeat (--set, runs' --key) take opt_arg. A loop declares
 * `opt_seen seen = {"eval"}` (the command, for the message) and takes such an option by
 * opt_once: opt_arg's value (NULL as opt_arg), or, for an option seen took before,
 * "s2hc: error: eval: --config given twice ('a.yaml', then 'b.yaml'): give it once" and
 * exit 2 (a usage error, before anything is read or written). opt_seen_take records a value
 * found otherwise (grid's -jN) under name, with the same check. */
#define OPT_SEEN_MAX 16
typedef struct {
    const char *cmd;
    const char *name[OPT_SEEN_MAX], *value[OPT_SEEN_MAX];
    int n;
} opt_seen;
const char *opt_once(opt_seen *seen, int argc, char **argv, int *i, const char *name, int dash_ok);
void opt_seen_take(opt_seen *seen, const char *name, const char *value);
/* 1 when fd is a terminal that draws a line in place ("\r", ESC[K) and colours: a
 * terminal whose TERM is "dumb" or unset (Emacs's M-x shell, a serial console) shows those
 * as ^[[K, so there progress goes a line at a time, as into a log, and colour is off. */
int terminal_live(int fd);
/* The width in columns of the terminal at fd, 0 when it is none or says none. */
int terminal_columns(int fd);
/* text as the live line of the terminal at f (stdout or stderr): "\r", text cut to one
 * column less than the terminal's width (a line that wraps leaves its first rows behind
 * at every redraw), "\033[K"; flushed. A line too wide keeps its last field (after its
 * last " | " or ", ": the ETA) whole, "..." before it, where that leaves 8 columns of the
 * rest. The text is UTF-8, cut between characters, each counted as the columns a terminal
 * gives it: two for an East Asian wide one (a grid file's CJK name), none for a combining
 * mark. */
void tty_line(FILE *f, const char *text);
/* A growing list of strings, each its own copy: strlist l = {0}; strlist_add; strlist_sort
 * (by strcmp, byte order); strlist_free. */
typedef struct {
    char **v;
    size_t n, cap;
} strlist;
void strlist_add(strlist *l, const char *s);
void strlist_sort(strlist *l);
void strlist_free(strlist *l);
/* The columns a terminal gives text (UTF-8, as tty_line counts them). */
int text_width(const char *text);
typedef struct {
    const char *what, *unit;
    long total;
    double t0, last;
    int enabled, tty, shown;
    /* a loop whose first units cost more than the rest (the final probe's Jacobian):
       `skip` seconds of the elapsed time are left out of the rate per unit, and `extra`
       seconds of that costlier work still to come are added to the ETA (both 0 by default) */
    double skip, extra;
    long done; /* the count of the last update */
    char note[96]; /* shown after the count while not empty: where inside a long unit the loop is */
    FILE *out;     /* stdout; progress_to: stderr for a command whose stdout is data (eval --csv) */
} progress;
void progress_begin(progress *p, const char *what, const char *unit, long total, int enabled);
/* After progress_begin: the lines on f instead of stdout (a line drawn in place when f is
 * a live terminal). */
void progress_to(progress *p, FILE *f);
void progress_update(progress *p, long done);
/* The last count again (p may be NULL): keeps the line coming, elapsed time and ETA,
 * through one long unit of work (the final probe's Jacobian of a batch). */
void progress_tick(progress *p);
void progress_end(progress *p);

/* The whole file (at most 64 MiB) as a NUL-terminated string, malloc'd; its length in
 * *len. NULL with errno on failure. */
char *read_text_file(const char *path, size_t *len);

/* Write head then body to path atomically: path.tmp, fsync, rename, fsync the directory
 * (created first if missing). 0, or -1 after a message naming the file, with no path.tmp
 * left and path untouched (a path longer than 1023 bytes: -1, ENAMETOOLONG, nothing made). */
int write_file_atomic(const char *path, const void *head, size_t head_len, const void *body, size_t body_len);
/* write_file_atomic in two halves, for files that must change together: the first writes
 * and syncs path.tmp (or fails as above, nothing left), the second renames it over path
 * and syncs the directory (-1 after a message, path.tmp removed). Between the two,
 * drop_file_tmp(path) abandons it. */
int write_file_tmp(const char *path, const void *head, size_t head_len, const void *body, size_t body_len);
int commit_file_tmp(const char *path);
/* A file written as a stream, whole or not at all: tmp_stream_open gives a stream on
 * path.tmp (created anew: a link or a pipe there is removed, never followed; at most 32
 * open at once); tmp_stream_commit checks every write, closes it and renames it over its
 * path. NULL or -1 with errno saying why (no path.tmp left); no message, the caller names
 * its file: tmp_stream_path gives it (NULL for a stream of fopen, which commit closes). */
FILE *tmp_stream_open(const char *path);
const char *tmp_stream_path(const FILE *f);
int tmp_stream_commit(FILE *f);
/* Close a tmp_stream_open stream and remove its path.tmp: its path keeps what it held. */
void tmp_stream_drop(FILE *f);
/* Remove the .tmp of every stream tmp_stream_open has open, and of every write_file_tmp
 * file not yet committed or dropped (write_file_atomic's too), their paths keeping what
 * they held; unlink only, so a signal handler may call it before _exit. A .tmp is known to
 * it from before the file is created until it is renamed or removed: a signal at any
 * point leaves no .tmp behind (at most 32 at once: past that a file is written
 * unregistered). */
void tmp_streams_unlink(void);
void drop_file_tmp(const char *path);
/* A path.tmp made by other means (HDF5's H5Fcreate), then renamed over path or removed,
 * known to tmp_streams_unlink as write_file_tmp's are: tmp_file_claim before it is created
 * (-1, errno, when none of the 32 places is free or the path is too long: written
 * unregistered), tmp_file_made once it is (the tests' S2HC_TEST_TMP_PAUSE holds it there),
 * tmp_file_release once it is renamed or removed (nothing when path holds no place). */
int tmp_file_claim(const char *path);
void tmp_file_made(const char *path);
void tmp_file_release(const char *path);
/* The stop signals' handler of every command that has no other: the .tmp files being
 * written are removed (tmp_streams_unlink) and the signal then ends the process as its
 * default does; a signal ignored when the process started stays ignored. */
void stop_signal_clean(int sig);
/* A handler's first signal: stop_signal set, the next stop signal to next
 * (stop_signals_again_to), msg (len bytes, NULL for none) written to stderr, errno as the
 * interrupted code left it. */
void stop_signal_first(int sig, void (*next)(int), const char *msg, size_t len);

/* 1 when dir is a grid's folder of Slurm scripts (harness/grid_slurm.c): named slurm and
 * holding submit.sh. A glob over a grid's runs (runs/grid/NAME/ and a star) names it too:
 * the commands that take several runs pass over it. */
int grid_slurm_folder(const char *dir);
/* 1 when path is a grid's index.csv (a file of that name beside the grid's .index.lock):
 * the same glob without its trailing slash (runs/grid/NAME/STAR) names it too. */
int grid_index_file(const char *path);

/* p without its trailing slashes ("/" stays): a run folder given as runs/x/ (a shell's
 * completion) names its files runs/x/run.h5, not runs/x//run.h5. */
void path_trim_slashes(char *p);

#endif
