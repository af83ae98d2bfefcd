/* common/comm/comm_queue.h: the host-thread collective queue of comm_shm.c and comm_mpi.c
 * (docs/architecture.md): the ring of launched ops, the thread, the sticky failure and the
 * waits; an implementation brings run_op and its create.  Op h (1, 2, ...) is the h-th
 * launched; c->issued the last launched, completed the last finished. */
#ifndef DDPBENCH_COMM_QUEUE_H
#define DDPBENCH_COMM_QUEUE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/comm/comm_impl.h"

/* Ops launched and not yet waited for, at most (a launch past it waits for
 * the oldest). */
#define COMM_QUEUE_LEN 256

/* Run op (the seq-th) to completion, filling span; arg: launch's (NULL from comm_queue_run).
 * On failure return comm_queue_fail's status. */
typedef int (*comm_run_op_fn)(comm_t *c, const comm_op_t *op, uint64_t seq, void *arg,
                              comm_span_t *span);

typedef struct {
    comm_op_t op;
    comm_span_t span; /* written by whoever ran it */
    void *arg;
} comm_queue_req_t;

typedef struct {
    comm_t *c;
    comm_run_op_fn run_op;
    unsigned long timer_slack_ns; /* the thread's timer slack (0: the system's) */
    pthread_t thread;
    bool thread_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* main -> comm thread: an op was queued, or stop */
    pthread_cond_t done_cv; /* comm thread -> main: an op completed or failed */
    comm_queue_req_t q[COMM_QUEUE_LEN];
    uint64_t completed;            /* ops finished (mu) */
    bool stop;                     /* (mu) */
    atomic_bool failed;            /* sticky; c->last_error holds why (written under mu) */
    _Atomic uint64_t progress_ns;  /* last time the queue moved: the stall watchdog's clock */
} comm_queue_t;

/* Make q (zeroed, inside the comm c) and start its thread; on failure comm_queue_stop still
 * frees what was made. */
int comm_queue_start(comm_queue_t *q, comm_t *c, comm_run_op_fn run_op,
                     unsigned long timer_slack_ns, char *err);
/* Stop the thread (ops still queued are abandoned) and free q's locks. */
void comm_queue_stop(comm_queue_t *q);

/* Record the message as the comm's failure (the first one sticks) and wake every
 * waiter; returns DDP_ERR_RUNTIME. */
int comm_queue_fail(comm_queue_t *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool comm_queue_failed(comm_queue_t *q);
/* Ops launched and not finished while the comm has not failed. */
bool comm_queue_pending(comm_queue_t *q);
/* comm_op_check, recorded as the comm's failure when op is malformed. */
int comm_queue_check(comm_queue_t *q, const comm_op_t *op);

/* The comm_ops_t entries, on a comm that embeds q: */
int comm_queue_launch(comm_queue_t *q, const comm_op_t *op, void *arg, comm_handle_t *h);
int comm_queue_wait(comm_queue_t *q, comm_handle_t h, comm_span_t *span);
void comm_queue_span(comm_queue_t *q, comm_handle_t h, comm_span_t *span);
/* Launch and wait in one, on the calling thread (comm.h's run). */
int comm_queue_run(comm_queue_t *q, const comm_op_t *op, comm_handle_t *h);

#endif
