/* dp/dp_workers.c: DP's persistent thread pool: one thread per device,
 * created once per run, met phase by phase at an abortable barrier (each
 * thread counts its arrivals on a cache line of its own; a waiter spins a
 * few microseconds on the others' counts, then sleeps on a futex), joined
 * once at the end. */
#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"
#include "common/base/cpu_relax.h"
#include "dp/dp.h"

/* Why spin at all: a DP step meets at six barriers, and on a tiny model the
 * work between them takes microseconds; a sleep and a wake-up cost 10-20 us
 * each (more when the woken thread queues behind its waker on one core), so
 * sleeping at every barrier made the step 100x the work.  Why only briefly:
 * while device 0 alone computes the loss or the optimizer step, the others
 * would burn a core for nothing; after DP_SPIN_NS they sleep.  With more
 * workers than cores a spinner would steal the core a late worker needs, so
 * they sleep at once; so does a waiter that shares its core with another
 * worker (on a machine busy with other work the scheduler often queues both
 * on one core: measured on 2 loaded cores, the seed-size step took 138 us
 * p50 with a 20 us spin, 12 us without). */
#define DP_SPIN_NS 30000ull
/* Longest single sleep: a waiter re-checks the barrier at least this often. */
#define DP_SLEEP_NS 100000000L

static void futex_wait(_Atomic uint32_t *addr, uint32_t expect)
{
    struct timespec ts = {0, DP_SLEEP_NS};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, expect, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Wake the sleepers, if any.  The caller's arrival is ordered before the
 * read of their count (the fence), as a sleeper's count is before its last
 * look at the arrivals: either the sleeper sees the arrival, or this sees
 * the sleeper and moves the futex word it sleeps on. */
static void pool_wake_sleepers(dp_pool_t *p)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&p->sleepers, memory_order_seq_cst) > 0) {
        atomic_fetch_add_explicit(&p->wake, 1, memory_order_seq_cst);
        futex_wake_all(&p->wake);
    }
}

/* The pool thread's index, for dp_pool_sync (which its callers need not
 * pass), and the barriers it has arrived at. */
static _Thread_local int tls_index = -1;
static _Thread_local uint64_t tls_arrivals;

static void *dp_thread_main(void *arg)
{
    dp_pool_arg_t *a = arg;
    tls_index = a->index;
    /* A CPU device is a core: on one of its own, no device waits for another
     * to be scheduled off its core before the barrier can open
     * (base/affinity.h). */
    if (a->pool->pin)
        affinity_pin(a->index, __atomic_load_n(&a->pool->n, __ATOMIC_ACQUIRE));
    tls_arrivals = 0;
    a->pool->fn(a->pool->ctx, a->index);
    return NULL;
}

// ---------------------------------------------------------------------------
// start and join

int dp_pool_start(dp_pool_t *p, int n, bool pin, void (*fn)(void *ctx, int index), void *ctx,
                  char *err)
{
    memset(p, 0, sizeof *p);
    p->fn = fn;
    p->ctx = ctx;
    p->rc = DDP_OK;
    for (int i = 0; i < MAX_DEVICES; i++)
        atomic_store(&p->cpu[i].v, -1);
    int cpus = affinity_cpus(); /* the CPUs this process may use, not the machine's */
    p->spin_ns = n > cpus ? 0 : DP_SPIN_NS;
    p->pin = pin;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* Why n is set before any thread starts: the barrier counts arrivals
     * against it.  Should a create fail, n drops to the threads that exist
     * and the pool is aborted, so none of them waits for a thread that never
     * came. */
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->arg[i] = (dp_pool_arg_t){p, i};
        int e = pthread_create(&p->tid[i], NULL, dp_thread_main, &p->arg[i]);
        if (e != 0) {
            char msg[ERR_LEN];
            snprintf(msg, sizeof msg, "cannot start the thread of device %d: %s", i, strerror(e));
            __atomic_store_n(&p->n, i, __ATOMIC_SEQ_CST); /* barriers read it unlocked */
            dp_pool_fail(p, DDP_ERR_RUNTIME, msg);
            return err_set(err, DDP_ERR_RUNTIME, "%s", msg);
        }
    }
    return DDP_OK;
}

int dp_pool_join(dp_pool_t *p, char *err)
{
    /* Only the starting thread changes n, so it reads it without the lock. */
    for (int i = 0; i < p->n; i++)
        pthread_join(p->tid[i], NULL);
    /* pthread_join orders everything the workers wrote before this read. */
    int rc = p->rc;
    if (rc != DDP_OK)
        err_set(err, rc, "%s", p->err);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    return rc;
}

// ---------------------------------------------------------------------------
// the barrier

