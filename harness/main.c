/* main.c: the `s2hc` command: one binary, one subcommand per task. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <hdf5.h>
#include "config.h"
#include "data.h"
#include "grid.h"
#include "presets.h"
#include "run.h"
#include "sample.h"
#include "ablate.h"
#include "util.h"
#include "../probes/probes.h"
#include "../analysis/analysis.h"
#include "bench.h"
#include "../kernels/kernels.h"
#include "../kernels/cuda/model_cuda.h"
#include "dist.h"

/* s2hc version [-v]: the commit; with -v also what this process runs with. */
static int version_main(int argc, char **argv) {
    /* its one option, -v, once; "--" ends the options as in every command (opt_kind) */
    int verbose = 0;
    for (int i = 1, ended = 0; i < argc; i++) {
        const int kind = opt_kind(argv[i], &ended);
        if (kind < 0) continue;
        if (kind == 0 && argc == 2 && (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))) {
            printf("usage: s2hc version [-v]\n\nThe build's git commit; -v (--verbose) also the threads, BLAS core, "
                   "whether subnormal results are flushed to zero, the bf16 products, GPUs and processes this run "
                   "would use.\n\nexample:\n  s2hc version -v\n");
            return 0;
        }
        if (kind == 0 && !verbose && (!strcmp(argv[i], "-v") || !strcmp(argv[i], "--verbose"))) {
            verbose = 1;
            continue;
        }
        fprintf(stderr, "usage: s2hc version [-v]\n");
        return 2;
    }
    printf("s2hc %s\n", s2hc_version());
    if (!verbose) return 0;
    char gpu[256];
    int ngpu = cuda_available(gpu, sizeof gpu);
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv(RUNTIME_SPIN_VAR), *ct = getenv("OPENBLAS_CORETYPE");
    printf("  reals             %s\n", REAL_IS_DOUBLE ? "double" : "float");
    char cpu[256];
    printf("  CPU               %s: %s\n", S2HC_ARCH, cpu_model_name(cpu, sizeof cpu));
    printf("  kernels           %s\n", kernels_vectors());
    printf("  built with        %s\n", s2hc_build_opt());
    printf("  CPU threads       %d (train.threads or OMP_NUM_THREADS)\n", kernels_threads());
    printf("  OMP_WAIT_POLICY   %s\n", wp ? wp : "(unset)");
    printf("  %-17s %s\n", RUNTIME_SPIN_VAR, sc ? sc : "(unset)");
    printf("  OPENBLAS_CORETYPE %s\n", ct ? ct : "(unset: OpenBLAS's own detection)");
    printf("  denormals         %s\n", runtime_denormals_flushed() ? "flushed to zero in every thread (results below the smallest normal float are 0)"
                                                                    : "kept (results below the smallest normal float stay subnormal: slower steps at high learning rates)");
    /* residual.proj_precision: bf16's products, as a training here would take them */
    const char *amx_env = getenv("S2HC_AMX");
    printf("  bf16 products     %s\n",
           !model_bf16_built() ? "none: this build has no AVX512_BF16 (residual.proj_precision: bf16 is refused)"
           : model_amx_usable() ? "AMX tiles (residual.proj_precision: bf16; vdpbf16ps where a norm row has more than "
                                  "96 outputs, mhc_lite from n = 5; S2HC_AMX=0 for vdpbf16ps)"
           : model_amx_built() && amx_env && !strcmp(amx_env, "0") ? "vdpbf16ps (S2HC_AMX=0 turns the AMX tiles off)"
                                              : "vdpbf16ps (no AMX tiles: the CPU, the build or the kernel has none)");
    const char *blas_note = openblas_coretype_advice();
    if (blas_note) printf("  note: %s\n", blas_note);
    printf("  GPUs              %d: %s\n", ngpu, gpu);
    char mpi[256];
    dist_describe(mpi, sizeof mpi);
    printf("  processes         %s\n", mpi);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "s2hc %s: a research harness for hyper-connection residual networks\n"
            "\n"
            "usage: s2hc COMMAND [ARGS]   (s2hc COMMAND --help, or s2hc help COMMAND, for each)\n"
            "\n"
            "Every command takes an option's value as --opt VALUE or --opt=VALUE, and `--` ends its\n"
            "options: what follows is a file or run folder even when it starts with '-'\n"
            "(s2hc inspect -- -odd/run). An option that takes one value is given once: a second\n"
            "is refused (exit 2), unless the command's --help says that option repeats.\n"
            "\n"
            "commands:\n"
            "  data prepare         corpora from Debian packages -> token shards under data/\n"
            "  data list            which corpora are prepared\n"
            "  data import FILE     a text file (or token ids) of your own as a corpus (--name NAME)\n"
            "  train CONFIG.yaml    train a model, write runs/<name>/run.h5 and ckpt.h5\n"
            "  grid GRID.yaml       run an experiment grid (resumable, -j N, --slurm)\n"
            "  eval RUN_DIR|FILE.safetensors... validation and out-of-domain perplexity of runs\n"
            "                       or exported files (the file alone), several in turn\n"
            "  probe RUN_DIR...     the end-of-training probe over validation sequences (/final)\n"
            "  inspect RUN_DIR      residual matrices of a run, per layer, in the terminal\n"
            "  sample RUN_DIR|FILE.safetensors  text from a run's model or a model file, continuing\n"
            "                       a prompt\n"
            "  ablate RUN_DIR...    the loss with each sublayer's H_res set to I, its mean or 11^T/n, or its\n"
            "                       output left out\n"
            "  export RUN_DIR       a run's weights as a safetensors file (nanoGPT's tensor names)\n"
            "  runs [DIRS...]       every run under runs/ (or DIRS), a line each: status, losses, speed\n"
            "  analyze RUNS... -o D plot data and tables from run files (for the report)\n"
            "  report RUNS... -o D  the HTML report: every figure and table, the paper's numbers beside ours\n"
            "  bench                speed against the machine's limit (tokens/s, MFU, overheads)\n"
            "  params               auxiliary parameter counts of every method against n\n"
            "  methods              the residual methods, one line each\n"
            "  config               every config key with its type, default and meaning (also: help config)\n"
            "  version [-v]         the build's git commit (-v: threads, BLAS, GPU)\n"
            "\n"
            "example:\n"
            "  s2hc data prepare && s2hc train experiments/tiny.yaml --set train.steps=50 --set run.name=first\n",
            s2hc_version());
}

