/* common/comm/comm_local.c: the in-process group's collectives (comm.h's
 * comm_local_group_create: DP's devices, a thread each); how ranks wait is comm_local_sync.c's.
 * Each op is a few posts and waits (comm_local.h): a rank whose buffer others read posts it
 * (on a GPU after an event on its stream); a reader waits for the post and copies or sums out
 * of the poster's buffer on its own device.  Only a sliced move (host memory, COMM_LOCAL_SLICED
 * floats or more) meets as a whole: k threads moving 1/k each of a memory-bound arena. */
#include <stdlib.h>
#include <string.h>

#include "common/comm/comm_local.h"

/* Floats summed per pass: a block of every source and the destination stay in L2, so the
 * destination is read and written once per block instead of once per source. */
#define LOCAL_REDUCE_BLOCK 8192
/* Ops launched and not yet run (a root's early launches run at once). */
#define LOCAL_PENDING 8

typedef struct {
    comm_t c;                        /* first: a comm_t * is a local_t * */
    comm_local_group_t *g;
    comm_t *nccl;                    /* broadcast and reduce over NCCL, or NULL */
    comm_observer_t obs;
    uint64_t expect[MAX_DEVICES];    /* each rank's posts so far, as every rank counts them */
    backend_event_t *ev[LOCAL_EVENTS]; /* not host memory: recorded before each post */
    unsigned long ev_serial;         /* the graph step ev was last used from 0 in */
    int ev_next;
    float *scratch[2];               /* a device reduce's root: two source arenas in turn */
    size_t scratch_n;
    backend_event_t *copied[2], *free_ev;
    bool at_launch;                  /* running an op at its launch, whose posts ... */
    bool wake_due;                   /* ... wake the sleepers at the rank's next call */
    comm_op_t pend[LOCAL_PENDING];   /* launched, not yet run, in order */
    int npend;
    comm_handle_t done;              /* ops run so far */
} local_t;

static local_t *L_of(comm_t *c) { return (local_t *)c; }

static int fail_be(local_t *L, backend_t *be, const char *what)
{
    return err_set(L->c.last_error, DDP_ERR_RUNTIME, "%s: %s", what, backend_last_error(be));
}

static int stopped(local_t *L)
{
    if (atomic_load(&L->g->aborted))
        return err_set(L->c.last_error, DDP_ERR_RUNTIME, "stopped because another device failed");
    return err_set(L->c.last_error, DDP_ERR_RUNTIME,
                   "a peer posted more than %d ops ahead of this rank", LOCAL_RING);
}

static bool host(const local_t *L) { return atomic_load(&L->g->host); }
static int me(const local_t *L) { return L->c.rank; }

// ---------------------------------------------------------------------------
// posting and reading

/* Post this rank's buffer for the op (on a device after an event on its stream). */
static int post(local_t *L, const float *buf, size_t count, size_t offset, bool idle)
{
    local_info_t in = {.buf = buf, .count = count, .offset = offset, .idle = idle, .be = L->c.be};
    if (!host(L)) {
        /* events from 0 again in each CUDA graph step (comm_local.h) */
        unsigned long serial = 0;
        if (backend_graph_state(L->c.be, NULL, &serial) != GRAPH_EAGER && serial != L->ev_serial)
            L->ev_serial = serial, L->ev_next = 0;
        in.ev = L->ev[L->ev_next++ % LOCAL_EVENTS];
        if (backend_event_record(L->c.be, in.ev) != DDP_OK)
            return fail_be(L, L->c.be, "post");
    }
    local_post(L->g, me(L), ++L->expect[me(L)], &in, !L->at_launch);
    L->wake_due |= L->at_launch;
    return DDP_OK;
}

/* Every rank counts an op's posts alike: here every rank's but `except`'s (-1: none) and its
 * own, which post() counted. */
static void counted(local_t *L, int except)
{
    for (int q = 0; q < L->c.world; q++)
        if (q != me(L) && q != except)
            L->expect[q]++;
}

/* Wait for rank q's post in this op (counted first), this rank's device after it; its info.
 * NULL, the cause in last_error, when the group stopped or the device refused the wait. */
