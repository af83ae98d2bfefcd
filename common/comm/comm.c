/* common/comm/comm.c: the collectives factory and the convenience forms callers use
 * (see comm.h); the implementations are comm_shm.c, comm_nccl.c, comm_mpi.c
 * and comm_local.c (DP's in-process group, made by comm_local_join). */
#include "common/comm/comm_impl.h"

#include <stdio.h>

bool comm_nccl_available(void)
{
#ifdef HAVE_NCCL
    return true;
#else
    return false;
#endif
}

#ifndef HAVE_NCCL
int comm_nccl_group_create(comm_t **comms, backend_t *const *bes, int n, double timeout_s,
                           char *err)
{
    (void)bes;
    (void)timeout_s;
    for (int i = 0; i < n; i++)
        comms[i] = NULL;
    return err_set(err, DDP_ERR_INPUT, "this ddpbench was built without NCCL");
}
#endif

comm_kind_t comm_resolve(comm_kind_t k, backend_kind_t b)
{
    if (k != COMM_AUTO)
        return k;
    return b == BACKEND_CUDA ? COMM_NCCL : COMM_SHM;
}

int comm_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    if (!a->be)
        return err_set(err, DDP_ERR_RUNTIME, "comm: no backend");
    comm_kind_t k = comm_resolve(a->kind, backend_kind(a->be));
    switch (k) {
    case COMM_SHM:
        return comm_shm_create(out, a, err);
    case COMM_NCCL:
        if (backend_kind(a->be) != BACKEND_CUDA)
            return err_set(err, DDP_ERR_INPUT, "--comm nccl: needs --backend cuda");
#ifdef HAVE_NCCL
        return comm_nccl_create(out, a, err); /* comm_nccl_lib.c: loads the CUDA library */
#else
        return err_set(err, DDP_ERR_INPUT,
                       "--comm nccl: this ddpbench was built without NCCL (use --comm shm)");
#endif
    case COMM_MPI:
        if (backend_kind(a->be) != BACKEND_CPU)
            return err_set(err, DDP_ERR_INPUT, "--comm mpi: for CPU ranks (--backend cpu)");
#ifdef HAVE_MPI
        return comm_mpi_create(out, a, err);
#else
        return err_set(err, DDP_ERR_INPUT,
                       "--comm mpi: this ddpbench was built without MPI (mpi.h was not found)");
#endif
    default:
        break;
    }
    return err_set(err, DDP_ERR_INPUT, "--comm: unknown kind %d", (int)k);
}

// ---------------------------------------------------------------------------
// convenience forms

/* A collective queued for this rank's device (backend_launches), and noted
 * in the group's ledger (comm.h: a few stores to this rank's own lines). */
static void count_coll(comm_t *c, const comm_op_t *op)
{
    if (c->be)
        backend_count_launch(c->be, LAUNCH_COLLECTIVE, 1);
    if (c->seg)
        comm_seg_note(c->seg, c->rank, c->issued + 1, op);
}

int comm_launch(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    count_coll(c, op);
    return c->ops->launch(c, op, h);
}

int comm_wait(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    return c->ops->wait(c, h, span);
}

int comm_wait_all(comm_t *c) { return c->ops->wait(c, c->issued, NULL); }

void comm_span(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    span->start_s = span->end_s = 0.0;
    if (h != 0 && h <= c->issued)
        c->ops->span(c, h, span);
}

int comm_all_reduce_async(comm_t *c, float *buf, size_t count, redop_t op, const char *tag,
                          comm_handle_t *h)
{
    comm_op_t o = {.kind = COLL_ALL_REDUCE, .recv = buf, .count = count, .redop = op, .tag = tag};
    return comm_launch(c, &o, h);
}

int comm_run(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    count_coll(c, op);
    if (c->ops->run)
        return c->ops->run(c, op, h);
    comm_handle_t mine;
    int rc = c->ops->launch(c, op, &mine); /* counted above */
    if (h)
        *h = rc == DDP_OK ? mine : 0;
    return rc == DDP_OK ? c->ops->wait(c, mine, NULL) : rc;
}

int comm_all_reduce(comm_t *c, float *buf, size_t count, redop_t op)
{
    comm_op_t o = {.kind = COLL_ALL_REDUCE, .recv = buf, .count = count, .redop = op};
    return comm_run(c, &o, NULL);
}

int comm_broadcast(comm_t *c, float *buf, size_t count, int root)
{
    comm_op_t o = {.kind = COLL_BROADCAST, .recv = buf, .count = count, .root = root};
    return comm_run(c, &o, NULL);
}

int comm_all_gather(comm_t *c, const float *send, float *recv, size_t count)
{
    comm_op_t o = {.kind = COLL_ALL_GATHER, .send = send, .recv = recv, .count = count};
    return comm_run(c, &o, NULL);
}

int comm_barrier(comm_t *c)
{
    comm_op_t o = {.kind = COLL_BARRIER};
    return comm_run(c, &o, NULL);
}

void comm_abort(comm_t *c, const char *why)
{
    if (c)
        c->ops->abort(c, why);
}

void comm_destroy(comm_t *c)
{
    if (c)
        c->ops->destroy(c);
}

const char *comm_last_error(const comm_t *c)
{
    return c && c->last_error[0] ? c->last_error : "unknown error";
}

int comm_check(const comm_t *c, int rc, const char *place, char *err)
{
    if (rc == DDP_OK)
        return DDP_OK;
    if (place)
        return err_set(err, rc, "%s: %s", place, comm_last_error(c));
    return err_set(err, rc, "%s", comm_last_error(c));
}

int comm_world(const comm_t *c) { return c->world; }
int comm_rank(const comm_t *c) { return c->rank; }
double comm_timeout(const comm_t *c) { return c->timeout_s; }
void comm_set_timeout(comm_t *c, double seconds) { c->timeout_s = seconds; }
