/* common/comm/comm_mpi.c: the collectives of comm.h over MPI, for CPU ranks mpirun started
 * (docs/hosts.md).  Built with HAVE_MPI; the launcher (ddp/launch_mpi.c) initialises MPI.  Each
 * rank's collectives run in launch order on its own duplicate of MPI_COMM_WORLD, on a thread
 * (comm_queue.c) that polls MPI_Test: Open MPI moves a collective only inside MPI calls, so that
 * polling is what overlaps backward.  MPI cannot cancel a collective: a timeout is sticky and the
 * launcher ends the job (MPI_Abort).  Open MPI's algorithm depends on size and ranks alone: the
 * same bits on every rank and run, not shm's (docs/modes.md; 16-bit sums: base/half.h). */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <mpi.h>

#include "common/base/clock.h"
#include "common/base/half.h"
#include "common/comm/comm_queue.h"

#define PROBE_TAG 7301
/* How long a timed-out rank waits for its peers to answer its probes. */
#define PROBE_S 0.5

typedef struct {
    comm_t c; /* first: a comm_t * is an mpic_t * */
    comm_queue_t queue;     /* the ops, their thread and the sticky failure */
    MPI_Comm comm;          /* our collectives, in launch order */
    MPI_Comm watch;         /* probes from a rank that timed out */
    bool comms_made;
    bool pending;           /* an op was left posted when the comm failed */
    float *scratch;         /* reduce-scatter in place: MPI's result, then copied */
    size_t scratch_cap;
    MPI_Op sum16[3];        /* [DTYPE_F16], [DTYPE_BF16]: the 16-bit sums */
    bool ops_made;
} mpic_t;

// ---------------------------------------------------------------------------
// the 16-bit sums (user-defined ops: inout[i] = in[i] + inout[i], rounded)

static void sum16(dtype_t t, const uint16_t *a, uint16_t *b, int len)
{
    for (int i = 0; i < len; i++)
        b[i] = dtype16_add(t, a[i], b[i]);
}

static void sum_f16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    sum16(DTYPE_F16, in, inout, *len);
}

static void sum_bf16(void *in, void *inout, int *len, MPI_Datatype *dt)
{
    (void)dt;
    sum16(DTYPE_BF16, in, inout, *len);
}

// ---------------------------------------------------------------------------
// errors

#define fail(m, ...) comm_queue_fail(&(m)->queue, __VA_ARGS__)

/* An MPI call's error code as one line. */
static int mpi_failed(mpic_t *m, int code, const char *call, const comm_op_t *op, uint64_t seq)
{
    char what[160], text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", code);
    comm_op_label(what, sizeof what, op, seq);
    return fail(m, "%s of %s: %s", call, what, text);
}

// ---------------------------------------------------------------------------
// waiting: MPI_Test with a deadline, answering probes meanwhile

/* Receive the probes other ranks sent us (we are waiting in a collective: we have arrived).
 * Matched probes: the comm thread and a run() never take each other's message. */
static void serve_probes(mpic_t *m)
{
    for (;;) {
        int flag = 0;
        MPI_Message msg;
        MPI_Status st;
        if (MPI_Improbe(MPI_ANY_SOURCE, PROBE_TAG, m->watch, &flag, &msg, &st) != MPI_SUCCESS ||
            !flag)
            return;
        unsigned long long seq;
        MPI_Mrecv(&seq, 1, MPI_UNSIGNED_LONG_LONG, &msg, MPI_STATUS_IGNORE);
    }
}

/* Spin for the first 50 us of a wait (a sleep would add to a short collective's exposed
 * time), then test every 20 us, leaving the core to the rank's compute. */
static void poll_pause(double waited_s)
{
    if (waited_s < 50e-6)
        return;
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
}

/* Who has not arrived: the lowest peer that did not answer a probe within PROBE_S, or -1. */
static int find_missing(mpic_t *m, uint64_t seq)
{
    int n = m->c.world, self = m->c.rank;
    MPI_Request rq[MAX_DEVICES];
    unsigned long long v = seq;
    for (int q = 0; q < n; q++) {
        rq[q] = MPI_REQUEST_NULL;
        if (q != self)
            MPI_Issend(&v, 1, MPI_UNSIGNED_LONG_LONG, q, PROBE_TAG, m->watch, &rq[q]);
    }
    double until = now_s() + PROBE_S;
    int missing = -1;
    for (;;) {
        serve_probes(m); /* a peer that timed out too probes us meanwhile */
        missing = -1;
        for (int q = n - 1; q >= 0; q--) {
            int done = 1;
            if (rq[q] != MPI_REQUEST_NULL)
                MPI_Test(&rq[q], &done, MPI_STATUS_IGNORE);
            if (!done)
                missing = q;
        }
        if (missing < 0 || now_s() > until)
            break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    /* Probes still unanswered stay posted: the job is about to end. */
    return missing;
}

/* Wait for request rq of op seq; a failure on an MPI error, an abort, or --timeout. */
static int wait_req(mpic_t *m, MPI_Request *rq, const comm_op_t *op, uint64_t seq)
{
    double t0 = now_s();
    for (;;) {
        int done = 0;
        int code = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS)
            return mpi_failed(m, code, "MPI_Test", op, seq);
        if (done)
            return DDP_OK;
        if (comm_queue_failed(&m->queue)) {
            m->pending = true;
            return DDP_ERR_RUNTIME;
        }
        serve_probes(m);
        double waited = now_s() - t0;
        if (waited > m->c.timeout_s) {
            m->pending = true;
            char what[160];
            comm_op_label(what, sizeof what, op, seq);
            int missing = find_missing(m, seq);
            if (missing >= 0)
                return fail(m, "timed out in %s: rank %d did not arrive within %g s", what,
                            missing, m->c.timeout_s);
            return fail(m, "timed out in %s: a peer did not arrive within %g s", what,
                        m->c.timeout_s);
        }
        poll_pause(waited);
    }
}

