/* common/comm/comm_nccl.c: the collectives of comm.h over NCCL, for CUDA ranks.
 *
 * One non-blocking communicator per rank (ncclConfig_t.blocking = 0), so no call can hang:
 * every wait polls the group's abort flag and a deadline (joining: init_timeout_s; later:
 * --timeout), and a failure calls ncclCommAbort (releasing kernels stuck on a dead peer)
 * and raises the segment's flag.  Rank 0's ncclUniqueId travels through the segment, or
 * under mpirun through the launcher's exchange (MPI_Bcast).
 *
 * Collectives run on the comm's own stream after an event recorded on the backend's stream;
 * wait(h) makes the backend's stream wait for op h's end event, the host does not.  A peer
 * that never comes is caught by the watch this comm installs on the backend
 * (backend_set_watch), polled by every host wait on the device.  Spans come from timed events.
 *
 * CUDA graphs (docs/gpu.md): a collective launched while the backend captures is captured
 * with it (the comm stream joins through `ready`, its start and end are external records of
 * events kept per graph key and op, and the wait joins back through `gjoin`).  While a step
 * replays, launch and wait queue nothing but are numbered and checked (backend_graph_note).
 * No event of the step under way is queried before its graph is launched, and none while it
 * is captured (CUDA refuses a capturing thread's query of any event).
 *
 * Threads: the owner launches and waits; abort() may come from any other thread (not a signal
 * handler).  A mutex guards the ncclComm_t so an abort cannot free it under a call. */
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

#include "common/device/backend_cuda.h"
#include "common/comm/comm_impl.h"
#include "common/device/cuda_check.h"
#include "common/device/kernels.h"
#include "common/base/clock.h"

/* Ops in flight per rank before launch() first waits for the oldest (a pair of events each). */
#define NCCL_SLOTS 256
/* Collectives one graph step may hold (64 buckets, each with a ZeRO-1 leftover, the loss). */
#define NCCL_GRAPH_OPS 136

typedef struct {
    pthread_mutex_t lock;   /* guards nccl against abort() from another thread */
    ncclComm_t nccl;        /* NULL once aborted */
    int dev;
    cudaStream_t stream;    /* the comm stream */
    cudaStream_t be_stream; /* the backend's compute stream */
    cudaEvent_t ready;      /* launch: the backend's work so far */
    cudaEvent_t start[NCCL_SLOTS], end[NCCL_SLOTS];
    const char *tag[NCCL_SLOTS];
    coll_kind_t kind[NCCL_SLOTS];
    int nevents;            /* start/end pairs created (for teardown) */
    /* the events op id's slot was timed with: its own pair, or the graph's (key, index) */
    cudaEvent_t sev[NCCL_SLOTS], eev[NCCL_SLOTS];
    int gslot[NCCL_SLOTS];  /* key * NCCL_GRAPH_OPS + index, -1: its own pair */
    unsigned long gstep[NCCL_SLOTS]; /* the graph step (backend's serial) it was in */
    /* CUDA graphs (see the header comment) */
    cudaEvent_t gstart[BACKEND_GRAPH_KEYS * NCCL_GRAPH_OPS], gend[BACKEND_GRAPH_KEYS * NCCL_GRAPH_OPS];
    unsigned long grec[BACKEND_GRAPH_KEYS * NCCL_GRAPH_OPS]; /* the step that last used each */
    int ngevents;           /* graph pairs created (for teardown) */
    cudaEvent_t gjoin;      /* the comm stream's join back into a capture */
    graph_mode_t gmode;     /* the backend's, as of the last call */
    int gkey;
    unsigned long gserial;  /* the graph step the ops below belong to */
    int gnext;              /* its next op's index */
    comm_handle_t gfirst;   /* its first op */
    comm_handle_t done;     /* every op <= done is known complete (the watch) */
    comm_handle_t waited;   /* the backend's stream waits for every op <= waited */
    double pending_since;   /* when op done+1 became the oldest unfinished one */
    double init_timeout_s;  /* the bound on joining the group */
    comm_exchange_fn exchange; /* without a segment: how rank 0's id reaches the others */
    void *exchange_ctx;
    float *scratch;         /* the barrier's one float */
    size_t accounted;       /* bytes charged to the backend for NCCL's buffers */
    atomic_bool abort_req;  /* set by abort(); the owner turns it into an error */
    atomic_int probe_graphs; /* probe_capture's graphs not yet dropped (graphs_hold) */
    char abort_why[ERR_LEN];
} nccl_impl_t;

