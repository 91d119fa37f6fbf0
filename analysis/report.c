/* report.c: `s2hc report RUNS_OR_GRID_DIRS... -o OUT`: analyze (unless --no-analyze),
 * draw every figure with gnuplot (unless --no-plots) and write OUT/index.html: one page
 * with a section per figure and table (what the paper showed, what we measured, at which
 * scale and seeds, the paper's numbers beside ours) and the claims with verdicts. The
 * figures sit beside the page as PNG (shown) and SVG (linked). */
#include "analysis.h"
#include "../harness/util.h"
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Every figure of the report: the script plots/<stem>.gp writes OUT/<stem>.{png,svg}.
 * depth: drawn (and on the page) only where two or more scales of the runs differ in depth
 * alone (summary.txt's depth_scales, from the analysis); otherwise left out whole. */
typedef struct {
    const char *stem, *title, *paper, *ours;
    int depth;
} an_figure;

static const an_figure figures[] = {
    {"fig01_overview", "Fig 1: learned residual matrices, out-of-domain perplexity, parameter overhead",
     "Left: learned 4×4 H_res of mHC and mHC-lite sit at the identity, s²HC's mixes streams with negative entries. "
     "Middle: s²HC has the lowest perplexity relative to RC on five out-of-domain corpora. Right: mHC-lite's auxiliary "
     "parameters explode with n (6.07B at n = 8, about 51× the 0.12B base model; our count is 5.95B, 6.07B with the "
     "base model's own).",
     "Top: token-averaged H_res (final probe, every validation sequence) of the middle sublayer l, counted from 0 as in "
     "Fig 9 and s2hc inspect --layer (the sublayer axes of Fig 6, v2 Fig 5 and hres_depth count from 1), values printed "
     "in the cells. Bottom left: PPL / PPL(RC) − 1 in % per out-of-domain corpus (below 0 % = better than RC), over the seeds "
     "of the shown runs' training length (Table 2's row of it), a bar per method and, where the runs were trained with "
     "several learning rates or schedules, per recipe (named in the key, each paired with RC's runs of its recipe). "
     "Bottom right: "
     "auxiliary parameters against n, counted from the parameter table at the runs' width and depth."
     " The paper draws the authors' stored matrix, the transpose of our H_res (X_next = H_res·X): its column "
     "sums are our row sums and its rows our columns.", 0},
    {"fig02_rowmax", "Fig 2: identity degeneration during training",
     "For mHC and mHC-lite the median row-wise maximum of H_res stays near 1 (10–90 % band narrow) and nearly every matrix "
     "has all its row maxima on the diagonal: both degenerate to the identity.",
     "Median and 10–90 % band of the row maxima over every row of every per-token H_res of every sublayer of the fixed "
     "probe batch, and the fraction of per-token matrices whose row maxima all sit on the diagonal; s²HC for contrast.", 0},
    {"fig03_cos_mhc", "Fig 3: stream similarity, identity baseline vs mHC",
     "For the fixed identity H_res and for mHC alike, the streams' pairwise similarity falls quickly in training and "
     "levels off (the streams decorrelate); mHC's curves follow the identity baseline's, slightly above it at every "
     "layer (its non-negative mixing averages the streams).",
     "Mean pairwise cosine similarity among the n streams after mixing (H_res·X), one line per sublayer, over training; "
     "the identity baseline comes from the ablation grid.", 0},
    {"fig10_cos_s2hc", "Fig 10: stream similarity, identity baseline vs s²HC",
     "s²HC keeps the streams more diverse than the identity baseline.", "As Fig 3, for s²HC.", 0},
    {"fig11_cos_mhc_lite", "Fig 11: stream similarity, identity baseline vs mHC-lite",
     "mHC-lite, like mHC, follows the identity baseline.", "As Fig 3, for mHC-lite.", 0},
    {"fig05_gradnorm", "Fig 5: gradient norm over training",
     "HC's global gradient norm explodes (the plot clamps it at 5); mHC, mHC-lite and s²HC stay bounded.",
     "Global gradient norm before clipping at every step of one run per method, clamped at 5 for display (the raw values "
     "are in data/fig5_*.dat). The median and largest norm below are over every step of the run; the gradnorm table's "
     "leave out the first 10 % (warm-up).", 0},
    {"fig06_colsums", "Fig 6: column and row sums and the composite's spectral norm",
     "mHC's per-layer column sums reach 1.4 and its composite's 1.6 (v2: 2.0 and 3.6 over 28 layers); s²HC and mHC-lite are "
     "exactly 1. The spectral norm of s²HC's cumulative composite stays at 1 at every depth.",
     "Top row, column sums; bottom row, row sums. Left: min/quartiles/max of the sums of each sequence's token-averaged "
     "H_res per sublayer. Middle: the same for the composite product over all sublayers. Top right: spectral norm of the "
     "cumulative composite over the first l sublayers, mean ± std over sequences. Bottom right: the worst per-token "
     "|sum − 1| per sublayer, columns solid and rows dashed, log scale: where mHC's Sinkhorn iteration leaves one side "
     "exact (the side it normalises last) and the other within its tolerance."
     " The paper draws the authors' stored matrix, the transpose of our H_res (X_next = H_res·X): its column "
     "sums are our row sums and its rows our columns.", 0},
    {"fig07_streams", "Fig 7: cost against the number of streams",
     "Left: mHC's and s²HC's training throughput stays stable as n grows, mHC-lite's degrades rapidly beyond n = 6 "
     "(out of memory at n = 8). Right: auxiliary parameters against n, log scale: mHC-lite grows factorially.",
     "Left: median training tokens/s over a run's steps, mean over the runs of each n, on this machine: the throughput-only "
     "runs (the streams grid's, n = 2..8) where there are any, else the compared runs. Right: counted auxiliary "
     "parameters, log scale.", 0},
    {"fig08_entries", "Fig 8: distribution of H_res entries",
     "mHC's and mHC-lite's entries are non-negative and concentrated at 0 and 1; s²HC's spread on both sides of zero.",
     "Histogram (fraction per 0.01 bin, log scale) of every entry of every per-token H_res of every sublayer over the "
     "final probe's validation sequences.", 0},
    {"fig09_heatmaps", "Fig 9: H_res at four depths and the composite",
     "Heat maps at layers 1, 6, 18, 23 and of the composite, with row and column sums printed on the axes: mHC's sums "
     "drift from 1, s²HC's do not.",
     "Token-averaged H_res of validation sequence 0 at four depths l, counted from 0 as in the paper (with 24 "
     "sublayers the paper's l = 1, 6, 18, 23; otherwise the first, about a quarter, about three quarters and the last "
     "sublayer) and the composite product; row sums on the right, column sums below."
     " The paper draws the authors' stored matrix, the transpose of our H_res (X_next = H_res·X): its column "
     "sums are our row sums and its rows our columns.", 0},
    {"figv2_05_devsv", "v2 Fig 5: singular values of the deviation H_res − J",
     "s²HC's deviation part has two singular values near 1 and one at 0.77 (selective attenuation); the last is 0 since "
     "the mean direction is kept.",
     "Singular values (descending) of the token-averaged H_res minus J = 11ᵀ/n per sublayer, one panel per method.", 0},
    {"beyond_jacobian", "Beyond the paper: full-network Jacobian vs the residual path",
     "The paper argues from the linear residual path only (‖Π H_res‖ ≤ 1).",
     "Spectral norm of d(final streams)/d(initial streams) for the full network (branches on) and for the residual path "
     "alone (branches off), mean ± std over validation sequences, log scale.", 0},
    {"beyond_ablation", "Beyond the paper: what the residual mixing, and each sublayer, is worth",
     "The paper shows that the learned H_res of mHC and mHC-lite sit at the identity while s²HC's mix the streams "
     "(Fig 1 left, Fig 9); it does not measure what the mixing contributes to the loss, nor how the methods spread "
     "the work over the sublayers.",
     "Rise in validation loss when one sublayer's H_res is replaced, for every token, by the identity (left) or by its "
     "own average over the tokens (middle: over held-out training sequences where recorded with --mean-from train, as "
     "make paper records them, else over the sequences scored; the panel's title says which), or when the "
     "sublayer's output is left out (right: RC too, its one ablation), against the sublayer (from 1), a line per method, mean ± std over the seeds that measured it (s2hc "
     "ablate --record, on the run's validation split: the same sequences as the unablated loss); the key gives the "
     "rise with every sublayer ablated at once. The first sublayer reads n copies of the embedding and the last "
     "one's streams are summed, so a replacement whose rows (columns) sum to 1 leaves them as they were: a rise of "
     "zero there for the methods whose H_res keeps both sums. A panel no run measured says so.", 0},
    {"hres_depth", "Beyond the paper: the residual matrices across depth and number of streams",
     "The paper shows H_res at n = 4 and argues from the composite's spectral norm (‖Π H_res‖ ≤ 1 for s²HC).",
     "One column per number of streams n among the runs. Top: distance from the identity ‖H_l − I‖₂ of each "
     "sublayer's token-averaged H_res (final probe); bottom: the residual path's gain through sublayer l, "
     "‖H_l ··· H_1‖₂ (mean over sequences, log scale); mean ± std over the seeds, sublayers counted from 1. The "
     "numbers: data/hres_layers_seeds.csv and the table residual.", 0},
    {"loss_depth", "Beyond the paper: validation loss against depth",
     "The paper argues that unconstrained HC's products over depth destabilise deep stacks while mHC's and s²HC's "
     "constraints keep them well conditioned; it trains one depth per model size (M: 12 blocks, L: 24).",
     "Final validation loss against the number of blocks, one line per method, a panel per optimisation recipe "
     "(learning rates ascending; their losses differ by more than the methods do, so each panel compares the "
     "methods at one rate, as the tables do): the mean over the finished seeds with its 95 % Student t interval as "
     "error bars (none with one seed), each method's points set a little apart sideways. Drawn for the scales "
     "that differ in depth alone (the same width, heads, context and corpus, trained as long); the numbers: "
     "data/loss_depth.csv; each depth's comparisons paired by seed: the tables pairs and recipes.", 1},
    {"fig00_loss", "Training loss (context for Table 1)", "Not a figure of the paper.",
     "Training loss per step (thin) and its moving average over a twentieth of the run's steps (bold), one run per "
     "method, in the cell the figures show.", 0},
};

typedef struct {
    const char *stem, *title, *paper;
} an_table_sec;

static const an_table_sec tables[] = {
    {"table1", "Table 1: final train and validation loss",
     "Validation loss, FineWeb-Edu, M / L: RC 3.325 / 3.048, HC 3.288 / 3.111, mHC 3.255 / 3.009, mHC-lite 3.254 / 3.006, "
     "s²HC 3.233 / 3.003 (one seed each, no intervals)."},
    {"table2", "Table 2: out-of-domain perplexity",
     "The paper's corpora (C4, Dolma, Falcon, RedPajama, Wikitext) are not available offline; we evaluate on five "
     "out-of-domain corpora from Debian packages instead. Compare the ordering, not the values."},
    {"table2_paper", "The paper's Table 2 (L model), for reference", ""},
    {"ablation", "Ablation: what each part of s²HC contributes",
     "v2 Tables 2–3: fixed identity vs orthogonal vs s²HC. The rotation-only control (Σ = I), the matrix-exponential "
     "core and the exact identity initialisation are the open questions of the v2 review, answered here by experiment."},
    {"recipes", "Recipes: a row per learning rate or schedule of a sweep", ""},
    {"pairs", "Every two methods compared, and the seeds a comparison needs",
     "v2 Tables 2–3 compare one run per method (no seeds, no intervals)."},
    {"gradnorm", "Gradient norms of every run, by method and recipe",
     "Fig 5: HC's gradient norm grows far above the others (one run per method, clamped at 5); here every method, "
     "seed and learning rate."},
    {"residual", "The residual matrices across depth, by method and number of streams", ""},
    {"throughput", "Throughput and parameters",
     "Fig 7: mHC's and s²HC's throughput stable in n, mHC-lite's degrading beyond n = 6; mHC-lite's auxiliary "
     "parameters reach 6.07B at n = 8 (C = 768, 24 sublayers; "
     "our count is 5.95B, and 6.07B with GPT-2 small's own 0.12B)."},
    {"scales", "Model sizes and budgets", "The paper: M = 12 layers × 768 (0.12B), L = 24 × 1024 (0.36B), 10 000 steps."},
    {"runs", "Every run", ""},
};

static void report_usage(FILE *f) {
    fprintf(f,
            "usage: s2hc report RUNS_OR_GRID_DIRS... -o OUT [--no-analyze] [--no-plots]\n"
            "                   [--plots DIR] [--title TEXT] [-q]\n\n"
            "Build OUT/index.html for any set of runs: analyze them (s2hc analyze ... -o OUT), draw\n"
            "every figure with gnuplot (DIR/<figure>.gp, DIR = plots by default) and write one page\n"
            "with a section per figure and table, the paper's numbers beside ours, and the claims\n"
            "with verdicts (reproduced / not reproduced / inconclusive at this scale).\n"
            "  -o OUT          output directory (default out/report)\n"
            "  --no-analyze    use OUT/data and OUT/tables as they are (make paper does this)\n"
            "  --no-plots      do not run gnuplot (use the figures already in OUT)\n"
            "  -q              quiet: no progress lines from the analysis\n"
            "  --plots DIR     where the figure scripts are (default ./plots when it holds style.gp, else plots/\n"
            "                  beside bin/)\n"
            "  --title TEXT    the page's title and heading (default: the paper's figures and tables)\n\n"
            "examples:\n"
            "  s2hc report runs/paper runs/ablations runs/streams -o out/paper\n"
            "  s2hc report runs/my-baseline runs/tiny-s2hc -o out/mine\n");
}

static int file_exists_(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && st.st_size > 0;
}

/* Text for the page, as text or inside a double-quoted attribute (an alt): < > & " escaped.
 * Every string the page did not write itself goes through it: a run folder's name, the
 * scale, corpus and model of summary.txt, a caption's numbers, gnuplot's words. */
static void put_esc(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '<') fputs("&lt;", f);
        else if (*s == '>') fputs("&gt;", f);
        else if (*s == '&') fputs("&amp;", f);
        else if (*s == '"') fputs("&quot;", f);
        else fputc(*s, f);
    }
}