// ---------------------------------------------------------------------------
// one collective

static float *scratch(mpic_t *m, size_t count)
{
    if (count > m->scratch_cap) {
        float *p = realloc(m->scratch, count * sizeof(float));
        if (!p)
            return NULL;
        m->scratch = p;
        m->scratch_cap = count;
    }
    return m->scratch;
}

/* Post op, wait for it, finish it (AVG's division, an in-place reduce-scatter's copy). */
static int run_op(comm_t *cm, const comm_op_t *op, uint64_t seq, void *arg, comm_span_t *span)
{
    mpic_t *m = (mpic_t *)cm;
    (void)arg;
    const int r = m->c.rank, n = m->c.world;
    const size_t cnt = op->count;
    float *recv = op->recv;
    const float *send = op->send;
    span->start_s = span->end_s = now_s();
    if (op->kind != COLL_BARRIER && cnt == 0)
        return DDP_OK; /* a no-op: no rendezvous (comm.h) */
    if (cnt > (size_t)INT_MAX) {
        char what[160];
        comm_op_label(what, sizeof what, op, seq);
        return fail(m, "%s: %zu floats is more than MPI's count can hold", what, cnt);
    }
    const int c = (int)cnt;
    MPI_Request rq = MPI_REQUEST_NULL;
    float *copy_to = NULL, *rs_out = NULL;
    int code = MPI_SUCCESS;
    const char *call = "";
    switch (op->kind) {
    case COLL_ALL_REDUCE:
        call = "MPI_Iallreduce";
        if (op->dtype != DTYPE_F32) /* count in 16-bit elements (comm.h) */
            code = MPI_Iallreduce(send && send != recv ? send : MPI_IN_PLACE, recv, c,
                                  MPI_UINT16_T, m->sum16[op->dtype], m->comm, &rq);
        else
            code = MPI_Iallreduce(send && send != recv ? send : MPI_IN_PLACE, recv, c, MPI_FLOAT,
                                  MPI_SUM, m->comm, &rq);
        break;
    case COLL_BROADCAST:
        if (r == op->root && send && send != recv)
            memcpy(recv, send, cnt * sizeof(float));
        call = "MPI_Ibcast";
        code = MPI_Ibcast(recv, c, MPI_FLOAT, op->root, m->comm, &rq);
        break;
    case COLL_REDUCE:
        call = "MPI_Ireduce";
        if (r == op->root)
            code = MPI_Ireduce(send && send != recv ? send : MPI_IN_PLACE, recv, c, MPI_FLOAT,
                               MPI_SUM, op->root, m->comm, &rq);
        else /* recv is not written on the others (comm.h) */
            code = MPI_Ireduce(send ? send : recv, NULL, c, MPI_FLOAT, MPI_SUM, op->root, m->comm,
                               &rq);
        break;
    case COLL_ALL_GATHER:
        call = "MPI_Iallgather";
        if (!send || send == recv + (size_t)r * cnt)
            code = MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, recv, c, MPI_FLOAT, m->comm,
                                  &rq);
        else
            code = MPI_Iallgather(send, c, MPI_FLOAT, recv, c, MPI_FLOAT, m->comm, &rq);
        break;
    case COLL_REDUCE_SCATTER: {
        /* In place our block lies inside the input, which MPI forbids: scratch, then copy. */
        const float *src = send ? send : recv - (size_t)r * cnt;
        bool inside = recv >= src && recv < src + (size_t)n * cnt;
        rs_out = recv;
        if (inside) {
            if (!(rs_out = scratch(m, cnt)))
                return fail(m, "out of memory for a reduce-scatter's result");
            copy_to = recv;
        }
        call = "MPI_Ireduce_scatter_block";
        code = MPI_Ireduce_scatter_block(src, rs_out, c, MPI_FLOAT, MPI_SUM, m->comm, &rq);
        break;
    }
    case COLL_BARRIER:
        call = "MPI_Ibarrier";
        code = MPI_Ibarrier(m->comm, &rq);
        break;
    default:
        return fail(m, "unknown collective %d", (int)op->kind);
    }
    if (code != MPI_SUCCESS)
        return mpi_failed(m, code, call, op, seq);
    int rc = wait_req(m, &rq, op, seq);
    span->end_s = now_s();
    if (rc != DDP_OK)
        return rc;
    if (copy_to)
        memcpy(copy_to, rs_out, cnt * sizeof(float));
    /* AVG is the sum divided by world, element by element (comm.h). */
    bool has_sum = op->kind == COLL_ALL_REDUCE || op->kind == COLL_REDUCE_SCATTER ||
                   (op->kind == COLL_REDUCE && r == op->root);
    if (op->redop == REDOP_AVG && has_sum) {
        float fn = (float)n;
        for (size_t i = 0; i < cnt; i++)
            recv[i] /= fn;
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the table

static int mpic_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    return comm_queue_launch(&((mpic_t *)c)->queue, op, NULL, h);
}