static inline nccl_impl_t *impl_of(comm_t *c) { return (nccl_impl_t *)c->impl; }

static int comm_fail(comm_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* CUDACHECK for an established comm: a CUDA failure fails the whole group, not just the call. */
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

/* Whether a CUDA graph (the backend's, or the probe's) may hold our collectives. */
static bool graphs_hold(const comm_t *c)
{
    return atomic_load(&((nccl_impl_t *)c->impl)->probe_graphs) > 0 ||
           (c->be && backend_graphs_held(c->be));
}

/* Abort our NCCL communicator (idempotent).  Deferred while graphs may hold it (unless last,
 * from nccl_destroy): ncclCommAbort returns only once no graph holds its collectives
 * (docs/gpu.md), which would never come while this thread waits in it; `released` carries
 * it out when the last graph is dropped.  Why under the lock: an abort from another thread
 * reads graphs_hold after it recorded its request under the lock, and released takes the
 * lock after the graphs are gone, so one of the two sees the other. */
static void nccl_abort_local(comm_t *c, bool last)
{
    nccl_impl_t *n = impl_of(c);
    pthread_mutex_lock(&n->lock);
    if (n->nccl && (last || !graphs_hold(c))) {
        ncclCommAbort(n->nccl);
        n->nccl = NULL;
    }
    pthread_mutex_unlock(&n->lock);
}

/* No graph holds the communicator any more: an abort asked for meanwhile is carried out. */
static void released(void *ctx)
{
    comm_t *c = ctx;
    if (atomic_load(&impl_of(c)->abort_req) || c->last_error[0])
        nccl_abort_local(c, false);
}

/* " (where each rank stands: ...)" from the segment's ledger, or "". */
static const char *ledger(comm_t *c, uint64_t seq)
{
    static _Thread_local char buf[ERR_LEN - 120];
    char at[sizeof buf - 4];
    buf[0] = 0;
    if (c->seg) {
        comm_seg_ledger(c->seg, seq, at, sizeof at);
        snprintf(buf, sizeof buf, " (%s)", at);
    }
    return buf;
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
    nccl_abort_local(c, false);
    return DDP_ERR_RUNTIME;
}

/* Why the group must stop now, if it must: our own abort(), or the segment's flag. */
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

/* DDP_OK while the group goes on; else the comm's failure (a stop recorded now as one). */
static int usable(comm_t *c)
{
    char why[ERR_LEN];
    if (c->last_error[0])
        return DDP_ERR_RUNTIME;
    if (must_stop(c, why))
        return comm_fail(c, "%s", why);
    return DDP_OK;
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

/* Polling back-off: spin about the first millisecond (a sleep would add to the exposed
 * time of a short collective), then sleep 50 us between checks. */
static void poll_pause(long *spins)
{
    if (++*spins < 2000)
        return;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
}

/* Wait until the communicator leaves ncclInProgress, bounded by limit_s and the abort flag. */
static int nccl_settle(comm_t *c, const char *what, double limit_s)
{
    nccl_impl_t *n = impl_of(c);
    double deadline = now_s() + limit_s;
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
            return comm_fail(c, "timed out in NCCL %s: a peer did not arrive within %g s",
                             what, limit_s);
        poll_pause(&spins);
    }
}

// ---------------------------------------------------------------------------
// inside a CUDA graph step

/* Read where the backend stands; a new graph step starts its ops afresh. */
static graph_mode_t graph_sync(comm_t *c)
{
    nccl_impl_t *n = impl_of(c);
    unsigned long serial = 0;
    n->gmode = backend_graph_state(c->be, &n->gkey, &serial);
    if (n->gmode != GRAPH_EAGER && serial != n->gserial) {
        n->gserial = serial;
        n->gnext = 0;
        n->gfirst = c->issued + 1;
    }
    return n->gmode;
}

/* Whether op id's end event may be queried now: not while its graph step is being queued
 * (its records are not real yet), and none while a step is captured (CUDA refuses it and
 * invalidates the capture). */
static bool observable(nccl_impl_t *n, comm_handle_t id)
{
    if (n->gmode == GRAPH_EAGER)
        return true;
    return n->gmode == GRAPH_REPLAY && id < n->gfirst;
}

// ---------------------------------------------------------------------------
// launch and wait

/* "all-reduce of bucket 2" (or just "all-reduce" without a tag), into buf (ERR_LEN). */
static const char *op_name(char *buf, coll_kind_t kind, const char *tag)
{
    err_set(buf, 0, "%s%s%s", coll_name(kind), tag ? " of " : "", tag ? tag : "");
    return buf;
}

/* One collective call, under the lock.  Always ncclSum (launch divides for REDOP_AVG). */
static ncclResult_t nccl_issue(comm_t *c, const comm_op_t *op)
{
    nccl_impl_t *n = impl_of(c);
    const ncclRedOp_t red = ncclSum;
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
            /* 16-bit: NCCL's own half / bfloat16 sums (the compression hooks) */
            r = ncclAllReduce(op->send ? op->send : recv, recv, op->count,
                              op->dtype == DTYPE_F16    ? ncclHalf
                              : op->dtype == DTYPE_BF16 ? ncclBfloat16
                                                        : ncclFloat,
                              red, n->nccl, n->stream);
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
        case COLL_SCATTER: /* comm_op_check refused them */
        case COLL_GATHER:
        case COLL_COUNT:
            break;
        }
    }
    pthread_mutex_unlock(&n->lock);
    return r;
}

