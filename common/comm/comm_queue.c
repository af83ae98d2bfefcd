/* common/comm/comm_queue.c: the host-thread collective queue (comm_queue.h), with the waits'
 * stall watchdog.  What a collective does is the implementation's run_op. */
#include "common/comm/comm_queue.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"

// ---------------------------------------------------------------------------
// failure

/* Record the first failure (sticky); callers hold mu. */
static void fail_locked(comm_queue_t *q, const char *msg)
{
    if (!atomic_load(&q->failed)) {
        snprintf(q->c->last_error, sizeof q->c->last_error, "%s", msg);
        atomic_store(&q->failed, true);
    }
}

int comm_queue_fail(comm_queue_t *q, const char *fmt, ...)
{
    char msg[ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&q->mu);
    fail_locked(q, msg);
    /* Wake the waiters: they return the failure. */
    pthread_cond_broadcast(&q->done_cv);
    pthread_mutex_unlock(&q->mu);
    return DDP_ERR_RUNTIME;
}

bool comm_queue_failed(comm_queue_t *q)
{
    return atomic_load(&q->failed);
}

bool comm_queue_pending(comm_queue_t *q)
{
    pthread_mutex_lock(&q->mu);
    bool pending = !atomic_load(&q->failed) && q->completed < q->c->issued;
    pthread_mutex_unlock(&q->mu);
    return pending;
}

int comm_queue_check(comm_queue_t *q, const comm_op_t *op)
{
    char msg[ERR_LEN];
    return comm_op_check(q->c, op, msg) == DDP_OK ? DDP_OK : comm_queue_fail(q, "%s", msg);
}

// ---------------------------------------------------------------------------
// the communication thread

static void *comm_thread(void *arg)
{
    comm_queue_t *q = arg;
    if (q->timer_slack_ns)
        prctl(PR_SET_TIMERSLACK, q->timer_slack_ns);
    /* Not on its rank's pinned core: the collectives would take turns with backward there. */
    affinity_unpin();
    pthread_mutex_lock(&q->mu);
    for (;;) {
        /* Sleep until the main thread queues an op or asks us to stop; the
         * condvar hands over the op's descriptor under mu. */
        while (!q->stop && (atomic_load(&q->failed) || q->completed == q->c->issued))
            pthread_cond_wait(&q->work_cv, &q->mu);
        if (q->stop)
            break;
        uint64_t seq = q->completed + 1;
        comm_queue_req_t *req = &q->q[q->completed % COMM_QUEUE_LEN];
        comm_op_t op = req->op;
        void *op_arg = req->arg;
        pthread_mutex_unlock(&q->mu);

        atomic_store_explicit(&q->progress_ns, now_ns(), memory_order_relaxed);
        comm_span_t span = {0, 0};
        int rc = q->run_op(q->c, &op, seq, op_arg, &span);

        pthread_mutex_lock(&q->mu);
        if (rc == DDP_OK) {
            req->span = span;
            q->completed = seq;
        }
        /* Wake the main thread: op seq is complete (or the comm has failed). */
        pthread_cond_broadcast(&q->done_cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int comm_queue_start(comm_queue_t *q, comm_t *c, comm_run_op_fn run_op,
                     unsigned long timer_slack_ns, char *err)
{
    q->c = c;
    q->run_op = run_op;
    q->timer_slack_ns = timer_slack_ns;
    atomic_init(&q->failed, false);
    atomic_init(&q->progress_ns, now_ns());
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->work_cv, NULL);
    pthread_cond_init(&q->done_cv, NULL);
    if (pthread_create(&q->thread, NULL, comm_thread, q) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "comm %s: cannot start the communication thread",
                       c->ops->name);
    q->thread_started = true;
    return DDP_OK;
}

void comm_queue_stop(comm_queue_t *q)
{
    if (!q->c)
        return; /* never started */
    if (q->thread_started) {
        pthread_mutex_lock(&q->mu);
        q->stop = true;
        pthread_cond_signal(&q->work_cv);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->thread, NULL);
        q->thread_started = false;
    }
    pthread_cond_destroy(&q->work_cv);
    pthread_cond_destroy(&q->done_cv);
    pthread_mutex_destroy(&q->mu);
    q->c = NULL;
}

// ---------------------------------------------------------------------------
// the caller's side

/* Wait (mu held) until the comm thread has completed op h, failed, or stalled. */
static void wait_completed_locked(comm_queue_t *q, uint64_t h)
{
    /* The comm thread bounds each wait for a peer by timeout_s; silence for
     * much longer than that means it is wedged, and we must not hang too. */
    uint64_t limit_ns = (uint64_t)((2.0 * q->c->timeout_s + 10.0) * 1e9);
    while (q->completed < h && !atomic_load(&q->failed)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&q->done_cv, &q->mu, &ts);
        uint64_t last = atomic_load_explicit(&q->progress_ns, memory_order_relaxed);
        if (q->completed < h && !atomic_load(&q->failed) && now_ns() - last > limit_ns)
            fail_locked(q, "the communication thread made no progress (internal error)");
    }
}