/* A markdown caption's text as it was written (tables.c's put_md escapes each of | \ ` * < > & ~,
 * a '_' at a word's edge, a '[' or '(' that could make a link and what would make an
 * autolink, the '.' of www., the ':' of :// and each '@', by a backslash): a
 * backslash before an ASCII punctuation character dropped, in place, so that the page
 * does not show "max \|sum − 1\|". */
static void md_unescape(char *s) {
    char *o = s;
    for (; *s; s++) {
        if (*s == '\\' && s[1] && ispunct((unsigned char)s[1]) && !((unsigned char)s[1] & 0x80)) s++;
        *o++ = *s;
    }
    *o = '\0';
}

/* Copy OUT/tables/<stem>.html into f (or a note when it is missing). */
static void include_file(FILE *f, const char *out, const char *sub, const char *name) {
    char p[1200];
    snprintf(p, sizeof p, "%s/%s/%s", out, sub, name);
    FILE *in = fopen(p, "r");
    if (!in) { fprintf(f, "<p class=\"missing\">missing: %s/%s</p>\n", sub, name); return; }
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, f);
    fclose(in);
}

/* "Also as Markdown, LaTeX, CSV": a link to each of OUT/tables/STEM.{md,tex,csv} there is. */
static void table_links(FILE *f, const char *out, const char *stem) {
    static const char *const ext[] = {"md", "tex", "csv"}, *const what[] = {"Markdown", "LaTeX", "CSV"};
    int n = 0;
    for (int i = 0; i < 3; i++) {
        char p[1200];
        snprintf(p, sizeof p, "%s/tables/%s.%s", out, stem, ext[i]);
        if (access(p, R_OK) != 0) continue;
        fprintf(f, "%s<a href=\"tables/%s.%s\">%s</a>", n++ ? ", " : "<p class=\"meta\">Also as ", stem, ext[i], what[i]);
    }
    if (n) fprintf(f, ".</p>\n");
}