/* The watch's bookkeeping: advance `done` over the ops whose end events have completed; a
 * failure of the group when the oldest unfinished op waited past timeout_s, another rank
 * aborted, or NCCL reports an error. */
static int nccl_check(comm_t *c)
{
    nccl_impl_t *n = impl_of(c);
    TRY(usable(c));
    graph_sync(c);
    while (n->done < c->issued && observable(n, n->done + 1)) {
        int slot = (int)((n->done + 1) % NCCL_SLOTS);
        cudaError_t q = cudaEventQuery(n->eev[slot]);
        if (q == cudaErrorNotReady)
            break;
        if (q != cudaSuccess) {
            cudaGetLastError();
            char name[ERR_LEN];
            return comm_fail(c, "%s on device %d: %s: %s",
                             op_name(name, n->kind[slot], n->tag[slot]), n->dev,
                             cudaGetErrorName(q), cudaGetErrorString(q));
        }
        n->done++;
        n->pending_since = now_s();
    }
    if (n->done == c->issued)
        return DDP_OK;
    ncclResult_t st = nccl_state(n);
    int slot = (int)((n->done + 1) % NCCL_SLOTS);
    char name[ERR_LEN];
    op_name(name, n->kind[slot], n->tag[slot]);
    if (st != ncclSuccess && st != ncclInProgress)
        return comm_fail(c, "NCCL %s: %s: %s", name, ncclGetErrorString(st), nccl_detail(n));
    /* no timeout judged on ops that could not be looked at (a capture) */
    if (n->gmode != GRAPH_CAPTURE && now_s() - n->pending_since > c->timeout_s)
        return comm_fail(c, "timed out in %s: a peer did not arrive within %g s%s", name,
                         c->timeout_s, ledger(c, n->done + 1));
    return DDP_OK;
}

/* backend_set_watch's check, run while the rank's host waits for its GPU. */
static int nccl_watch(void *ctx, char *err)
{
    comm_t *c = ctx;
    if (nccl_check(c) == DDP_OK)
        return DDP_OK;
    return err_set(err, DDP_ERR_RUNTIME, "%s", c->last_error);
}

/* Poll until op h is known complete (bounded as every wait: nccl_check). */
static int nccl_poll(comm_t *c, comm_handle_t h)
{
    long spins = 0;
    graph_sync(c);
    if (!observable(impl_of(c), h))
        return comm_fail(c, "a host wait for a collective of the CUDA graph step being queued");
    while (impl_of(c)->done < h) {
        TRY(nccl_check(c));
        if (impl_of(c)->done < h)
            poll_pause(&spins);
    }
    return DDP_OK;
}