int comm_queue_launch(comm_queue_t *q, const comm_op_t *op, void *arg, comm_handle_t *h)
{
    comm_t *c = q->c;
    if (h)
        *h = 0;
    TRY(comm_queue_check(q, op));
    pthread_mutex_lock(&q->mu);
    /* A full queue: wait for the comm thread to retire the oldest op. */
    if (!atomic_load(&q->failed) && c->issued - q->completed >= COMM_QUEUE_LEN)
        wait_completed_locked(q, c->issued - COMM_QUEUE_LEN + 1);
    if (atomic_load(&q->failed)) {
        pthread_mutex_unlock(&q->mu);
        return DDP_ERR_RUNTIME;
    }
    /* An idle thread's clock starts now, not when it last ran an op. */
    if (q->completed == c->issued)
        atomic_store_explicit(&q->progress_ns, now_ns(), memory_order_relaxed);
    comm_queue_req_t *req = &q->q[c->issued % COMM_QUEUE_LEN];
    *req = (comm_queue_req_t){.op = *op, .arg = arg};
    c->issued++;
    if (h)
        *h = c->issued;
    /* Hand the op to the comm thread. */
    pthread_cond_signal(&q->work_cv);
    pthread_mutex_unlock(&q->mu);
    return DDP_OK;
}

int comm_queue_wait(comm_queue_t *q, comm_handle_t h, comm_span_t *span)
{
    pthread_mutex_lock(&q->mu);
    if (h > q->c->issued)
        fail_locked(q, "wait for a collective that was never launched (internal error)");
    wait_completed_locked(q, h);
    int rc = atomic_load(&q->failed) ? DDP_ERR_RUNTIME : DDP_OK;
    if (rc == DDP_OK && span && h > 0)
        *span = q->q[(h - 1) % COMM_QUEUE_LEN].span;
    pthread_mutex_unlock(&q->mu);
    return rc;
}

void comm_queue_span(comm_queue_t *q, comm_handle_t h, comm_span_t *span)
{
    pthread_mutex_lock(&q->mu);
    if (h > 0 && h <= q->completed && h + COMM_QUEUE_LEN > q->c->issued) /* still recorded */
        *span = q->q[(h - 1) % COMM_QUEUE_LEN].span;
    pthread_mutex_unlock(&q->mu);
}

/* Launch and wait in one, on the calling thread once the comm thread has drained what came
 * before (sparing a sleep and a wake-up each way).  The comm thread stays idle (completed ==
 * issued): issued moves only after the op is done, together with completed, under mu. */
int comm_queue_run(comm_queue_t *q, const comm_op_t *op, comm_handle_t *h)
{
    comm_t *c = q->c;
    if (h)
        *h = 0;
    TRY(comm_queue_check(q, op));
    pthread_mutex_lock(&q->mu);
    wait_completed_locked(q, c->issued);
    bool failed = atomic_load(&q->failed);
    pthread_mutex_unlock(&q->mu);
    if (failed)
        return DDP_ERR_RUNTIME;
    uint64_t seq = c->issued + 1;
    comm_span_t span = {0, 0};
    TRY(q->run_op(c, op, seq, NULL, &span)); /* a failure is recorded (sticky) by run_op */
    pthread_mutex_lock(&q->mu);
    q->q[c->issued % COMM_QUEUE_LEN] = (comm_queue_req_t){.op = *op, .span = span};
    c->issued = seq;
    q->completed = seq;
    pthread_mutex_unlock(&q->mu);
    if (h)
        *h = seq;
    return DDP_OK;
}
