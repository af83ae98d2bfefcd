/* common/comm/comm_nccl.c: the collectives of comm.h over NCCL, for CUDA ranks.
 *
 * One communicator per rank, created non-blocking (ncclConfig_t.blocking = 0)
 * so neither joining the group nor any call can hang past --timeout: every
 * wait here polls, checks the group's abort flag in the shared segment and a
 * deadline, and on failure calls ncclCommAbort (which also releases NCCL
 * kernels stuck waiting for a dead peer) and raises the segment's flag so the
 * other ranks fail fast too.  Rank 0 makes the ncclUniqueId and passes it
 * through the segment (comm_seg_exchange_id).
 *
 * Streams and overlap.  Collectives run on the comm's own stream, so they
 * overlap the backend's compute stream.  launch() records an event on the
 * backend's stream and makes the comm stream wait for it: the collective
 * starts on the GPU as soon as the work queued before it (a bucket's
 * gradients) is done, while the host goes on queuing the rest of backward.
 * wait(h) polls op h's end event (bounded, as above), then makes the
 * backend's stream wait for it, so the optimizer sees the reduced values.
 * Spans come from timed events on the comm stream, placed on the now_s()
 * clock through a reference event taken when the comm was made.
 *
 * Threads: the owner thread launches and waits; abort() may come from any
 * other thread of the rank (not from a signal handler).  A mutex guards the
 * ncclComm_t so an abort cannot free it under a call in progress. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "device/backend_cuda.h"
#include "comm/comm_impl.h"
#include "device/cuda_check.h"
#include "base/clock.h"

/* Ops in flight per rank before launch() first waits for the oldest (each
 * owns a pair of events).  DDP has a few dozen buckets at most. */
#define NCCL_SLOTS 256

typedef struct {
    pthread_mutex_t lock;   /* guards nccl against abort() from another thread */
    ncclComm_t nccl;        /* NULL once aborted */
    int dev;
    cudaStream_t stream;    /* the comm stream */
    cudaStream_t be_stream; /* the backend's compute stream */
    cudaEvent_t ready;      /* launch: the backend's work so far */
    cudaEvent_t ref;        /* timing origin, completed at ref_s */
    double ref_s;
    cudaEvent_t start[NCCL_SLOTS], end[NCCL_SLOTS];
    const char *tag[NCCL_SLOTS];
    coll_kind_t kind[NCCL_SLOTS];
    int nevents;            /* start/end pairs created (for teardown) */
    comm_handle_t done;     /* every op <= done is complete */
    float *scratch;         /* the barrier's one float */
    size_t accounted;       /* bytes charged to the backend for NCCL's buffers */
    atomic_bool abort_req;  /* set by abort(); the owner turns it into an error */
    char abort_why[ERR_LEN];
} nccl_impl_t;

static inline nccl_impl_t *impl_of(comm_t *c) { return (nccl_impl_t *)c->impl; }

static int comm_fail(comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CUDACHECK for an established comm: a CUDA failure fails the whole group
 * (sticky, segment flag raised, NCCL aborted), not just this call. */
#define CCK(c, call)                                                                       \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            cudaGetLastError();                                                            \
            return comm_fail((c), "%s:%d: %s: %s: %s", __FILE__, __LINE__, #call,             \
                             cudaGetErrorName(e_), cudaGetErrorString(e_));                \
        }                                                                                  \
    } while (0)

// ---------------------------------------------------------------------------
// failing: sticky, and the whole group goes down

/* Abort our NCCL communicator (idempotent). */
static void nccl_abort_local(nccl_impl_t *n)
{
    pthread_mutex_lock(&n->lock);
    if (n->nccl) {
        ncclCommAbort(n->nccl);
        n->nccl = NULL;
    }
    pthread_mutex_unlock(&n->lock);
}

/* Record the first error, tell the other ranks, abort NCCL. */
static int comm_fail(comm_t *c, const char *fmt, ...)
{
    if (!c->last_error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->last_error, sizeof c->last_error, fmt, ap);
        va_end(ap);
        if (c->seg) /* first reason wins there too; other ranks read "aborted by rank R" */
            comm_seg_abort(c->seg, c->rank, c->last_error);
    }
    nccl_abort_local(impl_of(c));
    return DDP_ERR_RUNTIME;
}

/* Why the group must stop now, if it must: our own abort(), or the segment's
 * flag (another rank failed, or the supervisor saw a rank die). */
