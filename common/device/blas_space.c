/* common/device/blas_space.c: reserving OpenBLAS's room (see blas_space.h). */
#include "common/device/blas_space.h"

#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "common/base/procfile.h"
#include "common/base/status.h"

void openblas_set_num_threads(int num_threads);
int openblas_get_num_threads(void);
/* OpenBLAS's pthreads server (driver/others/blas_server.c), weak: absent
 * from other builds of the library (blas_space.h) */
int blas_thread_shutdown_(void) __attribute__((weak));

/* What OpenBLAS has mapped so far, as far as ddpbench's devices tell: slots
 * (at most one per device that was computing at once) and pool threads.
 * Why a lock: DP's workers create and free their devices on their threads.
 * A forked DDP rank inherits the counts with the mappings they describe. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_live, g_slots, g_pool;
static int g_threads; /* the count blas_space_threads set last (0: none yet) */
static int g_started = -1; /* pool threads OpenBLAS has started (-1: unknown) */

/* The process's threads (/proc/self/status), -1 when unknown. */
static int threads_now(void)
{
    char v[32];
    return procfile_value("/proc/self/status", "Threads:", v, sizeof v) ? atoi(v) : -1;
}

/* The process's mapped address space in bytes (VmSize), 0 when unknown. */
static unsigned long long mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmSize: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

static bool limited(struct rlimit *rl)
{
    return getrlimit(RLIMIT_AS, rl) == 0 && rl->rlim_cur != RLIM_INFINITY;
}

int blas_space_reserve(blas_space_t *s, int threads, int device_id, char *err)
{
    memset(s, 0, sizeof *s);
    struct rlimit rl;
    pthread_mutex_lock(&g_lock);
    g_live++;
    s->counted = true;
    int slots = g_live > g_slots ? 1 : 0;
    int pool = threads - 1 > g_pool ? threads - 1 - g_pool : 0;
    pthread_mutex_unlock(&g_lock);
    if (!limited(&rl) || slots + pool == 0)
        return DDP_OK;
    size_t bytes = (size_t)(slots + pool) * BLAS_BUFFER_BYTES;
    /* PROT_NONE and MAP_NORESERVE: address space only, no memory; the limit
     * counts it all the same. */
    void *p = mmap(NULL, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        unsigned long long used = mapped_bytes(), limit = (unsigned long long)rl.rlim_cur;
        blas_space_free(s);
        return err_set(err, DDP_ERR_RUNTIME,
                       "the address-space limit (ulimit -v %llu) leaves %llu MiB, and OpenBLAS "
                       "needs %zu MiB more for the GEMM buffer%s of cpu device %d: raise the "
                       "limit%s",
                       limit / 1024, used < limit ? (limit - used) >> 20 : 0ULL, bytes >> 20,
                       slots + pool > 1 ? "s" : "", device_id,
                       pool ? " or use fewer --threads" : "");
    }
    s->addr = p;
    s->slot_bytes = (size_t)slots * BLAS_BUFFER_BYTES;
    s->pool_bytes = (size_t)pool * BLAS_BUFFER_BYTES;
    s->pool_threads = pool;
    return DDP_OK;
}

int blas_space_set_threads(blas_space_t *s, int threads, char *err)
{
    if (s->pool_bytes) /* the pool's part of the reservation, for its new threads */
        munmap(s->addr + s->slot_bytes, s->pool_bytes);
    size_t pool_bytes = s->pool_bytes;
    s->pool_bytes = 0;
    int missing = blas_space_threads(threads);
    if (missing) { /* its first GEMM would wait forever for the threads that are not there */
        struct rlimit rl;
        bool cap = getrlimit(RLIMIT_NPROC, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY;
        return err_set(err, DDP_ERR_INPUT,
                       "--threads %d: OpenBLAS could not start %d of its threads (a limit on "
                       "processes or threads%s%.0f): raise it, or use fewer --threads",
                       threads, missing, cap ? ": ulimit -u is " : "",
                       cap ? (double)rl.rlim_cur : 0.0);
    }
    if (pool_bytes) {
        /* Each new pool thread maps its buffer as it starts, on its own: a
         * GEMM that gives every thread a share returns only once they all
         * have, before anything else can take the room.  It is this
         * device's first GEMM: the slot's room goes to it too. */
        blas_space_first_gemm(s);
        int m = 128 * threads; /* rows enough for every thread: C[m, 64] = A[m, 64] B^T */
        float *a = calloc((size_t)m * 64, sizeof *a), *c = calloc((size_t)m * 64, sizeof *c);
        if (a && c)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, 64, 64, 1.0f, a, 64, a, 64,
                        0.0f, c, 64);
        free(a);
        free(c);
        pthread_mutex_lock(&g_lock);
        g_pool += s->pool_threads;
        pthread_mutex_unlock(&g_lock);
    }
    return DDP_OK;
}

void blas_space_first_gemm(blas_space_t *s)
{
    if (!s->slot_bytes)
        return;
    munmap(s->addr, s->slot_bytes);
    s->addr = NULL;
    s->slot_bytes = 0;
    pthread_mutex_lock(&g_lock);
    g_slots++; /* OpenBLAS maps one now, if every slot it has is busy */
    pthread_mutex_unlock(&g_lock);
}

void blas_space_free(blas_space_t *s)
{
    if (s->addr && s->slot_bytes + s->pool_bytes)
        munmap(s->addr, s->slot_bytes + s->pool_bytes);
    s->addr = NULL;
    s->slot_bytes = s->pool_bytes = 0;
    if (s->counted) {
        pthread_mutex_lock(&g_lock);
        g_live--;
        pthread_mutex_unlock(&g_lock);
        s->counted = false;
    }
}

void blas_space_pool_stop(void)
{
    openblas_set_num_threads(1);
    if (blas_thread_shutdown_) {
        blas_thread_shutdown_();
        pthread_mutex_lock(&g_lock);
        g_threads = 1;
        g_started = 0;
        pthread_mutex_unlock(&g_lock);
    }
}

int blas_space_threads(int threads)
{
    /* Why skip an unchanged count: openblas_set_num_threads starts a
     * stopped pool again whatever the count (0.3.21's goto_set_num_threads
     * calls blas_thread_init), so DP's and DDP's "one thread" would undo
     * the stop.  Why count the threads: it starts the new ones without
     * checking that pthread_create succeeded (ulimit -u), so the threads the
     * process gained are the ones that exist. */
    pthread_mutex_lock(&g_lock);
    int missing = 0, before = threads != g_threads && g_started >= 0 ? threads_now() : -1;
    if (threads != g_threads)
        openblas_set_num_threads(threads);
    g_threads = threads;
    /* the pool OpenBLAS counts on (its count is capped: 64 in Debian's build) */
    int need = openblas_get_num_threads() - 1 - g_started, after = before >= 0 ? threads_now() : -1;
    if (after >= 0 && need > 0) {
        missing = need > after - before ? need - (after - before) : 0;
        g_started += need - missing;
    }
    if (missing) /* no later GEMM may wait for them */
        openblas_set_num_threads(g_threads = 1);
    pthread_mutex_unlock(&g_lock);
    return missing;
}