/* An eager op's slot: its own pair of events, once op id - NCCL_SLOTS is known complete. */
static int eager_slot(comm_t *c, comm_handle_t id)
{
    nccl_impl_t *n = impl_of(c);
    int slot = (int)(id % NCCL_SLOTS);
    if (id > NCCL_SLOTS && n->done < id - NCCL_SLOTS)
        TRY(nccl_poll(c, id - NCCL_SLOTS));
    n->sev[slot] = n->start[slot];
    n->eev[slot] = n->end[slot];
    n->gslot[slot] = -1;
    if (n->done == c->issued) /* nothing pending: this op is the oldest */
        n->pending_since = now_s();
    return DDP_OK;
}

/* The comm stream's side of an op: after the backend's work so far, then its start record. */
static int after_backend(comm_t *c, int slot, unsigned flags)
{
    nccl_impl_t *n = impl_of(c);
    CCK(c, cudaSetDevice(n->dev));
    /* Why: the op reads what the backend's stream wrote; the comm stream waits on the GPU,
     * the host does not.  Capturing, this wait joins the comm stream to the capture. */
    CCK(c, cudaEventRecord(n->ready, n->be_stream));
    CCK(c, cudaStreamWaitEvent(n->stream, n->ready, 0));
    CCK(c, cudaEventRecordWithFlags(n->sev[slot], n->stream, flags));
    return DDP_OK;
}

static int nccl_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    nccl_impl_t *n = impl_of(c);
    char why[ERR_LEN];
    int urc = usable(c);
    if (urc != DDP_OK)
        return urc;
    if (comm_op_check(c, op, why) != DDP_OK)
        return comm_fail(c, "%s", why);

    comm_handle_t id = c->issued + 1;
    int slot = (int)(id % NCCL_SLOTS);
    graph_mode_t gm = graph_sync(c);
    int gs = -1;
    if (gm != GRAPH_EAGER) {
        /* Inside a graph step: the graph's pair of events, the op checked like a kernel. */
        if (n->gnext >= NCCL_GRAPH_OPS || n->gnext >= n->ngevents / BACKEND_GRAPH_KEYS)
            return comm_fail(c, "more than %d collectives in one CUDA graph step", n->gnext);
        gs = n->gkey * NCCL_GRAPH_OPS + n->gnext++;
        const uint64_t w[] = {0x6e63636cu + (uint64_t)op->kind, (uint64_t)(uintptr_t)op->send,
                              (uint64_t)(uintptr_t)op->recv, op->count, (uint64_t)op->root,
                              (uint64_t)op->redop, (uint64_t)op->dtype};
        bool replay = backend_graph_note(c->be, w, sizeof w / sizeof *w);
        n->grec[gs] = n->gserial;
        n->sev[slot] = n->gstart[gs];
        n->eev[slot] = n->gend[gs];
        n->gslot[slot] = gs;
        n->gstep[slot] = n->gserial;
        n->tag[slot] = op->tag;
        n->kind[slot] = op->kind;
        if (n->done == c->issued)
            n->pending_since = now_s();
        c->issued = id;
        if (h)
            *h = id;
        if (replay) /* the graph holds the op: nothing to queue */
            return DDP_OK;
    } else {
        TRY(eager_slot(c, id));
    }
    /* Inside a capture: external records, so the spans are timed at every replay. */
    unsigned rec = gm == GRAPH_CAPTURE ? cudaEventRecordExternal : cudaEventRecordDefault;
    int jrc = after_backend(c, slot, rec);
    if (jrc != DDP_OK)
        return jrc;
    if (op->count > 0 || op->kind == COLL_BARRIER) { /* count 0: a no-op, no rendezvous */
        ncclResult_t r = nccl_issue(c, op);
        if (r == ncclInProgress) {
            TRY(nccl_settle(c, coll_name(op->kind), c->timeout_s));
        } else if (r != ncclSuccess) {
            if (must_stop(c, why)) /* aborted under us: say so, not "invalid usage" */
                return comm_fail(c, "%s", why);
            char name[ERR_LEN];
            return comm_fail(c, "NCCL %s: %s: %s", op_name(name, op->kind, op->tag),
                             ncclGetErrorString(r), nccl_detail(n));
        }
        /* AVG is the sum divided by world, as shm computes it (comm.h). */
        if (op->redop == REDOP_AVG && (op->kind == COLL_ALL_REDUCE || op->kind == COLL_REDUCE))
            CCK(c, kern_div(n->stream, (float)c->world, op->recv, op->count));
    }
    CCK(c, cudaEventRecordWithFlags(n->eev[slot], n->stream, rec));
    if (gm != GRAPH_EAGER)
        return DDP_OK; /* numbered above */
    n->tag[slot] = op->tag;
    n->kind[slot] = op->kind;
    c->issued = id;
    if (h)
        *h = id;
    return DDP_OK;
}

