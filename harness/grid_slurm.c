/* grid_slurm.c: `s2hc grid --slurm`: the Slurm job array of a grid's points, its report job
 * and the script that submits both (<out>/slurm/; docs/grids.md, "Slurm").
 */
#include "grid_internal.h"
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The value of an #SBATCH option: sbatch splits those lines at whitespace, takes quotes
 * and backslashes as the shell does and ends them at an unquoted #; a value with any of
 * these goes in double quotes, " and \ escaped. In a file name (pattern), % is %%, so that
 * a % of the path is not read as one of sbatch's %A, %a, %j; `tail` follows as it is. */
static void sbatch_opt(FILE *f, const char *opt, const char *value, int pattern, const char *tail) {
    const int quote = value[strcspn(value, " \t\"'\\#")] != '\0';
    fprintf(f, "#SBATCH --%s=%s", opt, quote ? "\"" : "");
    for (const char *c = value; *c; c++) {
        if (quote && (*c == '"' || *c == '\\')) fputc('\\', f);
        if (pattern && *c == '%') fputc('%', f);
        fputc(*c, f);
    }
    fprintf(f, "%s%s\n", tail, quote ? "\"" : "");
}

/* p made absolute (from the current directory) into out; -1 with errno when it cannot be
 * whole (a current directory deeper than PATH_MAX, which getcwd cannot give). */
