/* grid_internal.h: what the files of the grid module share; other modules use grid.h.
 * The files, one concept each:
 *   grid.c         the command (grid_main), --list and --dry-run, and the helpers below
 *   grid_slurm.c   the Slurm scripts of --slurm
 */
#ifndef S2HC_GRID_INTERNAL_H
#define S2HC_GRID_INTERNAL_H
#include "grid.h"
#include "util.h"
#include <stdio.h>
#include <stdlib.h>

static inline void *grow(void *p, int n, size_t size) {
    /* room for element n (0-based): capacity doubles at powers of two */
    if (n == 0 || (n & (n - 1)) == 0) {
        size_t cap = n == 0 ? 1 : (size_t)n * 2;
        p = realloc(p, cap * size);
        if (!p) die(1, "out of memory (grid)");
    }
    return p;
}

static inline void copy_str(char *dst, size_t n, const char *src) { snprintf(dst, n, "%s", src ? src : ""); }

/* grid.c */

/* Write text to path atomically (path.tmp, fsync, rename). 0 or -1 with a message. */
int grid_write_atomic(const char *path, const char *text, size_t len);

/* grid_slurm.c */

/* <out>/slurm/{array.sbatch, report.sbatch, submit.sh} for the grid's n points; with
 * submit, run submit.sh. 0, or 1 after printing the problem. */
int grid_write_slurm(const grid_spec *g, int n, int submit);

#endif
