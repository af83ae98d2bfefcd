/* tests/unit/test_comm_queue.c: the host-thread collective queue that the shm
 * and MPI comms share (comm/comm_queue.h), on a fake comm whose run_op only
 * records what it ran: launch order, handles and spans, run on the calling
 * thread, a full queue, and the sticky failure. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <string.h>

#include "common/comm/comm_queue.h"
#include "tsan_criterion.h"

typedef struct {
    comm_t c;
    comm_queue_t queue;
    pthread_t caller;
    uint64_t ran[2 * COMM_QUEUE_LEN]; /* seqs, in the order run */
    int on_caller;                    /* ops run on the calling thread */
    int n;
    uint64_t fail_at; /* fail the op with this seq (0: none) */
} fake_t;

static const comm_ops_t fake_ops = {.name = "fake"};

static int fake_run_op(comm_t *c, const comm_op_t *op, uint64_t seq, void *arg,
                       comm_span_t *span)
{
    fake_t *f = (fake_t *)c;
    (void)op;
    (void)arg;
    if (pthread_equal(pthread_self(), f->caller))
        f->on_caller++;
    if (seq == f->fail_at)
        return comm_queue_fail(&f->queue, "op failed on purpose");
    f->ran[f->n++] = seq;
    span->start_s = (double)seq;
    span->end_s = (double)seq + 0.5;
    return DDP_OK;
}

static fake_t *fake_new(void)
{
    fake_t *f = calloc(1, sizeof *f);
    f->c.ops = &fake_ops;
    f->c.world = 1;
    f->c.timeout_s = 5;
    f->caller = pthread_self();
    char err[ERR_LEN];
    cr_assert_eq(comm_queue_start(&f->queue, &f->c, fake_run_op, 0, err), DDP_OK, "%s", err);
    return f;
}

static void fake_free(fake_t *f)
{
    comm_queue_stop(&f->queue);
    free(f);
}

static const comm_op_t barrier = {.kind = COLL_BARRIER};

Test(comm_queue, runs_in_launch_order_past_a_full_queue)
{
    fake_t *f = fake_new();
    int total = COMM_QUEUE_LEN + 20; /* the launches past the ring wait for the oldest */
    comm_handle_t h = 0;
    for (int i = 0; i < total; i++) {
        cr_assert_eq(comm_queue_launch(&f->queue, &barrier, NULL, &h), DDP_OK);
        cr_assert_eq(h, (comm_handle_t)(i + 1));
    }
    comm_span_t span = {0, 0};
    cr_assert_eq(comm_queue_wait(&f->queue, h, &span), DDP_OK);
    cr_assert_eq(f->n, total);
    for (int i = 0; i < total; i++)
        cr_assert_eq(f->ran[i], (uint64_t)(i + 1));
    cr_assert_eq(span.start_s, (double)h, "the span of op h, not another's");
    cr_assert_eq(f->on_caller, 0, "launched ops run on the comm thread");
    /* run: on the calling thread, with the next handle */
    cr_assert_eq(comm_queue_run(&f->queue, &barrier, &h), DDP_OK);
    cr_assert_eq(h, (comm_handle_t)(total + 1));
    cr_assert_eq(f->on_caller, 1);
    comm_queue_span(&f->queue, h, &span);
    cr_assert_eq(span.start_s, (double)h);
    cr_assert_not(comm_queue_pending(&f->queue));
    fake_free(f);
}

Test(comm_queue, a_failure_sticks)
{
    fake_t *f = fake_new();
    f->fail_at = 2;
    comm_handle_t h;
    for (int i = 0; i < 3; i++)
        comm_queue_launch(&f->queue, &barrier, NULL, &h);
    cr_assert_eq(comm_queue_wait(&f->queue, h, NULL), DDP_ERR_RUNTIME);
    cr_assert_str_eq(f->c.last_error, "op failed on purpose");
    cr_assert_eq(comm_queue_launch(&f->queue, &barrier, NULL, &h), DDP_ERR_RUNTIME);
    cr_assert_eq(comm_queue_run(&f->queue, &barrier, &h), DDP_ERR_RUNTIME);
    comm_queue_fail(&f->queue, "a later failure");
    cr_assert_str_eq(f->c.last_error, "op failed on purpose", "the first failure is kept");
    fake_free(f);
}

Test(comm_queue, a_malformed_op_fails_the_comm)
{
    fake_t *f = fake_new();
    comm_op_t bad = {.kind = COLL_COUNT};
    cr_assert_eq(comm_queue_launch(&f->queue, &bad, NULL, NULL), DDP_ERR_RUNTIME);
    cr_assert(strstr(f->c.last_error, "unknown collective"), "%s", f->c.last_error);
    cr_assert_eq(f->n, 0);
    fake_free(f);
}