static const local_info_t *read_post(local_t *L, int q, bool *slept)
{
    if (local_await(L->g, me(L), q, L->expect[q], NULL, slept) != DDP_OK)
        return stopped(L), NULL;
    const local_info_t *in = local_info(L->g, q, L->expect[q]);
    if (in->ev && backend_stream_wait(L->c.be, in->ev) != DDP_OK)
        return fail_be(L, L->c.be, "wait"), NULL;
    return in;
}

/* Wait for every other rank's post in this op, the device after all of them. */
static int read_all(local_t *L, bool *slept)
{
    int rc = local_await(L->g, me(L), -1, 0, L->expect, slept);
    for (int q = 0; q < L->c.world && rc == DDP_OK; q++) {
        const local_info_t *in = local_info(L->g, q, L->expect[q]);
        if (q != me(L) && in->ev && backend_stream_wait(L->c.be, in->ev) != DDP_OK)
            return fail_be(L, L->c.be, "wait");
    }
    return rc == DDP_OK ? DDP_OK : stopped(L);
}

/* A meeting of the whole group: every rank posts buf, then reads every other's post. */
static int meet(local_t *L, const float *buf, size_t count, bool idle, bool *slept)
{
    TRY(post(L, buf, count, 0, idle));
    counted(L, -1);
    return read_all(L, slept);
}

/* A gather's or reduce's: the others post buf, the root reads them all (*root). */
static int to_root(local_t *L, const comm_op_t *op, const float *buf, size_t count, bool *root,
                   bool *slept)
{
    *root = me(L) == op->root;
    if (!*root)
        TRY(post(L, buf, count, op->kind == COLL_GATHER ? op->offset : 0, op->idle));
    counted(L, op->root);
    return *root ? read_all(L, slept) : DDP_OK;
}

/* The observer: this rank waited (on a device always; on the host when the thread did). */
static void waited(local_t *L, bool slept)
{
    if (L->obs.waited && (slept || !host(L)))
        L->obs.waited(L->obs.ctx);
}

static int mark(local_t *L) { return L->obs.mark ? L->obs.mark(L->obs.ctx) : -1; }

static void moved(local_t *L, int mk, coll_kind_t kind, uint64_t bytes, int peer, int ops)
{
    if (L->obs.moved && mk >= 0)
        L->obs.moved(L->obs.ctx, mk, &(comm_move_t){kind, bytes, peer, ops});
}