static bool must_stop(comm_t *c, char *why)
{
    nccl_impl_t *n = impl_of(c);
    if (atomic_load(&n->abort_req)) {
        pthread_mutex_lock(&n->lock);
        err_set(why, 0, "aborted: %s", n->abort_why);
        pthread_mutex_unlock(&n->lock);
        return true;
    }
    return c->seg && comm_seg_aborted(c->seg, why);
}

/* The communicator's own error state: ncclSuccess, ncclInProgress or an error. */
static ncclResult_t nccl_state(nccl_impl_t *n)
{
    ncclResult_t st = ncclInvalidUsage;
    pthread_mutex_lock(&n->lock);
    if (n->nccl && ncclCommGetAsyncError(n->nccl, &st) != ncclSuccess)
        st = ncclInternalError;
    pthread_mutex_unlock(&n->lock);
    return st;
}

static const char *nccl_detail(nccl_impl_t *n)
{
    pthread_mutex_lock(&n->lock);
    const char *s = ncclGetLastError(n->nccl);
    pthread_mutex_unlock(&n->lock);
    return s && *s ? s : "no detail";
}

/* Polling back-off: spin for about the first millisecond (collectives are
 * usually that short, and a sleep would add its latency to the exposed
 * time), then sleep 50 us between checks. */
static void poll_pause(long *spins)
{
    if (++*spins < 2000)
        return;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Wait until the communicator leaves ncclInProgress (after a non-blocking
 * init or call), bounded by timeout_s and the abort flag. */
static int nccl_settle(comm_t *c, const char *what)
{
    nccl_impl_t *n = impl_of(c);
    double deadline = now_s() + c->timeout_s;
    char why[ERR_LEN];
    long spins = 0;
    for (;;) {
        if (must_stop(c, why)) /* first: an abort also makes NCCL's state an error */
            return comm_fail(c, "%s", why);
        ncclResult_t st = nccl_state(n);
        if (st == ncclSuccess)
            return DDP_OK;
        if (st != ncclInProgress)
            return comm_fail(c, "NCCL %s: %s: %s", what, ncclGetErrorString(st), nccl_detail(n));
        if (now_s() > deadline)
            return comm_fail(c, "timed out in NCCL %s: a peer did not arrive within %.1f s",
                             what, c->timeout_s);
        poll_pause(&spins);
    }
}

// ---------------------------------------------------------------------------
// launch and wait

/* "all-reduce of bucket 2" (or just "all-reduce" without a tag), into buf (ERR_LEN). */
static const char *op_name(char *buf, coll_kind_t kind, const char *tag)
{
    err_set(buf, 0, "%s%s%s", coll_name(kind), tag ? " of " : "", tag ? tag : "");
    return buf;
}

/* ncclResult_t of one collective call, made under the lock. */
static ncclResult_t nccl_issue(comm_t *c, const comm_op_t *op)
{
    nccl_impl_t *n = impl_of(c);
    ncclRedOp_t red = op->redop == REDOP_AVG ? ncclAvg : ncclSum;
    float *recv = op->recv;
    ncclResult_t r = ncclInvalidUsage;
    pthread_mutex_lock(&n->lock);
    if (n->nccl) {
        switch (op->kind) {
        case COLL_BROADCAST:
            r = ncclBroadcast(op->send ? op->send : recv, recv, op->count, ncclFloat, op->root,
                              n->nccl, n->stream);
            break;
        case COLL_ALL_REDUCE:
            r = ncclAllReduce(op->send ? op->send : recv, recv, op->count, ncclFloat, red, n->nccl,
                              n->stream);
            break;
        case COLL_REDUCE:
            r = ncclReduce(op->send ? op->send : recv, recv, op->count, ncclFloat, red, op->root,
                           n->nccl, n->stream);
            break;
        case COLL_ALL_GATHER:
            r = ncclAllGather(op->send ? op->send : recv + (size_t)c->rank * op->count, recv,
                              op->count, ncclFloat, n->nccl, n->stream);
            break;
        case COLL_REDUCE_SCATTER: /* in place: recv is our block of the send buffer */
            r = ncclReduceScatter(op->send ? op->send : recv - (size_t)c->rank * op->count, recv,
                                  op->count, ncclFloat, red, n->nccl, n->stream);
            break;
        case COLL_BARRIER: /* NCCL has none: a one-float all-reduce every rank must join */
            r = ncclAllReduce(n->scratch, n->scratch, 1, ncclFloat, ncclSum, n->nccl, n->stream);
            break;
        case COLL_COUNT:
            break;
        }
    }
    pthread_mutex_unlock(&n->lock);
    return r;
}

static int nccl_wait(comm_t *c, comm_handle_t h, comm_span_t *span);

static int nccl_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    nccl_impl_t *n = impl_of(c);
    char why[ERR_LEN];
    if (c->last_error[0])
        return DDP_ERR_RUNTIME; /* sticky */
    if (must_stop(c, why))
        return comm_fail(c, "%s", why);
    if ((unsigned)op->kind >= COLL_COUNT ||
        ((op->kind == COLL_BROADCAST || op->kind == COLL_REDUCE) &&
         (op->root < 0 || op->root >= c->world)) ||
        (op->kind != COLL_BARRIER && op->count > 0 && !op->recv))
        return comm_fail(c, "invalid %s (root %d, count %zu)",
                         (unsigned)op->kind < COLL_COUNT ? coll_name(op->kind) : "collective",
                         op->root, op->count);

    comm_handle_t id = c->issued + 1;
    int slot = (int)(id % NCCL_SLOTS);
    /* The slot's events still belong to op id - NCCL_SLOTS until it is waited for. */
    if (id > NCCL_SLOTS && n->done < id - NCCL_SLOTS) {
        int rc = nccl_wait(c, id - NCCL_SLOTS, NULL);
        if (rc != DDP_OK)
            return rc;
    }
    CCK(c, cudaSetDevice(n->dev));
    /* Why: the op reads what the backend's stream wrote (a bucket's
     * gradients); the comm stream waits on the GPU for it, the host does not. */
    CCK(c, cudaEventRecord(n->ready, n->be_stream));
    CCK(c, cudaStreamWaitEvent(n->stream, n->ready, 0));
    CCK(c, cudaEventRecord(n->start[slot], n->stream));
    if (op->count > 0 || op->kind == COLL_BARRIER) { /* count 0: a no-op, no rendezvous */
        ncclResult_t r = nccl_issue(c, op);
        if (r == ncclInProgress) {
            int rc = nccl_settle(c, coll_name(op->kind));
            if (rc != DDP_OK)
                return rc;
        } else if (r != ncclSuccess) {
            if (must_stop(c, why)) /* aborted under us: say so, not "invalid usage" */
                return comm_fail(c, "%s", why);
            char name[ERR_LEN];
            return comm_fail(c, "NCCL %s: %s: %s", op_name(name, op->kind, op->tag),
                             ncclGetErrorString(r), nccl_detail(n));
        }
    }
    CCK(c, cudaEventRecord(n->end[slot], n->stream));
    n->tag[slot] = op->tag;
    n->kind[slot] = op->kind;
    c->issued = id;
    if (h)
        *h = id;
    return DDP_OK;
}