/* Op h's span, when its events have completed and are still its own. */
static void nccl_span(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    nccl_impl_t *n = impl_of(c);
    span->start_s = span->end_s = 0.0; /* "cannot tell" (comm.h) */
    int slot = (int)(h % NCCL_SLOTS);
    graph_sync(c);
    /* a graph op's events are its own until that key's next launch records them again */
    int gs = n->gslot[slot];
    if (h + NCCL_SLOTS <= c->issued || !observable(n, h) ||
        (gs >= 0 && n->grec[gs] != n->gstep[slot]) || cudaSetDevice(n->dev) != cudaSuccess ||
        cudaEventQuery(n->eev[slot]) != cudaSuccess) {
        cudaGetLastError();
        return;
    }
    double t0, t1;
    if (backend_cuda_event_time(c->be, n->sev[slot], &t0) == DDP_OK &&
        backend_cuda_event_time(c->be, n->eev[slot], &t1) == DDP_OK) {
        span->start_s = t0;
        span->end_s = t1;
    }
    cudaGetLastError();
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
    /* Errors and timeouts so far surface here too, not only in host waits. */
    TRY(nccl_check(c));
    graph_mode_t gm = n->gmode; /* nccl_check read it */
    if (gm != GRAPH_EAGER && h > n->waited) {
        /* Inside a graph step: a wait for one of its own ops joins the comm stream back
         * into the capture, as CUDA requires before it ends; an earlier op's cannot be. */
        if (h < n->gfirst)
            return comm_fail(c, "a CUDA graph step waits for a collective launched before it");
        const uint64_t w[] = {0x77616974u, h - n->gfirst};
        if (!backend_graph_note(c->be, w, sizeof w / sizeof *w)) {
            CCK(c, cudaSetDevice(n->dev));
            CCK(c, cudaEventRecord(n->gjoin, n->stream));
            CCK(c, cudaStreamWaitEvent(n->be_stream, n->gjoin, 0));
        }
        n->waited = h;
    } else if (h > n->waited && h + NCCL_SLOTS > c->issued) {
        /* Why: work queued on the backend after this wait (the optimizer) must see the
         * results: the GPU orders it, the host does not wait (the watch bounds it). */
        CCK(c, cudaSetDevice(n->dev));
        CCK(c, cudaStreamWaitEvent(n->be_stream, n->eev[(int)(h % NCCL_SLOTS)], 0));
        n->waited = h; /* the comm stream runs ops in order: all before h too */
    }
    if (span)
        nccl_span(c, h, span);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// whether the collectives can be captured (comm_graph_probe.c)

/* nccl_probe_capture's work: the all-reduce captured on the comm stream, a graph of its own.
 * The capture is always ended, so a refusal leaves nothing capturing. */
static int capture_all_reduce(comm_t *c, float *buf, size_t count, void **graph, char *why)
{
    nccl_impl_t *n = impl_of(c);
    char stop[ERR_LEN], detail[ERR_LEN] = "";
    int rc = DDP_OK;
    CCK(c, cudaStreamBeginCapture(n->stream, cudaStreamCaptureModeThreadLocal));
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = buf, .count = count, .redop = REDOP_SUM};
    ncclResult_t r = nccl_issue(c, &op);
    if (r == ncclInProgress) { /* non-blocking: its enqueue ends before the capture may */
        rc = nccl_settle(c, "all-reduce (captured)", c->timeout_s);
        r = ncclSuccess;
    } else if (r != ncclSuccess) {
        err_set(detail, 0, "%s: %s", ncclGetErrorString(r), nccl_detail(n));
    }
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(n->stream, &g);
    cudaGraphExec_t x = NULL;
    if (rc == DDP_OK && r == ncclSuccess && e == cudaSuccess)
        e = cudaGraphInstantiate(&x, g, 0);
    if (g)
        cudaGraphDestroy(g);
    cudaGetLastError(); /* a refused capture's error is answered below, not sticky */
    if (rc != DDP_OK)
        return rc;
    if (r != ncclSuccess) {
        if (must_stop(c, stop)) /* aborted under us: say so, not "invalid usage" */
            return comm_fail(c, "%s", stop);
        ncclResult_t st = nccl_state(n);
        if (st != ncclSuccess && st != ncclInProgress) /* no eager steps either */
            return comm_fail(c, "NCCL refused to capture an all-reduce (%s) and its communicator "
                             "failed with it: %s", detail, ncclGetErrorString(st));
        err_set(why, 0, "NCCL refused to capture an all-reduce: %s", detail);
        return DDP_OK;
    }
    if (e != cudaSuccess) {
        err_set(why, 0, "CUDA could not make a graph of NCCL's captured all-reduce: %s: %s",
                cudaGetErrorName(e), cudaGetErrorString(e));
        return DDP_OK;
    }
    *graph = x;
    return DDP_OK;
}