/* `s2hc methods` and `s2hc config` take no arguments but --help. 0: go on; else the exit
 * code (the usage printed). */
static int no_args(int argc, char **argv, const char *what, const char *example) {
    if (argc < 2 || (argc == 2 && !strcmp(argv[1], "--"))) return -1; /* "--": the options' end, nothing after */
    int help = argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (!help) fprintf(stderr, "s2hc: error: %s: takes no arguments ('%s')\n", argv[0], argv[1]);
    fprintf(help ? stdout : stderr, "usage: s2hc %s\n\n%s\n\nexample:\n  %s\n", argv[0], what, example);
    return help ? 0 : 2;
}

static int methods_main(void) {
    printf("  %-12s %s\n", "rc", "standard residual: one stream, X + F(X)");
    for (int i = 0; hc_variants[i]; i++) printf("  %-12s %s\n", hc_variants[i]->name, hc_variants[i]->summary);
    return 0;
}

static const char *const commands[] = {"data",   "train",   "grid",    "eval",   "probe",  "inspect", "sample",
                                       "ablate", "export", "runs",    "analyze", "report", "bench",  "params", "methods",
                                       "config", "version", NULL};

static int dispatch(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") && argc > 2) { /* `s2hc help CMD`: CMD --help */
        if (argc > 3) {
            fprintf(stderr, "s2hc: error: help: one command at a time ('%s', then '%s')\n", argv[2], argv[3]);
            return 2;
        }
        if (!strcmp(argv[2], "config")) { config_print_schema(stdout); return 0; }
        if (!strcmp(argv[2], "help")) { usage(stdout); return 0; }
        for (int i = 0; commands[i]; i++)
            if (!strcmp(argv[2], commands[i])) {
                char help[] = "--help", *av[] = {argv[0], argv[2], help, NULL};
                return dispatch(3, av);
            }
        fprintf(stderr, "s2hc: error: help: no command '%s' (s2hc help lists them)\n", argv[2]);
        return 2;
    }
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) return version_main(argc - 1, argv + 1);
    /* their output is a log beside their product: a reader of it that died (`| tee log`)
       must not end them (sigpipe_survive) */
    if (!strcmp(cmd, "train") || !strcmp(cmd, "grid") || !strcmp(cmd, "report")) sigpipe_survive();
    if (!strcmp(cmd, "train")) return train_main(argc - 1, argv + 1);
    if (dist_launched() > 1) { /* W copies of any other command would race on its files */
        fprintf(stderr, "s2hc: error: %s: launched as %d processes; only `s2hc train` runs across processes "
                "(docs/distributed.md)\n", cmd, dist_launched());
        return 2;
    }
    if (!strcmp(cmd, "eval")) return eval_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "data")) return data_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "params")) return params_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "grid")) return grid_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "runs")) return runs_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "analyze")) return analyze_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return report_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return bench_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "probe")) return probe_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect")) return inspect_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "sample")) return sample_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "export")) return export_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "ablate")) return ablate_main(argc - 1, argv + 1);
    if (!strcmp(cmd, "methods")) {
        int rc = no_args(argc - 1, argv + 1, "The residual methods (residual.method), one line each.",
                         "s2hc methods");
        return rc >= 0 ? rc : methods_main();
    }
    if (!strcmp(cmd, "config")) {
        int rc = no_args(argc - 1, argv + 1,
                         "Every configuration key with its type, default, allowed values and meaning "
                         "(also: s2hc help config; docs/config.md).",
                         "s2hc config | less");
        if (rc >= 0) return rc;
        config_print_schema(stdout);
        return 0;
    }
    fprintf(stderr, "s2hc: error: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return 2;
}