/* One copy into this rank's device, seen by the observer. */
static int copy_in(local_t *L, coll_kind_t kind, float *dst, backend_t *src_be, const float *src,
                   size_t floats, int peer, bool spanned)
{
    int mk = spanned ? mark(L) : -1;
    if (backend_peer_copy(L->c.be, dst, src_be, src, floats * sizeof(float)) != DDP_OK)
        return fail_be(L, L->c.be, coll_name(kind));
    moved(L, mk, kind, floats * sizeof(float), peer, 1);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// broadcast, scatter, gather

/* Sliced: every rank copies its slice of the root's arena into every other rank's (a host
 * copy is done when it returns), then all meet again: every replica is whole. */
static int broadcast_sliced(local_t *L, const comm_op_t *op)
{
    bool slept;
    TRY(meet(L, me(L) == op->root && op->send ? op->send : op->recv, op->count, op->idle, &slept));
    waited(L, slept);
    const local_info_t *src = local_info(L->g, op->root, L->expect[op->root]);
    size_t lo, hi;
    comm_local_slice(op->count, L->c.world, me(L), &lo, &hi);
    for (int r = 0; r < L->c.world && hi > lo; r++) {
        const local_info_t *dst = local_info(L->g, r, L->expect[r]);
        if (r == op->root || dst->idle)
            continue;
        int mk = mark(L);
        if (backend_peer_copy(dst->be, (float *)dst->buf + lo, src->be, src->buf + lo,
                              (hi - lo) * sizeof(float)) != DDP_OK)
            return fail_be(L, dst->be, "broadcast");
        moved(L, mk, COLL_BROADCAST, (hi - lo) * sizeof(float), r, 1);
    }
    return meet(L, NULL, 0, false, NULL);
}

/* Broadcast and scatter: the root posts, each receiver reads its part. */
static int from_root(local_t *L, const comm_op_t *op)
{
    if (me(L) == op->root)
        return post(L, op->send ? op->send : op->recv, op->count, 0, false);
    L->expect[op->root]++;
    if (op->idle || op->count == 0)
        return DDP_OK;
    bool slept;
    const local_info_t *src = read_post(L, op->root, &slept);
    if (!src)
        return DDP_ERR_RUNTIME;
    waited(L, slept);
    size_t off = op->kind == COLL_SCATTER ? op->offset : 0;
    return copy_in(L, op->kind, op->recv, src->be, src->buf + off, op->count, me(L), true);
}

/* Gather: the others post their blocks; the root reads every one. */
static int gather(local_t *L, const comm_op_t *op)
{
    bool root, slept;
    TRY(to_root(L, op, op->send, op->count, &root, &slept));
    if (!root)
        return DDP_OK;
    waited(L, slept);
    for (int q = 0; q < L->c.world; q++) {
        const local_info_t *in = local_info(L->g, q, L->expect[q]);
        if (q == me(L) && op->count && op->send != op->recv + op->offset) {
            /* its own block is already here: a copy into place, not a move */
            if (backend_d2d(L->c.be, op->recv + op->offset, op->send,
                            op->count * sizeof(float)) != DDP_OK)
                return fail_be(L, L->c.be, "gather");
        } else if (q != me(L) && in->count) {
            TRY(copy_in(L, COLL_GATHER, op->recv + in->offset, in->be, in->buf, in->count, q,
                        true));
        }
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// reduce

/* Host memory: sum [lo, hi) of every rank's arena onto the root's, in rank order, block by
 * block: ((x0 + x1) + x2) ... however the arena is sliced. */
static int sum_host(local_t *L, const comm_op_t *op, size_t lo, size_t hi)
{
    const comm_local_group_t *g = L->g;
    float *dst = me(L) == op->root ? op->recv
                                   : (float *)local_info(g, op->root, L->expect[op->root])->buf;
    int nsrc = 0;
    for (int s = 0; s < L->c.world; s++)
        nsrc += s != op->root && !local_info(g, s, L->expect[s])->idle;
    if (hi <= lo || nsrc == 0)
        return DDP_OK;
    int mk = mark(L);
    for (size_t b = lo; b < hi; b += LOCAL_REDUCE_BLOCK) {
        size_t len = hi - b < LOCAL_REDUCE_BLOCK ? hi - b : LOCAL_REDUCE_BLOCK;
        for (int s = 0; s < L->c.world; s++) {
            const local_info_t *in = local_info(g, s, L->expect[s]);
            if (s == op->root || in->idle)
                continue; /* sat the whole step out: nothing to add */
            if (backend_axpy(L->c.be, 1.0f, in->buf + b, dst + b, len) != DDP_OK)
                return fail_be(L, L->c.be, "reduce");
        }
    }
    /* One move for this rank's part of every source, counted as nsrc sums. */
    moved(L, mk, COLL_REDUCE, (uint64_t)(hi - lo) * sizeof(float) * nsrc, -1, nsrc);
    return DDP_OK;
}

/* Host memory, sliced: all meet, each sums its slice, the root waits for every slice. */
static int reduce_sliced(local_t *L, const comm_op_t *op)
{
    bool slept, root;
    TRY(meet(L, op->recv, op->count, op->idle, &slept));
    waited(L, slept);
    size_t lo, hi;
    comm_local_slice(op->count, L->c.world, me(L), &lo, &hi);
    TRY(sum_host(L, op, lo, hi));
    comm_op_t done = *op; /* the root reads every slice's "done" */
    done.idle = false;
    return to_root(L, &done, NULL, 0, &root, NULL);
}

/* Not host memory: the root pulls each source's arena on its copy stream
 * into one of two scratch arenas and adds it on its compute stream, so the
 * copy of source j+1 overlaps the add of source j.  Events order the rest:
 * free_ev, recorded on the compute stream before a copy is queued, makes
 * the copy start after everything queued there so far (the waits for the
 * sources' posts, and the add that last read the scratch arena it refills,
 * two sources back); copied[b]: the add of scratch b waits for its copy. */
static int pull(local_t *L, const comm_op_t *op, int j, const local_info_t *in, int *mk)
{
    backend_t *be = L->c.be;
    *mk = mark(L);
    if (backend_event_record(be, L->free_ev) != DDP_OK ||
        backend_copy_async(be, L->scratch[j & 1], in->be, in->buf, op->count * sizeof(float),
                           L->free_ev, L->copied[j & 1]) != DDP_OK)
        return fail_be(L, be, "reduce");
    return DDP_OK;
}

static int reduce_scratch(local_t *L, size_t n)
{
    if (L->scratch_n >= n)
        return DDP_OK;
    backend_t *be = L->c.be;
    for (int i = 0; i < 2; i++) {
        backend_free(be, L->scratch[i]);
        L->scratch[i] = backend_alloc_for(be, n * sizeof(float), MEM_COMM);
        if (!L->scratch[i] || (!L->copied[i] && !(L->copied[i] = backend_event_new(be, false))))
            return fail_be(L, be, "the reduce's buffers");
    }
    if (!L->free_ev && !(L->free_ev = backend_event_new(be, false)))
        return fail_be(L, be, "the reduce's buffers");
    L->scratch_n = n;
    return DDP_OK;
}

static int reduce_device(local_t *L, const comm_op_t *op)
{
    bool root, slept;
    TRY(to_root(L, op, op->recv, op->count, &root, &slept));
    if (!root)
        return DDP_OK;
    waited(L, slept);
    int src[MAX_DEVICES], nsrc = 0, mk[MAX_DEVICES];
    for (int s = 0; s < L->c.world; s++)
        if (s != op->root && !local_info(L->g, s, L->expect[s])->idle)
            src[nsrc++] = s;
    /* made at the first reduce: a run's first step is never a graph's (which allocates not) */
    TRY(reduce_scratch(L, op->count));
    if (nsrc == 0)
        return DDP_OK;
    backend_t *be = L->c.be;
#define SRC(j) local_info(L->g, src[j], L->expect[src[j]])
    if (backend_graph_state(be, NULL, NULL) != GRAPH_EAGER) {
        /* A CUDA graph step (the copy stream is not captured): pulled on the compute stream. */
        for (int j = 0; j < nsrc; j++) {
            int m = mark(L);
            if (backend_peer_copy(be, L->scratch[0], SRC(j)->be, SRC(j)->buf,
                                  op->count * sizeof(float)) != DDP_OK ||
                backend_axpy(be, 1.0f, L->scratch[0], op->recv, op->count) != DDP_OK)
                return fail_be(L, be, "reduce");
            moved(L, m, COLL_REDUCE, op->count * sizeof(float), src[j], 1);
        }
        return DDP_OK;
    }
    for (int j = 0; j < nsrc && j < 2; j++)
        TRY(pull(L, op, j, SRC(j), &mk[j]));
    for (int j = 0; j < nsrc; j++) {
        int b = j & 1;
        if (backend_stream_wait(be, L->copied[b]) != DDP_OK ||
            backend_axpy(be, 1.0f, L->scratch[b], op->recv, op->count) != DDP_OK)
            return fail_be(L, be, "reduce");
        moved(L, mk[j], COLL_REDUCE, op->count * sizeof(float), src[j], 1);
        if (j + 2 < nsrc)
            TRY(pull(L, op, j + 2, SRC(j + 2), &mk[j + 2]));
    }
#undef SRC
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// one op

/* Over NCCL (broadcast, reduce): every rank joins; a rank that sat out adds zeros. */
static int over_nccl(local_t *L, const comm_op_t *op)
{
    comm_t *n = L->nccl;
    if (op->kind == COLL_REDUCE && op->idle &&
        backend_memset0(L->c.be, op->recv, op->count * sizeof(float)) != DDP_OK)
        return fail_be(L, L->c.be, "reduce");
    int mk = me(L) != op->root && (op->kind == COLL_BROADCAST || !op->idle) ? mark(L) : -1;
    comm_handle_t h = 0;
    int rc = n->ops->launch(n, op, &h);
    if (rc == DDP_OK)
        rc = n->ops->wait(n, h, NULL);
    if (rc != DDP_OK)
        return err_set(L->c.last_error, rc, "%s", comm_last_error(n));
    moved(L, mk, op->kind, op->count * sizeof(float), me(L), 1);
    return DDP_OK;
}

/* A barrier that orders the devices' queues too. */
static int barrier(local_t *L)
{
    bool slept;
    TRY(meet(L, NULL, 0, false, &slept));
    waited(L, slept);
    return DDP_OK;
}

static int run_broadcast(local_t *L, const comm_op_t *op)
{
    if (L->nccl)
        return over_nccl(L, op);
    return host(L) && comm_local_sliced(op->count) ? broadcast_sliced(L, op) : from_root(L, op);
}

static int run_reduce(local_t *L, const comm_op_t *op)
{
    if (L->nccl)
        return over_nccl(L, op);
    if (!host(L))
        return reduce_device(L, op);
    if (comm_local_sliced(op->count))
        return reduce_sliced(L, op);
    bool root, slept;
    TRY(to_root(L, op, op->recv, op->count, &root, &slept));
    if (root)
        waited(L, slept);
    return root ? sum_host(L, op, 0, op->count) : DDP_OK;
}

static int run_one(local_t *L, const comm_op_t *op)
{
    switch (op->kind) {
    case COLL_BROADCAST:
        return run_broadcast(L, op);
    case COLL_SCATTER:
        return from_root(L, op);
    case COLL_GATHER:
        return gather(L, op);
    case COLL_REDUCE:
        return run_reduce(L, op);
    case COLL_ALL_REDUCE: { /* the sum onto rank 0, its broadcast, and a meeting: */
        comm_op_t r = *op, b = *op; /* every buffer is the caller's again, as in NCCL */
        r.kind = COLL_REDUCE, b.kind = COLL_BROADCAST, r.root = b.root = 0, b.idle = false;
        TRY(run_reduce(L, &r));
        TRY(run_broadcast(L, &b));
        return barrier(L);
    }
    case COLL_BARRIER:
        return barrier(L);
    default:
        return err_set(L->c.last_error, DDP_ERR_RUNTIME, "%s: not offered by the in-process group",
                       coll_name(op->kind));
    }
}

// ---------------------------------------------------------------------------
// the comm_ops_t

/* Does this rank's part of op need no one's data (it only posts)?  Then it runs at launch. */
static bool posts_only(const local_t *L, const comm_op_t *op)
{
    bool root = me(L) == op->root, whole = !(host(L) && comm_local_sliced(op->count));
    switch (op->kind) {
    case COLL_SCATTER:
        return root;
    case COLL_BROADCAST:
        return root && whole && !L->nccl;
    case COLL_GATHER:
        return !root;
    case COLL_REDUCE:
        return !root && whole && !L->nccl;
    default:
        return false;
    }
}

/* Posts made at launch wake the sleepers at the rank's next call into the group (a waiter
 * spins 30 us first: an early launch is seen long before). */
static void wake_due(local_t *L)
{
    if (L->wake_due)
        local_wake(L->g);
    L->wake_due = false;
}

static int local_run_pending(local_t *L, comm_handle_t h)
{
    wake_due(L);
    while (L->done < h) {
        if (L->c.last_error[0])
            return DDP_ERR_RUNTIME; /* sticky */
        comm_op_t op = L->pend[0];
        memmove(L->pend, L->pend + 1, (size_t)--L->npend * sizeof op);
        TRY(run_one(L, &op));
        L->done++;
    }
    return DDP_OK;
}

/* Whether op may run: the comm has not failed and op is well formed (else last_error). */
static int op_check(local_t *L, const comm_op_t *op)
{
    comm_t *c = &L->c;
    if (c->last_error[0])
        return DDP_ERR_RUNTIME;
    int rc = comm_op_check(c, op, c->last_error);
    if (rc == DDP_OK &&
        (op->dtype != DTYPE_F32 || (op->redop != REDOP_SUM && op->kind != COLL_BROADCAST)))
        rc = err_set(c->last_error, DDP_ERR_RUNTIME,
                     "%s: the in-process group sums float32 alone", coll_name(op->kind));
    return rc;
}

static int local_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    local_t *L = L_of(c);
    TRY(op_check(L, op));
    if (L->npend == 0 && posts_only(L, op)) {
        wake_due(L);
        L->at_launch = true;
        int rc = run_one(L, op);
        L->at_launch = false;
        TRY(rc);
        *h = ++c->issued;
        L->done = c->issued;
        return DDP_OK;
    }
    if (L->npend == LOCAL_PENDING)
        return err_set(c->last_error, DDP_ERR_RUNTIME, "%d ops launched and not waited for",
                       LOCAL_PENDING);
    L->pend[L->npend++] = *op;
    *h = ++c->issued;
    return DDP_OK;
}

static int local_wait(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    if (span) /* the observer times the moves (comm_local_observe) */
        span->start_s = span->end_s = 0.0;
    return local_run_pending(L_of(c), h);
}

static void local_span(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    (void)c, (void)h;
    span->start_s = span->end_s = 0.0;
}

static int local_run(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    local_t *L = L_of(c);
    comm_handle_t mine = 0;
    int rc = DDP_OK;
    if (L->npend == 0 && op_check(L, op) == DDP_OK) { /* nothing queued before it: run it here */
        wake_due(L);
        rc = run_one(L, op);
        mine = L->done = ++c->issued;
    } else {
        rc = local_launch(c, op, &mine);
        if (rc == DDP_OK)
            rc = local_run_pending(L, mine);
    }
    if (h)
        *h = rc == DDP_OK ? mine : 0;
    return rc;
}

static void local_abort(comm_t *c, const char *why)
{
    local_t *L = L_of(c);
    comm_local_group_abort(L->g);
    if (L->nccl)
        L->nccl->ops->abort(L->nccl, why);
}

static void local_destroy(comm_t *c)
{
    local_t *L = L_of(c);
    backend_t *be = c->be;
    if (L->nccl)
        L->nccl->ops->destroy(L->nccl);
    /* what the device may still have queued reads these */
    if (L->scratch[0] || L->ev[0])
        backend_sync(be);
    for (int i = 0; i < 2; i++) {
        backend_free(be, L->scratch[i]);
        backend_event_free(be, L->copied[i]);
    }
    backend_event_free(be, L->free_ev);
    for (int i = 0; i < LOCAL_EVENTS; i++)
        backend_event_free(be, L->ev[i]);
    free(L);
}

static const comm_ops_t local_ops = {COMM_OPS(local, "local"), .run = local_run};

int comm_local_join(comm_t **out, comm_local_group_t *g, int rank, backend_t *be, comm_t *nccl,
                    char *err)
{
    *out = NULL;
    local_t *L = calloc(1, sizeof *L);
    if (!L)
        return err_set(err, DDP_ERR_RUNTIME, "in-process group: out of host memory");
    L->c = (comm_t){.ops = &local_ops, .kind = COMM_LOCAL, .world = g->n, .rank = rank, .be = be};
    L->g = g;
    L->nccl = nccl;
    L->ev_serial = (unsigned long)-1;
    if (!backend_host_visible(be)) {
        atomic_store(&g->host, false);
        for (int i = 0; i < LOCAL_EVENTS; i++)
            if (!(L->ev[i] = backend_event_new(be, false))) {
                L->nccl = NULL; /* still the caller's */
                local_destroy(&L->c);
                return err_set(err, DDP_ERR_RUNTIME, "in-process group: %s",
                               backend_last_error(be));
            }
    }
    *out = &L->c;
    return DDP_OK;
}

void comm_local_observe(comm_t *c, const comm_observer_t *obs) { L_of(c)->obs = *obs; }

void comm_local_prefetch(comm_t *c)
{
    local_t *L = L_of(c);
    for (int q = 0; q < c->world; q++)
        for (uint64_t k = 1; k <= 2 && q != me(L); k++)
            __builtin_prefetch(&L->g->rank[q].slot[(L->expect[q] + k) % LOCAL_RING], 0, 3);
}

/* Boundaries at multiples of a cache line: two ranks never write the same line. */
void comm_local_slice(size_t n, int k, int w, size_t *lo, size_t *hi)
{
    const size_t line = 16; /* floats in a 64-byte cache line */
    size_t lines = (n + line - 1) / line;
    size_t a = lines * (size_t)w / (size_t)k * line;
    size_t b = lines * (size_t)(w + 1) / (size_t)k * line;
    *lo = a < n ? a : n;
    *hi = b < n ? b : n;
}