/* Has every thread arrived at barrier b? */
static bool pool_open(dp_pool_t *p, int n, uint64_t b)
{
    for (int i = 0; i < n; i++)
        if (atomic_load_explicit(&p->arrived[i].v, memory_order_acquire) < b)
            return false;
    return true;
}

/* Wait until barrier b is open for thread me: spin, then sleep. */
static int pool_wait(dp_pool_t *p, int n, int me, uint64_t b)
{
    uint64_t spin_until = now_ns() + p->spin_ns;
    /* Where we are, for the others; and whether another worker last arrived
     * on this core (then it may be queued behind us: do not spin). */
    int cpu = sched_getcpu();
    if (me >= 0 && me < MAX_DEVICES &&
        atomic_load_explicit(&p->cpu[me].v, memory_order_relaxed) != cpu)
        atomic_store_explicit(&p->cpu[me].v, cpu, memory_order_relaxed);
    for (int i = 0; i < n && cpu >= 0; i++)
        if (i != me && atomic_load_explicit(&p->cpu[i].v, memory_order_relaxed) == cpu)
            spin_until = 0;
    for (;;) {
        if (pool_open(p, n, b))
            return DDP_OK;
        if (atomic_load_explicit(&p->aborted, memory_order_acquire))
            break;
        if (now_ns() < spin_until) {
            for (int i = 0; i < 16; i++)
                cpu_relax();
            continue;
        }
        /* Sleep: count ourselves in, read the futex word, then look once
         * more (after the fence: pool_wake_sleepers' order); a thread that
         * sees the barrier open after our count wakes us. */
        atomic_fetch_add_explicit(&p->sleepers, 1, memory_order_seq_cst);
        uint32_t w = atomic_load_explicit(&p->wake, memory_order_seq_cst);
        atomic_thread_fence(memory_order_seq_cst);
        if (!pool_open(p, n, b) && !atomic_load_explicit(&p->aborted, memory_order_seq_cst))
            futex_wait(&p->wake, w);
        atomic_fetch_sub_explicit(&p->sleepers, 1, memory_order_seq_cst);
    }
    /* Aborted; a thread that the barrier released before the abort still
     * sees success, like every other thread that barrier released. */
    return pool_open(p, n, b) ? DDP_OK : DDP_ERR_RUNTIME;
}

/* Why a count per thread on a line of its own, not one shared count and a
 * generation: the last to arrive at a shared count had to take its line
 * from the core of the first (an atomic add), then publish the generation
 * the first was polling and bump the futex word beside it, two misses
 * in a row on the critical path of every barrier; on this project's VM a
 * miss to the other vCPU costs about 0.3 us, and a DP step passes six
 * barriers.  Now an arrival is one store to the thread's own line, which
 * the waiters read: one miss each way. */
int dp_pool_sync(dp_pool_t *p)
{
    if (atomic_load_explicit(&p->aborted, memory_order_acquire))
        return DDP_ERR_RUNTIME;
    int n = __atomic_load_n(&p->n, __ATOMIC_ACQUIRE);
    int me = tls_index;
    uint64_t b = ++tls_arrivals;
    /* Release: what this thread wrote before arriving is visible to every
     * thread that sees the barrier open. */
    atomic_store_explicit(&p->arrived[me].v, b, memory_order_release);
    if (!pool_open(p, n, b)) {
        int rc = pool_wait(p, n, me, b);
        if (rc != DDP_OK)
            return rc;
    }
    /* Whoever sees the barrier open wakes the sleepers (a thread that found
     * it open at once arrived last, or together with the last). */
    pool_wake_sleepers(p);
    return DDP_OK;
}

void dp_pool_fail(dp_pool_t *p, int rc, const char *msg)
{
    pthread_mutex_lock(&p->mu);
    if (p->rc == DDP_OK) {
        p->rc = rc;
        snprintf(p->err, sizeof p->err, "%s", msg);
    }
    /* Wake every waiter: from now on no barrier waits, so the threads still
     * running reach dp_pool_leave() and the run ends instead of hanging. */
    atomic_store_explicit(&p->aborted, true, memory_order_seq_cst);
    atomic_fetch_add_explicit(&p->wake, 1, memory_order_seq_cst);
    futex_wake_all(&p->wake);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void dp_pool_leave(dp_pool_t *p, int round)
{
    pthread_mutex_lock(&p->mu);
    p->left++;
    pthread_cond_broadcast(&p->cv);
    /* Why wait here even after an abort: a thread may still be copying from
     * another device's buffers (a gather, a reduce slice); nobody frees its
     * buffers until every thread has stopped touching them. */
    while (p->left < round * __atomic_load_n(&p->n, __ATOMIC_ACQUIRE))
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