/* A value from OUT/data/summary.txt ("key=value" lines) into buf ("" if absent). */
static void summary_get(const char *out, const char *key, char *buf, size_t len) {
    char p[1200], line[4096];
    buf[0] = 0;
    snprintf(p, sizeof p, "%s/data/summary.txt", out);
    FILE *f = fopen(p, "r");
    if (!f) return;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == '=') {
            line[strcspn(line, "\n")] = 0;
            snprintf(buf, len, "%s", line + kl + 1);
            break;
        }
    fclose(f);
}

/* The measured-numbers line of a figure from OUT/data/captions.tsv. */
static void caption_get(const char *out, const char *stem, char *buf, size_t len) {
    char p[1200], line[4096];
    buf[0] = 0;
    snprintf(p, sizeof p, "%s/data/captions.tsv", out);
    FILE *f = fopen(p, "r");
    if (!f) return;
    size_t kl = strlen(stem);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, stem, kl) && line[kl] == '\t') {
            line[strcspn(line, "\n")] = 0;
            snprintf(buf, len, "%s", line + kl + 1);
            break;
        }
    fclose(f);
}

/* gnuplot's process (and group) id while it draws, else 0, and the .tmp files it draws
 * into: what a second Ctrl-C or SIGTERM stops and removes. */
static volatile pid_t drawing_pid;
static char drawing_tmp[2][1300];