static int nccl_span(nccl_impl_t *n, int slot, comm_span_t *span)
{
    float t0 = 0.0f, t1 = 0.0f;
    if (cudaEventElapsedTime(&t0, n->ref, n->start[slot]) != cudaSuccess ||
        cudaEventElapsedTime(&t1, n->ref, n->end[slot]) != cudaSuccess) {
        cudaGetLastError();
        span->start_s = span->end_s = 0.0; /* "cannot tell" (comm.h) */
        return DDP_OK;
    }
    span->start_s = n->ref_s + t0 * 1e-3;
    span->end_s = n->ref_s + t1 * 1e-3;
    return DDP_OK;
}

static int nccl_wait(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    nccl_impl_t *n = impl_of(c);
    if (span)
        span->start_s = span->end_s = 0.0;
    if (h == 0)
        return DDP_OK;
    if (c->last_error[0])
        return DDP_ERR_RUNTIME;
    if (h > c->issued)
        return comm_fail(c, "wait for op %llu, only %llu launched", (unsigned long long)h,
                         (unsigned long long)c->issued);
    int slot = (int)(h % NCCL_SLOTS);
    bool fresh = h + NCCL_SLOTS > c->issued; /* its events are still its own */
    CCK(c, cudaSetDevice(n->dev));
    if (h > n->done && fresh) {
        /* Why poll instead of cudaEventSynchronize: a peer that never arrives
         * would block that forever; here the deadline and the abort flag are
         * checked between polls. */
        double deadline = now_s() + c->timeout_s;
        char why[ERR_LEN], name[ERR_LEN];
        op_name(name, n->kind[slot], n->tag[slot]);
        long spins = 0;
        for (;;) {
            cudaError_t q = cudaEventQuery(n->end[slot]);
            if (q == cudaSuccess)
                break;
            if (q != cudaErrorNotReady) {
                cudaGetLastError();
                return comm_fail(c, "%s on device %d: %s: %s", name, n->dev, cudaGetErrorName(q),
                                 cudaGetErrorString(q));
            }
            if (must_stop(c, why)) /* first: an abort also makes NCCL's state an error */
                return comm_fail(c, "%s", why);
            ncclResult_t st = nccl_state(n);
            if (st != ncclSuccess && st != ncclInProgress)
                return comm_fail(c, "NCCL %s: %s: %s", name, ncclGetErrorString(st),
                                 nccl_detail(n));
            if (now_s() > deadline)
                return comm_fail(c, "timed out in %s: a peer did not arrive within %.1f s", name,
                                 c->timeout_s);
            poll_pause(&spins);
        }
        /* An abort releases NCCL kernels early, so a completed event alone does
         * not mean the data is right: check once more. */
        char why2[ERR_LEN];
        if (must_stop(c, why2))
            return comm_fail(c, "%s", why2);
        n->done = h; /* the comm stream runs ops in order: all before h are done too */
    }
    if (fresh) {
        /* Why: work the rank queues on its backend after this wait (the
         * optimizer) must see the results; the GPU orders it, for free since
         * the event has completed. */
        CCK(c, cudaStreamWaitEvent(n->be_stream, n->end[slot], 0));
        if (span)
            nccl_span(n, slot, span);
    }
    return DDP_OK;
}

