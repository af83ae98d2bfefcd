/* common/comm/comm_impl.h: how a communicator is built, for its implementers and for tests
 * that build fakes; callers use comm.h alone, whose contract every implementation keeps. */
#ifndef DDPBENCH_COMM_IMPL_H
#define DDPBENCH_COMM_IMPL_H

#include "common/comm/comm.h"

#include <stdio.h>

typedef struct comm_ops {
    const char *name; /* "shm", "nccl", "mpi" or "local" */
    /* Queue op; on success *h is its handle (c->issued after the call). */
    int (*launch)(comm_t *c, const comm_op_t *op, comm_handle_t *h);
    /* Wait for op h and every op before it; span (may be NULL) receives op h's
     * timing.  wait(0) returns at once. */
    int (*wait)(comm_t *c, comm_handle_t h, comm_span_t *span);
    /* Op h's timing (comm_span). */
    void (*span)(comm_t *c, comm_handle_t h, comm_span_t *span);
    /* Fail every pending and future op on every rank. */
    void (*abort)(comm_t *c, const char *why);
    /* Stop the comm's threads and free it (pending ops are abandoned). */
    void (*destroy)(comm_t *c);
    /* Launch op and wait for it (comm.h's run); NULL: comm.c calls launch, then wait. */
    int (*run)(comm_t *c, const comm_op_t *op, comm_handle_t *h);
    /* CUDA graphs (comm_graph_probe.c); NULL where collectives cannot be captured.
     * probe_capture: one in-place SUM all-reduce of buf[count] captured into a graph of its
     * own, nothing run; DDP_OK with *graph, or with *graph NULL and why when the library
     * refused (the comm usable); any other status is the comm's failure.  probe_launch:
     * queue it ordered and numbered like a collective; probe_drop forgets it. */
    int (*probe_capture)(comm_t *c, float *buf, size_t count, void **graph, char *why);
    int (*probe_launch)(comm_t *c, void *graph, comm_handle_t *h);
    void (*probe_drop)(comm_t *c, void *graph);
} comm_ops_t;

/* An implementation's table from its functions p_launch, p_wait, p_span, p_abort, p_destroy. */
#define COMM_OPS(p, nm)                                                                        \
    .name = nm, .launch = p##_launch, .wait = p##_wait, .span = p##_span, .abort = p##_abort,  \
    .destroy = p##_destroy

struct comm {
    const comm_ops_t *ops;
    comm_kind_t kind;
    int world, rank;
    double timeout_s;         /* bound on every wait for a peer (the comm thread reads it) */
    backend_t *be;            /* the rank's device; buffers live there */
    comm_seg_t *seg;          /* shared with the other ranks */
    comm_handle_t issued;     /* handle of the last launched op */
    char last_error[ERR_LEN]; /* why the comm failed (sticky) */
    void *impl;
};

/* The implementations, created by comm_create() (comm.c). */
int comm_shm_create(comm_t **out, const comm_args_t *a, char *err);
#ifdef HAVE_NCCL
int comm_nccl_create(comm_t **out, const comm_args_t *a, char *err);
#endif
#ifdef HAVE_MPI
int comm_mpi_create(comm_t **out, const comm_args_t *a, char *err);
#endif

/* A comm_t for rank a->rank of a->world over ops, its timeout defaulted. */
static inline comm_t comm_header(const comm_ops_t *ops, comm_kind_t kind, const comm_args_t *a,
                                 void *impl)
{
    return (comm_t){.ops = ops, .kind = kind, .world = a->world, .rank = a->rank,
                    .timeout_s = a->timeout_s > 0 ? a->timeout_s : DEFAULT_TIMEOUT_S,
                    .be = a->be, .seg = a->seg, .impl = impl};
}

/* The bound on joining the group (comm_args_t.init_timeout_s, defaulted). */
static inline double comm_init_bound(const comm_t *c, double init_timeout_s)
{
    if (init_timeout_s > 0)
        return init_timeout_s;
    return c->timeout_s > COMM_INIT_TIMEOUT_S ? c->timeout_s : COMM_INIT_TIMEOUT_S;
}

/* "all-reduce": how messages name a collective. */
static inline const char *coll_name(coll_kind_t k)
{
    static const char *const names[COLL_COUNT] = {
        "broadcast", "all-reduce", "reduce", "all-gather", "reduce-scatter", "barrier",
        "scatter",   "gather"};
    return (int)k >= 0 && k < COLL_COUNT ? names[k] : "?";
}

/* Whether an op is well formed (msg says why not), and its name in messages ("all-reduce of
 * bucket 2", or "all-reduce #17").  Inline: the implementations must not call comm.c. */
static inline int comm_op_check(const comm_t *c, const comm_op_t *op, char *msg)
{
    if ((int)op->kind < 0 || op->kind >= COLL_COUNT)
        return err_set(msg, DDP_ERR_RUNTIME, "unknown collective %d", (int)op->kind);
    if (op->kind == COLL_BARRIER)
        return DDP_OK;
    if ((op->kind == COLL_SCATTER || op->kind == COLL_GATHER) && c->kind != COMM_LOCAL)
        return err_set(msg, DDP_ERR_RUNTIME, "%s: offered by the in-process group alone",
                       coll_name(op->kind));
    if ((op->kind == COLL_BROADCAST || op->kind == COLL_REDUCE || op->kind == COLL_SCATTER ||
         op->kind == COLL_GATHER) &&
        (op->root < 0 || op->root >= c->world))
        return err_set(msg, DDP_ERR_RUNTIME, "%s: root %d is not a rank of %d", coll_name(op->kind),
                       op->root, c->world);
    if (op->dtype != DTYPE_F32 &&
        (op->kind != COLL_ALL_REDUCE || op->redop != REDOP_SUM || op->count % 2))
        return err_set(msg, DDP_ERR_RUNTIME,
                       "%s: 16-bit floats only in an all-reduce that sums an even count (%zu)",
                       coll_name(op->kind), op->count);
    if ((unsigned)op->dtype > DTYPE_BF16)
        return err_set(msg, DDP_ERR_RUNTIME, "%s: unknown element type %d", coll_name(op->kind),
                       (int)op->dtype);
    if (op->count && !op->recv && op->kind != COLL_SCATTER && op->kind != COLL_GATHER)
        return err_set(msg, DDP_ERR_RUNTIME, "%s: no buffer", coll_name(op->kind));
    return DDP_OK;
}

static inline void comm_op_label(char *buf, size_t n, const comm_op_t *op, uint64_t seq)
{
    if (op->tag)
        snprintf(buf, n, "%s of %s", coll_name(op->kind), op->tag);
    else
        snprintf(buf, n, "%s #%llu", coll_name(op->kind), (unsigned long long)seq);
}

#endif