/* A second Ctrl-C or SIGTERM while drawing: gnuplot's group killed (SIGKILL: its own
 * interrupt handler can hang) and reaped, its .tmp files removed, exit 130 at once. Only
 * async-signal-safe calls. */
static void on_second_signal(int sig) {
    (void)sig;
    const pid_t p = drawing_pid;
    if (p > 0) {
        kill(-p, SIGKILL);
        waitpid(p, NULL, 0);
    }
    unlink(drawing_tmp[0]);
    unlink(drawing_tmp[1]);
    static const char msg[] = "\ns2hc report: stopped; the figure being drawn dropped\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    _exit(130);
}

/* The first: stop_signal, the figure being drawn is finished (run_plots then stops). */
static void on_first_signal(int sig) {
    static const char msg[] = "\ns2hc report: finishing the figure being drawn (again to stop at once)\n";
    stop_signal_first(sig, on_second_signal, msg, sizeof msg - 1);
}

/* gnuplot -e "dir='OUT'; suffix='.tmp'" SCRIPT, its stderr appended to log: no shell
 * between, so no path is ever read as shell syntax; in gnuplot's single quotes a quote is
 * doubled. The figure goes to OUT/STEM.{png,svg}.tmp (plots/style.gp), which run_plots
 * renames. gnuplot runs in a process group of its own: a Ctrl-C reaches s2hc only, which
 * lets the figure finish (gnuplot's own SIGINT handler can leave its file cut short, or
 * hang inside cairo). 0 when gnuplot exited 0. */
static int run_gnuplot(const char *out, const char *stem, const char *script, const char *log) {
    char dir[2400];
    size_t j = 0;
    j += (size_t)snprintf(dir, sizeof dir, "dir='");
    for (const char *c = out; *c && j + 4 < sizeof dir; c++) {
        if (*c == '\'') dir[j++] = '\'';
        dir[j++] = *c;
    }
    snprintf(dir + j, sizeof dir - j, "'; suffix='.tmp'");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_APPEND | O_CREAT, 0666);
    /* s2hc ignores SIGXFSZ (its own writers report EFBIG); gnuplot ignores a failed write,
       so past `ulimit -f` it must die of the signal, and its figure count as failed */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t def;
    sigemptyset(&def);
    sigaddset(&def, SIGXFSZ);
    posix_spawnattr_setsigdefault(&at, &def);
    posix_spawnattr_setpgroup(&at, 0);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
    char *const args[] = {"gnuplot", "-e", dir, (char *)script, NULL};
    for (int e = 0; e < 2; e++)
        snprintf(drawing_tmp[e], sizeof drawing_tmp[e], "%s/%s.%s.tmp", out, stem, e ? "svg" : "png");
    pid_t pid;
    int st = -1;
    if (posix_spawnp(&pid, "gnuplot", &fa, &at, args, environ) == 0) {
        drawing_pid = pid;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        drawing_pid = 0;
    }
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}

/* What became of each figure in this report, for the page to say: drawn (and whether
 * gnuplot warned: a data file it could not open, a column it could not read), not drawn
 * and why, or left as it was (--no-plots: an earlier report's drawing, if any). said:
 * gnuplot's first warning or its error, the report's folder dropped from its paths. */
typedef enum { FIG_KEPT, FIG_DRAWN, FIG_FAILED, FIG_NO_GNUPLOT, FIG_NO_SCRIPT } fig_state;
typedef struct {
    fig_state state;
    int warned;
    char said[400];
} fig_outcome;

/* One line of what gnuplot appended to log between the offsets from and to (its first
 * line, or with last its last, gnuplot's error) into buf, without "OUT/" at the start of
 * the paths it names (relative to the page, then) and cut at a character's edge; "" when
 * there is none. */
static void log_line(const char *log, const char *out, long from, long to, int last, char *buf, size_t len) {
    buf[0] = 0;
    FILE *f = fopen(log, "r");
    if (!f || from >= to || fseek(f, from, SEEK_SET) != 0) { if (f) fclose(f); return; }
    char line[2048], pick[2048] = "";
    long at = from;
    while (at < to && fgets(line, sizeof line, f)) {
        at += (long)strlen(line);
        line[strcspn(line, "\r\n")] = 0;
        if (!line[strspn(line, " \t^")]) continue; /* blank, or gnuplot's ^ under the column */
        snprintf(pick, sizeof pick, "%s", line);
        if (!last) break;
    }
    fclose(f);
    char pre[1100];
    snprintf(pre, sizeof pre, "%s/", out);
    const size_t pl = strlen(pre);
    size_t j = 0;
    for (const char *c = pick; *c && j + 1 < len;) {
        if ((c == pick || c[-1] == '"' || c[-1] == ' ') && !strncmp(c, pre, pl)) { c += pl; continue; }
        buf[j++] = *c++;
    }
    buf[j] = 0;
    if (j + 1 >= len) { /* cut: its last character whole or dropped, never half a UTF-8 one */
        while (j > 0 && ((unsigned char)buf[j - 1] & 0xC0) == 0x80) j--;
        if (j > 0 && ((unsigned char)buf[j - 1] & 0xC0) == 0xC0) j--;
        buf[j] = 0;
    }
}