/* comm_ops_t.probe_capture: capture_all_reduce, counted in graphs_hold. */
static int nccl_probe_capture(comm_t *c, float *buf, size_t count, void **graph, char *why)
{
    nccl_impl_t *n = impl_of(c);
    *graph = NULL;
    TRY(usable(c));
    CCK(c, cudaSetDevice(n->dev));
    /* From the capture's start until nccl_probe_drop no abort may reach NCCL. */
    atomic_fetch_add(&n->probe_graphs, 1);
    int rc = capture_all_reduce(c, buf, count, graph, why);
    if (!*graph)
        atomic_fetch_sub(&n->probe_graphs, 1);
    return rc;
}

/* comm_ops_t.probe_launch: numbered and watched like an eager op. */
static int nccl_probe_launch(comm_t *c, void *graph, comm_handle_t *h)
{
    nccl_impl_t *n = impl_of(c);
    TRY(usable(c));
    if (graph_sync(c) != GRAPH_EAGER)
        return comm_fail(c, "the CUDA graph probe launched inside a CUDA graph step");
    comm_handle_t id = c->issued + 1;
    int slot = (int)(id % NCCL_SLOTS);
    TRY(eager_slot(c, id));
    TRY(after_backend(c, slot, cudaEventRecordDefault));
    CCK(c, cudaGraphLaunch((cudaGraphExec_t)graph, n->stream));
    CCK(c, cudaEventRecord(n->eev[slot], n->stream));
    n->tag[slot] = "the CUDA graph probe";
    n->kind[slot] = COLL_ALL_REDUCE;
    c->issued = id;
    *h = id;
    return DDP_OK;
}

static void nccl_probe_drop(comm_t *c, void *graph)
{
    if (cudaSetDevice(impl_of(c)->dev) == cudaSuccess)
        cudaGraphExecDestroy((cudaGraphExec_t)graph);
    cudaGetLastError();
    atomic_fetch_sub(&impl_of(c)->probe_graphs, 1); /* an abort may now reach NCCL */
    released(c);
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
    /* Releases NCCL kernels waiting for peers; the owner's next poll sees abort_req. */
    nccl_abort_local(c, false);
}

