/* bench/bench_comm.c: the shared-memory all-reduce in the style of
 * nccl-tests' all_reduce_perf: for sizes 4 KiB .. 256 MiB, the time per
 * in-place float32 sum, algbw = bytes / time and busbw = algbw * 2(n-1)/n,
 * next to single-thread memcpy bandwidth measured in the same run on the same
 * machine (so a busy shared box slows both columns alike).
 *
 *   bench_comm [-r RANKS] [-b MIN_BYTES] [-e MAX_BYTES]
 *
 * Defaults: 2 ranks, 4 KiB .. 256 MiB in steps of 4x.  Each size's result is
 * checked once against the exact sum (the "check" column). */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "device/backend.h"
#include "comm/comm.h"
#include "measure/timing.h"

#define MAX_SIZES 64
/* Each size is timed REPS times and the best kept, for both columns: the box
 * is shared, and the best run is the one least disturbed by others. */
#define REPS 3

typedef struct {
    double time_s[MAX_SIZES]; /* per op, this rank */
    int ok[MAX_SIZES];
    int rc;
    char msg[ERR_LEN];
} rank_report_t;

static int iters_for(size_t bytes)
{
    /* About 0.5 GiB moved per size, between 5 and 200 ops. */
    size_t it = ((size_t)512 << 20) / (bytes ? bytes : 1);
    return it < 5 ? 5 : it > 200 ? 200 : (int)it;
}

static double memcpy_bw(size_t bytes)
{
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        free(a);
        free(b);
        return 0.0;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    int it = iters_for(bytes);
    memcpy(b, a, bytes); /* warm */
    double best = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        double t0 = now_s();
        for (int i = 0; i < it; i++) {
            memcpy(i & 1 ? a : b, i & 1 ? b : a, bytes);
            __asm__ __volatile__("" ::: "memory");
        }
        double t = (now_s() - t0) / it;
        if (t < best)
            best = t;
    }
    free(a);
    free(b);
    return (double)bytes / best;
}

static void rank_main(comm_seg_t *seg, int rank, int world, const size_t *sizes, int nsizes)
{
    rank_report_t *rep = (rank_report_t *)comm_seg_extra(seg) + rank;
    backend_t *be;
    comm_t *c;
    if ((rep->rc = backend_cpu_create(&be, rank, 1, rep->msg)) != DDP_OK)
        return;
    comm_args_t a = {COMM_SHM, world, rank, be, seg, 30.0, 0.0};
    if ((rep->rc = comm_create(&c, &a, rep->msg)) != DDP_OK)
        return;
    size_t maxn = sizes[nsizes - 1] / sizeof(float);
    float *buf = malloc(maxn * sizeof(float));
    for (int s = 0; s < nsizes && rep->rc == DDP_OK; s++) {
        size_t n = sizes[s] / sizeof(float);
        /* Check once: every element is rank-summed exactly (small integers). */
        for (size_t i = 0; i < n; i++)
            buf[i] = (float)((i + (size_t)rank) % 7);
        rep->rc = comm_all_reduce(c, buf, n, REDOP_SUM);
        rep->ok[s] = 1;
        for (size_t i = 0; i < n && rep->rc == DDP_OK; i++) {
            float want = 0.0f;
            for (int q = 0; q < world; q++)
                want += (float)((i + (size_t)q) % 7);
            if (buf[i] != want) {
                rep->ok[s] = 0;
                break;
            }
        }
        int it = iters_for(sizes[s]);
        /* Start together, then time back-to-back ops as a training loop
         * issues them (launch, wait); best of REPS, like the memcpy column. */
        rep->time_s[s] = 1e30;
        for (int k = 0; k < REPS && rep->rc == DDP_OK; k++) {
            rep->rc = comm_barrier(c);
            double t0 = now_s();
            for (int i = 0; i < it && rep->rc == DDP_OK; i++)
                rep->rc = comm_all_reduce(c, buf, n, REDOP_SUM);
            double t = (now_s() - t0) / it;
            if (t < rep->time_s[s])
                rep->time_s[s] = t;
        }
    }
    if (rep->rc != DDP_OK)
        snprintf(rep->msg, ERR_LEN, "%s", comm_last_error(c));
    free(buf);
    comm_destroy(c);
    backend_destroy(be);
}

int main(int argc, char **argv)
{
    int world = 2;
    size_t minb = 4096, maxb = (size_t)256 << 20;
    int opt;
    while ((opt = getopt(argc, argv, "r:b:e:h")) != -1) {
        switch (opt) {
        case 'r':
            world = atoi(optarg);
            break;
        case 'b':
            minb = strtoull(optarg, NULL, 0);
            break;
        case 'e':
            maxb = strtoull(optarg, NULL, 0);
            break;
        default:
            fprintf(stderr, "usage: bench_comm [-r ranks (2)] [-b min bytes (4096)] "
                            "[-e max bytes (268435456)]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (world < 1 || world > 64 || minb < 4 || maxb < minb) {
        fprintf(stderr, "bench_comm: bad arguments\n");
        return 2;
    }
    size_t sizes[MAX_SIZES];
    int nsizes = 0;
    for (size_t b = minb; b <= maxb && nsizes < MAX_SIZES; b *= 4)
        sizes[nsizes++] = b;

    char err[ERR_LEN];
    comm_seg_t *seg;
    if (comm_seg_create(&seg, world, sizeof(rank_report_t) * (size_t)world, err) != DDP_OK) {
        fprintf(stderr, "bench_comm: %s\n", err);
        return 1;
    }
    printf("# bench_comm: shm all-reduce (sum, float32, in place), %d ranks, %ld CPUs online\n",
           world, sysconf(_SC_NPROCESSORS_ONLN));
    printf("# busbw = algbw * 2(n-1)/n; memcpy = one thread copying the same bytes, same run;\n"
           "# each column the best of %d timed loops\n", REPS);
    printf("#\n#%11s %12s %6s %11s %12s %12s %13s %8s %5s\n", "size(B)", "count", "iters",
           "time(us)", "algbw(GB/s)", "busbw(GB/s)", "memcpy(GB/s)", "bus/mem", "check");
    fflush(stdout);
    pid_t pids[64];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            rank_main(seg, r, world, sizes, nsizes);
            _exit(0);
        }
    }
    /* memcpy is measured once the ranks are done, so the two never compete
     * for the cores. */
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    }
    rank_report_t *reps = comm_seg_extra(seg);
    for (int r = 0; r < world; r++)
        if (reps[r].rc != DDP_OK) {
            fprintf(stderr, "bench_comm: rank %d: %s\n", r, reps[r].msg);
            bad = 1;
        }
    double factor = world > 1 ? 2.0 * (world - 1) / world : 1.0;
    for (int s = 0; s < nsizes && !bad; s++) {
        double t = 0.0;
        int ok = 1;
        for (int r = 0; r < world; r++) {
            if (reps[r].time_s[s] > t)
                t = reps[r].time_s[s];
            ok &= reps[r].ok[s];
        }
        double algbw = (double)sizes[s] / t / 1e9;
        double mem = memcpy_bw(sizes[s]) / 1e9;
        printf(" %11zu %12zu %6d %11.1f %12.2f %12.2f %13.2f %7.0f%% %5s\n", sizes[s],
               sizes[s] / sizeof(float), iters_for(sizes[s]), t * 1e6, algbw, algbw * factor, mem,
               100.0 * algbw * factor / mem, ok ? "ok" : "WRONG");
        fflush(stdout);
        bad |= !ok;
    }
    comm_seg_free(seg);
    return bad;
}
