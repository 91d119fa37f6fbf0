/* dist.c: training across processes through MPI (dist.h). Compiled with S2HC_MPI when
 * the Makefile finds OpenMPI's development files; without it, a world of one. */
#include "dist.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef S2HC_MPI
#include <mpi.h>
#endif

static int g_rank = 0, g_size = 1, g_local = 0, g_mpi = 0;

void dist_describe(char *buf, size_t len) {
#ifdef S2HC_MPI
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int n = 0;
    MPI_Get_library_version(v, &n);
    v[strcspn(v, ",\n")] = 0;
    snprintf(buf, len, "across processes with mpirun or srun --mpi=pmix (%s)", v);
#else
    snprintf(buf, len, "one (this build has no MPI: make links it when libopenmpi-dev is installed, by make deps, "
                       "except in the sanitizer build)");
#endif
}

static int env_count(const char *key) {
    const char *v = getenv(key);
    const long n = v && *v ? strtol(v, NULL, 10) : 0;
    return n >= 1 && n <= INT_MAX ? (int)n : 0;
}

/* The world size a launcher announces in the environment: OpenMPI's mpirun, MPICH's and
 * Slurm's PMI, and the task count of an srun step (set with or without MPI; not that of
 * a batch script, whose step id is not a number or one of Slurm's reserved ones). */
int dist_launched(void) {
    int n = env_count("OMPI_COMM_WORLD_SIZE");
    if (!n) n = env_count("PMI_SIZE");
    if (!n) {
        const char *id = getenv("SLURM_STEP_ID");
        char *end = NULL;
        const unsigned long step = id && *id ? strtoul(id, &end, 10) : 0xffffffffUL;
        if (end && !*end && step < 0xfffffff0UL) n = env_count("SLURM_STEP_NUM_TASKS");
    }
    return n ? n : 1;
}

int dist_init(int *argc, char ***argv, char *err, size_t errlen) {
    const int launched = dist_launched();
    if (launched <= 1) return 0;
#ifdef S2HC_MPI
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        snprintf(err, errlen, "launched as %d processes, but MPI_Init failed", launched);
        return -1;
    }
    g_mpi = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &g_local);
    MPI_Comm_free(&node);
    if (g_size != launched) {
        /* e.g. srun without --mpi: each task a world of one, all writing the same run */
        snprintf(err, errlen,
                 "the launcher started %d processes but MPI joined %d of them (with srun, pass --mpi=pmix)",
                 launched, g_size);
        return -1;
    }
    return 0;
#else
    (void)argc;
    (void)argv;
    snprintf(err, errlen,
             "launched as %d processes, but this build has no MPI: install libopenmpi-dev (make deps), "
             "then make",
             launched);
    return -1;
#endif
}

void dist_finalize(void) {
#ifdef S2HC_MPI
    if (g_mpi) MPI_Finalize();
#endif
    g_mpi = 0;
    g_rank = 0, g_size = 1, g_local = 0;
}

int dist_rank(void) { return g_rank; }
int dist_size(void) { return g_size; }
int dist_local_rank(void) { return g_local; }

#ifdef S2HC_MPI
/* MPI counts are ints: large buffers go in pieces of at most this many elements (bytes
 * for dist_bcast); S2HC_DIST_PIECE sets a smaller size, so that the tests cover buffers
 * of many pieces (tests/cli/dist_cli.sh). */
static size_t dist_piece(void) {
    static size_t piece;
    if (!piece) {
        const char *e = getenv("S2HC_DIST_PIECE");
        const long long v = e ? strtoll(e, NULL, 10) : 0;
        piece = v >= 64 && v <= (1LL << 28) ? (size_t)v : (size_t)1 << 28;
    }
    return piece;
}
#endif