static int abs_path(const char *p, char *out, size_t n) {
    if (p[0] == '/') {
        if (strlen(p) >= n) { errno = ENAMETOOLONG; return -1; }
        copy_str(out, n, p);
        return 0;
    }
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return -1;
    if ((size_t)snprintf(out, n, "%s/%s", cwd, p[0] == '.' && p[1] == '/' ? p + 2 : p) >= n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

void grid_command(FILE *f, const grid_spec *g, const char *exe, const char *gpath, const char *out) {
    sh_word_put(f, exe);
    fputs(" grid ", f);
    sh_word_put(f, gpath);
    fputs(" --out ", f);
    sh_word_put(f, out);
    for (int i = 0; i < g->nargs; i++) {
        fputs(" --set ", f);
        sh_word_put(f, g->args[i]);
    }
}

static void sbatch_common(FILE *f, const grid_spec *g, const char *cwd, int report) {
    const grid_slurm *s = &g->slurm;
    sbatch_opt(f, "chdir", cwd, 0, "");
    if (s->partition[0]) fprintf(f, "#SBATCH --partition=%s\n", s->partition);
    if (s->time[0]) fprintf(f, "#SBATCH --time=%s\n", s->time);
    if (report) return;
    if (s->gpus > 0) fprintf(f, "#SBATCH --gpus=%d\n", s->gpus);
    if (s->cpus > 0) fprintf(f, "#SBATCH --cpus-per-task=%d\n", s->cpus);
    if (s->mem[0]) fprintf(f, "#SBATCH --mem=%s\n", s->mem);
    for (int i = 0; i < s->nextra; i++)
        fprintf(f, "%s%s\n", s->extra[i][0] == '#' ? "" : "#SBATCH ", s->extra[i]);
}

static int write_text_file(const char *path, char *buf, size_t len, int mode) {
    int rc = grid_write_atomic(path, buf, len);
    free(buf);
    if (rc == 0) chmod(path, (mode_t)mode);
    return rc;
}

/* <out>/slurm/{array.sbatch, report.sbatch, submit.sh}. */
int grid_write_slurm(const grid_spec *g, int n, int submit, int force, int extend) {
    char exe[PATH_MAX], gpath[PATH_MAX], out[PATH_MAX], cwd[PATH_MAX], dir[PATH_MAX + 16], path[PATH_MAX + 32];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el <= 0) copy_str(exe, sizeof exe, "s2hc");
    else exe[el] = '\0';
    /* the scripts run elsewhere (submit.sh from any folder, the tasks on other nodes):
       every path in them is absolute, or there are no scripts */
    if (!getcwd(cwd, sizeof cwd)) {
        char why[128];
        if (errno == ERANGE) snprintf(why, sizeof why, "longer than PATH_MAX (%d bytes)", PATH_MAX);
        else snprintf(why, sizeof why, "unknown: %s", strerror(errno));
        fprintf(stderr, "s2hc: error: grid: --slurm: the scripts need absolute paths, and the current directory's is %s\n",
                why);
        return 1;
    }
    const char *whole = abs_path(g->path, gpath, sizeof gpath) != 0 ? g->path
                        : abs_path(g->out, out, sizeof out) != 0  ? g->out
                                                                  : NULL;
    if (whole) {
        fprintf(stderr, "s2hc: error: grid: --slurm: the scripts need absolute paths, and %.80s%s from %.80s%s is "
                "longer than PATH_MAX (%d bytes)\n", whole, strlen(whole) > 80 ? "..." : "", cwd,
                strlen(cwd) > 80 ? "..." : "", PATH_MAX);
        return 1;
    }
    const char *paths[] = {exe, gpath, out, cwd};
    for (int i = 0; i < 4; i++)
        if (strpbrk(paths[i], "\n\r")) { /* an #SBATCH line or a comment would end inside it */
            fprintf(stderr, "s2hc: error: grid: --slurm: the path '%s' has a line break, which a Slurm script "
                    "cannot hold\n", paths[i]);
            return 1;
        }
    snprintf(dir, sizeof dir, "%s/slurm", out);
    if (mkdir_p(dir) != 0) {
        fprintf(stderr, "s2hc: error: cannot create %s: %s\n", dir, strerror(errno));
        return 1;
    }
    char *buf;
    size_t len;
    FILE *f;

    f = open_memstream(&buf, &len);
    fprintf(f, "#!/bin/bash\n# Slurm job array of grid %s: %d point%s, task i runs point i.\n"
               "# Written by `s2hc grid --slurm`; submit with submit.sh next to it (it chains report.sbatch).\n",
            g->path, n, n == 1 ? "" : "s");
    char name[CFG_STR + 64];
    snprintf(name, sizeof name, "s2hc-%s", g->stem);
    sbatch_opt(f, "job-name", name, 0, "");
    fprintf(f, "#SBATCH --array=0-%d", n - 1);
    if (g->slurm.array_limit > 0) fprintf(f, "%%%d", g->slurm.array_limit);
    fputc('\n', f);
    sbatch_opt(f, "output", dir, 1, "/%A_%a.out");
    sbatch_common(f, g, cwd, 0);
    fputs("set -u\n", f);
    for (int i = 0; i < g->slurm.nsetup; i++) fprintf(f, "%s\n", g->slurm.setup[i]);
    fputs("exec ", f);
    grid_command(f, g, exe, gpath, out);
    /* each task's runner reruns or extends its changed point as this command would */
    fprintf(f, "%s%s --job \"$SLURM_ARRAY_TASK_ID\"\n", force ? " --force" : "", extend ? " --extend" : "");
    fclose(f);
    snprintf(path, sizeof path, "%s/array.sbatch", dir);
    if (write_text_file(path, buf, len, 0755)) return 1;

    f = open_memstream(&buf, &len);
    fprintf(f, "#!/bin/bash\n# The report job of grid %s: runs after every array task succeeded (submit.sh\n"
               "# submits it with --dependency=afterok:<array job id> --kill-on-invalid-dep=yes).\n",
            g->path);
    snprintf(name, sizeof name, "s2hc-%s-report", g->stem);
    sbatch_opt(f, "job-name", name, 0, "");
    sbatch_opt(f, "output", dir, 1, "/report-%j.out");
    fputs("#SBATCH --kill-on-invalid-dep=yes\n#SBATCH --cpus-per-task=1\n", f);
    sbatch_common(f, g, cwd, 1);
    fputs("set -u\n", f);
    for (int i = 0; i < g->slurm.nsetup; i++) fprintf(f, "%s\n", g->slurm.setup[i]);
    fputs("S2HC=", f);
    sh_word_put(f, exe);
    fputs("\nsummary=", f);
    sh_word_put(f, dir);
    fputs("/summary.txt\n", f);
    grid_command(f, g, exe, gpath, out);
    fputs(" --list > \"$summary\" || exit 1\n", f);
    fputs("# the figures and tables (OUT/report/index.html) where this build has `s2hc report`;\n"
          "# a failure there is reported, the summary stands\n"
          "if \"$S2HC\" report --help >/dev/null 2>&1; then\n  \"$S2HC\" report ",
          f);
    sh_word_put(f, out);
    fputs(" -o ", f);
    sh_word_put(f, out);
    fputs("/report || echo \"report: s2hc report failed (exit $?)\"\nfi\n", f);
    fputs("echo \"report: $(tail -n 1 \"$summary\") (summary in $summary)\"\n", f);
    fclose(f);
    snprintf(path, sizeof path, "%s/report.sbatch", dir);
    if (write_text_file(path, buf, len, 0755)) return 1;

    f = open_memstream(&buf, &len);
    fprintf(f, "#!/bin/sh\n# Submit grid %s to Slurm: the job array, then the report job after it (afterok).\n"
               "# SBATCH=/path/to/sbatch overrides the command.\nset -eu\ncd ",
            g->path);
    sh_word_put(f, cwd);
    fputs("\n# s2hc sets these for itself (main.c); a task on another node picks its own\n"
          "if [ -n \"${S2HC_NO_REEXEC:-}\" ]; then unset S2HC_NO_REEXEC OPENBLAS_CORETYPE; fi\n"
          "SBATCH=${SBATCH:-sbatch}\ndir=", f);
    sh_word_put(f, dir);
    fputs("\narray=$(\"$SBATCH\" --parsable \"$dir/array.sbatch\")\narray=${array%%;*}\n"
          "report=$(\"$SBATCH\" --parsable --dependency=afterok:\"$array\" --kill-on-invalid-dep=yes "
          "\"$dir/report.sbatch\")\nreport=${report%%;*}\n"
          "echo \"$array\" > \"$dir/array.jobid\"\necho \"$report\" > \"$dir/report.jobid\"\n",
          f);
    fprintf(f, "echo \"submitted: array job $array (%d task%s), report job $report (afterok:$array)\"\n", n,
            n == 1 ? "" : "s");
    fclose(f);
    snprintf(path, sizeof path, "%s/submit.sh", dir);
    if (write_text_file(path, buf, len, 0755)) return 1;

    printf("wrote %s/array.sbatch (%d tasks", dir, n);
    if (g->slurm.array_limit > 0) printf(", at most %d at once", g->slurm.array_limit);
    printf("), %s/report.sbatch and %s/submit.sh\n", dir, dir);
    if (!submit) {
        printf("submit with: sh ");
        sh_word_put(stdout, path); /* the out folder may have a space, a quote */
        printf("\n");
        return 0;
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl("/bin/sh", "sh", path, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) < 0) return 1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "s2hc: error: submitting with %s failed (is sbatch installed and Slurm up?)\n", path);
        return 1;
    }
    return 0;
}