static int mpic_wait(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    return comm_queue_wait(&((mpic_t *)c)->queue, h, span);
}

static void mpic_span(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    comm_queue_span(&((mpic_t *)c)->queue, h, span);
}

static int mpic_run(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    return comm_queue_run(&((mpic_t *)c)->queue, op, h);
}

/* Fail this rank's ops; MPI cannot tell the others: the launcher's MPI_Abort ends the job. */
static void mpic_abort(comm_t *c, const char *why)
{
    fail((mpic_t *)c, "aborted: %s", why ? why : "abort");
}

static void mpic_destroy(comm_t *c)
{
    mpic_t *m = (mpic_t *)c;
    comm_queue_stop(&m->queue);
    /* A collective left posted (a timeout, an abort) keeps its communicator
     * busy: leave both to the job's end rather than free them under it. */
    if (m->comms_made && !m->pending) {
        MPI_Comm_free(&m->comm);
        MPI_Comm_free(&m->watch);
    }
    if (m->ops_made && !m->pending) {
        MPI_Op_free(&m->sum16[DTYPE_F16]);
        MPI_Op_free(&m->sum16[DTYPE_BF16]);
    }
    free(m->scratch);
    free(m);
}

static const comm_ops_t mpi_ops = {COMM_OPS(mpic, "mpi"), .run = mpic_run};

// ---------------------------------------------------------------------------
// creation

/* A duplicate of MPI_COMM_WORLD, bounded by limit_s (MPI_Comm_idup: a missing rank hangs none). */
static int dup_world(MPI_Comm *out, double limit_s, char *err)
{
    MPI_Request rq;
    int code = MPI_Comm_idup(MPI_COMM_WORLD, out, &rq);
    if (code != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "comm mpi: MPI_Comm_idup failed (error %d)", code);
    double deadline = now_s() + limit_s;
    for (;;) {
        int done = 0;
        if ((code = MPI_Test(&rq, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS)
            return err_set(err, DDP_ERR_RUNTIME, "comm mpi: MPI_Comm_idup failed (error %d)",
                           code);
        if (done)
            break;
        if (now_s() > deadline)
            return err_set(err, DDP_ERR_RUNTIME,
                           "comm mpi: the group did not form within %.0f s: a rank never joined",
                           limit_s);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
    /* Errors come back as codes, to be reported with their place. */
    MPI_Comm_set_errhandler(*out, MPI_ERRORS_RETURN);
    return DDP_OK;
}

int comm_mpi_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    int inited = 0, size = 0, rank = -1;
    MPI_Initialized(&inited);
    if (!inited)
        return err_set(err, DDP_ERR_INPUT,
                       "--comm mpi: MPI is not initialised (start the ranks with mpirun)");
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (size != a->world || rank != a->rank || a->world > MAX_DEVICES)
        return err_set(err, DDP_ERR_RUNTIME,
                       "comm mpi: rank %d of %d asked for, MPI has rank %d of %d", a->rank,
                       a->world, rank, size);
    mpic_t *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(err, DDP_ERR_RUNTIME, "comm mpi: out of memory");
    m->c = comm_header(&mpi_ops, COMM_MPI, a, m);
    m->c.seg = NULL;
    double limit = comm_init_bound(&m->c, a->init_timeout_s);
    int rc = dup_world(&m->comm, limit, err);
    if (rc == DDP_OK && (rc = dup_world(&m->watch, limit, err)) != DDP_OK)
        MPI_Comm_free(&m->comm);
    if (rc != DDP_OK) {
        mpic_destroy(&m->c);
        return rc;
    }
    m->comms_made = true;
    /* commutative (IEEE addition is), so Open MPI picks MPI_SUM's algorithms */
    if (MPI_Op_create(sum_f16, 1, &m->sum16[DTYPE_F16]) != MPI_SUCCESS ||
        MPI_Op_create(sum_bf16, 1, &m->sum16[DTYPE_BF16]) != MPI_SUCCESS) {
        mpic_destroy(&m->c);
        return err_set(err, DDP_ERR_RUNTIME, "comm mpi: MPI_Op_create failed");
    }
    m->ops_made = true;
    /* Our 20 us pauses should be 20 us, not the default 50 us of slack. */
    if ((rc = comm_queue_start(&m->queue, &m->c, run_op, 1000UL, err)) != DDP_OK) {
        mpic_destroy(&m->c);
        return rc;
    }
    *out = &m->c;
    return DDP_OK;
}