/* What a command prints on stdout can be its product (`s2hc inspect --csv > layers.csv`):
 * a write there that failed (a full disk, `ulimit -f`) is an error, not exit 0 with the
 * file cut short. rc, or 1 after a message when it was 0. Not for train and grid, whose
 * stdout is a log beside their product (the run's files, which say how the run ended; a
 * grid records a finished run by its exit). */
static int stdout_checked(const char *cmd, int rc) {
    if (cmd && (!strcmp(cmd, "train") || !strcmp(cmd, "grid"))) return rc;
    /* an output past stdio's buffer failed while it was printed: the errno of that write
       (each failed write sets it again, nothing after it clears it) */
    const int before = ferror(stdout) ? errno : 0;
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return rc;
    const int e = errno ? errno : before;
    fprintf(stderr, "s2hc: error: writing the standard output failed: %s\n", e ? strerror(e) : "write error");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    std_fds_reserve(); /* before any file is opened: none may take stdout's number */
    /* HDF5 1.10 keeps a file whose close failed (a full disk) in its ID table, and its
       exit handler then crashes closing it again: every file is closed explicitly, so
       the handler is not needed (before any other HDF5 call) */
    H5dont_atexit();
    /* past `ulimit -f` a write fails with EFBIG, which every writer reports and cleans up
       after (no .tmp left), instead of the signal killing the process mid-file */
    signal(SIGXFSZ, SIG_IGN);
    runtime_env_fixup(argv);
    runtime_flush_denormals(); /* a high learning rate's subnormals: up to 7x a step's time */
    /* a Ctrl-C, SIGTERM or SIGHUP ends a command as its default does, less the .tmp of a
       file it was writing (eval's or probe's run.h5, export's safetensors, data's shards);
       train, grid, bench, analyze and report catch them their own way */
    stop_signals_to(stop_signal_clean);
    return stdout_checked(argc > 1 ? argv[1] : NULL, dispatch(argc, argv));
}
