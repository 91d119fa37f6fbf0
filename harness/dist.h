/* dist.h: one model trained by several processes (data parallel), launched by MPI.
 *
 * `mpirun -np W bin/s2hc train CONFIG` (or `srun --mpi=pmix`) starts W processes, the
 * ranks. Rank 0 reads the data, prints and writes every file; every micro-batch it reads
 * goes to all ranks, and rank r computes the gradient of its part, sequences
 * [B r / W, B (r + 1) / W): the batch is cut where W threads of one process would cut it.
 * The parts' gradients are summed in rank order (dist_sum), the same bits on every rank,
 * so each rank's AdamW step leaves the same weights: with one thread per rank, a run of
 * W ranks is bit for bit the run of one process with W threads (docs/distributed.md).
 *
 * Built without MPI (no libopenmpi-dev at build time) or run without a launcher, the
 * world is one process and every call below is a no-op or a copy. A launch of several
 * processes that this build cannot join is refused by dist_init. Every collective call is
 * made by every rank in the same order (train.c keeps that: its decisions are rank 0's,
 * broadcast). real is float here (dist.c is not in the double build).
 */
#pragma once
#include <stddef.h>
#include <stdint.h>

/* Join the launcher's world when it started several processes (MPI_Init); 0, or -1 with
 * the reason in err (a launch of several processes with a build without MPI, or one the
 * MPI library cannot join). Called once, before any other call below. */
int dist_init(int *argc, char ***argv, char *err, size_t errlen);
/* Leave it (MPI_Finalize), after the last collective. */
void dist_finalize(void);
/* One line for `s2hc version -v`: the MPI library, or why there is none. */
void dist_describe(char *buf, size_t len);
/* The processes the launcher says it started (its environment; 1 when none). */
int dist_launched(void);
int dist_rank(void);
int dist_size(void);
/* The rank among those on this host (0 with one process). */
int dist_local_rank(void);

/* rank 0's `bytes` bytes at p into every rank's p. */
void dist_bcast(void *p, size_t bytes);
/* The largest of every rank's v, on every rank (an agreement on an exit status). */
int dist_max_int(int v);
/* all[r] = rank r's v, on every rank (all holds dist_size() values). */
void dist_gather_double(double v, double *all);
/* x[i] = the sum over ranks of their x[i], added in rank order ((x_0 + x_1) + x_2 ...),
 * the same bits on every rank: each rank sums one share of the indices and the shares
 * are then gathered (a reduce-scatter and an all-gather; scratch is dist.c's own). */
void dist_sum(float *x, size_t n);
/* A 64-bit hash of n floats' bits (FNV-1a over 32-bit words): compared across ranks to check that their
 * weights agree. */
uint64_t dist_hash(const float *x, size_t n);
/* The ranks whose hash differs from rank 0's: their count, the first in *first. */
int dist_disagree(uint64_t h, int *first);
