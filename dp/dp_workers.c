/* dp/dp_workers.c: DP's persistent thread pool: one thread per device,
 * created once per run, woken phase by phase by an abortable barrier (a
 * mutex, a condition variable and a generation count: nothing spins, so idle
 * workers leave the cores to the busy ones), joined once at the end. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dp/dp.h"

static void *dp_thread_main(void *arg)
{
    dp_pool_arg_t *a = arg;
    a->pool->fn(a->pool->ctx, a->index);
    return NULL;
}

// ---------------------------------------------------------------------------
// start and join

int dp_pool_start(dp_pool_t *p, int n, void (*fn)(void *ctx, int index), void *ctx, char *err)
{
    memset(p, 0, sizeof *p);
    p->fn = fn;
    p->ctx = ctx;
    p->rc = DDP_OK;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    /* Why n is set before any thread starts: the barrier counts arrivals
     * against it.  Should a create fail, n drops to the threads that exist
     * (under the lock) and the pool is aborted, so none of them waits for a
     * thread that never came. */
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->arg[i] = (dp_pool_arg_t){p, i};
        int e = pthread_create(&p->tid[i], NULL, dp_thread_main, &p->arg[i]);
        if (e != 0) {
            char msg[ERR_LEN];
            snprintf(msg, sizeof msg, "cannot start the thread of device %d: %s", i, strerror(e));
            pthread_mutex_lock(&p->mu);
            p->n = i;
            pthread_mutex_unlock(&p->mu);
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

int dp_pool_sync(dp_pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    if (p->aborted) {
        pthread_mutex_unlock(&p->mu);
        return DDP_ERR_RUNTIME;
    }
    unsigned long gen = p->gen;
    if (++p->waiting == p->n) {
        /* The last to arrive opens the barrier for this generation. */
        p->waiting = 0;
        p->gen++;
        pthread_cond_broadcast(&p->cv);
    } else {
        /* Why a condition wait and not a spin: the machine may have fewer
         * cores than workers, and a spinning waiter would steal the core the
         * slowest worker (usually device 0) needs.  Woken by the last arrival
         * or by an abort; the generation guards against spurious wake-ups. */
        while (p->gen == gen && !p->aborted)
            pthread_cond_wait(&p->cv, &p->mu);
    }
    /* Every thread released by the same opening sees the same answer. */
    int rc = p->gen != gen ? DDP_OK : DDP_ERR_RUNTIME;
    pthread_mutex_unlock(&p->mu);
    return rc;
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
    p->aborted = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void dp_pool_leave(dp_pool_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->left++;
    pthread_cond_broadcast(&p->cv);
    /* Why wait here even after an abort: a thread may still be copying from
     * another device's buffers (a gather, a reduce slice); nobody frees its
     * buffers until every thread has stopped touching them. */
    while (p->left < p->n)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