/* Remove OUT/STEM.{png,svg}: a figure not drawn this time is not shown as an older one;
 * and OUT/STEM.gnuplot.log, what gnuplot said while `make paper` drew it. */
static void remove_figure(const char *out, const char *stem) {
    char p[1300];
    for (int e = 0; e < 3; e++) {
        snprintf(p, sizeof p, "%s/%s.%s", out, stem, e == 2 ? "gnuplot.log" : e ? "svg" : "png");
        remove(p);
    }
}

/* --no-plots: the figures as they were drawn, each by `make paper`'s own rule, which keeps
 * what gnuplot said while drawing figure STEM in OUT/STEM.gnuplot.log (none: it said
 * nothing): warned, with its first line, where a figure's log is there beside its PNG. */
static void kept_warnings(const char *out, fig_outcome *res) {
    int warned = 0;
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        char p[1300];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s.png", out, figures[i].stem);
        if (!file_exists_(p)) continue; /* not on the page: its log is of no drawing shown */
        snprintf(p, sizeof p, "%s/%s.gnuplot.log", out, figures[i].stem);
        if (stat(p, &st) != 0 || st.st_size == 0) continue;
        res[i].warned = 1;
        log_line(p, out, 0, (long)st.st_size, 0, res[i].said, sizeof res[i].said);
        warned++;
    }
    if (warned)
        fprintf(stderr, "s2hc report: gnuplot had warned while drawing %d figure(s) (the page says which): "
                        "%s/<figure>.gnuplot.log\n", warned, out);
}

/* Every figure of the report drawn into out, what became of each in res: the number not
 * drawn (each said why), or -1 when a signal stopped it (stop_signal). */
static int run_plots(const char *out, const char *plots, fig_outcome *res) {
    const size_t nfig = sizeof figures / sizeof figures[0];
    char ds[16];
    summary_get(out, "depth_scales", ds, sizeof ds);
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        /* an earlier report's figures would show the earlier data beside this analysis' tables */
        int n = 0;
        for (size_t i = 0; i < nfig; i++) {
            remove_figure(out, figures[i].stem);
            if (figures[i].depth && atoi(ds) < 2) continue;
            res[i].state = FIG_NO_GNUPLOT;
            n++;
        }
        fprintf(stderr, "s2hc report: gnuplot not found: figures not drawn, earlier ones in %s removed (make deps "
                        "installs it)\n", out);
        return n;
    }
    int bad = 0, warned = 0;
    char log[1100];
    snprintf(log, sizeof log, "%s/gnuplot.log", out); /* gnuplot's own words (warnings on degenerate data) */
    remove(log);
    for (size_t i = 0; i < nfig; i++) {
        char script[1024], cmd[3000];
        if (figures[i].depth && atoi(ds) < 2) { /* no depth sweep: not drawn, an older report's removed */
            remove_figure(out, figures[i].stem);
            continue;
        }
        snprintf(script, sizeof script, "%s/%s.gp", plots, figures[i].stem);
        if (!file_exists_(script)) {
            fprintf(stderr, "s2hc report: no script %s\n", script);
            remove_figure(out, figures[i].stem);
            res[i].state = FIG_NO_SCRIPT;
            bad++;
            continue;
        }
        struct stat st0;
        const long before = stat(log, &st0) == 0 ? (long)st0.st_size : 0;
        int failed = run_gnuplot(out, figures[i].stem, script, log) != 0;
        struct stat st1;
        const long after = stat(log, &st1) == 0 ? (long)st1.st_size : 0;
        if (after > before && !failed) {
            warned++;
            res[i].warned = 1;
        }
        log_line(log, out, before, after, failed, res[i].said, sizeof res[i].said);
        char tmp[1300];
        for (int e = 0; e < 2; e++) { /* the drawn files over the older ones (none: the script wrote them itself) */
            snprintf(cmd, sizeof cmd, "%s/%s.%s", out, figures[i].stem, e ? "svg" : "png");
            snprintf(tmp, sizeof tmp, "%s.tmp", cmd);
            if (failed || stop_signal) remove(tmp);
            else if (rename(tmp, cmd) != 0 && errno != ENOENT) {
                fprintf(stderr, "s2hc report: cannot rename %s to %s: %s\n", tmp, cmd, strerror(errno));
                remove(tmp);
                failed = 1;
            }
        }
        if (stop_signal) return -1; /* the figures drawn so far are in place, this one's older files too */
        snprintf(tmp, sizeof tmp, "%s/%s.gnuplot.log", out, figures[i].stem); /* make paper's, of the older drawing */
        remove(tmp);
        res[i].state = failed ? FIG_FAILED : FIG_DRAWN;
        if (failed) {
            /* what a failed script drew is partial (or an older report's): the page says
             * it was not drawn rather than show it */
            fprintf(stderr, "s2hc report: %s failed (gnuplot's message in %s); %s/%s.{png,svg} removed\n", script, log,
                    out, figures[i].stem);
            remove_figure(out, figures[i].stem);
            bad++;
        }
    }
    if (warned)
        fprintf(stderr, "s2hc report: gnuplot warned while drawing %d figure(s) (empty or flat data, usually; the page "
                        "says which): %s\n", warned, log);
    return bad;
}

/* " (gnuplot's every word: gnuplot.log)", linked, when OUT/gnuplot.log has any; for a
 * figure kept from `make paper`'s drawing (--no-plots), its own STEM.gnuplot.log. */
