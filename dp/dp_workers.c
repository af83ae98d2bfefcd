/* dp/dp_workers.c: DP's thread pool: one thread per device, the ranks of one in-process group. */
#include <stdio.h>
#include <string.h>

#include "common/base/affinity.h"
#include "dp/dp.h"

/* The pool thread's index, for dp_pool_sync (the graph group's barrier takes only the pool). */
static _Thread_local int tls_index = -1;

static void *dp_thread_main(void *arg)
{
    dp_pool_arg_t *a = arg;
    tls_index = a->index;
    /* A CPU device is a core: no device waits for another to leave its core (affinity.h). */
    if (a->pool->pin)
        affinity_pin(a->index, __atomic_load_n(&a->pool->n, __ATOMIC_ACQUIRE));
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
    p->pin = pin;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    TRY(comm_local_group_create(&p->grp, n, err));
    /* Why n is set before any thread starts: the group counts its ranks.
     * Should a create fail, n drops to the threads that exist and the group
     * is aborted, so none of them waits for a thread that never came. */
    p->n = n;
    for (int i = 0; i < n; i++) {
        p->arg[i] = (dp_pool_arg_t){p, i};
        int e = pthread_create(&p->tid[i], NULL, dp_thread_main, &p->arg[i]);
        if (e != 0) {
            char msg[ERR_LEN];
            snprintf(msg, sizeof msg, "cannot start the thread of device %d: %s", i, strerror(e));
            __atomic_store_n(&p->n, i, __ATOMIC_SEQ_CST); /* dp_pool_leave reads it unlocked */
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
    comm_local_group_free(p->grp);
    p->grp = NULL;
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    return rc;
}

int dp_pool_sync(dp_pool_t *p) { return comm_local_sync(p->grp, tls_index); }

void dp_pool_fail(dp_pool_t *p, int rc, const char *msg)
{
    pthread_mutex_lock(&p->mu);
    if (p->rc == DDP_OK) {
        p->rc = rc;
        snprintf(p->err, sizeof p->err, "%s", msg);
    }
    /* From now on no wait of the group waits, so the threads still running
     * reach dp_pool_leave() and the run ends instead of hanging. */
    comm_local_group_abort(p->grp);
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