void dist_bcast(void *p, size_t bytes) {
#ifdef S2HC_MPI
    if (g_size <= 1) return;
    const size_t piece = dist_piece();
    for (size_t o = 0; o < bytes; o += piece) {
        const size_t c = bytes - o < piece ? bytes - o : piece;
        MPI_Bcast((char *)p + o, (int)c, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
#else
    (void)p;
    (void)bytes;
#endif
}

int dist_max_int(int v) {
#ifdef S2HC_MPI
    if (g_size > 1) {
        int out = v;
        MPI_Allreduce(&v, &out, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        return out;
    }
#endif
    return v;
}

void dist_gather_double(double v, double *all) {
#ifdef S2HC_MPI
    if (g_size > 1) {
        MPI_Allgather(&v, 1, MPI_DOUBLE, all, 1, MPI_DOUBLE, MPI_COMM_WORLD);
        return;
    }
#endif
    all[0] = v;
}

#ifdef S2HC_MPI
/* Share j of n indices: [n j / W, n (j + 1) / W). */
static size_t share_at(size_t n, int W, int j) { return n * (size_t)j / (size_t)W; }

/* One piece of dist_sum: rank j receives share j of every rank's x (a reduce-scatter by
 * all-to-all, so that the adds are in rank order), adds them, and every share is then
 * gathered into every rank's x. */
static void sum_piece(float *x, size_t n, float *scr, int *cnt, int *dsp, int *rcnt, int *rdsp) {
    const int W = g_size, me = g_rank;
    const size_t lo = share_at(n, W, me), mine = share_at(n, W, me + 1) - lo;
    for (int j = 0; j < W; j++) {
        cnt[j] = (int)(share_at(n, W, j + 1) - share_at(n, W, j));
        dsp[j] = (int)share_at(n, W, j);
        rcnt[j] = (int)mine;
        rdsp[j] = (int)(mine * (size_t)j);
    }
    MPI_Alltoallv(x, cnt, dsp, MPI_FLOAT, scr, rcnt, rdsp, MPI_FLOAT, MPI_COMM_WORLD);
    float *acc = x + lo;
    memcpy(acc, scr, mine * sizeof(float));
    for (int j = 1; j < W; j++) {
        const float *g = scr + mine * (size_t)j;
        for (size_t i = 0; i < mine; i++) acc[i] += g[i];
    }
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_FLOAT, x, cnt, dsp, MPI_FLOAT, MPI_COMM_WORLD);
}
#endif

void dist_sum(float *x, size_t n) {
#ifdef S2HC_MPI
    if (g_size <= 1 || !n) return;
    const int W = g_size;
    const size_t piece = dist_piece() / (size_t)W * (size_t)W; /* every share of a piece fits an int */
    const size_t first = n < piece ? n : piece;
    float *scr = malloc((first / (size_t)W + 1) * (size_t)W * sizeof(float));
    int *ints = malloc(4 * (size_t)W * sizeof(int));
    if (!scr || !ints) {
        fprintf(stderr, "s2hc: error: out of memory summing the gradients across processes\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t o = 0; o < n; o += piece) {
        const size_t c = n - o < piece ? n - o : piece;
        sum_piece(x + o, c, scr, ints, ints + W, ints + 2 * W, ints + 3 * W);
    }
    free(scr);
    free(ints);
#else
    (void)x;
    (void)n;
#endif
}

uint64_t dist_hash(const float *x, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) {
        uint32_t w;
        memcpy(&w, x + i, sizeof w);
        h = (h ^ w) * 0x100000001b3ULL;
    }
    return h;
}

int dist_disagree(uint64_t h, int *first) {
    *first = -1;
#ifdef S2HC_MPI
    if (g_size > 1) {
        uint64_t *all = malloc((size_t)g_size * sizeof *all);
        if (!all) MPI_Abort(MPI_COMM_WORLD, 1);
        MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, MPI_COMM_WORLD);
        int bad = 0;
        for (int r = 1; r < g_size; r++)
            if (all[r] != all[0]) {
                if (!bad) *first = r;
                bad++;
            }
        free(all);
        return bad;
    }
#endif
    (void)h;
    return 0;
}