static void nccl_abort(comm_t *c, const char *why)
{
    nccl_impl_t *n = impl_of(c);
    pthread_mutex_lock(&n->lock);
    if (!atomic_load(&n->abort_req))
        snprintf(n->abort_why, sizeof n->abort_why, "%s", why ? why : "no reason given");
    pthread_mutex_unlock(&n->lock);
    atomic_store(&n->abort_req, true);
    if (c->seg)
        comm_seg_abort(c->seg, c->rank, why ? why : "no reason given");
    /* Releases NCCL kernels that wait for peers; the owner thread's next
     * poll sees abort_req and fails. */
    nccl_abort_local(n);
}

static void nccl_destroy(comm_t *c)
{
    if (!c)
        return;
    nccl_impl_t *n = impl_of(c);
    if (n) {
        cudaSetDevice(n->dev);
        if (n->nccl && !c->last_error[0] && !atomic_load(&n->abort_req)) {
            /* A clean exit: flush, then free.  Non-blocking, so the flush is
             * polled with the usual bound; a failure here is not reported to
             * the group (every rank is past its last collective). */
            pthread_mutex_lock(&n->lock);
            ncclResult_t r = n->nccl ? ncclCommFinalize(n->nccl) : ncclInvalidUsage;
            pthread_mutex_unlock(&n->lock);
            double deadline = now_s() + c->timeout_s;
            long spins = 0;
            while (r == ncclInProgress && now_s() < deadline) {
                poll_pause(&spins);
                r = nccl_state(n);
            }
            pthread_mutex_lock(&n->lock);
            if (r == ncclSuccess && n->nccl) {
                ncclCommDestroy(n->nccl);
                n->nccl = NULL;
            }
            pthread_mutex_unlock(&n->lock);
        }
        nccl_abort_local(n); /* anything left: abort, which never waits for peers */
        if (n->stream && !c->last_error[0])
            cudaStreamSynchronize(n->stream);
        for (int i = 0; i < n->nevents; i++) {
            cudaEventDestroy(n->start[i]);
            cudaEventDestroy(n->end[i]);
        }
        if (n->ready)
            cudaEventDestroy(n->ready);
        if (n->ref)
            cudaEventDestroy(n->ref);
        if (n->scratch) {
            cudaFree(n->scratch);
            backend_cuda_account(c->be, -(long long)sizeof(float));
        }
        if (n->accounted)
            backend_cuda_account(c->be, -(long long)n->accounted);
        if (n->stream)
            cudaStreamDestroy(n->stream);
        cudaGetLastError();
        pthread_mutex_destroy(&n->lock);
        free(n);
    }
    free(c);
}

static const comm_ops_t nccl_ops = {
    .name = "nccl",
    .launch = nccl_launch,
    .wait = nccl_wait,
    .abort = nccl_abort,
    .destroy = nccl_destroy,
};

// ---------------------------------------------------------------------------
// creation