static void log_link(FILE *f, const char *out, const char *stem, const fig_outcome *o, const char *what) {
    char name[300], p[1300];
    snprintf(name, sizeof name, o->state == FIG_KEPT ? "%s.gnuplot.log" : "gnuplot.log", stem);
    snprintf(p, sizeof p, "%s/%s", out, name);
    if (file_exists_(p)) fprintf(f, " (%s: <a href=\"%s\">%s</a>)", what, name, name);
}

/* A figure on the page: its PNG, linked to its SVG, with the title as alt text and a
 * note when gnuplot warned; or, where there is no PNG, a line saying why. */
static void put_figure(FILE *f, const char *out, const an_figure *g, const fig_outcome *o) {
    char png[1200], svg[1200];
    snprintf(png, sizeof png, "%s/%s.png", out, g->stem);
    snprintf(svg, sizeof svg, "%s/%s.svg", out, g->stem);
    if (file_exists_(png)) {
        if (file_exists_(svg)) fprintf(f, "<a href=\"%s.svg\">", g->stem);
        fprintf(f, "<img src=\"%s.png\" alt=\"", g->stem);
        put_esc(f, g->title);
        fprintf(f, "\">%s\n", file_exists_(svg) ? "</a>" : "");
        if (o->warned) {
            fprintf(f, "<p class=\"missing\">gnuplot warned while drawing this figure, which may lack some of its "
                       "data: ");
            put_esc(f, o->said[0] ? o->said : "(no words)");
            log_link(f, out, g->stem, o, "every warning");
            fprintf(f, "</p>\n");
        }
        return;
    }
    fprintf(f, "<p class=\"missing\">%s.png was not drawn: ", g->stem);
    switch (o->state) {
    case FIG_FAILED:
        fprintf(f, "gnuplot stopped with an error");
        if (o->said[0]) { fprintf(f, ": "); put_esc(f, o->said); }
        log_link(f, out, g->stem, o, "its whole message");
        break;
    case FIG_NO_GNUPLOT: fprintf(f, "gnuplot was not found (make deps installs it)"); break;
    case FIG_NO_SCRIPT: fprintf(f, "there is no script %s.gp among the figure scripts (--plots)", g->stem); break;
    case FIG_KEPT: fprintf(f, "the report ran with --no-plots and there was no earlier drawing of it"); break;
    case FIG_DRAWN: fprintf(f, "gnuplot exited without an error but wrote no PNG"); break;
    }
    fprintf(f, ".</p>\n");
}