static void nccl_destroy(comm_t *c)
{
    if (!c)
        return;
    nccl_impl_t *n = impl_of(c);
    if (c->be) { /* the backend outlives us */
        backend_set_watch(c->be, NULL, NULL);
        backend_on_graphs_released(c->be, NULL, NULL);
    }
    if (n) {
        cudaSetDevice(n->dev);
        if (n->nccl && !c->last_error[0] && !atomic_load(&n->abort_req)) {
            /* A clean exit: flush (polled, bounded), then free; a failure here is not the
             * group's (every rank is past its last collective). */
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
        nccl_abort_local(c, true); /* anything left: abort, which never waits for peers */
        if (n->stream && !c->last_error[0])
            cudaStreamSynchronize(n->stream);
        for (int i = 0; i < n->nevents; i++) {
            cudaEventDestroy(n->start[i]);
            cudaEventDestroy(n->end[i]);
        }
        for (int i = 0; i < n->ngevents; i++) {
            cudaEventDestroy(n->gstart[i]);
            cudaEventDestroy(n->gend[i]);
        }
        if (n->gjoin)
            cudaEventDestroy(n->gjoin);
        if (n->ready)
            cudaEventDestroy(n->ready);
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

static const comm_ops_t nccl_ops = {COMM_OPS(nccl, "nccl"),
                                    .probe_capture = nccl_probe_capture,
                                    .probe_launch = nccl_probe_launch,
                                    .probe_drop = nccl_probe_drop};

// ---------------------------------------------------------------------------
// creation

static int nccl_setup_cuda(comm_t *c)
{
    nccl_impl_t *n = impl_of(c);
    CUDACHECK(c->last_error, cudaSetDevice(n->dev));
    CUDACHECK(c->last_error, cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking));
    CUDACHECK(c->last_error, cudaEventCreateWithFlags(&n->ready, cudaEventDisableTiming));
    for (; n->nevents < NCCL_SLOTS; n->nevents++) {
        CUDACHECK(c->last_error, cudaEventCreate(&n->start[n->nevents]));
        cudaError_t e = cudaEventCreate(&n->end[n->nevents]);
        if (e != cudaSuccess) {
            cudaEventDestroy(n->start[n->nevents]);
            CUDACHECK(c->last_error, e);
        }
    }
    /* the graphs' events, made now: nothing is created inside a capture */
    CUDACHECK(c->last_error, cudaEventCreateWithFlags(&n->gjoin, cudaEventDisableTiming));
    for (; n->ngevents < BACKEND_GRAPH_KEYS * NCCL_GRAPH_OPS; n->ngevents++) {
        CUDACHECK(c->last_error, cudaEventCreate(&n->gstart[n->ngevents]));
        cudaError_t e = cudaEventCreate(&n->gend[n->ngevents]);
        if (e != cudaSuccess) {
            cudaEventDestroy(n->gstart[n->ngevents]);
            CUDACHECK(c->last_error, e);
        }
    }
    CUDACHECK(c->last_error, cudaMalloc((void **)&n->scratch, sizeof(float)));
    backend_cuda_account(c->be, (long long)sizeof(float));
    CUDACHECK(c->last_error, cudaMemsetAsync(n->scratch, 0, sizeof(float), n->stream));
    return DDP_OK;
}

static int nccl_join(comm_t *c, char *err)
{
    nccl_impl_t *n = impl_of(c);
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (c->rank == 0) /* on failure the caller aborts the group */
        NCCLCHECK(c->last_error, NULL, ncclGetUniqueId(&id));
    /* Why: rank 0's id must reach every rank before any can join; bounded by the init bound
     * and the abort flag (under mpirun the launcher's MPI_Bcast, bounded the same way). */
    int rc = n->exchange ? n->exchange(n->exchange_ctx, c->rank, &id, sizeof id,
                                       n->init_timeout_s, err)
                         : comm_seg_exchange_id(c->seg, c->rank, &id, sizeof id,
                                                n->init_timeout_s, err);
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
    /* Its own bound: NCCL's rings on eight GPUs take seconds, far beyond a tight --timeout. */
    if ((rc = nccl_settle(c, "init", n->init_timeout_s)) != DDP_OK) {
        if (strstr(c->last_error, "timed out"))
            snprintf(c->last_error, sizeof c->last_error,
                     "NCCL init did not complete within %.0f s (the bound on forming the group "
                     "of %d ranks; rank %d, device %d): a rank never joined",
                     n->init_timeout_s, c->world, c->rank, n->dev);
        return rc;
    }
    /* NCCL's device buffers, charged to this device's peak (the free memory it took). */
    if (mem_known && cudaMemGetInfo(&free_after, &total) == cudaSuccess &&
        free_before > free_after) {
        n->accounted = free_before - free_after;
        backend_cuda_account(c->be, (long long)n->accounted);
    }
    cudaGetLastError();
    return DDP_OK;
}

/* A comm_t for rank a->rank (its NCCL communicator comes later); NULL when out of memory. */
static comm_t *nccl_new(const comm_args_t *a)
{
    comm_t *c = calloc(1, sizeof *c);
    nccl_impl_t *n = calloc(1, sizeof *n);
    if (!c || !n) {
        free(c);
        free(n);
        return NULL;
    }
    pthread_mutex_init(&n->lock, NULL);
    *c = comm_header(&nccl_ops, COMM_NCCL, a, n);
    n->dev = backend_cuda_device(a->be);
    n->be_stream = backend_cuda_stream(a->be);
    n->init_timeout_s = comm_init_bound(c, a->init_timeout_s);
    n->exchange = a->exchange;
    n->exchange_ctx = a->exchange_ctx;
    return c;
}

int comm_nccl_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    if (!a->be || backend_kind(a->be) != BACKEND_CUDA)
        return err_set(err, DDP_ERR_INPUT, "--comm nccl: needs --backend cuda (rank %d is on %s)",
                       a->rank, a->be ? backend_name(a->be) : "no device");
    if (!a->seg && !a->exchange)
        return err_set(err, DDP_ERR_RUNTIME,
                       "--comm nccl: rank %d has neither a shared segment nor an id exchange",
                       a->rank);
    comm_t *c = nccl_new(a);
    if (!c)
        return err_set(err, DDP_ERR_RUNTIME, "rank %d: out of memory for the NCCL comm", a->rank);
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
    /* Every host wait on the rank's device now checks on our collectives. */
    backend_set_watch(a->be, nccl_watch, c);
    backend_on_graphs_released(a->be, released, c);
    *out = c;
    return DDP_OK;
}

int comm_nccl_group_create(comm_t **comms, backend_t *const *bes, int n, double timeout_s,
                           char *err)
{
    int dev[MAX_DEVICES];
    ncclComm_t nc[MAX_DEVICES];
    if (n < 1 || n > MAX_DEVICES)
        return err_set(err, DDP_ERR_RUNTIME, "NCCL group: %d devices", n);
    for (int i = 0; i < n; i++) {
        comms[i] = NULL;
        if (backend_kind(bes[i]) != BACKEND_CUDA)
            return err_set(err, DDP_ERR_INPUT, "NCCL group: device %d is not a CUDA device", i);
        dev[i] = backend_cuda_device(bes[i]);
    }
    /* One call makes every rank of the group; it sets each device current itself. */
    ncclResult_t r = ncclCommInitAll(nc, n, dev);
    if (r != ncclSuccess)
        return err_set(err, DDP_ERR_RUNTIME, "ncclCommInitAll (%d devices): %s: %s", n,
                       ncclGetErrorString(r), ncclGetLastError(NULL));
    int rc = DDP_OK;
    for (int i = 0; i < n; i++) {
        comm_t *c = nccl_new(&(comm_args_t){.world = n, .rank = i, .be = bes[i],
                                            .timeout_s = timeout_s});
        if (!c) {
            ncclCommAbort(nc[i]);
            rc = err_set(err, DDP_ERR_RUNTIME, "out of memory for the NCCL group");
            continue;
        }
        impl_of(c)->nccl = nc[i];
        if (rc == DDP_OK && nccl_setup_cuda(c) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "device %d: %s", dev[i], c->last_error);
        comms[i] = c;
    }
    for (int i = 0; i < n; i++) {
        if (rc != DDP_OK) {
            if (comms[i]) {
                nccl_abort(comms[i], "the NCCL group could not be set up");
                nccl_destroy(comms[i]);
            }
            comms[i] = NULL;
        } else {
            /* No released: one graph (DP's) holds every member's collectives and NCCL's
             * abort of one waits for the others'; each member's destroy carries it out. */
            backend_set_watch(bes[i], nccl_watch, comms[i]);
        }
    }
    return rc;
}