static int nccl_setup_cuda(comm_t *c)
{
    nccl_impl_t *n = impl_of(c);
    CUDACHECK(c->last_error, cudaSetDevice(n->dev));
    CUDACHECK(c->last_error, cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    CUDACHECK(c->last_error, cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    CUDACHECK(c->last_error, cudaEventCreate(&n->ref));
    for (; n->nevents < NCCL_SLOTS; n->nevents++) {
        CUDACHECK(c->last_error, cudaEventCreate(&n->start[n->nevents]));
        cudaError_t e = cudaEventCreate(&n->end[n->nevents]);
        if (e != cudaSuccess) {
            cudaEventDestroy(n->start[n->nevents]);
            CUDACHECK(c->last_error, e);
        }
    }
    CUDACHECK(c->last_error, cudaMalloc((void **)&n->scratch, sizeof(float)));
    backend_cuda_account(c->be, (long long)sizeof(float));
    CUDACHECK(c->last_error, cudaMemsetAsync(n->scratch, 0, sizeof(float), n->stream));
    /* The timing origin: ref completes, then the host clock is read. */
    CUDACHECK(c->last_error, cudaEventRecord(n->ref, n->stream));
    CUDACHECK(c->last_error, cudaEventSynchronize(n->ref));
    n->ref_s = now_s();
    return DDP_OK;
}

static int nccl_join(comm_t *c, char *err)
{
    nccl_impl_t *n = impl_of(c);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) /* on failure the caller aborts the group */
        NCCLCHECK(c->last_error, NULL, ncclGetUniqueId(&id));
    /* Why through the segment: rank 0's id must reach every rank before any
     * can join; the exchange is bounded by timeout_s and the abort flag. */
    int rc = comm_seg_exchange_id(c->seg, c->rank, &id, sizeof id, c->timeout_s, err);
    if (rc != DDP_OK)
        return comm_fail(c, "NCCL id exchange: %s", err);

    size_t free_before = 0, free_after = 0, total = 0;
    bool mem_known = cudaMemGetInfo(&free_before, &total) == cudaSuccess;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* init and calls return at once; nccl_settle bounds the wait */
    ncclComm_t comm = NULL;
    ncclResult_t r = ncclCommInitRankConfig(&comm, c->world, id, c->rank, &cfg);
    pthread_mutex_lock(&n->lock);
    n->nccl = comm;
    pthread_mutex_unlock(&n->lock);
    if (r != ncclSuccess && r != ncclInProgress)
        return comm_fail(c, "ncclCommInitRankConfig (%d ranks, device %d): %s: %s", c->world,
                         n->dev, ncclGetErrorString(r), ncclGetLastError(comm));
    if ((rc = nccl_settle(c, "init")) != DDP_OK)
        return rc;
    /* NCCL's own device buffers, charged to this device's peak (approximate:
     * the free-memory difference around init). */
    if (mem_known && cudaMemGetInfo(&free_after, &total) == cudaSuccess &&
        free_before > free_after) {
        n->accounted = free_before - free_after;
        backend_cuda_account(c->be, (long long)n->accounted);
    }
    cudaGetLastError();
    return DDP_OK;
}

int comm_nccl_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    if (!a->be || backend_kind(a->be) != BACKEND_CUDA)
        return err_set(err, DDP_ERR_INPUT, "--comm nccl: needs --backend cuda (rank %d is on %s)",
                       a->rank, a->be ? backend_name(a->be) : "no device");
    if (!a->seg)
        return err_set(err, DDP_ERR_RUNTIME, "--comm nccl: rank %d has no shared segment", a->rank);
    comm_t *c = calloc(1, sizeof *c);
    nccl_impl_t *n = calloc(1, sizeof *n);
    if (!c || !n) {
        free(c);
        free(n);
        return err_set(err, DDP_ERR_RUNTIME, "rank %d: out of memory for the NCCL comm", a->rank);
    }
    pthread_mutex_init(&n->lock, NULL);
    c->ops = &nccl_ops;
    c->kind = COMM_NCCL;
    c->world = a->world;
    c->rank = a->rank;
    c->timeout_s = a->timeout_s > 0 ? a->timeout_s : 60.0;
    c->be = a->be;
    c->seg = a->seg;
    c->impl = n;
    n->dev = backend_cuda_device(a->be);
    n->be_stream = backend_cuda_stream(a->be);
    int rc = nccl_setup_cuda(c);
    if (rc == DDP_OK)
        rc = nccl_join(c, err);
    if (rc != DDP_OK) {
        err_set(err, rc, "%s", c->last_error);
        if (c->seg) /* the others must not wait for us until their timeout */
            comm_seg_abort(c->seg, c->rank, c->last_error);
        nccl_destroy(c);
        return rc;
    }
    *out = c;
    return DDP_OK;
}