int report_main(int argc, char **argv) {
    const char *out = "out/report", *plots = "plots", *title = "s²HC: the paper's figures and tables, regenerated";
    int analyze = 1, draw = 1, plots_given = 0, quiet = 0;
    opt_seen seen = {.cmd = "report"};
    char **args = calloc_check((size_t)argc + 5, sizeof *args);
    int na = 5; /* analyze [-q] -o OUT -- RUNS...: the runs after "--", so that one named -x stays a run */
    int ended = 0;
    for (int i = 1; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        const char *v;
        if (kind < 0) continue;
        if (kind > 0) args[na++] = argv[i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) { report_usage(stdout); free(args); return 0; }
        else if ((v = opt_once(&seen, argc, argv, &i, "-o", 0))) out = v;
        else if ((v = opt_once(&seen, argc, argv, &i, "--plots", 0))) { plots = v; plots_given = 1; }
        else if ((v = opt_once(&seen, argc, argv, &i, "--title", 1))) title = v;
        else if (!strcmp(argv[i], "--no-analyze")) analyze = 0;
        else if (!strcmp(argv[i], "--no-plots")) draw = 0;
        else if (!strcmp(argv[i], "-q")) quiet = 1;
        else {
            fprintf(stderr, "s2hc: error: unknown option '%s'%s\n\n", argv[i],
                    opt_value(argc, argv, i) ? "" : " (or its value is missing or is an option)");
            report_usage(stderr);
            free(args);
            return 2;
        }
    }
    if (an_out_check(out)) { free(args); return 2; }
    if (draw && plots_given && strlen(plots) > AN_OUT_MAX) { /* its scripts' paths are built in fixed buffers */
        fprintf(stderr, "s2hc: error: --plots %.60s...: a path of %zu bytes, longer than %d; nothing written\n", plots,
                strlen(plots), AN_OUT_MAX);
        free(args);
        return 2;
    }
    struct stat st;
    /* held from here (or from the analysis, which makes OUT) to the page's end */
    an_out_who = "s2hc report";
    if (stat(out, &st) == 0 && S_ISDIR(st.st_mode) && an_out_lock(out)) { free(args); return 2; }
    if (draw && plots_given && (stat(plots, &st) != 0 || !S_ISDIR(st.st_mode))) { /* before anything is written */
        fprintf(stderr, "s2hc: error: --plots %s: no such directory (the figure scripts, plots/ of the source tree)\n",
                plots);
        free(args);
        return 2;
    }
    if (analyze) {
        if (na == 5) {
            fprintf(stderr, "s2hc: error: no runs given\n\n");
            report_usage(stderr);
            free(args);
            return 2;
        }
        char **a = quiet ? args : args + 1; /* -q only when given */
        a[0] = "analyze";
        if (quiet) a[1] = "-q";
        a[quiet + 1] = "-o";
        a[quiet + 2] = (char *)out;
        a[quiet + 3] = "--";
        int rc = analyze_main(na - !quiet, a);
        if (rc) { free(args); return rc; }
    }
    free(args);
    char p[1200];
    snprintf(p, sizeof p, "%s/data/meta.gp", out);
    if (!file_exists_(p)) {
        fprintf(stderr, "s2hc: error: %s missing: run s2hc analyze first (or drop --no-analyze)\n", p);
        return 1;
    }
    /* plots/ relative to the working directory when it holds the figure scripts (a source
       tree), else beside the binary (bin/../plots): a folder of the user's own that is
       named plots (a project's figures) is not taken for them */
    char plots_alt[1024];
    if (draw && !plots_given && !file_exists_("plots/style.gp")) {
        char exe[900];
        ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (len > 0 && (size_t)len < sizeof exe - 1) { /* a longer one came back cut: not its folder */
            exe[len] = 0;
            char *sl = strrchr(exe, '/');
            if (sl) *sl = 0;
            snprintf(plots_alt, sizeof plots_alt, "%s/../plots", exe);
            if (stat(plots_alt, &st) == 0) plots = plots_alt;
        }
    }
    /* Ctrl-C or SIGTERM while drawing: the figure being drawn is finished or dropped, the
       page is not written, exit 130; a second one stops gnuplot too (on_second_signal) */
    if (draw) stop_signals_to(on_first_signal);
    fig_outcome drawn[sizeof figures / sizeof figures[0]];
    memset(drawn, 0, sizeof drawn); /* FIG_KEPT: --no-plots */
    int not_drawn = draw ? run_plots(out, plots, drawn) : 0;
    if (!draw) kept_warnings(out, drawn);
    stop_signals_to(an_on_signal); /* while the page is written: its .tmp removed, exit 130 */
    if (not_drawn < 0 || stop_signal) {
        fprintf(stderr, "s2hc report: interrupted while drawing the figures; %s/index.html not written\n", out);
        return 130;
    }

    snprintf(p, sizeof p, "%s/index.html", out);
    char tmp[1300];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    FILE *f = tmp_stream_open(p);
    if (!f) {
        fprintf(stderr, "s2hc: error: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    char scale[64], corpus[64], runs[32], cruns[32], truns[32], smin[16], smax[16], model[256];
    summary_get(out, "scale", scale, sizeof scale);
    summary_get(out, "corpus", corpus, sizeof corpus);
    summary_get(out, "runs", runs, sizeof runs);
    summary_get(out, "comparison_runs", cruns, sizeof cruns);
    summary_get(out, "throughput_runs", truns, sizeof truns);
    summary_get(out, "seeds_min", smin, sizeof smin);
    summary_get(out, "seeds_max", smax, sizeof smax);
    summary_get(out, "model", model, sizeof model);
    char shown[2048], recipes[16], nfig[16], nall[256];
    summary_get(out, "shown", shown, sizeof shown);
    summary_get(out, "recipes", recipes, sizeof recipes);
    summary_get(out, "n", nfig, sizeof nfig);
    summary_get(out, "n_all", nall, sizeof nall);
    char dsc[16], dnames[1100];
    summary_get(out, "depth_scales", dsc, sizeof dsc);
    summary_get(out, "depth_scale_names", dnames, sizeof dnames);
    const int depth_sweep = atoi(dsc) >= 2; /* the figure loss_depth is on the page */
    time_t now = time(NULL);
    char when[64];
    strftime(when, sizeof when, "%Y-%m-%d %H:%M", localtime(&now));
    char seeds[64];
    if (!strcmp(smin, smax)) snprintf(seeds, sizeof seeds, "%s seed%s per method", smin, strcmp(smin, "1") ? "s" : "");
    else snprintf(seeds, sizeof seeds, "%s–%s seeds per method", smin, smax);

    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>");
    put_esc(f, title);
    fprintf(f, "</title>\n<style>\n"
               "body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;line-height:1.45;color:#222}\n"
               "h1{font-size:1.6em} h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}\n"
               "figure{margin:1em 0} figure img{max-width:100%%;border:1px solid #eee}\n"
               "figcaption{font-size:.92em;background:#f7f7f7;padding:.6em .8em;border-left:3px solid #888}\n"
               "table.t{border-collapse:collapse;font-size:.85em;margin:.6em 0} table.t td,table.t th{border:1px solid #ccc;padding:.25em .5em;vertical-align:top}\n"
               "table.t th{background:#eee} td.yes{background:#dfd} td.no{background:#fdd} td.maybe{background:#ffd}\n"
               ".missing{color:#a00} .meta{color:#555;font-size:.9em} nav a{margin-right:.8em}\n"
               "</style></head><body>\n<h1>");
    put_esc(f, title);
    if (scale[0]) {
        fprintf(f, "</h1>\n<p class=\"meta\">Generated %s by <code>s2hc report</code> from ", when);
        put_esc(f, runs);
        fprintf(f, " runs (");
        put_esc(f, cruns);
        fprintf(f, " compared, ");
        put_esc(f, truns);
        fprintf(f, " for throughput only). The figures show the <b>");
        put_esc(f, scale);
        fprintf(f, "</b> scale trained on <b>");
        put_esc(f, corpus);
        fprintf(f, "</b>, ");
        put_esc(f, seeds);
        fprintf(f, "; model: ");
        put_esc(f, model);
        fprintf(f, ". The paper's runs are 0.12B–0.36B-parameter GPT-2 models on GPUs and FineWeb-Edu / OpenWebText: "
                   "compare orderings and shapes, not values.");
    }
    if (scale[0] && shown[0]) {
        fprintf(f, " One run per method in the figures: ");
        put_esc(f, shown);
        if (strchr(nall, ' ')) { /* several stream counts: which one the figures show */
            fprintf(f, " (at n = ");
        put_esc(f, nfig);
        fprintf(f, " streams; the runs have n = ");
            put_esc(f, nall);
            fprintf(f, ", which the table <a href=\"#residual\">residual</a> compares)");
        }
        if (atoi(recipes) > 1)
            fprintf(f, " (the scale's runs were trained with %d optimisation recipes, learning rates or schedules: "
                       "each figure shows the first run of a method's lowest seed, whatever its recipe, but Fig 1's "
                       "out-of-domain bars and hres_depth give each recipe a bar and a line of its own, and Fig 7's "
                       "throughput pools every recipe's runs; the table "
                       "<a href=\"#recipes\">recipes</a> compares them, and a report of the runs of one recipe "
                       "alone shows its figures)", atoi(recipes));
        fprintf(f, ".");
    }
    if (scale[0]) fprintf(f, "</p>\n");
    else /* throughput runs only (probe.every and train.eval_every 0): nothing for the other figures */
        fprintf(f, "</h1>\n<p class=\"meta\">Generated %s by <code>s2hc report</code> from %d runs, all for throughput "
                   "only (no probes, no evaluations): only the throughput figure and table have data.</p>\n",
                when, atoi(runs));
    fprintf(f, "<nav><a href=\"#claims\">claims</a>");
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++)
        if (!figures[i].depth || depth_sweep) fprintf(f, "<a href=\"#%s\">%s</a>", figures[i].stem, figures[i].stem);
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) fprintf(f, "<a href=\"#%s\">%s</a>", tables[i].stem, tables[i].stem);
    fprintf(f, "</nav>\n");

    fprintf(f, "<h2 id=\"claims\">Claims</h2>\n<p>Each qualitative claim of the paper, the numbers we measured, and a "
               "verdict computed from them (thresholds in docs/paper.md).</p>\n");
    include_file(f, out, "tables", "claims.html");
    table_links(f, out, "claims");

    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        const an_figure *g = &figures[i];
        if (g->depth && !depth_sweep) continue; /* one depth: nothing to draw, nothing said */
        char svg[1200], meas[4096];
        snprintf(svg, sizeof svg, "%s/%s.svg", out, g->stem);
        const int has_svg = file_exists_(svg);
        caption_get(out, g->stem, meas, sizeof meas);
        fprintf(f, "<h2 id=\"%s\">", g->stem);
        put_esc(f, g->title);
        fprintf(f, "</h2>\n<figure>\n");
        put_figure(f, out, g, &drawn[i]);
        fprintf(f, "<figcaption><b>The paper:</b> ");
        put_esc(f, g->paper);
        fprintf(f, "<br><b>What we measured:</b> ");
        put_esc(f, g->ours);
        if (meas[0]) { fprintf(f, " "); put_esc(f, meas); }
        if (g->depth) { /* every depth's scale, not the figures' one */
            fprintf(f, "<br><b>Scales:</b> ");
            put_esc(f, dnames);
            fprintf(f, ", one per depth. Data: <code>data/</code>; script: <code>plots/%s.gp</code>", g->stem);
        } else {
            fprintf(f, "<br><b>Scale:</b> ");
            put_esc(f, scale);
            fprintf(f, ", trained on ");
            put_esc(f, corpus);
            fprintf(f, ", ");
            put_esc(f, seeds);
            fprintf(f, ". Data: <code>data/</code>; script: <code>plots/%s.gp</code>", g->stem);
        }
        if (has_svg) fprintf(f, "; vector version: <a href=\"%s.svg\">%s.svg</a>", g->stem, g->stem);
        fprintf(f, ".</figcaption>\n</figure>\n");
    }
    for (size_t i = 0; i < sizeof tables / sizeof tables[0]; i++) {
        const an_table_sec *t = &tables[i];
        fprintf(f, "<h2 id=\"%s\">", t->stem);
        put_esc(f, t->title);
        fprintf(f, "</h2>\n");
        if (t->paper[0]) { fprintf(f, "<p><b>The paper:</b> "); put_esc(f, t->paper); fprintf(f, "</p>\n"); }
        char md[256];
        snprintf(md, sizeof md, "%s.md", t->stem);
        /* the caption is the first line of the Markdown version */
        char mdp[1300], line[2048] = "";
        snprintf(mdp, sizeof mdp, "%s/tables/%s", out, md);
        FILE *in = fopen(mdp, "r");
        if (in) { if (!fgets(line, sizeof line, in)) line[0] = 0; fclose(in); }
        line[strcspn(line, "\n")] = 0;
        md_unescape(line); /* the caption's own text, not its markdown */
        if (line[0]) { fprintf(f, "<p>"); put_esc(f, line); fprintf(f, "</p>\n"); }
        char html[256];
        snprintf(html, sizeof html, "%s.html", t->stem);
        include_file(f, out, "tables", html);
        table_links(f, out, t->stem);
    }
    fprintf(f, "<h2>How this page was made</h2>\n<p><code>make paper PRESET=...</code> trains the grids "
               "(experiments/paper.yaml, ablations.yaml, streams.yaml), then <code>s2hc analyze</code> writes "
               "<code>data/</code> and <code>tables/</code>, <code>gnuplot plots/*.gp</code> draws the figures and "
               "<code>s2hc report</code> writes this page; docs/paper.md explains each step.</p>\n</body></html>\n");
    if (tmp_stream_commit(f) != 0) {
        fprintf(stderr, "s2hc: error: cannot write %s: %s\n", p, strerror(errno));
        return 1;
    }
    fprintf(stderr, "s2hc report: %s\n", p);
    if (not_drawn) { /* the page is written and says which; the exit status says it too */
        fprintf(stderr, "s2hc: error: %d figure%s not drawn (the messages above say why)\n", not_drawn,
                not_drawn > 1 ? "s were" : " was");
        return 1;
    }
    return 0;
}
